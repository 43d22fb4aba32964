//! DoH (RFC 8484) over HTTP/2, with the sans-I/O client of [`dnscost_transport::http2`]: one
//! stream per query, up to `in_flight` at once and never more than the server's
//! SETTINGS_MAX_CONCURRENT_STREAMS. Like the tcp/dot session, one task per connection batches
//! every request due into one write and matches answers by stream ID; a stream past its
//! timeout is cancelled with RST_STREAM so that the server frees it.

use super::ctx::{Ctx, Schedule, Stop};
use super::session::{server_close, write_bounded, write_timed_out, ConnInfo, SessionEnd, TlsStream, Written};
use super::window::StreamWindow;
use dnscost_load::{CloseMode, ConnPolicy, DohMethod};
use dnscost_stats::{Close, ErrorKind, Side};
use dnscost_transport::http2::{Client, ErrorCode, Event, Settings, StreamId};
use dnscost_transport::socket;
use dnscost_wire::parse_response;
use std::os::fd::{AsRawFd, BorrowedFd};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Runs one DoH connection until its policy, the server or the run ends it, then closes it
/// the configured way if the client is the one closing: GOAWAY, close_notify and FIN
/// (graceful), a bare FIN, or RST.
pub async fn session(
    ctx: &Ctx,
    sched: &mut Schedule,
    mut tls: TlsStream,
    policy: ConnPolicy,
    info: &mut ConnInfo,
) -> SessionEnd {
    let mut client = Client::new(Settings::default());
    let mut out = Vec::with_capacity(4096);
    let end = exchange(ctx, sched, &mut tls, &mut client, &mut out, policy, info).await;
    info.meter.sample(&mut ctx.counters.borrow_mut());
    if end.close.side() != Side::Client || end.close == Close::Error {
        return end;
    }
    let fd = tls.get_ref().0.as_raw_fd();
    // SAFETY: `tls` owns the socket and is alive until the end of this function.
    let sock = unsafe { BorrowedFd::borrow_raw(fd) };
    match ctx.plan.config.close.unwrap_or_default() {
        CloseMode::Graceful => {
            out.clear();
            client.goaway(&mut out);
            let close = async {
                tls.write_all(&out).await?;
                tls.flush().await?;
                tls.shutdown().await
            };
            let _ = tokio::time::timeout(std::time::Duration::from_secs(1), close).await;
        }
        CloseMode::Fin => {
            let _ = socket::shutdown_write(&sock);
        }
        CloseMode::Rst => {
            let _ = socket::set_reset_on_close(&sock);
        }
    }
    end
}

