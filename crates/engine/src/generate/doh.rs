//! DoH (RFC 8484) over HTTP/2: one stream per query, up to `in_flight` at once and never more
//! than the server's SETTINGS_MAX_CONCURRENT_STREAMS (h2 holds new streams back).

use super::ctx::{Ctx, Schedule, Stop};
use super::stream::{server_close, ConnInfo, SessionEnd, TlsStream};
use bytes::Bytes;
use dnscost_load::{CloseMode, ConnPolicy, DohMethod};
use dnscost_stats::{Close, ErrorKind};
use dnscost_transport::socket;
use dnscost_wire::parse_response;
use futures_util::stream::{FuturesUnordered, StreamExt};
use http::HeaderValue;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::task::Poll;

enum Failure {
    Status,
    Http2,
    Timeout,
}

/// Runs one DoH connection until its policy, the server or the run ends it.
pub async fn session(
    ctx: &Ctx,
    sched: &mut Schedule,
    tls: TlsStream,
    mut policy: ConnPolicy,
    info: &mut ConnInfo,
) -> SessionEnd {
    let plan = &ctx.plan;
    let cfg = &plan.config;
    let fd = tls.get_ref().0.as_raw_fd();
    let handshake = h2::client::Builder::new()
        .initial_window_size(1 << 20)
        .initial_connection_window_size(1 << 22)
        .handshake::<_, Bytes>(tls)
        .await;
    let (mut send, mut conn) = match handshake {
        Ok(pair) => pair,
        Err(e) => return SessionEnd { close: Close::Error, error: Some(e.to_string()) },
    };
    let method = cfg.doh_method.unwrap_or_default();
    let timeout = plan.timeout_ns;
    let mut stop = ctx.stop.clone();
    let mut pending = FuturesUnordered::new();
    let sleep = tokio::time::sleep_until(ctx.instant(u64::MAX));
    tokio::pin!(sleep);
    let end = loop {
        let now = ctx.now();
        let state = *stop.borrow_and_update();
        if state == Stop::Abort {
            let n = pending.len() as u64;
            ctx.counters.borrow_mut().aborted += n;
            ctx.sub_in_flight(n);
            break SessionEnd::client(Close::End);
        }
        {
            let mut c = ctx.counters.borrow_mut();
            info.meter.tick(now, &mut c);
            if state == Stop::Running {
                sched.expire_unsent(now, timeout, &mut c);
            }
        }
        while state == Stop::Running && pending.len() < cfg.in_flight as usize && policy.may_send(now) && sched.due(now)
        {
            // Ask h2 for room without waiting: the server's stream limit may hold us back.
            match futures_util::future::poll_fn(|cx| Poll::Ready(send.poll_ready(cx))).await {
                Poll::Ready(Ok(())) => {}
                Poll::Pending => break,
                Poll::Ready(Err(e)) => {
                    ctx.lose(ErrorKind::ConnectionLost, pending.len() as u64);
                    return SessionEnd { close: Close::Error, error: Some(e.to_string()) };
                }
            }
            let mut c = ctx.counters.borrow_mut();
            let intended = sched.take(now, &mut c);
            let q = ctx.next_query();
            let req = &plan.doh[(q % plan.doh.len() as u64) as usize];
            let mut request = http::Request::new(());
            *request.uri_mut() = req.uri.clone();
            if method == DohMethod::Post {
                *request.method_mut() = http::Method::POST;
            }
            let headers = request.headers_mut();
            headers.insert(http::header::ACCEPT, HeaderValue::from_static("application/dns-message"));
            if method == DohMethod::Post {
                headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/dns-message"));
                headers.insert(http::header::CONTENT_LENGTH, req.content_length.clone());
            }
            let sent = send.send_request(request, method == DohMethod::Get).and_then(|(response, mut body)| {
                if method == DohMethod::Post {
                    body.send_data(req.body.clone(), true)?;
                }
                Ok(response)
            });
            let response = match sent {
                Ok(r) => r,
                Err(e) => {
                    c.fail(ErrorKind::Http2, 1);
                    drop(c);
                    ctx.lose(ErrorKind::ConnectionLost, pending.len() as u64);
                    return SessionEnd { close: Close::Error, error: Some(e.to_string()) };
                }
            };
            let deadline = ctx.instant(intended + timeout);
            pending.push(async move {
                let exchange = async {
                    let response = response.await.map_err(|_| Failure::Http2)?;
                    if response.status() != http::StatusCode::OK {
                        return Err(Failure::Status);
                    }
                    let mut body = response.into_body();
                    // Answers nearly always come in one DATA frame: keep it without a copy.
                    let mut data = Bytes::new();
                    while let Some(chunk) = body.data().await {
                        let chunk = chunk.map_err(|_| Failure::Http2)?;
                        let _ = body.flow_control().release_capacity(chunk.len());
                        data = if data.is_empty() { chunk } else { [&data[..], &chunk[..]].concat().into() };
                    }
                    Ok(data)
                };
                let result = tokio::time::timeout_at(deadline, exchange).await.unwrap_or(Err(Failure::Timeout));
                (intended, q, result)
            });
            policy.on_send(now);
            c.sent += 1;
            info.queries += 1;
            ctx.add_in_flight(1);
        }
        if state == Stop::Drain && pending.is_empty() {
            break SessionEnd::client(Close::End);
        }
        if let Some(p) = policy.close_now(now, pending.len()) {
            break p.into();
        }
        let mut wake = u64::MAX;
        if state == Stop::Running && pending.len() < cfg.in_flight as usize && policy.may_send(now) {
            if let Some(next) = sched.next_due(now) {
                wake = wake.min(next);
            }
        }
        if let Some(d) = policy.deadline().filter(|d| *d > now) {
            wake = wake.min(d);
        }
        sleep.as_mut().reset(ctx.instant(wake));
        tokio::select! {
            biased;
            Some((intended, q, result)) = pending.next(), if !pending.is_empty() => {
                let now = ctx.now();
                let mut c = ctx.counters.borrow_mut();
                ctx.sub_in_flight(1);
                policy.on_resolved(now);
                match result {
                    Ok(body) => {
                        info.answers += 1;
                        match parse_response(&body, Some(plan.queries.get(q).question())) {
                            Ok(r) => c.answer(r.rcode, now.saturating_sub(intended) / 1000),
                            Err(_) => c.fail(ErrorKind::Malformed, 1),
                        }
                    }
                    Err(Failure::Timeout) => c.timed_out += 1,
                    Err(Failure::Status) => c.fail(ErrorKind::HttpStatus, 1),
                    Err(Failure::Http2) => c.fail(ErrorKind::Http2, 1),
                }
            }
            r = &mut conn => {
                // The server ended the connection; streams still open are lost.
                let lost = pending.len() as u64;
                drop(pending);
                ctx.lose(ErrorKind::ConnectionLost, lost);
                info.meter.sample(&mut ctx.counters.borrow_mut());
                return match r {
                    Ok(()) => SessionEnd::client(Close::Goaway),
                    Err(e) if e.is_go_away() || e.is_remote() => SessionEnd { close: Close::Goaway, error: None },
                    Err(e) => match e.get_io() {
                        Some(io) => SessionEnd { close: server_close(Some(io), true), error: Some(e.to_string()) },
                        None => SessionEnd { close: Close::Error, error: Some(e.to_string()) },
                    },
                };
            }
            _ = &mut sleep => {}
            r = stop.changed() => { if r.is_err() { break SessionEnd::client(Close::End); } }
        }
    };
    // The client closes: GOAWAY, close_notify and FIN (graceful), a bare FIN, or RST.
    info.meter.sample(&mut ctx.counters.borrow_mut());
    drop(pending);
    // SAFETY: `conn` owns the socket and is alive until the end of this function.
    let sock = unsafe { BorrowedFd::borrow_raw(fd) };
    match cfg.close.unwrap_or_default() {
        CloseMode::Graceful => {
            drop(send);
            let _ = tokio::time::timeout(std::time::Duration::from_secs(1), &mut conn).await;
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
