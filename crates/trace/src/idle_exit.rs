//! Switches out of a CPU's idle task that the kernel did not record, put back.
//!
//! On some kernels `sched_switch` never fires when a CPU leaves its idle task: measured on this
//! project's KVM guest (6.18, `PREEMPT_DYNAMIC`), where CPU 1's trace holds every switch *to*
//! `swapper/1` and not one *from* it, in a private instance or the top one alike, while CPU 0's
//! holds both. The task that ran then shows up only when it leaves the CPU, so a reader that
//! follows switches sees the CPU idle all that while: a FIFO 99 spinner's 200 us burst read as
//! 200 us of idle. A switch out of a task while the CPU is idle is the mark of such a loss.
//!
//! The switch is put back where the evidence places it: the CPU leaves idle when the interrupt
//! that woke the task returns, so at the first handler exit (outermost) after the latest wake-up
//! of that task aimed at this CPU, or at the wake-up itself when no handler followed (a polling
//! idle loop needs none). Without a wake-up of the task in view (it was moved here, or woken from
//! a CPU not traced), the first vector since the CPU went idle that brings work places it: a
//! reschedule IPI, else a function call or irq_work (the first, not the last: a signal sent to the
//! task while it ran kicks the CPU again, measured with a spinner moved to CPU 1 and killed 60 ms
//! later). And no later than the first wake-up of another task aimed at the CPU in between: only
//! idle and this task ran since the last recorded switch (any other would be recorded leaving),
//! so a woken task that did not take the CPU found it held (a FIFO 98 thread woken 60 ms before a
//! FIFO 99 spinner left). Without any of these, nothing is put back (the CPU stays idle in the
//! reading, and [`Repair::unplaced`] counts it).

use crate::event::{Event, EventKind, Vector};

/// What a repair did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Repair {
    /// Switches out of idle put back.
    pub inferred: u64,
    /// Lost switches out of idle with no evidence of when they happened.
    pub unplaced: u64,
}

impl Repair {
    pub fn add(&mut self, o: Repair) {
        self.inferred += o.inferred;
        self.unplaced += o.unplaced;
    }
}

/// A wake-up aimed at a CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wake {
    pub ts: u64,
    pub pid: i32,
    /// The kernel found the target CPU polling in idle and sent no interrupt
    /// (`sched_wake_idle_without_ipi` right after the wake-up, on the waker's CPU): when.
    pub no_ipi: Option<u64>,
}

/// How close after a wake-up its `sched_wake_idle_without_ipi` comes (the same call: 1-2 us
/// here).
const NO_IPI_AFTER_NS: u64 = 50_000;

/// The wake-ups in `events` (each CPU's in time order; CPUs in any order or interleaved), by
/// target CPU, in time order.
pub fn wakeups_by_cpu<'a>(
    events: impl IntoIterator<Item = &'a Event>,
) -> std::collections::HashMap<u32, Vec<Wake>> {
    let mut by: std::collections::HashMap<u32, Vec<Wake>> = Default::default();
    // Per waker CPU, its latest wake-up: (target CPU, index in `by`).
    let mut last: std::collections::HashMap<u32, (u32, usize)> = Default::default();
    for e in events {
        match e.kind {
            EventKind::Waking {
                pid, target_cpu, ..
            }
            | EventKind::Wakeup {
                pid, target_cpu, ..
            }
            | EventKind::WakeupNew {
                pid, target_cpu, ..
            } if target_cpu >= 0 => {
                let v = by.entry(target_cpu as u32).or_default();
                v.push(Wake {
                    ts: e.ts,
                    pid,
                    no_ipi: None,
                });
                last.insert(e.cpu, (target_cpu as u32, v.len() - 1));
            }
            EventKind::WakeIdleNoIpi { target_cpu } => {
                if let Some(&(t, i)) = last.get(&e.cpu) {
                    let w = &mut by.get_mut(&t).expect("recorded")[i];
                    if t == target_cpu
                        && w.no_ipi.is_none()
                        && e.ts.saturating_sub(w.ts) <= NO_IPI_AFTER_NS
                    {
                        w.no_ipi = Some(e.ts);
                    }
                }
            }
            _ => {}
        }
    }
    for v in by.values_mut() {
        v.sort_by_key(|w| w.ts);
    }
    by
}

