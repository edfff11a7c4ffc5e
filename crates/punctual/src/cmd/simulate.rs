//! `punctual simulate`: the tick-scheduler simulator (SPEC section 6). A workload on the command
//! line, `frames` (Etsion Section 5), or `scenario FILE`; sweeps over `--hz` and `--quantum` lists.
//! Pure computation: no real-time setup, but the same output conventions as every command.

use crate::session::{close_status, show, Exports, Live};
use clap::{Args, Subcommand};
use punctual_result::export::{Csv, Json};
use punctual_result::{Failure, Output, ResultDoc};
use punctual_sim::frames::{FramesConfig, FramesResult};
use punctual_sim::{report, Control, Costs, Mechanism, Policy, Poll, Quantum, RunConfig};
use serde_json::json;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SimulateArgs {
    #[command(subcommand)]
    pub sub: Option<SimulateCmd>,
    /// Tasks: blk:N, pctK:N, cont:N, cpu:N, periodic:N:PERIOD:WCET, typist:N, game:N,
    /// player:N:FPS, xine (comma-separated, e.g. cont:8,blk:2).
    #[arg(short = 'w', long, value_name = "SPEC")]
    pub workload: Option<String>,
    #[command(flatten)]
    pub knobs: Knobs,
    #[command(flatten)]
    pub out: SimOutput,
}

#[derive(Subcommand, Debug)]
pub enum SimulateCmd {
    /// Etsion Section 5: a frame player at each start shift between ticks and frames.
    Frames(FramesArgs),
    /// Run a scenario file (see examples/sim/); flags given here override it.
    Scenario(ScenarioArgs),
}

/// The simulated machine. Lists (100,1000) make a sweep.
#[derive(Args, Debug, Clone, Default)]
pub struct Knobs {
    /// Clock interrupt rate(s) in Hz, 1 to 1000000; a list sweeps (default 100).
    #[arg(long, value_name = "HZ[,HZ...]")]
    pub hz: Option<String>,
    /// Quantum as time (60ms) or ticks (6ticks); a list sweeps (default 50ms).
    #[arg(short = 'q', long, value_name = "Q[,Q...]")]
    pub quantum: Option<String>,
    /// Scheduling policy: rr, fifo, linux24, fair, plan (default rr).
    #[arg(long, value_name = "POLICY")]
    pub policy: Option<String>,
    /// Timer mechanism: periodic, oneshot, soft, firm (default periodic).
    #[arg(long, value_name = "MECHANISM")]
    pub timer: Option<String>,
    /// Simulated CPUs (default 1).
    #[arg(long, value_name = "N")]
    pub cpus: Option<usize>,
    /// Simulated duration of each run (default 60s).
    #[arg(short = 'D', long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Seed of the random generator: the same seed gives byte-identical output (default 1).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Direct cost of an interrupt (default 0.5us, Etsion Table 1).
    #[arg(long, value_name = "DURATION")]
    pub irq_cost: Option<String>,
    /// Indirect (cache) cost of an interrupt (default 4.5us: about 90 % of the total, Etsion Section 3).
    #[arg(long, value_name = "DURATION")]
    pub irq_indirect: Option<String>,
    /// Cost of a context switch, refill included (default 2us).
    #[arg(long, value_name = "DURATION")]
    pub switch_cost: Option<String>,
    /// Soft and firm timers: mean time between kernel entries of a running task (default 100us).
    #[arg(long, value_name = "DURATION")]
    pub entry_interval: Option<String>,
    /// Firm timers: the one-shot fallback fires this long after the expiry (default 20us).
    #[arg(long, value_name = "DURATION")]
    pub overshoot: Option<String>,
    /// Refuse runs estimated to process more events than this (default 20000000000).
    #[arg(long, value_name = "N")]
    pub max_events: Option<u64>,
    /// Runs of a sweep to simulate at once (the output does not depend on it).
    #[arg(short = 'j', long, value_name = "N", default_value_t = 1)]
    pub jobs: usize,
}

