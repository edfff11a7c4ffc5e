//! `etsion-billing`: Etsion et al. 2003, Tables 3 and 4, Figs. 4 and 6: how well a periodic tick
//! bills the CPU time applications consume, how many of their quanta are never billed, and how
//! many quanta a second they run.
//!
//! Two halves under one name:
//! - [`EtsionBilling`] (this machine): trace each application's stand-in alone on one CPU (the
//!   [`RUNS`]) and bill it with virtual ticks of 100 and 1000 Hz, beside the paper's numbers and
//!   the simulator's;
//! - [`EtsionBillingSim`] (`--sim`): the simulator's model of each of the paper's applications
//!   under the Linux 2.4 scheduler at 100 and 1000 Hz.
//!
//! Real half: measure [`EtsionBilling::run`]; model [`Model`]; tables [`tables`]; figures
//! [`figures`]. Simulated half: measure [`EtsionBillingSim::run`]; model [`SimModel`]; tables
//! [`sim_tables`]; figures [`sim_figures`].

use crate::alone::Sharing;
use crate::common::simulated_clock;
use crate::published::etsion_billing::{row as published, Table3Row, TABLE3, TABLE5};
use crate::workload::{self, Generators};
use punctual_plot::Line;
use punctual_result::{Failure, ResultDoc, Series, Table};
use punctual_rt::RtWant;
use punctual_session::{Ctx, Figure, LiveSpec, Measurement, Report};
use punctual_sim::behaviour::{defaults as d, Behaviour};
use punctual_sim::config::NS_PER_S;
use punctual_sim::workload::{parse_workload, xine_pipeline, X_ROUND_TRIPS};
use punctual_sim::{pooled, simulate, Control, Policy, RunConfig, RunResult, TaskSpec};
use punctual_stats::Recorder;
use punctual_trace::analyze::billing::{bill, ticks_in, Billing};
use punctual_trace::analyze::{Analysis, Group, GroupStats};
use punctual_trace::kernel::EventGroups;
use punctual_trace::record::RecordProgress;
use punctual_trace::render::cdf_line;
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub const NAME: &str = "etsion-billing";
/// The rates of the paper's two kernels.
const HZ: [u32; 2] = [100, 1000];
/// Tick phases the sensitivity table bills at.
const PHASES: u64 = 10;

/// What the simulator (or a trace) gives for one application at one rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Billed {
    /// Billed ticks times the tick over the CPU time consumed.
    pub ratio: f64,
    /// Quanta during which no tick fell, in per cent.
    pub missed_pct: f64,
    pub quanta_per_s: f64,
}

// ---- simulated half ---------------------------------------------------------------------------

/// The simulator's stand-in for one of the paper's applications, and the names of the tasks whose
/// figures are its own.
fn billing_workload(app: &str) -> (Vec<TaskSpec>, Vec<&'static str>) {
    let game = || {
        TaskSpec::new(
            "quake",
            "quake",
            Behaviour::Game {
                frame: d::GAME_FRAME,
                gpu: d::GAME_GPU,
            },
        )
    };
    match app {
        "Emacs" => (
            vec![
                TaskSpec {
                    round_trips: Some(X_ROUND_TRIPS),
                    ..TaskSpec::new(
                        "emacs",
                        "emacs",
                        Behaviour::Typist {
                            interval: d::TYPIST_INTERVAL,
                            burst: d::TYPIST_BURST,
                            server: Some("X".into()),
                        },
                    )
                },
                TaskSpec::new(
                    "X",
                    "X",
                    Behaviour::Server {
                        work: d::X_EVENT_WORK,
                    },
                ),
            ],
            vec!["emacs"],
        ),
        "Xine" => (
            xine_pipeline(d::XINE_FPS * 1000),
            vec!["xine display", "xine decode"],
        ),
        "X Server (w/ Xine)" => (xine_pipeline(d::XINE_FPS * 1000), vec!["X"]),
        "Quake" => (vec![game()], vec!["quake"]),
        "CPU-bound" => (parse_workload("cpu").expect("static"), vec!["cpu 0"]),
        _ => {
            let mut t = parse_workload("cpu").expect("static");
            t.push(game());
            (t, vec!["cpu 0"])
        }
    }
}

/// The Linux 2.4 run of an application's workload at `hz` for `secs` simulated seconds.
fn billing_run(tasks: Vec<TaskSpec>, hz: u32, secs: u64) -> RunConfig {
    RunConfig {
        hz,
        policy: Policy::Linux24,
        duration: secs * NS_PER_S,
        tasks,
        ..RunConfig::default()
    }
}

