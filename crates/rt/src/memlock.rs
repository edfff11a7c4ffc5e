//! `mlockall(MCL_CURRENT | MCL_FUTURE)`: no page fault may stretch a wake-up.

use crate::RtError;
use punctual_result::Fallback;
use std::io;

/// Locks all current and future pages; unlocks on drop.
pub struct MlockGuard(());

impl MlockGuard {
    pub fn lock_all() -> Result<Self, RtError> {
        // SAFETY: plain syscall.
        if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
            let e = io::Error::last_os_error();
            let fix =
                "run as root, grant cap_ipc_lock, or raise RLIMIT_MEMLOCK (`ulimit -l unlimited`)";
            return Err(match e.raw_os_error() {
                Some(libc::ENOMEM) => RtError::Refused {
                    what: "mlockall".into(),
                    source: e,
                    fix: fix.into(),
                },
                _ => RtError::from_os("mlockall", e, fix),
            });
        }
        Ok(MlockGuard(()))
    }
}

impl Drop for MlockGuard {
    fn drop(&mut self) {
        // SAFETY: plain syscall.
        unsafe { libc::munlockall() };
    }
}

/// Lock all pages, or say why not: the guard, or the fallback to record (the caller runs on with
/// unlocked memory).
pub fn lock_all_or_fallback() -> Result<MlockGuard, Fallback> {
    MlockGuard::lock_all().map_err(|e| fallback(&e))
}

/// What running without `mlockall` means, for a result document.
pub fn fallback(e: &RtError) -> Fallback {
    Fallback {
        setting: "memory locking".into(),
        wanted: "mlockall".into(),
        got: "unlocked memory".into(),
        why: e.to_string(),
        fix: crate::privilege::MLOCK_FIX.into(),
    }
}

/// Bytes of this process currently locked (VmLck in /proc/self/status).
pub fn locked_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmLck:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_lock_is_a_fallback_with_its_cause_and_fix() {
        let e = RtError::Refused {
            what: "mlockall".into(),
            source: io::Error::from_raw_os_error(libc::ENOMEM),
            fix: crate::privilege::MLOCK_FIX.into(),
        };
        let f = fallback(&e);
        assert_eq!(
            (f.setting.as_str(), f.wanted.as_str()),
            ("memory locking", "mlockall")
        );
        assert_eq!(f.why, e.to_string());
        assert!(f.fix.contains("RLIMIT_MEMLOCK"), "{}", f.fix);
    }
}
