//! One pass over a trace's events in time order rebuilds what each CPU ran and when: every task's run
//! intervals (effective quanta, Etsion's "time from when the process is scheduled to run until it is
//! preempted or blocked"), wake-up latencies (waking to running), and the duration of every interrupt
//! handler, system vector, softirq and hrtimer callback. Aggregates (per thread, per process, billing
//! at any HZ) are computed from these.
//!
//! Edges are handled conservatively: a run already in progress when tracing started, or still in
//! progress when it stopped, counts towards CPU time and billing but not as a quantum (its length is
//! unknown); after events were lost on a CPU, the run in progress there is dropped, and so are the
//! pending wake-ups, so a loss never shows up as a fabricated long quantum or latency.

pub mod billing;
pub mod classify;

use crate::event::{leave_reason, softirq_name, Event, EventKind, Leave, Vector};
use crate::file::{Target, TraceData};
use classify::Category;
use punctual_stats::Recorder;
use std::collections::{BTreeMap, HashMap};

/// One stretch of a task on a CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub start: u64,
    pub end: u64,
    pub cpu: u32,
    /// Both ends were seen: this is an effective quantum.
    pub whole: bool,
    /// How it ended (None when the trace ended first).
    pub leave: Option<Leave>,
    /// Who ran next on the CPU.
    pub next_pid: i32,
}

impl Run {
    pub fn whole(start: u64, end: u64, cpu: u32) -> Run {
        Run {
            start,
            end,
            cpu,
            whole: true,
            leave: Some(Leave::Blocked),
            next_pid: 0,
        }
    }

    pub fn partial(start: u64, end: u64, cpu: u32) -> Run {
        Run {
            start,
            end,
            cpu,
            whole: false,
            leave: None,
            next_pid: 0,
        }
    }

    pub fn complete(&self) -> bool {
        self.whole
    }

    pub fn len(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

/// Samples of one thread, kept as they are: a histogram per thread would cost its full size
/// (about 270 KB at 1 ns-1 h and 3 digits) for each of the thousands of short-lived tasks a busy
/// machine's trace holds, while a thread's samples cost 8 bytes each, a fraction of the events they
/// come from. Groups fold them into one [`Recorder`] when a report asks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Latencies {
    samples: Vec<u64>,
}

impl Latencies {
    pub fn record(&mut self, ns: u64) {
        self.samples.push(ns);
    }

    pub fn count(&self) -> u64 {
        self.samples.len() as u64
    }

    pub fn min(&self) -> Option<u64> {
        self.samples.iter().copied().min()
    }

    pub fn max(&self) -> Option<u64> {
        self.samples.iter().copied().max()
    }

    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.samples.iter().copied()
    }

    /// Record every sample into `r` (the same figures as merging a recorder of them).
    pub fn fold_into(&self, r: &mut Recorder) {
        for &v in &self.samples {
            r.record(v);
        }
    }

    /// A recorder of these samples.
    pub fn recorder(&self) -> Recorder {
        let mut r = Recorder::new();
        self.fold_into(&mut r);
        r
    }
}

/// Everything seen of one thread.
#[derive(Clone, Debug)]
pub struct Thread {
    pub tid: i32,
    pub tgid: i32,
    pub comm: String,
    pub runs: Vec<Run>,
    /// Waking (or wakeup, when waking was not recorded) to running, where the switch-in was recorded.
    pub wakeup: Latencies,
    /// Wake-ups found (waking, or wakeup when waking was not recorded), latency known or not.
    pub wakeups: u64,
}

impl Thread {
    fn new(tid: i32, trace: &TraceData) -> Thread {
        Thread {
            tid,
            tgid: trace.tgid(tid),
            comm: trace.comm(tid),
            runs: Vec::new(),
            wakeup: Latencies::default(),
            wakeups: 0,
        }
    }
}

/// An interrupt-context source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    Irq(i32),
    Vector(Vector),
    Softirq(u32),
    Hrtimer(u64),
}

