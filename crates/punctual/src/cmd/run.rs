//! `punctual run PLAN` (the dispatcher) and `punctual plan check|compile|decode`.

use crate::args::{run_duration, share, wait_duration, ExplainArgs, OutputArgs, RtArgs};
use clap::{Args, Subcommand};
use punctual_dispatch::measure::RunPlan;
use punctual_dispatch::request::{plan_check, RunRequest};
use punctual_plan::open::{compile, open};
use punctual_plan::Plan;
use punctual_result::{Failure, Output};
use punctual_session::{drive, Env, Exit};
use punctual_time::MarginPolicy;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
#[command(mut_arg("priority", |a| a.help(
    "Real-time priority 1-99 (default 98 under fifo/rr, below the watchdog's 99; -p 99 needs --watchdog off)"
)))]
pub struct RunArgs {
    /// The plan: TOML, or compiled with `punctual plan compile`.
    pub plan: PathBuf,
    /// How long to run (default: the plan's duration, or until its last event, or until Ctrl-C).
    #[arg(short = 'D', long, allow_hyphen_values = true, value_parser = run_duration, value_name = "DURATION")]
    pub duration: Option<u64>,
    /// Spin margin: a duration, or auto (overrides the plan's spin_margin).
    #[arg(long, value_name = "DURATION|auto")]
    pub spin_margin: Option<MarginPolicy>,
    /// Run a plan that admission control refuses.
    #[arg(long)]
    pub force: bool,
    /// Largest work utilisation per CPU that admission control accepts.
    #[arg(long, default_value = "90%", value_parser = percent, value_name = "PERCENT")]
    pub bound: f64,
    /// Largest share of a CPU that is not shielded the dispatcher may spin or work on it; a plan
    /// whose releases need more to be on time is refused (shield the CPU, or raise this).
    #[arg(long, default_value = "50%", value_parser = percent, value_name = "PERCENT")]
    pub spin_budget: f64,
    /// Watchdog threshold (a CPU starved or an action stuck this long stops the run, exit 3), or off.
    /// The watchdog runs at priority 99, so the dispatcher's default is 98 while it is on.
    #[arg(long, default_value = "2s", allow_hyphen_values = true, value_parser = watchdog, value_name = "DURATION|off")]
    pub watchdog: WatchdogArg,
    /// How long to wait for wake clients to attach before the first release.
    #[arg(long, default_value = "10s", allow_hyphen_values = true, value_parser = wait_duration, value_name = "DURATION")]
    pub attach_timeout: u64,
    /// Background load while running: KIND[:N][@CPUS],... (kinds: cpu, sort, io, find, build, hackbench, mem).
    #[arg(long, value_name = "SPEC", value_parser = punctual_load::LoadSpec::parse_flag)]
    pub load: Option<punctual_load::LoadSpec>,
    /// Watch the CPUs for 0.5 s first and give automatic offsets that keep releases out of the
    /// interruptions seen (the timer tick and other periodic ones); the plan starts on their grid.
    #[arg(long)]
    pub avoid_interference: bool,
    /// Serve the running plan's metrics (Prometheus/OpenMetrics) on /metrics at ADDR, e.g.
    /// 127.0.0.1:9935: per-task lateness, missed releases, overruns, the dispatcher's margin and CPU.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    #[command(flatten)]
    pub rt: RtArgs,
    #[command(flatten)]
    pub out: OutputArgs,
    #[command(flatten)]
    pub explain: ExplainArgs,
}

#[derive(Subcommand, Debug)]
pub enum PlanCmd {
    /// Admission control and phasing: per-CPU utilisation, collisions, automatic offsets.
    Check(PlanCheckArgs),
    /// Write a plan in the compact binary form (24 bytes per event).
    Compile(PlanCompileArgs),
    /// Print a plan (TOML or compiled) as canonical TOML.
    Decode(PlanDecodeArgs),
    /// Print an rt-app task file (JSON) as the TOML plan `run` would execute.
    Convert(PlanDecodeArgs),
}

#[derive(Args, Debug)]
pub struct PlanCheckArgs {
    pub plan: PathBuf,
    /// Dispatcher CPUs (default: the plan's cpus, or the last online CPU).
    #[arg(short = 'a', long, value_name = "CPUS")]
    pub affinity: Option<String>,
    /// Largest work utilisation per CPU.
    #[arg(long, default_value = "90%", value_parser = percent, value_name = "PERCENT")]
    pub bound: f64,
    /// Spin margin assumed for the CPU cost (default: the plan's fixed margin, or 50us for auto).
    #[arg(long, allow_hyphen_values = true, value_parser = wait_duration, value_name = "DURATION")]
    pub spin_margin: Option<u64>,
    /// Largest share of a CPU that is not shielded the dispatcher may spin or work on it.
    #[arg(long, default_value = "50%", value_parser = percent, value_name = "PERCENT")]
    pub spin_budget: f64,
}

