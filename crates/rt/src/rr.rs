//! The SCHED_RR timeslice (`/proc/sys/kernel/sched_rr_timeslice_ms`): the modern quantum knob
//! (Etsion's quantum). Set only through the journal, so it is restored on every exit path.

use crate::journal::ChangeGuard;
use crate::RtError;

pub const RR_TIMESLICE: &str = "/proc/sys/kernel/sched_rr_timeslice_ms";

/// The RR timeslice setting, in ms.
pub fn read_ms() -> Option<u64> {
    std::fs::read_to_string(RR_TIMESLICE)
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Set the RR timeslice through the journal (undone when the guard drops, by a second Ctrl-C, or
/// by the next run if this one dies). A refusal is a system error (exit 3) with the fix.
pub fn set_ms(ms: u64) -> Result<ChangeGuard, RtError> {
    if ms == 0 {
        return Err(RtError::Invalid(
            "the RR timeslice must be at least 1ms (0 means the kernel default)".into(),
        ));
    }
    crate::journal::global()
        .write_file(RR_TIMESLICE, &ms.to_string())
        .map_err(|source| match source.raw_os_error() {
            Some(libc::EINVAL) => RtError::io(
                format!("the kernel refused that RR timeslice ({ms} ms; {RR_TIMESLICE} takes 1 to 2147483647 ms)"),
                source,
            ),
            Some(libc::ENOENT) => RtError::io(
                format!("this kernel has no {RR_TIMESLICE}; leave the RR timeslice alone"),
                source,
            ),
            _ => RtError::Refused {
                what: format!("setting the RR timeslice ({RR_TIMESLICE}) to {ms} ms"),
                source,
                fix: "run as root, or leave the RR timeslice alone".into(),
            },
        })
}

/// The timeslice a SCHED_RR task actually gets (the setting rounded up to whole ticks), measured
/// with `sched_rr_get_interval` on a helper thread; `None` when real-time scheduling is not allowed.
pub fn effective_ns() -> Option<u64> {
    std::thread::spawn(|| {
        let _g = crate::SchedGuard::set(crate::SchedParams {
            policy: crate::Policy::Rr,
            priority: 1,
        })
        .ok()?;
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid out-pointer; 0 = this thread.
        if unsafe { libc::sched_rr_get_interval(0, &mut ts) } != 0 {
            return None;
        }
        Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    })
    .join()
    .ok()
    .flatten()
}
