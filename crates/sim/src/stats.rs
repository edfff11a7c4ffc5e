//! Per-task and per-CPU accounting. Everything streams: counters and HDR histograms, so memory does
//! not grow with the simulated duration.

use crate::units::Ns;
use punctual_stats::Recorder;

fn rec(slot: &mut Option<Box<Recorder>>) -> &mut Recorder {
    slot.get_or_insert_with(|| Box::new(Recorder::new()))
}

/// What one task did and how the scheduler saw it.
#[derive(Clone, Debug, Default)]
pub struct TaskStats {
    /// Exact CPU time the task computed (overheads excluded).
    pub consumed_ns: Ns,
    /// Ticks that found the task running (tick-sampled billing).
    pub billed_ticks: u64,
    /// Effective quanta: from being scheduled to being descheduled (preempted, blocked, or the
    /// allocation running out).
    pub quanta: u64,
    /// Quanta that no tick found running: never billed.
    pub missed_quanta: u64,
    pub effective_quantum: Option<Box<Recorder>>,
    /// Etsion Fig. 4: per effective-quantum length in quarter ticks (the last bucket holds 7.75
    /// ticks and longer), how many quanta and how many ticks they were billed.
    pub billing_by_length: [(u64, u64); BILLING_BUCKETS],
    /// From the interrupt that delivered the alarm to the task running (Etsion Table 6).
    pub alarm_latency: Option<Box<Recorder>>,
    /// From the time the alarm was asked for to the task running (tick rounding included).
    pub alarm_lateness: Option<Box<Recorder>>,
    /// Select loops: |time since the previous loop began - the timeout| (KURT Fig. 3.2).
    pub loop_deviation: Option<Box<Recorder>>,
    /// Shown frames: how late after their display time.
    pub frame_lateness: Option<Box<Recorder>>,
    pub frames_shown: u64,
    pub frames_skipped: u64,
    /// Skipped because the decoder had no frame ready.
    pub frames_undecoded: u64,
    /// Indices of the first skipped frames (at most [`SKIPPED_KEPT`]), to show which ones.
    pub skipped_frames: Vec<u64>,
    /// Periodic jobs started.
    pub jobs: u64,
    /// Releases already past when the previous job finished (counted, then skipped).
    pub missed_periods: u64,
    /// Jobs (or N% computations) still running when the next release (alarm) came.
    pub overruns: u64,
    pub alarms: u64,
    pub wakeups: u64,
}

/// Buckets of [`TaskStats::billing_by_length`]: quarter ticks up to 8 ticks.
pub const BILLING_BUCKETS: usize = 32;

/// How many skipped frame indices a player keeps (bounded, so memory stays flat).
pub const SKIPPED_KEPT: usize = 64;

impl TaskStats {
    pub fn record_skip(&mut self, k: u64) {
        self.frames_skipped += 1;
        if self.skipped_frames.len() < SKIPPED_KEPT {
            self.skipped_frames.push(k);
        }
    }

    pub fn record_quantum(&mut self, len: Ns, billed: u64, tick_ns: Ns) {
        let b = ((len * 4) / tick_ns.max(1)).min(BILLING_BUCKETS as u64 - 1) as usize;
        self.billing_by_length[b].0 += 1;
        self.billing_by_length[b].1 += billed;
        self.quanta += 1;
        if billed == 0 {
            self.missed_quanta += 1;
        }
        rec(&mut self.effective_quantum).record(len);
    }

    pub fn record_loop(&mut self, since_previous: Ns, timeout: Ns) {
        rec(&mut self.loop_deviation).record(since_previous.abs_diff(timeout));
    }

    pub fn record_alarm(&mut self, latency: Ns, lateness: Ns) {
        self.alarms += 1;
        rec(&mut self.alarm_latency).record(latency);
        rec(&mut self.alarm_lateness).record(lateness);
    }

    pub fn record_frame_lateness(&mut self, late: Ns) {
        rec(&mut self.frame_lateness).record(late);
    }
}

/// One CPU's time, split three ways (the three add up to the simulated duration).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuAccount {
    /// Tasks computing.
    pub work_ns: Ns,
    /// Interrupt handlers, cache refills, context switches.
    pub overhead_ns: Ns,
    pub idle_ns: Ns,
    /// Overhead charged; more than `overhead_ns` only by what was still due when the run ended.
    pub overhead_charged_ns: Ns,
    pub ticks: u64,
    /// Ticks that found a task running (and billed it).
    pub ticks_busy: u64,
    /// All interrupts: ticks, one-shot timer interrupts, device interrupts.
    pub interrupts: u64,
    pub context_switches: u64,
    /// Switches whose incoming task refilled part of its working set ([`crate::config::Cache`]),
    /// and the time those refills took (part of `overhead_charged_ns`).
    pub refills: u64,
    pub refill_ns: Ns,
    /// Times a CPU stood idle while a task it could run was waiting (must stay 0).
    pub idle_with_waiting: u64,
}
