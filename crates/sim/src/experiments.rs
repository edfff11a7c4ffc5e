//! The simulated half of `etsion-latency` (Table 6, Fig. 7), printed beside the published numbers.
//! (`etsion-frames` and `etsion-billing` moved to the punctual-experiments crate.)

use crate::behaviour::parse_workload;
use crate::config::{Class, Policy, Quantum, RunConfig, TaskSpec, NS_PER_S};
use crate::report;
use crate::{pooled, simulate, Control, RunResult};
use punctual_result::experiment::{Context, Experiment, Figure, Report};
use punctual_result::{Failure, ResultDoc, Series, Table};
use punctual_stats::Recorder;
use serde_json::json;
use std::sync::atomic::Ordering;

const MS: u64 = 1_000_000;

fn new_doc(ctx: &Context) -> ResultDoc {
    let mut doc = ResultDoc::new(
        ctx.command.clone(),
        punctual_rt::host::detect(),
        punctual_result::now_rfc3339(),
    );
    doc.settings
        .extra
        .insert("clock".into(), "simulated".into());
    doc
}

fn close(doc: &mut ResultDoc, ctx: &Context, events: u64, simulated: u64) {
    doc.ended_at = punctual_result::now_rfc3339();
    doc.extra.insert("events".into(), events.into());
    doc.extra.insert("simulated_ns".into(), simulated.into());
    if ctx.stop.load(Ordering::Relaxed) {
        doc.status = punctual_result::Status::Interrupted;
    }
}

fn plot_err(e: punctual_plot::PlotError) -> Failure {
    Failure::system(e.to_string())
}

