//! The safety net, after rtkit's canary: a run that starves the machine, or an action that never
//! returns on a real-time thread, is stopped.
//!
//! - Each dispatcher loop publishes when it last blocked (slept towards a release, or took the
//!   breather it takes at least every quarter of the threshold when releases are dense): only then
//!   can anything of a lower priority run on its CPU. A loop that has not blocked for the threshold
//!   while it ran has starved its CPU. When the block it published is half the threshold old, the
//!   watchdog looks whether the loop is blocked right now (its `/proc` state: a sleep it has not
//!   come back from, an action that waits), which counts as a block too. (rtkit, and punctual
//!   until 2026-11-29, watch a canary thread on that CPU instead; a normal-class canary's turns
//!   cost a 10 us plan 37-94 releases in 10 s, given by the kernel's fair server wherever it
//!   chose, or filling the breathers: issue 26.)
//! - Each dispatcher thread publishes when its current action began; an action running past the
//!   threshold is stuck (a plugin looping forever).
//! - RLIMIT_RTTIME bounds the CPU a real-time thread may use without blocking (soft limit twice the
//!   threshold: SIGXCPU, which trips the watchdog; hard limit three times: the kernel kills).
//!   Every exec child gets the same limits before its exec (`punctual_rt::child`), with the default
//!   disposition of SIGXCPU, so a child spinning at a real-time priority dies of it; the exec
//!   action's reaper raises the [`Alarm`], which trips the watchdog like the rest.
//! - RLIMIT_RTTIME and the block watch bound only a continuous hold; [`crate::share`] bounds the
//!   share of each CPU the run's real-time tasks (its own threads, exec children, wake clients it
//!   spawned) hold over a sliding window (5 s by default): the spin budget (50 %) for the programs
//!   the plan starts, 95 % for everything together. Sampled every watchdog tick (0.5 s by default).
//!
//! Tripping demotes every real-time thread of this process and of its descendants (exec children,
//! spawned wake clients) to SCHED_OTHER, stops the run and records why; the binary exits with 3.
//! The dispatcher blocks at least every quarter of the threshold (a short breather when releases are
//! dense), so a healthy run never trips it.

use crate::engine::Heartbeat;
pub use crate::procs::descendants;
use crate::procs::tasks_of;
use punctual_time::clock::read_clock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Why the watchdog stopped a run.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Trip {
    pub reason: String,
    pub demoted_threads: usize,
    pub demoted_children: usize,
}

/// A reason to trip raised by something that runs beside the dispatcher (an exec child that
/// died of RLIMIT_RTTIME); the first one raised is kept.
#[derive(Clone, Debug, Default)]
pub struct Alarm(Arc<Mutex<Option<String>>>);

impl Alarm {
    pub fn raise(&self, reason: String) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(reason);
    }

    pub fn raised(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// A dispatcher CPU starved by real-time work outside this run: another process's real-time
/// thread held it while the dispatcher waited. Demoting punctual would not end it, so the watchdog
/// does not trip; the run reports it, since it explains late releases.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct HeldByOthers {
    pub cpu: usize,
    /// How long the dispatcher on that CPU had not blocked when this was found.
    pub held_ns: u64,
    /// The CPU time the dispatcher thread had over the part of that span the watchdog sampled.
    pub dispatcher_ns: u64,
    pub sampled_ns: u64,
}

/// The dispatcher thread's CPU time when its loop last blocked (as seen at a watchdog tick).
#[derive(Clone, Copy, Debug, Default)]
struct Baseline {
    block: u64,
    /// The last tick the watchdog found the loop blocked itself (inside an action that waits, or
    /// in a sleep it has not come back from): a block too.
    seen_blocked: u64,
    at: u64,
    run_ns: Option<u64>,
    /// The starvation episode already reported as someone else's (its last block).
    reported: u64,
}

/// What the watchdog thread checks every tick.
struct Watch {
    threshold: u64,
    tick: u64,
    realtime: bool,
    cpus: Vec<usize>,
    heartbeats: Arc<[Heartbeat]>,
    action_names: Vec<String>,
    alarm: Alarm,
    xcpu: Arc<AtomicBool>,
    seen: Vec<Baseline>,
    held: Arc<Mutex<Vec<HeldByOthers>>>,
}

impl Watch {
    fn action_name(&self, i: usize) -> &str {
        let a = self.heartbeats[i].action.load(Ordering::Relaxed) as usize;
        self.action_names.get(a).map(String::as_str).unwrap_or("?")
    }

