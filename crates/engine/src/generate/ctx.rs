//! What the tasks of one generator thread share: the run's set-up, the thread's counters and
//! gauges, the stop signal, the open-rate bucket and the TLS connectors.

use dnscost_load::{EngineConfig, Pacer, QuerySet, TokenBucket};
use dnscost_stats::{ConnectionRecord, Counters, ErrorKind};
use std::cell::{Cell, RefCell};
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::watch;

/// What the main thread asks of the generator threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Send on schedule.
    Running,
    /// Send nothing new; wait for outstanding queries (at most the timeout); close.
    Drain,
    /// Count outstanding queries as aborted and close now.
    Abort,
}

/// The run's set-up: its configuration resolved once (addresses, TLS, request templates, the
/// open-first gate) and shared by every thread.
pub struct Setup {
    pub config: EngineConfig,
    pub target: SocketAddr,
    pub queries: QuerySet,
    pub sources: Vec<IpAddr>,
    /// With `proxy_v2`: the clients its PROXY v2 headers claim, one address per slot.
    pub proxy: Option<dnscost_load::ClientNetwork>,
    pub tls: Option<dnscost_transport::tls::ClientOptions>,
    pub server_name: Option<rustls::pki_types::ServerName<'static>>,
    /// The same as text, as quinn takes it.
    pub quic_server_name: Option<String>,
    /// DoH request templates, built once: one for POST (the query is the body), one per query
    /// of the set for GET (the query is in the path).
    pub doh: Vec<dnscost_wire::http2::RequestTemplate>,
    /// Where and how DoH/3 requests go.
    pub doh3: Option<super::quic::H3Target>,
    pub start: Instant,
    pub timeout_ns: u64,
    /// With `open_first`: the slots whose first connection is not settled yet.
    pub gate: Option<Gate>,
    /// The first error message seen of each kind, to say why a run failed.
    pub errors: std::sync::Mutex<std::collections::BTreeMap<&'static str, String>>,
    /// With a queries file: the position in it every thread asking from it (of every class
    /// that asks from the same file) takes its next query at, so that the run asks the file in
    /// its order, as dnsperf reads its data file. None for synthetic names: each thread walks a
    /// share of its own.
    pub order: Option<Arc<std::sync::atomic::AtomicU64>>,
}

impl Setup {
    /// With `proxy_v2`: slot `slot`'s PROXY v2 header, over a stream or datagrams, from the
    /// slot's claimed address and its socket's own port (`local`) to the target.
    pub fn proxy_header(&self, slot: u64, stream: bool, local: Option<SocketAddr>) -> Option<Box<[u8]>> {
        let client = SocketAddr::new(self.proxy?.address(slot), local.map_or(0, |a| a.port()));
        let header = dnscost_wire::proxy_v2_header(stream, client, self.target).expect("validated: one family");
        Some(header.into_boxed_slice())
    }

    /// Keeps `message` as the example of `kind` if it is the first.
    pub fn note_error(&self, kind: ErrorKind, message: &str) {
        if let Ok(mut m) = self.errors.lock() {
            m.entry(kind.as_str()).or_insert_with(|| message.to_string());
        }
    }

    /// The example message of `kind`, if one was seen.
    pub fn error_example(&self, kind: &str) -> Option<String> {
        self.errors.lock().ok().and_then(|m| m.get(kind).cloned())
    }
}

/// Holds queries back until every slot's first connection is settled (established or failed),
/// across threads.
pub struct Gate {
    pending: std::sync::atomic::AtomicU64,
    /// When the last slot arrived (run time), `u64::MAX` until then.
    opened_ns: std::sync::atomic::AtomicU64,
    open: tokio::sync::Notify,
}

impl Gate {
    pub fn new(slots: u64) -> Self {
        Gate { pending: slots.into(), opened_ns: u64::MAX.into(), open: tokio::sync::Notify::new() }
    }

    /// One slot's first connection is settled, at run time `now`.
    pub fn arrive(&self, now: u64) {
        if self.pending.fetch_sub(1, std::sync::atomic::Ordering::AcqRel) == 1 {
            self.opened_ns.store(now, std::sync::atomic::Ordering::Release);
            self.open.notify_waiters();
        }
    }

