//! `etsion-billing`, real half: trace a mixed desktop-like workload and bill it with virtual ticks of
//! 100 and 1000 Hz, printing Etsion et al.'s Tables 3 and 4 with the published numbers and the
//! simulator's beside. (The simulated half alone is registered under `--sim`.)

use super::{new_doc, trace_for};
use crate::analyze::billing::{bill, Billing};
use crate::analyze::{Analysis, Group, GroupStats};
use crate::kernel::EventGroups;
use crate::render::cdf_line;
use crate::workload::{self, Generators, DESKTOP};
use punctual_plot::Line;
use punctual_result::experiment::{Context, Experiment, Figure, Report};
use punctual_result::{Failure, Series, Table};
use serde_json::json;

pub struct EtsionBilling;

/// Table 3: billing ratio @100, @1000 Hz; missed quanta @100, @1000 Hz (fractions).
fn paper_table3(app: &str) -> Option<(f64, f64, f64, f64)> {
    Some(match app {
        "Emacs" => (1.0746, 0.9468, 0.9596, 0.7342),
        "Xine" => (1.2750, 1.0249, 0.8946, 0.7481),
        "Quake" => (1.0310, 1.0337, 0.5417, 0.2323),
        "X Server" => (0.0202, 0.9319, 0.9943, 0.6405),
        "CPU-bound" => (1.0071, 1.0043, 0.0786, 0.0783),
        _ => return None,
    })
}

/// Table 4: quanta per second @100, @1000 Hz, each application in isolation.
fn paper_table4(app: &str) -> Option<(f64, f64)> {
    Some(match app {
        "Emacs" => (22.36, 34.60),
        "Xine" => (470.67, 695.94),
        "Quake" => (187.88, 273.85),
        "X Server" => (71.35, 148.21),
        "CPU-bound" => (28.81, 38.97),
        _ => return None,
    })
}

const HZ: [u32; 2] = [100, 1000];
const PHASES: u64 = 10;

fn f4(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.4}"))
}

fn pc(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{:.2}%", v * 100.0))
}

/// Billing ratios over `PHASES` evenly spaced tick phases: (min, max).
fn phase_range(a: &Analysis, g: &Group, hz: u32) -> (f64, f64) {
    let period = 1_000_000_000 / hz as u64;
    let ratios: Vec<f64> = (0..PHASES)
        .filter_map(|k| bill(a.runs(g), hz, k * period / PHASES).ratio())
        .collect();
    let min = ratios.iter().cloned().fold(f64::INFINITY, f64::min);
    let max = ratios.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    (min, max)
}

/// Mean billed time per quantum-length bucket (Fig. 4's relation, averaged): x = quantum (us).
fn billing_curve(a: &Analysis, g: &Group, hz: u32) -> Line {
    let mut buckets: std::collections::BTreeMap<u32, (f64, f64, u64)> = Default::default();
    for r in a.runs(g).filter(|r| r.whole) {
        let len = r.len().max(1);
        let b = ((len as f64).log10() * 8.0).floor() as u32;
        let ticks = crate::analyze::billing::ticks_in(r.start, r.end, hz, 0);
        let e = buckets.entry(b).or_insert((0.0, 0.0, 0));
        e.0 += len as f64 / 1000.0;
        e.1 += ticks as f64 * 1e6 / hz as f64;
        e.2 += 1;
    }
    let points = buckets
        .values()
        .filter(|v| v.2 > 0)
        .map(|(x, y, n)| (x / *n as f64, (y / *n as f64).max(0.01)))
        .collect();
    Line {
        label: format!("{} @{hz}Hz", g.label),
        points,
    }
}

