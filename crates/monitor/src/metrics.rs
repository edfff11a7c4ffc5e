//! What `/metrics` holds, read at each scrape from atomics the measuring threads write (never a
//! lock they take): node_exporter's conventions (base units, `_total` counters, a `cpu` label,
//! a help line each), encoded by prometheus-client through [`Collector`]s.

use crate::http::ServerStats;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelSet, MetricEncoder, NativeHistogram, NativeHistogramBuckets,
    NoLabelSet,
};
use prometheus_client::metrics::exemplar::Exemplar;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use punctual_stats::live::{bucket_high, bucket_low};
use punctual_stats::{LiveCounts, LiveHistogram};
use std::collections::BTreeMap;
use std::fmt::Error;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Late releases a feed holds between two takes (24 bytes each: 384 KiB per CPU), about four
/// seconds of a CPU late at every release of a 100 us period.
pub const FEED_CAPACITY: usize = 16_384;

/// Upper bounds of the classic buckets, ns: 1-2-5 steps from 1 us to 100 ms (and +Inf).
pub const CLASSIC_BOUNDS_NS: [u64; 16] = [
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
];
/// Native histogram schema: 2^(1/8) between bucket bounds (9 % wide).
pub const NATIVE_SCHEMA: i32 = 3;
/// Values at or below this (seconds) go to the zero bucket: 2^-128, the specification's default,
/// so only a latency of 0 ns lands there.
const ZERO_THRESHOLD: f64 = 2.938_735_877_055_719e-39;
/// Which of a [`LiveHistogram`]'s peaks each reader takes.
pub const PEAK_SCRAPE: usize = 0;
pub const PEAK_WINDOW: usize = 1;

/// Why a release was late, SPEC section 9's causes, in `--explain`'s order
/// ([`punctual_explain::Cause::ALL`]). Without attribution every late release is `unexplained`.
pub const CAUSES: [&str; 9] = [
    "steal",
    "throttle",
    "task",
    "irq",
    "softirq",
    "wake_path",
    "lead",
    "dispatcher",
    "unexplained",
];

/// One measured CPU's late releases while they are explained: the feed its measuring thread
/// offers them to, and how many have been counted under each cause.
#[derive(Debug)]
pub struct LateCounts {
    pub feed: Arc<punctual_explain::LateFeed>,
    /// Per cause, in [`CAUSES`] order.
    counts: [AtomicU64; CAUSES.len()],
    /// Releases the full feed dropped that are counted already (the attribution thread's).
    dropped_counted: AtomicU64,
}

impl LateCounts {
    fn new(bound: u64) -> LateCounts {
        LateCounts {
            feed: Arc::new(punctual_explain::LateFeed::new(bound, FEED_CAPACITY)),
            counts: Default::default(),
            dropped_counted: AtomicU64::new(0),
        }
    }

