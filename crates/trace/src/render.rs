//! Turning an [`Analysis`] into what people read: tables, result-document series, and SVG figures.

use crate::analyze::classify::Category;
use crate::analyze::{timeline, Analysis, GroupBy, GroupStats, TimelineEntry};
use crate::file::TraceData;
use punctual_plot::Line;
use punctual_result::doc::kind;
use punctual_result::{Series, Table};
use punctual_stats::Recorder;
use punctual_time::format_ns;
use serde_json::{json, Map, Value};

/// What the report shows.
#[derive(Clone, Debug)]
pub struct ReportOptions {
    /// Virtual tick rates for billing.
    pub hz: Vec<u32>,
    pub phase_ns: u64,
    pub by: GroupBy,
    /// Rows in the task tables (by CPU time).
    pub top: usize,
    /// Threads for the timeline (a tid, a tgid or a name).
    pub task: Option<String>,
    pub timeline_rows: usize,
}

impl ReportOptions {
    /// The tick rates to bill at, each 1 Hz to 1 MHz, for `trace analyze --hz`.
    pub fn check_hz(hz: &[u32]) -> Result<(), crate::TraceError> {
        if hz.is_empty() || hz.iter().any(|&h| h == 0 || h > 1_000_000) {
            return Err(crate::TraceError::Usage(
                "--hz: give tick rates between 1 and 1000000 Hz, e.g. 100,250,1000".into(),
            ));
        }
        Ok(())
    }
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            hz: vec![100, 250, 1000],
            phase_ns: 0,
            by: GroupBy::Process,
            top: 15,
            task: None,
            timeline_rows: 40,
        }
    }
}

/// Everything a report holds.
pub struct Report {
    pub tables: Vec<Table>,
    pub series: Vec<Series>,
    pub extra: Map<String, Value>,
    pub figures: Vec<(String, String)>,
    pub timeline: Vec<TimelineEntry>,
}

fn us(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1000.0)
}

fn pct(x: f64) -> String {
    format!("{:.2} %", x * 100.0)
}

fn opt_ratio(x: Option<f64>) -> String {
    x.map_or("-".into(), |r| format!("{r:.4}"))
}

fn opt_pct(x: Option<f64>) -> String {
    x.map_or("-".into(), pct)
}

/// Groups sorted by CPU time, busiest first, with their stats.
pub fn ranked(a: &Analysis, o: &ReportOptions) -> Vec<GroupStats> {
    let mut v: Vec<GroupStats> = a
        .groups(o.by)
        .iter()
        .map(|g| a.stats(g, &o.hz, o.phase_ns))
        .collect();
    v.sort_by(|x, y| y.cpu_ns.cmp(&x.cpu_ns).then(x.key.cmp(&y.key)));
    v
}

pub fn summary_table(a: &Analysis, trace: &TraceData) -> Table {
    let mut t = Table::new(&["trace", ""]).titled("Trace");
    let w = a.window_ns();
    t.row(["window".to_string(), format_ns(w)]);
    t.row(["CPUs".to_string(), a.cpus.to_string()]);
    t.row([
        "events".to_string(),
        format!(
            "{} ({:.0}/s)",
            a.events,
            a.events as f64 * 1e9 / w.max(1) as f64
        ),
    ]);
    t.row([
        "kernel events".to_string(),
        trace.header.events.len().to_string(),
    ]);
    let lost = trace.lost_events();
    t.row([
        "lost events".to_string(),
        format!("{lost} ({} loss markers)", a.loss_markers),
    ]);
    if a.runs_dropped + a.wakeups_dropped > 0 {
        t.row([
            "dropped after losses".to_string(),
            format!("{} runs, {} wake-ups", a.runs_dropped, a.wakeups_dropped),
        ]);
    }
    if a.inconsistent_switches > 0 {
        t.row([
            "unrecorded switches".to_string(),
            format!(
                "{} (a switch's prev was not the running task; both runs dropped)",
                a.inconsistent_switches
            ),
        ]);
    }
    let backwards = a.backwards_timestamps + trace.integrity.backwards_timestamps;
    if backwards + trace.integrity.out_of_window > 0 {
        t.row([
            "clock anomalies".to_string(),
            format!(
                "{backwards} timestamps before their CPU's previous one (put in time order), \
                 {} events outside the recording (dropped)",
                trace.integrity.out_of_window
            ),
        ]);
    }
    if a.unmeasured_sources > 0 {
        t.row([
            "unmeasured handlers".to_string(),
            format!(
                "{} runs of sources beyond the first {} (a damaged or crafted trace)",
                a.unmeasured_sources,
                crate::analyze::MAX_SOURCES
            ),
        ]);
    }
    if a.inferred_switch_ins > 0 {
        t.row([
            "switch-ins from idle".to_string(),
            format!(
                "{} not recorded by the kernel; placed at the task's wake-up onto the idle CPU",
                a.inferred_switch_ins
            ),
        ]);
    }
    let idle = a.idle_ns();
    if w > 0 && a.cpus > 0 {
        t.row([
            "idle".to_string(),
            pct(idle as f64 / (w as f64 * a.cpus as f64)),
        ]);
    }
    if let Some(target) = &a.target {
        t.row([
            "command".to_string(),
            format!("{} (pid {})", target.argv.join(" "), target.pid),
        ]);
    }
    if !trace.integrity.complete() {
        t.note(format!(
            "damaged or truncated file: {}",
            trace.integrity.describe()
        ));
    }
    t
}