/// Pooled billing figures of the named tasks, and their effective quanta.
fn billing_of(r: &RunResult, names: &[&str]) -> (Billed, Option<Recorder>) {
    let tasks: Vec<_> = r
        .tasks
        .iter()
        .filter(|t| names.contains(&t.name.as_str()))
        .collect();
    let consumed: u64 = tasks.iter().map(|t| t.stats.consumed_ns).sum();
    let billed: u64 = tasks.iter().map(|t| t.stats.billed_ticks).sum();
    let quanta: u64 = tasks.iter().map(|t| t.stats.quanta).sum();
    let missed: u64 = tasks.iter().map(|t| t.stats.missed_quanta).sum();
    let b = Billed {
        ratio: billed as f64 * r.tick_ns() as f64 / consumed.max(1) as f64,
        missed_pct: 100.0 * missed as f64 / quanta.max(1) as f64,
        quanta_per_s: quanta as f64 * 1e9 / r.simulated_ns.max(1) as f64,
    };
    (
        b,
        pooled(tasks.iter().map(|t| t.stats.effective_quantum.clone())),
    )
}

/// The simulator's Table 3 and 4 figures for one of the paper's applications (`Emacs`, `Xine`,
/// `Quake`, `X Server`, `CPU-bound`, `CPU+Quake`) at `hz` under the Linux 2.4 policy, over `secs`
/// simulated seconds. `None` for a name the paper does not have. Both halves use it, so the
/// traced half shows exactly what `--sim` prints.
pub fn simulated_billing(
    app: &str,
    hz: u32,
    secs: u64,
    stop: Option<&std::sync::atomic::AtomicBool>,
) -> Result<Option<Billed>, Failure> {
    let Some(row) = published(app) else {
        return Ok(None);
    };
    let (tasks, names) = billing_workload(row.app);
    let r = simulate(
        &billing_run(tasks, hz, secs),
        &Control {
            stop,
            progress: None,
        },
    )?;
    Ok(Some(billing_of(&r, &names).0))
}

/// `etsion-billing --sim`.
pub struct EtsionBillingSim {
    pub quick: bool,
    /// Simulated seconds per application and rate.
    pub secs: u64,
    done: Arc<AtomicU64>,
}

impl EtsionBillingSim {
    pub fn new(opts: crate::Options) -> EtsionBillingSim {
        EtsionBillingSim {
            quick: opts.quick,
            secs: if opts.quick { 20 } else { 120 },
            done: Arc::default(),
        }
    }
}

/// One application's runs at 100 and 1000 Hz.
pub struct SimApp {
    pub row: &'static Table3Row,
    /// The tasks that are the application.
    pub names: Vec<&'static str>,
    pub runs: Vec<RunResult>,
}

impl Measurement for EtsionBillingSim {
    type Outcome = Vec<SimApp>;

    fn label(&self) -> String {
        NAME.into()
    }
    fn live(&self) -> Option<LiveSpec> {
        let (done, total) = (self.done.clone(), (TABLE3.len() * HZ.len()) as u64);
        Some(LiveSpec::counted(total, move || {
            let n = done.load(Ordering::Relaxed);
            (n, format!("{n} of {total} simulations"))
        }))
    }
    fn run(&mut self, ctx: &Ctx) -> Result<Vec<SimApp>, Failure> {
        let control = Control {
            stop: Some(ctx.stop()),
            progress: None,
        };
        let mut apps = Vec::new();
        for row in &TABLE3 {
            let (tasks, names) = billing_workload(row.app);
            let mut runs = Vec::new();
            for hz in HZ {
                if ctx.stop().load(Ordering::Relaxed) {
                    return Err(Failure::interrupted());
                }
                ctx.step(format!("{} @{hz}Hz", row.app));
                runs.push(simulate(
                    &billing_run(tasks.clone(), hz, self.secs),
                    &control,
                )?);
                self.done.fetch_add(1, Ordering::Relaxed);
            }
            apps.push(SimApp { row, names, runs });
        }
        Ok(apps)
    }
    fn report(
        &self,
        apps: Vec<SimApp>,
        _ctx: &Ctx,
        doc: &mut ResultDoc,
    ) -> Result<Report, Failure> {
        let runs = apps.iter().flat_map(|a| &a.runs);
        let events: u64 = runs.clone().map(|r| r.events).sum();
        let simulated: u64 = runs.map(|r| r.simulated_ns).sum();
        simulated_clock(doc);
        crate::common::mark(doc, NAME, self.quick);
        doc.extra.insert("events".into(), events.into());
        doc.extra.insert("simulated_ns".into(), simulated.into());
        doc.settings
            .extra
            .insert("duration_ns".into(), (self.secs * NS_PER_S).into());
        sim_series(doc, &apps);
        Ok(Report {
            tables: sim_tables(&SimModel::of(&apps)),
            figures: sim_figures(&apps)?,
            ..Report::default()
        })
    }
}

