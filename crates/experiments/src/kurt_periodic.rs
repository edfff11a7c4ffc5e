//! `kurt-periodic`: KURT's Tables 4.1 and 4.2 (Srinivasan 1998, section 4.4.1).
//!
//! 1, 10, 20 and 30 concurrent processes each try to run once every 10 ms; the share of iterations
//! whose time since the previous one is within 10/50/100/500/1000 us of 10 ms is tabulated (the
//! thesis' metric), for (a) SCHED_FIFO processes that sleep relatively for the rest of the period
//! (the thesis' baseline, Program 4.7), (b) SCHED_FIFO processes with absolute `clock_nanosleep`,
//! (c) processes released by punctual's dispatcher through `wake` actions (KURT's periodic mode,
//! SCHED_KURT_ALL_PROCS: everything else still runs), (d) the same in real-time mode
//! (SCHED_KURT_PROCS: the dispatcher's CPU shielded, the processes on it, everything else moved
//! away), idle and with background disk activity. All three get the same phases (spread evenly over the
//! period, as punctual's automatic phasing does), the same priority (FIFO 80) and locked memory.
//!
//! measure: [`measure`] one configuration (a [`Cell`]), [`KurtPeriodic::run`] all of them;
//! model: [`Model`]; tables: [`tables`]; figures: [`figures`].

use crate::published::kurt::*;
use punctual_dispatch::measure::{run_plan, run_plan_traced};
use punctual_dispatch::RunConfig;
use punctual_explain::{
    ExplainConfig, Explainer, LateLog, LateRelease, Stall, StallKind, Tally, Waiter,
};
use punctual_periodic::{Periodic, FLAG_REALTIME};
use punctual_plan::{Action, MissPolicy, NamedAction, Offset, Plan, Task};
use punctual_result::doc::kind;
use punctual_result::{Failure, Fallback, ResultDoc, Series, Table};
use punctual_rt::{Policy, RtWant};
use punctual_session::{Ctx, Figure, LiveSpec, Measurement, Report};
use punctual_stats::{Passed, Recorder};
use punctual_time::clock::{read_clock, sleep_abs, sleep_rel};
use punctual_time::MarginPolicy;
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;

pub const NAME: &str = "kurt-periodic";
pub const PERIOD: u64 = 10_000_000;
pub const COUNTS: [usize; 4] = [1, 10, 20, 30];
const CHILD_PRIORITY: i32 = 80;
/// The modes in table order.
const MODES: [Mode; 4] = [Mode::Rel, Mode::Abs, Mode::Wake, Mode::WakeShielded];

/// How a process waits for its next period.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Relative sleep for the rest of the period (the thesis' FIFO baseline).
    Rel,
    /// Absolute `clock_nanosleep` to `first + k * period`.
    Abs,
    /// Released by the dispatcher (`Periodic::attach`).
    Wake,
    /// Released by the dispatcher on a shielded CPU, the processes pinned to it (real-time mode).
    WakeShielded,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Rel => "rel",
            Mode::Abs => "abs",
            Mode::Wake => "wake",
            Mode::WakeShielded => "wake-shielded",
        }
    }
    pub fn label(self) -> &'static str {
        match self {
            Mode::Rel => "(a) SCHED_FIFO, relative sleep",
            Mode::Abs => "(b) SCHED_FIFO, absolute clock_nanosleep",
            Mode::Wake => "(c) punctual wake releases",
            Mode::WakeShielded => "(d) punctual wake releases, shielded",
        }
    }
}

impl Mode {
    /// Released by punctual's dispatcher ((c) and (d)).
    pub fn released(self) -> bool {
        matches!(self, Mode::Wake | Mode::WakeShielded)
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "rel" => Ok(Mode::Rel),
            "abs" => Ok(Mode::Abs),
            "wake" => Ok(Mode::Wake),
            "wake-shielded" => Ok(Mode::WakeShielded),
            o => Err(format!(
                "unknown mode '{o}' (valid: rel, abs, wake, wake-shielded)"
            )),
        }
    }
}

fn now() -> u64 {
    read_clock(libc::CLOCK_MONOTONIC)
}

/// Late releases a self-timed process keeps for `--explain` (a 10 s row has 1,000 releases).
const CHILD_LATE_CAPACITY: usize = 4096;

/// One periodic process, as the parent hands it over: serialised whole (`__periodic --spec
/// JSON`), not formatted into flags for a parser to read back.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChildSpec {
    pub mode: Mode,
    pub period_ns: u64,
    /// Absolute instant (CLOCK_MONOTONIC) of its first release (rel/abs).
    #[serde(default)]
    pub first_ns: u64,
    /// Absolute end (rel/abs; wake runs until its channel ends).
    #[serde(default)]
    pub until_ns: u64,
    /// The dispatcher's channel it attaches to (wake modes).
    #[serde(default)]
    pub channel: Option<String>,
    /// Keep the releases later than this for `--explain` (rel/abs: a wake client's are kept by
    /// the dispatcher); a wake client keeps its held reads ([`HELD_SERIES`]) beyond it.
    #[serde(default)]
    pub late_bound_ns: Option<u64>,
}

/// The series a wake client's *held reads* are explained in: releases on time (their spin ended
/// within the bound) whose process read its clock, where KURT's interval is measured, more than the
/// bound after the spin's end. The stretch between is the client's own few stores and a clock
/// read, so it is also a stall (`punctual_explain::Stall`) for the explanation. Measured in (d):
/// 22 of 999 intervals off by more than 10 us with 3 late releases, the processes held 100-230 us
/// there without any guest event (docs/benchmarks.md).
pub const HELD_SERIES: u32 = u32::MAX;

/// The hidden subcommand a periodic process runs.
pub const CHILD_SUBCOMMAND: &str = "__periodic";

impl ChildSpec {
    /// The spec a `--spec` argument carries.
    pub fn from_json(json: &str) -> Result<ChildSpec, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    /// `exe __periodic --spec JSON`, its report read from its stdout.
    pub fn command(&self, exe: &std::path::Path) -> Command {
        let mut c = Command::new(exe);
        c.arg(CHILD_SUBCOMMAND)
            .arg("--spec")
            .arg(serde_json::to_string(self).expect("a spec serialises"));
        c.stdout(Stdio::piped()).stdin(Stdio::null());
        c
    }
}

/// A setting held until it drops (the guards of `punctual-rt`).
type Held = Box<dyn std::any::Any>;

/// The self-timed modes' class: FIFO 80 and locked memory, readied through `punctual-rt` (which
/// restores them when the guards drop). What the kernel refused is returned to report, the
/// process running on in the normal class or with unlocked memory.
fn self_timed_setup() -> Result<(Vec<Held>, Vec<Fallback>), String> {
    let mut held: Vec<Held> = Vec::new();
    let guards = punctual_rt::setup_current_thread(&punctual_rt::ThreadRequest {
        cpu: None,
        policy: Policy::Fifo,
        priority: CHILD_PRIORITY as u32,
        timer_slack_ns: None,
        fall_back_on_refusal: true,
    })
    .map_err(|e| e.to_string())?;
    let mut fallbacks: Vec<Fallback> = guards.fallback.iter().cloned().collect();
    held.push(Box::new(guards));
    match punctual_rt::memlock::lock_all_or_fallback() {
        Ok(g) => held.push(Box::new(g)),
        Err(f) => fallbacks.push(f),
    }
    Ok((held, fallbacks))
}