fn check_stop(ctx: &Context) -> Result<(), Failure> {
    if ctx.stop.load(Ordering::Relaxed) {
        Err(Failure::interrupted())
    } else {
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
/// Cumulative distribution points (x in ms) from a recorder's histogram.
fn cdf_points(r: &Recorder) -> Vec<(f64, f64)> {
    let n = r.count().max(1) as f64;
    let mut seen = 0u64;
    let mut pts = Vec::new();
    // Start the staircase at zero, so a distribution of one value still draws a step.
    if let Some(min) = r.min() {
        pts.push(((min as f64 / 1e6).max(1e-3), 0.0));
    }
    for v in r.histogram().iter_recorded() {
        // A staircase: flat until the value, then up (latencies in whole ticks show as steps).
        let x = (r.histogram().highest_equivalent(v.value_iterated_to()) as f64 / 1e6).max(1e-3);
        pts.push((x, seen as f64 / n));
        seen += v.count_at_value();
        pts.push((x, seen as f64 / n));
    }
    pts
}

// ---------------------------------------------------------------------------------------------

/// The simulated half of Etsion Table 6 and Fig. 7.
pub struct EtsionLatency;

/// Etsion Table 6, in microseconds: (type, number, @100Hz [0.9, 0.95, 0.99, max], @20000Hz [...]).
pub const TABLE6: [(&str, &str, [u64; 4], [u64; 4]); 10] = [
    ("BLK", "2", [5, 8, 11, 40], [13, 14, 21, 23]),
    ("BLK", "8", [5, 12, 22, 420], [7, 9, 13, 25]),
    (
        "CONT",
        "2",
        [50_003, 60_003, 60_004, 160_006],
        [102, 103, 18_468, 60_448],
    ),
    (
        "CONT",
        "8",
        [370_014, 400_014, 420_015, 740_025],
        [656, 706, 15_096, 68_139],
    ),
    ("2%", "2", [6, 9, 9_193, 19_153], [13, 15, 23, 837]),
    (
        "2%",
        "8",
        [2_910, 8_419, 17_940, 32_944],
        [12, 52, 53, 1_809],
    ),
    ("8%", "2", [9, 12_431, 39_512, 60_003], [14, 19, 53, 3_797]),
    (
        "8%",
        "8",
        [40_003, 60_005, 130_006, 294_291],
        [53, 53, 54, 37_328],
    ),
    (
        "4%",
        "1+2CPU",
        [50_003, 50_003, 50_004, 50_005],
        [55, 56, 200, 256],
    ),
    (
        "4%",
        "1+8CPU",
        [50_003, 50_003, 170_014, 280_010],
        [56, 57, 59, 856],
    ),
];

/// The two configurations of Section 7: 100 Hz with 60 ms quanta, 20,000 Hz with 100 us (2 ticks).
pub const LATENCY_CONFIGS: [(u32, Quantum); 2] =
    [(100, Quantum::Time(60 * MS)), (20_000, Quantum::Ticks(2))];

/// Table 6's workloads: alarm-setting processes in the POSIX round-robin class; the CPU-bound
/// processes of the last rows in the time-sharing class beneath them.
pub fn latency_workload(kind: &str, number: &str) -> Vec<TaskSpec> {
    let (n, cpus) = match number.split_once("+") {
        Some((a, b)) => (
            a.parse::<usize>().expect("static"),
            b.trim_end_matches("CPU").parse::<usize>().expect("static"),
        ),
        None => (number.parse().expect("static"), 0),
    };
    let label = match kind {
        "BLK" => format!("blk:{n}"),
        "CONT" => format!("cont:{n}"),
        pct => format!("pct{}:{n}", pct.trim_end_matches('%')),
    };
    let mut tasks = parse_workload(&label).expect("static");
    for t in &mut tasks {
        t.class = Some(Class::Rr);
    }
    if cpus > 0 {
        let mut bg = parse_workload(&format!("cpu:{cpus}")).expect("static");
        for t in &mut bg {
            t.class = Some(Class::Other);
        }
        tasks.extend(bg);
    }
    tasks
}

fn alarm_latency(r: &RunResult) -> Recorder {
    pooled(r.tasks.iter().map(|t| t.stats.alarm_latency.clone())).unwrap_or_default()
}

impl Experiment for EtsionLatency {
    fn name(&self) -> &'static str {
        "etsion-latency"
    }
    fn reproduces(&self) -> &'static str {
        "Etsion 2003 Table 6, Fig. 7: alarm latency, BLK/N%/CONT, 100 Hz/60 ms and 20 kHz/100 us"
    }
    fn duration(&self) -> &'static str {
        "about 10 s; --quick about 2 s (simulation)"
    }

    fn run(&self, ctx: &Context) -> Result<Report, Failure> {
        // Etsion: 500 alarms per process, 1-1000 ms apart: about 250 s.
        let secs = if ctx.quick { 50 } else { 250 };
        let control = Control {
            stop: Some(&ctx.stop),
            progress: None,
        };
        let mut t = Table::new(&[
            "type",
            "number",
            "config",
            "0.9",
            "0.95",
            "0.99",
            "max",
            "Etsion 0.9",
            "0.95",
            "0.99",
            "max",
        ])
        .titled("Etsion Table 6 (simulated): latency to deliver timer signals, microseconds");
        let mut doc = new_doc(ctx);
        let (mut events, mut simulated) = (0u64, 0u64);
        let us = |ns: u64| format!("{}", (ns + 500) / 1000);
        for (i, (kind, number, p100, p20k)) in TABLE6.iter().enumerate() {
            if i > 0 {
                t.rule();
            }
            for ((hz, q), published) in LATENCY_CONFIGS.iter().zip([p100, p20k]) {
                check_stop(ctx)?;
                let cfg = RunConfig {
                    hz: *hz,
                    quantum: *q,
                    policy: Policy::Rr,
                    duration: secs * NS_PER_S,
                    tasks: latency_workload(kind, number),
                    ..RunConfig::default()
                };
                let r = simulate(&cfg, &control)?;
                events += r.events;
                simulated += r.simulated_ns;
                let lat = alarm_latency(&r);
                let config = format!(
                    "{hz} Hz, {}",
                    crate::config::Quantum::Time(q.ticks(*hz) * cfg.tick_ns()).label()
                );
                t.row([
                    kind.to_string(),
                    number.to_string(),
                    config.clone(),
                    us(lat.percentile(90_000)),
                    us(lat.percentile(95_000)),
                    us(lat.percentile(99_000)),
                    us(lat.max().unwrap_or(0)),
                    published[0].to_string(),
                    published[1].to_string(),
                    published[2].to_string(),
                    published[3].to_string(),
                ]);
                doc.series.push(
                    Series::from_recorder(format!("{kind} {number} @{hz}Hz"), report::kind::ALARM_LATENCY, None, &lat)
                        .with("hz", *hz)
                        .with("quantum_ns", q.ticks(*hz) * cfg.tick_ns())
                        .with("published_us", json!({"0.9": published[0], "0.95": published[1], "0.99": published[2], "max": published[3]})),
                );
            }
        }
        t.note("Simulated with Etsion's costs (0.5 us + 4.5 us per interrupt, 2 us per switch) and nothing else running: no daemons,");
        t.note("no disk I/O. Etsion attributes his remaining long latencies at 20,000 Hz to such daemons, which the simulation has none of.");
        t.note("The 1+NCPU rows put the CPU-bound processes in the time-sharing class under the round-robin timers.");
        // Fig. 7: CONT with 1, 2, 4, 8 processes.
        let mut lines = Vec::new();
        for (hz, q) in LATENCY_CONFIGS {
            for n in [1usize, 2, 4, 8] {
                check_stop(ctx)?;
                let cfg = RunConfig {
                    hz,
                    quantum: q,
                    policy: Policy::Rr,
                    duration: secs * NS_PER_S,
                    tasks: latency_workload("CONT", &n.to_string()),
                    ..RunConfig::default()
                };
                let r = simulate(&cfg, &control)?;
                events += r.events;
                simulated += r.simulated_ns;
                let lat = alarm_latency(&r);
                let pts = cdf_points(&lat)
                    .into_iter()
                    .map(|(x, y)| (x * 1000.0, y))
                    .collect();
                lines.push(punctual_plot::Line {
                    label: format!("{n} CONT @{hz} Hz"),
                    points: pts,
                });
            }
        }
        close(&mut doc, ctx, events, simulated);
        doc.settings
            .extra
            .insert("duration_ns".into(), (secs * NS_PER_S).into());
        let fig7 = punctual_plot::line_plot(
            "Etsion Fig. 7 (simulated): CONT alarm latency CDF",
            "latency (us)",
            "fraction of alarms",
            &lines,
            true,
            false,
        )
        .map_err(plot_err)?;
        Ok(Report {
            tables: vec![t],
            doc,
            figures: vec![Figure {
                name: "etsion-latency-fig7".into(),
                svg: fig7,
            }],
        })
    }
}