    pub fn add(&self, cause: punctual_explain::Cause, n: u64) {
        if n > 0 {
            let i = CAUSES
                .iter()
                .position(|c| *c == cause.name())
                .expect("every cause is listed");
            self.counts[i].fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Count the releases the feed dropped since the last call as `unexplained`.
    pub fn count_dropped(&self) {
        let d = self.feed.dropped();
        let before = self.dropped_counted.swap(d, Ordering::Relaxed);
        self.add(
            punctual_explain::Cause::Unexplained,
            d.saturating_sub(before),
        );
    }

    /// Per cause (in [`CAUSES`] order) the releases counted, and those offered but not counted
    /// yet (read after the counts, so never below zero).
    pub fn read(&self) -> ([u64; CAUSES.len()], u64) {
        let counts = self.counts.each_ref().map(|c| c.load(Ordering::Relaxed));
        let pending = self
            .feed
            .offered()
            .saturating_sub(counts.iter().sum::<u64>());
        (counts, pending)
    }
}

/// The measured CPUs' live histograms: written by the measuring threads, read by scrapes and
/// windows. A CPU keeps its histogram for the life of the process (a configuration that drops
/// and later re-adds it continues its counters), so memory is bounded by the CPUs there are.
#[derive(Debug)]
pub struct Board {
    by_cpu: Mutex<BTreeMap<usize, Arc<LiveHistogram>>>,
    active: Mutex<Vec<usize>>,
    interval_ns: AtomicU64,
    /// A release later than this is late (fixed for the process: a counter must not change meaning).
    pub late_bound_ns: u64,
    /// Copies reused by scrapes, so a scrape allocates no 270 KB buffer.
    spare: Mutex<Vec<LiveCounts>>,
    /// Late releases are explained (fixed once the monitor starts): their counts come from
    /// [`LateCounts`], else every one is `unexplained`, straight from the histogram.
    attributing: AtomicBool,
    late: Mutex<BTreeMap<usize, Arc<LateCounts>>>,
}

impl Board {
    pub fn new(late_bound_ns: u64) -> Board {
        Board {
            by_cpu: Mutex::default(),
            active: Mutex::default(),
            interval_ns: AtomicU64::new(0),
            late_bound_ns,
            spare: Mutex::default(),
            attributing: AtomicBool::new(false),
            late: Mutex::default(),
        }
    }

    /// The bound as the histogram's buckets draw it: a release is late when its bucket lies wholly
    /// above the bound, so the late releases counted one by one and those the histogram's buckets
    /// give are the same releases.
    pub fn late_threshold_ns(&self) -> u64 {
        bucket_high(punctual_stats::live::bucket_of(self.late_bound_ns))
    }

    /// Whether late releases are explained.
    pub fn attributing(&self) -> bool {
        self.attributing.load(Ordering::Relaxed)
    }

    /// Explain late releases from now on (before anything is measured: fixed for the process).
    pub fn set_attributing(&self, on: bool) {
        self.attributing.store(on, Ordering::Relaxed);
    }

    /// `cpu`'s late releases (kept for the life of the process, like its histogram).
    pub fn late_counts(&self, cpu: usize) -> Arc<LateCounts> {
        lock(&self.late)
            .entry(cpu)
            .or_insert_with(|| Arc::new(LateCounts::new(self.late_threshold_ns())))
            .clone()
    }

    /// Measure `cpus` every `interval_ns` from now: their histograms, in that order.
    pub fn measure(&self, cpus: &[usize], interval_ns: u64) -> Vec<Arc<LiveHistogram>> {
        let mut by_cpu = lock(&self.by_cpu);
        let hists = cpus
            .iter()
            .map(|&c| by_cpu.entry(c).or_default().clone())
            .collect();
        *lock(&self.active) = cpus.to_vec();
        self.interval_ns.store(interval_ns, Ordering::Relaxed);
        hists
    }

    /// The CPUs measured now, with their histograms.
    pub fn active(&self) -> Vec<(usize, Arc<LiveHistogram>)> {
        let by_cpu = lock(&self.by_cpu);
        lock(&self.active)
            .iter()
            .filter_map(|c| by_cpu.get(c).map(|h| (*c, h.clone())))
            .collect()
    }

    pub fn interval_ns(&self) -> u64 {
        self.interval_ns.load(Ordering::Relaxed)
    }

    pub fn take_counts(&self) -> LiveCounts {
        lock(&self.spare).pop().unwrap_or_default()
    }

    pub fn give_counts(&self, c: LiveCounts) {
        let mut spare = lock(&self.spare);
        // As many as scrapes run at once (the server's workers), never more.
        if spare.len() < 8 {
            spare.push(c);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Counts of the monitor's own work, for its metrics.
#[derive(Debug, Default)]
pub struct Ops {
    pub reloads_ok: AtomicU64,
    pub reloads_failed: AtomicU64,
    pub windows_stored: AtomicU64,
    pub windows_failed: AtomicU64,
    /// Per CPU, the latest floor measurement (`bench gaps`): (gaps per second, lost share, worst gap ns).
    pub floors: Mutex<BTreeMap<usize, (f64, f64, u64)>>,
}

/// Labels of the host, for `punctual_host_info`.
#[derive(Clone, Debug)]
pub struct HostLabels(pub Vec<(&'static str, String)>);

impl HostLabels {
    pub fn of(host: &punctual_result::HostFacts) -> HostLabels {
        HostLabels(vec![
            ("hostname", host.hostname.clone()),
            ("kernel", host.kernel.clone()),
            ("preempt", host.preempt.clone()),
            ("clocksource", host.clocksource.clone()),
            ("virtualized", host.virtualized.to_string()),
        ])
    }
}

/// The registry `punctual monitor` serves: the measured CPUs, steal time, the monitor's own
/// work, the HTTP server's answers, the process, build and host.
pub fn registry(
    board: Arc<Board>,
    ops: Arc<Ops>,
    http: Arc<ServerStats>,
    host: HostLabels,
) -> Registry {
    let mut root = common(http, host);
    let r = root.sub_registry_with_prefix("punctual");
    r.register_collector(Box::new(LatencyCollector(board)));
    r.register_collector(Box::new(StealCollector));
    r.register_collector(Box::new(OpsCollector(ops)));
    root
}

/// What every punctual endpoint serves: the process, the HTTP server's answers, host and build.
/// Add collectors under the `punctual` prefix with `sub_registry_with_prefix("punctual")`.
pub fn common(http: Arc<ServerStats>, host: HostLabels) -> Registry {
    let mut root = Registry::default();
    root.register_collector(Box::new(ProcessCollector));
    root.sub_registry_with_prefix("punctual")
        .register_collector(Box::new(CommonCollector { http, host }));
    root
}

/// Families of a collector: each `encode_*` writes one family's descriptor and its samples.
pub struct Families<'a, 'b>(pub &'a mut DescriptorEncoder<'b>);

pub type Labels<'l> = Vec<(&'static str, &'l str)>;

impl Families<'_, '_> {
    fn family(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<&Unit>,
        ty: MetricType,
        each: impl FnOnce(&mut MetricEncoder) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let mut m = self.0.encode_descriptor(name, help, unit, ty)?;
        each(&mut m)
    }

    pub fn gauges(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<&Unit>,
        rows: &[(Labels, f64)],
    ) -> Result<(), Error> {
        self.family(name, help, unit, MetricType::Gauge, |m| {
            for (labels, v) in rows {
                m.encode_family(labels)?.encode_gauge(v)?;
            }
            Ok(())
        })
    }

    pub fn counters<V: prometheus_client::encoding::EncodeCounterValue>(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<&Unit>,
        rows: &[(Labels, V)],
    ) -> Result<(), Error> {
        self.family(name, help, unit, MetricType::Counter, |m| {
            for (labels, v) in rows {
                m.encode_family(labels)?
                    .encode_counter::<NoLabelSet, V, f64>(v, None::<&Exemplar<NoLabelSet, f64>>)?;
            }
            Ok(())
        })
    }

    /// Latency histograms in seconds, classic and native, from live counts.
    pub fn histograms(
        &mut self,
        name: &str,
        help: &str,
        rows: &[(Labels, &LiveCounts)],
    ) -> Result<(), Error> {
        self.family(
            name,
            help,
            Some(&Unit::Seconds),
            MetricType::Histogram,
            |m| {
                for (labels, counts) in rows {
                    encode_histogram(m.encode_family(labels)?, counts)?;
                }
                Ok(())
            },
        )
    }
}

/// A live histogram as Prometheus sees it: classic buckets (a live bucket counts under the first
/// bound at or above its lowest value: within 0.1 % of the bound) and native buckets (each live
/// bucket placed by its midpoint; live buckets are 100 times narrower than native ones).
pub fn encode_histogram(mut m: MetricEncoder, c: &LiveCounts) -> Result<(), Error> {
    let mut classic: Vec<(f64, u64)> = CLASSIC_BOUNDS_NS
        .iter()
        .map(|&b| (b as f64 / 1e9, 0))
        .chain(std::iter::once((f64::INFINITY, 0)))
        .collect();
    let mut zero = 0u64;
    let mut native: Vec<(i32, u64)> = Vec::new();
    let mut count = 0u64;
    for (i, n) in c.buckets() {
        count += n;
        let low = bucket_low(i);
        let slot = CLASSIC_BOUNDS_NS
            .iter()
            .position(|&b| low <= b)
            .unwrap_or(CLASSIC_BOUNDS_NS.len());
        classic[slot].1 += n;
        if low == 0 {
            zero += n;
            continue;
        }
        let mid = (low as f64 + bucket_high(i) as f64) / 2.0 / 1e9;
        let idx = native_index(mid);
        match native.last_mut() {
            Some((j, k)) if *j == idx => *k += n,
            _ => native.push((idx, n)),
        }
    }
    let (spans, deltas) = spans_and_deltas(&native);
    let native = NativeHistogram {
        schema: NATIVE_SCHEMA,
        zero_threshold: ZERO_THRESHOLD,
        zero_count: zero,
        negative: NativeHistogramBuckets {
            spans: &[],
            deltas: &[],
        },
        positive: NativeHistogramBuckets {
            spans: &spans,
            deltas: &deltas,
        },
        created: None,
    };
    m.encode_histogram_with_native::<NoLabelSet>(
        c.sum_ns() as f64 / 1e9,
        count,
        &classic,
        None,
        native,
    )
}

/// The native bucket holding `v` (> 0) at [`NATIVE_SCHEMA`]: bucket `i` is
/// `(2^((i-1)/8), 2^(i/8)]`.
pub fn native_index(v: f64) -> i32 {
    let per = (1u32 << NATIVE_SCHEMA) as f64;
    let x = v.log2() * per;
    let i = x.ceil();
    // A value a rounding error above a bound belongs below it.
    let i = if (x - (i - 1.0)).abs() < 1e-9 {
        i - 1.0
    } else {
        i
    };
    i as i32
}

/// Spans and deltas of sparse buckets given in increasing index order.
fn spans_and_deltas(buckets: &[(i32, u64)]) -> (Vec<(i32, u32)>, Vec<i64>) {
    let mut spans: Vec<(i32, u32)> = Vec::new();
    let mut deltas = Vec::with_capacity(buckets.len());
    let mut prev_idx: Option<i32> = None;
    let mut prev_count = 0i64;
    for &(idx, n) in buckets {
        match prev_idx {
            Some(p) if idx == p + 1 => spans.last_mut().expect("a span is open").1 += 1,
            Some(p) => spans.push((idx - p - 1, 1)),
            None => spans.push((idx, 1)),
        }
        deltas.push(n as i64 - prev_count);
        prev_count = n as i64;
        prev_idx = Some(idx);
    }
    (spans, deltas)
}

/// The measured CPUs.
#[derive(Debug)]
struct LatencyCollector(Arc<Board>);

impl Collector for LatencyCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), Error> {
        let board = &self.0;
        let active = board.active();
        let mut copies: Vec<(String, LiveCounts, u64)> = Vec::with_capacity(active.len());
        for (cpu, h) in &active {
            let mut c = board.take_counts();
            h.snapshot(&mut c);
            copies.push((cpu.to_string(), c, h.take_peak(PEAK_SCRAPE)));
        }
        fn cpu(s: &str) -> Labels<'_> {
            vec![("cpu", s)]
        }
        let mut f = Families(&mut encoder);
        let result = (|| {
            let rows: Vec<_> = copies.iter().map(|(s, c, _)| (cpu(s), c)).collect();
            f.histograms(
                "wakeup_latency",
                "How late the measuring thread ran after each release (CLOCK_MONOTONIC, absolute sleep)",
                &rows,
            )?;
            let rows: Vec<_> = copies
                .iter()
                .map(|(s, _, peak)| (cpu(s), *peak as f64 / 1e9))
                .collect();
            f.gauges(
                "wakeup_latency_max",
                "The worst wake-up latency since the previous scrape (0 when nothing was measured since)",
                Some(&Unit::Seconds),
                &rows,
            )?;
            let rows: Vec<_> = copies
                .iter()
                .map(|(s, c, _)| (cpu(s), c.missed()))
                .collect();
            f.counters(
                "missed_periods",
                "Releases that had already passed when the measuring thread woke (skipped, never run late)",
                None,
                &rows,
            )?;
            late_families(&mut f, board, &copies)?;
            let interval = board.interval_ns() as f64 / 1e9;
            let rows: Vec<_> = copies.iter().map(|(s, _, _)| (cpu(s), interval)).collect();
            f.gauges(
                "period",
                "The measuring thread's release period",
                Some(&Unit::Seconds),
                &rows,
            )?;
            f.gauges(
                "late_bound",
                "A release later than this counts in punctual_late_releases_total",
                Some(&Unit::Seconds),
                &[(vec![], board.late_bound_ns as f64 / 1e9)],
            )
        })();
        for (_, c, _) in copies {
            board.give_counts(c);
        }
        result
    }
}

/// `punctual_late_releases_total{cpu, cause}`, and while late releases are explained, those not
/// explained yet.
fn late_families(
    f: &mut Families,
    board: &Board,
    copies: &[(String, LiveCounts, u64)],
) -> Result<(), Error> {
    let help = "Releases later than the bound (punctual_late_bound_seconds), by cause (punctual_late_attribution says whether causes are attributed; unattributed releases are unexplained)";
    if !board.attributing() {
        let rows: Vec<_> = copies
            .iter()
            .map(|(s, c, _)| {
                let late = c.count() - c.at_or_below(board.late_bound_ns);
                (vec![("cpu", s.as_str()), ("cause", "unexplained")], late)
            })
            .collect();
        f.counters("late_releases", help, None, &rows)?;
        return f.gauges(
            "late_attribution",
            "1 when late releases are attributed to causes from a kernel trace, 0 when not",
            None,
            &[(vec![], 0.0)],
        );
    }
    let read: Vec<_> = copies
        .iter()
        .filter_map(|(s, _, _)| {
            let cpu = s.parse().ok()?;
            Some((s.as_str(), board.late_counts(cpu).read()))
        })
        .collect();
    let rows: Vec<_> = read
        .iter()
        .flat_map(|(s, (counts, _))| {
            CAUSES
                .iter()
                .zip(counts)
                .map(|(c, n)| (vec![("cpu", *s), ("cause", *c)], *n))
        })
        .collect();
    f.counters("late_releases", help, None, &rows)?;
    let rows: Vec<_> = read
        .iter()
        .map(|(s, (_, pending))| (vec![("cpu", *s)], *pending as f64))
        .collect();
    f.gauges(
        "late_releases_pending",
        "Late releases not counted in punctual_late_releases_total yet: waiting for the kernel trace to cover them (about 2 s)",
        None,
        &rows,
    )?;
    f.gauges(
        "late_attribution",
        "1 when late releases are attributed to causes from a kernel trace, 0 when not",
        None,
        &[(vec![], 1.0)],
    )
}

/// Steal time per CPU, from /proc/stat.
#[derive(Debug)]
struct StealCollector;

impl Collector for StealCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), Error> {
        let Some(steal) = punctual_rt::host::steal_ns() else {
            return Ok(());
        };
        let names: Vec<String> = steal.iter().map(|(c, _)| c.to_string()).collect();
        let rows: Vec<_> = steal
            .iter()
            .zip(&names)
            .map(|((_, ns), s)| (vec![("cpu", s.as_str())], *ns as f64 / 1e9))
            .collect();
        Families(&mut encoder).counters(
            "steal",
            "Time the hypervisor ran something else while this CPU had work (/proc/stat steal)",
            Some(&Unit::Seconds),
            &rows,
        )
    }
}

#[derive(Debug)]
struct OpsCollector(Arc<Ops>);

impl Collector for OpsCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), Error> {
        let mut f = Families(&mut encoder);
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let ops = &self.0;
        f.counters(
            "config_reloads",
            "SIGHUP re-reads of the configuration file, by result",
            None,
            &[
                (vec![("result", "ok")], load(&ops.reloads_ok)),
                (vec![("result", "error")], load(&ops.reloads_failed)),
            ],
        )?;
        f.counters(
            "history_windows",
            "Windows written to the results store, by result",
            None,
            &[
                (vec![("result", "stored")], load(&ops.windows_stored)),
                (vec![("result", "failed")], load(&ops.windows_failed)),
            ],
        )?;
        let floors = lock(&ops.floors).clone();
        if floors.is_empty() {
            return Ok(());
        }
        let names: Vec<String> = floors.keys().map(|c| c.to_string()).collect();
        let rows = |pick: &dyn Fn(&(f64, f64, u64)) -> f64| -> Vec<(Labels, f64)> {
            floors
                .values()
                .zip(&names)
                .map(|(v, s)| (vec![("cpu", s.as_str())], pick(v)))
                .collect()
        };
        f.gauges(
            "floor_gaps_per_second",
            "Timeline gaps per second in the latest floor measurement (bench gaps)",
            None,
            &rows(&|v| v.0),
        )?;
        f.gauges(
            "floor_lost_ratio",
            "Share of the CPU's time lost in timeline gaps in the latest floor measurement",
            None,
            &rows(&|v| v.1),
        )?;
        f.gauges(
            "floor_gap_max",
            "The longest timeline gap in the latest floor measurement",
            Some(&Unit::Seconds),
            &rows(&|v| v.2 as f64 / 1e9),
        )
    }
}

