//! `kurt-utime`: the KURT thesis' evaluation of UTIME (section 3.2) on this machine, read from kernel
//! traces of the interrupt and timer events.
//!
//! - **Fig. 3.1**, the timer interrupt's processing time: the thesis stamped the timer ISR's entry
//!   and exit; here the x86 local timer vector's entry and exit events, once with no event of ours
//!   scheduled and once with a thread sleeping 100 us at a time (the thesis' "several events
//!   scheduled at microsecond resolution").
//! - **Fig. 3.2**, the time between consecutive loops of a SCHED_FIFO process that works and
//!   sleeps in `select()` for the rest of 10 ms: 10 ms under UTIME, 20 ms on the 100 Hz tick. Here
//!   the same loop runs for real (no trace needed), and the simulator gives both timer mechanisms.
//! - **Fig. 3.3**, from the time an event was scheduled for to its timer function running: each
//!   hrtimer's programmed expiry (`hrtimer_start`) to the clock reading its interrupt took before
//!   running it (`hrtimer_expire_entry`).
//!
//! One-shot timers are what UTIME added; every modern kernel has them (high-resolution timers), so
//! there is no "without UTIME" run to make: the thesis' standard-Linux curve is printed beside.
//!
//! measure: [`KurtUtime::run`]; model: [`Model`]; tables: [`tables`]; figures: [`figures`].

use crate::traced::{phases_live, trace_beside};
use crate::workload::{self, Generators};
use punctual_plot::Line;
use punctual_result::doc::kind;
use punctual_result::{Failure, ResultDoc, Series, Table};
use punctual_rt::RtWant;
use punctual_session::{Ctx, Figure, LiveSpec, Measurement, Report};
use punctual_stats::Recorder;
use punctual_trace::analyze::{Analysis, Expiries, Source};
use punctual_trace::event::Vector;
use punctual_trace::kernel::EventGroups;
use punctual_trace::record::RecordProgress;
use punctual_trace::render::cdf_line;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub const NAME: &str = "kurt-utime";

/// The thesis' Fig. 3.1, read off the figure and its text: (curve, typical, nearly all below).
pub const FIG_3_1: [(&str, &str, &str); 2] = [
    ("standard Linux (no UTIME)", "about 1", "5"),
    ("UTIME, with or without microsecond events", "about 15", "-"),
];
/// The thesis' Fig. 3.3: "anywhere from 20 to 50" us from the programmed interrupt to the timer
/// function, so KURT programmed its timer 50 us early and spun to the instant.
pub const FIG_3_3_MOST_WITHIN_US: u64 = 50;
pub const FIG_3_3_FROM_US: u64 = 20;
/// The thesis on UTIME's cost: about 0.15 % (15 us at most once per 10 ms tick), plus 15 us per
/// event scheduled with microsecond resolution.
pub const UTIME_OVERHEAD_PERCENT: f64 = 0.15;
/// The thesis' Fig. 3.2: time between loops, ms (UTIME, standard Linux on its 100 Hz tick).
pub const FIG_3_2_MS: (u64, u64) = (10, 20);
/// Fig. 3.2's loop: work this long, then `select()` for the rest of [`LOOP_NS`].
pub const LOOP_WORK_NS: u64 = 100_000;
pub const LOOP_NS: u64 = 10_000_000;

/// The two traced cases: nothing of ours scheduled, then a thread whose 100 us sleeps are
/// microsecond events.
pub const CASES: [&str; 2] = ["no events scheduled", "events every 100 us"];

/// The experiment.
pub struct KurtUtime {
    pub quick: bool,
    /// Seconds traced per case (the thesis: about 8,000 interrupts per case; 16 s of this
    /// machine's ticks on two CPUs).
    pub secs: u64,
    progress: Arc<RecordProgress>,
}

impl KurtUtime {
    pub fn new(opts: crate::Options) -> KurtUtime {
        KurtUtime {
            quick: opts.quick,
            secs: if opts.quick { 2 } else { 16 },
            progress: Arc::default(),
        }
    }

