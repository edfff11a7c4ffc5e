//! `punctual trace record|analyze`: kernel scheduling traces through a private tracefs instance
//! (klogger's successor), and the seeds' answers from them.

use crate::args::{duration, run_duration};
use clap::{Args, Subcommand};
use punctual_result::{Failure, Output};
use punctual_session::{drive, Env, Exit, Outputs};
use punctual_trace::analyze::GroupBy;
use punctual_trace::measure::{Analyze, Record};
use punctual_trace::record::RecordConfig;
use punctual_trace::render::ReportOptions;
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum TraceCmd {
    /// Record scheduler and interrupt events into a trace file (a private tracefs instance).
    Record(RecordArgs),
    /// Analyse a trace file: effective quanta, billing at any HZ, wake-up latency, IRQ durations.
    Analyze(AnalyzeArgs),
}

#[derive(Args, Debug)]
pub struct RecordArgs {
    /// The trace file to write.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Output,
    /// How long to record (default 10s; with a COMMAND, its lifetime).
    #[arg(short = 'D', long, allow_hyphen_values = true, value_parser = run_duration, value_name = "DURATION", conflicts_with = "command")]
    pub duration: Option<u64>,
    /// Event groups: sched (switches, wake-ups, forks, exits), irq (handlers, softirqs, system
    /// vectors), timer (hrtimer callbacks), or all.
    #[arg(long, default_value = "sched,irq,timer", value_name = "GROUPS")]
    pub events: String,
    /// Ring buffer per CPU (K, M or G).
    #[arg(long, default_value = "4M", value_name = "SIZE")]
    pub buffer_size: String,
    /// Longest time the drain sleeps between passes over the buffers.
    #[arg(long, default_value = "100ms", allow_hyphen_values = true, value_parser = duration, value_name = "DURATION", hide = true)]
    pub drain_interval: u64,
    /// Trace this command from start to exit.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Args, Debug)]
pub struct AnalyzeArgs {
    /// A trace file from `punctual trace record`.
    pub file: PathBuf,
    /// Virtual tick rates to bill at (Hz, comma-separated).
    #[arg(
        long,
        default_value = "100,250,1000",
        value_name = "HZ,...",
        value_delimiter = ','
    )]
    pub hz: Vec<u32>,
    /// Phase of the virtual tick: ticks at phase + k/HZ on the trace clock.
    #[arg(long, default_value = "0ns", allow_hyphen_values = true, value_parser = duration, value_name = "DURATION")]
    pub phase: u64,
    /// Rows per process (threads summed) or per thread.
    #[arg(long, default_value = "process", value_parser = ["process", "thread"])]
    pub by: String,
    /// Rows in the task tables, busiest first.
    #[arg(long, default_value_t = 15, value_name = "N")]
    pub top: usize,
    /// Show the timeline of this task's runs and preemptions (a tid, a pid, or a name).
    #[arg(long, value_name = "PID|NAME")]
    pub task: Option<String>,
    /// Rows of the timeline.
    #[arg(long, default_value_t = 40, value_name = "N")]
    pub timeline: usize,
    /// Accept a damaged or truncated file: analyse what could be read and exit 0.
    #[arg(long)]
    pub partial: bool,
    /// Write SVG figures (quanta CDF, IRQ durations) to DIR.
    #[arg(long, value_name = "DIR")]
    pub figures: Option<PathBuf>,
    /// Write the result document (JSON) to FILE, or - for stdout.
    #[arg(long, value_name = "FILE")]
    pub json: Option<Output>,
    /// Write one CSV row per series to FILE, or - for stdout.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<Output>,
    #[command(flatten)]
    pub store: crate::args::StoreArgs,
}

pub fn run(cmd: TraceCmd, env: &Env) -> anyhow::Result<Exit> {
    match cmd {
        TraceCmd::Record(a) => record_cmd(a, env),
        TraceCmd::Analyze(a) => analyze_cmd(a, env),
    }
}

fn record_cmd(a: RecordArgs, env: &Env) -> anyhow::Result<Exit> {
    let Output::File(path) = &a.output else {
        return Err(Failure::usage("-o/--output -: a trace file must be a file").into());
    };
    a.output
        .check_writable()
        .map_err(|e| Failure::usage(format!("-o/--output: {e}")))?;
    let cfg = RecordConfig::request(
        path.clone(),
        &a.events,
        &a.buffer_size,
        a.duration,
        a.command,
        std::time::Duration::from_nanos(a.drain_interval),
    );
    let cfg = cfg.map_err(Failure::from)?;
    Ok(drive(&mut Record::new(cfg), &Outputs::new(), env)?)
}

fn analyze_cmd(a: AnalyzeArgs, env: &Env) -> anyhow::Result<Exit> {
    ReportOptions::check_hz(&a.hz).map_err(Failure::from)?;
    let mut outputs = Outputs::new().json_csv(a.json.as_ref(), a.csv.as_ref())?;
    if let Some(dir) = &a.figures {
        if !dir.is_dir() {
            return Err(Failure::usage(format!(
                "--figures {}: not a directory; create it first",
                dir.display()
            ))
            .into());
        }
        outputs = outputs.figures_dir("--figures", dir.clone())?;
    }
    let outputs = a.store.apply(outputs)?;
    let mut m = Analyze {
        file: a.file.clone(),
        opts: ReportOptions {
            hz: a.hz.clone(),
            phase_ns: a.phase,
            by: if a.by == "thread" {
                GroupBy::Thread
            } else {
                GroupBy::Process
            },
            top: a.top.max(1),
            task: a.task.clone(),
            timeline_rows: a.timeline,
        },
        partial: a.partial,
    };
    Ok(drive(&mut m, &outputs, env)?)
}