#[derive(Debug)]
struct CommonCollector {
    http: Arc<ServerStats>,
    host: HostLabels,
}

impl Collector for CommonCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), Error> {
        let mut f = Families(&mut encoder);
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let h = &self.http;
        f.counters(
            "http_responses",
            "Answers of the /metrics server by status class (4xx: malformed requests)",
            None,
            &[
                (vec![("code", "2xx")], load(&h.answered[0])),
                (vec![("code", "4xx")], load(&h.answered[1])),
                (vec![("code", "5xx")], load(&h.answered[2])),
            ],
        )?;
        let mut m = f.0.encode_descriptor(
            "host",
            "The host's kernel and clock",
            None,
            MetricType::Info,
        )?;
        m.encode_info(&self.host)?;
        let mut m = f.0.encode_descriptor(
            "build",
            "The punctual build serving these metrics",
            None,
            MetricType::Info,
        )?;
        m.encode_info(&[("version", env!("CARGO_PKG_VERSION"))])
    }
}

/// `process_cpu_seconds_total` and `process_resident_memory_bytes`, as client libraries export
/// them (the monitor's own cost, watched like any other process's).
#[derive(Debug)]
struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), Error> {
        let mut f = Families(&mut encoder);
        if let Some(cpu) = process_cpu_seconds() {
            f.counters(
                "process_cpu",
                "Total user and system CPU time spent",
                Some(&Unit::Seconds),
                &[(vec![], cpu)],
            )?;
        }
        if let Some(rss) = resident_bytes() {
            f.gauges(
                "process_resident_memory",
                "Resident memory size",
                Some(&Unit::Bytes),
                &[(vec![], rss as f64)],
            )?;
        }
        Ok(())
    }
}