/// One periodic process's body. Returns the JSON line it reports.
pub fn body(spec: &ChildSpec) -> Result<String, String> {
    let ChildSpec {
        mode,
        period_ns: period,
        first_ns: first,
        until_ns: until,
        ref channel,
        late_bound_ns: late_bound,
    } = *spec;
    let channel = channel.as_deref();
    let mut interval = Recorder::new();
    let mut lateness = Recorder::new();
    let mut late = match late_bound {
        Some(b) if !mode.released() => LateLog::new(b, CHILD_LATE_CAPACITY),
        _ => LateLog::off(),
    };
    // Kept past `bound` ns (a 10 s row has 1,000 releases).
    let client_log = |bound: fn(u64) -> u64| match late_bound {
        Some(b) if mode.released() => LateLog::new(bound(b), CHILD_LATE_CAPACITY),
        _ => LateLog::off(),
    };
    // A wake client's stretches where it did only its own few stores between two clock reads:
    // from its spin's end to its read after the wait, past the bound (`held`, KURT's interval),
    // and every one from that read to its next wake-up (`back`, a stall only: no release is
    // judged there, and what is not the client on its CPU before it blocks is not read as its).
    let (mut held, mut back) = (client_log(|b| b), client_log(|_| 0));
    // A wake client's class comes with its attach (FLAG_REALTIME).
    let (_held, fallbacks) = if mode.released() {
        (Vec::new(), Vec::new())
    } else {
        self_timed_setup()?
    };
    let mut prev: Option<u64> = None;
    let mut note = |t: u64, l: u64, interval: &mut Recorder, lateness: &mut Recorder| {
        if let Some(p) = prev {
            interval.record((t - p).abs_diff(period));
        }
        lateness.record(l);
        if late.is_late(l) {
            let (tid, cpu) = punctual_explain::here();
            late.push(LateRelease {
                series: 0,
                tid,
                cpu,
                waiter: Waiter::Sleeper,
                target: t - l,
                actual: t,
                handover: None,
                behind: false,
                last_read: None,
                own_work: None,
            });
        }
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
                // A stall past `until` steps over releases the run never had: not missed.
                let passed = Passed::at(next, t, period, until);
                lateness.add_missed(passed.missed);
                next += passed.step * period;
            }
        }
        Mode::Wake | Mode::WakeShielded => {
            let ch = channel.ok_or("wake mode needs --channel")?;
            let mut p = Periodic::attach(ch, FLAG_REALTIME).map_err(|e| e.to_string())?;
            // From before its first wait too: a client waiting for its first release wakes each
            // 100 ms to ask after its dispatcher (a poll), on the CPU the others' releases use.
            let mut returned = now();
            loop {
                match p.wait_next_period() {
                    Ok(r) => {
                        let t = now();
                        stretch(&mut back, returned, r.woke);
                        stretch(&mut held, r.target + r.lateness, t);
                        note(t, r.lateness, &mut interval, &mut lateness);
                        lateness.add_missed(r.missed);
                        returned = t;
                    }
                    Err(punctual_periodic::PeriodicError::Channel(
                        punctual_periodic::channel::ChannelError::Ended(_),
                    )) => break,
                    Err(e) => return Err(e.to_string()),
                }
            }
        }
    }
    let (records, dropped) = late.into_records();
    let (held, held_dropped) = held.into_records();
    let (back, back_dropped) = back.into_records();
    let v = serde_json::json!({
        "interval": Series::from_recorder("interval", kind::INTERVAL_DEVIATION, None, &interval),
        "lateness": Series::from_recorder("lateness", kind::LATENESS, None, &lateness),
        // [target, actual, tid, cpu] of each release later than the bound.
        "late": records.iter().map(|r| [r.target, r.actual, r.tid as u64, r.cpu as u64]).collect::<Vec<_>>(),
        "late_dropped": dropped,
        // [spin end, read, tid, cpu] of each held read (wake modes).
        "held": held.iter().map(|r| [r.target, r.actual, r.tid as u64, r.cpu as u64]).collect::<Vec<_>>(),
        "held_dropped": held_dropped,
        // [read after a release (or before the first wait), first read after the next wake-up,
        // tid, cpu] (wake modes).
        "back": back.iter().map(|r| [r.target, r.actual, r.tid as u64, r.cpu as u64]).collect::<Vec<_>>(),
        "back_dropped": back_dropped,
        "fallbacks": fallbacks,
    });
    Ok(v.to_string())
}

/// A wake client's stretch `[from, to]` between two of its clock reads, kept in `log` when
/// longer than its bound.
fn stretch(log: &mut LateLog, from: u64, to: u64) {
    if log.is_late(to.saturating_sub(from)) {
        let (tid, cpu) = punctual_explain::here();
        log.push(LateRelease {
            series: HELD_SERIES,
            tid,
            cpu,
            // Released by the dispatcher, past its release on its own: no timer of its own was
            // due (`Sleeper` would say one was).
            waiter: Waiter::Client,
            target: from,
            actual: to,
            handover: None,
            behind: false,
            last_read: None,
            own_work: None,
        });
    }
}

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
    /// The row's late releases by cause (`--explain`, on by default).
    pub causes: Option<Tally>,
    /// (c) and (d): the processes' held reads ([`HELD_SERIES`]) by cause.
    pub held: Option<Tally>,
    /// The floor on the row's CPUs, watched just before it ran (`windows`: share of 10 ms
    /// windows holding an interruption over 10 us; `instants`: share of instants a release would
    /// be late at).
    pub floor: punctual_bench::gaps::Floor,
    /// A few late releases of each cause with how each was decided.
    pub examples: Option<serde_json::Value>,
    /// `--explain-trace`: the file the row's trace was kept in, or why it could not be written.
    pub trace_file: Option<Result<String, String>>,
    /// Stalls the row's threads (dispatcher and processes) had no room to log.
    pub stalls_dropped: u64,
    /// What the processes could not have (FIFO or mlockall refused), each once.
    pub fallbacks: Vec<Fallback>,
    /// (c) and (d): the dispatcher's margin and the processes' leads at the end of the row
    /// ([`dispatcher_facts`]).
    pub dispatcher: Option<serde_json::Value>,
}

impl Cell {
    /// A configuration with nothing measured yet.
    pub fn new(mode: Mode, loaded: bool, n: usize) -> Cell {
        Cell {
            mode,
            loaded,
            n,
            interval: Recorder::new(),
            lateness: Recorder::new(),
            failures: 0,
            interference: None,
            steal: None,
            causes: None,
            held: None,
            floor: Default::default(),
            examples: None,
            trace_file: None,
            stalls_dropped: 0,
            fallbacks: Vec::new(),
            dispatcher: None,
        }
    }
}

/// What the dispatcher ended a row with: its automatic margin and the cap it kept to, how often it
/// breathed, spun through or woke late, its CPU share, the phase moves and the tasks moved, and
/// the wake processes' final leads (least, median, most) with their cap. Two runs of a row that
/// differ in `dispatcher` releases are told apart by these (a (d) 20 row once read `dispatcher`
/// for 798 of 926 late releases, the same row in other runs 6 and 1).
pub fn dispatcher_facts(out: &punctual_dispatch::Outcome) -> serde_json::Value {
    let mut leads: Vec<u64> = Vec::new();
    let mut lead_cap = None;
    for s in &out.slots {
        for (k, v) in s.report.iter().flat_map(|r| &r.extra) {
            match k.as_str() {
                "final_lead_ns" => leads.extend(v.as_u64()),
                "lead_cap_ns" => lead_cap = lead_cap.max(v.as_u64()),
                _ => {}
            }
        }
    }
    leads.sort_unstable();
    let cpus: Vec<serde_json::Value> = out
        .cpus
        .iter()
        .map(|c| {
            serde_json::json!({
                "cpu": c.cpu,
                "margin_ns": c.margin_ns,
                "margin_cap_ns": (c.margin_cap_ns != u64::MAX).then_some(c.margin_cap_ns),
                "breathers": c.breathers,
                "spun_through": c.spun_through,
                "yields": c.yields,
                "woke_late": c.woke_late,
                "cpu_share": c.cpu_ns as f64 / c.wall_ns.max(1) as f64,
            })
        })
        .collect();
    let moved: Vec<&str> = out
        .slots
        .iter()
        .filter(|s| s.stats.rephased > 0)
        .map(|s| s.info.name.as_str())
        .collect();
    let spread =
        (!leads.is_empty()).then(|| [leads[0], leads[leads.len() / 2], leads[leads.len() - 1]]);
    serde_json::json!({
        "cpus": cpus,
        "rephased": out.slots.iter().map(|s| s.stats.rephased).sum::<u32>(),
        "rephased_tasks": moved,
        "leads_ns": spread,
        "lead_cap_ns": lead_cap,
    })
}

