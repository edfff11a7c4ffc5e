//! The command line: one subcommand per command module (each defines its own flags; those every
//! measuring command shares are in `args`).

use crate::cmd;
use clap::{Parser, Subcommand};

/// `punctual --version`: the version and the commit it was built from (build.rs).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("PUNCTUAL_COMMIT"),
    ")"
);

#[derive(Parser, Debug)]
#[command(
    name = "punctual",
    version = VERSION,
    about = "Make commodity Linux punctual, and show how punctual it is",
    long_about = "Make commodity Linux punctual, and show how punctual it is.\n\n\
        Durations always carry a unit: ns, us, ms, s, m, h (250us, 1.5ms).\n\
        Exit codes: 0 done; 1 a limit you set was exceeded; 2 bad input; 3 the system refused; \
        130 interrupted (partial results written, system restored)."
)]
pub struct Cli {
    /// Draw tables as wide as their widest row instead of fitting the terminal (COLUMNS, else
    /// the terminal's width; output that is no terminal is never cut).
    #[arg(long, global = true, display_order = 900)]
    pub wide: bool,
    /// When punctual's cpu cgroup has no real-time budget (real-time group scheduling refuses
    /// SCHED_FIFO even to root), run in the nearest group that has one, and move back after.
    #[arg(long, global = true, display_order = 900)]
    pub move_to_rt_cgroup: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// 30-second health check of this machine's timeliness: plain sleep against punctual's
    /// sleep-then-spin, idle and under load, with a verdict per deadline class.
    Check(cmd::check::CheckArgs),
    /// Timer wake-up latency, cyclictest-class.
    Latency(cmd::latency::LatencyArgs),
    /// rt-tests' cyclictest: its flags and output formats, on punctual's latency engine.
    Cyclictest(cmd::cyclictest::CyclictestArgs),
    /// Tick-scheduler simulator: HZ, quantum, timer mechanism, policy; latency, billing, frames.
    Simulate(Box<cmd::simulate::SimulateArgs>),
    /// Reproductions of the seeds' experiments.
    #[command(subcommand)]
    Experiment(cmd::experiment::ExperimentCmd),
    /// Kernel scheduling traces (tracefs): record, then analyse quanta, billing, wake-ups, IRQs.
    #[command(subcommand)]
    Trace(cmd::trace::TraceCmd),
    /// Packet traffic (ARTS): record with kernel ns timestamps; replay with per-packet timing errors.
    #[command(subcommand)]
    Traffic(cmd::traffic::TrafficCmd),
    /// Micro-measurements: context switch, trap, copy bandwidth, dispatch latency, timeline gaps, alarms.
    Bench(cmd::bench::BenchArgs),
    /// Keep measuring timer wake-up latency and serve it as Prometheus metrics (/metrics), with a
    /// window stored in the results store every 10 minutes.
    Monitor(cmd::monitor::MonitorArgs),
    /// The dispatcher: execute a plan (periodic tasks and one-shot events) with per-task statistics.
    Run(cmd::run::RunArgs),
    /// Plans: admission control and phasing (check), the compact binary form (compile, decode).
    #[command(subcommand)]
    Plan(cmd::run::PlanCmd),
    /// Real-time mode: move other tasks and IRQs off chosen CPUs; always restorable (--restore).
    Shield(cmd::shield::ShieldArgs),
    /// Real time or real fast? McKenney's decision flow (Fig. 9) with this machine's facts and
    /// measured start latency; exit 1 when the deadline cannot be met here.
    Advise(cmd::advise::AdviseArgs),
    /// Compare results: matching series side by side with a noise-aware verdict per series.
    Compare(cmd::compare::CompareArgs),
    /// One self-contained HTML report (inline SVG, no script) of one or more results.
    Report(cmd::report::ReportArgs),
    /// The results store: list, show, export, remove and import stored results.
    Results(cmd::results::ResultsArgs),
    /// Install libpunctual.so and punctual.h (the periodic-task C API) under a prefix.
    InstallLib(cmd::install_lib::InstallLibArgs),
    /// Internal: one periodic process of the kurt-periodic experiment.
    #[command(name = "__periodic", hide = true)]
    PeriodicBody(cmd::kurt::PeriodicBodyArgs),
    /// Internal: write the man pages into a directory (the package's build).
    #[command(name = "__man", hide = true)]
    Man(cmd::docs::ManArgs),
    /// Internal: print the completion script of a shell (the package's build).
    #[command(name = "__completions", hide = true)]
    Completions(cmd::docs::CompletionsArgs),
    /// Internal: the wake client of a task converted from an rt-app file.
    #[command(name = "__rtapp-task", hide = true)]
    RtAppTask(cmd::rtapp::RtAppTaskArgs),
    /// Internal: run one load body (started by punctual itself).
    #[command(name = "__load", hide = true)]
    Load(cmd::load_body::LoadBodyArgs),
}

impl Command {
    /// Processes punctual starts itself (load bodies, periodic processes).
    pub fn is_child(&self) -> bool {
        matches!(
            self,
            Command::Load(_) | Command::PeriodicBody(_) | Command::RtAppTask(_)
        )
    }
}

/// Whether this process is one of punctual's own children (`__load`, `__periodic`,
/// `__rtapp-task`), known from the arguments before they are parsed.
pub fn child_argv() -> bool {
    std::env::args_os()
        .skip(1)
        .any(|a| matches!(a.to_str(), Some("__load" | "__periodic" | "__rtapp-task")))
}