    /// When the last slot arrived (run time), if it has.
    pub fn opened(&self) -> Option<u64> {
        Some(self.opened_ns.load(std::sync::atomic::Ordering::Acquire)).filter(|&t| t != u64::MAX)
    }

    fn is_open(&self) -> bool {
        self.pending.load(std::sync::atomic::Ordering::Acquire) == 0
    }

    /// When the gate opened for a wait bounded by `deadline_ns`: when the last slot arrived,
    /// or the deadline if that came first. Every slot's schedule starts then, also a slot whose
    /// own first connection settled later (its queries are due meanwhile, as a client's are).
    pub fn opened_at(&self, deadline_ns: u64) -> u64 {
        self.opened_ns.load(std::sync::atomic::Ordering::Acquire).min(deadline_ns)
    }

    /// Waits until every slot has arrived, the run time `deadline_ns` passes or the run stops.
    pub async fn wait(&self, ctx: &Ctx, deadline_ns: u64) {
        loop {
            let opened = self.open.notified();
            tokio::pin!(opened);
            opened.as_mut().enable();
            if self.is_open() || ctx.now() >= deadline_ns || ctx.state() != Stop::Running {
                return;
            }
            tokio::select! {
                _ = opened => {}
                _ = ctx.sleep_until(deadline_ns.min(ctx.now() + 100_000_000)) => {}
            }
        }
    }
}

/// The client configurations of one thread: with a session store and without; over QUIC also
/// one that sends early data (sharing the store).
pub enum Connectors {
    Tls { resume: Arc<rustls::ClientConfig>, fresh: Arc<rustls::ClientConfig> },
    Quic { resume: quinn::ClientConfig, fresh: quinn::ClientConfig, early: quinn::ClientConfig },
}

/// One generator thread's shared state. Not `Send`: every task of the thread runs on its own
/// single-threaded runtime.
pub struct Ctx {
    pub setup: Arc<Setup>,
    pub counters: RefCell<Counters>,
    pub in_flight: Cell<u64>,
    pub active: Cell<u64>,
    pub stop: watch::Receiver<Stop>,
    pub bucket: Option<RefCell<TokenBucket>>,
    pub connectors: Option<Connectors>,
    pub log: Option<std::sync::mpsc::Sender<ConnectionRecord>>,
    pub timer: Rc<super::timer::Timer>,
    pub thread: u64,
    pub threads: u64,
    /// Connections closed by the client whose close is still being counted
    /// (`slot::count_close`), and the signal that one finished.
    pub lingering: Cell<u64>,
    pub lingered: tokio::sync::Notify,
    next_conn: Cell<u64>,
    cursor: Cell<u64>,
    /// The query [`Ctx::peek_query`] took and [`Ctx::next_query`] has not yet.
    held: Cell<Option<u64>>,
    /// Run time at which a task of this thread first saw the run stop (`u64::MAX` until then).
    stopped_ns: Cell<u64>,
}

