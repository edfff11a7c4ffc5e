//! What one simulated run is: the clock (HZ, timer mechanism), the scheduler (policy, quantum), the
//! costs of interrupts and switches, and the tasks. Everything here is plain data, validated before
//! anything runs ([`RunConfig::validate`]), so bad input is refused with the field that fixes it.

use crate::behaviour::Behaviour;
use crate::SimError;
use punctual_time::format_ns;

/// Nanoseconds on the simulated clock (which starts at 0).
pub use crate::units::{Ns, MAX_DURATION, NS_PER_S};
/// The highest clock-interrupt rate accepted: one tick per microsecond.
pub const MAX_HZ: u32 = 1_000_000;
/// Runs whose estimated event count is above this are refused unless `max_events` is raised: at
/// about 10 million events a second that is roughly half an hour of computing.
pub const DEFAULT_MAX_EVENTS: u64 = 20_000_000_000;
/// The longest quantum: an hour (Linux 2.4's longest was a few hundred milliseconds).
pub const MAX_QUANTUM: Ns = 3_600 * NS_PER_S;
/// The most one interrupt, switch or timer overshoot may cost: a second (the seeds measure
/// microseconds; larger costs would carry the engine's timestamps past u64, issue 18's fuzzing).
pub const MAX_COST: Ns = NS_PER_S;

/// How clock interrupts and timers work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mechanism {
    /// A tick every 1/HZ; timers expire at the first tick at or after their time (Linux 2.4).
    Periodic,
    /// UTIME: an interrupt exactly when the earliest timer is due, plus the HZ heartbeat that
    /// keeps billing and quanta working.
    Oneshot,
    /// Soft timers: checked at every kernel entry (system calls, interrupts, the idle loop), with
    /// the periodic tick as the fallback.
    Soft,
    /// Firm timers: soft timers, with a one-shot interrupt `overshoot` after the expiry as the
    /// fallback instead of the tick.
    Firm,
}

impl Mechanism {
    pub const ALL: [Mechanism; 4] = [
        Mechanism::Periodic,
        Mechanism::Oneshot,
        Mechanism::Soft,
        Mechanism::Firm,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Periodic => "periodic",
            Mechanism::Oneshot => "oneshot",
            Mechanism::Soft => "soft",
            Mechanism::Firm => "firm",
        }
    }
}

impl std::str::FromStr for Mechanism {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Mechanism::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                format!("unknown timer mechanism '{s}' (valid: periodic, oneshot, soft, firm)")
            })
    }
}

/// The scheduling policy of the run: the class every task gets unless it names its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// POSIX round robin: fixed priorities, a quantum of whole ticks, then the back of the queue.
    Rr,
    /// POSIX FIFO: fixed priorities, runs until it blocks or a higher priority wakes.
    Fifo,
    /// Linux 2.4's epoch scheduler: counters of quantum ticks plus one, goodness, recalculation
    /// when every runnable counter is used up.
    Linux24,
    /// Virtual-runtime fair scheduling (CFS-like): least virtual runtime first, exact accounting.
    Fair,
    /// Explicit plan (KURT): periodic tasks are released by the plan and run in release order
    /// above everything else; other tasks share the rest round robin.
    Plan,
}

impl Policy {
    pub const ALL: [Policy; 5] = [
        Policy::Rr,
        Policy::Fifo,
        Policy::Linux24,
        Policy::Fair,
        Policy::Plan,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Policy::Rr => "rr",
            Policy::Fifo => "fifo",
            Policy::Linux24 => "linux24",
            Policy::Fair => "fair",
            Policy::Plan => "plan",
        }
    }
}

impl std::str::FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown policy '{s}' (valid: rr, fifo, linux24, fair, plan)"))
    }
}

/// A task's own scheduling class, overriding the run's policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Fifo,
    Rr,
    /// Time sharing: Linux 2.4 goodness, or virtual runtime when the run's policy is `fair`.
    Other,
}

impl std::str::FromStr for Class {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fifo" => Ok(Class::Fifo),
            "rr" => Ok(Class::Rr),
            "other" => Ok(Class::Other),
            _ => Err(format!(
                "unknown task policy '{s}' (valid: fifo, rr, other)"
            )),
        }
    }
}

/// A quantum as time (`60ms`) or as ticks (`6ticks`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Quantum {
    Time(Ns),
    Ticks(u64),
}

