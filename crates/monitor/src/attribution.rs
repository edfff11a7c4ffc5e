//! Late releases explained while the monitor runs: the measuring threads offer each sample later
//! than the late bound to their CPU's [`LateFeed`](punctual_explain::LateFeed) (no lock, no allocation); once a second a
//! thread of the normal class, off the measured CPUs, takes them, asks a kernel trace of the
//! measured CPUs that never stops (a private tracefs instance, journalled, removed on exit) for
//! what it holds, and gives each release its cause with `--explain`'s code
//! ([`punctual_explain::explain`]). The counts go to the [`Board`], which `/metrics` serves as
//! `punctual_late_releases_total{cpu, cause}`.
//!
//! Memory follows what is still to be explained, never the uptime: the trace forgets what lies
//! before the oldest release it may still be asked about ([`HORIZON_NS`] back at most, plus
//! `--explain`'s look-back), and at most [`MAX_PENDING`] releases wait per CPU. A release the
//! trace cannot speak for (not covered, events lost, no trace at all, a full feed) is
//! `unexplained`; none is left uncounted.

pub use crate::metrics::FEED_CAPACITY;
use crate::metrics::{Board, LateCounts};
use punctual_explain::{explain, Cause, LateRelease};
use punctual_trace::capture::{Capture, CaptureConfig};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often late releases are explained (and so how far `punctual_late_releases_total` trails
/// the histogram, plus the trace's drain interval).
pub const EVERY: Duration = Duration::from_secs(1);
/// How long after it happened a late release can still be explained: the trace keeps this much
/// before the newest snapshot (a wake-up later than this reaches the feed after its start has
/// been forgotten, and is `unexplained`).
pub const HORIZON_NS: u64 = 2_000_000_000;
/// Late releases waiting for the trace per CPU, at most (beyond: `unexplained` at once).
pub const MAX_PENDING: usize = 65_536;
/// Events the trace holds at most, over all measured CPUs (about 48 bytes each).
pub const MAX_EVENTS: usize = 256 * 1024;

/// When the monitor explains its late releases (`--explain`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Explain {
    /// Never: every late release is `unexplained`.
    Off,
    /// When a kernel trace can be had (root, tracefs), else a line on stderr says it is off.
    #[default]
    Auto,
    /// Always: no kernel trace is an error (exit 3) before anything is measured.
    On,
}

impl std::str::FromStr for Explain {
    type Err = String;
    fn from_str(s: &str) -> Result<Explain, String> {
        match s {
            "off" => Ok(Explain::Off),
            "auto" => Ok(Explain::Auto),
            "on" => Ok(Explain::On),
            _ => Err(format!("{s:?}: give auto, on or off")),
        }
    }
}

/// Start the kernel trace of `cpus`, its drain kept off them.
pub fn start_trace(cpus: &[usize]) -> Result<Capture, punctual_trace::TraceError> {
    Capture::start(&CaptureConfig {
        cpus: cpus.to_vec(),
        buffer_kb: 1024,
        max_events: MAX_EVENTS,
        drain_interval: Duration::from_millis(50),
        drain_off: cpus.to_vec(),
        ..CaptureConfig::default()
    })
}

/// Offenders kept by name at most (the most releases first; a long run's tail is dropped).
pub const MAX_OFFENDERS: usize = 64;

/// What took the CPU from late releases, by cause and name (without pids, so the many processes
/// of one program count together), with how many releases each made late.
pub type Offenders = Vec<(Cause, String, u64)>;

/// Add `more` to `into`, keeping the [`MAX_OFFENDERS`] with the most releases.
pub fn add_offenders(into: &mut Offenders, more: &[(Cause, String, u64)]) {
    for (c, name, k) in more {
        let name = without_pid(name);
        match into.iter_mut().find(|(c2, n2, _)| c2 == c && *n2 == name) {
            Some((_, _, k2)) => *k2 += k,
            None => into.push((*c, name, *k)),
        }
    }
    into.sort_by(|a, b| b.2.cmp(&a.2).then(a.1.cmp(&b.1)));
    into.truncate(MAX_OFFENDERS);
}

/// `cc1 (pid 4242, normal, nice 0)` -> `cc1 (normal, nice 0)`.
fn without_pid(name: &str) -> String {
    match name.rfind(" (pid ") {
        Some(at) => match name[at..].find(", ") {
            Some(comma) => format!("{} ({}", &name[..at], &name[at + comma + 2..]),
            None => name[..at].to_string(),
        },
        None => name.to_string(),
    }
}

/// The thread that explains one configuration's late releases.
pub struct Attributor {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<(Option<String>, Offenders)>>,
}

impl Attributor {
    /// Explain the late releases of `cpus` from `trace` (`None`: count them `unexplained`) on a
    /// thread kept on `housekeeping`'s CPUs.
    pub fn start(
        board: Arc<Board>,
        cpus: &[usize],
        trace: Option<Capture>,
        housekeeping: Vec<usize>,
    ) -> Attributor {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let lates: Vec<(usize, Arc<LateCounts>)> =
            cpus.iter().map(|&c| (c, board.late_counts(c))).collect();
        let thread = std::thread::Builder::new()
            .name("punctual-explain".into())
            .spawn(move || {
                let _ = punctual_rt::affinity::set(0, &housekeeping);
                punctual_explain::own_thread(punctual_explain::here().0);
                let mut a = Explaining {
                    lates,
                    trace,
                    pending: Vec::new(),
                    bound: board.late_bound_ns,
                    failed: None,
                    offenders: Vec::new(),
                };
                a.run(&s);
                (a.failed, a.offenders)
            })
            .expect("spawning the attribution thread");
        Attributor {
            stop,
            thread: Some(thread),
        }
    }