impl Ctx {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        setup: Arc<Setup>,
        thread: u64,
        threads: u64,
        stop: watch::Receiver<Stop>,
        bucket: Option<TokenBucket>,
        connectors: Option<Connectors>,
        log: Option<std::sync::mpsc::Sender<ConnectionRecord>>,
        timer: Rc<super::timer::Timer>,
    ) -> Self {
        let spread = setup.queries.len() as u64 / threads.max(1);
        Ctx {
            setup,
            counters: RefCell::new(Counters::default()),
            in_flight: Cell::new(0),
            active: Cell::new(0),
            stop,
            bucket: bucket.map(RefCell::new),
            connectors,
            log,
            timer,
            thread,
            threads,
            lingering: Cell::new(0),
            lingered: tokio::sync::Notify::new(),
            next_conn: Cell::new(0),
            cursor: Cell::new(thread * spread),
            held: Cell::new(None),
            stopped_ns: Cell::new(u64::MAX),
        }
    }

    /// Nanoseconds since the start of the run.
    #[inline]
    pub fn now(&self) -> u64 {
        self.setup.start.elapsed().as_nanos() as u64
    }

    /// The tokio instant of run time `ns`.
    #[inline]
    pub fn instant(&self, ns: u64) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.setup.start + std::time::Duration::from_nanos(ns.min(u64::MAX / 4)))
    }

    /// Waits until run time `ns` with microsecond precision (`u64::MAX`: never), or until the
    /// run's state changes, whichever comes first: a waiter looks at the state when it wakes.
    #[inline]
    pub fn sleep_until(&self, ns: u64) -> super::timer::Sleep {
        self.timer.sleep_until(ns)
    }

    /// What the main thread asks now; notes when the run stopped sending.
    #[inline]
    pub fn state(&self) -> Stop {
        let s = *self.stop.borrow();
        if s != Stop::Running && self.stopped_ns.get() == u64::MAX {
            self.stopped_ns.set(self.now());
        }
        s
    }

    /// When sending stopped (the end of the run or an interrupt), as far as this thread knows.
    pub fn stopped_at(&self) -> u64 {
        self.stopped_ns.get().min(self.now())
    }

    /// Index of the query [`Ctx::next_query`] returns next (taken from the run's order now,
    /// and held for this thread).
    #[inline]
    pub fn peek_query(&self) -> u64 {
        if let Some(i) = self.held.get() {
            return i;
        }
        let i = self.take_query();
        self.held.set(Some(i));
        i
    }

    /// Index of the next query to send from this thread.
    #[inline]
    pub fn next_query(&self) -> u64 {
        self.held.take().unwrap_or_else(|| self.take_query())
    }

    #[inline]
    fn take_query(&self) -> u64 {
        match &self.setup.order {
            Some(order) => order.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            None => {
                let i = self.cursor.get();
                self.cursor.set(i.wrapping_add(1));
                i
            }
        }
    }

    /// A connection number unique in the run.
    pub fn conn_id(&self) -> u64 {
        let n = self.next_conn.get();
        self.next_conn.set(n + 1);
        n * self.threads + self.thread
    }

    #[inline]
    pub fn add_in_flight(&self, n: u64) {
        self.in_flight.set(self.in_flight.get() + n);
    }

    #[inline]
    pub fn sub_in_flight(&self, n: u64) {
        debug_assert!(n <= self.in_flight.get(), "in flight {} - {n}", self.in_flight.get());
        self.in_flight.set(self.in_flight.get().saturating_sub(n));
    }

    /// Counts `n` outstanding queries as failed with `kind`.
    pub fn lose(&self, kind: ErrorKind, n: u64) {
        if n > 0 {
            self.counters.borrow_mut().fail(kind, n);
            self.sub_in_flight(n);
        }
    }

    pub fn write_log(&self, record: ConnectionRecord) {
        if let Some(log) = &self.log {
            let _ = log.send(record);
        }
    }
}

/// When one slot's queries are due: on its pacer's schedule (open loop), whenever the window
/// has room (closed loop), or once per connection (`rate: once`), and never at or after the end
/// of the sending period. Knowing the end here, rather than waiting for the main thread's
/// signal, keeps the last instant race-free.
///
/// It also owns the queries that came due and could not go: the open loop's are expired as
/// `unsent` a timeout after their intended time; the closed loop's are the free places of the
/// window while the slot is *blocked* (no connection, or a connection that cannot open a
/// stream), `unsent` once per timeout; and whatever is still due when sending stops is
/// counted by [`Schedule::close`]. Queries a server refused without processing them (HTTP/2
/// GOAWAY above its last stream, REFUSED_STREAM, a graceful close with queries pipelined)
/// wait here to be sent again on the next connection.
pub struct Schedule {
    pacer: Option<Pacer>,
    end_ns: u64,
    /// Closed loop: the queries the slot would keep outstanding (1 for `once`).
    capacity: u64,
    /// `once`: whether the current connection has still to send its query.
    once: Option<bool>,
    /// Closed loop: since when queries were due that could not be sent.
    blocked_since: Option<u64>,
    /// Refused queries to send again, in intended-time order.
    retry: std::collections::VecDeque<super::window::Outstanding>,
    /// Open loop with `open_first`: the schedule has not started (connections still open).
    held: bool,
}

impl Schedule {
    pub fn new(pacer: Option<Pacer>, end_ns: u64) -> Self {
        Schedule { pacer, end_ns, capacity: 1, once: None, blocked_since: None, retry: Default::default(), held: false }
    }

    /// An open loop's schedule waits for [`Schedule::start_at`] (`open_first`): nothing is due,
    /// or expires unsent, until then.
    pub fn hold(mut self) -> Self {
        self.held = self.pacer.is_some();
        self
    }