    /// Why to trip at `t`, if anything: a stuck action, a CPU this run starved, RLIMIT_RTTIME's
    /// signal, an exec child's alarm.
    fn check(&mut self, t: u64) -> Option<String> {
        let fmt = punctual_time::format_ns;
        for (i, hb) in self.heartbeats.iter().enumerate() {
            let since = hb.action_since.load(Ordering::Acquire);
            if since != 0 && t.saturating_sub(since) > self.threshold {
                return Some(format!(
                    "the dispatcher on CPU {} has been inside action '{}' for {} (watchdog threshold {})",
                    self.cpus[i],
                    self.action_name(i),
                    fmt(t - since),
                    fmt(self.threshold)
                ));
            }
        }
        if self.realtime {
            for i in 0..self.cpus.len() {
                if let Some(reason) = self.starved(i, t) {
                    return Some(reason);
                }
            }
        }
        if self.xcpu.load(Ordering::Relaxed) {
            return Some(
                "a real-time thread used RLIMIT_RTTIME's CPU time without blocking".into(),
            );
        }
        self.alarm.raised()
    }

    /// Whether dispatcher CPU `i` is starved by this run: its loop has not blocked (slept, taken a
    /// breather) for the threshold, so nothing of a lower priority ran there. A loop held back from
    /// running says its CPU was held, not by whom: another process's real-time thread (another
    /// test, another tool) holds the dispatcher up too, before it ever reaches an action. Only when
    /// the dispatcher thread itself ran for at least half the span is it this run's doing; else the
    /// episode is recorded once as someone else's and the run goes on.
    fn starved(&mut self, i: usize, t: u64) -> Option<String> {
        let fmt = punctual_time::format_ns;
        let hb = &self.heartbeats[i];
        let seen = &mut self.seen[i];
        // No loop there (not started, or over): nothing of this run's to judge.
        let Some(run_ns) = hb.thread_cpu_ns() else {
            *seen = Baseline::default();
            return None;
        };
        let published = hb.blocked_at.load(Ordering::Relaxed);
        // A new block, or a loop first seen now: measure from now.
        if seen.block != published || seen.run_ns.is_none() {
            *seen = Baseline {
                block: published,
                at: t,
                run_ns: Some(run_ns),
                ..*seen
            };
        }
        let last = published.max(seen.seen_blocked);
        // Blocked where the loop does not say (a sleep it is still in, an action that waits):
        // its CPU is free now, which counts as a block.
        if t.saturating_sub(last) > self.threshold / 2 && hb.blocked_now() {
            seen.seen_blocked = t;
            seen.at = t;
            seen.run_ns = Some(run_ns);
            return None;
        }
        if t.saturating_sub(last) <= self.threshold {
            return None;
        }
        // The loop may have read the clock, then been held the whole span before storing it: a
        // baseline taken just now covers nothing yet. Judge at the next tick.
        let sampled = t.saturating_sub(seen.at);
        if sampled < self.tick {
            return None;
        }
        let ran = seen.run_ns.map_or(0, |a| run_ns.saturating_sub(a));
        if ran.saturating_mul(2) < sampled {
            if seen.reported != last {
                seen.reported = last;
                self.held.lock().unwrap().push(HeldByOthers {
                    cpu: self.cpus[i],
                    held_ns: t - last,
                    dispatcher_ns: ran,
                    sampled_ns: sampled,
                });
            }
            return None;
        }
        let since = hb.action_since.load(Ordering::Acquire);
        let inside = if since != 0 {
            format!(
                "; the dispatcher has been inside action '{}' for {}",
                self.action_name(i),
                fmt(t.saturating_sub(since))
            )
        } else {
            String::new()
        };
        Some(format!(
            "CPU {} starved: real-time work held it for {} without a break (watchdog threshold {}){inside}",
            self.cpus[i],
            fmt(t - last),
            fmt(self.threshold)
        ))
    }
}

pub struct Watchdog {
    stop: Arc<AtomicBool>,
    tripped: Arc<Mutex<Option<Trip>>>,
    held: Arc<Mutex<Vec<HeldByOthers>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
    old_rttime: Option<libc::rlimit>,
}

/// RLIMIT_RTTIME for the process and every exec child, microseconds (soft, hard): SIGXCPU at twice
/// the threshold, the kernel's SIGKILL at three times.
pub fn child_rttime(threshold: u64) -> (u64, u64) {
    let us = threshold / 1_000;
    (us.saturating_mul(2), us.saturating_mul(3))
}

