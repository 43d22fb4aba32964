//! DoH (RFC 8484) over HTTP/2, with the sans-I/O client of [`dnscost_wire::http2`]: one
//! stream per query, up to `in_flight` at once and never more than the server's
//! SETTINGS_MAX_CONCURRENT_STREAMS; answers matched by stream ID; a stream past its timeout is
//! cancelled with RST_STREAM so that the server frees it. Sans-I/O (see `session.rs`).

use super::ctx::Stop;
use super::session::{End, Sent, Session, SessionEnd, Step};
use super::window::StreamWindow;
use dnscost_load::DohMethod;
use dnscost_stats::{Close, ErrorKind};
use dnscost_wire::http2::{Client, ErrorCode, Event, Settings, StreamId};
use dnscost_wire::parse_response;

/// One DoH connection's session.
pub struct Doh {
    client: Client,
    window: StreamWindow,
    in_flight: usize,
    post: bool,
    /// The server's GOAWAY code, once it sent one.
    goaway: Option<ErrorCode>,
    /// Queries were due that the server's SETTINGS_MAX_CONCURRENT_STREAMS held back: those
    /// sent next waited for a stream.
    stalled: bool,
}

impl Doh {
    /// A session whose connection preface is appended to `out`.
    pub fn new(in_flight: usize, method: DohMethod, out: &mut Vec<u8>) -> Self {
        let mut client = Client::new(Settings::default());
        client.preface(out);
        Doh {
            client,
            window: StreamWindow::default(),
            in_flight,
            post: method == DohMethod::Post,
            goaway: None,
            stalled: false,
        }
    }

    fn goaway_end(code: ErrorCode) -> SessionEnd {
        SessionEnd { close: Close::Goaway, error: (code != ErrorCode::NO_ERROR).then(|| format!("GOAWAY {code}")) }
    }
}

impl Session for Doh {
    fn spare(&mut self) -> &mut [u8] {
        self.client.spare()
    }

    fn release(&mut self) {
        self.client.release();
    }

    fn outstanding(&self) -> usize {
        self.window.len()
    }

    fn oldest(&self) -> Option<u64> {
        self.window.oldest()
    }

    fn expire(&mut self, s: &mut Step<'_>, deadline: u64) -> u64 {
        let client = &mut self.client;
        self.window.expire(deadline, |stream| {
            client.reset(StreamId(stream), ErrorCode::CANCEL, s.out);
        })
    }

    fn send(&mut self, s: &mut Step<'_>) -> Sent {
        let (ctx, now) = (s.ctx, s.now);
        let setup = &ctx.setup;
        let mut c = ctx.counters.borrow_mut();
        let mut fresh = 0;
        let wants = self.window.len() < self.in_flight && s.policy.may_send(now);
        // False while the server lets no stream open, or a body does not fit its window.
        let mut room = wants && self.client.can_send();
        let waited = std::mem::take(&mut self.stalled);
        while room && s.sched.due(now) {
            let q = s.sched.peek_retry().unwrap_or_else(|| ctx.peek_query());
            let (template, body) = if self.post {
                (&setup.doh[0], setup.queries.get(q).bytes())
            } else {
                (&setup.doh[(q % setup.doh.len() as u64) as usize], &[][..])
            };
            let Ok(stream) = self.client.send(template, body, s.out) else {
                // The server's limits (or a GOAWAY, or identifiers used up): wait.
                room = false;
                break;
            };
            let (intended, again) = s.sched.take(now, &mut c);
            if again.is_none() {
                ctx.next_query();
                fresh += 1;
            }
            self.window.insert(stream.0, intended, q);
            c.stream_waits += u64::from(waited);
            s.policy.on_send(now);
            s.tally.queries += 1;
            ctx.add_in_flight(1);
            room = self.window.len() < self.in_flight && self.client.can_send() && s.policy.may_send(now);
        }
        // Queries are due that the connection cannot take, and none is outstanding: a blocked
        // closed loop (one with queries outstanding offers more as they are answered).
        let open = self.window.len() < self.in_flight && s.policy.may_send(now);
        s.sched.blocked(now, wants && !room && open && self.window.len() == 0);
        let limited = self.client.open_streams() as u64 >= u64::from(self.client.max_concurrent_streams());
        self.stalled = open && limited && s.sched.due(now);
        Sent { fresh, room }
    }

