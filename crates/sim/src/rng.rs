//! The simulator's own random generator (xoshiro256** seeded through SplitMix64). It lives here
//! rather than in a crate so that a dependency update can never change a seeded run's output.

/// A small, fast, deterministic generator. One per task, derived from the run's seed and the task's
/// index, so adding a task does not reshuffle the others' draws.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rng {
    pub fn new(seed: u64, stream: u64) -> Rng {
        let mut st = seed ^ stream.wrapping_mul(0xd1b5_4a32_d192_ed03);
        let s = [
            splitmix(&mut st),
            splitmix(&mut st),
            splitmix(&mut st),
            splitmix(&mut st),
        ];
        Rng { s }
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in `[lo, hi]` (inclusive), without modulo bias worth measuring (128-bit multiply).
    #[inline]
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        let span = hi - lo + 1;
        if span == 0 {
            return self.next_u64();
        }
        lo + ((self.next_u64() as u128 * span as u128) >> 64) as u64
    }

    /// Uniform in `[0, 1)`.
    #[inline]
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Exponentially distributed with the given mean, in ns (at least 1).
    #[inline]
    pub fn exp(&mut self, mean: u64) -> u64 {
        let u = 1.0 - self.unit(); // (0, 1]
        ((-u.ln() * mean as f64) as u64).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_streams_differ() {
        let a: Vec<u64> = (0..8)
            .map({
                let mut r = Rng::new(7, 0);
                move |_| r.next_u64()
            })
            .collect();
        let mut r = Rng::new(7, 0);
        let b: Vec<u64> = (0..8).map(|_| r.next_u64()).collect();
        assert_eq!(a, b);
        let mut r2 = Rng::new(7, 1);
        assert_ne!(a[0], r2.next_u64());
    }

    #[test]
    fn range_is_inclusive_and_roughly_uniform() {
        let mut r = Rng::new(1, 0);
        let mut counts = [0u32; 4];
        for _ in 0..40_000 {
            let v = r.range(10, 13);
            assert!((10..=13).contains(&v));
            counts[(v - 10) as usize] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
        assert_eq!(r.range(5, 5), 5);
    }

    #[test]
    fn exponential_mean_is_close() {
        let mut r = Rng::new(3, 0);
        let n = 100_000u64;
        let sum: u64 = (0..n).map(|_| r.exp(1_000)).sum();
        let mean = sum as f64 / n as f64;
        assert!((mean - 1_000.0).abs() < 20.0, "{mean}");
    }
}
