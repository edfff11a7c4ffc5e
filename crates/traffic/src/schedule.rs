//! When each packet is sent: pure arithmetic on the capture's instants, anchored to the start.
//!
//! Send k (k counts over every loop) goes at `start + at(k)`, where `at(k)` is computed from k
//! alone (`k * 1e9 / pps`, `k * interval`, or loop start + capture offset / speed), never by adding
//! gaps one after another: rounding cannot accumulate, so a long replay does not drift.
//!
//! ```text
//! loop 0: p0 . p1 .... p2 | spacing | loop 1: p0 . p1 .... p2 | spacing | ...
//!         at(0)                                at(3) = span + spacing
//! ```

use crate::TrafficError;
use punctual_time::format_ns;

/// The fastest rate accepted (AF_PACKET on gigabit Ethernet tops out near 1.5 M small frames/s).
pub const MAX_PPS: u64 = 10_000_000;
/// The shortest fixed spacing accepted (= [`MAX_PPS`]).
pub const MIN_INTERVAL_NS: u64 = 100;
pub const MAX_SPEED: f64 = 10_000.0;
/// Loop spacing in speed mode for a one-packet capture (no gap to take an average from).
pub const SINGLE_PACKET_SPACING_NS: u64 = 1_000_000;

/// How the instants are chosen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Timing {
    /// The capture's own instants, divided by this factor (1 = as captured).
    Speed(f64),
    /// Fixed spacing, ns.
    Interval(u64),
    /// Fixed rate, packets a second.
    Pps(u64),
}

