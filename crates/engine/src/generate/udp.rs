//! UDP: one connected socket per slot, driven like a connection that never closes: the DNS
//! session of `tcp.rs` over the datagram carrier (`carrier::Datagrams`). With `udp_retry` its
//! window sends unanswered queries again as a stub resolver does (`window::Retransmit`).

use super::carrier::{Carrier, Datagrams, TcpMeter};
use super::ctx::{Ctx, Schedule, Stop};
use super::session::Tally;
use super::slot::{drive, wait_until, Connection};
use super::tcp::DnsStream;
use super::window::{Retransmit, Window};
use dnscost_load::{ConnPolicy, Lifetime};
use dnscost_stats::{Close, ErrorKind};
use dnscost_wire::FrameDecoder;
use std::rc::Rc;

/// Sends one slot's queries over its own socket until the run stops, each datagram behind
/// `proxy` (a PROXY v2 header) when given.
pub async fn run_slot(
    ctx: Rc<Ctx>,
    mut sched: Schedule,
    sock: tokio::net::UdpSocket,
    proxy: Option<Box<[u8]>>,
    first_id: u16,
) {
    let retransmit = ctx.setup.config.udp_retry.map(|r| Retransmit {
        every_ns: r.timeout_ms * 1_000_000,
        attempts: u8::try_from(r.attempts).expect("validated: 1..=10"),
    });
    let mut window = Window::new(ctx.setup.config.in_flight as usize, first_id).retransmitting(retransmit);
    let mut dec = FrameDecoder::new(16 * 1024);
    let mut out = Vec::with_capacity(512);
    let mut carrier = Carrier::Udp(Box::new(Datagrams::new(sock).behind(proxy)));
    loop {
        let now = ctx.now();
        let mut conn = Connection {
            carrier_room: true,
            policy: ConnPolicy::new(Lifetime::default(), None, now),
            tally: Tally::default(),
            meter: TcpMeter::new(now),
        };
        let mut session = DnsStream::new(&mut window, &mut dec, false);
        let end = drive(&ctx, &mut sched, &mut carrier, &mut session, &mut conn, &mut out).await;
        conn.meter.sample(&mut carrier, &mut ctx.counters.borrow_mut());
        if end.close == Close::End {
            break;
        }
        // The socket failed (its outstanding queries are lost): say why, pause, go on.
        if let Some(e) = &end.error {
            ctx.setup.note_error(ErrorKind::Connect, e);
        }
        sched.blocked(ctx.now(), true);
        if !wait_until(&ctx, ctx.now() + 50_000_000, &mut sched).await {
            break;
        }
    }
    let mut c = ctx.counters.borrow_mut();
    if ctx.state() == Stop::Abort {
        sched.abort(&mut c);
    }
    sched.close(ctx.stopped_at(), &mut c);
}

/// The udp session under a stub's retransmission policy, in virtual time: each test takes the
/// driver's turns (`slot::turn`) at the times the driver would wake (`slot::wake_at`), writes
/// and counts as the driver does, and plays the server by hand.
#[cfg(test)]
mod tests {
    use super::super::session::testing::{answer_to, with_ctx, MS};
    use super::super::session::Session;
    use super::super::slot::{turn, wake_at, Turn};
    use super::*;

    /// One socket's state, as `run_slot` and `drive` hold it.
    struct Socket {
        window: Window,
        dec: FrameDecoder,
        sched: Schedule,
        conn: Connection,
        out: Vec<u8>,
        room: bool,
    }

    impl Socket {
        /// A socket whose slot sends one query at 0 (`rate: once`).
        fn new(ctx: &Ctx) -> Self {
            let retransmit = ctx
                .setup
                .config
                .udp_retry
                .map(|r| Retransmit { every_ns: r.timeout_ms * MS, attempts: r.attempts as u8 });
            Socket {
                window: Window::new(ctx.setup.config.in_flight as usize, 100).retransmitting(retransmit),
                dec: FrameDecoder::new(4096),
                sched: Schedule::once(10_000 * MS),
                conn: Connection {
                    policy: ConnPolicy::new(Lifetime::default(), None, 0),
                    tally: Tally::default(),
                    meter: TcpMeter::new(0),
                    carrier_room: true,
                },
                out: Vec::new(),
                room: false,
            }
        }

        /// The driver's turn at `now`; the datagrams it wrote, counted as written.
        fn turn(&mut self, ctx: &Ctx, now: u64, state: Stop) -> (Turn, Vec<Vec<u8>>) {
            let mut session = DnsStream::new(&mut self.window, &mut self.dec, false);
            let t = turn(ctx, &mut self.sched, &mut session, &mut self.conn, &mut self.out, now, state);
            self.room = t.room;
            let mut c = ctx.counters.borrow_mut();
            c.sent += t.fresh;
            c.retransmitted += t.resent;
            let mut dec = FrameDecoder::new(4096);
            dec.spare()[..self.out.len()].copy_from_slice(&self.out);
            dec.advance(self.out.len());
            self.out.clear();
            (t, std::iter::from_fn(|| dec.next_frame().map(|f| f.unwrap().to_vec())).collect())
        }

        /// When the driver would take its next turn, with nothing read meanwhile.
        fn wake(&mut self, ctx: &Ctx, now: u64, state: Stop) -> u64 {
            let session = DnsStream::new(&mut self.window, &mut self.dec, false);
            wake_at(&session, &self.sched, &self.conn, now, state, self.room, ctx.setup.timeout_ns)
        }

