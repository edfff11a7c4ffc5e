//! `punctual check`: on one CPU, a plain absolute sleep against punctual's sleep-then-spin, idle and
//! then under CPU and I/O load, each for a quarter of the time; then which deadline classes this
//! machine can serve.

use crate::{run_observed, Config, LatencyError, Mode, Observe, Progress, Stop, ThreadResult};
use punctual_load::{LoadKind, LoadReport, LoadSpec, Loads};
use punctual_result::{Series, Table};
use punctual_rt::Policy;
use punctual_stats::Recorder;
use punctual_time::{format_ns, ClockId, MarginPolicy};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(Clone, Debug)]
pub struct CheckConfig {
    pub cpu: usize,
    /// Total duration; each of the four phases gets a quarter.
    pub duration: u64,
    pub interval: u64,
    pub load: LoadSpec,
    /// The punctual binary, for load processes.
    pub exe: PathBuf,
    pub policy: Policy,
    pub priority: u32,
    pub timer_slack_ns: Option<u64>,
    /// Run punctual's method before plain sleep in each half (`check --repeat` alternates, so
    /// neither method always meets the machine first).
    pub hybrid_first: bool,
}

/// The shortest check that still gives each phase a few hundred releases.
pub const MIN_DURATION: u64 = 1_000_000_000;