    fn trace_case(&self, ctx: &Ctx, events: bool) -> Result<Analysis, Failure> {
        let mut g = Generators::new();
        if events {
            workload::timers(&mut g);
        }
        let groups = EventGroups {
            sched: false,
            irq: true,
            timer: true,
        };
        trace_beside(ctx, g, groups, self.secs, &self.progress)
    }
}

/// One traced case.
pub struct Case {
    pub label: &'static str,
    /// The local timer vector's entry-to-exit times.
    pub handler: Recorder,
    /// Every measured hrtimer expiry's lateness, pooled over the timers.
    pub expiry: Recorder,
    pub expiries: Expiries,
    /// CPUs the trace covered.
    pub cpus: usize,
}

impl Case {
    pub fn of(label: &'static str, a: &Analysis) -> Case {
        Case {
            label,
            handler: a
                .sources
                .get(&Source::Vector(Vector::LocalTimer))
                .map(|s| s.durations.clone())
                .unwrap_or_default(),
            expiry: a.expiry_latency(),
            expiries: a.expiries,
            cpus: a.cpus,
        }
    }
}

/// What the run measured: the traced cases, then Fig. 3.2's loop.
pub struct Outcome {
    pub cases: Vec<Case>,
    /// The select() loop's interval deviation (|time between loops - 10 ms|), when it ran.
    pub loops: Option<Recorder>,
}

/// Fig. 3.2's loop, for real, on the calling thread (its class and CPU are the session's): stamp
/// the time, work [`LOOP_WORK_NS`], `select()` for the rest of [`LOOP_NS`]; how far the time
/// between consecutive stamps is from [`LOOP_NS`] (KURT's interval deviation), for `secs` or
/// until `stop`.
pub fn select_loop(secs: u64, stop: &std::sync::atomic::AtomicBool) -> Recorder {
    use punctual_time::clock::read_clock;
    let mono = libc::CLOCK_MONOTONIC;
    let mut rec = Recorder::new();
    let end = read_clock(mono) + secs * 1_000_000_000;
    let mut last: Option<u64> = None;
    while !stop.load(Ordering::Relaxed) {
        let start = read_clock(mono);
        if start >= end {
            break;
        }
        if let Some(l) = last {
            rec.record((start - l).abs_diff(LOOP_NS));
        }
        last = Some(start);
        while read_clock(mono) < start + LOOP_WORK_NS {
            std::hint::spin_loop();
        }
        let rest = (LOOP_NS - LOOP_WORK_NS) / 1_000;
        let mut tv = libc::timeval {
            tv_sec: 0,
            tv_usec: rest as libc::suseconds_t,
        };
        // SAFETY: no descriptor sets; a valid timeval the call may change.
        unsafe {
            libc::select(
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &mut tv,
            )
        };
    }
    rec
}

/// Fig. 3.2 in the simulator, the thesis' loop at 100 Hz: time between loops (ms, p50) with
/// one-shot timers (UTIME) and on the periodic tick.
pub fn simulated_fig_3_2() -> Option<(f64, f64)> {
    use punctual_sim::{Mechanism, Policy, RunConfig};
    let loop_ms = |timer| {
        let cfg = RunConfig {
            hz: 100,
            policy: Policy::Fifo,
            timer,
            duration: 2_000_000_000,
            tasks: punctual_sim::parse_workload(&format!(
                "select:1:{}us:{}us",
                (LOOP_NS - LOOP_WORK_NS) / 1_000,
                LOOP_WORK_NS / 1_000
            ))
            .ok()?,
            ..RunConfig::default()
        };
        let r = punctual_sim::simulate(&cfg, &punctual_sim::Control::default()).ok()?;
        let d = punctual_sim::pooled(r.tasks.iter().map(|t| t.stats.loop_deviation.clone()))?;
        // The deviation is the time between loops less the select() timeout.
        Some((d.percentile(50_000) + LOOP_NS - LOOP_WORK_NS) as f64 / 1e6)
    };
    Some((loop_ms(Mechanism::Oneshot)?, loop_ms(Mechanism::Periodic)?))
}

