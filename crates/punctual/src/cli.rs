//! Command-line definitions. Flags shared by every command that measures or runs (SPEC section 2)
//! live in [`RtArgs`] and [`OutputArgs`], flattened into each command.

use clap::{Args, Parser, Subcommand};
use punctual_result::{Failure, Output};
use punctual_rt::Policy;
use punctual_session::Outputs;

#[derive(Parser, Debug)]
#[command(
    name = "punctual",
    version,
    about = "Make commodity Linux punctual, and show how punctual it is",
    long_about = "Make commodity Linux punctual, and show how punctual it is.\n\n\
        Durations always carry a unit: ns, us, ms, s, m, h (250us, 1.5ms).\n\
        Exit codes: 0 done; 1 a limit you set was exceeded; 2 bad input; 3 the system refused; \
        130 interrupted (partial results written, system restored)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// 30-second health check of this machine's timeliness: plain sleep against punctual's
    /// sleep-then-spin, idle and under load, with a verdict per deadline class.
    Check(CheckArgs),
    /// Timer wake-up latency, cyclictest-class.
    Latency(LatencyArgs),
    /// Tick-scheduler simulator: HZ, quantum, timer mechanism, policy; latency, billing, frames.
    Simulate(Box<crate::cmd::simulate::SimulateArgs>),
    /// Reproductions of the seeds' experiments.
    #[command(subcommand)]
    Experiment(ExperimentCmd),
    /// Kernel scheduling traces (tracefs): record, then analyse quanta, billing, wake-ups, IRQs.
    #[command(subcommand)]
    Trace(crate::cmd::trace::TraceCmd),
    /// Micro-measurements: context switch, trap, copy bandwidth, dispatch latency, timeline gaps, alarms.
    Bench(crate::cmd::bench::BenchArgs),
    /// The dispatcher: execute a plan (periodic tasks and one-shot events) with per-task statistics.
    Run(crate::cmd::run::RunArgs),
    /// Plans: admission control and phasing (check), the compact binary form (compile, decode).
    #[command(subcommand)]
    Plan(crate::cmd::run::PlanCmd),
    /// Real-time mode: move other tasks and IRQs off chosen CPUs; always restorable (--restore).
    Shield(crate::cmd::shield::ShieldArgs),
    /// Install libpunctual.so and punctual.h (the periodic-task C API) under a prefix.
    InstallLib(crate::cmd::install_lib::InstallLibArgs),
    /// Internal: one periodic process of the kurt-periodic experiment.
    #[command(name = "__periodic", hide = true)]
    PeriodicBody(crate::cmd::kurt::PeriodicBodyArgs),
    /// Internal: run one load body (started by punctual itself).
    #[command(name = "__load", hide = true)]
    Load(LoadBodyArgs),
}

impl Command {
    /// Processes punctual starts itself (load bodies, periodic processes).
    pub fn is_child(&self) -> bool {
        matches!(self, Command::Load(_) | Command::PeriodicBody(_))
    }
}

/// Parse a duration that must carry a unit.
pub fn duration(s: &str) -> Result<u64, String> {
    punctual_time::parse_duration_ns(s).map_err(|e| e.to_string())
}

