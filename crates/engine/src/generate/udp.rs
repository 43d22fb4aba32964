//! UDP: one connected socket per slot, queries matched by ID.

use super::ctx::{Ctx, Schedule, Stop};
use super::window::Window;
use dnscost_stats::ErrorKind;
use dnscost_wire::parse_response;
use std::rc::Rc;

/// Sends one slot's queries over its own socket until the run stops.
pub async fn run_slot(ctx: Rc<Ctx>, mut sched: Schedule, sock: tokio::net::UdpSocket, first_id: u16) {
    let plan = ctx.plan.clone();
    let timeout = plan.timeout_ns;
    let mut window = Window::new(plan.config.in_flight as usize, first_id);
    let mut stop = ctx.stop.clone();
    let mut out = Vec::with_capacity(512);
    let mut buf = vec![0u8; 65_536];
    loop {
        let now = ctx.now();
        let state = ctx.state(&mut stop);
        if state == Stop::Abort {
            let n = window.clear();
            ctx.counters.borrow_mut().aborted += n;
            ctx.sub_in_flight(n);
            break;
        }
        let expired = now.checked_sub(timeout).map_or(0, |deadline| window.expire(deadline));
        if expired > 0 {
            ctx.counters.borrow_mut().timed_out += expired;
            ctx.sub_in_flight(expired);
        }
        if state == Stop::Running {
            let free = (plan.config.in_flight as usize).saturating_sub(window.len()) as u64;
            sched.expire_unsent(now, timeout, free, &mut ctx.counters.borrow_mut());
            while !window.is_full() && sched.due(now) {
                let (intended, _) = sched.take(now, &mut ctx.counters.borrow_mut());
                let q = ctx.next_query();
                let id = window.insert(intended, q).expect("window has room");
                out.clear();
                plan.queries.get(q).write(id, &mut out);
                let mut sent = sock.try_send(&out);
                if sent.as_ref().is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock) {
                    // Readiness not known yet, or the send buffer is full: wait for room.
                    sent = sock.send(&out).await;
                }
                let mut c = ctx.counters.borrow_mut();
                match sent {
                    Ok(n) => {
                        c.sent += 1;
                        c.packets_sent += 1;
                        c.bytes_sent += n as u64;
                        ctx.add_in_flight(1);
                    }
                    Err(e) => {
                        window.remove(id);
                        // On a connected socket, an earlier ICMP port unreachable surfaces here.
                        let kind = match e.kind() {
                            std::io::ErrorKind::ConnectionRefused => ErrorKind::Refused,
                            _ => ErrorKind::Connect,
                        };
                        c.fail(kind, 1);
                        ctx.plan.note_error(kind, &e.to_string());
                    }
                }
            }
        }
        loop {
            match sock.try_recv(&mut buf) {
                Ok(n) => {
                    let now = ctx.now();
                    let mut c = ctx.counters.borrow_mut();
                    c.packets_received += 1;
                    c.bytes_received += n as u64;
                    let msg = &buf[..n];
                    let Some(id) = msg.get(..2).map(|b| u16::from_be_bytes([b[0], b[1]])) else {
                        c.unmatched += 1;
                        continue;
                    };
                    let Some(o) = window.remove(id) else {
                        c.unmatched += 1;
                        continue;
                    };
                    ctx.sub_in_flight(1);
                    match parse_response(msg, Some(plan.queries.get(o.query).question())) {
                        Ok(r) if r.truncated => c.fail(ErrorKind::Truncated, 1),
                        Ok(r) => c.answer(r.rcode, now.saturating_sub(o.intended) / 1000),
                        Err(_) => c.fail(ErrorKind::Malformed, 1),
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    ctx.counters.borrow_mut().conn_fail(ErrorKind::Refused);
                    ctx.plan.note_error(ErrorKind::Refused, &e.to_string());
                }
                Err(_) => break,
            }
        }
        if state == Stop::Drain && window.len() == 0 {
            break;
        }
        let mut wake = u64::MAX;
        if let Some(oldest) = window.oldest() {
            wake = wake.min(oldest + timeout);
        }
        if state == Stop::Running {
            if let Some(t) = sched.wake(now, !window.is_full(), timeout) {
                wake = wake.min(t);
            }
        }
        tokio::select! {
            biased;
            r = sock.readable() => { if r.is_err() { tokio::task::yield_now().await; } }
            _ = ctx.sleep_until(wake) => {}
            r = stop.changed() => { if r.is_err() { break; } }
        }
    }
    sched.close(ctx.stopped_at(), &mut ctx.counters.borrow_mut());
}