impl Quantum {
    /// The quantum as time at `hz` (whole ticks), or `None` when that overflows.
    pub fn checked_ns(self, hz: u32) -> Option<Ns> {
        self.ticks(hz).checked_mul(NS_PER_S / hz.max(1) as u64)
    }

    /// Whole ticks at `hz`: time is rounded down, so a quantum never grows past what was asked.
    pub fn ticks(self, hz: u32) -> u64 {
        match self {
            Quantum::Ticks(t) => t,
            Quantum::Time(ns) => ((ns as u128 * hz as u128) / NS_PER_S as u128) as u64,
        }
    }

    pub fn label(self) -> String {
        match self {
            Quantum::Ticks(t) => format!("{t}ticks"),
            Quantum::Time(ns) => format_ns(ns).replace(' ', ""),
        }
    }
}

impl std::str::FromStr for Quantum {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if let Some(n) = s.strip_suffix("ticks").or_else(|| s.strip_suffix("tick")) {
            let n: u64 = n
                .trim()
                .parse()
                .map_err(|_| format!("'{s}' is not a number of ticks, e.g. 6ticks"))?;
            return Ok(Quantum::Ticks(n));
        }
        punctual_time::parse_duration_ns(s)
            .map(Quantum::Time)
            .map_err(|e| format!("{e}; or give ticks, e.g. 6ticks"))
    }
}

/// Overheads, in simulated CPU time taken from whatever the CPU was doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Costs {
    /// Running the interrupt handler (Etsion Table 1: 0.49 us on the P-III 664 without the 8253).
    pub irq_direct: Ns,
    /// Cache and TLB refill after an interrupt (Etsion Section 3: about 90 % of the total).
    pub irq_indirect: Ns,
    /// A context switch, including the refill of the incoming task's working set.
    pub switch: Ns,
}

impl Default for Costs {
    fn default() -> Self {
        Costs {
            irq_direct: 500,
            irq_indirect: 4_500,
            switch: 2_000,
        }
    }
}

impl Costs {
    pub fn irq(&self) -> Ns {
        self.irq_direct.saturating_add(self.irq_indirect)
    }
    pub fn zero() -> Costs {
        Costs {
            irq_direct: 0,
            irq_indirect: 0,
            switch: 0,
        }
    }
}

/// The cache behind a context switch's indirect cost (Etsion Section 3 and Fig. 3): each CPU has
/// one cache of `size_kib`; a task with a working set ([`TaskSpec::footprint_kib`]) keeps what of it
/// the cache still holds, and when it gets a CPU again it refills what other tasks evicted, at
/// `refill_mb_s`. Used only by tasks with a footprint: without one a run is what it always was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cache {
    /// Per CPU (Etsion: the 256 KiB L2 of the P-III 664).
    pub size_kib: u64,
    /// How fast an evicted working set comes back, MB/s (Etsion Table 2: the P-III 664's cache
    /// bandwidth, 2512 MB/s).
    pub refill_mb_s: u64,
}

impl Default for Cache {
    fn default() -> Self {
        Cache {
            size_kib: 256,
            refill_mb_s: 2512,
        }
    }
}

impl Cache {
    /// The time to refill `kib` KiB (saturating at `Ns::MAX`).
    pub fn refill_ns(&self, kib: u64) -> Ns {
        self.refill_bytes_ns(kib.saturating_mul(1024))
    }

    /// The time to refill `bytes` (1 MB/s is a byte a microsecond).
    pub fn refill_bytes_ns(&self, bytes: u64) -> Ns {
        let ns = bytes as u128 * 1000 / self.refill_mb_s.max(1) as u128;
        ns.min(Ns::MAX as u128) as Ns
    }
}

/// One task of the workload.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskSpec {
    pub name: String,
    /// The workload entry it came from (`cont`, `xine`...), for pooled series and tables.
    pub group: String,
    pub behaviour: Behaviour,
    pub class: Option<Class>,
    /// 1-99 for fifo/rr.
    pub priority: u32,
    /// -20..19 for time sharing.
    pub nice: i32,
    /// Pinned to this CPU, or free to run anywhere.
    pub cpu: Option<usize>,
    /// Synchronous requests this task makes of its server before each hand-off.
    pub round_trips: Option<RoundTrips>,
    /// The working set it refills after other tasks evicted it (KiB; 0: none, no refill cost).
    pub footprint_kib: u64,
}

