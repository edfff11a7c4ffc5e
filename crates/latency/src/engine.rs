//! The measuring loop and the threads that run it.

use crate::cyclic::CyclicStats;
use crate::modes::{AbsWaiter, HybridWaiter, Mode, RelWaiter, SignalWaiter, TimerfdWaiter, Waiter};
use crate::samples::{self, Sample};
use crate::LatencyError;
use punctual_explain::{LateLog, LateRelease};
use punctual_result::Fallback;
use punctual_rt::{setup_current_thread, Policy, ThreadRequest};
use punctual_stats::{LiveHistogram, Passed, Recorder};
use punctual_time::clock::{read_clock, sleep_abs, thread_cpu_time};
use punctual_time::{format_ns, ClockId, MarginPolicy};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};

/// When the measurement ends (besides the stop flag).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Releases scheduled before this much time after the first one.
    Duration(u64),
    /// This many samples per thread.
    Loops(u64),
}

#[derive(Clone, Debug)]
pub struct Config {
    /// One entry per thread: the CPU it is pinned to, or `None` to float.
    pub threads: Vec<Option<usize>>,
    pub interval: u64,
    pub stop: Stop,
    pub clock: ClockId,
    pub mode: Mode,
    /// Spin margin (hybrid mode only).
    pub margin: MarginPolicy,
    pub policy: Policy,
    pub priority: u32,
    pub timer_slack_ns: Option<u64>,
}

/// Live figures of one thread for a progress display: written with relaxed stores by the loop (no
/// lock, no allocation), read by whoever displays them. Padded so threads do not share a cache line.
#[repr(align(64))]
#[derive(Default, Debug)]
pub struct Progress {
    pub samples: AtomicU64,
    pub max_ns: AtomicU64,
    /// When set, every sample and missed period also goes here as it happens (relaxed atomic
    /// increments), for readers while the run lasts: `punctual monitor`'s `/metrics` and windows.
    pub live: Option<Arc<LiveHistogram>>,
    /// When set, every sample later than its bound is offered here as it happens (no lock, no
    /// allocation), for `punctual monitor` to explain while the run lasts.
    pub late: Option<Arc<punctual_explain::LateFeed>>,
}

impl Progress {
    /// Progress that also feeds `live`.
    pub fn with_live(live: Arc<LiveHistogram>) -> Progress {
        Progress {
            live: Some(live),
            ..Progress::default()
        }
    }
}

/// The most threads one run may start.
pub const MAX_THREADS: usize = 256;
/// The longest interval between releases (cyclictest-class intervals are microseconds to
/// milliseconds; an hour is already absurd, and keeps every sum of times far from u64's end).
pub const MAX_INTERVAL: u64 = 3_600_000_000_000;
/// The longest run, by duration or by loops times the interval: a year.
pub const MAX_RUN: u64 = 365 * 86_400_000_000_000;

impl Config {
    /// Refuse what cannot be measured meaningfully, naming the flag that fixes it. [`run`] calls
    /// it too; call it before changing anything on the system, so bad input exits 2 with nothing
    /// touched.
    pub fn validate(&self) -> Result<(), LatencyError> {
        let invalid = |flag: &'static str, why: String| LatencyError::Invalid { flag, why };
        if self.threads.is_empty() || self.threads.len() > MAX_THREADS {
            return Err(invalid(
                "-t/--threads",
                format!("{}: give 1 to {MAX_THREADS} threads", self.threads.len()),
            ));
        }
        if self.interval == 0 {
            return Err(invalid(
                "-i/--interval",
                "must be more than zero, e.g. 1ms".into(),
            ));
        }
        if self.interval > MAX_INTERVAL {
            return Err(invalid(
                "-i/--interval",
                format!(
                    "{} is longer than the limit of {}; give e.g. 1ms",
                    format_ns(self.interval),
                    format_ns(MAX_INTERVAL)
                ),
            ));
        }
        match self.stop {
            Stop::Duration(0) => {
                return Err(invalid(
                    "-D/--duration",
                    "must be more than zero, e.g. 10s".into(),
                ))
            }
            Stop::Duration(d) if d > MAX_RUN => {
                return Err(invalid(
                    "-D/--duration",
                    format!(
                        "{} is longer than the limit of {}",
                        format_ns(d),
                        format_ns(MAX_RUN)
                    ),
                ))
            }
            Stop::Duration(d) if self.interval > d => {
                return Err(invalid(
                    "-i/--interval",
                    format!(
                        "{} is longer than -D/--duration {}: not one release would be measured; shorten the interval or lengthen the run",
                        format_ns(self.interval),
                        format_ns(d)
                    ),
                ))
            }
            Stop::Loops(0) => {
                return Err(invalid("-l/--loops", "must be at least 1".into()));
            }
            Stop::Loops(l) if l.checked_mul(self.interval).is_none_or(|t| t > MAX_RUN) => {
                return Err(invalid(
                    "-l/--loops",
                    format!(
                        "{l} loops of {} run longer than the limit of {}",
                        format_ns(self.interval),
                        format_ns(MAX_RUN)
                    ),
                ))
            }
            _ => {}
        }
        if let (Mode::Hybrid, MarginPolicy::Fixed(m)) = (self.mode, self.margin) {
            if m >= self.interval {
                return Err(invalid(
                    "--spin-margin",
                    format!(
                        "{} must be shorter than the interval {}",
                        format_ns(m),
                        format_ns(self.interval)
                    ),
                ));
            }
        }
        Ok(())
    }
}
/// Where the threads' first releases fall.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Start {
    /// Every thread at one instant shortly after all are ready (`latency`).
    #[default]
    Lead,
    /// Thread `i` `i * offset` after that instant (cyclictest's `-A/--aligned`).
    Aligned { offset: u64 },
    /// On the next full second of the clock, plus `offset` (cyclictest's `--secaligned`).
    SecAligned { offset: u64 },
}

