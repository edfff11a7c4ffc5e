//! The discrete-event engine: CPUs, the run queue, the clock interrupt and timers, overheads.
//!
//! Time is integer nanoseconds on a simulated clock starting at 0. Each loop iteration processes
//! exactly one event: the earliest of a CPU finishing its task's burst, a timer or device
//! interrupt, the periodic tick, or (soft and firm timers) a kernel entry. Ties are broken in that
//! order, then by CPU and task index, so a seed always gives the same run. The tick and the burst
//! completions are not kept in the heap (they are one field each), which keeps the common events
//! cheap; the heaps hold only alarms and device interrupts.
//!
//! Overheads are CPU time taken from whatever the CPU would have done: an interrupt charges its
//! direct and indirect cost, a context switch its cost, and the task's work resumes after them.

use crate::config::{Class, Mechanism, Ns, Policy, RoundTrips, RunConfig, NS_PER_S};
use crate::rng::Rng;
use crate::stats::{CpuAccount, TaskStats};
use crate::task::{Cx, Pipe, Step, TaskState, Wake};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const NONE: Ns = Ns::MAX;

/// Linux's nice-to-weight table (nice -20..19), used by the fair policy.
const NICE_WEIGHT: [u64; 40] = [
    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916, 9548, 7620, 6100, 4904,
    3906, 3121, 2501, 1991, 1586, 1277, 1024, 820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87,
    70, 56, 45, 36, 29, 23, 18, 15,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sched {
    Plan,
    Fifo(u32),
    Rr(u32),
    Other,
}

impl Sched {
    fn level(self) -> u32 {
        match self {
            Sched::Plan => 300,
            Sched::Fifo(p) | Sched::Rr(p) => 100 + p,
            Sched::Other => 0,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RunState {
    Running(usize),
    Runnable,
    Blocked,
}

struct Task {
    sched: Sched,
    nice: i32,
    pin: Option<usize>,
    state: RunState,
    started: bool,
    /// A burst is under way: `Compute` with `remaining`, or `forever`.
    active: bool,
    forever: bool,
    remaining: Ns,
    /// Signal delivered and not yet noticed: (asked-for expiry, interrupt time).
    signal: Option<(Ns, Ns)>,
    alarm: Option<Ns>,
    alarm_gen: u32,
    device_pending: u32,
    inbox: u32,
    rr_left: u64,
    counter: i64,
    vruntime: u64,
    expired: bool,
    last_cpu: usize,
    server: Option<usize>,
    decoder: Option<usize>,
    pipe: Option<usize>,
    round_trips: Option<RoundTrips>,
    rpc: Rpc,
    behaviour: TaskState,
    rng: Rng,
    stats: TaskStats,
}

/// Where a task stands in the round trips of [`RoundTrips`].
#[derive(Default)]
struct Rpc {
    /// Client: requests still to make before its hand-off (deferred until they are done).
    left: u32,
    /// Client: blocked until the server replies; nothing else wakes it meanwhile.
    waiting: bool,
    /// Client: the reply came; its burst comes next.
    replied: bool,
    /// The burst under way is a request's (server) or a reply's (client), not the behaviour's.
    burst: bool,
    /// Server: clients whose requests wait, oldest first.
    callers: VecDeque<usize>,
    /// Server: the client whose request is being served.
    serving: Option<usize>,
    /// Client: hand-offs deferred until `left` reaches zero.
    handoffs: u32,
}

impl Rpc {
    /// In a round trip: its behaviour waits until it is over.
    fn busy(&self) -> bool {
        self.left > 0 || self.waiting || self.replied || self.burst
    }
}

struct Cpu {
    current: Option<usize>,
    seg_start: Ns,
    overhead_until: Ns,
    need_resched: bool,
    done_at: Ns,
    next_entry: Ns,
    quantum_start: Ns,
    quantum_billed: u64,
    account: CpuAccount,
    /// The cache model (only when a task has a footprint): bytes of each task's working set this
    /// CPU's cache holds, and bytes holding nobody's. They always add up to the cache's size.
    resident: Vec<u64>,
    free: u64,
}

/// What a run produced.
#[derive(Debug)]
pub struct RunOutcome {
    pub tasks: Vec<TaskStats>,
    pub cpus: Vec<CpuAccount>,
    pub events: u64,
    pub simulated_ns: Ns,
    /// Stopped early by the stop flag.
    pub interrupted: bool,
    /// Linux 2.4 recalculations of every counter (end of an epoch).
    pub recalculations: u64,
}

/// Where a running simulation reports how far it got, and how it is asked to stop.
#[derive(Default)]
pub struct Control<'a> {
    pub stop: Option<&'a AtomicBool>,
    /// Simulated ns reached, updated every few thousand events.
    pub progress: Option<&'a AtomicU64>,
}

pub struct Engine<'c> {
    cfg: &'c RunConfig,
    now: Ns,
    tick_index: u64,
    next_tick: Ns,
    quantum_ticks: u64,
    quantum_ns: Ns,
    fair: bool,
    cpus: Vec<Cpu>,
    tasks: Vec<Task>,
    runq: VecDeque<usize>,
    alarms: BinaryHeap<Reverse<(Ns, u32, u32)>>,
    devices: BinaryHeap<Reverse<(Ns, u32)>>,
    pipes: Vec<Pipe>,
    entry_rng: Rng,
    events: u64,
    min_vruntime: u64,
    recalculations: u64,
    any_idle: bool,
    /// Some task has a working set: switches pay its refill.
    cache_on: bool,
}

impl<'c> Engine<'c> {
    /// Build the engine for a validated configuration.
    pub fn new(cfg: &'c RunConfig) -> Engine<'c> {
        let quantum_ticks = cfg.quantum_ticks().max(1);
        let fair = cfg.policy == Policy::Fair;
        let index = |name: &str| cfg.tasks.iter().position(|t| t.name == name);
        let mut pipes = Vec::new();
        let mut tasks: Vec<Task> = cfg
            .tasks
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                let sched = match (spec.class, cfg.policy) {
                    (Some(Class::Fifo), _) => Sched::Fifo(spec.priority),
                    (Some(Class::Rr), _) => Sched::Rr(spec.priority),
                    (Some(Class::Other), _) => Sched::Other,
                    (None, Policy::Rr) => Sched::Rr(spec.priority),
                    (None, Policy::Fifo) => Sched::Fifo(spec.priority),
                    (None, Policy::Linux24 | Policy::Fair) => Sched::Other,
                    (None, Policy::Plan) => {
                        if matches!(spec.behaviour, crate::behaviour::Behaviour::Periodic { .. }) {
                            Sched::Plan
                        } else {
                            Sched::Rr(1)
                        }
                    }
                };
                let pipe =
                    if let crate::behaviour::Behaviour::Decoder { buffer, .. } = spec.behaviour {
                        pipes.push(Pipe {
                            ready: 0,
                            capacity: buffer,
                        });
                        Some(pipes.len() - 1)
                    } else {
                        None
                    };
                Task {
                    sched,
                    nice: spec.nice,
                    pin: spec.cpu,
                    state: RunState::Runnable,
                    started: false,
                    active: false,
                    forever: false,
                    remaining: 0,
                    signal: None,
                    alarm: None,
                    alarm_gen: 0,
                    device_pending: 0,
                    inbox: 0,
                    rr_left: quantum_ticks,
                    counter: 0,
                    vruntime: 0,
                    expired: false,
                    last_cpu: spec.cpu.unwrap_or(0),
                    server: spec.behaviour.target().and_then(index),
                    decoder: spec.behaviour.decoder().and_then(index),
                    pipe,
                    round_trips: spec.round_trips.filter(|r| r.count > 0),
                    rpc: Rpc::default(),
                    behaviour: TaskState::new(spec),
                    rng: Rng::new(cfg.seed, i as u64 + 1),
                    stats: TaskStats::default(),
                }
            })
            .collect();
        // A player takes its frames from its decoder's buffer.
        for i in 0..tasks.len() {
            if let Some(d) = tasks[i].decoder {
                tasks[i].pipe = tasks[d].pipe;
            }
        }
        let cache_on = cfg.tasks.iter().any(|t| t.footprint_kib > 0);
        let cache_bytes = cfg.cache.size_kib.saturating_mul(1024);
        let mut e = Engine {
            cfg,
            now: 0,
            tick_index: 1,
            next_tick: 0,
            quantum_ticks,
            quantum_ns: quantum_ticks * cfg.tick_ns(),
            fair,
            cpus: (0..cfg.cpus)
                .map(|_| Cpu {
                    current: None,
                    seg_start: 0,
                    overhead_until: 0,
                    need_resched: true,
                    done_at: NONE,
                    next_entry: NONE,
                    quantum_start: 0,
                    quantum_billed: 0,
                    account: CpuAccount::default(),
                    resident: if cache_on {
                        vec![0; cfg.tasks.len()]
                    } else {
                        Vec::new()
                    },
                    free: cache_bytes,
                })
                .collect(),
            tasks,
            runq: VecDeque::new(),
            alarms: BinaryHeap::new(),
            devices: BinaryHeap::new(),
            pipes,
            entry_rng: Rng::new(cfg.seed, 0),
            events: 0,
            min_vruntime: 0,
            recalculations: 0,
            any_idle: true,
            cache_on,
        };
        e.next_tick = e.tick_time(1);
        for i in 0..e.tasks.len() {
            e.tasks[i].counter = e.allocation(e.tasks[i].nice);
            e.runq.push_back(i);
        }
        e
    }

    fn tick_time(&self, k: u64) -> Ns {
        let hz = self.cfg.hz as u64;
        (k / hz) * NS_PER_S + ((k % hz) * NS_PER_S) / hz
    }

    /// Linux 2.4: an epoch's allocation is the quantum in ticks (scaled by nice) plus one.
    fn allocation(&self, nice: i32) -> i64 {
        let base = self.quantum_ticks as i64 * (20 - nice as i64) / 20;
        base.max(1) + 1
    }

    fn goodness(&self, t: usize) -> i64 {
        let task = &self.tasks[t];
        if task.counter <= 0 {
            0
        } else {
            task.counter + 20 - task.nice as i64
        }
    }

    fn eligible(&self, t: usize, c: usize) -> bool {
        self.tasks[t].pin.is_none_or(|p| p == c)
    }

    /// Whether waking task `a` should preempt running task `b`.
    fn preempts(&self, a: usize, b: usize) -> bool {
        let (sa, sb) = (self.tasks[a].sched, self.tasks[b].sched);
        if sa.level() != sb.level() {
            return sa.level() > sb.level();
        }
        if sa == Sched::Other && sb == Sched::Other {
            if self.fair {
                return self.tasks[a].vruntime.saturating_add(self.quantum_ns / 4)
                    < self.tasks[b].vruntime;
            }
            return self.goodness(a) > self.goodness(b);
        }
        false
    }

    /// Whether `a` is a better pick than `b` (strictly; ties keep queue order).
    fn better(&self, a: usize, b: usize) -> bool {
        let (sa, sb) = (self.tasks[a].sched, self.tasks[b].sched);
        if sa.level() != sb.level() {
            return sa.level() > sb.level();
        }
        if sa == Sched::Other {
            if self.fair {
                return self.tasks[a].vruntime < self.tasks[b].vruntime;
            }
            return self.goodness(a) > self.goodness(b);
        }
        false
    }

    fn pick_index(&self, c: usize) -> Option<usize> {
        let mut best: Option<usize> = None;
        for (i, &t) in self.runq.iter().enumerate() {
            if !self.eligible(t, c) {
                continue;
            }
            if best.is_none_or(|b| self.better(t, self.runq[b])) {
                best = Some(i);
            }
        }
        best
    }

    fn pick(&mut self, c: usize) -> Option<usize> {
        let mut i = self.pick_index(c)?;
        let t = self.runq[i];
        if !self.fair && self.tasks[t].sched == Sched::Other && self.goodness(t) == 0 {
            // Every runnable time-sharing counter is used up: a new epoch for every task.
            self.recalculations += 1;
            for j in 0..self.tasks.len() {
                if self.tasks[j].sched == Sched::Other {
                    let alloc = self.allocation(self.tasks[j].nice);
                    self.tasks[j].counter = self.tasks[j].counter / 2 + alloc;
                }
            }
            i = self.pick_index(c)?;
        }
        self.runq.remove(i)
    }

    // ----- time and overhead -----

    /// Bring CPU `c`'s accounts up to `now`.
    fn checkpoint(&mut self, c: usize) {
        let now = self.now;
        let cpu = &mut self.cpus[c];
        let start = cpu.seg_start;
        if now <= start {
            return;
        }
        let ov_end = cpu.overhead_until.clamp(start, now);
        cpu.account.overhead_ns += ov_end - start;
        let rest = now - ov_end;
        match cpu.current {
            Some(t) => {
                cpu.account.work_ns += rest;
                let task = &mut self.tasks[t];
                task.stats.consumed_ns += rest;
                if task.active && !task.forever {
                    debug_assert!(task.remaining >= rest, "a burst ran past its end");
                    task.remaining -= rest.min(task.remaining);
                }
                if self.fair && task.sched == Sched::Other {
                    let w = NICE_WEIGHT[(task.nice + 20) as usize];
                    task.vruntime += rest * 1024 / w;
                }
            }
            None => cpu.account.idle_ns += rest,
        }
        cpu.seg_start = now;
    }

    fn charge(&mut self, c: usize, cost: Ns) {
        if cost == 0 {
            return;
        }
        self.checkpoint(c);
        let cpu = &mut self.cpus[c];
        cpu.overhead_until = cpu.overhead_until.max(self.now) + cost;
        cpu.account.overhead_charged_ns += cost;
    }

    /// When the CPU's current burst completes.
    fn refresh(&mut self, c: usize) {
        let cpu = &self.cpus[c];
        self.cpus[c].done_at = match cpu.current {
            Some(t) if self.tasks[t].active && !self.tasks[t].forever => {
                cpu.overhead_until.max(self.now) + self.tasks[t].remaining
            }
            _ => NONE,
        };
    }

    fn effective_now(&self, c: usize) -> Ns {
        self.cpus[c].overhead_until.max(self.now)
    }

    // ----- scheduling -----

    fn end_quantum(&mut self, c: usize, t: usize) {
        let len = self.now - self.cpus[c].quantum_start;
        let billed = self.cpus[c].quantum_billed;
        self.tasks[t]
            .stats
            .record_quantum(len, billed, self.cfg.tick_ns());
    }

    fn wake(&mut self, t: usize) {
        // A client waiting for its server's reply sleeps through everything else: its alarms
        // and devices are noticed once the round trips are over.
        if self.tasks[t].state != RunState::Blocked || self.tasks[t].rpc.waiting {
            return;
        }
        self.tasks[t].state = RunState::Runnable;
        self.tasks[t].stats.wakeups += 1;
        if self.fair && self.tasks[t].sched == Sched::Other {
            let floor = self.min_vruntime.saturating_sub(self.quantum_ns / 2);
            self.tasks[t].vruntime = self.tasks[t].vruntime.max(floor);
        }
        self.runq.push_back(t);
        // An idle CPU takes it; otherwise preempt the CPU running the least important task.
        let mut victim: Option<usize> = None;
        for c in 0..self.cpus.len() {
            if !self.eligible(t, c) {
                continue;
            }
            match self.cpus[c].current {
                None => {
                    self.cpus[c].need_resched = true;
                    return;
                }
                Some(cur) => {
                    if self.preempts(t, cur)
                        && victim.is_none_or(|v| self.better(self.cpus[v].current.unwrap(), cur))
                    {
                        victim = Some(c);
                    }
                }
            }
        }
        if let Some(c) = victim {
            self.cpus[c].need_resched = true;
        }
    }

    fn schedule(&mut self, c: usize) {
        self.cpus[c].need_resched = false;
        self.checkpoint(c);
        let prev = self.cpus[c].current;
        if let Some(p) = prev {
            self.tasks[p].state = RunState::Runnable;
            if self.tasks[p].expired {
                self.runq.push_back(p);
            } else {
                self.runq.push_front(p);
            }
            self.cpus[c].current = None;
        }
        let next = self.pick(c);
        if let Some(p) = prev {
            if next != Some(p) || self.tasks[p].expired {
                let (start, billed) = (self.cpus[c].quantum_start, self.cpus[c].quantum_billed);
                self.tasks[p]
                    .stats
                    .record_quantum(self.now - start, billed, self.cfg.tick_ns());
            }
        }
        if self.fair {
            self.update_min_vruntime();
        }
        let Some(n) = next else {
            self.cpus[c].done_at = NONE;
            self.cpus[c].next_entry = NONE;
            return;
        };
        let new_quantum = next != prev || self.tasks[n].expired;
        if next != prev {
            self.cpus[c].account.context_switches += 1;
            self.charge(c, self.cfg.costs.switch);
            let refill = self.refill(c, n);
            self.charge(c, refill);
        }
        if new_quantum {
            self.cpus[c].quantum_start = self.now;
            self.cpus[c].quantum_billed = 0;
        }
        if self.tasks[n].expired {
            self.tasks[n].expired = false;
            self.tasks[n].rr_left = self.quantum_ticks;
        }
        self.tasks[n].state = RunState::Running(c);
        self.tasks[n].last_cpu = c;
        self.cpus[c].current = Some(n);
        if self.cpus[c].next_entry == NONE && self.soft() {
            self.cpus[c].next_entry = self.now + self.entry_rng.exp(self.cfg.entry_interval);
        }
        self.deliver_pending(c, n);
        self.refresh(c);
    }

    /// Task `n` gets CPU `c`: it refills what of its working set the CPU's cache lost since it last
    /// ran there (all of it on a CPU it never ran on). The space comes from free space first, then
    /// from the other tasks' lines in proportion to what each holds (random replacement, so more
    /// competing tasks leave each less). Returns the time the refill takes.
    fn refill(&mut self, c: usize, n: usize) -> Ns {
        if !self.cache_on {
            return 0;
        }
        let cache = self.cfg.cache;
        let want = self.cfg.tasks[n]
            .footprint_kib
            .min(cache.size_kib)
            .saturating_mul(1024);
        let cpu = &mut self.cpus[c];
        let miss = want.saturating_sub(cpu.resident[n]);
        if miss == 0 {
            return 0;
        }
        let from_free = miss.min(cpu.free);
        cpu.free -= from_free;
        evict(&mut cpu.resident, n, miss - from_free);
        cpu.resident[n] = want;
        let ns = cache.refill_bytes_ns(miss);
        cpu.account.refills += 1;
        cpu.account.refill_ns += ns;
        ns
    }

    fn update_min_vruntime(&mut self) {
        let mut m = u64::MAX;
        for &t in self.runq.iter() {
            if self.tasks[t].sched == Sched::Other {
                m = m.min(self.tasks[t].vruntime);
            }
        }
        for cpu in &self.cpus {
            if let Some(t) = cpu.current {
                if self.tasks[t].sched == Sched::Other {
                    m = m.min(self.tasks[t].vruntime);
                }
            }
        }
        if m != u64::MAX {
            self.min_vruntime = self.min_vruntime.max(m);
        }
    }

    fn resched_all(&mut self) {
        loop {
            let mut any = false;
            for c in 0..self.cpus.len() {
                if self.cpus[c].need_resched {
                    any = true;
                    self.schedule(c);
                }
            }
            if !any {
                break;
            }
            // Several wake-ups in one event may have picked the same idle CPU: offer the others.
            for c in 0..self.cpus.len() {
                if self.cpus[c].current.is_none() && self.runq.iter().any(|&t| self.eligible(t, c))
                {
                    self.cpus[c].need_resched = true;
                }
            }
        }
        self.any_idle = false;
        for c in 0..self.cpus.len() {
            if self.cpus[c].current.is_none() {
                self.any_idle = true;
                if self.runq.iter().any(|&t| self.eligible(t, c)) {
                    self.cpus[c].account.idle_with_waiting += 1;
                }
            }
        }
    }

    fn soft(&self) -> bool {
        matches!(self.cfg.timer, Mechanism::Soft | Mechanism::Firm)
    }

    // ----- behaviours -----

    /// Run one behaviour callback for the task on CPU `c` and apply what it asked for.
    fn call<F>(&mut self, c: usize, t: usize, f: F) -> Option<Step>
    where
        F: FnOnce(&mut TaskState, &mut Cx) -> Option<Step>,
    {
        let now = self.effective_now(c);
        let tick_timers = (self.cfg.timer == Mechanism::Periodic).then(|| self.cfg.tick_ns());
        let task = &mut self.tasks[t];
        let pipe = match task.pipe {
            Some(p) => Some(&mut self.pipes[p]),
            None => None,
        };
        let mut cx = Cx {
            now,
            rng: &mut task.rng,
            stats: &mut task.stats,
            inbox: &mut task.inbox,
            pipe,
            alarm: None,
            device: None,
            tick_timers,
            send_server: false,
            send_decoder: false,
        };
        let step = f(&mut task.behaviour, &mut cx);
        let (alarm, device, send_server, send_decoder) =
            (cx.alarm, cx.device, cx.send_server, cx.send_decoder);
        if let Some(a) = alarm {
            let task = &mut self.tasks[t];
            task.alarm_gen = task.alarm_gen.wrapping_add(1);
            task.alarm = a;
            if let Some(at) = a {
                self.alarms.push(Reverse((at, t as u32, task.alarm_gen)));
            }
        }
        if let Some(at) = device {
            self.devices.push(Reverse((at.max(self.now), t as u32)));
        }
        if send_server {
            if let Some(rt) = self.tasks[t].round_trips {
                // The hand-off waits for the requests before it (sent once the task blocks).
                let rpc = &mut self.tasks[t].rpc;
                rpc.left += rt.count;
                rpc.handoffs += 1;
            } else if let Some(s) = self.tasks[t].server {
                self.message(s);
            }
        }
        if send_decoder {
            if let Some(d) = self.tasks[t].decoder {
                self.message(d);
            }
        }
        step
    }

    /// The next step of a round trip for task `t` on CPU `c`, if it is in one: a client's reply
    /// burst, its next request (then it blocks for the reply), or a server's next request.
    fn round_trip(&mut self, c: usize, t: usize) -> bool {
        let task = &mut self.tasks[t];
        let work = if std::mem::take(&mut task.rpc.replied) {
            task.round_trips.map(|r| r.client)
        } else if task.rpc.waiting {
            self.block(c, t);
            return true;
        } else if task.rpc.left > 0 {
            let Some(s) = task.server else {
                return false;
            };
            task.rpc.waiting = true;
            self.tasks[s].rpc.callers.push_back(t);
            self.wake(s);
            self.block(c, t);
            return true;
        } else if let Some(caller) = task.rpc.callers.pop_front() {
            task.rpc.serving = Some(caller);
            self.tasks[caller].round_trips.map(|r| r.server)
        } else {
            None
        };
        let Some(range) = work else {
            return false;
        };
        let task = &mut self.tasks[t];
        let ns = task.rng.range(range.0, range.1);
        task.rpc.burst = true;
        self.apply(c, t, Some(Step::Compute(ns)));
        true
    }

    /// A request's or a reply's burst ended: the server replies; the client, after its last
    /// reply, makes the hand-off it deferred.
    fn round_trip_done(&mut self, t: usize) {
        if let Some(caller) = self.tasks[t].rpc.serving.take() {
            let client = &mut self.tasks[caller].rpc;
            client.waiting = false;
            client.replied = true;
            self.wake(caller);
            return;
        }
        let rpc = &mut self.tasks[t].rpc;
        rpc.left = rpc.left.saturating_sub(1);
        if rpc.left == 0 {
            let handoffs = std::mem::take(&mut rpc.handoffs);
            if let Some(s) = self.tasks[t].server {
                for _ in 0..handoffs {
                    self.message(s);
                }
            }
        }
    }

    fn message(&mut self, to: usize) {
        self.tasks[to].inbox += 1;
        if self.tasks[to].state == RunState::Blocked && self.tasks[to].behaviour.wants_messages() {
            self.wake(to);
        }
    }

    /// The task just got CPU `c`: start it, or let it notice what happened while it waited.
    fn deliver_pending(&mut self, c: usize, t: usize) {
        if !self.tasks[t].started {
            self.tasks[t].started = true;
            let step = self.call(c, t, |b, cx| Some(b.on_start(cx)));
            self.apply(c, t, step);
            return;
        }
        if self.tasks[t].signal.is_some() && !self.tasks[t].rpc.busy() {
            self.notice_signal(c, t);
            return;
        }
        if !self.tasks[t].active {
            self.after_block(c, t);
        }
    }

    fn notice_signal(&mut self, c: usize, t: usize) {
        if self.tasks[t].rpc.busy() {
            return; // noticed once the round trips are over
        }
        let Some((expiry, fired)) = self.tasks[t].signal.take() else {
            return;
        };
        let now = self.effective_now(c);
        self.tasks[t]
            .stats
            .record_alarm(now - fired.min(now), now - expiry.min(now));
        let computing = self.tasks[t].active;
        let step = self.call(c, t, |b, cx| b.on_alarm(cx, computing));
        match step {
            Some(s) => self.apply(c, t, Some(s)),
            None if !computing => self.apply(c, t, Some(Step::Block)),
            None => {}
        }
    }

    /// A task with no burst under way: handle what woke it, or block.
    fn after_block(&mut self, c: usize, t: usize) {
        if self.round_trip(c, t) {
            return;
        }
        if self.tasks[t].signal.is_some() {
            self.notice_signal(c, t);
        } else if self.tasks[t].device_pending > 0 {
            self.tasks[t].device_pending -= 1;
            let step = self.call(c, t, |b, cx| Some(b.on_wake(cx, Wake::Device)));
            self.apply(c, t, step);
        } else if self.tasks[t].inbox > 0 && self.tasks[t].behaviour.wants_messages() {
            let step = self.call(c, t, |b, cx| Some(b.on_wake(cx, Wake::Message)));
            self.apply(c, t, step);
        } else {
            self.block(c, t);
        }
    }

    fn apply(&mut self, c: usize, t: usize, step: Option<Step>) {
        match step {
            Some(Step::Compute(ns)) => {
                let task = &mut self.tasks[t];
                task.active = true;
                task.forever = false;
                task.remaining = ns;
            }
            Some(Step::Forever) => {
                let task = &mut self.tasks[t];
                task.active = true;
                task.forever = true;
            }
            Some(Step::Block) | None => {
                self.tasks[t].active = false;
                self.tasks[t].forever = false;
                self.after_block(c, t);
                return;
            }
        }
        if self.soft() {
            // A system call is a kernel entry: soft timers are checked on the way out.
            self.fire_due();
        }
        self.refresh(c);
    }

    fn block(&mut self, c: usize, t: usize) {
        self.end_quantum(c, t);
        let task = &mut self.tasks[t];
        task.state = RunState::Blocked;
        task.active = false;
        self.cpus[c].current = None;
        self.cpus[c].done_at = NONE;
        self.cpus[c].need_resched = true;
        if self.soft() {
            self.fire_due();
        }
    }

    // ----- timers -----

    /// Deliver every alarm whose time has come.
    fn fire_due(&mut self) {
        while let Some(&Reverse((at, t, gen))) = self.alarms.peek() {
            if at > self.now {
                break;
            }
            self.alarms.pop();
            let t = t as usize;
            if self.tasks[t].alarm_gen != gen || self.tasks[t].alarm != Some(at) {
                continue; // replaced or cancelled
            }
            self.deliver_alarm(t, at);
        }
    }

    fn deliver_alarm(&mut self, t: usize, expiry: Ns) {
        self.tasks[t].alarm = None;
        self.tasks[t].signal = Some((expiry, self.now));
        match self.tasks[t].state {
            // About to be switched out (its quantum ran out on this tick): a signal is delivered on
            // the way back to user mode, which comes only after the switch.
            RunState::Running(c) if self.cpus[c].need_resched && self.tasks[t].expired => {}
            RunState::Running(c) => {
                self.checkpoint(c);
                self.notice_signal(c, t);
                if self.cpus[c].current == Some(t) {
                    self.refresh(c);
                }
            }
            RunState::Runnable => {}
            RunState::Blocked => self.wake(t),
        }
    }

    /// The next valid alarm expiry (dropping replaced ones from the top).
    fn next_alarm(&mut self) -> Ns {
        while let Some(&Reverse((at, t, gen))) = self.alarms.peek() {
            let task = &self.tasks[t as usize];
            if task.alarm_gen == gen && task.alarm == Some(at) {
                return at;
            }
            self.alarms.pop();
        }
        NONE
    }

    fn alarm_cpu(&self) -> usize {
        match self.alarms.peek() {
            Some(&Reverse((_, t, _))) => match self.tasks[t as usize].state {
                RunState::Running(c) => c,
                _ => self.tasks[t as usize].last_cpu,
            },
            None => 0,
        }
    }

    fn on_tick(&mut self) {
        let irq = self.cfg.costs.irq();
        for c in 0..self.cpus.len() {
            self.checkpoint(c);
            self.cpus[c].account.ticks += 1;
            self.cpus[c].account.interrupts += 1;
            if let Some(t) = self.cpus[c].current {
                self.cpus[c].account.ticks_busy += 1;
                self.cpus[c].quantum_billed += 1;
                self.tasks[t].stats.billed_ticks += 1;
            }
            self.charge(c, irq);
            if let Some(t) = self.cpus[c].current {
                self.quantum_tick(c, t);
            }
            self.refresh(c);
        }
        self.fire_due();
        self.tick_index += 1;
        self.next_tick = self.tick_time(self.tick_index);
    }

    fn quantum_tick(&mut self, c: usize, t: usize) {
        match self.tasks[t].sched {
            Sched::Rr(_) => {
                let task = &mut self.tasks[t];
                task.rr_left = task.rr_left.saturating_sub(1);
                if task.rr_left == 0 {
                    task.expired = true;
                    self.cpus[c].need_resched = true;
                }
            }
            Sched::Other if !self.fair => {
                let task = &mut self.tasks[t];
                if task.counter > 0 {
                    task.counter -= 1;
                }
                if task.counter == 0 {
                    task.expired = true;
                    self.cpus[c].need_resched = true;
                }
            }
            Sched::Other => {
                let ran = self.now - self.cpus[c].quantum_start;
                if ran >= self.quantum_ns
                    && self
                        .runq
                        .iter()
                        .any(|&o| self.tasks[o].sched == Sched::Other && self.eligible(o, c))
                {
                    self.tasks[t].expired = true;
                    self.cpus[c].need_resched = true;
                }
            }
            Sched::Fifo(_) | Sched::Plan => {}
        }
    }

    fn on_device(&mut self, t: usize) {
        let c = match self.tasks[t].state {
            RunState::Running(c) => c,
            _ => self.tasks[t].last_cpu,
        };
        self.cpus[c].account.interrupts += 1;
        self.charge(c, self.cfg.costs.irq());
        self.tasks[t].device_pending += 1;
        if self.tasks[t].state == RunState::Blocked {
            self.wake(t);
        }
        if self.soft() {
            self.fire_due();
        }
        self.refresh(c);
    }

    fn on_done(&mut self, c: usize) {
        self.checkpoint(c);
        let t = self.cpus[c]
            .current
            .expect("a completion on a CPU with a task");
        self.tasks[t].active = false;
        if std::mem::take(&mut self.tasks[t].rpc.burst) {
            self.round_trip_done(t);
            self.apply(c, t, Some(Step::Block));
            return;
        }
        let step = self.call(c, t, |b, cx| Some(b.on_done(cx)));
        self.apply(c, t, step);
        if self.cpus[c].current == Some(t) {
            self.refresh(c);
        }
    }

    /// Run to the configured duration (or until stopped).
    pub fn run(mut self, control: &Control) -> RunOutcome {
        let end = self.cfg.duration;
        let mech = self.cfg.timer;
        let mut interrupted = false;
        self.resched_all();
        loop {
            // The earliest event; ties in the order completion, timer, device, tick, kernel entry.
            let (mut done_t, mut done_c) = (NONE, 0);
            for (c, cpu) in self.cpus.iter().enumerate() {
                if cpu.done_at < done_t {
                    done_t = cpu.done_at;
                    done_c = c;
                }
            }
            let alarm = self.next_alarm();
            let timer_t = match mech {
                Mechanism::Periodic => NONE,
                Mechanism::Oneshot => alarm,
                Mechanism::Soft => {
                    if self.any_idle {
                        alarm
                    } else {
                        NONE
                    }
                }
                Mechanism::Firm => {
                    if self.any_idle {
                        alarm
                    } else {
                        alarm.saturating_add(self.cfg.overshoot)
                    }
                }
            };
            let device_t = self.devices.peek().map_or(NONE, |r| r.0 .0);
            let (mut entry_t, mut entry_c) = (NONE, 0);
            for (c, cpu) in self.cpus.iter().enumerate() {
                if cpu.next_entry < entry_t {
                    entry_t = cpu.next_entry;
                    entry_c = c;
                }
            }
            let t = done_t
                .min(timer_t)
                .min(device_t)
                .min(self.next_tick)
                .min(entry_t);
            if t > end {
                break;
            }
            self.now = t;
            self.events += 1;
            if t == done_t {
                self.on_done(done_c);
            } else if t == timer_t {
                let idle_fire = matches!(mech, Mechanism::Soft | Mechanism::Firm) && self.any_idle;
                if !idle_fire {
                    // A one-shot interrupt (UTIME, or the firm fallback).
                    let c = self.alarm_cpu();
                    self.cpus[c].account.interrupts += 1;
                    self.charge(c, self.cfg.costs.irq());
                    self.refresh(c);
                }
                self.fire_due();
            } else if t == device_t {
                let Reverse((_, task)) = self.devices.pop().expect("peeked");
                self.on_device(task as usize);
            } else if t == self.next_tick {
                self.on_tick();
            } else {
                // A kernel entry of the running task: check soft timers, draw the next one.
                self.fire_due();
                let cpu = &mut self.cpus[entry_c];
                cpu.next_entry = if cpu.current.is_some() {
                    t + self.entry_rng.exp(self.cfg.entry_interval)
                } else {
                    NONE
                };
            }
            self.resched_all();
            if self.events & 0xffff == 0 {
                if let Some(p) = control.progress {
                    p.store(self.now, Ordering::Relaxed);
                }
                if control.stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                    interrupted = true;
                    break;
                }
            }
        }
        if !interrupted {
            self.now = end;
        }
        for c in 0..self.cpus.len() {
            self.checkpoint(c);
        }
        if let Some(p) = control.progress {
            p.store(self.now, Ordering::Relaxed);
        }
        RunOutcome {
            tasks: self.tasks.into_iter().map(|t| t.stats).collect(),
            cpus: self.cpus.into_iter().map(|c| c.account).collect(),
            events: self.events,
            simulated_ns: self.now,
            interrupted,
            recalculations: self.recalculations,
        }
    }
}

/// Take `need` bytes of cache from every task but `keep`, in proportion to what each holds; the
/// rounding remainder (a few bytes) from the first that still hold some. The others hold at least
/// `need` (the cache is full when free space did not suffice).
fn evict(resident: &mut [u64], keep: usize, need: u64) {
    if need == 0 {
        return;
    }
    let others: u64 = resident
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != keep)
        .map(|(_, r)| *r)
        .sum();
    let mut taken = 0;
    if others > 0 {
        for (i, r) in resident.iter_mut().enumerate() {
            if i != keep {
                let take = (*r as u128 * need as u128 / others as u128) as u64;
                *r -= take;
                taken += take;
            }
        }
    }
    for (i, r) in resident.iter_mut().enumerate() {
        if taken >= need {
            break;
        }
        if i != keep {
            let take = (*r).min(need - taken);
            *r -= take;
            taken += take;
        }
    }
}