/// The simulated half's numbers: per application of Table 3, at 100 and 1000 Hz.
pub struct SimModel {
    pub rows: Vec<(&'static str, [Billed; 2])>,
    /// Table 5 from the Xine runs: Xine, X server, idle, other (kernel overhead), in per cent at
    /// 100 and 1000 Hz; `None` when Xine was not simulated.
    pub table5: Option<[[f64; 4]; 2]>,
}

impl SimModel {
    pub fn of(apps: &[SimApp]) -> SimModel {
        let rows = apps
            .iter()
            .map(|a| {
                let b = |i: usize| billing_of(&a.runs[i], &a.names).0;
                (a.row.app, [b(0), b(1)])
            })
            .collect();
        let table5 = apps
            .iter()
            .find(|a| a.row.app == "Xine" && a.runs.len() == 2)
            .map(|a| [cpu_usage(&a.runs[0]), cpu_usage(&a.runs[1])]);
        SimModel { rows, table5 }
    }
}

/// Table 5's split of a Xine run's CPU time, in per cent of the simulated time over every CPU:
/// the Xine processes, the X server, the idle loop, and the rest (interrupts, context switches
/// and cache refills: the simulator runs no daemons, which were part of the paper's "other").
pub fn cpu_usage(r: &RunResult) -> [f64; 4] {
    let total = (r.simulated_ns * r.cpus.len().max(1) as u64).max(1) as f64;
    let of = |pick: &dyn Fn(&str) -> bool| -> u64 {
        r.tasks
            .iter()
            .filter(|t| pick(&t.name))
            .map(|t| t.stats.consumed_ns)
            .sum()
    };
    let xine = of(&|n| n.starts_with("xine"));
    let x = of(&|n| n == "X");
    let idle: u64 = r.cpus.iter().map(|c| c.idle_ns).sum();
    let pct = |ns: u64| 100.0 * ns as f64 / total;
    let known = pct(xine) + pct(x) + pct(idle);
    [pct(xine), pct(x), pct(idle), (100.0 - known).max(0.0)]
}

/// Tables 3 and 4, the simulator's figure beside each of Etsion's.
pub fn sim_tables(m: &SimModel) -> Vec<Table> {
    let mut t3 = Table::new(&[
        "application",
        "billing @100Hz",
        "Etsion",
        "@1000Hz",
        "Etsion",
        "missed @100Hz",
        "Etsion",
        "@1000Hz",
        "Etsion",
    ])
    .titled("Etsion Table 3 (simulated): scheduler billing success rate");
    let mut t4 = Table::new(&[
        "application",
        "quanta/s @100Hz",
        "Etsion",
        "@1000Hz",
        "Etsion",
    ])
    .titled("Etsion Table 4 (simulated): average quanta per second");
    for (app, got) in &m.rows {
        let Some(p) = published(app) else { continue };
        t3.row([
            app.to_string(),
            format!("{:.4}", got[0].ratio),
            format!("{:.4}", p.billing[0]),
            format!("{:.4}", got[1].ratio),
            format!("{:.4}", p.billing[1]),
            format!("{:.2} %", got[0].missed_pct),
            format!("{:.2} %", p.missed_pct[0]),
            format!("{:.2} %", got[1].missed_pct),
            format!("{:.2} %", p.missed_pct[1]),
        ]);
        if let Some(q) = p.quanta_per_s {
            t4.row([
                app.to_string(),
                format!("{:.2}", got[0].quanta_per_s),
                format!("{:.2}", q[0]),
                format!("{:.2}", got[1].quanta_per_s),
                format!("{:.2}", q[1]),
            ]);
        }
    }
    t3.note("Simulated: Linux 2.4 epoch scheduler, 50 ms quanta (+1 tick), behaviours modelled on the seed's applications (docs/design.md);");
    t3.note("the published numbers were measured with klogger on a P-III 664 with daemons and klogger itself running.");
    t4.note(
        "Xine counts the displayer and decoder together; Etsion's Xine had 6 processes (the other four, \
         audio among them, are not modelled, so its quanta fall short). X clients make 2 round trips to \
         the X server per hand-off: the server's short quanta.",
    );
    let mut tables = vec![t3, t4];
    if let Some(got) = m.table5 {
        let mut t5 = Table::new(&["", "@100Hz", "Etsion", "@1000Hz", "Etsion"])
            .titled("Etsion Table 5 (simulated): CPU usage while running Xine");
        for (i, (what, paper)) in TABLE5.iter().enumerate() {
            t5.row([
                what.to_string(),
                format!("{:.2} %", got[0][i]),
                format!("{:.2} %", paper[0]),
                format!("{:.2} %", got[1][i]),
                format!("{:.2} %", paper[1]),
            ]);
        }
        t5.note("other: here the simulated kernel's ticks, context switches and cache refills; in the paper also daemons and klogger.");
        t5.note("Not traced on this machine: it has neither Xine nor an X server (the traced half's video stand-in draws nothing).");
        tables.push(t5);
    }
    tables
}

/// Each application's effective quanta at each rate, with its billing and the paper's.
fn sim_series(doc: &mut ResultDoc, apps: &[SimApp]) {
    for a in apps {
        for (i, (hz, r)) in HZ.iter().zip(&a.runs).enumerate() {
            let (b, eq) = billing_of(r, &a.names);
            let Some(eq) = eq else { continue };
            doc.series.push(
                Series::from_recorder(
                    format!("{} @{hz}Hz", a.row.app),
                    punctual_sim::report::kind::EFFECTIVE_QUANTUM,
                    None,
                    &eq,
                )
                .with("hz", *hz)
                .with("billing_ratio", (b.ratio * 1e4).round() / 1e4)
                .with("missed_quanta_pct", (b.missed_pct * 100.0).round() / 100.0)
                .with("quanta_per_s", (b.quanta_per_s * 100.0).round() / 100.0)
                .with("published_billing_ratio", a.row.billing[i])
                .with("published_missed_quanta_pct", a.row.missed_pct[i]),
            );
        }
    }
}

/// Figs. 4 (mean billing by quantum length, in ticks) and 6 (effective quantum CDF), simulated.
pub fn sim_figures(apps: &[SimApp]) -> Result<Vec<Figure>, Failure> {
    let mut fig4 = Vec::new();
    let mut fig6 = Vec::new();
    for a in apps {
        for (hz, r) in HZ.iter().zip(&a.runs) {
            let label = format!("{} @{hz}Hz", a.row.app);
            if a.row.app != "CPU+Quake" && a.row.app != "CPU-bound" {
                fig4.push(Line {
                    label: label.clone(),
                    points: billing_by_length(r, &a.names),
                });
            }
            if let (Some(eq), true) = (billing_of(r, &a.names).1, a.row.app != "CPU+Quake") {
                fig6.push(Line {
                    label,
                    points: punctual_plot::cdf_points(&eq),
                });
            }
        }
    }
    let f4 = punctual_plot::line_plot(
        "Etsion Fig. 4 (simulated): mean billed time by effective quantum (in ticks; ideal is the diagonal)",
        "effective quantum (ticks)",
        "billed (ticks)",
        &fig4,
        false,
        false,
    );
    let f6 = punctual_plot::line_plot(
        "Etsion Fig. 6 (simulated): effective quantum CDF",
        "effective quantum (ms)",
        "fraction of quanta",
        &fig6,
        true,
        false,
    );
    Ok(vec![
        crate::common::figure("etsion-billing-fig4", f4)?,
        crate::common::figure("etsion-billing-fig6", f6)?,
    ])
}

/// Etsion Fig. 4 as points: effective quantum (bucket middle, ticks) against mean billed ticks.
fn billing_by_length(r: &RunResult, names: &[&str]) -> Vec<(f64, f64)> {
    use punctual_sim::stats::BILLING_BUCKETS;
    let mut sums = [(0u64, 0u64); BILLING_BUCKETS];
    for t in r.tasks.iter().filter(|t| names.contains(&t.name.as_str())) {
        for (s, b) in sums.iter_mut().zip(t.stats.billing_by_length.iter()) {
            s.0 += b.0;
            s.1 += b.1;
        }
    }
    sums.iter()
        .enumerate()
        // The last bucket holds everything from 7.75 ticks on: not a point on the curve.
        .take(BILLING_BUCKETS - 1)
        .filter(|(_, (n, _))| *n > 0)
        .map(|(i, (n, billed))| ((i as f64 + 0.5) / 4.0, *billed as f64 / *n as f64))
        .collect()
}

// ---- real half ----------------------------------------------------------------------------------

/// One of the paper's applications in the traced half: the label of its stand-in, the
/// thread-name prefix whose runs are its own, and the paper's application.
#[derive(Clone, Copy, Debug)]
pub struct TracedApp {
    pub label: &'static str,
    pub prefix: &'static str,
    pub app: &'static str,
}

/// One traced run: what it starts, and the applications read from its trace. The paper ran each
/// application alone on a uniprocessor, so each run starts only its own stand-ins, pinned to one CPU.
pub struct Run {
    pub what: &'static str,
    pub start: fn(&mut Generators),
    pub apps: &'static [TracedApp],
}

/// The traced runs, one per row of Table 3 (the video run gives two: Xine and its X server).
pub const RUNS: [Run; 5] = [
    Run {
        what: "an editor",
        start: workload::interactive,
        apps: &[TracedApp {
            label: "Interactive (editor-like)",
            prefix: "pt-edit",
            app: "Emacs",
        }],
    },
    Run {
        what: "a video pipeline",
        start: workload::video,
        apps: &[
            TracedApp {
                label: "Video pipeline (decoder, displayer)",
                prefix: "pt-video",
                app: "Xine",
            },
            TracedApp {
                label: "Display server (w/ video)",
                prefix: "pt-xserver",
                app: "X Server",
            },
        ],
    },
    Run {
        what: "a game loop",
        start: workload::game,
        apps: &[TracedApp {
            label: "Game loop",
            prefix: "pt-game",
            app: "Quake",
        }],
    },
    Run {
        what: "a CPU-bound task",
        start: |g| workload::cpu_bound(g, 1),
        apps: &[TracedApp {
            label: "CPU-bound",
            prefix: "pt-cpu",
            app: "CPU-bound",
        }],
    },
    Run {
        what: "a CPU-bound task beside a game loop",
        start: |g| {
            workload::cpu_bound(g, 1);
            workload::game(g);
        },
        apps: &[TracedApp {
            label: "CPU-bound (w/ game loop)",
            prefix: "pt-cpu",
            app: "CPU+Quake",
        }],
    },
];

/// The traced applications in Table 3's order (the paper's), with the run each comes from.
pub fn traced_apps() -> Vec<(usize, TracedApp)> {
    let mut apps: Vec<(usize, TracedApp)> = RUNS
        .iter()
        .enumerate()
        .flat_map(|(i, r)| r.apps.iter().map(move |a| (i, *a)))
        .collect();
    let order =
        |a: &TracedApp| published(a.app).and_then(|p| TABLE3.iter().position(|r| r.app == p.app));
    apps.sort_by_key(|(_, a)| order(a));
    apps
}

/// `etsion-billing` on this machine.
pub struct EtsionBilling {
    pub quick: bool,
    /// Seconds traced per run.
    pub secs: u64,
    /// Simulated seconds of the simulator's rows (as `--sim`, so the numbers are the same).
    pub sim_secs: u64,
    /// The one CPU every run's threads are pinned to.
    pub cpu: usize,
    progress: Arc<RecordProgress>,
}

impl EtsionBilling {
    pub fn new(opts: crate::Options) -> EtsionBilling {
        EtsionBilling {
            quick: opts.quick,
            secs: if opts.quick { 2 } else { 8 },
            sim_secs: EtsionBillingSim::new(opts).secs,
            cpu: punctual_rt::online_cpus().last().copied().unwrap_or(0),
            progress: Arc::default(),
        }
    }
}

/// The traces of the runs, and the simulator's figures for each application.
pub struct Traced {
    /// Per run of [`RUNS`].
    pub runs: Vec<Analysis>,
    pub events: u64,
    pub lost_events: u64,
    /// The traced kernel's CONFIG_HZ, when known.
    pub kernel_hz: Option<u32>,
    /// Per application of [`traced_apps`], at 100 and 1000 Hz.
    pub sim: Vec<[Option<Billed>; 2]>,
    /// Per run of [`RUNS`] (as traced): what else ran on the CPU, and whether it was traced again.
    pub sharing: Vec<(Sharing, bool)>,
}

impl EtsionBilling {
    /// Trace one run with its stand-ins alone on the CPU, and check they were: what else ran
    /// there (from the trace) and what the host took (steal). A run that shared its CPU beyond
    /// [`crate::alone::LIMIT`] is traced once more, and the less shared of the two is kept (the
    /// report says so either way).
    fn trace_alone(
        &self,
        ctx: &Ctx,
        run: &Run,
    ) -> Result<(punctual_trace::file::TraceData, Analysis, Sharing, bool), Failure> {
        let sched = EventGroups {
            sched: true,
            irq: false,
            timer: false,
        };
        let mut best: Option<(punctual_trace::file::TraceData, Analysis, Sharing)> = None;
        for attempt in 0..2 {
            ctx.step(format!(
                "tracing {} alone on CPU {}{}",
                run.what,
                self.cpu,
                if attempt > 0 {
                    " (again: it was shared)"
                } else {
                    ""
                }
            ));
            let steal = punctual_rt::host::CpuSteal::open(self.cpu);
            let steal0 = steal.as_ref().and_then(|s| s.total_ns());
            let t0 = std::time::Instant::now();
            let mut g = Generators::on_cpu(self.cpu);
            (run.start)(&mut g);
            let (trace, analysis) =
                crate::traced::trace_run(ctx, g, sched, self.secs, &self.progress)?;
            // Steal over settling and tracing, scaled to the traced window.
            let elapsed = t0.elapsed().as_nanos().max(1) as u64;
            let stolen = match (steal0, steal.as_ref().and_then(|s| s.total_ns())) {
                (Some(a), Some(b)) => Some(
                    (b.saturating_sub(a) as u128 * analysis.window_ns() as u128 / elapsed as u128)
                        as u64,
                ),
                _ => None,
            };
            let sharing = Sharing::from_trace(&analysis, self.cpu, workload::PREFIX, stolen);
            let better = best.as_ref().is_none_or(|b| sharing.share() < b.2.share());
            if better {
                best = Some((trace, analysis, sharing));
            }
            let done = best.as_ref().is_some_and(|b| !b.2.shared());
            if done || ctx.stop().load(Ordering::Relaxed) {
                let (trace, analysis, sharing) = best.expect("one attempt ran");
                return Ok((trace, analysis, sharing, attempt > 0));
            }
        }
        let (trace, analysis, sharing) = best.expect("two attempts ran");
        Ok((trace, analysis, sharing, true))
    }
}

impl Measurement for EtsionBilling {
    type Outcome = Traced;