/// What cyclictest does differently from `latency`: thread `i`'s interval is
/// `interval + i * distance` (`-d`), the first releases may be aligned, and each thread may keep
/// cyclictest's own figures (`cyclic`, one per thread). The default is `latency`'s behaviour.
#[derive(Clone, Copy, Default)]
pub struct RunExtras<'a> {
    pub distance: u64,
    pub start: Start,
    pub cyclic: Option<&'a [CyclicStats]>,
    /// What else watches the loops (`--explain`'s late releases).
    pub observe: Observe,
}

/// Time between the threads being ready and the first release.
const LEAD_NS: u64 = 10_000_000;
const STACK: usize = 256 << 10;

pub struct ThreadResult {
    pub index: usize,
    pub cpu: Option<usize>,
    pub recorder: Recorder,
    /// CPU time the thread consumed while measuring.
    pub cpu_ns: u64,
    /// Wall time of the measuring loop.
    pub wall_ns: u64,
    pub policy: Policy,
    pub priority: u32,
    pub fallback: Option<Fallback>,
    /// Spin margin at the end (hybrid).
    pub margin_ns: Option<u64>,
    /// How far the last wake-up was from the absolute schedule (rel mode: accumulated drift).
    pub drift_ns: Option<i64>,
    pub dropped_samples: u64,
}

pub struct Outcome {
    pub threads: Vec<ThreadResult>,
    pub samples_written: u64,
    /// When the first release was due.
    pub first_release: u64,
}

impl Outcome {
    pub fn merged(&self) -> Recorder {
        let mut all = Recorder::new();
        for t in &self.threads {
            all.merge(&t.recorder)
                .expect("recorders share one histogram shape");
        }
        all
    }
}

struct LoopEnd {
    n: u64,
    last_done: u64,
}

/// Where one thread's releases fall.
#[derive(Clone, Copy)]
struct Schedule {
    first: u64,
    interval: u64,
    until: Stop,
}

/// Where one thread's observations go. All preallocated before the loop.
struct Sink<'a> {
    rec: &'a mut Recorder,
    tx: &'a mut Option<rtrb::Producer<Sample>>,
    dropped: &'a mut u64,
    progress: &'a Progress,
    cyclic: Option<&'a CyclicStats>,
    /// Releases outside `--explain`'s bound (a log that keeps nothing when it is off).
    late: &'a mut LateLog,
    /// The series the thread's late releases count in (its index).
    series: u32,
}

/// What observes the measuring loops besides the statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Observe {
    /// `--explain`: keep every release later than this (ns) for attribution.
    pub late_bound: Option<u64>,
}

