//! Connection slots for tcp, dot and doh: open a carrier (within the open-rate budget,
//! resuming TLS for the configured share), drive the transport's session on it until the
//! lifetime policy, the server or the run ends it, close as configured, log, and open again.
//!
//! [`drive`] is the one loop every session runs in: it owns the clock, expiry, unsent
//! accounting, retransmissions, writes bounded by a deadline and an abort, the meter and
//! wake-ups; the session (`tcp.rs`, `doh.rs`) only turns time and bytes into bytes. Its steps
//! without I/O ([`turn`], [`wake_at`]) are what `udp.rs`'s tests take in virtual time.

use super::carrier::{Carrier, Dial, Established, Got, Resume, TcpMeter};
use super::ctx::{Ctx, Schedule, Stop};
use super::doh::Doh;
use super::events::{Events, StreamFailure};
use super::session::{End, Session, SessionEnd, Step, Tally};
use super::tcp::DnsStream;
use super::window::Window;
use dnscost_load::{CloseMode, ConnPolicy, EngineConfig, Rng, Transport};
use dnscost_stats::{Close, ConnectionRecord, ErrorKind, Handshake, Side};
use dnscost_wire::FrameDecoder;
use std::rc::Rc;

/// Waits until run time `t`, or until the run stops (returns false). Queries that come due
/// meanwhile and cannot be sent within the timeout are counted as unsent.
pub async fn wait_until(ctx: &Ctx, t: u64, sched: &mut Schedule) -> bool {
    loop {
        let now = ctx.now();
        sched.expire_unsent(now, ctx.setup.timeout_ns, u64::MAX, &mut ctx.counters.borrow_mut());
        if ctx.state() != Stop::Running {
            return false;
        }
        if now >= t {
            return true;
        }
        // The timer wakes every sleeper when the run's state changes.
        ctx.sleep_until(t.min(now + 100_000_000)).await;
    }
}

/// With `open_first`, after the slot's first connection attempt: waits until every slot's
/// first attempt is settled (until the warm-up ends; without one, until the end of sending at
/// most), then starts the slot's schedule from when the gate opened, the same moment for every
/// slot: a slot whose first connection settled after it owes the queries due since (a
/// schedule started at each slot's own passage would offer less than the rate asks).
async fn pass_gate(ctx: &Ctx, sched: &mut Schedule) {
    if let Some(g) = &ctx.setup.gate {
        g.arrive(ctx.now());
        let until = gate_deadline_ns(&ctx.setup.config);
        g.wait(ctx, until).await;
        sched.start_at(g.opened_at(until).min(ctx.now()));
    }
}

/// How long the open-first gate waits at most: until the warm-up ends (without one, until the
/// end of sending).
fn gate_deadline_ns(cfg: &EngineConfig) -> u64 {
    (if cfg.warmup_ms > 0 { cfg.warmup_ms } else { cfg.warmup_ms + cfg.duration_ms }) * 1_000_000
}

