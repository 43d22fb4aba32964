//! Outstanding queries of one socket or connection: ID allocation, matching, expiry in send
//! order, and (udp with a retransmission policy) sending again. No I/O; times in nanoseconds
//! since the start of the run.

use std::collections::VecDeque;

#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    live: bool,
    /// How many times the query was sent (with a retransmission policy; else 1).
    sends: u8,
    id: u16,
    generation: u32,
    intended: u64,
    query: u64,
}

/// A stub resolver's retransmission: a query unanswered `every_ns` after its last send is sent
/// again, `attempts` sends in all (the first included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retransmit {
    pub every_ns: u64,
    pub attempts: u8,
}

/// A query that left the window: answered or expired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outstanding {
    /// Intended send time.
    pub intended: u64,
    /// Index in the query set (to check the answer's question).
    pub query: u64,
}

/// Outstanding queries, indexed by DNS ID. The table starts small and doubles while more than
/// half of it would be in use, up to twice the capacity: a connection that keeps one query
/// outstanding holds a table of two entries.
#[derive(Debug)]
pub struct Window {
    /// A power of two in size, from 2 up to twice the capacity: an ID's slot is its low bits.
    table: Vec<Entry>,
    next_id: u16,
    generation: u32,
    fifo: VecDeque<(u16, u32, u64)>,
    len: usize,
    capacity: usize,
    /// Boxed: only a UDP slot that retransmits has it.
    resend: Option<Box<Resend>>,
}

/// The entry of `id` in a table (a power of two in size).
#[inline]
fn slot(table: &[Entry], id: u16) -> &Entry {
    &table[id as usize & (table.len() - 1)]
}

#[inline]
fn slot_mut(table: &mut [Entry], id: u16) -> &mut Entry {
    let mask = table.len() - 1;
    &mut table[id as usize & mask]
}

/// What a window that sends queries again keeps.
#[derive(Debug)]
struct Resend {
    policy: Retransmit,
    /// The outstanding queries that have sends left, as (ID, generation, when they go again).
    /// Every try waits as long, so send order is the order they come due in. Its front is
    /// live or it is empty.
    due: VecDeque<(u16, u32, u64)>,
}

impl Window {
    /// A window for at most `capacity` outstanding queries (at most 65 535).
    pub fn new(capacity: usize, first_id: u16) -> Self {
        let capacity = capacity.clamp(1, 65_535);
        Window {
            table: vec![Entry::default(); Self::max_size(capacity).min(2)],
            next_id: first_id,
            generation: 0,
            fifo: VecDeque::new(),
            len: 0,
            capacity,
            resend: None,
        }
    }

    /// The table's largest size: twice the capacity, a power of two.
    fn max_size(capacity: usize) -> usize {
        (capacity * 2).next_power_of_two().min(65_536)
    }

