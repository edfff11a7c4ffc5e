//! `kurt-utime`: the KURT thesis' evaluation of UTIME (section 3.2) on this machine, read from kernel
//! traces of the interrupt and timer events.
//!
//! - **Fig. 3.1**, the timer interrupt's processing time: the thesis stamped the timer ISR's entry
//!   and exit; here the x86 local timer vector's entry and exit events, once with no event of ours
//!   scheduled and once with a thread sleeping 100 us at a time (the thesis' "several events
//!   scheduled at microsecond resolution").
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
    ("standard Linux 2.0 (no UTIME)", "about 1", "5"),
    ("UTIME, with or without microsecond events", "about 15", "-"),
];
/// The thesis' Fig. 3.3: most timer functions ran within this many us of their scheduled time.
pub const FIG_3_3_MOST_WITHIN_US: u64 = 50;

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
        }
    }
}

impl Measurement for KurtUtime {
    type Outcome = Vec<Case>;

    fn label(&self) -> String {
        NAME.into()
    }
    fn wants(&self) -> Option<RtWant> {
        Some(crate::traced::WANTS)
    }
    fn live(&self) -> Option<LiveSpec> {
        Some(phases_live(&self.progress, self.secs, CASES.len()))
    }
    fn run(&mut self, ctx: &Ctx) -> Result<Vec<Case>, Failure> {
        let mut cases = Vec::new();
        for (i, label) in CASES.into_iter().enumerate() {
            if ctx.stop().load(Ordering::Relaxed) {
                break;
            }
            ctx.step(label.to_string());
            cases.push(Case::of(label, &self.trace_case(ctx, i == 1)?));
        }
        Ok(cases)
    }
    fn report(&self, cases: Vec<Case>, _ctx: &Ctx, doc: &mut ResultDoc) -> Result<Report, Failure> {
        crate::mark(doc, NAME, self.quick);
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
        doc.extra.insert(
            "case_duration_ns".into(),
            (self.secs * 1_000_000_000).into(),
        );
        Ok(Report {
            tables: tables(&Model::of(&cases, self.secs)),
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
                    CaseRow {
                        label: c.label.to_string(),
                        handler: row(&c.handler),
                        expiry: row(&c.expiry),
                        within_50us: within,
                        early: c.expiries.early,
                        unknown: c.expiries.unknown,
                    }
                })
                .collect(),
        }
    }
}

fn cells(r: Option<Row>) -> Vec<String> {
    match r {
        Some([n, p50, p90, p99, max]) => std::iter::once(crate::group(n))
            .chain([p50, p90, p99, max].map(|ns| crate::us2(ns as f64)))
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
    t3.row(
        [
            "thesis: UTIME, microsecond events",
            "-",
            "-",
            "-",
            "-",
            "-",
            "most",
        ]
        .map(String::from),
    );
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
         (hrtimer_expire_entry), every timer on both CPUs; {} s traced per case. Not measured: {}.",
        m.secs,
        unmeasured.join("; ")
    ));
    vec![t1, t3]
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
        figs.push(crate::figure(
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
            },
            Case {
                label: CASES[1],
                handler: Recorder::new(),
                expiry: Recorder::new(),
                expiries: Expiries::default(),
            },
        ];
        let t = tables(&Model::of(&cases, 2));
        assert_eq!(t.len(), 2);
        assert_eq!(
            t[0].rows[0],
            [
                "thesis: standard Linux 2.0 (no UTIME)",
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
        assert_eq!(t[1].rows[0][6], "most");
        let here = &t[1].rows[2];
        assert_eq!((here[1].as_str(), here[6].as_str()), ("4", "75.00 %"));
        assert!(t[1].notes[0].contains("no events scheduled: 1 early, 7 with no start traced"));
        let figs = figures(&cases).unwrap();
        let names: Vec<&str> = figs.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["kurt-utime-fig3-1", "kurt-utime-fig3-3"]);
    }
}
