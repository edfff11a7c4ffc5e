//! The futex calls punctual makes: wait while a word holds a value, wake its waiters.
//!
//! `Shared` words live in memory other processes map (no `FUTEX_PRIVATE_FLAG`); `Private` ones are
//! only ever waited on by this process's threads, which lets the kernel skip the mapping lookup.

use std::sync::atomic::AtomicU32;

/// Who may wait on a word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Only this process's threads.
    Private,
    /// Any process that maps the word.
    Shared,
}

impl Scope {
    fn op(self, op: libc::c_int) -> libc::c_int {
        match self {
            Scope::Private => op | libc::FUTEX_PRIVATE_FLAG,
            Scope::Shared => op,
        }
    }
}

/// Sleep while `*word == expected`, at most `timeout_ns` (`None`: until woken). Returns at once
/// when the word holds something else; a signal or a spurious wake-up returns early too, so
/// callers check the word again. `true`: the kernel put the thread to sleep and a wake-up ended
/// it (not a changed word, the timeout or a signal).
pub fn wait(word: &AtomicU32, expected: u32, timeout_ns: Option<u64>, scope: Scope) -> bool {
    let ts = timeout_ns.map(punctual_time::clock::timespec);
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: FUTEX_WAIT on a live, aligned u32; `ts_ptr` is null or points at a live timespec.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            scope.op(libc::FUTEX_WAIT),
            expected,
            ts_ptr,
            0usize,
            0u32,
        )
    };
    r == 0
}

/// Wake at most `n` of the threads waiting on `word`; returns how many were woken.
pub fn wake(word: &AtomicU32, n: u32, scope: Scope) -> usize {
    let n = n.min(i32::MAX as u32);
    // SAFETY: FUTEX_WAKE on a live, aligned u32.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            scope.op(libc::FUTEX_WAKE),
            n,
            0usize,
            0usize,
            0u32,
        )
    };
    r.max(0) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    #[test]
    fn a_wait_on_another_value_returns_at_once_and_nobody_is_woken() {
        let w = AtomicU32::new(1);
        // Blocks for ever if the value check were wrong; it did not sleep.
        assert!(!wait(&w, 0, None, Scope::Private));
        assert_eq!(wake(&w, 1, Scope::Private), 0);
    }

    #[test]
    fn a_timed_wait_nobody_wakes_lasts_its_timeout() {
        let w = AtomicU32::new(0);
        let t0 = std::time::Instant::now();
        // Its timeout ended it, not a wake-up.
        assert!(!wait(&w, 0, Some(2_000_000), Scope::Shared));
        assert!(
            t0.elapsed() >= std::time::Duration::from_millis(2),
            "{:?}",
            t0.elapsed()
        );
    }

    /// The wait says a wake-up ended its sleep (what a breather counts as a block).
    #[test]
    fn a_wait_a_wake_ends_says_so() {
        let w = Arc::new(AtomicU32::new(0));
        let t = {
            let w = w.clone();
            std::thread::spawn(move || wait(&w, 0, None, Scope::Private))
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        // The word stays 0: only a wake that found the waiter asleep ends the wait.
        while wake(&w, 1, Scope::Private) == 0 {
            assert!(std::time::Instant::now() < deadline, "never asleep");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(t.join().unwrap());
    }

    #[test]
    fn a_waiter_is_counted_by_the_wake_that_ends_its_wait() {
        let w = Arc::new(AtomicU32::new(0));
        let t = {
            let w = w.clone();
            std::thread::spawn(move || {
                while w.load(Ordering::Acquire) == 0 {
                    wait(&w, 0, None, Scope::Private);
                }
            })
        };
        // The waiter has almost surely gone to sleep by then; if not, it sees the 1 and leaves.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        w.store(1, Ordering::Release);
        let mut woken = 0;
        while woken == 0 && !t.is_finished() {
            assert!(
                std::time::Instant::now() < deadline,
                "no waiter was ever woken"
            );
            woken = wake(&w, 1, Scope::Private);
        }
        t.join().unwrap();
    }
}
