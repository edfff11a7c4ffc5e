//! Teardown and results: wait for the dispatcher threads (leaving behind one that a trip or an
//! overrun left stuck), stop the spawned wake clients, and put each CPU's statistics beside its
//! slots in the run's [`Outcome`].

use crate::actions::ActionReport;
use crate::config::DispatchError;
use crate::engine::SlotStats;
use crate::setup::SlotInfo;
use crate::watchdog;
use punctual_result::Fallback;
use punctual_rt::Policy;
use punctual_time::clock::read_clock;
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};

/// What one dispatcher CPU did.
#[derive(Clone, Debug)]
pub struct CpuResult {
    pub cpu: usize,
    pub margin_ns: u64,
    /// The most the auto margin could grow to (`u64::MAX`: only the period's own bound).
    pub margin_cap_ns: u64,
    pub breathers: u64,
    /// Of those, the ones a partner thread woke the loop from ([`crate::partner`]).
    pub breathers_partnered: u64,
    /// Releases the partner fired while the loop was in such a breather.
    pub relayed: u64,
    pub woke_late: u64,
    /// Late wake-ups during which the hypervisor took the CPU (the margin did not follow them).
    pub woke_late_stolen: u64,
    /// Releases spun through: closer than the kernel could wake the dispatcher.
    pub spun_through: u64,
    /// Waits before a spin for a wake client on the dispatcher's CPU to finish with a release
    /// due first.
    pub yields: u64,
    pub cpu_ns: u64,
    pub wall_ns: u64,
    /// `--explain`: the loop's stalls ([`punctual_explain::Stall`]), and those its log had no
    /// room for.
    pub stalls: Vec<punctual_explain::Stall>,
    pub stalls_dropped: u64,
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

    /// `--explain`: every dispatcher loop's stalls, taken out of the outcome.
    pub fn stalls(&mut self) -> Vec<punctual_explain::Stall> {
        self.cpus
            .iter_mut()
            .flat_map(|c| std::mem::take(&mut c.stalls))
            .collect()
    }

