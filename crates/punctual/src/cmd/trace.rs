//! `punctual trace record|analyze`: kernel scheduling traces through a private tracefs instance
//! (klogger's successor), and the seeds' answers from them.

use crate::cli::{duration, DmaLatency, RtArgs};
use crate::session::{show, Exports, Live, Session};
use clap::{Args, Subcommand};
use punctual_result::export::{Csv, Json};
use punctual_result::{Failure, Output, Table};
use punctual_rt::Policy;
use punctual_time::format_ns;
use punctual_trace::analyze::{analyze, GroupBy};
use punctual_trace::file::read_trace_file;
use punctual_trace::kernel::{parse_size_kb, EventGroups};
use punctual_trace::record::{record, RecordConfig, RecordProgress};
use punctual_trace::render::{report, ReportOptions};
use punctual_trace::TraceError;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

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
    #[arg(short = 'D', long, value_parser = duration, value_name = "DURATION", conflicts_with = "command")]
    pub duration: Option<u64>,
    /// Event groups: sched (switches, wake-ups, forks, exits), irq (handlers, softirqs, system
    /// vectors), timer (hrtimer callbacks), or all.
    #[arg(long, default_value = "sched,irq,timer", value_name = "GROUPS")]
    pub events: String,
    /// Ring buffer per CPU (K, M or G).
    #[arg(long, default_value = "4M", value_name = "SIZE")]
    pub buffer_size: String,
    /// Longest time the drain sleeps between passes over the buffers.
    #[arg(long, default_value = "100ms", value_parser = duration, value_name = "DURATION", hide = true)]
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
    #[arg(long, default_value = "0ns", value_parser = duration, value_name = "DURATION")]
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
}

pub fn run(cmd: TraceCmd) -> anyhow::Result<i32> {
    match cmd {
        TraceCmd::Record(a) => record_cmd(a),
        TraceCmd::Analyze(a) => analyze_cmd(a),
    }
}

fn quiet_rt() -> RtArgs {
    RtArgs {
        policy: Policy::Other,
        priority: None,
        affinity: None,
        dma_latency: DmaLatency::Off,
        no_mlock: true,
    }
}

fn record_cmd(a: RecordArgs) -> anyhow::Result<i32> {
    let Output::File(path) = &a.output else {
        return Err(Failure::usage("-o/--output -: a trace file must be a file").into());
    };
    a.output
        .check_writable()
        .map_err(|e| Failure::usage(format!("-o/--output: {e}")))?;
    let groups: EventGroups = a.events.parse().map_err(Failure::from)?;
    let buffer_kb = parse_size_kb(&a.buffer_size).map_err(Failure::from)?;
    if a.duration == Some(0) {
        return Err(Failure::usage("-D/--duration must be more than zero, e.g. 10s").into());
    }
    let command = (!a.command.is_empty()).then(|| a.command.clone());
    if let Some(c) = &command {
        punctual_trace::record::check_command(c).map_err(Failure::from)?;
    }
    let session = Session::begin(&quiet_rt())?;
    let mut cfg = RecordConfig::new(path.clone());
    cfg.groups = groups;
    cfg.buffer_kb = buffer_kb;
    cfg.duration = if command.is_some() {
        None
    } else {
        Some(a.duration.unwrap_or(10_000_000_000))
    };
    cfg.command = command;
    cfg.drain_interval = std::time::Duration::from_nanos(a.drain_interval.max(1_000_000));
    cfg.argv = std::env::args().collect();
    cfg.host = Some(session.host.clone());
    let progress = Arc::new(RecordProgress::default());
    let live = {
        let p = progress.clone();
        Live::start("recording", None, move || {
            let msg = format!(
                "{} events, {:.1} MiB, {} lost",
                p.events.load(Ordering::Relaxed),
                p.bytes.load(Ordering::Relaxed) as f64 / 1048576.0,
                p.lost.load(Ordering::Relaxed)
            );
            (0, msg)
        })
    };
    let result = record(&cfg, &session.stop, &progress);
    drop(live);
    let s = result.map_err(Failure::from)?;
    let mut t = Table::new(&["recorded", ""]).titled("Trace recorded");
    t.row(["file".to_string(), s.path.display().to_string()]);
    t.row(["duration".to_string(), format_ns(s.duration_ns)]);
    t.row([
        "events".to_string(),
        format!(
            "{} ({:.0}/s)",
            s.events,
            s.events as f64 * 1e9 / s.duration_ns.max(1) as f64
        ),
    ]);
    t.row([
        "size".to_string(),
        format!("{:.1} KiB", s.bytes as f64 / 1024.0),
    ]);
    t.row([
        "kernel events".to_string(),
        s.events_enabled.len().to_string(),
    ]);
    t.row(["lost events".to_string(), s.lost_total().to_string()]);
    t.row([
        "recorder CPU".to_string(),
        format!(
            "{} ({:.2} % of one CPU)",
            format_ns(s.recorder_cpu_ns),
            s.recorder_cpu_ns as f64 * 100.0 / s.duration_ns.max(1) as f64
        ),
    ]);
    if let Some(target) = &s.target {
        t.row([
            "command".to_string(),
            format!(
                "{} (pid {}), {}",
                target.argv.join(" "),
                target.pid,
                s.target_status
                    .map_or("still running when stopped".to_string(), |c| format!(
                        "exit status {c}"
                    ))
            ),
        ]);
    }
    for (cpu, l) in &s.lost {
        t.note(format!(
            "cpu{cpu} lost {} events{}: give --buffer-size more than {}K",
            l.total(),
            if l.unknown_pages > 0 {
                format!(" (and {} pages of unknown count)", l.unknown_pages)
            } else {
                String::new()
            },
            cfg.buffer_kb
        ));
    }
    if s.mounted_tracefs {
        t.note(format!(
            "tracefs was not mounted: punctual mounted it at {} and unmounted it",
            s.tracefs.display()
        ));
    }
    print!("{}", t.render());
    Ok(if s.interrupted || session.interrupted() {
        punctual_rt::signals::EXIT_INTERRUPTED
    } else {
        0
    })
}