/// A client's synchronous requests to its server (X protocol round trips: Etsion Section 4's X
/// server has mostly "extremely short" quanta, 68 % of them at 100 Hz). Before each hand-off the
/// client sends `count` requests one at a time; the server computes `U(server)` for each and
/// replies; the client computes `U(client)` on each reply. Each side's burst is its own quantum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoundTrips {
    pub count: u32,
    pub server: (Ns, Ns),
    pub client: (Ns, Ns),
}

impl RoundTrips {
    /// At most this many requests per hand-off.
    pub const MAX_COUNT: u32 = 1000;

    fn validate(&self, task: &str, has_server: bool) -> Result<(), SimError> {
        let bad = |why: String| {
            Err(SimError::invalid(
                "round_trips",
                format!("task '{task}': {why}"),
            ))
        };
        if !has_server {
            return bad("round trips need a server to send them to".into());
        }
        if self.count > Self::MAX_COUNT {
            return bad(format!(
                "{} round trips per hand-off is above the limit of {}",
                self.count,
                Self::MAX_COUNT
            ));
        }
        for (lo, hi) in [self.server, self.client] {
            if lo == 0 || lo > hi || hi > MAX_DURATION {
                return bad(format!(
                    "each request's work must be more than zero with min <= max and at most {}",
                    format_ns(MAX_DURATION)
                ));
            }
        }
        Ok(())
    }
}

impl TaskSpec {
    pub fn new(
        name: impl Into<String>,
        group: impl Into<String>,
        behaviour: Behaviour,
    ) -> TaskSpec {
        TaskSpec {
            name: name.into(),
            group: group.into(),
            behaviour,
            class: None,
            priority: 50,
            nice: 0,
            cpu: None,
            round_trips: None,
            footprint_kib: 0,
        }
    }

    /// The same task with a working set of `kib` KiB.
    pub fn with_footprint(self, kib: u64) -> TaskSpec {
        TaskSpec {
            footprint_kib: kib,
            ..self
        }
    }
}

/// One simulated run (one point of a sweep).
#[derive(Clone, Debug, PartialEq)]
pub struct RunConfig {
    pub hz: u32,
    pub quantum: Quantum,
    pub policy: Policy,
    pub timer: Mechanism,
    pub cpus: usize,
    pub duration: Ns,
    pub seed: u64,
    pub costs: Costs,
    /// The cache tasks with a footprint refill after a switch.
    pub cache: Cache,
    /// Mean time between kernel entries (system calls, device interrupts) of a computing task:
    /// where soft and firm timers get checked.
    pub entry_interval: Ns,
    /// Firm timers: how long after the expiry the one-shot fallback interrupt fires.
    pub overshoot: Ns,
    pub tasks: Vec<TaskSpec>,
    pub max_events: u64,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            hz: 100,
            quantum: Quantum::Time(50_000_000),
            policy: Policy::Rr,
            timer: Mechanism::Periodic,
            cpus: 1,
            duration: 60 * NS_PER_S,
            seed: 1,
            costs: Costs::default(),
            cache: Cache::default(),
            entry_interval: 100_000,
            overshoot: 20_000,
            tasks: Vec::new(),
            max_events: DEFAULT_MAX_EVENTS,
        }
    }
}

/// A clock rate as a command line gives it: a whole number of Hz, 1 to [`MAX_HZ`].
pub fn parse_hz(s: &str) -> Result<u32, String> {
    let v: u64 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a whole number of Hz, e.g. 100 or 1000"))?;
    if v == 0 || v > MAX_HZ as u64 {
        return Err(format!(
            "{v} Hz is out of range; give 1 to {MAX_HZ} (1 MHz)"
        ));
    }
    Ok(v as u32)
}

impl RunConfig {
    /// A sweep's runs: this configuration at each rate and quantum, rates outer, in the order
    /// given.
    pub fn sweep(&self, hz: &[u32], quanta: &[Quantum]) -> Vec<RunConfig> {
        let mut out = Vec::new();
        for &h in hz {
            for &q in quanta {
                out.push(RunConfig {
                    hz: h,
                    quantum: q,
                    ..self.clone()
                });
            }
        }
        out
    }

    /// Length of a tick in ns (rounded down; tick k is at `k * 1e9 / hz` exactly).
    pub fn tick_ns(&self) -> Ns {
        NS_PER_S / self.hz as u64
    }