    /// A closed loop keeping `in_flight` queries outstanding.
    pub fn closed(in_flight: u64, end_ns: u64) -> Self {
        Schedule { capacity: in_flight.max(1), ..Schedule::new(None, end_ns) }
    }

    /// One query per connection: due from the start, and again for each new connection
    /// ([`Schedule::next_connection`]).
    pub fn once(end_ns: u64) -> Self {
        Schedule { once: Some(true), ..Schedule::new(None, end_ns) }
    }

    /// The load starts at run time `at` (every first connection open, with `open_first`): an
    /// open loop's schedule begins there, so nothing was due while connections opened.
    pub fn start_at(&mut self, at: u64) {
        if let (Some(p), true) = (&mut self.pacer, self.held) {
            p.restart(at);
        }
        self.held = false;
    }

    /// The connection ended while the run goes on: with `once`, the next one sends a query.
    pub fn next_connection(&mut self) {
        if let Some(pending) = &mut self.once {
            *pending = true;
        }
    }

    /// When the next query is due (now, in a closed loop); None once sending has ended (or,
    /// with `once`, while the connection has sent its query).
    #[inline]
    pub fn next_due(&self, now: u64) -> Option<u64> {
        let t = match (&self.pacer, self.once) {
            (Some(p), _) => p.next(),
            (None, Some(false)) => return None,
            (None, _) => now,
        };
        (t < self.end_ns && now < self.end_ns).then_some(t)
    }

    /// When the slot should open its next connection: now if refused queries wait to be sent
    /// again, else when the next query is due.
    pub fn next_start(&self, now: u64) -> Option<u64> {
        if !self.retry.is_empty() && now < self.end_ns {
            return Some(now);
        }
        self.next_due(now)
    }

    /// When the slot must next look at its schedule: the next due query if it has room to send
    /// one, or else the moment a due query (or a query waiting to be sent again) expires.
    pub fn wake(&self, now: u64, room: bool, timeout_ns: u64) -> Option<u64> {
        let retry = self.retry.front().map(|o| o.intended);
        if room {
            if retry.is_some() {
                return Some(now);
            }
            return self.next_due(now);
        }
        let due = match (&self.pacer, self.blocked_since) {
            (Some(_), _) => self.next_due(now),
            (None, Some(since)) if now < self.end_ns => Some(since),
            (None, _) => None,
        };
        [due, retry].into_iter().flatten().min().map(|t| t.saturating_add(timeout_ns))
    }

    #[inline]
    pub fn due(&self, now: u64) -> bool {
        !self.retry.is_empty() || self.next_due(now).is_some_and(|t| t <= now)
    }

    /// Takes the next query to send: one refused earlier (already offered; its intended time
    /// and query kept), or a new one, counted as offered, whose intended time is returned with
    /// `None` (the caller picks the query).
    #[inline]
    pub fn take(&mut self, now: u64, c: &mut Counters) -> (u64, Option<u64>) {
        if let Some(o) = self.retry.pop_front() {
            return (o.intended, Some(o.query));
        }
        c.offered += 1;
        self.blocked_since = None;
        if let Some(pending) = &mut self.once {
            *pending = false;
        }
        (self.pacer.as_mut().map_or(now, Pacer::take), None)
    }

    /// The query [`Schedule::take`] would hand back for sending again, if any.
    #[inline]
    pub fn peek_retry(&self) -> Option<u64> {
        self.retry.front().map(|o| o.query)
    }

    /// Queries refused without being processed, to send again on the next connection.
    pub fn retry(&mut self, refused: impl IntoIterator<Item = super::window::Outstanding>) {
        self.retry.extend(refused);
        self.retry.make_contiguous().sort_by_key(|o| o.intended);
    }

    /// Closed loop: whether queries are due that cannot be sent (no connection, or a connection
    /// that cannot open a stream). From then on, the free places of the window are counted
    /// `unsent` once per timeout until a query goes.
    pub fn blocked(&mut self, now: u64, blocked: bool) {
        if self.pacer.is_some() || self.once == Some(false) {
            return;
        }
        if !blocked {
            self.blocked_since = None;
        } else if self.blocked_since.is_none() && now < self.end_ns {
            self.blocked_since = Some(now);
        }
    }

