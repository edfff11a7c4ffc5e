//! Start-up: [`prepare`] turns a validated plan into per-CPU work (slots, prepared actions, exec
//! children forked, wake channels created and their clients attached) before the first release,
//! holding the process's [`Turn`] for a watched or real-time run.

use crate::actions::{self, ActionImpl, RealActions};
use crate::budget::{cpu_spin, dispatch_margin_cap, wake_lead_caps};
use crate::config::{DispatchError, RunConfig};
use crate::engine::SlotSpec;
use crate::watchdog;
use punctual_plan::{Action, ActionKind, Plan};
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

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
    /// The task's phase may move during the run
    /// ([`engine::SlotSpec::movable`](crate::engine::SlotSpec::movable)).
    pub movable: bool,
}

pub(crate) struct CpuPrep {
    pub(crate) cpu: usize,
    /// Global slot indices (contiguous).
    pub(crate) first_slot: usize,
    pub(crate) specs: Vec<SlotSpec>,
    pub(crate) event_slot: Vec<Option<usize>>,
    pub(crate) actions: RealActions,
    pub(crate) interval: u64,
    /// The most the auto margin may grow to ([`dispatch_margin_cap`]).
    pub(crate) margin_cap: u64,
    /// Nothing else needs this CPU: its margin is not held to half the interval.
    pub(crate) shielded: bool,
    /// Shielded, and every action here runs inside the loop (mark, udp, plugin): no client or child
    /// of the plan needs the loop to sleep, so it spins to releases up to
    /// [`engine::SHIELDED_SPIN_BELOW_NS`] away.
    pub(crate) spin_alone: bool,
}

