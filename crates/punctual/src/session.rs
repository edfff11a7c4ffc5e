//! What every measuring command does around its measurement, in one place (rtla's lifecycle:
//! validate, apply, run, report, teardown): restore leftovers of crashed runs, decide the real-time
//! plan from the privileges, hold process-wide settings, watch for signals, and on the way out write
//! exports and choose the exit code.

use crate::cli::{DmaLatency, RtArgs};
use punctual_latency::Progress;
use punctual_result::export::Exporter;
use punctual_result::{Failure, Output, ResultDoc, Status};
use punctual_result::{Fallback, HostFacts};
use punctual_rt::dma::DmaLatencyGuard;
use punctual_rt::memlock::MlockGuard;
use punctual_rt::{Interrupts, RtPlan, RtWant, SchedParams};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Undo what earlier punctual runs left changed when they were killed or crashed (their journals in
/// /run/punctual), and say so. Called once at every start, whatever the command.
pub fn restore_leftovers() {
    for r in punctual_rt::journal::restore_stale() {
        eprintln!(
            "punctual: restored {} setting(s) left by an earlier run (pid {}) from {}",
            r.restored.len(),
            r.owner_pid,
            r.journal.display()
        );
        for (change, err) in &r.failed {
            eprintln!("punctual: could not restore {change}: {err}");
        }
    }
}

/// Check the real-time request itself (before anything changes on the system).
pub fn validate_rt(rt: &RtArgs) -> Result<(), Failure> {
    SchedParams {
        policy: rt.policy,
        priority: rt.priority(),
    }
    .validate()
    .map_err(|e| Failure::usage(format!("-p/--priority: {e}")))?;
    if let Some(cpus) = rt.cpus().map_err(Failure::usage)? {
        punctual_rt::affinity::check_online(&cpus)
            .map_err(|e| Failure::usage(format!("-a/--affinity: {e}")))?;
    }
    Ok(())
}

pub struct Session {
    pub stop: Arc<AtomicBool>,
    interrupts: &'static Interrupts,
    pub started_at: String,
    pub host: HostFacts,
    pub plan: RtPlan,
    steal: Option<StealMeter>,
    _mlock: Option<MlockGuard>,
    _dma: Option<DmaLatencyGuard>,
}

impl Session {
    /// Start a run: call after every input has been validated and every output path checked.
    /// (Leftovers of crashed runs were already restored at start, by `restore_leftovers`.)
    pub fn begin(rt: &RtArgs) -> Result<Session, Failure> {
        let interrupts = Interrupts::install();
        let want = RtWant {
            policy: rt.policy,
            priority: rt.priority(),
            mlock: !rt.no_mlock,
            dma_latency_us: match rt.dma_latency {
                DmaLatency::Off => None,
                DmaLatency::Us(us) => Some(us),
            },
        };
        let mut plan = punctual_rt::privilege::plan(&punctual_rt::Privileges::detect(), &want);
        let mlock = if plan.mlock {
            match MlockGuard::lock_all() {
                Ok(g) => Some(g),
                Err(e) => {
                    plan.mlock = false;
                    plan.fallbacks.push(Fallback {
                        setting: "memory locking".into(),
                        wanted: "mlockall".into(),
                        got: "unlocked memory".into(),
                        why: e.to_string(),
                        fix: punctual_rt::privilege::MLOCK_FIX.into(),
                    });
                    None
                }
            }
        } else {
            None
        };
        let dma = match plan.dma_latency_us {
            Some(us) => match DmaLatencyGuard::request(us) {
                Ok(g) => Some(g),
                Err(e) => {
                    plan.dma_latency_us = None;
                    plan.fallbacks.push(Fallback {
                        setting: "cpu_dma_latency".into(),
                        wanted: format!("{us} us"),
                        got: "no request".into(),
                        why: e.to_string(),
                        fix: punctual_rt::privilege::DMA_FIX.into(),
                    });
                    None
                }
            },
            None => None,
        };
        for f in &plan.fallbacks {
            eprintln!("punctual: fallback: {f}");
        }
        Ok(Session {
            stop: interrupts.stop_flag(),
            interrupts,
            started_at: punctual_result::now_rfc3339(),
            host: punctual_rt::host::detect(),
            plan,
            steal: StealMeter::start(),
            _mlock: mlock,
            _dma: dma,
        })
    }

    pub fn interrupted(&self) -> bool {
        self.interrupts.requested()
    }

    /// A document with the command line, host facts and the applied real-time settings.
    pub fn new_doc(&self) -> ResultDoc {
        let mut doc = ResultDoc::new(
            std::env::args().collect(),
            self.host.clone(),
            self.started_at.clone(),
        );
        let s = &mut doc.settings;
        s.policy = Some(self.plan.policy.name().into());
        s.priority = Some(self.plan.priority);
        s.mlock = Some(self.plan.mlock);
        s.dma_latency_us = self.plan.dma_latency_us;
        s.fallbacks = self.plan.fallbacks.clone();
        if let Some(slack) = self.plan.timer_slack_ns {
            s.extra.insert("timer_slack_ns".into(), slack.into());
        }
        doc
    }

    /// Record fallbacks threads took at run time (the kernel refused despite the privilege check).
    pub fn add_runtime_fallbacks<'a>(
        &self,
        doc: &mut ResultDoc,
        fallbacks: impl Iterator<Item = &'a Fallback>,
    ) {
        let mut seen = false;
        for f in fallbacks {
            if !doc.settings.fallbacks.contains(f) {
                eprintln!("punctual: fallback: {f}");
                doc.settings.fallbacks.push(f.clone());
            }
            seen = true;
        }
        if seen {
            doc.settings.policy = Some("other".into());
            doc.settings.priority = Some(0);
        }
    }

    /// Close the document: end time, status from the interrupt flag and the limit (which applies to
    /// every series' maximum).
    pub fn close(&self, doc: &mut ResultDoc, fail_above: Option<u64>) -> i32 {
        doc.ended_at = punctual_result::now_rfc3339();
        if let Some(m) = &self.steal {
            m.record(doc);
        }
        let worst = doc.series.iter().map(|s| s.summary.max).max();
        close_status(doc, self.interrupted(), fail_above, worst, "sample")
    }
}

