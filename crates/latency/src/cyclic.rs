//! What cyclictest keeps per thread beside punctual's own recorder, so its formats can be written
//! exactly: a histogram of whole microseconds (or nanoseconds, `-N`) with its overflow count and the
//! cycle numbers of the first overflows, the last latency (`Act:`), the sum in the same unit (its
//! `Avg:` is the truncated quotient of those), the thread id, and the first spikes above a trigger.
//!
//! The measuring loop writes, any thread may read while it runs (the status lines): every field is
//! an atomic written by one thread only, with relaxed loads and stores (no read-modify-write, no
//! lock), all preallocated before the first release.

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering::Relaxed};

/// cyclictest's `stat->min` before the first sample: its status lines show it.
pub const MIN_BEFORE_ANY: u64 = 1_000_000;

/// What to keep, in cyclictest's terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CyclicConfig {
    /// Buckets of the histogram (`-h N`); 0: no histogram.
    pub buckets: usize,
    /// Nanoseconds per unit: 1000 (microseconds, the default) or 1 (`-N`).
    pub unit_ns: u64,
    /// `--spike`: record samples above this many units.
    pub spike_above: Option<u64>,
    /// `--spike-nodes`: how many spikes to keep (all are counted).
    pub spike_nodes: usize,
}

impl Default for CyclicConfig {
    fn default() -> Self {
        CyclicConfig {
            buckets: 0,
            unit_ns: 1000,
            spike_above: None,
            spike_nodes: 1024,
        }
    }
}

/// One thread's live figures (see the module's first lines).
pub struct CyclicStats {
    cfg: CyclicConfig,
    buckets: Box<[AtomicU64]>,
    overflows: AtomicU64,
    outliers: Box<[AtomicU64]>,
    cycles: AtomicU64,
    min: AtomicU64,
    max: AtomicU64,
    act: AtomicU64,
    sum: AtomicU64,
    tid: AtomicI32,
    spikes: Box<[(AtomicU64, AtomicU64)]>,
    spike_count: AtomicU64,
}

