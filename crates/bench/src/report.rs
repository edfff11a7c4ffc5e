//! What the micro-measurements put in their result documents and show: settings, SPEC section 3
//! series, and one table each (gaps adds the interrupts it saw).

use crate::{ctxsw, dispatch, gaps, kind, memcpy, trap, tsc};
use punctual_latency::alarms::{AlarmConfig, AlarmOutcome};
use punctual_result::{ResultDoc, Series, Table};
use punctual_time::format_ns;

fn cycles_note(cal: &tsc::Calibration) -> String {
    if tsc::HARDWARE {
        format!(
            "cycles are time-stamp-counter cycles at {:.3} GHz",
            cal.hz() / 1e9
        )
    } else {
        "no cycle counter here: cycles are not shown".into()
    }
}

fn cycles(ns: f64, cal: &tsc::Calibration) -> String {
    if tsc::HARDWARE {
        format!("{:.0}", ns / cal.ns_per_tick)
    } else {
        "-".into()
    }
}

fn class(doc: &ResultDoc) -> String {
    format!(
        "{} {}",
        doc.settings.policy.clone().unwrap_or_default(),
        doc.settings.priority.unwrap_or(0)
    )
}

pub fn ctxsw(
    doc: &mut ResultDoc,
    cfg: &ctxsw::CtxswConfig,
    out: &ctxsw::CtxswOutcome,
    cal: &tsc::Calibration,
) -> Table {
    let (cpu, channel) = (cfg.cpu, cfg.channel.name());
    let s = &mut doc.settings.extra;
    s.insert("channel".into(), channel.into());
    s.insert("cpu".into(), cpu.into());
    s.insert("duration_ns".into(), cfg.duration_ns.into());
    doc.series.push(
        Series::from_recorder(
            format!("context switch ({channel})"),
            kind::CONTEXT_SWITCH,
            Some(cpu),
            &out.per_switch,
        )
        .with("round_trips", out.round_trips)
        .with("mean_ps", (out.mean_switch_ns() * 1000.0).round() as u64),
    );
    let sm = out.per_switch.summary();
    let mut t = Table::new(&[
        "channel",
        "round trips",
        "per switch",
        "p50",
        "p99",
        "max",
        "round trip",
        "cycles",
    ])
    .titled(format!(
        "Context switch: two processes on CPU {cpu} ({}), time per switch over batches of {} round trips",
        class(doc),
        cfg.per_batch
    ));
    t.row([
        channel.to_string(),
        out.round_trips.to_string(),
        format!("{:.0} ns", out.mean_switch_ns()),
        format_ns(sm.percentiles.p50),
        format_ns(sm.percentiles.p99),
        format_ns(sm.max),
        format!("{:.2} us", 2.0 * out.mean_switch_ns() / 1000.0),
        cycles(out.mean_switch_ns(), cal),
    ]);
    t.note(format!(
        "A round trip is two switches (perf bench sched pipe reports it as usecs/op); {}.",
        cycles_note(cal)
    ));
    t
}

pub fn trap(
    doc: &mut ResultDoc,
    cfg: &trap::TrapConfig,
    out: &trap::TrapOutcome,
    cal: &tsc::Calibration,
) -> Table {
    doc.settings.extra.insert("cpu".into(), cfg.cpu.into());
    doc.series.push(
        Series::from_recorder("trap (getpid)", kind::TRAP, cfg.cpu, &out.per_call)
            .with("calls", out.calls)
            .with("mean_ps", (out.mean_ns() * 1000.0).round() as u64),
    );
    let sm = out.per_call.summary();
    let cpu = cfg
        .cpu
        .map(|c| c.to_string())
        .unwrap_or_else(|| "any".into());
    let mut t =
        Table::new(&["call", "calls", "mean", "p50", "p99", "max", "cycles"]).titled(format!(
            "System-call trap on CPU {cpu}: time per call over batches of {}",
            cfg.per_batch
        ));
    t.row([
        "syscall(SYS_getpid)".to_string(),
        out.calls.to_string(),
        format!("{:.1} ns", out.mean_ns()),
        format_ns(sm.percentiles.p50),
        format_ns(sm.percentiles.p99),
        format_ns(sm.max),
        cycles(out.mean_ns(), cal),
    ]);
    t.note(format!("{}.", cycles_note(cal)));
    t
}

