//! `kurt-irq`: KURT's Table 4.3 on this machine. For each subsystem punctual generates that kind of
//! activity (console writes through a pseudo-terminal, UDP over loopback, an fsync writer, 100 us
//! sleeps, map/unmap with a sibling thread on the other CPU, cross-CPU ping-pong) while it traces the
//! interrupt handlers, and reports the durations of the handlers belonging to that subsystem.
//!
//! measure: [`KurtIrq::run`] (one traced phase per subsystem, [`phase`]); model: [`Model`];
//! tables: [`tables`]; figures: [`figures`].

use crate::traced::{phases_live, trace_beside};
use crate::workload::{self, Generators};
use punctual_result::{Failure, ResultDoc, Series, Table};
use punctual_rt::RtWant;
use punctual_session::{Ctx, Figure, LiveSpec, Measurement, Report};
use punctual_stats::Recorder;
use punctual_trace::analyze::classify::Category;
use punctual_trace::analyze::Analysis;
use punctual_trace::kernel::EventGroups;
use punctual_trace::record::RecordProgress;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub const NAME: &str = "kurt-irq";
/// The subsystems a phase generates activity for, in table order (`Other` is what the machine
/// did besides, over every phase).
const PHASES: [Category; 6] = [
    Category::Console,
    Category::Network,
    Category::Disk,
    Category::Process,
    Category::Timer,
    Category::Memory,
];

/// The activity generated for a category, in words.
fn activity(c: Category) -> &'static str {
    match c {
        Category::Console => "lines written to a pseudo-terminal",
        Category::Network => "UDP ping-pong over 127.0.0.1",
        Category::Disk => "1 MiB writes with fsync (io load)",
        Category::Process => "pipe ping-pong between CPUs",
        Category::Timer => "a thread sleeping 100 us at a time",
        Category::Memory => "mmap/touch/munmap with a sibling on the other CPU",
        Category::Other => "none (whatever the machine does)",
    }
}

/// The experiment.
pub struct KurtIrq {
    pub quick: bool,
    /// Seconds traced per phase.
    pub secs: u64,
    progress: Arc<RecordProgress>,
}

impl KurtIrq {
    pub fn new(opts: crate::Options) -> KurtIrq {
        KurtIrq {
            quick: opts.quick,
            secs: if opts.quick { 2 } else { 6 },
            progress: Arc::default(),
        }
    }

    /// Generate `c`'s activity and trace the interrupt handlers meanwhile.
    fn trace_phase(&self, ctx: &Ctx, c: Category) -> Result<Analysis, Failure> {
        let mut g = Generators::new();
        let mut loads = None;
        match c {
            Category::Console => workload::console(&mut g),
            Category::Network => workload::network(&mut g),
            Category::Disk => {
                let spec: punctual_load::LoadSpec = "io:1"
                    .parse()
                    .map_err(|e| Failure::system(format!("io load: {e}")))?;
                loads = Some(ctx.start_load(&spec)?);
            }
            Category::Process => workload::process(&mut g),
            Category::Timer => workload::timers(&mut g),
            Category::Memory => workload::memory(&mut g),
            Category::Other => {}
        }
        let irq = EventGroups {
            sched: false,
            irq: true,
            timer: false,
        };
        let traced = trace_beside(ctx, g, irq, self.secs, &self.progress);
        if let Some(l) = loads {
            l.stop();
        }
        traced
    }
}

/// What one phase traced of its own subsystem.
pub struct Phase {
    pub category: Category,
    pub hard: Recorder,
    pub soft: Recorder,
    /// The busiest sources the phase saw, described.
    pub sources: Vec<String>,
}

/// Every phase, and the handlers of no listed subsystem over all of them.
pub struct Phases {
    pub phases: Vec<Phase>,
    /// (hardirq, softirq) durations of `Other`.
    pub other: (Recorder, Recorder),
}