pub fn tasks_table(a: &Analysis, stats: &[GroupStats], o: &ReportOptions) -> Table {
    let mut t = tasks_header(o);
    let w = a.window_ns();
    for s in stats.iter().take(o.top) {
        t.row(task_row(s, w));
    }
    tasks_notes(&mut t, stats.len(), o);
    t
}

fn tasks_header(o: &ReportOptions) -> Table {
    let who = match o.by {
        GroupBy::Process => "process",
        GroupBy::Thread => "thread",
    };
    Table::new(&[
        who,
        "CPU",
        "quanta",
        "quanta/s",
        "quantum p50",
        "p99",
        "max",
        "preempted",
        "wake-up p50",
        "p99",
        "max",
    ])
    .titled("Effective quanta (switch-in to switch-out) and wake-up latency (waking to running)")
}

fn tasks_notes(t: &mut Table, groups: usize, o: &ReportOptions) {
    if groups > o.top {
        t.note(format!("{} more (--top N shows more)", groups - o.top));
    }
    t.note(
        "CPU: share of one CPU over the window. Quanta: runs whose start and end were both traced.",
    );
}

fn task_row(s: &GroupStats, w: u64) -> Vec<String> {
    let q = &s.quanta;
    let wk = &s.wakeup;
    let qn = q.count();
    let f = |r: &Recorder, p: u64| {
        if r.count() == 0 {
            "-".into()
        } else {
            format_ns(r.percentile(p))
        }
    };
    vec![
        s.label.clone(),
        pct(s.cpu_share(w)),
        qn.to_string(),
        format!("{:.2}", s.quanta_per_second(w)),
        f(q, 50_000),
        f(q, 99_000),
        q.max().map_or("-".into(), format_ns),
        if qn == 0 {
            "-".into()
        } else {
            pct(s.preempted as f64 / qn as f64)
        },
        f(wk, 50_000),
        f(wk, 99_000),
        wk.max().map_or("-".into(), format_ns),
    ]
}

pub fn billing_table(stats: &[GroupStats], o: &ReportOptions) -> Table {
    let mut t = billing_header(o);
    for s in stats.iter().take(o.top) {
        t.row(billing_row(s));
    }
    t
}

fn billing_header(o: &ReportOptions) -> Table {
    let mut header = vec!["task".to_string(), "CPU time".to_string()];
    header.extend(o.hz.iter().map(|h| format!("billing @{h}Hz")));
    header.extend(o.hz.iter().map(|h| format!("missed @{h}Hz")));
    let hdr: Vec<&str> = header.iter().map(String::as_str).collect();
    Table::new(&hdr).titled(format!(
        "Billing by a virtual tick (phase {}): billed time / consumed time, and quanta never billed (Etsion Table 3)",
        format_ns(o.phase_ns)
    ))
}

fn billing_row(s: &GroupStats) -> Vec<String> {
    let mut row = vec![s.label.clone(), format_ns(s.cpu_ns)];
    row.extend(s.billing.iter().map(|b| opt_ratio(b.ratio())));
    row.extend(s.billing.iter().map(|b| opt_pct(b.missed_fraction())));
    row
}

