//! Connection slots for tcp, dot and doh: open (within the open-rate budget, resuming TLS for
//! the configured share), run a session until the lifetime policy, the server or the run ends
//! it, close as configured, log, and open again. The tcp/dot session lives here too.

use super::ctx::{Ctx, Schedule, Stop};
use super::window::Window;
use dnscost_load::{CloseMode, ConnPolicy, PolicyClose, Rng, Transport};
use dnscost_stats::{Close, ConnectionRecord, Counters, ErrorKind};
use dnscost_transport::socket::{self, TcpCounts};
use dnscost_wire::{parse_response, FrameDecoder};
use std::net::IpAddr;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::rc::Rc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

pub type TlsStream = tokio_rustls::client::TlsStream<TcpStream>;

/// An established connection.
pub enum Conn {
    Tcp(TcpStream),
    Tls(Box<TlsStream>),
}

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
    pub fn new(fd: RawFd, now: u64) -> Self {
        TcpMeter { fd, last: TcpCounts::default(), next_ns: now, total: TcpCounts::default() }
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

fn classify(e: &std::io::Error) -> ErrorKind {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::ConnectionRefused => ErrorKind::Refused,
        K::TimedOut => ErrorKind::ConnectTimeout,
        K::InvalidData => ErrorKind::Tls,
        _ if e.get_ref().is_some_and(|i| i.is::<rustls::Error>()) => ErrorKind::Tls,
        _ => ErrorKind::Connect,
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

async fn connect(
    ctx: &Ctx,
    source: Option<IpAddr>,
    resume: bool,
) -> Result<(Conn, &'static str, Option<String>), (ErrorKind, String)> {
    let plan = &ctx.plan;
    let tcp = socket::tcp_connect(plan.target, source).await.map_err(|e| (classify(&e), e.to_string()))?;
    let Some(connectors) = &ctx.connectors else {
        return Ok((Conn::Tcp(tcp), "none", None));
    };
    let connector = if resume { &connectors.resume } else { &connectors.fresh };
    let name = plan.server_name.clone().expect("TLS plans have a server name");
    let tls = connector.connect(name, tcp).await.map_err(|e| (classify(&e), e.to_string()))?;
    let conn = tls.get_ref().1;
    let kind = match conn.handshake_kind() {
        Some(rustls::HandshakeKind::Resumed) => "resumed",
        _ => "full",
    };
    let version = conn.protocol_version().map(|v| match v {
        rustls::ProtocolVersion::TLSv1_3 => "1.3".to_string(),
        rustls::ProtocolVersion::TLSv1_2 => "1.2".to_string(),
        other => format!("{other:?}"),
    });
    Ok((Conn::Tls(Box::new(tls)), kind, version))
}

/// Waits until run time `t`, or until the run stops (returns false). Queries that come due
/// meanwhile and cannot be sent within the timeout are counted as unsent.
pub async fn wait_until(
    ctx: &Ctx,
    stop: &mut tokio::sync::watch::Receiver<Stop>,
    t: u64,
    sched: &mut Schedule,
) -> bool {
    loop {
        let now = ctx.now();
        sched.expire_unsent(now, ctx.plan.timeout_ns, u64::MAX, &mut ctx.counters.borrow_mut());
        if ctx.state(stop) != Stop::Running {
            return false;
        }
        if now >= t {
            return true;
        }
        let wake = t.min(now + 100_000_000);
        tokio::select! {
            _ = ctx.sleep_until(wake) => {}
            r = stop.changed() => { if r.is_err() { return false; } }
        }
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

/// Runs one connection slot until the run stops.
pub async fn run_slot(ctx: Rc<Ctx>, mut sched: Schedule, slot: u64, mut rng: Rng) {
    let plan = ctx.plan.clone();
    let cfg = &plan.config;
    let source = (!plan.sources.is_empty()).then(|| plan.sources[slot as usize % plan.sources.len()]);
    let resumption = cfg.resumption.unwrap_or(0.0);
    let timeout = std::time::Duration::from_nanos(plan.timeout_ns);
    let mut stop = ctx.stop.clone();
    let mut window = Window::new(cfg.in_flight as usize, rng.next_u64() as u16);
    let (mut backoff_ms, mut first) = (0u64, true);
    'slot: loop {
        // The first connection opens at the start (so that idle connections can be held);
        // every later one when the slot's next query is due, as a real client does.
        let now = ctx.now();
        let mut not_before = now + backoff_ms * 1_000_000;
        if !first {
            match sched.next_start(now) {
                Some(t) => {
                    not_before = not_before.max(t);
                    sched.blocked(now, true);
                }
                None => break,
            }
        }
        if !wait_until(&ctx, &mut stop, not_before, &mut sched).await {
            break;
        }
        if let Some(bucket) = &ctx.bucket {
            loop {
                let now = ctx.now();
                let r = bucket.borrow_mut().take(now);
                match r {
                    Ok(()) => break,
                    Err(wait) => {
                        if !wait_until(&ctx, &mut stop, now + wait, &mut sched).await {
                            break 'slot;
                        }
                    }
                }
            }
        }
        let resume = resumption > 0.0 && (first || rng.chance(resumption));
        let id = ctx.conn_id();
        let opened = ctx.now();
        ctx.counters.borrow_mut().conn_opened += 1;
        let attempt = tokio::select! {
            r = tokio::time::timeout(timeout, connect(&ctx, source, resume)) => match r {
                Ok(r) => r,
                Err(_) => Err((ErrorKind::ConnectTimeout, "connection set-up timed out".into())),
            },
            // Set-up may take up to the timeout (600 s at most): an abort does not wait for it.
            _ = aborted(&ctx, &mut stop) => break 'slot,
        };
        let (conn, handshake, tls_version) = match attempt {
            Ok(c) => c,
            Err((kind, error)) => {
                if first {
                    if let Some(g) = &plan.gate {
                        g.arrive();
                    }
                }
                first = false;
                ctx.counters.borrow_mut().conn_fail(kind);
                ctx.plan.note_error(kind, &error);
                ctx.write_log(record(
                    &ctx,
                    id,
                    opened,
                    None,
                    "none",
                    None,
                    &SessionEnd { close: Close::Error, error: Some(error) },
                    None,
                ));
                backoff_ms = (backoff_ms * 2).clamp(50, 1000);
                continue;
            }
        };
        backoff_ms = 0;
        let established = ctx.now();
        {
            let mut c = ctx.counters.borrow_mut();
            c.conn_established += 1;
            c.setup.saturating_record(((established - opened) / 1000).max(1));
            match handshake {
                "full" => c.handshakes_full += 1,
                "resumed" => c.handshakes_resumed += 1,
                _ => {}
            }
        }
        ctx.active.set(ctx.active.get() + 1);
        if first {
            if let Some(g) = &plan.gate {
                g.arrive();
                // Until the warm-up ends; without one, until the end of sending at most (due
                // queries held meanwhile expire as unsent, as any that cannot go).
                let until = if cfg.warmup_ms > 0 { cfg.warmup_ms } else { cfg.warmup_ms + cfg.duration_ms };
                g.wait(&ctx, &mut stop, until * 1_000_000).await;
            }
        }
        first = false;
        // A connection held at the gate starts its life when queries may flow.
        let policy = ConnPolicy::new(cfg.lifetime, cfg.idle_timeout_ms, ctx.now());
        let (local, fd) = match &conn {
            Conn::Tcp(s) => (s.local_addr().ok(), s.as_raw_fd()),
            Conn::Tls(s) => (s.get_ref().0.local_addr().ok(), s.get_ref().0.as_raw_fd()),
        };
        let mut info = ConnInfo { queries: 0, answers: 0, meter: TcpMeter::new(fd, established) };
        let end = match (conn, cfg.transport) {
            (Conn::Tls(s), Transport::Doh) => super::doh::session(&ctx, &mut sched, *s, policy, &mut info).await,
            (Conn::Tcp(mut s), _) => {
                let end = session(&ctx, &mut sched, &mut s, policy, &mut window, &mut info).await;
                info.meter.sample(&mut ctx.counters.borrow_mut());
                let fd = s.as_raw_fd();
                close_tcp(&mut s, &fd, end.close, cfg.close.unwrap_or_default()).await;
                end
            }
            (Conn::Tls(mut s), _) => {
                let end = session(&ctx, &mut sched, &mut *s, policy, &mut window, &mut info).await;
                info.meter.sample(&mut ctx.counters.borrow_mut());
                let fd = s.get_ref().0.as_raw_fd();
                close_tcp(&mut *s, &fd, end.close, cfg.close.unwrap_or_default()).await;
                end
            }
        };
        ctx.active.set(ctx.active.get() - 1);
        ctx.counters.borrow_mut().closed(end.close);
        ctx.write_log(record(&ctx, id, opened, Some(established), handshake, tls_version, &end, Some((&info, local))));
        if let Some(error) = &end.error {
            if end.close == Close::Error {
                ctx.plan.note_error(ErrorKind::ConnectionLost, error);
            }
        }
        match end.close {
            Close::End => break,
            Close::Error => backoff_ms = (backoff_ms * 2).clamp(50, 1000),
            _ => {}
        }
        sched.next_connection();
    }
    let mut c = ctx.counters.borrow_mut();
    if ctx.state(&mut stop) == Stop::Abort {
        sched.abort(&mut c);
    }
    sched.close(ctx.stopped_at(), &mut c);
}

/// Ends a tcp or dot connection the configured way, when the client is the one closing.
async fn close_tcp<S: AsyncWrite + Unpin>(s: &mut S, fd: &RawFd, close: Close, mode: CloseMode) {
    if close.side() != dnscost_stats::Side::Client || close == Close::Error {
        return;
    }
    // SAFETY: `s` owns the descriptor and is alive for this whole function.
    let sock = unsafe { BorrowedFd::borrow_raw(*fd) };
    match mode {
        CloseMode::Graceful => {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(1), s.shutdown()).await;
        }
        CloseMode::Fin => {
            let _ = socket::shutdown_write(&sock);
        }
        CloseMode::Rst => {
            let _ = socket::set_reset_on_close(&sock);
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub fn record(
    ctx: &Ctx,
    id: u64,
    opened: u64,
    established: Option<u64>,
    handshake: &str,
    tls_version: Option<String>,
    end: &SessionEnd,
    info: Option<(&ConnInfo, Option<std::net::SocketAddr>)>,
) -> ConnectionRecord {
    let total = info.map(|(i, _)| i.meter.total).unwrap_or_default();
    ConnectionRecord {
        role: "client".into(),
        transport: ctx.plan.config.transport.as_str().into(),
        id,
        local_address: info.and_then(|(_, l)| l).map(|a| a.to_string()).unwrap_or_default(),
        peer_address: ctx.plan.target.to_string(),
        opened_us: opened / 1000,
        established_us: established.map(|e| e / 1000),
        closed_us: ctx.now() / 1000,
        handshake: handshake.into(),
        tls_version,
        queries: info.map_or(0, |(i, _)| i.queries),
        answers: info.map_or(0, |(i, _)| i.answers),
        bytes_sent: total.bytes_sent,
        bytes_received: total.bytes_received,
        closed_by: match end.close.side() {
            dnscost_stats::Side::Client => "client".into(),
            dnscost_stats::Side::Server => "server".into(),
        },
        close: end.close.as_str().into(),
        error: end.error.clone(),
    }
}

/// A tcp or dot session: pipelined queries (up to `in_flight`), answers matched by ID. When the
/// server closes the connection gracefully (FIN or close_notify) with queries outstanding,
/// they are sent again on the next connection (RFC 7766 §6.2.1 lets a server close at any
/// time; the client retries), within their timeout.
async fn session<S: AsyncRead + AsyncWrite + Unpin>(
    ctx: &Ctx,
    sched: &mut Schedule,
    io: &mut S,
    mut policy: ConnPolicy,
    window: &mut Window,
    info: &mut ConnInfo,
) -> SessionEnd {
    let plan = &ctx.plan;
    let tls = plan.config.transport.uses_tls();
    let timeout = plan.timeout_ns;
    let mut stop = ctx.stop.clone();
    let mut dec = FrameDecoder::new(16 * 1024);
    let mut out = Vec::with_capacity(4096);
    // First sends in `out`: counted `sent` once the write completes.
    let mut fresh = 0u64;
    let lose = |window: &mut Window, kind| ctx.lose(kind, window.clear());
    // A graceful close leaves the outstanding queries unprocessed: they go again.
    let closed = |window: &mut Window, sched: &mut Schedule, close: Close, error: Option<String>| {
        if matches!(close, Close::Fin | Close::CloseNotify) {
            let refused = window.drain();
            ctx.sub_in_flight(refused.len() as u64);
            sched.retry(refused);
        } else {
            lose(window, ErrorKind::ConnectionLost);
        }
        SessionEnd { close, error }
    };
    loop {
        let now = ctx.now();
        let state = ctx.state(&mut stop);
        if state == Stop::Abort {
            let n = window.clear();
            ctx.counters.borrow_mut().aborted += n;
            ctx.sub_in_flight(n);
            return SessionEnd::client(Close::End);
        }
        {
            let mut c = ctx.counters.borrow_mut();
            let expired = now.checked_sub(timeout).map_or(0, |deadline| window.expire(deadline));
            if expired > 0 {
                c.timed_out += expired;
                ctx.sub_in_flight(expired);
                policy.on_resolved(now);
            }
            info.meter.tick(now, &mut c);
            if state == Stop::Running {
                let free = (plan.config.in_flight as usize).saturating_sub(window.len()) as u64;
                sched.expire_unsent(now, timeout, free, &mut c);
                while !window.is_full() && policy.may_send(now) && sched.due(now) {
                    let (intended, again) = sched.take(now, &mut c);
                    let q = again.unwrap_or_else(|| ctx.next_query());
                    let id = window.insert(intended, q).expect("window has room");
                    plan.queries.get(q).write_framed(id, &mut out);
                    policy.on_send(now);
                    if again.is_none() {
                        fresh += 1;
                    }
                    info.queries += 1;
                    ctx.add_in_flight(1);
                }
            }
        }
        if !out.is_empty() {
            let deadline = window.oldest().unwrap_or(now) + timeout;
            match write_bounded(ctx, io, &out, &mut stop, deadline).await {
                Written::Done => {
                    out.clear();
                    ctx.counters.borrow_mut().sent += std::mem::take(&mut fresh);
                }
                Written::Failed(e) => {
                    let close = server_close(Some(&e), tls);
                    return closed(window, sched, close, Some(e.to_string()));
                }
                Written::TimedOut => {
                    let now = ctx.now();
                    let expired = now.checked_sub(timeout).map_or(0, |d| window.expire(d));
                    return write_timed_out(ctx, expired, window.clear());
                }
                Written::Aborted => continue,
            }
        }
        if state == Stop::Drain && window.len() == 0 {
            return SessionEnd::client(Close::End);
        }
        if let Some(p) = policy.close_now(now, window.len()) {
            return p.into();
        }
        let mut wake = u64::MAX;
        if let Some(oldest) = window.oldest() {
            wake = wake.min(oldest + timeout);
        }
        if state == Stop::Running {
            let room = !window.is_full() && policy.may_send(now);
            if let Some(t) = sched.wake(now, room, timeout) {
                wake = wake.min(t);
            }
        }
        if let Some(d) = policy.deadline().filter(|d| *d > now) {
            wake = wake.min(d);
        }
        tokio::select! {
            biased;
            r = io.read(dec.spare()) => match r {
                Ok(0) => return closed(window, sched, server_close(None, tls), None),
                Ok(n) => {
                    dec.advance(n);
                    let now = ctx.now();
                    let mut c = ctx.counters.borrow_mut();
                    while let Some(frame) = dec.next_frame() {
                        let Ok(msg) = frame else {
                            drop(c);
                            lose(window, ErrorKind::Malformed);
                            return SessionEnd { close: Close::Error, error: Some("zero-length frame".into()) };
                        };
                        let Some(id) = msg.get(..2).map(|b| u16::from_be_bytes([b[0], b[1]])) else {
                            c.unmatched += 1;
                            continue;
                        };
                        let Some(o) = window.remove(id) else {
                            c.unmatched += 1;
                            continue;
                        };
                        ctx.sub_in_flight(1);
                        policy.on_resolved(now);
                        info.answers += 1;
                        match parse_response(msg, Some(plan.queries.get(o.query).question())) {
                            Ok(r) => c.answer(r.rcode, now.saturating_sub(o.intended) / 1000),
                            Err(_) => c.fail(ErrorKind::Malformed, 1),
                        }
                    }
                }
                Err(e) => {
                    let close = server_close(Some(&e), tls);
                    return closed(window, sched, close, Some(e.to_string()));
                }
            },
            _ = ctx.sleep_until(wake) => {}
            r = stop.changed() => { if r.is_err() { return SessionEnd::client(Close::End); } }
        }
    }
}
