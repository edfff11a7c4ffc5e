//! Billing at any HZ: the classic tick-based kernel bills the task it finds running when its clock
//! interrupt fires. Here a virtual tick of rate `hz` and phase `phase` (ticks at
//! `phase + k * 1e9 / hz` ns on the trace clock, for every integer k, on every CPU at once) samples
//! the recorded run intervals, which gives Etsion et al.'s Table 3 for any tick rate from one trace.

use super::Run;

/// ceil(n / d) for d > 0, any sign of n.
fn ceil_div(n: i128, d: i128) -> i128 {
    -((-n).div_euclid(d))
}

/// Ticks of rate `hz` and phase `phase_ns` falling in `[start, end)`. A tick at exactly the switch-in
/// instant bills the task switched in; a tick at exactly the switch-out instant bills the next one.
pub fn ticks_in(start: u64, end: u64, hz: u32, phase_ns: u64) -> u64 {
    if end <= start || hz == 0 {
        return 0;
    }
    let at = |t: u64| ceil_div((t as i128 - phase_ns as i128) * hz as i128, 1_000_000_000);
    (at(end) - at(start)) as u64
}

/// Billing of a set of run intervals at one tick rate.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Billing {
    pub hz: u32,
    pub phase_ns: u64,
    /// Ticks that found the task running.
    pub ticks: u64,
    /// Time actually on the CPU.
    pub consumed_ns: u64,
    /// Whole quanta (switch-in and switch-out both seen).
    pub quanta: u64,
    /// Whole quanta no tick fell into: never billed.
    pub missed_quanta: u64,
}

impl Billing {
    /// Billed time over consumed time (Etsion's billing ratio); `None` without CPU time.
    pub fn ratio(&self) -> Option<f64> {
        (self.consumed_ns > 0)
            .then(|| self.ticks as f64 * 1e9 / self.hz as f64 / self.consumed_ns as f64)
    }

    /// Share of whole quanta never billed.
    pub fn missed_fraction(&self) -> Option<f64> {
        (self.quanta > 0).then(|| self.missed_quanta as f64 / self.quanta as f64)
    }

    pub fn billed_ns(&self) -> u64 {
        ((self.ticks as u128 * 1_000_000_000) / self.hz.max(1) as u128) as u64
    }
}

/// Bill `runs` at `hz` with the given phase.
pub fn bill<'a>(runs: impl IntoIterator<Item = &'a Run>, hz: u32, phase_ns: u64) -> Billing {
    let mut b = Billing {
        hz,
        phase_ns,
        ..Default::default()
    };
    for r in runs {
        let t = ticks_in(r.start, r.end, hz, phase_ns);
        b.ticks = b.ticks.saturating_add(t);
        b.consumed_ns = b.consumed_ns.saturating_add(r.len());
        if r.complete() {
            b.quanta += 1;
            b.missed_quanta += (t == 0) as u64;
        }
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn counts_ticks_in_half_open_intervals() {
        // 100 Hz: ticks every 10 ms at 0, 10 ms, 20 ms...
        assert_eq!(ticks_in(0, 10_000_000, 100, 0), 1); // the tick at 0, not the one at 10 ms
        assert_eq!(ticks_in(1, 10_000_000, 100, 0), 0);
        assert_eq!(ticks_in(1, 10_000_001, 100, 0), 1);
        assert_eq!(ticks_in(5_000_000, 35_000_000, 100, 0), 3);
        // Phase 5 ms moves the ticks to 5, 15, 25 ms.
        assert_eq!(ticks_in(0, 5_000_000, 100, 5_000_000), 0);
        assert_eq!(ticks_in(0, 5_000_001, 100, 5_000_000), 1);
        // A phase larger than the time: ticks before the phase still exist (k negative).
        assert_eq!(ticks_in(0, 10_000_000, 100, 25_000_000), 1);
        // Rates that do not divide a second: 300 Hz ticks at k * 3333333.33 ns.
        assert_eq!(ticks_in(0, 1_000_000_000, 300, 0), 300);
        assert_eq!(ticks_in(3_333_333, 3_333_334, 300, 0), 1);
        assert_eq!(ticks_in(3_333_334, 6_666_666, 300, 0), 0);
        assert_eq!(ticks_in(10, 10, 1000, 0), 0);
    }

    #[test]
    fn billing_ratio_and_missed_quanta() {
        let runs = [
            Run::whole(0, 2_000_000, 0), // 2 ms holding the tick at 0: billed 10 ms
            Run::whole(12_000_000, 15_000_000, 0), // 3 ms, no tick: missed
            Run::whole(19_000_000, 31_000_000, 0), // 12 ms holding ticks at 20 and 30 ms
            Run::partial(95_000_000, 100_000_000, 0),
        ];
        let b = bill(&runs, 100, 0);
        assert_eq!(b.ticks, 3);
        assert_eq!(b.consumed_ns, 22_000_000);
        assert_eq!((b.quanta, b.missed_quanta), (3, 1));
        assert!((b.ratio().unwrap() - 30.0 / 22.0).abs() < 1e-12);
        assert_eq!(b.billed_ns(), 30_000_000);
        assert!((b.missed_fraction().unwrap() - 1.0 / 3.0).abs() < 1e-12);
    }

    proptest! {
        #[test]
        fn ticks_add_up_over_a_split(a in 0u64..1u64 << 40, len1 in 0u64..1 << 32, len2 in 0u64..1 << 32, hz in 1u32..50_000, phase in 0u64..1 << 35) {
            let (b, c) = (a + len1, a + len1 + len2);
            prop_assert_eq!(ticks_in(a, b, hz, phase) + ticks_in(b, c, hz, phase), ticks_in(a, c, hz, phase));
            // And the count is the interval over the period, give or take one.
            let exact = (c - a) as f64 * hz as f64 / 1e9;
            let n = ticks_in(a, c, hz, phase) as f64;
            prop_assert!((n - exact).abs() <= 1.0 + 1e-9);
        }
    }
}