fn spawn_children(
    exe: &std::path::Path,
    mode: Mode,
    n: usize,
    (first, until): (u64, u64),
    channels: &[String],
    late_bound: Option<u64>,
) -> Result<Vec<std::process::Child>, Failure> {
    (0..n)
        .map(|i| {
            let spec = ChildSpec {
                mode,
                period_ns: PERIOD,
                first_ns: first + PERIOD * i as u64 / n as u64,
                until_ns: until,
                channel: mode.released().then(|| channels[i].clone()),
                late_bound_ns: late_bound,
            };
            spec.command(exe)
                .spawn()
                .map_err(|e| Failure::system(format!("starting a periodic process: {e}")))
        })
        .collect()
}

/// The children's figures merged into `cell`; their late releases (self-timed modes) added to
/// `late`, with the ones they had no room for.
fn collect(children: Vec<std::process::Child>, cell: &mut Cell, late: &mut Reports) {
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
        add_report(&line, cell, late);
    }
}

/// What the processes of a row reported for `--explain`.
#[derive(Debug, Default)]
struct Reports {
    /// Their late releases (self-timed modes, series 0) or held reads (wake modes,
    /// [`HELD_SERIES`]).
    late: Vec<LateRelease>,
    /// Those they had no room for.
    dropped: u64,
    /// A wake client's ways back to its wait, one a release: its own stores, `Busy` stalls.
    back: Vec<Stall>,
    back_dropped: u64,
}

/// A report's `[from, to, tid, cpu]` rows.
fn report_rows(v: &serde_json::Value) -> impl Iterator<Item = [u64; 4]> + '_ {
    v.as_array().into_iter().flatten().map(|r| {
        let f = |i: usize| r.get(i).and_then(serde_json::Value::as_u64).unwrap_or(0);
        [f(0), f(1), f(2), f(3)]
    })
}

/// One process's report line (see [`body`]) merged into `cell` and `late`, with what it had no
/// room for. A line that does not parse is a failed process.
fn add_report(line: &str, cell: &mut Cell, late: &mut Reports) {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
        cell.failures += 1;
        return;
    };
    let count = |k: &str| v[k].as_u64().unwrap_or(0);
    late.dropped += count("late_dropped") + count("held_dropped");
    late.back_dropped += count("back_dropped");
    late.back.extend(report_rows(&v["back"]).map(|f| Stall {
        tid: f[2] as i32,
        cpu: f[3] as u32,
        kind: StallKind::Busy,
        from: f[0],
        to: f[1],
    }));
    let late_ones = report_rows(&v["late"]).map(|r| (0, r));
    let held = report_rows(&v["held"]).map(|r| (HELD_SERIES, r));
    for (series, f) in late_ones.chain(held) {
        late.late.push(LateRelease {
            series,
            tid: f[2] as i32,
            cpu: f[3] as u32,
            waiter: if series == HELD_SERIES {
                Waiter::Client
            } else {
                Waiter::Sleeper
            },
            target: f[0],
            actual: f[1],
            handover: None,
            behind: false,
            last_read: None,
            own_work: None,
        });
    }
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
    let fallbacks: Vec<Fallback> =
        serde_json::from_value(v["fallbacks"].clone()).unwrap_or_default();
    for f in fallbacks {
        if !cell.fallbacks.contains(&f) {
            cell.fallbacks.push(f);
        }
    }
}

/// How long the floor is watched before each row (the quick version: half).
pub const FLOOR_WATCH_NS: u64 = punctual_bench::gaps::FLOOR_WATCH_NS;

/// How one row is measured besides its mode: its length, the dispatcher's CPU, and `--explain`
/// (`None`: no trace, no floor).
pub struct RowSettings<'a> {
    pub dur: u64,
    pub cpu: usize,
    pub explain: Option<&'a ExplainConfig>,
    /// How long the floor is watched before the row.
    pub floor_watch: u64,
}

/// Measure one configuration.
pub fn measure(
    ctx: &Ctx,
    mode: Mode,
    n: usize,
    loaded: bool,
    row: &RowSettings,
) -> Result<Cell, Failure> {
    let mut cell = Cell::new(mode, loaded, n);
    let steal = punctual_rt::host::StealMeter::start();
    let loads = if loaded {
        let spec: punctual_load::LoadSpec =
            "io:1".parse().map_err(|e: String| Failure::system(e))?;
        Some(ctx.start_load(&spec)?)
    } else {
        None
    };
    let result = match mode {
        Mode::Rel | Mode::Abs => measure_self_timed(ctx, &mut cell, row),
        Mode::Wake | Mode::WakeShielded => measure_released(ctx, &mut cell, row),
    };
    cell.steal = steal.and_then(|m| m.share());
    if let Some(l) = loads {
        l.stop();
    }
    result.map(|_| cell)
}

/// The floor on `cpus` for the row's bound, watched just before it runs (at the clients'
/// priority, so what it sees is what they would meet).
fn watch_floor(
    ctx: &Ctx,
    cpus: &[usize],
    row: &RowSettings,
) -> Result<punctual_bench::gaps::Floor, Failure> {
    let Some(x) = row.explain else {
        return Ok(Default::default());
    };
    let sched = punctual_rt::SchedParams {
        policy: Policy::Fifo,
        priority: CHILD_PRIORITY as u32,
    };
    punctual_bench::gaps::measure_floor(cpus, row.floor_watch, x.bound, sched, ctx.stop())
        .map_err(|e| Failure::system(format!("watching the floor: {e}")))
}

/// (a) and (b): processes that time themselves, their late releases reported with their figures.
fn measure_self_timed(ctx: &Ctx, cell: &mut Cell, row: &RowSettings) -> Result<(), Failure> {
    cell.floor = watch_floor(ctx, &punctual_rt::online_cpus(), row)?;
    let explainer = row.explain.map(Explainer::start).transpose()?;
    // Aligned to the period, far enough ahead for every child to start.
    let first = (now() + 300_000_000).div_ceil(PERIOD) * PERIOD;
    let bound = row.explain.map(|x| x.bound);
    // The processes are woken wherever the kernel runs them: every CPU is polled where it would
    // halt, as `cpu_dma_latency` 0 keeps every CPU out of deep idle where it can (the same for
    // every mode: design.md, "Idle that halts").
    let _poll = punctual_rt::idle_poll::Claim::poll(&punctual_rt::online_cpus());
    let children = spawn_children(
        ctx.exe(),
        cell.mode,
        cell.n,
        (first, first + row.dur),
        &[],
        bound,
    )?;
    let mut late = Reports::default();
    collect(children, cell, &mut late);
    if let Some(x) = explainer {
        let trace = x.stop()?;
        cell.trace_file = trace.captured.kept_in_text();
        let x = trace.explain(&late.late, &[(0, late.dropped)]);
        cell.causes = Some(x.tally(0));
        cell.examples = Some(x.examples_json());
    }
    Ok(())
}

/// The plan of (c) and (d): `n` wake tasks at the period, automatic offsets, on `cpu`.
fn wake_plan(n: usize, cpu: usize, dur: u64, channels: &[String]) -> Plan {
    Plan {
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
                    user: None,
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
    }
}