impl Source {
    /// Hard interrupt context (interrupts disabled) as opposed to a softirq.
    pub fn context(&self) -> &'static str {
        match self {
            Source::Irq(_) | Source::Vector(_) => "hardirq",
            Source::Softirq(_) => "softirq",
            Source::Hrtimer(_) => "hrtimer",
        }
    }
}

#[derive(Clone, Debug)]
pub struct SourceStats {
    pub source: Source,
    pub label: String,
    pub category: Category,
    pub durations: Recorder,
    /// hrtimers: how long after its programmed expiry each expiry's handler began (the
    /// `hrtimer_expire_entry`'s `now` less the `hrtimer_start`'s `expires`), for the expiries whose
    /// start was traced. The timer interrupt's latency, plus the softirq's wait for soft timers.
    pub expiry_late: Option<Box<Recorder>>,
}

/// The result of one pass.
#[derive(Clone, Debug)]
pub struct Analysis {
    pub window: (u64, u64),
    pub threads: BTreeMap<i32, Thread>,
    pub sources: BTreeMap<Source, SourceStats>,
    /// Loss markers seen, and runs and wake-ups dropped because of them.
    pub loss_markers: u64,
    pub runs_dropped: u64,
    /// Switches whose `prev` was not the task the CPU was running (a switch the kernel did not
    /// record): both runs are dropped.
    pub inconsistent_switches: u64,
    /// Switches out of the idle task that the kernel did not record (some kernels, this VM's 6.18
    /// among them, never emit them), placed at the task's `sched_wakeup` onto that idle CPU: the
    /// wake-up of a task onto an idle CPU is followed by the switch at once. Their wake-up latency is
    /// unknown and not recorded.
    pub inferred_switch_ins: u64,
    pub wakeups_dropped: u64,
    /// Exits without a matching entry (handlers already running when tracing started).
    pub unmatched_exits: u64,
    /// Handler runs of sources beyond the first [`MAX_SOURCES`]: counted, not measured.
    pub unmeasured_sources: u64,
    /// Events whose timestamp is before the previous event's (a damaged or crafted trace, or one
    /// not in time order): skipped, so no duration is ever taken backwards.
    pub backwards_timestamps: u64,
    /// hrtimer expiries and how many of them have a lateness in [`SourceStats::expiry_late`].
    pub expiries: Expiries,
    pub events: u64,
    pub target: Option<Target>,
    pub cpus: usize,
}

/// hrtimer expiries seen with the clock reading (`now`) that measures them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Expiries {
    /// Measured: the start was traced and the handler began at or after the programmed expiry.
    pub measured: u64,
    /// Run before their programmed expiry (within their slack, by an earlier interrupt).
    pub early: u64,
    /// No start traced since the last expiry: re-armed from its own callback (the tick), or armed
    /// before tracing began.
    pub unknown: u64,
}

/// Armed hrtimers remembered at once; a crafted trace starting a new timer in every event must not
/// grow the map without bound (at the bound it is emptied: those timers' expiries count as unknown).
pub const MAX_ARMED: usize = 65_536;

enum CpuState {
    /// Nothing known yet: whoever leaves first has been running since `since` (the window start).
    Start {
        since: u64,
    },
    Running {
        pid: i32,
        since: u64,
    },
    /// Events were lost: whoever leaves next ran for an unknown time.
    Lost,
}

struct CpuStacks {
    hard: Vec<(Source, u64)>,
    soft: Vec<(u32, u64)>,
    timers: Vec<(u64, u64, u64)>,
}