    /// Queries that came due but could not be sent within the timeout (no connection, full
    /// window, no stream) are offered and failed as `unsent`, so the schedule never hides them.
    /// `free` is how many more the slot could have outstanding. Queries waiting to be sent
    /// again whose timeout passed are failed `rejected`: the server refused them unprocessed
    /// and no connection took them since (a server that refuses every connection shows so,
    /// rather than as one that does not answer).
    pub fn expire_unsent(&mut self, now: u64, timeout_ns: u64, free: u64, c: &mut Counters) {
        if let (false, Some(p)) = (self.held, &mut self.pacer) {
            while p.next() + timeout_ns <= now && p.next() < self.end_ns {
                p.take();
                c.offered += 1;
                c.fail(ErrorKind::Unsent, 1);
            }
        } else if let Some(since) = self.blocked_since {
            if since + timeout_ns <= now && since < self.end_ns {
                // With `once`, the slot's one query; it stays due, for the connection that
                // finally opens.
                let n = if self.once.is_some() { 1 } else { free.min(self.capacity) };
                c.offered += n;
                c.fail(ErrorKind::Unsent, n);
                self.blocked_since = Some(now);
            }
        }
        while self.retry.front().is_some_and(|o| o.intended + timeout_ns <= now) {
            self.retry.pop_front();
            c.fail(ErrorKind::Rejected, 1);
        }
    }

    /// Sending stops at run time `at` (the end, or an interrupt): every query due before it
    /// and not sent is offered and failed as `unsent` (a closed loop's blocked places, an open
    /// loop's schedule up to `at`), and refused queries still waiting are failed `rejected`.
    /// Nothing is due afterwards.
    pub fn close(&mut self, at: u64, c: &mut Counters) {
        let at = at.min(self.end_ns);
        if let (false, Some(p)) = (self.held, &mut self.pacer) {
            while p.next() < at {
                p.take();
                c.offered += 1;
                c.fail(ErrorKind::Unsent, 1);
            }
        } else if self.blocked_since.is_some_and(|s| s < at) && self.once != Some(false) {
            let n = if self.once.is_some() { 1 } else { self.capacity };
            c.offered += n;
            c.fail(ErrorKind::Unsent, n);
        }
        self.blocked_since = None;
        let refused = self.retry.len() as u64;
        self.retry.clear();
        c.fail(ErrorKind::Rejected, refused);
        self.end_ns = at;
    }