    fn label(&self) -> String {
        NAME.into()
    }
    fn wants(&self) -> Option<RtWant> {
        Some(crate::traced::WANTS)
    }
    fn live(&self) -> Option<LiveSpec> {
        Some(crate::traced::phases_live(
            &self.progress,
            self.secs,
            RUNS.len(),
        ))
    }
    fn run(&mut self, ctx: &Ctx) -> Result<Traced, Failure> {
        let mut t = Traced {
            runs: Vec::new(),
            events: 0,
            lost_events: 0,
            kernel_hz: None,
            sim: Vec::new(),
            sharing: Vec::new(),
        };
        for run in &RUNS {
            let (trace, analysis, sharing, again) = self.trace_alone(ctx, run)?;
            t.events += analysis.events;
            t.lost_events += trace.lost_events();
            t.kernel_hz = t
                .kernel_hz
                .or(trace.header.host.as_ref().and_then(|h| h.hz));
            t.runs.push(analysis);
            t.sharing.push((sharing, again));
            if ctx.stop().load(Ordering::Relaxed) {
                break;
            }
        }
        ctx.step("simulating the same applications");
        for (_, a) in traced_apps() {
            let mut both = [None, None];
            for (i, hz) in HZ.iter().enumerate() {
                both[i] = simulated_billing(a.app, *hz, self.sim_secs, Some(ctx.stop()))?;
            }
            t.sim.push(both);
        }
        Ok(t)
    }
    fn report(&self, t: Traced, _ctx: &Ctx, doc: &mut ResultDoc) -> Result<Report, Failure> {
        crate::common::mark(doc, NAME, self.quick);
        crate::traced::unclaim_timer_slack(doc);
        let rows = traced_rows(&t);
        series(doc, &rows, &t.sim);
        let window: u64 = t.runs.iter().map(|a| a.window_ns()).sum();
        doc.extra.insert("window_ns".into(), window.into());
        doc.extra.insert("events".into(), t.events.into());
        doc.extra.insert("lost_events".into(), t.lost_events.into());
        doc.settings.extra.insert("cpu".into(), self.cpu.into());
        doc.extra.insert(
            "cpu_sharing".into(),
            t.sharing
                .iter()
                .zip(&RUNS)
                .map(|((s, again), run)| {
                    json!({"run": run.what, "share": (s.share() * 10_000.0).round() / 10_000.0,
                        "shared": s.shared(), "traced_again": again, "detail": s})
                })
                .collect::<Vec<_>>()
                .into(),
        );
        let mut model = Model::of(&t, &rows, self.sim_secs, self.secs, self.cpu);
        model.sharing = t
            .sharing
            .iter()
            .zip(&RUNS)
            .filter(|((s, _), _)| s.shared())
            .map(|((s, again), run)| {
                format!(
                    "{}{}: its figures are not the stand-in's alone.",
                    s.describe(&format!("while {} ran", run.what)),
                    if *again {
                        " (traced twice, the less shared kept)"
                    } else {
                        ""
                    }
                )
            })
            .collect();
        Ok(Report {
            tables: tables(&model),
            figures: figures(&rows),
            ..Report::default()
        })
    }
}

/// One traced application: its run's analysis, its threads, their statistics at 100, 250 and
/// 1000 Hz, and the paper's application.
pub struct TracedRow<'a> {
    pub analysis: &'a Analysis,
    pub group: Group,
    pub stats: GroupStats,
    pub app: &'static str,
}

