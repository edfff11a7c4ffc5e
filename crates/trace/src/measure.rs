//! `punctual trace record` and `punctual trace analyze` as measurements of the lifecycle
//! (`punctual_session::drive`).

use crate::analyze::{analyze, Analysis};
use crate::file::{read_trace_file, TraceData};
use crate::record::{record, RecordConfig, RecordProgress, RecordSummary};
use crate::render::{report, ReportOptions};
use crate::TraceError;
use punctual_measure::{Ctx, Figure, LiveSpec, Measurement, Report};
use punctual_result::{Failure, ResultDoc, Table};
use punctual_time::format_ns;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Record a trace file; its summary is the table (there is no result document to export).
pub struct Record {
    pub cfg: RecordConfig,
    progress: Arc<RecordProgress>,
}

impl Record {
    pub fn new(cfg: RecordConfig) -> Record {
        Record {
            cfg,
            progress: Arc::default(),
        }
    }
}

impl Measurement for Record {
    type Outcome = RecordSummary;

    fn label(&self) -> String {
        "recording".into()
    }
    fn live(&self) -> Option<LiveSpec> {
        let p = self.progress.clone();
        let figures = move || {
            format!(
                "{} events, {:.1} MiB, {} lost",
                p.events.load(Ordering::Relaxed),
                p.bytes.load(Ordering::Relaxed) as f64 / 1048576.0,
                p.lost.load(Ordering::Relaxed)
            )
        };
        Some(match self.cfg.duration {
            Some(d) => LiveSpec::timed(d, figures),
            None => LiveSpec::open(figures),
        })
    }
    fn run(&mut self, ctx: &Ctx) -> Result<RecordSummary, Failure> {
        self.cfg.host = Some(ctx.host());
        self.cfg.argv = ctx.command().to_vec();
        Ok(record(&self.cfg, ctx.stop(), &self.progress)?)
    }
    fn report(&self, s: RecordSummary, _ctx: &Ctx, doc: &mut ResultDoc) -> Result<Report, Failure> {
        if s.interrupted {
            doc.status = punctual_result::Status::Interrupted;
        }
        Ok(Report::tables(vec![record_table(&s, self.cfg.buffer_kb)]))
    }
}

fn record_table(s: &RecordSummary, buffer_kb: u64) -> Table {
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
            "cpu{cpu} lost {} events{}: give --buffer-size more than {buffer_kb}K",
            l.total(),
            if l.unknown_pages > 0 {
                format!(" (and {} pages of unknown count)", l.unknown_pages)
            } else {
                String::new()
            },
        ));
    }
    if s.mounted_tracefs {
        t.note(format!(
            "tracefs was not mounted: punctual mounted it at {} and unmounted it",
            s.tracefs.display()
        ));
    }
    t
}

/// Analyse a trace file: the tables of [`crate::render`], a result document and figures.
pub struct Analyze {
    pub file: PathBuf,
    pub opts: ReportOptions,
    /// Accept a damaged or truncated file.
    pub partial: bool,
}

impl Analyze {
    /// Read and analyse now (the answers to bad input, a missing task among them, come before
    /// anything is written).
    pub fn load(&self) -> Result<(TraceData, Analysis), Failure> {
        let trace = read_trace_file(&self.file).map_err(|e| {
            // "not a punctual trace file" alone does not say which file (issue 19's bad-input run).
            let mut f = Failure::from(TraceError::from(e));
            let shown = punctual_time::text::display_path(&self.file);
            if !f.message.contains(shown.as_str()) {
                f.message = format!("{shown}: {}", f.message);
            }
            f
        })?;
        let analysis = analyze(&trace);
        if let Some(sel) = &self.opts.task {
            if analysis.select(sel).is_empty() {
                return Err(Failure::usage(format!(
                    "--task {sel}: no such thread, process or name in this trace"
                )));
            }
        }
        Ok((trace, analysis))
    }
}

impl Measurement for Analyze {
    type Outcome = (TraceData, Analysis);

    fn label(&self) -> String {
        "analysing".into()
    }
    fn run(&mut self, _ctx: &Ctx) -> Result<Self::Outcome, Failure> {
        self.load()
    }
    fn report(
        &self,
        (trace, analysis): Self::Outcome,
        ctx: &Ctx,
        doc: &mut ResultDoc,
    ) -> Result<Report, Failure> {
        let r = report(&analysis, &trace, &self.opts);
        if !trace.integrity.complete() {
            if !self.partial {
                let tables: Vec<String> = r.tables.iter().map(Table::render).collect();
                ctx.show(&format!("{}\n", tables.join("\n")), false);
                return Err(Failure::usage(format!(
                    "{}: damaged or truncated trace file: {}. The tables above cover what could be read; \
                     pass --partial to accept it (exports are then written)",
                    self.file.display(),
                    trace.integrity.describe()
                )));
            }
            ctx.note(format!(
                "warning: damaged or truncated trace file: {}",
                trace.integrity.describe()
            ));
        }
        if let Some(host) = &trace.header.host {
            doc.host = host.clone();
        }
        doc.started_at = trace.header.started_at.clone();
        if let Some(t) = &trace.trailer {
            doc.ended_at = t.ended_at.clone();
        }
        let s = &mut doc.settings.extra;
        s.insert("hz".into(), self.opts.hz.clone().into());
        s.insert("phase_ns".into(), self.opts.phase_ns.into());
        s.insert("by".into(), self.opts.by.name().into());
        doc.series = r.series;
        doc.extra = r.extra;
        Ok(Report {
            tables: r.tables,
            text: String::new(),
            figures: r
                .figures
                .into_iter()
                .map(|(name, svg)| Figure { name, svg })
                .collect(),
            ..Report::default()
        })
    }
}