fn analyze_cmd(a: AnalyzeArgs) -> anyhow::Result<i32> {
    if a.hz.is_empty() || a.hz.iter().any(|&h| h == 0 || h > 1_000_000) {
        return Err(Failure::usage(
            "--hz: give tick rates between 1 and 1000000 Hz, e.g. 100,250,1000",
        )
        .into());
    }
    let mut exports = Exports::default();
    exports.add("json", a.json.as_ref(), Json)?;
    exports.add("csv", a.csv.as_ref(), Csv)?;
    if let Some(dir) = &a.figures {
        if !dir.is_dir() {
            return Err(Failure::usage(format!(
                "--figures {}: not a directory; create it first",
                dir.display()
            ))
            .into());
        }
    }
    let trace = read_trace_file(&a.file).map_err(|e| Failure::from(TraceError::from(e)))?;
    let analysis = analyze(&trace);
    let opts = ReportOptions {
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
    };
    if let Some(sel) = &a.task {
        if analysis.select(sel).is_empty() {
            return Err(Failure::usage(format!(
                "--task {sel}: no such thread, process or name in this trace"
            ))
            .into());
        }
    }
    let r = report(&analysis, &trace, &opts);
    let mut text = String::new();
    for t in &r.tables {
        text.push_str(&t.render());
        text.push('\n');
    }
    let damaged = !trace.integrity.complete();
    if damaged && !a.partial {
        show(&Exports::default(), &text);
        return Err(Failure::usage(format!(
            "{}: damaged or truncated trace file: {}. The tables above cover what could be read; \
             pass --partial to accept it (exports are then written)",
            a.file.display(),
            trace.integrity.describe()
        ))
        .into());
    }
    if let Some(dir) = &a.figures {
        for (name, svg) in &r.figures {
            let p = dir.join(format!("{name}.svg"));
            punctual_result::output::write_atomic(&p, svg.as_bytes())?;
            text.push_str(&format!("Figure: {}\n", p.display()));
        }
    }
    let host = trace
        .header
        .host
        .clone()
        .unwrap_or_else(punctual_rt::host::detect);
    let mut doc = punctual_result::ResultDoc::new(
        std::env::args().collect(),
        host,
        trace.header.started_at.clone(),
    );
    doc.ended_at = trace
        .trailer
        .as_ref()
        .map(|t| t.ended_at.clone())
        .unwrap_or_else(punctual_result::now_rfc3339);
    doc.settings.extra.insert("hz".into(), a.hz.clone().into());
    doc.settings.extra.insert("phase_ns".into(), a.phase.into());
    doc.settings.extra.insert("by".into(), a.by.clone().into());
    doc.series = r.series;
    doc.extra = r.extra;
    if damaged {
        eprintln!(
            "punctual: warning: damaged or truncated trace file: {}",
            trace.integrity.describe()
        );
    }
    exports.write(&doc)?;
    show(&exports, &text);
    Ok(0)
}
