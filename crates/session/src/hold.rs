//! The real-time settings a session holds while a measurement runs: the plan decided from the
//! privileges before anything changes (with the documented fallbacks), locked memory and the
//! `/dev/cpu_dma_latency` request, each released when the session ends.

use crate::Env;
use punctual_measure::take_guards;
use punctual_result::ResultDoc;
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
        let got = take_guards(&*env.system, plan.mlock, plan.dma_latency_us);
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
