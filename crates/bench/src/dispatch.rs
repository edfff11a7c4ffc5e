//! Process dispatch latency (Zeadally): an event raised on one CPU, to the first instruction of the
//! process that waits for it on another. The waiter is a separate process blocked in `read` on an
//! eventfd or a pipe, or in `sigwaitinfo` for a signal; the raiser stamps the clock just before it
//! raises the event, the waiter just after it returns, into shared memory. With a busy `soak` load on
//! the waiter's CPU every wake-up is a full context switch (Zeadally's "context switch time"); with
//! `find` beside it, the kernel is often busy in system calls when the event comes ("scheduling
//! latency"). The waiter runs in the real-time or the time-sharing class.

use crate::shared::{on_thread, Child, ChildSetup, Pipe, SharedBox};
use crate::BenchError;
use punctual_result::Fallback;
use punctual_rt::SchedParams;
use punctual_stats::Recorder;
use punctual_time::clock::{read_clock, sleep_abs};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    Eventfd,
    Pipe,
    Signal,
}

impl Event {
    pub const ALL: [Event; 3] = [Event::Eventfd, Event::Pipe, Event::Signal];
    pub fn name(self) -> &'static str {
        match self {
            Event::Eventfd => "eventfd",
            Event::Pipe => "pipe",
            Event::Signal => "signal",
        }
    }
}

impl std::str::FromStr for Event {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Event::ALL
            .into_iter()
            .find(|e| e.name() == s)
            .ok_or_else(|| format!("unknown event '{s}' (valid: eventfd, pipe, signal)"))
    }
}

#[derive(Clone, Copy, Debug)]
pub struct DispatchConfig {
    pub event: Event,
    /// Where the event is raised.
    pub raiser_cpu: usize,
    /// Where the waiting process runs.
    pub waiter_cpu: usize,
    /// The waiter's class (real-time or time-sharing).
    pub waiter: SchedParams,
    /// The raiser's class (real-time, so events leave on schedule).
    pub raiser: SchedParams,
    /// Time between events (Zeadally: 10 ms).
    pub interval_ns: u64,
    pub duration_ns: u64,
}

pub struct DispatchOutcome {
    pub latency: Recorder,
    /// Events raised.
    pub events: u64,
    pub raiser_fallback: Option<Fallback>,
}

#[repr(C)]
#[derive(Default)]
struct Shared {
    ready: AtomicI64,
    /// Events the waiter has served.
    served: AtomicU64,
    /// When the waiter ran for the last one.
    woke_at: AtomicU64,
}

fn stamp(sh: &Shared) {
    sh.woke_at
        .store(read_clock(libc::CLOCK_MONOTONIC), Ordering::Release);
    sh.served.fetch_add(1, Ordering::Release);
}

pub fn run(cfg: &DispatchConfig, stop: &AtomicBool) -> Result<DispatchOutcome, BenchError> {
    if cfg.interval_ns == 0 || cfg.duration_ns < cfg.interval_ns {
        return Err(BenchError::Invalid(
            "dispatch: the interval must be more than zero and the duration at least one interval"
                .into(),
        ));
    }
    punctual_rt::affinity::check_online(&[cfg.raiser_cpu, cfg.waiter_cpu])?;
    cfg.waiter.validate()?;
    // SAFETY: Shared holds only atomics.
    let shared = unsafe { SharedBox::<Shared>::zeroed()? };
    let sh = shared.get();
    let pipe = Pipe::new()?;
    // SAFETY: eventfd with valid flags.
    let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if efd < 0 {
        return Err(BenchError::os("creating an eventfd"));
    }
    let efd = Fd(efd);
    let signo = libc::SIGUSR1;
    // The signal is blocked in the child before it waits; block it here too, so one raised before the
    // child reaches sigwaitinfo stays pending instead of killing it. (Blocked signals survive fork.)
    // SAFETY: sigset_t is an array of integers: all zeros is valid (and sigemptyset follows).
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: sigemptyset and sigaddset only write the local set we lend them.
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signo);
    }
    let body = waiter(cfg.event, efd.0, pipe.r, set, signo, sh);
    // The child is forked from the raiser's thread, which lives for the whole run: the parent-death
    // signal follows the thread that forked. The signal is blocked there first, so the child starts
    // with it blocked.
    let (outcome, raiser_fallback) = on_thread(
        Some(cfg.raiser_cpu),
        cfg.raiser,
        || -> Result<(Recorder, u64), BenchError> {
            // SAFETY: valid set.
            unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
            // SAFETY: the body makes only raw system calls and never returns.
            let child = unsafe {
                Child::fork(
                    ChildSetup {
                        cpu: Some(cfg.waiter_cpu),
                        sched: Some(cfg.waiter),
                    },
                    &sh.ready,
                    body,
                )?
            };
            let raiser = Raiser {
                efd: efd.0,
                pipe_w: pipe.w,
                pid: child.pid(),
                signo,
            };
            let measured = raise_events(cfg, stop, sh, &raiser);
            drop(child);
            measured
        },
    )?;
    let (latency, events) = outcome?;
    Ok(DispatchOutcome {
        latency,
        events,
        raiser_fallback,
    })
}