#[derive(Args, Debug, Clone)]
pub struct SimOutput {
    /// Write the result document (JSON, punctual.result/1) to FILE, or - for stdout.
    #[arg(long, value_name = "FILE")]
    pub json: Option<Output>,
    /// Write one CSV row per series to FILE, or - for stdout.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<Output>,
    /// Write an SVG figure to FILE (alarm latency or effective quantum; frames: rate by shift).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<Output>,
    /// Exit 1 if any simulated alarm latency exceeds this (e.g. 1ms).
    #[arg(long, value_name = "DURATION")]
    pub fail_above: Option<String>,
}

#[derive(Args, Debug)]
pub struct FramesArgs {
    /// Frame rate(s) to play, frames per second; a list sweeps (default 60).
    #[arg(long, value_name = "FPS[,FPS...]")]
    pub fps: Option<String>,
    /// Frames in the clip (default 500, as in Etsion Fig. 1).
    #[arg(long, default_value_t = 500, value_name = "N")]
    pub frames: u64,
    /// Start shifts, spread evenly over one tick (default 60).
    #[arg(long, default_value_t = 60, value_name = "N")]
    pub shifts: u32,
    /// How the player wakes: an alarm interval (default 4ms, Xine's) or "frame" (an alarm per frame).
    #[arg(long, value_name = "DURATION|frame")]
    pub poll: Option<String>,
    /// Background tasks competing with the player (same labels as --workload).
    #[arg(short = 'w', long, value_name = "SPEC")]
    pub workload: Option<String>,
    #[command(flatten)]
    pub knobs: Knobs,
    #[command(flatten)]
    pub out: SimOutput,
}

#[derive(Args, Debug)]
pub struct ScenarioArgs {
    /// The scenario file (TOML).
    pub file: PathBuf,
    /// Replace the scenario's tasks with this workload.
    #[arg(short = 'w', long, value_name = "SPEC")]
    pub workload: Option<String>,
    #[command(flatten)]
    pub knobs: Knobs,
    #[command(flatten)]
    pub out: SimOutput,
}

fn usage(flag: &str, e: impl std::fmt::Display) -> Failure {
    Failure::usage(format!("{flag}: {e}"))
}

fn dur(flag: &str, s: &Option<String>) -> Result<Option<u64>, Failure> {
    s.as_deref()
        .map(|v| punctual_time::parse_duration_ns(v).map_err(|e| usage(flag, e)))
        .transpose()
}

