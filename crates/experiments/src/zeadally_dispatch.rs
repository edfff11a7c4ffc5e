//! `zeadally-dispatch`: Zeadally's SVR4 measurements (Tables 1-4, Figs. 2-3) on this machine. An
//! event is raised every 10 ms on one CPU and a process waiting on another runs for it; the time from
//! the event to the process's first instruction is measured with a busy `soak` loop on the waiter's
//! CPU (every wake-up is a full context switch: Table 1's "context switch time") and with a `find`
//! walking the file system beside it (the kernel is often in a system call when the event comes:
//! Tables 3-4's "scheduling latency"), with the waiter in the real-time and in the time-sharing class.
//!
//! Table 1's interrupt latency is read from a kernel trace of the timer events taken during its
//! first case: from each hrtimer's programmed expiry to the clock reading its interrupt handler
//! took (the raiser's own 10 ms timer among them). Without tracefs the row stays "-" and says why.
//!
//! measure: [`ZeadallyDispatch::run`] (each case by `ZeadallyDispatch::case`); model: [`Model`];
//! tables: [`tables`]; figures: [`figures`].

use crate::published::{ZeadallyRow, ZEADALLY_T1, ZEADALLY_T2, ZEADALLY_T3, ZEADALLY_T4};
use punctual_bench::dispatch::{self, DispatchConfig, Event};
use punctual_bench::{kind, BenchError};
use punctual_load::{LoadReport, LoadSpec};
use punctual_result::{Failure, Fallback, ResultDoc, Series, Table};
use punctual_rt::{Policy, RtWant, SchedParams};
use punctual_session::{Ctx, Figure, LiveSpec, Measurement, Report};
use punctual_stats::Recorder;
use punctual_time::format_ns;
use std::sync::atomic::Ordering;

pub const NAME: &str = "zeadally-dispatch";

/// The waiter in the real-time class: the top priority.
const WAITER_RT: SchedParams = SchedParams {
    policy: Policy::Fifo,
    priority: 99,
};
/// The raiser must not wait behind the waiter's class: one step below the top.
const RAISER: SchedParams = SchedParams {
    policy: Policy::Fifo,
    priority: 98,
};

// ---------------------------------------------------------------------------------------------
// measure

#[derive(Clone, Debug)]
pub struct DispatchSettings {
    /// Per configuration (the paper: 10 s).
    pub duration_ns: u64,
    /// Between events (the paper: 10 ms).
    pub interval_ns: u64,
    /// Event mechanisms; the tables show the first, the document holds all.
    pub events: Vec<Event>,
}

impl DispatchSettings {
    /// The paper's 10 s runs, for each of the three event mechanisms: about 2 minutes.
    pub fn full() -> Self {
        DispatchSettings {
            duration_ns: 10_000_000_000,
            interval_ns: 10_000_000,
            events: Event::ALL.to_vec(),
        }
    }
    /// About 15 seconds.
    pub fn quick() -> Self {
        DispatchSettings {
            duration_ns: 3_000_000_000,
            interval_ns: 10_000_000,
            events: vec![Event::Eventfd],
        }
    }

    fn check(&self) -> Result<(), Failure> {
        if self.events.is_empty() || self.interval_ns == 0 || self.duration_ns < self.interval_ns {
            return Err(Failure::usage("zeadally-dispatch: give at least one event and a duration of at least one interval"));
        }
        Ok(())
    }
}

/// The waiter's class and what runs beside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Case {
    pub realtime: bool,
    pub find: bool,
}

/// Tables 1, 2, 3 and 4's second row, in that order.
pub const CASES: [Case; 4] = [
    Case {
        realtime: true,
        find: false,
    },
    Case {
        realtime: false,
        find: false,
    },
    Case {
        realtime: true,
        find: true,
    },
    Case {
        realtime: false,
        find: true,
    },
];

impl Case {
    pub fn label(self) -> String {
        format!(
            "{}, soak{}",
            if self.realtime {
                "real-time"
            } else {
                "time-sharing"
            },
            if self.find { " + find" } else { "" }
        )
    }
}

