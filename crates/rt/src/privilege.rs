//! What this process may do, found out before anything starts, and the plan that follows from it:
//! the real-time settings asked for, or the documented fallback with the reason and the fix.

use crate::policy::Policy;
use punctual_result::Fallback;

const CAP_IPC_LOCK: u32 = 14;
const CAP_SYS_NICE: u32 = 23;

/// The privileges relevant to real-time work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Privileges {
    pub euid: u32,
    pub cap_sys_nice: bool,
    pub cap_ipc_lock: bool,
    /// Soft RLIMIT_RTPRIO.
    pub rlimit_rtprio: u64,
    /// Soft RLIMIT_MEMLOCK in bytes (`None` = unlimited).
    pub rlimit_memlock: Option<u64>,
    /// Whether /dev/cpu_dma_latency can be opened for writing.
    pub dma_latency_writable: bool,
    /// The kernel refused a real-time policy although the privilege is there (tried on a thread):
    /// why (a cgroup without real-time budget, usually) and the fix.
    pub realtime_refused: Option<crate::rtgroup::Blocked>,
}

fn effective_caps() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("CapEff:"))
                .and_then(|l| u64::from_str_radix(l["CapEff:".len()..].trim(), 16).ok())
        })
        .unwrap_or(0)
}

/// Whether this process has capability number `cap` in its effective set (`CAP_SYS_RESOURCE` is
/// 24: without it a lowered hard limit cannot be raised again, as in many containers).
pub fn has_capability(cap: u32) -> bool {
    cap < 64 && effective_caps() & (1 << cap) != 0
}

fn soft_limit(resource: nix::sys::resource::Resource) -> Option<u64> {
    let (soft, _) = nix::sys::resource::getrlimit(resource).ok()?;
    (soft != nix::sys::resource::RLIM_INFINITY).then_some(soft)
}

impl Privileges {
    pub fn detect() -> Self {
        let caps = effective_caps();
        let mut p = Privileges {
            euid: nix::unistd::geteuid().as_raw(),
            cap_sys_nice: caps & (1 << CAP_SYS_NICE) != 0,
            cap_ipc_lock: caps & (1 << CAP_IPC_LOCK) != 0,
            rlimit_rtprio: soft_limit(nix::sys::resource::Resource::RLIMIT_RTPRIO)
                .unwrap_or(u64::MAX),
            rlimit_memlock: soft_limit(nix::sys::resource::Resource::RLIMIT_MEMLOCK),
            dma_latency_writable: crate::dma::writable(),
            realtime_refused: None,
        };
        // The privilege is not the whole story: a cgroup without real-time budget refuses root too.
        if p.realtime_allowed(1) {
            if let Err(e) = crate::rtgroup::probe() {
                if e.raw_os_error() == Some(libc::EPERM) {
                    p.realtime_refused = Some(crate::rtgroup::refusal());
                }
            }
        }
        p
    }

    /// Whether the privilege allows a real-time policy at `priority` (the kernel may still refuse:
    /// [`Privileges::realtime_refused`]).
    pub fn realtime_allowed(&self, priority: u32) -> bool {
        self.cap_sys_nice || self.rlimit_rtprio >= priority as u64
    }

    /// mlockall of a whole process needs the capability or an unlimited (or very large) limit.
    pub fn mlock_allowed(&self) -> bool {
        self.cap_ipc_lock || self.rlimit_memlock.is_none_or(|b| b >= 1 << 30)
    }
}

/// What the user asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtWant {
    pub policy: Policy,
    pub priority: u32,
    pub mlock: bool,
    /// `None` = leave /dev/cpu_dma_latency alone.
    pub dma_latency_us: Option<u32>,
}

/// What will actually be applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RtPlan {
    pub policy: Policy,
    pub priority: u32,
    /// Timer slack for the measuring threads (1 ns whenever they run in the normal class).
    pub timer_slack_ns: Option<u64>,
    pub mlock: bool,
    pub dma_latency_us: Option<u32>,
    pub fallbacks: Vec<Fallback>,
}