    /// The window sends unanswered queries again as `policy` says ([`Window::retransmit`]); a
    /// policy of one attempt, or none, sends nothing again.
    pub fn retransmitting(mut self, policy: Option<Retransmit>) -> Self {
        self.resend = policy.filter(|p| p.attempts > 1).map(|policy| Box::new(Resend { policy, due: VecDeque::new() }));
        self
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_full(&self) -> bool {
        self.len >= self.capacity
    }

    /// Takes an ID for a query of intended time `intended`, sent at `now`; None when full.
    #[inline]
    pub fn insert(&mut self, intended: u64, query: u64, now: u64) -> Option<u16> {
        if self.is_full() {
            return None;
        }
        if (self.len + 1) * 2 > self.table.len() && self.table.len() < Self::max_size(self.capacity) {
            self.grow();
        }
        // Fewer than half the table is in use, so a free slot is found quickly.
        loop {
            let id = self.next_id;
            self.next_id = self.next_id.wrapping_add(1);
            let e = slot_mut(&mut self.table, id);
            if !e.live {
                self.generation = self.generation.wrapping_add(1);
                *e = Entry { live: true, sends: 1, id, generation: self.generation, intended, query };
                self.fifo.push_back((id, self.generation, intended));
                if let Some(r) = &mut self.resend {
                    r.due.push_back((id, self.generation, now + r.policy.every_ns));
                }
                self.len += 1;
                return Some(id);
            }
        }
    }

    /// Doubles the table; live entries keep their ID, so they land in distinct slots.
    fn grow(&mut self) {
        let size = self.table.len() * 2;
        let old = std::mem::replace(&mut self.table, vec![Entry::default(); size]);
        for e in old.into_iter().filter(|e| e.live) {
            *slot_mut(&mut self.table, e.id) = e;
        }
    }

    /// The intended time of the outstanding query `id`.
    pub fn intended(&self, id: u16) -> Option<u64> {
        let e = slot(&self.table, id);
        (e.live && e.id == id).then_some(e.intended)
    }

    /// Removes the query with `id`, if outstanding.
    #[inline]
    pub fn remove(&mut self, id: u16) -> Option<Outstanding> {
        let e = slot_mut(&mut self.table, id);
        if !e.live || e.id != id {
            return None;
        }
        e.live = false;
        let gone = Outstanding { intended: e.intended, query: e.query };
        self.len -= 1;
        self.trim();
        Some(gone)
    }

    fn trim(&mut self) {
        let live = |table: &[Entry], &(id, generation, _): &(u16, u32, u64)| {
            let e = slot(table, id);
            e.live && e.generation == generation
        };
        while self.fifo.front().is_some_and(|f| !live(&self.table, f)) {
            self.fifo.pop_front();
        }
        if let Some(r) = &mut self.resend {
            while r.due.front().is_some_and(|d| !live(&self.table, d)) {
                r.due.pop_front();
            }
        }
    }

    /// When the next query is to be sent again, if any is ([`Window::retransmitting`]).
    #[inline]
    pub fn next_retransmit(&self) -> Option<u64> {
        self.resend.as_ref()?.due.front().map(|&(_, _, at)| at)
    }

    /// Hands every query due to be sent again at `now` to `send` (its ID and its index in the
    /// query set: the same message as its first send) and returns how many went. Each waits a
    /// try's timeout again if it has sends left; after its last it waits for its answer or its
    /// expiry.
    pub fn retransmit(&mut self, now: u64, mut send: impl FnMut(u16, u64)) -> u64 {
        let Some(r) = &mut self.resend else { return 0 };
        let mut n = 0;
        while let Some(&(id, generation, at)) = r.due.front() {
            if at > now {
                break;
            }
            r.due.pop_front();
            let e = slot_mut(&mut self.table, id);
            if !(e.live && e.generation == generation) {
                continue;
            }
            e.sends += 1;
            send(id, e.query);
            n += 1;
            if e.sends < r.policy.attempts {
                r.due.push_back((id, generation, now + r.policy.every_ns));
            }
        }
        self.trim();
        n
    }

    /// Whether the outstanding query `id` was last sent as a retransmission.
    pub fn resent(&self, id: u16) -> bool {
        let e = slot(&self.table, id);
        e.live && e.id == id && e.sends > 1
    }

    /// Removes and counts the queries whose intended time is at or before `deadline`.
    pub fn expire(&mut self, deadline: u64) -> u64 {
        let mut n = 0;
        while let Some(&(id, generation, intended)) = self.fifo.front() {
            if intended > deadline {
                break;
            }
            self.fifo.pop_front();
            let e = slot_mut(&mut self.table, id);
            if e.live && e.generation == generation {
                e.live = false;
                self.len -= 1;
                n += 1;
            }
        }
        self.trim();
        n
    }

    /// Intended time of the oldest outstanding query.
    #[inline]
    pub fn oldest(&self) -> Option<u64> {
        self.fifo.front().map(|&(_, _, t)| t)
    }

    /// Removes every outstanding query and returns them in send order.
    pub fn drain(&mut self) -> Vec<Outstanding> {
        let mut gone = Vec::with_capacity(self.len);
        for (id, generation, intended) in self.fifo.drain(..) {
            let e = slot_mut(&mut self.table, id);
            if e.live && e.generation == generation {
                e.live = false;
                gone.push(Outstanding { intended, query: e.query });
            }
        }
        self.len = 0;
        if let Some(r) = &mut self.resend {
            r.due.clear();
        }
        gone
    }

    /// Forgets every outstanding query and returns how many there were.
    pub fn clear(&mut self) -> u64 {
        let n = self.len as u64;
        for (id, generation, _) in self.fifo.drain(..) {
            let e = slot_mut(&mut self.table, id);
            if e.generation == generation {
                e.live = false;
            }
        }
        self.len = 0;
        if let Some(r) = &mut self.resend {
            r.due.clear();
        }
        n
    }
}

/// One outstanding DoH query.
#[derive(Debug, Clone, Copy)]
struct StreamEntry {
    stream: u32,
    live: bool,
    intended: u64,
    query: u64,
}

/// Outstanding queries of one HTTP/2 connection, keyed by stream ID. The client's stream IDs
/// only grow, so send order is ID order: matching is a binary search, expiry takes from the
/// front and a GOAWAY's unprocessed streams come off the back.
#[derive(Debug, Default)]
pub struct StreamWindow {
    fifo: VecDeque<StreamEntry>,
    len: usize,
}

impl StreamWindow {
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Adds the query sent on `stream`, which must be above every stream added before.
    #[inline]
    pub fn insert(&mut self, stream: u32, intended: u64, query: u64) {
        debug_assert!(self.fifo.back().is_none_or(|e| e.stream < stream));
        self.fifo.push_back(StreamEntry { stream, live: true, intended, query });
        self.len += 1;
    }