/// The switches out of idle missing from `events` (one CPU's, time order), given the wake-ups
/// aimed at that CPU ([`Wake`]s in time order, from every CPU traced).
pub fn lost_idle_exits(cpu: u32, events: &[Event], wakeups: &[Wake]) -> (Vec<Event>, Repair) {
    let mut out = Vec::new();
    let mut r = Repair::default();
    let mut current: Option<i32> = None;
    let mut idle_since = 0u64;
    let mut depth = 0u32;
    // Outermost handler exits since the CPU went idle, and the first of a reschedule IPI and of
    // another vector that brings work.
    let mut exits: Vec<u64> = Vec::new();
    let (mut resched, mut other_ipi): (Option<u64>, Option<u64>) = (None, None);
    // What each open handler is: 0 a device IRQ, softirq or timer; 1 a reschedule; 2 another.
    let mut open: Vec<u8> = Vec::new();
    for e in events {
        match e.kind {
            EventKind::IrqEntry { .. } | EventKind::SoftirqEntry { .. } => {
                depth += 1;
                open.push(0);
            }
            EventKind::VectorEntry { vector } => {
                depth += 1;
                open.push(match vector {
                    Vector::Reschedule => 1,
                    Vector::CallFunction | Vector::CallFunctionSingle | Vector::IrqWork => 2,
                    _ => 0,
                });
            }
            EventKind::IrqExit { .. }
            | EventKind::SoftirqExit { .. }
            | EventKind::VectorExit { .. } => {
                let what = open.pop().unwrap_or(0);
                depth = depth.saturating_sub(1);
                if depth == 0 && current == Some(0) {
                    exits.push(e.ts);
                    match what {
                        1 => resched = resched.or(Some(e.ts)),
                        2 => other_ipi = other_ipi.or(Some(e.ts)),
                        _ => {}
                    }
                }
            }
            EventKind::Lost { .. } => {
                current = None;
                depth = 0;
                open.clear();
            }
            EventKind::Switch {
                prev_pid,
                prev_prio,
                next_pid,
                ..
            } => {
                if current == Some(0) && prev_pid != 0 {
                    let lo = wakeups.partition_point(|w| w.ts < idle_since);
                    let hi = wakeups.partition_point(|w| w.ts <= e.ts);
                    let woke = wakeups[lo..hi].iter().rev().find(|w| w.pid == prev_pid);
                    let placed = match woke {
                        // The CPU polled: it saw the wake-up at once, whatever interrupt came
                        // later (b60's 10 us plan: the loop read its clock 5.7 us after such a
                        // wake-up, and the next handler on its CPU was the tick, 1.85 ms on).
                        Some(&Wake {
                            no_ipi: Some(at), ..
                        }) => Some(at.min(e.ts)),
                        Some(w) => Some(exits.iter().copied().find(|&x| x >= w.ts).unwrap_or(w.ts)),
                        None => resched.or(other_ipi),
                    };
                    // Only idle and this task ran since the last recorded switch (any other task
                    // would have been recorded leaving). So a wake-up of another task aimed here
                    // that did not take the CPU found it held: the task ran by then.
                    let held_by = wakeups[lo..hi]
                        .iter()
                        .find(|w| w.pid != prev_pid)
                        .map(|w| w.ts);
                    let at = match (placed, held_by) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                    match at {
                        Some(ts) => {
                            r.inferred += 1;
                            out.push(Event {
                                ts,
                                cpu,
                                kind: EventKind::Switch {
                                    prev_pid: 0,
                                    prev_prio: 120,
                                    prev_state: 0,
                                    next_pid: prev_pid,
                                    next_prio: prev_prio,
                                },
                            });
                        }
                        None => r.unplaced += 1,
                    }
                }
                current = Some(next_pid);
                depth = 0;
                open.clear();
                exits.clear();
                (resched, other_ipi) = (None, None);
                if next_pid == 0 {
                    idle_since = e.ts;
                }
            }
            _ => {}
        }
    }
    (out, r)
}

/// `events` (one CPU's, time order) with `add` (time order) merged in; an added event goes after
/// the events of its instant (a switch placed at a handler's exit comes after the exit).
pub fn merge(events: Vec<Event>, add: Vec<Event>) -> Vec<Event> {
    if add.is_empty() {
        return events;
    }
    let mut out = Vec::with_capacity(events.len() + add.len());
    let mut a = add.into_iter().peekable();
    for e in events {
        while a.peek().is_some_and(|x| x.ts < e.ts) {
            out.extend(a.next());
        }
        out.push(e);
    }
    out.extend(a);
    out
}

