//! The run: [`execute`] starts one pinned real-time thread per dispatcher CPU, each through
//! [`engine::dispatch`], with the [`watchdog`] beside them, meets them at the start instant, and
//! collects what they measured into an [`Outcome`](crate::Outcome) (KURT's rtstats).

use crate::config::{DispatchError, RunConfig};
use crate::engine::{self, Heartbeat, LoopConfig, LoopEnd, SlotProgress, SlotStats};
use crate::interference::on_grid;
use crate::partner::{partner_cpus, Breath, Partner, DENSE_BELOW_NS};
use crate::setup::{CpuPrep, Prepared};
use crate::teardown::{
    end_clients, gather_results, join_dispatchers, CpuDone, CpuResult, Dispatcher, EndedGuard,
    Outcome, OVERRUN_GRACE_NS,
};
use crate::{share, watchdog};
use punctual_plan::Plan;
use punctual_rt::{setup_current_thread, ThreadRequest};
use punctual_time::clock::{read_clock, thread_cpu_time};
use punctual_time::{MarginPolicy, SystemClock};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};

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
    let cpu_list: Vec<usize> = cpus.iter().map(|c| c.cpu).collect();
    let shared = Shared {
        barrier: Arc::new(Barrier::new(n + 1)),
        start: Arc::new(AtomicU64::new(0)),
        setup_error: Arc::default(),
        stop,
        progress,
        heartbeats,
        plan,
        avoid: cfg.avoid.clone(),
        steal: punctual_rt::host::StealSampler::start(&cpu_list).map(Arc::new),
    };
    // The clients are woken on their CPUs: polled there when those would halt (each dispatcher
    // thread claims its own CPU as it sets up).
    let client_cpus: Vec<usize> = cfg.client_cpus.iter().map(|&(_, c)| c).collect();
    let _poll = punctual_rt::idle_poll::Claim::poll(&client_cpus);
    let mut handles = Vec::new();
    for (ci, prep) in cpus.into_iter().enumerate() {
        handles.push(spawn_dispatcher(ci, prep, &shared, cfg, &cpu_list)?);
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
                    clients: cfg.client_cpus.iter().map(|&(_, c)| c).collect(),
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
    avoid: Option<Arc<punctual_plan::admission::Interference>>,
    /// The CPUs' stolen time, read off the loops' threads (a loop never reads `/proc/stat`).
    steal: Option<Arc<punctual_rt::host::StealSampler>>,
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
    dispatcher_cpus: &[usize],
) -> Result<Dispatcher, DispatchError> {
    let partner_on = cfg
        .watchdog
        .filter(|_| prep.interval < DENSE_BELOW_NS)
        .and_then(|_| {
            let clients: Vec<usize> = cfg.client_cpus.iter().map(|&(_, c)| c).collect();
            partner_cpus(prep.cpu, &[&clients, dispatcher_cpus])
        });
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
    let ended: Arc<AtomicBool> = Default::default();
    let guard = EndedGuard {
        ended: ended.clone(),
        joiner: std::thread::current(),
    };
    let handle = std::thread::Builder::new()
        .name(format!("punctual-d{}", prep.cpu))
        .stack_size(512 << 10)
        .spawn(move || {
            let _ended = guard;
            dispatcher_thread(ci, prep, &shared, settings, partner_on)
        })
        .map_err(|e| DispatchError::System(format!("starting a dispatcher thread: {e}")))?;
    Ok(Dispatcher { handle, ended })
}

/// One dispatcher thread: set itself up, meet the others twice (ready, then the start instant),
/// dispatch its slots, and hand back what it measured. `None`: setup failed here or elsewhere.
fn dispatcher_thread(
    ci: usize,
    mut prep: CpuPrep,
    shared: &Shared,
    settings: ThreadSettings,
    partner_on: Option<Vec<usize>>,
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
    // Made (and its pages written) here, on the thread's own CPU, before the start instant.
    let stalls = engine::stall_log_for(&stats);
    // In the class and priority the loop got (after any fallback).
    let partner = partner_on
        .zip(guards.as_ref())
        .and_then(|(cpus, g)| Partner::start(&cpus, g.sched(), prep.cpu));
    // A dense loop keeps its CPU throughout: punctual's idle poller there waits, breathers
    // included (design.md, "Idle that halts").
    let _aside =
        (prep.interval < DENSE_BELOW_NS).then(|| punctual_rt::idle_poll::Claim::aside(&[prep.cpu]));
    shared.barrier.wait();
    shared.barrier.wait();
    let guards = guards?;
    let s0 = shared.start.load(Ordering::SeqCst);
    if s0 == 0 {
        return None;
    }
    let end = settings.duration.map(|d| s0 + d).unwrap_or(u64::MAX);
    let steal = shared.steal.as_ref().and_then(|s| s.cpu(prep.cpu));
    let lc = LoopConfig {
        start: s0,
        end,
        margin: settings.margin,
        interval: prep.interval,
        margin_cap: prep.margin_cap,
        breather_every: settings.breather_every,
        partner: partner.as_ref().map(|p| p as &dyn Breath),
        shielded: prep.shielded,
        spin_below: if prep.spin_alone {
            engine::SHIELDED_SPIN_BELOW_NS
        } else {
            0
        },
        steal: steal.as_ref().map(|s| s as &dyn engine::StolenTime),
        avoid: shared.avoid.as_deref(),
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
        stalls,
    );
    let cpu_ns = thread_cpu_time() - cpu0;
    let wall_ns = read_clock(libc::CLOCK_MONOTONIC) - wall0;
    shared.heartbeats[ci].withdraw_thread();
    let (stalls, stalls_dropped) = le.stalls.into_stalls();
    let result = CpuResult {
        cpu: prep.cpu,
        margin_ns: le.margin_ns,
        margin_cap_ns: prep.margin_cap,
        breathers: le.breathers,
        breathers_partnered: le.breathers_partnered,
        relayed: le.relayed,
        woke_late: le.woke_late,
        woke_late_stolen: le.woke_late_stolen,
        spun_through: le.spun_through,
        yields: le.yields,
        cpu_ns,
        wall_ns,
        stalls,
        stalls_dropped,
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
