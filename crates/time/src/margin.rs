//! The spin margin: how long before an instant to stop sleeping and start spinning.
//!
//! `auto` tracks the recent distribution of the kernel's wake-up latency (a decaying histogram with
//! 1 us buckets up to 2 ms) and sets the margin to its 99.9th percentile plus headroom, so about one
//! wake in a thousand arrives late while the CPU spent spinning stays close to the minimum. A late wake
//! raises the margin at once; the margin falls only as the histogram forgets (it halves every window).
//! Nothing here allocates after construction, so it can run inside a timing loop.

const BUCKETS: usize = 2048; // 1 us each; the last bucket holds everything above

/// A fixed or adaptive margin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarginPolicy {
    Fixed(u64),
    Auto,
}

impl std::str::FromStr for MarginPolicy {
    type Err = crate::DurationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "auto" {
            Ok(MarginPolicy::Auto)
        } else {
            crate::parse_duration_ns(s).map(MarginPolicy::Fixed)
        }
    }
}

/// Adaptive margin estimator. Feed it every kernel wake-up latency; read [`AutoMargin::margin`].
pub struct AutoMargin {
    counts: Box<[u32; BUCKETS]>,
    total: u64,
    since_update: u32,
    since_decay: u32,
    margin: u64,
    /// The margin the kernel's wake-ups call for, before the cap (`max`) applies.
    needed: u64,
    min: u64,
    max: u64,
    /// Tail fraction allowed to come late, in parts per million (default 1000 = 0.1 %).
    tail_ppm: u64,
}

impl AutoMargin {
    /// No margin is ever larger: a wake-up later than this is not the kernel's latency.
    pub const CEILING: u64 = 2_000_000;
    /// Recompute the quantile after this many samples.
    pub const UPDATE_EVERY: u32 = 64;
    /// Halve all counts after this many samples, so old behaviour is forgotten.
    pub const DECAY_EVERY: u32 = 8192;

    /// Start at `initial`, never go below `min` nor above `max` (all ns).
    pub fn new(initial: u64, min: u64, max: u64) -> Self {
        let max = max.max(min);
        AutoMargin {
            counts: Box::new([0; BUCKETS]),
            total: 0,
            since_update: 0,
            since_decay: 0,
            margin: initial.clamp(min, max),
            needed: initial.clamp(min, Self::CEILING),
            min,
            max,
            tail_ppm: 1_000,
        }
    }

    /// A sensible estimator for a loop with period `interval`: start at a quarter of the period (at
    /// most 200 us), never below 2 us, never above half the period (at most 2 ms).
    pub fn for_interval(interval: u64) -> Self {
        let max = (interval / 2).clamp(2_000, Self::CEILING);
        AutoMargin::new((interval / 4).min(200_000), 2_000, max)
    }

    /// The estimator for a CPU that nothing else needs (shielded): not bounded by half the interval,
    /// only by [`AutoMargin::CEILING`] and `cap`.
    pub fn for_shielded(interval: u64) -> Self {
        AutoMargin::new((interval / 4).min(200_000), 2_000, Self::CEILING)
    }

    /// The same estimator, never above `cap` (but never below its minimum either).
    pub fn capped(mut self, cap: u64) -> Self {
        self.max = self.max.min(cap).max(self.min);
        self.margin = self.margin.min(self.max);
        self
    }

    pub fn margin(&self) -> u64 {
        self.margin
    }

    /// The largest margin this estimator will use.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The margin the kernel's recent wake-ups call for, even when the cap keeps [`margin`]
    /// below it: a release closer than this cannot be slept towards and still be on time.
    ///
    /// [`margin`]: AutoMargin::margin
    pub fn needed(&self) -> u64 {
        self.needed
    }

    /// Record one kernel wake-up latency (ns): from the instant the sleep was asked to end to when
    /// the thread ran.
    #[inline]
    pub fn observe(&mut self, sleep_latency: u64) {
        let b = ((sleep_latency / 1_000) as usize).min(BUCKETS - 1);
        self.counts[b] = self.counts[b].saturating_add(1);
        self.total += 1;
        // A wake that overshot the margin: widen at once, the next release must not pay for it too.
        if sleep_latency > self.needed {
            self.needed = self.headroom(sleep_latency).clamp(self.min, Self::CEILING);
        }
        if sleep_latency > self.margin {
            self.margin = self.with_headroom(sleep_latency);
        }
        self.since_update += 1;
        if self.since_update >= Self::UPDATE_EVERY {
            self.since_update = 0;
            let q = self.quantile_ns();
            self.margin = self.with_headroom(q);
            self.needed = self.headroom(q).clamp(self.min, Self::CEILING);
        }
        self.since_decay += 1;
        if self.since_decay >= Self::DECAY_EVERY {
            self.since_decay = 0;
            self.total = 0;
            for c in self.counts.iter_mut() {
                *c /= 2;
                self.total += *c as u64;
            }
        }
    }