/// `events` of every CPU (time order) with each CPU's lost switches out of idle put back.
pub fn repair_merged(events: Vec<Event>) -> (Vec<Event>, Repair) {
    let wakeups = wakeups_by_cpu(&events);
    let mut cpus: Vec<u32> = events.iter().map(|e| e.cpu).collect();
    cpus.sort_unstable();
    cpus.dedup();
    let mut add = Vec::new();
    let mut r = Repair::default();
    for cpu in cpus {
        let mine: Vec<Event> = events.iter().filter(|e| e.cpu == cpu).copied().collect();
        let w = wakeups.get(&cpu).map_or(&[][..], |v| v.as_slice());
        let (a, rr) = lost_idle_exits(cpu, &mine, w);
        add.extend(a);
        r.add(rr);
    }
    add.sort_by_key(|e| e.ts);
    (merge(events, add), r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts: u64, cpu: u32, kind: EventKind) -> Event {
        Event { ts, cpu, kind }
    }
    fn sw(prev_pid: i32, prev_prio: i32, next_pid: i32, next_prio: i32) -> EventKind {
        EventKind::Switch {
            prev_pid,
            prev_prio,
            prev_state: 1,
            next_pid,
            next_prio,
        }
    }
    const TIMER: Vector = Vector::LocalTimer;
    const CALL: Vector = Vector::CallFunctionSingle;

    #[test]
    fn a_task_woken_on_an_idle_cpu_runs_from_the_end_of_the_interrupt_that_woke_it() {
        // CPU 1 goes idle at 100; the timer at 1,000 wakes pid 9 (FIFO 99: prio 0); the kernel
        // records its switch out at 1,300 but not the switch in.
        let events = vec![
            ev(100, 1, sw(5, 120, 0, 120)),
            ev(1_000, 1, EventKind::VectorEntry { vector: TIMER }),
            ev(
                1_002,
                1,
                EventKind::Waking {
                    pid: 9,
                    prio: 0,
                    target_cpu: 1,
                },
            ),
            ev(1_010, 1, EventKind::VectorExit { vector: TIMER }),
            ev(1_300, 1, sw(9, 0, 0, 120)),
        ];
        let (fixed, r) = repair_merged(events);
        assert_eq!(
            r,
            Repair {
                inferred: 1,
                unplaced: 0
            }
        );
        assert_eq!(fixed.len(), 6);
        assert_eq!(fixed[4].ts, 1_010);
        assert_eq!(fixed[4].kind, {
            let mut k = sw(0, 120, 9, 0);
            if let EventKind::Switch { prev_state, .. } = &mut k {
                *prev_state = 0;
            }
            k
        });
    }

    #[test]
    fn a_wake_up_from_another_cpu_places_the_switch_at_the_ipi_that_delivered_it() {
        let events = vec![
            ev(100, 1, sw(5, 120, 0, 120)),
            // A tick on the idle CPU first: not the one that woke anything.
            ev(400, 1, EventKind::VectorEntry { vector: TIMER }),
            ev(405, 1, EventKind::VectorExit { vector: TIMER }),
            ev(
                900,
                0,
                EventKind::Waking {
                    pid: 9,
                    prio: 19,
                    target_cpu: 1,
                },
            ),
            ev(
                910,
                1,
                EventKind::VectorEntry {
                    vector: Vector::Reschedule,
                },
            ),
            ev(
                915,
                1,
                EventKind::VectorExit {
                    vector: Vector::Reschedule,
                },
            ),
            ev(2_000, 1, sw(9, 19, 0, 120)),
        ];
        let (fixed, r) = repair_merged(events);
        assert_eq!(r.inferred, 1);
        let put = fixed
            .iter()
            .find(|e| matches!(e.kind, EventKind::Switch { next_pid: 9, .. }))
            .unwrap();
        assert_eq!((put.ts, put.cpu), (915, 1));
    }

    /// b60's 10 us plan: the partner on CPU 0 woke the loop on idle CPU 1 and the kernel sent no
    /// interrupt (CPU 1 polled); the loop read its clock 5.7 us later, and the next handler on CPU 1
    /// was the tick, 1.85 ms on. The switch goes at the wake-up, not at the tick.
    #[test]
    fn a_wake_up_without_an_interrupt_places_the_switch_at_the_wake_up_not_a_later_tick() {
        let waking = |ts, pid, target_cpu| {
            ev(
                ts,
                0,
                EventKind::Waking {
                    pid,
                    prio: 1,
                    target_cpu,
                },
            )
        };
        // Rounds of: pid 9 blocks on CPU 1 at `t`, CPU 0 wakes it at `t` + 100 (marking no
        // interrupt sent to `no_ipi_to` right after, if any), a handler runs on CPU 1 at `t` +
        // `at`; pid 9 leaves again at the next round. 1: no interrupt, then the tick, 1.84 ms
        // on. 2: the IPI that delivered it. 3: a no-IPI mark for another CPU's wake-up.
        let mut events = Vec::new();
        for (t, no_ipi_to, v, at) in [
            (0, Some(1), TIMER, 1_900),
            (3_000, None, CALL, 230),
            (4_000, Some(2), TIMER, 500),
        ] {
            events.push(ev(t + 100, 1, sw(9, 1, 0, 120)));
            events.push(waking(t + 160, 9, 1));
            if let Some(c) = no_ipi_to {
                events.push(ev(t + 161, 0, EventKind::WakeIdleNoIpi { target_cpu: c }));
            }
            events.push(ev(t + at, 1, EventKind::VectorEntry { vector: v }));
            events.push(ev(t + at + 10, 1, EventKind::VectorExit { vector: v }));
        }
        events.push(ev(5_000, 1, sw(9, 1, 0, 120)));
        events.sort_by_key(|e| e.ts);
        let (fixed, r) = repair_merged(events);
        assert_eq!(r.inferred, 3);
        let put: Vec<u64> = fixed
            .iter()
            .filter(|e| matches!(e.kind, EventKind::Switch { next_pid: 9, .. }))
            .map(|e| e.ts)
            .collect();
        assert_eq!(put, vec![161, 3_240, 4_510]);
    }

    #[test]
    fn a_task_moved_to_an_idle_cpu_runs_from_the_first_reschedule_not_a_later_kick() {
        // pid 9 is moved to idle CPU 1 (no wake-up): the reschedule at 500 brings it; a signal
        // sent while it spins kicks the CPU again at 60,000; it leaves at 60,100.
        let resched = |ts, entry| {
            let vector = Vector::Reschedule;
            let kind = if entry {
                EventKind::VectorEntry { vector }
            } else {
                EventKind::VectorExit { vector }
            };
            ev(ts, 1, kind)
        };
        let events = vec![
            ev(100, 1, sw(5, 120, 0, 120)),
            resched(495, true),
            resched(500, false),
            resched(59_995, true),
            resched(60_000, false),
            ev(60_100, 1, sw(9, 0, 0, 120)),
        ];
        let (fixed, r) = repair_merged(events);
        assert_eq!(r.inferred, 1);
        let put = fixed
            .iter()
            .find(|e| matches!(e.kind, EventKind::Switch { next_pid: 9, .. }))
            .unwrap();
        assert_eq!(put.ts, 500);
    }

    #[test]
    fn a_task_that_kept_a_woken_one_waiting_ran_by_that_wake_up() {
        // pid 9 arrives on idle CPU 1 without an IPI (a polling idle loop); pid 4 (FIFO 98) is
        // woken at 1,000 and gets the CPU only when pid 9 leaves at 60,000: pid 9 held it by 1,000.
        let events = vec![
            ev(100, 1, sw(4, 1, 0, 120)),
            ev(1_000, 1, EventKind::VectorEntry { vector: TIMER }),
            ev(
                1_002,
                1,
                EventKind::Waking {
                    pid: 4,
                    prio: 1,
                    target_cpu: 1,
                },
            ),
            ev(1_010, 1, EventKind::VectorExit { vector: TIMER }),
            ev(60_000, 1, sw(9, 0, 4, 1)),
        ];
        let (fixed, r) = repair_merged(events);
        assert_eq!(r.inferred, 1);
        let put = fixed
            .iter()
            .find(|e| matches!(e.kind, EventKind::Switch { next_pid: 9, .. }))
            .unwrap();
        assert_eq!(put.ts, 1_002);
    }

    #[test]
    fn recorded_switches_are_left_alone_and_a_switch_without_evidence_is_counted() {
        // CPU 0 records its idle exits: nothing to add. CPU 1 loses one with no wake-up or IPI
        // in view: counted, not invented.
        let events = vec![
            ev(100, 0, sw(5, 120, 0, 120)),
            ev(100, 1, sw(6, 120, 0, 120)),
            ev(
                200,
                0,
                EventKind::Waking {
                    pid: 7,
                    prio: 120,
                    target_cpu: 0,
                },
            ),
            ev(210, 0, sw(0, 120, 7, 120)),
            ev(300, 0, sw(7, 120, 0, 120)),
            ev(500, 1, sw(8, 120, 0, 120)),
        ];
        let n = events.len();
        let (fixed, r) = repair_merged(events);
        assert_eq!(
            r,
            Repair {
                inferred: 0,
                unplaced: 1
            }
        );
        assert_eq!(fixed.len(), n);
    }
}
