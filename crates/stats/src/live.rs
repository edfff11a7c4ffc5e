//! A histogram other threads can read while the measuring thread writes it: the counts of a
//! [`Recorder`]'s histogram (same buckets: 1 ns to 1 h, 3 significant digits) as atomics. The
//! writer only increments with relaxed atomic operations (no lock, no allocation, no wait); readers
//! copy the counts into a [`LiveCounts`] allocated once, whenever they like (a scrape, the end of a
//! window), and subtract two copies to get what happened in between. Nothing grows with time: the
//! memory is fixed when the histogram is made (about 270 KB).
//!
//! Bucket layout (HDR's for 3 significant digits): values below 2048 ns have a bucket each; from
//! 2048 ns on, each power of two `[2^k, 2^(k+1))` is split into 1024 equal buckets, so a bucket
//! is at most 1/1024 of its values wide (under 0.1 %), exactly as [`Recorder`]'s histogram, into
//! which a copy converts without losing anything ([`LiveCounts::to_recorder`]).

use crate::recorder::{Recorder, HIGHEST_NS};
use std::sync::atomic::{AtomicU64, Ordering};

/// Values below this have a bucket each.
const LINEAR: u64 = 2048;
/// Buckets per power of two from [`LINEAR`] on.
const HALF: u64 = 1024;
/// Buckets in all: up to [`HIGHEST_NS`] (2^41.7).
pub const LIVE_BUCKETS: usize = bucket_of(HIGHEST_NS) + 1;
/// How many readers can each ask for the worst value since they last asked
/// ([`LiveHistogram::take_peak`]).
pub const PEAKS: usize = 2;

/// The bucket of `ns` (values above [`HIGHEST_NS`] go to its bucket, as `saturating_record` does).
#[inline(always)]
pub const fn bucket_of(ns: u64) -> usize {
    let v = if ns > HIGHEST_NS { HIGHEST_NS } else { ns };
    if v < LINEAR {
        return v as usize;
    }
    let k = 63 - v.leading_zeros() as u64; // 11..=41
    let shift = k - 10;
    (LINEAR + (k - 11) * HALF + ((v >> shift) - HALF)) as usize
}

/// The lowest value bucket `i` holds.
pub const fn bucket_low(i: usize) -> u64 {
    let i = i as u64;
    if i < LINEAR {
        return i;
    }
    let k = 11 + (i - LINEAR) / HALF;
    let sub = HALF + (i - LINEAR) % HALF;
    sub << (k - 10)
}

/// The highest value bucket `i` holds.
pub const fn bucket_high(i: usize) -> u64 {
    bucket_low(i + 1) - 1
}

/// Written by one measuring thread, read by anyone.
#[derive(Debug)]
pub struct LiveHistogram {
    counts: Box<[AtomicU64]>,
    /// Sum of every value (ns); wraps after 584 years of summed latency.
    sum: AtomicU64,
    max: AtomicU64,
    peaks: [AtomicU64; PEAKS],
    missed: AtomicU64,
}