    pub fn quantum_ticks(&self) -> u64 {
        self.quantum.ticks(self.hz)
    }

    /// Refuse what cannot be simulated meaningfully, naming the setting that fixes it.
    pub fn validate(&self) -> Result<(), SimError> {
        self.validate_tick()?;
        self.validate_costs()?;
        self.validate_cache()?;
        self.validate_run()?;
        self.validate_tasks()?;
        self.validate_size()?;
        Ok(())
    }

    /// The tick rate and the quantum.
    fn validate_tick(&self) -> Result<(), SimError> {
        if self.hz == 0 || self.hz > MAX_HZ {
            return Err(SimError::invalid(
                "--hz",
                format!(
                    "{} Hz is out of range; give 1 to {MAX_HZ} (1 MHz), e.g. 100 or 1000",
                    self.hz
                ),
            ));
        }
        let qt = self.quantum_ticks();
        if qt == 0 {
            return Err(SimError::invalid(
                "--quantum",
                format!(
                    "{} is under one tick at {} Hz ({}); quanta are counted in ticks: give at least {} or 1ticks",
                    self.quantum.label(),
                    self.hz,
                    format_ns(self.tick_ns()),
                    format_ns(self.tick_ns())
                ),
            ));
        }
        match self.quantum.checked_ns(self.hz) {
            Some(q) if q <= MAX_QUANTUM => {}
            _ => {
                return Err(SimError::invalid(
                    "--quantum",
                    format!(
                        "{} at {} Hz is longer than the limit of {}; give e.g. 6ticks or 60ms",
                        self.quantum.label(),
                        self.hz,
                        format_ns(MAX_QUANTUM)
                    ),
                ))
            }
        }
        Ok(())
    }

    /// Interrupt, switch and timer costs.
    fn validate_costs(&self) -> Result<(), SimError> {
        for (flag, cost) in [
            ("--irq-cost", self.costs.irq_direct),
            ("--irq-indirect", self.costs.irq_indirect),
            ("--switch-cost", self.costs.switch),
            ("--overshoot", self.overshoot),
        ] {
            if cost > MAX_COST {
                return Err(SimError::invalid(
                    flag,
                    format!(
                        "{} is more than the limit of {}; the seeds measure microseconds, e.g. 5us",
                        format_ns(cost),
                        format_ns(MAX_COST)
                    ),
                ));
            }
        }
        if self.entry_interval > MAX_DURATION {
            return Err(SimError::invalid(
                "--entry-interval",
                format!(
                    "{} is longer than the simulator's limit of {}",
                    format_ns(self.entry_interval),
                    format_ns(MAX_DURATION)
                ),
            ));
        }
        Ok(())
    }

    /// The cache, when a task has a footprint: a refill must stay a bounded cost.
    fn validate_cache(&self) -> Result<(), SimError> {
        let Some(big) = self.tasks.iter().max_by_key(|t| t.footprint_kib) else {
            return Ok(());
        };
        if big.footprint_kib == 0 {
            return Ok(());
        }
        if self.cache.size_kib == 0 {
            return Err(SimError::invalid(
                "cache_kib",
                "must be more than zero when a task has a footprint, e.g. 256 (Etsion's L2)",
            ));
        }
        if self.cache.refill_mb_s == 0 {
            return Err(SimError::invalid(
                "refill_mb_s",
                "must be more than zero, e.g. 2512 (Etsion Table 2, P-III 664)",
            ));
        }
        let worst = self
            .cache
            .refill_ns(big.footprint_kib.min(self.cache.size_kib));
        if worst > MAX_COST {
            return Err(SimError::invalid(
                "footprint_kib",
                format!(
                    "task '{}': refilling {} KiB at {} MB/s takes {}, more than the limit of {}; \
                     give a smaller footprint or cache, or a faster refill",
                    big.name,
                    big.footprint_kib.min(self.cache.size_kib),
                    self.cache.refill_mb_s,
                    format_ns(worst),
                    format_ns(MAX_COST)
                ),
            ));
        }
        Ok(())
    }

