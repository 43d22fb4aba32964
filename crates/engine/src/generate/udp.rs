//! UDP: one connected socket per slot, queries matched by ID.

use super::ctx::{Ctx, Schedule, Stop};
use super::window::Window;
use dnscost_stats::ErrorKind;
use dnscost_transport::udp;
use dnscost_wire::parse_response;
use std::rc::Rc;
use tokio::io::Interest;
use tokio::net::UdpSocket;

/// Sends one slot's queries over its own socket until the run stops.
pub async fn run_slot(ctx: Rc<Ctx>, mut sched: Schedule, sock: UdpSocket, first_id: u16) {
    let plan = ctx.plan.clone();
    let timeout = plan.timeout_ns;
    let mut window = Window::new(plan.config.in_flight as usize, first_id);
    let mut stop = ctx.stop.clone();
    let mut out = Vec::with_capacity(512);
    let mut lens: Vec<(u16, u16)> = Vec::new();
    let mut segmenting = udp::segments_supported(&sock);
    // Datagrams up to the advertised EDNS size (4096 octets at least), as many a call as fit
    // in 64 KiB and the in-flight limit allows.
    let size = (plan.config.edns_udp_size as usize).max(4096);
    let mut batch = udp::RecvBatch::new((65_536 / size).min(plan.config.in_flight as usize), size);
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
            // Every query due now, back to back in `out`; then sent in runs of equal length.
            out.clear();
            lens.clear();
            while !window.is_full() && sched.due(now) {
                let (intended, _) = sched.take(now, &mut ctx.counters.borrow_mut());
                let q = ctx.next_query();
                let id = window.insert(intended, q).expect("window has room");
                let at = out.len();
                plan.queries.get(q).write(id, &mut out);
                lens.push((id, (out.len() - at) as u16));
            }
            let mut at = 0;
            let mut i = 0;
            while i < lens.len() {
                let run = if segmenting { equal_run(&lens[i..]) } else { 1 };
                let bytes = lens[i..i + run].iter().map(|&(_, l)| l as usize).sum::<usize>();
                let datagrams = &out[at..at + bytes];
                let sent = send_run(&sock, datagrams, lens[i].1, run > 1).await;
                let sent = match sent {
                    // The socket or device cannot segment: one datagram a call from now on.
                    Err(e) if run > 1 && matches!(e.raw_os_error(), Some(libc::EIO | libc::EINVAL)) => {
                        segmenting = false;
                        continue;
                    }
                    sent => sent,
                };
                let mut c = ctx.counters.borrow_mut();
                match sent {
                    Ok(_) => {
                        c.sent += run as u64;
                        c.packets_sent += run as u64;
                        c.bytes_sent += bytes as u64;
                        ctx.add_in_flight(run as u64);
                    }
                    Err(e) => {
                        for &(id, _) in &lens[i..i + run] {
                            window.remove(id);
                        }
                        // On a connected socket, an earlier ICMP port unreachable surfaces here.
                        let kind = match e.kind() {
                            std::io::ErrorKind::ConnectionRefused => ErrorKind::Refused,
                            _ => ErrorKind::Connect,
                        };
                        c.fail(kind, run as u64);
                        ctx.plan.note_error(kind, &e.to_string());
                    }
                }
                at += bytes;
                i += run;
            }
        }
        loop {
            let n = match sock.try_io(Interest::READABLE, || batch.recv(&sock)) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    ctx.counters.borrow_mut().conn_fail(ErrorKind::Refused);
                    ctx.plan.note_error(ErrorKind::Refused, &e.to_string());
                    continue;
                }
                Err(_) => break,
            };
            let now = ctx.now();
            let mut c = ctx.counters.borrow_mut();
            for k in 0..n {
                let (msg, cut) = batch.get(k);
                c.packets_received += 1;
                c.bytes_received += msg.len() as u64;
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
                    _ if cut => c.fail(ErrorKind::Malformed, 1),
                    Ok(r) if r.truncated => c.fail(ErrorKind::Truncated, 1),
                    Ok(r) => c.answer(r.rcode, now.saturating_sub(o.intended) / 1000),
                    Err(_) => c.fail(ErrorKind::Malformed, 1),
                }
            }
            if n < batch.capacity() {
                break;
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

/// How many datagrams from the start of `lens` (id, length) go in one segmented send: those of
/// the first one's length, then at most one shorter (the kernel's rule), within the segment and
/// size limits.
fn equal_run(lens: &[(u16, u16)]) -> usize {
    let first = lens[0].1;
    let mut run = 0;
    let mut bytes = 0usize;
    for &(_, l) in lens.iter().take(udp::MAX_SEGMENTS) {
        if l > first || bytes + l as usize > 65_000 {
            break;
        }
        run += 1;
        bytes += l as usize;
        if l < first {
            break;
        }
    }
    run
}

/// Sends one run of datagrams: segmented in one call when `segmented`, else the one datagram;
/// waits for room in the send buffer.
async fn send_run(sock: &UdpSocket, datagrams: &[u8], segment: u16, segmented: bool) -> std::io::Result<usize> {
    use std::io::ErrorKind::WouldBlock;
    if !segmented {
        return match sock.try_send(datagrams) {
            Err(e) if e.kind() == WouldBlock => sock.send(datagrams).await,
            r => r,
        };
    }
    let send = || udp::send_segments(sock, datagrams, segment);
    match sock.try_io(Interest::WRITABLE, send) {
        Err(e) if e.kind() == WouldBlock => sock.async_io(Interest::WRITABLE, send).await,
        r => r,
    }
}

#[cfg(test)]
mod tests {
    use super::equal_run;

    fn lens(ls: &[u16]) -> Vec<(u16, u16)> {
        ls.iter().enumerate().map(|(i, &l)| (i as u16, l)).collect()
    }

    #[test]
    fn runs_are_equal_lengths_then_at_most_one_shorter() {
        assert_eq!(equal_run(&lens(&[40, 40, 40])), 3);
        assert_eq!(equal_run(&lens(&[40, 40, 30, 40])), 3);
        assert_eq!(equal_run(&lens(&[40, 50, 40])), 1);
        assert_eq!(equal_run(&lens(&[40])), 1);
        assert_eq!(equal_run(&lens(&[40; 100])), dnscost_transport::udp::MAX_SEGMENTS);
        assert_eq!(equal_run(&lens(&[1200; 64])), 54); // 65 000 octets at most
    }
}
