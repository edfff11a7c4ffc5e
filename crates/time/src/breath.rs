//! A breather that does not leave the CPU idle.
//!
//! A dispatcher whose releases never let it block takes a short breather now and then, so that
//! RLIMIT_RTTIME sees it block and the normal-class work on its CPU (the watchdog's canary, kernel
//! threads) gets a turn. As a timed sleep ([`Clock::pause`]) the breather idles the CPU when no
//! such work is waiting, which is the usual case on a shielded CPU: the CPU halts, and on a VM its
//! wake-up waits on the host (the 10 us plan's breathers left its CPU idle 8-66 us each, and every
//! release due meanwhile late: docs/benchmarks.md, issue 26).
//!
//! [`BreathingClock`] keeps a partner thread in the normal class on the caller's one CPU. Its
//! `pause` wakes the partner and blocks until the partner hands the CPU back, or at most the
//! pause's length. The partner can only run once the caller has blocked; it yields first, so
//! normal-class work already waiting on that CPU runs before it; then it wakes the caller, which
//! preempts it at once. With nothing waiting the breather lasts two context switches; with work
//! waiting, that work has the CPU until the timeout, as before. A pause that did not block (a
//! wake-up left over from earlier) falls back to the timed sleep, which checks that it blocked.

use crate::clock::{voluntary_switches, Clock, SystemClock};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

struct Shared {
    /// A pause is waiting for the partner.
    wanted: AtomicBool,
    stop: AtomicBool,
    /// Pauses the partner ended (rather than the timeout or the fallback).
    handed_back: AtomicU64,
    caller: Thread,
}

/// A [`SystemClock`] whose [`Clock::pause`] hands the CPU to waiting normal-class work and comes
/// back as soon as that work has had its turn (see the module). Made by the thread that pauses,
/// while it is pinned to one CPU.
pub struct BreathingClock {
    inner: SystemClock,
    shared: Arc<Shared>,
    partner: Option<JoinHandle<()>>,
}

impl BreathingClock {
    /// A clock for the calling thread, with its partner on the caller's CPU. `None` when the
    /// caller is not pinned to exactly one CPU (a partner elsewhere would hand back before the
    /// caller blocked) or the partner cannot be started; use the plain clock then.
    pub fn for_this_thread(inner: SystemClock) -> Option<BreathingClock> {
        let cpu = only_cpu()?;
        let shared = Arc::new(Shared {
            wanted: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            handed_back: AtomicU64::new(0),
            caller: std::thread::current(),
        });
        let s = shared.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let partner = std::thread::Builder::new()
            .name("punctual-breath".into())
            .stack_size(64 << 10)
            .spawn(move || {
                // The normal class whatever the caller is (reset-on-fork does this for punctual's
                // real-time threads already), on the caller's CPU.
                let p = libc::sched_param { sched_priority: 0 };
                // SAFETY: a valid sched_param for the calling thread; a cpu_set_t of zeros is valid
                // and CPU_SET writes within it.
                let ok = unsafe {
                    libc::sched_setscheduler(0, libc::SCHED_OTHER, &p);
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(cpu, &mut set);
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
                };
                let _ = tx.send(ok);
                if !ok {
                    return;
                }
                partner(&s)
            })
            .ok()?;
        if rx.recv() != Ok(true) {
            let _ = partner.join();
            return None;
        }
        Some(BreathingClock {
            inner,
            shared,
            partner: Some(partner),
        })
    }

    /// A partner if the calling thread can have one, else the timed sleep.
    pub fn here(inner: SystemClock) -> BreathingClock {
        BreathingClock::for_this_thread(inner).unwrap_or_else(|| Self::without_partner(inner))
    }

    /// The clock without a partner: `pause` is the timed sleep.
    pub fn without_partner(inner: SystemClock) -> BreathingClock {
        BreathingClock {
            inner,
            shared: Arc::new(Shared {
                wanted: AtomicBool::new(false),
                stop: AtomicBool::new(false),
                handed_back: AtomicU64::new(0),
                caller: std::thread::current(),
            }),
            partner: None,
        }
    }

    /// Whether pauses hand the CPU to a partner (else they are the timed sleep).
    pub fn has_partner(&self) -> bool {
        self.partner.is_some()
    }