/// Analyse a whole trace.
pub fn analyze(trace: &TraceData) -> Analysis {
    let window = trace.window();
    let uses_waking = trace
        .header
        .events
        .iter()
        .any(|e| e == "sched/sched_waking")
        || trace
            .events
            .iter()
            .any(|e| matches!(e.kind, EventKind::Waking { .. }));
    let mut a = Analysis {
        window,
        threads: BTreeMap::new(),
        sources: BTreeMap::new(),
        loss_markers: 0,
        runs_dropped: 0,
        inconsistent_switches: 0,
        inferred_switch_ins: 0,
        wakeups_dropped: 0,
        unmatched_exits: 0,
        unmeasured_sources: 0,
        backwards_timestamps: 0,
        expiries: Expiries::default(),
        events: trace.events.len() as u64,
        target: trace.header.target.clone(),
        cpus: trace.header.cpus.len(),
    };
    let mut sched = Scheduling {
        uses_waking,
        cpus: HashMap::new(),
        running: HashMap::new(),
        pending: HashMap::new(),
        woken_onto: HashMap::new(),
    };
    let mut stacks: HashMap<u32, CpuStacks> = HashMap::new();
    // Armed hrtimers: timer -> programmed expiry.
    let mut armed: HashMap<u64, u64> = HashMap::new();

    let mut last_ts = window.0;
    for &Event { ts, cpu, kind } in &trace.events {
        if ts < window.0 || ts > window.1 {
            continue;
        }
        if ts < last_ts {
            a.backwards_timestamps += 1;
            continue;
        }
        last_ts = ts;
        let st = stacks.entry(cpu).or_insert_with(|| CpuStacks {
            hard: vec![],
            soft: vec![],
            timers: vec![],
        });
        match kind {
            EventKind::Switch {
                prev_pid,
                prev_state,
                next_pid,
                ..
            } => {
                let leave = Some(leave_reason(prev_state));
                let switch = Switch {
                    ts,
                    cpu,
                    prev_pid,
                    leave,
                    next_pid,
                };
                sched.switch(&mut a, trace, switch);
            }
            EventKind::Waking { .. } | EventKind::Wakeup { .. } | EventKind::WakeupNew { .. } => {
                sched.wakeup(&mut a, trace, ts, kind)
            }
            EventKind::Fork { .. }
            | EventKind::Exit { .. }
            | EventKind::CpuIdle { .. }
            | EventKind::IpiSend { .. }
            | EventKind::WakeIdleNoIpi { .. }
            | EventKind::StatRuntime { .. } => {}
            EventKind::Lost { .. } => {
                a.loss_markers += 1;
                sched.lost(&mut a, cpu);
                st.hard.clear();
                st.soft.clear();
                st.timers.clear();
                armed.clear();
            }
            EventKind::HrtimerStart { timer, expires, .. } => {
                if armed.len() >= MAX_ARMED && !armed.contains_key(&timer) {
                    armed.clear();
                }
                armed.insert(timer, expires);
            }
            EventKind::HrtimerEntry {
                timer,
                function,
                now: Some(now),
            } => {
                match armed.remove(&timer) {
                    Some(exp) if now >= exp => {
                        a.expiries.measured += 1;
                        record_expiry(&mut a, trace, Source::Hrtimer(function), now - exp);
                    }
                    Some(_) => a.expiries.early += 1,
                    None => a.expiries.unknown += 1,
                }
                st.handler_event(&mut a, trace, ts, kind)
            }
            EventKind::IrqEntry { .. }
            | EventKind::IrqExit { .. }
            | EventKind::VectorEntry { .. }
            | EventKind::VectorExit { .. }
            | EventKind::SoftirqEntry { .. }
            | EventKind::SoftirqExit { .. }
            | EventKind::HrtimerEntry { .. }
            | EventKind::HrtimerExit { .. } => st.handler_event(&mut a, trace, ts, kind),
        }
    }
    sched.end_runs(&mut a, trace);
    for t in a.threads.values_mut() {
        t.runs.sort_by_key(|r| r.start);
    }
    a
}

