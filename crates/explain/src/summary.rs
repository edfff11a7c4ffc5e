//! Causes counted per series, with the offenders by name: what the tables, the figure and the
//! result document show.

use crate::attribute::{attribute, Attribution, Cause, Evidence};
use crate::record::LateRelease;
use punctual_trace::capture::Captured;
use std::collections::BTreeMap;

/// Late releases of one series by cause.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Per cause, in [`Cause::ALL`] order.
    pub counts: [u64; Cause::ALL.len()],
    /// (cause, offender, releases), most releases first.
    pub offenders: Vec<(Cause, String, u64)>,
    /// Late releases the timing thread's log had no room for (counted `unexplained`).
    pub unlogged: u64,
}

impl Tally {
    pub fn late(&self) -> u64 {
        self.counts.iter().sum()
    }

    pub fn count(&self, c: Cause) -> u64 {
        self.counts[index(c)]
    }

    fn add(&mut self, a: &Attribution) {
        self.counts[index(a.cause)] += 1;
        if let Some(name) = &a.offender {
            match self
                .offenders
                .iter_mut()
                .find(|(c, n, _)| *c == a.cause && n == name)
            {
                Some((_, _, k)) => *k += 1,
                None => self.offenders.push((a.cause, name.clone(), 1)),
            }
        }
    }

    /// `{"steal": n, ..., "unexplained": n}`: every cause, zeros included (SPEC section 9).
    pub fn to_json(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        for c in Cause::ALL {
            m.insert(c.name().into(), self.count(c).into());
        }
        serde_json::Value::Object(m)
    }

    /// The offenders, most releases first, as `[{"cause", "name", "count"}]` (at most `n`).
    pub fn offenders_json(&self, n: usize) -> serde_json::Value {
        self.offenders
            .iter()
            .take(n)
            .map(|(c, name, k)| serde_json::json!({"cause": c.name(), "name": name, "count": k}))
            .collect()
    }

    /// Share of late releases that are punctual's own (`lead`, `dispatcher`).
    pub fn own(&self) -> u64 {
        Cause::ALL
            .iter()
            .filter(|c| c.is_own())
            .map(|c| self.count(*c))
            .sum()
    }

    pub fn merge(&mut self, other: &Tally) {
        for (a, b) in self.counts.iter_mut().zip(other.counts) {
            *a += b;
        }
        for (c, n, k) in &other.offenders {
            match self
                .offenders
                .iter_mut()
                .find(|(c2, n2, _)| c2 == c && n2 == n)
            {
                Some((_, _, k2)) => *k2 += k,
                None => self.offenders.push((*c, n.clone(), *k)),
            }
        }
        self.offenders
            .sort_by(|a, b| b.2.cmp(&a.2).then(a.1.cmp(&b.1)));
        self.unlogged += other.unlogged;
    }
}

fn index(c: Cause) -> usize {
    Cause::ALL.iter().position(|x| *x == c).expect("listed")
}

/// What the capture cost and covered.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CaptureStats {
    pub cpus: Vec<usize>,
    pub window_ns: u64,
    pub events: u64,
    pub evicted: u64,
    pub lost: u64,
    pub peak_memory_bytes: u64,
    /// CPU time of the drain thread (the user-space side of the cost).
    pub drain_cpu_ns: u64,
    pub enabled: Vec<String>,
    pub by_kind: std::collections::BTreeMap<&'static str, u64>,
    pub by_cpu: std::collections::BTreeMap<usize, u64>,
    /// Switches out of idle the kernel did not record, put back / without evidence
    /// (`punctual_trace::idle_exit`).
    pub idle_exits: punctual_trace::idle_exit::Repair,
    /// The traced CPUs whose idle entered only the polling state (`Captured::idle_polled`).
    pub idle_polled: Vec<usize>,
    /// `--explain-trace`: the file the trace was kept in, or why it could not be written.
    pub kept_in: Option<Result<String, String>>,
    /// The measuring threads' stalls read beside the events, and those their logs had no room
    /// for (a stretch not logged reads as the thread's own).
    pub stalls: u64,
    pub stalls_dropped: u64,
}