/// Record a run's background load in its document: the spec (`settings.load`) and what each
/// instance reported (`settings.load_reports`); nothing when no load ran.
pub fn record_load_reports(
    doc: &mut ResultDoc,
    spec: &punctual_load::LoadSpec,
    reports: &[(
        punctual_load::LoadKind,
        Option<usize>,
        Option<punctual_load::LoadReport>,
    )],
) -> anyhow::Result<()> {
    if spec.is_empty() {
        return Ok(());
    }
    let s = &mut doc.settings.extra;
    s.insert("load".into(), spec.to_string().into());
    let reports: Vec<_> = reports.iter().filter_map(|r| r.2.as_ref()).collect();
    s.insert("load_reports".into(), serde_json::to_value(reports)?);
    Ok(())
}

/// Steal time per CPU (`host::steal_ns`) since a run began.
pub struct StealMeter(punctual_rt::host::StealMeter);

impl StealMeter {
    /// `None` when the kernel does not report steal time.
    pub fn start() -> Option<StealMeter> {
        punctual_rt::host::StealMeter::start().map(StealMeter)
    }

    /// Record how much CPU time the hypervisor took from each CPU since `start`
    /// (`settings.steal_ns`, ns per CPU) and say so when it took any: releases that fall in stolen
    /// time are late by the rest of it, and no setting inside the guest can prevent that.
    pub fn record(&self, doc: &mut ResultDoc) {
        let Some((stolen, run)) = self.0.taken() else {
            return;
        };
        let mut per_cpu = serde_json::Map::new();
        let mut taken = Vec::new();
        for (cpu, d) in stolen {
            per_cpu.insert(cpu.to_string(), d.into());
            if d > 0 {
                taken.push((cpu, d));
            }
        }
        doc.settings
            .extra
            .insert("steal_ns".into(), serde_json::Value::Object(per_cpu));
        if taken.is_empty() {
            return;
        }
        taken.sort_by_key(|&(_, d)| std::cmp::Reverse(d));
        let list: Vec<String> = taken
            .iter()
            .take(4)
            .map(|&(cpu, d)| {
                format!(
                    "CPU {cpu} {} ({:.2} %)",
                    punctual_time::format_ns(d),
                    d as f64 * 100.0 / run as f64
                )
            })
            .collect();
        eprintln!(
            "punctual: steal time (the hypervisor running something else) during this {} run: {}{}; \
             releases that fall in it are late by the rest of it",
            punctual_time::format_ns(run),
            list.join(", "),
            if taken.len() > 4 { ", ..." } else { "" }
        );
    }
}

