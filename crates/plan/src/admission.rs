//! Admission control and phasing, before anything runs.
//!
//! For each dispatcher CPU: the work utilisation (sum of wcet / period, plus the events' declared
//! cost) against a bound; the releases over the hyperperiod (or a bounded horizon), checking that no
//! release falls inside the previous one's execution window `[T, T + max(wcet, 1 us))`, wcet
//! counting only for actions that run on the dispatcher thread (mark, udp, plugin) (a
//! *collision*: one of them must run late); and the CPU the dispatcher spends spinning, from the union
//! of the windows `[T - margin, T + wcet)`, which is what the spin margin costs. Tasks with
//! `offset = "auto"` are given offsets that keep their releases as far from every other release as
//! the grid allows (evenly spread when they share one period).

use crate::model::*;
use std::collections::BinaryHeap;

/// Two releases closer than this collide even without a declared wcet: one has to go second.
pub const MIN_SEPARATION: u64 = 1_000;
/// The most releases per CPU the check walks; beyond, it reports on the part it covered.
pub const MAX_RELEASES: u64 = 5_000_000;
/// When avoiding interference, releases also keep this far from a measured window if they can: the
/// first position clear of every window sits right at one's end, where a slightly longer tick hits it.
pub const AVOID_GUARD: u64 = 25_000;
/// And, if they can, this long after a window's end: the stretch before a release is where its
/// dispatcher wakes and hands it over (a `wake` lead starts at 200 us and learns down to 40-70 us
/// here). A release 67 us after the tick's window, clear of the guard, still had its hand-over
/// land on the tick and its client 17-21 us late (kurt-periodic (d) 1 process, 2026-11-30, b51).
pub const AVOID_LEAD_SPAN: u64 = 250_000;
/// The longest hyperperiod walked in full.
pub const MAX_HORIZON: u64 = 60_000_000_000;
/// Automatic phasing keeps at most this many releases of a CPU's timeline as neighbours, and scores
/// a candidate offset on at most [`SCORED_RELEASES`] of the task's releases: a 1 ns period in a
/// 200 ms hyperperiod would otherwise take 2e8 releases, each inserted into a sorted list.
pub const MAX_PLACED: usize = 200_000;
pub const SCORED_RELEASES: u64 = 4096;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    /// Largest work utilisation allowed per CPU (0 < bound <= 1).
    pub bound: f64,
    /// Spin margin assumed for the CPU-cost estimate (the run's fixed margin, or a typical auto one).
    pub margin: u64,
    /// Largest share of a CPU the dispatcher may spin or work on it (`None`: no limit, the CPU is
    /// shielded). A plan whose releases need more to be on time is refused before anything runs.
    pub spin_budget: Option<f64>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bound: 0.9,
            margin: 50_000,
            spin_budget: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct CpuLoad {
    pub cpu: usize,
    /// Sum of wcet / period (and the events' declared cost over their span).
    pub utilisation: f64,
    /// Share of the CPU the dispatcher spends spinning or executing (union of the windows).
    pub busy: f64,
    pub tasks: Vec<String>,
    pub events: usize,
    /// Releases walked.
    pub releases: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Collision {
    pub cpu: usize,
    /// Offset from the plan's start of the later release.
    pub at: u64,
    pub first: String,
    pub second: String,
    /// How late the second would be if the first took its whole window.
    pub overlap: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub cpus: Vec<CpuLoad>,
    /// The first collisions found (at most 20), and how many there were.
    pub collisions: Vec<Collision>,
    pub collision_count: u64,
    /// The span of time walked, and whether it covers the whole hyperperiod and every event.
    pub horizon: u64,
    pub complete: bool,
    pub bound: f64,
    /// The margin and spin budget the check assumed ([`Config`]).
    pub margin: u64,
    pub spin_budget: Option<f64>,
    /// Offsets given to `auto` tasks (task name, offset).
    pub phased: Vec<(String, u64)>,
}

impl Report {
    /// Why the plan cannot be admitted (empty when it can).
    pub fn reasons(&self) -> Vec<String> {
        let mut v = Vec::new();
        for c in &self.cpus {
            if c.utilisation > self.bound {
                v.push(format!(
                    "CPU {}: work utilisation {:.1} % is above the bound {:.1} % (sum of wcet / period of {})",
                    c.cpu,
                    c.utilisation * 100.0,
                    self.bound * 100.0,
                    if c.tasks.is_empty() { "its events".to_string() } else { c.tasks.join(", ") }
                ));
            }
        }
        if let Some(budget) = self.spin_budget {
            for c in self.cpus.iter().filter(|c| c.busy > budget) {
                let per_second = c.releases as f64 * 1e9 / self.horizon.max(1) as f64;
                v.push(format!(
                    "CPU {}: to be on time, {:.0} releases/s with a {} spin before each (the kernel's wake-up latency) keep the dispatcher spinning or working {:.1} % of the CPU, above the {:.1} % it may take from a CPU that is not shielded; give it the CPU (`shield = true` in the plan, or `punctual shield --cpus {} -- punctual run ...`), or accept it with --spin-budget {:.0}%",
                    c.cpu,
                    per_second,
                    exact_duration(self.margin),
                    c.busy * 100.0,
                    budget * 100.0,
                    c.cpu,
                    (c.busy * 100.0).ceil()
                ));
            }
        }
        if self.collision_count > 0 {
            let c = &self.collisions[0];
            v.push(format!(
                "{} collision(s): e.g. on CPU {} at {} '{}' is due {} before '{}' can finish; spread the offsets (offset = \"auto\") or move a task to another CPU",
                self.collision_count,
                c.cpu,
                exact_duration(c.at),
                c.second,
                exact_duration(c.overlap),
                c.first
            ));
        }
        v
    }

    pub fn feasible(&self) -> bool {
        self.reasons().is_empty()
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Least common multiple of the periods, or `None` past `cap`.
pub fn hyperperiod(periods: impl IntoIterator<Item = u64>, cap: u64) -> Option<u64> {
    let mut l = 1u64;
    for p in periods {
        let g = gcd(l, p);
        l = (l / g).checked_mul(p).filter(|&v| v <= cap)?;
    }
    Some(l)
}

/// The part of a release's wcet spent on the dispatcher thread: all of it for actions that run
/// there (mark, udp, plugin); none for exec and wake, whose work runs in another process.
fn on_dispatcher(plan: &Plan, action: u16, wcet: Option<u64>) -> u64 {
    match plan.action(action).action {
        Action::Exec { .. } | Action::Wake { .. } => 0,
        _ => wcet.unwrap_or(0),
    }
}

/// A release on the timeline of one CPU.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Next {
    at: std::cmp::Reverse<u64>,
    task: usize,
}

/// Run the checks (after [`phase`], if the plan has `auto` offsets).
pub fn check(plan: &Plan, run_cpus: &[usize], cfg: &Config) -> Report {
    let mut cpus: Vec<usize> = run_cpus.to_vec();
    for c in plan.named_cpus() {
        if !cpus.contains(&c) {
            cpus.push(c);
        }
    }
    let periods: Vec<u64> = plan.tasks.iter().map(|t| t.period).collect();
    let hyper = if periods.is_empty() {
        Some(0)
    } else {
        hyperperiod(periods.iter().copied(), MAX_HORIZON)
    };
    let events_end = plan.last_event().map(|e| e.saturating_add(1)).unwrap_or(0);
    let mut horizon = hyper.unwrap_or(MAX_HORIZON).max(events_end);
    if let Some(d) = plan.duration {
        horizon = horizon.min(d);
    }
    let mut complete = hyper.is_some();
    let mut report = Report {
        cpus: Vec::new(),
        collisions: Vec::new(),
        collision_count: 0,
        horizon,
        complete: false,
        bound: cfg.bound,
        margin: cfg.margin,
        spin_budget: cfg.spin_budget,
        phased: Vec::new(),
    };
    for &cpu in &cpus {
        let tasks: Vec<usize> = (0..plan.tasks.len())
            .filter(|&i| Plan::cpu_of(plan.tasks[i].cpu, run_cpus) == cpu)
            .collect();
        let events: Vec<&Event> = plan
            .events
            .iter()
            .filter(|e| Plan::cpu_of(plan.action(e.action).cpu, run_cpus) == cpu)
            .collect();
        if tasks.is_empty() && events.is_empty() {
            continue;
        }
        let mut util: f64 = tasks
            .iter()
            .map(|&i| plan.tasks[i].wcet.unwrap_or(0) as f64 / plan.tasks[i].period as f64)
            .sum();
        if !events.is_empty() {
            let span = plan.duration.unwrap_or(events_end).max(1) as f64;
            let cost: f64 = events
                .iter()
                .map(|e| plan.action(e.action).wcet.unwrap_or(0) as f64)
                .sum();
            util += cost / span;
        }
        // Walk the timeline: tasks through a heap, events in order.
        let mut heap: BinaryHeap<Next> = tasks
            .iter()
            .map(|&i| Next {
                at: std::cmp::Reverse(plan.tasks[i].offset.ns()),
                task: i,
            })
            .collect();
        let mut ev = events.iter().peekable();
        let mut releases = 0u64;
        let (mut busy, mut busy_end) = (0u64, 0u64);
        // The latest end of an execution window so far, and whose it is.
        let (mut prev_end, mut prev_name) = (0u64, "");
        loop {
            let t_next = heap.peek().map(|n| n.at.0).filter(|&t| t < horizon);
            let e_next = ev.peek().map(|e| e.at).filter(|&t| t < horizon);
            let (at, cost, name) = match (t_next, e_next) {
                (None, None) => break,
                (Some(t), e) if e.is_none_or(|e| t <= e) => {
                    let n = heap.pop().expect("peeked");
                    let task = &plan.tasks[n.task];
                    heap.push(Next {
                        at: std::cmp::Reverse(t.saturating_add(task.period)),
                        task: n.task,
                    });
                    (
                        t,
                        on_dispatcher(plan, task.action, task.wcet),
                        task.name.as_str(),
                    )
                }
                _ => {
                    let e = ev.next().expect("peeked");
                    let a = plan.action(e.action);
                    (e.at, on_dispatcher(plan, e.action, a.wcet), a.name.as_str())
                }
            };
            releases += 1;
            if releases > MAX_RELEASES {
                complete = false;
                report.horizon = report.horizon.min(at);
                break;
            }
            if at < prev_end {
                report.collision_count += 1;
                if report.collisions.len() < 20 {
                    report.collisions.push(Collision {
                        cpu,
                        at,
                        first: prev_name.to_string(),
                        second: name.to_string(),
                        overlap: prev_end - at,
                    });
                }
            }
            // Union of [at - margin, at + cost).
            // The first release spins for its whole margin (the timeline repeats, so the margin
            // before it is not overlapped by anything earlier in the walk).
            let start = at.saturating_sub(cfg.margin).max(busy_end);
            // Saturating: plan times are any u64 the parser accepts (issue 18's fuzzing).
            let end = at.saturating_add(cost);
            if releases == 1 {
                busy = busy.saturating_add(cfg.margin.saturating_add(cost));
            } else if end > start {
                busy = busy.saturating_add(end - start);
            }
            busy_end = busy_end.max(end);
            let window_end = at.saturating_add(cost.max(MIN_SEPARATION));
            if window_end > prev_end {
                prev_end = window_end;
                prev_name = name;
            }
        }
        let span = report.horizon.max(1) as f64;
        report.cpus.push(CpuLoad {
            cpu,
            utilisation: util,
            busy: (busy as f64 / span).min(1.0),
            tasks: tasks.iter().map(|&i| plan.tasks[i].name.clone()).collect(),
            events: events.len(),
            releases: releases.min(MAX_RELEASES),
        });
    }
    report.complete = complete && report.horizon >= events_end;
    report
}

/// When the CPUs were measured to be taken away (the timer tick, interrupts, the hypervisor): gap
/// windows `[start, end)` on CLOCK_MONOTONIC, seen by a busy loop over `[from, to)`. Much of it is
/// periodic (the tick at HZ, a host's own timers), so a release instant that fell in a window during
/// the measurement, counted along its own period, tends to fall in one again.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Interference {
    pub from: u64,
    pub to: u64,
    /// Sorted, merged.
    windows: Vec<(u64, u64)>,
}

impl Interference {
    /// Windows as (start, duration), in any order; overlapping ones are merged.
    pub fn new(from: u64, to: u64, gaps: impl IntoIterator<Item = (u64, u64)>) -> Self {
        let mut w: Vec<(u64, u64)> = gaps
            .into_iter()
            .map(|(s, d)| (s, s.saturating_add(d)))
            .collect();
        w.sort_unstable();
        let mut windows: Vec<(u64, u64)> = Vec::with_capacity(w.len());
        for (s, e) in w {
            match windows.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => windows.push((s, e)),
            }
        }
        Interference { from, to, windows }
    }

    pub fn windows(&self) -> &[(u64, u64)] {
        &self.windows
    }

    /// Share of the measured time inside a window.
    pub fn lost_share(&self) -> f64 {
        let span = self.to.saturating_sub(self.from);
        if span == 0 {
            return 0.0;
        }
        self.windows.iter().map(|(s, e)| e - s).sum::<u64>() as f64 / span as f64
    }

    /// Whether a window overlaps `(lo, hi]` (or holds `lo`).
    fn touches(&self, lo: u64, hi: u64) -> bool {
        let i = self.windows.partition_point(|w| w.1 <= lo);
        self.windows.get(i).is_some_and(|w| w.0 <= hi)
    }

    /// Share of the instants `phase + k * period` (any integer k) inside the measured span that fell
    /// in a window. 0 when the span holds none of them.
    pub fn hit_share(&self, phase: u64, period: u64) -> f64 {
        self.near_share(phase, period, 0)
    }

    /// [`Interference::hit_share`], counting a window that comes within `guard` of an instant.
    pub fn near_share(&self, phase: u64, period: u64, guard: u64) -> f64 {
        self.share_where(phase, period, |t| {
            self.touches(t.saturating_sub(guard), t.saturating_add(guard))
        })
    }

    /// [`Interference::hit_share`], counting a window that ended less than `span` before an
    /// instant: the stretch in which a release is prepared and handed over.
    pub fn lead_share(&self, phase: u64, period: u64, span: u64) -> f64 {
        self.share_where(phase, period, |t| self.touches(t.saturating_sub(span), t))
    }

    /// Share of the instants `phase + k * period` inside the measured span for which `hit` holds.
    fn share_where(&self, phase: u64, period: u64, hit_at: impl Fn(u64) -> bool) -> f64 {
        if period == 0 || self.to <= self.from {
            return 0.0;
        }
        let mut t = if phase >= self.from {
            phase - (phase - self.from) / period * period
        } else {
            phase.saturating_add((self.from - phase).div_ceil(period).saturating_mul(period))
        };
        let (mut n, mut hit) = (0u64, 0u64);
        while t < self.to {
            n += 1;
            hit += hit_at(t) as u64;
            t = t.saturating_add(period);
        }
        if n == 0 {
            0.0
        } else {
            hit as f64 / n as f64
        }
    }

    /// For instants `from + phase + k * period`: the phase in `[0, period)` (of those
    /// [`Interference::phase_costs`] tries) of least [`Interference::cost`]: fewest in a window,
    /// then within `guard` of one, then just after one; with that share of its instants in a
    /// window, and the mean share over every phase tried (what a start at any instant gets on
    /// average).
    pub fn quietest_phase(&self, period: u64, guard: u64) -> (u64, f64, f64) {
        self.phase_costs(period, guard).quietest()
    }

    /// The [`Interference::cost`] of instants `phase + k * period` for phases tried 1 us apart
    /// (or 1,000 spread evenly over a period longer than 1 ms), from `from`: a table to look up
    /// during a run, where walking the watch again for each phase took 158 us (release build).
    pub fn phase_costs(&self, period: u64, guard: u64) -> PhaseCosts {
        let period = period.max(1);
        let steps = (period / 1_000).clamp(1, 1_000);
        PhaseCosts {
            origin: self.from,
            period,
            costs: (0..steps)
                .map(|k| {
                    self.cost(
                        self.from.saturating_add(part(period, k, steps)),
                        period,
                        guard,
                    )
                })
                .collect(),
        }
    }

    /// What placing instants `phase + k * period` here costs, in the order it counts: the share
    /// that fell in a window, then within `guard` of one, then within [`AVOID_LEAD_SPAN`] after one.
    pub fn cost(&self, phase: u64, period: u64, guard: u64) -> Cost {
        Cost {
            hit: self.hit_share(phase, period),
            near: self.near_share(phase, period, guard),
            lead: self.lead_share(phase, period, AVOID_LEAD_SPAN),
        }
    }
}

