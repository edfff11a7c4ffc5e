//! punctual's dispatcher: KURT's explicit plan scheduler, in user space.
//!
//! [`prepare`] turns a validated plan into per-CPU work: slots (one per periodic task, one per action
//! that events use), prepared actions (sockets opened, plugins loaded, exec children forked, wake
//! channels created and their clients attached). [`execute`] runs one pinned real-time thread per
//! dispatcher CPU through [`engine::dispatch`], with the [`watchdog`] beside them, and returns per-slot
//! statistics (KURT's rtstats). [`shield`] is real-time mode: other tasks and IRQs moved off the
//! dispatcher CPUs, through the journal so it is always undone. [`preflight`] finds what `run`
//! would refuse before anything on the system changes.

pub mod actions;
pub mod engine;
pub mod measure;
pub mod preflight;
pub mod rephase;
pub mod report;
pub mod request;
pub mod rtapp_client;
pub mod share;
pub mod shield;
pub mod watchdog;

use actions::{ActionImpl, ActionReport, RealActions};
use engine::{Heartbeat, LoopConfig, LoopEnd, SlotProgress, SlotSpec, SlotStats};
use punctual_plan::admission::Interference;
use punctual_plan::{Action, ActionKind, Event, Plan, Task};
use punctual_result::Fallback;
use punctual_rt::{setup_current_thread, Policy, ThreadRequest};
use punctual_time::clock::{read_clock, thread_cpu_time};
use punctual_time::{MarginPolicy, SystemClock};
use std::process::Child;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};

/// Why a plan could not be run.
#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    /// Bad input found while preparing (missing plugin, unknown program, unreachable target): exit 2.
    #[error("{0}")]
    Usage(String),
    /// The system refused or failed: exit 3.
    #[error("{0}")]
    System(String),
    /// Stopped by a signal before the run began: exit 130.
    #[error("interrupted before the run began")]
    Interrupted,
}