pub fn sources_table(a: &Analysis) -> Table {
    let mut t = Table::new(&[
        "source",
        "context",
        "subsystem",
        "count",
        "min us",
        "mean us",
        "max us",
        "p99 us",
    ])
    .titled("Interrupt-context durations per source");
    let mut v: Vec<_> = a.sources.values().collect();
    v.sort_by(|x, y| {
        (x.source.context(), y.durations.count()).cmp(&(y.source.context(), x.durations.count()))
    });
    for s in v {
        let d = s.durations.summary();
        t.row([
            s.label.clone(),
            s.source.context().to_string(),
            s.category.name().to_string(),
            d.count.to_string(),
            us(d.min),
            us(d.mean),
            us(d.max),
            us(s.durations.percentile(99_000)),
        ]);
    }
    t.note("hardirq: device handlers and system vectors, run with interrupts disabled; softirq: bottom halves; \
            hrtimer: timer callbacks (inside the local timer vector's time)");
    t
}

/// KURT Table 4.3's layout: per subsystem, the published numbers beside this machine's.
pub fn kurt_table(a: &Analysis) -> Table {
    let hard = a.by_category("hardirq");
    let soft = a.by_category("softirq");
    let mut t = Table::new(&[
        "Category", "KURT min", "mean", "max", "hardirq n", "min", "mean", "max", "softirq n", "min", "mean", "max",
    ])
    .titled("Table 4.3: interrupts disabled per subsystem in KURT 1998 (us) beside handler durations here");
    for c in Category::ALL {
        let (kmin, kmean, kmax) = c.kurt_table_4_3();
        let mut row = vec![
            c.name().to_string(),
            format!("{kmin:.2}"),
            format!("{kmean:.2}"),
            format!("{kmax:.2}"),
        ];
        for m in [&hard, &soft] {
            match m.get(&c) {
                Some(r) if r.count() > 0 => {
                    let s = r.summary();
                    row.extend([s.count.to_string(), us(s.min), us(s.mean), us(s.max)]);
                }
                _ => row.extend(["0".to_string(), "-".into(), "-".into(), "-".into()]),
            }
        }
        t.row(row);
    }
    t.note("KURT timestamped every cli/sti in a patched Linux kernel on a Pentium Pro. An unpatched kernel exposes \
            the handlers instead: hardirq = device interrupt handlers and system vectors (interrupts disabled), \
            softirq = bottom halves (every task on the CPU waits).");
    t
}

pub fn timeline_table(entries: &[TimelineEntry], trace: &TraceData, rows: usize) -> Table {
    let mut t = Table::new(&[
        "at",
        "thread",
        "cpu",
        "ran",
        "ended",
        "next on CPU",
        "off CPU before",
    ])
    .titled("Timeline of the chosen task's runs");
    for e in entries.iter().take(rows) {
        t.row([
            format_ns(e.start_ns),
            format!("{} [{}]", trace.comm(e.tid), e.tid),
            e.cpu.to_string(),
            format_ns(e.ran_ns),
            e.ended.clone(),
            e.next.clone(),
            e.waited_ns.map_or("-".into(), format_ns),
        ]);
    }
    let preempted = entries.iter().filter(|e| e.ended == "preempted").count();
    let mut by: std::collections::BTreeMap<&str, usize> = Default::default();
    for e in entries.iter().filter(|e| e.ended == "preempted") {
        *by.entry(e.next.as_str()).or_default() += 1;
    }
    let mut top: Vec<_> = by.into_iter().collect();
    top.sort_by_key(|b| std::cmp::Reverse(b.1));
    let top: Vec<String> = top
        .iter()
        .take(5)
        .map(|(n, c)| format!("{n} x{c}"))
        .collect();
    t.note(format!(
        "{} runs, {preempted} preempted{}{}",
        entries.len(),
        if top.is_empty() {
            String::new()
        } else {
            format!("; preempted most by {}", top.join(", "))
        },
        if entries.len() > rows {
            format!("; first {rows} shown (--timeline N)")
        } else {
            String::new()
        }
    ));
    t
}

/// Series for the result document: per group quanta and wake-up latency; per source durations.
pub fn series(a: &Analysis, stats: &[GroupStats], o: &ReportOptions) -> Vec<Series> {
    let w = a.window_ns();
    let mut out = Vec::new();
    for s in stats {
        group_series(&mut out, s, w);
    }
    let _ = o;
    source_series(&mut out, a);
    out
}