pub const POLICY_FIX: &str =
    "run as root, `setcap cap_sys_nice,cap_ipc_lock+ep` on the punctual binary, \
     or raise RLIMIT_RTPRIO (`ulimit -r 99`; `rtprio 99` in /etc/security/limits.conf)";
pub const MLOCK_FIX: &str =
    "run as root, grant cap_ipc_lock, or raise RLIMIT_MEMLOCK (`ulimit -l unlimited`)";
pub const DMA_FIX: &str =
    "run as root (the file is root-only), or pass --dma-latency off to stop asking";

/// The fallback for a real-time class that was refused: SCHED_OTHER with 1 ns timer slack.
pub fn policy_fallback(want_policy: Policy, want_priority: u32, why: String) -> Fallback {
    Fallback {
        setting: "scheduling policy".into(),
        wanted: format!("{want_policy} {want_priority}"),
        got: "other 0 with timer slack 1 ns".into(),
        why,
        fix: POLICY_FIX.into(),
    }
}

/// The fallback for a real-time class the kernel refused to a process with the privilege: the
/// cause found (the cgroup's budget, usually) and its own fix, not the privilege advice.
pub fn refused_fallback(
    want_policy: Policy,
    want_priority: u32,
    b: &crate::rtgroup::Blocked,
) -> Fallback {
    Fallback {
        fix: b.fix.clone(),
        ..policy_fallback(want_policy, want_priority, b.why.clone())
    }
}

/// Whether this process holds the privilege for a real-time policy at `priority` (CAP_SYS_NICE
/// or RLIMIT_RTPRIO), without trying it.
pub fn has_realtime_privilege(priority: u32) -> bool {
    effective_caps() & (1 << CAP_SYS_NICE) != 0
        || soft_limit(nix::sys::resource::Resource::RLIMIT_RTPRIO).unwrap_or(u64::MAX)
            >= priority as u64
}

/// The fallback for a real-time class refused while a thread was being readied: for lack of
/// privilege, the privilege advice; despite it, the cause found and its fix. Each said once.
pub fn runtime_fallback(want_policy: Policy, want_priority: u32, e: &crate::RtError) -> Fallback {
    if has_realtime_privilege(want_priority) {
        let mut b = crate::rtgroup::refusal();
        b.why = format!("{}; {}", e.without_fix(), b.why);
        refused_fallback(want_policy, want_priority, &b)
    } else {
        policy_fallback(want_policy, want_priority, e.without_fix())
    }
}