/// Runs one connection slot until the run stops.
pub async fn run_slot(ctx: Rc<Ctx>, mut sched: Schedule, slot: u64, mut rng: Rng) {
    // What the configuration gives is read from it when needed, not copied: every local here
    // is in the task for the slot's whole life (the engine's memory per connection).
    let cfg = &ctx.setup.config;
    let mut dial = Dial { slot, endpoint: None };
    // Kept from one connection to the next: DNS IDs keep running. The read buffer is the
    // thread's, held only while bytes wait in it (`receive`).
    let mut window = Window::new(cfg.in_flight as usize, rng.next_u64() as u16);
    let mut dec = FrameDecoder::new(16 * 1024);
    let mut out = Vec::new();
    let (mut backoff_ms, mut first) = (0u64, true);
    // The first connection lives a uniform share of the lifetime (Lifetime::first), so that
    // renewals run at the steady-state rate from the start instead of all at once.
    let first_draw = 1.0 - rng.next_f64();
    // The first connection opens at the start (so that idle connections can be held), unless
    // the client need not open first and closes idle connections, or opens one a query: then,
    // as every later one, when the slot's next query is due, as such a client does (an open
    // loop's one-query connections pre-opened at the start carried the first queries of a
    // slow schedule, hundreds of them, with no connection opened in the measured window).
    let lazy = !cfg.open_first && (cfg.idle_timeout_ms.is_some() || cfg.lifetime.queries == Some(1));
    'slot: loop {
        let now = ctx.now();
        let mut not_before = now + backoff_ms * 1_000_000;
        if !first || lazy {
            match sched.next_start(now) {
                Some(t) => not_before = not_before.max(t),
                None => break,
            }
        }
        if !wait_until(&ctx, not_before, &mut sched).await {
            break;
        }
        if let Some(bucket) = &ctx.bucket {
            // The slot's own turn: one wake, not one per token made.
            let at = bucket.borrow_mut().reserve(ctx.now());
            if !wait_until(&ctx, at, &mut sched).await {
                break 'slot;
            }
        }
        let (resumption, early_data) = (cfg.resumption.unwrap_or(0.0), cfg.early_data.unwrap_or(0.0));
        let resume = match resumption > 0.0 && (first || rng.chance(resumption)) {
            false => Resume::No,
            true if early_data > 0.0 && rng.chance(early_data) => Resume::Early,
            true => Resume::Yes,
        };
        let id = ctx.conn_id();
        let opened = ctx.now();
        ctx.counters.borrow_mut().conn_opened += 1;
        // A first connection opened before the gate has until the gate's deadline and then
        // the timeout: a handshake queued at a slow server in the open phase is not given up
        // and opened again in the measured period (knot-resolver signs about 500 RSA-2048
        // handshakes a second: with a 2 s timeout, 1 000 connections reopened 283).
        let timeout = std::time::Duration::from_nanos(ctx.setup.timeout_ns);
        let setup = match (&ctx.setup.gate, first) {
            (Some(_), true) => std::time::Duration::from_nanos(gate_deadline_ns(cfg).saturating_sub(opened)) + timeout,
            _ => timeout,
        };
        let attempt = tokio::select! {
            // In the task, as the waits and the gate: a task is as large as its largest await,
            // and these are smaller than an open connection's (the TLS and QUIC set-ups are
            // boxed inside). Boxed, they left holes in the heap where they had been.
            r = tokio::time::timeout(setup, Carrier::connect(&ctx, &mut dial, resume)) => match r {
                Ok(r) => r,
                Err(_) => Err((ErrorKind::ConnectTimeout, "connection set-up timed out".into())),
            },
            // Set-up may take up to the timeout (600 s at most): an abort does not wait for it.
            _ = aborted(&ctx) => break 'slot,
        };
        let Established { mut carrier, handshake } = match attempt {
            Ok(c) => c,
            Err((kind, error)) => {
                // No connection: a closed loop is blocked from the attempt on (a routine
                // reconnection is not, so that the end of a run does not count one as unsent).
                sched.blocked(opened, true);
                if first {
                    pass_gate(&ctx, &mut sched).await;
                }
                first = false;
                ctx.counters.borrow_mut().conn_fail(kind);
                ctx.setup.note_error(kind, &error);
                let end = SessionEnd { close: Close::Error, error: Some(error) };
                ctx.write_log(record(&ctx, id, opened, None, Handshake::None, None, &end, None));
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
            if let Some(h) = handshake {
                c.handshake(h);
            }
        }
        ctx.active.set(ctx.active.get() + 1);
        if first {
            pass_gate(&ctx, &mut sched).await;
        }
        let lifetime = if first { cfg.lifetime.first(first_draw) } else { cfg.lifetime };
        first = false;
        // A connection held at the gate starts its life when queries may flow.
        let mut conn = Connection {
            carrier_room: true,
            policy: ConnPolicy::new(lifetime, cfg.idle_timeout_ms, ctx.now()),
            tally: Tally::default(),
            meter: TcpMeter::new(established),
        };
        let local = carrier.local_addr();
        out.clear();
        let (end, goodbye) = if cfg.transport == Transport::Doh {
            // Boxed: its session is a DoH connection's only, and would size every slot's task.
            let end = Box::pin(async {
                let mut session = Doh::new(cfg.in_flight as usize, cfg.doh_method.unwrap_or_default(), &mut out);
                let end = drive(&ctx, &mut sched, &mut carrier, &mut session, &mut conn, &mut out).await;
                out.clear();
                session.goodbye(&mut out);
                end
            })
            .await;
            (end, &out[..])
        } else {
            let mut session = DnsStream::new(&mut window, &mut dec, cfg.transport.uses_tls());
            let end = drive(&ctx, &mut sched, &mut carrier, &mut session, &mut conn, &mut out).await;
            dec.clear();
            (end, &[][..])
        };
        conn.meter.sample(&mut carrier, &mut ctx.counters.borrow_mut());
        {
            let events = carrier.take_events();
            let mut c = ctx.counters.borrow_mut();
            c.sent += events.went;
            c.stream_waits += events.stream_waits;
            // Queries still waiting for a stream when the server ended the connection in order go
            // again on the next one, where they count no more: their first send counts now.
            if end.close.side() == Side::Server && end.error.is_none() {
                c.sent += carrier.fresh_waiting();
            }
        }
        // A 0-RTT connection's handshake is counted once known.
        let handshake = handshake.unwrap_or_else(|| {
            let h = carrier.handshake();
            ctx.counters.borrow_mut().handshake(h);
            h
        });
        let mode = cfg.close.unwrap_or_default();
        let client_closes = end.close.side() == Side::Client && end.close != Close::Error;
        if client_closes {
            Box::pin(carrier.close(mode, goodbye)).await;
        } else if end.close.side() == Side::Server {
            carrier.shutdown_write();
        }
        ctx.active.set(ctx.active.get() - 1);
        ctx.counters.borrow_mut().closed(end.close);
        let log =
            record(&ctx, id, opened, Some(established), handshake, carrier.tls_version(), &end, Some((&conn, local)));
        if client_closes && mode != CloseMode::Rst {
            // The slot goes on at once; the close is counted when the server has ended too.
            ctx.lingering.set(ctx.lingering.get() + 1);
            tokio::task::spawn_local(count_close(ctx.clone(), carrier, conn.meter, log));
        } else {
            conn.meter.sample(&mut carrier, &mut ctx.counters.borrow_mut());
            ctx.write_log(with_bytes(log, &conn.meter));
        }
        if let Some(error) = &end.error {
            if end.close == Close::Error {
                ctx.setup.note_error(ErrorKind::ConnectionLost, error);
            }
        }
        if end.close == Close::Error || end.close.side() == Side::Server {
            sched.blocked(ctx.now(), true);
        }
        match end.close {
            Close::End => break,
            Close::Error => backoff_ms = (backoff_ms * 2).clamp(50, 1000),
            // A server that closes without answering anything (while queries wait to be sent
            // again) is not reconnected to in a tight loop.
            c if c.side() == Side::Server && conn.tally.answers == 0 => backoff_ms = (backoff_ms * 2).clamp(50, 1000),
            _ => {}
        }
        sched.next_connection();
    }
    let mut c = ctx.counters.borrow_mut();
    if ctx.state() == Stop::Abort {
        sched.abort(&mut c);
    }
    sched.close(ctx.stopped_at(), &mut c);
}