/// The loop every mode shares. Nothing in it allocates, locks or prints.
#[inline(never)]
fn measure<W: Waiter>(w: &mut W, sched: Schedule, stop: &AtomicBool, sink: Sink<'_>) -> LoopEnd {
    let Schedule {
        first,
        interval,
        until,
    } = sched;
    let Sink {
        rec,
        tx,
        dropped,
        progress,
        cyclic,
        late,
        series,
    } = sink;
    let deadline = match until {
        Stop::Duration(d) => first.saturating_add(d),
        Stop::Loops(_) => u64::MAX,
    };
    let loops = match until {
        Stop::Loops(l) => l,
        Stop::Duration(_) => u64::MAX,
    };
    let mut target = first;
    let mut end = LoopEnd {
        n: 0,
        last_done: first,
    };
    let mut max = 0u64;
    let live = progress.live.as_deref();
    let feed = progress.late.as_deref();
    while !stop.load(Ordering::Relaxed) && target < deadline && end.n < loops {
        let Some(obs) = w.wait(target) else { continue };
        let latency = obs.done.saturating_sub(obs.target);
        if late.is_late(latency) {
            let (tid, cpu) = punctual_explain::here();
            late.push(LateRelease {
                series,
                tid,
                cpu,
                waiter: punctual_explain::Waiter::Sleeper,
                target: obs.target,
                actual: obs.done,
                handover: None,
                behind: false,
                last_read: None,
                own_work: None,
            });
        }
        if let Some(f) = feed {
            if f.is_late(latency) {
                let (tid, cpu) = punctual_explain::here();
                f.offer(tid, cpu, obs.target, obs.done);
            }
        }
        rec.record(latency);
        rec.add_missed(obs.overruns);
        if let Some(h) = live {
            h.record(latency);
            h.add_missed(obs.overruns);
        }
        if obs.woke > obs.target {
            rec.add_woke_late();
        }
        if let Some(p) = tx {
            if p.push((obs.target, latency)).is_err() {
                *dropped += 1;
            }
        }
        if let Some(c) = cyclic {
            c.record(end.n, latency, obs.done);
        }
        end.n += 1;
        end.last_done = obs.done;
        max = max.max(latency);
        progress.samples.store(end.n, Ordering::Relaxed);
        progress.max_ns.store(max, Ordering::Relaxed);
        // Checked: an interval near the end of u64 must end the run, never wrap to the past.
        let Some(mut next) = obs.target.checked_add(interval) else {
            break;
        };
        if w.self_scheduled() && obs.done >= next {
            // Releases already in the past: count them (only those inside the run), then resume at the
            // first future one.
            let passed = Passed::at(next, obs.done, interval, deadline);
            rec.add_missed(passed.missed);
            if let Some(h) = live {
                h.add_missed(passed.missed);
            }
            if late.enabled() {
                log_missed(late, series, next, interval, passed.missed, obs.done);
            }
            let Some(resumed) = passed
                .step
                .checked_mul(interval)
                .and_then(|d| next.checked_add(d))
            else {
                break;
            };
            next = resumed;
        }
        target = next;
    }
    end
}

/// Missed releases kept one by one for `--explain` after one late wake-up, at most.
pub const LOG_MISSED_MAX: u64 = 64;

/// `--explain`: the releases a late wake-up made the thread skip (from `first`, every `interval`,
/// `count` of them, the first [`LOG_MISSED_MAX`]), each late until the thread ran at `done` (kept
/// when that is beyond the bound).
#[cold]
fn log_missed(late: &mut LateLog, series: u32, first: u64, interval: u64, count: u64, done: u64) {
    let (tid, cpu) = punctual_explain::here();
    for j in 0..count.min(LOG_MISSED_MAX) {
        let target = first.saturating_add(j.saturating_mul(interval));
        // Skipped this long after its instant (the later ones less late).
        if !late.is_late(done.saturating_sub(target)) {
            continue;
        }
        late.push(LateRelease {
            series,
            tid,
            cpu,
            waiter: punctual_explain::Waiter::Sleeper,
            target,
            actual: done.max(target + 1),
            handover: None,
            behind: false,
            last_read: None,
            own_work: None,
        });
    }
    late.dropped += count.saturating_sub(LOG_MISSED_MAX);
}

/// Run the measurement. `stop` ends it early (interrupt); `samples` receives every sample as CSV;
/// `progress`, if given, must hold one entry per thread.
pub fn run(
    cfg: &Config,
    stop: &Arc<AtomicBool>,
    samples: Option<Box<dyn Write + Send>>,
    progress: Option<&[Progress]>,
) -> Result<Outcome, LatencyError> {
    run_with(cfg, RunExtras::default(), stop, samples, progress).map(|(o, _)| o)
}

/// [`run`], also keeping what `observe` asks for: the late releases of every thread (one log per
/// thread, in thread order; logs that keep nothing when `late_bound` is `None`).
pub fn run_observed(
    cfg: &Config,
    stop: &Arc<AtomicBool>,
    samples: Option<Box<dyn Write + Send>>,
    progress: Option<&[Progress]>,
    observe: Observe,
) -> Result<(Outcome, Vec<LateLog>), LatencyError> {
    let extras = RunExtras {
        observe,
        ..RunExtras::default()
    };
    run_with(cfg, extras, stop, samples, progress)
}

/// Each thread's own configuration: `cfg` with thread `i`'s interval (`interval + i * distance`),
/// refused like any interval when the last one is too long.
fn thread_configs(cfg: &Config, distance: u64) -> Result<Vec<Config>, LatencyError> {
    let n = cfg.threads.len() as u64;
    let longest = distance
        .checked_mul(n.saturating_sub(1))
        .and_then(|d| d.checked_add(cfg.interval));
    match longest {
        Some(l) if l <= MAX_INTERVAL => {}
        _ => {
            return Err(LatencyError::Invalid {
                flag: "-d/--distance",
                why: format!(
                    "{} threads {} apart make the last interval longer than the limit of {}",
                    n,
                    format_ns(distance),
                    format_ns(MAX_INTERVAL)
                ),
            })
        }
    }
    Ok((0..n)
        .map(|i| Config {
            interval: cfg.interval + i * distance,
            ..cfg.clone()
        })
        .collect())
}

