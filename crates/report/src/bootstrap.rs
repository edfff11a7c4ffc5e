//! A bootstrap confidence interval of the ratio of one percentile between two runs, drawn from
//! their HDR histograms alone (a result document keeps no samples).
//!
//! Resampling n values from a run and taking the k-th smallest is the same, in distribution, as
//! reading the run's empirical quantile at the k-th smallest of n uniform numbers, which is
//! Beta(k, n - k + 1). So one bootstrap replicate of a percentile costs one Beta draw and one
//! binary search over the histogram's buckets, whatever n is: 10 million samples cost what 1,000 do.
//! The generator is our own (xoshiro256**, seeded through splitmix64) so the same documents give
//! the same interval on every machine and every version of every dependency.

use crate::runs::RatioInterval;
use punctual_stats::Recorder;

/// A small deterministic generator (xoshiro256**).
#[derive(Clone, Debug)]
pub struct Rng([u64; 4]);

impl Rng {
    pub fn seeded(seed: u64) -> Rng {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng([next(), next(), next(), next()])
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.0;
        let out = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        out
    }

    /// Uniform in (0, 1): never exactly 0, so its logarithm is finite.
    pub fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller; one of the pair is thrown away, simplicity over speed).
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    /// Gamma(shape, 1) for shape >= 1 (Marsaglia and Tsang 2000).
    pub fn gamma(&mut self, shape: f64) -> f64 {
        debug_assert!(shape >= 1.0);
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = 1.0 + c * x;
            if v <= 0.0 {
                continue;
            }
            let v = v * v * v;
            let u = self.uniform();
            if u < 1.0 - 0.0331 * x.powi(4) || u.ln() < 0.5 * x * x + d * (1.0 - v + v.ln()) {
                return d * v;
            }
        }
    }

    /// Beta(a, b) for a, b >= 1.
    pub fn beta(&mut self, a: f64, b: f64) -> f64 {
        let x = self.gamma(a);
        let y = self.gamma(b);
        x / (x + y)
    }
}

/// A run's empirical distribution as the histogram holds it: bucket values (the highest value
/// each bucket stands for, clamped to the exact min and max, as [`Recorder::percentile`] reads
/// them) and cumulative counts.
#[derive(Clone, Debug)]
pub struct Empirical {
    values: Vec<u64>,
    cumulative: Vec<u64>,
}

impl Empirical {
    pub fn of(rec: &Recorder) -> Empirical {
        let h = rec.histogram();
        let (min, max) = (rec.min().unwrap_or(0), rec.max().unwrap_or(0));
        let mut values = Vec::new();
        let mut cumulative = Vec::new();
        let mut seen = 0u64;
        for v in h.iter_recorded() {
            seen = seen.saturating_add(v.count_at_value());
            values.push(h.highest_equivalent(v.value_iterated_to()).clamp(min, max));
            cumulative.push(seen);
        }
        Empirical { values, cumulative }
    }

    pub fn count(&self) -> u64 {
        self.cumulative.last().copied().unwrap_or(0)
    }

    /// The value of 1-based rank `r`.
    pub fn at_rank(&self, r: u64) -> u64 {
        let i = self.cumulative.partition_point(|&c| c < r);
        self.values[i.min(self.values.len() - 1)]
    }

    /// Nearest-rank percentile (milli-percent), as the documents compute it.
    pub fn percentile(&self, milli_percent: u64) -> u64 {
        self.at_rank(rank(self.count(), milli_percent))
    }

    /// One bootstrap replicate of the percentile: the k-th smallest of n values drawn with
    /// replacement, through its Beta(k, n - k + 1) uniform order statistic.
    pub fn resample_percentile(&self, milli_percent: u64, rng: &mut Rng) -> u64 {
        let n = self.count();
        let k = rank(n, milli_percent);
        let u = rng.beta(k as f64, (n - k + 1) as f64);
        let r = ((u * n as f64).ceil() as u64).clamp(1, n);
        self.at_rank(r)
    }
}

/// 1-based nearest rank: ceil(n * p / 100000), within 1..=n.
fn rank(n: u64, milli_percent: u64) -> u64 {
    let r = (n as u128 * milli_percent as u128).div_ceil(100_000) as u64;
    r.clamp(1, n.max(1))
}

