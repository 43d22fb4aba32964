//! What one direction of the link decides for each packet, in virtual time: lost, dropped by
//! the bottleneck's queue, or delivered at a given time. Pure: the caller passes the time a
//! packet was read and the generator its draws come from.
//!
//! The model, in the order a packet meets it: a random loss; a bottleneck at `rate` that sends
//! one packet at a time (`start = max(now, link_free)`, `link_free = start + bits / rate`) and
//! holds at most `queue` packets (the one being sent included) before it drops the next; the
//! propagation delay plus a jitter drawn uniformly in [−jitter, +jitter] (never before the packet
//! has left the bottleneck); and no reordering: a packet is delivered no earlier than the one
//! before it.

use super::spec::Impairment;
use dnscost_load::Rng;
use std::collections::VecDeque;

/// What becomes of one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Deliver it at this time (ns, on the caller's clock).
    Deliver(u64),
    /// Dropped by the random loss.
    Lost,
    /// Dropped because the bottleneck's queue was full.
    QueueFull,
}

/// One direction's (or one split path's) state.
#[derive(Debug)]
pub struct Shaper {
    imp: Impairment,
    /// When the bottleneck has sent everything it was given.
    link_free_ns: u64,
    /// What the bottleneck's last packet left over of a nanosecond, in bit·ns / rate units, so
    /// that rounding never adds up to a faster or slower rate.
    carry: u128,
    /// When each packet still in the bottleneck leaves it, oldest first.
    in_bottleneck: VecDeque<u64>,
    /// When the last packet is delivered.
    last_delivery_ns: u64,
}

impl Shaper {
    pub fn new(imp: Impairment) -> Shaper {
        let capacity = if imp.rate_bps.is_some() { imp.queue.min(4096) as usize } else { 0 };
        Shaper { imp, link_free_ns: 0, carry: 0, in_bottleneck: VecDeque::with_capacity(capacity), last_delivery_ns: 0 }
    }