/// (c) and (d): processes released by the dispatcher, whose late releases it keeps.
fn measure_released(ctx: &Ctx, cell: &mut Cell, row: &RowSettings) -> Result<(), Failure> {
    let shielded = cell.mode == Mode::WakeShielded;
    let online = punctual_rt::online_cpus();
    let busy = punctual_dispatch::busiest_irq_cpu(std::time::Duration::from_millis(200));
    // (d) shields a CPU without the busiest device interrupt, which may be one the shield cannot
    // move (design.md, "Leads, caps and placement").
    let cpu = if shielded {
        punctual_dispatch::quiet_cpu(row.cpu, &online, busy)
    } else {
        row.cpu
    };
    let (n, dur) = (cell.n, row.dur);
    let tag = std::process::id();
    let channels: Vec<String> = (0..n).map(|i| format!("kurt-{tag}-{i}")).collect();
    let mut plan = wake_plan(n, cpu, dur, &channels);
    // punctual's phasing, away from the interference it sees (--avoid-interference).
    let defaults = RunConfig::default();
    let sched = punctual_rt::SchedParams {
        policy: defaults.policy,
        priority: defaults.priority,
    };
    let avoided =
        punctual_dispatch::phase_around_interference(&mut plan, &[cpu], sched, ctx.stop())?;
    if let Some(av) = &avoided {
        cell.interference = Some((av.interference.lost_share(), av.hit_share));
    }
    // (c): the processes on the CPUs without the dispatcher (and without the busiest device
    // interrupt when more remain; on every CPU when fewer than two remain), round robin in phase
    // order, each lead capped by its CPU's releases and, on a CPU shared with the dispatcher, by
    // its spacing: clients on one CPU never spin at once, and the dispatcher's spins keep off its
    // clients' instants (design.md, "Leads, caps and placement"). (d): all on the shielded CPU.
    let placement = if shielded {
        vec![cpu; n]
    } else {
        punctual_dispatch::place_clients(n, &[cpu], &online, busy)
    };
    // In (d) the clients share the shielded CPU with the dispatcher, which therefore keeps its
    // margin to the spin budget (a CPU with wake actions does: a first quick run, before it did,
    // had (d) at 82 % for 30 processes, starved by its spinning).
    let cfg = RunConfig {
        client_cpus: placement
            .iter()
            .enumerate()
            .map(|(i, &c)| (i as u16, c))
            .collect(),
        cpus: vec![cpu],
        duration: Some(dur),
        avoid: avoided
            .as_ref()
            .map(|av| std::sync::Arc::new(av.interference.clone())),
        start_grid: avoided.map(|av| av.grid),
        shielded,
        // As `run --avoid-interference`: the automatic phases may move during the run when a
        // process's late releases line up with interference the watch missed.
        movable: (0..n).collect(),
        ..defaults
    };
    // The clients attach to channels the plan's preparation creates (it waits for them).
    let bound = row.explain.as_ref().map(|x| x.bound);
    let children = spawn_children(ctx.exe(), cell.mode, n, (0, 0), &channels, bound)?;
    let kill = |children: Vec<std::process::Child>| {
        for mut c in children {
            punctual_rt::signals::end_child(&mut c);
        }
    };
    if !shielded {
        for (c, &to) in children.iter().zip(&placement) {
            if let Err(e) = punctual_rt::affinity::set(c.id() as i32, &[to]) {
                kill(children);
                return Err(Failure::system(format!(
                    "placing a periodic process on CPU {to}: {e}"
                )));
            }
        }
    }
    // Real-time mode: the processes join the dispatcher on its CPU, everything else that can
    // move leaves it (restored when `_shield` drops, on every path).
    let _shield = if shielded {
        match real_time_mode(cpu, &children) {
            Ok(s) => Some(s),
            Err(e) => {
                kill(children);
                return Err(e);
            }
        }
    } else {
        None
    };
    let floor_cpus = if shielded { vec![cpu] } else { online };
    let explain = row.explain.map(|x| ExplainConfig {
        quiet: if shielded { vec![cpu] } else { Vec::new() },
        ..x.clone()
    });
    let run = watch_floor(ctx, &floor_cpus, row).and_then(|floor| {
        cell.floor = floor;
        let stop = ctx.stop().clone();
        match &explain {
            Some(x) => {
                run_plan_traced(plan, &cfg, stop, None, x).map(|(o, t, r, u)| (o, Some((t, r, u))))
            }
            None => Ok((run_plan(plan, &cfg, stop, None)?, None)),
        }
    });
    let (out, traced) = match run {
        Ok(r) => r,
        Err(e) => {
            kill(children);
            return Err(e);
        }
    };
    if let Some(t) = out.trip {
        return Err(Failure::system(format!("watchdog: {}", t.reason)));
    }
    cell.dispatcher = Some(dispatcher_facts(&out));
    // The processes end with their channels; their held reads join the dispatcher's records.
    let mut held = Reports::default();
    collect(children, cell, &mut held);
    if let Some((mut trace, mut records, mut unlogged)) = traced {
        let stalls = held.late.iter().map(|r| Stall {
            tid: r.tid,
            cpu: r.cpu,
            kind: StallKind::Busy,
            from: r.target,
            to: r.actual,
        });
        // A held read that did not fit is not a stall either.
        trace.add_stalls(stalls.chain(held.back), held.back_dropped + held.dropped);
        cell.trace_file = trace.captured.kept_in_text();
        cell.stalls_dropped = trace.captured.stalls_dropped;
        records.extend(held.late);
        unlogged.push((HELD_SERIES, held.dropped));
        let mut x = trace.explain(&records, &unlogged);
        cell.held = Some(x.tally(HELD_SERIES));
        // The lateness series' examples are of its late releases.
        x.details.retain(|(r, _)| r.series != HELD_SERIES);
        cell.examples = Some(x.examples_json());
        let mut t = Tally::default();
        for (_, s) in x.series.iter().filter(|(s, _)| **s != HELD_SERIES) {
            t.merge(s);
        }
        cell.causes = Some(t);
    }
    Ok(())
}

/// KURT's SCHED_KURT_PROCS on `cpu`: the periodic processes pinned to it, and a shield that moves
/// every other movable task and IRQ off it (this process and the children stay).
fn real_time_mode(
    cpu: usize,
    children: &[std::process::Child],
) -> Result<punctual_dispatch::shield::Shield, Failure> {
    for c in children {
        punctual_rt::affinity::set(c.id() as i32, &[cpu]).map_err(|e| {
            Failure::system(format!("pinning a periodic process to CPU {cpu}: {e}"))
        })?;
    }
    let mut keep: Vec<i32> = children.iter().map(|c| c.id() as i32).collect();
    keep.push(std::process::id() as i32);
    let plan = punctual_dispatch::shield::plan(&[cpu], &keep)
        .map_err(|e| Failure::system(format!("real-time mode on CPU {cpu}: {e}")))?;
    punctual_dispatch::shield::Shield::apply(&plan)
        .map_err(|e| Failure::system(format!("real-time mode on CPU {cpu}: {e}")))
}

/// The experiment: every configuration, idle then under disk load.
pub struct KurtPeriodic {
    pub quick: bool,
    /// How long each configuration runs.
    pub per: u64,
    /// The dispatcher's CPU.
    pub cpu: usize,
    /// Every row traced and its late releases explained, with the floor watched before it (on by
    /// default; off when tracing is refused, said once).
    pub explain: Option<ExplainConfig>,
}

impl KurtPeriodic {
    pub fn new(opts: crate::Options) -> KurtPeriodic {
        KurtPeriodic {
            quick: opts.quick,
            per: if opts.quick {
                1_200_000_000
            } else {
                10_000_000_000
            },
            cpu: punctual_rt::affinity::last_online_cpu(),
            explain: Some(ExplainConfig {
                keep: opts.explain_trace.map(punctual_explain::KeepTrace::new),
                ..ExplainConfig::default()
            }),
        }
    }

    fn row(&self) -> RowSettings<'_> {
        RowSettings {
            dur: self.per,
            cpu: self.cpu,
            explain: self.explain.as_ref(),
            floor_watch: if self.quick {
                FLOOR_WATCH_NS / 2
            } else {
                FLOOR_WATCH_NS
            },
        }
    }

    fn configurations() -> impl Iterator<Item = (bool, Mode, usize)> {
        [false, true].into_iter().flat_map(|loaded| {
            MODES
                .into_iter()
                .flat_map(move |mode| COUNTS.into_iter().map(move |n| (loaded, mode, n)))
        })
    }
}

impl Measurement for KurtPeriodic {
    type Outcome = Vec<Cell>;