/// Waits for the server's end of a connection we closed (its FIN, after close_notify or
/// GOAWAY if it sends them; at most the query timeout or a second, and not past an abort), then
/// reads TCP_INFO a last time, so that the close's segments and octets are counted, and writes
/// the connection's record. Runs beside the slot: a client does not wait for the server's FIN
/// before its next connection.
async fn count_close(ctx: Rc<Ctx>, mut carrier: Carrier, mut meter: TcpMeter, log: ConnectionRecord) {
    let bound = std::time::Duration::from_nanos(ctx.setup.timeout_ns).min(std::time::Duration::from_secs(1));
    tokio::select! {
        _ = carrier.await_end(bound) => {}
        _ = aborted(&ctx) => {}
    }
    meter.sample(&mut carrier, &mut ctx.counters.borrow_mut());
    ctx.write_log(with_bytes(log, &meter));
    ctx.lingering.set(ctx.lingering.get() - 1);
    ctx.lingered.notify_one();
}

/// A connection's record with the octets its meter counted.
fn with_bytes(mut log: ConnectionRecord, meter: &TcpMeter) -> ConnectionRecord {
    log.bytes_sent = meter.total.bytes_sent;
    log.bytes_received = meter.total.bytes_received;
    log
}

/// What the driver keeps of one connection besides its session.
pub struct Connection {
    pub policy: ConnPolicy,
    pub tally: Tally,
    pub meter: TcpMeter,
    /// Whether the carrier takes a query now (false while queries wait for a QUIC stream).
    pub carrier_room: bool,
}

