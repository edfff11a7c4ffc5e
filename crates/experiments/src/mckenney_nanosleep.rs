//! `mckenney-nanosleep`: McKenney's nanosleep validation loop (OLS 2008 Figs. 1-3 and 8; RTLWS 2009
//! slides). The loop reads the clock, sleeps a fixed time with a relative sleep, reads the clock
//! again and keeps how much longer than asked it slept. It runs first as first written, then with
//! each pitfall fixed in turn (CLOCK_MONOTONIC instead of CLOCK_REALTIME, SCHED_FIFO, mlockall),
//! then as 1 to 12 parallel tasks (Fig. 8), then beside a parallel build. The loop is the latency
//! engine's `rel` mode, which is exactly this loop.
//!
//! measure: [`McKenneyNanosleep::run`] (rows by `McKenneyNanosleep::row`); model: [`Model`];
//! tables: [`tables`]; figures: [`figures`].

use crate::common::group;
use crate::published::mckenney as paper;
use punctual_bench::kind;
use punctual_latency::{Config, Mode, Stop};
use punctual_load::{LoadReport, LoadSpec};
use punctual_result::{Failure, Fallback, ResultDoc, Series, Table};
use punctual_rt::{Policy, RtWant};
use punctual_session::{Ctx, Figure, LiveSpec, Measurement, Report};
use punctual_stats::Recorder;
use punctual_time::{format_ns, ClockId, MarginPolicy};
use std::sync::atomic::Ordering;

pub const NAME: &str = "mckenney-nanosleep";

/// The timer slack a normal-class program gets by default: part of what the naive rows measure.
const DEFAULT_SLACK_NS: u64 = 50_000;

// ---------------------------------------------------------------------------------------------
// measure

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

    fn check(&self) -> Result<(), Failure> {
        if self.sleep_ns == 0
            || self.ladder_trials == 0
            || self.final_trials == 0
            || self.calls_per_task == 0
            || self.build_trials == 0
        {
            return Err(Failure::usage(
                "mckenney-nanosleep: the sleep and every trial count must be above zero",
            ));
        }
        if self.parallel_tasks.is_empty()
            || self
                .parallel_tasks
                .iter()
                .any(|&n| n == 0 || n > punctual_latency::MAX_THREADS)
        {
            return Err(Failure::usage(
                "mckenney-nanosleep: parallel task counts must be 1 to 256",
            ));
        }
        Ok(())
    }

    /// Sequential sleeps of every row (parallel tasks sleep side by side), at least the sleep each.
    fn expected_ns(&self) -> u64 {
        let sleeps = 3 * self.ladder_trials
            + self.final_trials
            + self.calls_per_task * self.parallel_tasks.len() as u64
            + self.build_trials;
        sleeps.saturating_mul(self.sleep_ns)
    }
}

/// One rung of the ladder: what the loop is as first written, then each pitfall fixed.
pub struct Step {
    pub label: &'static str,
    pub clock: ClockId,
    pub policy: Policy,
    pub mlock: bool,
    pub paper: &'static str,
}