impl CaptureStats {
    pub fn of(c: &Captured) -> CaptureStats {
        CaptureStats {
            cpus: c.cpus.clone(),
            window_ns: c.end_ns.saturating_sub(c.start_ns),
            events: c.seen,
            evicted: c.evicted,
            lost: c.lost,
            peak_memory_bytes: c.memory_bytes() as u64,
            drain_cpu_ns: c.drain_cpu_ns,
            enabled: c.enabled.clone(),
            by_kind: c.by_kind.clone(),
            by_cpu: c
                .cpus
                .iter()
                .copied()
                .zip(c.seen_by_cpu.iter().copied())
                .collect(),
            idle_exits: c.idle_exits,
            idle_polled: c
                .cpus
                .iter()
                .enumerate()
                .filter(|(i, _)| c.idle_polled.get(*i).copied().unwrap_or(false))
                .map(|(_, &cpu)| cpu)
                .collect(),
            kept_in: c.kept_in_text(),
            stalls: c.stalls.len() as u64,
            stalls_dropped: c.stalls_dropped,
        }
    }

    pub fn to_json(&self, bound: u64) -> serde_json::Value {
        serde_json::json!({
            "bound_ns": bound,
            "cpus": self.cpus,
            "window_ns": self.window_ns,
            "events": self.events,
            "evicted_events": self.evicted,
            "lost_events": self.lost,
            "peak_memory_bytes": self.peak_memory_bytes,
            "drain_cpu_ns": self.drain_cpu_ns,
            "events_enabled": self.enabled,
            "events_by_kind": self.by_kind,
            "events_by_cpu": self.by_cpu,
            "idle_exits_put_back": self.idle_exits.inferred,
            "idle_exits_unplaced": self.idle_exits.unplaced,
            "idle_polled_cpus": self.idle_polled,
            "trace_file": self.kept_in.as_ref().and_then(|k| k.as_ref().ok()),
            "trace_file_error": self.kept_in.as_ref().and_then(|k| k.as_ref().err()),
            "stalls": self.stalls,
            "stalls_dropped": self.stalls_dropped,
        })
    }
}

/// Every late release of a run explained.
#[derive(Clone, Debug, Default)]
pub struct Explanation {
    pub bound: u64,
    /// Per series (the caller's numbering).
    pub series: BTreeMap<u32, Tally>,
    pub capture: CaptureStats,
    /// Each late release with its cause: the first [`KEEP_DETAILS`], then the first
    /// [`EXAMPLES_PER_CAUSE`] of each cause not yet that often among them.
    pub details: Vec<(LateRelease, Attribution)>,
    /// The latest releases of the run with their causes (at most [`KEEP_WORST`], latest first).
    pub worst: Vec<(LateRelease, Attribution)>,
}

/// The latest releases kept one by one whatever their order in the run.
pub const KEEP_WORST: usize = 10;

fn example(r: &LateRelease, a: &Attribution) -> serde_json::Value {
    serde_json::json!({
        "cause": a.cause.name(),
        "series": r.series,
        "target_ns": r.target,
        "lateness_ns": r.lateness(),
        "tid": r.tid,
        "cpu": a.cpu,
        "offender": a.offender,
        "why": a.why,
    })
}