impl CheckConfig {
    /// Refuse a check too short for its phases, or an interval that leaves too few releases.
    pub fn validate(&self) -> Result<(), punctual_result::Failure> {
        use punctual_result::Failure;
        if self.duration < MIN_DURATION {
            return Err(Failure::usage(format!(
                "-D/--duration {} is too short; use 1s or more",
                format_ns(self.duration)
            )));
        }
        if self.interval < 10_000 || self.interval > self.duration / 40 {
            return Err(Failure::usage(
                "-i/--interval must be at least 10us and leave ten releases per phase",
            ));
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Phase {
    pub mode: Mode,
    pub loaded: bool,
}

impl Phase {
    pub fn label(&self) -> String {
        format!(
            "{} {}",
            self.mode_label(),
            if self.loaded { "loaded" } else { "idle" }
        )
    }
    pub fn mode_label(&self) -> &'static str {
        match self.mode {
            Mode::Hybrid => "punctual hybrid",
            _ => "plain sleep",
        }
    }
}

pub const PHASES: [Phase; 4] = [
    Phase {
        mode: Mode::Abs,
        loaded: false,
    },
    Phase {
        mode: Mode::Hybrid,
        loaded: false,
    },
    Phase {
        mode: Mode::Abs,
        loaded: true,
    },
    Phase {
        mode: Mode::Hybrid,
        loaded: true,
    },
];

pub struct PhaseResult {
    pub phase: Phase,
    pub thread: ThreadResult,
}

pub struct CheckOutcome {
    pub phases: Vec<PhaseResult>,
    pub loads: Vec<(LoadKind, Option<usize>, Option<LoadReport>)>,
}

/// The default load: one busy loop per online CPU (each pinned) and one writer with fsync.
pub fn default_load() -> LoadSpec {
    let cpus = punctual_rt::online_cpus();
    format!(
        "cpu:{}@{},io:1",
        cpus.len(),
        punctual_rt::format_cpu_list(&cpus)
    )
    .parse()
    .expect("the default load spec is valid")
}

/// Run the four phases. Call from the main thread (load processes are tied to the calling thread).
/// `on_phase(i, phase, progress)` is called as each phase starts, for a progress display.
pub fn run_check(
    cfg: &CheckConfig,
    stop: &Arc<AtomicBool>,
    on_phase: impl FnMut(usize, Phase),
    progress: &[Progress; 1],
) -> Result<CheckOutcome, LatencyError> {
    run_check_observed(cfg, stop, on_phase, progress, Observe::default()).map(|(o, _)| o)
}

/// [`run_check`], also keeping what `observe` asks for: the late releases of each phase (series
/// = the phase's index in [`CheckOutcome::phases`]).
pub fn run_check_observed(
    cfg: &CheckConfig,
    stop: &Arc<AtomicBool>,
    mut on_phase: impl FnMut(usize, Phase),
    progress: &[Progress; 1],
    observe: Observe,
) -> Result<(CheckOutcome, Vec<punctual_explain::LateLog>), LatencyError> {
    let mut late = Vec::new();
    let mut phases = Vec::new();
    let mut load_reports = Vec::new();
    let mut loads: Option<Loads> = None;
    let mut order = PHASES;
    if cfg.hybrid_first {
        order.swap(0, 1);
        order.swap(2, 3);
    }
    for (i, phase) in order.into_iter().enumerate() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        on_phase(i, phase);
        if phase.loaded && loads.is_none() {
            let mut l = Loads::start(&cfg.load, &cfg.exe)?;
            // Measure under the load, not under its start-up.
            l.wait_ready(std::time::Duration::from_secs(5), stop);
            loads = Some(l);
        }
        let c = Config {
            threads: vec![Some(cfg.cpu)],
            interval: cfg.interval,
            stop: Stop::Duration(cfg.duration / PHASES.len() as u64),
            clock: ClockId::Monotonic,
            mode: phase.mode,
            margin: MarginPolicy::Auto,
            policy: cfg.policy,
            priority: cfg.priority,
            timer_slack_ns: cfg.timer_slack_ns,
        };
        let (mut out, logs) = run_observed(&c, stop, None, Some(progress), observe)?;
        if let Some(thread) = out.threads.pop() {
            for mut log in logs {
                log.relabel(phases.len() as u32);
                late.push(log);
            }
            phases.push(PhaseResult { phase, thread });
        }
    }
    if let Some(l) = loads {
        load_reports = l.stop();
    }
    // The document lists the phases in one order whatever order they ran in.
    phases.sort_by_key(|p| PHASES.iter().position(|q| *q == p.phase));
    Ok((
        CheckOutcome {
            phases,
            loads: load_reports,
        },
        late,
    ))
}

/// A kind of deadline a user may need to meet, and where the number comes from.
#[derive(Clone, Copy, Debug)]
pub struct DeadlineClass {
    pub name: &'static str,
    pub bound_ns: u64,
    pub source: &'static str,
}

pub const CLASSES: [DeadlineClass; 3] = [
    DeadlineClass {
        name: "1 ms audio period",
        bound_ns: 1_000_000,
        source: "a 48-frame buffer at 48 kHz is refilled every 1 ms",
    },
    DeadlineClass {
        name: "+/-111 us injection window",
        bound_ns: 111_000,
        source: "one crank degree at 1500 rpm (McKenney 2009)",
    },
    DeadlineClass {
        name: "10 us",
        bound_ns: 10_000,
        source: "0.1 % of a 10 ms period, KURT's tightest bin (Table 4.1)",
    },
];

/// Can a series serve a deadline class?
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Serve {
    /// Every release within the bound.
    Always,
    /// At least 99.9 % within (the fraction).
    Mostly(f64),
    /// Fewer (the fraction).
    No(f64),
}

pub fn judge(rec: &Recorder, bound_ns: u64) -> Serve {
    if rec.count() == 0 {
        return Serve::No(0.0);
    }
    if rec.max().unwrap_or(0) <= bound_ns {
        return Serve::Always;
    }
    let f = rec.fraction_at_or_below(bound_ns);
    if f >= 0.999 {
        Serve::Mostly(f)
    } else {
        Serve::No(f)
    }
}

fn pct(f: f64) -> String {
    if (0.9999..1.0).contains(&f) {
        format!("{:.4} %", f * 100.0)
    } else {
        format!("{:.2} %", f * 100.0)
    }
}

impl Serve {
    pub fn describe(&self, max_ns: u64) -> String {
        match self {
            Serve::Always => "yes".into(),
            Serve::Mostly(f) => format!("{} within (max {})", pct(*f), format_ns(max_ns)),
            Serve::No(f) => format!("no: {} within", pct(*f)),
        }
    }
    pub fn word(&self) -> &'static str {
        match self {
            Serve::Always => "yes",
            Serve::Mostly(_) => "mostly",
            Serve::No(_) => "no",
        }
    }
}

impl CheckOutcome {
    fn find(&self, mode: Mode, loaded: bool) -> Option<&PhaseResult> {
        self.phases
            .iter()
            .find(|p| p.phase.mode == mode && p.phase.loaded == loaded)
    }

