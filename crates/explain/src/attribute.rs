//! One cause per late release, read from the trace of the CPUs involved (docs/design.md,
//! "Explaining lateness", has the decision order with its reasons).
//!
//! ```text
//! delegated (wake client):   planned   H (handed over)     T (instant)      A (client ran)
//!   dispatcher's CPU   ---------|~~~~~~~~~|                   |                |
//!   client's CPU       -------------------|--- wake path -----|--- late -------|
//! 1. no trace covers the window                         -> unexplained
//! 2. the client on its CPU (S) by T                       -> its CPU over [T, A], as below
//! 3. lateness = d + (S - H) - lead with d = H - planned:
//!    d the larger part                                    -> the dispatcher's CPU over [planned, H]
//!    (unless S > T and something not punctual's held the client's CPU, not the dispatcher's,
//!    for most of [planned, S]: on to 4)
//! 4. planned lead < lead needed, wake-up S - H <= needed  -> lead (unless other occupants had
//!    the client's CPU for most of [H, S] together: the largest)
//! 5. the client's CPU over [H, A]                          -> the occupant with the most time
//! self-timed (loop, sleeper): the victim's CPU over [T, A] -> the occupant with the most time
//! ```
//!
//! Occupants map to causes: a device interrupt or system vector -> `irq`; a bottom half ->
//! `softirq`; another task -> `task`; a lower-class task while the real-time victim was runnable
//! -> `throttle`; idle or the victim's own wake-up interrupt -> `wake_path` (a loop: `dispatcher`);
//! the idle task polling (a wake-up reaches a polling CPU at once) -> `steal` under a hypervisor,
//! else `unexplained`; time the scheduler did not charge the task on the CPU (paravirtual steal
//! accounting), or the
//! victim itself on the CPU past its instant without any guest event -> `steal` (a loop that was
//! behind with its own work: `dispatcher`, also for a task it let run); no state -> `unexplained`. Ties go to the cause listed first in
//! [`Cause::ALL`]. A window whose winner is idle or the victim's own time becomes `steal` when the
//! CPU's steal counter grew in the readings around it by at least the lateness and the stretch
//! was at least [`STEAL_COUNTER_MIN_NS`] (the counter's 10 ms resolution says nothing shorter).

use crate::record::{Handover, LateRelease, OwnWork, Stall, StallKind, Waiter, WorkKind};
use crate::timeline::{
    account, dark_stretches, Accounting, CpuFacts, Occupant, Window, LOOKBACK_NS,
};
use punctual_trace::capture::Captured;
use punctual_trace::event::{
    leave_reason, softirq_name, Event, EventKind, Leave, Vector, STATE_MASK, STATE_PREEMPTED,
};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// `TASK_UNINTERRUPTIBLE` in `sched_switch`'s `prev_state`.
const STATE_BLOCKED: u64 = 0x2;

/// Why a release was late: one of SPEC section 9's causes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// The virtual CPU was not running (the hypervisor took it).
    Steal,
    /// RT throttling or the fair server ran a normal task in the real-time victim's place.
    Throttle,
    /// Another task ran in its place.
    Task,
    /// A device interrupt handler or a system vector.
    Irq,
    /// A bottom half.
    Softirq,
    /// Handed over in time, but the CPU was idle (or its wake-up interrupt slow) and ran it late.
    WakePath,
    /// The client was woken later than its wake-ups need: the lead was short.
    Lead,
    /// punctual's own loop was late: its wake-up, a breather, bookkeeping.
    Dispatcher,
    Unexplained,
}

impl Cause {
    /// In tie-break (and table) order.
    pub const ALL: [Cause; 9] = [
        Cause::Steal,
        Cause::Throttle,
        Cause::Task,
        Cause::Irq,
        Cause::Softirq,
        Cause::WakePath,
        Cause::Lead,
        Cause::Dispatcher,
        Cause::Unexplained,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Cause::Steal => "steal",
            Cause::Throttle => "throttle",
            Cause::Task => "task",
            Cause::Irq => "irq",
            Cause::Softirq => "softirq",
            Cause::WakePath => "wake_path",
            Cause::Lead => "lead",
            Cause::Dispatcher => "dispatcher",
            Cause::Unexplained => "unexplained",
        }
    }

    /// Whether the cause is punctual's own (what it can still remove).
    pub fn is_own(self) -> bool {
        matches!(self, Cause::Lead | Cause::Dispatcher)
    }
}

/// A window whose winner is idle or the victim's own time is steal when the counter moved and
/// the stretch was at least this long.
pub const STEAL_COUNTER_MIN_NS: u64 = 1_000_000;

/// One release's cause, with who did it and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attribution {
    pub cause: Cause,
    /// What took the time (`irq 24 virtio1-req.0`, `rustc (pid 4242, normal)`...), when the cause
    /// has a name.
    pub offender: Option<String>,
    /// The CPU whose trace decided it.
    pub cpu: Option<u32>,
    /// Time the winning cause held in the window.
    pub held_ns: u64,
    /// The task whose time decided it, when the offender is a task (its pid).
    pub holder: Option<i32>,
    /// One line on how it was decided (for `--explain-detail` and tests).
    pub why: String,
}

impl Attribution {
    /// The same, its `why` led by `what` (how the window read was chosen).
    fn said_first(mut self, what: String) -> Attribution {
        self.why = format!("{what}: {}", self.why);
        self
    }

    fn unexplained(why: impl Into<String>) -> Attribution {
        Attribution {
            cause: Cause::Unexplained,
            offender: None,
            cpu: None,
            held_ns: 0,
            holder: None,
            why: why.into(),
        }
    }
}

