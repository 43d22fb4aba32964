/// A small, seedable generator (SplitMix64): reproducible arrivals and resumption draws
/// without a dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for stream `stream` of run seed `seed`.
    pub fn new(seed: u64, stream: u64) -> Self {
        let mut r = Rng(seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03));
        r.next_u64();
        r
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p >= 1.0 || (p > 0.0 && self.next_f64() < p)
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn chance_matches_probability_and_is_reproducible() {
        let mut a = Rng::new(1, 2);
        let hits = (0..100_000).filter(|_| a.chance(0.3)).count();
        assert!((29_000..31_000).contains(&hits), "{hits}");
        assert_eq!(Rng::new(5, 6).next_u64(), Rng::new(5, 6).next_u64());
        assert_ne!(Rng::new(5, 6).next_u64(), Rng::new(5, 7).next_u64());
        assert!(!Rng::new(0, 0).chance(0.0));
        assert!(Rng::new(0, 0).chance(1.0));
    }
}
