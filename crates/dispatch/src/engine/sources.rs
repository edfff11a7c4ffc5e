//! Where one CPU's releases come from: the periodic tasks' heap and the events' cursor, each
//! task's phase (moved by [`crate::rephase`]) and its missed releases.

use super::{Actions, Due, Fired, LoopConfig, SlotSpec, SlotStats};
use crate::rephase::{self, LateWindow, Verdict};
use punctual_periodic::channel::Ack;
use punctual_plan::MissPolicy;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Where the releases come from: the periodic tasks' heap and the event cursor, with each task's
/// release index and each event slot's sequence number. Allocated once, before the loop.
pub(super) struct Sources {
    pub(super) heap: BinaryHeap<Due>,
    /// Per task: release index of the next release.
    pub(super) next_k: Vec<u64>,
    /// Per task: the instant through which missed releases were already counted (catch_up runs
    /// them without counting them twice).
    pub(super) counted_through: Vec<u64>,
    /// Per task: how far its phase moved during the run (added to its offset).
    pub(super) shift: Vec<u64>,
    /// Per movable task: its recent releases, late or not.
    pub(super) windows: Vec<LateWindow>,
    /// Index of the next event of this CPU in `LoopConfig::events` (or its length).
    pub(super) ev: usize,
    /// Per event slot: sequence number of its next event.
    pub(super) event_seq: Vec<u64>,
}

/// The next release, as [`Sources::next`] chose it.
#[derive(Clone, Copy)]
pub(super) struct Release<'e> {
    /// When the dispatcher acts: the release instant less the action's lead.
    pub(super) act_at: u64,
    pub(super) from_event: bool,
    pub(super) slot: usize,
    /// The release instant.
    pub(super) target: u64,
    pub(super) seq: u64,
    pub(super) data: &'e [u8],
}

/// One firing as the loop timed it.
pub(super) struct Timed {
    /// The loop came to this release late because of its own work: the previous action ran past
    /// the instant it had to act at, or it took a breather just before.
    pub(super) behind: bool,
    pub(super) started: u64,
    pub(super) done: u64,
    pub(super) fired: Fired,
    /// The loop slept in the kernel before this release.
    pub(super) slept: bool,
    /// When that sleep ended.
    pub(super) woke: u64,
    /// The spin's clock read before the one that found the instant passed (`None`: it did not
    /// spin): from it to `started` the loop only read the clock and noted the start.
    pub(super) last_read: Option<u64>,
    /// When the loop reached this release late from its own bookkeeping (no spin, no sleep, not
    /// behind): the previous action's end, its last clock read before the instant.
    pub(super) own_from: Option<u64>,
    /// Fired by the loop's partner: its thread, its CPU, what it did before.
    pub(super) by: Option<super::By>,
}

impl Sources {
    pub(super) fn new<A: Actions + ?Sized>(
        cfg: &LoopConfig,
        slots: &[SlotSpec],
        actions: &A,
    ) -> Sources {
        let mut heap: BinaryHeap<Due> = BinaryHeap::with_capacity(slots.len());
        for (i, s) in slots.iter().enumerate() {
            if s.period.is_some() {
                let t = cfg.start + s.offset;
                heap.push(Due {
                    act_at: Reverse(t.saturating_sub(actions.lead(s.action))),
                    slot: i,
                });
            }
        }
        let mut sources = Sources {
            heap,
            next_k: vec![0; slots.len()],
            counted_through: vec![0; slots.len()],
            shift: vec![0; slots.len()],
            windows: vec![LateWindow::default(); slots.len()],
            ev: 0,
            event_seq: vec![0u64; slots.len()],
        };
        sources.skip_foreign(cfg);
        sources
    }

    /// Counts release `r` of a movable task in its window and moves the task when its late
    /// releases line up: the next release (not yet in the heap) and all after it follow the new
    /// phase, clear of the other releases (and of their lead-ins on its client's CPU).
    #[inline(always)]
    pub(super) fn watch_phase(
        &mut self,
        st: &mut SlotStats,
        slots: &[SlotSpec],
        r: &Release,
        t: &Timed,
        delegated: bool,
        cfg: &LoopConfig,
    ) {
        let avoid = cfg.avoiding();
        let w = &mut self.windows[r.slot];
        let previous = w.released(r.seq);
        let seen = if delegated {
            // The client reports on the release before this one.
            match (previous, t.fired.previous) {
                (Some(k), Some(Ack::Done { lateness, .. })) => {
                    Some((k, lateness > rephase::LATE_NS))
                }
                (Some(k), Some(Ack::Missed)) => Some((k, true)),
                _ => None,
            }
        } else {
            Some((r.seq, t.started.saturating_sub(r.target) > rephase::LATE_NS))
        };
        let Some((k, late)) = seen else { return };
        w.observe(k, late);
        match w.verdict() {
            Verdict::Move => match rephase::next_shift(r.slot, slots, &self.shift, avoid) {
                Some(shift) => {
                    self.shift[r.slot] = shift;
                    self.windows[r.slot].moved(r.seq + 1);
                    st.rephased += 1;
                }
                None => match rephase::group_shift(r.slot, slots, &self.shift, avoid) {
                    // The group turns together: this task from its next release on, the others
                    // from the one already in the heap, whose time to act moves with it (a
                    // release acted on at the old phase would hand over `delta` early, and the
                    // next one's hand-over would fall on its instant); their windows start
                    // afresh at the new phase.
                    Some(delta) => {
                        for j in 0..slots.len() {
                            if rephase::in_group(r.slot, slots, j) {
                                self.shift[j] += delta;
                                if j != r.slot {
                                    self.windows[j].restart(self.next_k[j]);
                                }
                            }
                        }
                        // Rebuilt in place (no allocation): only later times, and this release's
                        // entry stays on top for `advance` to take.
                        let mut due = std::mem::take(&mut self.heap).into_vec();
                        for d in due.iter_mut() {
                            if d.slot != r.slot && rephase::in_group(r.slot, slots, d.slot) {
                                d.act_at = Reverse(d.act_at.0 + delta);
                            }
                        }
                        self.heap = BinaryHeap::from(due);
                        self.windows[r.slot].moved(r.seq + 1);
                        st.rephased += 1;
                    }
                    None => self.windows[r.slot].restart(r.seq + 1),
                },
            },
            Verdict::GiveUp => st.rephase_gave_up = true,
            Verdict::Stay => {}
        }
    }