fn list<T>(
    flag: &str,
    s: &str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, Failure> {
    let items: Vec<&str> = s.split(',').map(str::trim).collect();
    if items.iter().any(|i| i.is_empty()) {
        return Err(usage(
            flag,
            format!("'{s}' has an empty entry; write a comma-separated list, e.g. 100,1000"),
        ));
    }
    items
        .into_iter()
        .map(|i| parse(i).map_err(|e| usage(flag, e)))
        .collect()
}

fn parse_hz(s: &str) -> Result<u32, String> {
    let v: u64 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a whole number of Hz, e.g. 100 or 1000"))?;
    if v == 0 || v > punctual_sim::config::MAX_HZ as u64 {
        return Err(format!(
            "{v} Hz is out of range; give 1 to {} (1 MHz)",
            punctual_sim::config::MAX_HZ
        ));
    }
    Ok(v as u32)
}

/// Apply the command-line knobs over a base configuration; returns the sweep lists.
fn apply(
    k: &Knobs,
    base: &mut RunConfig,
    hz: &mut Vec<u32>,
    quanta: &mut Vec<Quantum>,
) -> Result<(), Failure> {
    if let Some(h) = &k.hz {
        *hz = list("--hz", h, parse_hz)?;
    }
    if let Some(q) = &k.quantum {
        *quanta = list("-q/--quantum", q, |s| s.parse::<Quantum>())?;
    }
    if let Some(p) = &k.policy {
        base.policy = p.parse::<Policy>().map_err(|e| usage("--policy", e))?;
    }
    if let Some(t) = &k.timer {
        base.timer = t.parse::<Mechanism>().map_err(|e| usage("--timer", e))?;
    }
    if let Some(c) = k.cpus {
        base.cpus = c;
    }
    if let Some(d) = dur("-D/--duration", &k.duration)? {
        base.duration = d;
    }
    if let Some(s) = k.seed {
        base.seed = s;
    }
    if let Some(d) = dur("--irq-cost", &k.irq_cost)? {
        base.costs.irq_direct = d;
    }
    if let Some(d) = dur("--irq-indirect", &k.irq_indirect)? {
        base.costs.irq_indirect = d;
    }
    if let Some(d) = dur("--switch-cost", &k.switch_cost)? {
        base.costs.switch = d;
    }
    if let Some(d) = dur("--entry-interval", &k.entry_interval)? {
        base.entry_interval = d;
    }
    if let Some(d) = dur("--overshoot", &k.overshoot)? {
        base.overshoot = d;
    }
    if let Some(m) = k.max_events {
        base.max_events = m;
    }
    if k.jobs == 0 {
        return Err(usage("-j/--jobs", "must be at least 1"));
    }
    Ok(())
}

fn sweep_configs(base: &RunConfig, hz: &[u32], quanta: &[Quantum]) -> Vec<RunConfig> {
    let mut out = Vec::new();
    for &h in hz {
        for &q in quanta {
            out.push(RunConfig {
                hz: h,
                quantum: q,
                ..base.clone()
            });
        }
    }
    out
}

/// A simulation document: the run's clock is the simulated one, so the timestamps are too (the
/// Unix epoch plus simulated time, or SOURCE_DATE_EPOCH when set): the same seed gives the same bytes.
fn new_doc(simulated_ns: u64) -> ResultDoc {
    let base: i64 = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    let fmt = |ns: i128| {
        time::OffsetDateTime::from_unix_timestamp_nanos(base as i128 * 1_000_000_000 + ns)
            .ok()
            .and_then(|t| {
                t.format(&time::format_description::well_known::Rfc3339)
                    .ok()
            })
            .unwrap_or_else(|| "1970-01-01T00:00:00Z".into())
    };
    let mut doc = ResultDoc::new(
        std::env::args().collect(),
        punctual_rt::host::detect(),
        fmt(0),
    );
    doc.ended_at = fmt(simulated_ns as i128);
    doc.settings
        .extra
        .insert("clock".into(), "simulated".into());
    doc
}

struct Prepared {
    exports: Exports,
    plot: Option<Output>,
    fail_above: Option<u64>,
}

fn prepare(out: &SimOutput) -> Result<Prepared, Failure> {
    let mut exports = Exports::default();
    exports.add("json", out.json.as_ref(), Json)?;
    exports.add("csv", out.csv.as_ref(), Csv)?;
    if let Some(p) = &out.plot {
        p.check_writable().map_err(|e| usage("--plot", e))?;
        if p.is_stdout() && !exports.stdout_free() {
            return Err(usage("--plot -", "only one output can go to stdout"));
        }
    }
    Ok(Prepared {
        exports,
        plot: out.plot.clone(),
        fail_above: dur("--fail-above", &out.fail_above)?,
    })
}

pub fn run(a: SimulateArgs) -> anyhow::Result<i32> {
    match a.sub {
        Some(SimulateCmd::Frames(f)) => run_frames(f),
        Some(SimulateCmd::Scenario(s)) => {
            let sc = punctual_sim::scenario::load(&s.file).map_err(|e| match e {
                punctual_sim::SimError::Io(m) => Failure::usage(m),
                other => Failure::usage(other.to_string()),
            })?;
            let (mut base, mut hz, mut quanta) = (sc.base, sc.hz, sc.quanta);
            if let Some(w) = &s.workload {
                base.tasks =
                    punctual_sim::parse_workload(w).map_err(|e| usage("-w/--workload", e))?;
            }
            apply(&s.knobs, &mut base, &mut hz, &mut quanta)?;
            let label = sc.name.unwrap_or_else(|| s.file.display().to_string());
            run_sweep(
                sweep_configs(&base, &hz, &quanta),
                &s.knobs,
                &s.out,
                Some(label),
            )
        }
        None => {
            let Some(w) = &a.workload else {
                return Err(Failure::usage(
                    "give a workload (-w/--workload cont:8,blk:2), or use `punctual simulate frames` or `punctual simulate scenario FILE`",
                )
                .into());
            };
            let mut base = RunConfig {
                tasks: punctual_sim::parse_workload(w).map_err(|e| usage("-w/--workload", e))?,
                ..RunConfig::default()
            };
            let (mut hz, mut quanta) = (vec![base.hz], vec![base.quantum]);
            apply(&a.knobs, &mut base, &mut hz, &mut quanta)?;
            run_sweep(
                sweep_configs(&base, &hz, &quanta),
                &a.knobs,
                &a.out,
                Some(w.clone()),
            )
        }
    }
}

fn close(doc: &mut ResultDoc, interrupted: bool, fail_above: Option<u64>) -> i32 {
    let worst = doc
        .series
        .iter()
        .filter(|s| s.kind == report::kind::ALARM_LATENCY)
        .map(|s| s.summary.max)
        .max();
    close_status(
        doc,
        interrupted,
        fail_above,
        worst,
        "simulated alarm latency",
    )
}

fn run_sweep(
    cfgs: Vec<RunConfig>,
    knobs: &Knobs,
    out: &SimOutput,
    workload: Option<String>,
) -> anyhow::Result<i32> {
    // Everything is checked before anything runs.
    for c in &cfgs {
        c.validate().map_err(Failure::from)?;
    }
    let prep = prepare(out)?;
    let interrupts = punctual_rt::Interrupts::install();
    let stop = interrupts.stop_flag();
    let at = Arc::new(AtomicU64::new(0));
    let total: u64 = cfgs.iter().map(|c| c.duration).sum();
    let runs = {
        let _p = (total >= 10_000_000_000 || cfgs.len() > 1).then(|| {
            let at = at.clone();
            Live::start("simulate", Some(total / 1_000_000), move || {
                let ns = at.load(Ordering::Relaxed);
                (
                    ns / 1_000_000,
                    format!("{} simulated", punctual_time::format_ns(ns)),
                )
            })
        });
        let control = Control {
            stop: Some(&stop),
            progress: if knobs.jobs == 1 { Some(&at) } else { None },
        };
        punctual_sim::sweep(&cfgs, knobs.jobs, &control).map_err(Failure::from)?
    };
    let interrupted = runs.iter().any(|r| r.interrupted) || runs.len() < cfgs.len();
    let events: u64 = runs.iter().map(|r| r.events).sum();
    let simulated: u64 = runs.iter().map(|r| r.simulated_ns).sum();
    let mut doc = new_doc(simulated);
    settings(&mut doc, &cfgs, workload);
    doc.series = report::series(&runs);
    doc.extra.insert("events".into(), events.into());
    doc.extra.insert("simulated_ns".into(), simulated.into());
    doc.extra
        .insert("runs".into(), report::run_summaries(&runs));
    let code = close(&mut doc, interrupted, prep.fail_above);
    let mut text = report::table(&runs).render();
    text.push('\n');
    text.push_str(&report::overhead_table(&runs).render());
    text.push_str(&format!(
        "\n{events} events, {} simulated in {} run(s)\n",
        punctual_time::format_ns(simulated),
        runs.len()
    ));
    finish(&prep, &doc, &text, || report::plot(&runs))?;
    if interrupted {
        eprintln!("punctual: interrupted; partial results written");
    }
    Ok(code)
}

fn finish(
    prep: &Prepared,
    doc: &ResultDoc,
    text: &str,
    plot: impl FnOnce() -> Result<String, punctual_plot::PlotError>,
) -> anyhow::Result<()> {
    prep.exports.write(doc)?;
    if let Some(p) = &prep.plot {
        let svg = plot().map_err(|e| Failure::system(e.to_string()))?;
        p.write(svg.as_bytes())
            .map_err(|e| Failure::system(format!("writing --plot {p}: {e}")))?;
    }
    let stdout_free =
        prep.exports.stdout_free() && !prep.plot.as_ref().is_some_and(Output::is_stdout);
    if stdout_free {
        show(&prep.exports, text);
    } else {
        eprint!("{text}");
    }
    Ok(())
}

fn settings(doc: &mut ResultDoc, cfgs: &[RunConfig], workload: Option<String>) {
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

fn run_frames(f: FramesArgs) -> anyhow::Result<i32> {
    let mut base = RunConfig::default();
    let (mut hz, mut quanta) = (vec![100u32], vec![base.quantum]);
    apply(&f.knobs, &mut base, &mut hz, &mut quanta)?;
    if f.knobs.duration.is_some() {
        return Err(usage(
            "-D/--duration",
            "frames runs as long as the clip; set --frames instead",
        )
        .into());
    }
    if quanta.len() > 1 {
        return Err(usage("-q/--quantum", "frames takes one quantum").into());
    }
    let fps = match &f.fps {
        Some(s) => list("--fps", s, punctual_sim::behaviour::parse_fps)?,
        None => vec![60_000],
    };
    let poll = match f.poll.as_deref() {
        None => Poll::Every(punctual_sim::behaviour::defaults::XINE_POLL),
        Some("frame") => Poll::PerFrame,
        Some(p) => Poll::Every(
            punctual_time::parse_duration_ns(p)
                .map_err(|e| usage("--poll", format!("{e}; or frame")))?,
        ),
    };
    let background = match &f.workload {
        Some(w) => punctual_sim::parse_workload(w).map_err(|e| usage("-w/--workload", e))?,
        None => Vec::new(),
    };
    let mut studies = Vec::new();
    for &h in &hz {
        for &fm in &fps {
            let cfg = FramesConfig {
                fps_milli: fm,
                hz: h,
                frames: f.frames,
                shifts: f.shifts,
                poll,
                timer: base.timer,
                policy: base.policy,
                quantum: quanta[0],
                costs: Costs { ..base.costs },
                background: background.clone(),
                seed: base.seed,
                max_events: base.max_events,
                ..FramesConfig::default()
            };
            cfg.validate().map_err(Failure::from)?;
            studies.push(cfg);
        }
    }
    let prep = prepare(&f.out)?;
    let interrupts = punctual_rt::Interrupts::install();
    let stop = interrupts.stop_flag();
    let control = Control {
        stop: Some(&stop),
        progress: None,
    };
    let mut results: Vec<FramesResult> = Vec::new();
    for cfg in &studies {
        let r = punctual_sim::frames::study(cfg, &control).map_err(Failure::from)?;
        let stop_now = r.interrupted;
        results.push(r);
        if stop_now {
            break;
        }
    }
    let interrupted = results.iter().any(|r| r.interrupted) || results.len() < studies.len();
    let events: u64 = results.iter().map(FramesResult::events).sum();
    let simulated: u64 = results.iter().map(FramesResult::simulated_ns).sum();
    let mut doc = new_doc(simulated);
    let s = &mut doc.settings.extra;
    s.insert(
        "fps".into(),
        json!(fps.iter().map(|f| *f as f64 / 1000.0).collect::<Vec<_>>()),
    );
    s.insert("hz".into(), json!(hz));
    s.insert("frames".into(), f.frames.into());
    s.insert("shifts".into(), f.shifts.into());
    s.insert(
        "poll".into(),
        match poll {
            Poll::Every(p) => json!(p),
            Poll::PerFrame => json!("frame"),
        },
    );
    s.insert("timer".into(), base.timer.name().into());
    s.insert("scheduler".into(), base.policy.name().into());
    s.insert("seed".into(), base.seed.into());
    doc.series = report::frames_series(&results);
    doc.extra.insert("events".into(), events.into());
    doc.extra.insert("simulated_ns".into(), simulated.into());
    let code = close(&mut doc, interrupted, prep.fail_above);
    let mut text = String::new();
    for t in report::frames_tables(&results) {
        text.push_str(&t.render());
        text.push('\n');
    }
    text.push_str(&format!(
        "{events} events, {} simulated\n",
        punctual_time::format_ns(simulated)
    ));
    finish(&prep, &doc, &text, || report::frames_plot(&results))?;
    if interrupted {
        eprintln!("punctual: interrupted; partial results written");
    }
    Ok(code)
}