/// The first release of the run, as [`Start`] places it (thread `i` adds [`stagger`]).
fn first_release(start: Start, now: u64) -> u64 {
    const SEC: u64 = 1_000_000_000;
    match start {
        Start::Lead | Start::Aligned { .. } => now + LEAD_NS,
        Start::SecAligned { offset } => {
            let mut s = (now / SEC + 1) * SEC;
            // Too close to set every thread up in time: the second after.
            if s - now < LEAD_NS {
                s += SEC;
            }
            s.saturating_add(offset)
        }
    }
}

/// How far thread `index` starts after the run's first release.
fn stagger(start: Start, index: usize) -> u64 {
    match start {
        Start::Aligned { offset } => offset.saturating_mul(index as u64),
        _ => 0,
    }
}

/// [`run`], with cyclictest's thread layout and figures (see [`RunExtras`]).
pub fn run_with(
    cfg: &Config,
    extras: RunExtras<'_>,
    stop: &Arc<AtomicBool>,
    samples: Option<Box<dyn Write + Send>>,
    progress: Option<&[Progress]>,
) -> Result<(Outcome, Vec<LateLog>), LatencyError> {
    cfg.validate()?;
    let n = cfg.threads.len();
    let configs = thread_configs(cfg, extras.distance)?;
    if extras.cyclic.is_some_and(|c| c.len() != n) {
        return Err(LatencyError::Invalid {
            flag: "-t/--threads",
            why: format!("{n} threads need {n} sets of cyclictest figures"),
        });
    }
    let own_progress: Vec<Progress>;
    let progress = match progress {
        Some(p) if p.len() == n => p,
        _ => {
            own_progress = (0..n).map(|_| Progress::default()).collect();
            &own_progress
        }
    };
    let (producers, consumers) = if samples.is_some() {
        samples::rings(n)
    } else {
        (Vec::new(), Vec::new())
    };
    let mut producers: Vec<Option<rtrb::Producer<Sample>>> =
        producers.into_iter().map(Some).collect();
    producers.resize_with(n, || None);
    let meeting = Meeting {
        barrier: Barrier::new(n + 1),
        first: AtomicU64::new(0),
        setup_error: Mutex::new(None),
        abort: AtomicBool::new(false),
    };
    let clock = cfg.clock.as_raw();

    let (results, written) = std::thread::scope(|s| {
        let writer = samples.map(|out| s.spawn(move || samples::drain(consumers, out)));
        let mut handles = Vec::new();
        for (index, (cpu, tx)) in cfg
            .threads
            .iter()
            .copied()
            .zip(producers.drain(..))
            .enumerate()
        {
            let meeting = &meeting;
            let progress = &progress[index];
            let cfg = &configs[index];
            let cyclic = extras.cyclic.map(|c| &c[index]);
            let delay = stagger(extras.start, index);
            let observe = extras.observe;
            let h = std::thread::Builder::new()
                .name(format!("punctual-t{index}"))
                .stack_size(STACK)
                .spawn_scoped(s, move || {
                    let place = ThreadPlace {
                        index,
                        cpu,
                        progress,
                        cyclic,
                        delay,
                    };
                    measuring_thread(cfg, stop, meeting, place, tx, observe)
                })
                .expect("spawning a measuring thread");
            handles.push(h);
        }
        meeting.barrier.wait();
        if meeting.setup_error.lock().unwrap().is_some() {
            meeting.abort.store(true, Ordering::SeqCst);
        }
        meeting.first.store(
            first_release(extras.start, read_clock(clock)),
            Ordering::SeqCst,
        );
        meeting.barrier.wait();
        let results: Vec<Option<(ThreadResult, LateLog)>> = handles
            .into_iter()
            .map(|h| h.join().expect("measuring thread panicked"))
            .collect();
        let written = writer.map(|w| w.join().expect("sample writer panicked"));
        (results, written)
    });
    if let Some(e) = meeting.setup_error.into_inner().unwrap() {
        return Err(e);
    }
    let samples_written = match written {
        Some(Ok(n)) => n,
        Some(Err(e)) => return Err(LatencyError::Samples(e)),
        None => 0,
    };
    let (threads, logs) = results.into_iter().flatten().unzip();
    Ok((
        Outcome {
            threads,
            samples_written,
            first_release: meeting.first.into_inner(),
        },
        logs,
    ))
}

