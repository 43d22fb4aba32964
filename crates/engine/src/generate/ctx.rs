//! What the tasks of one generator thread share: the resolved plan, the thread's counters and
//! gauges, the stop signal, the open-rate bucket and the TLS connectors.

use dnscost_load::{EngineConfig, Pacer, QuerySet, TokenBucket};
use dnscost_stats::{ConnectionRecord, Counters, ErrorKind};
use std::cell::{Cell, RefCell};
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::watch;
use tokio_rustls::TlsConnector;

/// What the main thread asks of the generator threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Send on schedule.
    Running,
    /// Send nothing new; wait for outstanding queries (at most the timeout); close.
    Drain,
    /// Count outstanding queries as aborted and close now.
    Abort,
}

/// The run, resolved once and shared by every thread.
pub struct Plan {
    pub config: EngineConfig,
    pub target: SocketAddr,
    pub queries: QuerySet,
    pub sources: Vec<IpAddr>,
    pub tls: Option<dnscost_transport::tls::ClientOptions>,
    pub server_name: Option<rustls::pki_types::ServerName<'static>>,
    /// DoH request templates, built once: one for POST (the query is the body), one per query
    /// of the set for GET (the query is in the path).
    pub doh: Vec<dnscost_transport::http2::RequestTemplate>,
    pub start: Instant,
    pub timeout_ns: u64,
    /// With `open_first`: the slots whose first connection is not settled yet.
    pub gate: Option<Gate>,
}

/// Holds queries back until every slot's first connection is settled (established or failed),
/// across threads.
pub struct Gate {
    pending: std::sync::atomic::AtomicU64,
    open: tokio::sync::Notify,
}

impl Gate {
    pub fn new(slots: u64) -> Self {
        Gate { pending: slots.into(), open: tokio::sync::Notify::new() }
    }

    /// One slot's first connection is settled.
    pub fn arrive(&self) {
        if self.pending.fetch_sub(1, std::sync::atomic::Ordering::AcqRel) == 1 {
            self.open.notify_waiters();
        }
    }

    fn is_open(&self) -> bool {
        self.pending.load(std::sync::atomic::Ordering::Acquire) == 0
    }

    /// Waits until every slot has arrived, the run time `deadline_ns` passes or the run stops.
    pub async fn wait(&self, ctx: &Ctx, stop: &mut watch::Receiver<Stop>, deadline_ns: u64) {
        loop {
            let opened = self.open.notified();
            tokio::pin!(opened);
            opened.as_mut().enable();
            if self.is_open() || ctx.now() >= deadline_ns || *stop.borrow_and_update() != Stop::Running {
                return;
            }
            tokio::select! {
                _ = opened => {}
                _ = ctx.sleep_until(deadline_ns.min(ctx.now() + 100_000_000)) => {}
                r = stop.changed() => { if r.is_err() { return; } }
            }
        }
    }
}

/// TLS client configurations of one thread: with a session store, and without.
pub struct Connectors {
    pub resume: TlsConnector,
    pub fresh: TlsConnector,
}

/// One generator thread's shared state. Not `Send`: every task of the thread runs on its own
/// single-threaded runtime.
pub struct Ctx {
    pub plan: Arc<Plan>,
    pub counters: RefCell<Counters>,
    pub in_flight: Cell<u64>,
    pub active: Cell<u64>,
    pub stop: watch::Receiver<Stop>,
    pub bucket: Option<RefCell<TokenBucket>>,
    pub connectors: Option<Connectors>,
    pub log: Option<std::sync::mpsc::Sender<ConnectionRecord>>,
    pub timer: Rc<super::timer::Timer>,
    pub thread: u64,
    pub threads: u64,
    next_conn: Cell<u64>,
    cursor: Cell<u64>,
}