fn zeros(n: usize) -> Box<[AtomicU64]> {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

impl CyclicStats {
    pub fn new(cfg: CyclicConfig) -> CyclicStats {
        let spikes = if cfg.spike_above.is_some() {
            cfg.spike_nodes
        } else {
            0
        };
        CyclicStats {
            cfg,
            buckets: zeros(cfg.buckets),
            overflows: AtomicU64::new(0),
            // cyclictest keeps as many overflow cycle numbers as it has buckets.
            outliers: zeros(cfg.buckets),
            cycles: AtomicU64::new(0),
            min: AtomicU64::new(MIN_BEFORE_ANY),
            max: AtomicU64::new(0),
            act: AtomicU64::new(0),
            sum: AtomicU64::new(0),
            tid: AtomicI32::new(0),
            spikes: (0..spikes)
                .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
                .collect(),
            spike_count: AtomicU64::new(0),
        }
    }

    pub fn config(&self) -> CyclicConfig {
        self.cfg
    }

    /// The measuring thread says who it is (`T: 0 (12345)`).
    pub fn set_tid(&self, tid: i32) {
        self.tid.store(tid, Relaxed);
    }

    /// Sample number `cycle` (from 0) of `latency_ns`, the thread having run at `done_ns`. Only the
    /// measuring thread calls this.
    #[inline(always)]
    pub fn record(&self, cycle: u64, latency_ns: u64, done_ns: u64) {
        let v = latency_ns / self.cfg.unit_ns;
        if v < self.min.load(Relaxed) {
            self.min.store(v, Relaxed);
        }
        if v > self.max.load(Relaxed) {
            self.max.store(v, Relaxed);
        }
        self.act.store(v, Relaxed);
        self.sum
            .store(self.sum.load(Relaxed).saturating_add(v), Relaxed);
        if let Some(limit) = self.cfg.spike_above {
            if v > limit {
                let n = self.spike_count.load(Relaxed);
                if let Some((ts, val)) = self.spikes.get(n as usize) {
                    // cyclictest's time stamp: the wake-up in whole microseconds of the clock.
                    ts.store(done_ns / 1000, Relaxed);
                    val.store(v, Relaxed);
                }
                self.spike_count.store(n + 1, Relaxed);
            }
        }
        if !self.buckets.is_empty() {
            match self.buckets.get(v as usize) {
                Some(b) => b.store(b.load(Relaxed) + 1, Relaxed),
                None => {
                    let n = self.overflows.load(Relaxed);
                    if let Some(o) = self.outliers.get(n as usize) {
                        o.store(cycle, Relaxed);
                    }
                    self.overflows.store(n + 1, Relaxed);
                }
            }
        }
        self.cycles.store(cycle + 1, Relaxed);
    }

    /// The figures of a status line, as they are now.
    pub fn status(&self) -> StatusFigures {
        StatusFigures {
            tid: self.tid.load(Relaxed),
            cycles: self.cycles.load(Relaxed),
            min: self.min.load(Relaxed),
            act: self.act.load(Relaxed),
            sum: self.sum.load(Relaxed),
            max: self.max.load(Relaxed),
        }
    }

    /// Everything, as plain data for the result document (read after the thread has finished).
    pub fn snapshot(&self) -> CyclicThread {
        let overflows = self.overflows.load(Relaxed);
        let kept = (overflows as usize).min(self.outliers.len());
        let spikes = (self.spike_count.load(Relaxed) as usize).min(self.spikes.len());
        CyclicThread {
            status: self.status(),
            histogram: self
                .buckets
                .iter()
                .enumerate()
                .filter_map(|(i, b)| {
                    let n = b.load(Relaxed);
                    (n > 0).then_some((i as u64, n))
                })
                .collect(),
            overflows,
            overflow_cycles: self.outliers[..kept]
                .iter()
                .map(|o| o.load(Relaxed))
                .collect(),
            spikes: self.spikes[..spikes]
                .iter()
                .map(|(t, v)| (t.load(Relaxed), v.load(Relaxed)))
                .collect(),
            spike_count: self.spike_count.load(Relaxed),
        }
    }
}

/// One status line's numbers, in the configured unit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusFigures {
    pub tid: i32,
    pub cycles: u64,
    pub min: u64,
    pub act: u64,
    pub sum: u64,
    pub max: u64,
}

impl StatusFigures {
    /// cyclictest's `Avg:`: the truncated mean, 0 before the first sample.
    pub fn avg(&self) -> u64 {
        self.sum.checked_div(self.cycles).unwrap_or(0)
    }
}

/// One thread's cyclictest figures at the end of a run (in the result document's
/// `cyclictest.threads`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CyclicThread {
    #[serde(flatten)]
    pub status: StatusFigures,
    /// Non-empty buckets: (bucket, count).
    pub histogram: Vec<(u64, u64)>,
    pub overflows: u64,
    /// Cycle numbers (from 0) of the first overflows, at most one per bucket.
    pub overflow_cycles: Vec<u64>,
    /// The first spikes: (wake-up time in us of the run's clock, value in the unit).
    pub spikes: Vec<(u64, u64)>,
    pub spike_count: u64,
}

/// cyclictest's figures of a whole run, as the result document keeps them
/// (`extra.cyclictest`): enough to write its histogram, status lines and JSON again.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CyclicDoc {
    /// Nanoseconds per unit of every value below: 1000, or 1 (`-N`).
    pub unit_ns: u64,
    /// Histogram buckets (`-h N`); 0: none.
    pub buckets: usize,
    pub threads: Vec<CyclicThreadDoc>,
    /// What the writer of a format needs beyond the figures (the drop-in's run facts).
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// One thread of [`CyclicDoc`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CyclicThreadDoc {
    pub index: usize,
    pub cpu: Option<usize>,
    pub interval_ns: u64,
    pub priority: u32,
    #[serde(flatten)]
    pub figures: CyclicThread,
}

impl CyclicDoc {
    /// The key under the document's top level.
    pub const KEY: &'static str = "cyclictest";

    /// Read it back from a document, if the run kept it.
    pub fn from_doc(doc: &punctual_result::ResultDoc) -> Option<CyclicDoc> {
        serde_json::from_value(doc.extra.get(Self::KEY)?.clone()).ok()
    }

