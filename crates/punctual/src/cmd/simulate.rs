//! `punctual simulate`: the tick-scheduler simulator (SPEC section 6). A workload on the command
//! line, `frames` (Etsion Section 5), or `scenario FILE`; sweeps over `--hz` and `--quantum` lists.
//! The measurements are `punctual_sim::measure`; this file checks the flags.

use crate::args::duration;
use clap::{Args, Subcommand};
use punctual_result::{Failure, Output};
use punctual_session::{drive, Env, Exit, Outputs};
use punctual_sim::frames::FramesConfig;
use punctual_sim::measure::{Frames, Sweep};
use punctual_sim::{Mechanism, Policy, Poll, Quantum, RunConfig, TaskSpec};
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SimulateArgs {
    #[command(subcommand)]
    pub sub: Option<SimulateCmd>,
    /// Tasks: blk:N, pctK:N, cont:N, cpu:N, sort:N, periodic:N:PERIOD:WCET,
    /// select:N:TIMEOUT:WCET, typist:N, game:N, player:N:FPS, xine (comma-separated, e.g.
    /// cont:8,blk:2).
    #[arg(short = 'w', long, value_name = "SPEC", value_parser = workload)]
    pub workload: Option<Workload>,
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
    #[arg(long, value_name = "HZ[,HZ...]", value_parser = |s: &str| list(s, punctual_sim::config::parse_hz))]
    pub hz: Option<List<u32>>,
    /// Quantum as time (60ms) or ticks (6ticks); a list sweeps (default 50ms).
    #[arg(short = 'q', long, value_name = "Q[,Q...]", value_parser = |s: &str| list(s, str::parse::<Quantum>))]
    pub quantum: Option<List<Quantum>>,
    /// Scheduling policy: rr, fifo, linux24, fair, plan (default rr).
    #[arg(long, value_name = "POLICY")]
    pub policy: Option<Policy>,
    /// Timer mechanism: periodic, oneshot, soft, firm (default periodic).
    #[arg(long, value_name = "MECHANISM")]
    pub timer: Option<Mechanism>,
    /// Simulated CPUs (default 1).
    #[arg(long, value_name = "N")]
    pub cpus: Option<usize>,
    /// Simulated duration of each run (default 60s).
    #[arg(short = 'D', long, value_name = "DURATION", value_parser = |s: &str| hinting(s, "s"))]
    pub duration: Option<u64>,
    /// Seed of the random generator: the same seed gives byte-identical output (default 1).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Direct cost of an interrupt (default 0.5us, Etsion Table 1).
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub irq_cost: Option<u64>,
    /// Indirect (cache) cost of an interrupt (default 4.5us: about 90 % of the total, Etsion Section 3).
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub irq_indirect: Option<u64>,
    /// Cost of a context switch, refill included (default 2us).
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub switch_cost: Option<u64>,
    /// Soft and firm timers: mean time between kernel entries of a running task (default 100us).
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub entry_interval: Option<u64>,
    /// Firm timers: the one-shot fallback fires this long after the expiry (default 20us).
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub overshoot: Option<u64>,
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
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub fail_above: Option<u64>,
    #[command(flatten)]
    pub store: crate::args::StoreArgs,
}

#[derive(Args, Debug)]
pub struct FramesArgs {
    /// Frame rate(s) to play, frames per second; a list sweeps (default 60).
    #[arg(long, value_name = "FPS[,FPS...]", value_parser = |s: &str| list(s, punctual_sim::behaviour::parse_fps))]
    pub fps: Option<List<u64>>,
    /// Frames in the clip (default 500, as in Etsion Fig. 1).
    #[arg(long, default_value_t = 500, value_name = "N")]
    pub frames: u64,
    /// Start shifts, spread evenly over one tick (default 60).
    #[arg(long, default_value_t = 60, value_name = "N")]
    pub shifts: u32,
    /// How the player wakes: an alarm interval (default 4ms, Xine's) or "frame" (an alarm per frame).
    #[arg(long, value_name = "DURATION|frame", value_parser = poll)]
    pub poll: Option<Poll>,
    /// Background tasks competing with the player (same labels as --workload).
    #[arg(short = 'w', long, value_name = "SPEC", value_parser = workload)]
    pub workload: Option<Workload>,
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
    #[arg(short = 'w', long, value_name = "SPEC", value_parser = workload)]
    pub workload: Option<Workload>,
    #[command(flatten)]
    pub knobs: Knobs,
    #[command(flatten)]
    pub out: SimOutput,
}

