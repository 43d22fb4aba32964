//! The DNS session of udp, tcp and dot (RFC 1035, RFC 7766, RFC 7858): queries pipelined up to
//! `in_flight`, two-octet framing (over udp the carrier frames each datagram), answers matched
//! by DNS ID. Sans-I/O (see `session.rs`).

use super::ctx::Stop;
use super::session::{End, Sent, Session, SessionEnd, Step};
use super::window::Window;
use dnscost_stats::{Close, ErrorKind};
use dnscost_wire::{parse_response, FrameDecoder};

/// One udp socket's, or tcp or dot connection's, session. The window and the read buffer belong to the slot and
/// are kept from one connection to the next (IDs keep running; a connection that carries one
/// query does not pay for allocating and zeroing a buffer).
///
/// When the server closes the connection in order (FIN or close_notify) with queries
/// outstanding, they are sent again on the next connection (RFC 7766 §6.2.1 lets a server close
/// at any time; the client retries), within their timeout.
pub struct DnsStream<'a> {
    window: &'a mut Window,
    dec: &'a mut FrameDecoder,
    tls: bool,
}

impl<'a> DnsStream<'a> {
    pub fn new(window: &'a mut Window, dec: &'a mut FrameDecoder, tls: bool) -> Self {
        dec.clear();
        DnsStream { window, dec, tls }
    }
}

impl Session for DnsStream<'_> {
    fn spare(&mut self) -> &mut [u8] {
        self.dec.spare()
    }

    fn release(&mut self) {
        self.dec.release();
    }

    fn outstanding(&self) -> usize {
        self.window.len()
    }

    fn oldest(&self) -> Option<u64> {
        self.window.oldest()
    }

    fn expire(&mut self, _: &mut Step<'_>, deadline: u64) -> u64 {
        self.window.expire(deadline)
    }

    fn send(&mut self, s: &mut Step<'_>) -> Sent {
        let ctx = s.ctx;
        let mut fresh = 0;
        let mut c = ctx.counters.borrow_mut();
        if !s.carrier_room {
            // Queries wait in the carrier for the server to allow streams (QUIC): the others
            // wait in the schedule (an open loop's expire `unsent`; a closed loop offers none
            // meanwhile, as its window is taken by the waiting ones).
            return Sent { fresh: 0, room: false };
        }
        while !self.window.is_full() && s.policy.may_send(s.now) && s.sched.due(s.now) {
            let (intended, again) = s.sched.take(s.now, &mut c);
            let q = again.unwrap_or_else(|| ctx.next_query());
            let id = self.window.insert(intended, q, s.now).expect("window has room");
            ctx.setup.queries.get(q).write_framed(id, s.out);
            s.policy.on_send(s.now);
            fresh += u64::from(again.is_none());
            s.tally.queries += 1;
            ctx.add_in_flight(1);
        }
        Sent { fresh, room: !self.window.is_full() && s.policy.may_send(s.now) }
    }

    fn retransmit(&mut self, s: &mut Step<'_>) -> u64 {
        let (queries, out) = (&s.ctx.setup.queries, &mut *s.out);
        self.window.retransmit(s.now, |id, q| queries.get(q).write_framed(id, out))
    }

    fn next_retransmit(&self) -> Option<u64> {
        self.window.next_retransmit()
    }

    fn receive(&mut self, s: &mut Step<'_>, n: usize) -> Option<SessionEnd> {
        let ctx = s.ctx;
        self.dec.advance(n);
        let mut c = ctx.counters.borrow_mut();
        while let Some(frame) = self.dec.next_frame() {
            let Ok(msg) = frame else {
                drop(c);
                ctx.lose(ErrorKind::Malformed, self.window.clear());
                return Some(SessionEnd { close: Close::Error, error: Some("zero-length frame".into()) });
            };
            let Some(id) = msg.get(..2).map(|b| u16::from_be_bytes([b[0], b[1]])) else {
                c.unmatched += 1;
                continue;
            };
            let Some(o) = self.window.remove(id) else {
                c.unmatched += 1;
                continue;
            };
            ctx.sub_in_flight(1);
            s.policy.on_resolved(s.now);
            s.tally.answers += 1;
            match parse_response(msg, Some(ctx.setup.queries.get(o.query).question())) {
                // Over udp the client would ask again over tcp; this one is not answered.
                Ok(r) if r.truncated => c.fail(ErrorKind::Truncated, 1),
                Ok(r) => c.answer(r.rcode, s.now.saturating_sub(o.intended) / 1000),
                Err(_) => c.fail(ErrorKind::Malformed, 1),
            }
        }
        None
    }

    fn ended(&mut self, s: &mut Step<'_>, end: &End) -> SessionEnd {
        let close = end.close(self.tls);
        let orderly = matches!(close, Close::Fin | Close::CloseNotify | Close::ConnectionClose | Close::Goaway);
        let cut = self.dec.buffered();
        if orderly && cut > 0 {
            // The server closed in the middle of an answer: no close in order, a framing
            // error; what was outstanding is lost (sent again, it would time out unanswered).
            let announced = self.dec.pending_frame_len().map_or(String::new(), |n| format!(" of {}", n + 2));
            let error =
                format!("the server closed the connection in the middle of an answer ({cut}{announced} octets)");
            s.ctx.lose(ErrorKind::ConnectionLost, self.window.clear());
            s.ctx.setup.note_error(ErrorKind::ConnectionLost, &error);
            return SessionEnd { close, error: Some(error) };
        }
        if orderly {
            // Closed in order: the outstanding queries were not processed and go again.
            let refused = self.window.drain();
            s.ctx.sub_in_flight(refused.len() as u64);
            s.sched.retry(refused);
        } else {
            s.ctx.lose(ErrorKind::ConnectionLost, self.window.clear());
        }
        SessionEnd { close, error: end.message().filter(|_| !orderly) }
    }

    fn finished(&self, state: Stop) -> Option<SessionEnd> {
        (state == Stop::Drain).then(|| SessionEnd::client(Close::End))
    }

    fn clear(&mut self) -> u64 {
        self.window.clear()
    }

    fn goodbye(&mut self, _: &mut Vec<u8>) {}

    fn forget(&mut self, id: u16) -> Option<super::window::Outstanding> {
        self.window.remove(id)
    }

    fn resent(&self, id: u16) -> bool {
        self.window.resent(id)
    }

    fn intended(&self, id: u16) -> Option<u64> {
        self.window.intended(id)
    }
}

