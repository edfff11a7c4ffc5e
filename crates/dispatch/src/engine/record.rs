//! Counting a release once it has fired: its slot's statistics, the live figures, and for
//! `--explain` the log of late and missed releases with what the loop knew of them.

use super::sources::{Release, Timed};
use super::{Actions, Handed, SlotProgress, SlotSpec, SlotStats};
use punctual_explain::{Handover, LateLog, LateRelease, OwnWork, Waiter, WorkKind};
use punctual_periodic::channel::Ack;
use punctual_stats::Recorder;
use std::sync::atomic::Ordering;

/// Counts one release in its slot's statistics. Returns its lateness for the live figures (`None`:
/// a delegated action whose client has not reported on its previous release).
#[inline(always)]
pub(super) fn record_release(
    st: &mut SlotStats,
    spec: &SlotSpec,
    delegated: bool,
    r: &Release,
    t: &Timed,
) -> Option<u64> {
    st.releases += 1;
    if t.fired.error {
        st.errors += 1;
    }
    if spec.wcet.is_some_and(|w| t.done - t.started > w) {
        st.overruns += 1;
    }
    let mut lateness = None;
    if delegated {
        let own = t.started.saturating_sub(r.act_at);
        if let Some(d) = st.dispatch.as_mut() {
            d.record(own);
        }
        match t.fired.previous {
            Some(Ack::Done {
                lateness: l,
                woke_late,
                ..
            }) => {
                st.lateness.record(l);
                if woke_late {
                    st.lateness.add_woke_late();
                }
                lateness = Some(l);
            }
            Some(Ack::Missed) => st.lateness.add_missed(1),
            None => {}
        }
    } else {
        let l = t.started.saturating_sub(r.target);
        st.lateness.record(l);
        if t.slept && t.woke > r.target {
            st.lateness.add_woke_late();
        }
        lateness = Some(l);
    }
    lateness
}

/// Releases whose instant passed before the previous one finished, counted everywhere.
#[inline(always)]
pub(super) fn count_missed(st: &mut SlotStats, pr: &SlotProgress, missed: u64) {
    st.lateness.add_missed(missed);
    pr.missed.fetch_add(missed, Ordering::Relaxed);
    if let Some(h) = &pr.live {
        h.add_missed(missed);
    }
}

/// The slot's live figures: releases and overruns so far, the largest lateness, and (when kept)
/// every lateness in the live histogram.
#[inline(always)]
pub(super) fn publish(pr: &SlotProgress, st: &SlotStats, lateness: Option<u64>) {
    pr.releases.store(st.releases, Ordering::Relaxed);
    pr.overruns.store(st.overruns, Ordering::Relaxed);
    if let Some(l) = lateness {
        if l > pr.max_ns.load(Ordering::Relaxed) {
            pr.max_ns.store(l, Ordering::Relaxed);
        }
        if let Some(h) = &pr.live {
            h.record(l);
        }
    }
}

/// Missed releases logged one by one for `--explain`, at most this many per late release.
pub const LOG_MISSED_MAX: u64 = 8;
/// An action that ran at least this long over a missed instant was the loop's own work.
pub const OWN_WORK_NS: u64 = 5_000;

/// `--explain`: keep a release later than the log's bound. Self-timed releases are the loop's
/// (its thread, its CPU); a delegated one is its client's report on the release before, kept
/// with how that release was handed over.
#[cold]
pub(super) fn log_late(
    st: &mut SlotStats,
    slot: usize,
    r: &Release,
    t: &Timed,
    delegated: bool,
    handed: Option<Handed>,
) {
    if !delegated {
        if st.late.is_late(t.started.saturating_sub(r.target)) {
            st.late.push(self_timed(slot, r, t));
        }
        return;
    }
    let (Some(h), Some(ack)) = (handed, t.fired.previous) else {
        return;
    };
    let actual = match ack {
        Ack::Done { lateness, .. } if st.late.is_late(lateness) => h.target + lateness,
        Ack::Done { .. } => return,
        // Not taken before the next release: late by at least that long.
        Ack::Missed => t.started.max(h.target + 1),
    };
    let own_from = st.handed_own_from;
    push_client(&mut st.late, slot, h, actual, own_from);
}

