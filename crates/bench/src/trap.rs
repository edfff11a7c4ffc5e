//! The cost of entering and leaving the kernel: `getpid` through the raw system call (glibc once
//! cached getpid; `syscall(SYS_getpid)` always traps), timed in batches (Etsion Table 2, "Trap").

use crate::shared::on_thread;
use crate::BenchError;
use punctual_result::Fallback;
use punctual_rt::SchedParams;
use punctual_stats::Recorder;
use punctual_time::clock::read_clock;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Clone, Copy, Debug)]
pub struct TrapConfig {
    /// How long to keep calling.
    pub duration_ns: u64,
    pub cpu: Option<usize>,
    pub sched: SchedParams,
    /// Calls per timed batch (the clock read is amortised over them).
    pub per_batch: u64,
}

impl TrapConfig {
    pub fn new(duration_ns: u64) -> Self {
        TrapConfig {
            duration_ns,
            cpu: None,
            sched: crate::shared::OTHER,
            per_batch: 1_000,
        }
    }
}

pub struct TrapOutcome {
    /// Time per call, one sample per batch (ns, rounded).
    pub per_call: Recorder,
    pub calls: u64,
    /// Total time of all batches, for the exact mean.
    pub total_ns: u64,
    pub fallback: Option<Fallback>,
}

impl TrapOutcome {
    /// Mean time per call in ns, exact (not rounded per batch).
    pub fn mean_ns(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.total_ns as f64 / self.calls as f64
        }
    }
}

#[inline(never)]
fn batch(n: u64) {
    for _ in 0..n {
        // SAFETY: getpid has no arguments and cannot fail.
        std::hint::black_box(unsafe { libc::syscall(libc::SYS_getpid) });
    }
}

pub fn run(cfg: &TrapConfig, stop: &AtomicBool) -> Result<TrapOutcome, BenchError> {
    if cfg.per_batch == 0 || cfg.duration_ns == 0 {
        return Err(BenchError::Invalid(
            "trap: the duration and the batch size must be more than zero".into(),
        ));
    }
    let ((per_call, calls, total_ns), fallback) = on_thread(cfg.cpu, cfg.sched, || {
        let mono = libc::CLOCK_MONOTONIC;
        let mut rec = Recorder::new();
        let (mut calls, mut total) = (0u64, 0u64);
        batch(cfg.per_batch); // warm up
        let end = read_clock(mono) + cfg.duration_ns;
        loop {
            let t0 = read_clock(mono);
            batch(cfg.per_batch);
            let t1 = read_clock(mono);
            let ns = t1 - t0;
            rec.record((ns + cfg.per_batch / 2) / cfg.per_batch);
            calls += cfg.per_batch;
            total += ns;
            if t1 >= end || stop.load(Ordering::Relaxed) {
                break;
            }
        }
        (rec, calls, total)
    })?;
    Ok(TrapOutcome {
        per_call,
        calls,
        total_ns,
        fallback,
    })
}
