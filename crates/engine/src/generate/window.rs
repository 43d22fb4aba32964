//! Outstanding queries of one socket or connection: ID allocation, matching, and expiry in
//! send order. No I/O; times in nanoseconds since the start of the run.

use std::collections::VecDeque;

#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    live: bool,
    id: u16,
    generation: u32,
    intended: u64,
    query: u64,
}

/// A query that left the window: answered or expired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outstanding {
    /// Intended send time.
    pub intended: u64,
    /// Index in the query set (to check the answer's question).
    pub query: u64,
}

/// Outstanding queries, indexed by DNS ID.
#[derive(Debug)]
pub struct Window {
    table: Vec<Entry>,
    mask: usize,
    next_id: u16,
    generation: u32,
    fifo: VecDeque<(u16, u32, u64)>,
    len: usize,
    capacity: usize,
}

impl Window {
    /// A window for at most `capacity` outstanding queries (at most 65 535).
    pub fn new(capacity: usize, first_id: u16) -> Self {
        let capacity = capacity.clamp(1, 65_535);
        let size = (capacity * 2).next_power_of_two().min(65_536);
        Window {
            table: vec![Entry::default(); size],
            mask: size - 1,
            next_id: first_id,
            generation: 0,
            fifo: VecDeque::with_capacity(capacity),
            len: 0,
            capacity,
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_full(&self) -> bool {
        self.len >= self.capacity
    }

    /// Takes an ID for a query sent at intended time `intended`; None when full.
    #[inline]
    pub fn insert(&mut self, intended: u64, query: u64) -> Option<u16> {
        if self.is_full() {
            return None;
        }
        // Fewer than half the table is in use, so a free slot is found quickly.
        loop {
            let id = self.next_id;
            self.next_id = self.next_id.wrapping_add(1);
            let e = &mut self.table[id as usize & self.mask];
            if !e.live {
                self.generation = self.generation.wrapping_add(1);
                *e = Entry { live: true, id, generation: self.generation, intended, query };
                self.fifo.push_back((id, self.generation, intended));
                self.len += 1;
                return Some(id);
            }
        }
    }

    /// Removes the query with `id`, if outstanding.
    #[inline]
    pub fn remove(&mut self, id: u16) -> Option<Outstanding> {
        let e = &mut self.table[id as usize & self.mask];
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
        while let Some(&(id, generation, _)) = self.fifo.front() {
            let e = &self.table[id as usize & self.mask];
            if e.live && e.generation == generation {
                break;
            }
            self.fifo.pop_front();
        }
    }

    /// Removes and counts the queries whose intended time is at or before `deadline`.
    pub fn expire(&mut self, deadline: u64) -> u64 {
        let mut n = 0;
        while let Some(&(id, generation, intended)) = self.fifo.front() {
            if intended > deadline {
                break;
            }
            self.fifo.pop_front();
            let e = &mut self.table[id as usize & self.mask];
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
            let e = &mut self.table[id as usize & self.mask];
            if e.live && e.generation == generation {
                e.live = false;
                gone.push(Outstanding { intended, query: e.query });
            }
        }
        self.len = 0;
        gone
    }

    /// Forgets every outstanding query and returns how many there were.
    pub fn clear(&mut self) -> u64 {
        let n = self.len as u64;
        for (id, generation, _) in self.fifo.drain(..) {
            let e = &mut self.table[id as usize & self.mask];
            if e.generation == generation {
                e.live = false;
            }
        }
        self.len = 0;
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
#[derive(Debug)]
pub struct StreamWindow {
    fifo: VecDeque<StreamEntry>,
    len: usize,
}

impl StreamWindow {
    pub fn new(capacity: usize) -> Self {
        StreamWindow { fifo: VecDeque::with_capacity(capacity.min(65_536)), len: 0 }
    }

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
        let mut w = StreamWindow::new(8);
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
    fn ids_are_unique_among_outstanding_and_match_once() {
        let mut w = Window::new(4, 65_534);
        let ids: Vec<u16> = (0..4).map(|i| w.insert(i, i).unwrap()).collect();
        assert_eq!(ids, vec![65_534, 65_535, 0, 1]);
        assert!(w.is_full());
        assert_eq!(w.insert(9, 9), None);
        assert_eq!(w.remove(0), Some(Outstanding { intended: 2, query: 2 }));
        assert_eq!(w.remove(0), None, "an answer counts once");
        assert_eq!(w.remove(7), None, "unknown IDs do not match");
        let id = w.insert(10, 10).unwrap();
        assert!(!ids[..2].contains(&id) && id != ids[3]);
        assert_eq!(w.len(), 4);
    }

    #[test]
    fn expiry_follows_send_order_and_skips_answered() {
        let mut w = Window::new(100, 0);
        for t in 0..10 {
            w.insert(t * 10, t);
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
            w.insert(t, t);
        }
        assert_eq!(w.clear(), 5);
        assert_eq!(w.len(), 0);
        assert_eq!(w.oldest(), None);
    }

    #[test]
    fn a_reused_slot_is_not_expired_by_its_old_entry() {
        let mut w = Window::new(1, 0);
        let a = w.insert(0, 0).unwrap();
        w.remove(a);
        let b = w.insert(100, 1).unwrap();
        assert_eq!(w.expire(50), 0);
        assert_eq!(w.remove(b), Some(Outstanding { intended: 100, query: 1 }));
    }
}
