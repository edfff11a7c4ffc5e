//! Timer slack (PR_SET_TIMERSLACK): how much the kernel may delay a normal-class thread's timer to
//! batch wake-ups. Real-time threads ignore it; for SCHED_OTHER fallbacks punctual sets 1 ns.

use crate::RtError;
use std::io;

pub fn current() -> u64 {
    // SAFETY: PR_GET_TIMERSLACK takes no pointer arguments.
    unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) as u64 }
}

/// Sets the calling thread's timer slack; restores the previous value on drop.
pub struct TimerSlackGuard {
    previous: u64,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl TimerSlackGuard {
    /// `ns` must be at least 1 (0 would mean "the default").
    pub fn set(ns: u64) -> Result<Self, RtError> {
        let previous = current();
        // SAFETY: plain prctl with an integer argument.
        if unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns.max(1) as libc::c_ulong, 0, 0, 0) } != 0
        {
            return Err(RtError::io(
                "prctl(PR_SET_TIMERSLACK)",
                io::Error::last_os_error(),
            ));
        }
        Ok(TimerSlackGuard {
            previous,
            _not_send: std::marker::PhantomData,
        })
    }
}

impl Drop for TimerSlackGuard {
    fn drop(&mut self) {
        // SAFETY: as above.
        unsafe {
            libc::prctl(
                libc::PR_SET_TIMERSLACK,
                self.previous as libc::c_ulong,
                0,
                0,
                0,
            )
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_and_restores() {
        std::thread::spawn(|| {
            let before = current();
            let g = TimerSlackGuard::set(1).unwrap();
            assert_eq!(current(), 1);
            drop(g);
            assert_eq!(current(), before);
        })
        .join()
        .unwrap();
    }
}
