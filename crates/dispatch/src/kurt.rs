//! The `kurt-periodic` experiment: KURT's Tables 4.1 and 4.2 (Srinivasan 1998, section 4.4.1).
//!
//! 1, 10, 20 and 30 concurrent processes each try to run once every 10 ms; the share of iterations
//! whose time since the previous one is within 10/50/100/500/1000 us of 10 ms is tabulated (the
//! thesis' metric), for (a) SCHED_FIFO processes that sleep relatively for the rest of the period
//! (the thesis' baseline, Program 4.7), (b) SCHED_FIFO processes with absolute `clock_nanosleep`,
//! (c) processes released by punctual's dispatcher through `wake` actions (KURT's periodic mode),
//! idle and with background disk activity. All three get the same phases (spread evenly over the
//! period, as punctual's automatic phasing does), the same priority (FIFO 80) and locked memory.

use crate::{execute, prepare, progress_for, RunConfig};
use punctual_periodic::{Periodic, FLAG_REALTIME};
use punctual_plan::{Action, MissPolicy, NamedAction, Offset, Plan, Task};
use punctual_result::doc::kind;
use punctual_result::experiment::{Context, Experiment, Figure, Report};
use punctual_result::{Failure, ResultDoc, Series, Table};
use punctual_stats::Recorder;
use punctual_time::clock::{read_clock, sleep_abs, sleep_rel};
use punctual_time::MarginPolicy;
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;

pub const PERIOD: u64 = 10_000_000;
pub const COUNTS: [usize; 4] = [1, 10, 20, 30];
const CHILD_PRIORITY: i32 = 80;

/// How a process waits for its next period.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Relative sleep for the rest of the period (the thesis' FIFO baseline).
    Rel,
    /// Absolute `clock_nanosleep` to `first + k * period`.
    Abs,
    /// Released by the dispatcher (`Periodic::attach`).
    Wake,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Rel => "rel",
            Mode::Abs => "abs",
            Mode::Wake => "wake",
        }
    }
    pub fn label(self) -> &'static str {
        match self {
            Mode::Rel => "(a) SCHED_FIFO, relative sleep",
            Mode::Abs => "(b) SCHED_FIFO, absolute clock_nanosleep",
            Mode::Wake => "(c) punctual wake releases",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "rel" => Ok(Mode::Rel),
            "abs" => Ok(Mode::Abs),
            "wake" => Ok(Mode::Wake),
            o => Err(format!("unknown mode '{o}' (valid: rel, abs, wake)")),
        }
    }
}

fn now() -> u64 {
    read_clock(libc::CLOCK_MONOTONIC)
}

/// One periodic process's body. `first`: absolute instant of its first release (rel/abs); `until`:
/// absolute end (rel/abs; wake runs until its channel ends). Returns the JSON line it reports.
pub fn body(
    mode: Mode,
    period: u64,
    first: u64,
    until: u64,
    channel: Option<&str>,
) -> Result<String, String> {
    let mut interval = Recorder::new();
    let mut lateness = Recorder::new();
    if mode != Mode::Wake {
        let p = libc::sched_param {
            sched_priority: CHILD_PRIORITY,
        };
        // SAFETY: plain syscalls on this process.
        unsafe {
            libc::sched_setscheduler(0, libc::SCHED_FIFO, &p);
            libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE);
        }
    }
    let mut prev: Option<u64> = None;
    let mut note = |t: u64, late: u64, interval: &mut Recorder, lateness: &mut Recorder| {
        if let Some(p) = prev {
            interval.record((t - p).abs_diff(period));
        }
        lateness.record(late);
        prev = Some(t);
    };
    match mode {
        Mode::Rel => {
            sleep_abs(libc::CLOCK_MONOTONIC, first);
            let mut expected = first;
            loop {
                let top = now();
                if top >= until {
                    break;
                }
                note(
                    top,
                    top.saturating_sub(expected),
                    &mut interval,
                    &mut lateness,
                );
                expected = top + period;
                let t = now();
                sleep_rel(libc::CLOCK_MONOTONIC, (top + period).saturating_sub(t));
            }
        }
        Mode::Abs => {
            let mut next = first;
            while next < until {
                sleep_abs(libc::CLOCK_MONOTONIC, next);
                let t = now();
                note(t, t - next, &mut interval, &mut lateness);
                next += period;
                if t >= next {
                    let missed = (t - next) / period + 1;
                    lateness.add_missed(missed);
                    next += missed * period;
                }
            }
        }
        Mode::Wake => {
            let ch = channel.ok_or("wake mode needs --channel")?;
            let mut p = Periodic::attach(ch, FLAG_REALTIME).map_err(|e| e.to_string())?;
            loop {
                match p.wait_next_period() {
                    Ok(r) => {
                        let t = now();
                        note(t, r.lateness, &mut interval, &mut lateness);
                        lateness.add_missed(r.missed);
                    }
                    Err(punctual_periodic::PeriodicError::Channel(
                        punctual_periodic::channel::ChannelError::Ended(_),
                    )) => break,
                    Err(e) => return Err(e.to_string()),
                }
            }
        }
    }
    let v = serde_json::json!({
        "interval": Series::from_recorder("interval", "interval_deviation", None, &interval),
        "lateness": Series::from_recorder("lateness", kind::LATENESS, None, &lateness),
    });
    Ok(v.to_string())
}

