//! `zeadally-dispatch`: Zeadally's SVR4 measurements (Tables 1-4, Figs. 2-3) on this machine. An
//! event is raised every 10 ms on one CPU and a process waiting on another runs for it; the time from
//! the event to the process's first instruction is measured with a busy `soak` loop on the waiter's
//! CPU (every wake-up is a full context switch: Table 1's "context switch time") and with a `find`
//! walking the file system beside it (the kernel is often in a system call when the event comes:
//! Tables 3-4's "scheduling latency"), with the waiter in the real-time and in the time-sharing class.

use super::published::{ZeadallyRow, ZEADALLY_T1, ZEADALLY_T2, ZEADALLY_T3, ZEADALLY_T4};
use super::{add_fallback, close_doc, figure, new_doc};
use crate::dispatch::{self, DispatchConfig, Event};
use crate::kind;
use punctual_load::{LoadSpec, Loads};
use punctual_result::experiment::{Context, Experiment, Report};
use punctual_result::{Failure, Series, Table};
use punctual_rt::{Policy, SchedParams};
use punctual_stats::Recorder;
use punctual_time::format_ns;
use std::sync::atomic::Ordering;

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
}

#[derive(Default)]
pub struct ZeadallyDispatch {
    pub settings: Option<DispatchSettings>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct Case {
    realtime: bool,
    find: bool,
}

const CASES: [Case; 4] = [
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
    fn label(self) -> String {
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

fn u1(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

/// Minimum, median, maximum, mean, standard deviation in us.
fn five(r: &Recorder) -> [String; 5] {
    let s = r.summary();
    [
        u1(s.min),
        u1(s.median),
        u1(s.max),
        u1(s.mean),
        format!("{:.2}", s.stddev as f64 / 1000.0),
    ]
}

fn table(title: &str, published: &[ZeadallyRow], ours: &[(String, Option<&Recorder>)]) -> Table {
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
    for (label, rec) in ours {
        match rec {
            Some(r) if r.count() > 0 => {
                t.row(std::iter::once(format!("{label} (us)")).chain(five(r)))
            }
            _ => t.row([
                format!("{label} (us)"),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ]),
        };
    }
    t
}

impl Experiment for ZeadallyDispatch {
    fn name(&self) -> &'static str {
        "zeadally-dispatch"
    }
    fn reproduces(&self) -> &'static str {
        "Zeadally, SVR4.0 vs SVR4.2, Tables 1-4 and Figs. 2-3: process dispatch latency, real-time vs time-sharing, with soak and find"
    }
    fn duration(&self) -> &'static str {
        "full about 2 min (10 s per case, 4 cases, eventfd, pipe and signal); --quick about 15 s"
    }

    fn run(&self, ctx: &Context) -> Result<Report, Failure> {
        let s = self.settings.clone().unwrap_or_else(|| {
            if ctx.quick {
                DispatchSettings::quick()
            } else {
                DispatchSettings::full()
            }
        });
        if s.events.is_empty() || s.interval_ns == 0 || s.duration_ns < s.interval_ns {
            return Err(Failure::usage("zeadally-dispatch: give at least one event and a duration of at least one interval"));
        }
        let cpus = punctual_rt::online_cpus();
        let (raiser_cpu, waiter_cpu) = (cpus[0], *cpus.last().expect("a CPU"));
        let mut doc = new_doc(ctx, self.name(), punctual_result::now_rfc3339());
        let st = &mut doc.settings.extra;
        st.insert("raiser_cpu".into(), raiser_cpu.into());
        st.insert("waiter_cpu".into(), waiter_cpu.into());
        st.insert("interval_ns".into(), s.interval_ns.into());
        st.insert("duration_ns".into(), s.duration_ns.into());
        let mut results: Vec<(Event, Case, Recorder)> = Vec::new();
        'all: for &event in &s.events {
            for case in CASES {
                if ctx.stop.load(Ordering::Relaxed) {
                    break 'all;
                }
                let spec: LoadSpec = if case.find {
                    format!("cpu:1@{waiter_cpu},find:1@{waiter_cpu}")
                } else {
                    format!("cpu:1@{waiter_cpu}")
                }
                .parse()
                .map_err(Failure::usage)?;
                let mut loads =
                    Loads::start(&spec, &ctx.exe).map_err(|e| Failure::system(e.to_string()))?;
                loads.wait_ready(std::time::Duration::from_secs(10));
                let cfg = DispatchConfig {
                    event,
                    raiser_cpu,
                    waiter_cpu,
                    waiter: if case.realtime {
                        SchedParams {
                            policy: Policy::Fifo,
                            priority: 99,
                        }
                    } else {
                        SchedParams {
                            policy: Policy::Other,
                            priority: 0,
                        }
                    },
                    raiser: SchedParams {
                        policy: Policy::Fifo,
                        priority: 98,
                    },
                    interval_ns: s.interval_ns,
                    duration_ns: s.duration_ns,
                };
                let out = dispatch::run(&cfg, &ctx.stop);
                let reports: Vec<_> = loads.stop().into_iter().filter_map(|r| r.2).collect();
                let out = match out {
                    Err(crate::BenchError::Os { source, .. }) if case.realtime && source.raw_os_error() == Some(libc::EPERM) => {
                        return Err(Failure::system(
                            "the waiting process could not enter SCHED_FIFO; run as root or grant CAP_SYS_NICE".to_string(),
                        ))
                    }
                    r => r?,
                };
                add_fallback(&mut doc, out.raiser_fallback.as_ref());
                doc.series.push(
                    Series::from_recorder(
                        format!("{} {}", event.name(), case.label()),
                        kind::DISPATCH,
                        Some(waiter_cpu),
                        &out.latency,
                    )
                    .with("event", event.name())
                    .with(
                        "waiter_class",
                        if case.realtime { "fifo 99" } else { "other" },
                    )
                    .with("load", spec.to_string())
                    .with("events", out.events)
                    .with(
                        "load_reports",
                        serde_json::to_value(&reports).unwrap_or_default(),
                    ),
                );
                results.push((event, case, out.latency));
            }
        }
        close_doc(ctx, &mut doc);

        let main = s.events[0];
        let get = |c: Case| {
            results
                .iter()
                .find(|(e, k, _)| *e == main && *k == c)
                .map(|r| &r.2)
        };
        let here = |c: Case| format!("Process dispatch, {}, {} (here)", main.name(), c.label());
        let mut t1 = table(
            "Zeadally Table 1: test process in real-time class",
            &ZEADALLY_T1,
            &[
                ("Interrupt latency (here)".into(), None),
                (here(CASES[0]), get(CASES[0])),
            ],
        );
        t1.note("Interrupt latency is not visible from user space (no hook at the handler's first instruction); `punctual bench gaps` shows what interrupts cost a running loop.");
        let t2 = table(
            "Zeadally Table 2: test process in time-sharing class",
            &ZEADALLY_T2,
            &[(here(CASES[1]), get(CASES[1]))],
        );
        let t3 = table(
            "Zeadally Table 3: scheduling latency, real-time class, with find",
            &ZEADALLY_T3,
            &[(here(CASES[2]), get(CASES[2]))],
        );
        let mut t4 = table(
            "Zeadally Table 4: preemption (real-time) versus non-preemption (time-sharing), with find",
            &ZEADALLY_T4,
            &[(here(CASES[2]), get(CASES[2])), (here(CASES[3]), get(CASES[3]))],
        );
        t4.note("The paper's second row is labelled SVR4.0 in its table but is SVR4.2 with preemption points off (its caption and text).");
        t4.note(format!(
            "Here: an event every {} raised on CPU {raiser_cpu}, the waiting process on CPU {waiter_cpu} with a busy loop (soak, time-sharing) \
             and, where named, a find walking /usr; {} per case. Latency runs from just before the event is raised to the waiter's first \
             instruction after its wait returns.",
            format_ns(s.interval_ns),
            format_ns(s.duration_ns)
        ));
        let mut tables = vec![t1, t2, t3, t4];
        if s.events.len() > 1 {
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
            for (e, c, r) in &results {
                t.row([e.name().to_string(), c.label()].into_iter().chain(five(r)));
            }
            tables.push(t);
        }
        let lines: Vec<(String, &Recorder)> = results
            .iter()
            .filter(|(e, _, r)| *e == main && r.count() > 0)
            .map(|(_, c, r)| (c.label(), r))
            .collect();
        let fig = figure(
            "zeadally-dispatch",
            punctual_plot::percentile_plot(
                "Zeadally Figs. 2-3: process dispatch latency (exponential percentile axis)",
                &lines,
            ),
        )?;
        Ok(Report {
            tables,
            doc,
            figures: vec![fig],
        })
    }
}