    fn label(&self) -> String {
        NAME.into()
    }
    /// Every mode runs with idle CPUs kept out of halt, as `punctual run` and cyclictest do by
    /// default: in a VM a halted vCPU wakes through the host's scheduler, hundreds of
    /// microseconds when the host is busy.
    fn wants(&self) -> Option<RtWant> {
        Some(RtWant {
            policy: Policy::Fifo,
            priority: CHILD_PRIORITY as u32,
            mlock: true,
            dma_latency_us: Some(0),
        })
    }
    fn live(&self) -> Option<LiveSpec> {
        let n = Self::configurations().count() as u64;
        Some(LiveSpec::timed(self.per.saturating_mul(n), String::new))
    }
    fn run(&mut self, ctx: &Ctx) -> Result<Vec<Cell>, Failure> {
        crate::common::needs_realtime(ctx, NAME, "periodic processes")?;
        let mut cells = Vec::new();
        for (loaded, mode, n) in Self::configurations() {
            if ctx.stop().load(Ordering::Relaxed) {
                break;
            }
            ctx.step(format!(
                "{} {n} {}",
                mode.label(),
                if loaded { "(disk)" } else { "(idle)" }
            ));
            if cells.is_empty() && self.explain.is_some() {
                // Tracing may be refused (no privilege, no tracefs): the rows still run.
                if let Err(e) = punctual_trace::capture::Capture::start(
                    &punctual_trace::capture::CaptureConfig::default(),
                )
                .and_then(|c| c.finish().map(|_| ()))
                {
                    ctx.note(format!("no explanation of late releases: {e}"));
                    self.explain = None;
                }
            }
            let row = self.row();
            cells.push(measure(ctx, mode, n, loaded, &row)?);
        }
        Ok(cells)
    }
    fn report(&self, cells: Vec<Cell>, ctx: &Ctx, doc: &mut ResultDoc) -> Result<Report, Failure> {
        crate::common::mark(doc, NAME, self.quick);
        record_fallbacks(ctx, doc, &cells);
        let s = &mut doc.settings.extra;
        s.insert("period_ns".into(), PERIOD.into());
        s.insert("per_configuration_ns".into(), self.per.into());
        s.insert("dispatcher_cpu".into(), self.cpu.into());
        series(doc, &cells);
        if let Some(x) = &self.explain {
            doc.settings
                .extra
                .insert("explain_bound_ns".into(), x.bound.into());
        }
        let model = Model::of(&cells);
        let mut tables = tables(&model);
        let mut figures = figures(&cells)?;
        if cells.iter().any(|c| c.causes.is_some()) {
            tables.push(explain_table(&cells));
            figures.push(crate::common::figure(
                "kurt-periodic-late-by-cause",
                causes_figure(&cells),
            )?);
        }
        Ok(Report {
            tables,
            figures,
            ..Report::default()
        })
    }
}

/// What the periodic processes could not have, in the document's fallbacks and said once each:
/// their rows ran without it (the session's own class and memory lock are what it recorded).
fn record_fallbacks(ctx: &Ctx, doc: &mut ResultDoc, cells: &[Cell]) {
    for f in cells.iter().flat_map(|c| &c.fallbacks) {
        if !doc.settings.fallbacks.contains(f) {
            ctx.note(format!("fallback of the periodic processes: {f}"));
            doc.settings.fallbacks.push(f.clone());
        }
    }
}

/// One configuration's numbers: (loaded, mode, processes, % within 10/50/100/500/1000 us, host
/// steal share).
pub type Row = (bool, Mode, usize, [f64; 5], Option<f64>);

/// The numbers of the tables: per configuration, the share within each of KURT's bins.
pub struct Model {
    pub rows: Vec<Row>,
    pub target: Option<Target>,
}

/// The target at 30 processes, idle.
pub struct Target {
    /// Share of (c)'s iterations within 10 us.
    pub within_10us: f64,
    /// How many times fewer iterations outside 10 us (c) has than the better baseline.
    pub ratio: f64,
    /// Share of (c)'s releases whose lateness is within 10 us.
    pub lateness_10us: f64,
    /// Share of (d)'s iterations within 10 us (real-time mode), when it ran.
    pub within_10us_shielded: Option<f64>,
    /// Steal during (a), (b), (c), (d).
    pub steal: [Option<f64>; 4],
}

/// The shares within KURT's bins, NaN when nothing was recorded (a row whose processes all failed
/// prints "-", not 0 %).
fn pct(rec: &Recorder) -> [f64; 5] {
    if rec.count() == 0 {
        return [f64::NAN; 5];
    }
    let mut v = [0.0; 5];
    for (i, t) in punctual_stats::WITHIN_NS.iter().enumerate() {
        v[i] = rec.fraction_at_or_below(*t) * 100.0;
    }
    v
}

impl Model {
    pub fn of(cells: &[Cell]) -> Model {
        let rows = cells
            .iter()
            .map(|c| (c.loaded, c.mode, c.n, pct(&c.interval), c.steal))
            .collect();
        let find = |m: Mode| cells.iter().find(|c| c.mode == m && !c.loaded && c.n == 30);
        let shielded = find(Mode::WakeShielded);
        let target = match (find(Mode::Wake), find(Mode::Rel), find(Mode::Abs)) {
            (Some(w), Some(a), Some(b)) => {
                let out = |r: &Recorder| 1.0 - r.fraction_at_or_below(10_000);
                let best = out(&a.interval).min(out(&b.interval));
                Some(Target {
                    within_10us: 1.0 - out(&w.interval),
                    ratio: if out(&w.interval) > 0.0 {
                        best / out(&w.interval)
                    } else {
                        f64::INFINITY
                    },
                    lateness_10us: w.lateness.fraction_at_or_below(10_000),
                    within_10us_shielded: shielded.map(|d| d.interval.fraction_at_or_below(10_000)),
                    steal: [a.steal, b.steal, w.steal, shielded.and_then(|d| d.steal)],
                })
            }
            _ => None,
        };
        Model { rows, target }
    }
}

fn row(t: &mut Table, n: usize, source: &str, v: &[f64; 5], steal: Option<f64>) {
    let mut r = vec![n.to_string(), source.to_string()];
    r.extend(v.iter().map(|p| {
        if p.is_nan() {
            "-".to_string()
        } else {
            format!("{p:.2} %")
        }
    }));
    r.push(steal.map_or("-".into(), |s| format!("{:.2} %", s * 100.0)));
    t.row(r);
}

/// Tables 4.1 and 4.2 with the thesis' rows, and the target.
pub fn tables(m: &Model) -> Vec<Table> {
    let mut tables = Vec::new();
    for (loaded, title) in [
        (false, "Table 4.1"),
        (true, "Table 4.2 (background disk activity)"),
    ] {
        let mut t = Table::new(&["processes", "source", "10 us", "50 us", "100 us", "500 us", "1000 us", "host steal"])
            .titled(format!("{title}: % of iterations whose time since the previous one is within x of the 10 ms period"));
        for mode in MODES {
            t.row([mode.label().to_string()]);
            for (k, n) in COUNTS.iter().enumerate() {
                if let Some((.., v, steal)) = m
                    .rows
                    .iter()
                    .find(|(l, md, c, ..)| *md == mode && *l == loaded && c == n)
                {
                    row(&mut t, *n, "this machine", v, *steal);
                }
                let thesis = match (mode, loaded) {
                    (Mode::Rel, false) => Some(("thesis SCHED_FIFO", &THESIS_FIFO_IDLE[k])),
                    (Mode::Rel, true) => Some(("thesis SCHED_FIFO", &THESIS_FIFO_DISK[k])),
                    (Mode::Wake, false) => {
                        Some(("thesis KURT (ALL_PROCS)", &THESIS_KURT_ALL_IDLE[k]))
                    }
                    (Mode::Wake, true) => {
                        Some(("thesis KURT (ALL_PROCS)", &THESIS_KURT_ALL_DISK[k]))
                    }
                    (Mode::WakeShielded, false) => {
                        Some(("thesis KURT (KURT_PROCS)", &THESIS_KURT_PROCS_IDLE[k]))
                    }
                    _ => None,
                };
                if let Some((source, v)) = thesis {
                    row(&mut t, *n, source, v, None);
                }
            }
            t.rule();
        }
        t.note("this machine: every process's iterations merged; the metric is |time since the previous iteration - 10 ms| (KURT's).");
        t.note("All modes spread their phases evenly over the period and run at FIFO 80 with locked memory; (c) adds punctual's dispatcher (FIFO 90) on the last CPU,");
        t.note("and shifts its phases away from the interruptions a 0.5 s watch of the CPUs found before each row (run --avoid-interference);");
        t.note("its processes are pinned round robin to the CPUs without the dispatcher (to every CPU when fewer than two remain), each lead capped by its own CPU's releases.");
        t.note("(d) is (c) in real-time mode: the processes pinned to the dispatcher's CPU, which a shield empties of every other movable task and IRQ (KURT_PROCS); under a busy device interrupt, on another CPU than that interrupt's.");
        t.note("host steal: the share of the CPUs' time the hypervisor took while the row ran (/proc/stat); releases inside it are late whatever the method.");
        tables.push(t);
    }
    if let Some(tg) = &m.target {
        tables.push(target_table(tg));
    }
    tables
}