/// A release that came due while punctual's loop was still late on an earlier release of its own
/// (the loop started, skipped or handed this one over only after getting past that one) was late
/// for that one's reason: it takes the cause of the chain's first release. A chain is per loop
/// thread and holds both its self-timed releases and its hand-overs to `wake` clients (for those,
/// the loop's instant is the planned hand-over and it got past it when it handed over). A member
/// keeps its own cause unless that is only the loop's running: a self-timed release whose loop was
/// behind with its own work or spun across the instant is judged on its own window.
/// Measured on a 10 us mark plan: most of what remained `dispatcher` were such chains, 10 us
/// apart and ending at one instant; and on a hog's CPU shared by a dispatcher and its client,
/// hand-overs due after the hog's burst but before the loop caught up read `dispatcher`.
fn inherit_in_chains(records: &[LateRelease], attributed: &mut [Attribution]) {
    // (loop thread, when it had to act, when it got past it, record)
    let mut steps: Vec<(i32, u64, u64, usize)> = records
        .iter()
        .enumerate()
        .filter_map(|(i, r)| match r.handover {
            Some(h) => Some((h.tid, h.planned, h.at, i)),
            None if r.waiter.is_punctuals() => Some((r.tid, r.target, r.actual, i)),
            None => None,
        })
        .collect();
    steps.sort_unstable();
    // Per thread: the chain's first step and how far the loop's lateness reached.
    let mut head: Option<(i32, u64, usize, u64)> = None;
    for (tid, due, past, i) in steps {
        match head {
            Some((t, first_due, h, reach)) if t == tid && due <= reach => {
                let r = &records[i];
                let loops_own = attributed[i].cause == Cause::Dispatcher
                    && match r.handover {
                        Some(_) => past > due,
                        None => !r.behind && r.last_read.is_none(),
                    };
                if loops_own && h != i {
                    let first = &records[h];
                    let mut a = attributed[h].clone();
                    a.why = format!(
                        "due while {} was still late on its release {} earlier (late by {}): {}",
                        // A hand-over's chain is its dispatcher's.
                        match first.handover {
                            Some(_) => "the loop",
                            None => first.waiter.who(),
                        },
                        punctual_time::format_ns(due - first_due),
                        punctual_time::format_ns(first.lateness()),
                        a.why
                    );
                    attributed[i] = a;
                }
                head = Some((t, first_due, h, reach.max(past)));
            }
            _ => head = Some((tid, due, i, past)),
        }
    }
}

/// A client's release decided by another client of the run holding its CPU (`dispatcher`: that
/// client is punctual's) takes that client's cause when the holder was itself late and stayed
/// there: its latest late release `j` came due no later than this one's instant and ran before
/// this one did, it did not leave its CPU to wait between its late read and this instant (the
/// trace shows it), and this release is late by at most the holder's lateness plus the bound (on
/// time, the holder would have left this one within it). Otherwise the holder was there on time,
/// spinning or on its way back, and the placement that put both on one CPU is punctual's own.
/// Measured on this VM (kurt-periodic (c)/(d), 2026-11-30): a client whose hand-over came late
/// after the loop's timer was held by the host (`steal`) returned inside the next client's
/// window, which read `dispatcher`.
fn inherit_behind_clients(
    ev: &Evidence,
    bound: u64,
    records: &[LateRelease],
    attributed: &mut [Attribution],
) {
    // Per client thread, its late releases in the order they came due.
    let mut late_of: std::collections::HashMap<i32, Vec<usize>> = Default::default();
    for (i, r) in records.iter().enumerate() {
        if r.handover.is_some() {
            late_of.entry(r.tid).or_default().push(i);
        }
    }
    for v in late_of.values_mut() {
        v.sort_by_key(|&i| (records[i].target, i));
    }
    let mut order: Vec<usize> = (0..records.len()).collect();
    order.sort_by_key(|&i| (records[i].target, i));
    for i in order {
        let r = &records[i];
        let Some(p) = attributed[i]
            .holder
            .filter(|&p| attributed[i].cause == Cause::Dispatcher && p != r.tid)
        else {
            continue;
        };
        let Some(&j) = late_of.get(&p).and_then(|v| {
            v.iter()
                .rev()
                .find(|&&j| records[j].target <= r.target && records[j].actual <= r.actual)
        }) else {
            continue;
        };
        let x = &records[j];
        let stayed = x.actual >= r.target || !ev.left_waiting(x.cpu, p, x.actual, r.target);
        if !stayed || r.lateness() > x.lateness().saturating_add(bound) {
            continue;
        }
        let mut a = attributed[j].clone();
        a.why = format!(
            "behind client pid {p}, on its CPU since its own release {} earlier, late by {}: {}",
            punctual_time::format_ns(r.target - x.target),
            punctual_time::format_ns(x.lateness()),
            a.why
        );
        attributed[i] = a;
    }
}

