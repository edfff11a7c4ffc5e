//! Waiting for an instant: sleep in the kernel until a margin before it, then spin on the clock.
//!
//! This is UTIME's "fire early and spin to the exact instant" done from user space: the kernel's
//! wake-up latency is absorbed by the margin, and the last stretch is a clock-read loop whose error
//! is one clock read.

use crate::Clock;

/// What happened while waiting for one instant. All values are absolute ns on the clock used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wake {
    /// The instant asked for.
    pub target: u64,
    /// When the kernel sleep was asked to end (`target - margin`).
    pub sleep_to: u64,
    /// When the thread ran again after the kernel sleep.
    pub woke: u64,
    /// When the wait returned (first clock read at or after `target`).
    pub done: u64,
    /// The clock read before `done` when the wait spun (else `done`): between the two the thread
    /// did nothing but read the clock, so a long step there is time it was not running.
    pub before_done: u64,
    /// The longest step of the spin (from one clock read to the next), `(woke, woke)` when it did
    /// not spin: a thread reading its clock does nothing else, so a long step is time it did not run.
    pub longest_step: (u64, u64),
    /// The clock reads around the [`Prime`] call made during the spin (`None`: none was made).
    /// Neither it nor the spin's steps include the other.
    pub primed: Option<(u64, u64)>,
}

impl Wake {
    /// The kernel woke us after the target itself, so spinning could not help.
    pub fn woke_late(&self) -> bool {
        self.woke > self.target
    }
    /// How late the wait returned relative to the target.
    pub fn lateness(&self) -> u64 {
        self.done.saturating_sub(self.target)
    }
    /// The kernel sleep's own wake-up latency (what the margin must cover).
    pub fn sleep_latency(&self) -> u64 {
        self.woke.saturating_sub(self.sleep_to)
    }
    /// Time spent spinning.
    pub fn spun(&self) -> u64 {
        self.done.saturating_sub(self.woke)
    }
}

/// Sleep until `target - margin`, then spin until `target`. With `margin == 0` this is a plain
/// absolute sleep.
#[inline]
pub fn hybrid_until<C: Clock + ?Sized>(clock: &C, target: u64, margin: u64) -> Wake {
    hybrid_until_then(clock, target, margin, || false)
}

/// [`hybrid_until`], with `before_spin` called between the kernel sleep and the spin. It may wait
/// itself, and says whether it did: the spin then starts from a fresh clock read.
#[inline]
pub fn hybrid_until_then<C: Clock + ?Sized>(
    clock: &C,
    target: u64,
    margin: u64,
    before_spin: impl FnOnce() -> bool,
) -> Wake {
    hybrid_until_primed(clock, target, margin, before_spin, None::<Prime<fn()>>)
}

/// A call made once during the spin, `lead` before the target: work that readies the action due
/// at the target (a send that sends nothing, to bring the kernel's send path back into the CPU's
/// caches). It is made at the first clock read at or after `target - lead`, and only while at
/// least half of `lead` is left, so a late wake-up skips it rather than let it run into the
/// target.
pub struct Prime<F: FnOnce()> {
    pub lead: u64,
    pub call: F,
}

