//! What runs become for people and programs: result-document series (SPEC section 3, one per task
//! and metric, plus pooled series per workload group) and text tables.

use crate::frames::FramesResult;
use crate::{pooled, RunResult, TaskResult};
use punctual_result::{Series, Table};
use punctual_stats::Recorder;
use punctual_time::format_ns;
use serde_json::{json, Value};

/// Series kinds: the one vocabulary of the result document.
pub use punctual_result::doc::kind;

/// Short label of a run inside a sweep: `100Hz 60ms`.
pub fn run_label(r: &RunResult) -> String {
    format!("{}Hz {}", r.config.hz, r.config.quantum.label())
}

fn ratio(v: Option<f64>) -> Value {
    v.map_or(Value::Null, |x| json!((x * 1e6).round() / 1e6))
}

/// The per-task numbers that are not distributions, as series extras.
fn task_extras(s: Series, r: &RunResult, tasks: &[&TaskResult]) -> Series {
    let tick = r.tick_ns();
    let consumed: u64 = tasks.iter().map(|t| t.stats.consumed_ns).sum();
    let billed: u64 = tasks.iter().map(|t| t.stats.billed_ticks).sum();
    let quanta: u64 = tasks.iter().map(|t| t.stats.quanta).sum();
    let missed: u64 = tasks.iter().map(|t| t.stats.missed_quanta).sum();
    let sum = |f: fn(&TaskResult) -> u64| tasks.iter().map(|t| f(t)).sum::<u64>();
    let sim = r.simulated_ns.max(1);
    let mut s = s
        .with("tasks", tasks.len())
        .with("behaviour", tasks[0].behaviour)
        .with("hz", r.config.hz)
        .with("quantum_ns", r.config.quantum_ticks() * tick)
        .with("policy", r.config.policy.name())
        .with("timer", r.config.timer.name())
        .with("consumed_ns", consumed)
        .with("billed_ticks", billed)
        .with("billed_ns", billed * tick)
        .with(
            "billing_ratio",
            ratio((consumed > 0).then(|| billed as f64 * tick as f64 / consumed as f64)),
        )
        .with("quanta", quanta)
        .with("missed_quanta", missed)
        .with(
            "missed_quanta_fraction",
            ratio((quanta > 0).then(|| missed as f64 / quanta as f64)),
        )
        .with(
            "quanta_per_s",
            ratio(Some(quanta as f64 * 1e9 / sim as f64 / tasks.len() as f64)),
        )
        .with(
            "cpu_share",
            ratio(Some(consumed as f64 / sim as f64 / tasks.len() as f64)),
        )
        .with("wakeups", sum(|t| t.stats.wakeups))
        .with("overruns", sum(|t| t.stats.overruns));
    if tasks[0].behaviour == "player" {
        s = s
            .with("frames_shown", sum(|t| t.stats.frames_shown))
            .with("frames_skipped", sum(|t| t.stats.frames_skipped))
            .with("frames_undecoded", sum(|t| t.stats.frames_undecoded));
    }
    if tasks[0].behaviour == "periodic" {
        s = s.with("jobs", sum(|t| t.stats.jobs));
    }
    s
}