    /// Abort: refused queries still waiting are counted aborted.
    pub fn abort(&mut self, c: &mut Counters) {
        c.aborted += self.retry.len() as u64;
        self.retry.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::super::window::Outstanding;
    use super::*;
    use dnscost_load::{Arrival, Rng};

    const MS: u64 = 1_000_000;

    fn unsent(c: &Counters) -> u64 {
        c.failed[ErrorKind::Unsent as usize]
    }

    #[test]
    fn an_open_loop_offers_its_whole_schedule_however_it_ends() {
        // 100 qps for 1 s, timeout 200 ms, nothing ever sent.
        let pacer = Pacer::new(Arrival::Constant, 100.0, 1, 0, 0, Rng::new(1, 0));
        let mut s = Schedule::new(Some(pacer), 1000 * MS);
        let mut c = Counters::default();
        s.expire_unsent(500 * MS, 200 * MS, 1, &mut c);
        assert_eq!((c.offered, unsent(&c)), (31, 31), "due at 0..=300 ms expired");
        // Sending stops at the end: the 69 due since are offered too.
        s.close(2000 * MS, &mut c);
        assert_eq!((c.offered, unsent(&c)), (100, 100));
        assert_eq!(s.next_due(0), None, "nothing is due after close");
        // An interrupt at 450 ms: only what was due before it.
        let pacer = Pacer::new(Arrival::Constant, 100.0, 1, 0, 0, Rng::new(1, 0));
        let mut s = Schedule::new(Some(pacer), 1000 * MS);
        let mut c = Counters::default();
        s.close(450 * MS, &mut c);
        assert_eq!(c.offered, 45);
    }

    #[test]
    fn every_slot_s_schedule_starts_when_the_gate_opened() {
        // Two slots: the last arrives at 300 ms and opens the gate; a slot that passes it at
        // 700 ms (its own first connection settled late) starts its schedule at 300 ms, so the
        // queries due since are its to offer.
        let gate = Gate::new(2);
        gate.arrive(100 * MS);
        assert_eq!(gate.opened_at(2000 * MS), 2000 * MS, "not open yet: the deadline");
        gate.arrive(300 * MS);
        assert_eq!(gate.opened_at(2000 * MS), 300 * MS);
        assert_eq!(gate.opened_at(200 * MS), 200 * MS, "the deadline came first");
        let pacer = Pacer::new(Arrival::Constant, 100.0, 1, 0, 0, Rng::new(1, 0));
        let mut s = Schedule::new(Some(pacer), 2000 * MS).hold();
        s.start_at(gate.opened_at(2000 * MS).min(700 * MS));
        assert_eq!(s.next_due(700 * MS), Some(300 * MS), "due since the gate opened");
    }

    #[test]
    fn a_blocked_closed_loop_counts_its_free_places_once_per_timeout() {
        let mut s = Schedule::closed(8, 1000 * MS);
        let mut c = Counters::default();
        s.expire_unsent(300 * MS, 200 * MS, 8, &mut c);
        assert_eq!(c.offered, 0, "not blocked: nothing is owed");
        s.blocked(100 * MS, true);
        assert_eq!(s.wake(150 * MS, false, 200 * MS), Some(300 * MS));
        s.expire_unsent(299 * MS, 200 * MS, 8, &mut c);
        assert_eq!(c.offered, 0);
        s.expire_unsent(300 * MS, 200 * MS, 5, &mut c);
        assert_eq!((c.offered, unsent(&c)), (5, 5), "the free places at that moment");
        s.expire_unsent(450 * MS, 200 * MS, 8, &mut c);
        assert_eq!(c.offered, 5, "once per timeout");
        // Sending again unblocks; blocked again at the end counts the window once more.
        let (_, again) = s.take(460 * MS, &mut c);
        assert_eq!((again, c.offered), (None, 6));
        s.expire_unsent(900 * MS, 200 * MS, 8, &mut c);
        assert_eq!(c.offered, 6);
        s.blocked(950 * MS, true);
        s.close(1000 * MS, &mut c);
        assert_eq!((c.offered, unsent(&c)), (14, 13));
    }

    #[test]
    fn once_is_one_query_per_connection_and_stays_owed_while_blocked() {
        let mut s = Schedule::once(1000 * MS);
        let mut c = Counters::default();
        assert_eq!(s.next_due(0), Some(0), "the first connection's query is due at once");
        s.blocked(0, true);
        s.expire_unsent(200 * MS, 200 * MS, 16, &mut c);
        assert_eq!((c.offered, unsent(&c)), (1, 1), "one query, not the window");
        assert_eq!(s.next_due(200 * MS), Some(200 * MS), "still owed to the connection that opens");
        s.take(250 * MS, &mut c);
        assert_eq!(s.next_due(260 * MS), None, "the connection has sent its query");
        s.blocked(260 * MS, true);
        s.close(1000 * MS, &mut c);
        assert_eq!(c.offered, 2, "an idle connection owes nothing");
        // A new connection owes one again.
        let mut s = Schedule::once(1000 * MS);
        s.take(0, &mut c);
        s.next_connection();
        assert_eq!(s.next_due(10 * MS), Some(10 * MS));
    }

    #[test]
    fn refused_queries_go_first_keep_their_time_and_expire() {
        let mut s = Schedule::closed(4, 1000 * MS);
        let mut c = Counters::default();
        s.retry([Outstanding { intended: 30 * MS, query: 7 }, Outstanding { intended: 10 * MS, query: 5 }]);
        assert_eq!(s.next_start(50 * MS), Some(50 * MS));
        assert_eq!(s.peek_retry(), Some(5), "oldest first");
        assert_eq!(s.take(50 * MS, &mut c), (10 * MS, Some(5)));
        assert_eq!(c.offered, 0, "already offered once");
        s.expire_unsent(230 * MS, 200 * MS, 4, &mut c);
        assert_eq!((c.timed_out, c.failed[ErrorKind::Rejected as usize]), (0, 1), "query 7 expired waiting");
        s.retry([Outstanding { intended: 300 * MS, query: 9 }]);
        s.abort(&mut c);
        assert_eq!(c.aborted, 1);
        s.retry([Outstanding { intended: 400 * MS, query: 9 }]);
        s.close(500 * MS, &mut c);
        assert_eq!(c.failed[ErrorKind::Rejected as usize], 2, "still waiting when sending stopped");
    }
}
