//! What every connection session shares, whatever its protocol: the record of what a
//! connection did ([`ConnInfo`], [`TcpMeter`]), how it ended ([`SessionEnd`], [`server_close`]),
//! and writes bounded by a deadline and an abort ([`write_bounded`]). A leaf: the slot
//! lifecycle (`slot.rs`) and the sessions (`tcp.rs`, `doh.rs`) build on it.

use super::ctx::{Ctx, Stop};
use dnscost_load::PolicyClose;
use dnscost_stats::{Close, Counters, ErrorKind};
use dnscost_transport::socket::{self, TcpCounts};
use std::os::fd::{BorrowedFd, RawFd};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

pub type TlsStream = tokio_rustls::client::TlsStream<TcpStream>;

/// What one connection did, for the connections log.
pub struct ConnInfo {
    pub queries: u64,
    pub answers: u64,
    pub meter: TcpMeter,
}

/// How a session ended.
pub struct SessionEnd {
    pub close: Close,
    pub error: Option<String>,
}

impl SessionEnd {
    pub fn client(close: Close) -> Self {
        SessionEnd { close, error: None }
    }
}

impl From<PolicyClose> for SessionEnd {
    fn from(p: PolicyClose) -> Self {
        SessionEnd::client(match p {
            PolicyClose::Lifetime => Close::Lifetime,
            PolicyClose::Idle => Close::Idle,
        })
    }
}

/// Kernel byte and segment counts of one connection, added to the thread's counters at most
/// once a second and at close.
pub struct TcpMeter {
    fd: RawFd,
    last: TcpCounts,
    next_ns: u64,
    pub total: TcpCounts,
}

impl TcpMeter {
    /// A meter whose first reading is a second after `now` (a shorter connection is read at
    /// its close only).
    pub fn new(fd: RawFd, now: u64) -> Self {
        TcpMeter { fd, last: TcpCounts::default(), next_ns: now + 1_000_000_000, total: TcpCounts::default() }
    }

    #[inline]
    pub fn tick(&mut self, now: u64, c: &mut Counters) {
        if now >= self.next_ns {
            self.next_ns = now + 1_000_000_000;
            self.sample(c);
        }
    }

    /// Reads TCP_INFO now. The descriptor must still be open.
    pub fn sample(&mut self, c: &mut Counters) {
        // SAFETY: the owner of the socket outlives every call (sessions sample before closing).
        let fd = unsafe { BorrowedFd::borrow_raw(self.fd) };
        if let Some(now) = socket::tcp_counts(&fd) {
            let d = now.since(&self.last);
            self.last = now;
            self.total = now;
            c.bytes_sent += d.bytes_sent;
            c.bytes_received += d.bytes_received;
            c.packets_sent += d.segments_sent;
            c.packets_received += d.segments_received;
        }
    }
}

/// Closes seen from reading: what the server did.
pub fn server_close(e: Option<&std::io::Error>, tls: bool) -> Close {
    use std::io::ErrorKind as K;
    match e {
        // tokio-rustls reports a close_notify as the end of the stream.
        None if tls => Close::CloseNotify,
        None => Close::Fin,
        Some(e) if e.kind() == K::UnexpectedEof => Close::Fin,
        Some(e) if e.kind() == K::ConnectionReset || e.kind() == K::BrokenPipe => Close::Rst,
        Some(e) if e.kind() == K::InvalidData => Close::TlsAlert,
        Some(_) => Close::Error,
    }
}

/// Returns once the run is aborted (a second signal, or the drain's safety net).
pub async fn aborted(ctx: &Ctx, stop: &mut tokio::sync::watch::Receiver<Stop>) {
    while ctx.state(stop) != Stop::Abort {
        if stop.changed().await.is_err() {
            return;
        }
    }
}

/// How a bounded write ended.
pub enum Written {
    Done,
    Failed(std::io::Error),
    /// The deadline passed first: the server is not reading.
    TimedOut,
    /// The run was aborted first.
    Aborted,
}

/// Writes and flushes `out`, but never past run time `deadline` (the oldest outstanding
/// query's timeout) nor past an abort: a server that stops reading must not hold the slot, and
/// so the run, beyond its timeout.
pub async fn write_bounded<S: AsyncWrite + Unpin>(
    ctx: &Ctx,
    io: &mut S,
    out: &[u8],
    stop: &mut tokio::sync::watch::Receiver<Stop>,
    deadline: u64,
) -> Written {
    let write = async {
        io.write_all(out).await?;
        io.flush().await
    };
    tokio::pin!(write);
    tokio::select! {
        biased;
        r = &mut write => match r {
            Ok(()) => Written::Done,
            Err(e) => Written::Failed(e),
        },
        _ = ctx.sleep_until(deadline) => Written::TimedOut,
        _ = aborted(ctx, stop) => Written::Aborted,
    }
}

/// What a write that timed out means for the connection's outstanding queries: those past
/// their timeout timed out, the others are lost with the connection.
pub fn write_timed_out(ctx: &Ctx, timed_out: u64, lost: u64) -> SessionEnd {
    let message = "write timed out: the server is not reading";
    {
        let mut c = ctx.counters.borrow_mut();
        c.timed_out += timed_out;
    }
    ctx.sub_in_flight(timed_out);
    ctx.lose(ErrorKind::ConnectionLost, lost);
    ctx.plan.note_error(ErrorKind::ConnectionLost, message);
    SessionEnd { close: Close::Error, error: Some(message.into()) }
}