/// Decide, from the privileges, what to apply.
pub fn plan(privs: &Privileges, want: &RtWant) -> RtPlan {
    let mut fallbacks = Vec::new();
    let (mut policy, mut priority) = (want.policy, want.priority);
    if want.policy.is_realtime() && !privs.realtime_allowed(want.priority) {
        fallbacks.push(policy_fallback(
            want.policy,
            want.priority,
            format!(
                "needs CAP_SYS_NICE or RLIMIT_RTPRIO >= {}; have no CAP_SYS_NICE and RLIMIT_RTPRIO {}",
                want.priority, privs.rlimit_rtprio
            ),
        ));
        policy = Policy::Other;
        priority = 0;
    } else if let (true, Some(b)) = (want.policy.is_realtime(), &privs.realtime_refused) {
        fallbacks.push(refused_fallback(want.policy, want.priority, b));
        policy = Policy::Other;
        priority = 0;
    }
    let mut mlock = want.mlock;
    if want.mlock && !privs.mlock_allowed() {
        fallbacks.push(Fallback {
            setting: "memory locking".into(),
            wanted: "mlockall".into(),
            got: "unlocked memory (page faults may add latency)".into(),
            why: format!(
                "needs CAP_IPC_LOCK or an unlimited RLIMIT_MEMLOCK; limit is {} bytes",
                privs.rlimit_memlock.unwrap_or(0)
            ),
            fix: MLOCK_FIX.into(),
        });
        mlock = false;
    }
    let mut dma = want.dma_latency_us;
    if let Some(us) = dma {
        if !privs.dma_latency_writable {
            fallbacks.push(Fallback {
                setting: "cpu_dma_latency".into(),
                wanted: format!("{us} us"),
                got: "no request (deep idle states allowed)".into(),
                why: format!("{} is not writable by this user", crate::dma::PATH),
                fix: DMA_FIX.into(),
            });
            dma = None;
        }
    }
    RtPlan {
        policy,
        priority,
        timer_slack_ns: (!policy.is_realtime()).then_some(1),
        mlock,
        dma_latency_us: dma,
        fallbacks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unprivileged() -> Privileges {
        Privileges {
            euid: 1000,
            cap_sys_nice: false,
            cap_ipc_lock: false,
            rlimit_rtprio: 0,
            rlimit_memlock: Some(8 << 20),
            dma_latency_writable: false,
            realtime_refused: None,
        }
    }

    const WANT: RtWant = RtWant {
        policy: Policy::Fifo,
        priority: 99,
        mlock: true,
        dma_latency_us: Some(0),
    };

    #[test]
    fn privileged_gets_what_it_asked() {
        let p = Privileges {
            cap_sys_nice: true,
            cap_ipc_lock: true,
            dma_latency_writable: true,
            ..unprivileged()
        };
        let plan = plan(&p, &WANT);
        assert_eq!(
            (plan.policy, plan.priority, plan.mlock, plan.dma_latency_us),
            (Policy::Fifo, 99, true, Some(0))
        );
        assert!(plan.fallbacks.is_empty());
        assert_eq!(plan.timer_slack_ns, None);
    }

    #[test]
    fn unprivileged_falls_back_with_reasons_and_fixes() {
        let plan = plan(&unprivileged(), &WANT);
        assert_eq!((plan.policy, plan.priority), (Policy::Other, 0));
        assert_eq!(plan.timer_slack_ns, Some(1));
        assert!(!plan.mlock);
        assert_eq!(plan.dma_latency_us, None);
        assert_eq!(plan.fallbacks.len(), 3);
        let text = plan.fallbacks[0].to_string();
        assert!(
            text.contains("fifo 99") && text.contains("RLIMIT_RTPRIO") && text.contains("Fix:"),
            "{text}"
        );
    }

    #[test]
    fn rlimit_rtprio_is_enough_up_to_its_value() {
        let p = Privileges {
            rlimit_rtprio: 50,
            ..unprivileged()
        };
        assert!(p.realtime_allowed(50));
        assert!(!p.realtime_allowed(51));
    }

    #[test]
    fn asking_for_other_sets_slack_without_a_fallback() {
        let want = RtWant {
            policy: Policy::Other,
            priority: 0,
            mlock: false,
            dma_latency_us: None,
        };
        let plan = plan(&unprivileged(), &want);
        assert!(plan.fallbacks.is_empty());
        assert_eq!(plan.timer_slack_ns, Some(1));
    }

    /// Issue 31 item 5: root with every capability in a cgroup without real-time budget was told
    /// to run as root, setcap and raise RLIMIT_RTPRIO, twice in one message.
    #[test]
    fn a_refusal_despite_the_privilege_names_its_cause_and_fix_once() {
        let p = Privileges {
            euid: 0,
            cap_sys_nice: true,
            cap_ipc_lock: true,
            rlimit_rtprio: 0,
            rlimit_memlock: None,
            dma_latency_writable: true,
            realtime_refused: Some(crate::rtgroup::Blocked {
                why: "punctual runs in cgroup /sys/fs/cgroup/cpu/x, whose cpu.rt_runtime_us is 0"
                    .into(),
                fix: "pass --move-to-rt-cgroup".into(),
                target: None,
            }),
        };
        let plan = plan(&p, &WANT);
        assert_eq!((plan.policy, plan.priority), (Policy::Other, 0));
        assert_eq!(plan.fallbacks.len(), 1);
        let text = plan.fallbacks[0].to_string();
        assert!(text.contains("cpu.rt_runtime_us is 0"), "{text}");
        assert_eq!(text.matches("--move-to-rt-cgroup").count(), 1, "{text}");
        assert!(
            !text.contains("setcap") && !text.contains("ulimit"),
            "{text}"
        );
        assert!(plan.mlock, "memory locking is not refused by a cgroup");
    }
}