impl Experiment for EtsionBilling {
    fn name(&self) -> &'static str {
        "etsion-billing"
    }

    fn reproduces(&self) -> &'static str {
        "Etsion et al. 2003, Tables 3-4, Figs. 4 and 6: billing accuracy and quanta of a traced desktop mix"
    }

    fn duration(&self) -> &'static str {
        "20 s (--quick: 5 s)"
    }

    fn run(&self, ctx: &Context) -> Result<Report, Failure> {
        let secs = if ctx.quick { 5 } else { 20 };
        let mut g = Generators::new();
        workload::interactive(&mut g);
        workload::video(&mut g);
        workload::game(&mut g);
        workload::cpu_bound(&mut g, punctual_rt::online_cpus().len());
        std::thread::sleep(std::time::Duration::from_millis(300));
        let traced = trace_for(
            ctx,
            EventGroups {
                sched: true,
                irq: false,
                timer: false,
            },
            secs * 1_000_000_000,
        );
        g.stop();
        let (trace, a) = traced?;
        let w = a.window_ns();

        let groups: Vec<(Group, &str)> = DESKTOP
            .iter()
            .map(|(label, prefix, app)| (a.group_by_prefix(label, prefix), *app))
            .collect();
        let stats: Vec<(GroupStats, &str)> = groups
            .iter()
            .map(|(grp, app)| (a.stats(grp, &[100, 250, 1000], 0), *app))
            .collect();

        // The simulator's figures for the same applications, beside the paper's and this machine's.
        // The lengths `etsion-billing --sim` uses: the simulator is deterministic, so the numbers match.
        let sim_secs = if ctx.quick { 20 } else { 120 };
        let mut sim: Vec<[Option<(f64, f64, f64)>; 2]> = Vec::new();
        for (_, app) in &stats {
            let mut both = [None, None];
            for (i, hz) in HZ.iter().enumerate() {
                both[i] = punctual_sim::experiments::simulated_billing(
                    app,
                    *hz,
                    sim_secs,
                    Some(&ctx.stop),
                )?;
            }
            sim.push(both);
        }

        let mut t3 = Table::new(&[
            "Application",
            "source",
            "billing @100Hz",
            "@1000Hz",
            "never billed @100Hz",
            "@1000Hz",
        ])
        .titled("Table 3: scheduler billing success rate (billing ratio; quanta never billed)");
        for (i, ((s, app), sim)) in stats.iter().zip(&sim).enumerate() {
            if i > 0 {
                t3.rule();
            }
            let p = paper_table3(app);
            let (b100, b1000) = (s.billing[0], s.billing[2]);
            let label = format!("{} ({app})", s.label);
            t3.row([
                label,
                "paper".into(),
                f4(p.map(|p| p.0)),
                f4(p.map(|p| p.1)),
                pc(p.map(|p| p.2)),
                pc(p.map(|p| p.3)),
            ]);
            t3.row([
                String::new(),
                "simulator".into(),
                f4(sim[0].map(|v| v.0)),
                f4(sim[1].map(|v| v.0)),
                pc(sim[0].map(|v| v.1 / 100.0)),
                pc(sim[1].map(|v| v.1 / 100.0)),
            ]);
            t3.row([
                String::new(),
                "traced here".into(),
                f4(b100.ratio()),
                f4(b1000.ratio()),
                pc(b100.missed_fraction()),
                pc(b1000.missed_fraction()),
            ]);
        }
        t3.note(format!(
            "simulator: punctual simulate's model of the application ({sim_secs} s simulated, Linux 2.4 policy), \
             the same numbers as `punctual experiment run etsion-billing --sim`."
        ));
        t3.note(format!(
            "traced here: {} s trace of a mix on this machine ({} CPUs), billed by virtual ticks of phase 0; paper: Linux 2.4.8 \
             at 100 and 1000 Hz on a Pentium III, each row its own run. Virtual ticks do not wake tasks, so the \
             alarm-tick synchronisation that starved the paper's X server of billing cannot occur here.",
            w / 1_000_000_000,
            a.cpus
        ));

        let mut t3p = Table::new(&[
            "Application",
            "ratio @100Hz over 10 phases",
            "ratio @1000Hz over 10 phases",
        ])
        .titled("Billing ratio's sensitivity to the tick phase (min - max)");
        for ((grp, _), (s, _)) in groups.iter().zip(&stats) {
            let cells: Vec<String> = HZ
                .iter()
                .map(|&h| {
                    let (lo, hi) = phase_range(&a, grp, h);
                    if lo.is_finite() {
                        format!("{lo:.4} - {hi:.4}")
                    } else {
                        "-".into()
                    }
                })
                .collect();
            t3p.row([s.label.clone(), cells[0].clone(), cells[1].clone()]);
        }

        let mut t4 = Table::new(&[
            "Application",
            "source",
            "quanta/s @100Hz",
            "@1000Hz",
            "CPU here",
        ])
        .titled("Table 4: average quanta per second");
        for (i, ((s, app), sim)) in stats.iter().zip(&sim).enumerate() {
            if i > 0 {
                t4.rule();
            }
            let p = paper_table4(app);
            let label = format!("{} ({app})", s.label);
            let q = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.2}"));
            t4.row([
                label,
                "paper".into(),
                q(p.map(|p| p.0)),
                q(p.map(|p| p.1)),
                String::new(),
            ]);
            t4.row([
                String::new(),
                "simulator".into(),
                q(sim[0].map(|v| v.2)),
                q(sim[1].map(|v| v.2)),
                String::new(),
            ]);
            let here = format!("{:.2}", s.quanta_per_second(w));
            t4.row([
                String::new(),
                "traced here".into(),
                here.clone(),
                here,
                format!("{:.1}%", s.cpu_share(w) * 100.0),
            ]);
        }
        t4.note(format!(
            "traced here: one tickless kernel (CONFIG_HZ={}), all applications at once, so one figure for both \
             rates; the paper ran each in isolation on 100 and 1000 Hz kernels. Quanta are runs whose start and end \
             were both traced (a start from idle, which this kernel does not record, is placed at the wake-up).",
            trace.header.host.as_ref().and_then(|h| h.hz).map_or("?".into(), |h| h.to_string())
        ));

        let mut doc = new_doc(ctx);
        doc.status = if ctx.stop.load(std::sync::atomic::Ordering::Relaxed) {
            punctual_result::Status::Interrupted
        } else {
            punctual_result::Status::Ok
        };
        for ((s, app), sim) in stats.iter().zip(&sim) {
            let simulated: Vec<serde_json::Value> = HZ
                .iter()
                .zip(sim)
                .filter_map(|(hz, v)| v.map(|(r, m, q)| json!({"hz": hz, "ratio": r, "missed_fraction": m / 100.0, "quanta_per_second": q})))
                .collect();
            let billing: Vec<serde_json::Value> = s
                .billing
                .iter()
                .map(|b: &Billing| json!({"hz": b.hz, "ratio": b.ratio(), "missed_fraction": b.missed_fraction(), "quanta": b.quanta, "ticks": b.ticks, "consumed_ns": b.consumed_ns}))
                .collect();
            doc.series.push(
                Series::from_recorder(&s.label, "effective_quantum", None, &s.quanta)
                    .with("paper_application", *app)
                    .with("quanta_per_second", s.quanta_per_second(w))
                    .with("cpu_ns", s.cpu_ns)
                    .with("billing", billing)
                    .with("simulated", simulated),
            );
        }
        doc.extra.insert("window_ns".into(), w.into());
        doc.extra.insert("events".into(), a.events.into());
        doc.extra.insert(
            "lost_events".into(),
            trace
                .trailer
                .as_ref()
                .map(|t| t.lost.values().map(|l| l.total()).sum::<u64>())
                .unwrap_or(0)
                .into(),
        );
        doc.ended_at = punctual_result::now_rfc3339();

        let mut figures = Vec::new();
        let cdf: Vec<Line> = stats
            .iter()
            .filter(|(s, _)| s.quanta.count() > 0)
            .map(|(s, _)| cdf_line(&s.label, &s.quanta))
            .collect();
        if !cdf.is_empty() {
            if let Ok(svg) = punctual_plot::line_plot(
                "Fig. 6: effective quantum durations (CDF)",
                "effective quantum (us)",
                "fraction of quanta",
                &cdf,
                true,
                false,
            ) {
                figures.push(Figure {
                    name: "etsion-billing-fig6".into(),
                    svg,
                });
            }
        }
        let mut curves = Vec::new();
        for (grp, _) in groups
            .iter()
            .filter(|(grp, _)| !grp.tids.is_empty())
            .take(3)
        {
            for h in HZ {
                curves.push(billing_curve(&a, grp, h));
            }
        }
        if let Some(max_x) = curves
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.0))
            .reduce(f64::max)
        {
            curves.push(Line {
                label: "billed = consumed".into(),
                points: vec![(10.0, 0.01), (max_x, max_x / 1000.0)],
            });
            if let Ok(svg) = punctual_plot::line_plot(
                "Fig. 4: mean billed time against effective quantum",
                "effective quantum (us)",
                "mean billed (ms)",
                &curves,
                true,
                true,
            ) {
                figures.push(Figure {
                    name: "etsion-billing-fig4".into(),
                    svg,
                });
            }
        }
        Ok(Report {
            tables: vec![t3, t3p, t4],
            doc,
            figures,
        })
    }
}