/// The applications of the runs that were traced (all of them unless stopped early), in Table
/// 3's order.
fn traced_rows(t: &Traced) -> Vec<TracedRow<'_>> {
    traced_apps()
        .into_iter()
        .filter_map(|(run, a)| {
            let analysis = t.runs.get(run)?;
            let group = analysis.group_by_prefix(a.label, a.prefix);
            let stats = analysis.stats(&group, &[100, 250, 1000], 0);
            Some(TracedRow {
                analysis,
                group,
                stats,
                app: a.app,
            })
        })
        .collect()
}

/// One traced application: its billing at 100 and 1000 Hz, the simulator's, and its quanta.
pub struct AppRow {
    /// The stand-in's name for it (`Game loop`).
    pub label: String,
    /// The paper's application it stands for (`Quake`).
    pub app: &'static str,
    pub sim: [Option<Billed>; 2],
    /// Billing ratio by virtual ticks of phase 0.
    pub ratio: [Option<f64>; 2],
    /// Quanta never billed (fraction).
    pub missed: [Option<f64>; 2],
    /// The billing ratio's range over `PHASES` tick phases.
    pub phases: [Option<(f64, f64)>; 2],
    pub quanta_per_s: f64,
    /// Share of one CPU.
    pub cpu_share: f64,
}

