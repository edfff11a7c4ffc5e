//! Scheduling policy and priority of the calling thread.

pub use crate::policy::{Policy, SchedParams};
use crate::RtError;
use std::io;

/// A real-time priority as a command line gives it: 1 to 99 (0 only means "none", for `--policy
/// other`). Said in words (issue 31: clap's range said "120 is not in 0..=99").
pub fn parse_priority(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(p) if p <= 99 => Ok(p),
        Ok(_) | Err(_) => Err(format!(
            "'{s}' is not a priority: give 1 (lowest) to 99 (highest)"
        )),
    }
}

/// Read the calling thread's policy and priority.
pub fn current() -> Result<SchedParams, RtError> {
    // SAFETY: pid 0 means the calling thread.
    let raw = unsafe { libc::sched_getscheduler(0) };
    if raw < 0 {
        return Err(RtError::io(
            "sched_getscheduler",
            io::Error::last_os_error(),
        ));
    }
    let mut p = libc::sched_param { sched_priority: 0 };
    // SAFETY: valid out-pointer.
    if unsafe { libc::sched_getparam(0, &mut p) } != 0 {
        return Err(RtError::io("sched_getparam", io::Error::last_os_error()));
    }
    let policy = Policy::from_raw(raw).unwrap_or(Policy::Other);
    Ok(SchedParams {
        policy,
        priority: p.sched_priority as u32,
    })
}

const FIX: &str = "run as root, grant the capability (setcap cap_sys_nice+ep on the binary), \
     or raise RLIMIT_RTPRIO (`ulimit -r 99`, or `rtprio 99` in /etc/security/limits.conf)";

/// Set the calling thread's policy and priority. Real-time threads get SCHED_RESET_ON_FORK, so
/// children they fork (exec actions, loads) start in the normal class.
pub fn set_current(params: SchedParams) -> Result<(), RtError> {
    params.validate()?;
    let flags = if params.policy.is_realtime() {
        libc::SCHED_RESET_ON_FORK
    } else {
        0
    };
    let p = libc::sched_param {
        sched_priority: params.priority as libc::c_int,
    };
    // SAFETY: pid 0 is the calling thread; p is valid.
    if unsafe { libc::sched_setscheduler(0, params.policy.raw() | flags, &p) } != 0 {
        let e = io::Error::last_os_error();
        // With the privilege at hand, the refusal has another cause (a cgroup's budget): its fix.
        let fix = if params.policy.is_realtime()
            && e.raw_os_error() == Some(libc::EPERM)
            && crate::privilege::has_realtime_privilege(params.priority)
        {
            crate::rtgroup::refusal().fix
        } else {
            FIX.to_string()
        };
        return Err(RtError::from_os(
            format!("sched_setscheduler({} {})", params.policy, params.priority),
            e,
            &fix,
        ));
    }
    Ok(())
}

/// Holds a thread's scheduling class; puts the previous one back on drop (on the same thread).
pub struct SchedGuard {
    previous: SchedParams,
    // Not Send: the guard must drop on the thread it changed.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl SchedGuard {
    pub fn set(params: SchedParams) -> Result<Self, RtError> {
        let previous = current()?;
        set_current(params)?;
        Ok(SchedGuard {
            previous,
            _not_send: std::marker::PhantomData,
        })
    }
}

impl Drop for SchedGuard {
    fn drop(&mut self) {
        let _ = set_current(self.previous);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_validate() {
        assert_eq!("fifo".parse::<Policy>().unwrap(), Policy::Fifo);
        assert!("deadline"
            .parse::<Policy>()
            .unwrap_err()
            .contains("fifo, rr, other"));
        assert!(SchedParams {
            policy: Policy::Fifo,
            priority: 0
        }
        .validate()
        .is_err());
        assert!(SchedParams {
            policy: Policy::Fifo,
            priority: 100
        }
        .validate()
        .is_err());
        assert!(SchedParams {
            policy: Policy::Other,
            priority: 5
        }
        .validate()
        .is_err());
        assert!(SchedParams {
            policy: Policy::Rr,
            priority: 1
        }
        .validate()
        .is_ok());
    }

    #[test]
    fn guard_restores_previous_class() {
        std::thread::spawn(|| {
            let before = current().unwrap();
            match SchedGuard::set(SchedParams {
                policy: Policy::Fifo,
                priority: 10,
            }) {
                Ok(g) => {
                    assert_eq!(
                        current().unwrap(),
                        SchedParams {
                            policy: Policy::Fifo,
                            priority: 10
                        }
                    );
                    drop(g);
                    assert_eq!(current().unwrap(), before);
                }
                Err(e) if e.is_refusal() => {
                    punctual_testkit::skip("guard_restores_previous_class", &e.to_string())
                }
                Err(e) => panic!("{e}"),
            }
        })
        .join()
        .unwrap();
    }
}