/// [`Interference::cost`] by phase of one period ([`Interference::phase_costs`]).
#[derive(Clone, Debug, PartialEq)]
pub struct PhaseCosts {
    /// The instant of phase 0 (the watch's start) and the period.
    origin: u64,
    period: u64,
    /// At phases `part(period, k, len)`.
    costs: Vec<Cost>,
}

impl PhaseCosts {
    /// The cost of instants a whole number of periods from `at`: the nearest phase tried.
    pub fn at(&self, at: u64) -> Cost {
        let n = self.costs.len() as u64;
        let phase = (at as i128 - self.origin as i128).rem_euclid(self.period as i128) as u64;
        let k =
            ((phase as u128 * n as u128 + self.period as u128 / 2) / self.period as u128) as u64;
        self.costs[(k % n) as usize]
    }

    /// The phase of least cost (the first of equals), its share in a window, and the mean share
    /// over every phase tried.
    pub fn quietest(&self) -> (u64, f64, f64) {
        let n = self.costs.len() as u64;
        let mean = self.costs.iter().map(|c| c.hit).sum::<f64>() / n as f64;
        let (k, cost) = self
            .costs
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.cmp(b.1))
            .map_or((0, Cost::default()), |(k, c)| (k as u64, *c));
        (part(self.period, k, n), cost.hit, mean)
    }
}

