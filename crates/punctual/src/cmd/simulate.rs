//! `punctual simulate`: the tick-scheduler simulator (SPEC section 6). A workload on the command
//! line, `frames` (Etsion Section 5), or `scenario FILE`; sweeps over `--hz` and `--quantum` lists.
//! The measurements are `punctual_sim::measure`; this file checks the flags.

use clap::{Args, Subcommand};
use punctual_result::{Failure, Output};
use punctual_session::{drive, Env, Exit, Outputs};
use punctual_sim::frames::FramesConfig;
use punctual_sim::measure::{Frames, Sweep};
use punctual_sim::{Mechanism, Policy, Poll, Quantum, RunConfig};
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SimulateArgs {
    #[command(subcommand)]
    pub sub: Option<SimulateCmd>,
    /// Tasks: blk:N, pctK:N, cont:N, cpu:N, sort:N, periodic:N:PERIOD:WCET,
    /// select:N:TIMEOUT:WCET, typist:N, game:N, player:N:FPS, xine (comma-separated, e.g.
    /// cont:8,blk:2).
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
    #[command(flatten)]
    pub store: crate::args::StoreArgs,
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

/// `hint`: the unit a bare number most likely meant for this flag (`s` for `-D 60`).
fn dur(flag: &str, s: &Option<String>, hint: &'static str) -> Result<Option<u64>, Failure> {
    s.as_deref()
        .map(|v| punctual_time::parse_duration_hinting(v, hint).map_err(|e| usage(flag, e)))
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
    if let Some(d) = dur("-D/--duration", &k.duration, "s")? {
        base.duration = d;
    }
    if let Some(s) = k.seed {
        base.seed = s;
    }
    if let Some(d) = dur("--irq-cost", &k.irq_cost, "us")? {
        base.costs.irq_direct = d;
    }
    if let Some(d) = dur("--irq-indirect", &k.irq_indirect, "us")? {
        base.costs.irq_indirect = d;
    }
    if let Some(d) = dur("--switch-cost", &k.switch_cost, "us")? {
        base.costs.switch = d;
    }
    if let Some(d) = dur("--entry-interval", &k.entry_interval, "us")? {
        base.entry_interval = d;
    }
    if let Some(d) = dur("--overshoot", &k.overshoot, "us")? {
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

/// `--json`, `--csv`, `--plot` and `--fail-above`, paths checked.
fn outputs(out: &SimOutput) -> Result<Outputs, Failure> {
    out.store.apply(
        Outputs::new()
            .json_csv(out.json.as_ref(), out.csv.as_ref())?
            .figure_file("--plot", out.plot.as_ref())?
            .fail_above(dur("--fail-above", &out.fail_above, "us")?),
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
                base.tasks =
                    punctual_sim::parse_workload(w).map_err(|e| usage("-w/--workload", e))?;
            }
            apply(&s.knobs, &mut base, &mut hz, &mut quanta)?;
            // A value from the file is refused naming the file (the checks name the flags that
            // can override it).
            for c in sweep_configs(&base, &hz, &quanta) {
                c.validate().map_err(|e| {
                    Failure::usage(format!(
                        "{}: {e}",
                        punctual_time::text::display_path(&s.file)
                    ))
                })?;
            }
            let label = sc.name.unwrap_or_else(|| s.file.display().to_string());
            run_sweep(
                sweep_configs(&base, &hz, &quanta),
                &s.knobs,
                &s.out,
                Some(label),
                env,
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
        // Checked here, not only by the simulator, whose messages name the player task and, for
        // an absurd interval, the duration it implies.
        Some(p) => match crate::args::wait_duration(p) {
            Ok(0) => {
                return Err(usage("--poll", "must be more than zero, e.g. 4ms; or frame").into())
            }
            Ok(ns) => Poll::Every(ns),
            Err(e) => return Err(usage("--poll", format!("{e}; or frame")).into()),
        },
    };
    let background = match &f.workload {
        Some(w) => punctual_sim::parse_workload(w).map_err(|e| usage("-w/--workload", e))?,
        None => Vec::new(),
    };
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