impl Measurement for KurtUtime {
    type Outcome = Outcome;

    fn label(&self) -> String {
        NAME.into()
    }
    fn wants(&self) -> Option<RtWant> {
        Some(crate::traced::WANTS)
    }
    fn live(&self) -> Option<LiveSpec> {
        Some(phases_live(&self.progress, self.secs, CASES.len()))
    }
    fn run(&mut self, ctx: &Ctx) -> Result<Outcome, Failure> {
        let mut cases = Vec::new();
        for (i, label) in CASES.into_iter().enumerate() {
            if ctx.stop().load(Ordering::Relaxed) {
                break;
            }
            ctx.step(label.to_string());
            cases.push(Case::of(label, &self.trace_case(ctx, i == 1)?));
        }
        let mut loops = None;
        if !ctx.stop().load(Ordering::Relaxed) {
            ctx.step("Fig. 3.2: a 10 ms select() loop".to_string());
            loops = Some(select_loop(self.secs.min(5), ctx.stop()));
        }
        Ok(Outcome { cases, loops })
    }
    fn report(&self, o: Outcome, _ctx: &Ctx, doc: &mut ResultDoc) -> Result<Report, Failure> {
        let Outcome { cases, loops } = o;
        crate::common::mark(doc, NAME, self.quick);
        crate::traced::unclaim_timer_slack(doc);
        for c in &cases {
            doc.series.push(
                Series::from_recorder(
                    format!("local timer interrupt, {}", c.label),
                    kind::IRQ_DURATION,
                    None,
                    &c.handler,
                )
                .with("figure", "KURT Fig. 3.1"),
            );
            doc.series.push(
                Series::from_recorder(
                    format!("timer expiry to handler, {}", c.label),
                    kind::TIMER_EXPIRY_LATENCY,
                    None,
                    &c.expiry,
                )
                .with("figure", "KURT Fig. 3.3")
                .with("early", c.expiries.early)
                .with("unknown", c.expiries.unknown),
            );
        }
        if let Some(l) = &loops {
            doc.series.push(
                Series::from_recorder(
                    "10 ms loop: 100 us of work, select() for the rest",
                    kind::INTERVAL_DEVIATION,
                    None,
                    l,
                )
                .with("figure", "KURT Fig. 3.2"),
            );
        }
        doc.extra.insert(
            "case_duration_ns".into(),
            (self.secs * 1_000_000_000).into(),
        );
        let mut model = Model::of(&cases, self.secs);
        model.loops = loops.as_ref().and_then(row);
        model.simulated = simulated_fig_3_2();
        Ok(Report {
            tables: tables(&model),
            figures: figures(&cases)?,
            ..Report::default()
        })
    }
}

/// A distribution's row: count, p50, p90, p99, max (us, two decimals).
pub type Row = [u64; 5];

fn row(r: &Recorder) -> Option<Row> {
    (r.count() > 0).then(|| {
        [
            r.count(),
            r.percentile(50_000),
            r.percentile(90_000),
            r.percentile(99_000),
            r.max().unwrap_or(0),
        ]
    })
}

/// One case's numbers.
pub struct CaseRow {
    pub label: String,
    /// Fig. 3.1: the local timer vector's time.
    pub handler: Option<Row>,
    /// The share of each CPU's time the local timer vector took (per cent), against the thesis'
    /// 0.15 % overhead.
    pub handler_share: Option<f64>,
    /// Fig. 3.3: expiry to handler, and the share of it within the thesis' 50 us (per cent).
    pub expiry: Option<Row>,
    pub within_50us: Option<f64>,
    /// Expiries not measured: run early (slack), no start traced.
    pub early: u64,
    pub unknown: u64,
}