fn series_for(name: &str, r: &RunResult, tasks: &[&TaskResult]) -> Vec<Series> {
    let mut out = Vec::new();
    let q = pooled(tasks.iter().map(|t| t.stats.effective_quantum.clone())).unwrap_or_default();
    out.push(task_extras(
        Series::from_recorder(name, kind::EFFECTIVE_QUANTUM, None, &q),
        r,
        tasks,
    ));
    if let Some(mut lat) = pooled(tasks.iter().map(|t| t.stats.alarm_latency.clone())) {
        lat.add_missed(tasks.iter().map(|t| t.stats.missed_periods).sum());
        out.push(
            Series::from_recorder(name, kind::ALARM_LATENCY, None, &lat)
                .with("hz", r.config.hz)
                .with("tasks", tasks.len()),
        );
        let late = pooled(tasks.iter().map(|t| t.stats.alarm_lateness.clone())).unwrap_or_default();
        out.push(
            Series::from_recorder(name, kind::ALARM_LATENESS, None, &late)
                .with("hz", r.config.hz)
                .with("tasks", tasks.len()),
        );
    }
    if let Some(l) = pooled(tasks.iter().map(|t| t.stats.loop_deviation.clone())) {
        // KURT Fig. 3.2: how far the time between loops is from the select() timeout.
        out.push(
            Series::from_recorder(format!("{name} loop"), kind::INTERVAL_DEVIATION, None, &l)
                .with("hz", r.config.hz)
                .with("tasks", tasks.len()),
        );
    }
    if let Some(f) = pooled(tasks.iter().map(|t| t.stats.frame_lateness.clone())) {
        out.push(
            Series::from_recorder(name, kind::FRAME_LATENESS, None, &f)
                .with("hz", r.config.hz)
                .with("tasks", tasks.len()),
        );
    }
    out
}

/// Every series of a set of runs: per task and metric, then pooled per group of several tasks.
pub fn series(runs: &[RunResult]) -> Vec<Series> {
    let sweep = runs.len() > 1;
    let mut out = Vec::new();
    for r in runs {
        let suffix = if sweep {
            format!(" @{}", run_label(r))
        } else {
            String::new()
        };
        for t in &r.tasks {
            out.extend(series_for(&format!("{}{suffix}", t.name), r, &[t]));
        }
        for (g, tasks) in r.groups() {
            if tasks.len() > 1 {
                out.extend(series_for(
                    &format!("{g} ({} tasks){suffix}", tasks.len()),
                    r,
                    &tasks,
                ));
            }
        }
    }
    out
}

/// Top-level extras: `events`, `simulated_ns`, and one summary per run.
pub fn run_summaries(runs: &[RunResult]) -> Value {
    Value::Array(
        runs.iter()
            .map(|r| {
                let c = &r.config;
                json!({
                    "hz": c.hz,
                    "quantum_ns": c.quantum_ticks() * r.tick_ns(),
                    "quantum_ticks": c.quantum_ticks(),
                    "policy": c.policy.name(),
                    "timer": c.timer.name(),
                    "cpus": c.cpus,
                    "seed": c.seed,
                    "events": r.events,
                    "simulated_ns": r.simulated_ns,
                    "busy_ns": r.busy_ns(),
                    "overhead_ns": r.overhead_ns(),
                    "interrupts": r.cpus.iter().map(|x| x.interrupts).sum::<u64>(),
                    "ticks": r.cpus.iter().map(|x| x.ticks).sum::<u64>(),
                    "context_switches": r.cpus.iter().map(|x| x.context_switches).sum::<u64>(),
                    "epoch_recalculations": r.recalculations,
                })
            })
            .collect(),
    )
}

fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{:.2} %", x * 100.0))
}