    fn with_headroom(&self, v: u64) -> u64 {
        self.headroom(v).clamp(self.min, self.max)
    }

    fn headroom(&self, v: u64) -> u64 {
        // 10 % of the latency plus 1 us covers the clock reads and the return to user space.
        v + v / 10 + 1_000
    }

    /// Upper edge of the bucket holding the allowed tail quantile.
    fn quantile_ns(&self) -> u64 {
        if self.total == 0 {
            return self.margin;
        }
        let allowed_late = self.total * self.tail_ppm / 1_000_000;
        let mut above = 0u64;
        for (i, &c) in self.counts.iter().enumerate().rev() {
            above += c as u64;
            if above > allowed_late {
                return (i as u64 + 1) * 1_000;
            }
        }
        1_000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cap_bounds_the_margin_however_late_the_wakes() {
        let mut m = AutoMargin::for_interval(10_000_000).capped(150_000);
        assert_eq!(m.margin(), 150_000, "the initial 200 us is cut to the cap");
        for _ in 0..1000 {
            m.observe(1_500_000);
        }
        assert_eq!(m.margin(), 150_000);
        let m = AutoMargin::new(10_000, 2_000, 1_000_000).capped(500);
        assert_eq!(m.margin(), 2_000, "never below the minimum");
    }

    #[test]
    fn the_needed_margin_follows_the_kernel_past_the_cap_and_a_shielded_one_is_not_held_to_half_the_interval(
    ) {
        // A 10 us interval: the margin may not pass 5 us, the kernel needs 15 us.
        let mut m = AutoMargin::for_interval(10_000);
        for _ in 0..200 {
            m.observe(15_000);
        }
        assert_eq!(m.margin(), 5_000);
        // The 99.9th percentile's bucket ends at 16 us; plus 10 % and 1 us of headroom.
        assert_eq!(m.needed(), 18_600);
        let mut s = AutoMargin::for_shielded(10_000);
        for _ in 0..200 {
            s.observe(15_000);
        }
        assert_eq!(s.margin(), s.needed());
        assert!(s.margin() > 10_000 / 2, "{}", s.margin());
        // Nothing is needed beyond the ceiling, however late a wake.
        s.observe(50_000_000);
        assert_eq!(s.needed(), AutoMargin::CEILING);
    }

    #[test]
    fn converges_to_the_tail_of_a_steady_distribution() {
        let mut m = AutoMargin::new(200_000, 2_000, 1_000_000);
        // 4999 of 5000 wakes at 40 us, 1 in 5000 at 300 us: the 99.9th percentile is 40 us.
        for i in 0..20_000u64 {
            m.observe(if i % 5000 == 4999 { 300_000 } else { 40_000 });
        }
        let v = m.margin();
        // Either just above 40 us (tail allowed) or just above 300 us right after a spike.
        assert!(!(100_000..300_000).contains(&v), "margin {v}");
        // After a run of steady samples since the last spike it settles low.
        for _ in 0..200 {
            m.observe(40_000);
        }
        let v = m.margin();
        assert!((41_000..=50_000).contains(&v), "margin {v}");
    }

    #[test]
    fn a_late_wake_raises_the_margin_immediately() {
        let mut m = AutoMargin::new(20_000, 2_000, 1_000_000);
        m.observe(500_000);
        assert!(m.margin() > 500_000);
    }

    #[test]
    fn forgets_old_spikes() {
        let mut m = AutoMargin::new(20_000, 2_000, 1_000_000);
        for _ in 0..100 {
            m.observe(800_000);
        }
        assert!(m.margin() > 800_000);
        for _ in 0..(AutoMargin::DECAY_EVERY * 12) {
            m.observe(10_000);
        }
        assert!(m.margin() < 20_000, "margin {}", m.margin());
    }

    #[test]
    fn clamped_to_bounds() {
        let mut m = AutoMargin::for_interval(100_000);
        for _ in 0..1000 {
            m.observe(5_000_000);
        }
        assert_eq!(m.margin(), 50_000);
        let mut m = AutoMargin::for_interval(1_000_000);
        for _ in 0..1000 {
            m.observe(0);
        }
        // The 1 us bucket's upper edge plus headroom, never below the 2 us floor.
        assert_eq!(m.margin(), 2_100);
    }

    #[test]
    fn policy_parses() {
        assert_eq!("auto".parse::<MarginPolicy>().unwrap(), MarginPolicy::Auto);
        assert_eq!(
            "50us".parse::<MarginPolicy>().unwrap(),
            MarginPolicy::Fixed(50_000)
        );
        assert!("50".parse::<MarginPolicy>().is_err());
    }
}
