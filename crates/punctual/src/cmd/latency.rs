//! `punctual latency`: cyclictest-class timer wake-up latency.

use crate::cli::LatencyArgs;
use crate::session::{samples_poll, show, validate_rt, Exports, Live, Session};
use punctual_latency::{Config, Mode, Progress, Stop, MAX_THREADS};
use punctual_result::export::{Csv, CyclictestHistogram, Json};
use punctual_result::{doc::kind, Failure, Output, Series, Table};
use punctual_time::{format_ns, MarginPolicy};
use std::sync::Arc;

const DEFAULT_DURATION: u64 = 10_000_000_000;
const MIN_INTERVAL: u64 = 10_000;

/// Everything checked before the system is touched.
struct Plan {
    cfg: Config,
    exports: Exports,
}

fn validate(a: &LatencyArgs) -> Result<Plan, Failure> {
    validate_rt(&a.rt)?;
    let cpus =
        a.rt.cpus()
            .map_err(Failure::usage)?
            .unwrap_or_else(punctual_rt::online_cpus);
    let threads = a.threads.unwrap_or(cpus.len());
    if threads == 0 || threads > MAX_THREADS {
        return Err(Failure::usage(format!(
            "-t/--threads {threads}: give 1 to {MAX_THREADS} threads"
        )));
    }
    if a.interval == 0 {
        return Err(Failure::usage(
            "-i/--interval must be more than zero, e.g. 1ms",
        ));
    }
    if a.interval < MIN_INTERVAL && !a.force {
        return Err(Failure::usage(format!(
            "-i/--interval {} is under 10us, where the wake-up itself takes most of the period; \
             use 10us or more, or pass --force",
            format_ns(a.interval)
        )));
    }
    let stop = match (a.duration, a.loops) {
        (_, Some(0)) => return Err(Failure::usage("-l/--loops must be at least 1")),
        (_, Some(l)) => Stop::Loops(l),
        (Some(0), _) => {
            return Err(Failure::usage(
                "-D/--duration must be more than zero, e.g. 10s",
            ))
        }
        (Some(d), None) => Stop::Duration(d),
        (None, None) => Stop::Duration(DEFAULT_DURATION),
    };
    let margin = match (a.mode, a.spin_margin) {
        (Mode::Hybrid, Some(MarginPolicy::Fixed(m))) if m >= a.interval => {
            return Err(Failure::usage(format!(
                "--spin-margin {} must be shorter than the interval {}",
                format_ns(m),
                format_ns(a.interval)
            )))
        }
        (Mode::Hybrid, m) => m.unwrap_or(MarginPolicy::Auto),
        (_, Some(_)) => {
            return Err(Failure::usage(
                "--spin-margin applies only to --mode hybrid; add --mode hybrid or drop it",
            ))
        }
        (_, None) => MarginPolicy::Auto,
    };
    let mut exports = Exports::default();
    exports.add("json", a.out.json.as_ref(), Json)?;
    exports.add("csv", a.out.csv.as_ref(), Csv)?;
    exports.add(
        "hist",
        a.hist.as_ref(),
        CyclictestHistogram {
            buckets: a.hist_buckets as usize,
        },
    )?;
    if let Some(s) = &a.samples {
        s.check_writable()
            .map_err(|e| Failure::usage(format!("--samples: {e}")))?;
        if s.is_stdout() && !exports.stdout_free() {
            return Err(Failure::usage(
                "--samples -: only one output can go to stdout",
            ));
        }
    }
    let cfg = Config {
        threads: (0..threads).map(|i| Some(cpus[i % cpus.len()])).collect(),
        interval: a.interval,
        stop,
        clock: a.clock,
        mode: a.mode,
        margin,
        policy: a.rt.policy,
        priority: a.rt.priority(),
        timer_slack_ns: None,
    };
    Ok(Plan { cfg, exports })
}