/// Lower this process's RLIMIT_RTTIME for a run watched at `threshold` (see [`child_rttime`]);
/// returns the limit to give back. A hard limit lowered without CAP_SYS_RESOURCE could never be
/// raised again (the next run in this process would start its children under it): then only the
/// soft limit (SIGXCPU, which trips the watchdog) is set.
fn lower_rttime(threshold: u64) -> libc::rlimit {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    let (soft, hard) = child_rttime(threshold);
    // SAFETY: reading and setting our own limit.
    unsafe {
        libc::getrlimit(libc::RLIMIT_RTTIME, &mut old);
        let hard = if punctual_rt::privilege::has_capability(24) {
            hard
        } else {
            old.rlim_max
        };
        let new = libc::rlimit {
            rlim_cur: soft.min(hard),
            rlim_max: hard,
        };
        libc::setrlimit(libc::RLIMIT_RTTIME, &new);
    }
    old
}

fn now() -> u64 {
    read_clock(libc::CLOCK_MONOTONIC)
}

fn set_fifo(prio: i32) -> bool {
    let p = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: plain syscall on the calling thread.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) == 0 }
}

fn pin(cpus: &[usize]) {
    let _ = punctual_rt::affinity::set(0, cpus);
}

/// Demote one task to SCHED_OTHER if it runs under a real-time policy. Returns whether it did.
fn demote(tid: i32) -> bool {
    // SAFETY: querying and setting another task's policy by id.
    let pol = unsafe { libc::sched_getscheduler(tid) };
    if pol < 0 {
        return false;
    }
    let pol = pol & !libc::SCHED_RESET_ON_FORK;
    if pol == libc::SCHED_FIFO || pol == libc::SCHED_RR {
        let p = libc::sched_param { sched_priority: 0 };
        // SAFETY: as above.
        return unsafe { libc::sched_setscheduler(tid, libc::SCHED_OTHER, &p) } == 0;
    }
    false
}

/// How the run is watched beside the threshold.
#[derive(Clone, Debug, Default)]
pub struct Mode {
    /// The dispatcher runs under a real-time policy (without one nothing can starve, and only stuck
    /// actions are watched).
    pub realtime: bool,
    /// The share bounds ([`crate::share`]; `None`: not watched, as without a real-time policy).
    pub share: Option<crate::share::Limits>,
    /// CPUs the run placed its wake clients on: the watchdog and its sampler keep off them
    /// before they keep off the dispatchers' ([`punctual_rt::housekeeping_cpus`]).
    pub clients: Vec<usize>,
}

/// The share sampler's state: the window, an excess it found and not yet reported, and when it
/// last sampled.
struct Sampled {
    watch: crate::share::ShareWatch,
    excess: Option<String>,
    at: u64,
}

/// Past this without a sample from the normal-class sampler, the watchdog samples itself.
const SAMPLER_STARVED_NS: u64 = 1_000_000_000;

/// The normal-class thread that samples the run's CPU share every `step` into `state` (on
/// `others`, the watchdog's CPUs), skipping the watchdog's own thread.
fn spawn_sampler(
    stop: Arc<AtomicBool>,
    state: Arc<Mutex<Sampled>>,
    skip: Arc<std::sync::atomic::AtomicI32>,
    others: &[usize],
    step: u64,
) -> std::thread::JoinHandle<()> {
    let others = others.to_vec();
    std::thread::Builder::new()
        .name("punctual-share".into())
        .spawn(move || {
            if !others.is_empty() {
                pin(&others);
            }
            // SAFETY: plain syscall.
            punctual_explain::own_thread(unsafe { libc::gettid() });
            let mut reader = crate::share::TaskReader::default();
            while !stop.load(Ordering::Relaxed) {
                std::thread::park_timeout(std::time::Duration::from_nanos(step));
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let tasks = reader.sample(skip.load(Ordering::Relaxed));
                let mut g = state.lock().unwrap_or_else(|e| e.into_inner());
                let t = now();
                if let Some(e) = g.watch.sample(t, &tasks) {
                    g.excess = Some(e.to_string());
                }
                g.at = t;
            }
        })
        .expect("spawning the share sampler")
}