/// Shares of a task's (or a stream's) instants that measured interference hit, came near, or
/// came just before ([`Interference::cost`]); compared in that order, and summed over tasks.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cost {
    pub hit: f64,
    pub near: f64,
    pub lead: f64,
}

impl Cost {
    /// Whether this cost is below `other` (in a window, then near one, then just after one).
    pub fn cheaper(&self, other: &Cost) -> bool {
        self.cmp(other) == std::cmp::Ordering::Less
    }

    fn cmp(&self, other: &Cost) -> std::cmp::Ordering {
        self.hit
            .total_cmp(&other.hit)
            .then(self.near.total_cmp(&other.near))
            .then(self.lead.total_cmp(&other.lead))
    }

    /// In parts per thousand, in a window and near one: what the greedy placement compares
    /// before the distance to other releases (a share that differs by less does not outweigh
    /// it). Not the lead span: a share that varies with nearly every offset would leave few to
    /// choose from, and releases of different periods crowded together collide.
    fn permille(&self) -> (u64, u64) {
        let pm = |x: f64| (x * 1000.0).round() as u64;
        (pm(self.hit), pm(self.near))
    }
}

impl std::ops::Add for Cost {
    type Output = Cost;
    fn add(self, o: Cost) -> Cost {
        Cost {
            hit: self.hit + o.hit,
            near: self.near + o.near,
            lead: self.lead + o.lead,
        }
    }
}