    /// Removes the query of `stream`, if outstanding.
    #[inline]
    pub fn remove(&mut self, stream: u32) -> Option<Outstanding> {
        let i = self.fifo.binary_search_by_key(&stream, |e| e.stream).ok()?;
        let e = &mut self.fifo[i];
        if !e.live {
            return None;
        }
        e.live = false;
        let gone = Outstanding { intended: e.intended, query: e.query };
        self.len -= 1;
        self.trim();
        Some(gone)
    }

    fn trim(&mut self) {
        while self.fifo.front().is_some_and(|e| !e.live) {
            self.fifo.pop_front();
        }
    }

    /// Removes the queries whose intended time is at or before `deadline`, handing each stream
    /// to `cancel`; returns how many.
    pub fn expire(&mut self, deadline: u64, mut cancel: impl FnMut(u32)) -> u64 {
        let mut n = 0;
        while let Some(e) = self.fifo.front() {
            if e.live && e.intended > deadline {
                break;
            }
            if e.live {
                cancel(e.stream);
                self.len -= 1;
                n += 1;
            }
            self.fifo.pop_front();
        }
        n
    }

    /// Removes the queries on streams above `last` (not processed by a server going away) and
    /// returns them in send order.
    pub fn take_above(&mut self, last: u32) -> Vec<Outstanding> {
        let mut gone = Vec::new();
        while self.fifo.back().is_some_and(|e| e.stream > last) {
            if let Some(e) = self.fifo.pop_back().filter(|e| e.live) {
                self.len -= 1;
                gone.push(Outstanding { intended: e.intended, query: e.query });
            }
        }
        gone.reverse();
        gone
    }

    /// Intended time of the oldest outstanding query.
    #[inline]
    pub fn oldest(&self) -> Option<u64> {
        self.fifo.front().map(|e| e.intended)
    }