/// Runs `session` on `carrier` until the policy, the server, the session or the run ends it.
/// Every await gives way to an abort, and writes end at the oldest outstanding query's
/// timeout, so a server that stops reading cannot hold the slot.
pub async fn drive<S: Session>(
    ctx: &Ctx,
    sched: &mut Schedule,
    carrier: &mut Carrier,
    session: &mut S,
    conn: &mut Connection,
    out: &mut Vec<u8>,
) -> SessionEnd {
    let timeout = ctx.setup.timeout_ns;
    // First sends and retransmissions in `out`: counted `sent` and `retransmitted` once the
    // write completes.
    let (mut fresh, mut resent) = (0u64, 0u64);
    macro_rules! step {
        ($now:expr) => {
            Step {
                ctx,
                sched: &mut *sched,
                policy: &mut conn.policy,
                tally: &mut conn.tally,
                out: &mut *out,
                now: $now,
                carrier_room: conn.carrier_room,
            }
        };
    }
    loop {
        let now = ctx.now();
        let state = ctx.state();
        if state == Stop::Abort {
            let n = session.clear();
            ctx.counters.borrow_mut().aborted += n;
            ctx.sub_in_flight(n);
            return SessionEnd::client(Close::End);
        }
        conn.meter.tick(now, &mut *carrier, &mut ctx.counters.borrow_mut());
        if expire_waiting(ctx, carrier, session, now.checked_sub(timeout)) {
            conn.policy.on_resolved(now);
        }
        conn.carrier_room = carrier.has_room();
        if out.capacity() == 0 {
            out.reserve(512);
        }
        let t = turn(ctx, sched, session, conn, out, now, state);
        fresh += t.fresh;
        resent += t.resent;
        if !out.is_empty() {
            // What the write counts sent; a QUIC carrier counts first sends as their streams open.
            fresh = carrier.fresh_frames(fresh);
            let deadline = session.oldest().unwrap_or(now) + timeout;
            match Box::pin(write_bounded(ctx, carrier, out, deadline)).await {
                Written::Done => {
                    out.clear();
                    {
                        let mut c = ctx.counters.borrow_mut();
                        c.sent += std::mem::take(&mut fresh);
                        c.retransmitted += std::mem::take(&mut resent);
                    }
                    let _ = settle(ctx, carrier.take_events(), session, sched);
                }
                Written::Failed(e) => {
                    let end = session.ended(&mut step!(ctx.now()), &e);
                    // Ended in order (a QUIC GOAWAY refused the write): the queries go again,
                    // where they count as sent no more, so their first send counts now.
                    if end.error.is_none() {
                        ctx.counters.borrow_mut().sent += fresh;
                    }
                    return end;
                }
                Written::TimedOut => {
                    let now = ctx.now();
                    let expired = now.checked_sub(timeout).map_or(0, |d| session.expire(&mut step!(now), d));
                    return write_timed_out(ctx, expired, session.clear());
                }
                Written::Aborted => continue,
            }
        }
        if session.outstanding() == 0 {
            if let Some(end) = session.finished(state) {
                return end;
            }
        }
        if let Some(p) = conn.policy.close_now(now, session.outstanding()) {
            return p.into();
        }
        if out.is_empty() {
            // Nothing left to write: an idle connection holds no write buffer.
            *out = Vec::new();
        }
        let wake = wake_at(session, sched, conn, now, state, t.room, timeout);
        tokio::select! {
            biased;
            r = receive(carrier, session) => match r {
                // Streams that ended without answers, or queries that waited for streams went
                // (QUIC): a turn, with room again.
                Ok(Got::Events) => {
                    if settle(ctx, carrier.take_events(), session, sched) {
                        conn.policy.on_resolved(ctx.now());
                    }
                }
                Ok(Got::Bytes(n)) => {
                    let _ = settle(ctx, carrier.take_events(), session, sched);
                    if let Some(end) = session.receive(&mut step!(ctx.now()), n) {
                        // What the session says to the server (HTTP/2: GOAWAY), if it goes soon.
                        let _ = Box::pin(write_bounded(ctx, carrier, out, ctx.now() + 1_000_000_000)).await;
                        return end;
                    }
                }
                Err(end) => return session.ended(&mut step!(ctx.now()), &end),
            },
            // Also woken when the run's state changes (the timer wakes every sleeper).
            _ = ctx.sleep_until(wake) => {}
        }
    }
}