/// Give every `offset = "auto"` task an offset that keeps its releases away from all others on its
/// CPU. Tasks sharing one period with nothing else on the CPU are spread evenly; otherwise each is
/// placed greedily (shortest period first) at the grid offset whose nearest neighbour is farthest.
/// Returns the offsets given.
pub fn phase(plan: &mut Plan, run_cpus: &[usize]) -> Vec<(String, u64)> {
    phase_avoiding(plan, run_cpus, None)
}

/// [`phase`], and with `avoid = Some((interference, start))` also away from measured interference,
/// for a plan that will start at `start` or a whole number of hyperperiods after it: evenly spread
/// tasks are shifted together to the position of least [`Interference::cost`] (fewest releases in a
/// window, then near one, then just after one), and a greedily placed task takes, among the grid
/// offsets with the fewest in a window and then near one, the one farthest from its neighbours.
pub fn phase_avoiding(
    plan: &mut Plan,
    run_cpus: &[usize],
    avoid: Option<(&Interference, u64)>,
) -> Vec<(String, u64)> {
    let mut given = Vec::new();
    let mut cpus: Vec<usize> = plan
        .tasks
        .iter()
        .map(|t| Plan::cpu_of(t.cpu, run_cpus))
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    for cpu in cpus {
        let on_cpu: Vec<usize> = (0..plan.tasks.len())
            .filter(|&i| Plan::cpu_of(plan.tasks[i].cpu, run_cpus) == cpu)
            .collect();
        let mut auto: Vec<usize> = on_cpu
            .iter()
            .copied()
            .filter(|&i| plan.tasks[i].offset == Offset::Auto)
            .collect();
        if auto.is_empty() {
            continue;
        }
        let fixed: Vec<usize> = on_cpu
            .iter()
            .copied()
            .filter(|&i| plan.tasks[i].offset != Offset::Auto)
            .collect();
        let has_events = plan
            .events
            .iter()
            .any(|e| Plan::cpu_of(plan.action(e.action).cpu, run_cpus) == cpu);
        let p0 = plan.tasks[auto[0]].period;
        if fixed.is_empty() && !has_events && auto.iter().all(|&i| plan.tasks[i].period == p0) {
            let n = auto.len() as u64;
            let comb = |shift: u64| (0..n).map(move |k| shift + part(p0, k, n));
            let shift = match avoid {
                Some((inf, start)) => {
                    // Shifts over one spacing, 1 us apart at most; the first of the cheapest wins
                    // (fewest releases in a window, then fewest near one).
                    let steps = (p0 / n).clamp(1, 1000);
                    (0..steps)
                        .map(|s| part(p0 / n, s, steps))
                        .map(|sh| {
                            let cost = comb(sh).fold(Cost::default(), |c, o| {
                                c + inf.cost(start.saturating_add(o), p0, AVOID_GUARD)
                            });
                            (sh, cost)
                        })
                        .min_by(|a, b| a.1.cmp(&b.1))
                        .map_or(0, |(sh, _)| sh)
                }
                None => 0,
            };
            for (&i, o) in auto.iter().zip(comb(shift)) {
                plan.tasks[i].offset = Offset::Fixed(o);
                given.push((plan.tasks[i].name.clone(), o));
            }
            continue;
        }
        let periods: Vec<u64> = on_cpu.iter().map(|&i| plan.tasks[i].period).collect();
        let h = hyperperiod(periods.iter().copied(), 1_000_000_000).unwrap_or(1_000_000_000);
        let mut occupied: Vec<u64> = Vec::new();
        for &i in &fixed {
            let t = &plan.tasks[i];
            let mut at = t.offset.ns();
            while at < h && occupied.len() < MAX_PLACED {
                occupied.push(at);
                at = at.saturating_add(t.period);
            }
        }
        for e in plan.events.iter().filter(|e| e.at < h).take(MAX_PLACED) {
            occupied.push(e.at);
        }
        occupied.sort_unstable();
        auto.sort_by_key(|&i| (plan.tasks[i].period, plan.tasks[i].name.clone()));
        for &i in &auto {
            let p = plan.tasks[i].period;
            let steps = 256u64.min(p);
            // Windows hit, then near (in parts per thousand), then distance.
            let hits = |o: u64| match avoid {
                Some((inf, start)) => inf.cost(start.saturating_add(o), p, AVOID_GUARD).permille(),
                None => (0, 0),
            };
            let fewest = (0..steps)
                .map(|s| hits(part(p, s, steps)))
                .min()
                .unwrap_or((0, 0));
            let mut best = (0u64, 0u64); // (score, offset)
            for s in 0..steps {
                let o = part(p, s, steps);
                if hits(o) > fewest {
                    continue;
                }
                let score = if occupied.is_empty() {
                    u64::MAX - o // nothing placed yet: the earliest offset wins
                } else {
                    let mut min = u64::MAX;
                    let mut at = o;
                    let end = h.min(o.saturating_add(p.saturating_mul(SCORED_RELEASES)));
                    while at < end {
                        min = min.min(circular_distance(&occupied, at, h));
                        at = at.saturating_add(p);
                    }
                    min
                };
                if score > best.0 {
                    best = (score, o);
                }
            }
            let o = best.1;
            plan.tasks[i].offset = Offset::Fixed(o);
            let mut at = o;
            while at < h && occupied.len() < MAX_PLACED {
                occupied.push(at);
                at = at.saturating_add(p);
            }
            occupied.sort_unstable();
            given.push((plan.tasks[i].name.clone(), o));
        }
    }
    given
}

/// `whole * k / n` without overflow (`k <= n`): periods can be any u64 a plan gives.
fn part(whole: u64, k: u64, n: u64) -> u64 {
    (whole as u128 * k as u128 / n.max(1) as u128) as u64
}

/// Distance from `at` to the nearest instant in sorted `occ`, on a circle of length `h`.
fn circular_distance(occ: &[u64], at: u64, h: u64) -> u64 {
    let pos = occ.partition_point(|&x| x < at);
    let after = occ.get(pos).map(|&x| x - at).unwrap_or(h - at + occ[0]);
    let before = if pos > 0 {
        at - occ[pos - 1]
    } else {
        at + h - occ[occ.len() - 1]
    };
    after.min(before)
}
