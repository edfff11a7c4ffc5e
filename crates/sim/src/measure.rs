//! `punctual simulate` as measurements of the lifecycle (`punctual_session::drive`): pure
//! computation (nothing real-time held, no steal time), whose documents carry simulated
//! timestamps so the same seed gives the same bytes.

use crate::frames::{FramesConfig, FramesResult};
use crate::{report, Control, Mechanism, Poll, RunConfig, RunResult};
use punctual_measure::{Ctx, Figure, LiveSpec, Measurement, Report};
use punctual_result::{Failure, ResultDoc};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Timestamps of a simulation: the Unix epoch (or `SOURCE_DATE_EPOCH`) plus simulated time.
fn simulated_clock(doc: &mut ResultDoc, simulated_ns: u64) {
    let base: i64 = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    let fmt = |ns: i128| punctual_result::rfc3339_at(base as i128 * 1_000_000_000 + ns);
    doc.started_at = fmt(0);
    doc.ended_at = fmt(simulated_ns as i128);
    doc.settings
        .extra
        .insert("clock".into(), "simulated".into());
}

/// `--fail-above` applies to the simulated alarm latency.
fn worst_alarm(doc: &ResultDoc) -> Option<(u64, &'static str)> {
    doc.series
        .iter()
        .filter(|s| s.kind == report::kind::ALARM_LATENCY)
        .map(|s| s.summary.max)
        .max()
        .map(|m| (m, "simulated alarm latency"))
}

/// A workload (or scenario) at each HZ and quantum of a sweep.
pub struct Sweep {
    pub cfgs: Vec<RunConfig>,
    /// Runs simulated at once; the output does not depend on it.
    pub jobs: usize,
    /// The workload or scenario, as given, for the document.
    pub workload: Option<String>,
    at: Arc<AtomicU64>,
}

impl Sweep {
    /// Every configuration is validated now, before anything runs.
    pub fn new(
        cfgs: Vec<RunConfig>,
        jobs: usize,
        workload: Option<String>,
    ) -> Result<Sweep, Failure> {
        for c in &cfgs {
            c.validate()?;
        }
        Ok(Sweep {
            cfgs,
            jobs,
            workload,
            at: Arc::new(AtomicU64::new(0)),
        })
    }
}

impl Measurement for Sweep {
    type Outcome = Vec<RunResult>;

    fn label(&self) -> String {
        "simulate".into()
    }
    fn live(&self) -> Option<LiveSpec> {
        let total: u64 = self.cfgs.iter().map(|c| c.duration).sum();
        // Runs in parallel do not report simulated time, only their end.
        let at = self.at.clone();
        (total >= 10_000_000_000 || self.cfgs.len() > 1).then(|| {
            LiveSpec::counted(total / 1_000_000, move || {
                let ns = at.load(Ordering::Relaxed);
                (
                    ns / 1_000_000,
                    format!("{} simulated", punctual_time::format_ns(ns)),
                )
            })
        })
    }
    fn run(&mut self, ctx: &Ctx) -> Result<Vec<RunResult>, Failure> {
        let control = Control {
            stop: Some(ctx.stop()),
            progress: (self.jobs == 1).then_some(&*self.at),
        };
        Ok(crate::sweep(&self.cfgs, self.jobs, &control)?)
    }
    fn report(
        &self,
        runs: Vec<RunResult>,
        _ctx: &Ctx,
        doc: &mut ResultDoc,
    ) -> Result<Report, Failure> {
        let events: u64 = runs.iter().map(|r| r.events).sum();
        let simulated: u64 = runs.iter().map(|r| r.simulated_ns).sum();
        simulated_clock(doc, simulated);
        sweep_settings(doc, &self.cfgs, self.workload.clone());
        doc.series = report::series(&runs);
        doc.extra.insert("events".into(), events.into());
        doc.extra.insert("simulated_ns".into(), simulated.into());
        doc.extra
            .insert("runs".into(), report::run_summaries(&runs));
        let figures = match report::plot(&runs) {
            Ok(svg) => vec![Figure {
                name: "simulate".into(),
                svg,
            }],
            Err(_) => Vec::new(),
        };
        Ok(Report {
            tables: vec![report::table(&runs), report::overhead_table(&runs)],
            text: format!(
                "\n{events} events, {} simulated in {} run(s)\n",
                punctual_time::format_ns(simulated),
                runs.len()
            ),
            figures,
            ..Report::default()
        })
    }
    fn worst(&self, doc: &ResultDoc) -> Option<(u64, &'static str)> {
        worst_alarm(doc)
    }
}