/// Whether `got` meets a target, in words; `-` when it was not measured.
fn met(got: Option<bool>) -> String {
    match got {
        Some(true) => "yes".into(),
        Some(false) => "no".into(),
        None => "-".into(),
    }
}

/// The thesis' targets at 30 processes, with what this machine got and whether it met each
/// (issue 31: the table gave the figures without saying pass or fail).
fn target_table(tg: &Target) -> Table {
    let mut t = Table::new(&[
        "target (30 processes, idle)",
        "wanted",
        "this machine",
        "met",
    ])
    .titled("kurt-periodic target");
    t.row([
        "punctual within 10 us".to_string(),
        ">= 99 %".into(),
        format!("{:.2} %", tg.within_10us * 100.0),
        met(Some(tg.within_10us >= 0.99)),
    ]);
    t.row([
        "punctual in real-time mode (d) within 10 us".to_string(),
        ">= 99.5 %".into(),
        tg.within_10us_shielded
            .map_or("-".into(), |v| format!("{:.2} %", v * 100.0)),
        met(tg.within_10us_shielded.map(|v| v >= 0.995)),
    ]);
    t.row([
        "fewer outside 10 us than the better baseline".to_string(),
        ">= 10x".into(),
        format!("{:.1}x", tg.ratio),
        met(Some(tg.ratio >= 10.0)),
    ]);
    t.row([
        "punctual release lateness within 10 us".to_string(),
        String::new(),
        format!("{:.2} %", tg.lateness_10us * 100.0),
        String::new(),
    ]);
    let steal = |s: Option<f64>| {
        s.map(|s| format!("{:.2} %", s * 100.0))
            .unwrap_or_else(|| "-".into())
    };
    t.row([
        "host steal during the (a) / (b) / (c) / (d) rows".to_string(),
        String::new(),
        format!(
            "{} / {} / {} / {}",
            steal(tg.steal[0]),
            steal(tg.steal[1]),
            steal(tg.steal[2]),
            steal(tg.steal[3])
        ),
        String::new(),
    ]);
    t
}

/// The interval and lateness series of every configuration.
fn series(doc: &mut ResultDoc, cells: &[Cell]) {
    for c in cells {
        let name = format!(
            "{} {} {}",
            c.mode.name(),
            if c.loaded { "disk" } else { "idle" },
            c.n
        );
        let mut interval = Series::from_recorder(
            format!("{name} interval"),
            kind::INTERVAL_DEVIATION,
            None,
            &c.interval,
        )
        .with("processes", c.n)
        .with("failures", c.failures);
        if let Some(st) = c.steal {
            interval = interval.with("steal_share", st);
        }
        if let Some((lost, hit)) = c.interference {
            interval = interval
                .with("interference_lost_share", lost)
                .with("interference_hit_share", hit);
        }
        let mut lateness = Series::from_recorder(
            format!("{name} lateness"),
            kind::LATENESS,
            None,
            &c.lateness,
        )
        .with("processes", c.n);
        for (key, v) in [
            ("floor", c.floor.windows),
            ("floor_instants", c.floor.instants),
        ] {
            if let Some(v) = v {
                let floor = serde_json::json!({"10us": v});
                interval = interval.with(key, floor.clone());
                lateness = lateness.with(key, floor);
            }
        }
        if let Some(p) = c.floor.stop {
            interval = interval.with("floor_stop", p.to_json());
            lateness = lateness.with("floor_stop", p.to_json());
        }
        if let Some(t) = &c.causes {
            lateness = lateness
                .with("lateness_causes", t.to_json())
                .with("lateness_offenders", t.offenders_json(3));
        }
        if let Some(t) = &c.held {
            interval = interval
                .with("held_read_causes", t.to_json())
                .with("held_read_offenders", t.offenders_json(3));
        }
        if let Some(Ok(f)) = &c.trace_file {
            lateness = lateness.with("trace_file", f.clone());
        }
        if let Some(e) = &c.examples {
            lateness = lateness.with("lateness_examples", e.clone());
        }
        if let Some(d) = &c.dispatcher {
            lateness = lateness.with("dispatcher", d.clone());
        }
        doc.series.push(interval);
        doc.series.push(lateness);
    }
}

/// A row's short name: `(c) 30 idle`.
fn row_name(c: &Cell) -> String {
    format!(
        "{} {} {}",
        &c.mode.label()[..3],
        c.n,
        if c.loaded { "disk" } else { "idle" }
    )
}