/// A comma-separated list of values (a sweep).
#[derive(Clone, Debug)]
pub struct List<T>(pub Vec<T>);

/// A workload as written (its label) and its tasks.
#[derive(Clone, Debug)]
pub struct Workload {
    pub spec: String,
    pub tasks: Vec<TaskSpec>,
}

fn workload(s: &str) -> Result<Workload, String> {
    Ok(Workload {
        spec: s.to_string(),
        tasks: punctual_sim::parse_workload(s)?,
    })
}

/// `hint`: the unit a bare number most likely meant for this flag (`s` for `-D 60`).
fn hinting(s: &str, hint: &'static str) -> Result<u64, String> {
    punctual_time::parse_duration_hinting(s, hint).map_err(|e| e.to_string())
}

fn list<T>(s: &str, parse: impl Fn(&str) -> Result<T, String>) -> Result<List<T>, String> {
    let items: Vec<&str> = s.split(',').map(str::trim).collect();
    if items.iter().any(|i| i.is_empty()) {
        return Err(format!(
            "'{s}' has an empty entry; write a comma-separated list, e.g. 100,1000"
        ));
    }
    items
        .into_iter()
        .map(parse)
        .collect::<Result<Vec<T>, String>>()
        .map(List)
}

/// `frame`, or an alarm interval of more than zero (checked here, not only by the simulator,
/// whose messages name the player task and, for an absurd interval, the duration it implies).
fn poll(s: &str) -> Result<Poll, String> {
    match s {
        "frame" => Ok(Poll::PerFrame),
        _ => match crate::args::wait_duration(s) {
            Ok(0) => Err("must be more than zero, e.g. 4ms; or frame".into()),
            Ok(ns) => Ok(Poll::Every(ns)),
            Err(e) => Err(format!("{e}; or frame")),
        },
    }
}

/// Apply the command-line knobs over a base configuration; returns the sweep lists.
fn apply(
    k: &Knobs,
    base: &mut RunConfig,
    hz: &mut Vec<u32>,
    quanta: &mut Vec<Quantum>,
) -> Result<(), Failure> {
    if let Some(List(h)) = &k.hz {
        hz.clone_from(h);
    }
    if let Some(List(q)) = &k.quantum {
        quanta.clone_from(q);
    }
    base.policy = k.policy.unwrap_or(base.policy);
    base.timer = k.timer.unwrap_or(base.timer);
    base.cpus = k.cpus.unwrap_or(base.cpus);
    set(&mut base.duration, k.duration);
    set(&mut base.seed, k.seed);
    set(&mut base.costs.irq_direct, k.irq_cost);
    set(&mut base.costs.irq_indirect, k.irq_indirect);
    set(&mut base.costs.switch, k.switch_cost);
    set(&mut base.entry_interval, k.entry_interval);
    set(&mut base.overshoot, k.overshoot);
    set(&mut base.max_events, k.max_events);
    if k.jobs == 0 {
        return Err(Failure::usage("-j/--jobs: must be at least 1"));
    }
    Ok(())
}

/// A value given on the command line replaces the configuration's.
fn set(to: &mut u64, given: Option<u64>) {
    if let Some(v) = given {
        *to = v;
    }
}

