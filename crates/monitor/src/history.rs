//! History: every window (10 minutes by default) becomes a result document of its own
//! (`punctual.result/1`, command `monitor`, one `wakeup_latency` series per measured CPU), so
//! `results list`, `compare` and `report` work on monitored history as on any run. A window is
//! the difference of two copies of each CPU's live histogram: nothing accumulates between windows,
//! and the copies are allocated once per CPU.

use crate::metrics::PEAK_WINDOW;
use punctual_result::{doc::kind, ResultDoc, Series, Status};
use punctual_stats::{LiveCounts, LiveHistogram, Recorder};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The tag every stored window carries (`results list --tag monitor=window`).
pub const WINDOW_TAG: (&str, &str) = ("monitor", "window");

struct Followed {
    hist: Arc<LiveHistogram>,
    /// The counts at the previous close.
    prev: LiveCounts,
}

/// Turns the live histograms into one document per window.
pub struct History {
    /// Command, host and held settings, copied into every window's document.
    template: ResultDoc,
    cpus: BTreeMap<usize, Followed>,
    now: LiveCounts,
    delta: LiveCounts,
    /// When the open window began: CLOCK_MONOTONIC and Unix time, ns.
    began: (u64, i128),
    /// Unix time minus CLOCK_MONOTONIC, ns.
    offset: i128,
    steal_before: Option<Vec<(usize, u64)>>,
    index: u64,
}

/// How to read the steal counters (per CPU, ns); `None` where the kernel has none.
pub type StealSource = dyn Fn() -> Option<Vec<(usize, u64)>> + Send + Sync;

impl History {
    /// Windows of documents like `template`, the first opening at `mono` (CLOCK_MONOTONIC ns),
    /// which is `unix` ns on the wall clock.
    pub fn new(template: ResultDoc, mono: u64, unix: i128, steal: &StealSource) -> History {
        History {
            template,
            cpus: BTreeMap::new(),
            now: LiveCounts::new(),
            delta: LiveCounts::new(),
            began: (mono, unix),
            offset: unix - mono as i128,
            steal_before: steal(),
            index: 0,
        }
    }

    /// Follow these CPUs from now on (the measured set, after a reload).
    pub fn follow(&mut self, active: &[(usize, Arc<LiveHistogram>)]) {
        for (cpu, h) in active {
            self.cpus.entry(*cpu).or_insert_with(|| {
                let mut prev = LiveCounts::new();
                h.snapshot(&mut prev);
                let _ = h.take_peak(PEAK_WINDOW);
                Followed {
                    hist: h.clone(),
                    prev,
                }
            });
        }
    }

    /// Windows closed so far.
    pub fn closed(&self) -> u64 {
        self.index
    }

    /// Close the window at `mono` (CLOCK_MONOTONIC ns) and open the next: the document of what
    /// each of `active` measured in it (`None` when nothing was). `interval` is the period.
    pub fn close(
        &mut self,
        mono: u64,
        active: &[usize],
        interval: u64,
        steal: &StealSource,
    ) -> Option<ResultDoc> {
        let mut series = Vec::new();
        let mut all = Recorder::new();
        let mut missed = 0u64;
        for (i, cpu) in active.iter().enumerate() {
            let Some(f) = self.cpus.get_mut(cpu) else {
                continue;
            };
            f.hist.snapshot(&mut self.now);
            self.delta.copy_from(&self.now);
            self.delta.subtract(&f.prev);
            f.prev.copy_from(&self.now);
            let peak = f.hist.take_peak(PEAK_WINDOW);
            if self.delta.count() == 0 && self.delta.missed() == 0 {
                continue;
            }
            let rec = self.delta.to_recorder(peak);
            missed += rec.missed_periods();
            let _ = all.merge(&rec);
            series.push(Series::from_recorder(
                format!("thread {i}"),
                kind::WAKEUP_LATENCY,
                Some(*cpu),
                &rec,
            ));
        }
        let began = self.began;
        let unix = mono as i128 + self.offset;
        self.began = (mono, unix);
        let steal_after = steal();
        let steal_before = std::mem::replace(&mut self.steal_before, steal_after.clone());
        if series.is_empty() {
            return None;
        }
        if series.len() > 1 {
            series.push(Series::from_recorder(
                "total",
                kind::WAKEUP_LATENCY,
                None,
                &all,
            ));
        }
        let mut doc = self.template.clone();
        doc.started_at = punctual_result::doc::rfc3339_at(began.1);
        doc.ended_at = punctual_result::doc::rfc3339_at(unix);
        doc.status = Status::Ok;
        doc.series = series;
        let length = mono.saturating_sub(began.0);
        let s = &mut doc.settings.extra;
        s.insert("mode".into(), "abs".into());
        s.insert("clock".into(), "monotonic".into());
        s.insert("interval_ns".into(), interval.into());
        s.insert("threads".into(), active.len().into());
        s.insert("duration_ns".into(), length.into());
        s.insert(
            "monitor_window".into(),
            serde_json::json!({
                "index": self.index,
                "missed_periods": missed,
                "source": "live histogram: percentiles, sum and max exact; min, stddev and within to 0.1 %",
            }),
        );
        if let (Some(before), Some(after)) = (steal_before, steal_after) {
            let per_cpu: serde_json::Map<String, serde_json::Value> = after
                .iter()
                .map(|(cpu, ns)| {
                    let b = before.iter().find(|(c, _)| c == cpu).map_or(*ns, |x| x.1);
                    (cpu.to_string(), ns.saturating_sub(b).into())
                })
                .collect();
            s.insert("steal_ns".into(), per_cpu.into());
            s.insert("steal_window_ns".into(), length.into());
        }
        self.index += 1;
        Some(doc)
    }
}
