//! `punctual simulate`: the tick-scheduler simulator (SPEC section 6). A workload on the command
//! line, `frames` (Etsion Section 5), or `scenario FILE`; sweeps over `--hz` and `--quantum` lists.
//! The runs are assembled and checked by `punctual_sim::request`; this file reads the flags.

use crate::args::{duration, run_length, OutputArgs};
use clap::{Args, Subcommand};
use punctual_result::{Failure, Output};
use punctual_session::{drive, Env, Exit, Measurement};
use punctual_sim::request::{parse_list as list, FramesRequest, Overrides, Workload};
use punctual_sim::{Mechanism, Policy, Poll, Quantum};
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SimulateArgs {
    #[command(subcommand)]
    pub sub: Option<SimulateCmd>,
    /// Tasks: blk:N, pctK:N, cont:N, cpu:N, sort:N, periodic:N:PERIOD:WCET,
    /// select:N:TIMEOUT:WCET, typist:N, game:N, player:N:FPS, xine (comma-separated, e.g.
    /// cont:8,blk:2).
    #[arg(short = 'w', long, value_name = "SPEC", value_parser = str::parse::<Workload>)]
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
    #[arg(long, value_name = "HZ[,HZ...]", value_parser = |s: &str| list(s, punctual_sim::config::parse_hz).map(List))]
    pub hz: Option<List<u32>>,
    /// Quantum as time (60ms) or ticks (6ticks); a list sweeps (default 50ms).
    #[arg(short = 'q', long, value_name = "Q[,Q...]", value_parser = |s: &str| list(s, str::parse::<Quantum>).map(List))]
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
    #[arg(short = 'D', long, value_name = "DURATION", value_parser = run_length)]
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
#[command(mut_arg("fail_above", |a| a.help("Exit 1 if any simulated alarm latency exceeds this (e.g. 1ms)")))]
pub struct SimOutput {
    #[command(flatten)]
    pub out: OutputArgs,
    /// Write an SVG figure to FILE (alarm latency or effective quantum; frames: rate by shift).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<Output>,
}

#[derive(Args, Debug)]
pub struct FramesArgs {
    /// Frame rate(s) to play, frames per second; a list sweeps (default 60).
    #[arg(long, value_name = "FPS[,FPS...]", value_parser = |s: &str| list(s, punctual_sim::behaviour::parse_fps).map(List))]
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
    #[arg(short = 'w', long, value_name = "SPEC", value_parser = str::parse::<Workload>)]
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
    #[arg(short = 'w', long, value_name = "SPEC", value_parser = str::parse::<Workload>)]
    pub workload: Option<Workload>,
    #[command(flatten)]
    pub knobs: Knobs,
    #[command(flatten)]
    pub out: SimOutput,
}

/// A comma-separated list of values (a sweep; clap would take a `Vec` for a repeated flag).
#[derive(Clone, Debug)]
pub struct List<T>(pub Vec<T>);

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

impl Knobs {
    /// The values given, for the simulator to apply over its base.
    fn overrides(&self) -> Overrides {
        Overrides {
            hz: self.hz.clone().map(|List(l)| l),
            quanta: self.quantum.clone().map(|List(l)| l),
            policy: self.policy,
            timer: self.timer,
            cpus: self.cpus,
            duration: self.duration,
            seed: self.seed,
            irq_cost: self.irq_cost,
            irq_indirect: self.irq_indirect,
            switch_cost: self.switch_cost,
            entry_interval: self.entry_interval,
            overshoot: self.overshoot,
            max_events: self.max_events,
            jobs: self.jobs,
        }
    }
}

pub fn run(a: SimulateArgs, env: &Env) -> anyhow::Result<Exit> {
    match a.sub {
        Some(SimulateCmd::Frames(f)) => {
            let m = f.knobs.overrides().frames(FramesRequest {
                fps_milli: f.fps.map(|List(l)| l),
                frames: f.frames,
                shifts: f.shifts,
                poll: f.poll,
                background: f.workload.map(|w| w.tasks).unwrap_or_default(),
            })?;
            go(m, &f.out, env)
        }
        Some(SimulateCmd::Scenario(s)) => {
            let m = s.knobs.overrides().scenario(&s.file, s.workload.as_ref())?;
            go(m, &s.out, env)
        }
        None => {
            let Some(w) = &a.workload else {
                return Err(Failure::usage(
                    "give a workload (-w/--workload cont:8,blk:2), or use `punctual simulate frames` or `punctual simulate scenario FILE`",
                )
                .into());
            };
            go(a.knobs.overrides().sweep(w)?, &a.out, env)
        }
    }
}

/// Everything is checked before anything runs: the runs (by the simulator), then the outputs.
fn go<M: Measurement>(mut m: M, out: &SimOutput, env: &Env) -> anyhow::Result<Exit> {
    let outputs = out
        .out
        .outputs()?
        .figure_file("--plot", out.plot.as_ref())?;
    Ok(drive(&mut m, &outputs, env)?)
}