impl From<DispatchError> for punctual_result::Failure {
    fn from(e: DispatchError) -> Self {
        match e {
            DispatchError::Usage(m) => punctual_result::Failure::usage(m),
            DispatchError::System(m) => punctual_result::Failure::system(m),
            DispatchError::Interrupted => punctual_result::Failure::interrupted(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Dispatcher CPUs (tasks and actions without a `cpu` go on the first).
    pub cpus: Vec<usize>,
    pub policy: Policy,
    pub priority: u32,
    pub timer_slack_ns: Option<u64>,
    pub margin: MarginPolicy,
    /// How long to run, resolved once by the caller (the flag, else the plan's `duration`);
    /// `None`: the plan's `duration`; without one, until the plan's last event or until stopped.
    pub duration: Option<u64>,
    /// Watchdog threshold (`None`: no watchdog, no breathers, no RLIMIT_RTTIME).
    pub watchdog: Option<u64>,
    /// How long to wait for wake clients to attach.
    pub attach_timeout: u64,
    /// From every thread being ready to the plan's start (offset 0).
    pub lead_in: u64,
    /// The dispatcher CPUs are shielded (no normal tasks to starve): the margin is not capped by
    /// the spin budget, nor bounded by half the interval, and admission control does not check it.
    pub shielded: bool,
    /// Share of a CPU that is not shielded the dispatcher may spin or work on it (--spin-budget;
    /// default [`DISPATCH_SPIN_BUDGET`]): caps the automatic margin and bounds admission.
    pub spin_budget: f64,
    /// `Some((reference, step))`: the plan starts at the first `reference + k * step` after the
    /// lead-in (the grid the offsets were chosen on, see [`phase_around_interference`]).
    pub start_grid: Option<(u64, u64)>,
    /// Indices into the plan's tasks whose offsets were automatic and may move during the run when
    /// their late releases line up ([`rephase`]); empty: every task keeps its phase.
    pub movable: Vec<usize>,
    /// `--explain`: keep every release later than this (ns) for attribution (`None`: keep none).
    pub explain_bound: Option<u64>,
    /// How early `wake` clients are released (`None`: as `margin`, automatic by default).
    pub wake_lead: Option<MarginPolicy>,
    /// Where each `wake` action's client runs, when the caller placed it (action, CPU): its lead
    /// is capped by what is released on that CPU ([`wake_lead_caps`]); an action not listed is
    /// capped as if every client shared one CPU.
    pub client_cpus: Vec<(u16, usize)>,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            cpus: vec![0],
            policy: Policy::Fifo,
            priority: 90,
            timer_slack_ns: None,
            margin: MarginPolicy::Auto,
            duration: None,
            watchdog: Some(2_000_000_000),
            attach_timeout: 10_000_000_000,
            lead_in: 50_000_000,
            shielded: false,
            spin_budget: DISPATCH_SPIN_BUDGET,
            start_grid: None,
            movable: Vec::new(),
            explain_bound: None,
            wake_lead: None,
            client_cpus: Vec::new(),
        }
    }
}

impl RunConfig {
    /// The spin budget admission control holds the plan to (`None` on shielded CPUs).
    pub fn admitted_spin(&self) -> Option<f64> {
        (!self.shielded).then_some(self.spin_budget)
    }
}

/// One slot as reported.
#[derive(Clone, Debug)]
pub struct SlotInfo {
    pub name: String,
    pub cpu: usize,
    pub action: u16,
    pub action_name: String,
    pub action_kind: &'static str,
    /// `Some` for periodic tasks, `None` for a group of events.
    pub period: Option<u64>,
    pub delegated: bool,
    /// The task's phase may move during the run ([`engine::SlotSpec::movable`]).
    pub movable: bool,
}

struct CpuPrep {
    cpu: usize,
    /// Global slot indices (contiguous).
    first_slot: usize,
    specs: Vec<SlotSpec>,
    event_slot: Vec<Option<usize>>,
    actions: RealActions,
    interval: u64,
    /// The most the auto margin may grow to ([`dispatch_margin_cap`]).
    margin_cap: u64,
    /// Nothing else needs this CPU: its margin is not held to half the interval.
    shielded: bool,
    /// Shielded, and every action here runs inside the loop (mark, udp, plugin): no client or child
    /// of the plan needs the loop to sleep, so it spins to releases up to
    /// [`engine::SHIELDED_SPIN_BELOW_NS`] away.
    spin_alone: bool,
}

/// A plan ready to run: everything that can fail before the first release has been done.
pub struct Prepared {
    plan: Arc<Plan>,
    cpus: Vec<CpuPrep>,
    pub slots: Vec<SlotInfo>,
    clients: Vec<Child>,
    /// Raised by exec children that die of RLIMIT_RTTIME; the watchdog trips on it.
    alarm: watchdog::Alarm,
    /// This process's turn for a watched or real-time run, held until `execute` returns.
    turn: Option<Turn>,
}

impl Prepared {
    /// Every dispatcher CPU.
    pub fn cpus(&self) -> Vec<usize> {
        self.cpus.iter().map(|c| c.cpu).collect()
    }
}

#[allow(clippy::too_many_arguments)]
fn prepare_action(
    plan: &Plan,
    index: u16,
    period: u64,
    cfg: &RunConfig,
    dir: &std::path::Path,
    wake_cap: u64,
    clients: &mut Vec<Child>,
    alarm: &watchdog::Alarm,
) -> Result<Box<dyn ActionImpl>, DispatchError> {
    let named = plan.action(index);
    let at = |m: String| DispatchError::Usage(format!("action '{}': {m}", named.name));
    Ok(match &named.action {
        Action::Mark => Box::new(actions::Mark),
        Action::Udp { to, bytes } => Box::new(actions::udp::Udp::prepare(to, *bytes).map_err(at)?),
        Action::Plugin { path, symbol } => {
            Box::new(actions::plugin::Plugin::prepare(path, symbol).map_err(at)?)
        }
        Action::Exec {
            argv,
            priority,
            user,
            drop_caps,
        } => {
            let credentials = user
                .as_deref()
                .map(punctual_rt::child::Credentials::lookup)
                .transpose()
                .map_err(at)?;
            let opts = actions::exec::ExecOptions {
                name: named.name.clone(),
                priority: *priority,
                credentials,
                drop_caps: *drop_caps,
                rttime: cfg.watchdog.map(watchdog::child_rttime),
                alarm: alarm.clone(),
            };
            Box::new(actions::exec::Exec::prepare(argv, opts).map_err(at)?)
        }
        Action::Wake {
            channel,
            spawn,
            user,
        } => {
            // The plan's client user is admitted to the channel, and a spawned client runs as it.
            let credentials = user
                .as_deref()
                .map(punctual_rt::child::Credentials::lookup)
                .transpose()
                .map_err(at)?;
            let access = punctual_periodic::channel::Access {
                client_uid: credentials.as_ref().map(|c| c.uid),
            };
            let server =
                punctual_periodic::channel::Server::create_for(dir, channel, period, access)
                    .map_err(|e| match e {
                        punctual_periodic::channel::ChannelError::InUse { .. }
                        | punctual_periodic::channel::ChannelError::Squatted { .. }
                        | punctual_periodic::channel::ChannelError::Dir { .. }
                        | punctual_periodic::channel::ChannelError::BadName(_) => {
                            DispatchError::Usage(e.to_string())
                        }
                        other => DispatchError::System(other.to_string()),
                    })?;
            if let Some(argv) = spawn {
                let program =
                    actions::exec::resolve(&argv[0]).map_err(|m| at(format!("spawn: {m}")))?;
                let mut cmd = std::process::Command::new(program);
                cmd.args(&argv[1..])
                    .env("PUNCTUAL_WAKE_CHANNEL", channel)
                    .env("PUNCTUAL_SHM_DIR", dir)
                    .stdin(std::process::Stdio::null());
                // SIGTERM when punctual dies, so the client can detach cleanly.
                let mut setup =
                    punctual_rt::child::ChildSetup::new(nix::sys::signal::Signal::SIGTERM);
                if let Some(c) = credentials {
                    // A client of another user keeps no capability, so it could not raise itself
                    // to the class wake clients run in: it is given it before the identity
                    // changes (it may keep or lower it, never raise it).
                    setup = setup
                        .sched(punctual_rt::SchedParams {
                            policy: punctual_rt::Policy::Fifo,
                            priority: punctual_periodic::REALTIME_PRIORITY,
                        })
                        .credentials(c)
                        .drop_caps();
                }
                setup.install(&mut cmd);
                clients.push(
                    cmd.spawn()
                        .map_err(|e| at(format!("spawning the wake client {}: {e}", argv[0])))?,
                );
            }
            Box::new(actions::wake::Wake::new(
                server,
                period,
                cfg.wake_lead.unwrap_or(cfg.margin),
                wake_cap,
            ))
        }
    })
}

/// Share of one CPU that all `wake` clients together may spend spinning towards their instants.
pub const WAKE_SPIN_BUDGET: f64 = 0.5;

/// Share of its CPU a dispatcher thread may spend spinning when the CPU is not shielded.
pub const DISPATCH_SPIN_BUDGET: f64 = 0.5;

/// Releases a second of the plan's tasks and events that `task` and `event` select (periodic tasks
/// at their rates, one-shot events over their span, at least 1 ms).
pub fn releases_per_second(
    plan: &Plan,
    task: impl Fn(&Task) -> bool,
    event: impl Fn(&Event) -> bool,
) -> f64 {
    let mut per_second: f64 = plan
        .tasks
        .iter()
        .filter(|t| task(t))
        .map(|t| 1e9 / t.period as f64)
        .sum();
    let events = plan.events.iter().filter(|e| event(e)).count();
    if events > 0 {
        let span = plan.last_event().unwrap_or(0).max(1_000_000) as f64;
        per_second += events as f64 * 1e9 / span;
    }
    per_second
}

/// The longest spin per release that keeps `per_second` releases within `budget` of a CPU: never
/// below 2 us; `u64::MAX` without releases.
pub fn spin_cap(per_second: f64, budget: f64) -> u64 {
    if per_second <= 0.0 {
        return u64::MAX;
    }
    ((budget * 1e9 / per_second) as u64).max(2_000)
}

/// The most an automatic `wake` lead may grow to: [`WAKE_SPIN_BUDGET`] of a CPU shared among every
/// wake release of the plan. Each released client spins for its lead; without a bound, leads that
/// grow with a late wake-up make many clients spin at once, they hold every CPU, the kernel's normal
/// tasks starve and the fair server (or RT throttling) takes the CPUs away for tens of milliseconds,
/// which makes the wake-ups later still.
pub fn wake_lead_cap(plan: &Plan) -> u64 {
    let is_wake = |a: u16| plan.action(a).action.kind() == ActionKind::Wake;
    spin_cap(
        releases_per_second(plan, |t| is_wake(t.action), |e| is_wake(e.action)),
        WAKE_SPIN_BUDGET,
    )
}

/// The most each action's automatic `wake` lead may grow to (indexed by action; `u64::MAX` for
/// other kinds): [`WAKE_SPIN_BUDGET`] of the CPU its client runs on, shared among the wake
/// releases of the clients placed there (`placed`: action, CPU). A client not placed may run
/// anywhere, with any other: its cap is [`wake_lead_cap`]'s, as if every client shared one CPU.
///
/// With `n` clients of period `P` spread over `m` CPUs, each CPU releases `n / m` of them,
/// `P m / n` apart, and each lead may grow to half of that: leads on one CPU never overlap and
/// spin at most half of it, and the cap does not shrink as clients are added when CPUs are
/// added with them (30 clients at 10 ms on 15 CPUs: 2.5 ms, the period's own 2 ms bound rules).
pub fn wake_lead_caps(plan: &Plan, placed: &[(u16, usize)]) -> Vec<u64> {
    let rate = |a: u16| -> f64 {
        plan.tasks
            .iter()
            .filter(|t| t.action == a)
            .map(|t| 1e9 / t.period as f64)
            .sum::<f64>()
            + releases_per_second(plan, |_| false, |e| e.action == a)
    };
    let anywhere = wake_lead_cap(plan);
    (0..plan.actions.len() as u16)
        .map(|a| {
            if plan.action(a).action.kind() != ActionKind::Wake {
                return u64::MAX;
            }
            let Some(&(_, cpu)) = placed.iter().find(|(x, _)| *x == a) else {
                return anywhere;
            };
            let on_cpu: f64 = placed
                .iter()
                .filter(|(_, c)| *c == cpu)
                .map(|(x, _)| rate(*x))
                .sum();
            spin_cap(on_cpu, WAKE_SPIN_BUDGET)
        })
        .collect()
}

/// CPUs for `n` wake clients, in the order of their releases' phases: round robin over the
/// online CPUs that run no dispatcher (all of them when that leaves none) and, when that leaves
/// more than one, not `busy_irq` (the CPU taking the most device interrupts). With phases spread
/// evenly over the period, each CPU's clients are then spread evenly too, as far apart as they
/// can be.
pub fn place_clients(
    n: usize,
    run_cpus: &[usize],
    online: &[usize],
    busy_irq: Option<usize>,
) -> Vec<usize> {
    let mut cpus: Vec<usize> = online
        .iter()
        .copied()
        .filter(|c| !run_cpus.contains(c))
        .collect();
    if cpus.is_empty() {
        cpus = online.to_vec();
    }
    if cpus.len() > 1 {
        if let Some(b) = busy_irq {
            cpus.retain(|&c| c != b);
        }
    }
    (0..n).map(|i| cpus[i % cpus.len()]).collect()
}

/// The online CPU that took the most device interrupts (numbered IRQs of /proc/interrupts) over
/// `watch`, if any took at least 100 a second.
pub fn busiest_irq_cpu(watch: std::time::Duration) -> Option<usize> {
    let device = |m: &std::collections::BTreeMap<String, Vec<u64>>| -> Vec<u64> {
        let mut per = Vec::new();
        for (label, counts) in m {
            if !label.starts_with(|c: char| c.is_ascii_digit()) {
                continue;
            }
            per.resize(per.len().max(counts.len()), 0);
            for (i, n) in counts.iter().enumerate() {
                per[i] += n;
            }
        }
        per
    };
    let before = device(&punctual_bench::gaps::read_interrupts());
    std::thread::sleep(watch);
    let after = device(&punctual_bench::gaps::read_interrupts());
    let secs = watch.as_secs_f64().max(1e-3);
    after
        .iter()
        .enumerate()
        .map(|(i, a)| (i, a.saturating_sub(before.get(i).copied().unwrap_or(0))))
        .filter(|&(_, d)| d as f64 / secs >= 100.0)
        .max_by_key(|&(_, d)| d)
        .map(|(i, _)| i)
}

/// The most the dispatcher's automatic margin may grow to on `cpu`: [`DISPATCH_SPIN_BUDGET`] of the
/// mean time between the releases it dispatches there (for a single task, half its period). Many
/// tasks on one CPU bring releases closer than the margin a bursty host teaches the loop, which then
/// never sleeps; the CPU's normal tasks starve and the fair server stops everything for 50 ms once a
/// second. A shielded CPU (`shielded`) has no normal tasks left to starve: no cap.
pub fn dispatch_margin_cap(
    plan: &Plan,
    run_cpus: &[usize],
    cpu: usize,
    budget: Option<f64>,
) -> u64 {
    let Some(budget) = budget else {
        return u64::MAX;
    };
    let per_second = releases_per_second(
        plan,
        |t| Plan::cpu_of(t.cpu, run_cpus) == cpu,
        |e| Plan::cpu_of(plan.action(e.action).cpu, run_cpus) == cpu,
    );
    spin_cap(per_second, budget)
}

/// The spin budget a dispatcher CPU keeps to (`None`: none) and whether its loop may treat it as
/// shielded. Wake clients may share the CPU with the dispatcher (real-time mode with the processes
/// pinned there): a dispatcher spinning through releases at its higher priority would starve them,
/// and one whose margin plus the clients' lead fills the spacing wakes for the next release right at
/// a client's instant and preempts it (kurt-periodic's (d) row: p50 176 us late with 167 + 167 us
/// in 333 us). So a CPU with wake actions keeps the budget even when shielded, less the share the
/// clients' leads take ([`WAKE_SPIN_BUDGET`]).
pub fn cpu_spin(cfg: &RunConfig, wakes: bool) -> (Option<f64>, bool) {
    if wakes {
        (Some(cfg.spin_budget * (1.0 - WAKE_SPIN_BUDGET)), false)
    } else {
        (cfg.admitted_spin(), cfg.shielded)
    }
}

/// The first instant of `grid` (`reference + k * step`, k >= 0) at or after `t`.
pub fn on_grid(t: u64, grid: Option<(u64, u64)>) -> u64 {
    match grid {
        Some((r, step)) if step > 0 && t > r => r + (t - r).div_ceil(step) * step,
        Some((r, _)) => r.max(t),
        None => t,
    }
}

/// How long [`phase_around_interference`] watches the CPUs.
pub const INTERFERENCE_WATCH_NS: u64 = 500_000_000;
/// Steps of the watching loop longer than this count as interference.
pub const INTERFERENCE_THRESHOLD_NS: u64 = 5_000;
/// The longest hyperperiod a plan may have for its start to be put on the measured grid.
pub const INTERFERENCE_MAX_HYPERPERIOD: u64 = 1_000_000_000;

/// What [`phase_around_interference`] measured and chose.
#[derive(Clone, Debug)]
pub struct Avoidance {
    pub interference: Interference,
    /// CPUs watched.
    pub cpus: Vec<usize>,
    /// Start the plan on this grid ([`RunConfig::start_grid`]).
    pub grid: (u64, u64),
    /// Share of the automatically phased releases that fell in a window during the watch, with
    /// the offsets chosen; and with the offsets plain phasing gives.
    pub hit_share: f64,
    pub plain_hit_share: f64,
    /// The offsets given (task, ns).
    pub given: Vec<(String, u64)>,
}

impl Avoidance {
    /// One line for stderr.
    pub fn summary(&self) -> String {
        format!(
            "interference: watched CPU {} for {}: {:.2} % of the time taken away ({} gaps over {}); \
             automatic offsets put {:.2} % of their releases in a gap (plain phasing: {:.2} %); the plan starts on a {} grid",
            punctual_rt::format_cpu_list(&self.cpus),
            punctual_time::format_ns(self.interference.to.saturating_sub(self.interference.from)),
            self.interference.lost_share() * 100.0,
            self.interference.windows().len(),
            punctual_time::format_ns(INTERFERENCE_THRESHOLD_NS),
            self.hit_share * 100.0,
            self.plain_hit_share * 100.0,
            punctual_time::format_ns(self.grid.1),
        )
    }