/// The `confidence` (e.g. 0.99) interval of `b`'s percentile over `a`'s, as a ratio, from
/// `resamples` replicates of each: only the noise inside each run (see `crate::runs` for the
/// spread between runs). Ratios rather than differences, so the interval never reaches below
/// zero however small `a`'s percentile is. `None` when either run has no samples.
pub fn ratio_interval(
    a: &Empirical,
    b: &Empirical,
    milli_percent: u64,
    resamples: usize,
    confidence: f64,
    rng: &mut Rng,
) -> Option<RatioInterval> {
    if a.count() == 0 || b.count() == 0 {
        return None;
    }
    let ratio = |x: u64, y: u64| y.max(1) as f64 / x.max(1) as f64;
    let mut ratios: Vec<f64> = (0..resamples.max(1))
        .map(|_| {
            let ra = a.resample_percentile(milli_percent, rng);
            let rb = b.resample_percentile(milli_percent, rng);
            ratio(ra, rb)
        })
        .collect();
    ratios.sort_unstable_by(f64::total_cmp);
    let tail = (1.0 - confidence).clamp(0.0, 1.0) / 2.0;
    let at =
        |q: f64| ratios[((q * (ratios.len() - 1) as f64).round() as usize).min(ratios.len() - 1)];
    Some(RatioInterval {
        ratio: ratio(a.percentile(milli_percent), b.percentile(milli_percent)),
        low: at(tail),
        high: at(1.0 - tail),
        df: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(values: impl IntoIterator<Item = u64>) -> Recorder {
        let mut r = Recorder::new();
        for v in values {
            r.record(v);
        }
        r
    }

    #[test]
    fn percentiles_match_the_recorder() {
        let r = rec((0..10_000u64).map(|i| 1_000 + (i * 7919) % 50_000));
        let e = Empirical::of(&r);
        for mp in [1u64, 50_000, 99_000, 99_900, 100_000] {
            assert_eq!(e.percentile(mp), r.percentile(mp), "at {mp}");
        }
    }

    #[test]
    fn beta_has_the_right_mean_and_spread() {
        let mut rng = Rng::seeded(7);
        let (a, b) = (990.0, 11.0);
        let xs: Vec<f64> = (0..20_000).map(|_| rng.beta(a, b)).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
        let (m, v) = (a / (a + b), a * b / ((a + b).powi(2) * (a + b + 1.0)));
        assert!((mean - m).abs() < 1e-3, "mean {mean} against {m}");
        assert!((var / v - 1.0).abs() < 0.05, "variance {var} against {v}");
    }

    #[test]
    fn the_interval_covers_a_shift_and_excludes_one() {
        let a = Empirical::of(&rec((0..20_000u64).map(|i| 10_000 + (i * 7919) % 10_000)));
        let b = Empirical::of(&rec((0..20_000u64).map(|i| 12_000 + (i * 7919) % 10_000)));
        let ci = ratio_interval(&a, &b, 99_000, 1_000, 0.99, &mut Rng::seeded(1)).unwrap();
        let shift = 21_900.0 / 19_900.0;
        assert!(
            ci.low > 1.0 && ci.low <= shift && ci.high >= shift,
            "{ci:?}"
        );
        let same = ratio_interval(&a, &a, 99_000, 1_000, 0.99, &mut Rng::seeded(1)).unwrap();
        assert!(same.low <= 1.0 && same.high >= 1.0, "{same:?}");
    }

    #[test]
    fn a_tiny_baseline_never_gives_an_interval_below_minus_100_percent() {
        // A baseline whose p99.9 is 1 us against one with a 50 us tail, and the reverse.
        let a = Empirical::of(&rec((0..5_000u64).map(|i| 500 + i % 500)));
        let b = Empirical::of(&rec((0..5_000u64).map(|i| {
            if i % 100 == 0 {
                50_000
            } else {
                700
            }
        })));
        for (x, y) in [(&a, &b), (&b, &a)] {
            let ci = ratio_interval(x, y, 99_900, 500, 0.99, &mut Rng::seeded(2)).unwrap();
            assert!(ci.low > 0.0 && ci.low <= ci.high, "{ci:?}");
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_interval() {
        let a = Empirical::of(&rec((0..5_000u64).map(|i| 1_000 + (i * 31) % 9_000)));
        let b = Empirical::of(&rec((0..5_000u64).map(|i| 1_100 + (i * 37) % 9_000)));
        let one = ratio_interval(&a, &b, 99_900, 500, 0.99, &mut Rng::seeded(3));
        let two = ratio_interval(&a, &b, 99_900, 500, 0.99, &mut Rng::seeded(3));
        assert_eq!(one, two);
    }
}