/// Per row: iterations within 10 us, the floor watched before it, and its late releases (release
/// lateness over 10 us) by cause with the top offender.
pub fn explain_table(cells: &[Cell]) -> Table {
    let mut t = Table::new(&["row", "<=10 us", "floor", "late", "causes", "top offender"])
        .titled("Late releases by cause (later than 10 us), per row, with the floor");
    let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.2} %", v * 100.0));
    for c in cells {
        let within = (c.interval.count() > 0).then(|| c.interval.fraction_at_or_below(10_000));
        let (late, causes, top) = match &c.causes {
            Some(t) => (
                t.late().to_string(),
                punctual_explain::render::causes_cell(t),
                t.offenders.first().map_or("-".to_string(), |(_, n, k)| {
                    format!("{}: {k}", punctual_time::text::display_text(n, 32))
                }),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        t.row([
            row_name(c),
            pct(within),
            pct(c.floor.instants.map(|f| 1.0 - f)),
            late,
            causes,
            top,
        ]);
    }
    t.note("floor: the share of instants on the row's CPUs at which a release can be within 10 us (not inside an");
    t.note("interruption longer than that), watched just before the row with bench gaps' loop; the document also has the");
    t.note("share of 10 ms windows holding one (floor). Releases placed away from the interruptions' phase beat this floor.");
    t.note("late: releases more than 10 us after their instant. An iteration outside 10 us of 10 ms needs one, or in");
    t.note("(c) and (d) a held read: a release on time whose process read its clock (where the interval is measured)");
    t.note("more than 10 us after its spin ended. Held reads by cause, per row that had any:");
    for c in cells {
        if let Some(h) = c.held.as_ref().filter(|h| h.late() > 0) {
            t.note(format!(
                "  {}: {} held, {}",
                row_name(c),
                h.late(),
                punctual_explain::render::causes_cell(h)
            ));
        }
    }
    // The stop the floor watches found besides the tick, in how many rows (the longest median).
    let stops: Vec<punctual_bench::gaps::PeriodicStop> =
        cells.iter().filter_map(|c| c.floor.stop).collect();
    if let Some(p) = stops.iter().max_by_key(|p| (p.cpus, p.median_ns)) {
        t.note(format!(
            "besides the tick, the floor watches found {}, in {} of {} rows.",
            p.describe(),
            stops.iter().filter(|q| q.hz == p.hz).count(),
            cells.len()
        ));
    }
    let dropped: Vec<String> = cells
        .iter()
        .filter(|c| c.stalls_dropped > 0)
        .map(|c| format!("{} ({})", row_name(c), c.stalls_dropped))
        .collect();
    if !dropped.is_empty() {
        t.note(format!(
            "stalls the threads' logs had no room for, so a late release there may read as \
             punctual's own: {}.",
            dropped.join(", ")
        ));
    }
    trace_files_note(&mut t, cells);
    t
}

/// `--explain-trace`: which file holds which row's trace (one per row, in the table's order), and
/// the rows whose trace could not be written.
fn trace_files_note(t: &mut Table, cells: &[Cell]) {
    let kept: Vec<(&Cell, &String)> = cells
        .iter()
        .filter_map(|c| match &c.trace_file {
            Some(Ok(f)) => Some((c, f)),
            _ => None,
        })
        .collect();
    if let (Some((c0, f0)), Some((c1, f1))) = (kept.first(), kept.last()) {
        t.note(format!(
            "kernel traces kept, one file per row in this order (punctual trace analyze FILE): {} in {f0} to {} in {f1}",
            row_name(c0),
            row_name(c1)
        ));
    }
    for c in cells {
        if let Some(Err(e)) = &c.trace_file {
            t.note(format!("{}: its trace was not kept: {e}", row_name(c)));
        }
    }
}

/// Late releases by cause, one bar per row, in % of the row's releases.
pub fn causes_figure(cells: &[Cell]) -> Result<String, punctual_plot::PlotError> {
    let rows: Vec<&Cell> = cells.iter().filter(|c| c.causes.is_some()).collect();
    let names: Vec<String> = rows.iter().map(|c| row_name(c)).collect();
    let groups: Vec<(String, Vec<f64>)> = punctual_explain::Cause::ALL
        .iter()
        .map(|cause| {
            (
                cause.name().to_string(),
                rows.iter()
                    .map(|c| {
                        let n = c.lateness.count() + c.lateness.missed_periods();
                        let k = c.causes.as_ref().map_or(0, |t| t.count(*cause));
                        k as f64 * 100.0 / n.max(1) as f64
                    })
                    .collect(),
            )
        })
        .collect();
    punctual_plot::stacked_bar_plot(
        "kurt-periodic: late releases by cause (later than 10 us)",
        "% of the row's releases",
        &names,
        &groups,
    )
}

/// Figs. 4.5/4.6 for every process count (the share of iterations within each deviation, one line
/// per mode, idle and disk), and Figs. 4.2-4.4 (histograms of the deviation from 10 ms, one per
/// mode and process count, idle and disk; the thesis drew them for its FIFO and KURT rows).
pub fn figures(cells: &[Cell]) -> Result<Vec<Figure>, Failure> {
    let mut out = Vec::new();
    for n in COUNTS {
        let lines: Vec<punctual_plot::Line> = cells
            .iter()
            .filter(|c| c.n == n && c.interval.count() > 0)
            .map(|c| punctual_plot::Line {
                label: format!(
                    "{} {}",
                    c.mode.label(),
                    if c.loaded { "(disk)" } else { "(idle)" }
                ),
                points: [
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
                .collect(),
            })
            .collect();
        if lines.is_empty() {
            continue;
        }
        let svg = punctual_plot::line_plot(
            &format!("KURT Fig. 4.5/4.6: {n} periodic 10 ms process(es)"),
            "deviation from 10 ms (us)",
            "% of iterations within",
            &lines,
            true,
            false,
        );
        out.push(crate::common::figure(&format!("kurt-periodic-{n}"), svg)?);
    }
    for c in cells.iter().filter(|c| c.interval.count() > 0) {
        // 10 us buckets up to the largest deviation (log count axis: the rare long ones show).
        let buckets = punctual_plot::histogram_buckets(&c.interval, 10_000);
        let load = if c.loaded { "disk" } else { "idle" };
        let svg = punctual_plot::histogram_plot(
            &format!(
                "KURT Fig. 4.2-4.4: {} ({load}), {} process(es)",
                c.mode.label(),
                c.n
            ),
            "deviation from 10 ms (us)",
            &buckets,
        );
        out.push(crate::common::figure(
            &format!("kurt-periodic-hist-{}-{load}-{}", c.mode.name(), c.n),
            svg,
        )?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The process is started from its spec serialised whole, and reads back the same spec.
    #[test]
    fn a_child_gets_its_spec_as_json_and_reads_it_back() {
        let spec = ChildSpec {
            mode: Mode::WakeShielded,
            period_ns: PERIOD,
            first_ns: 0,
            until_ns: 0,
            channel: Some("kurt-1-0".into()),
            late_bound_ns: Some(10_000),
        };
        let cmd = spec.command(std::path::Path::new("/bin/punctual"));
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(args[..2], [CHILD_SUBCOMMAND, "--spec"]);
        assert!(args[2].contains("\"wake-shielded\""), "{}", args[2]);
        assert_eq!(ChildSpec::from_json(&args[2]), Ok(spec));
        // What a hand-written spec leaves out takes the flags' defaults.
        let short = ChildSpec::from_json(r#"{"mode":"rel","period_ns":1000}"#).unwrap();
        assert_eq!((short.first_ns, short.channel), (0, None));
        let bad = ChildSpec::from_json(r#"{"mode":"sleepy","period_ns":1}"#).unwrap_err();
        assert!(bad.starts_with("unknown variant `sleepy`"), "{bad}");
    }

    /// A self-timed process readied through punctual-rt runs its releases and reports them with
    /// what it could not have; the parent merges its figures and records each fallback once.
    #[test]
    fn a_self_timed_child_reports_its_releases_and_fallbacks_to_the_parent() {
        // Far enough ahead for the thread to start and lock the memory of this whole process.
        let first = now() + 200_000_000;
        let spec = ChildSpec {
            mode: Mode::Abs,
            period_ns: 2_000_000,
            first_ns: first,
            until_ns: first + 20_000_000,
            channel: None,
            late_bound_ns: Some(0),
        };
        let line = std::thread::spawn(move || body(&spec))
            .join()
            .unwrap()
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        // Root here gets FIFO and locked memory (no fallback); without the privilege each
        // refusal is listed instead of ignored.
        let listed = v["fallbacks"]
            .as_array()
            .expect("fallbacks are reported")
            .len();
        let mut cell = Cell::new(Mode::Abs, false, 1);
        let mut late = Reports::default();
        add_report(&line, &mut cell, &mut late);
        assert_eq!(cell.failures, 0);
        // One release every 2 ms for 20 ms; one a loaded machine made it miss is counted so.
        let ran = cell.lateness.count();
        assert_eq!(ran + cell.lateness.missed_periods(), 10);
        assert_eq!(cell.interval.count(), ran - 1);
        assert_eq!(
            late.late.len() as u64 + late.dropped,
            ran,
            "a bound of 0 keeps every release"
        );
        assert_eq!(cell.fallbacks.len(), listed);

        // Two processes refused the same class: recorded once. A line that is not a report is
        // a failed process.
        let refused = Fallback {
            setting: "scheduling policy".into(),
            wanted: "SCHED_FIFO 80".into(),
            got: "SCHED_OTHER".into(),
            why: "EPERM".into(),
            fix: "run as root".into(),
        };
        let mut v = v;
        v["fallbacks"] = serde_json::json!([refused]);
        let mut cell = Cell::new(Mode::Abs, false, 1);
        for _ in 0..2 {
            add_report(&v.to_string(), &mut cell, &mut late);
        }
        add_report(
            "punctual __periodic: the channel ended",
            &mut cell,
            &mut late,
        );
        assert_eq!(cell.fallbacks, vec![refused]);
        assert_eq!(cell.failures, 1);
        assert_eq!(cell.lateness.count(), 2 * ran);
    }

    #[test]
    fn the_dispatcher_facts_give_the_margin_per_cpu_and_the_leads_spread() {
        let slot = |lead: Option<u64>| punctual_dispatch::SlotResult {
            info: punctual_dispatch::SlotInfo {
                name: "p".into(),
                cpu: 1,
                action: 0,
                action_name: "c".into(),
                action_kind: "wake",
                period: Some(PERIOD),
                delegated: true,
                movable: true,
            },
            stats: punctual_dispatch::engine::SlotStats::new(true),
            report: lead.map(|l| punctual_dispatch::actions::ActionReport {
                start_latency: None,
                extra: vec![
                    ("final_lead_ns".into(), l.into()),
                    ("lead_cap_ns".into(), 250_000u64.into()),
                ],
            }),
        };
        let mut moved = slot(Some(9_000));
        moved.stats.rephased = 2;
        moved.info.name = "p2".into();
        let out = punctual_dispatch::Outcome {
            slots: vec![slot(Some(40_000)), slot(None), moved, slot(Some(250_000))],
            cpus: vec![punctual_dispatch::CpuResult {
                cpu: 1,
                margin_ns: 84_000,
                margin_cap_ns: 125_000,
                breathers: 3,
                breathers_partnered: 0,
                relayed: 0,
                woke_late: 2,
                woke_late_stolen: 0,
                spun_through: 0,
                yields: 0,
                cpu_ns: 250,
                wall_ns: 1_000,
                stalls: vec![],
                stalls_dropped: 0,
                policy: punctual_rt::Policy::Fifo,
                priority: 90,
                fallback: None,
            }],
            start: 0,
            trip: None,
            held_by_others: vec![],
            stuck: vec![],
        };
        let f = dispatcher_facts(&out);
        assert_eq!(f["leads_ns"], serde_json::json!([9_000, 40_000, 250_000]));
        assert_eq!(f["lead_cap_ns"], 250_000);
        assert_eq!(f["rephased"], 2);
        assert_eq!(f["rephased_tasks"], serde_json::json!(["p2"]));
        let cpu = &f["cpus"][0];
        assert_eq!(
            (cpu["cpu"].as_u64(), cpu["margin_ns"].as_u64()),
            (Some(1), Some(84_000))
        );
        assert_eq!(cpu["margin_cap_ns"], 125_000);
        assert_eq!(cpu["cpu_share"], 0.25);
        // No wake process: no leads, and an uncapped margin says so.
        let mut none = out;
        none.slots.clear();
        none.cpus[0].margin_cap_ns = u64::MAX;
        let f = dispatcher_facts(&none);
        assert!(f["leads_ns"].is_null() && f["cpus"][0]["margin_cap_ns"].is_null());
    }

    /// A wake client's held reads come back in their own series, with the ones it had no room
    /// for; its late releases are the dispatcher's to report. Its ways back to its wait are
    /// stalls only.
    #[test]
    fn a_wake_clients_held_reads_are_kept_apart_from_late_releases() {
        let line = serde_json::json!({
            "late": [], "late_dropped": 0,
            "held": [[1_000_000, 1_150_000, 42, 1]], "held_dropped": 3,
            "back": [[1_150_000, 1_400_000, 42, 1]], "back_dropped": 2,
        });
        let mut cell = Cell::new(Mode::WakeShielded, false, 1);
        let mut held = Reports::default();
        add_report(&line.to_string(), &mut cell, &mut held);
        assert_eq!(held.dropped, 3);
        let r = held.late[0];
        assert_eq!(held.late.len(), 1);
        assert_eq!((r.series, r.tid, r.cpu), (HELD_SERIES, 42, 1));
        assert_eq!(r.waiter, Waiter::Client, "no timer of its own was due");
        assert_eq!((r.target, r.lateness()), (1_000_000, 150_000));
        let back = Stall {
            tid: 42,
            cpu: 1,
            kind: StallKind::Busy,
            from: 1_150_000,
            to: 1_400_000,
        };
        assert_eq!((held.back, held.back_dropped), (vec![back], 2));
    }

    /// `--explain-trace`: the note names the first and last row's files, and a row whose trace
    /// could not be written says why.
    #[test]
    fn the_explain_table_says_where_the_rows_traces_are() {
        let cells = [
            Cell {
                causes: Some(Tally::default()),
                trace_file: Some(Ok("/x/t".into())),
                ..Cell::new(Mode::Wake, false, 1)
            },
            Cell {
                causes: Some(Tally::default()),
                trace_file: Some(Err("/x/t-2: No space left on device".into())),
                ..Cell::new(Mode::Wake, false, 10)
            },
            Cell {
                causes: Some(Tally::default()),
                trace_file: Some(Ok("/x/t-3".into())),
                stalls_dropped: 7,
                ..Cell::new(Mode::WakeShielded, true, 30)
            },
        ];
        let text = explain_table(&cells).render_at(punctual_result::table::Width::Unlimited);
        // Only the row whose logs overflowed is named.
        assert!(
            text.contains("read as punctual's own: (d) 30 disk (7)."),
            "{text}"
        );
        assert!(
            text.contains(
                "(punctual trace analyze FILE): (c) 1 idle in /x/t to (d) 30 disk in /x/t-3"
            ),
            "{text}"
        );
        assert!(
            text.contains("(c) 10 idle: its trace was not kept: /x/t-2: No space left on device"),
            "{text}"
        );
        let none = explain_table(&cells[..0]).render_at(punctual_result::table::Width::Unlimited);
        assert!(!none.contains("kernel traces kept"), "{none}");
        assert!(!none.contains("no room"), "{none}");
    }

    /// A row with held reads says how many and why under the table; a row without says nothing.
    #[test]
    fn the_explain_table_lists_the_rows_held_reads_by_cause() {
        let mut held = Tally::default();
        held.counts[0] = 2;
        assert_eq!(
            punctual_explain::Cause::ALL[0],
            punctual_explain::Cause::Steal
        );
        let cells = [
            Cell {
                held: Some(held),
                causes: Some(Tally::default()),
                ..Cell::new(Mode::WakeShielded, false, 1)
            },
            Cell {
                held: Some(Tally::default()),
                causes: Some(Tally::default()),
                ..Cell::new(Mode::Wake, false, 1)
            },
        ];
        let text = explain_table(&cells).render_at(punctual_result::table::Width::Unlimited);
        assert!(text.contains("  (d) 1 idle: 2 held, steal 2"), "{text}");
        assert!(!text.contains("(c) 1 idle: 0 held"), "{text}");
    }

    /// Issue 26: a held read is explained over its CPU from the spin's end to the read. The
    /// process on its CPU with no guest event, charged by the scheduler as running, reads as its
    /// own way back (`wake_path`); the same stretch as the stall it is (a few stores and a clock
    /// read) is `steal`.
    #[test]
    fn a_held_read_with_no_guest_event_is_steal_as_a_stall() {
        use punctual_trace::event::EventKind;
        use punctual_trace::synth::{Synth, SLEEPING};
        let t0 = 1_000_000_000u64;
        let mut s = Synth::new(1, t0, t0 + 10_000_000);
        s.switch(t0, 0, 0, 0, 42);
        // The scheduler charges the client for the whole 180 us it held the CPU.
        s.event(
            t0 + 200_000,
            0,
            EventKind::StatRuntime {
                pid: 42,
                runtime: 200_000,
            },
        );
        s.switch(t0 + 201_000, 0, 42, SLEEPING, 0);
        let mut trace = punctual_explain::Trace {
            captured: s.captured(),
            bound: 10_000,
        };
        let read = LateRelease {
            series: HELD_SERIES,
            tid: 42,
            cpu: 0,
            waiter: Waiter::Client,
            target: t0 + 20_000,
            actual: t0 + 200_000,
            handover: None,
            behind: false,
            last_read: None,
            own_work: None,
        };
        let unlogged = [(HELD_SERIES, 0)];
        let before = trace.explain(&[read], &unlogged).tally(HELD_SERIES);
        assert_eq!(
            before.count(punctual_explain::Cause::WakePath),
            1,
            "{before:?}"
        );
        trace.captured.stalls.push(Stall {
            tid: 42,
            cpu: 0,
            kind: StallKind::Busy,
            from: read.target,
            to: read.actual,
        });
        let after = trace.explain(&[read], &unlogged).tally(HELD_SERIES);
        assert_eq!(after.count(punctual_explain::Cause::Steal), 1, "{after:?}");
    }
}
