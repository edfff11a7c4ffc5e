//! Clocks. [`SystemClock`] reads the kernel's clocks through the vDSO (`clock_gettime`) and sleeps
//! with `clock_nanosleep(TIMER_ABSTIME)`; [`ManualClock`] is the injected clock tests use to drive
//! loops deterministically (time only moves when the code under test reads or sleeps).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Which kernel clock a measurement runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClockId {
    Monotonic,
    Realtime,
}

impl ClockId {
    pub fn as_raw(self) -> libc::clockid_t {
        match self {
            ClockId::Monotonic => libc::CLOCK_MONOTONIC,
            ClockId::Realtime => libc::CLOCK_REALTIME,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ClockId::Monotonic => "monotonic",
            ClockId::Realtime => "realtime",
        }
    }
}

impl std::str::FromStr for ClockId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "monotonic" => Ok(ClockId::Monotonic),
            "realtime" => Ok(ClockId::Realtime),
            other => Err(format!(
                "unknown clock '{other}' (valid: monotonic, realtime)"
            )),
        }
    }
}

/// A source of absolute time in nanoseconds, and a way to sleep until an absolute instant on it.
pub trait Clock: Send + Sync {
    /// Current time in nanoseconds on this clock.
    fn now(&self) -> u64;
    /// Block until `t` (absolute, ns) has passed on this clock. May return late, never early.
    fn sleep_until(&self, t: u64);
    /// Give the CPU away for at least `ns`: a real block in the kernel, which resets RLIMIT_RTTIME's
    /// count and lets the CPU's other work run.
    fn pause(&self, ns: u64) {
        self.sleep_until(self.now() + ns);
    }
}

/// The kernel's clocks.
#[derive(Clone, Copy, Debug)]
pub struct SystemClock {
    id: ClockId,
}

impl SystemClock {
    pub const fn new(id: ClockId) -> Self {
        SystemClock { id }
    }
    pub const fn monotonic() -> Self {
        SystemClock::new(ClockId::Monotonic)
    }
    pub fn id(&self) -> ClockId {
        self.id
    }
}

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> u64 {
        read_clock(self.id.as_raw())
    }

    fn sleep_until(&self, t: u64) {
        sleep_abs(self.id.as_raw(), t)
    }

    /// A short sleep does not always block ([`until_switched`]): sleep twice as long until it
    /// did (at most 1 ms).
    fn pause(&self, ns: u64) {
        let tries = std::iter::successors(Some(ns.max(1)), |&d| {
            (d < 1_000_000).then(|| (d * 2).min(1_000_000))
        });
        until_switched(
            tries,
            |d| sleep_abs(self.id.as_raw(), self.now() + d),
            voluntary_switches,
        );
    }
}

/// Block with `wait` for each time of `tries` in turn until the calling thread has left its CPU
/// (`switches`, its voluntary context switches, moved across the wait): that wait's time, `None`
/// when none did. A short timed block does not always block: when arming the timer takes longer
/// than the block (a VM exit can take tens of microseconds), the timer has fired before the
/// thread would give up the CPU, and the call returns without a context switch. Nothing of lower
/// priority ran then, and RLIMIT_RTTIME counts on.
pub fn until_switched(
    tries: impl IntoIterator<Item = u64>,
    mut wait: impl FnMut(u64),
    switches: impl Fn() -> u64,
) -> Option<u64> {
    tries.into_iter().find(|&t| {
        let before = switches();
        wait(t);
        switches() > before
    })
}

/// Voluntary context switches of the calling thread so far.
pub fn voluntary_switches() -> u64 {
    // SAFETY: rusage is plain C data (integers and timevals): all zeros is valid.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes one rusage into `r`, a live local of that type.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut r) };
    r.ru_nvcsw as u64
}