/// The real half's numbers.
pub struct Model {
    pub rows: Vec<AppRow>,
    /// Seconds traced per run.
    pub secs: u64,
    /// The CPU the runs were pinned to.
    pub cpu: usize,
    /// The traced kernel's CONFIG_HZ, when known.
    pub kernel_hz: Option<u32>,
    pub sim_secs: u64,
    /// One sentence per run whose CPU others shared (beyond [`crate::alone::LIMIT`]).
    pub sharing: Vec<String>,
}

impl Model {
    pub fn of(t: &Traced, rows: &[TracedRow], sim_secs: u64, secs: u64, cpu: usize) -> Model {
        let rows = rows
            .iter()
            .zip(&t.sim)
            .map(|(r, sim)| {
                let (a, s) = (r.analysis, &r.stats);
                let w = a.window_ns();
                // Billed at 100, 250 and 1000 Hz: the paper's rates are the first and the last.
                let (b100, b1000) = (&s.billing[0], &s.billing[2]);
                AppRow {
                    label: s.label.clone(),
                    app: r.app,
                    sim: *sim,
                    ratio: [b100.ratio(), b1000.ratio()],
                    missed: [b100.missed_fraction(), b1000.missed_fraction()],
                    phases: HZ.map(|hz| phase_range(a, &r.group, hz)),
                    quanta_per_s: s.quanta_per_second(w),
                    cpu_share: s.cpu_share(w),
                }
            })
            .collect();
        Model {
            rows,
            secs,
            cpu,
            kernel_hz: t.kernel_hz,
            sim_secs,
            sharing: Vec::new(),
        }
    }
}