/// The thesis' numbers (percent within 10/50/100/500/1000 us), rows for 1, 10, 20, 30 processes.
pub const THESIS_FIFO_IDLE: [[f64; 5]; 4] = [
    [62.22, 99.59, 99.80, 100.0, 100.0],
    [3.36, 15.12, 30.25, 99.34, 99.72],
    [1.44, 7.45, 14.76, 66.48, 99.78],
    [1.21, 6.10, 11.03, 46.61, 73.11],
];
pub const THESIS_KURT_ALL_IDLE: [[f64; 5]; 4] = [
    [99.80, 100.0, 100.0, 100.0, 100.0],
    [96.66, 99.47, 99.67, 100.0, 100.0],
    [99.34, 99.67, 99.91, 100.0, 100.0],
    [97.33, 99.54, 99.80, 99.99, 100.0],
];
pub const THESIS_KURT_PROCS_IDLE: [[f64; 5]; 4] = [
    [99.80, 99.80, 100.0, 100.0, 100.0],
    [96.61, 99.72, 99.87, 100.0, 100.0],
    [99.23, 99.40, 99.61, 99.80, 100.0],
    [99.52, 99.75, 99.89, 100.0, 100.0],
];
pub const THESIS_FIFO_DISK: [[f64; 5]; 4] = [
    [50.20, 81.33, 83.74, 98.99, 99.59],
    [5.50, 17.19, 30.70, 84.40, 92.25],
    [2.00, 7.07, 13.21, 55.50, 84.20],
    [1.09, 4.71, 8.65, 36.47, 64.32],
];
pub const THESIS_KURT_ALL_DISK: [[f64; 5]; 4] = [
    [40.16, 60.04, 73.89, 97.60, 99.60],
    [68.43, 81.68, 88.61, 97.17, 99.17],
    [87.94, 95.17, 97.37, 99.52, 99.66],
    [56.26, 60.74, 65.27, 82.01, 95.72],
];

/// One measured configuration.
pub struct Cell {
    pub mode: Mode,
    pub loaded: bool,
    pub n: usize,
    pub interval: Recorder,
    pub lateness: Recorder,
    pub failures: usize,
    /// (c) only: share of the time the watch before the run lost, and share of the releases that
    /// fell in a gap then at the offsets chosen.
    pub interference: Option<(f64, f64)>,
    /// Share of the CPUs' time the hypervisor stole while this configuration ran (mean over CPUs).
    pub steal: Option<f64>,
}

fn spawn_children(
    ctx: &Context,
    mode: Mode,
    n: usize,
    first: u64,
    until: u64,
    channels: &[String],
) -> Result<Vec<std::process::Child>, Failure> {
    (0..n)
        .map(|i| {
            let mut c = Command::new(&ctx.exe);
            c.arg("__periodic")
                .arg("--mode")
                .arg(mode.name())
                .arg("--period-ns")
                .arg(PERIOD.to_string());
            c.arg("--first-ns")
                .arg((first + PERIOD * i as u64 / n as u64).to_string())
                .arg("--until-ns")
                .arg(until.to_string());
            if mode == Mode::Wake {
                c.arg("--channel").arg(&channels[i]);
            }
            c.stdout(Stdio::piped()).stdin(Stdio::null());
            c.spawn()
                .map_err(|e| Failure::system(format!("starting a periodic process: {e}")))
        })
        .collect()
}