    pub fn into_doc(self, doc: &mut punctual_result::ResultDoc) {
        doc.extra.insert(
            Self::KEY.into(),
            serde_json::to_value(self).expect("cyclictest figures serialise"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(buckets: usize) -> CyclicStats {
        CyclicStats::new(CyclicConfig {
            buckets,
            ..CyclicConfig::default()
        })
    }

    #[test]
    fn samples_land_in_their_whole_microsecond_and_overflows_keep_their_cycle() {
        let s = stats(10);
        for (cycle, ns) in [5_999u64, 6_000, 9_999, 10_000, 123_456, 0]
            .into_iter()
            .enumerate()
        {
            s.record(cycle as u64, ns, 1_000_000);
        }
        let t = s.snapshot();
        assert_eq!(t.histogram, vec![(0, 1), (5, 1), (6, 1), (9, 1)]);
        assert_eq!(t.overflows, 2);
        assert_eq!(t.overflow_cycles, vec![3, 4]);
        assert_eq!(t.status.cycles, 6);
        assert_eq!((t.status.min, t.status.max, t.status.act), (0, 123, 0));
        // (5 + 6 + 9 + 10 + 123 + 0) / 6, truncated as cyclictest does.
        assert_eq!(t.status.avg(), 25);
    }

    #[test]
    fn overflow_cycles_stop_at_one_per_bucket_but_all_are_counted() {
        let s = stats(2);
        for c in 0..5 {
            s.record(c, 50_000, 0);
        }
        let t = s.snapshot();
        assert_eq!(t.overflows, 5);
        assert_eq!(t.overflow_cycles, vec![0, 1]);
        assert!(t.histogram.is_empty());
    }

    #[test]
    fn before_the_first_sample_min_is_cyclictests_initial_value() {
        let s = stats(0);
        let f = s.status();
        assert_eq!((f.min, f.cycles, f.avg()), (MIN_BEFORE_ANY, 0, 0));
        // Without -h nothing is bucketed, nothing overflows.
        s.record(0, 5_000_000, 0);
        assert_eq!(s.snapshot().overflows, 0);
    }

    #[test]
    fn nanosecond_units_bucket_by_the_nanosecond() {
        let s = CyclicStats::new(CyclicConfig {
            buckets: 100,
            unit_ns: 1,
            ..CyclicConfig::default()
        });
        s.record(0, 42, 0);
        assert_eq!(s.snapshot().histogram, vec![(42, 1)]);
    }

    #[test]
    fn the_document_form_round_trips() {
        let s = stats(4);
        s.record(0, 2_500, 0);
        s.record(1, 9_000, 0);
        let host = punctual_measure::fake_host();
        let mut doc = punctual_result::ResultDoc::new(vec![], host, "t".into());
        let mut extra = serde_json::Map::new();
        extra.insert("histofall".into(), true.into());
        let c = CyclicDoc {
            unit_ns: 1000,
            buckets: 4,
            threads: vec![CyclicThreadDoc {
                index: 0,
                cpu: Some(1),
                interval_ns: 1_000_000,
                priority: 80,
                figures: s.snapshot(),
            }],
            extra,
        };
        c.clone().into_doc(&mut doc);
        let text = serde_json::to_string(&doc).unwrap();
        let back: punctual_result::ResultDoc = serde_json::from_str(&text).unwrap();
        assert_eq!(CyclicDoc::from_doc(&back), Some(c));
    }

    #[test]
    fn spikes_keep_the_first_nodes_and_count_all() {
        let s = CyclicStats::new(CyclicConfig {
            spike_above: Some(20),
            spike_nodes: 2,
            ..CyclicConfig::default()
        });
        for (c, us) in [10u64, 21, 30, 20, 40].into_iter().enumerate() {
            s.record(c as u64, us * 1000, 7_000_000 + c as u64 * 1000);
        }
        let t = s.snapshot();
        assert_eq!(t.spike_count, 3);
        assert_eq!(t.spikes, vec![(7_001, 21), (7_002, 30)]);
    }
}