/// The experiment.
pub struct ZeadallyDispatch {
    pub quick: bool,
    pub settings: DispatchSettings,
    /// Where events are raised (the first CPU) and where the waiter waits (the last).
    pub raiser_cpu: usize,
    pub waiter_cpu: usize,
}

impl ZeadallyDispatch {
    pub fn new(opts: crate::Options) -> ZeadallyDispatch {
        let cpus = punctual_rt::online_cpus();
        ZeadallyDispatch {
            quick: opts.quick,
            settings: if opts.quick {
                DispatchSettings::quick()
            } else {
                DispatchSettings::full()
            },
            raiser_cpu: cpus[0],
            waiter_cpu: *cpus.last().expect("a CPU"),
        }
    }
}

/// One measured case with one event mechanism.
pub struct Measured {
    pub event: Event,
    pub case: Case,
    /// The load beside the waiter, and what each instance reported.
    pub load: LoadSpec,
    pub load_reports: Vec<LoadReport>,
    pub events: u64,
    pub latency: Recorder,
}

/// What `run` measured, as far as it got.
pub struct Outcome {
    pub measured: Vec<Measured>,
    /// Timer interrupt latency (every hrtimer expiry traced during Table 1's case), or why there
    /// is none.
    pub interrupt: Result<Recorder, String>,
    pub fallbacks: Vec<Fallback>,
    /// What the notes say of the machine: whether it is virtual, whether it can mount NFS.
    pub machine: Machine,
}

/// The facts Table 1's and Table 4's notes depend on, read when the experiment runs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Machine {
    pub virtualized: bool,
    /// NFS is in /proc/filesystems or a module for it is installed for this kernel.
    pub nfs: bool,
}

impl Machine {
    pub fn here(virtualized: bool) -> Machine {
        let fs = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
        let listed = fs
            .lines()
            .any(|l| matches!(l.split_whitespace().last(), Some("nfs" | "nfs4")));
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let module = std::path::Path::new("/lib/modules")
            .join(release.trim())
            .join("kernel/fs/nfs");
        Machine {
            virtualized,
            nfs: listed || module.is_dir(),
        }
    }
}

impl ZeadallyDispatch {
    /// One case: its load on the waiter's CPU for the case's duration.
    fn case(&self, ctx: &Ctx, event: Event, case: Case, out: &mut Outcome) -> Result<(), Failure> {
        let (s, waiter_cpu) = (&self.settings, self.waiter_cpu);
        let spec: LoadSpec = if case.find {
            format!("cpu:1@{waiter_cpu},find:1@{waiter_cpu}")
        } else {
            format!("cpu:1@{waiter_cpu}")
        }
        .parse()
        .map_err(Failure::usage)?;
        let mut loads = ctx.start_load(&spec)?;
        loads.wait_ready(std::time::Duration::from_secs(10), ctx.stop());
        let cfg = DispatchConfig {
            event,
            raiser_cpu: self.raiser_cpu,
            waiter_cpu,
            waiter: if case.realtime {
                WAITER_RT
            } else {
                SchedParams {
                    policy: Policy::Other,
                    priority: 0,
                }
            },
            raiser: RAISER,
            interval_ns: s.interval_ns,
            duration_ns: s.duration_ns,
        };
        let got = dispatch::run(&cfg, ctx.stop());
        let load_reports = loads.stop().into_iter().filter_map(|r| r.2).collect();
        let got = match got {
            Err(BenchError::Os { source, .. })
                if case.realtime && source.raw_os_error() == Some(libc::EPERM) =>
            {
                return Err(Failure::system(format!(
                    "the waiting process could not enter SCHED_FIFO. Fix: {}",
                    punctual_rt::rtgroup::refusal().fix
                )))
            }
            r => r?,
        };
        out.fallbacks.extend(got.raiser_fallback);
        out.measured.push(Measured {
            event,
            case,
            load: spec,
            load_reports,
            events: got.events,
            latency: got.latency,
        });
        Ok(())
    }
}