/// Where the measuring threads meet [`run`]'s thread: a barrier passed twice (everyone set up, then
/// the first release published), the first release, the first error, and whether to give up.
struct Meeting {
    barrier: Barrier,
    first: AtomicU64,
    setup_error: Mutex<Option<LatencyError>>,
    abort: AtomicBool,
}

/// Which measuring thread this is: its index, its CPU (`None`: floating), its live figures (and
/// cyclictest's), how long after the run's first release its own first one is.
struct ThreadPlace<'a> {
    index: usize,
    cpu: Option<usize>,
    progress: &'a Progress,
    cyclic: Option<&'a CyclicStats>,
    delay: u64,
}

/// One measuring thread: set itself up, meet the others, measure, and give back what it saw.
/// `None` when it or another thread could not be set up (the error is in `meeting`).
fn measuring_thread(
    cfg: &Config,
    stop: &AtomicBool,
    meeting: &Meeting,
    place: ThreadPlace,
    mut tx: Option<rtrb::Producer<Sample>>,
    observe: Observe,
) -> Option<(ThreadResult, LateLog)> {
    let ThreadPlace {
        index,
        cpu,
        progress,
        cyclic,
        delay,
    } = place;
    if let Some(c) = cyclic {
        // SAFETY: gettid has no preconditions.
        c.set_tid(unsafe { libc::gettid() });
    }
    let clock = cfg.clock.as_raw();
    let req = ThreadRequest {
        cpu,
        policy: cfg.policy,
        priority: cfg.priority,
        timer_slack_ns: cfg.timer_slack_ns,
        fall_back_on_refusal: true,
    };
    let guards = match setup_current_thread(&req) {
        Ok(g) => Some(g),
        Err(source) => {
            meeting
                .setup_error
                .lock()
                .unwrap()
                .get_or_insert(LatencyError::Setup {
                    thread: index,
                    source,
                });
            None
        }
    };
    let mut rec = Recorder::new();
    let mut late = match observe.late_bound {
        Some(b) => LateLog::new(b, punctual_explain::LOG_CAPACITY),
        None => LateLog::off(),
    };
    meeting.barrier.wait(); // everyone is set up (or failed)
    meeting.barrier.wait(); // the main thread has published the first release time
    let guards = guards?;
    if meeting.abort.load(Ordering::SeqCst) {
        return None;
    }
    let first = meeting.first.load(Ordering::SeqCst).saturating_add(delay);
    let sched = Schedule {
        first,
        interval: cfg.interval,
        until: cfg.stop,
    };
    let mut dropped = 0u64;
    let cpu0 = thread_cpu_time();
    let wall0 = read_clock(clock);
    let sink = Sink {
        rec: &mut rec,
        tx: &mut tx,
        dropped: &mut dropped,
        progress,
        cyclic,
        late: &mut late,
        series: index as u32,
    };
    let (margin_ns, drift_ns) = match measure_in_mode(cfg, sched, stop, sink, index) {
        Ok(figures) => figures,
        Err(e) => {
            meeting.setup_error.lock().unwrap().get_or_insert(e);
            return None;
        }
    };
    let result = ThreadResult {
        index,
        cpu,
        recorder: rec,
        cpu_ns: thread_cpu_time() - cpu0,
        wall_ns: read_clock(clock).saturating_sub(wall0),
        policy: guards.policy,
        priority: guards.priority,
        fallback: guards.fallback.clone(),
        margin_ns,
        drift_ns,
        dropped_samples: dropped,
    };
    drop(tx); // lets the writer finish
    Some((result, late))
}