fn collect(children: Vec<std::process::Child>, cell: &mut Cell) {
    for c in children {
        let Ok(out) = c.wait_with_output() else {
            cell.failures += 1;
            continue;
        };
        let line = out
            .stdout
            .lines()
            .map_while(Result::ok)
            .last()
            .unwrap_or_default();
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
            cell.failures += 1;
            continue;
        };
        for (key, rec) in [
            ("interval", &mut cell.interval),
            ("lateness", &mut cell.lateness),
        ] {
            if let Some(r) = serde_json::from_value::<Series>(v[key].clone())
                .ok()
                .and_then(|s| s.recorder().ok())
            {
                let _ = rec.merge(&r);
            }
        }
    }
}

/// Measure one configuration for `secs` ns on dispatcher CPU `cpu`.
pub fn measure(
    ctx: &Context,
    mode: Mode,
    n: usize,
    loaded: bool,
    dur: u64,
    cpu: usize,
) -> Result<Cell, Failure> {
    let mut cell = Cell {
        mode,
        loaded,
        n,
        interval: Recorder::new(),
        lateness: Recorder::new(),
        failures: 0,
        interference: None,
        steal: None,
    };
    let steal = punctual_rt::host::StealMeter::start();
    let loads = if loaded {
        let spec: punctual_load::LoadSpec =
            "io:1".parse().map_err(|e: String| Failure::system(e))?;
        Some(
            punctual_load::Loads::start(&spec, &ctx.exe)
                .map_err(|e| Failure::system(e.to_string()))?,
        )
    } else {
        None
    };
    let result = (|| -> Result<(), Failure> {
        match mode {
            Mode::Rel | Mode::Abs => {
                // Aligned to the period, far enough ahead for every child to start.
                let first = (now() + 300_000_000).div_ceil(PERIOD) * PERIOD;
                let children = spawn_children(ctx, mode, n, first, first + dur, &[])?;
                collect(children, &mut cell);
            }
            Mode::Wake => {
                let tag = std::process::id();
                let channels: Vec<String> = (0..n).map(|i| format!("kurt-{tag}-{i}")).collect();
                let mut plan = Plan {
                    name: format!("kurt-{n}"),
                    cpus: Some(vec![cpu]),
                    shield: false,
                    spin_margin: MarginPolicy::Auto,
                    duration: Some(dur),
                    actions: channels
                        .iter()
                        .map(|c| NamedAction {
                            name: c.clone(),
                            action: Action::Wake {
                                channel: c.clone(),
                                spawn: None,
                            },
                            cpu: None,
                            wcet: None,
                        })
                        .collect(),
                    tasks: (0..n)
                        .map(|i| Task {
                            name: format!("p{i}"),
                            period: PERIOD,
                            offset: Offset::Auto,
                            wcet: None,
                            action: i as u16,
                            cpu: None,
                            miss: MissPolicy::Skip,
                        })
                        .collect(),
                    events: vec![],
                    source: "kurt-periodic".into(),
                };
                // punctual's phasing, away from the interference it sees (--avoid-interference).
                let defaults = RunConfig::default();
                let sched = punctual_rt::SchedParams {
                    policy: defaults.policy,
                    priority: defaults.priority,
                };
                let avoided = crate::phase_around_interference(&mut plan, &[cpu], sched)?;
                if let Some(av) = &avoided {
                    cell.interference = Some((av.interference.lost_share(), av.hit_share));
                }
                let cfg = RunConfig {
                    cpus: vec![cpu],
                    duration: Some(dur),
                    start_grid: avoided.map(|av| av.grid),
                    ..defaults
                };
                // The channels must exist before the clients attach: prepare creates them and waits.
                let children = spawn_children(ctx, mode, n, 0, 0, &channels)?;
                let prepared = match prepare(plan, &cfg) {
                    Ok(p) => p,
                    Err(e) => {
                        for mut c in children {
                            let _ = c.kill();
                            let _ = c.wait();
                        }
                        return Err(e.into());
                    }
                };
                let progress = progress_for(&prepared);
                let out = execute(prepared, &cfg, ctx.stop.clone(), progress)?;
                if let Some(t) = out.trip {
                    return Err(Failure::system(format!("watchdog: {}", t.reason)));
                }
                collect(children, &mut cell);
            }
        }
        Ok(())
    })();
    cell.steal = steal.and_then(|m| m.share());
    if let Some(l) = loads {
        l.stop();
    }
    result.map(|_| cell)
}