/// What [`analyze`] follows of the scheduler between events.
struct Scheduling {
    /// `sched_waking` was recorded: it, not `sched_wakeup`, starts a wake-up.
    uses_waking: bool,
    cpus: HashMap<u32, CpuState>,
    /// The CPU each task runs on.
    running: HashMap<i32, u32>,
    /// Tasks woken and not yet switched in: when the wake-up began.
    pending: HashMap<i32, u64>,
    /// The last sched_wakeup of each task: (the CPU it was put on, when).
    woken_onto: HashMap<i32, (u32, u64)>,
}

/// One `sched_switch`, its leave reason already decoded.
#[derive(Clone, Copy)]
struct Switch {
    ts: u64,
    cpu: u32,
    prev_pid: i32,
    leave: Option<Leave>,
    next_pid: i32,
}

/// The thread `pid`, added on first sight.
fn thread<'a>(a: &'a mut Analysis, trace: &TraceData, pid: i32) -> &'a mut Thread {
    a.threads
        .entry(pid)
        .or_insert_with(|| Thread::new(pid, trace))
}

impl Scheduling {
    /// Ends the run of `prev_pid` and starts the one of `next_pid`, whose wake-up latency ends here.
    fn switch(&mut self, a: &mut Analysis, trace: &TraceData, s: Switch) {
        let state = self
            .cpus
            .remove(&s.cpu)
            .unwrap_or(CpuState::Start { since: a.window.0 });
        if let Some(run) = self.ended_run(a, trace, state, s) {
            thread(a, trace, s.prev_pid).runs.push(run);
        }
        if self.running.get(&s.prev_pid) == Some(&s.cpu) {
            self.running.remove(&s.prev_pid);
        }
        self.cpus.insert(
            s.cpu,
            CpuState::Running {
                pid: s.next_pid,
                since: s.ts,
            },
        );
        if s.next_pid != 0 {
            self.running.insert(s.next_pid, s.cpu);
        }
        let t = thread(a, trace, s.next_pid);
        if let Some(w) = self.pending.remove(&s.next_pid) {
            t.wakeup.record(s.ts.saturating_sub(w));
        }
    }

    /// The run of `s.prev_pid` that the switch ends, given what the CPU was known to run (`state`);
    /// `None` when the run is unknown.
    fn ended_run(
        &mut self,
        a: &mut Analysis,
        trace: &TraceData,
        state: CpuState,
        s: Switch,
    ) -> Option<Run> {
        let Switch {
            ts,
            cpu,
            prev_pid,
            leave,
            next_pid,
        } = s;
        match state {
            CpuState::Start { since } => Some(Run {
                start: since,
                end: ts,
                cpu,
                whole: false,
                leave,
                next_pid,
            }),
            CpuState::Running { pid, since } if pid == prev_pid => Some(Run {
                start: since,
                end: ts,
                cpu,
                whole: true,
                leave,
                next_pid,
            }),
            CpuState::Running { pid: 0, since } if prev_pid != 0 => {
                match self.woken_onto.get(&prev_pid) {
                    // The idle task's switch-out was not recorded: the task started when it
                    // was woken onto this idle CPU.
                    Some(&(c, w)) if c == cpu && (since..=ts).contains(&w) => {
                        a.inferred_switch_ins += 1;
                        let idle = Run {
                            start: since,
                            end: w,
                            cpu,
                            whole: true,
                            leave: Some(Leave::Preempted),
                            next_pid: prev_pid,
                        };
                        thread(a, trace, 0).runs.push(idle);
                        self.pending.remove(&prev_pid);
                        Some(Run {
                            start: w,
                            end: ts,
                            cpu,
                            whole: true,
                            leave,
                            next_pid,
                        })
                    }
                    _ => {
                        a.inconsistent_switches += 1;
                        None
                    }
                }
            }
            CpuState::Running { .. } => {
                // The switch that ended the other task is missing: nothing sure about either.
                a.inconsistent_switches += 1;
                None
            }
            CpuState::Lost => None,
        }
    }