impl Phases {
    /// The table's rows: each phase's subsystem, then `Other`.
    fn rows(&self) -> Vec<(Category, &Recorder, &Recorder)> {
        let mut rows: Vec<_> = self
            .phases
            .iter()
            .map(|p| (p.category, &p.hard, &p.soft))
            .collect();
        rows.push((Category::Other, &self.other.0, &self.other.1));
        rows
    }
}

impl Measurement for KurtIrq {
    type Outcome = Phases;

    fn label(&self) -> String {
        NAME.into()
    }
    fn wants(&self) -> Option<RtWant> {
        Some(crate::traced::WANTS)
    }
    fn live(&self) -> Option<LiveSpec> {
        Some(phases_live(&self.progress, self.secs, PHASES.len()))
    }
    fn run(&mut self, ctx: &Ctx) -> Result<Phases, Failure> {
        let mut phases = Vec::new();
        let mut other = (Recorder::new(), Recorder::new());
        for c in PHASES {
            if ctx.stop().load(Ordering::Relaxed) {
                break;
            }
            ctx.step(format!("{}: {}", c.name(), activity(c)));
            let a = self.trace_phase(ctx, c)?;
            phases.push(phase(&a, c));
            for (cat, r) in a.by_category("hardirq") {
                if cat == Category::Other {
                    let _ = other.0.merge(&r);
                }
            }
            for (cat, r) in a.by_category("softirq") {
                if cat == Category::Other {
                    let _ = other.1.merge(&r);
                }
            }
        }
        Ok(Phases { phases, other })
    }
    fn report(&self, p: Phases, _ctx: &Ctx, doc: &mut ResultDoc) -> Result<Report, Failure> {
        crate::common::mark(doc, NAME, self.quick);
        crate::traced::unclaim_timer_slack(doc);
        for (c, hard, soft) in p.rows() {
            let (kmin, kmean, kmax) = c.kurt_table_4_3();
            let paper = serde_json::json!({"min_us": kmin, "mean_us": kmean, "max_us": kmax});
            doc.series.push(
                Series::from_recorder(c.name(), "irq_duration", None, hard)
                    .with("subsystem", c.name())
                    .with("kurt_table_4_3", paper),
            );
            doc.series.push(
                Series::from_recorder(c.name(), "softirq_duration", None, soft)
                    .with("subsystem", c.name()),
            );
        }
        doc.extra.insert(
            "phase_duration_ns".into(),
            (self.secs * 1_000_000_000).into(),
        );
        Ok(Report {
            tables: tables(&Model::of(&p)),
            figures: figures(&p),
            ..Report::default()
        })
    }
}

/// The durations of one table cell, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Durations {
    pub count: u64,
    pub min: u64,
    pub mean: u64,
    pub max: u64,
}

impl Durations {
    fn of(r: &Recorder) -> Durations {
        let s = r.summary();
        Durations {
            count: s.count,
            min: s.min,
            mean: s.mean,
            max: s.max,
        }
    }
}

/// Table 4.3's rows and what each phase traced.
pub struct Model {
    /// Per subsystem: hardirq and softirq durations.
    pub rows: Vec<(Category, Durations, Durations)>,
    /// Per phase: the busiest sources it traced.
    pub phases: Vec<(Category, Vec<String>)>,
}

impl Model {
    pub fn of(p: &Phases) -> Model {
        Model {
            rows: p
                .rows()
                .into_iter()
                .map(|(c, h, s)| (c, Durations::of(h), Durations::of(s)))
                .collect(),
            phases: p
                .phases
                .iter()
                .map(|x| (x.category, x.sources.clone()))
                .collect(),
        }
    }
}

fn us(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1000.0)
}