pub fn memcpy(
    doc: &mut ResultDoc,
    cfg: &memcpy::MemcpyConfig,
    out: &memcpy::MemcpyOutcome,
) -> Table {
    doc.settings.extra.insert("cpu".into(), cfg.cpu.into());
    let cpu = cfg
        .cpu
        .map(|c| c.to_string())
        .unwrap_or_else(|| "any".into());
    let mut t = Table::new(&[
        "size",
        "level",
        "method",
        "copies",
        "MB/s",
        "± sd",
        "per copy p50",
        "max",
    ])
    .titled(format!(
        "Copy bandwidth (memcpy) on CPU {cpu}, {} per size",
        format_ns(cfg.per_size_ns)
    ));
    for r in &out.sizes {
        doc.series.push(
            Series::from_recorder(
                format!("{} {}", r.method.name(), memcpy::format_bytes(r.size.bytes)),
                kind::COPY,
                cfg.cpu,
                &r.per_copy,
            )
            .with("bytes", r.size.bytes as u64)
            .with("method", r.method.name())
            .with("level", r.size.label.clone())
            .with("mb_per_s", r.mb_per_s().round() as u64)
            .with("mb_per_s_mean", r.mb_per_s_mean.round() as u64)
            .with("mb_per_s_stddev", r.mb_per_s_stddev.round() as u64),
        );
        let sm = r.per_copy.summary();
        t.row([
            memcpy::format_bytes(r.size.bytes),
            r.size.label.clone(),
            r.method.name().to_string(),
            r.copies.to_string(),
            format!("{:.0}", r.mb_per_s()),
            format!("{:.0}", r.mb_per_s_stddev),
            format_ns(sm.percentiles.p50),
            format_ns(sm.max),
        ]);
    }
    t.note("MB/s: bytes copied over time copying (1 MB = 10^6 bytes); ± sd between single copies. Default sizes fill half of each cache with source and destination.");
    t.note("memcpy: the C library's; loop: 16-byte vector loads and stores (what the caches deliver when the library's choice is poor).");
    t
}

pub fn dispatch(
    doc: &mut ResultDoc,
    cfg: &dispatch::DispatchConfig,
    out: &dispatch::DispatchOutcome,
) -> Table {
    let s = &mut doc.settings.extra;
    s.insert("event".into(), cfg.event.name().into());
    s.insert("raiser_cpu".into(), cfg.raiser_cpu.into());
    s.insert("waiter_cpu".into(), cfg.waiter_cpu.into());
    s.insert("interval_ns".into(), cfg.interval_ns.into());
    s.insert("duration_ns".into(), cfg.duration_ns.into());
    doc.series.push(
        Series::from_recorder(
            format!("dispatch ({})", cfg.event.name()),
            kind::DISPATCH,
            Some(cfg.waiter_cpu),
            &out.latency,
        )
        .with("events", out.events),
    );
    let sm = out.latency.summary();
    let mut t = Table::new(&[
        "event",
        "waiter class",
        "events",
        "min",
        "median",
        "p99",
        "max",
        "mean",
        "stddev",
        "missed",
    ])
    .titled(format!(
        "Process dispatch latency: raised on CPU {}, waiter on CPU {}, every {}",
        cfg.raiser_cpu,
        cfg.waiter_cpu,
        format_ns(cfg.interval_ns)
    ));
    t.row([
        cfg.event.name().to_string(),
        format!("{} {}", cfg.waiter.policy, cfg.waiter.priority),
        out.events.to_string(),
        format_ns(sm.min),
        format_ns(sm.median),
        format_ns(sm.percentiles.p99),
        format_ns(sm.max),
        format_ns(sm.mean),
        format_ns(sm.stddev),
        sm.missed_periods.to_string(),
    ]);
    t.note("From just before the event is raised to the waiting process's first instruction after its wait returns.");
    t
}