/// The main table: one row per workload group (per run in a sweep).
pub fn table(runs: &[RunResult]) -> Table {
    let first = &runs[0].config;
    let title = format!(
        "Simulated: policy {}, timer {}, {} CPU(s), {} per run, seed {}",
        first.policy.name(),
        first.timer.name(),
        first.cpus,
        format_ns(first.duration),
        first.seed
    );
    let mut t = Table::new(&[
        "HZ",
        "quantum",
        "tasks",
        "n",
        "CPU",
        "billing",
        "missed",
        "quanta/s",
        "quantum p50",
        "alarm p90",
        "p99",
        "max",
        "frames",
    ])
    .titled(title);
    for (i, r) in runs.iter().enumerate() {
        if i > 0 {
            t.rule();
        }
        let tick = r.tick_ns();
        for (g, tasks) in r.groups() {
            let consumed: u64 = tasks.iter().map(|x| x.stats.consumed_ns).sum();
            let billed: u64 = tasks.iter().map(|x| x.stats.billed_ticks).sum();
            let quanta: u64 = tasks.iter().map(|x| x.stats.quanta).sum();
            let missed: u64 = tasks.iter().map(|x| x.stats.missed_quanta).sum();
            let q = pooled(tasks.iter().map(|x| x.stats.effective_quantum.clone()));
            let lat = pooled(tasks.iter().map(|x| x.stats.alarm_latency.clone()));
            let sim = r.simulated_ns.max(1) as f64;
            let shown: u64 = tasks.iter().map(|x| x.stats.frames_shown).sum();
            let skipped: u64 = tasks.iter().map(|x| x.stats.frames_skipped).sum();
            let lat_cell =
                |f: &dyn Fn(&Recorder) -> u64| lat.as_ref().map_or("-".into(), |l| format_ns(f(l)));
            t.row([
                r.config.hz.to_string(),
                format_ns(r.config.quantum_ticks() * tick),
                g.clone(),
                tasks.len().to_string(),
                format!("{:.1} %", consumed as f64 * 100.0 / sim),
                if consumed > 0 {
                    format!("{:.3}", billed as f64 * tick as f64 / consumed as f64)
                } else {
                    "-".into()
                },
                pct((quanta > 0).then(|| missed as f64 / quanta as f64)),
                format!("{:.2}", quanta as f64 * 1e9 / sim / tasks.len() as f64),
                q.as_ref()
                    .map_or("-".into(), |q| format_ns(q.percentile(50_000))),
                lat_cell(&|l| l.percentile(90_000)),
                lat_cell(&|l| l.percentile(99_000)),
                lat_cell(&|l| l.max().unwrap_or(0)),
                if shown + skipped > 0 {
                    format!("{shown}/{}", shown + skipped)
                } else {
                    "-".into()
                },
            ]);
        }
    }
    t.note("CPU: share of one CPU computed by the group; billing: tick-sampled billed time over exact consumption (Etsion Table 3);");
    t.note("missed: quanta no tick saw; quanta/s per task (Table 4); alarm: from the interrupt that delivered it to the task running (Table 6);");
    t.note("frames: shown/due.");
    // KURT Fig. 3.2: the select() loops, as the time between loops against the timeout asked.
    for r in runs {
        for (g, tasks) in r.groups() {
            let Some(dev) = pooled(tasks.iter().map(|x| x.stats.loop_deviation.clone())) else {
                continue;
            };
            let spec = r.config.tasks.iter().find(|s| s.name == tasks[0].name);
            let Some(crate::behaviour::Behaviour::Select { timeout, .. }) =
                spec.map(|s| &s.behaviour)
            else {
                continue;
            };
            let timeout = *timeout;
            t.note(format!(
                "{g} at {} Hz ({} timers): {} loops, time between loops p50 {}, max {} for a {} select() timeout (KURT Fig. 3.2)",
                r.config.hz,
                r.config.timer.name(),
                dev.count(),
                format_ns(timeout + dev.percentile(50_000)),
                format_ns(timeout + dev.max().unwrap_or(0)),
                format_ns(timeout)
            ));
        }
    }
    t
}