    /// The stalls the loops' logs had no room for.
    pub fn stalls_dropped(&self) -> u64 {
        self.cpus.iter().map(|c| c.stalls_dropped).sum()
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

pub(crate) struct CpuDone {
    pub(crate) result: CpuResult,
    pub(crate) first_slot: usize,
    pub(crate) specs_len: usize,
    pub(crate) stats: Vec<SlotStats>,
    pub(crate) reports: Vec<(u16, ActionReport)>,
}

/// How long after the plan's end a dispatcher may still run before the run stops it and fails: a
/// backstop against a loop that never ends, not a bound on teardown (a dispatcher thread also ends
/// its actions: a 200 ms plan with exec actions and spawned wake clients ended 5.2 s after its end
/// under load, in `startup.rs`'s test, which 5 s failed).
pub const OVERRUN_GRACE_NS: u64 = 30_000_000_000;

/// What [`join_dispatchers`] found: the finished threads' results, the CPUs of threads left
/// behind, and the CPUs whose thread was still running [`OVERRUN_GRACE_NS`] after the plan's end.
type Joined = (Vec<CpuDone>, Vec<usize>, Option<Vec<usize>>);

/// A dispatcher thread, with a flag its body sets when it is over (however it ended).
pub(crate) struct Dispatcher {
    pub handle: std::thread::JoinHandle<Option<CpuDone>>,
    pub ended: std::sync::Arc<AtomicBool>,
}

impl Dispatcher {
    /// Its body is over (joining it returns at once) or the thread has finished.
    fn done(&self) -> bool {
        self.ended.load(Ordering::Acquire) || self.handle.is_finished()
    }
}

/// A bare thread as a dispatcher whose flag is never set (tests that join plain threads).
#[cfg(test)]
impl From<std::thread::JoinHandle<Option<CpuDone>>> for Dispatcher {
    fn from(handle: std::thread::JoinHandle<Option<CpuDone>>) -> Dispatcher {
        Dispatcher {
            handle,
            ended: Default::default(),
        }
    }
}

/// Dropped at the end of a dispatcher thread's body (a panic too): sets its [`Dispatcher::ended`]
/// and wakes the thread that joins the dispatchers, which waits parked in between.
pub(crate) struct EndedGuard {
    pub ended: std::sync::Arc<AtomicBool>,
    pub joiner: std::thread::Thread,
}

impl Drop for EndedGuard {
    fn drop(&mut self) {
        self.ended.store(true, Ordering::Release);
        self.joiner.unpark();
    }
}

/// How long the joining thread waits parked between its checks of a trip and the plan's end,
/// unless a dispatcher's end wakes it. It polled every 10 ms before: 100 timer interrupts and
/// wake-ups a second of an unpinned thread, which on a machine whose every CPU has wake clients
/// (kurt-periodic (c) on 2 CPUs) came at clients' instants (2026-11-30: a `punctual` thread of
/// normal class woken every 10 ms, each wake-up a local timer interrupt of 7-8 us there).
const JOIN_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// Waits for the dispatcher threads; if the watchdog trips and a thread stays stuck, leaves it
/// behind. `end`: the plan's end and the run's stop flag; a thread still running
/// [`OVERRUN_GRACE_NS`] after it is stopped (a loop that never reached the end must not hold the
/// run for ever), and left behind if it has not ended a second later.
pub(crate) fn join_dispatchers(
    handles: Vec<Dispatcher>,
    cpu_list: &[usize],
    wd: Option<&watchdog::Watchdog>,
    end: Option<(u64, &AtomicBool)>,
) -> Result<Joined, DispatchError> {
    let mut tripped_at: Option<std::time::Instant> = None;
    let mut overran: Option<(std::time::Instant, Vec<usize>)> = None;
    let mut stuck = Vec::new();
    loop {
        if handles.iter().all(Dispatcher::done) {
            break;
        }
        if tripped_at.is_none() && wd.is_some_and(|w| w.tripped().is_some()) {
            tripped_at = Some(std::time::Instant::now());
        }
        if let Some((end, stop)) = end.filter(|_| overran.is_none()) {
            if read_clock(libc::CLOCK_MONOTONIC) > end.saturating_add(OVERRUN_GRACE_NS) {
                let running = handles.iter().zip(cpu_list);
                let cpus = running.filter(|(h, _)| !h.done()).map(|(_, &c)| c);
                overran = Some((std::time::Instant::now(), cpus.collect()));
                stop.store(true, Ordering::SeqCst);
            }
        }
        let since = tripped_at.or(overran.as_ref().map(|o| o.0));
        if since.is_some_and(|t| t.elapsed() > std::time::Duration::from_secs(1)) {
            break;
        }
        std::thread::park_timeout(JOIN_POLL);
    }
    let mut done = Vec::new();
    for (h, &cpu) in handles.into_iter().zip(cpu_list) {
        if h.done() {
            match h.handle.join() {
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
pub(crate) fn end_clients(clients: &mut [Child]) {
    let t0 = std::time::Instant::now();
    while clients
        .iter_mut()
        .any(|c| !matches!(c.try_wait(), Ok(Some(_))))
        && t0.elapsed() < std::time::Duration::from_millis(500)
    {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    for c in clients {
        punctual_rt::signals::end_child(c);
    }
}

/// Each finished CPU's slot statistics beside their slot's description (in [`Prepared::slots`]
/// order), an action's report with the first slot that uses it; and the per-CPU results.
pub(crate) fn gather_results(
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
    use std::sync::Arc;

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
        let (done, stuck, overran) = join_dispatchers(
            vec![obeys.into(), deaf.into()],
            &[3, 5],
            None,
            Some((end, &*stop)),
        )
        .unwrap();
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
    fn a_dispatchers_end_sets_its_flag_and_wakes_the_joiner_before_the_thread_is_gone() {
        let ended: Arc<AtomicBool> = Default::default();
        let guard = EndedGuard {
            ended: ended.clone(),
            joiner: std::thread::current(),
        };
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let handle = std::thread::spawn(move || {
            drop(guard);
            // The thread lingers past its body.
            let _ = rx.recv();
            None
        });
        let d = Dispatcher { handle, ended };
        // Not a blocking receive here: std's channels park this thread and would take the token.
        while !d.done() {
            std::thread::yield_now();
        }
        assert!(!d.handle.is_finished(), "the thread itself is still there");
        // The guard unparked this thread: a park returns at once, not after a minute.
        let t0 = std::time::Instant::now();
        std::thread::park_timeout(std::time::Duration::from_secs(60));
        assert!(t0.elapsed() < std::time::Duration::from_secs(30));
        let _ = tx.send(());
        assert!(d.handle.join().unwrap().is_none());
    }

    #[test]
    fn dispatchers_that_end_by_the_plans_end_are_not_reported() {
        let stop = AtomicBool::new(false);
        let quick = std::thread::spawn(|| None);
        let end = read_clock(libc::CLOCK_MONOTONIC) + 60_000_000_000;
        let (_, stuck, overran) =
            join_dispatchers(vec![quick.into()], &[1], None, Some((end, &stop))).unwrap();
        assert_eq!((stuck, overran), (vec![], None));
        assert!(!stop.load(Ordering::SeqCst));
    }
}