    /// `sched_waking`, `sched_wakeup` or `sched_wakeup_new`: counts the wake-up and starts its
    /// latency, unless the task already runs.
    fn wakeup(&mut self, a: &mut Analysis, trace: &TraceData, ts: u64, kind: EventKind) {
        match kind {
            EventKind::Waking { pid, .. } => {
                thread(a, trace, pid).wakeups += 1;
                if !self.running.contains_key(&pid) {
                    self.pending.entry(pid).or_insert(ts);
                }
            }
            EventKind::Wakeup {
                pid, target_cpu, ..
            }
            | EventKind::WakeupNew {
                pid, target_cpu, ..
            } => {
                self.woken_onto.insert(pid, (target_cpu as u32, ts));
                let new = matches!(kind, EventKind::WakeupNew { .. });
                if new || !self.uses_waking {
                    if !new {
                        thread(a, trace, pid).wakeups += 1;
                    }
                    if !self.running.contains_key(&pid) {
                        self.pending.entry(pid).or_insert(ts);
                    }
                }
            }
            _ => unreachable!("only wake-ups are passed"),
        }
    }

    /// Events were lost on `cpu`: its current run and every pending wake-up are unknown.
    fn lost(&mut self, a: &mut Analysis, cpu: u32) {
        if let Some(CpuState::Running { pid, .. }) = self.cpus.insert(cpu, CpuState::Lost) {
            a.runs_dropped += 1;
            self.running.remove(&pid);
        }
        a.wakeups_dropped += self.pending.len() as u64;
        self.pending.clear();
    }

    /// Runs still going when tracing stopped: CPU time, not quanta. A traced CPU that never
    /// switched ran one task all along: the recorder read which (`sole_runners`).
    fn end_runs(mut self, a: &mut Analysis, trace: &TraceData) {
        let end = a.window.1;
        let switches_traced = trace
            .header
            .events
            .iter()
            .any(|e| e == "sched/sched_switch");
        let sole = trace.trailer.iter().flat_map(|t| &t.sole_runners);
        for (&cpu, &pid) in sole {
            if switches_traced && pid != 0 {
                self.cpus.entry(cpu).or_insert(CpuState::Running {
                    pid,
                    since: a.window.0,
                });
            }
        }
        for (cpu, state) in self.cpus {
            if let CpuState::Running { pid, since } = state {
                if end > since {
                    let run = Run {
                        start: since,
                        end,
                        cpu,
                        whole: false,
                        leave: None,
                        next_pid: 0,
                    };
                    thread(a, trace, pid).runs.push(run);
                }
            }
        }
    }
}

impl CpuStacks {
    /// An interrupt, softirq or hrtimer entry or exit: an exit records its handler's duration.
    fn handler_event(&mut self, a: &mut Analysis, trace: &TraceData, ts: u64, kind: EventKind) {
        match kind {
            EventKind::IrqEntry { irq } => self.hard.push((Source::Irq(irq), ts)),
            EventKind::VectorEntry { vector } => self.hard.push((Source::Vector(vector), ts)),
            EventKind::IrqExit { irq, .. } => close(a, trace, &mut self.hard, Source::Irq(irq), ts),
            EventKind::VectorExit { vector } => {
                close(a, trace, &mut self.hard, Source::Vector(vector), ts)
            }
            EventKind::SoftirqEntry { vec } => self.soft.push((vec, ts)),
            EventKind::SoftirqExit { vec } => {
                match self.soft.iter().rposition(|(v, _)| *v == vec) {
                    Some(i) => {
                        let (_, t0) = self.soft.remove(i);
                        self.soft.truncate(i);
                        record_source(a, trace, Source::Softirq(vec), ts.saturating_sub(t0));
                    }
                    None => a.unmatched_exits += 1,
                }
            }
            EventKind::HrtimerEntry {
                timer, function, ..
            } => self.timers.push((timer, function, ts)),
            EventKind::HrtimerExit { timer } => {
                match self.timers.iter().rposition(|(t, _, _)| *t == timer) {
                    Some(i) => {
                        let (_, f, t0) = self.timers.remove(i);
                        self.timers.truncate(i);
                        record_source(a, trace, Source::Hrtimer(f), ts.saturating_sub(t0));
                    }
                    None => a.unmatched_exits += 1,
                }
            }
            _ => unreachable!("only handler events are passed"),
        }
    }
}