impl Timing {
    /// From the command line's `--speed`, `--pps` and `--interval` (at most one given): a rate or
    /// a spacing when given, else the capture's own timing at `speed` (default 1).
    pub fn from_flags(speed: Option<f64>, pps: Option<u64>, interval: Option<u64>) -> Timing {
        match (pps, interval) {
            (Some(p), _) => Timing::Pps(p),
            (_, Some(i)) => Timing::Interval(i),
            _ => Timing::Speed(speed.unwrap_or(1.0)),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScheduleConfig {
    pub timing: Timing,
    /// Times the capture is sent (>= 1).
    pub loops: u64,
    /// Stop after this many sends (over every loop).
    pub limit: Option<u64>,
}

impl Default for ScheduleConfig {
    fn default() -> Self {
        ScheduleConfig {
            timing: Timing::Speed(1.0),
            loops: 1,
            limit: None,
        }
    }
}

/// The instants of a replay of `n` packets.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    timing: Timing,
    n: u64,
    total: u64,
    /// Speed mode: offset of the first loop's last packet plus one spacing.
    loop_span: u64,
    /// The nominal spacing (mean gap in speed mode), ns.
    spacing: f64,
    first_ts: u64,
}

impl Schedule {
    /// Checks the configuration against the capture's instants `ts` (never decreasing).
    pub fn new(cfg: &ScheduleConfig, ts: &[u64]) -> Result<Schedule, TrafficError> {
        let usage = |m: String| Err(TrafficError::Usage(m));
        match cfg.timing {
            Timing::Speed(s) if !(s.is_finite() && s > 0.0 && s <= MAX_SPEED) => {
                return usage(format!(
                    "--speed {s}: give a factor above 0 and at most {MAX_SPEED} (1 = as captured)"
                ))
            }
            Timing::Interval(i) if i < MIN_INTERVAL_NS => {
                return usage(format!(
                    "--interval {}: give at least {} (at most {MAX_PPS} packets a second)",
                    format_ns(i),
                    format_ns(MIN_INTERVAL_NS)
                ))
            }
            Timing::Pps(p) if p == 0 || p > MAX_PPS => {
                return usage(format!("--pps {p}: give 1 to {MAX_PPS} packets a second"))
            }
            _ => {}
        }
        if cfg.loops == 0 {
            return usage("--loop 0: give 1 or more passes over the capture".into());
        }
        if cfg.limit == Some(0) {
            return usage("--limit 0: give 1 or more packets".into());
        }
        if ts.is_empty() {
            return usage("the capture holds no packets to send".into());
        }
        let n = ts.len() as u64;
        let total = n
            .checked_mul(cfg.loops)
            .ok_or_else(|| TrafficError::Usage(format!("--loop {}: too many passes", cfg.loops)))?;
        let total = cfg.limit.map_or(total, |l| l.min(total));
        let first_ts = ts[0];
        let (spacing, loop_span) = match cfg.timing {
            Timing::Speed(s) => {
                // At a tiny speed (`--speed 1e-30`) or across a capture's huge gap (136 years) the
                // pass outlasts any replay: refused here, before f64 -> u64 saturates and the sums
                // wrap (issue 32).
                let span = ts[ts.len() - 1] - first_ts;
                let last_f = span as f64 / s;
                if !last_f.is_finite() || last_f > MAX_REPLAY_NS as f64 {
                    return usage(format!(
                        "one pass over the capture ({} at --speed {s}) would take {}, longer than a replay may last ({}); raise --speed or cut the capture",
                        format_ns(span),
                        if last_f.is_finite() && last_f < u64::MAX as f64 {
                            format_ns(last_f as u64)
                        } else {
                            "for ever".to_string()
                        },
                        format_ns(MAX_REPLAY_NS)
                    ));
                }
                let last = scaled(span, s);
                let spacing = if n > 1 {
                    last as f64 / (n - 1) as f64
                } else {
                    SINGLE_PACKET_SPACING_NS as f64
                };
                (spacing, last + (spacing.round() as u64).max(1))
            }
            Timing::Interval(i) => (i as f64, 0),
            Timing::Pps(p) => (1e9 / p as f64, 0),
        };
        let s = Schedule {
            timing: cfg.timing,
            n,
            total,
            loop_span,
            spacing,
            first_ts,
        };
        if s.try_at(total - 1, ts)
            .is_none_or(|end| end > MAX_REPLAY_NS)
        {
            return usage(format!(
                "the replay would last longer than {}; lower --loop or --limit",
                format_ns(MAX_REPLAY_NS)
            ));
        }
        Ok(s)
    }

    /// Sends in all (loops times packets, or the limit).
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The nominal spacing between sends (ns; the mean gap at the given speed in speed mode).
    pub fn spacing(&self) -> f64 {
        self.spacing
    }

    /// The packet send `k` sends.
    #[inline(always)]
    pub fn packet(&self, k: u64) -> usize {
        (k % self.n) as usize
    }

    /// When send `k` goes, ns after the start.
    #[inline(always)]
    pub fn at(&self, k: u64, ts: &[u64]) -> u64 {
        self.try_at(k, ts).expect("checked in Schedule::new")
    }

    fn try_at(&self, k: u64, ts: &[u64]) -> Option<u64> {
        match self.timing {
            Timing::Interval(i) => k.checked_mul(i),
            Timing::Pps(p) => u64::try_from(k as u128 * 1_000_000_000 / p as u128).ok(),
            Timing::Speed(s) => {
                let (l, i) = (k / self.n, (k % self.n) as usize);
                l.checked_mul(self.loop_span)?
                    .checked_add(scaled(ts[i] - self.first_ts, s))
            }
        }
    }
}

/// The longest a replay may last (a year, as `latency -D`): instants are absolute u64 ns on
/// CLOCK_MONOTONIC, and anything longer is a mistake, not a measurement.
pub const MAX_REPLAY_NS: u64 = 365 * 86_400 * 1_000_000_000;

/// A capture offset at `speed`, rounded to the nearest ns (f64 is exact for offsets under 104 days).
#[inline(always)]
fn scaled(offset: u64, speed: f64) -> u64 {
    if speed == 1.0 {
        offset
    } else {
        (offset as f64 / speed).round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(timing: Timing, loops: u64, limit: Option<u64>) -> ScheduleConfig {
        ScheduleConfig {
            timing,
            loops,
            limit,
        }
    }

    /// Issue 32, Low (wraps): `--speed 1e-30` printed garbage and exited 0; a capture with a
    /// 136-year gap replayed "for ever". Both are refused, as is a replay looped past a year.
    #[test]
    fn wraps_tiny_speed_huge_gap_and_long_loops_are_refused() {
        let ms = 1_000_000;
        let cfg = |timing, loops| ScheduleConfig {
            timing,
            loops,
            ..ScheduleConfig::default()
        };
        for (c, ts) in [
            (cfg(Timing::Speed(1e-30), 1), vec![0, ms, 2 * ms]),
            (
                cfg(Timing::Speed(1.0), 1),
                vec![0, 136 * 365 * 86_400 * 1_000_000_000],
            ),
            (cfg(Timing::Speed(f64::MIN_POSITIVE), 1), vec![0, 1]),
            (cfg(Timing::Interval(ms), 1 << 40), vec![0]),
        ] {
            let e = Schedule::new(&c, &ts).expect_err("refused");
            assert!(matches!(e, TrafficError::Usage(_)), "{e}");
            assert!(e.to_string().contains("31536000 s"), "{e}");
        }
        // A day's capture at speed 1 is fine.
        Schedule::new(&cfg(Timing::Speed(1.0), 1), &[0, 86_400 * 1_000_000_000]).unwrap();
    }

    #[test]
    fn speed_divides_the_capture_offsets() {
        let ts = [1_000, 1_500, 4_000];
        let s = Schedule::new(&cfg(Timing::Speed(2.0), 1, None), &ts).unwrap();
        let at: Vec<u64> = (0..3).map(|k| s.at(k, &ts)).collect();
        assert_eq!(at, [0, 250, 1_500]);
    }

    #[test]
    fn each_loop_starts_one_spacing_after_the_previous_loops_last_instant() {
        let ts = [0, 100, 400]; // mean gap 200
        let s = Schedule::new(&cfg(Timing::Speed(1.0), 3, None), &ts).unwrap();
        assert_eq!(s.total(), 9);
        let at: Vec<u64> = (0..9).map(|k| s.at(k, &ts)).collect();
        assert_eq!(at, [0, 100, 400, 600, 700, 1000, 1200, 1300, 1600]);
        let packets: Vec<usize> = (0..9).map(|k| s.packet(k)).collect();
        assert_eq!(packets, [0, 1, 2, 0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn fixed_spacing_and_rate_ignore_the_capture_instants_and_run_on_across_loops() {
        let ts = [0, 7, 9_999];
        let s = Schedule::new(&cfg(Timing::Interval(500_000), 2, None), &ts).unwrap();
        assert_eq!(
            (0..6).map(|k| s.at(k, &ts)).collect::<Vec<_>>(),
            [0, 500_000, 1_000_000, 1_500_000, 2_000_000, 2_500_000]
        );
        let s = Schedule::new(&cfg(Timing::Pps(4), 1, None), &ts).unwrap();
        assert_eq!(
            (0..3).map(|k| s.at(k, &ts)).collect::<Vec<_>>(),
            [0, 250_000_000, 500_000_000]
        );
        assert_eq!(s.spacing(), 250_000_000.0);
    }

    #[test]
    fn the_limit_cuts_across_loops() {
        let ts = [0, 10];
        let s = Schedule::new(&cfg(Timing::Speed(1.0), 5, Some(3)), &ts).unwrap();
        assert_eq!(s.total(), 3);
        let s = Schedule::new(&cfg(Timing::Speed(1.0), 1, Some(30)), &ts).unwrap();
        assert_eq!(s.total(), 2);
    }

    /// Issue 14: instants anchored to the start, never summed deltas. At 3 packets a second the
    /// spacing (333,333.33 ns) is not a whole number of ns: summing rounded gaps would drift by a
    /// third of a ns a packet, 333 us over a million packets.
    #[test]
    fn a_million_packets_at_a_fractional_spacing_do_not_drift() {
        let ts: Vec<u64> = (0..1_000).map(|i| i * 1_000).collect();
        let s = Schedule::new(&cfg(Timing::Pps(3), 1_000, None), &ts).unwrap();
        assert_eq!(s.total(), 1_000_000);
        let mut prev = 0;
        for k in 0..1_000_000u64 {
            let at = s.at(k, &ts);
            let exact = k as f64 * 1e9 / 3.0;
            assert!((at as f64 - exact).abs() < 1.0, "send {k}: {at} vs {exact}");
            assert!(k == 0 || at > prev);
            prev = at;
        }
        assert_eq!(s.at(999_999, &ts), 333_333_000_000_000);
    }

    #[test]
    fn a_million_packets_at_a_fractional_speed_do_not_drift() {
        // Gaps of 1 ns at speed 3: each is a third of a ns; anchored, the millionth is 333,333 ns in.
        let ts: Vec<u64> = (0..1_000_000).collect();
        let s = Schedule::new(&cfg(Timing::Speed(3.0), 1, None), &ts).unwrap();
        assert_eq!(s.at(999_999, &ts), 333_333);
        assert_eq!(s.at(3, &ts), 1);
    }

    #[test]
    fn zero_and_absurd_rates_are_usage_errors() {
        let ts = [0, 1];
        for t in [
            Timing::Pps(0),
            Timing::Pps(MAX_PPS + 1),
            Timing::Interval(0),
            Timing::Interval(MIN_INTERVAL_NS - 1),
            Timing::Speed(0.0),
            Timing::Speed(-1.0),
            Timing::Speed(f64::NAN),
            Timing::Speed(f64::INFINITY),
        ] {
            let e = Schedule::new(&cfg(t, 1, None), &ts).unwrap_err();
            assert!(matches!(e, TrafficError::Usage(_)), "{t:?}: {e}");
        }
        assert!(Schedule::new(&cfg(Timing::Pps(1), 0, None), &ts).is_err());
        assert!(Schedule::new(&cfg(Timing::Pps(1), 1, Some(0)), &ts).is_err());
        assert!(Schedule::new(&cfg(Timing::Pps(1), 1, None), &[]).is_err());
        assert!(Schedule::new(&cfg(Timing::Interval(u64::MAX / 2), 4, None), &ts).is_err());
    }
}
