//! The one source of chance: splitmix64, seeded by `--seed`.
//!
//! Every choice of a trial (give up, hang, which interface, send a wrong call first) is drawn
//! from this one stream in a fixed order, so the same seed, plan, policy and server give the same
//! calls. splitmix64 is a few lines, passes the usual statistical batteries and needs no crate.

/// A splitmix64 generator.
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator whose stream is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        Rng { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform number in [0, 1) with 53 bits of precision.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p` (0 never, 1 always): exactly one draw whatever `p` is, so the
    /// stream stays aligned between policies.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// A uniform index below `n` (`n` ≥ 1); one draw.
    pub fn below(&mut self, n: usize) -> usize {
        // The modulo bias is below 2^-50 for any plan this tool accepts.
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn the_same_seed_gives_the_same_stream_and_another_seed_another() {
        let a: Vec<u64> = (0..4)
            .map({
                let mut r = Rng::new(7);
                move |_| r.next_u64()
            })
            .collect();
        let mut r = Rng::new(7);
        assert_eq!(a, (0..4).map(|_| r.next_u64()).collect::<Vec<_>>());
        assert_ne!(a[0], Rng::new(8).next_u64());
    }

    #[test]
    fn chance_is_never_at_zero_always_at_one_and_near_p_between() {
        let mut r = Rng::new(1);
        let n = 20_000;
        assert!((0..n).all(|_| !r.chance(0.0)));
        assert!((0..n).all(|_| r.chance(1.0)));
        let hits = (0..n).filter(|_| r.chance(0.3)).count() as f64 / n as f64;
        // Five standard errors of a proportion at n = 20 000: a bad generator fails, a good one
        // practically never does.
        assert!(
            (hits - 0.3).abs() < 5.0 * (0.3f64 * 0.7 / n as f64).sqrt(),
            "{hits}"
        );
    }
}