/// Table 4.3 with KURT's numbers beside this machine's, and what each phase generated.
pub fn tables(m: &Model) -> Vec<Table> {
    let mut t = Table::new(&[
        "Category",
        "Description (KURT)",
        "KURT min",
        "mean",
        "max",
        "hardirq n",
        "min",
        "mean",
        "max",
        "softirq n",
        "min",
        "mean",
        "max",
    ])
    .titled("Table 4.3: interrupts disabled in KURT 1998 beside handler durations here (us)");
    let cell = |d: &Durations| {
        if d.count == 0 {
            vec!["0".to_string(), "-".into(), "-".into(), "-".into()]
        } else {
            vec![d.count.to_string(), us(d.min), us(d.mean), us(d.max)]
        }
    };
    for (c, hard, soft) in &m.rows {
        let (kmin, kmean, kmax) = c.kurt_table_4_3();
        let mut row = vec![
            c.name().to_string(),
            c.description().to_string(),
            format!("{kmin:.2}"),
            format!("{kmean:.2}"),
            format!("{kmax:.2}"),
        ];
        row.extend(cell(hard));
        row.extend(cell(soft));
        t.row(row);
    }
    t.note("KURT: every cli/sti timestamped in a patched Linux kernel on a Pentium Pro. Here, on an unpatched \
            kernel: hardirq = device interrupt handlers and system vectors (they run with interrupts disabled), \
            softirq = bottom halves (they run with interrupts on, but every task on that CPU waits); each row from a \
            phase generating that activity. Only the hardirq columns measure what the thesis measured.");
    t.note("Table 4.3's text says the network maximum was 2.74 milliseconds while its table says 2.74 us; the table's value is shown.");

    let mut detail = Table::new(&["Category", "activity generated", "busiest sources traced"])
        .titled("What each phase generated and traced");
    for (c, sources) in &m.phases {
        detail.row([
            c.name().to_string(),
            activity(*c).to_string(),
            if sources.is_empty() {
                "none".into()
            } else {
                sources.join(", ")
            },
        ]);
    }
    detail.note("A pseudo-terminal runs in process context (workqueues), so console activity may raise no interrupt at all on a machine without a serial or VGA console.");
    vec![t, detail]
}

/// Figs. 4.8-4.9: as the thesis, a histogram per subsystem of how long its hard interrupt
/// handlers ran (`kurt-irq-fig4-8-<subsystem>`); none for a subsystem nothing was traced for.
pub fn figures(p: &Phases) -> Vec<Figure> {
    p.rows()
        .into_iter()
        .filter(|r| r.1.count() > 0)
        .filter_map(|(c, h, _)| {
            // About 100 bars across the range seen, at least half a microsecond each.
            let width = (h.max().unwrap_or(0) / 100).max(500);
            let svg = punctual_plot::histogram_plot(
                &format!(
                    "Figs. 4.8-4.9, {}: hard interrupt handler durations ({} events)",
                    c.name(),
                    h.count()
                ),
                "duration (us)",
                &punctual_plot::histogram_buckets(h, width),
            );
            crate::common::figure(&format!("kurt-irq-fig4-8-{}", c.name().to_lowercase()), svg).ok()
        })
        .collect()
}

/// A phase's handlers of its own subsystem, and the busiest sources it saw.
pub fn phase(a: &Analysis, c: Category) -> Phase {
    let mut p = Phase {
        category: c,
        hard: Recorder::new(),
        soft: Recorder::new(),
        sources: Vec::new(),
    };
    for s in a.sources.values().filter(|s| s.category == c) {
        match s.source.context() {
            "hardirq" => {
                let _ = p.hard.merge(&s.durations);
            }
            "softirq" => {
                let _ = p.soft.merge(&s.durations);
            }
            _ => {}
        }
    }
    // Everything the phase saw, busiest first, so a misfiled source shows.
    let mut seen: Vec<_> = a
        .sources
        .values()
        .filter(|s| s.source.context() != "hrtimer")
        .collect();
    seen.sort_by_key(|x| std::cmp::Reverse(x.durations.count()));
    p.sources = seen
        .iter()
        .take(5)
        .map(|s| {
            format!(
                "{} x{}{}",
                s.label,
                s.durations.count(),
                if s.category == c {
                    ""
                } else {
                    " (other subsystem)"
                }
            )
        })
        .collect();
    p
}