fn group_series(out: &mut Vec<Series>, s: &GroupStats, w: u64) {
    let billing: Vec<Value> = s
        .billing
        .iter()
        .map(|b| {
            json!({"hz": b.hz, "phase_ns": b.phase_ns, "ticks": b.ticks, "billed_ns": b.billed_ns(),
                   "consumed_ns": b.consumed_ns, "ratio": b.ratio(), "quanta": b.quanta,
                   "missed_quanta": b.missed_quanta, "missed_fraction": b.missed_fraction()})
        })
        .collect();
    out.push(
        Series::from_recorder(&s.label, kind::EFFECTIVE_QUANTUM, None, &s.quanta)
            .with("task", s.key)
            .with("threads", s.threads as u64)
            .with("cpu_ns", s.cpu_ns)
            .with("cpu_share", s.cpu_share(w))
            .with("quanta_per_second", s.quanta_per_second(w))
            .with("preempted", s.preempted)
            .with("blocked", s.blocked)
            .with("billing", billing),
    );
    if s.wakeup.count() > 0 {
        out.push(
            Series::from_recorder(&s.label, kind::WAKEUP_LATENCY, None, &s.wakeup)
                .with("task", s.key),
        );
    }
}

fn source_series(out: &mut Vec<Series>, a: &Analysis) {
    for s in a.sources.values() {
        let kind = match s.source.context() {
            "hardirq" => kind::IRQ_DURATION,
            "softirq" => kind::SOFTIRQ_DURATION,
            _ => kind::HRTIMER_DURATION,
        };
        out.push(
            Series::from_recorder(&s.label, kind, None, &s.durations)
                .with("subsystem", s.category.name()),
        );
        if let Some(late) = &s.expiry_late {
            out.push(
                Series::from_recorder(&s.label, kind::TIMER_EXPIRY_LATENCY, None, late)
                    .with("subsystem", s.category.name()),
            );
        }
    }
}

/// How late each hrtimer's handler began after its programmed expiry (the timer interrupt's
/// latency; `rtla timerlat`'s IRQ latency, read from the trace instead of its own tracer), per
/// timer callback; `None` when the trace measured no expiry.
pub fn expiry_table(a: &Analysis) -> Option<Table> {
    let e = a.expiries;
    if e.measured == 0 {
        return None;
    }
    let mut t = Table::new(&["timer", "expiries", "min us", "p50 us", "p99 us", "max us"])
        .titled("hrtimer expiry latency: from the programmed expiry to the handler");
    let mut v: Vec<(&str, &Recorder)> = a
        .sources
        .values()
        .filter_map(|s| s.expiry_late.as_deref().map(|r| (s.label.as_str(), r)))
        .collect();
    v.sort_by(|x, y| y.1.count().cmp(&x.1.count()).then(x.0.cmp(y.0)));
    for (label, r) in v {
        t.row([
            label.to_string(),
            r.count().to_string(),
            us(r.min().unwrap_or(0)),
            us(r.percentile(50_000)),
            us(r.percentile(99_000)),
            us(r.max().unwrap_or(0)),
        ]);
    }
    t.note(format!(
        "{} expiries measured (hrtimer_start's expiry to hrtimer_expire_entry's clock reading); {} ran early, inside their slack; \
         {} had no start traced (re-armed in their own callback, as the tick is, or armed before tracing began)",
        e.measured, e.early, e.unknown
    ));
    Some(t)
}

/// Effective-quantum CDFs of the busiest groups (Etsion Fig. 6's shape), x in microseconds.
pub fn quanta_cdf(stats: &[GroupStats], n: usize) -> Option<String> {
    let lines: Vec<Line> = stats
        .iter()
        .filter(|s| s.quanta.count() > 0)
        .take(n)
        .map(|s| cdf_line(&s.label, &s.quanta))
        .collect();
    quanta_plot(&lines)
}

fn quanta_plot(lines: &[Line]) -> Option<String> {
    if lines.is_empty() {
        return None;
    }
    punctual_plot::line_plot(
        "Effective quantum (CDF)",
        "effective quantum (us)",
        "fraction of quanta",
        lines,
        true,
        false,
    )
    .ok()
}

/// Points of a recorder's cumulative distribution, x in microseconds.
pub fn cdf_line(label: &str, r: &Recorder) -> Line {
    let n = r.count().max(1) as f64;
    let mut seen = 0u64;
    let mut points = Vec::new();
    for v in r.histogram().iter_recorded() {
        seen += v.count_at_value();
        points.push((
            (v.value_iterated_to().max(1)) as f64 / 1000.0,
            seen as f64 / n,
        ));
    }
    Line {
        label: label.to_string(),
        points,
    }
}

