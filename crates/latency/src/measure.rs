//! `punctual latency` and `punctual check` as measurements of the lifecycle
//! (`punctual_session::drive`): what they hold, run and report.

use crate::check::{run_check_observed, CheckConfig, CheckOutcome, PHASES};
use crate::cyclic::{CyclicConfig, CyclicDoc, CyclicStats, CyclicThreadDoc};
use crate::{report, run_with, Config, Observe, Outcome, Progress, RunExtras, Stop};
use punctual_explain::{ExplainConfig, Explainer, Explanation};
use punctual_load::LoadSpec;
use punctual_measure::{Ctx, LiveSpec, Measurement, Report};
use punctual_result::{Failure, Output, ResultDoc};
use punctual_rt::RtWant;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Live figures of measuring threads: samples so far and the worst so far.
pub fn samples_live(expected_ns: u64, progress: Arc<[Progress]>) -> LiveSpec {
    LiveSpec::timed(expected_ns, move || {
        let samples: u64 = progress
            .iter()
            .map(|p| p.samples.load(Ordering::Relaxed))
            .sum();
        let max = progress
            .iter()
            .map(|p| p.max_ns.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0);
        format!("{samples} samples, max {}", punctual_time::format_ns(max))
    })
}

/// cyclictest-class wake-up latency.
pub struct Latency {
    /// Policy, priority and slack are replaced by what the session holds.
    pub cfg: Config,
    pub want: RtWant,
    pub load: LoadSpec,
    /// `--samples`: every sample as CSV (its path was checked before the run).
    pub samples: Option<Output>,
    progress: Arc<[Progress]>,
    /// cyclictest's figures per thread (`--hist`), kept in the document's `extra.cyclictest`.
    cyclic: Option<Vec<CyclicStats>>,
    /// `--explain`: trace the threads' CPUs and attribute every sample later than the bound.
    explain: Option<ExplainConfig>,
    explained: Option<Explanation>,
}

impl Latency {
    /// Explain every sample later than `cfg.bound` (`--explain`).
    pub fn explain(mut self, cfg: Option<ExplainConfig>) -> Latency {
        self.explain = cfg;
        self
    }

    pub fn new(cfg: Config, want: RtWant, load: LoadSpec, samples: Option<Output>) -> Latency {
        let progress = (0..cfg.threads.len())
            .map(|_| Progress::default())
            .collect();
        Latency {
            cfg,
            want,
            load,
            samples,
            progress,
            cyclic: None,
            explain: None,
            explained: None,
        }
    }

    /// Also keep cyclictest's figures (exact buckets of `cyc.unit_ns`, overflow cycle numbers), so
    /// cyclictest's histogram can be written from the document.
    pub fn with_cyclic(mut self, cyc: CyclicConfig) -> Latency {
        self.cyclic = Some(
            (0..self.cfg.threads.len())
                .map(|_| CyclicStats::new(cyc))
                .collect(),
        );
        self
    }
}

/// The document form of cyclictest's figures of a run of `cfg`: one entry per thread, with its
/// interval (`interval + i * distance`) and the priority it ran at.
pub fn cyclic_doc(
    cfg: &Config,
    distance: u64,
    outcome: &Outcome,
    stats: &[CyclicStats],
) -> CyclicDoc {
    let c = stats.first().map(|s| s.config()).unwrap_or_default();
    CyclicDoc {
        unit_ns: c.unit_ns,
        buckets: c.buckets,
        threads: stats
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let t = outcome.threads.iter().find(|t| t.index == i);
                CyclicThreadDoc {
                    index: i,
                    cpu: cfg.threads.get(i).copied().flatten(),
                    interval_ns: cfg.interval + i as u64 * distance,
                    priority: t.map(|t| t.priority).unwrap_or(cfg.priority),
                    figures: s.snapshot(),
                }
            })
            .collect(),
        extra: Default::default(),
    }
}

/// The explanation's series names (`thread N`) with their release counts.
fn thread_series(outcome: &Outcome) -> (Vec<(u32, String)>, Vec<u64>) {
    outcome
        .threads
        .iter()
        .map(|t| {
            (
                (t.index as u32, format!("thread {}", t.index)),
                t.recorder.count(),
            )
        })
        .unzip()
}

/// Start tracing for `--explain` on the CPUs the threads are pinned to (all when one floats).
fn start_explaining(
    explain: &Option<ExplainConfig>,
    cfg: &Config,
) -> Result<Option<Explainer>, Failure> {
    let Some(x) = explain else { return Ok(None) };
    let mut x = x.clone();
    if x.cpus.is_empty() && cfg.threads.iter().all(Option::is_some) {
        x.cpus = cfg.threads.iter().flatten().copied().collect();
        x.cpus.sort_unstable();
        x.cpus.dedup();
    }
    Ok(Some(Explainer::start(&x)?))
}