    /// For the result document's settings.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "cpus": self.cpus,
            "watched_ns": self.interference.to.saturating_sub(self.interference.from),
            "threshold_ns": INTERFERENCE_THRESHOLD_NS,
            "gaps": self.interference.windows().len(),
            "lost_share": self.interference.lost_share(),
            "hit_share": self.hit_share,
            "plain_hit_share": self.plain_hit_share,
            "grid_ns": self.grid.1,
        })
    }
}

/// Watch every online CPU with a busy loop at `sched` (`punctual bench gaps`' loop) for
/// [`INTERFERENCE_WATCH_NS`], then give the plan's `offset = "auto"` tasks offsets that keep
/// their releases out of the gaps seen (the timer tick and other periodic interruptions come back
/// at the same phase), for a start on the returned grid. All CPUs count, since a `wake` client runs
/// wherever the kernel puts it. `None` (and plain phasing) when no task has an automatic offset or
/// the hyperperiod is longer than [`INTERFERENCE_MAX_HYPERPERIOD`]. `stop` (SIGINT/SIGTERM) ends
/// the watch at once with [`DispatchError::Interrupted`] (issue 32: the 500 ms watch, uninterruptible,
/// was what made a signal early in a run take more than a second).
pub fn phase_around_interference(
    plan: &mut Plan,
    run_cpus: &[usize],
    sched: punctual_rt::SchedParams,
    stop: &AtomicBool,
) -> Result<Option<Avoidance>, DispatchError> {
    let auto: Vec<usize> = (0..plan.tasks.len())
        .filter(|&i| plan.tasks[i].offset == punctual_plan::Offset::Auto)
        .collect();
    let h = punctual_plan::admission::hyperperiod(
        plan.tasks.iter().map(|t| t.period),
        INTERFERENCE_MAX_HYPERPERIOD,
    );
    let Some(h) = h.filter(|_| !auto.is_empty()) else {
        punctual_plan::admission::phase(plan, run_cpus);
        return Ok(None);
    };
    let cpus = punctual_rt::online_cpus();
    let out = punctual_bench::gaps::run(
        &punctual_bench::gaps::GapsConfig {
            cpus: cpus.clone(),
            duration_ns: INTERFERENCE_WATCH_NS,
            threshold_ns: INTERFERENCE_THRESHOLD_NS,
            sched,
            hz: None,
        },
        stop,
    )
    .map_err(|e| DispatchError::System(format!("watching the CPUs for interference: {e}")))?;
    if stop.load(Ordering::Relaxed) {
        return Err(DispatchError::Interrupted);
    }
    let from = out.cpus.iter().map(|c| c.began_ns).max().unwrap_or(0);
    let to = out.cpus.iter().map(|c| c.ended_ns).min().unwrap_or(0);
    let interference = Interference::new(
        from,
        to,
        out.cpus.iter().flat_map(|c| c.starts.iter().copied()),
    );
    let share = |p: &Plan| {
        let hits: f64 = auto
            .iter()
            .map(|&i| {
                let t = &p.tasks[i];
                interference.hit_share(from + t.offset.ns(), t.period) / t.period as f64
            })
            .sum();
        let all: f64 = auto.iter().map(|&i| 1.0 / p.tasks[i].period as f64).sum();
        hits / all
    };
    // Plain phasing first, for comparison; then the automatic offsets again, avoiding.
    punctual_plan::admission::phase(plan, run_cpus);
    let plain_hit_share = share(plan);
    for &i in &auto {
        plan.tasks[i].offset = punctual_plan::Offset::Auto;
    }
    let given =
        punctual_plan::admission::phase_avoiding(plan, run_cpus, Some((&interference, from)));
    Ok(Some(Avoidance {
        given,
        hit_share: share(plan),
        plain_hit_share,
        interference,
        cpus,
        grid: (from, h),
    }))
}