/// Billing ratios over [`PHASES`] evenly spaced tick phases: (min, max), `None` when the
/// application consumed nothing.
fn phase_range(a: &Analysis, g: &Group, hz: u32) -> Option<(f64, f64)> {
    let period = 1_000_000_000 / hz as u64;
    let ratios: Vec<f64> = (0..PHASES)
        .filter_map(|k| bill(a.runs(g), hz, k * period / PHASES).ratio())
        .collect();
    let min = ratios.iter().cloned().fold(f64::INFINITY, f64::min);
    let max = ratios.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    min.is_finite().then_some((min, max))
}

fn f4(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.4}"))
}

fn pc(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{:.2}%", v * 100.0))
}

fn q2(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.2}"))
}

/// Table 3 (paper, simulator, traced here), the phase sensitivity, and Table 4; runs whose CPU
/// was shared are named under Tables 3 and 4.
pub fn tables(m: &Model) -> Vec<Table> {
    let (mut t3, mut t4) = (table3(m), table4(m));
    for s in &m.sharing {
        t3.note(format!("Warning: {s}"));
        t4.note(format!("Warning: {s}"));
    }
    vec![t3, phase_table(m), t4]
}

fn table3(m: &Model) -> Table {
    let mut t = Table::new(&[
        "Application",
        "source",
        "billing @100Hz",
        "@1000Hz",
        "never billed @100Hz",
        "@1000Hz",
    ])
    .titled("Table 3: scheduler billing success rate (billing ratio; quanta never billed)");
    for (i, r) in m.rows.iter().enumerate() {
        if i > 0 {
            t.rule();
        }
        let p = published(r.app);
        let paper = |f: fn(&Table3Row) -> f64| p.map(f);
        t.row([
            format!("{} ({})", r.label, r.app),
            "paper".into(),
            f4(paper(|p| p.billing[0])),
            f4(paper(|p| p.billing[1])),
            pc(paper(|p| p.missed_pct[0] / 100.0)),
            pc(paper(|p| p.missed_pct[1] / 100.0)),
        ]);
        t.row([
            String::new(),
            "simulator".into(),
            f4(r.sim[0].map(|v| v.ratio)),
            f4(r.sim[1].map(|v| v.ratio)),
            pc(r.sim[0].map(|v| v.missed_pct / 100.0)),
            pc(r.sim[1].map(|v| v.missed_pct / 100.0)),
        ]);
        t.row([
            String::new(),
            "traced here".into(),
            f4(r.ratio[0]),
            f4(r.ratio[1]),
            pc(r.missed[0]),
            pc(r.missed[1]),
        ]);
    }
    t.note(format!(
        "simulator: punctual simulate's model of the application ({} s simulated, Linux 2.4 policy), \
         the same numbers as `punctual experiment run etsion-billing --sim`.",
        m.sim_secs
    ));
    t.note(format!(
        "traced here: each application's stand-in alone ({} s each, pinned to CPU {} as the paper's uniprocessor; \
         Xine's X server from the video run, CPU+Quake the CPU-bound task beside the game loop), billed by virtual \
         ticks of phase 0; paper: Linux 2.4.8 at 100 and 1000 Hz on a Pentium III, each row its own run. Virtual \
         ticks do not wake tasks, so the alarm-tick synchronisation that starved the paper's X server of billing \
         cannot occur here.",
        m.secs, m.cpu
    ));
    t
}

fn phase_table(m: &Model) -> Table {
    let mut t = Table::new(&[
        "Application",
        "ratio @100Hz over 10 phases",
        "ratio @1000Hz over 10 phases",
    ])
    .titled("Billing ratio's sensitivity to the tick phase (min - max)");
    for r in &m.rows {
        let cell =
            |p: Option<(f64, f64)>| p.map_or("-".into(), |(lo, hi)| format!("{lo:.4} - {hi:.4}"));
        t.row([r.label.clone(), cell(r.phases[0]), cell(r.phases[1])]);
    }
    t
}