/// The gaps per CPU, and the interrupts each CPU took during the run.
pub fn gaps(doc: &mut ResultDoc, cfg: &gaps::GapsConfig, out: &gaps::GapsOutcome) -> Vec<Table> {
    let s = &mut doc.settings.extra;
    s.insert("threshold_ns".into(), cfg.threshold_ns.into());
    s.insert("duration_ns".into(), cfg.duration_ns.into());
    let mut t = Table::new(&[
        "cpu",
        "reads",
        "loop step",
        "gaps",
        "gaps/s",
        "lost",
        "p50",
        "p99",
        "max",
        "tick cost",
        "ticks/s",
    ])
    .titled(format!(
        "Timeline gaps above {} ({} per CPU)",
        format_ns(cfg.threshold_ns),
        format_ns(cfg.duration_ns)
    ));
    let mut attribution = Table::new(&["cpu", "interrupt source", "count", "per second"])
        .titled("Interrupts taken during the run (/proc/interrupts)");
    let mut periodic = Table::new(&["cpu", "every", "periods hit", "median", "mean"])
        .titled("Periodic interruptions besides the tick");
    for c in &out.cpus {
        let mut series =
            Series::from_recorder(format!("cpu {}", c.cpu), kind::GAP, Some(c.cpu), &c.gaps)
                .with("reads", c.reads)
                .with("min_step_ns", c.min_step_ns)
                .with("duration_ns", c.wall_ns)
                .with("lost_ns", c.lost_ns)
                .with(
                    "interrupts",
                    serde_json::to_value(&c.interrupts).expect("counts serialise"),
                )
                .with(
                    "above_us",
                    // Counts above whole microseconds, comparable with oslat's histogram buckets.
                    serde_json::Value::Object(
                        [1u64, 2, 5, 10, 20, 31, 100, 1000]
                            .iter()
                            .map(|&us| (us.to_string(), c.count_above(us * 1000).into()))
                            .collect(),
                    ),
                );
        if let Some(tk) = &c.tick {
            series = series.with("tick", serde_json::json!({"hz": tk.hz, "gaps": tk.gaps, "median_ns": tk.median_ns, "mean_ns": tk.mean_ns, "stddev_ns": tk.stddev_ns, "trimmed": tk.trimmed}));
        }
        series = series.with(
            "periodic",
            c.periodic
                .iter()
                .map(|p| serde_json::json!({"hz": p.hz, "period_ns": 1_000_000_000u64 / p.hz as u64, "periods_hit": p.gaps, "share": p.share, "median_ns": p.median_ns, "mean_ns": p.mean_ns, "stddev_ns": p.stddev_ns}))
                .collect::<Vec<_>>(),
        );
        for p in &c.periodic {
            periodic.row([
                c.cpu.to_string(),
                format_ns(1_000_000_000u64 / p.hz as u64),
                format!("{:.1} %", p.share * 100.0),
                format_ns(p.median_ns),
                format_ns(p.mean_ns),
            ]);
        }
        doc.series.push(series);
        let sm = c.gaps.summary();
        t.row([
            c.cpu.to_string(),
            c.reads.to_string(),
            format_ns(c.min_step_ns),
            sm.count.to_string(),
            format!("{:.0}", c.gaps_per_second()),
            format!("{:.3} %", c.lost_fraction() * 100.0),
            format_ns(sm.percentiles.p50),
            format_ns(sm.percentiles.p99),
            format_ns(sm.max),
            c.tick
                .as_ref()
                .map(|k| format_ns(k.median_ns))
                .unwrap_or_else(|| "-".into()),
            c.tick
                .as_ref()
                .map(|k| format!("{:.0}", k.per_second))
                .unwrap_or_else(|| "-".into()),
        ]);
        let mut by: Vec<(&String, &u64)> = c.interrupts.iter().collect();
        by.sort_by(|x, y| y.1.cmp(x.1));
        for (src, n) in by {
            attribution.row([
                c.cpu.to_string(),
                src.clone(),
                n.to_string(),
                format!("{:.1}", *n as f64 * 1e9 / c.wall_ns.max(1) as f64),
            ]);
        }
    }
    t.note(
        "loop step: the shortest step between two counter reads. tick cost: median of the gaps that fall at one phase of the \
         timer tick period (1/HZ); ticks/s: how many did (about HZ when every tick interrupts the loop).",
    );
    let mut tables = vec![t, attribution];
    if !periodic.rows.is_empty() {
        periodic.note(
            "gaps of 5 us or more at one phase of another timer rate (100, 250, 300 or 1000 Hz) in at least 2/3 of \
             its periods; in a guest that counts no interrupt at that rate, the host's (the steal counter may not see it)",
        );
        tables.push(periodic);
    }
    tables
}