/// A samples destination: a temporary file renamed into place at the end, or stdout.
enum SamplesOut {
    File(tempfile::NamedTempFile, std::path::PathBuf),
    Stdout,
}

pub fn run(a: LatencyArgs) -> anyhow::Result<i32> {
    let Plan { mut cfg, exports } = validate(&a)?;
    let session = Session::begin(&a.rt)?;
    cfg.policy = session.plan.policy;
    cfg.priority = session.plan.priority;
    cfg.timer_slack_ns = session.plan.timer_slack_ns;

    let (samples_sink, samples_out): (Option<Box<dyn std::io::Write + Send>>, Option<SamplesOut>) =
        match &a.samples {
            Some(Output::File(p)) => {
                let dir = p
                    .parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .unwrap_or(std::path::Path::new("."));
                let tmp = tempfile::Builder::new()
                    .prefix(".punctual-samples-")
                    .tempfile_in(dir)?;
                let f = tmp.as_file().try_clone()?;
                (Some(Box::new(f)), Some(SamplesOut::File(tmp, p.clone())))
            }
            Some(Output::Stdout) => (Some(Box::new(std::io::stdout())), Some(SamplesOut::Stdout)),
            None => (None, None),
        };

    let load = a.load.clone().unwrap_or_default();
    let mut loads = punctual_load::Loads::start(&load, &super::own_exe()?)
        .map_err(|e| Failure::system(e.to_string()))?;
    let ready = loads.wait_ready(std::time::Duration::from_secs(5));
    if ready < load.instances() as usize {
        eprintln!(
            "punctual: {ready} of {} load processes ready after 5 s; measuring anyway",
            load.instances()
        );
    }
    let progress: Arc<[Progress]> = (0..cfg.threads.len())
        .map(|_| Progress::default())
        .collect();
    let expected = match cfg.stop {
        Stop::Duration(d) => d,
        Stop::Loops(l) => l.saturating_mul(cfg.interval),
    };
    let live = Live::start(
        format!("latency {}", cfg.mode.name()),
        Some(expected / 1_000_000),
        samples_poll(progress.clone()),
    );
    let result = punctual_latency::run(&cfg, &session.stop, samples_sink, Some(&progress));
    live.finish();
    let load_reports = loads.stop();
    let outcome = result?;

    let mut doc = session.new_doc();
    session.add_runtime_fallbacks(
        &mut doc,
        outcome.threads.iter().filter_map(|t| t.fallback.as_ref()),
    );
    let s = &mut doc.settings.extra;
    s.insert("mode".into(), cfg.mode.name().into());
    s.insert("clock".into(), cfg.clock.name().into());
    s.insert("interval_ns".into(), cfg.interval.into());
    s.insert("threads".into(), cfg.threads.len().into());
    match cfg.stop {
        Stop::Duration(d) => s.insert("duration_ns".into(), d.into()),
        Stop::Loops(l) => s.insert("loops".into(), l.into()),
    };
    if cfg.mode == Mode::Hybrid {
        let m = match cfg.margin {
            MarginPolicy::Auto => serde_json::Value::from("auto"),
            MarginPolicy::Fixed(ns) => ns.into(),
        };
        s.insert("spin_margin".into(), m);
    }
    let dropped: u64 = outcome.threads.iter().map(|t| t.dropped_samples).sum();
    if a.samples.is_some() {
        s.insert("samples_written".into(), outcome.samples_written.into());
        s.insert("samples_dropped".into(), dropped.into());
        if dropped > 0 {
            eprintln!("punctual: {dropped} samples could not be written in time and are missing from --samples (the statistics include them)");
        }
    }
    crate::session::record_load_reports(&mut doc, &load, &load_reports)?;
    for t in &outcome.threads {
        let mut series = Series::from_recorder(
            format!("thread {}", t.index),
            kind::WAKEUP_LATENCY,
            t.cpu,
            &t.recorder,
        )
        .with("cpu_ns", t.cpu_ns)
        .with("duration_ns", t.wall_ns);
        if let Some(m) = t.margin_ns {
            series = series.with("spin_margin_ns", m);
        }
        if let Some(d) = t.drift_ns {
            series = series.with("drift_ns", d);
        }
        doc.series.push(series);
    }
    if outcome.threads.len() > 1 {
        doc.series.push(Series::from_recorder(
            "total",
            kind::WAKEUP_LATENCY,
            None,
            &outcome.merged(),
        ));
    }
    let code = session.close(&mut doc, a.out.fail_above);

    if let Some(SamplesOut::File(tmp, path)) = samples_out {
        tmp.persist(&path)
            .map_err(|e| Failure::system(format!("writing --samples {}: {e}", path.display())))?;
    }
    exports.write(&doc)?;
    show(&exports, &render(&doc, &cfg, &outcome).render());
    if session.interrupted() {
        eprintln!("punctual: interrupted; partial results written");
    }
    Ok(code)
}