/// [`hybrid_until_then`], with `prime` called once during the spin (see [`Prime`]); the spin
/// starts again from a fresh clock read after it, and the two reads around it are
/// [`Wake::primed`].
#[inline]
pub fn hybrid_until_primed<C: Clock + ?Sized, F: FnOnce()>(
    clock: &C,
    target: u64,
    margin: u64,
    before_spin: impl FnOnce() -> bool,
    mut prime: Option<Prime<F>>,
) -> Wake {
    let sleep_to = target.saturating_sub(margin);
    if clock.now() < sleep_to {
        clock.sleep_until(sleep_to);
    }
    let woke = clock.now();
    let start = if before_spin() { clock.now() } else { woke };
    let (mut before, mut now) = (start, start);
    let mut longest = (start, start);
    let mut primed = None;
    loop {
        if let Some(p) = prime.take_if(|p| now >= target.saturating_sub(p.lead)) {
            if target.saturating_sub(now) >= p.lead / 2 {
                (p.call)();
                let after = clock.now();
                primed = Some((now, after));
                (before, now) = (after, after);
            }
        }
        if now >= target {
            break;
        }
        std::hint::spin_loop();
        before = now;
        now = clock.now();
        if now.saturating_sub(before) > longest.1 - longest.0 {
            longest = (before, now);
        }
    }
    Wake {
        target,
        sleep_to,
        woke,
        done: now,
        before_done: before,
        longest_step: longest,
        primed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ManualClock;

    #[test]
    fn spins_to_the_target_when_the_kernel_wakes_within_the_margin() {
        let clock = ManualClock::with_wake_latency(0, 25, |_| 30_000);
        let w = hybrid_until(&clock, 1_000_000, 100_000);
        assert_eq!(w.sleep_to, 900_000);
        assert!(!w.woke_late());
        assert!(w.done >= 1_000_000 && w.lateness() <= 25, "{w:?}");
        assert!(w.spun() > 60_000);
        // The last step was one clock read long.
        assert!(
            w.before_done < 1_000_000 && w.done - w.before_done <= 25,
            "{w:?}"
        );
    }

    #[test]
    fn a_wait_before_the_spin_keeps_the_wake_up_and_is_no_step_of_the_spin() {
        let clock = ManualClock::with_wake_latency(0, 25, |_| 30_000);
        let w = hybrid_until_then(&clock, 1_000_000, 100_000, || {
            clock.advance(50_000);
            true
        });
        assert_eq!(w.sleep_to, 900_000);
        // The kernel's wake-up is what the margin learns from, not the wait after it.
        assert!(
            w.sleep_latency() >= 30_000 && w.sleep_latency() < 31_000,
            "{w:?}"
        );
        assert!(w.longest_step.1 - w.longest_step.0 <= 25, "{w:?}");
        assert!(w.done >= 1_000_000 && w.lateness() <= 25, "{w:?}");
    }

    /// A wait for 1 ms with a 100 us margin, primed 20 us before by `call`.
    fn primed(clock: &ManualClock, call: impl FnOnce()) -> Wake {
        let prime = Some(Prime { lead: 20_000, call });
        hybrid_until_primed(clock, 1_000_000, 100_000, || false, prime)
    }

    #[test]
    fn a_prime_is_called_once_its_lead_before_the_target_and_is_no_step_of_the_spin() {
        let clock = ManualClock::with_wake_latency(0, 25, |_| 30_000);
        let calls = std::cell::Cell::new(Vec::new());
        let w = primed(&clock, || {
            let mut v = calls.take();
            v.push(clock.now());
            calls.set(v);
            clock.advance(4_000);
        });
        let calls = calls.take();
        assert_eq!(calls.len(), 1, "{calls:?}");
        assert!(calls[0] >= 980_000 && calls[0] < 980_100, "{calls:?}");
        let (from, to) = w.primed.expect("primed");
        assert!(
            from >= 980_000 && to - from >= 4_000 && to - from < 4_100,
            "{w:?}"
        );
        // The spin went on to the target from the read after the call, which no step spans.
        assert!(w.longest_step.1 - w.longest_step.0 <= 25, "{w:?}");
        assert!(w.done >= 1_000_000 && w.lateness() <= 25, "{w:?}");
        assert!(w.before_done > to, "{w:?}");
    }

    #[test]
    fn a_wake_up_with_less_than_half_the_lead_left_skips_the_prime() {
        // Woken 8 us before the target, under half the 20 us lead.
        let clock = ManualClock::with_wake_latency(0, 25, |_| 92_000);
        let called = std::cell::Cell::new(false);
        let w = primed(&clock, || called.set(true));
        assert!(!called.get());
        assert_eq!(w.primed, None);
        assert!(w.done >= 1_000_000 && w.lateness() <= 25, "{w:?}");
        // Woken 12 us before: the prime is made at once.
        let clock = ManualClock::with_wake_latency(0, 25, |_| 88_000);
        let w = primed(&clock, || called.set(true));
        assert!(called.get());
        assert!(w.primed.is_some_and(|(a, _)| a < 988_100), "{w:?}");
    }

    #[test]
    fn a_prime_that_runs_past_the_target_leaves_no_read_before_it() {
        let clock = ManualClock::with_wake_latency(0, 25, |_| 30_000);
        let w = primed(&clock, || clock.advance(50_000));
        let (_, to) = w.primed.expect("primed");
        // The wait returns at the read after the call: nothing says the thread only read its
        // clock across the target.
        assert_eq!((w.done, w.before_done), (to, to), "{w:?}");
        assert!(w.lateness() >= 30_000, "{w:?}");
    }

    /// A clock whose `n`th read jumps `by` ns (the thread stopped there).
    struct Jumps {
        clock: ManualClock,
        reads: std::sync::atomic::AtomicU64,
        n: u64,
        by: u64,
    }

    impl Clock for Jumps {
        fn now(&self) -> u64 {
            let i = self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if i == self.n {
                self.clock.advance(self.by);
            }
            self.clock.now()
        }
        fn sleep_until(&self, t: u64) {
            self.clock.sleep_until(t)
        }
    }

    #[test]
    fn the_longest_step_of_a_spin_is_where_the_thread_stopped() {
        let clock = Jumps {
            clock: ManualClock::new(0, 25),
            reads: Default::default(),
            n: 40,
            by: 50_000,
        };
        let w = hybrid_until(&clock, 100_000, 200_000);
        assert_eq!(w.sleep_to, 0);
        let (a, b) = w.longest_step;
        assert_eq!(b - a, 50_025, "{w:?}");
        assert!(a > w.woke && b < w.done, "{w:?}");
        // Without a spin there is no step.
        let w = hybrid_until(&ManualClock::new(0, 25), 50, 0);
        assert_eq!(w.longest_step, (w.woke, w.woke));
    }

    #[test]
    fn reports_woke_late_when_the_kernel_overshoots_the_margin() {
        let clock = ManualClock::with_wake_latency(0, 25, |_| 150_000);
        let w = hybrid_until(&clock, 1_000_000, 100_000);
        assert!(w.woke_late());
        assert_eq!(w.spun(), 0);
        assert!(w.lateness() >= 50_000);
    }

    #[test]
    fn target_in_the_past_returns_at_once() {
        let clock = ManualClock::new(5_000_000, 10);
        let w = hybrid_until(&clock, 1_000_000, 100_000);
        assert!(w.woke_late());
        assert_eq!(w.lateness(), w.done - 1_000_000);
    }
}
