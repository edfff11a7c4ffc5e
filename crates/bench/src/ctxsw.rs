//! Context-switch cost, Ousterhout's way as Etsion measured it (Table 2): two processes pinned to
//! one CPU pass a byte back and forth through a pair of pipes, so every hand-over is a block and a
//! wake-up on the same CPU; one round trip is two switches. `perf bench sched pipe` does the same
//! (its "usecs/op" is one round trip). The futex variant hands over through a shared futex word
//! instead, leaving out the pipe's buffer handling.

use crate::shared::{on_thread, Child, ChildSetup, Pipe, SharedBox};
use crate::BenchError;
use punctual_result::Fallback;
use punctual_rt::futex::{self, Scope};
use punctual_rt::SchedParams;
use punctual_stats::Recorder;
use punctual_time::clock::read_clock;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, Ordering};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    Pipe,
    Futex,
}

impl Channel {
    pub fn name(self) -> &'static str {
        match self {
            Channel::Pipe => "pipe",
            Channel::Futex => "futex",
        }
    }
}

impl std::str::FromStr for Channel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "pipe" => Ok(Channel::Pipe),
            "futex" => Ok(Channel::Futex),
            _ => Err(format!("unknown channel '{s}' (valid: pipe, futex)")),
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct CtxswConfig {
    pub channel: Channel,
    pub duration_ns: u64,
    /// The one CPU both processes share.
    pub cpu: usize,
    pub sched: SchedParams,
    /// Round trips per timed batch.
    pub per_batch: u64,
}

impl CtxswConfig {
    pub fn new(channel: Channel, cpu: usize, duration_ns: u64) -> Self {
        CtxswConfig {
            channel,
            duration_ns,
            cpu,
            sched: crate::shared::OTHER,
            per_batch: 200,
        }
    }
}

pub struct CtxswOutcome {
    /// Time per switch (half a round trip), one sample per batch, ns.
    pub per_switch: Recorder,
    pub round_trips: u64,
    pub total_ns: u64,
    pub fallback: Option<Fallback>,
}

impl CtxswOutcome {
    /// Mean time per switch in ns, exact.
    pub fn mean_switch_ns(&self) -> f64 {
        if self.round_trips == 0 {
            0.0
        } else {
            self.total_ns as f64 / (2 * self.round_trips) as f64
        }
    }
}

#[repr(C)]
#[derive(Default)]
struct Shared {
    ready: AtomicI64,
    /// Futex word: 1 = the child's turn, 0 = the parent's.
    turn: AtomicU32,
}

/// Wait until `word` holds `want` (sleeping in the kernel while it does not).
#[inline]
fn futex_wait_for(word: &AtomicU32, want: u32) {
    loop {
        let v = word.load(Ordering::Acquire);
        if v == want {
            return;
        }
        futex::wait(word, v, None, Scope::Shared);
    }
}

#[inline]
fn futex_hand(word: &AtomicU32, to: u32) {
    word.store(to, Ordering::Release);
    futex::wake(word, 1, Scope::Shared);
}

pub fn run(cfg: &CtxswConfig, stop: &AtomicBool) -> Result<CtxswOutcome, BenchError> {
    if cfg.per_batch == 0 || cfg.duration_ns == 0 {
        return Err(BenchError::Invalid(
            "ctxsw: the duration and the batch size must be more than zero".into(),
        ));
    }
    punctual_rt::affinity::check_online(&[cfg.cpu])?;
    // SAFETY: Shared holds only atomics.
    let shared = unsafe { SharedBox::<Shared>::zeroed()? };
    let (to_child, to_parent) = (Pipe::new()?, Pipe::new()?);
    let (outcome, fallback) = on_thread(Some(cfg.cpu), cfg.sched, || -> Result<_, BenchError> {
        // The child inherits this thread's CPU and class; it answers every hand-over, forever.
        let sh = shared.get();
        let (cr, pw) = (to_child.r, to_parent.w);
        let child_body = || {
            let mut b = [0u8; 1];
            match cfg.channel {
                Channel::Pipe => loop {
                    // SAFETY: one-byte reads and writes into `b`, a live one-byte local, on the
                    // pipe ends this forked child inherited; read, write and _exit are
                    // async-signal-safe, as a child of a threaded parent needs.
                    unsafe {
                        if libc::read(cr, b.as_mut_ptr().cast(), 1) != 1 {
                            libc::_exit(2);
                        }
                        libc::write(pw, b.as_ptr().cast(), 1);
                    }
                },
                Channel::Futex => loop {
                    futex_wait_for(&sh.turn, 1);
                    futex_hand(&sh.turn, 0);
                },
            }
        };
        // SAFETY: the child body only makes raw system calls and never returns.
        let _child = unsafe { Child::fork(ChildSetup::default(), &sh.ready, child_body)? };
        let mono = libc::CLOCK_MONOTONIC;
        let mut rec = Recorder::new();
        let (mut trips, mut total) = (0u64, 0u64);
        let mut b = [1u8; 1];
        let mut round_trip = || -> Result<(), BenchError> {
            match cfg.channel {
                Channel::Pipe => {
                    // SAFETY: raw I/O on our own pipe fds.
                    unsafe {
                        if libc::write(to_child.w, b.as_ptr().cast(), 1) != 1
                            || libc::read(to_parent.r, b.as_mut_ptr().cast(), 1) != 1
                        {
                            return Err(BenchError::os("ping-pong through the pipes"));
                        }
                    }
                }
                Channel::Futex => {
                    futex_hand(&sh.turn, 1);
                    futex_wait_for(&sh.turn, 0);
                }
            }
            Ok(())
        };
        for _ in 0..cfg.per_batch {
            round_trip()?; // warm up
        }
        let end = read_clock(mono) + cfg.duration_ns;
        loop {
            let t0 = read_clock(mono);
            for _ in 0..cfg.per_batch {
                round_trip()?;
            }
            let t1 = read_clock(mono);
            let ns = t1 - t0;
            rec.record((ns + cfg.per_batch) / (2 * cfg.per_batch));
            trips += cfg.per_batch;
            total += ns;
            if t1 >= end || stop.load(Ordering::Relaxed) {
                break;
            }
        }
        Ok((rec, trips, total))
    })?;
    let (per_switch, round_trips, total_ns) = outcome?;
    Ok(CtxswOutcome {
        per_switch,
        round_trips,
        total_ns,
        fallback,
    })
}