impl ZeadallyDispatch {
    /// Table 1's case with the timer events traced beside it, for the interrupt latency.
    fn traced_case(
        &self,
        ctx: &Ctx,
        event: Event,
        case: Case,
        out: &mut Outcome,
    ) -> Result<(), Failure> {
        let timer = punctual_trace::kernel::EventGroups {
            sched: false,
            irq: false,
            timer: true,
        };
        let progress = punctual_trace::record::RecordProgress::default();
        let (traced, measured) = std::thread::scope(|s| {
            let tracer = s.spawn(|| {
                // The recorder reads its buffers in the ordinary class, never above the waiter.
                let _ = punctual_rt::sched::set_current(SchedParams {
                    policy: Policy::Other,
                    priority: 0,
                });
                crate::traced::trace_for(ctx, timer, self.settings.duration_ns, &progress)
            });
            let measured = self.case(ctx, event, case, out);
            (tracer.join(), measured)
        });
        out.interrupt = match traced {
            Ok(Ok((_, a))) if a.expiries.measured > 0 => Ok(a.expiry_latency()),
            Ok(Ok(_)) => Err("the trace held no hrtimer start with its expiry".into()),
            Ok(Err(e)) => Err(format!("tracing the timer events: {}", e.message)),
            Err(_) => Err("the tracing thread panicked".into()),
        };
        measured
    }
}

impl Measurement for ZeadallyDispatch {
    type Outcome = Outcome;

    fn label(&self) -> String {
        NAME.into()
    }
    /// The real-time waiter's class. Nothing locked and no cpu_dma_latency request: SVR4 had
    /// neither (and the old experiment asked for neither).
    fn wants(&self) -> Option<RtWant> {
        Some(RtWant {
            policy: WAITER_RT.policy,
            priority: WAITER_RT.priority,
            mlock: false,
            dma_latency_us: None,
        })
    }
    fn live(&self) -> Option<LiveSpec> {
        let runs = (self.settings.events.len() * CASES.len()) as u64;
        Some(LiveSpec::timed(
            self.settings.duration_ns.saturating_mul(runs),
            String::new,
        ))
    }
    fn run(&mut self, ctx: &Ctx) -> Result<Outcome, Failure> {
        self.settings.check()?;
        crate::common::needs_realtime(ctx, NAME, "real-time dispatch beside time sharing")?;
        let mut out = Outcome {
            measured: Vec::new(),
            interrupt: Err("not measured".into()),
            fallbacks: Vec::new(),
            machine: Machine::here(ctx.host().virtualized),
        };
        for event in self.settings.events.clone() {
            for case in CASES {
                if ctx.stop().load(Ordering::Relaxed) {
                    return Ok(out);
                }
                ctx.step(format!("{} {}", event.name(), case.label()));
                if out.measured.is_empty() {
                    self.traced_case(ctx, event, case, &mut out)?;
                } else {
                    self.case(ctx, event, case, &mut out)?;
                }
            }
        }
        Ok(out)
    }
    fn report(&self, out: Outcome, ctx: &Ctx, doc: &mut ResultDoc) -> Result<Report, Failure> {
        crate::common::mark(doc, NAME, self.quick);
        ctx.runtime_fallbacks(doc, out.fallbacks.iter());
        let s = &self.settings;
        let st = &mut doc.settings.extra;
        st.insert("raiser_cpu".into(), self.raiser_cpu.into());
        st.insert("waiter_cpu".into(), self.waiter_cpu.into());
        st.insert("interval_ns".into(), s.interval_ns.into());
        st.insert("duration_ns".into(), s.duration_ns.into());
        series(doc, &out, self.waiter_cpu);
        if let Ok(r) = &out.interrupt {
            doc.series.push(
                Series::from_recorder(
                    "timer interrupt latency",
                    punctual_result::doc::kind::TIMER_EXPIRY_LATENCY,
                    None,
                    r,
                )
                .with(
                    "source",
                    "every hrtimer expiry traced during the first case (hrtimer_start to hrtimer_expire_entry)",
                ),
            );
        }
        let model = Model::of(&out, self);
        Ok(Report {
            tables: tables(&model),
            figures: figures(&out, s.events[0])?,
            ..Report::default()
        })
    }
}

