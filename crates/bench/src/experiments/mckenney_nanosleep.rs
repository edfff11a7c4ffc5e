//! `mckenney-nanosleep`: McKenney's nanosleep validation loop (OLS 2008 Figs. 1-3 and 8; RTLWS 2009
//! slides). The loop reads the clock, sleeps a fixed time with a relative sleep, reads the clock
//! again and keeps how much longer than asked it slept. It runs first as first written, then with
//! each pitfall fixed in turn (CLOCK_MONOTONIC instead of CLOCK_REALTIME, SCHED_FIFO, mlockall),
//! then as 1 to 12 parallel tasks (Fig. 8), then beside a parallel build. The loop is the latency
//! engine's `rel` mode, which is exactly this loop.

use super::published::mckenney as paper;
use super::{add_fallback, close_doc, figure, group, new_doc};
use crate::kind;
use punctual_latency::{Config, Mode, Stop};
use punctual_load::{LoadSpec, Loads};
use punctual_result::experiment::{Context, Experiment, Report};
use punctual_result::{Failure, Series, Table};
use punctual_rt::Policy;
use punctual_stats::Recorder;
use punctual_time::{format_ns, ClockId, MarginPolicy};
use std::sync::atomic::Ordering;

#[derive(Clone, Debug)]
pub struct NanosleepSettings {
    /// How long each nanosleep asks for (a fuel-injection-sized 100 us).
    pub sleep_ns: u64,
    /// Trials of the first three ladder rows.
    pub ladder_trials: u64,
    /// Trials of the last row, all precautions taken (the paper: 10,000,000).
    pub final_trials: u64,
    pub parallel_tasks: Vec<usize>,
    /// Calls per parallel task (the paper: 100,000).
    pub calls_per_task: u64,
    pub build_trials: u64,
    /// Build processes beside the loop (each compiles with one job per CPU).
    pub build_instances: u32,
}

impl NanosleepSettings {
    /// About 45 minutes.
    pub fn full() -> Self {
        NanosleepSettings {
            sleep_ns: 100_000,
            ladder_trials: 1_000_000,
            final_trials: 10_000_000,
            parallel_tasks: (1..=12).collect(),
            calls_per_task: 100_000,
            build_trials: 1_000_000,
            build_instances: 2,
        }
    }
    /// About 25 seconds.
    pub fn quick() -> Self {
        NanosleepSettings {
            ladder_trials: 20_000,
            final_trials: 20_000,
            parallel_tasks: vec![1, 2, 4, 8, 12],
            calls_per_task: 5_000,
            build_trials: 20_000,
            ..Self::full()
        }
    }
}

#[derive(Default)]
pub struct McKenneyNanosleep {
    pub settings: Option<NanosleepSettings>,
}

/// The timer slack a normal-class program gets by default: part of what the naive rows measure.
const DEFAULT_SLACK_NS: u64 = 50_000;

struct Step {
    label: &'static str,
    clock: ClockId,
    policy: Policy,
    mlock: bool,
    paper: &'static str,
}

const LADDER: [Step; 4] = [
    Step {
        label: "as first written: CLOCK_REALTIME",
        clock: ClockId::Realtime,
        policy: Policy::Other,
        mlock: false,
        paper: "bad, even on -rt",
    },
    Step {
        label: "+ CLOCK_MONOTONIC",
        clock: ClockId::Monotonic,
        policy: Policy::Other,
        mlock: false,
        paper: "still bad",
    },
    Step {
        label: "+ SCHED_FIFO 99 (Fig. 2)",
        clock: ClockId::Monotonic,
        policy: Policy::Fifo,
        mlock: false,
        paper: "sometimes bad",
    },
    Step {
        label: "+ mlockall (Fig. 3)",
        clock: ClockId::Monotonic,
        policy: Policy::Fifo,
        mlock: true,
        paper: "see below",
    },
];

