//! The real-time settings a session holds while a measurement runs: the plan decided from the
//! privileges before anything changes (with the documented fallbacks), locked memory and the
//! `/dev/cpu_dma_latency` request, each released when the session ends.

use crate::Env;
use punctual_result::{Fallback, ResultDoc};
use punctual_rt::{Policy, RtPlan, RtWant};
use std::any::Any;

pub struct Held {
    pub plan: RtPlan,
    real_time: bool,
    _guards: Vec<Box<dyn Any>>,
}

impl Held {
    /// Nothing real-time: pure computation in the normal class, nothing locked or requested.
    pub fn none() -> Held {
        Held {
            plan: RtPlan {
                policy: Policy::Other,
                priority: 0,
                timer_slack_ns: None,
                mlock: false,
                dma_latency_us: None,
                fallbacks: Vec::new(),
            },
            real_time: false,
            _guards: Vec::new(),
        }
    }

    /// Decide from the privileges what can be had, take it, and say what fell back and why.
    pub fn take(env: &Env, want: &RtWant) -> Held {
        let mut plan = punctual_rt::privilege::plan(&env.system.privileges(), want);
        let got = take_guards(env, plan.mlock, plan.dma_latency_us);
        plan.mlock = got.mlock;
        plan.dma_latency_us = got.dma_latency_us;
        plan.fallbacks.extend(got.fallbacks);
        for f in &plan.fallbacks {
            env.note(&format!("fallback: {f}"));
        }
        Held {
            plan,
            real_time: true,
            _guards: got.guards,
        }
    }

    /// Whether this session measures the machine's timeliness (and so its steal time).
    pub fn is_real_time(&self) -> bool {
        self.real_time
    }

    /// The held settings in a document (nothing for pure computation).
    pub fn describe(&self, doc: &mut ResultDoc) {
        if !self.real_time {
            return;
        }
        let s = &mut doc.settings;
        s.policy = Some(self.plan.policy.name().into());
        s.priority = Some(self.plan.priority);
        s.mlock = Some(self.plan.mlock);
        s.dma_latency_us = self.plan.dma_latency_us;
        s.fallbacks = self.plan.fallbacks.clone();
        if let Some(slack) = self.plan.timer_slack_ns {
            s.extra.insert("timer_slack_ns".into(), slack.into());
        }
    }
}

/// Locked memory and a cpu_dma_latency request, as far as they could be had.
pub struct Guards {
    /// Dropping them releases what was taken.
    pub guards: Vec<Box<dyn Any>>,
    pub mlock: bool,
    pub dma_latency_us: Option<u32>,
    /// What was asked for and could not be had, with why and the fix.
    pub fallbacks: Vec<Fallback>,
}

/// Lock memory (`mlock`) and hold `/dev/cpu_dma_latency` at `dma_latency_us`, saying what could not
/// be had. The session holds them for a whole measurement ([`Held::take`]); a measurement that
/// compares configurations holds them for some of its steps only.
pub fn take_guards(env: &Env, mlock: bool, dma_latency_us: Option<u32>) -> Guards {
    let mut got = Guards {
        guards: Vec::new(),
        mlock: false,
        dma_latency_us: None,
        fallbacks: Vec::new(),
    };
    if mlock {
        match env.system.lock_memory() {
            Ok(g) => {
                got.guards.push(g);
                got.mlock = true;
            }
            Err(why) => got.fallbacks.push(Fallback {
                setting: "memory locking".into(),
                wanted: "mlockall".into(),
                got: "unlocked memory".into(),
                why,
                fix: punctual_rt::privilege::MLOCK_FIX.into(),
            }),
        }
    }
    if let Some(us) = dma_latency_us {
        match env.system.hold_dma_latency(us) {
            Ok(g) => {
                got.guards.push(g);
                got.dma_latency_us = Some(us);
            }
            Err(why) => got.fallbacks.push(Fallback {
                setting: "cpu_dma_latency".into(),
                wanted: format!("{us} us"),
                got: "no request".into(),
                why,
                fix: punctual_rt::privilege::DMA_FIX.into(),
            }),
        }
    }
    got
}