    /// Explain what is left (the measuring threads have stopped) and stop tracing. Returns why
    /// the trace failed on the way, if it did, and the offenders.
    pub fn finish(mut self) -> (Option<String>, Offenders) {
        self.stop.store(true, Ordering::SeqCst);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Attributor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Explaining {
    lates: Vec<(usize, Arc<LateCounts>)>,
    trace: Option<Capture>,
    pending: Vec<LateRelease>,
    bound: u64,
    failed: Option<String>,
    offenders: Offenders,
}

impl Explaining {
    fn run(&mut self, stop: &AtomicBool) {
        let tick = Duration::from_millis(50);
        let mut next = std::time::Instant::now() + EVERY;
        loop {
            let stopping = stop.load(Ordering::SeqCst);
            if stopping || std::time::Instant::now() >= next {
                self.cycle(stopping);
                next += EVERY;
            }
            if stopping {
                break;
            }
            std::thread::sleep(tick);
        }
        if let Some(t) = self.trace.take() {
            let _ = t.finish();
        }
    }

    /// Take the feeds, explain what the trace covers, count it. `last`: the measuring threads
    /// have stopped, explain everything.
    fn cycle(&mut self, last: bool) {
        for (cpu, l) in &self.lates {
            l.feed.take(*cpu as u32, &mut self.pending);
            l.count_dropped();
        }
        let now = punctual_time::clock::read_clock(libc::CLOCK_MONOTONIC);
        let oldest = self.pending.iter().map(|r| r.target).min().unwrap_or(now);
        let keep_from = oldest
            .min(now.saturating_sub(HORIZON_NS))
            .saturating_sub(punctual_explain::timeline::LOOKBACK_NS + 1_000_000);
        let snap = match self.trace.as_ref().map(|t| t.snapshot(keep_from)) {
            Some(Ok(s)) => Some(s),
            Some(Err(e)) => {
                // Tracing stopped under us: from now on every late release is unexplained.
                self.failed = Some(e.to_string());
                self.trace = None;
                None
            }
            None => None,
        };
        let ready: Vec<LateRelease>;
        match &snap {
            Some(s) => {
                let (now_ready, wait): (Vec<_>, Vec<_>) = self
                    .pending
                    .drain(..)
                    .partition(|r| last || r.actual < s.end_ns);
                ready = now_ready;
                self.pending = wait;
                let e = explain(s, self.bound, &ready, &[]);
                for (cpu, l) in &self.lates {
                    let t = e.tally(*cpu as u32);
                    for c in Cause::ALL {
                        l.add(c, t.count(c));
                    }
                    add_offenders(&mut self.offenders, &t.offenders);
                }
            }
            None => {
                ready = std::mem::take(&mut self.pending);
                for r in &ready {
                    if let Some((_, l)) = self.lates.iter().find(|(c, _)| *c as u32 == r.series) {
                        l.add(Cause::Unexplained, 1);
                    }
                }
            }
        }
        // Never more than MAX_PENDING wait per CPU: the oldest beyond are unexplained.
        for (cpu, l) in &self.lates {
            let mine = self
                .pending
                .iter()
                .filter(|r| r.series == *cpu as u32)
                .count();
            if mine > MAX_PENDING {
                let mut over = mine - MAX_PENDING;
                l.add(Cause::Unexplained, over as u64);
                self.pending.retain(|r| {
                    if over > 0 && r.series == *cpu as u32 {
                        over -= 1;
                        false
                    } else {
                        true
                    }
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_trace_every_late_release_and_every_dropped_one_is_unexplained() {
        let board = Arc::new(Board::new(10_000));
        let l = board.late_counts(1);
        let n = FEED_CAPACITY as u64 + 5;
        for k in 0..n {
            l.feed.offer(7, 1, k, k + 50_000);
        }
        assert_eq!(l.read(), ([0; 9], n));
        let mut a = Explaining {
            lates: vec![(1, l.clone())],
            trace: None,
            pending: Vec::new(),
            bound: board.late_bound_ns,
            failed: None,
            offenders: Vec::new(),
        };
        a.cycle(false);
        let (counts, pending) = l.read();
        assert_eq!(pending, 0);
        assert_eq!(counts[8], n, "{counts:?}");
        assert_eq!(counts[..8].iter().sum::<u64>(), 0);
        assert!(a.pending.is_empty());
    }

    #[test]
    fn offenders_count_together_without_their_pids_and_stay_few() {
        let mut o = Offenders::new();
        add_offenders(
            &mut o,
            &[
                (Cause::Task, "cc1 (pid 4242, normal, nice 0)".into(), 3),
                (Cause::Irq, "irq 24 virtio1-req.0".into(), 1),
            ],
        );
        add_offenders(
            &mut o,
            &[(Cause::Task, "cc1 (pid 4343, normal, nice 0)".into(), 2)],
        );
        assert_eq!(
            o,
            vec![
                (Cause::Task, "cc1 (normal, nice 0)".to_string(), 5),
                (Cause::Irq, "irq 24 virtio1-req.0".to_string(), 1)
            ]
        );
        let many: Vec<_> = (0..200u64)
            .map(|i| (Cause::Task, format!("t{i} (pid {i}, FIFO 99)"), i))
            .collect();
        add_offenders(&mut o, &many);
        assert_eq!(o.len(), MAX_OFFENDERS);
        assert_eq!(o[0], (Cause::Task, "t199 (FIFO 99)".to_string(), 199));
    }
}