fn u1(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

impl McKenneyNanosleep {
    /// One row of the ladder: every knob the paper turns is an argument.
    #[allow(clippy::too_many_arguments)]
    fn measure(
        &self,
        ctx: &Context,
        doc: &mut punctual_result::ResultDoc,
        threads: usize,
        clock: ClockId,
        policy: Policy,
        mlock: bool,
        loops: u64,
        sleep_ns: u64,
    ) -> Result<Recorder, Failure> {
        let _lock = if mlock {
            match punctual_rt::memlock::MlockGuard::lock_all() {
                Ok(g) => Some(g),
                Err(e) => {
                    add_fallback(
                        doc,
                        Some(&punctual_result::Fallback {
                            setting: "memory locking".into(),
                            wanted: "mlockall".into(),
                            got: "unlocked memory".into(),
                            why: e.to_string(),
                            fix: punctual_rt::privilege::MLOCK_FIX.into(),
                        }),
                    );
                    None
                }
            }
        } else {
            None
        };
        let cfg = Config {
            threads: vec![None; threads],
            interval: sleep_ns,
            stop: Stop::Loops(loops),
            clock,
            mode: Mode::Rel,
            margin: MarginPolicy::Auto,
            policy,
            priority: if policy.is_realtime() { 99 } else { 0 },
            timer_slack_ns: if policy.is_realtime() {
                None
            } else {
                Some(DEFAULT_SLACK_NS)
            },
        };
        let out = punctual_latency::run(&cfg, &ctx.stop, None, None)?;
        for t in &out.threads {
            add_fallback(doc, t.fallback.as_ref());
        }
        Ok(out.merged())
    }
}

impl Experiment for McKenneyNanosleep {
    fn name(&self) -> &'static str {
        "mckenney-nanosleep"
    }
    fn reproduces(&self) -> &'static str {
        "McKenney 2008/2009, Figs. 1-3 and 8: the nanosleep validation loop, pitfall by pitfall, in parallel and beside a build"
    }
    fn duration(&self) -> &'static str {
        "full about 45 min (10,000,000 trials with all precautions); --quick about 25 s"
    }

    fn run(&self, ctx: &Context) -> Result<Report, Failure> {
        let s = self.settings.clone().unwrap_or_else(|| {
            if ctx.quick {
                NanosleepSettings::quick()
            } else {
                NanosleepSettings::full()
            }
        });
        if s.sleep_ns == 0
            || s.ladder_trials == 0
            || s.final_trials == 0
            || s.calls_per_task == 0
            || s.build_trials == 0
        {
            return Err(Failure::usage(
                "mckenney-nanosleep: the sleep and every trial count must be above zero",
            ));
        }
        if s.parallel_tasks.is_empty()
            || s.parallel_tasks
                .iter()
                .any(|&n| n == 0 || n > punctual_latency::MAX_THREADS)
        {
            return Err(Failure::usage(
                "mckenney-nanosleep: parallel task counts must be 1 to 256",
            ));
        }
        let mut doc = new_doc(ctx, self.name(), punctual_result::now_rfc3339());
        doc.settings
            .extra
            .insert("sleep_ns".into(), s.sleep_ns.into());
        doc.settings
            .extra
            .insert("default_timer_slack_ns".into(), DEFAULT_SLACK_NS.into());
        let stopped = || ctx.stop.load(Ordering::Relaxed);

        let mut ladder: Vec<Recorder> = Vec::new();
        for (i, step) in LADDER.iter().enumerate() {
            if stopped() {
                break;
            }
            let trials = if i == LADDER.len() - 1 {
                s.final_trials
            } else {
                s.ladder_trials
            };
            let rec = self.measure(
                ctx,
                &mut doc,
                1,
                step.clock,
                step.policy,
                step.mlock,
                trials,
                s.sleep_ns,
            )?;
            doc.series.push(
                Series::from_recorder(
                    format!("ladder {}: {}", i + 1, step.label),
                    kind::NANOSLEEP_JITTER,
                    None,
                    &rec,
                )
                .with("clock", step.clock.name())
                .with("policy", step.policy.name())
                .with("mlock", step.mlock),
            );
            ladder.push(rec);
        }
        let mut parallel: Vec<(usize, Recorder)> = Vec::new();
        for &n in &s.parallel_tasks {
            if stopped() {
                break;
            }
            let rec = self.measure(
                ctx,
                &mut doc,
                n,
                ClockId::Monotonic,
                Policy::Fifo,
                true,
                s.calls_per_task,
                s.sleep_ns,
            )?;
            doc.series.push(
                Series::from_recorder(
                    format!("{n} parallel tasks"),
                    kind::NANOSLEEP_JITTER,
                    None,
                    &rec,
                )
                .with("tasks", n as u64)
                .with("calls_per_task", s.calls_per_task),
            );
            parallel.push((n, rec));
        }
        let mut build: Option<(Recorder, Vec<punctual_load::LoadReport>)> = None;
        if !stopped() {
            let spec: LoadSpec = format!("build:{}", s.build_instances)
                .parse()
                .map_err(Failure::usage)?;
            let mut loads =
                Loads::start(&spec, &ctx.exe).map_err(|e| Failure::system(e.to_string()))?;
            loads.wait_ready(std::time::Duration::from_secs(10));
            // Let the first compilers get going before measuring.
            std::thread::sleep(std::time::Duration::from_millis(300));
            let rec = self.measure(
                ctx,
                &mut doc,
                1,
                ClockId::Monotonic,
                Policy::Fifo,
                true,
                s.build_trials,
                s.sleep_ns,
            );
            let reports: Vec<_> = loads.stop().into_iter().filter_map(|r| r.2).collect();
            let rec = rec?;
            doc.series.push(
                Series::from_recorder(
                    "beside a parallel build",
                    kind::NANOSLEEP_JITTER,
                    None,
                    &rec,
                )
                .with("load", spec.to_string())
                .with("files_compiled", reports.iter().map(|r| r.ops).sum::<u64>()),
            );
            build = Some((rec, reports));
        }
        close_doc(ctx, &mut doc);

        // ---- tables ----
        let mut t = Table::new(&[
            "Loop", "clock", "policy", "mlock", "trials", "average", "99.999%", "max", "paper",
        ])
        .titled(format!(
            "McKenney Figs. 1-3: nanosleep({}) jitter (us), one pitfall fixed per row",
            format_ns(s.sleep_ns)
        ));
        for (i, step) in LADDER.iter().enumerate() {
            let (n, avg, p, max) = match ladder.get(i) {
                Some(r) => (
                    group(r.count()),
                    u1(r.summary().mean),
                    u1(r.percentile(99_999)),
                    u1(r.max().unwrap_or(0)),
                ),
                None => ("-".into(), "-".into(), "-".into(), "-".into()),
            };
            t.row([
                step.label.to_string(),
                step.clock.name().to_string(),
                if step.policy.is_realtime() {
                    format!("{} 99", step.policy)
                } else {
                    step.policy.to_string()
                },
                if step.mlock {
                    "yes".into()
                } else {
                    "no".into()
                },
                n,
                avg,
                p,
                max,
                step.paper.to_string(),
            ]);
        }
        t.rule();
        t.row([
            "paper 2008, -rt kernel, all precautions",
            "monotonic",
            "fifo 99",
            "yes",
            paper::TRIALS,
            "-",
            paper::RT_P99999_US,
            paper::RT_MAX_US,
            "4-CPU 2.2 GHz x86",
        ]);
        t.row([
            "paper 2008, non-rt kernel, all precautions",
            "monotonic",
            "fifo 99",
            "yes",
            "-",
            "-",
            "-",
            paper::NONRT_MAX,
            "misses by up to 3 ms",
        ]);
        t.row([
            "paper 2009 slides, -rt, newer kernel",
            "monotonic",
            "fifo 99",
            "yes",
            paper::TRIALS,
            "-",
            paper::RT2009_P99999_US,
            paper::RT2009_MAX_US,
            "same machine",
        ]);
        t.note(format!(
            "Here: jitter = measured sleep minus the {} asked for. Normal-class rows keep the kernel's default 50 us timer slack, as a plain program would.",
            format_ns(s.sleep_ns)
        ));

        let mut t8 = Table::new(&["Parallel tasks", "calls each", "average", "99.999%", "max"])
            .titled("McKenney Fig. 8: nanosleep jitter (us) with parallel tasks (SCHED_FIFO 99, mlockall, not pinned)");
        for (n, r) in &parallel {
            t8.row([
                n.to_string(),
                group(s.calls_per_task),
                u1(r.summary().mean),
                u1(r.percentile(99_999)),
                u1(r.max().unwrap_or(0)),
            ]);
        }
        t8.rule();
        let ratio = |f: &dyn Fn(&Recorder) -> u64| -> String {
            match (parallel.first(), parallel.last()) {
                (Some((a, ra)), Some((b, rb))) if a != b && f(ra) > 0 => {
                    format!("{:.1}x", f(rb) as f64 / f(ra) as f64)
                }
                _ => "-".into(),
            }
        };
        let (first, last) = (
            parallel.first().map(|p| p.0).unwrap_or(0),
            parallel.last().map(|p| p.0).unwrap_or(0),
        );
        t8.row([
            format!("growth {first} -> {last} (here)"),
            String::new(),
            ratio(&|r| r.summary().mean),
            ratio(&|r| r.percentile(99_999)),
            ratio(&|r| r.max().unwrap_or(0)),
        ]);
        t8.row([
            "growth 1 -> 12 (paper)",
            paper::CALLS_PER_TASK,
            "little",
            paper::FIG8_GROWTH,
            paper::FIG8_GROWTH,
        ]);
        t8.note(format!(
            "This machine has {} CPUs; the paper's had 4.",
            punctual_rt::online_cpus().len()
        ));

        let mut tb = Table::new(&["Beside a build", "trials", "average", "99.999%", "max"])
            .titled("McKenney section 3: nanosleep jitter (us) beside a parallel build");
        if let Some((r, reports)) = &build {
            tb.row([
                format!(
                    "here: build:{} ({} files compiled)",
                    s.build_instances,
                    group(reports.iter().map(|r| r.ops).sum())
                ),
                group(r.count()),
                u1(r.summary().mean),
                u1(r.percentile(99_999)),
                u1(r.max().unwrap_or(0)),
            ]);
        }
        tb.row([
            "paper: kernel build -j8 and four downloads, -rt",
            "-",
            "-",
            paper::BUILD_P99999_US,
            paper::BUILD_MAX_US,
        ]);
        tb.note("Here the build is a generated C project compiled with gcc -O2, one job per CPU per build process, over and over.");

        let mut lines: Vec<(String, &Recorder)> = LADDER
            .iter()
            .zip(&ladder)
            .filter(|(_, r)| r.count() > 0)
            .map(|(s, r)| (s.label.to_string(), r))
            .collect();
        if let Some((r, _)) = &build {
            lines.push(("beside a build".into(), r));
        }
        let f1 = figure(
            "mckenney-nanosleep-ladder",
            punctual_plot::percentile_plot(
                "McKenney: nanosleep jitter, pitfall by pitfall",
                &lines,
            ),
        )?;
        let pts = |f: &dyn Fn(&Recorder) -> u64| {
            parallel
                .iter()
                .map(|(n, r)| (*n as f64, f(r) as f64 / 1000.0))
                .collect::<Vec<_>>()
        };
        let f8 = figure(
            "mckenney-nanosleep-fig8",
            punctual_plot::line_plot(
                "McKenney Fig. 8: nanosleep jitter with parallel tasks",
                "parallel tasks",
                "jitter (us)",
                &[
                    punctual_plot::Line {
                        label: "average".into(),
                        points: pts(&|r| r.summary().mean),
                    },
                    punctual_plot::Line {
                        label: "99.999th percentile".into(),
                        points: pts(&|r| r.percentile(99_999)),
                    },
                    punctual_plot::Line {
                        label: "maximum".into(),
                        points: pts(&|r| r.max().unwrap_or(0)),
                    },
                ],
                false,
                true,
            ),
        )?;
        Ok(Report {
            tables: vec![t, t8, tb],
            doc,
            figures: vec![f1, f8],
        })
    }
}
