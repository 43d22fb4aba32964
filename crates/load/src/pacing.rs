//! Intended send times and the connection-opening budget.

use crate::{Arrival, Nanos, Rng};

/// Intended send times of one connection slot. Slot `i` of `n` sharing a total rate `R` sends
/// at `i/R + k·n/R` (constant spacing) or with exponential gaps of mean `n/R` (Poisson), so
/// the slots together send at `R` evenly or as one Poisson process.
#[derive(Debug, Clone)]
pub struct Pacer {
    arrival: Arrival,
    /// The first intended time's offset from the start (the slot's phase).
    phase_ns: f64,
    first_ns: f64,
    gap_ns: f64,
    sent: u64,
    next: Nanos,
    rng: Rng,
}

impl Pacer {
    /// `rate_qps` is the total rate of all `slots`; this pacer serves slot `slot`.
    pub fn new(arrival: Arrival, rate_qps: f64, slots: u64, slot: u64, start: Nanos, rng: Rng) -> Self {
        let slots = slots.max(1) as f64;
        let gap_ns = 1e9 * slots / rate_qps;
        let mut p = Pacer { arrival, phase_ns: 0.0, first_ns: 0.0, gap_ns, sent: 0, next: 0, rng };
        p.phase_ns = match arrival {
            Arrival::Constant => 1e9 * slot as f64 / rate_qps,
            Arrival::Poisson => p.exp_gap(),
        };
        p.restart(start);
        p
    }

    /// The schedule starts again at `start` (same phase): times before it were never intended.
    pub fn restart(&mut self, start: Nanos) {
        self.first_ns = start as f64 + self.phase_ns;
        self.sent = 0;
        self.next = self.first_ns as Nanos;
    }

    fn exp_gap(&mut self) -> f64 {
        -self.gap_ns * (1.0 - self.rng.next_f64()).ln()
    }

    /// Intended time of the next query.
    #[inline]
    pub fn next(&self) -> Nanos {
        self.next
    }

    /// Takes the next intended time and moves on.
    #[inline]
    pub fn take(&mut self) -> Nanos {
        let t = self.next;
        self.sent += 1;
        self.next = match self.arrival {
            // Computed from the start, not accumulated, so that rounding never drifts.
            Arrival::Constant => (self.first_ns + self.sent as f64 * self.gap_ns) as Nanos,
            Arrival::Poisson => t + self.exp_gap() as Nanos,
        };
        t
    }
}

/// A token bucket bounding how many connections are opened per second.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    per_ns: f64,
    burst: f64,
    tokens: f64,
    last: Nanos,
}

impl TokenBucket {
    /// `rate` tokens per second, holding at most `burst` (at least 1), starting with one token.
    pub fn new(rate: f64, burst: f64) -> Self {
        TokenBucket { per_ns: rate / 1e9, burst: burst.max(1.0), tokens: 1.0, last: 0 }
    }

    /// Reserves the next token, asked at `now`: returns when it is available (`now` or later).
    /// The caller waits until then and goes. Tokens are handed out in the order they are
    /// asked for, each at its own time, so that many waiters are each woken once (with
    /// 12 500 connections waiting on one bucket, waking every waiter for every token made the
    /// bucket, not the rate, the limit).
    pub fn reserve(&mut self, now: Nanos) -> Nanos {
        if now > self.last {
            self.tokens = (self.tokens + (now - self.last) as f64 * self.per_ns).min(self.burst);
            self.last = now;
        }
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            now
        } else {
            now + ((-self.tokens) / self.per_ns).ceil() as Nanos
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Nanos = 1_000_000_000;

    #[test]
    fn constant_slots_interleave_evenly() {
        let mut times: Vec<Nanos> = (0..4)
            .flat_map(|slot| {
                let mut p = Pacer::new(Arrival::Constant, 1000.0, 4, slot, 0, Rng::new(0, slot));
                (0..250).map(move |_| p.take())
            })
            .collect();
        times.sort();
        assert_eq!(times.len(), 1000);
        for (k, t) in times.iter().enumerate() {
            assert!((*t as i64 - k as i64 * 1_000_000).abs() <= 1, "query {k} at {t}");
        }
    }

    #[test]
    fn a_restart_moves_the_schedule_keeping_the_phase() {
        let mut p = Pacer::new(Arrival::Constant, 1000.0, 4, 3, 0, Rng::new(0, 3));
        assert_eq!(p.take(), 3_000_000);
        p.take();
        p.restart(S);
        assert_eq!((p.take(), p.take()), (S + 3_000_000, S + 7_000_000));
    }

    #[test]
    fn constant_pacing_does_not_drift() {
        let mut p = Pacer::new(Arrival::Constant, 3.0, 1, 0, 5, Rng::new(0, 0));
        for _ in 0..3_000_000 {
            p.take();
        }
        assert_eq!(p.next(), 5 + 1_000_000 * S);
    }

    #[test]
    fn poisson_has_the_right_mean_and_spread() {
        let mut p = Pacer::new(Arrival::Poisson, 10_000.0, 10, 3, 0, Rng::new(9, 3));
        let mut last = 0;
        let gaps: Vec<f64> = (0..50_000)
            .map(|_| {
                let t = p.take();
                let g = (t - last) as f64;
                last = t;
                g
            })
            .collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        assert!((mean / 1e6 - 1.0).abs() < 0.02, "mean gap {mean}");
        // Exponential: standard deviation equals the mean.
        assert!((var.sqrt() / mean - 1.0).abs() < 0.05);
    }

    #[test]
    fn bucket_limits_rate_and_burst() {
        let mut b = TokenBucket::new(100.0, 5.0);
        assert_eq!(b.reserve(0), 0);
        // Waiters are served in turn, one every 10 ms.
        assert_eq!([b.reserve(0), b.reserve(0), b.reserve(5_000_000)], [10_000_000, 20_000_000, 30_000_000]);
        // After a long pause only `burst` tokens are available at once, then one per 10 ms.
        let at: Vec<Nanos> = (0..7).map(|_| b.reserve(10 * S)).collect();
        assert_eq!(at[..5], [10 * S; 5]);
        assert_eq!(at[5..], [10 * S + 10_000_000, 10 * S + 20_000_000]);
        // 1 000 waiters asking at once: a burst, then one every 10 ms.
        let at: Vec<Nanos> = (0..1000).map(|_| b.reserve(20 * S)).collect();
        assert_eq!(at[..5], [20 * S; 5]);
        assert!(at[4..].windows(2).all(|w| w[1] - w[0] == 10_000_000), "evenly spaced");
        assert_eq!(at[999], 20 * S + 995 * 10_000_000);
    }
}