fn sweep_settings(doc: &mut ResultDoc, cfgs: &[RunConfig], workload: Option<String>) {
    let c = &cfgs[0];
    let s = &mut doc.settings.extra;
    let mut hz: Vec<u32> = cfgs.iter().map(|c| c.hz).collect();
    hz.dedup();
    let mut q: Vec<String> = cfgs.iter().map(|c| c.quantum.label()).collect();
    q.sort();
    q.dedup();
    s.insert("hz".into(), json!(hz));
    s.insert("quantum".into(), json!(q));
    s.insert("scheduler".into(), c.policy.name().into());
    s.insert("timer".into(), c.timer.name().into());
    s.insert("cpus".into(), c.cpus.into());
    s.insert("duration_ns".into(), c.duration.into());
    s.insert("seed".into(), c.seed.into());
    s.insert("irq_direct_ns".into(), c.costs.irq_direct.into());
    s.insert("irq_indirect_ns".into(), c.costs.irq_indirect.into());
    s.insert("switch_ns".into(), c.costs.switch.into());
    if c.tasks.iter().any(|t| t.footprint_kib > 0) {
        s.insert("cache_kib".into(), c.cache.size_kib.into());
        s.insert("refill_mb_s".into(), c.cache.refill_mb_s.into());
    }
    if matches!(c.timer, Mechanism::Soft | Mechanism::Firm) {
        s.insert("entry_interval_ns".into(), c.entry_interval.into());
    }
    if c.timer == Mechanism::Firm {
        s.insert("overshoot_ns".into(), c.overshoot.into());
    }
    if let Some(w) = workload {
        s.insert("workload".into(), w.into());
    }
    s.insert(
        "tasks".into(),
        json!(c
            .tasks
            .iter()
            .map(|t| format!("{} ({})", t.name, t.behaviour.kind()))
            .collect::<Vec<_>>()),
    );
}

/// Etsion section 5: a frame player at each start shift, for each HZ and frame rate.
pub struct Frames {
    /// One study per HZ and frame rate (HZ outer).
    pub studies: Vec<FramesConfig>,
    /// The frame rates (in thousandths) and HZ as given, for the document.
    pub fps_milli: Vec<u64>,
    pub hz: Vec<u32>,
}

impl Frames {
    /// A study for each HZ and frame rate of `base`; every one is validated now, before anything
    /// runs.
    pub fn new(base: &FramesConfig, hz: &[u32], fps_milli: &[u64]) -> Result<Frames, Failure> {
        let mut studies = Vec::new();
        for &h in hz {
            for &f in fps_milli {
                let s = FramesConfig {
                    hz: h,
                    fps_milli: f,
                    ..base.clone()
                };
                s.validate()?;
                studies.push(s);
            }
        }
        Ok(Frames {
            studies,
            fps_milli: fps_milli.to_vec(),
            hz: hz.to_vec(),
        })
    }
}

impl Measurement for Frames {
    type Outcome = Vec<FramesResult>;

    fn label(&self) -> String {
        "simulate frames".into()
    }
    fn run(&mut self, ctx: &Ctx) -> Result<Vec<FramesResult>, Failure> {
        let control = Control {
            stop: Some(ctx.stop()),
            progress: None,
        };
        let mut results = Vec::new();
        for cfg in &self.studies {
            let r = crate::frames::study(cfg, &control)?;
            let stop_now = r.interrupted;
            results.push(r);
            if stop_now {
                break;
            }
        }
        Ok(results)
    }
    fn report(
        &self,
        results: Vec<FramesResult>,
        _ctx: &Ctx,
        doc: &mut ResultDoc,
    ) -> Result<Report, Failure> {
        let events: u64 = results.iter().map(FramesResult::events).sum();
        let simulated: u64 = results.iter().map(FramesResult::simulated_ns).sum();
        simulated_clock(doc, simulated);
        let first = &self.studies[0];
        let s = &mut doc.settings.extra;
        s.insert(
            "fps".into(),
            json!(self
                .fps_milli
                .iter()
                .map(|f| *f as f64 / 1000.0)
                .collect::<Vec<_>>()),
        );
        s.insert("hz".into(), json!(self.hz));
        s.insert("frames".into(), first.frames.into());
        s.insert("shifts".into(), first.shifts.into());
        s.insert(
            "poll".into(),
            match first.poll {
                Poll::Every(p) => json!(p),
                Poll::PerFrame => json!("frame"),
            },
        );
        s.insert("timer".into(), first.timer.name().into());
        s.insert("scheduler".into(), first.policy.name().into());
        s.insert("seed".into(), first.seed.into());
        doc.series = report::frames_series(&results);
        doc.extra.insert("events".into(), events.into());
        doc.extra.insert("simulated_ns".into(), simulated.into());
        let figures = match report::frames_plot(&results) {
            Ok(svg) => vec![Figure {
                name: "frames".into(),
                svg,
            }],
            Err(_) => Vec::new(),
        };
        Ok(Report {
            tables: report::frames_tables(&results),
            text: format!(
                "{events} events, {} simulated\n",
                punctual_time::format_ns(simulated)
            ),
            figures,
            ..Report::default()
        })
    }
    fn worst(&self, doc: &ResultDoc) -> Option<(u64, &'static str)> {
        worst_alarm(doc)
    }
}
