//! One call to ready a measuring or dispatching thread: pin, set the class, set timer slack.

use crate::affinity::AffinityGuard;
use crate::privilege::runtime_fallback;
use crate::sched::{Policy, SchedGuard, SchedParams};
use crate::slack::TimerSlackGuard;
use crate::RtError;
use punctual_result::Fallback;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadRequest {
    pub cpu: Option<usize>,
    pub policy: Policy,
    pub priority: u32,
    pub timer_slack_ns: Option<u64>,
    /// When the kernel refuses the real-time class despite the privilege check (a cgroup without
    /// real-time runtime, for example), run in the normal class with 1 ns slack and report it.
    pub fall_back_on_refusal: bool,
}

/// The guards of a readied thread (dropping them restores the thread) and any fallback taken.
pub struct ThreadGuards {
    _slack: Option<TimerSlackGuard>,
    _sched: Option<SchedGuard>,
    _affinity: Option<AffinityGuard>,
    /// A real-time thread pinned to a CPU is woken there: that CPU is polled when it would halt
    /// ([`crate::idle_poll::Claim`]).
    _poll: Option<crate::idle_poll::Claim>,
    pub policy: Policy,
    pub priority: u32,
    pub fallback: Option<Fallback>,
}

impl ThreadGuards {
    /// The class and priority the thread got (after any fallback).
    pub fn sched(&self) -> SchedParams {
        SchedParams {
            policy: self.policy,
            priority: self.priority,
        }
    }
}

pub fn setup_current_thread(req: &ThreadRequest) -> Result<ThreadGuards, RtError> {
    let affinity = req.cpu.map(|c| AffinityGuard::pin(&[c])).transpose()?;
    let mut fallback = None;
    let (mut policy, mut priority) = (req.policy, req.priority);
    let sched = match SchedGuard::set(SchedParams { policy, priority }) {
        Ok(g) => {
            if let (Some(c), true) = (req.cpu, policy.is_realtime()) {
                crate::signals::keep_signal_thread_off(&[c]);
            }
            Some(g)
        }
        Err(e) if e.is_refusal() && req.fall_back_on_refusal && policy.is_realtime() => {
            fallback = Some(runtime_fallback(policy, priority, &e));
            policy = Policy::Other;
            priority = 0;
            None
        }
        Err(e) => return Err(e),
    };
    let slack_ns = if policy.is_realtime() {
        req.timer_slack_ns
    } else {
        Some(req.timer_slack_ns.unwrap_or(1))
    };
    let slack = slack_ns.map(TimerSlackGuard::set).transpose()?;
    let poll = req
        .cpu
        .filter(|_| policy.is_realtime())
        .map(|c| crate::idle_poll::Claim::poll(&[c]));
    Ok(ThreadGuards {
        _slack: slack,
        _sched: sched,
        _affinity: affinity,
        _poll: poll,
        policy,
        priority,
        fallback,
    })
}