/// Per run: events, interrupts, overhead, and CPU-bound throughput against the first run of the
/// sweep (Etsion Figs. 2, 3 and 8: the price of a faster clock).
pub fn overhead_table(runs: &[RunResult]) -> Table {
    let mut t = Table::new(&[
        "HZ",
        "quantum",
        "events",
        "interrupts/s",
        "switches/s",
        "overhead",
        "idle",
        "cpu-bound work",
        "vs first",
    ])
    .titled("Overhead and throughput");
    let cpu_work = |r: &RunResult| -> Option<u64> {
        let w: u64 = r
            .tasks
            .iter()
            .filter(|x| x.behaviour == "cpu")
            .map(|x| x.stats.consumed_ns)
            .sum();
        (w > 0).then_some(w)
    };
    let base = cpu_work(&runs[0]).map(|w| w as f64 / runs[0].simulated_ns.max(1) as f64);
    for r in runs {
        let sim = r.simulated_ns.max(1) as f64;
        let cpus = r.cpus.len() as f64;
        let irqs: u64 = r.cpus.iter().map(|c| c.interrupts).sum();
        let sw: u64 = r.cpus.iter().map(|c| c.context_switches).sum();
        let idle: u64 = r.cpus.iter().map(|c| c.idle_ns).sum();
        let work = cpu_work(r).map(|w| w as f64 / sim);
        t.row([
            r.config.hz.to_string(),
            format_ns(r.config.quantum_ticks() * r.tick_ns()),
            r.events.to_string(),
            format!("{:.0}", irqs as f64 * 1e9 / sim),
            format!("{:.1}", sw as f64 * 1e9 / sim),
            format!("{:.3} %", r.overhead_ns() as f64 * 100.0 / sim / cpus),
            format!("{:.1} %", idle as f64 * 100.0 / sim / cpus),
            work.map_or("-".into(), |w| format!("{:.3} %", w * 100.0)),
            match (work, base) {
                (Some(w), Some(b)) if b > 0.0 => format!("{:+.3} %", (b / w - 1.0) * 100.0),
                _ => "-".into(),
            },
        ]);
    }
    t.note("overhead: interrupt handlers, cache refills and context switches, as a share of all CPU time;");
    t.note("vs first: added time to do the same CPU-bound work, against the first row (Etsion Figs. 2, 3).");
    let refills: Vec<String> = runs
        .iter()
        .filter(|r| r.cpus.iter().any(|c| c.refills > 0))
        .map(|r| {
            let ns: u64 = r.cpus.iter().map(|c| c.refill_ns).sum();
            let share = ns as f64 * 100.0 / r.simulated_ns.max(1) as f64 / r.cpus.len() as f64;
            format!("{} Hz {share:.2} %", r.config.hz)
        })
        .collect();
    if !refills.is_empty() {
        t.note(format!(
            "of the overhead, working sets refilled after switches (footprint_kib): {}.",
            refills.join(", ")
        ));
    }
    t
}

/// Per start shift: shown, skipped, which frames of the cycle, the achieved rate; then ranges.
pub fn frames_tables(results: &[FramesResult]) -> Vec<Table> {
    let mut out = Vec::new();
    let mut summary = Table::new(&[
        "fps",
        "HZ",
        "timer",
        "frames",
        "shifts",
        "skipping",
        "achieved mean",
        "min",
        "max",
    ])
    .titled("Frame rate by start shift (Etsion Section 5, Fig. 1)");
    for f in results {
        let c = &f.config;
        summary.row([
            fps_label(c.fps_milli),
            c.hz.to_string(),
            c.timer.name().to_string(),
            c.frames.to_string(),
            f.shifts.len().to_string(),
            format!("{:.1} %", f.share_skipping() * 100.0),
            format!("{:.2}", f.mean_fps()),
            format!("{:.2}", f.min_fps()),
            format!("{:.2}", f.max_fps()),
        ]);
    }
    summary.note("skipping: share of start shifts that skipped at least one frame; rates in frames per second.");
    out.push(summary);
    for f in results {
        let c = &f.config;
        let mut t =
            Table::new(&["start shift", "to", "skipped frames", "achieved fps"]).titled(format!(
                "{} fps at {} Hz ({}): which shifts skip which frames (Etsion Fig. 5)",
                fps_label(c.fps_milli),
                c.hz,
                c.timer.name()
            ));
        for (from, to, pos) in f.shift_ranges() {
            let fps = f
                .shifts
                .iter()
                .find(|s| s.shift_ns == from)
                .map_or(0.0, |s| s.achieved_fps);
            let which = match (f.cycle_frames, pos.is_empty()) {
                (_, true) => "none".to_string(),
                (Some(n), false) => {
                    let list: Vec<String> = pos.iter().map(|p| (p + 1).to_string()).collect();
                    format!("frame {} of every {n}", list.join(", "))
                }
                (None, false) => "some".to_string(),
            };
            t.row([format_ns(from), format_ns(to), which, format!("{fps:.2}")]);
        }
        t.note("start shift: from the first frame's display time to the first tick after it (midpoints of equal slices of a tick).");
        out.push(t);
    }
    out
}

