//! Connection slots for tcp, dot and doh: open (within the open-rate budget, resuming TLS for
//! the configured share), run the transport's session until the lifetime policy, the server or
//! the run ends it, close as configured, log, and open again.

use super::ctx::{Ctx, Schedule, Stop};
use super::session::{aborted, ConnInfo, SessionEnd, TcpMeter, TlsStream};
use super::window::Window;
use dnscost_load::{ConnPolicy, Rng, Transport};
use dnscost_stats::{Close, ConnectionRecord, ErrorKind, Handshake};
use dnscost_transport::socket;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use tokio::net::TcpStream;

/// An established connection.
pub enum Conn {
    Tcp(TcpStream),
    Tls(Box<TlsStream>),
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

async fn connect(
    ctx: &Ctx,
    source: Option<IpAddr>,
    resume: bool,
) -> Result<(Conn, Handshake, Option<String>), (ErrorKind, String)> {
    let plan = &ctx.plan;
    let tcp = socket::tcp_connect(plan.target, source).await.map_err(|e| (classify(&e), e.to_string()))?;
    let Some(connectors) = &ctx.connectors else {
        return Ok((Conn::Tcp(tcp), Handshake::None, None));
    };
    let connector = if resume { &connectors.resume } else { &connectors.fresh };
    let name = plan.server_name.clone().expect("TLS plans have a server name");
    let tls = connector.connect(name, tcp).await.map_err(|e| (classify(&e), e.to_string()))?;
    let conn = tls.get_ref().1;
    let kind = match conn.handshake_kind() {
        Some(rustls::HandshakeKind::Resumed) => Handshake::Resumed,
        _ => Handshake::Full,
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

/// Runs one connection slot until the run stops.
pub async fn run_slot(ctx: Rc<Ctx>, mut sched: Schedule, slot: u64, mut rng: Rng) {
    let plan = ctx.plan.clone();
    let cfg = &plan.config;
    let source = (!plan.sources.is_empty()).then(|| plan.sources[slot as usize % plan.sources.len()]);
    let resumption = cfg.resumption.unwrap_or(0.0);
    let timeout = std::time::Duration::from_nanos(plan.timeout_ns);
    let mut stop = ctx.stop.clone();
    let mut window = Window::new(cfg.in_flight as usize, rng.next_u64() as u16);
    let mut buffers = super::tcp::Buffers::default();
    let (mut backoff_ms, mut first) = (0u64, true);
    'slot: loop {
        // The first connection opens at the start (so that idle connections can be held);
        // every later one when the slot's next query is due, as a real client does.
        let now = ctx.now();
        let mut not_before = now + backoff_ms * 1_000_000;
        if !first {
            match sched.next_start(now) {
                Some(t) => not_before = not_before.max(t),
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
                // No connection: a closed loop is blocked from the attempt on (a routine
                // reconnection is not, so that the end of a run does not count one as unsent).
                sched.blocked(opened, true);
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
                    Handshake::None,
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
                Handshake::Full => c.handshakes_full += 1,
                Handshake::Resumed => c.handshakes_resumed += 1,
                Handshake::None => {}
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
                let end =
                    super::tcp::session(&ctx, &mut sched, &mut s, policy, &mut window, &mut buffers, &mut info).await;
                info.meter.sample(&mut ctx.counters.borrow_mut());
                let fd = s.as_raw_fd();
                super::tcp::close_tcp(&mut s, &fd, end.close, cfg.close.unwrap_or_default()).await;
                end
            }
            (Conn::Tls(mut s), _) => {
                let end =
                    super::tcp::session(&ctx, &mut sched, &mut *s, policy, &mut window, &mut buffers, &mut info).await;
                info.meter.sample(&mut ctx.counters.borrow_mut());
                let fd = s.get_ref().0.as_raw_fd();
                super::tcp::close_tcp(&mut *s, &fd, end.close, cfg.close.unwrap_or_default()).await;
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
        if end.close == Close::Error || end.close.side() == dnscost_stats::Side::Server {
            sched.blocked(ctx.now(), true);
        }
        match end.close {
            Close::End => break,
            Close::Error => backoff_ms = (backoff_ms * 2).clamp(50, 1000),
            // A server that closes without answering anything (while queries wait to be sent
            // again) is not reconnected to in a tight loop.
            c if c.side() == dnscost_stats::Side::Server && info.answers == 0 => {
                backoff_ms = (backoff_ms * 2).clamp(50, 1000)
            }
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

#[allow(clippy::too_many_arguments)]
pub fn record(
    ctx: &Ctx,
    id: u64,
    opened: u64,
    established: Option<u64>,
    handshake: Handshake,
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
        handshake: handshake.as_str().into(),
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