/// Builds the waiter of `cfg.mode` and runs [`measure`] with it. Returns the spin margin at the end
/// (hybrid) and the drift from the absolute schedule (rel); an error if the mode's timer could not
/// be made. Inlined, so that nothing more than before lies between the caller's clock reads.
#[inline(always)]
fn measure_in_mode(
    cfg: &Config,
    sched: Schedule,
    stop: &AtomicBool,
    sink: Sink<'_>,
    index: usize,
) -> Result<(Option<u64>, Option<i64>), LatencyError> {
    let clock = cfg.clock.as_raw();
    let first = sched.first;
    let timer_err = |mode, source| LatencyError::Timer {
        thread: index,
        mode,
        source,
    };
    let mut margin_ns = None;
    let mut drift_ns = None;
    match cfg.mode {
        Mode::Abs => {
            measure(&mut AbsWaiter::new(clock, cfg.interval), sched, stop, sink);
        }
        Mode::Hybrid => {
            let mut w = HybridWaiter::new(cfg.clock, cfg.margin, cfg.interval);
            measure(&mut w, sched, stop, sink);
            margin_ns = w.margin();
        }
        Mode::Rel => {
            // Start the naive loop one interval before the first release, so its ideal
            // wake-ups coincide with the absolute schedule and the gap is pure drift.
            sleep_abs(clock, first.saturating_sub(cfg.interval));
            let mut w = RelWaiter::new(clock, cfg.interval);
            let e = measure(&mut w, sched, stop, sink);
            let ideal = first.saturating_add(e.n.saturating_sub(1).saturating_mul(cfg.interval));
            drift_ns = Some(e.last_done as i64 - ideal as i64);
        }
        Mode::Timerfd => match TimerfdWaiter::new(clock, first, cfg.interval) {
            Ok(mut w) => {
                measure(&mut w, sched, stop, sink);
            }
            Err(e) => return Err(timer_err("timerfd", e)),
        },
        Mode::Signal => match SignalWaiter::new(clock, first, cfg.interval) {
            Ok(mut w) => {
                measure(&mut w, sched, stop, sink);
            }
            Err(e) => return Err(timer_err("signal", e)),
        },
    }
    Ok((margin_ns, drift_ns))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modes::Obs;

    /// A waiter driven by a script of wake-up latencies on a simulated clock.
    struct Scripted {
        latencies: Vec<u64>,
        i: usize,
        overruns_at: Option<(usize, u64)>,
        self_scheduled: bool,
        interval: u64,
    }

    impl Waiter for Scripted {
        fn wait(&mut self, target: u64) -> Option<Obs> {
            let lat = self.latencies[self.i % self.latencies.len()];
            let overruns = match self.overruns_at {
                Some((at, n)) if at == self.i => n,
                _ => 0,
            };
            self.i += 1;
            let target = target + overruns * self.interval;
            Some(Obs {
                target,
                woke: target + lat,
                done: target + lat,
                overruns,
            })
        }
        fn self_scheduled(&self) -> bool {
            self.self_scheduled
        }
    }

    fn go(w: &mut Scripted, until: Stop) -> (Recorder, Vec<Sample>) {
        let (mut p, mut c) = rtrb::RingBuffer::new(1024);
        let mut tx = Some(p);
        let mut rec = Recorder::new();
        let mut dropped = 0;
        let live = Arc::new(LiveHistogram::new());
        let progress = Progress::with_live(live.clone());
        let sched = Schedule {
            first: 1_000_000,
            interval: 1_000_000,
            until,
        };
        let mut late = LateLog::new(10_000, 1 << 16);
        let sink = Sink {
            rec: &mut rec,
            tx: &mut tx,
            dropped: &mut dropped,
            progress: &progress,
            cyclic: None,
            late: &mut late,
            series: 3,
        };
        measure(w, sched, &AtomicBool::new(false), sink);
        // Every release later than the bound, and only those, is kept for --explain: the samples
        // over it and the releases a late wake-up skipped (each late until the thread ran).
        let over =
            rec.count() - (rec.fraction_at_or_below(10_000) * rec.count() as f64).round() as u64;
        let skipped = if w.self_scheduled() {
            rec.missed_periods().min(LOG_MISSED_MAX)
        } else {
            0 // a timer's overruns are counted, not released one by one
        };
        assert_eq!(late.records().len() as u64, over + skipped);
        assert!(late.records().iter().all(|r| r.series == 3
            && r.lateness() > 10_000
            && r.waiter == punctual_explain::Waiter::Sleeper));
        assert_eq!(progress.samples.load(Ordering::Relaxed), rec.count());
        assert_eq!(
            progress.max_ns.load(Ordering::Relaxed),
            rec.max().unwrap_or(0)
        );
        // The live histogram saw what the recorder saw, bucket for bucket.
        let mut counts = punctual_stats::LiveCounts::new();
        live.snapshot(&mut counts);
        assert_eq!(counts.count(), rec.count());
        assert_eq!(live.missed(), rec.missed_periods());
        assert_eq!(live.max(), rec.max().unwrap_or(0));
        assert_eq!(
            counts.to_recorder(live.max()).summary().percentiles,
            rec.summary().percentiles
        );
        p = tx.take().unwrap();
        drop(p);
        let mut v = Vec::new();
        while let Ok(s) = c.pop() {
            v.push(s);
        }
        assert_eq!(dropped, 0);
        (rec, v)
    }

    fn cfg(interval: u64, stop: Stop) -> Config {
        Config {
            threads: vec![None],
            interval,
            stop,
            clock: ClockId::Monotonic,
            mode: Mode::Abs,
            margin: MarginPolicy::Auto,
            policy: Policy::Other,
            priority: 0,
            timer_slack_ns: None,
        }
    }

    #[test]
    fn overflow_intervals_and_runs_are_refused() {
        let refused = |c: Config, flag: &str| {
            let e = c.validate().unwrap_err();
            assert!(matches!(e, LatencyError::Invalid { .. }), "{e}");
            assert!(e.to_string().starts_with(flag), "{e}");
            let f: punctual_result::Failure = e.into();
            assert_eq!(f.class, punctual_result::Class::Usage, "exit 2");
        };
        // `latency -i 18446744073709551615ns -D 1s` and `-i 18446744073s`.
        refused(
            cfg(u64::MAX, Stop::Duration(1_000_000_000)),
            "-i/--interval",
        );
        refused(
            cfg(18_446_744_073_000_000_000, Stop::Duration(u64::MAX)),
            "-i/--interval",
        );
        // An interval longer than the run measures nothing.
        refused(
            cfg(2_000_000_000, Stop::Duration(1_000_000_000)),
            "-i/--interval",
        );
        refused(cfg(1_000_000, Stop::Duration(u64::MAX)), "-D/--duration");
        refused(cfg(1_000_000, Stop::Loops(u64::MAX)), "-l/--loops");
        refused(cfg(1_000_000, Stop::Loops(0)), "-l/--loops");
        refused(cfg(0, Stop::Loops(1)), "-i/--interval");
        let mut c = cfg(1_000_000, Stop::Duration(1_000_000_000));
        c.mode = Mode::Hybrid;
        c.margin = MarginPolicy::Fixed(1_000_000);
        refused(c, "--spin-margin");
        cfg(1_000_000, Stop::Duration(10_000_000_000))
            .validate()
            .unwrap();
        cfg(MAX_INTERVAL, Stop::Loops(365 * 24)).validate().unwrap();
        // run() refuses before any thread starts.
        let stop = Arc::new(AtomicBool::new(false));
        assert!(matches!(
            run(&cfg(u64::MAX, Stop::Duration(1)), &stop, None, None),
            Err(LatencyError::Invalid { .. })
        ));
    }

    #[test]
    fn a_release_past_the_end_of_u64_ends_the_loop() {
        let mut w = Scripted {
            latencies: vec![1_000],
            i: 0,
            overruns_at: None,
            self_scheduled: true,
            interval: u64::MAX - 10,
        };
        let mut rec = Recorder::new();
        let (mut tx, mut dropped) = (None, 0);
        let progress = Progress::default();
        let sched = Schedule {
            first: 1_000_000,
            interval: u64::MAX - 10,
            until: Stop::Loops(1_000),
        };
        let sink = Sink {
            rec: &mut rec,
            tx: &mut tx,
            dropped: &mut dropped,
            progress: &progress,
            cyclic: None,
            late: &mut LateLog::off(),
            series: 0,
        };
        let end = measure(&mut w, sched, &AtomicBool::new(false), sink);
        assert_eq!(end.n, 1, "one release, then the next one does not exist");
    }

    #[test]
    fn releases_follow_the_absolute_schedule() {
        let mut w = Scripted {
            latencies: vec![5_000, 70_000, 3_000],
            i: 0,
            overruns_at: None,
            self_scheduled: true,
            interval: 1_000_000,
        };
        let (rec, samples) = go(&mut w, Stop::Loops(9));
        assert_eq!(rec.count(), 9);
        for (k, &(release, latency)) in samples.iter().enumerate() {
            assert_eq!(
                release,
                1_000_000 + k as u64 * 1_000_000,
                "release {k} drifted"
            );
            assert_eq!(latency, [5_000, 70_000, 3_000][k % 3]);
        }
        assert_eq!(rec.missed_periods(), 0);
        assert_eq!(rec.woke_late(), 9);
    }

    #[test]
    fn a_wake_past_the_next_release_counts_and_skips_the_missed_periods() {
        // The second wake-up is 2.5 periods late: releases 3 and 4 have passed by then.
        let mut w = Scripted {
            latencies: vec![1_000, 2_500_000, 1_000, 1_000],
            i: 0,
            overruns_at: None,
            self_scheduled: true,
            interval: 1_000_000,
        };
        let (rec, samples) = go(&mut w, Stop::Loops(4));
        assert_eq!(rec.missed_periods(), 2);
        let releases: Vec<u64> = samples.iter().map(|s| s.0 / 1_000_000).collect();
        assert_eq!(releases, vec![1, 2, 5, 6]);
    }

    #[test]
    fn timer_overruns_are_counted_and_move_the_schedule() {
        let mut w = Scripted {
            latencies: vec![2_000],
            i: 0,
            overruns_at: Some((1, 3)),
            self_scheduled: false,
            interval: 1_000_000,
        };
        let (rec, samples) = go(&mut w, Stop::Loops(3));
        assert_eq!(rec.missed_periods(), 3);
        let releases: Vec<u64> = samples.iter().map(|s| s.0 / 1_000_000).collect();
        assert_eq!(releases, vec![1, 5, 6]);
    }

    #[test]
    fn duration_stops_at_the_last_release_before_the_deadline() {
        let mut w = Scripted {
            latencies: vec![1_000],
            i: 0,
            overruns_at: None,
            self_scheduled: true,
            interval: 1_000_000,
        };
        let (rec, _) = go(&mut w, Stop::Duration(10_000_000));
        assert_eq!(rec.count(), 10);
    }

    #[test]
    fn misses_past_the_deadline_are_not_counted() {
        // Releases at 1..=10 ms; the wake for release 9 is 5 ms late: only release 10 is missed inside
        // the run, the 3 after the deadline are not periods of this run.
        let mut lat = vec![1_000; 8];
        lat.push(5_000_000);
        let mut w = Scripted {
            latencies: lat,
            i: 0,
            overruns_at: None,
            self_scheduled: true,
            interval: 1_000_000,
        };
        let (rec, _) = go(&mut w, Stop::Duration(10_000_000));
        assert_eq!(rec.count(), 9);
        assert_eq!(rec.missed_periods(), 1);
        assert_eq!(rec.count() + rec.missed_periods(), 10);
    }

    #[test]
    fn a_set_stop_flag_ends_the_loop_before_any_wait() {
        let mut w = Scripted {
            latencies: vec![1_000],
            i: 0,
            overruns_at: None,
            self_scheduled: true,
            interval: 1_000_000,
        };
        let mut rec = Recorder::new();
        let mut tx = None;
        let mut d = 0;
        let sched = Schedule {
            first: 0,
            interval: 1_000,
            until: Stop::Loops(100),
        };
        let p = Progress::default();
        let sink = Sink {
            rec: &mut rec,
            tx: &mut tx,
            dropped: &mut d,
            progress: &p,
            cyclic: None,
            late: &mut LateLog::off(),
            series: 0,
        };
        measure(&mut w, sched, &AtomicBool::new(true), sink);
        assert_eq!((rec.count(), w.i), (0, 0));
    }

    #[test]
    fn thread_intervals_step_by_the_distance_and_the_last_is_bounded() {
        let mut c = cfg(1_000_000, Stop::Loops(10));
        c.threads = vec![Some(0), Some(1), Some(0)];
        let v = thread_configs(&c, 500_000).unwrap();
        let intervals: Vec<u64> = v.iter().map(|c| c.interval).collect();
        assert_eq!(intervals, vec![1_000_000, 1_500_000, 2_000_000]);
        assert!(matches!(
            thread_configs(&c, MAX_INTERVAL),
            Err(LatencyError::Invalid {
                flag: "-d/--distance",
                ..
            })
        ));
        assert!(thread_configs(&c, u64::MAX).is_err(), "no wrap-around");
    }

    #[test]
    fn aligned_starts_fall_on_the_second_and_stagger_by_thread() {
        const SEC: u64 = 1_000_000_000;
        assert_eq!(first_release(Start::Lead, 5), 5 + LEAD_NS);
        let s = first_release(Start::SecAligned { offset: 0 }, 7 * SEC + 300);
        assert_eq!(s, 8 * SEC);
        // Too close to the next second to set up: the one after.
        let s = first_release(Start::SecAligned { offset: 250 }, 8 * SEC - 1_000);
        assert_eq!(s, 9 * SEC + 250);
        assert_eq!(stagger(Start::Aligned { offset: 100 }, 3), 300);
        assert_eq!(stagger(Start::SecAligned { offset: 100 }, 3), 0);
    }

    #[test]
    fn the_loop_feeds_cyclictests_figures_with_cycle_numbers() {
        use crate::cyclic::{CyclicConfig, CyclicStats};
        let mut w = Scripted {
            latencies: vec![3_000, 70_000, 4_500],
            i: 0,
            overruns_at: None,
            self_scheduled: true,
            interval: 1_000_000,
        };
        let c = CyclicStats::new(CyclicConfig {
            buckets: 50,
            ..CyclicConfig::default()
        });
        let (mut rec, mut tx, mut dropped) = (Recorder::new(), None, 0);
        let progress = Progress::default();
        let sched = Schedule {
            first: 1_000_000,
            interval: 1_000_000,
            until: Stop::Loops(6),
        };
        let sink = Sink {
            rec: &mut rec,
            tx: &mut tx,
            dropped: &mut dropped,
            progress: &progress,
            cyclic: Some(&c),
            late: &mut LateLog::off(),
            series: 0,
        };
        measure(&mut w, sched, &AtomicBool::new(false), sink);
        let t = c.snapshot();
        assert_eq!(t.histogram, vec![(3, 2), (4, 2)]);
        assert_eq!((t.overflows, t.overflow_cycles.clone()), (2, vec![1, 4]));
        assert_eq!(t.status.cycles, rec.count());
    }
}