/// Read a kernel clock in nanoseconds. glibc routes CLOCK_MONOTONIC and CLOCK_REALTIME through the
/// vDSO, so this does not enter the kernel.
#[inline]
pub fn read_clock(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer; the clock ids we pass always exist on Linux.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Consumed CPU time of the calling thread, in nanoseconds.
pub fn thread_cpu_time() -> u64 {
    read_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// `timespec` for an absolute nanosecond value.
pub fn timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

/// Sleep until absolute `t` on clock `id`, resuming after signal interruptions.
pub fn sleep_abs(id: libc::clockid_t, t: u64) {
    let ts = timespec(t);
    loop {
        // SAFETY: valid timespec pointer; the remain pointer may be null for TIMER_ABSTIME.
        let rc =
            unsafe { libc::clock_nanosleep(id, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) };
        if rc != libc::EINTR {
            return;
        }
    }
}

/// Sleep for a relative `ns` on clock `id` (the naive loop McKenney warns about; kept for `--mode rel`).
pub fn sleep_rel(id: libc::clockid_t, ns: u64) {
    let ts = timespec(ns);
    // SAFETY: valid timespec pointer; we do not resume after EINTR because the relative loop is meant
    // to show what a naive program does.
    unsafe { libc::clock_nanosleep(id, 0, &ts, std::ptr::null_mut()) };
}

/// A clock for tests: time advances only by `read_cost` on each read, and jumps on sleep to the target
/// plus whatever wake-up latency the installed model returns.
#[derive(Clone)]
pub struct ManualClock {
    inner: Arc<ManualInner>,
}

struct ManualInner {
    now: AtomicU64,
    read_cost: u64,
    #[allow(clippy::type_complexity)]
    wake_latency: Box<dyn Fn(u64) -> u64 + Send + Sync>,
}

impl ManualClock {
    /// A clock at `start` whose reads cost `read_cost` ns and whose sleeps wake exactly on time.
    pub fn new(start: u64, read_cost: u64) -> Self {
        Self::with_wake_latency(start, read_cost, |_| 0)
    }

    /// Like [`ManualClock::new`], with `wake_latency(target)` added to every sleep.
    pub fn with_wake_latency(
        start: u64,
        read_cost: u64,
        wake_latency: impl Fn(u64) -> u64 + Send + Sync + 'static,
    ) -> Self {
        ManualClock {
            inner: Arc::new(ManualInner {
                now: AtomicU64::new(start),
                read_cost,
                wake_latency: Box::new(wake_latency),
            }),
        }
    }

    /// Move time forward by `ns` (work being done, for example).
    pub fn advance(&self, ns: u64) {
        self.inner.now.fetch_add(ns, Ordering::SeqCst);
    }

    /// The current time without charging a read.
    pub fn peek(&self) -> u64 {
        self.inner.now.load(Ordering::SeqCst)
    }
}

impl Clock for ManualClock {
    fn now(&self) -> u64 {
        self.inner
            .now
            .fetch_add(self.inner.read_cost, Ordering::SeqCst)
            + self.inner.read_cost
    }

    fn sleep_until(&self, t: u64) {
        let late = (self.inner.wake_latency)(t);
        let woke = t + late;
        self.inner.now.fetch_max(woke, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_clock_is_monotonic_and_sleeps_at_least_until_target() {
        let c = SystemClock::monotonic();
        let a = c.now();
        let target = a + 200_000;
        c.sleep_until(target);
        let b = c.now();
        assert!(b >= target, "woke at {b}, before target {target}");
    }

    #[test]
    fn a_pause_always_blocks_even_when_it_is_shorter_than_arming_a_timer() {
        let c = SystemClock::monotonic();
        // 1 ns is always shorter than arming the timer: the first sleep returns at once, and
        // pause must keep going until the thread has really given the CPU away, every time.
        for _ in 0..20 {
            let before = voluntary_switches();
            let t0 = c.now();
            c.pause(1);
            assert!(
                voluntary_switches() > before,
                "pause returned without blocking"
            );
            assert!(c.now() - t0 < 50_000_000);
        }
    }

    #[test]
    fn manual_clock_charges_reads_and_applies_wake_latency() {
        let c = ManualClock::with_wake_latency(1_000, 10, |_| 7);
        assert_eq!(c.now(), 1_010);
        assert_eq!(c.now(), 1_020);
        c.sleep_until(5_000);
        assert_eq!(c.peek(), 5_007);
        // Sleeping into the past never moves time backwards.
        c.sleep_until(10);
        assert_eq!(c.peek(), 5_007);
    }

    #[test]
    fn clock_id_parses_and_refuses_unknown() {
        assert_eq!("monotonic".parse::<ClockId>().unwrap(), ClockId::Monotonic);
        let e = "tai".parse::<ClockId>().unwrap_err();
        assert!(e.contains("monotonic, realtime"), "{e}");
    }
}