/// This process's CPU time (user + system), seconds.
pub fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some(ticks as f64 / hz)
}

/// This process's resident memory, bytes.
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
    Some(pages * page)
}

impl EncodeLabelSet for HostLabels {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelSetEncoder,
    ) -> Result<(), Error> {
        let v: Vec<(&str, &str)> = self.0.iter().map(|(k, v)| (*k, v.as_str())).collect();
        v.encode(encoder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_indexes_follow_the_schema_bounds() {
        // Bucket i is (2^((i-1)/8), 2^(i/8)]: 1 s is the top of bucket 0.
        assert_eq!(native_index(1.0), 0);
        assert_eq!(native_index(1.0001), 1);
        assert_eq!(native_index(2.0), 8);
        assert_eq!(native_index(0.5), -8);
        assert_eq!(native_index(0.5 * 1.0001), -7);
        let v = 17e-6;
        let i = native_index(v);
        let (lo, hi) = (2f64.powf((i - 1) as f64 / 8.0), 2f64.powf(i as f64 / 8.0));
        assert!(lo < v && v <= hi, "{lo} {v} {hi}");
    }

    #[test]
    fn spans_and_deltas_encode_sparse_buckets() {
        let (spans, deltas) = spans_and_deltas(&[(-3, 2), (-2, 5), (4, 1), (5, 1), (9, 3)]);
        assert_eq!(spans, vec![(-3, 2), (5, 2), (3, 1)]);
        assert_eq!(deltas, vec![2, 3, -4, 0, 2]);
        assert_eq!(spans_and_deltas(&[]), (vec![], vec![]));
    }
}