    /// Forgets every outstanding query and returns how many there were.
    pub fn clear(&mut self) -> u64 {
        let n = self.len as u64;
        self.fifo.clear();
        self.len = 0;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_match_once_expire_in_order_and_go_away_from_the_back() {
        let mut w = StreamWindow::default();
        for (i, s) in [1u32, 3, 7, 9, 11].into_iter().enumerate() {
            w.insert(s, i as u64 * 10, i as u64);
        }
        assert_eq!(w.remove(3), Some(Outstanding { intended: 10, query: 1 }));
        assert_eq!(w.remove(3), None, "an answer counts once");
        assert_eq!(w.remove(5), None, "unknown streams do not match");
        assert_eq!(w.oldest(), Some(0));
        let mut cancelled = Vec::new();
        assert_eq!(w.expire(20, |s| cancelled.push(s)), 2);
        assert_eq!(cancelled, [1, 7], "3 was answered");
        assert_eq!(w.oldest(), Some(30));
        assert_eq!(w.len(), 2);
        w.insert(13, 50, 5);
        let refused = w.take_above(9);
        assert_eq!(refused, [Outstanding { intended: 40, query: 4 }, Outstanding { intended: 50, query: 5 }]);
        assert_eq!(w.len(), 1);
        assert_eq!(w.remove(9), Some(Outstanding { intended: 30, query: 3 }));
        assert_eq!((w.len(), w.oldest()), (0, None));
        w.insert(15, 60, 6);
        assert_eq!(w.clear(), 1);
        assert_eq!(w.len(), 0);
    }

    #[test]
    fn the_table_grows_with_what_is_outstanding_and_keeps_every_query() {
        let mut w = Window::new(100, 65_530);
        let first = w.insert(0, 0, 0).unwrap();
        assert_eq!(w.table.len(), 2, "one query outstanding needs no more");
        assert_eq!(w.remove(first), Some(Outstanding { intended: 0, query: 0 }));
        let ids: Vec<u16> = (0..100).map(|i| w.insert(i, i, i).unwrap()).collect();
        assert_eq!(w.table.len(), 256, "twice the capacity at most");
        assert!(w.is_full());
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(w.intended(*id), Some(i as u64), "query {i} found after growing");
        }
        assert_eq!(w.expire(49), 50);
        for (i, id) in ids.iter().enumerate().skip(50) {
            assert_eq!(w.remove(*id), Some(Outstanding { intended: i as u64, query: i as u64 }));
        }
        assert_eq!((w.len(), w.oldest()), (0, None));
    }

    #[test]
    fn ids_are_unique_among_outstanding_and_match_once() {
        let mut w = Window::new(4, 65_534);
        let ids: Vec<u16> = (0..4).map(|i| w.insert(i, i, i).unwrap()).collect();
        assert_eq!(ids, vec![65_534, 65_535, 0, 1]);
        assert!(w.is_full());
        assert_eq!(w.insert(9, 9, 9), None);
        assert_eq!(w.remove(0), Some(Outstanding { intended: 2, query: 2 }));
        assert_eq!(w.remove(0), None, "an answer counts once");
        assert_eq!(w.remove(7), None, "unknown IDs do not match");
        let id = w.insert(10, 10, 10).unwrap();
        assert!(!ids[..2].contains(&id) && id != ids[3]);
        assert_eq!(w.len(), 4);
    }

    #[test]
    fn expiry_follows_send_order_and_skips_answered() {
        let mut w = Window::new(100, 0);
        for t in 0..10 {
            w.insert(t * 10, t, t * 10);
        }
        w.remove(1);
        w.remove(3);
        assert_eq!(w.oldest(), Some(0));
        assert_eq!(w.expire(45), 3, "0, 20 and 40 expire; 10 and 30 were answered");
        assert_eq!(w.oldest(), Some(50));
        assert_eq!(w.len(), 5);
        w.remove(7);
        let left: Vec<u64> = w.drain().iter().map(|o| o.query).collect();
        assert_eq!(left, [5, 6, 8, 9], "in send order, without the answered one");
        assert_eq!(w.len(), 0);
        for t in 0..5 {
            w.insert(t, t, t);
        }
        assert_eq!(w.clear(), 5);
        assert_eq!(w.len(), 0);
        assert_eq!(w.oldest(), None);
    }

