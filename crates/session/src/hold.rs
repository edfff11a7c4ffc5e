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
    /// The CPUs whose idle halts although `cpu_dma_latency` 0 is held (`settings.idle_halts_cpus`).
    idle_halts: Vec<usize>,
    /// The CPUs an idle poller keeps busy (`settings.idle_poll_cpus`).
    idle_polled: Vec<usize>,
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
            idle_halts: Vec::new(),
            idle_polled: Vec::new(),
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
        let idle_halts = match plan.dma_latency_us {
            Some(0) => env.system.idle_halts(),
            _ => Vec::new(),
        };
        let mut guards = got.guards;
        let mut idle_polled = Vec::new();
        if !idle_halts.is_empty() {
            let cpus = punctual_rt::affinity::format_cpu_list(&idle_halts);
            match env.system.poll_when_idle(&idle_halts) {
                Ok(g) => {
                    guards.push(g);
                    idle_polled = idle_halts.clone();
                    env.note(&format!(
                        "CPUs {cpus} have no polling idle state (no cpuidle driver), so \
                         cpu_dma_latency 0 cannot keep them from halting: while punctual's \
                         real-time threads wait there, an idle-class thread of its own \
                         ({}<cpu>) keeps the CPU busy",
                        punctual_rt::idle_poll::THREAD_PREFIX
                    ));
                }
                Err(e) => env.note(&format!(
                    "CPUs {cpus} have no polling idle state (no cpuidle driver): cpu_dma_latency 0 \
                     cannot keep them from halting when idle, so a wake-up there waits for the \
                     CPU to leave its halt (under a hypervisor, for the host); keeping them busy \
                     failed: {e}"
                )),
            }
        }
        Held {
            plan,
            real_time: true,
            idle_halts,
            idle_polled,
            _guards: guards,
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
        if !self.idle_halts.is_empty() {
            s.extra
                .insert("idle_halts_cpus".into(), self.idle_halts.clone().into());
        }
        if !self.idle_polled.is_empty() {
            s.extra
                .insert("idle_poll_cpus".into(), self.idle_polled.clone().into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use punctual_measure::{FakeSystem, RunningLoads, System};

    /// [`FakeSystem`] on a machine whose CPUs 1 and 3 halt when idle; `refuse`: starting pollers
    /// fails.
    #[derive(Clone, Copy)]
    struct Halting {
        refuse: bool,
    }

    impl System for Halting {
        fn privileges(&self) -> punctual_rt::Privileges {
            FakeSystem.privileges()
        }
        fn lock_memory(&self) -> Result<Box<dyn Any>, String> {
            FakeSystem.lock_memory()
        }
        fn hold_dma_latency(&self, us: u32) -> Result<Box<dyn Any>, String> {
            FakeSystem.hold_dma_latency(us)
        }
        fn idle_halts(&self) -> Vec<usize> {
            vec![1, 3]
        }
        fn poll_when_idle(&self, cpus: &[usize]) -> Result<Box<dyn Any>, String> {
            assert_eq!(cpus, [1, 3]);
            if self.refuse {
                Err("refused here".into())
            } else {
                Ok(Box::new(()))
            }
        }
        fn steal(&self) -> Option<punctual_rt::host::StealMeter> {
            None
        }
        fn start_loads(
            &self,
            spec: &punctual_load::LoadSpec,
            exe: &std::path::Path,
            opts: &punctual_load::StartOptions,
        ) -> Result<Box<dyn RunningLoads>, punctual_result::Failure> {
            FakeSystem.start_loads(spec, exe, opts)
        }
    }

    fn want(dma_latency_us: Option<u32>) -> RtWant {
        RtWant {
            policy: Policy::Fifo,
            priority: 99,
            mlock: true,
            dma_latency_us,
        }
    }

    fn described(env: &Env, held: &Held) -> ResultDoc {
        let mut doc = ResultDoc::new(
            env.command.clone(),
            fake_doc_host(),
            "2026-01-01T00:00:00Z".into(),
        );
        held.describe(&mut doc);
        doc
    }

    /// Holding `cpu_dma_latency` 0 on CPUs that halt when idle keeps them busy with pollers, says
    /// so once, names them, and records them in the document; when the pollers cannot start it
    /// says why and records only the halting CPUs; a request other than 0, or none, does nothing.
    #[test]
    fn cpus_that_halt_whatever_the_request_are_polled_and_named() {
        for refuse in [false, true] {
            let mut env = Env::fake(&["punctual", "latency"]);
            env.system = Box::new(Halting { refuse });
            let held = Held::take(&env, &want(Some(0)));
            let (_, err) = env.captured();
            assert_eq!(err.matches("no polling idle state").count(), 1, "{err}");
            assert!(err.contains("CPUs 1,3 "), "{err}");
            assert_eq!(
                err.contains("an idle-class thread of its own"),
                !refuse,
                "{err}"
            );
            assert_eq!(err.contains("failed: refused here"), refuse, "{err}");
            let doc = described(&env, &held);
            let x = &doc.settings.extra;
            assert_eq!(x.get("idle_halts_cpus"), Some(&serde_json::json!([1, 3])));
            let polled = (!refuse).then(|| serde_json::json!([1, 3]));
            assert_eq!(x.get("idle_poll_cpus"), polled.as_ref(), "refuse {refuse}");
        }
        for other in [Some(50), None] {
            let mut env = Env::fake(&["punctual", "latency"]);
            env.system = Box::new(Halting { refuse: false });
            let held = Held::take(&env, &want(other));
            assert!(!env.captured().1.contains("no polling idle state"));
            let doc = described(&env, &held);
            assert!(doc.settings.extra.get("idle_halts_cpus").is_none());
            assert!(doc.settings.extra.get("idle_poll_cpus").is_none());
        }
    }

    fn fake_doc_host() -> punctual_result::HostFacts {
        punctual_measure::fake_host()
    }
}