/// The logs' records and, per log (its index is its series), the late releases that did not fit.
pub fn gather_logs(
    logs: Vec<punctual_explain::LateLog>,
) -> (Vec<punctual_explain::LateRelease>, Vec<(u32, u64)>) {
    let mut records = Vec::new();
    let mut unlogged = Vec::new();
    for (i, l) in logs.into_iter().enumerate() {
        let (r, dropped) = l.into_records();
        records.extend(r);
        unlogged.push((i as u32, dropped));
    }
    (records, unlogged)
}

/// Where `--samples` goes while the run lasts: a temporary file renamed into place at the end (an
/// interrupted run still gets its samples, a failed one leaves nothing), or stdout. Written by the
/// one writer of every file a user names (`punctual_result::output`): a new file gets 0666 less
/// the umask, as `--json` does (issue 31: it was 0600 whatever the umask).
#[derive(Default)]
pub struct SamplesOut(Option<(punctual_result::output::AtomicFile, std::path::PathBuf)>);

impl Measurement for Latency {
    type Outcome = (Outcome, SamplesOut);

    fn label(&self) -> String {
        format!("latency {}", self.cfg.mode.name())
    }
    fn wants(&self) -> Option<RtWant> {
        Some(self.want)
    }
    fn load(&self) -> LoadSpec {
        self.load.clone()
    }
    fn live(&self) -> Option<LiveSpec> {
        let expected = match self.cfg.stop {
            Stop::Duration(d) => d,
            Stop::Loops(l) => l.saturating_mul(self.cfg.interval),
        };
        Some(samples_live(expected, self.progress.clone()))
    }

    fn run(&mut self, ctx: &Ctx) -> Result<Self::Outcome, Failure> {
        self.cfg.policy = ctx.rt.policy;
        self.cfg.priority = ctx.rt.priority;
        self.cfg.timer_slack_ns = ctx.rt.timer_slack_ns;
        let (sink, out): (Option<Box<dyn std::io::Write + Send>>, _) = match &self.samples {
            Some(Output::File(p)) => {
                let tmp = punctual_result::output::AtomicFile::create(p)
                    .map_err(|e| Failure::system(format!("--samples {}: {e}", p.display())))?;
                let f = tmp.file().try_clone()?;
                (Some(Box::new(f)), SamplesOut(Some((tmp, p.clone()))))
            }
            Some(Output::Stdout) => (Some(Box::new(std::io::stdout())), SamplesOut(None)),
            None => (None, SamplesOut(None)),
        };
        let explainer = start_explaining(&self.explain, &self.cfg)?;
        let extras = RunExtras {
            cyclic: self.cyclic.as_deref(),
            observe: Observe {
                late_bound: self.explain.as_ref().map(|x| x.bound),
            },
            ..RunExtras::default()
        };
        let (outcome, logs) = run_with(&self.cfg, extras, ctx.stop(), sink, Some(&self.progress))?;
        if let Some(x) = explainer {
            let (records, unlogged) = gather_logs(logs);
            self.explained = Some(x.stop()?.explain(&records, &unlogged));
        }
        Ok((outcome, out))
    }

    fn report(
        &self,
        (outcome, samples): Self::Outcome,
        ctx: &Ctx,
        doc: &mut ResultDoc,
    ) -> Result<Report, Failure> {
        ctx.runtime_fallbacks(
            doc,
            outcome.threads.iter().filter_map(|t| t.fallback.as_ref()),
        );
        let dropped = report::fill_latency_doc(doc, &self.cfg, &outcome, self.samples.is_some());
        if let Some(stats) = &self.cyclic {
            cyclic_doc(&self.cfg, 0, &outcome, stats).into_doc(doc);
        }
        if dropped > 0 {
            ctx.note(format!("{dropped} samples could not be written in time and are missing from --samples (the statistics include them)"));
        }
        if let SamplesOut(Some((tmp, path))) = samples {
            tmp.commit().map_err(|e| {
                Failure::system(format!("writing --samples {}: {e}", path.display()))
            })?;
        }
        let out = Report::tables(vec![report::latency_table(doc, &self.cfg, &outcome)]);
        match &self.explained {
            Some(x) => {
                let (names, counts) = thread_series(&outcome);
                punctual_explain::render::into_report(out, doc, x, &names, &counts)
            }
            None => Ok(out),
        }
    }
}