/// `--json`, `--csv`, `--plot` and `--fail-above`, paths checked.
fn outputs(out: &SimOutput) -> Result<Outputs, Failure> {
    out.store.apply(
        Outputs::new()
            .json_csv(out.json.as_ref(), out.csv.as_ref())?
            .figure_file("--plot", out.plot.as_ref())?
            .fail_above(out.fail_above),
    )
}

pub fn run(a: SimulateArgs, env: &Env) -> anyhow::Result<Exit> {
    match a.sub {
        Some(SimulateCmd::Frames(f)) => run_frames(f, env),
        Some(SimulateCmd::Scenario(s)) => {
            let sc = punctual_sim::scenario::load(&s.file).map_err(|e| match e {
                punctual_sim::SimError::Io(m) => Failure::usage(m),
                other => Failure::usage(other.to_string()),
            })?;
            let (mut base, mut hz, mut quanta) = (sc.base, sc.hz, sc.quanta);
            if let Some(w) = &s.workload {
                base.tasks.clone_from(&w.tasks);
            }
            apply(&s.knobs, &mut base, &mut hz, &mut quanta)?;
            // A value from the file is refused naming the file (the checks name the flags that
            // can override it).
            for c in base.sweep(&hz, &quanta) {
                c.validate().map_err(|e| {
                    Failure::usage(format!(
                        "{}: {e}",
                        punctual_time::text::display_path(&s.file)
                    ))
                })?;
            }
            let label = sc.name.unwrap_or_else(|| s.file.display().to_string());
            run_sweep(base.sweep(&hz, &quanta), &s.knobs, &s.out, Some(label), env)
        }
        None => {
            let Some(w) = &a.workload else {
                return Err(Failure::usage(
                    "give a workload (-w/--workload cont:8,blk:2), or use `punctual simulate frames` or `punctual simulate scenario FILE`",
                )
                .into());
            };
            let mut base = RunConfig {
                tasks: w.tasks.clone(),
                ..RunConfig::default()
            };
            let (mut hz, mut quanta) = (vec![base.hz], vec![base.quantum]);
            apply(&a.knobs, &mut base, &mut hz, &mut quanta)?;
            run_sweep(
                base.sweep(&hz, &quanta),
                &a.knobs,
                &a.out,
                Some(w.spec.clone()),
                env,
            )
        }
    }
}

fn run_sweep(
    cfgs: Vec<RunConfig>,
    knobs: &Knobs,
    out: &SimOutput,
    workload: Option<String>,
    env: &Env,
) -> anyhow::Result<Exit> {
    // Everything is checked before anything runs.
    let mut m = Sweep::new(cfgs, knobs.jobs, workload)?;
    let outputs = outputs(out)?;
    Ok(drive(&mut m, &outputs, env)?)
}

fn run_frames(f: FramesArgs, env: &Env) -> anyhow::Result<Exit> {
    let mut base = RunConfig::default();
    let (mut hz, mut quanta) = (vec![100u32], vec![base.quantum]);
    apply(&f.knobs, &mut base, &mut hz, &mut quanta)?;
    if f.knobs.duration.is_some() {
        return Err(Failure::usage(
            "-D/--duration: frames runs as long as the clip; set --frames instead",
        )
        .into());
    }
    if quanta.len() > 1 {
        return Err(Failure::usage("-q/--quantum: frames takes one quantum").into());
    }
    let fps = f.fps.map_or(vec![60_000], |List(l)| l);
    let poll = f
        .poll
        .unwrap_or(Poll::Every(punctual_sim::behaviour::defaults::XINE_POLL));
    let background = f.workload.map(|w| w.tasks).unwrap_or_default();
    let base = FramesConfig {
        frames: f.frames,
        shifts: f.shifts,
        poll,
        timer: base.timer,
        policy: base.policy,
        quantum: quanta[0],
        costs: base.costs,
        background,
        seed: base.seed,
        max_events: base.max_events,
        ..FramesConfig::default()
    };
    let mut m = Frames::new(&base, &hz, &fps)?;
    let outputs = outputs(&f.out)?;
    Ok(drive(&mut m, &outputs, env)?)
}