/// The numbers of the tables.
pub struct Model {
    pub secs: u64,
    pub cases: Vec<CaseRow>,
    /// Fig. 3.2 here: the interval deviation, |time between loops - 10 ms|.
    pub loops: Option<Row>,
    /// Fig. 3.2 in the simulator: p50 time between loops, ms (one-shot, periodic tick).
    pub simulated: Option<(f64, f64)>,
}

impl Model {
    pub fn of(cases: &[Case], secs: u64) -> Model {
        Model {
            secs,
            cases: cases
                .iter()
                .map(|c| {
                    let within = (c.expiry.count() > 0).then(|| {
                        100.0 * c.expiry.fraction_at_or_below(FIG_3_3_MOST_WITHIN_US * 1000)
                    });
                    let traced_ns = (secs * 1_000_000_000).saturating_mul(c.cpus.max(1) as u64);
                    let handler_ns = c.handler.count() as f64 * c.handler.summary().mean as f64;
                    CaseRow {
                        label: c.label.to_string(),
                        handler: row(&c.handler),
                        handler_share: (c.handler.count() > 0 && traced_ns > 0)
                            .then(|| 100.0 * handler_ns / traced_ns as f64),
                        expiry: row(&c.expiry),
                        within_50us: within,
                        early: c.expiries.early,
                        unknown: c.expiries.unknown,
                    }
                })
                .collect(),
            loops: None,
            simulated: None,
        }
    }
}

fn cells(r: Option<Row>) -> Vec<String> {
    match r {
        Some([n, p50, p90, p99, max]) => std::iter::once(crate::common::group(n))
            .chain([p50, p90, p99, max].map(|ns| crate::common::us2(ns as f64)))
            .collect(),
        None => vec!["-".into(); 5],
    }
}

