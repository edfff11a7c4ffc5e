use crate::summary::{nearest_rank_index, Percentiles, Summary, Within, PERCENTILES, WITHIN_NS};
use crate::Histogram;

pub const LOWEST_NS: u64 = 1;
/// One hour: anything longer is recorded at one hour in the histogram (min/max stay exact).
pub const HIGHEST_NS: u64 = 3_600_000_000_000;
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// Merging two recorders failed (histogram shapes differ: one came from another tool or version).
#[derive(Debug, thiserror::Error)]
#[error("cannot merge histograms: {0}")]
pub struct MergeError(String);

/// Per-thread sample store. Build it before the timing loop; `record` is allocation-free.
#[derive(Clone, Debug)]
pub struct Recorder {
    hist: Histogram,
    count: u64,
    min: u64,
    max: u64,
    sum: u128,
    sum_sq: u128,
    within: [u64; WITHIN_NS.len()],
    missed_periods: u64,
    woke_late: u64,
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    pub fn new() -> Self {
        let hist = Histogram::new_with_bounds(LOWEST_NS, HIGHEST_NS, SIGNIFICANT_DIGITS)
            .expect("static histogram bounds are valid");
        Recorder {
            hist,
            count: 0,
            min: u64::MAX,
            max: 0,
            sum: 0,
            sum_sq: 0,
            within: [0; WITHIN_NS.len()],
            missed_periods: 0,
            woke_late: 0,
        }
    }

