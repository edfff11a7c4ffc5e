//! `punctual run --metrics ADDR`: the same endpoint for a running plan. Per task, its lateness
//! (histogram, classic and native, and the worst since the last scrape), releases, missed
//! releases and overruns; per dispatcher CPU, the spin margin in use and the CPU time its thread
//! took. Read at each scrape from the atomics the dispatcher writes (`SlotProgress`,
//! `Heartbeat`), never from anything it locks.

use crate::http::{Limits, Placement, Server, ServerStats};
use crate::metrics::{common, Board, Families, HostLabels, Labels, PEAK_SCRAPE};
use crate::{MetricsHandler, MonitorError};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;
use punctual_dispatch::measure::LiveSlots;
use punctual_stats::LiveCounts;
use std::fmt::Error;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Serve a running plan's metrics on `addr` (bound now, so a taken port fails before anything
/// runs), on threads kept off the dispatcher `cpus`. Dropping the server stops it.
pub fn serve(
    addr: &str,
    slots: LiveSlots,
    cpus: &[usize],
    host: &punctual_result::HostFacts,
) -> Result<Server, MonitorError> {
    let listener = crate::bind(addr)?;
    let http = Arc::new(ServerStats::default());
    let mut registry = common(http.clone(), HostLabels::of(host));
    registry
        .sub_registry_with_prefix("punctual")
        .register_collector(Box::new(PlanCollector {
            slots,
            spare: Board::new(0),
        }));
    Server::start(
        listener,
        Arc::new(MetricsHandler { registry }),
        Arc::new(Placement::avoiding(cpus)),
        Limits::default(),
        http,
    )
    .map_err(MonitorError::Server)
}

/// One task's figures, copied at a scrape.
struct Row {
    task: String,
    cpu: String,
    counts: Option<LiveCounts>,
    peak: u64,
    releases: u64,
    missed: u64,
    overruns: u64,
}

fn labels(r: &Row) -> Labels<'_> {
    vec![("task", r.task.as_str()), ("cpu", r.cpu.as_str())]
}

struct PlanCollector {
    slots: LiveSlots,
    /// Only its pool of copies is used.
    spare: Board,
}

impl std::fmt::Debug for PlanCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PlanCollector")
    }
}

impl Collector for PlanCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), Error> {
        let Some(live) = self.slots.get() else {
            return Ok(()); // not prepared yet
        };
        let rows: Vec<Row> = live
            .slots
            .iter()
            .zip(live.progress.iter())
            .map(|(s, p)| {
                let counts = p.live.as_ref().map(|h| {
                    let mut c = self.spare.take_counts();
                    h.snapshot(&mut c);
                    c
                });
                Row {
                    task: s.name.clone(),
                    cpu: s.cpu.to_string(),
                    counts,
                    peak: p.live.as_ref().map_or(0, |h| h.take_peak(PEAK_SCRAPE)),
                    releases: p.releases.load(Ordering::Relaxed),
                    missed: p.missed.load(Ordering::Relaxed),
                    overruns: p.overruns.load(Ordering::Relaxed),
                }
            })
            .collect();
        let mut f = Families(&mut encoder);
        let result = (|| {
            let hist: Vec<_> = rows
                .iter()
                .filter_map(|r| r.counts.as_ref().map(|c| (labels(r), c)))
                .collect();
            f.histograms(
                "task_lateness",
                "How late each release of the task ran (for wake actions, as its client measured it)",
                &hist,
            )?;
            let v: Vec<_> = rows
                .iter()
                .map(|r| (labels(r), r.peak as f64 / 1e9))
                .collect();
            f.gauges(
                "task_lateness_max",
                "The worst lateness since the previous scrape",
                Some(&Unit::Seconds),
                &v,
            )?;
            for (name, help, pick) in [
                ("task_releases", "Releases of the task so far", 0),
                (
                    "task_missed_releases",
                    "Releases whose instant had passed before the previous one finished",
                    1,
                ),
                (
                    "task_overruns",
                    "Releases whose action ran longer than the task's wcet",
                    2,
                ),
            ] {
                let v: Vec<_> = rows
                    .iter()
                    .map(|r| (labels(r), [r.releases, r.missed, r.overruns][pick]))
                    .collect();
                f.counters(name, help, None, &v)?;
            }
            let names: Vec<String> = live.cpus.iter().map(|c| c.to_string()).collect();
            let margins: Vec<_> = names
                .iter()
                .zip(live.heartbeats.iter())
                .map(|(c, h)| {
                    (
                        vec![("cpu", c.as_str())],
                        h.margin_ns.load(Ordering::Relaxed) as f64 / 1e9,
                    )
                })
                .collect();
            f.gauges(
                "dispatcher_margin",
                "How early the dispatcher stops sleeping and spins to a release",
                Some(&Unit::Seconds),
                &margins,
            )?;
            let used = dispatcher_cpu_seconds();
            let cpu_rows: Vec<_> = names
                .iter()
                .zip(&live.cpus)
                .filter_map(|(n, c)| {
                    used.iter()
                        .find(|u| u.0 == *c)
                        .map(|u| (vec![("cpu", n.as_str())], u.1))
                })
                .collect();
            f.counters(
                "dispatcher_cpu",
                "CPU time the dispatcher thread of each CPU has used",
                Some(&Unit::Seconds),
                &cpu_rows,
            )?;
            let mut m =
                f.0.encode_descriptor("plan", "The plan being run", None, MetricType::Info)?;
            m.encode_info(&[("tasks", live.slots.len().to_string())])
        })();
        for r in rows {
            if let Some(c) = r.counts {
                self.spare.give_counts(c);
            }
        }
        result
    }
}

/// CPU seconds of this process's dispatcher threads (`punctual-d<CPU>`), by CPU.
fn dispatcher_cpu_seconds() -> Vec<(usize, f64)> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let mut out = Vec::new();
    for e in dir.flatten() {
        let Some(stat) = punctual_rt::ProcStat::read(e.path().join("stat")) else {
            continue;
        };
        let Some(cpu) = stat
            .name
            .strip_prefix("punctual-d")
            .and_then(|c| c.parse::<usize>().ok())
        else {
            continue;
        };
        // Fields 14 and 15: user and system time, in clock ticks.
        let ticks = |n: usize| stat.field::<u64>(n).unwrap_or(0);
        out.push((cpu, (ticks(14) + ticks(15)) as f64 / hz));
    }
    out
}