/// Prepare a validated (and admitted) plan.
/// Prepare every action of `plan` (exec children forked, wake channels open, their clients
/// started and attached). `stop` (SIGINT/SIGTERM) ends the wait for clients with
/// [`DispatchError::Interrupted`].
pub fn prepare(plan: Plan, cfg: &RunConfig, stop: &AtomicBool) -> Result<Prepared, DispatchError> {
    // Before the first exec child is forked: it takes its real-time policy before its release.
    let turn = (cfg.watchdog.is_some() || cfg.policy.is_realtime()).then(Turn::take);
    let mut cpus: Vec<usize> = cfg.cpus.clone();
    for c in plan.named_cpus() {
        if !cpus.contains(&c) {
            cpus.push(c);
        }
    }
    let dir = punctual_periodic::channel::shm_dir();
    let wake_caps = wake_lead_caps(&plan, &cfg.client_cpus);
    let alarm = watchdog::Alarm::default();
    let mut clients = Vec::new();
    let mut slots = Vec::new();
    let mut preps = Vec::new();
    let mut wake_cpu: Vec<Option<usize>> = vec![None; plan.actions.len()];
    for &cpu in &cpus {
        let first_slot = slots.len();
        let mut specs = Vec::new();
        let mut items: Vec<Option<Box<dyn ActionImpl>>> =
            (0..plan.actions.len()).map(|_| None).collect();
        let mut need: Vec<(u16, u64)> = Vec::new();
        for (ti, t) in plan
            .tasks
            .iter()
            .enumerate()
            .filter(|(_, t)| Plan::cpu_of(t.cpu, &cfg.cpus) == cpu)
        {
            let a = plan.action(t.action);
            specs.push(SlotSpec {
                name: t.name.clone(),
                action: t.action,
                period: Some(t.period),
                offset: t.offset.ns(),
                wcet: t.wcet,
                miss: t.miss,
                movable: cfg.movable.contains(&ti),
            });
            slots.push(SlotInfo {
                name: t.name.clone(),
                cpu,
                action: t.action,
                action_name: a.name.clone(),
                action_kind: a.action.kind().name(),
                period: Some(t.period),
                delegated: a.action.kind() == ActionKind::Wake,
                movable: cfg.movable.contains(&ti),
            });
            need.push((t.action, t.period));
        }
        let mut event_slot = vec![None; plan.actions.len()];
        let mut used = vec![false; plan.actions.len()];
        for e in &plan.events {
            used[e.action as usize] = true;
        }
        for (i, a) in plan.actions.iter().enumerate() {
            if used[i] && Plan::cpu_of(a.cpu, &cfg.cpus) == cpu {
                event_slot[i] = Some(specs.len());
                specs.push(SlotSpec {
                    name: a.name.clone(),
                    action: i as u16,
                    period: None,
                    offset: 0,
                    wcet: a.wcet,
                    miss: Default::default(),
                    movable: false,
                });
                slots.push(SlotInfo {
                    name: a.name.clone(),
                    cpu,
                    action: i as u16,
                    action_name: a.name.clone(),
                    action_kind: a.action.kind().name(),
                    period: None,
                    delegated: a.action.kind() == ActionKind::Wake,
                    movable: false,
                });
                need.push((i as u16, 0));
            }
        }
        for (a, period) in need {
            if items[a as usize].is_some() {
                continue;
            }
            if plan.action(a).action.kind() == ActionKind::Wake {
                if let Some(other) = wake_cpu[a as usize] {
                    return Err(DispatchError::Usage(format!(
                        "wake action '{}' is used on CPU {other} and CPU {cpu}; one channel is released from one CPU",
                        plan.action(a).name
                    )));
                }
                wake_cpu[a as usize] = Some(cpu);
            }
            items[a as usize] = Some(prepare_action(
                &plan,
                a,
                period,
                cfg,
                &dir,
                wake_caps[a as usize],
                &mut clients,
                &alarm,
            )?);
        }
        let interval = specs
            .iter()
            .filter_map(|s| s.period)
            .min()
            .unwrap_or(1_000_000);
        if !specs.is_empty() {
            let wakes = items.iter().flatten().any(|a| a.delegated());
            let (budget, shielded) = cpu_spin(cfg, wakes);
            let in_loop = |i: usize| {
                matches!(
                    plan.actions[i].action.kind(),
                    ActionKind::Mark | ActionKind::Udp | ActionKind::Plugin
                )
            };
            let spin_alone = shielded
                && (0..items.len())
                    .filter(|&i| items[i].is_some())
                    .all(in_loop);
            preps.push(CpuPrep {
                cpu,
                first_slot,
                specs,
                event_slot,
                actions: RealActions { items },
                interval,
                margin_cap: dispatch_margin_cap(&plan, &cfg.cpus, cpu, budget),
                shielded,
                spin_alone,
            });
        }
    }
    let mut prepared = Prepared {
        plan: Arc::new(plan),
        cpus: preps,
        slots,
        clients,
        alarm,
        turn,
    };
    wait_for_clients(&mut prepared, cfg.attach_timeout, stop)?;
    Ok(prepared)
}