    /// Each task's offset at the end: the plan's plus the moves, within its period.
    pub(super) fn final_offsets(&self, slots: &[SlotSpec], stats: &mut [SlotStats]) {
        for (i, s) in slots.iter().enumerate() {
            stats[i].offset_ns = s.period.map(|p| (s.offset + self.shift[i]) % p);
        }
    }

    /// Moves the event cursor past events of actions on other CPUs.
    #[inline(always)]
    pub(super) fn skip_foreign(&mut self, cfg: &LoopConfig) {
        while self.ev < cfg.events.len()
            && cfg.event_slot[cfg.events[self.ev].action as usize].is_none()
        {
            self.ev += 1;
        }
    }

    /// The next release: the earlier of the heap's top and the event cursor (ties: tasks first);
    /// `None` when neither has one left.
    #[inline(always)]
    pub(super) fn next<'e, A: Actions + ?Sized>(
        &self,
        cfg: &LoopConfig<'e>,
        slots: &[SlotSpec],
        actions: &A,
    ) -> Option<Release<'e>> {
        let task_due = self.heap.peek().map(|d| (d.act_at.0, d.slot));
        let event_due = (self.ev < cfg.events.len()).then(|| {
            let e = &cfg.events[self.ev];
            let t = cfg.start + e.at + actions.event_shift(e.action);
            (t.saturating_sub(actions.lead(e.action)), t)
        });
        let (act_at, from_event) = match (task_due, event_due) {
            (None, None) => return None,
            (Some((a, _)), Some((b, _))) if b < a => (b, true),
            (Some((a, _)), _) => (a, false),
            (None, Some((b, _))) => (b, true),
        };
        let (slot, target, seq, data): (usize, u64, u64, &[u8]) = if from_event {
            let e = &cfg.events[self.ev];
            let slot = cfg.event_slot[e.action as usize].expect("foreign events are skipped");
            let t = cfg.start + e.at + actions.event_shift(e.action);
            (slot, t, self.event_seq[slot], e.data())
        } else {
            let (_, slot) = task_due.expect("chosen");
            let s = &slots[slot];
            (
                slot,
                cfg.start
                    + s.offset
                    + self.shift[slot]
                    + self.next_k[slot] * s.period.expect("a task"),
                self.next_k[slot],
                &[][..],
            )
        };
        Some(Release {
            act_at,
            from_event,
            slot,
            target,
            seq,
            data,
        })
    }

    /// Moves the source of release `r` on; `done` is when its action returned. Returns the number
    /// of releases newly counted as missed, when the task's next instant had passed by `done`.
    #[inline(always)]
    pub(super) fn advance<A: Actions + ?Sized>(
        &mut self,
        cfg: &LoopConfig,
        spec: &SlotSpec,
        r: &Release,
        done: u64,
        actions: &A,
    ) -> Option<u64> {
        let slot = r.slot;
        if r.from_event {
            self.event_seq[slot] += 1;
            self.ev += 1;
            self.skip_foreign(cfg);
            return None;
        }
        self.heap.pop();
        let p = spec.period.expect("a task");
        let mut k = self.next_k[slot] + 1;
        let base = cfg.start + spec.offset + self.shift[slot];
        let next = base + k * p;
        let mut missed = None;
        if done >= next {
            // Releases whose instant passed while this one ran: missed (only those before the
            // run's end: a late last release does not miss releases the run would never have had).
            let passed = (done - next) / p + 1;
            let before_end = if next < cfg.end {
                (done.min(cfg.end - 1) - next) / p + 1
            } else {
                0
            };
            let new = match spec.miss {
                MissPolicy::Skip => before_end,
                MissPolicy::CatchUp if before_end == 0 => 0,
                MissPolicy::CatchUp => {
                    let through = next + (before_end - 1) * p;
                    let already = if self.counted_through[slot] >= next {
                        (self.counted_through[slot] - next) / p + 1
                    } else {
                        0
                    };
                    self.counted_through[slot] = self.counted_through[slot].max(through);
                    before_end.saturating_sub(already)
                }
            };
            missed = Some(new);
            if spec.miss == MissPolicy::Skip {
                k += passed;
                if spec.movable {
                    // Skipped releases are late ones for re-phasing (caught-up ones are timed when run).
                    for j in 1..=passed.min(64) {
                        self.windows[slot].observe(self.next_k[slot] + j, true);
                    }
                }
            }
        }
        self.next_k[slot] = k;
        let t = base + k * p;
        self.heap.push(Due {
            act_at: Reverse(t.saturating_sub(actions.lead(spec.action))),
            slot,
        });
        missed
    }
}