    fn receive(&mut self, s: &mut Step<'_>, n: usize) -> Option<SessionEnd> {
        let (ctx, now) = (s.ctx, s.now);
        self.client.advance(n);
        let mut c = ctx.counters.borrow_mut();
        while let Some(event) = self.client.next_event(s.out) {
            match event {
                Event::Response { stream, status, body } => {
                    let Some(o) = self.window.remove(stream.0) else {
                        c.unmatched += 1;
                        continue;
                    };
                    ctx.sub_in_flight(1);
                    s.policy.on_resolved(now);
                    if status != 200 {
                        c.fail(ErrorKind::HttpStatus, 1);
                        continue;
                    }
                    s.tally.answers += 1;
                    match parse_response(body, Some(ctx.setup.queries.get(o.query).question())) {
                        Ok(r) => c.answer(r.rcode, now.saturating_sub(o.intended) / 1000),
                        Err(_) => c.fail(ErrorKind::Malformed, 1),
                    }
                }
                Event::Reset { stream, code } => {
                    if let Some(o) = self.window.remove(stream.0) {
                        ctx.sub_in_flight(1);
                        s.policy.on_resolved(now);
                        if code == ErrorCode::REFUSED_STREAM {
                            // Not processed (RFC 9113 §8.7): send it again.
                            s.sched.retry([o]);
                        } else {
                            c.fail(ErrorKind::Http2, 1);
                        }
                    }
                }
                Event::GoAway { last_stream, code } => {
                    // Streams above `last_stream` were not processed: they go again on the
                    // next connection.
                    let refused = self.window.take_above(last_stream.0);
                    ctx.sub_in_flight(refused.len() as u64);
                    s.sched.retry(refused);
                    self.goaway = Some(code);
                }
                Event::ConnectionError(e) => {
                    // The client's GOAWAY is in `out`.
                    let error = e.to_string();
                    drop(c);
                    ctx.lose(ErrorKind::Http2, self.window.clear());
                    ctx.setup.note_error(ErrorKind::Http2, &error);
                    return Some(SessionEnd { close: Close::Error, error: Some(error) });
                }
            }
        }
        None
    }

    fn ended(&mut self, s: &mut Step<'_>, end: &End) -> SessionEnd {
        s.ctx.lose(ErrorKind::ConnectionLost, self.window.clear());
        match (end, self.goaway) {
            (End::Closed, Some(code)) => Doh::goaway_end(code),
            (end, _) => SessionEnd { close: end.close(true), error: end.message() },
        }
    }

    fn finished(&self, state: Stop) -> Option<SessionEnd> {
        if let Some(code) = self.goaway {
            return Some(Doh::goaway_end(code));
        }
        if state == Stop::Drain {
            return Some(SessionEnd::client(Close::End));
        }
        self.client.ids_exhausted().then(|| SessionEnd::client(Close::Exhausted))
    }

    fn clear(&mut self) -> u64 {
        self.window.clear()
    }

    fn goodbye(&mut self, out: &mut Vec<u8>) {
        self.client.goaway(out);
    }
}

#[cfg(test)]
mod tests {
    use super::super::ctx::{Ctx, Schedule};
    use super::super::session::testing::{answer_to, with_ctx, MS};
    use super::super::session::Tally;
    use super::*;
    use dnscost_load::{ConnPolicy, Lifetime};

    const DOH: &str = r#"{"transport":"doh","target":"127.0.0.1:443","connections":1,"in_flight":3,"insecure":true}"#;