/// Wait until every wake channel has a client, or a signal asks to stop.
fn wait_for_clients(
    p: &mut Prepared,
    timeout: u64,
    stop: &AtomicBool,
) -> Result<(), DispatchError> {
    let t0 = std::time::Instant::now();
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err(DispatchError::Interrupted);
        }
        let mut waiting = Vec::new();
        for c in &p.cpus {
            for (i, item) in c.actions.items.iter().enumerate() {
                if let Some(a) = item {
                    if !a.ready() {
                        waiting.push(p.plan.actions[i].name.clone());
                    }
                }
            }
        }
        if waiting.is_empty() {
            return Ok(());
        }
        for c in &mut p.clients {
            if let Ok(Some(st)) = c.try_wait() {
                return Err(DispatchError::System(format!(
                    "a spawned wake client exited ({st}) before attaching to its channel"
                )));
            }
        }
        if t0.elapsed().as_nanos() as u64 > timeout {
            return Err(DispatchError::System(format!(
                "no client attached to wake channel(s) {} within {}; start one that calls punctual_periodic_attach(\"NAME\") \
                 (or Periodic::attach), or give the action spawn = [\"program\", ...]",
                waiting.join(", "),
                punctual_time::format_ns(timeout)
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// What one dispatcher CPU did.
#[derive(Clone, Debug)]
pub struct CpuResult {
    pub cpu: usize,
    pub margin_ns: u64,
    /// The most the auto margin could grow to (`u64::MAX`: only the period's own bound).
    pub margin_cap_ns: u64,
    pub breathers: u64,
    pub woke_late: u64,
    /// Late wake-ups during which the hypervisor took the CPU (the margin did not follow them).
    pub woke_late_stolen: u64,
    /// Releases spun through: closer than the kernel could wake the dispatcher.
    pub spun_through: u64,
    pub cpu_ns: u64,
    pub wall_ns: u64,
    pub policy: Policy,
    pub priority: u32,
    pub fallback: Option<Fallback>,
}

pub struct SlotResult {
    pub info: SlotInfo,
    pub stats: SlotStats,
    /// The action's own measurements (given with the first slot that uses the action).
    pub report: Option<ActionReport>,
}

impl Outcome {
    /// `--explain`: every slot's late releases, each counted in its slot's index in
    /// [`Outcome::slots`], and per slot the ones its log had no room for.
    pub fn late_releases(&mut self) -> (Vec<punctual_explain::LateRelease>, Vec<(u32, u64)>) {
        let mut records = Vec::new();
        let mut unlogged = Vec::new();
        for (i, s) in self.slots.iter_mut().enumerate() {
            let log = std::mem::take(&mut s.stats.late);
            let (r, dropped) = log.into_records();
            records.extend(r.into_iter().map(|mut r| {
                r.series = i as u32;
                r
            }));
            unlogged.push((i as u32, dropped));
        }
        (records, unlogged)
    }
}

pub struct Outcome {
    pub slots: Vec<SlotResult>,
    pub cpus: Vec<CpuResult>,
    /// Absolute instant of the plan's offset 0.
    pub start: u64,
    pub trip: Option<watchdog::Trip>,
    /// Dispatcher CPUs starved by real-time work outside this run (the watchdog did not trip).
    pub held_by_others: Vec<watchdog::HeldByOthers>,
    /// CPUs whose dispatcher thread never came back (stuck in an action); their slots are missing.
    pub stuck: Vec<usize>,
}

struct CpuDone {
    result: CpuResult,
    first_slot: usize,
    specs_len: usize,
    stats: Vec<SlotStats>,
    reports: Vec<(u16, ActionReport)>,
}

/// Live figures for each slot (in [`Prepared::slots`] order).
pub fn progress_for(p: &Prepared) -> Arc<[SlotProgress]> {
    p.slots.iter().map(|_| SlotProgress::default()).collect()
}

/// [`progress_for`], each slot also keeping a live histogram of its lateness (`run --metrics`:
/// about 270 KB a slot).
pub fn live_progress_for(p: &Prepared) -> Arc<[SlotProgress]> {
    p.slots.iter().map(|_| SlotProgress::with_live()).collect()
}

/// One heartbeat per dispatcher CPU (in [`Prepared::cpus`] order), for [`execute_with`].
pub fn heartbeats_for(p: &Prepared) -> Arc<[Heartbeat]> {
    p.cpus.iter().map(|_| Heartbeat::default()).collect()
}

/// Run the plan. `stop` ends it early; `progress` must come from [`progress_for`].
pub fn execute(
    p: Prepared,
    cfg: &RunConfig,
    stop: Arc<AtomicBool>,
    progress: Arc<[SlotProgress]>,
) -> Result<Outcome, DispatchError> {
    let heartbeats = heartbeats_for(&p);
    execute_with(p, cfg, stop, progress, heartbeats)
}

/// [`execute`] with heartbeats from [`heartbeats_for`], which others may read while it runs.
pub fn execute_with(
    p: Prepared,
    cfg: &RunConfig,
    stop: Arc<AtomicBool>,
    progress: Arc<[SlotProgress]>,
    heartbeats: Arc<[Heartbeat]>,
) -> Result<Outcome, DispatchError> {
    let Prepared {
        plan,
        cpus,
        slots,
        mut clients,
        alarm,
        turn: _turn,
    } = p;
    // A library caller that left the duration out still gets the plan's: a run of a plan that
    // says 40 s ended only on a stop or a trip, and a test whose trip never came hung for ever.
    let cfg = &RunConfig {
        duration: cfg.duration.or(plan.duration),
        ..cfg.clone()
    };
    let n = cpus.len();
    let shared = Shared {
        barrier: Arc::new(Barrier::new(n + 1)),
        start: Arc::new(AtomicU64::new(0)),
        setup_error: Arc::default(),
        stop,
        progress,
        heartbeats,
        plan,
    };
    let cpu_list: Vec<usize> = cpus.iter().map(|c| c.cpu).collect();
    let mut handles = Vec::new();
    for (ci, prep) in cpus.into_iter().enumerate() {
        handles.push(spawn_dispatcher(ci, prep, &shared, cfg)?);
    }
    shared.barrier.wait();
    let failed = shared.setup_error.lock().unwrap().clone();
    let wd = match (&failed, cfg.watchdog) {
        (None, Some(threshold)) => {
            let names = shared.plan.actions.iter().map(|a| a.name.clone()).collect();
            Some(watchdog::Watchdog::start(
                threshold,
                &cpu_list,
                shared.heartbeats.clone(),
                shared.stop.clone(),
                watchdog::Mode {
                    realtime: cfg.policy.is_realtime(),
                    share: Some(share::Limits {
                        window: share::window_for(threshold),
                        programs: cfg.spin_budget,
                        all: share::ALL_SHARE,
                        exempt_cpus: if cfg.shielded {
                            cpu_list.clone()
                        } else {
                            Vec::new()
                        },
                    }),
                },
                names,
                alarm,
            ))
        }
        _ => None,
    };
    let s0 = if failed.is_some() {
        0
    } else {
        on_grid(
            read_clock(libc::CLOCK_MONOTONIC) + cfg.lead_in,
            cfg.start_grid,
        )
    };
    shared.start.store(s0, Ordering::SeqCst);
    shared.barrier.wait();

    let end = cfg
        .duration
        .filter(|_| failed.is_none())
        .map(|d| (s0.saturating_add(d), &*shared.stop));
    let (done, stuck, overran) = join_dispatchers(handles, &cpu_list, wd.as_ref(), end)?;
    let held_by_others = wd.as_ref().map(|w| w.held_by_others()).unwrap_or_default();
    let trip = wd.and_then(|w| {
        if stuck.is_empty() {
            w.stop()
        } else {
            w.tripped()
        }
    });
    if let Some(e) = failed {
        return Err(DispatchError::System(e));
    }
    end_clients(&mut clients);
    if let Some(cpus) = overran {
        return Err(DispatchError::System(format!(
            "the dispatcher on CPU {} still ran {} after the plan's end: stopped{}",
            cpus.iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            punctual_time::format_ns(OVERRUN_GRACE_NS),
            if stuck.is_empty() {
                ""
            } else {
                ", and left behind"
            }
        )));
    }
    let (slots, cpus) = gather_results(done, &slots, shared.plan.actions.len());
    Ok(Outcome {
        slots,
        cpus,
        start: s0,
        trip,
        held_by_others,
        stuck,
    })
}

/// What the dispatcher threads share with [`execute`]: two barriers' worth of meeting point (ready,
/// then go), the start instant (0: do not run), the first setup error, and the run's live state.
#[derive(Clone)]
struct Shared {
    barrier: Arc<Barrier>,
    start: Arc<AtomicU64>,
    setup_error: Arc<std::sync::Mutex<Option<String>>>,
    stop: Arc<AtomicBool>,
    progress: Arc<[SlotProgress]>,
    heartbeats: Arc<[Heartbeat]>,
    plan: Arc<Plan>,
}

/// A dispatcher thread's settings, taken from the [`RunConfig`].
#[derive(Clone, Copy)]
struct ThreadSettings {
    req: ThreadRequest,
    margin: MarginPolicy,
    duration: Option<u64>,
    breather_every: Option<u64>,
    explain_bound: Option<u64>,
}

fn spawn_dispatcher(
    ci: usize,
    prep: CpuPrep,
    shared: &Shared,
    cfg: &RunConfig,
) -> Result<std::thread::JoinHandle<Option<CpuDone>>, DispatchError> {
    let settings = ThreadSettings {
        req: ThreadRequest {
            cpu: Some(prep.cpu),
            policy: cfg.policy,
            priority: cfg.priority,
            timer_slack_ns: cfg.timer_slack_ns,
            fall_back_on_refusal: true,
        },
        margin: cfg.margin,
        duration: cfg.duration,
        breather_every: cfg.watchdog.map(|w| w / 4),
        explain_bound: cfg.explain_bound,
    };
    let shared = shared.clone();
    std::thread::Builder::new()
        .name(format!("punctual-d{}", prep.cpu))
        .stack_size(512 << 10)
        .spawn(move || dispatcher_thread(ci, prep, &shared, settings))
        .map_err(|e| DispatchError::System(format!("starting a dispatcher thread: {e}")))
}

/// One dispatcher thread: set itself up, meet the others twice (ready, then the start instant),
/// dispatch its slots, and hand back what it measured. `None`: setup failed here or elsewhere.
fn dispatcher_thread(
    ci: usize,
    mut prep: CpuPrep,
    shared: &Shared,
    settings: ThreadSettings,
) -> Option<CpuDone> {
    // Before the thread turns real-time: the watchdog tells its starvation from others' by it.
    shared.heartbeats[ci].publish_thread();
    let guards = match setup_current_thread(&settings.req) {
        Ok(g) => Some(g),
        Err(e) => {
            shared
                .setup_error
                .lock()
                .unwrap()
                .get_or_insert(format!("dispatcher thread for CPU {}: {e}", prep.cpu));
            None
        }
    };
    let mut stats: Vec<SlotStats> = prep
        .specs
        .iter()
        .map(|s| {
            SlotStats::new(
                prep.actions.items[s.action as usize]
                    .as_ref()
                    .is_some_and(|a| a.delegated()),
            )
        })
        .collect();
    if let Some(bound) = settings.explain_bound {
        // One CPU's logs share the per-thread capacity, each slot at least a thousand records.
        let each = (punctual_explain::LOG_CAPACITY / stats.len().max(1)).max(1024);
        for st in &mut stats {
            st.late = punctual_explain::LateLog::new(bound, each);
        }
    }
    shared.barrier.wait();
    shared.barrier.wait();
    let guards = guards?;
    let s0 = shared.start.load(Ordering::SeqCst);
    if s0 == 0 {
        return None;
    }
    let end = settings.duration.map(|d| s0 + d).unwrap_or(u64::MAX);
    let steal = punctual_rt::host::CpuSteal::open(prep.cpu);
    let lc = LoopConfig {
        start: s0,
        end,
        margin: settings.margin,
        interval: prep.interval,
        margin_cap: prep.margin_cap,
        breather_every: settings.breather_every,
        shielded: prep.shielded,
        spin_below: if prep.spin_alone {
            engine::SHIELDED_SPIN_BELOW_NS
        } else {
            0
        },
        steal: steal.as_ref().map(|s| s as &dyn engine::StolenTime),
        events: &shared.plan.events,
        event_slot: &prep.event_slot,
    };
    let range = prep.first_slot..prep.first_slot + prep.specs.len();
    let cpu0 = thread_cpu_time();
    let wall0 = read_clock(libc::CLOCK_MONOTONIC);
    let le: LoopEnd = engine::dispatch(
        &SystemClock::monotonic(),
        &lc,
        &prep.specs,
        &mut stats,
        &mut prep.actions,
        &shared.stop,
        &shared.progress[range],
        &shared.heartbeats[ci],
    );
    let cpu_ns = thread_cpu_time() - cpu0;
    let wall_ns = read_clock(libc::CLOCK_MONOTONIC) - wall0;
    shared.heartbeats[ci].withdraw_thread();
    let result = CpuResult {
        cpu: prep.cpu,
        margin_ns: le.margin_ns,
        margin_cap_ns: prep.margin_cap,
        breathers: le.breathers,
        woke_late: le.woke_late,
        woke_late_stolen: le.woke_late_stolen,
        spun_through: le.spun_through,
        cpu_ns,
        wall_ns,
        policy: guards.policy,
        priority: guards.priority,
        fallback: guards.fallback.clone(),
    };
    drop(guards);
    let reports = prep
        .actions
        .items
        .into_iter()
        .enumerate()
        .filter_map(|(i, a)| a.map(|a| (i as u16, a.report())))
        .collect();
    Some(CpuDone {
        result,
        first_slot: prep.first_slot,
        specs_len: prep.specs.len(),
        stats,
        reports,
    })
}

/// How long after the plan's end a dispatcher may still run before the run stops it and fails: a
/// backstop against a loop that never ends, not a bound on teardown (a dispatcher thread also ends
/// its actions: a 200 ms plan with exec actions and spawned wake clients ended 5.2 s after its end
/// under load, in `startup.rs`'s test, which 5 s failed).
pub const OVERRUN_GRACE_NS: u64 = 30_000_000_000;

/// The runs of one process that a watchdog may act on, one at a time, from `prepare` (which forks
/// exec children already at their real-time policy) to the end of `execute`. The watchdog's means
/// are the process's: RLIMIT_RTTIME, SIGXCPU, demoting every real-time thread of the process and
/// its descendants, the CPU share of all of them. Two such runs at once (a library user, the
/// tests' threads) limit, count and demote each other: a trip of one demoted the other's exec
/// child, whose own trip then never came (issue 32: a test hung 1,760 s).
static TURN_BUSY: std::sync::Mutex<bool> = std::sync::Mutex::new(false);
static TURN_FREE: std::sync::Condvar = std::sync::Condvar::new();

/// This process's turn for a watched or real-time run (see [`TURN_BUSY`]); given back on drop.
struct Turn(());

impl Turn {
    /// Waits until no other watched or real-time run of this process is under way.
    fn take() -> Turn {
        let mut busy = TURN_BUSY.lock().unwrap_or_else(|p| p.into_inner());
        while *busy {
            busy = TURN_FREE.wait(busy).unwrap_or_else(|p| p.into_inner());
        }
        *busy = true;
        Turn(())
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        *TURN_BUSY.lock().unwrap_or_else(|p| p.into_inner()) = false;
        TURN_FREE.notify_one();
    }
}

/// What [`join_dispatchers`] found: the finished threads' results, the CPUs of threads left
/// behind, and the CPUs whose thread was still running [`OVERRUN_GRACE_NS`] after the plan's end.
type Joined = (Vec<CpuDone>, Vec<usize>, Option<Vec<usize>>);

/// Waits for the dispatcher threads; if the watchdog trips and a thread stays stuck, leaves it
/// behind. `end`: the plan's end and the run's stop flag; a thread still running
/// [`OVERRUN_GRACE_NS`] after it is stopped (a loop that never reached the end must not hold the
/// run for ever), and left behind if it has not ended a second later.
fn join_dispatchers(
    handles: Vec<std::thread::JoinHandle<Option<CpuDone>>>,
    cpu_list: &[usize],
    wd: Option<&watchdog::Watchdog>,
    end: Option<(u64, &AtomicBool)>,
) -> Result<Joined, DispatchError> {
    let mut tripped_at: Option<std::time::Instant> = None;
    let mut overran: Option<(std::time::Instant, Vec<usize>)> = None;
    let mut stuck = Vec::new();
    loop {
        if handles.iter().all(|h| h.is_finished()) {
            break;
        }
        if tripped_at.is_none() && wd.is_some_and(|w| w.tripped().is_some()) {
            tripped_at = Some(std::time::Instant::now());
        }
        if let Some((end, stop)) = end.filter(|_| overran.is_none()) {
            if read_clock(libc::CLOCK_MONOTONIC) > end.saturating_add(OVERRUN_GRACE_NS) {
                let running = handles.iter().zip(cpu_list);
                let cpus = running.filter(|(h, _)| !h.is_finished()).map(|(_, &c)| c);
                overran = Some((std::time::Instant::now(), cpus.collect()));
                stop.store(true, Ordering::SeqCst);
            }
        }
        let since = tripped_at.or(overran.as_ref().map(|o| o.0));
        if since.is_some_and(|t| t.elapsed() > std::time::Duration::from_secs(1)) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let mut done = Vec::new();
    for (h, &cpu) in handles.into_iter().zip(cpu_list) {
        if h.is_finished() {
            match h.join() {
                Ok(Some(d)) => done.push(d),
                Ok(None) => {}
                Err(_) => {
                    return Err(DispatchError::System(format!(
                        "the dispatcher thread for CPU {cpu} panicked"
                    )))
                }
            }
        } else {
            stuck.push(cpu);
        }
    }
    Ok((done, stuck, overran.map(|o| o.1)))
}

/// Clients spawned by wake actions see their channels end; give them a moment, then stop them.
fn end_clients(clients: &mut [Child]) {
    let t0 = std::time::Instant::now();
    while clients
        .iter_mut()
        .any(|c| !matches!(c.try_wait(), Ok(Some(_))))
        && t0.elapsed() < std::time::Duration::from_millis(500)
    {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    for c in clients {
        if !matches!(c.try_wait(), Ok(Some(_))) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Each finished CPU's slot statistics beside their slot's description (in [`Prepared::slots`]
/// order), an action's report with the first slot that uses it; and the per-CPU results.
fn gather_results(
    done: Vec<CpuDone>,
    slots: &[SlotInfo],
    actions: usize,
) -> (Vec<SlotResult>, Vec<CpuResult>) {
    let mut results: Vec<Option<SlotResult>> = (0..slots.len()).map(|_| None).collect();
    let mut cpus_out = Vec::new();
    for d in done {
        let mut reports: Vec<Option<ActionReport>> = (0..actions).map(|_| None).collect();
        for (a, r) in d.reports {
            reports[a as usize] = Some(r);
        }
        for (k, st) in d.stats.into_iter().enumerate().take(d.specs_len) {
            let gi = d.first_slot + k;
            let info = slots[gi].clone();
            let report = reports[info.action as usize].take();
            results[gi] = Some(SlotResult {
                info,
                stats: st,
                report,
            });
        }
        cpus_out.push(d.result);
    }
    (results.into_iter().flatten().collect(), cpus_out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(text: &str) -> Plan {
        punctual_plan::parse_str(text, "t.toml", None).unwrap()
    }

    /// 30 wake tasks at 10 ms, 300 us apart, each with `extra` lines.
    fn thirty_wake_tasks(extra: &str) -> String {
        (0..30)
            .map(|i| {
                format!(
                    "[[task]]\nname = \"t{i}\"\nperiod = \"10ms\"\noffset = \"{}us\"\n{extra}action = {{ kind = \"wake\" }}\n",
                    i * 300
                )
            })
            .collect()
    }

    #[test]
    fn the_wake_spin_budget_is_shared_among_every_wake_release() {
        // 30 wake tasks at 10 ms: 3000 releases a second share half a CPU, 166 us each.
        let mut text = thirty_wake_tasks("");
        // mark releases do not spin and do not count.
        text += "[[task]]\nname = \"m\"\nperiod = \"100us\"\noffset = \"50us\"\naction = { kind = \"mark\" }\n";
        assert_eq!(wake_lead_cap(&plan(&text)), 166_666);
        let one = "[[task]]\nname = \"t\"\nperiod = \"10ms\"\naction = { kind = \"wake\" }\n";
        assert_eq!(
            wake_lead_cap(&plan(one)),
            5_000_000,
            "the period's own bound (2 ms) applies below this"
        );
        let none = "[[task]]\nname = \"t\"\nperiod = \"1ms\"\naction = { kind = \"mark\" }\n";
        assert_eq!(wake_lead_cap(&plan(none)), u64::MAX);
    }

    #[test]
    fn the_lead_cap_is_per_cpu_the_clients_run_on_not_per_plan() {
        let p = plan(&thirty_wake_tasks(""));
        // Placed on 15 CPUs (1 to 15), two each: 200 releases a second per CPU, half of 5 ms.
        let placed: Vec<(u16, usize)> = place_clients(30, &[0], &(0..16).collect::<Vec<_>>(), None)
            .into_iter()
            .enumerate()
            .map(|(i, c)| (i as u16, c))
            .collect();
        assert!(
            placed.iter().all(|&(_, c)| c != 0),
            "none on the dispatcher's CPU"
        );
        for c in 1..16 {
            assert_eq!(placed.iter().filter(|&&(_, x)| x == c).count(), 2);
        }
        let caps = wake_lead_caps(&p, &placed);
        assert!(caps.iter().all(|&c| c == 2_500_000), "{caps:?}");
        // Not placed: as if all shared one CPU (the plan's cap, 166 us).
        assert!(wake_lead_caps(&p, &[]).iter().all(|&c| c == 166_666));
        // All 30 on one CPU: the same as the plan's.
        let one: Vec<(u16, usize)> = (0..30).map(|i| (i, 1)).collect();
        assert!(wake_lead_caps(&p, &one).iter().all(|&c| c == 166_666));
        // Other kinds are not capped by it.
        let mixed =
            plan("[[task]]\nname = \"m\"\nperiod = \"1ms\"\naction = { kind = \"mark\" }\n");
        assert_eq!(wake_lead_caps(&mixed, &[]), vec![u64::MAX]);
    }

    #[test]
    fn clients_are_placed_off_the_dispatcher_and_the_busy_interrupt_cpu() {
        let online = [0, 1, 2, 3];
        assert_eq!(
            place_clients(5, &[3], &online, Some(0)),
            vec![1, 2, 1, 2, 1]
        );
        // Two CPUs, the dispatcher on one: the other takes every client, busy or not.
        assert_eq!(place_clients(3, &[1], &[0, 1], Some(0)), vec![0, 0, 0]);
        // Nothing but the dispatcher's CPU: there.
        assert_eq!(place_clients(2, &[0], &[0], None), vec![0, 0]);
    }

    #[test]
    fn a_start_on_a_grid_is_the_first_grid_instant_not_before_the_lead_in() {
        assert_eq!(on_grid(1_234, None), 1_234);
        assert_eq!(on_grid(1_234, Some((1_000, 100))), 1_300);
        assert_eq!(on_grid(1_300, Some((1_000, 100))), 1_300);
        assert_eq!(
            on_grid(900, Some((1_000, 100))),
            1_000,
            "never before the reference"
        );
        assert_eq!(on_grid(5, Some((0, 0))), 5);
    }

    #[test]
    fn a_shielded_cpu_with_wake_clients_keeps_the_spin_budget() {
        let shielded = RunConfig {
            shielded: true,
            ..RunConfig::default()
        };
        assert_eq!(cpu_spin(&shielded, false), (None, true));
        let share = DISPATCH_SPIN_BUDGET * (1.0 - WAKE_SPIN_BUDGET);
        let with_clients = Some(share);
        assert_eq!(
            cpu_spin(&shielded, true),
            (with_clients, false),
            "its clients may run on that CPU"
        );
        let plain = RunConfig::default();
        assert_eq!(cpu_spin(&plain, false), (Some(DISPATCH_SPIN_BUDGET), false));
        assert_eq!(cpu_spin(&plain, true), (with_clients, false));
        // 30 clients at 10 ms: a release every 333 us; their leads (at most half of it) and the
        // dispatcher's margin (a quarter) leave a gap, so the dispatcher never spins at an instant.
        let spacing = 1e9 / 3000.0;
        let lead = spacing * WAKE_SPIN_BUDGET;
        let margin = spacing * share;
        assert!(lead + margin < spacing * 0.8, "{lead} + {margin}");
    }

    #[test]
    fn the_dispatcher_may_spin_half_of_its_cpu_unless_the_cpu_is_shielded() {
        // 30 tasks at 10 ms on CPU 1, one at 1 ms on CPU 0, 1000 events over 1 s on CPU 0.
        let mut text = thirty_wake_tasks("cpu = 1\n");
        text += "[[task]]\nname = \"m\"\nperiod = \"1ms\"\naction = { kind = \"mark\" }\n";
        for i in 1..=1000 {
            text += &format!("[[event]]\nat = \"{i}ms\"\naction = {{ kind = \"mark\" }}\n");
        }
        let p = plan(&text);
        assert_eq!(
            dispatch_margin_cap(&p, &[0], 1, Some(DISPATCH_SPIN_BUDGET)),
            166_666
        );
        assert_eq!(
            dispatch_margin_cap(&p, &[0], 0, Some(DISPATCH_SPIN_BUDGET)),
            250_000,
            "1000 task releases and 1000 events a second"
        );
        assert_eq!(dispatch_margin_cap(&p, &[0], 1, None), u64::MAX);
        assert_eq!(
            dispatch_margin_cap(&p, &[0], 2, Some(DISPATCH_SPIN_BUDGET)),
            u64::MAX,
            "nothing on CPU 2"
        );
    }

    /// Issue 32: a dispatcher that never reached the plan's end held `join_dispatchers` (and the
    /// run, and the test's CPU lock) for ever. Past the end and the grace, the run is stopped; a
    /// thread that ends then is reported as overrunning, one that does not is left behind.
    #[test]
    fn dispatchers_past_the_plans_end_are_stopped_and_reported() {
        let stop = Arc::new(AtomicBool::new(false));
        let obeys = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                None
            })
        };
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let deaf = std::thread::spawn(move || {
            let _ = rx.recv();
            None
        });
        // The plan ended a grace and a second ago.
        let end = read_clock(libc::CLOCK_MONOTONIC) - OVERRUN_GRACE_NS - 1_000_000_000;
        let t0 = std::time::Instant::now();
        let (done, stuck, overran) =
            join_dispatchers(vec![obeys, deaf], &[3, 5], None, Some((end, &*stop))).unwrap();
        assert!(stop.load(Ordering::SeqCst), "the run was not stopped");
        assert!(done.is_empty());
        assert_eq!(overran, Some(vec![3, 5]));
        assert_eq!(
            stuck,
            vec![5],
            "only the thread that ignored the stop is left behind"
        );
        assert!(t0.elapsed() < std::time::Duration::from_secs(30));
        let _ = tx.send(());
    }

    #[test]
    fn dispatchers_that_end_by_the_plans_end_are_not_reported() {
        let stop = AtomicBool::new(false);
        let quick = std::thread::spawn(|| None);
        let end = read_clock(libc::CLOCK_MONOTONIC) + 60_000_000_000;
        let (_, stuck, overran) =
            join_dispatchers(vec![quick], &[1], None, Some((end, &stop))).unwrap();
        assert_eq!((stuck, overran), (vec![], None));
        assert!(!stop.load(Ordering::SeqCst));
    }
}