/// `off`, `0`, or a duration (rounded down to whole microseconds).
pub fn dma_latency(s: &str) -> Result<DmaLatency, String> {
    match s {
        "off" => Ok(DmaLatency::Off),
        "0" => Ok(DmaLatency::Us(0)),
        other => {
            let ns =
                punctual_time::parse_duration_ns(other).map_err(|e| format!("{e}; or use off"))?;
            u32::try_from(ns / 1000)
                .map(DmaLatency::Us)
                .map_err(|_| format!("'{other}' is too large for a latency request"))
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DmaLatency {
    Off,
    Us(u32),
}

/// Real-time settings shared by measuring and running commands.
#[derive(Args, Debug, Clone)]
pub struct RtArgs {
    /// Scheduling policy: fifo, rr or other.
    #[arg(long, default_value = "fifo", value_name = "POLICY")]
    pub policy: Policy,
    /// Real-time priority 1-99 (default 99 for fifo/rr; other takes none).
    #[arg(short = 'p', long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=99))]
    pub priority: Option<u32>,
    /// CPUs to run on, as a list (0-3,5).
    #[arg(short = 'a', long, value_name = "CPUS")]
    pub affinity: Option<String>,
    /// Hold /dev/cpu_dma_latency at this value while running (keeps CPUs out of deep idle), or off.
    #[arg(long, default_value = "0", value_name = "off|0|DURATION", value_parser = dma_latency)]
    pub dma_latency: DmaLatency,
    /// Do not lock memory (mlockall) while measuring.
    #[arg(long)]
    pub no_mlock: bool,
}

impl RtArgs {
    /// What the session should hold, as plain data.
    pub fn want(&self) -> punctual_rt::RtWant {
        punctual_rt::RtWant {
            policy: self.policy,
            priority: self.priority(),
            mlock: !self.no_mlock,
            dma_latency_us: match self.dma_latency {
                DmaLatency::Off => None,
                DmaLatency::Us(us) => Some(us),
            },
        }
    }

    /// The scheduling class asked for (the session may fall back from it).
    pub fn sched(&self) -> punctual_rt::SchedParams {
        punctual_rt::SchedParams {
            policy: self.policy,
            priority: self.priority(),
        }
    }

    /// Check the real-time request itself (before anything changes on the system).
    pub fn validate(&self) -> Result<(), Failure> {
        self.sched()
            .validate()
            .map_err(|e| Failure::usage(format!("-p/--priority: {e}")))?;
        if let Some(cpus) = self.cpus().map_err(Failure::usage)? {
            punctual_rt::affinity::check_online(&cpus)
                .map_err(|e| Failure::usage(format!("-a/--affinity: {e}")))?;
        }
        Ok(())
    }

    /// The one CPU of `-a` (default: the last online CPU, since CPU 0 usually takes most device
    /// interrupts), for measurements that run on one CPU.
    pub fn one_cpu(&self) -> Result<usize, Failure> {
        match self.cpus().map_err(Failure::usage)? {
            Some(c) if c.len() == 1 => Ok(c[0]),
            Some(c) => Err(Failure::usage(format!(
                "-a/--affinity: this measurement runs on one CPU; give one, not {}",
                punctual_rt::format_cpu_list(&c)
            ))),
            None => Ok(punctual_rt::affinity::last_online_cpu()),
        }
    }

    pub fn priority(&self) -> u32 {
        self.priority
            .unwrap_or(if self.policy.is_realtime() { 99 } else { 0 })
    }

    pub fn cpus(&self) -> Result<Option<Vec<usize>>, String> {
        self.affinity
            .as_deref()
            .map(|a| punctual_rt::parse_cpu_list(a).map_err(|e| format!("-a/--affinity: {e}")))
            .transpose()
    }
}

impl OutputArgs {
    /// `--json`, `--csv` and `--fail-above`, paths checked.
    pub fn outputs(&self) -> Result<Outputs, Failure> {
        Ok(Outputs::new()
            .json_csv(self.json.as_ref(), self.csv.as_ref())?
            .fail_above(self.fail_above))
    }
}

/// Exports shared by every command that produces a result document.
#[derive(Args, Debug, Clone)]
pub struct OutputArgs {
    /// Write the result document (JSON, schema punctual.result/1) to FILE, or - for stdout.
    #[arg(long, value_name = "FILE")]
    pub json: Option<Output>,
    /// Write one CSV row per series to FILE, or - for stdout.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<Output>,
    /// Exit 1 if any sample exceeds this (e.g. 100us).
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub fail_above: Option<u64>,
}

#[derive(Args, Debug)]
pub struct LatencyArgs {
    /// Measuring threads (default: one per CPU in --affinity, or per online CPU), each pinned.
    #[arg(short = 't', long, value_name = "N")]
    pub threads: Option<usize>,
    /// Period between releases.
    #[arg(short = 'i', long, default_value = "1ms", value_parser = duration, value_name = "DURATION")]
    pub interval: u64,
    /// How long to measure (default 10s).
    #[arg(short = 'D', long, value_parser = duration, value_name = "DURATION", conflicts_with = "loops")]
    pub duration: Option<u64>,
    /// Stop after N samples per thread instead of after a duration.
    #[arg(short = 'l', long, value_name = "N")]
    pub loops: Option<u64>,
    /// Clock the releases are on: monotonic or realtime.
    #[arg(long, default_value = "monotonic")]
    pub clock: punctual_time::ClockId,
    /// How to wait: abs (clock_nanosleep TIMER_ABSTIME), rel (relative sleep: shows drift), timerfd,
    /// signal (POSIX timer and signal), hybrid (sleep to a margin before, then spin).
    #[arg(long, default_value = "abs")]
    pub mode: punctual_latency::Mode,
    /// Hybrid mode: how early to stop sleeping and start spinning (a duration, or auto).
    #[arg(long, value_name = "DURATION|auto")]
    pub spin_margin: Option<punctual_time::MarginPolicy>,
    /// Background load while measuring: KIND[:N][@CPUS],... (kinds: cpu, sort, io, find, build, hackbench, mem).
    #[arg(long, value_name = "SPEC")]
    pub load: Option<punctual_load::LoadSpec>,
    /// Also write cyclictest's -h histogram (1 us buckets) to FILE.
    #[arg(long, value_name = "FILE")]
    pub hist: Option<Output>,
    /// Number of 1 us buckets in --hist (cyclictest's -h N).
    #[arg(long, default_value_t = 1000, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub hist_buckets: u64,
    /// Write every sample (thread, release time, latency; ns) as CSV to FILE.
    #[arg(long, value_name = "FILE")]
    pub samples: Option<Output>,
    /// Allow intervals under 10 us (they mostly measure the measuring).
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub rt: RtArgs,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Total duration; each of the four phases gets a quarter.
    #[arg(short = 'D', long, default_value = "30s", value_parser = duration, value_name = "DURATION")]
    pub duration: u64,
    /// Period between releases.
    #[arg(short = 'i', long, default_value = "1ms", value_parser = duration, value_name = "DURATION")]
    pub interval: u64,
    /// Load for the loaded phases (default: one cpu load per online CPU, and io:1).
    #[arg(long, value_name = "SPEC")]
    pub load: Option<punctual_load::LoadSpec>,
    #[command(flatten)]
    pub rt: RtArgs,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Subcommand, Debug)]
pub enum ExperimentCmd {
    /// List the experiments.
    List,
    /// Run one experiment.
    Run(ExperimentRunArgs),
}

#[derive(Args, Debug)]
pub struct ExperimentRunArgs {
    /// Experiment name (see `punctual experiment list`).
    pub name: String,
    /// The reduced version (under a minute).
    #[arg(long)]
    pub quick: bool,
    /// Use the simulator where the experiment has a simulated half.
    #[arg(long)]
    pub sim: bool,
    /// Directory for the SVG figures (default: the results directory).
    #[arg(long, value_name = "DIR")]
    pub figures: Option<std::path::PathBuf>,
    /// Write the result document to FILE, or - for stdout.
    #[arg(long, value_name = "FILE")]
    pub json: Option<Output>,
}

#[derive(Args, Debug)]
pub struct LoadBodyArgs {
    pub kind: punctual_load::LoadKind,
    #[arg(long)]
    pub cpu: Option<usize>,
    #[arg(long)]
    pub dir: Option<std::path::PathBuf>,
}