pub fn fps_label(fps_milli: u64) -> String {
    if fps_milli.is_multiple_of(1000) {
        (fps_milli / 1000).to_string()
    } else {
        format!("{:.3}", fps_milli as f64 / 1000.0)
    }
}

/// Frames series: one per shift (frame lateness), with the counts as extras.
pub fn frames_series(results: &[FramesResult]) -> Vec<Series> {
    let mut out = Vec::new();
    for f in results {
        let c = &f.config;
        for s in &f.shifts {
            out.push(
                Series::from_recorder(
                    format!(
                        "{} fps @{}Hz shift {}",
                        fps_label(c.fps_milli),
                        c.hz,
                        format_ns(s.shift_ns)
                    ),
                    kind::FRAME_LATENESS,
                    None,
                    &s.lateness,
                )
                .with("fps", c.fps_milli as f64 / 1000.0)
                .with("hz", c.hz)
                .with("timer", c.timer.name())
                .with("shift_ns", s.shift_ns)
                .with("frames_shown", s.shown)
                .with("frames_skipped", s.skipped)
                .with("achieved_fps", (s.achieved_fps * 1e4).round() / 1e4)
                .with(
                    "skipped_positions",
                    s.skipped_positions
                        .iter()
                        .map(|p| p + 1)
                        .collect::<Vec<_>>(),
                )
                .with("cycle_frames", f.cycle_frames),
            );
        }
    }
    out
}

/// A figure for a set of runs: alarm latency against percentile per group, or the effective
/// quantum when no task sets alarms.
pub fn plot(runs: &[RunResult]) -> Result<String, punctual_plot::PlotError> {
    let sweep = runs.len() > 1;
    let mut lat = Vec::new();
    let mut quanta = Vec::new();
    for r in runs {
        for (g, tasks) in r.groups() {
            let label = if sweep {
                format!("{g} @{}", run_label(r))
            } else {
                g.clone()
            };
            if let Some(l) = pooled(tasks.iter().map(|t| t.stats.alarm_latency.clone())) {
                lat.push((label.clone(), l));
            }
            if let Some(q) = pooled(tasks.iter().map(|t| t.stats.effective_quantum.clone())) {
                quanta.push((label, q));
            }
        }
    }
    if !lat.is_empty() {
        let refs: Vec<(String, &Recorder)> = lat.iter().map(|(l, r)| (l.clone(), r)).collect();
        punctual_plot::percentile_plot("Simulated alarm latency (interrupt to running)", &refs)
    } else {
        let refs: Vec<(String, &Recorder)> = quanta.iter().map(|(l, r)| (l.clone(), r)).collect();
        punctual_plot::percentile_plot_of("Simulated effective quantum", "quantum length", &refs)
    }
}

/// Achieved frame rate against start shift, one line per frames study.
pub fn frames_plot(results: &[FramesResult]) -> Result<String, punctual_plot::PlotError> {
    let lines: Vec<punctual_plot::Line> = results
        .iter()
        .map(|f| punctual_plot::Line {
            label: format!("{} fps @ {} Hz", fps_label(f.config.fps_milli), f.config.hz),
            points: f
                .shifts
                .iter()
                .map(|s| (s.shift_ns as f64 / 1e6, s.achieved_fps))
                .collect(),
        })
        .collect();
    punctual_plot::line_plot(
        "Achieved frame rate by start shift",
        "start shift (ms)",
        "frames per second",
        &lines,
        false,
        false,
    )
}