/// A plan ready to run: everything that can fail before the first release has been done.
pub struct Prepared {
    pub(crate) plan: Arc<Plan>,
    pub(crate) cpus: Vec<CpuPrep>,
    pub slots: Vec<SlotInfo>,
    pub(crate) clients: Vec<Child>,
    /// Raised by exec children that die of RLIMIT_RTTIME; the watchdog trips on it.
    pub(crate) alarm: watchdog::Alarm,
    /// This process's turn for a watched or real-time run, held until `execute` returns.
    pub(crate) turn: Option<Turn>,
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
    // An exec child runs as the action's user; a wake channel admits its client user.
    let credentials = |user: &Option<String>| {
        user.as_deref()
            .map(punctual_rt::child::Credentials::lookup)
            .transpose()
            .map_err(at)
    };
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
            let opts = actions::exec::ExecOptions {
                name: named.name.clone(),
                priority: *priority,
                credentials: credentials(user)?,
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
            let credentials = credentials(user)?;
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
    let wake_caps = lead_caps(&plan, cfg, &cpus);
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
                ..SlotSpec::default()
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
                    ..SlotSpec::default()
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
            let margin_cap = dispatch_margin_cap(&plan, &cfg.cpus, cpu, budget);
            set_lead_ins(&mut specs, &plan, cfg, cpu, (&wake_caps, margin_cap));
            preps.push(CpuPrep {
                cpu,
                first_slot,
                specs,
                event_slot,
                actions: RealActions { items },
                interval,
                margin_cap,
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

/// Each `wake` slot's [`SlotSpec::lead_in`] on dispatcher CPU `cpu`: its client's CPU (placed by
/// `cfg.client_cpus`), for its lead's cap, plus the loop's margin cap when the client shares the
/// loop's CPU; for a client elsewhere, [`SlotSpec::loop_in`]: the loop's CPU for both caps.
/// Caps, not the values of the moment: leads and margins grow during a run (a move judged on them
/// put a (d) 20 process 180 us before another's instant, and the loop's spin for that hand-over
/// later made it late 43 times).
fn set_lead_ins(
    specs: &mut [SlotSpec],
    plan: &Plan,
    cfg: &RunConfig,
    cpu: usize,
    (lead_caps, margin_cap): (&[u64], u64),
) {
    for s in specs {
        if plan.action(s.action).action.kind() != ActionKind::Wake {
            continue;
        }
        if let Some(&(_, client)) = cfg.client_cpus.iter().find(|(a, _)| *a == s.action) {
            let cap = lead_caps[s.action as usize];
            let with_loop = cap.saturating_add(margin_cap);
            if client == cpu {
                s.lead_in = Some((client, with_loop));
            } else {
                s.lead_in = Some((client, cap));
                s.loop_in = Some((cpu, with_loop));
            }
        }
    }
}

/// Each action's lead cap ([`wake_lead_caps`]), given the dispatcher CPUs (of `cpus`) that run
/// wake clients too, each with the margin cap its loop keeps (a CPU with wake actions keeps the
/// budget less the leads' share, [`cpu_spin`]).
fn lead_caps(plan: &Plan, cfg: &RunConfig, cpus: &[usize]) -> Vec<u64> {
    let budget = cpu_spin(cfg, true).0;
    let shared: Vec<(usize, u64)> = cpus
        .iter()
        .filter(|c| cfg.client_cpus.iter().any(|(_, x)| x == *c))
        .map(|&c| (c, dispatch_margin_cap(plan, &cfg.cpus, c, budget)))
        .collect();
    wake_lead_caps(plan, &cfg.client_cpus, &cfg.cpus, &shared)
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

/// The runs of one process that a watchdog may act on, one at a time, from `prepare` (which forks
/// exec children already at their real-time policy) to the end of `execute`. The watchdog's means
/// are the process's: RLIMIT_RTTIME, SIGXCPU, demoting every real-time thread of the process and
/// its descendants, the CPU share of all of them. Two such runs at once (a library user, the
/// tests' threads) limit, count and demote each other: a trip of one demoted the other's exec
/// child, whose own trip then never came (issue 32: a test hung 1,760 s).
static TURN_BUSY: std::sync::Mutex<bool> = std::sync::Mutex::new(false);

static TURN_FREE: std::sync::Condvar = std::sync::Condvar::new();

/// This process's turn for a watched or real-time run (see [`TURN_BUSY`]); given back on drop.
pub(crate) struct Turn(());

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

#[cfg(test)]
mod tests {
    use super::*;

    /// Three wake tasks and a mark: the wake client on the loop's CPU spans its lead cap and the
    /// loop's margin cap, the one elsewhere its lead cap there and both caps on the loop's CPU;
    /// the unplaced one and the mark none.
    #[test]
    fn lead_ins_are_caps_on_the_clients_cpus() {
        let text = "[[task]]\nname = \"a\"\nperiod = \"10ms\"\naction = { kind = \"wake\" }\n\
                    [[task]]\nname = \"b\"\nperiod = \"10ms\"\naction = { kind = \"wake\" }\n\
                    [[task]]\nname = \"c\"\nperiod = \"10ms\"\naction = { kind = \"wake\" }\n\
                    [[task]]\nname = \"m\"\nperiod = \"10ms\"\naction = { kind = \"mark\" }\n";
        let plan = punctual_plan::parse_str(text, "t.toml", None).unwrap();
        let spec = |t: &punctual_plan::Task| SlotSpec {
            name: t.name.clone(),
            action: t.action,
            period: Some(t.period),
            offset: 0,
            wcet: None,
            miss: t.miss,
            movable: true,
            lead_in: None,
            loop_in: None,
        };
        let mut specs: Vec<SlotSpec> = plan.tasks.iter().map(spec).collect();
        let cfg = RunConfig {
            client_cpus: vec![(specs[0].action, 1), (specs[1].action, 0)],
            ..RunConfig::default()
        };
        let caps: Vec<u64> = (0..plan.actions.len() as u64).map(|a| 100 + a).collect();
        set_lead_ins(&mut specs, &plan, &cfg, 1, (&caps, 40));
        let cap = |i: usize| caps[specs[i].action as usize];
        assert_eq!(specs[0].lead_in, Some((1, cap(0) + 40)));
        assert_eq!(specs[1].lead_in, Some((0, cap(1))));
        assert_eq!((specs[2].lead_in, specs[3].lead_in), (None, None));
        // The loop spins for the hand-over to the client elsewhere on its own CPU, before it.
        assert_eq!(specs[0].loop_in, None);
        assert_eq!(specs[1].loop_in, Some((1, cap(1) + 40)));
        assert_eq!((specs[2].loop_in, specs[3].loop_in), (None, None));
    }
}