    /// The result series, one per phase.
    pub fn series(&self) -> Vec<Series> {
        self.phases
            .iter()
            .map(|p| {
                let t = &p.thread;
                let mut s = Series::from_recorder(
                    p.phase.label(),
                    punctual_result::doc::kind::LATENESS,
                    t.cpu,
                    &t.recorder,
                )
                .with("mode", p.phase.mode.name())
                .with("loaded", p.phase.loaded)
                .with("cpu_ns", t.cpu_ns)
                .with("duration_ns", t.wall_ns);
                if let Some(m) = t.margin_ns {
                    s = s.with("spin_margin_ns", m);
                }
                s
            })
            .collect()
    }

    /// Per-phase numbers of a check with releases every `interval` ns on `cpu`.
    pub fn results_table(&self, interval: u64, cpu: usize) -> Table {
        let mut t = Table::new(&[
            "phase",
            "p50",
            "p99",
            "p99.9",
            "max",
            "<=10us",
            "<=100us",
            "woke late",
            "missed",
            "cpu",
        ])
        .titled(format!(
            "Lateness after the intended release ({} period, CPU {cpu})",
            format_ns(interval)
        ));
        for (i, p) in self.phases.iter().enumerate() {
            if i == 2 {
                t.rule();
            }
            let s = p.thread.recorder.summary();
            let cpu = if p.thread.wall_ns > 0 {
                p.thread.cpu_ns as f64 * 100.0 / p.thread.wall_ns as f64
            } else {
                0.0
            };
            t.row([
                p.phase.label(),
                format_ns(s.percentiles.p50),
                format_ns(s.percentiles.p99),
                format_ns(s.percentiles.p99_9),
                format_ns(s.max),
                pct(s.within.us10),
                pct(s.within.us100),
                pct(if s.count > 0 {
                    s.woke_late as f64 / s.count as f64
                } else {
                    0.0
                }),
                s.missed_periods.to_string(),
                format!("{cpu:.1} %"),
            ]);
        }
        t.note(
            "woke late: the kernel returned after the release itself, so spinning could not help.",
        );
        t.note("cpu: share of one core the measuring thread used (the price of spinning).");
        t
    }

    /// Which deadline classes each method serves, judged on the loaded phases (the worst case seen).
    pub fn verdict_table(&self) -> Table {
        let mut t = Table::new(&["deadline class", "plain sleep", "punctual hybrid"])
            .titled("Verdict (under CPU + I/O load)");
        for class in CLASSES {
            let cell = |mode| {
                self.find(mode, true)
                    .map(|p| {
                        judge(&p.thread.recorder, class.bound_ns)
                            .describe(p.thread.recorder.max().unwrap_or(0))
                    })
                    .unwrap_or_else(|| "not measured".into())
            };
            t.row([class.name.to_string(), cell(Mode::Abs), cell(Mode::Hybrid)]);
        }
        for class in CLASSES {
            t.note(format!("{}: {}", class.name, class.source));
        }
        t.note("yes: every release within the bound; a percentage (max): at least 99.9 % within, the worst seen in brackets; no: fewer than 99.9 % within, with the share that was.");
        t
    }