/// Reads the carrier into the session's buffer. The buffer is lent to each poll only: a poll
/// that finds nothing gives it back ([`Session::release`]), so that an idle connection waits
/// holding no read buffer.
fn receive<'a, S: Session>(
    carrier: &'a mut Carrier,
    session: &'a mut S,
) -> impl std::future::Future<Output = Result<Got, End>> + 'a {
    std::future::poll_fn(move |cx| {
        let r = carrier.poll_receive(cx, session.spare());
        if r.is_pending() {
            session.release();
        }
        r
    })
}

/// What one turn of [`drive`] appended to `out`: first sends and retransmissions (counted
/// `sent` and `retransmitted` once written), and whether the connection has room for a query
/// more.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Turn {
    pub fresh: u64,
    pub resent: u64,
    pub room: bool,
}

/// One turn of [`drive`] at run time `now`, without I/O: outstanding queries past their timeout
/// time out, those due to be sent again (udp with `udp_retry`) are appended to `out`, also while
/// the run drains, and while it runs what could not be sent in time is counted and what is due
/// is appended.
pub fn turn<S: Session>(
    ctx: &Ctx,
    sched: &mut Schedule,
    session: &mut S,
    conn: &mut Connection,
    out: &mut Vec<u8>,
    now: u64,
    state: Stop,
) -> Turn {
    let timeout = ctx.setup.timeout_ns;
    let mut step = Step {
        ctx,
        sched: &mut *sched,
        policy: &mut conn.policy,
        tally: &mut conn.tally,
        out: &mut *out,
        now,
        carrier_room: conn.carrier_room,
    };
    let expired = now.checked_sub(timeout).map_or(0, |deadline| session.expire(&mut step, deadline));
    if expired > 0 {
        ctx.counters.borrow_mut().timed_out += expired;
        ctx.sub_in_flight(expired);
        step.policy.on_resolved(now);
    }
    let mut t = Turn { resent: session.retransmit(&mut step), ..Turn::default() };
    if state == Stop::Running {
        let free = (ctx.setup.config.in_flight as usize).saturating_sub(session.outstanding()) as u64;
        step.sched.expire_unsent(now, timeout, free, &mut ctx.counters.borrow_mut());
        let sent = session.send(&mut step);
        (t.fresh, t.room) = (sent.fresh, sent.room);
    }
    t
}

