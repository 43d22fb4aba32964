//! The life of a served connection: its record, the registry that ends every open connection
//! at shutdown, the logs that write one JSON line per closed connection or per query, and what every carrier
//! shares: the idle and age [`ConnDeadline`], [`guarded`] set-up, the [`Counted`] socket, how a TLS
//! handshake failed and what it negotiated.

use super::Policy;
use dnscost_stats::{Close, ConnectionRecord, Handshake, Record, Side};
use dnscost_transport::socket;
use std::collections::HashMap;
use std::future::Future;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::{mpsc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::oneshot;
use tokio::time::{Instant, Sleep};

/// What one connection did, filled in as it lives.
#[derive(Debug, Clone)]
pub struct Conn {
    pub id: u64,
    pub transport: &'static str,
    pub local: SocketAddr,
    pub peer: SocketAddr,
    pub opened_us: u64,
    pub established_us: Option<u64>,
    /// `none`, `full` or `resumed`.
    pub handshake: Handshake,
    pub tls_version: Option<&'static str>,
    pub queries: u64,
    pub answers: u64,
}

/// Who ended a connection and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The client did: `fin`, `close_notify`, `rst`, `goaway`, `tls_alert` or `error`, with
    /// the error for the last two.
    Client(Close, Option<String>),
    /// The server's policy: `max_queries`, `idle`, `max_age` or `end`.
    Server(Close),
}

impl Ending {
    /// Classifies a read or handshake error.
    pub fn from_io(e: &std::io::Error) -> Ending {
        use std::io::ErrorKind::*;
        match e.kind() {
            ConnectionReset | ConnectionAborted => Ending::Client(Close::Rst, None),
            UnexpectedEof | BrokenPipe => Ending::Client(Close::Fin, None),
            // tokio-rustls reports TLS failures (alerts received or sent) as InvalidData.
            InvalidData => Ending::Client(Close::TlsAlert, Some(e.to_string())),
            _ => Ending::Client(Close::Error, Some(e.to_string())),
        }
    }

    /// How a QUIC connection error reads from the server's side: the client's doing, but for
    /// the idle timeout when the server has an idle policy (its own then).
    pub fn from_quic(e: &quinn::ConnectionError, idle_policy: bool) -> Ending {
        match crate::quic::close_kind(e) {
            Close::IdleExpired if idle_policy => Ending::Server(Close::Idle),
            close @ (Close::TlsAlert | Close::Error) => Ending::Client(close, Some(e.to_string())),
            close => Ending::Client(close, None),
        }
    }

    /// How the client ended a QUIC connection, as the server saw it: from the connection's close
    /// reason when it is closed, else the protocol's `error`.
    pub fn quic_client(connection: &quinn::Connection, error: Option<String>, idle_policy: bool) -> Ending {
        match connection.close_reason() {
            Some(e) => Ending::from_quic(&e, idle_policy),
            None => Ending::Client(Close::Error, error),
        }
    }
}

/// Open connections, so that a shutdown can end each of them.
#[derive(Debug, Default)]
pub struct Registry {
    inner: Mutex<RegistryInner>,
    next_id: AtomicU64,
    live: AtomicU64,
}

#[derive(Debug, Default)]
struct RegistryInner {
    closed: bool,
    /// Signals of the connections not told to end yet.
    open: HashMap<u64, oneshot::Sender<()>>,
}

impl Registry {
    /// A new connection's id, and the signal that tells it to end; `None` once shutting down.
    pub fn register(&self) -> (u64, Option<oneshot::Receiver<()>>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if inner.closed {
            return (id, None);
        }
        let (tx, rx) = oneshot::channel();
        inner.open.insert(id, tx);
        self.live.fetch_add(1, Ordering::AcqRel);
        (id, Some(rx))
    }

    /// Called by a connection once its record is written.
    pub fn unregister(&self, id: u64) {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).open.remove(&id);
        self.live.fetch_sub(1, Ordering::AcqRel);
    }

    /// Refuses new connections and tells every open one to end.
    pub fn close_all(&self) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.closed = true;
        for (_, tx) in inner.open.drain() {
            let _ = tx.send(());
        }
    }

    /// Connections registered and not yet unregistered.
    pub fn live(&self) -> u64 {
        self.live.load(Ordering::Acquire)
    }
}

enum Msg {
    Record(Box<Record>),
    Stop,
}