fn render(
    doc: &punctual_result::ResultDoc,
    cfg: &Config,
    outcome: &punctual_latency::Outcome,
) -> Table {
    let policy = doc.settings.policy.clone().unwrap_or_default();
    let title = format!(
        "Wake-up latency: mode {}, interval {}, {} {}, mlock {}, dma latency {}, clock {}",
        cfg.mode.name(),
        format_ns(cfg.interval),
        policy,
        doc.settings.priority.unwrap_or(0),
        if doc.settings.mlock == Some(true) {
            "on"
        } else {
            "off"
        },
        doc.settings
            .dma_latency_us
            .map(|u| format!("{u} us"))
            .unwrap_or_else(|| "off".into()),
        cfg.clock.name()
    );
    let mut header = vec![
        "thread",
        "cpu",
        "samples",
        "min",
        "p50",
        "p99",
        "p99.9",
        "max",
        "mean",
        "missed",
        "woke late",
        "cpu use",
    ];
    match cfg.mode {
        Mode::Hybrid => header.push("margin"),
        Mode::Rel => header.push("drift"),
        _ => {}
    }
    let mut t = Table::new(&header).titled(title);
    for (i, s) in doc.series.iter().enumerate() {
        if s.name == "total" {
            t.rule();
        }
        let m = &s.summary;
        let thread = outcome.threads.get(i).filter(|_| s.name != "total");
        let cpu_use = thread
            .filter(|t| t.wall_ns > 0)
            .map(|t| format!("{:.1} %", t.cpu_ns as f64 * 100.0 / t.wall_ns as f64))
            .unwrap_or_default();
        let mut row = vec![
            s.name.clone(),
            s.cpu.map(|c| c.to_string()).unwrap_or_default(),
            m.count.to_string(),
            format_ns(m.min),
            format_ns(m.percentiles.p50),
            format_ns(m.percentiles.p99),
            format_ns(m.percentiles.p99_9),
            format_ns(m.max),
            format_ns(m.mean),
            m.missed_periods.to_string(),
            m.woke_late.to_string(),
            cpu_use,
        ];
        match cfg.mode {
            Mode::Hybrid => row.push(
                thread
                    .and_then(|t| t.margin_ns)
                    .map(format_ns)
                    .unwrap_or_default(),
            ),
            Mode::Rel => row.push(
                thread
                    .and_then(|t| t.drift_ns)
                    .map(|d| {
                        if d < 0 {
                            format!("-{}", format_ns(d.unsigned_abs()))
                        } else {
                            format_ns(d as u64)
                        }
                    })
                    .unwrap_or_default(),
            ),
            _ => {}
        }
        t.row(row);
    }
    t.note("latency: from the intended release time to the thread running again (ns exact, percentiles within 0.1 %).");
    if cfg.mode == Mode::Rel {
        t.note("drift: how far the last wake-up was from the absolute schedule; relative sleeps accumulate it.");
    }
    t
}