/// When [`drive`] must take its next turn unless bytes arrive first: the oldest outstanding
/// query's timeout, the next retransmission, the schedule (while the run goes on) and the
/// policy's deadline, whichever comes first (`u64::MAX`: none).
pub fn wake_at<S: Session>(
    session: &S,
    sched: &Schedule,
    conn: &Connection,
    now: u64,
    state: Stop,
    room: bool,
    timeout: u64,
) -> u64 {
    let due = [
        session.oldest().map(|oldest| oldest + timeout),
        session.next_retransmit(),
        (state == Stop::Running).then(|| sched.wake(now, room, timeout)).flatten(),
        conn.policy.deadline().filter(|d| *d > now),
    ];
    due.into_iter().flatten().min().unwrap_or(u64::MAX)
}

/// Settles what the carrier saw ([`Events`]), whatever the carrier. What the network refused
/// (a UDP carrier: an ICMP port unreachable surfaces on a connected socket's next send or
/// receive): a refused receive counts as a refused "connection" (as the kernel reports it, once
/// per refusal); a query whose send was refused never left, so it is failed `refused` rather
/// than sent. Streams that ended without an answer (a QUIC carrier): the server reset them
/// (`stream_reset`) or answered with something else than one message (`malformed`); a request
/// the server rejected unprocessed (H3_REQUEST_REJECTED, RFC 9114 §4.1.1) goes again on the
/// slot's next connection, as a refused HTTP/2 stream does. And first sends that went on their
/// streams, and queries that waited for one. Returns whether a query was resolved.
fn settle<S: Session>(ctx: &Ctx, events: Events, session: &mut S, sched: &mut Schedule) -> bool {
    let Events { refused_reads, refused_sends, refusal, failed, went, stream_waits } = events;
    let mut c = ctx.counters.borrow_mut();
    c.sent += went;
    c.stream_waits += stream_waits;
    let resolved = !failed.is_empty() || refused_reads > 0 || !refused_sends.is_empty();
    for (id, failure) in failed {
        let Some(o) = session.forget(id) else { continue };
        ctx.sub_in_flight(1);
        let kind = match failure {
            StreamFailure::Rejected => {
                sched.retry([o]);
                continue;
            }
            StreamFailure::Reset(_) => ErrorKind::StreamReset,
            StreamFailure::Malformed => ErrorKind::Malformed,
            StreamFailure::Status(_) => ErrorKind::HttpStatus,
        };
        c.fail(kind, 1);
        if let StreamFailure::Reset(code) = failure {
            ctx.setup.note_error(kind, &format!("stream reset by the server, code {code}"));
        }
    }
    for _ in 0..refused_reads {
        c.conn_fail(ErrorKind::Refused);
    }
    for id in refused_sends {
        // The refused send was the query's first (not sent after all) or a retransmission.
        let resent = session.resent(id);
        if session.forget(id).is_some() {
            if resent {
                c.retransmitted -= 1;
            } else {
                c.sent -= 1;
            }
            c.fail(ErrorKind::Refused, 1);
            ctx.sub_in_flight(1);
        }
    }
    if let Some(m) = refusal {
        ctx.setup.note_error(ErrorKind::Refused, &m);
    }
    resolved
}