/// The share's verdict for the watchdog at `t`: the sampler's excess, or (the sampler starved for
/// [`SAMPLER_STARVED_NS`]) a sample taken here, at the watchdog's priority. Never waits for the
/// sampler's lock (it is a normal-class thread): busy, the next step asks again.
fn share_verdict(state: &Mutex<Sampled>, t: u64, me: i32) -> Option<String> {
    let mut g = match state.try_lock() {
        Ok(g) => g,
        Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return None,
    };
    if let Some(e) = g.excess.take() {
        return Some(e);
    }
    if t.saturating_sub(g.at) < SAMPLER_STARVED_NS {
        return None;
    }
    let tasks = crate::share::run_tasks(me);
    g.at = t;
    g.watch.sample(t, &tasks).map(|e| e.to_string())
}

/// Demote this process's real-time threads and its descendants'. Returns (threads, children) demoted.
pub fn demote_all() -> (usize, usize) {
    let me = std::process::id() as i32;
    let own = tasks_of(me).into_iter().filter(|&t| demote(t)).count();
    let mut kids = 0;
    for c in descendants(me) {
        kids += tasks_of(c).into_iter().filter(|&t| demote(t)).count();
    }
    (own, kids)
}

impl Watchdog {
    /// Start watching. `threshold`: how long a CPU may be starved or an action may run. `mode`:
    /// whether the dispatcher runs under a real-time policy and the CPU-share bounds.
    /// `action_names` names actions in messages. `alarm` is raised by exec children's reapers.
    pub fn start(
        threshold: u64,
        cpus: &[usize],
        heartbeats: Arc<[Heartbeat]>,
        run_stop: Arc<AtomicBool>,
        mode: Mode,
        action_names: Vec<String>,
        alarm: Alarm,
    ) -> Watchdog {
        let realtime = mode.realtime;
        let stop = Arc::new(AtomicBool::new(false));
        let tripped: Arc<Mutex<Option<Trip>>> = Arc::new(Mutex::new(None));
        // At most 0.5 s (the default threshold's quarter). The threads wait parked, and stop()
        // unparks them before it joins: a tick's sleep held the end of every run, a signal's
        // included, by up to 0.5 s (issue 32: SIGINT 1.1 s into a run took 1.15 s to end it).
        let tick = (threshold / 4).clamp(1_000_000, 500_000_000);
        let mut threads = Vec::new();
        // SIGXCPU (RLIMIT_RTTIME's soft limit) as a flag the watchdog polls.
        let xcpu = Arc::new(AtomicBool::new(false));
        let _ = signal_hook::flag::register(libc::SIGXCPU, xcpu.clone());
        let old_rttime = realtime.then(|| lower_rttime(threshold));
        let held: Arc<Mutex<Vec<HeldByOthers>>> = Arc::default();
        let mut watch = Watch {
            threshold,
            tick,
            realtime,
            cpus: cpus.to_vec(),
            heartbeats,
            action_names,
            alarm,
            xcpu,
            seen: vec![Baseline::default(); cpus.len()],
            held: held.clone(),
        };
        // The share is sampled every tick (0.5 s at the default threshold, ten samples a 5 s
        // window; the other checks ride along). Reading /proc for every task of the run takes
        // 0.15-0.9 ms under load: at FIFO 99 on the clients' CPUs that was the `punctual-watchd`
        // of kurt-periodic's late releases (issue 26). A normal-class thread samples instead; the
        // watchdog only reads its verdict, and samples itself (as before) when the sampler has not
        // managed to for a second (real-time work holding every CPU). Where no CPU is free of
        // clients, both still hold a client's CPU now and then: every 100 ms, they were named for
        // 1-3 late releases of a 10 s kurt-periodic (c) row (2026-11-30); each tick, 5 times less.
        let step = tick;
        let watchdog_tid = Arc::new(std::sync::atomic::AtomicI32::new(0));
        let sampled: Option<Arc<Mutex<Sampled>>> =
            mode.share.clone().filter(|_| realtime).map(|limits| {
                Arc::new(Mutex::new(Sampled {
                    watch: crate::share::ShareWatch::new(limits),
                    excess: None,
                    at: now(),
                }))
            });
        // Both watch from CPUs with neither clients nor a dispatcher when there are any, else from
        // the dispatchers' (its CPUs may be shielded). On the clients' CPUs, a 13-50 us check at
        // FIFO 99 ten times a second (up to 165 us under disk load), or the sampler's /proc reads
        // in a kernel without preemption, made a client late at its instant (kurt-periodic (c)
        // rows, issue 26); before a hand-over, such a delay comes out of the client's lead.
        let others = punctual_rt::housekeeping_cpus(&[&mode.clients, cpus]).unwrap_or_default();
        if let Some(state) = &sampled {
            let skip = watchdog_tid.clone();
            threads.push(spawn_sampler(
                stop.clone(),
                state.clone(),
                skip,
                &others,
                step,
            ));
        }
        {
            let (stop, tripped) = (stop.clone(), tripped.clone());
            threads.push(
                std::thread::Builder::new()
                    .name("punctual-watchdog".into())
                    .spawn(move || {
                        // Watch from another CPU when there is one, above the dispatcher's priority.
                        if !others.is_empty() {
                            pin(&others);
                        }
                        if realtime {
                            set_fifo(99);
                        }
                        // SAFETY: plain syscall.
                        let me = unsafe { libc::gettid() };
                        watchdog_tid.store(me, Ordering::Relaxed);
                        // It runs at FIFO 99 beside the clients: holding one's CPU is punctual's doing.
                        punctual_explain::own_thread(me);
                        while !stop.load(Ordering::Relaxed) {
                            std::thread::park_timeout(std::time::Duration::from_nanos(step));
                            if stop.load(Ordering::Relaxed) {
                                break;
                            }
                            let t = now();
                            let over_share = sampled.as_ref().and_then(|s| share_verdict(s, t, me));
                            if let Some(reason) = over_share.or_else(|| watch.check(t)) {
                                let (own, kids) = demote_all();
                                *tripped.lock().unwrap() = Some(Trip {
                                    reason,
                                    demoted_threads: own,
                                    demoted_children: kids,
                                });
                                run_stop.store(true, Ordering::SeqCst);
                                return;
                            }
                        }
                    })
                    .expect("spawning the watchdog"),
            );
        }
        Watchdog {
            stop,
            tripped,
            held,
            threads,
            old_rttime,
        }
    }

