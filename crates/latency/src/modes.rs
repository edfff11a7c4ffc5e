//! The five ways a thread can wait for its next release. Each is a [`Waiter`]; the engine's loop is
//! the same for all of them.

use punctual_time::clock::{read_clock, sleep_abs, sleep_rel, timespec};
use punctual_time::{hybrid_until, AutoMargin, ClockId, MarginPolicy};
use std::io;

/// How a thread waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `clock_nanosleep(TIMER_ABSTIME)` to the release (cyclictest's default).
    Abs,
    /// `clock_nanosleep` for the interval, relative (the naive loop: lateness accumulates as drift).
    Rel,
    /// A periodic timerfd; `read()` returns the expirations.
    Timerfd,
    /// A periodic POSIX timer delivering a real-time signal to the thread (the seeds' alarms).
    Signal,
    /// Absolute sleep to release minus a margin, then spin on the clock to the release.
    Hybrid,
}

impl Mode {
    pub const ALL: [Mode; 5] = [
        Mode::Abs,
        Mode::Rel,
        Mode::Timerfd,
        Mode::Signal,
        Mode::Hybrid,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Mode::Abs => "abs",
            Mode::Rel => "rel",
            Mode::Timerfd => "timerfd",
            Mode::Signal => "signal",
            Mode::Hybrid => "hybrid",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Mode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("unknown mode '{s}' (valid: abs, rel, timerfd, signal, hybrid)"))
    }
}

/// One wait.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Obs {
    /// The release this wait was for (for `rel`: when the relative sleep should have ended).
    pub target: u64,
    /// When the thread ran again after the kernel wait.
    pub woke: u64,
    /// When the wait returned to the loop.
    pub done: u64,
    /// Releases the kernel timer reports as passed without a wake-up (timer overruns).
    pub overruns: u64,
}

pub(crate) trait Waiter {
    /// Wait for the release at `target`. Timer-driven waiters follow the kernel's timer instead and
    /// report overruns; the engine then moves its target along. `None`: the wait timed out without a
    /// release (only so the loop can look at its stop flag).
    fn wait(&mut self, target: u64) -> Option<Obs>;
    /// Whether the loop chooses its own release times (and so must skip periods it has missed).
    fn self_scheduled(&self) -> bool {
        true
    }
    /// The spin margin in use at the end (hybrid only).
    fn margin(&self) -> Option<u64> {
        None
    }
}

/// Waits for releases further off than this are cut into slices of [`SLEEP_SLICE_NS`], so a stop
/// request (SIGINT/SIGTERM) is seen within a second whatever the interval; the release itself is
/// still one absolute sleep of at most this long. Intervals up to a second are not touched: no
/// clock read is added to their loop.
pub(crate) const LONG_WAIT_NS: u64 = 1_000_000_000;
pub(crate) const SLEEP_SLICE_NS: u64 = 500_000_000;

/// For a long interval: when `target` is more than [`LONG_WAIT_NS`] away, sleep one slice and say
/// so (the waiter then returns `None` and the loop looks at its stop flag).
#[inline]
fn slept_a_slice(long: bool, clock: libc::clockid_t, target: u64) -> bool {
    if !long {
        return false;
    }
    let now = read_clock(clock);
    if target.saturating_sub(now) <= LONG_WAIT_NS {
        return false;
    }
    sleep_abs(clock, now + SLEEP_SLICE_NS);
    true
}

pub(crate) struct AbsWaiter {
    pub clock: libc::clockid_t,
    /// The interval is over [`LONG_WAIT_NS`]: waits are sliced.
    pub long: bool,
}

impl AbsWaiter {
    pub fn new(clock: libc::clockid_t, interval: u64) -> Self {
        AbsWaiter {
            clock,
            long: interval > LONG_WAIT_NS,
        }
    }
}

impl Waiter for AbsWaiter {
    #[inline]
    fn wait(&mut self, target: u64) -> Option<Obs> {
        if slept_a_slice(self.long, self.clock, target) {
            return None;
        }
        sleep_abs(self.clock, target);
        let now = read_clock(self.clock);
        Some(Obs {
            target,
            woke: now,
            done: now,
            overruns: 0,
        })
    }
}

pub(crate) struct RelWaiter {
    pub clock: libc::clockid_t,
    pub interval: u64,
    /// For an interval over [`LONG_WAIT_NS`]: the end of the relative sleep under way, slept
    /// towards in slices (the last one relative to the clock, so one sleep's drift counts, as in
    /// a single relative sleep).
    pub pending: Option<u64>,
}

impl RelWaiter {
    pub fn new(clock: libc::clockid_t, interval: u64) -> Self {
        RelWaiter {
            clock,
            interval,
            pending: None,
        }
    }
}