#[cfg(test)]
mod tests {
    use super::super::ctx::{Ctx, Schedule};
    use super::super::session::testing::{answer_to, with_ctx, MS};
    use super::super::session::Tally;
    use super::*;
    use dnscost_load::{ConnPolicy, Lifetime, PolicyClose};
    use dnscost_wire::FrameDecoder;

    const TCP: &str = r#"{"transport":"tcp","target":"127.0.0.1:53","connections":1,"in_flight":3}"#;

    /// A connection under test: its session's state and what the driver would hold.
    struct Conn {
        window: Window,
        dec: FrameDecoder,
        sched: Schedule,
        policy: ConnPolicy,
        tally: Tally,
        out: Vec<u8>,
    }

    impl Conn {
        fn new(ctx: &Ctx, sched: Schedule, lifetime: Lifetime, idle_ms: Option<u64>) -> Self {
            Conn {
                window: Window::new(ctx.setup.config.in_flight as usize, 100),
                dec: FrameDecoder::new(4096),
                sched,
                policy: ConnPolicy::new(lifetime, idle_ms, 0),
                tally: Tally::default(),
                out: Vec::new(),
            }
        }

        /// Runs `f` on the session with the connection's state at time `now`.
        fn at<R>(&mut self, ctx: &Ctx, now: u64, f: impl FnOnce(&mut DnsStream<'_>, &mut Step<'_>) -> R) -> R {
            let mut session = DnsStream { window: &mut self.window, dec: &mut self.dec, tls: false };
            let mut step = Step {
                ctx,
                sched: &mut self.sched,
                policy: &mut self.policy,
                tally: &mut self.tally,
                out: &mut self.out,
                now,
                carrier_room: true,
            };
            f(&mut session, &mut step)
        }