/// Queries that waited in a QUIC carrier for a stream until their timeout (intended before
/// `deadline`) are taken back, so that they never go: they were never sent, and are failed
/// `unsent`. Returns whether there were any.
fn expire_waiting<S: Session>(ctx: &Ctx, carrier: &mut Carrier, session: &mut S, deadline: Option<u64>) -> bool {
    let Some(deadline) = deadline else { return false };
    if carrier.has_room() {
        return false;
    }
    let dropped = carrier.drop_waiting(|id| session.intended(id).is_none_or(|t| t <= deadline));
    let n = dropped.into_iter().filter(|&id| session.forget(id).is_some()).count() as u64;
    if n > 0 {
        ctx.sub_in_flight(n);
        ctx.counters.borrow_mut().fail(ErrorKind::Unsent, n);
        ctx.setup.note_error(ErrorKind::Unsent, "the target allowed no stream for them (QUIC MAX_STREAMS)");
    }
    n > 0
}

/// Returns once the run is aborted (a second signal, or the drain's safety net).
pub async fn aborted(ctx: &Ctx) {
    while ctx.state() != Stop::Abort {
        // Never due: woken when the run's state changes.
        ctx.sleep_until(u64::MAX).await;
    }
}

/// How a bounded write ended.
enum Written {
    Done,
    Failed(End),
    /// The deadline passed first: the server is not reading.
    TimedOut,
    /// The run was aborted first.
    Aborted,
}

/// Writes and flushes `out`, but never past run time `deadline` (the oldest outstanding
/// query's timeout) nor past an abort: a server that stops reading must not hold the slot, and
/// so the run, beyond its timeout.
async fn write_bounded(ctx: &Ctx, carrier: &mut Carrier, out: &[u8], deadline: u64) -> Written {
    if out.is_empty() {
        return Written::Done;
    }
    let write = carrier.send(out);
    tokio::pin!(write);
    loop {
        tokio::select! {
            biased;
            r = &mut write => return match r {
                Ok(()) => Written::Done,
                Err(e) => Written::Failed(e),
            },
            // Ends at the deadline, or earlier when the run's state changes.
            _ = ctx.sleep_until(deadline) => {
                if ctx.state() == Stop::Abort {
                    return Written::Aborted;
                }
                if ctx.now() >= deadline {
                    return Written::TimedOut;
                }
            }
        }
    }
}

/// What a write that timed out means for the connection's outstanding queries: those past
/// their timeout timed out, the others are lost with the connection.
fn write_timed_out(ctx: &Ctx, timed_out: u64, lost: u64) -> SessionEnd {
    let message = "write timed out: the server is not reading";
    ctx.counters.borrow_mut().timed_out += timed_out;
    ctx.sub_in_flight(timed_out);
    ctx.lose(ErrorKind::ConnectionLost, lost);
    ctx.setup.note_error(ErrorKind::ConnectionLost, message);
    SessionEnd { close: Close::Error, error: Some(message.into()) }
}

#[allow(clippy::too_many_arguments)]
pub fn record(
    ctx: &Ctx,
    id: u64,
    opened: u64,
    established: Option<u64>,
    handshake: Handshake,
    tls_version: Option<&str>,
    end: &SessionEnd,
    conn: Option<(&Connection, Option<std::net::SocketAddr>)>,
) -> ConnectionRecord {
    let total = conn.map(|(c, _)| c.meter.total).unwrap_or_default();
    ConnectionRecord {
        role: Side::Client,
        transport: ctx.setup.config.transport.as_str().into(),
        id,
        local_address: conn.and_then(|(_, l)| l).map(|a| a.to_string()).unwrap_or_default(),
        peer_address: ctx.setup.target.to_string(),
        opened_us: opened / 1000,
        established_us: established.map(|e| e / 1000),
        closed_us: ctx.now() / 1000,
        handshake,
        tls_version: tls_version.map(Into::into),
        queries: conn.map_or(0, |(c, _)| c.tally.queries),
        answers: conn.map_or(0, |(c, _)| c.tally.answers),
        bytes_sent: total.bytes_sent,
        bytes_received: total.bytes_received,
        closed_by: end.close.side(),
        close: end.close,
        error: end.error.clone(),
    }
}
