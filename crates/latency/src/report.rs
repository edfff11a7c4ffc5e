//! What `punctual latency` puts in its result document and shows: settings, one series per
//! thread (and the total), and the table.

use crate::{Config, Mode, Outcome, Stop};
use punctual_result::{doc::kind, ResultDoc, Series, Table};
use punctual_time::{format_ns, MarginPolicy};

/// Settings and series of a latency run; returns how many samples `--samples` lost.
pub fn fill_latency_doc(
    doc: &mut ResultDoc,
    cfg: &Config,
    outcome: &Outcome,
    samples: bool,
) -> u64 {
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
    if samples {
        s.insert("samples_written".into(), outcome.samples_written.into());
        s.insert("samples_dropped".into(), dropped.into());
    }
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
    dropped
}

/// The table: one row per thread, and the total.
pub fn latency_table(doc: &ResultDoc, cfg: &Config, outcome: &Outcome) -> Table {
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