/// The 30-second machine check.
pub struct Check {
    pub cfg: CheckConfig,
    pub want: RtWant,
    progress: Arc<[Progress]>,
    explain: Option<ExplainConfig>,
    explained: Option<Explanation>,
}

impl Check {
    pub fn new(cfg: CheckConfig, want: RtWant) -> Check {
        Check {
            cfg,
            want,
            progress: Arc::new([Progress::default()]),
            explain: None,
            explained: None,
        }
    }

    /// Explain every release later than `cfg.bound` in each phase (`--explain`).
    pub fn explain(mut self, cfg: Option<ExplainConfig>) -> Check {
        self.explain = cfg.map(|mut c| {
            if c.cpus.is_empty() {
                c.cpus = vec![self.cfg.cpu];
            }
            c
        });
        self
    }
}

impl Measurement for Check {
    type Outcome = CheckOutcome;

    fn label(&self) -> String {
        "check".into()
    }
    fn wants(&self) -> Option<RtWant> {
        Some(self.want)
    }
    fn live(&self) -> Option<LiveSpec> {
        Some(samples_live(self.cfg.duration, self.progress.clone()))
    }

    fn run(&mut self, ctx: &Ctx) -> Result<CheckOutcome, Failure> {
        self.cfg.policy = ctx.rt.policy;
        self.cfg.priority = ctx.rt.priority;
        self.cfg.timer_slack_ns = ctx.rt.timer_slack_ns;
        self.cfg.exe = ctx.exe().to_path_buf();
        ctx.note(format!(
            "check: CPU {}, {} in four phases (plain sleep and hybrid, idle then with load {})",
            self.cfg.cpu,
            punctual_time::format_ns(self.cfg.duration),
            self.cfg.load
        ));
        let slot: &[Progress; 1] = (&*self.progress).try_into().expect("one slot");
        let explainer = self.explain.as_ref().map(Explainer::start).transpose()?;
        let observe = Observe {
            late_bound: self.explain.as_ref().map(|x| x.bound),
        };
        let (outcome, logs) = run_check_observed(
            &self.cfg,
            ctx.stop(),
            |i, p| ctx.step(format!("{}/{} {}", i + 1, PHASES.len(), p.label())),
            slot,
            observe,
        )?;
        if let Some(x) = explainer {
            let (records, unlogged) = gather_logs(logs);
            self.explained = Some(x.stop()?.explain(&records, &unlogged));
        }
        Ok(outcome)
    }

    fn report(
        &self,
        outcome: CheckOutcome,
        ctx: &Ctx,
        doc: &mut ResultDoc,
    ) -> Result<Report, Failure> {
        ctx.runtime_fallbacks(
            doc,
            outcome
                .phases
                .iter()
                .filter_map(|p| p.thread.fallback.as_ref()),
        );
        let s = &mut doc.settings.extra;
        s.insert("cpu".into(), self.cfg.cpu.into());
        s.insert("interval_ns".into(), self.cfg.interval.into());
        s.insert("duration_ns".into(), self.cfg.duration.into());
        let first = if self.cfg.hybrid_first {
            "punctual hybrid"
        } else {
            "plain sleep"
        };
        s.insert("first_method".into(), first.into());
        punctual_measure::record_load_reports(doc, &self.cfg.load, &outcome.loads);
        doc.series = outcome.series();
        doc.extra.insert("verdict".into(), outcome.verdict_json());
        let mut text = String::new();
        if doc.host.virtualized {
            text.push_str(
                "\nThis machine is virtualised: the hypervisor can stop a virtual CPU for milliseconds, \
                 and no user-space code can remove those tails.\n",
            );
        }
        if !doc.settings.fallbacks.is_empty() {
            text.push_str("\nRan with fallbacks (see above): figures are worse than this machine can do when privileged.\n");
        }
        let out = Report {
            tables: vec![
                outcome.results_table(self.cfg.interval, self.cfg.cpu),
                outcome.verdict_table(),
            ],
            text,
            figures: Vec::new(),
            ..Report::default()
        };
        match &self.explained {
            Some(x) => {
                let (names, counts): (Vec<(u32, String)>, Vec<u64>) = outcome
                    .phases
                    .iter()
                    .enumerate()
                    .map(|(i, p)| ((i as u32, p.phase.label()), p.thread.recorder.count()))
                    .unzip();
                punctual_explain::render::into_report(out, doc, x, &names, &counts)
            }
            None => Ok(out),
        }
    }
}