/// The trace and steal readings a set of late releases is explained from.
pub struct Evidence<'a> {
    pub trace: &'a Captured,
    /// punctual's own threads in the run: the dispatchers that handed releases over, the
    /// clients they released, the threads that logged stalls, the trace's drain thread and the
    /// threads declared with [`crate::record::own_thread`] (the
    /// watchdog). One of them holding a victim's CPU is punctual's doing
    /// (`dispatcher`: its loop, or its placement of clients), not another task's.
    pub own: std::collections::HashSet<i32>,
    /// Per traced CPU, the stretches the measuring threads' stalls show the guest did nothing
    /// where it had to ([`crate::timeline::dark_stretches`]): in time order, merged.
    pub dark: std::collections::HashMap<u32, Vec<(u64, u64)>>,
    /// Per traced CPU, what [`crate::timeline::dark_stretches`] needs to know of it.
    facts: std::collections::HashMap<u32, CpuFacts>,
}

impl<'a> Evidence<'a> {
    /// Evidence from `trace`, with punctual's own threads taken from the records.
    pub fn new(trace: &'a Captured, records: &[LateRelease]) -> Evidence<'a> {
        let mut own: std::collections::HashSet<i32> =
            crate::record::own_threads().into_iter().collect();
        // The trace's own drain thread, and the measuring threads that logged stalls (a run's
        // wake clients log one every release, late or not).
        own.extend(
            std::iter::once(trace.drain_tid)
                .chain(trace.stalls.iter().map(|s| s.tid))
                .filter(|&t| t > 0),
        );
        for r in records {
            if let Some(h) = r.handover {
                own.insert(h.tid);
                if r.tid > 0 {
                    own.insert(r.tid);
                }
            }
        }
        let mut dark = dark_by_cpu(trace, records);
        if trace.virtualized {
            for (cpu, a, b) in wake_ipis_not_taken(trace, &own) {
                dark.entry(cpu).or_default().push((a, b));
            }
            dark.values_mut().for_each(merge);
        }
        let facts = trace
            .cpus
            .iter()
            .filter_map(|&c| Some((c as u32, cpu_facts(trace, c as u32)?)))
            .collect();
        Evidence {
            trace,
            own,
            dark,
            facts,
        }
    }
}

/// Sort `v` and merge the stretches that touch or overlap.
fn merge(v: &mut Vec<(u64, u64)>) {
    v.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for &(a, b) in v.iter() {
        match merged.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    *v = merged;
}

/// [`Evidence::dark`] from the trace's stalls: per CPU, the stretches where the guest did nothing
/// although punctual's thread or its due timer had to run. A sleeper's late release is such a
/// stall too: its timer was due at its instant (a `latency` thread, a process in
/// `clock_nanosleep`), a [`StallKind::Timer`] from the instant to when it ran.
pub fn dark_by_cpu(
    trace: &Captured,
    records: &[LateRelease],
) -> std::collections::HashMap<u32, Vec<(u64, u64)>> {
    let mut out: std::collections::HashMap<u32, Vec<(u64, u64)>> = Default::default();
    let mut facts: std::collections::HashMap<u32, Option<CpuFacts>> = Default::default();
    let sleepers = records
        .iter()
        .filter(|r| r.waiter == Waiter::Sleeper && r.handover.is_none())
        .map(|r| Stall {
            tid: r.tid,
            cpu: r.cpu,
            kind: StallKind::Timer,
            from: r.target,
            to: r.actual,
        });
    for s in trace.stalls.iter().copied().chain(sleepers) {
        let Some(events) = trace.cpu_events(s.cpu as usize) else {
            continue;
        };
        let Some(known) = *facts
            .entry(s.cpu)
            .or_insert_with(|| cpu_facts(trace, s.cpu))
        else {
            continue;
        };
        let poll = trace.poll_state(s.cpu as usize);
        out.entry(s.cpu)
            .or_default()
            .extend(dark_stretches(events, &s, poll, known));
    }
    out.values_mut().for_each(merge);
    out
}

/// What [`dark_stretches`] needs to know of `cpu`'s trace (`None`: not traced).
fn cpu_facts(trace: &Captured, cpu: u32) -> Option<CpuFacts> {
    let events = trace.cpu_events(cpu as usize)?;
    Some(CpuFacts {
        idle_known: trace.idle_unsaid(cpu as usize).is_some()
            || events
                .iter()
                .any(|e| matches!(e.kind, EventKind::CpuIdle { .. })),
        virtualized: trace.virtualized,
        handler_usual: crate::timeline::handler_usual(events),
    })
}

/// How far back [`wake_ipis_not_taken`] looks for the task on a CPU.
const CURRENT_SEARCH: usize = 4096;

/// Stretches `(cpu, from, to)` where a CPU running one of punctual's own threads (`own`) did not
/// take the interrupt a wake-up sent it: a task was woken from another CPU onto `cpu` at `from`,
/// outranking the thread running there (so the kernel sent `cpu` a rescheduling interrupt at
/// once), and the next event on `cpu` is that interrupt, at least
/// [`DARK_MIN_NS`](crate::timeline::DARK_MIN_NS) later, after which the woken task got the CPU.
/// A running virtual CPU takes a pending interrupt at once unless the guest masked interrupts
/// that long, or the vCPU is in the hypervisor on the guest's behalf (a device access the host
/// emulates). punctual's threads (the share sampler, the trace's drain) touch no device, so with
/// nothing at all in between, the vCPU was not running. Another task's stretch is left to it: in
/// a kurt-periodic (c) 30 disk row the same pattern came 4,177 times in 10 s (median 22.5 us),
/// 4,072 of them over the disk load's task, whose I/O the host emulates.
/// Measured on this VM (kurt-periodic (c) 10 idle, 2026-11-30): a client woken 54 us before its
/// instant onto a CPU running punctual's share sampler took the interrupt 89 us later, with no
/// event on that CPU in between, while the scheduler charged the sampler only 139 of its 219 us
/// there; the split of that uncharged time read `dispatcher` (the sampler), not `steal`.
pub fn wake_ipis_not_taken(trace: &Captured, own: &HashSet<i32>) -> Vec<(u32, u64, u64)> {
    let mut out = Vec::new();
    for (i, &from_cpu) in trace.cpus.iter().enumerate() {
        for e in &trace.events[i] {
            let EventKind::Waking {
                pid,
                prio,
                target_cpu,
            } = e.kind
            else {
                continue;
            };
            let Ok(cpu) = usize::try_from(target_cpu) else {
                continue;
            };
            if cpu == from_cpu || trace.covered(cpu).is_none_or(|c| c > e.ts) {
                continue;
            }
            let Some(events) = trace.cpu_events(cpu) else {
                continue;
            };
            let k = events.partition_point(|x| x.ts <= e.ts);
            let Some(first) = events.get(k) else {
                continue;
            };
            let ipi = matches!(
                first.kind,
                EventKind::VectorEntry {
                    vector: Vector::Reschedule | Vector::CallFunction | Vector::CallFunctionSingle
                }
            );
            if !ipi || first.ts - e.ts < crate::timeline::DARK_MIN_NS {
                continue;
            }
            let switched = |x: &Event| match x.kind {
                EventKind::Switch {
                    next_pid,
                    next_prio,
                    ..
                } => Some((next_pid, next_prio)),
                EventKind::Lost { .. } => Some((-1, 0)),
                _ => None,
            };
            let running = events[k.saturating_sub(CURRENT_SEARCH)..k]
                .iter()
                .rev()
                .find_map(switched);
            let outranked = running.is_some_and(|(p, q)| own.contains(&p) && q > prio);
            let then = events[k + 1..].iter().find_map(switched);
            if outranked && then.map(|(p, _)| p) == Some(pid) {
                out.push((cpu as u32, e.ts, first.ts));
            }
        }
    }
    out
}

impl Evidence<'_> {
    /// The victim's wake-ups issued on every CPU but `except`, around `[from, to]`.
    fn wakings(&self, pid: i32, except: u32, from: u64, to: u64) -> Vec<(u64, i32)> {
        let look = from.saturating_sub(LOOKBACK_NS);
        let mut out = Vec::new();
        for (i, &cpu) in self.trace.cpus.iter().enumerate() {
            if cpu as u32 == except {
                continue;
            }
            let ev = &self.trace.events[i];
            let a = ev.partition_point(|e| e.ts < look);
            let b = ev.partition_point(|e| e.ts <= to);
            for e in &ev[a..b] {
                if let EventKind::Waking { pid: p, prio, .. } = e.kind {
                    if p == pid {
                        out.push((e.ts, prio));
                    }
                }
            }
        }
        out.sort_unstable();
        out
    }

    /// Account `[from, to]` on `cpu` for `victim` (`idle_chosen`: see [`Window::idle_chosen`]).
    fn window(
        &self,
        cpu: u32,
        victim: i32,
        (from, to): (u64, u64),
        after: u64,
        idle_chosen: bool,
    ) -> Option<Accounting> {
        let covered = self.trace.covered(cpu as usize)?;
        if from < covered || to > self.trace.end_ns {
            return None;
        }
        let events = self.trace.cpu_events(cpu as usize)?;
        let wakings = self.wakings(victim, cpu, from, to);
        Some(account(&Window {
            events,
            victim,
            from,
            to,
            victim_after: after,
            wakings: &wakings,
            poll_state: self.trace.poll_state(cpu as usize),
            idle_unsaid: self.trace.idle_unsaid(cpu as usize),
            dark: self.dark.get(&cpu).map_or(&[], Vec::as_slice),
            idle_chosen,
        }))
    }

    /// Stolen time on `cpu` between the readings around `[from, to]` (`None`: no readings there).
    fn steal_around(&self, cpu: u32, from: u64, to: u64) -> Option<u64> {
        let s = &self.trace.steal;
        let before = s.iter().rev().find(|x| x.ts <= from)?;
        let after = s.iter().find(|x| x.ts >= to)?;
        let of = |x: &punctual_trace::capture::StealSample| {
            x.per_cpu
                .iter()
                .find(|(c, _)| *c == cpu as usize)
                .map(|(_, n)| *n)
        };
        Some(of(after)?.saturating_sub(of(before)?))
    }

    /// A task's name for the tables: `comm (pid N, FIFO 99)`.
    pub fn task_name(&self, pid: i32, prio: i32) -> String {
        let comm = self
            .trace
            .comms
            .get(&pid)
            .map(String::as_str)
            .unwrap_or("?");
        format!(
            "{} (pid {pid}, {})",
            punctual_time::text::display_text(comm, 24),
            class_of(pid, prio)
        )
    }

    /// The latest event on `cpu` at or before `to` that `f` makes something of.
    fn last_on<T>(&self, cpu: u32, to: u64, f: impl Fn(&Event) -> Option<T>) -> Option<T> {
        let ev = self.trace.cpu_events(cpu as usize)?;
        let b = ev.partition_point(|e| e.ts <= to);
        ev[..b].iter().rev().find_map(f)
    }

    /// `victim`'s kernel priority as the last switch to it on `cpu` at or before `to` gave it.
    fn prio_of(&self, cpu: u32, victim: i32, to: u64) -> Option<i32> {
        self.last_on(cpu, to, |e| match e.kind {
            EventKind::Switch {
                next_pid,
                next_prio,
                ..
            } if next_pid == victim => Some(next_prio),
            _ => None,
        })
    }

    /// How `victim` last left `cpu` at or before `to`: when, and its state (`prev_state`).
    fn left_as(&self, cpu: u32, victim: i32, to: u64) -> Option<(u64, u64)> {
        self.last_on(cpu, to, |e| match e.kind {
            EventKind::Switch {
                prev_pid,
                prev_state,
                ..
            } if prev_pid == victim => Some((e.ts, prev_state)),
            _ => None,
        })
    }

    /// Whether `pid` left `cpu` blocked or asleep (not preempted) in `(from, to]`.
    pub(crate) fn left_waiting(&self, cpu: u32, pid: i32, from: u64, to: u64) -> bool {
        let Some(ev) = self.trace.cpu_events(cpu as usize) else {
            return false;
        };
        let inside = ev.partition_point(|e| e.ts <= from)..ev.partition_point(|e| e.ts <= to);
        ev[inside].iter().any(|e| {
            matches!(e.kind, EventKind::Switch { prev_pid, prev_state, .. }
                if prev_pid == pid && leave_reason(prev_state) != Leave::Preempted)
        })
    }

    fn irq_name(&self, irq: i32) -> String {
        match self.trace.irq_names.get(&irq) {
            Some(n) => format!("irq {irq} {}", punctual_time::text::display_text(n, 24)),
            None => format!("irq {irq}"),
        }
    }
}

/// The scheduling class a kernel priority stands for (`prio` as the trace gives it: 0-99
/// real-time, 100-139 normal), with the policy read from `/proc` while the task lives.
pub fn class_of(pid: i32, prio: i32) -> String {
    // Field 41: the policy.
    let policy = punctual_rt::ProcStat::of(pid).and_then(|s| s.field::<u32>(41));
    match prio {
        p if p < 0 => "deadline".into(),
        p if p < 100 => {
            let name = match policy {
                Some(1) => "FIFO",
                Some(2) => "RR",
                _ => "RT",
            };
            format!("{name} {}", 99 - p)
        }
        p => format!("normal, nice {}", p - 120),
    }
}

/// The cause an occupant stands for, given how the victim waits and its kernel priority (`prio`,
/// when the trace shows it: a task that outranks it took the CPU whatever the victim was doing),
/// which threads are punctual's and whether a hypervisor may have held the CPU.
fn cause_of(
    o: Occupant,
    (waiter, prio): (Waiter, Option<i32>),
    behind: bool,
    own: &HashSet<i32>,
    vm: bool,
) -> Cause {
    match o {
        // A polling CPU notices a wake-up at once: past the victim's time, it was not running.
        Occupant::IdlePoll if vm => Cause::Steal,
        Occupant::IdlePoll => Cause::Unexplained,
        _ if o.task().is_some_and(|(pid, _)| own.contains(&pid)) => Cause::Dispatcher,
        // Past the victim's wake-up, even a loop that chose to let it run (a breather) wanted
        // its CPU back: what kept it is that task's.
        Occupant::Held { .. } => Cause::Task,
        Occupant::Irq(_) | Occupant::Vector(_) => Cause::Irq,
        Occupant::Softirq(_) => Cause::Softirq,
        // A task that outranks the loop preempted it, behind or not (a FIFO 99 hog in the middle
        // of the loop's previous action made it behind: CI, 2026-11-29).
        Occupant::Task { prio: p, .. } if prio.is_some_and(|v| p < v) => Cause::Task,
        // A loop that was behind with its own work (an action, a breather): whatever else held
        // the CPU meanwhile, the loop chose it.
        Occupant::Victim | Occupant::Task { .. } if waiter.is_punctuals() && behind => {
            Cause::Dispatcher
        }
        Occupant::Task { .. } => Cause::Task,
        Occupant::Throttled { .. } => Cause::Throttle,
        // Idle, the victim's wake-up interrupt, or the victim charged for running: its way back
        // to the CPU (a loop's own wake-up or work: the dispatcher's).
        Occupant::Idle(_) | Occupant::OwnWake | Occupant::VictimRan => match waiter {
            Waiter::Loop | Waiter::Partner => Cause::Dispatcher,
            Waiter::Sleeper | Waiter::Client => Cause::WakePath,
        },
        // Not charged to the task although nothing else ran; or the victim on its CPU past its
        // instant without any guest event (it was not making progress).
        Occupant::Stolen | Occupant::Victim => Cause::Steal,
        Occupant::Unknown => Cause::Unexplained,
    }
}

/// The winning cause of an accounted window, and its largest occupant.
fn decide(
    acc: &Accounting,
    victim: (Waiter, Option<i32>),
    behind: bool,
    own: &HashSet<i32>,
    vm: bool,
) -> Option<(Cause, Occupant, u64)> {
    let mut per = [0u64; Cause::ALL.len()];
    for &(o, t) in &acc.by {
        let c = cause_of(o, victim, behind, own, vm);
        per[Cause::ALL.iter().position(|x| *x == c).expect("listed")] += t;
    }
    // Ties go to the earlier cause: max_by_key keeps the last maximum, so walk backwards.
    let (ci, held) = per
        .iter()
        .enumerate()
        .rev()
        .max_by_key(|(_, t)| **t)
        .filter(|(_, t)| **t > 0)?;
    let cause = Cause::ALL[ci];
    let top = acc
        .by
        .iter()
        .filter(|(o, _)| cause_of(*o, victim, behind, own, vm) == cause)
        .max_by_key(|(_, t)| *t)
        .map(|(o, _)| *o)
        .unwrap_or(Occupant::Unknown);
    Some((cause, top, *held))
}

fn offender(ev: &Evidence, o: Occupant) -> Option<String> {
    Some(match o {
        Occupant::Irq(i) => ev.irq_name(i),
        Occupant::Vector(v) => v.name().to_string(),
        Occupant::Softirq(s) => format!("softirq {}", softirq_name(s)),
        Occupant::Task { .. } | Occupant::Throttled { .. } | Occupant::Held { .. } => {
            let (pid, prio) = o.task()?;
            ev.task_name(pid, prio)
        }
        Occupant::Idle(Some(s)) => format!("idle state {s}"),
        Occupant::Idle(None) => "idle".into(),
        Occupant::OwnWake => "its wake-up interrupt".into(),
        Occupant::IdlePoll => "idle (polling)".into(),
        Occupant::Victim | Occupant::VictimRan | Occupant::Stolen | Occupant::Unknown => {
            return None
        }
    })
}

/// Explain the window `[from, to]` on `cpu` for `victim`.
#[allow(clippy::too_many_arguments)]
fn explain_window(
    ev: &Evidence,
    cpu: u32,
    victim: i32,
    (from, to): (u64, u64),
    after: u64,
    waiter: Waiter,
    behind: bool,
    lateness: u64,
    spun: bool,
) -> Attribution {
    // A loop behind its breather idled by its own choice until its partner woke it.
    let idle_chosen = waiter.is_punctuals() && behind;
    let Some(acc) = ev.window(cpu, victim, (from, to), after, idle_chosen) else {
        return Attribution::unexplained(format!("CPU {cpu} not traced over the window"));
    };
    if acc.lost {
        return Attribution::unexplained(format!("the kernel lost events on CPU {cpu}"));
    }
    // A loop or a client that spun across its instant did nothing of its own in the window but
    // read its clock: the time charged to it there belongs to what interrupted it (a handler's
    // entry and exit around it, which the trace does not see), so the others present decide
    // (with none, see `not_running` and `stopped_between`).
    let mut deciding = acc.clone();
    if spun && matches!(waiter, Waiter::Loop | Waiter::Partner | Waiter::Client) && !behind {
        let others: Vec<(Occupant, u64)> = acc
            .by
            .iter()
            .copied()
            .filter(|(o, _)| {
                !matches!(
                    o,
                    Occupant::Victim | Occupant::VictimRan | Occupant::OwnWake
                )
            })
            .collect();
        if !others.is_empty() {
            deciding.by = others;
        }
    }
    // Only a loop behind with its own work is told apart by it (see `cause_of`).
    let prio = (waiter.is_punctuals() && behind)
        .then(|| ev.prio_of(cpu, victim, to))
        .flatten();
    let Some((mut cause, top, held)) = decide(
        &deciding,
        (waiter, prio),
        behind,
        &ev.own,
        ev.trace.virtualized,
    ) else {
        return Attribution::unexplained("an empty window");
    };
    let mut why = format!(
        "CPU {cpu} over {}: {}",
        punctual_time::format_ns(to - from),
        acc.by
            .iter()
            .map(|(o, t)| format!("{o:?} {}", punctual_time::format_ns(*t)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    // Its CPU idle while it waited: say when it had left the CPU blocked (`D`: disk I/O, a page
    // fault), which is not a sleep it chose. The cause stays its own (dispatcher, wake path).
    if matches!(top, Occupant::Idle(_)) {
        if let Some((at, state)) = ev.left_as(cpu, victim, to) {
            if state & STATE_PREEMPTED == 0 && state & STATE_MASK == STATE_BLOCKED {
                why += &format!(
                    "; it had left the CPU blocked (D: I/O or a page fault) {} before the window's end",
                    punctual_time::format_ns(to - at)
                );
            }
        }
    }
    let hidden = matches!(
        top,
        Occupant::Idle(_) | Occupant::Victim | Occupant::OwnWake
    );
    if hidden && held >= STEAL_COUNTER_MIN_NS && cause != Cause::Steal {
        if let Some(stolen) = ev.steal_around(cpu, from, to) {
            if stolen >= lateness {
                why += &format!(
                    "; steal counter +{} around it",
                    punctual_time::format_ns(stolen)
                );
                cause = Cause::Steal;
            }
        }
    }
    let named = cause != Cause::Steal;
    Attribution {
        cause,
        offender: named.then(|| offender(ev, top)).flatten(),
        cpu: Some(cpu),
        held_ns: held,
        holder: top.task().filter(|_| named).map(|(pid, _)| pid),
        why,
    }
}

/// A spinning loop charged as running over its window (`dispatcher`), whose last two clock reads
/// enclose the whole lateness with no guest event on its CPU between them: it did nothing there
/// but one clock read, so for that long the virtual CPU was not running guest code (a host
/// interruption the steal counter does not see: SPEC's "a gap with no guest event"). Measured on
/// this VM: a 10 us mark plan's `dispatcher` releases fell at any phase of the tick, and a
/// `bench gaps` loop saw about 140 gaps a second above 10 us more than the guest took interrupts.
///
/// Likewise a loop whose lateness came in bounded work of its own ([`OwnWork`]: a send call up to
/// the kernel's stamp, its bookkeeping between two releases) that took far longer than its usual
/// time with no guest event on its CPU: at least half the lateness lies beyond that usual time.
/// Measured on this VM: a plain C sender, no punctual code, had 0.27 % of its sends take 80 us or
/// more, many before the stamp, each without a guest event there.
fn not_running(ev: &Evidence, r: &LateRelease, a: Attribution) -> Attribution {
    if a.cause != Cause::Dispatcher || !r.waiter.is_punctuals() || r.behind {
        return a;
    }
    let read = r.last_read.filter(|&t| t <= r.target);
    if let (Some(read), Some(w)) = (read, r.own_work.filter(|w| w.kind == WorkKind::Send)) {
        let a = stalled_around_send(ev, r.cpu, (read, r.target, r.actual), w, a);
        return match a.cause {
            Cause::Dispatcher => stalled_work(ev, r.cpu, (r.target, r.actual), w, a),
            _ => a,
        };
    }
    if let Some(read) = read {
        return stopped_between(
            ev,
            (r.cpu, r.tid),
            r.waiter.who(),
            (read, r.target, r.actual),
            a,
        );
    }
    match r.own_work {
        Some(w) => stalled_work(ev, r.cpu, (r.target, r.actual), w, a),
        None => a,
    }
}

/// Whether `cpu`'s trace covers `[from, to]` and holds no guest event strictly inside.
fn eventless(ev: &Evidence, cpu: u32, from: u64, to: u64) -> bool {
    let Some(events) = ev.trace.cpu_events(cpu as usize) else {
        return false;
    };
    let inside = events.partition_point(|e| e.ts <= from)..events.partition_point(|e| e.ts < to);
    let covered = ev
        .trace
        .covered(cpu as usize)
        .is_some_and(|start| start <= from);
    inside.is_empty() && covered
}

/// Own work `w` of the loop on `cpu`, due at `due` and seen done at `seen`: when it took at least
/// half the lateness beyond its usual time and held no guest event on `cpu`, `a` becomes `steal`.
fn stalled_work(
    ev: &Evidence,
    cpu: u32,
    (due, seen): (u64, u64),
    w: OwnWork,
    a: Attribution,
) -> Attribution {
    let took = seen.saturating_sub(w.at);
    if took < w.usual.saturating_add(seen.saturating_sub(due) / 2) {
        return a;
    }
    let at = |t: u64| {
        if t >= due {
            format!("{} after", punctual_time::format_ns(t - due))
        } else {
            format!("{} before", punctual_time::format_ns(due - t))
        }
    };
    let what = match w.kind {
        WorkKind::Send => format!(
            "the loop called the kernel {} its instant, which stamped the send {} later (its \
             sends take {} at most in 99 of 100 this run)",
            at(w.at),
            punctual_time::format_ns(took),
            punctual_time::format_ns(w.usual)
        ),
        WorkKind::Bookkeeping => format!(
            "the loop ended its previous action {} its instant and reached this one {} later, \
             only its own bookkeeping between (which takes under {} in 99 of 100 this run)",
            at(w.at),
            punctual_time::format_ns(took),
            punctual_time::format_ns(w.usual)
        ),
    };
    silent_then_steal(ev, cpu, (w.at, seen), what, a)
}

/// A send whose lateness came partly before its call and partly in it: the loop read its clock at
/// `read`, before the instant `due`, called the kernel at `w.at` and got the stamp at `seen`. With
/// no guest event on `cpu` from the read to the stamp, all the loop did was its last reads, a
/// little bookkeeping and the call, whose usual time is `w.usual`; when what lies beyond that is
/// at least half the lateness, `a` becomes `steal`. Measured (2026-12-01,
/// `scripts/trace-send-path.sh`): sends 6.9-7.6 us late that stood still 4.3-4.7 us between the
/// prime and the call, then took a usual 1.9 us path, read `dispatcher`, the silence split between
/// the two windows judged apart.
fn stalled_around_send(
    ev: &Evidence,
    cpu: u32,
    (read, due, seen): (u64, u64, u64),
    w: OwnWork,
    a: Attribution,
) -> Attribution {
    let late = seen.saturating_sub(due);
    if late.saturating_sub(w.usual).saturating_mul(2) < late {
        return a;
    }
    let what = format!(
        "the loop read its clock {} before its instant, called the kernel {} after it, and the \
         send was stamped {} after the instant (its sends take {} at most in 99 of 100 this run)",
        punctual_time::format_ns(due.saturating_sub(read)),
        punctual_time::format_ns(w.at.saturating_sub(due)),
        punctual_time::format_ns(late),
        punctual_time::format_ns(w.usual)
    );
    silent_then_steal(ev, cpu, (read, seen), what, a)
}

/// `a` as `steal` when `cpu` logged no guest event strictly inside `(from, seen)` (and the trace
/// covers it): only what `said` tells happened there, so the virtual CPU was not running.
fn silent_then_steal(
    ev: &Evidence,
    cpu: u32,
    (from, seen): (u64, u64),
    said: String,
    a: Attribution,
) -> Attribution {
    if !eventless(ev, cpu, from, seen) {
        return a;
    }
    Attribution {
        cause: Cause::Steal,
        offender: None,
        cpu: Some(cpu),
        held_ns: seen.saturating_sub(from),
        holder: None,
        why: format!(
            "{said}, and CPU {cpu} logged no guest event in between: the virtual CPU was not \
             running ({})",
            a.why
        ),
    }
}

/// `who` (the loop, a spinning client: thread `victim`) on `cpu` read its clock at `read`, before
/// an instant `due`, and next at `seen`, after it, with nothing between but that read: no guest
/// event on `cpu` in between (and the trace covering it) means the virtual CPU was not running, and
/// `a` becomes `steal`. So do silences with guest events between them: where the dark stretches
/// of a stall of `victim`'s own short work from `read` to `seen` ([`silent_holding`]) hold more
/// than half the lateness past `due`. b73's and
/// b74's (d) disk 30 and (c) idle 30 had clients silent 92-150 us past their instants, charged
/// for running, before the dispatcher's timer and its 14-37 us run on their CPU (and, in b74's, 83
/// us of silence again after it), which read `dispatcher` because the window was not silent
/// throughout.
fn stopped_between(
    ev: &Evidence,
    (cpu, victim): (u32, i32),
    who: &str,
    (read, due, seen): (u64, u64, u64),
    a: Attribution,
) -> Attribution {
    let said = format!(
        "{who} read its clock {} before its instant and next {} after it, nothing between but \
         that read",
        punctual_time::format_ns(due.saturating_sub(read)),
        punctual_time::format_ns(seen.saturating_sub(due)),
    );
    if eventless(ev, cpu, read, seen) {
        return silent_then_steal(ev, cpu, (read, seen), said, a);
    }
    let late = seen.saturating_sub(due);
    let Some(silent) = silent_holding(ev, (cpu, victim), (read, due, seen)) else {
        return a;
    };
    if silent.saturating_mul(2) <= late {
        return a;
    }
    Attribution {
        cause: Cause::Steal,
        offender: None,
        cpu: Some(cpu),
        held_ns: silent,
        holder: None,
        why: format!(
            "{who} read its clock {} before its instant; past it, CPU {cpu} logged no guest event \
             for {} of its {} lateness while {who} held it: the virtual CPU was not running ({})",
            punctual_time::format_ns(due.saturating_sub(read)),
            punctual_time::format_ns(silent),
            punctual_time::format_ns(late),
            a.why
        ),
    }
}

/// Of `(due, seen]`, the time the guest did nothing on `cpu` while `victim` had to run there
/// from `read` on: [`dark_stretches`] of a stall of its own short work from `read` to `seen`
/// (silences of [`DARK_MIN_NS`](crate::timeline::DARK_MIN_NS) or more with it on the CPU and no
/// handler open, or longer than the CPU's handlers take inside one). `None` where the trace does
/// not cover `read`.
fn silent_holding(
    ev: &Evidence,
    (cpu, victim): (u32, i32),
    (read, due, seen): (u64, u64, u64),
) -> Option<u64> {
    let events = ev.trace.cpu_events(cpu as usize)?;
    ev.trace
        .covered(cpu as usize)
        .filter(|&start| start <= read)?;
    let spin = Stall {
        tid: victim,
        cpu,
        kind: StallKind::Busy,
        from: read,
        to: seen,
    };
    let poll = ev.trace.poll_state(cpu as usize);
    let dark = dark_stretches(events, &spin, poll, *ev.facts.get(&cpu)?);
    Some(
        dark.iter()
            .map(|&(a, b)| b.saturating_sub(a.max(due)))
            .sum(),
    )
}

/// The cause of one late release.
pub fn attribute(ev: &Evidence, r: &LateRelease) -> Attribution {
    let lateness = r.lateness();
    let Some(h) = r.handover else {
        let a = explain_window(
            ev,
            r.cpu,
            r.tid,
            (r.target, r.actual),
            r.target,
            r.waiter,
            r.behind,
            lateness,
            r.last_read.is_some_and(|t| t <= r.target),
        );
        return not_running(ev, r, a);
    };
    // The lateness is the dispatcher's delay plus the wake-up's excess over the lead it planned:
    // A - T = (H - planned) + (S - H) - (T - planned). The larger part decides whose CPU is read.
    let delay = h.at.saturating_sub(h.planned);
    let planned_lead = r.target.saturating_sub(h.planned);
    // When the client got its CPU after the hand-over (found on its CPU): on it by its instant,
    // only what came after the instant made it late.
    let first_in = ev
        .window(r.cpu, r.tid, (h.at, r.actual), r.target, false)
        .and_then(|a| a.first_switched_in);
    let took = first_in.unwrap_or(r.actual).saturating_sub(h.at);
    let on_cpu_in_time = first_in.is_some_and(|s| s <= r.target);
    // A client that came in after its instant because something else held its CPU (another than
    // the dispatcher's) for most of the time since the planned hand-over came in when that let
    // go: a hand-over on time would not have run it sooner. b52's and b55's (c) 30 disk:
    // hand-overs 7-14 us late to a CPU the disk load had taken from idle just before, past the
    // client's reschedule IPI until after the instant, and charged 3-12 us of that 220-250 us
    // (the rest the host's), read `dispatcher`. What holds: other tasks, interrupts, bottom
    // halves and the host, not punctual's own threads (b53 counted the loop and read 737
    // `dispatcher`). Not on the dispatcher's own CPU, where what held the client held the
    // hand-over too and that side names it (b54 skipped it there: a BLOCK softirq's hold read as
    // the loop's catching up).
    let held_back = r.cpu != h.cpu
        && first_in.is_some_and(|s| {
            let since_plan = s.saturating_sub(h.planned);
            s > r.target && held_by_others(ev, r, (h.planned, s)).saturating_mul(2) > since_plan
        });
    if !on_cpu_in_time && !held_back && delay >= took.saturating_sub(planned_lead) {
        // Handed over late, and that is most of it: whatever kept the dispatcher from acting.
        let mut a = explain_window(
            ev,
            h.cpu,
            h.tid,
            (h.planned, h.at.max(h.planned + 1)),
            h.planned,
            Waiter::Loop,
            false,
            delay,
            false,
        );
        // The dispatcher spun to the hand-over: its two reads around it can show the vCPU
        // stopped; or it reached it late from its bookkeeping, which can too.
        if a.cause == Cause::Dispatcher {
            if let Some(read) = h.last_read.filter(|&t| t <= h.planned) {
                a = stopped_between(ev, (h.cpu, h.tid), "the loop", (read, h.planned, h.at), a);
            } else if let Some(w) = h.own_work {
                a = stalled_work(ev, h.cpu, (h.planned, h.at), w, a);
            }
        }
        return a.said_first(format!(
            "handed over {} after plan (late by {})",
            punctual_time::format_ns(delay),
            punctual_time::format_ns(lateness)
        ));
    }
    // Held back, it is read since the planned hand-over: what held its CPU then is why it came
    // late, not its last microseconds of way back after a late hand-over (b57, b58: 124 (c)
    // clients 0.1-1.5 ms late read `wake_path` from "IdlePoll, Idle, VictimRan" after it).
    let from = if on_cpu_in_time {
        r.target
    } else if held_back {
        h.planned
    } else {
        h.at
    };
    if first_in.is_some_and(|s| s > r.target)
        && planned_lead < h.lead_needed
        && took <= h.lead_needed
        && took > planned_lead
    {
        // What had the client's CPU from the hand-over to its switch-in: other tasks,
        // interrupts or the host holding it, together, for most of the wake-up are what a longer
        // lead would have had to outlast, and the largest is named; an ordinary way back (idle,
        // its wake-up interrupt) is the lead's.
        let held = explain_window(
            ev,
            r.cpu,
            r.tid,
            (h.at, h.at + took),
            r.target,
            Waiter::Client,
            false,
            lateness,
            false,
        );
        let others = held_past_the_way_back(ev, r, (h.at, h.at + took));
        if !matches!(held.cause, Cause::WakePath | Cause::Unexplained) && others * 2 > took {
            // The loop on the client's CPU after the hand-over: stopped there, or its own doing.
            let held = loop_stopped_after(ev, r, &h, lateness, held);
            return held.said_first(format!(
                "its wake-up took {} against a lead of {}",
                punctual_time::format_ns(took),
                punctual_time::format_ns(planned_lead)
            ));
        }
        return Attribution {
            cause: Cause::Lead,
            offender: None,
            cpu: Some(r.cpu),
            held_ns: took - planned_lead,
            holder: None,
            why: format!(
                "its wake-up took {}, within the {} its wake-ups need, but the lead was {}",
                punctual_time::format_ns(took),
                punctual_time::format_ns(h.lead_needed),
                punctual_time::format_ns(planned_lead)
            ),
        };
    }
    // On its CPU by its instant and spinning to it (its read before the one that found the
    // instant passed, as it reported): what held its next read is what interrupted it.
    let spun = on_cpu_in_time && r.last_read.is_some_and(|t| t <= r.target);
    let a = explain_window(
        ev,
        r.cpu,
        r.tid,
        (from, r.actual),
        r.target,
        Waiter::Client,
        false,
        lateness,
        spun,
    );
    match (r.last_read, first_in) {
        (Some(read), _) if spun && matches!(a.cause, Cause::WakePath | Cause::Dispatcher) => {
            let reads = (read, r.target, r.actual);
            stopped_between(ev, (r.cpu, r.tid), "the client", reads, a)
        }
        (_, Some(s)) if on_cpu_in_time && a.cause == Cause::WakePath => {
            back_in_then_stopped(ev, r.cpu, (s, r.target, r.actual), a)
        }
        _ => loop_stopped_after(ev, r, &h, lateness, a),
    }
}

/// How long in `[from, to]` the client `r`'s CPU was held by anything but its ordinary way back
/// (idle, its own wake-up, itself): the causes a longer lead would have had to outlast, together.
/// Measured on this VM (kurt-periodic (c) 30 disk, 2026-11-30): a wake-up of 1.31 ms against a
/// 245 us lead was a normal task in the kernel (616 us charged) and the host (640 us not charged)
/// holding the client's CPU; neither alone held half of it, and it read `lead`.
fn held_past_the_way_back(ev: &Evidence, r: &LateRelease, window: (u64, u64)) -> u64 {
    held_by(ev, r, window, |_, c| {
        !matches!(c, Cause::WakePath | Cause::Unexplained)
    })
}

/// How long in `[from, to]` the client `r`'s CPU was held by something not punctual's: other
/// tasks, interrupts, bottom halves, a normal task the fair server ran, the host.
///
/// A CPU polling in idle is not held: before the hand-over nothing waited to run there (under a
/// hypervisor polling past a wake-up reads `steal`, but only a wake-up makes it so). b57's and
/// b58's (c) rows: hand-overs 0.1-1.5 ms late to a polling CPU counted it held, and read the
/// client's last microseconds of way back as `wake_path` (124 in each).
fn held_by_others(ev: &Evidence, r: &LateRelease, window: (u64, u64)) -> u64 {
    held_by(ev, r, window, |o, c| {
        o != Occupant::IdlePoll
            && matches!(
                c,
                Cause::Task | Cause::Irq | Cause::Softirq | Cause::Throttle | Cause::Steal
            )
    })
}

/// How long in `[from, to]` the client `r`'s CPU was held by occupants whose cause `counts`.
fn held_by(
    ev: &Evidence,
    r: &LateRelease,
    (from, to): (u64, u64),
    counts: impl Fn(Occupant, Cause) -> bool,
) -> u64 {
    let Some(acc) = ev.window(r.cpu, r.tid, (from, to), r.target, false) else {
        return 0;
    };
    acc.by
        .iter()
        .filter(|(o, _)| {
            counts(
                *o,
                cause_of(
                    *o,
                    (Waiter::Client, None),
                    false,
                    &ev.own,
                    ev.trace.virtualized,
                ),
            )
        })
        .map(|(_, t)| t)
        .sum()
}

/// `a` unless it names the dispatcher for a client on the dispatcher's own CPU.
///
/// A client on the dispatcher's CPU held by the loop itself after the hand-over: between handing
/// over and its next wait the loop only does its bookkeeping (`h.bookkeeping`, this run's 99th
/// percentile). The longest stretch of the window with no guest event, while the loop had the
/// CPU, that is longer than that by half the lateness or more is the host's: the virtual CPU was
/// not running. Measured on this VM (kurt-periodic (d) 1, 2026-11-29): the loop blocked 1.4-3.4 us
/// after its hand-over, and once 151 us later with no guest event on its CPU in between, which
/// made the client 115 us late and read `dispatcher`.
fn loop_stopped_after(
    ev: &Evidence,
    r: &LateRelease,
    h: &Handover,
    lateness: u64,
    a: Attribution,
) -> Attribution {
    if a.cause != Cause::Dispatcher || h.cpu != r.cpu {
        return a;
    }
    let Some(events) = ev
        .trace
        .cpu_events(r.cpu as usize)
        .filter(|_| r.actual > h.at)
    else {
        return a;
    };
    let inside =
        events.partition_point(|e| e.ts <= h.at)..events.partition_point(|e| e.ts < r.actual);
    let marks = std::iter::once(h.at)
        .chain(events[inside].iter().map(|e| e.ts))
        .chain(std::iter::once(r.actual));
    let (gap_from, gap_to) = marks
        .clone()
        .zip(marks.skip(1))
        .max_by_key(|(a, b)| b.saturating_sub(*a))
        .unwrap_or((h.at, h.at));
    let running = ev.last_on(r.cpu, gap_from, |e| match e.kind {
        EventKind::Switch { next_pid, .. } => Some(next_pid),
        _ => None,
    });
    if running != Some(h.tid) || gap_to - gap_from < h.bookkeeping.saturating_add(lateness / 2) {
        return a;
    }
    let said = format!(
        "the dispatcher handed over {} before the instant, then held CPU {} for {} (its \
         bookkeeping after an action takes under {} in 99 of 100 this run)",
        punctual_time::format_ns(r.target.saturating_sub(h.at)),
        r.cpu,
        punctual_time::format_ns(gap_to - gap_from),
        punctual_time::format_ns(h.bookkeeping)
    );
    silent_then_steal(ev, r.cpu, (gap_from, gap_to), said, a)
}

/// A client switched in on `cpu` at `s`, by its instant `due`, that first read its clock at
/// `seen`, after it, without a spin read it reported before `due`: between the two it only came
/// back from the kernel (and spun, if it did). With no guest event on `cpu` strictly between, the
/// virtual CPU was not running for the lateness, and `a` (its own time: `wake_path`) becomes
/// `steal`. Measured on this VM (kurt-periodic, 2026-11-29): such windows of 13-57 us came back at
/// the same phase of the 10 ms period release after release, where the floor watch saw the host
/// stop the vCPU for 34-54 us every 10 ms with no guest event.
fn back_in_then_stopped(
    ev: &Evidence,
    cpu: u32,
    (s, due, seen): (u64, u64, u64),
    a: Attribution,
) -> Attribution {
    let said = format!(
        "the client was switched in {} before its instant and read its clock {} after it, only \
         its way back from the kernel between",
        punctual_time::format_ns(due.saturating_sub(s)),
        punctual_time::format_ns(seen.saturating_sub(due)),
    );
    silent_then_steal(ev, cpu, (s, seen), said, a)
}