#[derive(Args, Debug)]
pub struct PlanCompileArgs {
    pub plan: PathBuf,
    /// Extra events as CSV: a header `at_ns,action,data_hex`, then one event per line.
    #[arg(long, value_name = "CSV")]
    pub events: Option<PathBuf>,
    /// Where to write the compiled plan.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Output,
}

#[derive(Args, Debug)]
pub struct PlanDecodeArgs {
    pub plan: PathBuf,
    /// Where to write the TOML (default stdout).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<Output>,
}

/// A share of a CPU: above 0 % and at most 100 %.
fn percent(s: &str) -> Result<f64, String> {
    use std::ops::Bound::{Excluded, Included};
    share(s, (Excluded(0.0), Included(100.0)))
}

/// A watchdog threshold, or off.
#[derive(Clone, Copy, Debug)]
pub struct WatchdogArg(pub Option<u64>);

fn watchdog(s: &str) -> Result<WatchdogArg, String> {
    if s == "off" {
        return Ok(WatchdogArg(None));
    }
    let ns = wait_duration(s).map_err(|e| format!("{e}; or off"))?;
    if ns < 100_000_000 {
        return Err(format!(
            "'{s}' is too short for a watchdog; use 100ms or more, or off"
        ));
    }
    Ok(WatchdogArg(Some(ns)))
}

/// A plan file: TOML, compiled, or an rt-app task file (converted; what it reads without needing
/// it is said on stderr).
fn load(path: &Path, env: &Env) -> Result<Plan, Failure> {
    let opened = open(path, &crate::cmd::rtapp::client()).map_err(Failure::usage)?;
    opened.notes.iter().for_each(|n| env.note(n));
    Ok(opened.plan)
}

pub fn plan_cmd(cmd: PlanCmd, env: &Env) -> anyhow::Result<Exit> {
    match cmd {
        PlanCmd::Check(a) => {
            let plan = load(&a.plan, env)?;
            let (affinity, margin) = (a.affinity.as_deref(), a.spin_margin);
            let (text, feasible) = plan_check(plan, affinity, a.bound, margin, a.spin_budget)?;
            env.show(&text, false);
            Ok(Exit::limit_if(!feasible))
        }
        PlanCmd::Compile(a) => {
            a.output
                .check_writable()
                .map_err(|e| Failure::usage(format!("-o/--output: {e}")))?;
            if a.output.is_stdout() {
                return Err(Failure::usage(
                    "-o/--output: a compiled plan is binary; give a file, not -",
                )
                .into());
            }
            let client = crate::cmd::rtapp::client();
            let (opened, bytes) =
                compile(&a.plan, a.events.as_deref(), &client).map_err(Failure::usage)?;
            opened.notes.iter().for_each(|n| env.note(n));
            let plan = opened.plan;
            a.output
                .write(&bytes)
                .map_err(|e| Failure::system(format!("writing {}: {e}", a.output)))?;
            env.note(&format!(
                "compiled {} task(s), {} action(s), {} event(s) into {} ({} bytes)",
                plan.tasks.len(),
                plan.actions.len(),
                plan.events.len(),
                a.output,
                bytes.len()
            ));
            Ok(Exit::Ok)
        }
        PlanCmd::Decode(a) | PlanCmd::Convert(a) => {
            let out = a.output.unwrap_or(Output::Stdout);
            out.check_writable()
                .map_err(|e| Failure::usage(format!("-o/--output: {e}")))?;
            let plan = load(&a.plan, env)?;
            let text = punctual_plan::emit::to_toml(&plan);
            out.write(text.as_bytes())
                .map_err(|e| Failure::system(format!("writing {out}: {e}")))?;
            Ok(Exit::Ok)
        }
    }
}

pub fn run(a: RunArgs, env: &Env) -> anyhow::Result<Exit> {
    // Validate everything before touching the system.
    a.rt.validate()?;
    let (mut m, notes) = RunPlan::request(RunRequest {
        plan: load(&a.plan, env)?,
        affinity: a.rt.affinity.clone(),
        duration: a.duration,
        margin: a.spin_margin,
        watchdog: a.watchdog.0,
        attach_timeout: a.attach_timeout,
        spin_budget: a.spin_budget,
        bound: a.bound,
        force: a.force,
        want: a.rt.want(),
        priority_given: a.rt.priority.is_some(),
        load: a.load.clone().unwrap_or_default(),
    })?;
    notes.iter().for_each(|n| env.note(n));
    let outputs = a.explain.outputs(a.out.outputs()?)?;
    m.explain = a.explain.config(punctual_explain::DEFAULT_BOUND_NS)?;
    if m.cfg.duration.is_none() && m.plan().is_some_and(|p| !p.tasks.is_empty()) {
        env.note("the plan has periodic tasks and no duration: running until Ctrl-C (or pass -D)");
    }
    m.avoid_interference = a.avoid_interference;
    // Bound before anything runs; served until the run's results are written.
    let _server = match &a.metrics {
        Some(addr) => Some(
            punctual_monitor::slots::serve(addr, m.live_slots(true), &m.cfg.cpus, &env.host())
                .map_err(Failure::from)?,
        ),
        None => None,
    };
    Ok(drive(&mut m, &outputs, env)?)
}