impl Waiter for RelWaiter {
    #[inline]
    fn wait(&mut self, _target: u64) -> Option<Obs> {
        let end = if self.interval > LONG_WAIT_NS {
            let now = read_clock(self.clock);
            let end = *self
                .pending
                .get_or_insert(now.saturating_add(self.interval));
            if end.saturating_sub(now) > LONG_WAIT_NS {
                sleep_rel(self.clock, SLEEP_SLICE_NS);
                return None;
            }
            self.pending = None;
            sleep_rel(self.clock, end.saturating_sub(now));
            end
        } else {
            let before = read_clock(self.clock);
            sleep_rel(self.clock, self.interval);
            before.saturating_add(self.interval)
        };
        let now = read_clock(self.clock);
        Some(Obs {
            target: end,
            woke: now,
            done: now,
            overruns: 0,
        })
    }
    fn self_scheduled(&self) -> bool {
        false
    }
}

pub(crate) struct HybridWaiter {
    pub clock: punctual_time::SystemClock,
    pub fixed: Option<u64>,
    pub auto: AutoMargin,
    id: libc::clockid_t,
    long: bool,
}

impl HybridWaiter {
    pub fn new(id: ClockId, policy: MarginPolicy, interval: u64) -> Self {
        let fixed = match policy {
            MarginPolicy::Fixed(m) => Some(m),
            MarginPolicy::Auto => None,
        };
        HybridWaiter {
            clock: punctual_time::SystemClock::new(id),
            fixed,
            auto: AutoMargin::for_interval(interval),
            id: id.as_raw(),
            long: interval > LONG_WAIT_NS,
        }
    }
    fn current_margin(&self) -> u64 {
        self.fixed.unwrap_or_else(|| self.auto.margin())
    }
}

impl Waiter for HybridWaiter {
    #[inline]
    fn wait(&mut self, target: u64) -> Option<Obs> {
        if slept_a_slice(self.long, self.id, target) {
            return None;
        }
        let margin = self.current_margin();
        let w = hybrid_until(&self.clock, target, margin);
        if self.fixed.is_none() && w.sleep_to > 0 && w.woke >= w.sleep_to {
            self.auto.observe(w.sleep_latency());
        }
        Some(Obs {
            target,
            woke: w.woke,
            done: w.done,
            overruns: 0,
        })
    }
    fn margin(&self) -> Option<u64> {
        Some(self.current_margin())
    }
}

pub(crate) struct TimerfdWaiter {
    fd: libc::c_int,
    clock: libc::clockid_t,
    interval: u64,
    next: u64,
}

impl TimerfdWaiter {
    pub fn new(clock: libc::clockid_t, first: u64, interval: u64) -> io::Result<Self> {
        // SAFETY: plain syscalls with valid arguments; the fd is owned by the waiter.
        unsafe {
            let fd = libc::timerfd_create(clock, libc::TFD_CLOEXEC);
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            let spec = libc::itimerspec {
                it_interval: timespec(interval),
                it_value: timespec(first),
            };
            if libc::timerfd_settime(fd, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) != 0
            {
                let e = io::Error::last_os_error();
                libc::close(fd);
                return Err(e);
            }
            Ok(TimerfdWaiter {
                fd,
                clock,
                interval,
                next: first,
            })
        }
    }
}

impl Waiter for TimerfdWaiter {
    #[inline]
    fn wait(&mut self, _target: u64) -> Option<Obs> {
        let mut expirations: u64 = 0;
        loop {
            // SAFETY: reading 8 bytes into a u64 from our timerfd.
            let n = unsafe { libc::read(self.fd, (&mut expirations as *mut u64).cast(), 8) };
            if n == 8 {
                break;
            }
        }
        let now = read_clock(self.clock);
        // The latest expiration is the release this wake-up serves; earlier ones were overrun.
        let overruns = expirations.saturating_sub(1);
        let target = self
            .next
            .saturating_add(overruns.saturating_mul(self.interval));
        self.next = target.saturating_add(self.interval);
        Some(Obs {
            target,
            woke: now,
            done: now,
            overruns,
        })
    }
    fn self_scheduled(&self) -> bool {
        false
    }
}

impl Drop for TimerfdWaiter {
    fn drop(&mut self) {
        // SAFETY: closing our own fd once.
        unsafe { libc::close(self.fd) };
    }
}

pub(crate) struct SignalWaiter {
    timer: libc::timer_t,
    clock: libc::clockid_t,
    set: libc::sigset_t,
    interval: u64,
    next: u64,
    timeout: libc::timespec,
    signo: libc::c_int,
}