/// Attributions kept one by one for `--json`'s detail and tests.
pub const KEEP_DETAILS: usize = 4096;

/// Releases shown one by one per cause in the document (`settings.explain.examples`).
pub const EXAMPLES_PER_CAUSE: usize = 5;

impl Explanation {
    /// A few releases of each cause with how each was decided: `[{"cause", "series",
    /// "target_ns", "lateness_ns", "cpu", "offender", "why"}]`.
    pub fn examples_json(&self) -> serde_json::Value {
        let mut out = Vec::new();
        for c in Cause::ALL {
            for (r, a) in self
                .details
                .iter()
                .filter(|(_, a)| a.cause == c)
                .take(EXAMPLES_PER_CAUSE)
            {
                out.push(example(r, a));
            }
        }
        serde_json::Value::Array(out)
    }

    /// The latest releases of the run, latest first, as [`Explanation::examples_json`] gives them.
    pub fn worst_json(&self) -> serde_json::Value {
        self.worst.iter().map(|(r, a)| example(r, a)).collect()
    }

    pub fn tally(&self, series: u32) -> Tally {
        self.series.get(&series).cloned().unwrap_or_default()
    }

    /// All series together.
    pub fn total(&self) -> Tally {
        let mut t = Tally::default();
        for s in self.series.values() {
            t.merge(s);
        }
        t
    }
}

/// Explain `records` from `trace`. `unlogged`: per series, late releases the logs had no room for.
pub fn explain(
    trace: &Captured,
    bound: u64,
    records: &[LateRelease],
    unlogged: &[(u32, u64)],
) -> Explanation {
    let ev = Evidence::new(trace, records);
    let mut out = Explanation {
        bound,
        capture: CaptureStats::of(trace),
        ..Explanation::default()
    };
    let mut attributed: Vec<Attribution> = records.iter().map(|r| attribute(&ev, r)).collect();
    inherit_in_chains(records, &mut attributed);
    inherit_behind_clients(&ev, bound, records, &mut attributed);
    let mut kept_of = [0usize; Cause::ALL.len()];
    for (r, a) in records.iter().zip(attributed) {
        out.series.entry(r.series).or_default().add(&a);
        if out.worst.len() < KEEP_WORST
            || out
                .worst
                .last()
                .is_some_and(|(w, _)| w.lateness() < r.lateness())
        {
            out.worst.push((*r, a.clone()));
            out.worst
                .sort_by_key(|(w, _)| std::cmp::Reverse(w.lateness()));
            out.worst.truncate(KEEP_WORST);
        }
        // The first ones, and past them the first few of each cause: a rare cause late in a run
        // (a few `dispatcher` among 9,000 late releases of a 10 us plan) still has its examples.
        let kept = &mut kept_of[index(a.cause)];
        if out.details.len() < KEEP_DETAILS || *kept < EXAMPLES_PER_CAUSE {
            *kept += 1;
            out.details.push((*r, a));
        }
    }
    for &(s, n) in unlogged {
        if n > 0 {
            let t = out.series.entry(s).or_default();
            t.counts[index(Cause::Unexplained)] += n;
            t.unlogged += n;
        }
    }
    for t in out.series.values_mut() {
        t.offenders
            .sort_by(|a, b| b.2.cmp(&a.2).then(a.1.cmp(&b.1)));
    }
    out
}