pub fn alarm(
    doc: &mut ResultDoc,
    cfg: &AlarmConfig,
    out: &AlarmOutcome,
    rr_timeslice_ms: Option<u64>,
    effective_rr_ns: Option<u64>,
) -> Table {
    let cpu = cfg
        .cpu
        .map(|c| c.to_string())
        .unwrap_or_else(|| "any".into());
    let s = &mut doc.settings.extra;
    s.insert("workload".into(), cfg.workload.to_string().into());
    s.insert("mechanism".into(), cfg.mechanism.name().into());
    s.insert("cpu".into(), cfg.cpu.into());
    s.insert("alarms_per_process".into(), cfg.alarms.into());
    s.insert("delay_min_ns".into(), cfg.delay_min.into());
    s.insert("delay_max_ns".into(), cfg.delay_max.into());
    s.insert("rr_timeslice_ms".into(), rr_timeslice_ms.into());
    s.insert("rr_timeslice_effective_ns".into(), effective_rr_ns.into());
    let mut t = Table::new(&[
        "process", "type", "alarms", "p90", "p95", "p99", "max", "cpu use",
    ])
    .titled(format!(
        "Alarm latency: workload {} with {}, CPU {cpu}, {}, RR timeslice {}",
        cfg.workload,
        cfg.mechanism.name(),
        class(doc),
        effective_rr_ns.map(format_ns).unwrap_or_else(|| "?".into())
    ));
    for p in &out.processes {
        doc.series.push(
            Series::from_recorder(
                format!("process {} ({})", p.index, p.kind.label()),
                kind::ALARM_LATENCY,
                cfg.cpu,
                &p.recorder,
            )
            .with("type", p.kind.label())
            .with("cpu_ns", p.cpu_ns)
            .with("duration_ns", p.wall_ns),
        );
        let sm = p.recorder.summary();
        let pct = |v: u64| {
            if sm.count > 0 {
                format_ns(v)
            } else {
                "-".into()
            }
        };
        t.row([
            p.index.to_string(),
            p.kind.label(),
            sm.count.to_string(),
            pct(sm.percentiles.p90),
            pct(sm.percentiles.p95),
            pct(sm.percentiles.p99),
            pct(sm.max),
            format!("{:.1} %", p.cpu_ns as f64 * 100.0 / p.wall_ns.max(1) as f64),
        ]);
    }
    let all = out.merged();
    doc.series.push(
        Series::from_recorder("all alarm processes", kind::ALARM_LATENCY, cfg.cpu, &all)
            .with("workload", cfg.workload.to_string()),
    );
    t.rule();
    let sm = all.summary();
    t.row([
        "all".to_string(),
        String::new(),
        sm.count.to_string(),
        format_ns(sm.percentiles.p90),
        format_ns(sm.percentiles.p95),
        format_ns(sm.percentiles.p99),
        format_ns(sm.max),
        String::new(),
    ]);
    t.note(
        "Alarm latency: from the alarm's due time to the process running again (Etsion section 7).",
    );
    t
}