    /// CPUs, duration, and what the costs leave of a tick.
    fn validate_run(&self) -> Result<(), SimError> {
        if self.cpus == 0 || self.cpus > 256 {
            return Err(SimError::invalid(
                "--cpus",
                format!("{} CPUs: give 1 to 256", self.cpus),
            ));
        }
        if self.duration == 0 {
            return Err(SimError::invalid(
                "-D/--duration",
                "must be more than zero, e.g. 60s",
            ));
        }
        if self.duration > MAX_DURATION {
            return Err(SimError::invalid(
                "-D/--duration",
                format!(
                    "{} is longer than the simulator's limit of {}",
                    format_ns(self.duration),
                    format_ns(MAX_DURATION)
                ),
            ));
        }
        // The costs were bounded by validate_costs, which runs first.
        if self.costs.irq() >= self.tick_ns() {
            return Err(SimError::invalid(
                "--irq-cost",
                format!(
                    "an interrupt costs {} but a tick at {} Hz is only {}: the CPU would do nothing but take interrupts; \
                     lower --hz or the interrupt costs",
                    format_ns(self.costs.irq()),
                    self.hz,
                    format_ns(self.tick_ns())
                ),
            ));
        }
        if matches!(self.timer, Mechanism::Soft | Mechanism::Firm) && self.entry_interval == 0 {
            return Err(SimError::invalid(
                "--entry-interval",
                "must be more than zero for soft and firm timers, e.g. 100us",
            ));
        }
        Ok(())
    }