    /// Record one sample in nanoseconds.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.hist.saturating_record(ns);
        self.count += 1;
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
        self.sum += ns as u128;
        self.sum_sq += (ns as u128) * (ns as u128);
        for (c, &t) in self.within.iter_mut().zip(WITHIN_NS.iter()) {
            *c += (ns <= t) as u64;
        }
    }

    /// Count `n` periods whose release had already passed (never silently skipped).
    #[inline]
    pub fn add_missed(&mut self, n: u64) {
        self.missed_periods += n;
    }

    /// Count a wake-up that arrived after its target.
    #[inline]
    pub fn add_woke_late(&mut self) {
        self.woke_late += 1;
    }

    pub fn count(&self) -> u64 {
        self.count
    }
    pub fn max(&self) -> Option<u64> {
        (self.count > 0).then_some(self.max)
    }
    pub fn min(&self) -> Option<u64> {
        (self.count > 0).then_some(self.min)
    }
    pub fn missed_periods(&self) -> u64 {
        self.missed_periods
    }
    pub fn woke_late(&self) -> u64 {
        self.woke_late
    }
    pub fn histogram(&self) -> &Histogram {
        &self.hist
    }

    /// Fold another recorder (another thread, another run) into this one.
    pub fn merge(&mut self, other: &Recorder) -> Result<(), MergeError> {
        self.hist
            .add(&other.hist)
            .map_err(|e| MergeError(format!("{e:?}")))?;
        self.count += other.count;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.sum += other.sum;
        self.sum_sq += other.sum_sq;
        for (a, b) in self.within.iter_mut().zip(other.within.iter()) {
            *a += b;
        }
        self.missed_periods += other.missed_periods;
        self.woke_late += other.woke_late;
        Ok(())
    }

    /// Rebuild a recorder from a stored summary and its histogram, to merge stored runs. Sums are
    /// reconstructed from mean and standard deviation, so merged mean/stddev are exact to rounding;
    /// percentiles come from the merged histogram and are as exact as the originals.
    pub fn from_summary(summary: &Summary, hist: Histogram) -> Self {
        let n = summary.count as f64;
        let mean = summary.mean as f64;
        let var = (summary.stddev as f64).powi(2);
        let within = [
            summary.within.us10,
            summary.within.us50,
            summary.within.us100,
            summary.within.us500,
            summary.within.us1000,
        ]
        .map(|f| (f * n).round() as u64);
        Recorder {
            hist,
            count: summary.count,
            min: if summary.count == 0 {
                u64::MAX
            } else {
                summary.min
            },
            max: summary.max,
            sum: (mean * n).round() as u128,
            sum_sq: ((var + mean * mean) * n).round() as u128,
            within,
            missed_periods: summary.missed_periods,
            woke_late: summary.woke_late,
        }
    }

    /// Exact mean and population standard deviation in ns.
    fn moments(&self) -> (f64, f64) {
        if self.count == 0 {
            return (0.0, 0.0);
        }
        let n = self.count as u128;
        let mean = self.sum as f64 / self.count as f64;
        // n*sum_sq - sum^2 is exact in u128 unless samples are hours long in their millions.
        let var = match n
            .checked_mul(self.sum_sq)
            .and_then(|a| a.checked_sub(self.sum * self.sum))
        {
            Some(num) => num as f64 / (n * n) as f64,
            None => (self.sum_sq as f64 / self.count as f64 - mean * mean).max(0.0),
        };
        (mean, var.sqrt())
    }

    /// Nearest-rank value at `milli_percent` (e.g. 99_999 for 99.999 %), from the histogram, clamped
    /// to the exact min and max.
    pub fn percentile(&self, milli_percent: u64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = nearest_rank_index(self.count, milli_percent);
        let mut seen = 0u64;
        for v in self.hist.iter_recorded() {
            seen += v.count_at_value();
            if seen >= rank {
                let value = self.hist.highest_equivalent(v.value_iterated_to());
                if value >= self.hist.highest_equivalent(HIGHEST_NS) {
                    // Saturated bucket: the samples there are an hour or more; max is the honest bound.
                    return self.max;
                }
                return value.clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// Fraction of samples at or below `threshold_ns`, read from the histogram (exact for KURT's
    /// thresholds: use [`Summary::within`] for those).
    pub fn fraction_at_or_below(&self, threshold_ns: u64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let c: u64 = self
            .hist
            .iter_recorded()
            .take_while(|v| v.value_iterated_to() <= threshold_ns)
            .map(|v| v.count_at_value())
            .sum();
        c as f64 / self.count as f64
    }

    pub fn summary(&self) -> Summary {
        let (mean, stddev) = self.moments();
        let p = |mp| self.percentile(mp);
        let frac = |c: u64| {
            if self.count == 0 {
                0.0
            } else {
                c as f64 / self.count as f64
            }
        };
        let percentiles = Percentiles {
            p50: p(PERCENTILES[0].1),
            p90: p(PERCENTILES[1].1),
            p95: p(PERCENTILES[2].1),
            p99: p(PERCENTILES[3].1),
            p99_9: p(PERCENTILES[4].1),
            p99_99: p(PERCENTILES[5].1),
            p99_999: p(PERCENTILES[6].1),
        };
        Summary {
            count: self.count,
            min: self.min().unwrap_or(0),
            max: self.max,
            mean: mean.round() as u64,
            stddev: stddev.round() as u64,
            median: percentiles.p50,
            percentiles,
            within: Within {
                us10: frac(self.within[0]),
                us50: frac(self.within[1]),
                us100: frac(self.within[2]),
                us500: frac(self.within[3]),
                us1000: frac(self.within[4]),
            },
            missed_periods: self.missed_periods,
            woke_late: self.woke_late,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::exact_nearest_rank;
    use proptest::prelude::*;

    fn rec(values: &[u64]) -> Recorder {
        let mut r = Recorder::new();
        for &v in values {
            r.record(v);
        }
        r
    }

    #[test]
    fn empty_recorder_summarises_to_zeros() {
        let s = Recorder::new().summary();
        assert_eq!(s.count, 0);
        assert_eq!(s.min, 0);
        assert_eq!(s.max, 0);
        assert_eq!(s.percentiles.p99_999, 0);
        assert_eq!(s.within.us10, 0.0);
    }

    #[test]
    fn small_exact_values() {
        let r = rec(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        let s = r.summary();
        assert_eq!((s.count, s.min, s.max, s.mean), (10, 1, 10, 6)); // 5.5 rounds to 6
        assert_eq!(s.median, 5); // nearest rank: ceil(0.5 * 10) = 5th value
        assert_eq!(s.percentiles.p90, 9);
        assert_eq!(s.percentiles.p95, 10);
        assert_eq!(s.stddev, 3); // population stddev 2.872
        assert_eq!(s.within.us10, 1.0);
    }

    #[test]
    fn zero_is_recordable() {
        let s = rec(&[0, 0, 5]).summary();
        assert_eq!((s.min, s.median, s.max), (0, 0, 5));
    }

    #[test]
    fn within_counts_are_exact_at_the_thresholds() {
        let s = rec(&[
            10_000, 10_001, 50_000, 100_000, 500_001, 1_000_000, 2_000_000, 5,
        ])
        .summary();
        assert_eq!(s.within.us10, 2.0 / 8.0);
        assert_eq!(s.within.us50, 4.0 / 8.0);
        assert_eq!(s.within.us100, 5.0 / 8.0);
        assert_eq!(s.within.us500, 5.0 / 8.0);
        assert_eq!(s.within.us1000, 7.0 / 8.0);
    }

    #[test]
    fn values_beyond_an_hour_keep_exact_max() {
        let s = rec(&[5, 10 * HIGHEST_NS]).summary();
        assert_eq!(s.max, 10 * HIGHEST_NS);
        assert_eq!(s.percentiles.p99_999, 10 * HIGHEST_NS);
    }

    #[test]
    fn high_percentile_ranks_use_integer_arithmetic() {
        // 10 million samples, the last 100 large: rank of p99.999 is exactly 9_999_900, which is a
        // small value; floating point would give 9_999_901 and land on a large one.
        let mut r = Recorder::new();
        for _ in 0..(10_000_000 - 100) {
            r.record(1_000);
        }
        for _ in 0..100 {
            r.record(9_000_000);
        }
        assert_eq!(r.summary().percentiles.p99_999, 1_000);
        assert_eq!(r.summary().percentiles.p99_99, 1_000);
        // One more large sample moves the rank to 9_999_901 (ceil of 9_999_900.99999): now large.
        r.record(9_000_000);
        assert_eq!(r.percentile(99_999), 9_000_000);
    }

    #[test]
    fn merge_equals_recording_everything_in_one() {
        let a: Vec<u64> = (0..5000).map(|i| i * 37 % 100_000).collect();
        let b: Vec<u64> = (0..7000).map(|i| 1_000_000 + i * 91 % 3_000_000).collect();
        let mut ra = rec(&a);
        ra.add_missed(3);
        ra.add_woke_late();
        let mut rb = rec(&b);
        rb.add_missed(2);
        ra.merge(&rb).unwrap();
        let all: Vec<u64> = a.iter().chain(b.iter()).copied().collect();
        let mut rall = rec(&all);
        rall.add_missed(5);
        rall.add_woke_late();
        assert_eq!(ra.summary(), rall.summary());
    }

    #[test]
    fn rebuilding_from_a_summary_merges_like_the_original() {
        let a: Vec<u64> = (1..2000).map(|i| i * 1013 % 90_000).collect();
        let b: Vec<u64> = (1..3000).map(|i| i * 7919 % 400_000).collect();
        let (ra, rb) = (rec(&a), rec(&b));
        let mut direct = ra.clone();
        direct.merge(&rb).unwrap();
        let mut rebuilt = Recorder::from_summary(&ra.summary(), ra.histogram().clone());
        rebuilt
            .merge(&Recorder::from_summary(
                &rb.summary(),
                rb.histogram().clone(),
            ))
            .unwrap();
        let (d, r) = (direct.summary(), rebuilt.summary());
        assert_eq!(d.percentiles, r.percentiles);
        assert_eq!((d.count, d.min, d.max), (r.count, r.min, r.max));
        assert!((d.mean as i64 - r.mean as i64).abs() <= 1);
        assert!((d.stddev as i64 - r.stddev as i64).abs() <= 1);
        assert_eq!(d.within, r.within);
    }

    proptest! {
        #[test]
        fn percentiles_within_a_tenth_of_a_percent_of_exact(
            mut values in proptest::collection::vec(0u64..5_000_000_000, 1..2000)
        ) {
            let r = rec(&values);
            values.sort_unstable();
            for &(_, mp) in PERCENTILES.iter() {
                let exact = exact_nearest_rank(&values, mp);
                let got = r.percentile(mp);
                let err = (got as f64 - exact as f64).abs();
                prop_assert!(got >= exact, "p{mp}: got {got} below exact {exact}");
                prop_assert!(err <= exact as f64 * 0.001 + 1.0, "p{mp}: got {got}, exact {exact}");
            }
            let s = r.summary();
            prop_assert_eq!(s.min, values[0]);
            prop_assert_eq!(s.max, *values.last().unwrap());
            let n = values.len() as f64;
            let mean = values.iter().map(|&v| v as f64).sum::<f64>() / n;
            let var = values.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
            prop_assert!((s.mean as f64 - mean).abs() <= 0.5 + mean * 1e-12);
            prop_assert!((s.stddev as f64 - var.sqrt()).abs() <= 0.5 + var.sqrt() * 1e-9);
            for (i, &t) in WITHIN_NS.iter().enumerate() {
                let exact = values.iter().filter(|&&v| v <= t).count() as f64 / n;
                let got = [s.within.us10, s.within.us50, s.within.us100, s.within.us500, s.within.us1000][i];
                prop_assert_eq!(got, exact);
            }
        }

        #[test]
        fn merge_is_order_independent(
            a in proptest::collection::vec(0u64..10_000_000, 0..300),
            b in proptest::collection::vec(0u64..10_000_000, 0..300),
        ) {
            let mut ab = rec(&a);
            ab.merge(&rec(&b)).unwrap();
            let mut ba = rec(&b);
            ba.merge(&rec(&a)).unwrap();
            prop_assert_eq!(ab.summary(), ba.summary());
        }
    }
}