/// Writes one JSON line per record (a closed connection, a query) from its own thread;
/// flushes at least once a second and at the end.
pub struct RecordLog {
    tx: mpsc::Sender<Msg>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RecordLog {
    pub fn create(path: PathBuf) -> std::io::Result<Self> {
        let file = std::fs::File::create(&path)?;
        let (tx, rx) = mpsc::channel::<Msg>();
        let thread = std::thread::Builder::new().name("record-log".into()).spawn(move || {
            let mut w = std::io::BufWriter::with_capacity(64 * 1024, file);
            let mut dirty = false;
            let mut last_flush = std::time::Instant::now();
            let mut failed = false;
            let report = |e: std::io::Error, failed: &mut bool| {
                if !*failed {
                    eprintln!("dnscost-engine: {}: {e}", path.display());
                    *failed = true;
                }
            };
            loop {
                let wait = Duration::from_secs(1).saturating_sub(last_flush.elapsed());
                match rx.recv_timeout(wait) {
                    Ok(Msg::Record(r)) => {
                        let line = serde_json::to_vec(&*r).expect("records serialise");
                        if let Err(e) = w.write_all(&line).and_then(|_| w.write_all(b"\n")) {
                            report(e, &mut failed);
                        }
                        dirty = true;
                    }
                    Ok(Msg::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                }
                if dirty && last_flush.elapsed() >= Duration::from_secs(1) {
                    if let Err(e) = w.flush() {
                        report(e, &mut failed);
                    }
                    dirty = false;
                    last_flush = std::time::Instant::now();
                } else if !dirty {
                    last_flush = std::time::Instant::now();
                }
            }
            if let Err(e) = w.flush() {
                report(e, &mut failed);
            }
        })?;
        Ok(Self { tx, thread: Some(thread) })
    }

    /// A handle for connections to send their records through.
    pub fn sender(&self) -> LogSender {
        LogSender(self.tx.clone())
    }

    /// Writes what was sent and flushes.
    pub fn finish(mut self) {
        let _ = self.tx.send(Msg::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Sends records to the [`RecordLog`] thread.
#[derive(Clone)]
pub struct LogSender(mpsc::Sender<Msg>);

impl LogSender {
    pub fn write(&self, r: Record) {
        let _ = self.0.send(Msg::Record(Box::new(r)));
    }
}

impl Conn {
    /// Where this connection's queries come from, for the queries log.
    pub fn origin(&self) -> super::Origin {
        super::Origin { transport: self.transport, connection: Some(self.id), peer: self.peer }
    }

    /// The record of this connection, closed at `closed_us` with `bytes` (sent, received).
    pub fn record(&self, ending: Ending, closed_us: u64, bytes: (u64, u64)) -> ConnectionRecord {
        let (closed_by, close, error) = match ending {
            Ending::Client(how, error) => (Side::Client, how, error),
            Ending::Server(why) => (Side::Server, why, None),
        };
        ConnectionRecord {
            role: Side::Server,
            transport: self.transport.into(),
            id: self.id,
            local_address: self.local.to_string(),
            peer_address: self.peer.to_string(),
            opened_us: self.opened_us,
            established_us: self.established_us,
            closed_us,
            handshake: self.handshake,
            tls_version: self.tls_version.map(Into::into),
            queries: self.queries,
            answers: self.answers,
            bytes_sent: bytes.0,
            bytes_received: bytes.1,
            closed_by,
            close,
            error,
        }
    }
}

/// How long a connection the server closes may take to close from the client's side.
pub const LINGER: std::time::Duration = std::time::Duration::from_secs(1);

/// A failed TLS handshake: what the client did, with the error always set.
pub fn handshake_failure(e: &std::io::Error) -> Ending {
    match Ending::from_io(e) {
        Ending::Client(how, None) => Ending::Client(how, Some(format!("TLS handshake: {e}"))),
        other => other,
    }
}

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
    pub fn get(&self) -> (u64, u64) {
        (self.sent.load(Ordering::Acquire), self.received.load(Ordering::Acquire))
    }

    fn last_read(&self) -> Instant {
        self.base + Duration::from_micros(self.last_read_us.load(Ordering::Acquire))
    }
}

/// A TCP stream that reads TCP_INFO into its [`Tally`] when dropped, whoever drops it, and
/// with `stamp_reads` notes the time of every read that returns octets.
pub(crate) struct Counted {
    inner: tokio::net::TcpStream,
    tally: Arc<Tally>,
    stamp_reads: bool,
}

impl Counted {
    pub fn new(inner: tokio::net::TcpStream, stamp_reads: bool) -> (Self, Arc<Tally>) {
        let tally = Arc::new(Tally {
            sent: AtomicU64::new(0),
            received: AtomicU64::new(0),
            base: Instant::now(),
            last_read_us: AtomicU64::new(0),
        });
        (Counted { inner, tally: tally.clone(), stamp_reads }, tally)
    }
}

/// An accepted TCP connection's counted stream, its tally and its policy timer (which counts
/// any octet read as activity when the policy says so).
pub(crate) fn watched(
    policy: &Policy,
    sock: tokio::net::TcpStream,
    opened: Instant,
) -> (Counted, Arc<Tally>, ConnDeadline) {
    let (s, tally) = Counted::new(sock, policy.idle_on_bytes);
    let mut timer = ConnDeadline::new(policy, opened);
    if policy.idle_on_bytes {
        timer.count_reads(tally.clone());
    }
    (s, tally, timer)
}

impl Drop for Counted {
    fn drop(&mut self) {
        if let Some(c) = socket::tcp_counts(&self.inner) {
            self.tally.sent.store(c.bytes_sent, Ordering::Release);
            self.tally.received.store(c.bytes_received, Ordering::Release);
        }
    }
}

impl AsyncRead for Counted {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        if this.stamp_reads && buf.filled().len() > before {
            let us = this.tally.base.elapsed().as_micros() as u64;
            this.tally.last_read_us.store(us, Ordering::Release);
        }
        r
    }
}

impl AsyncWrite for Counted {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// The TLS handshake of an accepted connection, bounded by the server's stop and the
/// connection's policy; on failure the connection's record is written and None returned.
pub(crate) async fn accept_tls(
    shared: &super::Shared,
    conn: &mut Conn,
    (s, tally): (Counted, &Tally),
    config: Arc<rustls::ServerConfig>,
    stop: &mut oneshot::Receiver<()>,
    timer: &mut ConnDeadline,
) -> Option<tokio_rustls::server::TlsStream<Counted>> {
    // Boxed so that dropping it closes the socket (and reads its counts) before the record.
    let mut accept = Box::pin(tokio_rustls::TlsAcceptor::from(config).accept(s));
    let ending = match guarded(accept.as_mut(), stop, timer).await {
        Ok(Ok(tls)) => {
            conn.established_us = Some(shared.now_us());
            let (resumed, version) = dnscost_transport::tls::handshake_facts(tls.get_ref().1);
            conn.handshake = if resumed { Handshake::Resumed } else { Handshake::Full };
            conn.tls_version = version;
            return Some(tls);
        }
        Ok(Err(e)) => handshake_failure(&e),
        Err(ending) => ending,
    };
    drop(accept);
    shared.closed(conn, ending, tally.get(), true);
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_ends_open_connections_and_refuses_new_ones() {
        let r = Registry::default();
        let (a, rx_a) = r.register();
        let (b, rx_b) = r.register();
        assert_ne!(a, b);
        let (mut rx_a, mut rx_b) = (rx_a.unwrap(), rx_b.unwrap());
        r.unregister(b);
        assert_eq!(r.live(), 1);
        r.close_all();
        assert!(rx_a.try_recv().is_ok());
        assert!(rx_b.try_recv().is_err());
        assert!(r.register().1.is_none());
    }

    #[test]
    fn log_writes_one_line_per_connection() {
        let path = std::env::temp_dir().join(format!("dnscost-serve-log-{}.jsonl", std::process::id()));
        let log = RecordLog::create(path.clone()).unwrap();
        let conn = Conn {
            id: 3,
            transport: "dot",
            local: "127.0.0.1:853".parse().unwrap(),
            peer: "127.0.0.1:40000".parse().unwrap(),
            opened_us: 10,
            established_us: Some(20),
            handshake: Handshake::Resumed,
            tls_version: Some("1.3"),
            queries: 5,
            answers: 5,
        };
        let tx = log.sender();
        tx.write(Record::Connection(conn.record(Ending::Client(Close::CloseNotify, None), 30, (100, 200))));
        tx.write(Record::Connection(conn.record(Ending::Server(Close::Idle), 40, (0, 0))));
        log.finish();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["type"], "connection");
        assert_eq!(lines[0]["role"], "server");
        assert_eq!(lines[0]["closed_by"], "client");
        assert_eq!(lines[0]["close"], "close_notify");
        assert_eq!(lines[0]["handshake"], "resumed");
        assert_eq!(lines[0]["bytes_sent"], 100);
        assert_eq!(lines[1]["closed_by"], "server");
        assert_eq!(lines[1]["close"], "idle");
        assert!(serde_json::from_str::<Record>(text.lines().next().unwrap()).is_ok());
    }
}