    const DATA: u8 = 0;
    const HEADERS: u8 = 1;
    const RST_STREAM: u8 = 3;
    const SETTINGS: u8 = 4;
    const GOAWAY: u8 = 7;
    const MAX_CONCURRENT_STREAMS: u16 = 3;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
        f.extend([kind, flags]);
        f.extend(stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    /// The server's preface (SETTINGS with `pairs`) and its acknowledgement of ours.
    fn server_preface(pairs: &[(u16, u32)]) -> Vec<u8> {
        let payload: Vec<u8> =
            pairs.iter().flat_map(|(id, v)| id.to_be_bytes().into_iter().chain(v.to_be_bytes())).collect();
        let mut f = frame(SETTINGS, 0, 0, &payload);
        f.extend(frame(SETTINGS, 1, 0, &[]));
        f
    }

    /// `:status 200` (static index 8) and the body.
    fn response(stream: u32, body: &[u8]) -> Vec<u8> {
        let mut f = frame(HEADERS, 4, stream, &[0x88]);
        f.extend(frame(DATA, 1, stream, body));
        f
    }

    fn goaway(last: u32, code: u32) -> Vec<u8> {
        frame(GOAWAY, 0, 0, &[last.to_be_bytes(), code.to_be_bytes()].concat())
    }

    /// The requests of the client's output: (stream, DNS query) of each POST body.
    fn requests(out: &mut Vec<u8>) -> Vec<(u32, Vec<u8>)> {
        let mut rest = &out[..];
        if rest.starts_with(b"PRI * HTTP/2.0") {
            rest = &rest[24..];
        }
        let mut bodies = Vec::new();
        while rest.len() >= 9 {
            let len = u32::from_be_bytes([0, rest[0], rest[1], rest[2]]) as usize;
            let stream = u32::from_be_bytes(rest[5..9].try_into().unwrap());
            if rest[3] == DATA {
                bodies.push((stream, rest[9..9 + len].to_vec()));
            }
            rest = &rest[9 + len..];
        }
        out.clear();
        bodies
    }

    struct Conn {
        session: Doh,
        sched: Schedule,
        policy: ConnPolicy,
        tally: Tally,
        out: Vec<u8>,
    }

    impl Conn {
        fn new(ctx: &Ctx, sched: Schedule) -> Self {
            let mut out = Vec::new();
            let session = Doh::new(ctx.setup.config.in_flight as usize, DohMethod::Post, &mut out);
            Conn { session, sched, policy: ConnPolicy::new(Lifetime::default(), None, 0), tally: Tally::default(), out }
        }

        fn at<R>(&mut self, ctx: &Ctx, now: u64, f: impl FnOnce(&mut Doh, &mut Step<'_>) -> R) -> R {
            let mut step = Step {
                ctx,
                sched: &mut self.sched,
                policy: &mut self.policy,
                tally: &mut self.tally,
                out: &mut self.out,
                now,
                carrier_room: true,
            };
            f(&mut self.session, &mut step)
        }

        fn deliver(&mut self, ctx: &Ctx, now: u64, bytes: &[u8]) -> Option<SessionEnd> {
            self.at(ctx, now, |session, step| {
                session.spare()[..bytes.len()].copy_from_slice(bytes);
                session.receive(step, bytes.len())
            })
        }

        fn send(&mut self, ctx: &Ctx, now: u64) -> Sent {
            self.at(ctx, now, |s, step| s.send(step))
        }
    }

    #[test]
    fn one_stream_per_query_up_to_the_server_s_limit_answers_matched_by_stream() {
        with_ctx(DOH, |ctx| {
            let mut conn = Conn::new(ctx, Schedule::closed(3, 10_000 * MS));
            conn.deliver(ctx, 0, &server_preface(&[(MAX_CONCURRENT_STREAMS, 2)]));
            assert_eq!(conn.send(ctx, 0), Sent { fresh: 2, room: false }, "two streams, not three");
            let sent = requests(&mut conn.out);
            assert_eq!(sent.iter().map(|r| r.0).collect::<Vec<_>>(), [1, 3]);
            conn.deliver(ctx, 2 * MS, &response(3, &answer_to(&sent[1].1)));
            assert_eq!(ctx.counters.borrow().answered, 1);
            assert_eq!(conn.tally, Tally { queries: 2, answers: 1 });
            assert_eq!(conn.send(ctx, 2 * MS).fresh, 1, "a stream closed, another opens");
            assert_eq!(requests(&mut conn.out)[0].0, 5);
        });
    }

    #[test]
    fn a_server_allowing_no_stream_blocks_the_closed_loop_and_its_queries_are_unsent() {
        with_ctx(DOH, |ctx| {
            let mut conn = Conn::new(ctx, Schedule::closed(3, 10_000 * MS));
            conn.deliver(ctx, 0, &server_preface(&[(MAX_CONCURRENT_STREAMS, 0)]));
            assert_eq!(conn.send(ctx, 0), Sent { fresh: 0, room: false });
            assert_eq!(conn.sched.wake(0, false, 2000 * MS), Some(2000 * MS), "the driver wakes at the timeout");
            let mut c = ctx.counters.borrow_mut();
            conn.sched.expire_unsent(2000 * MS, 2000 * MS, 3, &mut c);
            assert_eq!((c.offered, c.failed[ErrorKind::Unsent as usize]), (3, 3), "the window's places, unsent");
        });
    }

    #[test]
    fn goaway_sends_unprocessed_streams_again_and_ends_once_the_rest_is_answered() {
        with_ctx(DOH, |ctx| {
            let mut conn = Conn::new(ctx, Schedule::closed(3, 10_000 * MS));
            conn.deliver(ctx, 0, &server_preface(&[]));
            conn.send(ctx, 0);
            let sent = requests(&mut conn.out);
            assert_eq!(sent.len(), 3);
            let mut bytes = goaway(1, 0);
            bytes.extend(response(1, &answer_to(&sent[0].1)));
            assert!(conn.deliver(ctx, MS, &bytes).is_none());
            assert_eq!(conn.session.outstanding(), 0);
            assert_eq!(conn.send(ctx, MS), Sent { fresh: 0, room: false }, "no stream after GOAWAY");
            let end = conn.session.finished(Stop::Running).expect("over");
            assert_eq!((end.close, end.error), (Close::Goaway, None));
            let c = ctx.counters.borrow();
            assert_eq!((c.offered, c.answered, c.failed.iter().sum::<u64>()), (3, 1, 0));
            assert_eq!(conn.sched.peek_retry(), Some(1), "streams 3 and 5 wait for the next connection");
        });
    }

    #[test]
    fn a_refused_stream_goes_again_and_another_reset_fails_it() {
        with_ctx(DOH, |ctx| {
            let mut conn = Conn::new(ctx, Schedule::closed(3, 10_000 * MS));
            conn.deliver(ctx, 0, &server_preface(&[]));
            conn.send(ctx, 0);
            requests(&mut conn.out);
            let mut bytes = frame(RST_STREAM, 0, 1, &ErrorCode::REFUSED_STREAM.0.to_be_bytes());
            bytes.extend(frame(RST_STREAM, 0, 3, &ErrorCode::INTERNAL_ERROR.0.to_be_bytes()));
            conn.deliver(ctx, MS, &bytes);
            assert_eq!(ctx.counters.borrow().failed[ErrorKind::Http2 as usize], 1);
            assert_eq!(conn.sched.peek_retry(), Some(0));
            assert_eq!(conn.send(ctx, MS), Sent { fresh: 1, room: false }, "the refused query, then a new one");
            let again = requests(&mut conn.out);
            assert_eq!(again.iter().map(|r| r.0).collect::<Vec<_>>(), [7, 9]);
            assert_eq!(ctx.counters.borrow().offered, 4);
        });
    }

    #[test]
    fn used_up_stream_ids_end_the_session_once_answered() {
        with_ctx(DOH, |ctx| {
            let mut conn = Conn::new(ctx, Schedule::closed(3, 10_000 * MS));
            conn.deliver(ctx, 0, &server_preface(&[]));
            conn.session.client.skip_stream_ids_to((1 << 31) - 3);
            assert_eq!(conn.send(ctx, 0), Sent { fresh: 2, room: false }, "two identifiers were left");
            let sent = requests(&mut conn.out);
            assert_eq!(conn.session.outstanding(), 2, "the driver asks `finished` once they are answered");
            for (stream, query) in &sent {
                conn.deliver(ctx, MS, &response(*stream, &answer_to(query)));
            }
            let end = conn.session.finished(Stop::Running).expect("over");
            assert_eq!(end.close, Close::Exhausted);
        });
    }

    #[test]
    fn an_expired_stream_is_cancelled_and_the_server_s_eof_loses_the_rest() {
        with_ctx(DOH, |ctx| {
            let mut conn = Conn::new(ctx, Schedule::closed(3, 10_000 * MS));
            conn.deliver(ctx, 0, &server_preface(&[]));
            conn.send(ctx, 0);
            requests(&mut conn.out);
            conn.send(ctx, 5 * MS);
            let expired = conn.at(ctx, 2000 * MS, |s, step| s.expire(step, MS));
            assert_eq!(expired, 3);
            let rst: Vec<u32> = conn
                .out
                .chunks(13)
                .filter(|f| f[3] == RST_STREAM)
                .map(|f| u32::from_be_bytes(f[5..9].try_into().unwrap()))
                .collect();
            assert_eq!(rst, [1, 3, 5], "every expired stream is cancelled");
            ctx.sub_in_flight(3);
            conn.out.clear();
            conn.send(ctx, 2000 * MS);
            let end = conn.at(ctx, 2001 * MS, |s, step| s.ended(step, &End::Closed));
            assert_eq!(end.close, Close::CloseNotify);
            assert_eq!(ctx.counters.borrow().failed[ErrorKind::ConnectionLost as usize], 3);
        });
    }
}