/// Distinct interrupt-context sources measured. A machine shows tens to hundreds; each costs its
/// samples until it has 1024 ([`Recorder::compact`]), then a histogram (about 270 KB): a crafted
/// trace naming a new source in every event took 1.1 GB from 250 KB when each had a histogram at
/// once (issue 32). Beyond this many, handler runs of new sources are counted, not measured.
pub const MAX_SOURCES: usize = 4096;

fn record_source(a: &mut Analysis, trace: &TraceData, s: Source, ns: u64) {
    if a.sources.len() >= MAX_SOURCES && !a.sources.contains_key(&s) {
        a.unmeasured_sources += 1;
        return;
    }
    a.sources
        .entry(s)
        .or_insert_with(|| new_source(trace, s))
        .durations
        .record(ns);
}

/// One expiry's lateness, under the same bound on sources as the durations.
fn record_expiry(a: &mut Analysis, trace: &TraceData, s: Source, ns: u64) {
    if a.sources.len() >= MAX_SOURCES && !a.sources.contains_key(&s) {
        a.unmeasured_sources += 1;
        return;
    }
    a.sources
        .entry(s)
        .or_insert_with(|| new_source(trace, s))
        .expiry_late
        .get_or_insert_with(|| Box::new(Recorder::compact()))
        .record(ns);
}

fn new_source(trace: &TraceData, s: Source) -> SourceStats {
    let (label, category) = describe_source(trace, s);
    SourceStats {
        source: s,
        label,
        category,
        durations: Recorder::compact(),
        expiry_late: None,
    }
}

fn close(a: &mut Analysis, trace: &TraceData, stack: &mut Vec<(Source, u64)>, s: Source, ts: u64) {
    match stack.iter().rposition(|(x, _)| *x == s) {
        Some(i) => {
            let (_, t0) = stack.remove(i);
            stack.truncate(i);
            record_source(a, trace, s, ts.saturating_sub(t0));
        }
        None => a.unmatched_exits += 1,
    }
}

/// A source's label and category, from the names the trailer holds.
pub fn describe_source(trace: &TraceData, s: Source) -> (String, Category) {
    match s {
        Source::Irq(n) => {
            let info = trace.trailer.as_ref().and_then(|t| t.irqs.get(&n));
            let name = info
                .map(|i| i.name.clone())
                .or_else(|| trace.irq_names.get(&n).cloned())
                .unwrap_or_default();
            let driver = info.and_then(|i| i.driver.clone());
            let cat = classify::classify_irq(&name, driver.as_deref());
            let label = match &driver {
                Some(d) => format!("irq {n} {name} ({d})"),
                None => format!("irq {n} {name}"),
            };
            (label, cat)
        }
        Source::Vector(v) => (format!("vector {}", v.name()), classify::classify_vector(v)),
        Source::Softirq(v) => (
            format!("softirq {}", softirq_name(v)),
            classify::classify_softirq(v),
        ),
        Source::Hrtimer(f) => {
            let sym = trace
                .trailer
                .as_ref()
                .and_then(|t| t.symbols.get(&format!("{f:x}")))
                .cloned();
            let cat = sym
                .as_deref()
                .map(classify::classify_hrtimer)
                .unwrap_or(Category::Timer);
            (
                format!("hrtimer {}", sym.unwrap_or_else(|| format!("{f:#x}"))),
                cat,
            )
        }
    }
}

/// How threads are grouped into rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupBy {
    Thread,
    Process,
}