/// Percentile plot of interrupt durations per subsystem.
pub fn irq_figure(a: &Analysis) -> Option<String> {
    let hard = a.by_category("hardirq");
    let named: Vec<(String, &Recorder)> = hard
        .iter()
        .filter(|(_, r)| r.count() > 0)
        .map(|(c, r)| (c.name().to_string(), r))
        .collect();
    if named.is_empty() {
        return None;
    }
    punctual_plot::percentile_plot_of(
        "Hard interrupt handler durations per subsystem",
        "handler duration",
        &named,
    )
    .ok()
}

/// Everything for `punctual trace analyze`, the result document's series included.
pub fn report(a: &Analysis, trace: &TraceData, o: &ReportOptions) -> Report {
    report_with(a, trace, o, true)
}

/// Quanta CDF lines in the figure.
const CDF_LINES: usize = 6;

/// Everything for `punctual trace analyze`; `with_series`: build the result document's series, one
/// per group and source (only an export needs them: `report.series` is empty otherwise).
///
/// Groups are ranked by CPU time first, then their statistics are built one at a time, turned into
/// table rows, figure lines and series, and dropped: memory follows the rows shown, not the number
/// of processes in the trace (a group's histograms take about half a megabyte).
pub fn report_with(
    a: &Analysis,
    trace: &TraceData,
    o: &ReportOptions,
    with_series: bool,
) -> Report {
    let groups = a.groups(o.by);
    let mut order: Vec<(u64, i32, usize)> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| (a.cpu_ns(g), g.key, i))
        .collect();
    order.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
    let w = a.window_ns();
    let mut tasks = tasks_header(o);
    let mut billing = billing_header(o);
    let mut cdf = Vec::new();
    let mut series = Vec::new();
    for (rank, &(_, _, i)) in order.iter().enumerate() {
        let shown = rank < o.top;
        let g = &groups[i];
        let wants_line = cdf.len() < CDF_LINES && a.runs(g).any(|r| r.whole);
        if !(shown || with_series || wants_line) {
            if cdf.len() < CDF_LINES {
                continue;
            }
            break;
        }
        let s = a.stats(g, &o.hz, o.phase_ns);
        if shown {
            tasks.row(task_row(&s, w));
            billing.row(billing_row(&s));
        }
        if cdf.len() < CDF_LINES && s.quanta.count() > 0 {
            cdf.push(cdf_line(&s.label, &s.quanta));
        }
        if with_series {
            group_series(&mut series, &s, w);
        }
    }
    tasks_notes(&mut tasks, groups.len(), o);
    if with_series {
        source_series(&mut series, a);
    }
    let mut tables = vec![summary_table(a, trace), tasks, billing];
    if !a.sources.is_empty() {
        tables.push(sources_table(a));
        tables.push(kurt_table(a));
    }
    tables.extend(expiry_table(a));
    let mut extra = Map::new();
    let tl = match &o.task {
        Some(sel) => {
            let tids = a.select(sel);
            let entries = timeline(a, trace, &tids);
            tables.push(timeline_table(&entries, trace, o.timeline_rows));
            extra.insert(
                "timeline".into(),
                serde_json::to_value(&entries).unwrap_or(Value::Null),
            );
            entries
        }
        None => Vec::new(),
    };
    extra.insert("window_ns".into(), a.window_ns().into());
    extra.insert("events".into(), a.events.into());
    extra.insert("trace_file".into(), json!({
        "started_at": trace.header.started_at,
        "clock": trace.header.clock,
        "kernel_events": trace.header.events,
        "complete": trace.integrity.complete(),
        "integrity": trace.integrity,
        "lost": trace.trailer.as_ref().map(|t| serde_json::to_value(&t.lost).unwrap_or(Value::Null)),
    }));
    let mut figures = Vec::new();
    if let Some(svg) = quanta_plot(&cdf) {
        figures.push(("trace-quanta-cdf".to_string(), svg));
    }
    if let Some(svg) = irq_figure(a) {
        figures.push(("trace-irq-durations".to_string(), svg));
    }
    Report {
        tables,
        series,
        extra,
        figures,
        timeline: tl,
    }
}