        /// A datagram from the server arrives at `now`.
        fn deliver(&mut self, ctx: &Ctx, now: u64, msg: &[u8]) {
            let mut session = DnsStream::new(&mut self.window, &mut self.dec, false);
            let mut framed = (msg.len() as u16).to_be_bytes().to_vec();
            framed.extend_from_slice(msg);
            session.spare()[..framed.len()].copy_from_slice(&framed);
            let mut step = super::super::session::Step {
                ctx,
                sched: &mut self.sched,
                policy: &mut self.conn.policy,
                tally: &mut self.conn.tally,
                out: &mut self.out,
                now,
                carrier_room: true,
            };
            assert!(session.receive(&mut step, framed.len()).is_none());
        }
    }

    fn config(retry: &str) -> String {
        format!(r#"{{"transport":"udp","target":"127.0.0.1:53","rate":"once","in_flight":4{retry}}}"#)
    }

    fn counts(ctx: &Ctx) -> (u64, u64, u64, u64, u64) {
        let c = ctx.counters.borrow();
        (c.sent, c.retransmitted, c.answered, c.timed_out, c.unmatched)
    }

    #[test]
    fn an_unanswered_query_goes_again_a_try_later_with_its_id_and_times_out_after_its_last_try() {
        with_ctx(&config(r#","udp_retry":{"timeout_ms":200,"attempts":2}"#), |ctx| {
            assert_eq!(ctx.setup.timeout_ns, 400 * MS, "the query's timeout is every try's");
            assert_eq!(ctx.setup.config.timeout_ms, 400, "and the start record says so");
            let mut s = Socket::new(ctx);
            let (t, first) = s.turn(ctx, 0, Stop::Running);
            assert_eq!((t.fresh, t.resent, first.len()), (1, 0, 1));
            assert_eq!(s.wake(ctx, 0, Stop::Running), 200 * MS, "the driver wakes for the retransmission");
            assert!(s.turn(ctx, 199 * MS, Stop::Running).1.is_empty());
            // Sent again while the run drains too, as the same message with the same ID.
            let (t, again) = s.turn(ctx, 200 * MS, Stop::Drain);
            assert_eq!((t.fresh, t.resent), (0, 1));
            assert_eq!(again, first);
            assert_eq!(s.wake(ctx, 200 * MS, Stop::Drain), 400 * MS, "no third try: then its expiry");
            let (t, none) = s.turn(ctx, 399 * MS, Stop::Drain);
            assert_eq!((t.resent, none.len(), ctx.counters.borrow().timed_out), (0, 0, 0));
            s.turn(ctx, 400 * MS, Stop::Drain);
            assert_eq!(counts(ctx), (1, 1, 0, 1, 0), "sent once, again once, timed out");
            assert_eq!(ctx.in_flight.get(), 0);
            assert_eq!(s.wake(ctx, 400 * MS, Stop::Drain), u64::MAX);
        });
    }

    #[test]
    fn an_answer_to_either_send_answers_once_with_latency_from_the_intended_time() {
        with_ctx(&config(r#","udp_retry":{"timeout_ms":200,"attempts":3}"#), |ctx| {
            let mut s = Socket::new(ctx);
            let q = s.turn(ctx, 0, Stop::Running).1.remove(0);
            assert_eq!(s.turn(ctx, 200 * MS, Stop::Running).1, std::slice::from_ref(&q));
            // The answer to one of the two sends comes 30 ms after the retransmission; the
            // other's answer comes too and matches nothing.
            s.deliver(ctx, 230 * MS, &answer_to(&q));
            s.deliver(ctx, 231 * MS, &answer_to(&q));
            assert_eq!(counts(ctx), (1, 1, 1, 0, 1));
            let latency = ctx.counters.borrow().latency.max();
            assert!((229_000..=231_000).contains(&latency), "a try's timeout and 30 ms: {latency} µs");
            assert_eq!(s.wake(ctx, 231 * MS, Stop::Running), u64::MAX, "nothing goes again");
            assert!(s.turn(ctx, 400 * MS, Stop::Running).1.is_empty());
            assert_eq!((ctx.counters.borrow().retransmitted, ctx.in_flight.get()), (1, 0));
        });
    }

    #[test]
    fn a_query_answered_in_time_or_with_one_attempt_goes_once() {
        with_ctx(&config(r#","udp_retry":{"timeout_ms":200,"attempts":2}"#), |ctx| {
            let mut s = Socket::new(ctx);
            let q = s.turn(ctx, 0, Stop::Running).1.remove(0);
            s.deliver(ctx, 150 * MS, &answer_to(&q));
            assert_eq!(s.wake(ctx, 150 * MS, Stop::Running), u64::MAX);
            assert!(s.turn(ctx, 200 * MS, Stop::Running).1.is_empty());
            assert_eq!(counts(ctx), (1, 0, 1, 0, 0));
        });
        with_ctx(&config(r#","udp_retry":{"timeout_ms":200,"attempts":1}"#), |ctx| {
            let mut s = Socket::new(ctx);
            s.turn(ctx, 0, Stop::Running);
            assert_eq!(s.wake(ctx, 0, Stop::Running), 200 * MS, "its expiry, one try");
            assert!(s.turn(ctx, 200 * MS, Stop::Running).1.is_empty());
            assert_eq!(counts(ctx), (1, 0, 0, 1, 0));
        });
        // Without udp_retry, as before: no retransmission to wake for, the query's timeout.
        with_ctx(&config(""), |ctx| {
            let mut s = Socket::new(ctx);
            s.turn(ctx, 0, Stop::Running);
            assert_eq!(s.wake(ctx, 0, Stop::Running), 2_000 * MS);
            assert!(s.turn(ctx, 1_999 * MS, Stop::Running).1.is_empty());
            s.turn(ctx, 2_000 * MS, Stop::Running);
            assert_eq!(counts(ctx), (1, 0, 0, 1, 0));
        });
    }
}