        /// Delivers bytes as the server sent them.
        fn deliver(&mut self, ctx: &Ctx, now: u64, bytes: &[u8]) -> Option<SessionEnd> {
            self.at(ctx, now, |session, step| {
                session.spare()[..bytes.len()].copy_from_slice(bytes);
                session.receive(step, bytes.len())
            })
        }

        /// The queries written since the last call, as (ID, message).
        fn written(&mut self) -> Vec<Vec<u8>> {
            let mut dec = FrameDecoder::new(4096);
            dec.spare()[..self.out.len()].copy_from_slice(&self.out);
            dec.advance(self.out.len());
            self.out.clear();
            std::iter::from_fn(|| dec.next_frame().map(|f| f.unwrap().to_vec())).collect()
        }
    }

    fn framed(msg: &[u8]) -> Vec<u8> {
        let mut v = (msg.len() as u16).to_be_bytes().to_vec();
        v.extend_from_slice(msg);
        v
    }

    #[test]
    fn queries_are_pipelined_up_to_in_flight_and_matched_by_id() {
        with_ctx(TCP, |ctx| {
            let mut conn = Conn::new(ctx, Schedule::closed(3, 10_000 * MS), Lifetime::default(), None);
            let sent = conn.at(ctx, 0, |s, step| s.send(step));
            assert_eq!(sent, Sent { fresh: 3, room: false }, "three in flight, no room for a fourth");
            let queries = conn.written();
            assert_eq!(queries.len(), 3, "three frames in one write");
            let ids: Vec<_> = queries.iter().map(|q| u16::from_be_bytes([q[0], q[1]])).collect();
            assert!(ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2], "{ids:?}");
            // The second answer arrives first, split across two reads; then one for no query.
            let mut bytes = framed(&answer_to(&queries[1]));
            bytes.extend(framed(&answer_to(&queries[0])));
            let (a, b) = bytes.split_at(5);
            assert!(conn.deliver(ctx, 2 * MS, a).is_none());
            assert_eq!(ctx.counters.borrow().answered, 0, "half a frame is not an answer");
            assert!(conn.deliver(ctx, 3 * MS, b).is_none());
            let mut stray = answer_to(&queries[0]);
            stray[0] ^= 0xff;
            assert!(conn.deliver(ctx, 3 * MS, &framed(&stray)).is_none());
            {
                let c = ctx.counters.borrow();
                assert_eq!((c.answered, c.unmatched), (2, 1));
                // HDR histograms keep three significant digits.
                assert!((2997..=3003).contains(&c.latency.max()), "latency from the intended time, in µs");
            }
            assert_eq!(ctx.in_flight.get(), 1);
            assert_eq!(conn.tally, Tally { queries: 3, answers: 2 });
            // Two places free again: two more go, in one write.
            let sent = conn.at(ctx, 4 * MS, |s, step| s.send(step));
            assert_eq!((sent.fresh, conn.written().len()), (2, 2));
        });
    }

    #[test]
    fn a_lifetime_in_queries_stops_sending_and_closes_once_resolved() {
        with_ctx(TCP, |ctx| {
            let lifetime = Lifetime { queries: Some(2), duration_ms: None };
            let mut conn = Conn::new(ctx, Schedule::closed(3, 10_000 * MS), lifetime, None);
            let sent = conn.at(ctx, 0, |s, step| s.send(step));
            assert_eq!(sent, Sent { fresh: 2, room: false });
            let queries = conn.written();
            assert_eq!(conn.policy.close_now(MS, 2), None, "not while queries are outstanding");
            for q in &queries {
                conn.deliver(ctx, MS, &framed(&answer_to(q)));
            }
            assert_eq!(conn.policy.close_now(MS, conn.window.len()), Some(PolicyClose::Lifetime));
        });
    }

    #[test]
    fn an_idle_connection_closes_after_its_idle_timeout() {
        with_ctx(TCP, |ctx| {
            // One query per connection, then idle for 100 ms.
            let mut conn = Conn::new(ctx, Schedule::once(10_000 * MS), Lifetime::default(), Some(100));
            assert_eq!(conn.at(ctx, 0, |s, step| s.send(step)).fresh, 1);
            let q = conn.written().remove(0);
            conn.deliver(ctx, 10 * MS, &framed(&answer_to(&q)));
            assert_eq!(conn.at(ctx, 20 * MS, |s, step| s.send(step)).fresh, 0, "once: nothing more is due");
            assert_eq!(conn.policy.close_now(109 * MS, 0), None);
            assert_eq!(conn.policy.close_now(110 * MS, 0), Some(PolicyClose::Idle), "idle from the answer");
        });
    }

    #[test]
    fn an_orderly_server_close_sends_outstanding_queries_again_and_a_reset_loses_them() {
        with_ctx(TCP, |ctx| {
            let mut conn = Conn::new(ctx, Schedule::closed(3, 10_000 * MS), Lifetime::default(), None);
            conn.at(ctx, 0, |s, step| s.send(step));
            let first = conn.written();
            let end = conn.at(ctx, MS, |s, step| s.ended(step, &End::Closed));
            assert_eq!((end.close, end.error), (Close::Fin, None));
            assert_eq!(ctx.in_flight.get(), 0);
            assert_eq!(conn.sched.peek_retry(), Some(0), "the oldest query goes first again");
            {
                let c = ctx.counters.borrow();
                assert_eq!((c.offered, c.failed.iter().sum::<u64>()), (3, 0), "refused, not failed");
            }
            // The next connection sends the same three queries, not counted offered twice.
            let sent = conn.at(ctx, 2 * MS, |s, step| s.send(step));
            assert_eq!(sent.fresh, 0);
            let again = conn.written();
            let question = |m: &Vec<u8>| m[12..].to_vec();
            assert_eq!(again.iter().map(question).collect::<Vec<_>>(), first.iter().map(question).collect::<Vec<_>>());
            assert_eq!(ctx.counters.borrow().offered, 3);
            let reset = End::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
            let end = conn.at(ctx, 3 * MS, |s, step| s.ended(step, &reset));
            assert_eq!(end.close, Close::Rst);
            assert_eq!(ctx.counters.borrow().failed[ErrorKind::ConnectionLost as usize], 3);
            assert_eq!(conn.sched.peek_retry(), None);
        });
    }

    #[test]
    fn a_server_close_in_the_middle_of_an_answer_loses_the_outstanding_queries() {
        with_ctx(TCP, |ctx| {
            let mut conn = Conn::new(ctx, Schedule::closed(3, 10_000 * MS), Lifetime::default(), None);
            conn.at(ctx, 0, |s, step| s.send(step));
            conn.written();
            // A length prefix of 65 535 octets and 100 of them, then FIN.
            let mut cut = vec![0xff, 0xff];
            cut.extend([0u8; 100]);
            assert!(conn.deliver(ctx, MS, &cut).is_none());
            let end = conn.at(ctx, 2 * MS, |s, step| s.ended(step, &End::Closed));
            assert_eq!(end.close, Close::Fin);
            let error = end.error.unwrap_or_default();
            assert!(error.contains("in the middle of an answer (102 of 65537 octets)"), "{error}");
            assert_eq!(ctx.counters.borrow().failed[ErrorKind::ConnectionLost as usize], 3);
            assert_eq!(ctx.in_flight.get(), 0);
            assert_eq!(conn.sched.peek_retry(), None, "nothing goes again");
        });
    }

    #[test]
    fn outstanding_queries_expire_in_send_order_and_a_zero_length_frame_ends_the_session() {
        with_ctx(TCP, |ctx| {
            let mut conn = Conn::new(ctx, Schedule::closed(3, 10_000 * MS), Lifetime::default(), None);
            conn.at(ctx, 0, |s, step| s.send(step));
            conn.written();
            let expired = conn.at(ctx, 500 * MS, |s, step| s.expire(step, MS));
            assert_eq!((expired, conn.window.len()), (3, 0), "sent at 0, deadline past");
            ctx.sub_in_flight(3);
            conn.at(ctx, 500 * MS, |s, step| s.send(step));
            conn.written();
            let end = conn.deliver(ctx, 501 * MS, &[0, 0]).expect("the session ends");
            assert_eq!(end.close, Close::Error);
            assert_eq!(ctx.counters.borrow().failed[ErrorKind::Malformed as usize], 3);
            assert_eq!(ctx.in_flight.get(), 0);
        });
    }
}