/// Fig. 3.1 and Fig. 3.3 as tables: the thesis' reading beside this machine's distributions.
pub fn tables(m: &Model) -> Vec<Table> {
    let mut t1 = Table::new(&["", "interrupts", "p50 us", "p90 us", "p99 us", "max us"])
        .titled("KURT Fig. 3.1: timer interrupt processing time");
    for (curve, typical, below) in FIG_3_1 {
        t1.row([
            format!("thesis: {curve}"),
            "about 8,000".into(),
            typical.into(),
            "-".into(),
            "-".into(),
            if below == "-" {
                below.into()
            } else {
                format!("nearly all < {below}")
            },
        ]);
    }
    t1.rule();
    for c in &m.cases {
        t1.row(std::iter::once(format!("here: {}", c.label)).chain(cells(c.handler)));
    }
    t1.note("Thesis: the timer ISR's entry and exit stamped with the TSC on a Pentium Pro, ISR only (due events were marked, not run). \
             Here: the local timer vector's entry to exit on either CPU, which also runs every expired hrtimer's callback (the tick's among them), \
             on a kernel whose timers are all one-shot: UTIME's mechanism is the only one left, so there is no run without it.");
    let shares: Vec<String> = m
        .cases
        .iter()
        .filter_map(|c| Some(format!("{:.3} % ({})", c.handler_share?, c.label)))
        .collect();
    t1.note(format!(
        "Overhead: the thesis puts UTIME's at about {UTIME_OVERHEAD_PERCENT} % (15 us at most once per 10 ms tick), plus 15 us per \
         microsecond event. Here the local timer vector took {} of each CPU's time.",
        if shares.is_empty() {
            "(not measured)".to_string()
        } else {
            shares.join(" and ")
        }
    ));
    let mut t2 = Table::new(&["", "loops", "p50 ms", "p90 ms", "p99 ms", "max ms"])
        .titled("KURT Fig. 3.2: time between consecutive loops of a 10 ms select() loop");
    let (utime, standard) = FIG_3_2_MS;
    for (label, ms) in [
        ("thesis: UTIME", utime),
        ("thesis: standard Linux, 100 Hz tick", standard),
    ] {
        t2.row(
            [label.to_string(), "-".into()]
                .into_iter()
                .chain(std::iter::repeat_n(format!("{ms}"), 4)),
        );
    }
    if let Some((one_shot, tick)) = m.simulated {
        for (label, ms) in [
            ("simulated: one-shot timers, 100 Hz", one_shot),
            ("simulated: periodic tick, 100 Hz", tick),
        ] {
            t2.row(
                [label.to_string(), "-".into(), format!("{ms:.2}")]
                    .into_iter()
                    .chain(std::iter::repeat_n("-".to_string(), 3)),
            );
        }
    }
    t2.rule();
    let ms = |dev_ns: u64| format!("{:.3}", (LOOP_NS + dev_ns) as f64 / 1e6);
    match m.loops {
        Some([n, p50, p90, p99, max]) => t2.row(
            [
                format!("here: {}", "this kernel (hrtimers)"),
                crate::common::group(n),
            ]
            .into_iter()
            .chain([p50, p90, p99, max].map(ms)),
        ),
        None => t2.row(
            ["here: not run".to_string()]
                .into_iter()
                .chain(std::iter::repeat_n("-".to_string(), 5)),
        ),
    };
    t2.note(format!(
        "The loop stamps the time, works {} us and sleeps in select() for the rest of {} ms, at the session's \
         policy on its CPU. The thesis' standard kernel rounded the timeout up to whole 10 ms jiffies plus one, so \
         the loop ran every 20 ms; UTIME's one-shot timers ran it every 10 ms, as every kernel with high-resolution \
         timers does. The simulated rows run the same loop in `punctual simulate` (scenario examples/sim/kurt-fig3-2.toml).",
        LOOP_WORK_NS / 1_000,
        LOOP_NS / 1_000_000
    ));
    let mut t3 = Table::new(&[
        "",
        "expiries",
        "p50 us",
        "p90 us",
        "p99 us",
        "max us",
        "within 50 us",
    ])
    .titled("KURT Fig. 3.3: from the scheduled time to the timer function");
    t3.row([
        "thesis: UTIME, microsecond events".to_string(),
        "-".into(),
        format!("{FIG_3_3_FROM_US}-{FIG_3_3_MOST_WITHIN_US}"),
        "-".into(),
        "-".into(),
        "-".into(),
        "most".into(),
    ]);
    t3.rule();
    let mut unmeasured = Vec::new();
    for c in &m.cases {
        let within = c
            .within_50us
            .map_or_else(|| "-".into(), |w| format!("{w:.2} %"));
        t3.row(
            std::iter::once(format!("here: {}", c.label))
                .chain(cells(c.expiry))
                .chain(std::iter::once(within)),
        );
        unmeasured.push(format!(
            "{}: {} early, {} with no start traced",
            c.label, c.early, c.unknown
        ));
    }
    t3.note(format!(
        "Here: each hrtimer's programmed expiry (hrtimer_start) to the clock reading its interrupt took before running it \
         (hrtimer_expire_entry), every timer on both CPUs; {} s traced per case. Not measured: {}. The thesis: \
         \"anywhere from {FIG_3_3_FROM_US} to {FIG_3_3_MOST_WITHIN_US}\" us, so KURT programmed its timer {FIG_3_3_MOST_WITHIN_US} us early \
         and spun to the instant, as punctual's dispatcher does with a measured margin.",
        m.secs,
        unmeasured.join("; ")
    ));
    vec![t1, t2, t3]
}