fn table4(m: &Model) -> Table {
    let mut t = Table::new(&[
        "Application",
        "source",
        "quanta/s @100Hz",
        "@1000Hz",
        "CPU here",
    ])
    .titled("Table 4: average quanta per second");
    // Each application in isolation: CPU+Quake has no row.
    let isolated = m
        .rows
        .iter()
        .filter_map(|r| Some((r, published(r.app)?.quanta_per_s?)));
    for (i, (r, q)) in isolated.enumerate() {
        if i > 0 {
            t.rule();
        }
        t.row([
            format!("{} ({})", r.label, r.app),
            "paper".into(),
            q2(Some(q[0])),
            q2(Some(q[1])),
            String::new(),
        ]);
        t.row([
            String::new(),
            "simulator".into(),
            q2(r.sim[0].map(|v| v.quanta_per_s)),
            q2(r.sim[1].map(|v| v.quanta_per_s)),
            String::new(),
        ]);
        let here = format!("{:.2}", r.quanta_per_s);
        t.row([
            String::new(),
            "traced here".into(),
            here.clone(),
            here,
            format!("{:.1}%", r.cpu_share * 100.0),
        ]);
    }
    t.note(format!(
        "traced here: each application alone, as the paper's, but on one tickless kernel (CONFIG_HZ={}) whose rate \
         is fixed at boot, so one figure for both rates: not reproducible here, because the paper's two columns \
         are two kernels. Quanta are runs whose start and end were both traced (a start from idle, which this \
         kernel does not record, is placed at the wake-up).",
        m.kernel_hz.map_or("?".into(), |h| h.to_string())
    ));
    t
}

/// Each application's effective quanta, with its billing traced and simulated.
fn series(doc: &mut ResultDoc, rows: &[TracedRow], sim: &[[Option<Billed>; 2]]) {
    for (r, sim) in rows.iter().zip(sim) {
        let s = &r.stats;
        let simulated: Vec<serde_json::Value> = HZ
            .iter()
            .zip(sim)
            .filter_map(|(hz, v)| v.map(|b| json!({"hz": hz, "ratio": b.ratio, "missed_fraction": b.missed_pct / 100.0, "quanta_per_second": b.quanta_per_s})))
            .collect();
        let billing: Vec<serde_json::Value> = s
            .billing
            .iter()
            .map(|b: &Billing| json!({"hz": b.hz, "ratio": b.ratio(), "missed_fraction": b.missed_fraction(), "quanta": b.quanta, "ticks": b.ticks, "consumed_ns": b.consumed_ns}))
            .collect();
        doc.series.push(
            Series::from_recorder(&s.label, "effective_quantum", None, &s.quanta)
                .with("paper_application", r.app)
                .with(
                    "quanta_per_second",
                    s.quanta_per_second(r.analysis.window_ns()),
                )
                .with("cpu_ns", s.cpu_ns)
                .with("billing", billing)
                .with("simulated", simulated),
        );
    }
}

/// Mean billed time per quantum-length bucket (Fig. 4's relation, averaged): x = quantum (us).
fn billing_curve(a: &Analysis, g: &Group, hz: u32) -> Line {
    let mut buckets: std::collections::BTreeMap<u32, (f64, f64, u64)> = Default::default();
    for r in a.runs(g).filter(|r| r.whole) {
        let len = r.len().max(1);
        let b = ((len as f64).log10() * 8.0).floor() as u32;
        let ticks = ticks_in(r.start, r.end, hz, 0);
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

/// Fig. 6 (effective quantum CDF) and Fig. 4 (mean billed time against quantum) from the trace;
/// a figure with nothing to draw is left out.
pub fn figures(rows: &[TracedRow]) -> Vec<Figure> {
    let mut figures = Vec::new();
    let cdf: Vec<Line> = rows
        .iter()
        .filter(|r| r.stats.quanta.count() > 0)
        .map(|r| cdf_line(&r.stats.label, &r.stats.quanta))
        .collect();
    if !cdf.is_empty() {
        let svg = punctual_plot::line_plot(
            "Fig. 6: effective quantum durations (CDF)",
            "effective quantum (us)",
            "fraction of quanta",
            &cdf,
            true,
            false,
        );
        figures.extend(crate::common::figure("etsion-billing-fig6", svg).ok());
    }
    let mut curves = Vec::new();
    for r in rows.iter().filter(|r| !r.group.tids.is_empty()).take(3) {
        for h in HZ {
            curves.push(billing_curve(r.analysis, &r.group, h));
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
        let svg = punctual_plot::line_plot(
            "Fig. 4: mean billed time against effective quantum",
            "effective quantum (us)",
            "mean billed (ms)",
            &curves,
            true,
            true,
        );
        figures.extend(crate::common::figure("etsion-billing-fig4", svg).ok());
    }
    figures
}