impl Default for LiveHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LiveHistogram {
    pub fn new() -> Self {
        LiveHistogram {
            counts: (0..LIVE_BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
            max: AtomicU64::new(0),
            peaks: Default::default(),
            missed: AtomicU64::new(0),
        }
    }

    /// Count one value (ns). Relaxed atomic operations only: never waits for a reader.
    #[inline(always)]
    pub fn record(&self, ns: u64) {
        self.counts[bucket_of(ns)].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(ns, Ordering::Relaxed);
        self.max.fetch_max(ns, Ordering::Relaxed);
        for p in &self.peaks {
            p.fetch_max(ns, Ordering::Relaxed);
        }
    }

    /// Count `n` missed periods.
    #[inline(always)]
    pub fn add_missed(&self, n: u64) {
        if n > 0 {
            self.missed.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// The largest value ever recorded (0 before the first).
    pub fn max(&self) -> u64 {
        self.max.load(Ordering::Relaxed)
    }

    pub fn missed(&self) -> u64 {
        self.missed.load(Ordering::Relaxed)
    }

    /// The largest value since reader `reader` (below [`PEAKS`]) last took it, and start again
    /// from zero for that reader. A value recorded while this runs counts for this call or the
    /// next, never for neither.
    pub fn take_peak(&self, reader: usize) -> u64 {
        self.peaks[reader].swap(0, Ordering::Relaxed)
    }

    /// Copy the counts into `out` (which allocates nothing here). Buckets are read one by one while
    /// the writer goes on: the copy holds every value recorded before the call and some recorded
    /// during it, so two copies subtract to a non-negative difference.
    pub fn snapshot(&self, out: &mut LiveCounts) {
        let mut total = 0u64;
        for (o, c) in out.counts.iter_mut().zip(self.counts.iter()) {
            *o = c.load(Ordering::Relaxed);
            total = total.wrapping_add(*o);
        }
        out.count = total;
        out.sum = self.sum.load(Ordering::Relaxed);
        out.missed = self.missed.load(Ordering::Relaxed);
    }
}

/// A copy of a [`LiveHistogram`]'s counts, allocated once and refilled.
#[derive(Clone, Debug)]
pub struct LiveCounts {
    counts: Box<[u64]>,
    count: u64,
    sum: u64,
    missed: u64,
}

impl Default for LiveCounts {
    fn default() -> Self {
        Self::new()
    }
}

impl LiveCounts {
    pub fn new() -> Self {
        LiveCounts {
            counts: vec![0; LIVE_BUCKETS].into_boxed_slice(),
            count: 0,
            sum: 0,
            missed: 0,
        }
    }

    /// Values counted (the sum of the buckets).
    pub fn count(&self) -> u64 {
        self.count
    }
    /// Sum of the values, ns.
    pub fn sum_ns(&self) -> u64 {
        self.sum
    }
    pub fn missed(&self) -> u64 {
        self.missed
    }

    /// `(bucket, count)` of every bucket holding something, in increasing value.
    pub fn buckets(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(i, &n)| (i, n))
    }

    /// Values at or below `ns`, counting a bucket when its lowest value is (so the answer may
    /// include values up to one bucket, under 0.1 %, above `ns`).
    pub fn at_or_below(&self, ns: u64) -> u64 {
        self.counts[..=bucket_of(ns)].iter().sum()
    }

    /// `self - earlier`, in place: what was counted between two copies of one histogram.
    pub fn subtract(&mut self, earlier: &LiveCounts) {
        for (a, b) in self.counts.iter_mut().zip(earlier.counts.iter()) {
            *a = a.saturating_sub(*b);
        }
        self.count = self.count.saturating_sub(earlier.count);
        self.sum = self.sum.wrapping_sub(earlier.sum);
        self.missed = self.missed.saturating_sub(earlier.missed);
    }

    /// Overwrite with `other` (no allocation).
    pub fn copy_from(&mut self, other: &LiveCounts) {
        self.counts.copy_from_slice(&other.counts);
        self.count = other.count;
        self.sum = other.sum;
        self.missed = other.missed;
    }

    /// A [`Recorder`] of these counts: the same histogram bucket for bucket, so percentiles are as
    /// exact as a recorder's; the sum and missed periods exact; `max` as given (the writer's exact
    /// peak); min, the standard deviation and KURT's within-fractions to one bucket (under 0.1 %).
    /// `woke_late`: the values above zero (for a plain absolute sleep every late wake-up).
    pub fn to_recorder(&self, max: u64) -> Recorder {
        Recorder::from_buckets(
            self.buckets()
                .map(|(i, n)| (bucket_low(i), bucket_high(i), n)),
            self.sum as u128,
            max,
            self.missed,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_range_without_gaps_and_match_the_recorders_histogram() {
        let rec = Recorder::new();
        let h = rec.histogram();
        let mut expect_low = 0u64;
        for i in 0..LIVE_BUCKETS {
            assert_eq!(bucket_low(i), expect_low, "bucket {i}");
            assert_eq!(bucket_of(bucket_low(i)), i);
            assert_eq!(bucket_of(bucket_high(i)), i);
            // HDR puts the same values together.
            assert_eq!(
                h.lowest_equivalent(bucket_high(i)),
                h.lowest_equivalent(bucket_low(i)),
                "bucket {i}"
            );
            assert!(
                (bucket_high(i) - bucket_low(i)) as f64 <= bucket_low(i).max(1) as f64 / 1000.0
                    || bucket_low(i) < LINEAR,
                "bucket {i} wider than 0.1 %"
            );
            expect_low = bucket_high(i) + 1;
        }
        assert!(bucket_high(LIVE_BUCKETS - 1) >= HIGHEST_NS);
        assert_eq!(bucket_of(u64::MAX), LIVE_BUCKETS - 1);
        assert_eq!(LIVE_BUCKETS, 33_421, "267 KB of counts");
    }

    #[test]
    fn a_window_is_the_difference_of_two_copies_and_converts_to_the_recorder_of_its_values() {
        let live = LiveHistogram::new();
        let mut before = LiveCounts::new();
        let mut after = LiveCounts::new();
        for v in [5u64, 900, 3_000, 12_345] {
            live.record(v);
        }
        live.snapshot(&mut before);
        let _ = live.take_peak(1);
        let window: Vec<u64> = (0..10_000u64)
            .map(|i| 1_000 + (i * 7919) % 250_000)
            .collect();
        let mut exact = Recorder::new();
        for &v in &window {
            live.record(v);
            exact.record(v);
        }
        live.add_missed(3);
        live.snapshot(&mut after);
        after.subtract(&before);
        let max = live.take_peak(1);
        assert_eq!(max, exact.max().unwrap());
        assert_eq!(after.count(), 10_000);
        assert_eq!(after.sum_ns(), window.iter().sum::<u64>());
        assert_eq!(after.missed(), 3);
        let rec = after.to_recorder(max);
        let (a, b) = (rec.summary(), exact.summary());
        assert_eq!(a.count, b.count);
        assert_eq!(a.max, b.max);
        assert_eq!(a.mean, b.mean, "sum is exact");
        assert_eq!(
            a.percentiles, b.percentiles,
            "same buckets, same percentiles"
        );
        assert_eq!(a.missed_periods, 3);
        assert!((a.stddev as f64 - b.stddev as f64).abs() <= b.stddev as f64 * 1e-3);
        assert!((a.min as f64 - b.min as f64).abs() <= b.min as f64 * 1e-3);
        assert!((a.within.us50 - b.within.us50).abs() <= 1e-3);
        // The whole history is still there.
        assert_eq!(live.max(), exact.max().unwrap().max(12_345));
        assert_eq!(
            live.take_peak(0),
            live.max(),
            "reader 0 never took its peak"
        );
        assert_eq!(live.take_peak(0), 0, "taken: starts again from zero");
    }

    #[test]
    fn at_or_below_counts_whole_buckets() {
        let live = LiveHistogram::new();
        let mut c = LiveCounts::new();
        for v in [1_000u64, 10_000, 10_001, 10_008, 2_000_000] {
            live.record(v);
        }
        live.snapshot(&mut c);
        assert_eq!(c.at_or_below(999), 0);
        assert_eq!(c.at_or_below(1_000), 1);
        // 10_000..=10_007 share a bucket: 10_001 counts with 10_000.
        assert_eq!(c.at_or_below(10_000), 3);
        assert_eq!(c.at_or_below(10_008), 4);
        assert_eq!(c.at_or_below(u64::MAX), 5);
    }

    #[test]
    fn readers_and_a_writer_at_once_never_lose_a_count() {
        let live = std::sync::Arc::new(LiveHistogram::new());
        let w = live.clone();
        let writer = std::thread::spawn(move || {
            for i in 0..200_000u64 {
                w.record(i % 100_000);
            }
        });
        let mut c = LiveCounts::new();
        let mut last = 0;
        while !writer.is_finished() {
            live.snapshot(&mut c);
            assert!(c.count() >= last, "counts only grow");
            last = c.count();
        }
        writer.join().unwrap();
        live.snapshot(&mut c);
        assert_eq!(c.count(), 200_000);
    }
}
