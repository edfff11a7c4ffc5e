//! Releases a self-timed loop finds already past.

/// What a loop releasing every `period` ns finds when it reads `now` and its next release, `next`,
/// has passed: the releases to step over to reach the first one still ahead (`step`), and how many
/// of those fall before the run's `end` (`missed`, the ones to count). A stall that runs past the
/// end of the run steps over releases the run never had; they are not missed.
///
/// `now < next` (nothing passed) gives zero for both. `period` must not be 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Passed {
    pub step: u64,
    pub missed: u64,
}

impl Passed {
    pub fn at(next: u64, now: u64, period: u64, end: u64) -> Passed {
        debug_assert!(period > 0, "a period of 0 ns never ends");
        if now < next {
            return Passed { step: 0, missed: 0 };
        }
        let step = (now - next) / period + 1;
        let inside = if next < end {
            (end - next - 1) / period + 1
        } else {
            0
        };
        Passed {
            step,
            missed: step.min(inside),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_stall_past_the_end_counts_only_the_runs_releases() {
        // Releases at 0, 10, .., 90 (end 100); the loop, due at 80, wakes at 125.
        assert_eq!(Passed::at(80, 125, 10, 100), Passed { step: 5, missed: 2 });
        // Due at 80, woke at 80: that one has passed, and it is inside.
        assert_eq!(Passed::at(80, 80, 10, 100), Passed { step: 1, missed: 1 });
        assert_eq!(Passed::at(80, 79, 10, 100), Passed { step: 0, missed: 0 });
        // Past the end already: nothing to count.
        assert_eq!(Passed::at(100, 150, 10, 100), Passed { step: 6, missed: 0 });
    }

    proptest! {
        /// Against counting by hand: the releases in [next, now] step over, those also before
        /// `end` are missed, and the step lands on the first release after `now`.
        #[test]
        fn matches_counting_one_by_one(next in 0u64..1_000, ahead in 0u64..1_000,
                                       period in 1u64..50, end in 0u64..2_000) {
            let now = next + ahead;
            let p = Passed::at(next, now, period, end);
            let released: Vec<u64> = (0..).map(|k| next + k * period).take_while(|&t| t <= now).collect();
            prop_assert_eq!(p.step, released.len() as u64);
            prop_assert_eq!(p.missed, released.iter().filter(|&&t| t < end).count() as u64);
            prop_assert!(next + p.step * period > now);
        }
    }
}