impl GroupBy {
    pub fn name(self) -> &'static str {
        match self {
            GroupBy::Thread => "thread",
            GroupBy::Process => "process",
        }
    }
}

/// A set of threads reported as one row (a process, a thread, or an experiment's application).
#[derive(Clone, Debug)]
pub struct Group {
    pub key: i32,
    pub label: String,
    pub tids: Vec<i32>,
}

/// Figures of one group.
#[derive(Clone, Debug)]
pub struct GroupStats {
    pub label: String,
    pub key: i32,
    pub threads: usize,
    /// Effective quanta (whole runs only).
    pub quanta: Recorder,
    pub cpu_ns: u64,
    pub preempted: u64,
    pub blocked: u64,
    pub wakeup: Recorder,
    pub billing: Vec<billing::Billing>,
}

impl GroupStats {
    pub fn quanta_per_second(&self, window_ns: u64) -> f64 {
        if window_ns == 0 {
            0.0
        } else {
            self.quanta.count() as f64 * 1e9 / window_ns as f64
        }
    }

    /// CPU use as a share of one CPU over the window.
    pub fn cpu_share(&self, window_ns: u64) -> f64 {
        if window_ns == 0 {
            0.0
        } else {
            self.cpu_ns as f64 / window_ns as f64
        }
    }
}

impl Analysis {
    /// Every measured hrtimer expiry's lateness, pooled over the timers (empty when none was).
    pub fn expiry_latency(&self) -> Recorder {
        let mut out = Recorder::new();
        for r in self
            .sources
            .values()
            .filter_map(|s| s.expiry_late.as_deref())
        {
            out.merge(r).expect("recorders of one shape merge");
        }
        out
    }

    pub fn window_ns(&self) -> u64 {
        self.window.1.saturating_sub(self.window.0)
    }

    /// Groups of threads, idle (pid 0) left out.
    pub fn groups(&self, by: GroupBy) -> Vec<Group> {
        let mut out: BTreeMap<i32, Group> = BTreeMap::new();
        for t in self.threads.values().filter(|t| t.tid != 0) {
            let key = match by {
                GroupBy::Thread => t.tid,
                GroupBy::Process => t.tgid,
            };
            out.entry(key)
                .or_insert_with(|| Group {
                    key,
                    label: String::new(),
                    tids: vec![],
                })
                .tids
                .push(t.tid);
        }
        for g in out.values_mut() {
            let leader = self
                .threads
                .get(&g.key)
                .or_else(|| self.threads.get(&g.tids[0]))
                .expect("group has a thread");
            g.label = match by {
                GroupBy::Process if g.tids.len() > 1 => {
                    format!("{} [{}] ({} threads)", leader.comm, g.key, g.tids.len())
                }
                _ => format!("{} [{}]", leader.comm, g.key),
            };
        }
        out.into_values().collect()
    }

    /// A group of the threads whose name starts with `prefix` (experiments name their threads).
    pub fn group_by_prefix(&self, label: &str, prefix: &str) -> Group {
        let tids = self
            .threads
            .values()
            .filter(|t| t.tid != 0 && t.comm.starts_with(prefix))
            .map(|t| t.tid)
            .collect();
        Group {
            key: 0,
            label: label.into(),
            tids,
        }
    }