pub const LADDER: [Step; 4] = [
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

/// The experiment.
pub struct McKenneyNanosleep {
    pub quick: bool,
    pub settings: NanosleepSettings,
}

impl McKenneyNanosleep {
    pub fn new(opts: crate::Options) -> McKenneyNanosleep {
        McKenneyNanosleep {
            quick: opts.quick,
            settings: if opts.quick {
                NanosleepSettings::quick()
            } else {
                NanosleepSettings::full()
            },
        }
    }
}

/// The build the last row runs beside, and what it did.
pub struct Build {
    pub spec: LoadSpec,
    pub reports: Vec<LoadReport>,
    pub rec: Recorder,
}

/// What `run` measured, as far as it got.
pub struct Outcome {
    /// One recorder per ladder row, in [`LADDER`] order.
    pub ladder: Vec<Recorder>,
    /// (tasks, all their sleeps).
    pub parallel: Vec<(usize, Recorder)>,
    pub build: Option<Build>,
    /// Settings the kernel refused a row (a class, memory locking).
    pub fallbacks: Vec<Fallback>,
}

impl McKenneyNanosleep {
    /// One row: `threads` loops of `loops` sleeps each, every knob the paper turns an argument.
    /// The row locks memory itself when asked (and unlocks it afterwards), so that the rows without
    /// mlockall run with nothing locked, as the paper's did.
    fn row(
        &self,
        ctx: &Ctx,
        threads: usize,
        (clock, policy, mlock): (ClockId, Policy, bool),
        loops: u64,
        fallbacks: &mut Vec<Fallback>,
    ) -> Result<Recorder, Failure> {
        let _lock = if mlock {
            match punctual_rt::memlock::lock_all_or_fallback() {
                Ok(g) => Some(g),
                Err(f) => {
                    fallbacks.push(f);
                    None
                }
            }
        } else {
            None
        };
        let cfg = Config {
            threads: vec![None; threads],
            interval: self.settings.sleep_ns,
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
        let out = punctual_latency::run(&cfg, ctx.stop(), None, None)?;
        fallbacks.extend(out.threads.iter().filter_map(|t| t.fallback.clone()));
        Ok(out.merged())
    }

    /// The last row beside a parallel build, started here and stopped after it.
    fn beside_build(&self, ctx: &Ctx, out: &mut Outcome) -> Result<(), Failure> {
        let s = &self.settings;
        ctx.step(format!("beside build:{}", s.build_instances));
        let spec: LoadSpec = format!("build:{}", s.build_instances)
            .parse()
            .map_err(Failure::usage)?;
        let mut loads = ctx.start_load(&spec)?;
        loads.wait_ready(std::time::Duration::from_secs(10), ctx.stop());
        // Let the first compilers get going before measuring.
        std::thread::sleep(std::time::Duration::from_millis(300));
        let all = (ClockId::Monotonic, Policy::Fifo, true);
        let rec = self.row(ctx, 1, all, s.build_trials, &mut out.fallbacks);
        let reports = loads.stop().into_iter().filter_map(|r| r.2).collect();
        out.build = Some(Build {
            spec,
            reports,
            rec: rec?,
        });
        Ok(())
    }
}

impl Measurement for McKenneyNanosleep {
    type Outcome = Outcome;

    fn label(&self) -> String {
        NAME.into()
    }
    /// The class of the precaution rows, with `mlock: false`: the ladder compares rows without
    /// mlockall against rows with it, and every row's loop runs on threads of this process, so a
    /// session-wide mlockall would lock the "no mlock" rows too (and a row's own munlockall would
    /// release the session's lock). The rows that want locked memory lock it themselves
    /// (`McKenneyNanosleep::row`). No cpu_dma_latency request: the paper made none.
    fn wants(&self) -> Option<RtWant> {
        Some(RtWant {
            policy: Policy::Fifo,
            priority: 99,
            mlock: false,
            dma_latency_us: None,
        })
    }
    fn live(&self) -> Option<LiveSpec> {
        Some(LiveSpec::timed(self.settings.expected_ns(), String::new))
    }
    fn run(&mut self, ctx: &Ctx) -> Result<Outcome, Failure> {
        self.settings.check()?;
        let s = &self.settings;
        let stopped = || ctx.stop().load(Ordering::Relaxed);
        let mut out = Outcome {
            ladder: Vec::new(),
            parallel: Vec::new(),
            build: None,
            fallbacks: Vec::new(),
        };
        for (i, step) in LADDER.iter().enumerate() {
            if stopped() {
                return Ok(out);
            }
            ctx.step(format!("ladder {}: {}", i + 1, step.label));
            let trials = if i == LADDER.len() - 1 {
                s.final_trials
            } else {
                s.ladder_trials
            };
            let knobs = (step.clock, step.policy, step.mlock);
            let rec = self.row(ctx, 1, knobs, trials, &mut out.fallbacks)?;
            out.ladder.push(rec);
        }
        for &n in &s.parallel_tasks {
            if stopped() {
                return Ok(out);
            }
            ctx.step(format!("{n} parallel tasks"));
            let all = (ClockId::Monotonic, Policy::Fifo, true);
            let rec = self.row(ctx, n, all, s.calls_per_task, &mut out.fallbacks)?;
            out.parallel.push((n, rec));
        }
        if !stopped() {
            self.beside_build(ctx, &mut out)?;
        }
        Ok(out)
    }
    fn report(&self, out: Outcome, ctx: &Ctx, doc: &mut ResultDoc) -> Result<Report, Failure> {
        crate::common::mark(doc, NAME, self.quick);
        ctx.runtime_fallbacks(doc, out.fallbacks.iter());
        let st = &mut doc.settings.extra;
        st.insert("sleep_ns".into(), self.settings.sleep_ns.into());
        st.insert("default_timer_slack_ns".into(), DEFAULT_SLACK_NS.into());
        series(doc, &out, &self.settings);
        let model = Model::of(&out, &self.settings, punctual_rt::online_cpus().len());
        Ok(Report {
            tables: tables(&model),
            figures: figures(&out)?,
            ..Report::default()
        })
    }
}

fn series(doc: &mut ResultDoc, out: &Outcome, s: &NanosleepSettings) {
    for (i, (step, rec)) in LADDER.iter().zip(&out.ladder).enumerate() {
        doc.series.push(
            Series::from_recorder(
                format!("ladder {}: {}", i + 1, step.label),
                kind::NANOSLEEP_JITTER,
                None,
                rec,
            )
            .with("clock", step.clock.name())
            .with("policy", step.policy.name())
            .with("mlock", step.mlock),
        );
    }
    for (n, rec) in &out.parallel {
        doc.series.push(
            Series::from_recorder(
                format!("{n} parallel tasks"),
                kind::NANOSLEEP_JITTER,
                None,
                rec,
            )
            .with("tasks", *n as u64)
            .with("calls_per_task", s.calls_per_task),
        );
    }
    if let Some(b) = &out.build {
        doc.series.push(
            Series::from_recorder(
                "beside a parallel build",
                kind::NANOSLEEP_JITTER,
                None,
                &b.rec,
            )
            .with("load", b.spec.to_string())
            .with(
                "files_compiled",
                b.reports.iter().map(|r| r.ops).sum::<u64>(),
            ),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// model

/// What the paper reports of a row: trials, average, 99.999th percentile and maximum jitter (ns).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Jitter {
    pub trials: u64,
    pub mean: u64,
    pub p99999: u64,
    pub max: u64,
}

impl Jitter {
    pub fn of(r: &Recorder) -> Jitter {
        Jitter {
            trials: r.count(),
            mean: r.summary().mean,
            p99999: r.percentile(99_999),
            max: r.max().unwrap_or(0),
        }
    }
}

/// The numbers of the tables.
pub struct Model {
    pub sleep_ns: u64,
    /// One per measured ladder row, in [`LADDER`] order.
    pub ladder: Vec<Jitter>,
    pub calls_per_task: u64,
    pub parallel: Vec<(usize, Jitter)>,
    /// Build processes, files they compiled, and the row beside them.
    pub build: Option<(u32, u64, Jitter)>,
    pub build_instances: u32,
    /// This machine's CPUs.
    pub cpus: usize,
}

impl Model {
    pub fn of(out: &Outcome, s: &NanosleepSettings, cpus: usize) -> Model {
        Model {
            sleep_ns: s.sleep_ns,
            ladder: out.ladder.iter().map(Jitter::of).collect(),
            calls_per_task: s.calls_per_task,
            parallel: out
                .parallel
                .iter()
                .map(|(n, r)| (*n, Jitter::of(r)))
                .collect(),
            build: out.build.as_ref().map(|b| {
                (
                    s.build_instances,
                    b.reports.iter().map(|r| r.ops).sum(),
                    Jitter::of(&b.rec),
                )
            }),
            build_instances: s.build_instances,
            cpus,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// tables and figures

fn u1(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

/// The ladder (Figs. 1-3), the parallel tasks (Fig. 8) and the build (section 3).
pub fn tables(m: &Model) -> Vec<Table> {
    vec![ladder(m), parallel(m), build(m)]
}

fn ladder(m: &Model) -> Table {
    let mut t = Table::new(&[
        "Loop", "clock", "policy", "mlock", "trials", "average", "99.999%", "max", "paper",
    ])
    .titled(format!(
        "McKenney Figs. 1-3: nanosleep({}) jitter (us), one pitfall fixed per row",
        format_ns(m.sleep_ns)
    ));
    for (i, step) in LADDER.iter().enumerate() {
        let (n, avg, p, max) = match m.ladder.get(i) {
            Some(j) => (group(j.trials), u1(j.mean), u1(j.p99999), u1(j.max)),
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
            if step.mlock { "yes" } else { "no" }.to_string(),
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
        "paper 2009 slides, non-rt kernel",
        "monotonic",
        "fifo 99",
        "yes",
        "-",
        "-",
        "-",
        paper::NONRT2009_MAX,
        "more than 3 ms",
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
        format_ns(m.sleep_ns)
    ));
    t
}

fn parallel(m: &Model) -> Table {
    let mut t = Table::new(&["Parallel tasks", "calls each", "average", "99.999%", "max"])
        .titled("McKenney Fig. 8: nanosleep jitter (us) with parallel tasks (SCHED_FIFO 99, mlockall, not pinned)");
    for (n, j) in &m.parallel {
        t.row([
            n.to_string(),
            group(m.calls_per_task),
            u1(j.mean),
            u1(j.p99999),
            u1(j.max),
        ]);
    }
    t.rule();
    let ratio = |f: fn(&Jitter) -> u64| -> String {
        match (m.parallel.first(), m.parallel.last()) {
            (Some((a, ja)), Some((b, jb))) if a != b && f(ja) > 0 => {
                format!("{:.1}x", f(jb) as f64 / f(ja) as f64)
            }
            _ => "-".into(),
        }
    };
    let (first, last) = (
        m.parallel.first().map(|p| p.0).unwrap_or(0),
        m.parallel.last().map(|p| p.0).unwrap_or(0),
    );
    t.row([
        format!("growth {first} -> {last} (here)"),
        String::new(),
        ratio(|j| j.mean),
        ratio(|j| j.p99999),
        ratio(|j| j.max),
    ]);
    t.row([
        "growth 1 -> 12 (paper)",
        paper::CALLS_PER_TASK,
        "little",
        paper::FIG8_GROWTH,
        paper::FIG8_GROWTH,
    ]);
    t.note(format!(
        "This machine has {} CPUs; the paper's had 4.",
        m.cpus
    ));
    t
}

fn build(m: &Model) -> Table {
    let mut t = Table::new(&["Beside a build", "trials", "average", "99.999%", "max"])
        .titled("McKenney section 3: nanosleep jitter (us) beside a parallel build");
    if let Some((instances, files, j)) = &m.build {
        t.row([
            format!("here: build:{instances} ({} files compiled)", group(*files)),
            group(j.trials),
            u1(j.mean),
            u1(j.p99999),
            u1(j.max),
        ]);
    }
    t.row([
        "paper: kernel build -j8 and four downloads, -rt",
        "-",
        "-",
        paper::BUILD_P99999_US,
        paper::BUILD_MAX_US,
    ]);
    t.note("Here the build is a generated C project compiled with gcc -O2, one job per CPU per build process, over and over.");
    t
}

/// The ladder (and the build) on the exponential percentile axis; Fig. 8 against the task count.
pub fn figures(out: &Outcome) -> Result<Vec<Figure>, Failure> {
    let mut lines: Vec<(String, &Recorder)> = LADDER
        .iter()
        .zip(&out.ladder)
        .filter(|(_, r)| r.count() > 0)
        .map(|(s, r)| (s.label.to_string(), r))
        .collect();
    if let Some(b) = &out.build {
        lines.push(("beside a build".into(), &b.rec));
    }
    let f1 = crate::common::figure(
        "mckenney-nanosleep-ladder",
        punctual_plot::percentile_plot("McKenney: nanosleep jitter, pitfall by pitfall", &lines),
    )?;
    let pts = |f: fn(&Jitter) -> u64| {
        out.parallel
            .iter()
            .map(|(n, r)| (*n as f64, f(&Jitter::of(r)) as f64 / 1000.0))
            .collect::<Vec<_>>()
    };
    let f8 = crate::common::figure(
        "mckenney-nanosleep-fig8",
        punctual_plot::line_plot(
            "McKenney Fig. 8: nanosleep jitter with parallel tasks",
            "parallel tasks",
            "jitter (us)",
            &[
                punctual_plot::Line {
                    label: "average".into(),
                    points: pts(|j| j.mean),
                },
                punctual_plot::Line {
                    label: "99.999th percentile".into(),
                    points: pts(|j| j.p99999),
                },
                punctual_plot::Line {
                    label: "maximum".into(),
                    points: pts(|j| j.max),
                },
            ],
            false,
            true,
        ),
    )?;
    Ok(vec![f1, f8])
}