pub struct KurtPeriodic;

fn pct(rec: &Recorder) -> [f64; 5] {
    let mut v = [0.0; 5];
    for (i, t) in punctual_stats::WITHIN_NS.iter().enumerate() {
        v[i] = rec.fraction_at_or_below(*t) * 100.0;
    }
    v
}

fn row(t: &mut Table, n: usize, source: &str, v: &[f64; 5]) {
    let mut r = vec![n.to_string(), source.to_string()];
    r.extend(v.iter().map(|p| format!("{p:.2} %")));
    t.row(r);
}

impl Experiment for KurtPeriodic {
    fn name(&self) -> &'static str {
        "kurt-periodic"
    }
    fn reproduces(&self) -> &'static str {
        "KURT Tables 4.1 and 4.2: 1-30 periodic 10 ms processes, FIFO sleep vs punctual wake, idle and disk load"
    }
    fn duration(&self) -> &'static str {
        "about 5 minutes; --quick under a minute"
    }

    fn run(&self, ctx: &Context) -> Result<Report, Failure> {
        let per = if ctx.quick {
            1_200_000_000
        } else {
            10_000_000_000
        };
        let cpu = *punctual_rt::online_cpus().last().expect("a CPU is online");
        // Every mode runs with idle CPUs kept out of halt, as `punctual run` and cyclictest do by
        // default: in a VM a halted vCPU wakes through the host's scheduler, hundreds of
        // microseconds when the host is busy.
        let dma = punctual_rt::dma::DmaLatencyGuard::request(0);
        if let Err(e) = &dma {
            eprintln!(
                "punctual: cpu_dma_latency not held ({e}); idle CPUs may halt between releases"
            );
        }
        let started_at = punctual_result::now_rfc3339();
        let mut cells = Vec::new();
        'outer: for loaded in [false, true] {
            for mode in [Mode::Rel, Mode::Abs, Mode::Wake] {
                for n in COUNTS {
                    if ctx.stop.load(Ordering::Relaxed) {
                        break 'outer;
                    }
                    cells.push(measure(ctx, mode, n, loaded, per, cpu)?);
                }
            }
        }
        let mut tables = Vec::new();
        for (loaded, title) in [
            (false, "Table 4.1"),
            (true, "Table 4.2 (background disk activity)"),
        ] {
            let mut t = Table::new(&["processes", "source", "10 us", "50 us", "100 us", "500 us", "1000 us"])
                .titled(format!("{title}: % of iterations whose time since the previous one is within x of the 10 ms period"));
            for mode in [Mode::Rel, Mode::Abs, Mode::Wake] {
                t.row([mode.label().to_string()]);
                for (k, n) in COUNTS.iter().enumerate() {
                    if let Some(c) = cells
                        .iter()
                        .find(|c| c.mode == mode && c.loaded == loaded && c.n == *n)
                    {
                        row(&mut t, *n, "this machine", &pct(&c.interval));
                    }
                    match (mode, loaded) {
                        (Mode::Rel, false) => {
                            row(&mut t, *n, "thesis SCHED_FIFO", &THESIS_FIFO_IDLE[k])
                        }
                        (Mode::Rel, true) => {
                            row(&mut t, *n, "thesis SCHED_FIFO", &THESIS_FIFO_DISK[k])
                        }
                        (Mode::Wake, false) => {
                            row(
                                &mut t,
                                *n,
                                "thesis KURT (ALL_PROCS)",
                                &THESIS_KURT_ALL_IDLE[k],
                            );
                            row(
                                &mut t,
                                *n,
                                "thesis KURT (KURT_PROCS)",
                                &THESIS_KURT_PROCS_IDLE[k],
                            );
                        }
                        (Mode::Wake, true) => row(
                            &mut t,
                            *n,
                            "thesis KURT (ALL_PROCS)",
                            &THESIS_KURT_ALL_DISK[k],
                        ),
                        _ => {}
                    }
                }
                t.rule();
            }
            t.note("this machine: every process's iterations merged; the metric is |time since the previous iteration - 10 ms| (KURT's).");
            t.note("All modes spread their phases evenly over the period and run at FIFO 80 with locked memory; (c) adds punctual's dispatcher (FIFO 90) on the last CPU,");
            t.note("and shifts its phases away from the interruptions a 0.5 s watch of the CPUs found before each row (run --avoid-interference).");
            tables.push(t);
        }
        // The target: punctual at 30 processes, idle.
        let find = |m: Mode| cells.iter().find(|c| c.mode == m && !c.loaded && c.n == 30);
        if let (Some(w), Some(a), Some(b)) = (find(Mode::Wake), find(Mode::Rel), find(Mode::Abs)) {
            let out = |r: &Recorder| 1.0 - r.fraction_at_or_below(10_000);
            let best = out(&a.interval).min(out(&b.interval));
            let ratio = if out(&w.interval) > 0.0 {
                best / out(&w.interval)
            } else {
                f64::INFINITY
            };
            let mut t = Table::new(&["target (30 processes, idle)", "wanted", "this machine"])
                .titled("kurt-periodic target");
            t.row([
                "punctual within 10 us",
                ">= 99 %",
                &format!("{:.2} %", (1.0 - out(&w.interval)) * 100.0),
            ]);
            t.row([
                "fewer outside 10 us than the better baseline",
                ">= 10x",
                &format!("{ratio:.1}x"),
            ]);
            t.row([
                "punctual release lateness within 10 us",
                "",
                &format!("{:.2} %", w.lateness.fraction_at_or_below(10_000) * 100.0),
            ]);
            let steal = |c: &Cell| {
                c.steal
                    .map(|s| format!("{:.2} %", s * 100.0))
                    .unwrap_or_else(|| "-".into())
            };
            t.row([
                "host steal during the (a) / (b) / (c) rows",
                "",
                &format!("{} / {} / {}", steal(a), steal(b), steal(w)),
            ]);
            tables.push(t);
        }
        let mut doc = ResultDoc::new(ctx.command.clone(), punctual_rt::host::detect(), started_at);
        doc.ended_at = punctual_result::now_rfc3339();
        doc.settings.policy = Some("fifo".into());
        doc.settings.dma_latency_us = dma.as_ref().ok().map(|_| 0);
        doc.settings.priority = Some(CHILD_PRIORITY as u32);
        doc.settings.extra.insert("period_ns".into(), PERIOD.into());
        doc.settings
            .extra
            .insert("per_configuration_ns".into(), per.into());
        doc.settings
            .extra
            .insert("dispatcher_cpu".into(), cpu.into());
        for c in &cells {
            let name = format!(
                "{} {} {}",
                c.mode.name(),
                if c.loaded { "disk" } else { "idle" },
                c.n
            );
            doc.series.push(
                Series::from_recorder(
                    format!("{name} interval"),
                    "interval_deviation",
                    None,
                    &c.interval,
                )
                .with("processes", c.n)
                .with("failures", c.failures),
            );
            if let (Some(st), Some(last)) = (c.steal, doc.series.last_mut()) {
                last.extra.insert("steal_share".into(), st.into());
            }
            if let (Some((lost, hit)), Some(last)) = (c.interference, doc.series.last_mut()) {
                last.extra
                    .insert("interference_lost_share".into(), lost.into());
                last.extra
                    .insert("interference_hit_share".into(), hit.into());
            }
            doc.series.push(
                Series::from_recorder(
                    format!("{name} lateness"),
                    kind::LATENESS,
                    None,
                    &c.lateness,
                )
                .with("processes", c.n),
            );
        }
        let mut lines = Vec::new();
        for c in cells.iter().filter(|c| c.n == 30) {
            let points: Vec<(f64, f64)> = [
                1_000u64, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000,
                1_000_000, 2_000_000,
            ]
            .iter()
            .map(|&x| {
                (
                    x as f64 / 1000.0,
                    c.interval.fraction_at_or_below(x) * 100.0,
                )
            })
            .collect();
            lines.push(punctual_plot::Line {
                label: format!(
                    "{} {}",
                    c.mode.label(),
                    if c.loaded { "(disk)" } else { "(idle)" }
                ),
                points,
            });
        }
        let mut figures = Vec::new();
        if !lines.is_empty() {
            let svg = punctual_plot::line_plot(
                "KURT Fig. 4.5/4.6: 30 periodic 10 ms processes",
                "deviation from 10 ms (us)",
                "% of iterations within",
                &lines,
                true,
                false,
            )
            .map_err(|e| Failure::system(format!("drawing the figure: {}", e.0)))?;
            figures.push(Figure {
                name: "kurt-periodic-30".into(),
                svg,
            });
        }
        Ok(Report {
            tables,
            doc,
            figures,
        })
    }
}