    pub fn runs<'a>(&'a self, g: &'a Group) -> impl Iterator<Item = &'a Run> + 'a {
        g.tids
            .iter()
            .filter_map(|t| self.threads.get(t))
            .flat_map(|t| t.runs.iter())
    }

    /// CPU time of a group (what reports rank by), without building its statistics.
    pub fn cpu_ns(&self, g: &Group) -> u64 {
        self.runs(g).fold(0, |c, r| c.saturating_add(r.len()))
    }

    /// Quanta, CPU time, preemptions and billing at each rate in `hz` for a group.
    pub fn stats(&self, g: &Group, hz: &[u32], phase_ns: u64) -> GroupStats {
        let mut s = GroupStats {
            label: g.label.clone(),
            key: g.key,
            threads: g.tids.len(),
            quanta: Recorder::compact(),
            cpu_ns: 0,
            preempted: 0,
            blocked: 0,
            wakeup: Recorder::compact(),
            billing: Vec::new(),
        };
        for r in self.runs(g) {
            s.cpu_ns = s.cpu_ns.saturating_add(r.len());
            if r.whole {
                s.quanta.record(r.len().max(1));
                match r.leave {
                    Some(Leave::Preempted) => s.preempted += 1,
                    Some(Leave::Blocked) | Some(Leave::Exited) => s.blocked += 1,
                    None => {}
                }
            }
        }
        for t in g.tids.iter().filter_map(|t| self.threads.get(t)) {
            t.wakeup.fold_into(&mut s.wakeup);
        }
        s.billing = hz
            .iter()
            .map(|&h| billing::bill(self.runs(g), h, phase_ns))
            .collect();
        s
    }

    /// CPU time of the idle task (pid 0) over all CPUs.
    pub fn idle_ns(&self) -> u64 {
        self.threads
            .get(&0)
            .map(|t| t.runs.iter().fold(0, |c: u64, r| c.saturating_add(r.len())))
            .unwrap_or(0)
    }

    /// Threads matching a selector: a tid, a tgid, or a name.
    pub fn select(&self, sel: &str) -> Vec<i32> {
        if let Ok(pid) = sel.parse::<i32>() {
            let tids: Vec<i32> = self
                .threads
                .values()
                .filter(|t| t.tid == pid || t.tgid == pid)
                .map(|t| t.tid)
                .collect();
            return tids;
        }
        self.threads
            .values()
            .filter(|t| t.tid != 0 && t.comm == sel)
            .map(|t| t.tid)
            .collect()
    }

    /// Interrupt-context sources, aggregated by category.
    pub fn by_category(&self, context: &str) -> BTreeMap<Category, Recorder> {
        let mut out: BTreeMap<Category, Recorder> = BTreeMap::new();
        for s in self
            .sources
            .values()
            .filter(|s| s.source.context() == context)
        {
            let _ = out.entry(s.category).or_default().merge(&s.durations);
        }
        out
    }
}

/// One line of a task's timeline.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TimelineEntry {
    pub tid: i32,
    pub cpu: u32,
    /// Since the start of the trace.
    pub start_ns: u64,
    pub ran_ns: u64,
    pub ended: String,
    pub next: String,
    /// Off the CPU before this run (since the previous run of the same thread ended).
    pub waited_ns: Option<u64>,
}

/// The runs of the selected threads, in time order, with how each ended and who took over.
pub fn timeline(a: &Analysis, trace: &TraceData, tids: &[i32]) -> Vec<TimelineEntry> {
    let mut out = Vec::new();
    for &tid in tids {
        let Some(t) = a.threads.get(&tid) else {
            continue;
        };
        let mut prev_end = None;
        for r in &t.runs {
            let ended = match r.leave {
                Some(Leave::Preempted) => "preempted".to_string(),
                Some(Leave::Blocked) => "blocked".to_string(),
                Some(Leave::Exited) => "exited".to_string(),
                None => "trace ended".to_string(),
            };
            out.push(TimelineEntry {
                tid,
                cpu: r.cpu,
                start_ns: r.start.saturating_sub(a.window.0),
                ran_ns: r.len(),
                ended,
                next: if r.leave.is_some() {
                    format!("{} [{}]", trace.comm(r.next_pid), r.next_pid)
                } else {
                    String::new()
                },
                waited_ns: prev_end.map(|e: u64| r.start.saturating_sub(e)),
            });
            prev_end = Some(r.end);
        }
    }
    out.sort_by_key(|e| (e.start_ns, e.tid));
    out
}