    /// Each task, unique names, and the tasks work is handed to.
    fn validate_tasks(&self) -> Result<(), SimError> {
        if self.tasks.is_empty() {
            return Err(SimError::invalid(
                "--workload",
                "no tasks to simulate; e.g. --workload cont:8",
            ));
        }
        for t in &self.tasks {
            if let Some(c) = t.cpu {
                if c >= self.cpus {
                    return Err(SimError::invalid(
                        "cpu",
                        format!(
                            "task '{}' is pinned to CPU {c} but the run has {} CPU(s) (0-{})",
                            t.name,
                            self.cpus,
                            self.cpus - 1
                        ),
                    ));
                }
            }
            if matches!(t.class, Some(Class::Fifo | Class::Rr)) && !(1..=99).contains(&t.priority) {
                return Err(SimError::invalid(
                    "priority",
                    format!("task '{}': priority {} is not in 1-99", t.name, t.priority),
                ));
            }
            if !(-20..=19).contains(&t.nice) {
                return Err(SimError::invalid(
                    "nice",
                    format!("task '{}': nice {} is not in -20..19", t.name, t.nice),
                ));
            }
            t.behaviour.validate(&t.name)?;
            if let Some(rt) = &t.round_trips {
                rt.validate(&t.name, t.behaviour.target().is_some())?;
            }
        }
        let names: std::collections::HashSet<&str> =
            self.tasks.iter().map(|t| t.name.as_str()).collect();
        if names.len() != self.tasks.len() {
            return Err(SimError::invalid(
                "name",
                "two tasks have the same name; names must be unique",
            ));
        }
        for t in &self.tasks {
            if let Some(target) = t.behaviour.target() {
                if !names.contains(target) {
                    return Err(SimError::invalid(
                        "server",
                        format!(
                            "task '{}' hands work to '{target}', which is not a task of this run",
                            t.name
                        ),
                    ));
                }
                let serves = self
                    .tasks
                    .iter()
                    .any(|o| o.name == target && matches!(o.behaviour, Behaviour::Server { .. }));
                if t.round_trips.is_some() && !serves {
                    // Only a server answers requests: any other task would leave the client waiting.
                    return Err(SimError::invalid(
                        "round_trips",
                        format!(
                            "task '{}' makes round trips to '{target}', which is not a server",
                            t.name
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The run's size against `max_events`.
    fn validate_size(&self) -> Result<(), SimError> {
        let est = self.estimate_events();
        if est > self.max_events {
            return Err(SimError::invalid(
                "-D/--duration",
                format!(
                    "this run would process about {est} events ({:.1e}), above the limit of {} ({:.1e}; about {} of computing at 10 million events/s); \
                     shorten -D/--duration, lower --hz, or raise --max-events",
                    est as f64,
                    self.max_events,
                    self.max_events as f64,
                    format_ns((est / 10) * 1_000)
                ),
            ));
        }
        Ok(())
    }

    /// An upper estimate of the events the run will process: ticks on every CPU, plus what the
    /// tasks generate (alarms, bursts, kernel entries for soft/firm timers), plus a switch and a
    /// completion per tick when tasks compete.
    pub fn estimate_events(&self) -> u64 {
        let secs = self.duration as f64 / NS_PER_S as f64;
        let ticks = self.hz as f64 * secs * self.cpus as f64;
        let tasks: f64 = self
            .tasks
            .iter()
            .map(|t| t.behaviour.events_per_s(self.tick_ns()))
            .sum::<f64>()
            * secs;
        let entries = if matches!(self.timer, Mechanism::Soft | Mechanism::Firm) {
            self.cpus as f64 * secs * NS_PER_S as f64 / self.entry_interval.max(1) as f64
        } else {
            0.0
        };
        let competing = if self.tasks.len() > self.cpus {
            ticks
        } else {
            0.0
        };
        (ticks + tasks + entries + competing).min(u64::MAX as f64 / 2.0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::behaviour::Behaviour;

    #[test]
    fn a_sweep_runs_every_rate_with_every_quantum_rates_outer() {
        let q = [Quantum::Ticks(1), Quantum::Ticks(6)];
        let runs = base().sweep(&[100, 1000], &q);
        let pairs: Vec<(u32, Quantum)> = runs.iter().map(|r| (r.hz, r.quantum)).collect();
        assert_eq!(
            pairs,
            [(100, q[0]), (100, q[1]), (1000, q[0]), (1000, q[1])]
        );
        assert!(runs.iter().all(|r| r.tasks == base().tasks));
    }

    #[test]
    fn rates_are_whole_hz_from_1_to_1_mhz() {
        assert_eq!(parse_hz("250"), Ok(250));
        assert_eq!(parse_hz("1000000"), Ok(MAX_HZ));
        for bad in ["0", "1000001", "2.5", "100Hz", ""] {
            assert!(parse_hz(bad).is_err(), "{bad}");
        }
        assert!(parse_hz("0").unwrap_err().contains("1 MHz"));
    }

    fn base() -> RunConfig {
        RunConfig {
            tasks: vec![TaskSpec::new(
                "t",
                "cont",
                Behaviour::Cont {
                    delay: (1_000_000, 2_000_000),
                },
            )],
            duration: NS_PER_S,
            ..RunConfig::default()
        }
    }

    fn refused(c: RunConfig, field: &str) -> String {
        match c.validate() {
            Err(SimError::Invalid { field: f, message }) => {
                assert_eq!(f, field, "{message}");
                message
            }
            other => panic!("expected {field} refused, got {other:?}"),
        }
    }

    #[test]
    fn overflow_quanta_and_costs_are_refused() {
        base().validate().unwrap();
        // `simulate -q 99999999999999ticks` once showed a wrapped "3875820020 s".
        let m = refused(
            RunConfig {
                quantum: Quantum::Ticks(99_999_999_999_999),
                ..base()
            },
            "--quantum",
        );
        assert!(m.contains("longer than the limit"), "{m}");
        refused(
            RunConfig {
                quantum: Quantum::Ticks(u64::MAX),
                hz: MAX_HZ,
                ..base()
            },
            "--quantum",
        );
        refused(
            RunConfig {
                quantum: Quantum::Time(u64::MAX),
                ..base()
            },
            "--quantum",
        );
        for (field, costs) in [
            (
                "--switch-cost",
                Costs {
                    switch: u64::MAX,
                    ..Costs::default()
                },
            ),
            (
                "--irq-indirect",
                Costs {
                    irq_indirect: u64::MAX,
                    ..Costs::default()
                },
            ),
            (
                "--irq-cost",
                Costs {
                    irq_direct: u64::MAX,
                    irq_indirect: u64::MAX,
                    ..Costs::default()
                },
            ),
        ] {
            refused(RunConfig { costs, ..base() }, field);
        }
        refused(
            RunConfig {
                overshoot: u64::MAX,
                ..base()
            },
            "--overshoot",
        );
        refused(
            RunConfig {
                entry_interval: u64::MAX,
                ..base()
            },
            "--entry-interval",
        );
        let mut c = base();
        c.tasks[0].behaviour = Behaviour::Periodic {
            period: u64::MAX,
            wcet: 1,
            offset: 0,
        };
        refused(c, "period");
        assert_eq!(
            Costs {
                irq_direct: u64::MAX,
                irq_indirect: 5,
                switch: 0
            }
            .irq(),
            u64::MAX,
            "saturates, never wraps"
        );
    }
}