/// A self-timed release's late record. One the loop fired is its own (its thread, its CPU); one its
/// partner fired in a breather is the partner's (its thread, its CPU). As for the loop, the
/// partner was behind only where its own work (firing the release before) began before the
/// instant and lasted at least the lateness; where its last read came after the instant, the
/// release came due while the partner was late on the one before, or before it had looked at
/// them (no read of its own: a chain's member, or read on the partner's CPU); otherwise its last
/// read stands, from which it only fired one short release or spun.
pub(super) fn self_timed(slot: usize, r: &Release, t: &Timed) -> LateRelease {
    let waiter = if t.by.is_some() {
        Waiter::Partner
    } else {
        Waiter::Loop
    };
    let (tid, cpu, behind, last_read, own_from) = match t.by {
        Some(b) => {
            let late = t.started.saturating_sub(r.target);
            let read = b.look.last_read;
            let (behind, last_read) = match (b.look.busy, read <= r.target) {
                // Its look came after the instant: late on an earlier one, or held since it
                // took the releases.
                (_, false) => (false, None),
                (true, true) if b.prev_work >= late => (true, None),
                _ => (false, Some(read)),
            };
            (b.tid, b.cpu, behind, last_read, None)
        }
        None => {
            let (tid, cpu) = punctual_explain::here();
            (tid, cpu, t.behind, t.last_read, t.own_from)
        }
    };
    LateRelease {
        series: slot as u32,
        tid,
        cpu,
        waiter,
        target: r.target,
        actual: t.started,
        handover: None,
        behind,
        last_read,
        own_work: own_from.map(|at| OwnWork {
            kind: WorkKind::Bookkeeping,
            at,
            usual: u64::MAX,
        }),
    }
}

/// A client's late release, with how it was handed over (`own_from`: where the loop's bookkeeping
/// began when it reached that hand-over late from it).
pub(super) fn push_client(
    log: &mut LateLog,
    slot: usize,
    h: Handed,
    actual: u64,
    own_from: Option<u64>,
) {
    let (tid, cpu) = punctual_explain::here();
    log.push(LateRelease {
        series: slot as u32,
        tid: h.client_tid,
        cpu: h.client_cpu,
        waiter: Waiter::Client,
        target: h.target,
        actual,
        handover: Some(Handover {
            tid,
            cpu,
            planned: h.planned,
            at: h.at,
            lead_needed: h.lead_needed,
            last_read: h.last_read,
            own_work: own_from.map(|at| OwnWork {
                kind: WorkKind::Bookkeeping,
                at,
                usual: u64::MAX,
            }),
            bookkeeping: u64::MAX,
        }),
        behind: false,
        // The client spun to its instant: its read before the one that found it passed.
        last_read: h.client_read.filter(|&t| t <= h.target),
        own_work: None,
    });
}

/// `--explain`: the instants a release's lateness made the loop skip (the first
/// [`LOG_MISSED_MAX`]), each late until the loop got past it (kept when that is beyond the
/// bound). A delegated release skipped was never handed over: the loop's, like any other.
#[cold]
pub(super) fn log_missed(
    st: &mut SlotStats,
    slot: usize,
    spec: &SlotSpec,
    r: &Release,
    t: &Timed,
    missed: u64,
) {
    let Some(p) = spec.period else { return };
    let (tid, cpu) = punctual_explain::here();
    for j in 1..=missed.min(LOG_MISSED_MAX) {
        let m = r.target + j * p;
        if !st.late.is_late(t.done.saturating_sub(m)) {
            continue;
        }
        st.late.push(LateRelease {
            series: slot as u32,
            tid,
            cpu,
            waiter: Waiter::Loop,
            target: m,
            actual: t.done.max(m + 1),
            handover: None,
            // The action itself was running over the instant, and for long: the loop's work.
            behind: t.started <= m && t.done - t.started >= OWN_WORK_NS,
            last_read: None,
            own_work: None,
        });
    }
}

/// After the loop: the reports delegated actions still owe on their last release.
pub(super) fn collect_owed_reports<A: Actions + ?Sized>(
    slots: &[SlotSpec],
    stats: &mut [SlotStats],
    actions: &mut A,
) {
    for (i, s) in slots.iter().enumerate() {
        if actions.delegated(s.action) && stats[i].releases > 0 {
            let ack = actions.finish(s.action);
            if let (Some(h), true) = (actions.handed(s.action), stats[i].late.enabled()) {
                match ack {
                    Some(Ack::Done { lateness, .. }) if stats[i].late.is_late(lateness) => {
                        let own_from = stats[i].handed_own_from;
                        push_client(&mut stats[i].late, i, h, h.target + lateness, own_from)
                    }
                    // Never taken, and the run is over: when it would have run is not known.
                    Some(Ack::Missed) => stats[i].late.dropped += 1,
                    _ => {}
                }
            }
            match ack {
                Some(Ack::Done {
                    lateness,
                    woke_late,
                    ..
                }) => {
                    stats[i].lateness.record(lateness);
                    if woke_late {
                        stats[i].lateness.add_woke_late();
                    }
                }
                Some(Ack::Missed) => stats[i].lateness.add_missed(1),
                None => {}
            }
        }
    }
}

impl SlotStats {
    pub fn new(delegated: bool) -> Self {
        SlotStats {
            lateness: Recorder::new(),
            dispatch: delegated.then(Recorder::new),
            releases: 0,
            overruns: 0,
            errors: 0,
            rephased: 0,
            rephase_gave_up: false,
            offset_ns: None,
            late: LateLog::off(),
            handed_own_from: None,
        }
    }
}