    pub fn tripped(&self) -> Option<Trip> {
        self.tripped.lock().unwrap().clone()
    }

    /// The times a dispatcher CPU was starved by real-time work that was not this run's (the
    /// watchdog did not trip for them).
    pub fn held_by_others(&self) -> Vec<HeldByOthers> {
        self.held.lock().unwrap().clone()
    }

    /// Stop watching; restore RLIMIT_RTTIME.
    pub fn stop(mut self) -> Option<Trip> {
        self.stop.store(true, Ordering::Relaxed);
        for t in &self.threads {
            t.thread().unpark();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.restore_rttime();
        self.tripped()
    }

    fn restore_rttime(&mut self) {
        if let Some(old) = self.old_rttime.take() {
            // SAFETY: restoring our own limit.
            unsafe { libc::setrlimit(libc::RLIMIT_RTTIME, &old) };
        }
    }
}

/// A watchdog left without [`Watchdog::stop`] (a dispatcher stayed stuck, an error on the way)
/// still gives the process its RLIMIT_RTTIME back: a later run in the same process (a library
/// user, the tests) would otherwise start its children under this run's limit.
impl Drop for Watchdog {
    fn drop(&mut self) {
        self.restore_rttime();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(at: u64, excess: Option<&str>) -> Mutex<Sampled> {
        Mutex::new(Sampled {
            watch: crate::share::ShareWatch::new(crate::share::Limits {
                window: 5_000_000_000,
                programs: 0.5,
                all: 0.95,
                exempt_cpus: vec![],
            }),
            excess: excess.map(str::to_string),
            at,
        })
    }

    #[test]
    fn the_watchdog_takes_the_samplers_verdict_and_samples_itself_only_when_it_is_starved() {
        let t = 10_000_000_000;
        // A fresh sample and nothing found: nothing to do, nothing read.
        let s = state(t - 100_000_000, None);
        assert_eq!(share_verdict(&s, t, 0), None);
        assert_eq!(s.lock().unwrap().at, t - 100_000_000);
        // The sampler's excess is reported once.
        let s = state(t - 100_000_000, Some("over"));
        assert_eq!(share_verdict(&s, t, 0).as_deref(), Some("over"));
        assert_eq!(share_verdict(&s, t, 0), None);
        // No sample for more than a second: the watchdog samples (at its own priority).
        let s = state(t - 2 * SAMPLER_STARVED_NS, None);
        let _ = share_verdict(&s, t, 0);
        assert_eq!(s.lock().unwrap().at, t);
        // The sampler holding its lock: the watchdog does not wait.
        let s = state(t - 2 * SAMPLER_STARVED_NS, Some("over"));
        let held = s.lock().unwrap();
        assert_eq!(share_verdict(&s, t, 0), None);
        drop(held);
    }
}