/// The queries of one connection, until it ends.
async fn exchange(
    ctx: &Ctx,
    sched: &mut Schedule,
    tls: &mut TlsStream,
    client: &mut Client,
    out: &mut Vec<u8>,
    mut policy: ConnPolicy,
    info: &mut ConnInfo,
) -> SessionEnd {
    let plan = &ctx.plan;
    let cfg = &plan.config;
    let post = cfg.doh_method.unwrap_or_default() == DohMethod::Post;
    let timeout = plan.timeout_ns;
    let in_flight = cfg.in_flight as usize;
    let mut stop = ctx.stop.clone();
    let mut window = StreamWindow::new(in_flight);
    // The server's GOAWAY code, once it sent one.
    let mut goaway: Option<ErrorCode> = None;
    // First sends in `out`: counted `sent` once the write completes.
    let mut fresh = 0u64;
    client.preface(out);
    loop {
        let now = ctx.now();
        let state = ctx.state(&mut stop);
        if state == Stop::Abort {
            let n = window.clear();
            ctx.counters.borrow_mut().aborted += n;
            ctx.sub_in_flight(n);
            return SessionEnd::client(Close::End);
        }
        // Whether a request could go now if one were due (false while the server lets no
        // stream open, or the body does not fit its flow-control window).
        let mut room = false;
        {
            let mut c = ctx.counters.borrow_mut();
            let expired = now.checked_sub(timeout).map_or(0, |deadline| {
                window.expire(deadline, |s| {
                    client.reset(StreamId(s), ErrorCode::CANCEL, out);
                })
            });
            if expired > 0 {
                c.timed_out += expired;
                ctx.sub_in_flight(expired);
                policy.on_resolved(now);
            }
            info.meter.tick(now, &mut c);
            if state == Stop::Running {
                let free = in_flight.saturating_sub(window.len()) as u64;
                sched.expire_unsent(now, timeout, free, &mut c);
                let wants = window.len() < in_flight && policy.may_send(now);
                room = wants && client.can_send();
                while room && sched.due(now) {
                    let q = sched.peek_retry().unwrap_or_else(|| ctx.peek_query());
                    let (template, body) = if post {
                        (&plan.doh[0], plan.queries.get(q).bytes())
                    } else {
                        (&plan.doh[(q % plan.doh.len() as u64) as usize], &[][..])
                    };
                    let stream = match client.send(template, body, out) {
                        Ok(stream) => stream,
                        // The server's limits (or a GOAWAY, or identifiers used up): wait.
                        Err(_) => {
                            room = false;
                            break;
                        }
                    };
                    let (intended, again) = sched.take(now, &mut c);
                    if again.is_none() {
                        ctx.next_query();
                        fresh += 1;
                    }
                    window.insert(stream.0, intended, q);
                    policy.on_send(now);
                    info.queries += 1;
                    ctx.add_in_flight(1);
                    room = window.len() < in_flight && client.can_send() && policy.may_send(now);
                }
                // Queries are due that the connection cannot take: a blocked closed loop.
                sched.blocked(now, wants && !room && window.len() < in_flight && policy.may_send(now));
            }
        }
        if !out.is_empty() {
            let deadline = window.oldest().unwrap_or(now) + timeout;
            match write_bounded(ctx, tls, out, &mut stop, deadline).await {
                Written::Done => {
                    out.clear();
                    ctx.counters.borrow_mut().sent += std::mem::take(&mut fresh);
                }
                Written::Failed(e) => {
                    ctx.lose(ErrorKind::ConnectionLost, window.clear());
                    return SessionEnd { close: server_close(Some(&e), true), error: Some(e.to_string()) };
                }
                Written::TimedOut => {
                    let now = ctx.now();
                    let expired = now.checked_sub(timeout).map_or(0, |d| window.expire(d, |_| {}));
                    return write_timed_out(ctx, expired, window.clear());
                }
                Written::Aborted => continue,
            }
        }
        if window.len() == 0 {
            if let Some(code) = goaway {
                return SessionEnd { close: Close::Goaway, error: goaway_error(code) };
            }
            if state == Stop::Drain {
                return SessionEnd::client(Close::End);
            }
            if client.ids_exhausted() {
                return SessionEnd::client(Close::Exhausted);
            }
        }
        if let Some(p) = policy.close_now(now, window.len()) {
            return p.into();
        }
        let mut wake = u64::MAX;
        if let Some(oldest) = window.oldest() {
            wake = wake.min(oldest + timeout);
        }
        if state == Stop::Running {
            if let Some(t) = sched.wake(now, room, timeout) {
                wake = wake.min(t);
            }
        }
        if let Some(d) = policy.deadline().filter(|d| *d > now) {
            wake = wake.min(d);
        }
        tokio::select! {
            biased;
            r = tls.read(client.spare()) => match r {
                Ok(0) => {
                    ctx.lose(ErrorKind::ConnectionLost, window.clear());
                    return match goaway {
                        Some(code) => SessionEnd { close: Close::Goaway, error: goaway_error(code) },
                        None => SessionEnd { close: server_close(None, true), error: None },
                    };
                }
                Ok(n) => {
                    client.advance(n);
                    let now = ctx.now();
                    let failed = {
                        let mut c = ctx.counters.borrow_mut();
                        let mut failed = None;
                        while let Some(event) = client.next_event(out) {
                            match event {
                                Event::Response { stream, status, body } => {
                                    let Some(o) = window.remove(stream.0) else {
                                        c.unmatched += 1;
                                        continue;
                                    };
                                    ctx.sub_in_flight(1);
                                    policy.on_resolved(now);
                                    if status != 200 {
                                        c.fail(ErrorKind::HttpStatus, 1);
                                        continue;
                                    }
                                    info.answers += 1;
                                    match parse_response(body, Some(plan.queries.get(o.query).question())) {
                                        Ok(r) => c.answer(r.rcode, now.saturating_sub(o.intended) / 1000),
                                        Err(_) => c.fail(ErrorKind::Malformed, 1),
                                    }
                                }
                                Event::Reset { stream, code } => {
                                    if let Some(o) = window.remove(stream.0) {
                                        ctx.sub_in_flight(1);
                                        policy.on_resolved(now);
                                        if code == ErrorCode::REFUSED_STREAM {
                                            // Not processed (RFC 9113 §8.7): send it again.
                                            sched.retry([o]);
                                        } else {
                                            c.fail(ErrorKind::Http2, 1);
                                        }
                                    }
                                }
                                Event::GoAway { last_stream, code } => {
                                    // Streams above `last_stream` were not processed: they go
                                    // again on the next connection.
                                    let refused = window.take_above(last_stream.0);
                                    ctx.sub_in_flight(refused.len() as u64);
                                    sched.retry(refused);
                                    goaway = Some(code);
                                }
                                Event::ConnectionError(e) => failed = Some(e),
                            }
                        }
                        failed
                    };
                    if let Some(e) = failed {
                        // The client's GOAWAY is in `out`: send it if the socket takes it soon.
                        let _ = write_bounded(ctx, tls, out, &mut stop, ctx.now() + 1_000_000_000).await;
                        ctx.lose(ErrorKind::Http2, window.clear());
                        ctx.plan.note_error(ErrorKind::Http2, &e.to_string());
                        return SessionEnd { close: Close::Error, error: Some(e.to_string()) };
                    }
                }
                Err(e) => {
                    ctx.lose(ErrorKind::ConnectionLost, window.clear());
                    return SessionEnd { close: server_close(Some(&e), true), error: Some(e.to_string()) };
                }
            },
            _ = ctx.sleep_until(wake) => {}
            r = stop.changed() => { if r.is_err() { return SessionEnd::client(Close::End); } }
        }
    }
}

/// What a GOAWAY's code says, when it is not NO_ERROR.
fn goaway_error(code: ErrorCode) -> Option<String> {
    (code != ErrorCode::NO_ERROR).then(|| format!("GOAWAY {code}"))
}