/// Set a finished document's status and return the exit code (SPEC section 2): an interruption
/// (130) outranks a crossed `--fail-above` (1), which outranks ok (0). `worst` is the largest value
/// the limit applies to, `what` names it in the message.
pub fn close_status(
    doc: &mut ResultDoc,
    interrupted: bool,
    fail_above: Option<u64>,
    worst: Option<u64>,
    what: &str,
) -> i32 {
    let over = fail_above.zip(worst).filter(|(limit, w)| w > limit);
    doc.status = if interrupted {
        Status::Interrupted
    } else if over.is_some() {
        Status::LimitExceeded
    } else {
        Status::Ok
    };
    if let Some((limit, w)) = over {
        eprintln!(
            "punctual: limit exceeded: worst {what} {} is above --fail-above {}",
            punctual_time::format_ns(w),
            punctual_time::format_ns(limit)
        );
    }
    match doc.status {
        Status::Interrupted => punctual_rt::signals::EXIT_INTERRUPTED,
        Status::Watchdog => 3,
        Status::LimitExceeded => 1,
        Status::Ok => 0,
        Status::Watchdog => 3,
    }
}

/// The files a command writes at the end, checked before it starts.
#[derive(Default)]
pub struct Exports {
    pub targets: Vec<(Output, Box<dyn Exporter>)>,
}

impl Exports {
    pub fn add(
        &mut self,
        flag: &str,
        out: Option<&Output>,
        exporter: impl Exporter + 'static,
    ) -> Result<(), Failure> {
        if let Some(o) = out {
            o.check_writable()
                .map_err(|e| Failure::usage(format!("--{flag}: {e}")))?;
            if o.is_stdout() && self.targets.iter().any(|(t, _)| t.is_stdout()) {
                return Err(Failure::usage(format!(
                    "--{flag} -: only one export can go to stdout"
                )));
            }
            self.targets.push((o.clone(), Box::new(exporter)));
        }
        Ok(())
    }

    /// Whether the human table may use stdout (it moves to stderr when an export is on stdout).
    pub fn stdout_free(&self) -> bool {
        !self.targets.iter().any(|(o, _)| o.is_stdout())
    }

    pub fn write(&self, doc: &ResultDoc) -> Result<(), Failure> {
        for (out, exporter) in &self.targets {
            out.write(&exporter.export(doc))
                .map_err(|e| Failure::system(format!("writing {out}: {e}")))?;
        }
        Ok(())
    }
}

/// Print human output where it belongs.
pub fn show(exports: &Exports, text: &str) {
    if exports.stdout_free() {
        print!("{text}");
    } else {
        eprint!("{text}");
    }
}

/// A live line on stderr while something runs: drawn only when stderr is a terminal, at most 4 times
/// a second. Every command uses it; what differs is only where the figures come from: `poll` returns
/// (work done so far, message), in the unit of `total` (none: a spinner without a bar).
pub struct Live {
    bar: Option<indicatif::ProgressBar>,
    done: Arc<AtomicBool>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

impl Live {
    pub fn start(
        prefix: impl Into<String>,
        total: Option<u64>,
        poll: impl Fn() -> (u64, String) + Send + 'static,
    ) -> Live {
        use std::io::IsTerminal;
        let done = Arc::new(AtomicBool::new(false));
        if !std::io::stderr().is_terminal() {
            return Live {
                bar: None,
                done,
                ticker: None,
            };
        }
        let bar = indicatif::ProgressBar::with_draw_target(
            total,
            indicatif::ProgressDrawTarget::stderr_with_hz(4),
        );
        let template = if total.is_some() {
            "{prefix} [{bar:30}] {elapsed}/{duration} {msg}"
        } else {
            "{prefix} {elapsed} {msg}"
        };
        bar.set_style(
            indicatif::ProgressStyle::with_template(template)
                .expect("static template")
                .progress_chars("=> "),
        );
        bar.set_prefix(prefix.into());
        let ticker = {
            let (bar, done) = (bar.clone(), done.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    let (at, msg) = poll();
                    bar.set_position(at);
                    bar.set_message(msg);
                    std::thread::sleep(std::time::Duration::from_millis(250));
                }
            })
        };
        Live {
            bar: Some(bar),
            done,
            ticker: Some(ticker),
        }
    }

    /// Milliseconds since `t0`, for runs whose `total` is a wall-clock duration in ms.
    pub fn elapsed_ms(t0: std::time::Instant) -> u64 {
        t0.elapsed().as_millis() as u64
    }

    pub fn set_prefix(&self, p: impl Into<String>) {
        if let Some(b) = &self.bar {
            b.set_prefix(p.into());
        }
    }

    pub fn finish(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Live figures of measuring threads: samples so far and the worst so far.
pub fn samples_poll(progress: Arc<[Progress]>) -> impl Fn() -> (u64, String) + Send + 'static {
    let t0 = std::time::Instant::now();
    move || {
        let samples: u64 = progress
            .iter()
            .map(|p| p.samples.load(Ordering::Relaxed))
            .sum();
        let max = progress
            .iter()
            .map(|p| p.max_ns.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0);
        (
            Live::elapsed_ms(t0),
            format!("{samples} samples, max {}", punctual_time::format_ns(max)),
        )
    }
}
