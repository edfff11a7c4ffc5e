//! A deterministic simulator of a CPU scheduler driven by a clock interrupt: the knob Etsion et al.
//! turned (HZ, compiled into the kernel) and the alternative KURT's UTIME built (one-shot timers),
//! explored without rebuilding a kernel.
//!
//! - [`config`]: one run (HZ, quantum, policy, timer mechanism, costs, tasks), validated up front.
//! - [`behaviour`]: what tasks do (`blk`, `pctK`, `cont`, `cpu`, `periodic`, typist, game, the
//!   Xine pipeline, the frame player) and the command-line workload labels.
//! - [`engine`]: the event loop. [`simulate`] runs one configuration; [`sweep`] several.
//! - [`stats`]: streaming per-task and per-CPU accounting (memory independent of duration).
//! - [`scenario`]: TOML scenario files, with line and column in every error.
//! - [`frames`]: Etsion Section 5's frame-skipping study over start shifts.
//! - [`report`]: result-document series and tables; [`measure`]: `punctual simulate` in the lifecycle;
//!   [`request`]: what the command line asks for, checked and assembled into those measurements.
//!
//! The library never prints; the `punctual simulate` command renders what it returns.

pub mod behaviour;
pub mod config;
pub mod engine;
pub mod frames;
pub mod measure;
pub mod report;
pub mod request;
pub mod rng;
pub mod scenario;
pub mod stats;
pub mod task;
pub mod units;
pub mod workload;

pub use behaviour::{Behaviour, Poll};
pub use config::{
    Cache, Class, Costs, Mechanism, Ns, Policy, Quantum, RoundTrips, RunConfig, TaskSpec,
};
pub use engine::{Control, RunOutcome};
pub use stats::{CpuAccount, TaskStats};
pub use workload::parse_workload;

use punctual_stats::Recorder;

/// Why a simulation cannot run. Every variant is bad input (exit 2).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    /// A setting is out of range; `field` names the flag or scenario key that fixes it.
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    /// A scenario file is malformed or names something unknown.
    #[error("{file}:{line}:{column}: {message}")]
    Scenario {
        file: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{0}")]
    Io(String),
}

impl SimError {
    pub fn invalid(field: &str, message: impl Into<String>) -> SimError {
        SimError::Invalid {
            field: field.to_string(),
            message: message.into(),
        }
    }
}

impl From<SimError> for punctual_result::Failure {
    fn from(e: SimError) -> Self {
        punctual_result::Failure::usage(e.to_string())
    }
}

/// One task's results, with its identity.
#[derive(Debug)]
pub struct TaskResult {
    pub name: String,
    pub group: String,
    pub behaviour: &'static str,
    pub stats: TaskStats,
}

impl TaskResult {
    /// Billed time (ticks times the tick length) over exact consumption (Etsion Table 3).
    pub fn billing_ratio(&self, tick_ns: Ns) -> Option<f64> {
        (self.stats.consumed_ns > 0).then(|| {
            self.stats.billed_ticks as f64 * tick_ns as f64 / self.stats.consumed_ns as f64
        })
    }
    /// Share of quanta that no tick found running.
    pub fn missed_fraction(&self) -> Option<f64> {
        (self.stats.quanta > 0).then(|| self.stats.missed_quanta as f64 / self.stats.quanta as f64)
    }
    pub fn quanta_per_s(&self, simulated_ns: Ns) -> f64 {
        if simulated_ns == 0 {
            0.0
        } else {
            self.stats.quanta as f64 * 1e9 / simulated_ns as f64
        }
    }
}

/// One simulated run.
#[derive(Debug)]
pub struct RunResult {
    pub config: RunConfig,
    pub tasks: Vec<TaskResult>,
    pub cpus: Vec<CpuAccount>,
    pub events: u64,
    pub simulated_ns: Ns,
    pub interrupted: bool,
    pub recalculations: u64,
}

impl RunResult {
    pub fn tick_ns(&self) -> Ns {
        self.config.tick_ns()
    }
    pub fn overhead_ns(&self) -> Ns {
        self.cpus.iter().map(|c| c.overhead_ns).sum()
    }
    pub fn busy_ns(&self) -> Ns {
        self.cpus.iter().map(|c| c.work_ns + c.overhead_ns).sum()
    }

    /// Tasks of one group, pooled: the group's series and table rows.
    pub fn groups(&self) -> Vec<(String, Vec<&TaskResult>)> {
        let mut out: Vec<(String, Vec<&TaskResult>)> = Vec::new();
        for t in &self.tasks {
            match out.iter_mut().find(|(g, _)| *g == t.group) {
                Some((_, v)) => v.push(t),
                None => out.push((t.group.clone(), vec![t])),
            }
        }
        out
    }
}

/// Merge optional recorders of several tasks.
pub fn pooled(recs: impl IntoIterator<Item = Option<Box<Recorder>>>) -> Option<Recorder> {
    let mut out: Option<Recorder> = None;
    for r in recs.into_iter().flatten() {
        match &mut out {
            None => out = Some(*r),
            Some(o) => o.merge(&r).expect("recorders of one shape merge"),
        }
    }
    out
}

/// Run one configuration. Validates first: nothing runs on bad input.
pub fn simulate(cfg: &RunConfig, control: &Control) -> Result<RunResult, SimError> {
    cfg.validate()?;
    let out = engine::Engine::new(cfg).run(control);
    Ok(RunResult {
        tasks: cfg
            .tasks
            .iter()
            .zip(out.tasks)
            .map(|(spec, stats)| TaskResult {
                name: spec.name.clone(),
                group: spec.group.clone(),
                behaviour: spec.behaviour.kind(),
                stats,
            })
            .collect(),
        config: cfg.clone(),
        cpus: out.cpus,
        events: out.events,
        simulated_ns: out.simulated_ns,
        interrupted: out.interrupted,
        recalculations: out.recalculations,
    })
}

/// Run several configurations (a sweep), `jobs` at a time; results come back in input order, so
/// the output does not depend on `jobs`. Every configuration is validated before any runs.
pub fn sweep(
    cfgs: &[RunConfig],
    jobs: usize,
    control: &Control,
) -> Result<Vec<RunResult>, SimError> {
    for c in cfgs {
        c.validate()?;
    }
    let jobs = jobs.clamp(1, cfgs.len().max(1));
    if jobs == 1 {
        let mut out = Vec::new();
        for c in cfgs {
            let r = simulate(c, control)?;
            let stop = r.interrupted;
            out.push(r);
            if stop {
                break;
            }
        }
        return Ok(out);
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: Vec<std::sync::Mutex<Option<RunResult>>> =
        cfgs.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= cfgs.len() {
                    break;
                }
                let ctl = Control {
                    stop: control.stop,
                    progress: None,
                };
                let r = simulate(&cfgs[i], &ctl).expect("validated above");
                *slots[i].lock().expect("no panics while holding") = Some(r);
            });
        }
    });
    Ok(slots
        .into_iter()
        .filter_map(|m| m.into_inner().expect("no panics while holding"))
        .collect())
}
