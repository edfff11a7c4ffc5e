//! `kurt-irq`: KURT's Table 4.3 on this machine. For each subsystem punctual generates that kind of
//! activity (console writes through a pseudo-terminal, UDP over loopback, an fsync writer, 100 us
//! sleeps, map/unmap with a sibling thread on the other CPU, cross-CPU ping-pong) while it traces the
//! interrupt handlers, and reports the durations of the handlers belonging to that subsystem.

use super::{new_doc, trace_for};
use crate::analyze::classify::Category;
use crate::analyze::Analysis;
use crate::kernel::EventGroups;
use crate::workload::{self, Generators};
use punctual_result::experiment::{Context, Experiment, Figure, Report};
use punctual_result::{Failure, Series, Table};
use punctual_stats::Recorder;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

pub struct KurtIrq;

fn us(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1000.0)
}

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

struct Phase {
    category: Category,
    hard: Recorder,
    soft: Recorder,
    sources: Vec<String>,
}

impl Experiment for KurtIrq {
    fn name(&self) -> &'static str {
        "kurt-irq"
    }

    fn reproduces(&self) -> &'static str {
        "KURT thesis Table 4.3, Figs. 4.8-4.9: how long each kernel subsystem holds interrupts off"
    }

    fn duration(&self) -> &'static str {
        "36 s (--quick: 12 s)"
    }

    fn run(&self, ctx: &Context) -> Result<Report, Failure> {
        let secs: u64 = if ctx.quick { 2 } else { 6 };
        let groups = EventGroups {
            sched: false,
            irq: true,
            timer: false,
        };
        let mut phases = Vec::new();
        let mut all: BTreeMap<Category, (Recorder, Recorder)> = BTreeMap::new();
        for c in [
            Category::Console,
            Category::Network,
            Category::Disk,
            Category::Process,
            Category::Timer,
            Category::Memory,
        ] {
            if ctx.stop.load(Ordering::Relaxed) {
                break;
            }
            let mut g = Generators::new();
            let mut loads = None;
            match c {
                Category::Console => workload::console(&mut g),
                Category::Network => workload::network(&mut g),
                Category::Disk => {
                    let spec: punctual_load::LoadSpec = "io:1"
                        .parse()
                        .map_err(|e| Failure::system(format!("io load: {e}")))?;
                    loads = Some(
                        punctual_load::Loads::start(&spec, &ctx.exe)
                            .map_err(|e| Failure::system(format!("starting the io load: {e}")))?,
                    );
                }
                Category::Process => workload::process(&mut g),
                Category::Timer => workload::timers(&mut g),
                Category::Memory => workload::memory(&mut g),
                Category::Other => {}
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
            let traced = trace_for(ctx, groups, secs * 1_000_000_000);
            g.stop();
            if let Some(l) = loads {
                l.stop();
            }
            let (_, a) = traced?;
            phases.push(phase(&a, c));
            for (cat, r) in a.by_category("hardirq") {
                let _ = all
                    .entry(cat)
                    .or_insert_with(|| (Recorder::new(), Recorder::new()))
                    .0
                    .merge(&r);
            }
            for (cat, r) in a.by_category("softirq") {
                let _ = all
                    .entry(cat)
                    .or_insert_with(|| (Recorder::new(), Recorder::new()))
                    .1
                    .merge(&r);
            }
        }

        let mut t = Table::new(&[
            "Category", "KURT min", "mean", "max", "hardirq n", "min", "mean", "max", "softirq n", "min", "mean", "max",
        ])
        .titled("Table 4.3: duration for which interrupts are disabled (us), KURT 1998 beside this machine");
        let cell = |r: &Recorder| {
            if r.count() == 0 {
                vec!["0".to_string(), "-".into(), "-".into(), "-".into()]
            } else {
                let s = r.summary();
                vec![s.count.to_string(), us(s.min), us(s.mean), us(s.max)]
            }
        };
        let mut rows: Vec<(Category, Recorder, Recorder)> = phases
            .iter()
            .map(|p| (p.category, p.hard.clone(), p.soft.clone()))
            .collect();
        let other = all.get(&Category::Other).cloned().unwrap_or_default();
        rows.push((Category::Other, other.0, other.1));
        for (c, hard, soft) in &rows {
            let (kmin, kmean, kmax) = c.kurt_table_4_3();
            let mut row = vec![
                c.name().to_string(),
                format!("{kmin:.2}"),
                format!("{kmean:.2}"),
                format!("{kmax:.2}"),
            ];
            row.extend(cell(hard));
            row.extend(cell(soft));
            t.row(row);
        }
        t.note("KURT: every cli/sti timestamped in a patched Linux 2.0 on a 200 MHz Pentium Pro. Here, on an unpatched \
                kernel: hardirq = device interrupt handlers and system vectors (they run with interrupts disabled), \
                softirq = bottom halves (every task on that CPU waits); each row from a phase generating that activity.");
        t.note("Table 4.3's text says the network maximum was 2.74 milliseconds while its table says 2.74 us; the table's value is shown.");

        let mut detail = Table::new(&["Category", "activity generated", "busiest sources traced"])
            .titled("What each phase generated and traced");
        for p in &phases {
            detail.row([
                p.category.name().to_string(),
                activity(p.category).to_string(),
                if p.sources.is_empty() {
                    "none".into()
                } else {
                    p.sources.join(", ")
                },
            ]);
        }
        detail.note("A pseudo-terminal runs in process context (workqueues), so console activity may raise no interrupt at all on a machine without a serial or VGA console.");

        let mut doc = new_doc(ctx);
        doc.status = if ctx.stop.load(Ordering::Relaxed) {
            punctual_result::Status::Interrupted
        } else {
            punctual_result::Status::Ok
        };
        for (c, hard, soft) in &rows {
            let (kmin, kmean, kmax) = c.kurt_table_4_3();
            let paper = serde_json::json!({"min_us": kmin, "mean_us": kmean, "max_us": kmax});
            doc.series.push(
                Series::from_recorder(c.name(), "irq_duration", None, hard)
                    .with("subsystem", c.name())
                    .with("kurt_table_4_3", paper.clone()),
            );
            doc.series.push(
                Series::from_recorder(c.name(), "softirq_duration", None, soft)
                    .with("subsystem", c.name()),
            );
        }
        doc.extra
            .insert("phase_duration_ns".into(), (secs * 1_000_000_000).into());
        doc.ended_at = punctual_result::now_rfc3339();

        let mut figures = Vec::new();
        let named: Vec<(String, &Recorder)> = rows
            .iter()
            .filter(|r| r.1.count() > 0)
            .map(|(c, h, _)| (c.name().to_string(), h))
            .collect();
        if !named.is_empty() {
            if let Ok(svg) = punctual_plot::percentile_plot(
                "Figs. 4.8-4.9: hard interrupt handler durations per subsystem",
                &named,
            ) {
                figures.push(Figure {
                    name: "kurt-irq-fig4-8".into(),
                    svg,
                });
            }
        }
        Ok(Report {
            tables: vec![t, detail],
            doc,
            figures,
        })
    }
}

fn phase(a: &Analysis, c: Category) -> Phase {
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