fn series(doc: &mut ResultDoc, out: &Outcome, waiter_cpu: usize) {
    for m in &out.measured {
        doc.series.push(
            Series::from_recorder(
                format!("{} {}", m.event.name(), m.case.label()),
                kind::DISPATCH,
                Some(waiter_cpu),
                &m.latency,
            )
            .with("event", m.event.name())
            .with(
                "waiter_class",
                if m.case.realtime { "fifo 99" } else { "other" },
            )
            .with("load", m.load.to_string())
            .with("events", m.events)
            .with(
                "load_reports",
                serde_json::to_value(&m.load_reports).unwrap_or_default(),
            ),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// model

/// Zeadally's five columns: minimum, median, maximum, mean, standard deviation (ns), and how many
/// dispatches they summarise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Five {
    pub count: u64,
    pub min: u64,
    pub median: u64,
    pub max: u64,
    pub mean: u64,
    pub stddev: u64,
}

impl Five {
    pub fn of(r: &Recorder) -> Five {
        let s = r.summary();
        Five {
            count: r.count(),
            min: s.min,
            median: s.median,
            max: s.max,
            mean: s.mean,
            stddev: s.stddev,
        }
    }
}

/// The numbers of the tables.
pub struct Model {
    /// The event mechanism of Tables 1-4.
    pub main: Event,
    /// Every (event, case) measured.
    pub results: Vec<(Event, Case, Five)>,
    /// The by-mechanism table, when more than one mechanism was asked for.
    pub by_event: bool,
    pub raiser_cpu: usize,
    pub waiter_cpu: usize,
    pub interval_ns: u64,
    pub duration_ns: u64,
    /// Table 1's interrupt latency, or why there is none.
    pub interrupt: Result<Five, String>,
    pub machine: Machine,
}

impl Model {
    pub fn of(out: &Outcome, e: &ZeadallyDispatch) -> Model {
        Model {
            main: e.settings.events[0],
            results: out
                .measured
                .iter()
                .map(|m| (m.event, m.case, Five::of(&m.latency)))
                .collect(),
            by_event: e.settings.events.len() > 1,
            raiser_cpu: e.raiser_cpu,
            waiter_cpu: e.waiter_cpu,
            interval_ns: e.settings.interval_ns,
            duration_ns: e.settings.duration_ns,
            interrupt: match &out.interrupt {
                Ok(r) if r.count() > 0 => Ok(Five::of(r)),
                Ok(_) => Err("no expiry measured".into()),
                Err(why) => Err(why.clone()),
            },
            machine: out.machine,
        }
    }

    /// The main mechanism's figures for a case; `None` when no dispatch was seen.
    fn get(&self, c: Case) -> Option<Five> {
        self.results
            .iter()
            .find(|(e, k, f)| *e == self.main && *k == c && f.count > 0)
            .map(|r| r.2)
    }

    fn here(&self, c: Case) -> (String, Option<Five>) {
        (
            format!(
                "Process dispatch, {}, {} (here)",
                self.main.name(),
                c.label()
            ),
            self.get(c),
        )
    }
}

// ---------------------------------------------------------------------------------------------
// tables and figures

fn u1(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

/// Minimum, median, maximum, mean, standard deviation in us.
fn five(f: &Five) -> [String; 5] {
    [
        u1(f.min),
        u1(f.median),
        u1(f.max),
        u1(f.mean),
        format!("{:.2}", f.stddev as f64 / 1000.0),
    ]
}

/// One of Zeadally's tables: the published rows, a rule, this machine's rows.
fn table(title: &str, published: &[ZeadallyRow], ours: &[(String, Option<Five>)]) -> Table {
    let mut t = Table::new(&[
        "",
        "Minimum",
        "Median",
        "Maximum",
        "Mean",
        "Standard Deviation",
    ])
    .titled(title);
    for r in published {
        t.row(
            std::iter::once(format!("{} (us)", r.label))
                .chain(r.values.iter().map(|v| v.to_string())),
        );
    }
    t.rule();
    for (label, f) in ours {
        match f {
            Some(f) => t.row(std::iter::once(format!("{label} (us)")).chain(five(f))),
            None => t.row(
                std::iter::once(format!("{label} (us)")).chain(std::iter::repeat_n("-".into(), 5)),
            ),
        };
    }
    t
}

/// Tables 1-4 with the main event mechanism, then every mechanism when there were several.
pub fn tables(m: &Model) -> Vec<Table> {
    let mut t1 = table(
        "Zeadally Table 1: test process in real-time class",
        &ZEADALLY_T1,
        &[
            (
                "Interrupt latency, timer (here)".into(),
                m.interrupt.as_ref().ok().copied(),
            ),
            m.here(CASES[0]),
        ],
    );
    let _ = match &m.interrupt {
        Ok(f) => t1.note(format!(
            "Interrupt latency: {} hrtimer expiries traced during the first case, from the expiry each timer was programmed for \
             (hrtimer_start) to the clock reading its interrupt handler took (hrtimer_expire_entry); the timer interrupt{}. \
             A device interrupt cannot be raised on purpose here.",
            f.count,
            if m.machine.virtualized {
                ", delivered through this virtual machine's emulated local APIC"
            } else {
                " of the local APIC"
            }
        )),
        Err(why) => t1.note(format!(
            "Interrupt latency: not measured ({why}); it is read from a kernel trace of the timer events (needs root and tracefs)."
        )),
    };
    let t2 = table(
        "Zeadally Table 2: test process in time-sharing class",
        &ZEADALLY_T2,
        &[m.here(CASES[1])],
    );
    let t3 = table(
        "Zeadally Table 3: scheduling latency, real-time class, with find",
        &ZEADALLY_T3,
        &[m.here(CASES[2])],
    );
    let mut t4 = table(
        "Zeadally Table 4: preemption (real-time) versus non-preemption (time-sharing), with find",
        &ZEADALLY_T4,
        &[m.here(CASES[2]), m.here(CASES[3])],
    );
    t4.note("The paper's second row is labelled SVR4.0 in its table but is SVR4.2 with preemption points off (its caption and text).");
    t4.note(if m.machine.nfs {
        "Zeadally's find walked an NFS file system over Ethernet, so the network card's interrupts came with it. Here the find \
         walks the local disk (this kernel has NFS, but no server is set up for the experiment), whose interrupts and BLOCK \
         softirqs stand in for the network's."
    } else {
        "Zeadally's find walked an NFS file system over Ethernet, so the network card's interrupts came with it. Not reproducible \
         here: this kernel has no NFS (not in /proc/filesystems, and no module for it), so the find walks the local disk, whose \
         interrupts and BLOCK softirqs stand in for the network's."
    });
    t4.note(format!(
        "Here: an event every {} raised on CPU {}, the waiting process on CPU {} with a busy loop (soak, time-sharing) \
         and, where named, a find walking /usr; {} per case. Latency runs from just before the event is raised to the waiter's first \
         instruction after its wait returns.",
        format_ns(m.interval_ns),
        m.raiser_cpu,
        m.waiter_cpu,
        format_ns(m.duration_ns)
    ));
    let mut tables = vec![t1, t2, t3, t4];
    if m.by_event {
        let mut t = Table::new(&[
            "Event",
            "case",
            "Minimum",
            "Median",
            "Maximum",
            "Mean",
            "Standard Deviation",
        ])
        .titled("Process dispatch by event mechanism (us)");
        for (e, c, f) in &m.results {
            t.row([e.name().to_string(), c.label()].into_iter().chain(five(f)));
        }
        tables.push(t);
    }
    tables
}

/// Figs. 2-3: the main mechanism's cases on the exponential percentile axis.
pub fn figures(out: &Outcome, main: Event) -> Result<Vec<Figure>, Failure> {
    let lines: Vec<(String, &Recorder)> = out
        .measured
        .iter()
        .filter(|m| m.event == main && m.latency.count() > 0)
        .map(|m| (m.case.label(), &m.latency))
        .collect();
    let svg = punctual_plot::percentile_plot(
        "Zeadally Figs. 2-3: process dispatch latency (exponential percentile axis)",
        &lines,
    );
    Ok(vec![crate::common::figure("zeadally-dispatch", svg)?])
}