impl Ctx {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        plan: Arc<Plan>,
        thread: u64,
        threads: u64,
        stop: watch::Receiver<Stop>,
        bucket: Option<TokenBucket>,
        connectors: Option<Connectors>,
        log: Option<std::sync::mpsc::Sender<ConnectionRecord>>,
        timer: Rc<super::timer::Timer>,
    ) -> Self {
        let spread = plan.queries.len() as u64 / threads.max(1);
        Ctx {
            plan,
            counters: RefCell::new(Counters::default()),
            in_flight: Cell::new(0),
            active: Cell::new(0),
            stop,
            bucket: bucket.map(RefCell::new),
            connectors,
            log,
            timer,
            thread,
            threads,
            next_conn: Cell::new(0),
            cursor: Cell::new(thread * spread),
        }
    }

    /// Nanoseconds since the start of the run.
    #[inline]
    pub fn now(&self) -> u64 {
        self.plan.start.elapsed().as_nanos() as u64
    }

    /// The tokio instant of run time `ns`.
    #[inline]
    pub fn instant(&self, ns: u64) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.plan.start + std::time::Duration::from_nanos(ns.min(u64::MAX / 4)))
    }

    /// Waits until run time `ns` with microsecond precision (`u64::MAX`: never).
    #[inline]
    pub fn sleep_until(&self, ns: u64) -> super::timer::Sleep {
        self.timer.sleep_until(ns)
    }

    /// Index of the query [`Ctx::next_query`] returns next.
    #[inline]
    pub fn peek_query(&self) -> u64 {
        self.cursor.get()
    }

    /// Index of the next query to send from this thread.
    #[inline]
    pub fn next_query(&self) -> u64 {
        let i = self.cursor.get();
        self.cursor.set(i.wrapping_add(1));
        i
    }

    /// A connection number unique in the run.
    pub fn conn_id(&self) -> u64 {
        let n = self.next_conn.get();
        self.next_conn.set(n + 1);
        n * self.threads + self.thread
    }

    #[inline]
    pub fn add_in_flight(&self, n: u64) {
        self.in_flight.set(self.in_flight.get() + n);
    }

    #[inline]
    pub fn sub_in_flight(&self, n: u64) {
        self.in_flight.set(self.in_flight.get().saturating_sub(n));
    }

    /// Counts `n` outstanding queries as failed with `kind`.
    pub fn lose(&self, kind: ErrorKind, n: u64) {
        if n > 0 {
            self.counters.borrow_mut().fail(kind, n);
            self.sub_in_flight(n);
        }
    }

    pub fn write_log(&self, record: ConnectionRecord) {
        if let Some(log) = &self.log {
            let _ = log.send(record);
        }
    }
}

/// When one slot's queries are due: on its pacer's schedule (open loop) or whenever the window
/// has room (closed loop), and never at or after the end of the sending period. Knowing the end
/// here, rather than waiting for the main thread's signal, keeps the last instant race-free.
pub struct Schedule {
    pacer: Option<Pacer>,
    end_ns: u64,
}

impl Schedule {
    pub fn new(pacer: Option<Pacer>, end_ns: u64) -> Self {
        Schedule { pacer, end_ns }
    }

    /// When the next query is due (now, in a closed loop); None once sending has ended.
    #[inline]
    pub fn next_due(&self, now: u64) -> Option<u64> {
        let t = self.pacer.as_ref().map_or(now, Pacer::next);
        (t < self.end_ns && now < self.end_ns).then_some(t)
    }

    #[inline]
    pub fn due(&self, now: u64) -> bool {
        self.next_due(now).is_some_and(|t| t <= now)
    }

    /// Takes the next query's intended time and counts it as offered.
    #[inline]
    pub fn take(&mut self, now: u64, c: &mut Counters) -> u64 {
        c.offered += 1;
        self.pacer.as_mut().map_or(now, Pacer::take)
    }

    /// Queries that came due but could not be sent within the timeout (no connection, full
    /// window) are offered and failed as `unsent`, so the schedule never hides them.
    pub fn expire_unsent(&mut self, now: u64, timeout_ns: u64, c: &mut Counters) {
        if let Some(p) = &mut self.pacer {
            while p.next() + timeout_ns <= now && p.next() < self.end_ns {
                p.take();
                c.offered += 1;
                c.fail(ErrorKind::Unsent, 1);
            }
        }
    }
}