    /// How many pauses the partner ended by handing the CPU back.
    pub fn handed_back(&self) -> u64 {
        self.shared.handed_back.load(Ordering::Relaxed)
    }
}

/// The partner: woken by a pause, lets waiting work go first, then hands the CPU back.
fn partner(s: &Shared) {
    while !s.stop.load(Ordering::Acquire) {
        std::thread::park();
        if s.wanted.load(Ordering::Acquire) {
            // SAFETY: sched_yield has no preconditions.
            unsafe { libc::sched_yield() };
            if s.wanted.swap(false, Ordering::AcqRel) {
                s.handed_back.fetch_add(1, Ordering::Relaxed);
                s.caller.unpark();
            }
        }
    }
}

/// The one CPU the calling thread may run on, if it is pinned to exactly one.
fn only_cpu() -> Option<usize> {
    // SAFETY: a cpu_set_t of zeros is valid; sched_getaffinity writes at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above, for the calling thread.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0
    {
        return None;
    }
    let n = std::mem::size_of::<libc::cpu_set_t>() * 8;
    // SAFETY: CPU_ISSET reads within the set for indices below its size in bits.
    let cpus: Vec<usize> = (0..n)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect();
    match cpus[..] {
        [c] => Some(c),
        _ => None,
    }
}

impl Clock for BreathingClock {
    #[inline]
    fn now(&self) -> u64 {
        self.inner.now()
    }

    fn sleep_until(&self, t: u64) {
        self.inner.sleep_until(t)
    }

    fn pause(&self, ns: u64) {
        if self.partner.is_none() {
            return self.inner.pause(ns);
        }
        let before = voluntary_switches();
        self.shared.wanted.store(true, Ordering::Release);
        if let Some(p) = &self.partner {
            p.thread().unpark();
        }
        std::thread::park_timeout(Duration::from_nanos(ns.max(1)));
        // Timed out: the partner must not hand back a pause that is over.
        self.shared.wanted.store(false, Ordering::Release);
        if voluntary_switches() == before {
            self.inner.pause(ns);
        }
    }
}

impl Drop for BreathingClock {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(p) = self.partner.take() {
            p.thread().unpark();
            let _ = p.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pin the calling thread to `cpu`; the mask it had.
    fn pin(cpu: usize) -> libc::cpu_set_t {
        // SAFETY: zeroed cpu_set_t values are valid; the calls read and write within them.
        unsafe {
            let mut old: libc::cpu_set_t = std::mem::zeroed();
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut old);
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            assert_eq!(
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
                0
            );
            old
        }
    }

    /// The CPUs the calling thread may run on.
    fn allowed() -> Vec<usize> {
        // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity writes within it.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
        // SAFETY: CPU_ISSET reads within the set.
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect()
    }

    #[test]
    fn a_thread_not_pinned_to_one_cpu_gets_no_partner() {
        if allowed().len() < 2 {
            punctual_testkit::skip(
                "a_thread_not_pinned_to_one_cpu_gets_no_partner",
                "this process may run on one CPU only",
            );
            return;
        }
        let handle = std::thread::spawn(|| {
            BreathingClock::for_this_thread(SystemClock::monotonic()).is_none()
        });
        assert!(handle.join().unwrap(), "a partner for a thread on two CPUs");
    }

    /// Every pause blocks (what RLIMIT_RTTIME and the canary need), and the partner ends pauses
    /// long before their timeout (counted, not timed: on a loaded machine other normal work may
    /// take some of the turns, which is what a breather is for).
    #[test]
    fn every_pause_blocks_and_the_partner_hands_the_cpu_back() {
        let handle = std::thread::spawn(|| {
            pin(*allowed().last().unwrap());
            let clock = BreathingClock::for_this_thread(SystemClock::monotonic())
                .expect("a partner for a pinned thread");
            let mut blocked = 0;
            for _ in 0..20 {
                let before = voluntary_switches();
                clock.pause(50_000_000);
                blocked += (voluntary_switches() > before) as u32;
            }
            (blocked, clock.handed_back())
        });
        let (blocked, handed) = handle.join().unwrap();
        assert_eq!(blocked, 20, "pauses that blocked");
        assert!(handed >= 1, "no pause of 20 was ended by the partner");
    }
}