/// An eventfd, closed on drop.
struct Fd(libc::c_int);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: our own fd.
        unsafe { libc::close(self.0) };
    }
}

/// The waiting process's body: blocked in `read` or `sigwaitinfo` for the event, it stamps the
/// clock each time it returns. It never returns.
fn waiter(
    event: Event,
    efd: libc::c_int,
    pipe_r: libc::c_int,
    set: libc::sigset_t,
    signo: libc::c_int,
    sh: &Shared,
) -> impl FnOnce() + Send + '_ {
    move || {
        let mut v: u64 = 0;
        // SAFETY: raw reads on inherited fds and sigwaitinfo; all async-signal-safe.
        unsafe {
            match event {
                Event::Eventfd => loop {
                    if libc::read(efd, (&mut v as *mut u64).cast(), 8) == 8 {
                        stamp(sh);
                    }
                },
                Event::Pipe => loop {
                    if libc::read(pipe_r, (&mut v as *mut u64).cast(), 1) == 1 {
                        stamp(sh);
                    }
                },
                Event::Signal => loop {
                    if libc::sigwaitinfo(&set, std::ptr::null_mut()) == signo {
                        stamp(sh);
                    }
                },
            }
        }
    }
}

/// Where the raiser sends each kind of event: the eventfd, the pipe's write end, the waiter's pid.
struct Raiser {
    efd: libc::c_int,
    pipe_w: libc::c_int,
    pid: libc::pid_t,
    signo: libc::c_int,
}

/// The measuring loop, on the raiser's thread: raise an event every interval, wait for the waiter
/// to stamp, record the time between. Returns the latencies and the number of events raised.
fn raise_events(
    cfg: &DispatchConfig,
    stop: &AtomicBool,
    sh: &Shared,
    raiser: &Raiser,
) -> Result<(Recorder, u64), BenchError> {
    let &Raiser {
        efd: efd_raw,
        pipe_w,
        pid,
        signo,
    } = raiser;
    let mono = libc::CLOCK_MONOTONIC;
    let mut rec = Recorder::new();
    let mut events = 0u64;
    let first = read_clock(mono) + 20_000_000; // let the child settle into its wait
    let end = first + cfg.duration_ns;
    let mut next = first;
    let one: u64 = 1;
    'events: while next < end && !stop.load(Ordering::Relaxed) {
        sleep_abs(mono, next);
        let before = sh.served.load(Ordering::Acquire);
        let t0 = read_clock(mono);
        // SAFETY: writes on our own fds; kill of our own unreaped child.
        let ok = unsafe {
            match cfg.event {
                Event::Eventfd => libc::write(efd_raw, (&one as *const u64).cast(), 8) == 8,
                Event::Pipe => libc::write(pipe_w, (&one as *const u64).cast(), 1) == 1,
                Event::Signal => libc::kill(pid, signo) == 0,
            }
        };
        if !ok {
            return Err(BenchError::os("raising the event"));
        }
        events += 1;
        // Wait for the waiter: spin briefly, then poll gently (it may be stuck behind a load).
        let mut spins = 0u32;
        let deadline = t0 + 5_000_000_000;
        loop {
            if sh.served.load(Ordering::Acquire) != before {
                break;
            }
            if spins < 20_000 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(20));
                if stop.load(Ordering::Relaxed) {
                    break 'events;
                }
                if read_clock(mono) > deadline {
                    return Err(BenchError::Os {
                        what: "the waiting process did not run within 5 s of the event",
                        source: std::io::ErrorKind::TimedOut.into(),
                    });
                }
            }
        }
        rec.record(sh.woke_at.load(Ordering::Acquire).saturating_sub(t0));
        next += cfg.interval_ns;
        let now = read_clock(mono);
        // Releases already past (only those inside the run count as missed).
        let passed = punctual_stats::Passed::at(next, now, cfg.interval_ns, end);
        rec.add_missed(passed.missed);
        next += passed.step * cfg.interval_ns;
    }
    Ok((rec, events))
}