    #[test]
    fn a_reused_slot_is_not_expired_by_its_old_entry() {
        let mut w = Window::new(1, 0);
        let a = w.insert(0, 0, 0).unwrap();
        w.remove(a);
        let b = w.insert(100, 1, 100).unwrap();
        assert_eq!(w.expire(50), 0);
        assert_eq!(w.remove(b), Some(Outstanding { intended: 100, query: 1 }));
    }

    #[test]
    fn unanswered_queries_go_again_a_try_after_their_last_send_until_their_attempts_are_spent() {
        const T: u64 = 200;
        let mut w = Window::new(8, 7).retransmitting(Some(Retransmit { every_ns: T, attempts: 3 }));
        let a = w.insert(0, 10, 5).unwrap();
        let b = w.insert(50, 11, 50).unwrap();
        assert_eq!(w.next_retransmit(), Some(5 + T), "a try after the first send, not the intended time");
        let mut sent = Vec::new();
        assert_eq!(w.retransmit(5 + T - 1, |id, q| sent.push((id, q))), 0);
        assert_eq!(w.retransmit(5 + T, |id, q| sent.push((id, q))), 1);
        assert_eq!(sent, [(a, 10)], "the same ID and query");
        assert!(w.resent(a) && !w.resent(b));
        assert_eq!(w.next_retransmit(), Some(50 + T));
        // b is answered: it goes no more; a goes a third and last time.
        assert_eq!(w.remove(b), Some(Outstanding { intended: 50, query: 11 }));
        assert_eq!(w.next_retransmit(), Some(5 + 2 * T));
        assert_eq!(w.retransmit(1_000, |id, q| sent.push((id, q))), 1);
        assert_eq!(sent, [(a, 10), (a, 10)]);
        assert_eq!(w.next_retransmit(), None, "three sends in all");
        assert_eq!(w.retransmit(10_000, |_, _| panic!("nothing left to send")), 0);
        assert_eq!((w.len(), w.expire(3 * T)), (1, 1), "then it waits for its expiry");
        // Expired, drained or cleared queries go no more; one attempt sends nothing again.
        w.insert(700, 12, 700).unwrap();
        assert_eq!(w.expire(700), 1);
        assert_eq!(w.next_retransmit(), None);
        w.insert(800, 13, 800).unwrap();
        assert_eq!(w.clear(), 1);
        assert_eq!(w.next_retransmit(), None);
        let mut once = Window::new(8, 0).retransmitting(Some(Retransmit { every_ns: T, attempts: 1 }));
        once.insert(0, 0, 0).unwrap();
        assert_eq!((once.next_retransmit(), once.retransmit(u64::MAX / 2, |_, _| {})), (None, 0));
    }

    #[test]
    fn a_reused_slot_is_not_sent_again_for_its_old_entry() {
        let mut w = Window::new(2, 0).retransmitting(Some(Retransmit { every_ns: 100, attempts: 2 }));
        let x = w.insert(0, 0, 0).unwrap();
        // a is answered behind x, which keeps a's retransmission queued; its slot is taken again.
        let a = w.insert(1, 1, 1).unwrap();
        w.remove(a);
        for t in 2..4 {
            let id = w.insert(t, t, t).unwrap();
            w.remove(id);
        }
        let d = w.insert(4, 4, 4).unwrap();
        assert_eq!(d as usize & (w.table.len() - 1), a as usize & (w.table.len() - 1), "d reuses a's slot");
        let mut sent = Vec::new();
        assert_eq!(w.retransmit(101, |id, q| sent.push((id, q))), 1, "x; a's retransmission is gone with it");
        assert_eq!(w.retransmit(104, |id, q| sent.push((id, q))), 1);
        assert_eq!(sent, [(x, 0), (d, 4)]);
    }
}
