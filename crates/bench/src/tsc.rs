//! The CPU's time-stamp counter: the cheapest clock there is (no system call, no vDSO page), used by
//! the tight loops of [`crate::gaps`], and to express costs in cycles as Etsion's tables do. On
//! machines without one, the monotonic clock stands in (1 tick = 1 ns).

use punctual_time::clock::read_clock;

/// Read the counter (serialisation is not needed: the loops measure gaps far above its skew).
#[inline(always)]
pub fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc exists on every x86_64 CPU.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        read_clock(libc::CLOCK_MONOTONIC)
    }
}

/// Whether [`ticks`] is a hardware counter (false: it is the monotonic clock in ns).
pub const HARDWARE: bool = cfg!(target_arch = "x86_64");

/// Nanoseconds per tick, from a pair of (monotonic ns, ticks) readings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Calibration {
    pub ns_per_tick: f64,
}

impl Calibration {
    pub fn between(start: (u64, u64), end: (u64, u64)) -> Calibration {
        let dn = end.0.saturating_sub(start.0) as f64;
        let dt = end.1.saturating_sub(start.1) as f64;
        Calibration {
            ns_per_tick: if dt > 0.0 { dn / dt } else { 1.0 },
        }
    }

    /// Measure over `window_ns` of wall time (sleeping, so it costs nothing).
    pub fn measure(window_ns: u64) -> Calibration {
        let a = stamp();
        std::thread::sleep(std::time::Duration::from_nanos(window_ns));
        Calibration::between(a, stamp())
    }

    pub fn to_ns(&self, ticks: u64) -> u64 {
        (ticks as f64 * self.ns_per_tick).round() as u64
    }

    pub fn from_ns(&self, ns: u64) -> u64 {
        (ns as f64 / self.ns_per_tick).round() as u64
    }

    /// Ticks per second (the TSC frequency).
    pub fn hz(&self) -> f64 {
        1e9 / self.ns_per_tick
    }
}

/// A (monotonic ns, ticks) pair read back to back.
pub fn stamp() -> (u64, u64) {
    (read_clock(libc::CLOCK_MONOTONIC), ticks())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_advance_and_calibrate() {
        let c = Calibration::measure(20_000_000);
        assert!(c.ns_per_tick > 0.0);
        let a = ticks();
        let b = ticks();
        assert!(b >= a);
        assert!(c.to_ns(c.from_ns(1_000_000)).abs_diff(1_000_000) < 10);
        let fixed = Calibration::between((0, 0), (1_000, 3_000));
        assert!((fixed.ns_per_tick - 1.0 / 3.0).abs() < 1e-12);
        assert!((fixed.hz() - 3e9).abs() < 1.0);
    }
}