    /// The verdicts as data for the result document.
    pub fn verdict_json(&self) -> serde_json::Value {
        let classes: Vec<serde_json::Value> = CLASSES
            .iter()
            .map(|c| {
                let mut o = serde_json::Map::new();
                o.insert("class".into(), c.name.into());
                o.insert("bound_ns".into(), c.bound_ns.into());
                for (key, mode) in [("plain_sleep", Mode::Abs), ("hybrid", Mode::Hybrid)] {
                    let v = self.find(mode, true).map(|p| {
                        let s = judge(&p.thread.recorder, c.bound_ns);
                        let frac = match s {
                            Serve::Always => 1.0,
                            Serve::Mostly(f) | Serve::No(f) => f,
                        };
                        serde_json::json!({"serves": s.word(), "fraction_within": frac})
                    });
                    o.insert(key.into(), v.unwrap_or(serde_json::Value::Null));
                }
                serde_json::Value::Object(o)
            })
            .collect();
        serde_json::Value::Array(classes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_needs_a_second_and_ten_releases_per_phase() {
        let cfg = |duration: u64, interval: u64| CheckConfig {
            cpu: 0,
            duration,
            interval,
            load: LoadSpec::default(),
            exe: PathBuf::from("punctual"),
            policy: Policy::Fifo,
            priority: 99,
            timer_slack_ns: None,
            hybrid_first: false,
        };
        assert!(cfg(30_000_000_000, 1_000_000).validate().is_ok());
        let e = cfg(500_000_000, 1_000_000).validate().unwrap_err();
        assert_eq!(
            e.message,
            "-D/--duration 500 ms is too short; use 1s or more"
        );
        for interval in [5_000, 30_000_000] {
            let e = cfg(1_000_000_000, interval).validate().unwrap_err();
            assert!(
                e.message.starts_with("-i/--interval must be at least 10us"),
                "{}",
                e.message
            );
        }
    }

    fn thread(
        values: impl Iterator<Item = u64>,
        woke_late_every: u64,
        margin: Option<u64>,
    ) -> ThreadResult {
        let mut r = Recorder::new();
        for (i, v) in values.enumerate() {
            r.record(v);
            if woke_late_every > 0 && (i as u64).is_multiple_of(woke_late_every) {
                r.add_woke_late();
            }
        }
        ThreadResult {
            index: 0,
            cpu: Some(1),
            recorder: r,
            cpu_ns: if margin.is_some() {
                60_000_000
            } else {
                2_000_000
            },
            wall_ns: 1_000_000_000,
            policy: Policy::Fifo,
            priority: 99,
            fallback: None,
            margin_ns: margin,
            drift_ns: None,
            dropped_samples: 0,
        }
    }

    /// Deterministic stand-ins for the four phases: plain sleep wakes 50-60 us late with a 2 ms
    /// worst case under load; the hybrid is under 1 us except one late wake.
    fn outcome() -> CheckOutcome {
        let abs = |tail| {
            thread(
                (0..1000u64).map(move |i| if i == 500 { tail } else { 50_000 + i * 10 }),
                1,
                None,
            )
        };
        let hyb = |tail| {
            thread(
                (0..1000u64).map(move |i| if i == 500 { tail } else { 100 + i % 50 }),
                1000,
                Some(60_000),
            )
        };
        CheckOutcome {
            phases: vec![
                PhaseResult {
                    phase: PHASES[0],
                    thread: abs(70_000),
                },
                PhaseResult {
                    phase: PHASES[1],
                    thread: hyb(300),
                },
                PhaseResult {
                    phase: PHASES[2],
                    thread: abs(2_000_000),
                },
                PhaseResult {
                    phase: PHASES[3],
                    thread: hyb(95_000),
                },
            ],
            loads: vec![],
        }
    }

    #[test]
    fn judging() {
        let r = thread(
            (0..10_000u64).map(|i| if i == 0 { 5_000_000 } else { 1_000 }),
            0,
            None,
        )
        .recorder;
        assert_eq!(judge(&r, 10_000_000), Serve::Always);
        assert!(matches!(judge(&r, 10_000), Serve::Mostly(f) if (f - 0.9999).abs() < 1e-9));
        let r = thread(
            (0..100u64).map(|i| if i < 5 { 50_000 } else { 1_000 }),
            0,
            None,
        )
        .recorder;
        assert!(matches!(judge(&r, 10_000), Serve::No(f) if (f - 0.95).abs() < 1e-9));
        assert_eq!(judge(&Recorder::new(), 1), Serve::No(0.0));
    }

    #[test]
    fn tables_render_from_a_synthetic_outcome() {
        let o = outcome();
        insta::assert_snapshot!("check_results", o.results_table(1_000_000, 1).render());
        insta::assert_snapshot!("check_verdict", o.verdict_table().render());
    }

    #[test]
    fn verdict_data_matches_the_table() {
        let v = outcome().verdict_json();
        // 1 ms: plain sleep saw one 2 ms wake in 1000, so 99.9 % within: mostly.
        assert_eq!(v[0]["plain_sleep"]["serves"], "mostly");
        assert_eq!(v[0]["hybrid"]["serves"], "yes");
        assert_eq!(v[2]["hybrid"]["serves"], "mostly");
        assert_eq!(v[2]["plain_sleep"]["serves"], "no");
    }

    #[test]
    fn series_carry_mode_load_and_cost() {
        let s = outcome().series();
        assert_eq!(s.len(), 4);
        assert_eq!(s[3].name, "punctual hybrid loaded");
        assert_eq!(s[3].extra["spin_margin_ns"], 60_000);
        assert_eq!(s[2].extra["loaded"], true);
    }

    #[test]
    fn default_load_covers_every_cpu_and_io() {
        let l = default_load();
        assert_eq!(l.items[0].count as usize, punctual_rt::online_cpus().len());
        assert_eq!(l.items[1].kind, LoadKind::Io);
    }
}