    /// Decides the fate of a packet of `len` octets read at `now_ns`. Times passed in never go
    /// back.
    pub fn offer(&mut self, now_ns: u64, len: usize, rng: &mut Rng) -> Verdict {
        if self.imp.loss > 0.0 && rng.chance(self.imp.loss) {
            return Verdict::Lost;
        }
        let sent_ns = match self.imp.rate_bps {
            None => now_ns,
            Some(rate) => {
                while self.in_bottleneck.front().is_some_and(|&leaves| leaves <= now_ns) {
                    self.in_bottleneck.pop_front();
                }
                if self.in_bottleneck.len() >= self.imp.queue as usize {
                    return Verdict::QueueFull;
                }
                if now_ns > self.link_free_ns {
                    self.link_free_ns = now_ns;
                    self.carry = 0;
                }
                let work = len as u128 * 8 * 1_000_000_000 + self.carry;
                let rate = rate as u128;
                self.carry = work % rate;
                self.link_free_ns += (work / rate) as u64;
                self.in_bottleneck.push_back(self.link_free_ns);
                self.link_free_ns
            }
        };
        let mut at = sent_ns + self.imp.delay_ns;
        if self.imp.jitter_ns > 0 {
            let j = self.imp.jitter_ns;
            let draw = ((rng.next_f64() * (2 * j + 1) as f64) as u64).min(2 * j);
            at = (at + draw).saturating_sub(j).max(sent_ns);
        }
        at = at.max(self.last_delivery_ns);
        self.last_delivery_ns = at;
        Verdict::Deliver(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn shaper(s: &str) -> Shaper {
        Shaper::new(s.parse().unwrap())
    }

    #[test]
    fn delay_alone_adds_the_delay() {
        let mut s = shaper("delay=35ms");
        let mut rng = Rng::new(1, 0);
        assert_eq!(s.offer(0, 1500, &mut rng), Verdict::Deliver(35 * MS));
        assert_eq!(s.offer(7, 40, &mut rng), Verdict::Deliver(35 * MS + 7));
        let mut none = shaper("");
        assert_eq!(none.offer(123, 1500, &mut rng), Verdict::Deliver(123));
    }

    #[test]
    fn the_bottleneck_serialises_at_its_rate_then_the_delay_applies() {
        // 8 Mbit/s: 1 000 octets take 1 ms.
        let mut s = shaper("rate=8mbit,delay=10ms");
        let mut rng = Rng::new(1, 0);
        assert_eq!(s.offer(0, 1000, &mut rng), Verdict::Deliver(11 * MS));
        // Arrives while the first is being sent: waits for it.
        assert_eq!(s.offer(MS / 2, 1000, &mut rng), Verdict::Deliver(12 * MS));
        // Arrives on an idle link.
        assert_eq!(s.offer(5 * MS, 500, &mut rng), Verdict::Deliver(15 * MS + MS / 2));
        // One octet at 3 kbit/s takes 2 666 666⅔ ns: the fractions are carried, so the rate
        // holds exactly.
        let mut s = shaper("rate=3kbit,queue=3000");
        let mut last = 0;
        for _ in 0..3000 {
            if let Verdict::Deliver(at) = s.offer(0, 1, &mut rng) {
                last = at;
            }
        }
        // 3 000 × 8 bits at 3 000 bit/s: 8 s.
        assert_eq!(last, 8_000_000_000);
    }

    #[test]
    fn a_full_queue_drops_the_tail() {
        let mut s = shaper("rate=8mbit,queue=3");
        let mut rng = Rng::new(1, 0);
        let verdicts: Vec<_> = (0..5).map(|_| s.offer(0, 1000, &mut rng)).collect();
        assert_eq!(
            verdicts,
            [
                Verdict::Deliver(MS),
                Verdict::Deliver(2 * MS),
                Verdict::Deliver(3 * MS),
                Verdict::QueueFull,
                Verdict::QueueFull
            ]
        );
        // Once the first has left the bottleneck there is room for one more.
        assert_eq!(s.offer(MS, 1000, &mut rng), Verdict::Deliver(4 * MS));
        assert_eq!(s.offer(MS, 1000, &mut rng), Verdict::QueueFull);
    }

    #[test]
    fn loss_is_drawn_per_packet_and_reproducibly() {
        let run = |seed| {
            let mut s = shaper("loss=20%");
            let mut rng = Rng::new(seed, 0);
            (0..10_000).filter(|&i| s.offer(i, 100, &mut rng) == Verdict::Lost).count()
        };
        let lost = run(1);
        assert!((1800..2200).contains(&lost), "{lost}");
        assert_eq!(lost, run(1));
        assert_ne!(lost, run(2));
        let mut all = shaper("loss=100%");
        assert_eq!(all.offer(0, 1, &mut Rng::new(1, 0)), Verdict::Lost);
    }

    #[test]
    fn jitter_stays_in_its_range_and_never_reorders() {
        let mut s = shaper("delay=10ms,jitter=2ms");
        let mut rng = Rng::new(3, 0);
        let (mut lo, mut hi, mut previous) = (u64::MAX, 0, 0);
        for i in 0..10_000u64 {
            let now = i * 5 * MS;
            let Verdict::Deliver(at) = s.offer(now, 100, &mut rng) else { panic!() };
            assert!(at >= previous);
            previous = at;
            lo = lo.min(at - now);
            hi = hi.max(at - now);
        }
        assert!((8 * MS..8 * MS + MS / 10).contains(&lo), "{lo}");
        assert!(hi <= 12 * MS && hi > 12 * MS - MS / 10, "{hi}");
        // Packets 1 µs apart: each no earlier than the one before.
        let mut previous = 0;
        for i in 0..1000 {
            let Verdict::Deliver(at) = s.offer(60_000 * MS + i * 1000, 100, &mut rng) else { panic!() };
            assert!(at >= previous);
            previous = at;
        }
        // Jitter larger than the delay: never before the packet was read.
        let mut s = shaper("delay=1ms,jitter=5ms");
        for i in 0..1000 {
            let Verdict::Deliver(at) = s.offer(i * 10 * MS, 100, &mut rng) else { panic!() };
            assert!(at >= i * 10 * MS);
        }
    }
}