impl SignalWaiter {
    /// A periodic POSIX timer that sends SIGRTMIN+1 to the calling thread only; the signal is blocked
    /// in the thread and taken with `sigtimedwait`, so no handler runs.
    pub fn new(clock: libc::clockid_t, first: u64, interval: u64) -> io::Result<Self> {
        // SAFETY: standard signal-set and timer calls on properly initialised structures.
        unsafe {
            let signo = libc::SIGRTMIN() + 1;
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, signo);
            let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            if rc != 0 {
                return Err(io::Error::from_raw_os_error(rc));
            }
            let mut sev: libc::sigevent = std::mem::zeroed();
            sev.sigev_notify = libc::SIGEV_THREAD_ID;
            sev.sigev_signo = signo;
            sev.sigev_notify_thread_id = libc::gettid();
            let mut timer: libc::timer_t = std::mem::zeroed();
            if libc::timer_create(clock, &mut sev, &mut timer) != 0 {
                return Err(io::Error::last_os_error());
            }
            let spec = libc::itimerspec {
                it_interval: timespec(interval),
                it_value: timespec(first),
            };
            if libc::timer_settime(timer, libc::TIMER_ABSTIME, &spec, std::ptr::null_mut()) != 0 {
                let e = io::Error::last_os_error();
                libc::timer_delete(timer);
                return Err(e);
            }
            // Wake at least every 100 ms (or two intervals) so a stop request is seen.
            let timeout = timespec(interval.saturating_mul(2).max(100_000_000));
            Ok(SignalWaiter {
                timer,
                clock,
                set,
                interval,
                next: first,
                timeout,
                signo,
            })
        }
    }
}

impl Waiter for SignalWaiter {
    #[inline]
    fn wait(&mut self, _target: u64) -> Option<Obs> {
        let overruns = loop {
            // SAFETY: siginfo_t is plain C data (integers and a union of them): all zeros is valid.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: sigtimedwait reads the set and the timeout, both owned by `self`, and writes
            // one siginfo_t into `info`, a live local of that type.
            let s = unsafe { libc::sigtimedwait(&self.set, &mut info, &self.timeout) };
            if s == self.signo {
                // SAFETY: the timer is ours.
                break unsafe { libc::timer_getoverrun(self.timer) }.max(0) as u64;
            }
            if s < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN) {
                return None; // timed out: no release, the loop looks at its stop flag
            }
        };
        let now = read_clock(self.clock);
        let target = self
            .next
            .saturating_add(overruns.saturating_mul(self.interval));
        self.next = target.saturating_add(self.interval);
        Some(Obs {
            target,
            woke: now,
            done: now,
            overruns,
        })
    }
    fn self_scheduled(&self) -> bool {
        false
    }
}

impl Drop for SignalWaiter {
    fn drop(&mut self) {
        // SAFETY: deleting our own timer once; leaving the signal blocked is harmless for this thread,
        // which is about to end, and a pending one is discarded with it.
        unsafe { libc::timer_delete(self.timer) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const MONO: libc::clockid_t = libc::CLOCK_MONOTONIC;

    /// Waits on `w` for `target` until a release comes; how many slices it took.
    fn slices_until(w: &mut impl Waiter, target: u64) -> (u32, Obs) {
        let mut slices = 0;
        loop {
            if let Some(o) = w.wait(target) {
                return (slices, o);
            }
            slices += 1;
            assert!(slices < 10, "no release after {slices} slices");
        }
    }

    /// A release more than a second away is slept towards a slice at a time: the waiter comes back
    /// without a release before it (so the loop can see a stop request), then waits for it once it
    /// is within a second.
    #[test]
    fn a_long_interval_is_waited_for_in_slices() {
        let target = read_clock(MONO) + 1_700_000_000;
        let mut w = AbsWaiter::new(MONO, 10_000_000_000);
        let (slices, obs) = slices_until(&mut w, target);
        assert!(slices >= 1, "a 1.7 s wait was not sliced");
        assert_eq!(obs.target, target);
        assert!(obs.woke >= target);

        let mut h = HybridWaiter::new(
            ClockId::Monotonic,
            MarginPolicy::Fixed(10_000),
            10_000_000_000,
        );
        let target = read_clock(MONO) + 1_700_000_000;
        let (slices, obs) = slices_until(&mut h, target);
        assert!(slices >= 1, "a 1.7 s hybrid wait was not sliced");
        assert!(obs.done >= target);
    }

    /// The relative loop keeps its meaning in slices: the release counted from where the interval
    /// began, one relative sleep's drift.
    #[test]
    fn a_long_relative_sleep_ends_an_interval_after_it_began() {
        let mut w = RelWaiter::new(MONO, 1_700_000_000);
        let began = read_clock(MONO);
        let (slices, obs) = slices_until(&mut w, 0);
        assert!(slices >= 1);
        assert!(obs.target >= began + 1_700_000_000);
        // The interval began at the first call, not at a later slice.
        assert!(obs.target < began + 1_700_000_000 + SLEEP_SLICE_NS);
        assert!(obs.woke >= obs.target);
        assert!(w.pending.is_none());
    }

    #[test]
    fn intervals_up_to_a_second_are_one_wait() {
        let mut w = AbsWaiter::new(MONO, 1_000_000_000);
        assert!(!w.long);
        let target = read_clock(MONO) + 20_000_000;
        assert!(w.wait(target).is_some());
    }
}