/// The two figures as cumulative distributions (the thesis' form), one line per case.
pub fn figures(cases: &[Case]) -> Result<Vec<Figure>, Failure> {
    let lines = |pick: &dyn Fn(&Case) -> &Recorder| -> Vec<Line> {
        cases
            .iter()
            .filter(|c| pick(c).count() > 0)
            .map(|c| cdf_line(c.label, pick(c)))
            .collect()
    };
    let mut figs = Vec::new();
    for (name, title, x, l) in [
        (
            "kurt-utime-fig3-1",
            "KURT Fig. 3.1: timer interrupt processing time (CDF)",
            "local timer vector, entry to exit (us)",
            lines(&|c| &c.handler),
        ),
        (
            "kurt-utime-fig3-3",
            "KURT Fig. 3.3: scheduled time to timer dispatch (CDF)",
            "programmed expiry to handler (us)",
            lines(&|c| &c.expiry),
        ),
    ] {
        if l.is_empty() {
            continue;
        }
        figs.push(crate::common::figure(
            name,
            punctual_plot::line_plot(title, x, "fraction", &l, true, false),
        )?);
    }
    Ok(figs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(values: &[u64]) -> Recorder {
        let mut r = Recorder::new();
        for &v in values {
            r.record(v);
        }
        r
    }

    /// The thesis' readings print as read; each case's row shows its distributions and the share
    /// of expiries within the thesis' 50 us.
    #[test]
    fn tables_put_the_thesis_beside_each_case() {
        let cases = vec![
            Case {
                label: CASES[0],
                handler: rec(&[2_000, 3_000, 4_000, 60_000]),
                expiry: rec(&[1_000, 2_000, 3_000, 100_000]),
                expiries: Expiries {
                    measured: 4,
                    early: 1,
                    unknown: 7,
                },
                cpus: 2,
            },
            Case {
                label: CASES[1],
                handler: Recorder::new(),
                expiry: Recorder::new(),
                expiries: Expiries::default(),
                cpus: 2,
            },
        ];
        let mut m = Model::of(&cases, 2);
        // 4 interrupts of 17.25 us on average in 2 s on 2 CPUs: 69 us of 4 s.
        assert!((m.cases[0].handler_share.unwrap() - 0.001725).abs() < 1e-9);
        assert_eq!(m.cases[1].handler_share, None);
        m.loops = row(&rec(&[50_000, 60_000, 2_000_000]));
        m.simulated = Some((10.0, 20.0));
        let t = tables(&m);
        assert_eq!(t.len(), 3);
        assert_eq!(
            t[0].rows[0],
            [
                "thesis: standard Linux (no UTIME)",
                "about 8,000",
                "about 1",
                "-",
                "-",
                "nearly all < 5"
            ]
        );
        assert_eq!(t[0].rows[1][2], "about 15");
        assert_eq!(t[0].rows[1][5], "-");
        assert_eq!(t[0].rows[3][0], "here: no events scheduled");
        assert_eq!(t[0].rows[3][1], "4");
        assert_eq!(t[0].rows[4][1..], ["-", "-", "-", "-", "-"]);
        assert!(
            t[0].notes[1].contains("0.15 %")
                && t[0].notes[1].contains("0.002 % (no events scheduled)")
        );
        // Fig. 3.2: the thesis' 10 and 20 ms, the simulator's, then the loop here as periods.
        assert_eq!(t[1].rows[0][2..], ["10", "10", "10", "10"]);
        assert_eq!(t[1].rows[1][2], "20");
        assert_eq!(t[1].rows[3][2], "20.00");
        let here = t[1].rows.last().unwrap();
        assert_eq!(here[1..], ["3", "10.060", "12.000", "12.000", "12.000"]);
        assert_eq!(t[2].rows[0][2], "20-50");
        assert_eq!(t[2].rows[0][6], "most");
        let here = &t[2].rows[2];
        assert_eq!((here[1].as_str(), here[6].as_str()), ("4", "75.00 %"));
        assert!(t[2].notes[0].contains("no events scheduled: 1 early, 7 with no start traced"));
        let figs = figures(&cases).unwrap();
        let names: Vec<&str> = figs.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["kurt-utime-fig3-1", "kurt-utime-fig3-3"]);
    }
}
