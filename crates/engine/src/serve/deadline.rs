//! When the server's policy ends a connection: the idle and age [`ConnDeadline`], one timer
//! per connection (with `--idle-activity bytes`, any octet read counts, as the connection's
//! [`Tally`] notes it), and [`guarded`], which bounds any step of a connection by it and by the
//! server's shutdown.

use super::record::Ending;
use super::shared::Policy;
use dnscost_stats::Close;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::{Instant, Sleep};

/// Deadlines of the idle and max-age policies, with one timer per connection that is only
/// re-armed when it fires (queries just note their time).
pub(crate) struct ConnDeadline {
    idle: Option<Duration>,
    max_age: Option<Duration>,
    opened: Instant,
    last: Instant,
    /// With the policy `idle_on_bytes`: the connection's tally, whose last read counts too.
    reads: Option<Arc<Tally>>,
    sleep: Option<Pin<Box<Sleep>>>,
}

impl ConnDeadline {
    pub fn new(policy: &Policy, opened: Instant) -> Self {
        let mut t =
            ConnDeadline { idle: policy.idle, max_age: policy.max_age, opened, last: opened, reads: None, sleep: None };
        if let Some(at) = t.next() {
            t.sleep = Some(Box::pin(tokio::time::sleep_until(at)));
        }
        t
    }

    fn next(&self) -> Option<Instant> {
        let idle = self.idle.map(|d| self.last + d);
        let age = self.max_age.map(|d| self.opened + d);
        match (idle, age) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Notes activity (a query) at `now`.
    pub fn touch(&mut self, now: Instant) {
        self.last = now;
    }

    /// Counts any octet read on the connection of `tally` as activity too (from `Counted`
    /// streams made with `stamp_reads`).
    pub fn count_reads(&mut self, tally: Arc<Tally>) {
        self.reads = Some(tally);
    }

    fn last_activity(last: Instant, reads: Option<&Tally>) -> Instant {
        reads.map_or(last, |t| last.max(t.last_read()))
    }

    /// Resolves with `max_age` or `idle` when a policy says to close; never without policies.
    pub async fn expired(&mut self) -> Close {
        let Some(sleep) = self.sleep.as_mut() else {
            return std::future::pending().await;
        };
        loop {
            sleep.as_mut().await;
            let now = Instant::now();
            if self.max_age.is_some_and(|d| now >= self.opened + d) {
                return Close::MaxAge;
            }
            let last = Self::last_activity(self.last, self.reads.as_deref());
            if self.idle.is_some_and(|d| now >= last + d) {
                return Close::Idle;
            }
            let idle = self.idle.map(|d| last + d);
            let age = self.max_age.map(|d| self.opened + d);
            let next = idle.into_iter().chain(age).min().unwrap_or(now);
            sleep.as_mut().reset(next);
        }
    }
}

/// Polls `fut` until it completes, the server shuts down, or a policy closes the connection.
pub(crate) async fn guarded<F: Future>(
    mut fut: Pin<&mut F>,
    stop: &mut oneshot::Receiver<()>,
    timer: &mut ConnDeadline,
) -> Result<F::Output, Ending> {
    tokio::select! {
        biased;
        _ = stop => Err(Ending::Server(Close::End)),
        why = timer.expired() => Err(Ending::Server(why)),
        out = fut.as_mut() => Ok(out),
    }
}

/// Bytes the kernel counted for a TCP connection, read just before its socket closes; and,
/// when asked, when the connection last read any octet.
#[derive(Debug)]
pub(crate) struct Tally {
    sent: AtomicU64,
    received: AtomicU64,
    base: Instant,
    /// Microseconds after `base` of the last read that returned octets.
    last_read_us: AtomicU64,
}

impl Tally {
    pub(super) fn new() -> Self {
        Tally {
            sent: AtomicU64::new(0),
            received: AtomicU64::new(0),
            base: Instant::now(),
            last_read_us: AtomicU64::new(0),
        }
    }

    /// The kernel's counts (sent, received), as the socket closes.
    pub(super) fn set_counts(&self, sent: u64, received: u64) {
        self.sent.store(sent, Ordering::Release);
        self.received.store(received, Ordering::Release);
    }

    /// A read returned octets now.
    pub(super) fn note_read(&self) {
        let us = self.base.elapsed().as_micros() as u64;
        self.last_read_us.store(us, Ordering::Release);
    }

    pub fn get(&self) -> (u64, u64) {
        (self.sent.load(Ordering::Acquire), self.received.load(Ordering::Acquire))
    }

    fn last_read(&self) -> Instant {
        self.base + Duration::from_micros(self.last_read_us.load(Ordering::Acquire))
    }
}
