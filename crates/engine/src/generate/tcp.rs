//! The tcp and dot session (RFC 7766, RFC 7858): queries pipelined up to `in_flight` on one
//! connection, two-octet framing, answers matched by DNS ID, and the client's close.

use super::ctx::{Ctx, Schedule, Stop};
use super::session::{server_close, write_bounded, write_timed_out, ConnInfo, SessionEnd, Written};
use super::window::Window;
use dnscost_load::{CloseMode, ConnPolicy};
use dnscost_stats::{Close, ErrorKind};
use dnscost_transport::socket;
use dnscost_wire::{parse_response, FrameDecoder};
use std::os::fd::{BorrowedFd, RawFd};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Ends a tcp or dot connection the configured way, when the client is the one closing.
pub async fn close_tcp<S: AsyncWrite + Unpin>(s: &mut S, fd: &RawFd, close: Close, mode: CloseMode) {
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

/// A slot's read and write buffers, kept from one connection to the next (a connection that
/// carries one query does not pay for allocating and zeroing them).
pub struct Buffers {
    dec: FrameDecoder,
    out: Vec<u8>,
}

impl Default for Buffers {
    fn default() -> Self {
        Buffers { dec: FrameDecoder::new(16 * 1024), out: Vec::with_capacity(4096) }
    }
}

/// A tcp or dot session: pipelined queries (up to `in_flight`), answers matched by ID. When the
/// server closes the connection gracefully (FIN or close_notify) with queries outstanding,
/// they are sent again on the next connection (RFC 7766 §6.2.1 lets a server close at any
/// time; the client retries), within their timeout.
pub async fn session<S: AsyncRead + AsyncWrite + Unpin>(
    ctx: &Ctx,
    sched: &mut Schedule,
    io: &mut S,
    mut policy: ConnPolicy,
    window: &mut Window,
    buffers: &mut Buffers,
    info: &mut ConnInfo,
) -> SessionEnd {
    let plan = &ctx.plan;
    let tls = plan.config.transport.uses_tls();
    let timeout = plan.timeout_ns;
    let mut stop = ctx.stop.clone();
    let Buffers { dec, out } = buffers;
    dec.clear();
    out.clear();
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
                    plan.queries.get(q).write_framed(id, out);
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
            match write_bounded(ctx, io, out, &mut stop, deadline).await {
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
