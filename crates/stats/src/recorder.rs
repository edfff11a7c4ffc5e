use crate::summary::{nearest_rank_index, Percentiles, Summary, Within, PERCENTILES, WITHIN_NS};
use crate::Histogram;

pub const LOWEST_NS: u64 = 1;
/// One hour: anything longer is recorded at one hour in the histogram (min/max stay exact).
pub const HIGHEST_NS: u64 = 3_600_000_000_000;
pub const SIGNIFICANT_DIGITS: u8 = 3;
/// Samples a [`Recorder::compact`] keeps in a list (8 KB) before it builds its histogram.
pub const COMPACT_SAMPLES: usize = 1024;

fn empty_histogram() -> Histogram {
    Histogram::new_with_bounds(LOWEST_NS, HIGHEST_NS, SIGNIFICANT_DIGITS)
        .expect("static histogram bounds are valid")
}

fn histogram_of(samples: &[u64]) -> Histogram {
    let mut h = empty_histogram();
    for &ns in samples {
        h.saturating_record(ns);
    }
    h
}

/// Merging two recorders failed (histogram shapes differ: one came from another tool or version).
#[derive(Debug, thiserror::Error)]
#[error("cannot merge histograms: {0}")]
pub struct MergeError(String);

/// Per-thread sample store. Build it before the timing loop; `record` is allocation-free.
#[derive(Clone, Debug)]
pub struct Recorder {
    /// Set at creation ([`Recorder::new`]); for a [`Recorder::compact`] one, built from `pending`
    /// once it holds [`COMPACT_SAMPLES`] or the histogram is first read.
    hist: std::sync::OnceLock<Histogram>,
    /// A compact recorder's samples before its histogram exists.
    pending: Vec<u64>,
    count: u64,
    min: u64,
    max: u64,
    /// Exact: a sum of fewer than 2^64 u64 samples is below 2^128.
    sum: u128,
    /// Exact sum of squares, 192 bits wide: `sum_sq_hi * 2^128 + sum_sq`. One square of a u64 fits
    /// u128, two may not; fewer than 2^64 of them always fit 192 bits.
    sum_sq: u128,
    sum_sq_hi: u64,
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
        let r = Recorder::compact();
        let _ = r.hist.set(empty_histogram());
        r
    }

    /// A recorder that keeps its first `COMPACT_SAMPLES` samples in a list and builds its
    /// histogram (270 KB: 1 ns to an hour at 3 digits) only past them or when it is read. For
    /// analyses that keep one per source or thread of an input file: thousands of sources seen
    /// once each made a 250 KB trace take 1.1 GB (issue 32). Its `record` allocates, unlike
    /// [`Recorder::new`]'s: not for timing loops.
    pub fn compact() -> Self {
        Recorder {
            hist: std::sync::OnceLock::new(),
            pending: Vec::new(),
            count: 0,
            min: u64::MAX,
            max: 0,
            sum: 0,
            sum_sq: 0,
            sum_sq_hi: 0,
            within: [0; WITHIN_NS.len()],
            missed_periods: 0,
            woke_late: 0,
        }
    }

    /// Record one sample in nanoseconds.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        match self.hist.get_mut() {
            Some(h) => h.saturating_record(ns),
            None => {
                self.pending.push(ns);
                if self.pending.len() >= COMPACT_SAMPLES {
                    self.hist_mut();
                }
            }
        }
        self.count = self.count.saturating_add(1);
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
        // Saturating only matters after merging crafted stored summaries; recorded samples alone
        // cannot reach the bound.
        self.sum = self.sum.saturating_add(ns as u128);
        self.add_sq(0, (ns as u128) * (ns as u128));
        for (c, &t) in self.within.iter_mut().zip(WITHIN_NS.iter()) {
            *c = c.saturating_add((ns <= t) as u64);
        }
    }

    #[inline]
    fn add_sq(&mut self, hi: u64, lo: u128) {
        let (lo, carry) = self.sum_sq.overflowing_add(lo);
        self.sum_sq = lo;
        self.sum_sq_hi = self
            .sum_sq_hi
            .saturating_add(hi)
            .saturating_add(carry as u64);
    }

    /// Count `n` periods whose release had already passed (never silently skipped).
    #[inline]
    pub fn add_missed(&mut self, n: u64) {
        self.missed_periods = self.missed_periods.saturating_add(n);
    }

    /// Count a wake-up that arrived after its target.
    #[inline]
    pub fn add_woke_late(&mut self) {
        self.woke_late = self.woke_late.saturating_add(1);
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
        self.hist.get_or_init(|| histogram_of(&self.pending))
    }

    /// The histogram, built from the pending samples first if need be (which are then dropped).
    fn hist_mut(&mut self) -> &mut Histogram {
        if self.hist.get().is_none() {
            let _ = self.hist.set(histogram_of(&self.pending));
        }
        self.pending = Vec::new();
        self.hist.get_mut().expect("set above")
    }

    /// Fold another recorder (another thread, another run) into this one.
    pub fn merge(&mut self, other: &Recorder) -> Result<(), MergeError> {
        self.hist_mut()
            .add(other.histogram())
            .map_err(|e| MergeError(format!("{e:?}")))?;
        // Saturating: recorders rebuilt from stored (possibly crafted) summaries can hold any counts.
        self.count = self.count.saturating_add(other.count);
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.sum = self.sum.saturating_add(other.sum);
        self.add_sq(other.sum_sq_hi, other.sum_sq);
        for (a, b) in self.within.iter_mut().zip(other.within.iter()) {
            *a = a.saturating_add(*b);
        }
        self.missed_periods = self.missed_periods.saturating_add(other.missed_periods);
        self.woke_late = self.woke_late.saturating_add(other.woke_late);
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
        // Float to integer casts saturate: a crafted summary gives large sums, never a panic.
        let sq = (var + mean * mean) * n;
        let hi = (sq / TWO_128).floor();
        let (sum_sq_hi, sum_sq) = (hi as u64, (sq - hi * TWO_128).max(0.0) as u128);
        Recorder {
            hist: std::sync::OnceLock::from(hist),
            pending: Vec::new(),
            count: summary.count,
            min: if summary.count == 0 {
                u64::MAX
            } else {
                summary.min
            },
            max: summary.max,
            sum: (mean * n).round() as u128,
            sum_sq,
            sum_sq_hi,
            within,
            missed_periods: summary.missed_periods,
            woke_late: summary.woke_late,
        }
    }

    /// Rebuild a recorder from histogram buckets `(lowest, highest, count)` in this histogram's
    /// layout (a [`crate::LiveCounts`]), in increasing order, with the exact `sum` and `max` kept
    /// beside them. Percentiles are as exact as a recorded histogram's; min, the sum of squares
    /// (from bucket midpoints) and KURT's within-counts (a bucket counts when its lowest value is
    /// within) to one bucket, under 0.1 %. `woke_late` counts the values above zero.
    pub fn from_buckets(
        buckets: impl IntoIterator<Item = (u64, u64, u64)>,
        sum: u128,
        max: u64,
        missed_periods: u64,
    ) -> Recorder {
        let mut r = Recorder::new();
        for (low, high, n) in buckets {
            r.hist_mut().saturating_record_n(low, n);
            if r.count == 0 {
                r.min = low;
            }
            r.count = r.count.saturating_add(n);
            let mid = (low as u128 + high as u128) / 2;
            let sq = (mid * mid).saturating_mul(n as u128);
            r.add_sq(0, sq);
            for (c, &t) in r.within.iter_mut().zip(WITHIN_NS.iter()) {
                if low <= t {
                    *c = c.saturating_add(n);
                }
            }
            if low > 0 {
                r.woke_late = r.woke_late.saturating_add(n);
            }
        }
        if r.count > 0 {
            r.max = max.max(r.min);
            r.min = r.min.min(r.max);
        }
        r.sum = sum;
        r.missed_periods = missed_periods;
        r
    }

    /// Exact mean and population standard deviation in ns.
    fn moments(&self) -> (f64, f64) {
        if self.count == 0 {
            return (0.0, 0.0);
        }
        let n = self.count as u128;
        let mean = self.sum as f64 / self.count as f64;
        // n*sum_sq - sum^2, exact: in u128 for everyday data, in 256 bits for samples hours long in
        // their millions (or near u64::MAX).
        let exact = (self.sum_sq_hi == 0)
            .then(|| n.checked_mul(self.sum_sq))
            .flatten()
            .zip(self.sum.checked_mul(self.sum))
            .map(|(a, b)| a.checked_sub(b).map(|num| num as f64));
        let var = match exact {
            Some(Some(num)) => num / (n * n) as f64,
            // Sums rebuilt from a stored summary's rounded mean and deviation can disagree slightly.
            Some(None) => (self.sum_sq as f64 / self.count as f64 - mean * mean).max(0.0),
            None => {
                wide::variance_numerator(self.count, self.sum_sq_hi, self.sum_sq, self.sum)
                    / (n * n) as f64
            }
        };
        (mean, var.sqrt())
    }

    /// The mean rounded to the nearest ns (halves up), in integers: exact for any samples.
    fn rounded_mean(&self) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let n = self.count as u128;
        let (q, r) = (self.sum / n, self.sum % n);
        // r < n < 2^64, so 2r cannot overflow; q <= u64::MAX unless sums were saturated.
        u64::try_from(q + (2 * r >= n) as u128).unwrap_or(u64::MAX)
    }

    /// Nearest-rank value at `milli_percent` (e.g. 99_999 for 99.999 %), from the histogram, clamped
    /// to the exact min and max.
    pub fn percentile(&self, milli_percent: u64) -> u64 {
        self.percentiles_of([milli_percent])[0]
    }

    /// Several percentiles in one pass over the histogram (each pass walks up to the maximum's
    /// bucket: tens of thousands of counts).
    pub fn percentiles_of<const N: usize>(&self, milli_percents: [u64; N]) -> [u64; N] {
        let mut out = [self.max; N];
        if self.count == 0 {
            return [0; N];
        }
        let ranks = milli_percents.map(|mp| nearest_rank_index(self.count, mp));
        let mut order: [usize; N] = std::array::from_fn(|i| i);
        order.sort_unstable_by_key(|&i| ranks[i]);
        let mut next = 0;
        let mut seen = 0u64;
        let hist = self.histogram();
        for v in hist.iter_recorded() {
            if next == N {
                break;
            }
            seen = seen.saturating_add(v.count_at_value());
            let value = hist.highest_equivalent(v.value_iterated_to());
            // Saturated bucket: the samples there are an hour or more; max is the honest bound.
            let value = if value >= hist.highest_equivalent(HIGHEST_NS) {
                self.max
            } else {
                value.clamp(self.min, self.max)
            };
            while next < N && seen >= ranks[order[next]] {
                out[order[next]] = value;
                next += 1;
            }
        }
        out
    }

    /// Fraction of samples at or below `threshold_ns`, read from the histogram (exact for KURT's
    /// thresholds: use [`Summary::within`] for those).
    pub fn fraction_at_or_below(&self, threshold_ns: u64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let c: u64 = self
            .histogram()
            .iter_recorded()
            .take_while(|v| v.value_iterated_to() <= threshold_ns)
            .fold(0u64, |c, v| c.saturating_add(v.count_at_value()));
        c as f64 / self.count as f64
    }

    pub fn summary(&self) -> Summary {
        let (_, stddev) = self.moments();
        let [p50, p90, p95, p99, p99_9, p99_99, p99_999] =
            self.percentiles_of(PERCENTILES.map(|(_, mp)| mp));
        let frac = |c: u64| {
            if self.count == 0 {
                0.0
            } else {
                c as f64 / self.count as f64
            }
        };
        let percentiles = Percentiles {
            p50,
            p90,
            p95,
            p99,
            p99_9,
            p99_99,
            p99_999,
        };
        Summary {
            count: self.count,
            min: self.min().unwrap_or(0),
            max: self.max,
            mean: self.rounded_mean(),
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

const TWO_128: f64 = 340_282_366_920_938_463_463_374_607_431_768_211_456.0;

/// 256-bit integer arithmetic for the variance of extreme samples, as four 64-bit limbs (least
/// significant first).
mod wide {
    type U256 = [u64; 4];

    fn add_at(x: &mut U256, at: usize, v: u128) {
        let mut carry = v;
        let mut i = at;
        while carry != 0 && i < 4 {
            let s = x[i] as u128 + (carry as u64) as u128;
            x[i] = s as u64;
            carry = (carry >> 64) + (s >> 64);
            i += 1;
        }
    }

    fn mul_128_by_64(a: u128, b: u64) -> U256 {
        let mut out = [0; 4];
        add_at(&mut out, 0, (a as u64) as u128 * b as u128);
        add_at(&mut out, 1, (a >> 64) * b as u128);
        out
    }

    fn square_128(a: u128) -> U256 {
        let (hi, lo) = ((a >> 64) as u64 as u128, (a as u64) as u128);
        let mut out = [0; 4];
        add_at(&mut out, 0, lo * lo);
        add_at(&mut out, 1, hi * lo);
        add_at(&mut out, 1, hi * lo);
        add_at(&mut out, 2, hi * hi);
        out
    }

    /// `x - y`, or zero when `y > x`.
    fn sub(x: U256, y: U256) -> U256 {
        let mut out = [0; 4];
        let mut borrow = false;
        for i in 0..4 {
            let (d, b1) = x[i].overflowing_sub(y[i]);
            let (d, b2) = d.overflowing_sub(borrow as u64);
            out[i] = d;
            borrow = b1 || b2;
        }
        if borrow {
            [0; 4]
        } else {
            out
        }
    }

    fn to_f64(x: U256) -> f64 {
        x.iter().rev().fold(0.0, |acc, &limb| {
            acc * 18_446_744_073_709_551_616.0 + limb as f64
        })
    }

    /// `n * (hi * 2^128 + lo) - sum^2` as a float.
    pub(super) fn variance_numerator(n: u64, hi: u64, lo: u128, sum: u128) -> f64 {
        let mut ns = mul_128_by_64(lo, n);
        add_at(&mut ns, 2, hi as u128 * n as u128);
        to_f64(sub(ns, square_128(sum)))
    }

    #[cfg(test)]
    #[test]
    fn wide_arithmetic_is_exact() {
        // (2^64 - 1)^2 = 2^128 - 2^65 + 1.
        let m = u64::MAX as u128;
        assert_eq!(square_128(m), [1, u64::MAX - 1, 0, 0]);
        assert_eq!(square_128(u128::MAX), [1, 0, u64::MAX - 1, u64::MAX]);
        assert_eq!(
            mul_128_by_64(u128::MAX, u64::MAX),
            [1, u64::MAX, u64::MAX - 1, 0]
        );
        assert_eq!(sub([0, 0, 1, 0], [1, 0, 0, 0]), [u64::MAX, u64::MAX, 0, 0]);
        assert_eq!(sub([0; 4], [1, 0, 0, 0]), [0; 4]);
        // Two samples of u64::MAX: n * sum_sq - sum^2 = 2 * 2 m^2 - (2m)^2 = 0.
        let sq = m * m;
        let (lo, carry) = sq.overflowing_add(sq);
        assert_eq!(variance_numerator(2, carry as u64, lo, 2 * m), 0.0);
    }
}

#[cfg(test)]
mod compact_tests {
    use super::*;

    /// Issue 32, Low (memory amplification): a compact recorder costs its samples until it holds
    /// COMPACT_SAMPLES, and reads exactly as an eager one at every size.
    #[test]
    fn memory_amplification_compact_recorders_hold_samples_not_histograms_and_agree() {
        for n in [
            0usize,
            1,
            7,
            COMPACT_SAMPLES - 1,
            COMPACT_SAMPLES,
            5 * COMPACT_SAMPLES,
        ] {
            let (mut a, mut b) = (Recorder::new(), Recorder::compact());
            for k in 0..n as u64 {
                let v = (k * 7919) % 1_000_003 + 1;
                a.record(v);
                b.record(v);
            }
            if n < COMPACT_SAMPLES {
                assert!(b.hist.get().is_none(), "{n}: histogram built early");
            }
            assert_eq!(a.summary(), b.summary(), "{n}");
            assert_eq!(a.histogram(), b.histogram(), "{n}");
            let mut m = Recorder::compact();
            m.merge(&b).unwrap();
            assert_eq!(m.summary(), a.summary(), "{n}");
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

    /// Reference moments of `base + offsets[i]`: the offsets are small, so f64 is exact enough, and
    /// the mean is rounded half up in integers.
    fn shifted_reference(base: u64, offsets: &[u64]) -> (u64, f64) {
        let n = offsets.len() as u128;
        let sum: u128 = offsets.iter().map(|&o| o as u128).sum();
        let mean = base + (sum / n) as u64 + (2 * (sum % n) >= n) as u64;
        let m = sum as f64 / n as f64;
        let var = offsets.iter().map(|&o| (o as f64 - m).powi(2)).sum::<f64>() / n as f64;
        (mean, var.sqrt())
    }

    #[test]
    fn several_percentiles_in_one_pass_follow_the_asked_order() {
        let r = rec(&(1..=1000).collect::<Vec<u64>>());
        let s = r.summary();
        assert_eq!(
            r.percentiles_of([99_000, 50_000, 99_999, 50_000]),
            [s.percentiles.p99, s.median, s.percentiles.p99_999, s.median]
        );
        assert_eq!((s.median, s.percentiles.p99), (500, 990));
        assert_eq!(Recorder::new().percentiles_of([50_000]), [0]);
    }

    #[test]
    fn statistics_overflow_many_u64_max_samples_are_exact() {
        // Two squares of u64::MAX already overflow u128: this took the old sum of squares past it.
        let mut r = Recorder::new();
        for _ in 0..10_000 {
            r.record(u64::MAX);
        }
        let s = r.summary();
        assert_eq!((s.count, s.min, s.max), (10_000, u64::MAX, u64::MAX));
        assert_eq!((s.mean, s.stddev), (u64::MAX, 0));
        assert_eq!(s.percentiles.p99_999, u64::MAX);
        // Half 0, half u64::MAX: mean 2^63 (rounded up from 2^63 - 0.5), stddev (2^64 - 1) / 2.
        let mut r = rec(&[0, u64::MAX, 0, u64::MAX]);
        let s = r.summary();
        assert_eq!(s.mean, 1 << 63);
        assert_eq!(s.stddev, (u64::MAX as f64 / 2.0) as u64);
        // Merging two such recorders keeps every sum exact.
        r.merge(&r.clone()).unwrap();
        assert_eq!(r.summary().mean, 1 << 63);
        assert_eq!(r.summary().count, 8);
    }

    #[test]
    fn statistics_overflow_merging_crafted_summaries_saturates() {
        // A stored document can claim anything; rebuilding and merging must not panic.
        let mut big = rec(&[u64::MAX]).summary();
        big.count = u64::MAX;
        big.mean = u64::MAX;
        big.stddev = u64::MAX;
        big.missed_periods = u64::MAX;
        let h = Recorder::new().histogram().clone();
        let mut a = Recorder::from_summary(&big, h.clone());
        a.merge(&Recorder::from_summary(&big, h)).unwrap();
        a.record(u64::MAX);
        a.add_woke_late();
        let s = a.summary();
        assert_eq!(s.count, u64::MAX);
        assert_eq!(s.missed_periods, u64::MAX);
        assert_eq!(s.max, u64::MAX);
    }

    proptest! {
        #[test]
        fn statistics_overflow_extreme_samples_give_exact_moments(
            base in prop_oneof![Just(0u64), Just(HIGHEST_NS), Just(1u64 << 63), Just(u64::MAX - (1 << 20))],
            offsets in proptest::collection::vec(0u64..1 << 20, 1..400),
        ) {
            let values: Vec<u64> = offsets.iter().map(|&o| base + o).collect();
            let s = rec(&values).summary();
            let (mean, sd) = shifted_reference(base, &offsets);
            prop_assert_eq!(s.mean, mean);
            prop_assert!((s.stddev as f64 - sd).abs() <= 0.5 + sd * 1e-9, "stddev {} against {sd}", s.stddev);
            prop_assert_eq!(s.max, *values.iter().max().unwrap());
            prop_assert_eq!(s.min, *values.iter().min().unwrap());
        }

        #[test]
        fn statistics_overflow_merge_at_the_extremes_equals_one_recorder(
            a in proptest::collection::vec(prop_oneof![Just(u64::MAX), Just(0u64), (u64::MAX - 1000)..=u64::MAX, 0u64..u64::MAX], 0..200),
            b in proptest::collection::vec(prop_oneof![Just(u64::MAX), (u64::MAX - 1000)..=u64::MAX], 0..200),
        ) {
            let mut merged = rec(&a);
            merged.merge(&rec(&b)).unwrap();
            let all: Vec<u64> = a.iter().chain(b.iter()).copied().collect();
            prop_assert_eq!(merged.summary(), rec(&all).summary());
            let mut twice = merged.clone();
            twice.merge(&merged).unwrap();
            prop_assert_eq!(twice.summary().mean, merged.summary().mean);
        }

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
