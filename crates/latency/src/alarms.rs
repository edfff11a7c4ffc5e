//! Etsion's alarm workloads (section 7): processes that set alarms for random delays and measure how
//! long after the alarm was due they ran again, while they and their neighbours compute.
//!
//! - `blk`: set an alarm, block until it fires, repeat (no computation);
//! - `pctK`: compute for K % of the delay to the next alarm, then block until it fires;
//! - `cont`: compute continuously and take the alarms as they come;
//! - `cpu`: compute continuously and set no alarms (the paper's CPU-bound neighbours).
//!
//! Every process is a thread pinned to one CPU. The alarm-setting ones share one scheduling class
//! (SCHED_RR by default, as in the paper), so they share one round-robin queue and the RR
//! timeslice decides how long a computing one keeps the CPU; the `cpu` ones are time-sharing by
//! default (the paper put only "the processes that set timers" in the round-robin class), so
//! they run when no alarm process wants the CPU. Alarm latency is the time from the alarm's due time to the process
//! running again, measured two ways: with a POSIX timer signal (the paper's way; the handler's first
//! instruction stamps the time) and with `clock_nanosleep(TIMER_ABSTIME)` (the engine's `abs`
//! waiter). A `cont` process cannot sleep while it computes, so with `nanosleep` its alarms are taken
//! by a second thread of the same class on the same CPU, which waits behind its own computing sibling
//! exactly as the signal would.

use crate::modes::{AbsWaiter, Waiter};
use crate::LatencyError;
use punctual_result::Fallback;
use punctual_rt::{setup_current_thread, Policy, ThreadRequest};
use punctual_stats::Recorder;
use punctual_time::clock::{read_clock, thread_cpu_time, timespec};
use std::io;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex, Once};

/// The most processes one workload may start.
pub const MAX_PROCESSES: u32 = 64;

/// What one process of a workload does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlarmKind {
    Blk,
    /// Compute this many percent (1-99) of each interval.
    Pct(u32),
    Cont,
    Cpu,
}

impl AlarmKind {
    /// Whether processes of this kind set alarms (and so produce latency samples).
    pub fn sets_alarms(self) -> bool {
        self != AlarmKind::Cpu
    }

    /// The workload label (`blk`, `pct4`, `cont`, `cpu`).
    pub fn label(self) -> String {
        match self {
            AlarmKind::Blk => "blk".into(),
            AlarmKind::Pct(k) => format!("pct{k}"),
            AlarmKind::Cont => "cont".into(),
            AlarmKind::Cpu => "cpu".into(),
        }
    }

    /// The paper's name for the type (`BLK`, `4%`, `CONT`).
    pub fn paper_label(self) -> String {
        match self {
            AlarmKind::Blk => "BLK".into(),
            AlarmKind::Pct(k) => format!("{k}%"),
            AlarmKind::Cont => "CONT".into(),
            AlarmKind::Cpu => "CPU".into(),
        }
    }
}

impl FromStr for AlarmKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "blk" => Ok(AlarmKind::Blk),
            "cont" => Ok(AlarmKind::Cont),
            "cpu" => Ok(AlarmKind::Cpu),
            _ => match s.strip_prefix("pct") {
                Some(k) => match k.parse::<u32>() {
                    Ok(k) if (1..=99).contains(&k) => Ok(AlarmKind::Pct(k)),
                    _ => Err(format!(
                        "'{s}': pctK takes a whole percentage 1-99, e.g. pct4 (use cont for 100)"
                    )),
                },
                None => Err(format!(
                    "unknown workload type '{s}' (valid: blk, pctK e.g. pct4, cont, cpu)"
                )),
            },
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AlarmGroup {
    pub kind: AlarmKind,
    pub count: u32,
}

/// A workload: `TYPE[:N],...`, e.g. `cont:8`, `pct2:8`, `pct4:1,cpu:2` (the simulator's labels).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlarmWorkload {
    pub groups: Vec<AlarmGroup>,
}

impl AlarmWorkload {
    pub fn processes(&self) -> u32 {
        self.groups.iter().map(|g| g.count).sum()
    }

    pub fn alarm_processes(&self) -> u32 {
        self.groups
            .iter()
            .filter(|g| g.kind.sets_alarms())
            .map(|g| g.count)
            .sum()
    }

    /// The paper's row label: type and number (`BLK 2`, `4% 1+2CPU`).
    pub fn paper_label(&self) -> (String, String) {
        let timed: Vec<&AlarmGroup> = self
            .groups
            .iter()
            .filter(|g| g.kind.sets_alarms())
            .collect();
        let ty = timed
            .iter()
            .map(|g| g.kind.paper_label())
            .collect::<Vec<_>>()
            .join("+");
        let mut n = timed
            .iter()
            .map(|g| g.count.to_string())
            .collect::<Vec<_>>()
            .join("+");
        let cpu: u32 = self
            .groups
            .iter()
            .filter(|g| g.kind == AlarmKind::Cpu)
            .map(|g| g.count)
            .sum();
        if cpu > 0 {
            n.push_str(&format!("+{cpu}CPU"));
        }
        (ty, n)
    }
}

impl std::fmt::Display for AlarmWorkload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .groups
            .iter()
            .map(|g| format!("{}:{}", g.kind.label(), g.count))
            .collect();
        f.write_str(&parts.join(","))
    }
}

impl FromStr for AlarmWorkload {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut groups = Vec::new();
        for item in s.split(',') {
            let item = item.trim();
            if item.is_empty() {
                return Err(format!("empty item in workload '{s}'"));
            }
            let (kind, count) = match item.split_once(':') {
                Some((k, n)) => (
                    k,
                    n.parse::<u32>()
                        .map_err(|_| format!("workload '{item}': count '{n}' is not a whole number (write e.g. cont:8)"))?,
                ),
                None => (item, 1),
            };
            if count == 0 {
                return Err(format!(
                    "workload '{item}': a count of 0 starts nothing; use 1 or more"
                ));
            }
            groups.push(AlarmGroup {
                kind: kind.parse()?,
                count,
            });
        }
        let w = AlarmWorkload { groups };
        if w.processes() > MAX_PROCESSES {
            return Err(format!(
                "workload '{s}' starts {} processes; the limit is {MAX_PROCESSES}",
                w.processes()
            ));
        }
        if w.alarm_processes() == 0 {
            return Err(format!("workload '{s}' sets no alarms, so there is nothing to measure; add blk, pctK or cont"));
        }
        Ok(w)
    }
}

/// How an alarm reaches its process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    /// A one-shot POSIX timer delivering a signal (the paper's alarms).
    Signal,
    /// `clock_nanosleep(TIMER_ABSTIME)` to the due time.
    Nanosleep,
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Signal => "signal",
            Mechanism::Nanosleep => "nanosleep",
        }
    }
}

impl FromStr for Mechanism {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "signal" => Ok(Mechanism::Signal),
            "nanosleep" => Ok(Mechanism::Nanosleep),
            _ => Err(format!(
                "unknown alarm mechanism '{s}' (valid: signal, nanosleep)"
            )),
        }
    }
}

#[derive(Clone, Debug)]
pub struct AlarmConfig {
    pub workload: AlarmWorkload,
    pub mechanism: Mechanism,
    /// The CPU every process is pinned to (one run queue, as on the paper's uniprocessor).
    pub cpu: Option<usize>,
    pub policy: Policy,
    pub priority: u32,
    /// The class of the `cpu` processes (they set no alarms): the paper put only the processes
    /// that set timers in the round-robin class, so by default they are time-sharing.
    pub neighbour_policy: Policy,
    /// Alarms each alarm-setting process takes.
    pub alarms: u64,
    /// Delays are uniform in `[delay_min, delay_max]` (the paper: 1 ms to 1000 ms).
    pub delay_min: u64,
    pub delay_max: u64,
    /// Seed of the delay sequences (each process draws its own sequence from it).
    pub seed: u64,
}

impl AlarmConfig {
    /// The paper's settings: 500 alarms, delays 1-1000 ms, SCHED_RR.
    pub fn paper(workload: AlarmWorkload, mechanism: Mechanism) -> Self {
        AlarmConfig {
            workload,
            mechanism,
            cpu: None,
            policy: Policy::Rr,
            priority: DEFAULT_PRIORITY,
            neighbour_policy: Policy::Other,
            alarms: 500,
            delay_min: 1_000_000,
            delay_max: 1_000_000_000,
            seed: 1,
        }
    }

    /// Roughly how long a run takes: the alarms of one process back to back, at the mean delay.
    pub fn expected_ns(&self) -> u64 {
        self.alarms
            .saturating_mul((self.delay_min + self.delay_max) / 2)
    }
}

/// SCHED_RR priority of the workloads: above ordinary tasks, below the threaded interrupt handlers
/// (50) of PREEMPT_RT kernels; all processes share it, so only the timeslice orders them.
pub const DEFAULT_PRIORITY: u32 = 10;

/// One process of a finished run.
pub struct AlarmProcess {
    pub kind: AlarmKind,
    /// Index within the workload (0-based, in spec order).
    pub index: usize,
    /// Alarm latencies (empty for `cpu`).
    pub recorder: Recorder,
    pub cpu_ns: u64,
    pub wall_ns: u64,
    pub policy: Policy,
    pub priority: u32,
    pub fallback: Option<Fallback>,
}

pub struct AlarmOutcome {
    pub processes: Vec<AlarmProcess>,
}

impl AlarmOutcome {
    /// Latencies of every alarm-setting process together (what Table 6 reports).
    pub fn merged(&self) -> Recorder {
        let mut all = Recorder::new();
        for p in self.processes.iter().filter(|p| p.kind.sets_alarms()) {
            all.merge(&p.recorder)
                .expect("recorders share one histogram shape");
        }
        all
    }
}

/// A small deterministic generator for the delays (xorshift64*).
struct Rng(u64);

impl Rng {
    fn new(seed: u64, stream: u64) -> Self {
        Rng((seed ^ 0x9E37_79B9_7F4A_7C15)
            .wrapping_mul(stream.wrapping_add(1).wrapping_mul(0xBF58_476D_1CE4_E5B9))
            | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `[lo, hi]`.
    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

const MONO: libc::clockid_t = libc::CLOCK_MONOTONIC;

/// Burn CPU for `ns` of this thread's CPU time, or until the wall clock reaches `until`, or until
/// `quit` returns true, whichever comes first. Checks every couple of microseconds.
#[inline(never)]
fn compute(ns: u64, until: u64, mut quit: impl FnMut() -> bool) {
    let t0 = thread_cpu_time();
    let mut x = 0x1234_5678_9ABC_DEF1u64;
    loop {
        for _ in 0..512 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        std::hint::black_box(x);
        if thread_cpu_time() - t0 >= ns || read_clock(MONO) >= until || quit() {
            return;
        }
    }
}

// ---- the signal mechanism -------------------------------------------------------------------

fn alarm_signal() -> libc::c_int {
    libc::SIGRTMIN() + 2
}

/// Stamps the time at the handler's first instruction into the slot the timer carries.
extern "C" fn on_alarm(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo; our timers carry a pointer to a slot that outlives
    // the thread the signal is directed at (pending thread signals die with the thread).
    unsafe {
        let slot = (*info).si_value().sival_ptr as *const AtomicU64;
        if !slot.is_null() {
            (*slot).store(read_clock(MONO).max(1), Ordering::Release);
        }
    }
}

fn install_handler() -> io::Result<()> {
    static ONCE: Once = Once::new();
    static RESULT: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
    ONCE.call_once(|| {
        // SAFETY: a handler that only reads a clock and stores to an atomic is async-signal-safe.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_alarm as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(alarm_signal(), &sa, std::ptr::null_mut()) != 0 {
                RESULT.store(
                    io::Error::last_os_error()
                        .raw_os_error()
                        .unwrap_or(libc::EINVAL),
                    Ordering::Relaxed,
                );
            }
        }
    });
    match RESULT.load(Ordering::Relaxed) {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// A one-shot timer that signals the calling thread; the handler stamps its slot.
struct SignalAlarm<'a> {
    timer: libc::timer_t,
    slot: &'a AtomicU64,
    set: libc::sigset_t,
    timeout: libc::timespec,
}

impl<'a> SignalAlarm<'a> {
    fn new(slot: &'a AtomicU64) -> io::Result<Self> {
        install_handler()?;
        // SAFETY: standard timer and signal-set calls on initialised structures.
        unsafe {
            let mut sev: libc::sigevent = std::mem::zeroed();
            sev.sigev_notify = libc::SIGEV_THREAD_ID;
            sev.sigev_signo = alarm_signal();
            sev.sigev_notify_thread_id = libc::gettid();
            sev.sigev_value = libc::sigval {
                sival_ptr: slot as *const AtomicU64 as *mut libc::c_void,
            };
            let mut timer: libc::timer_t = std::mem::zeroed();
            if libc::timer_create(MONO, &mut sev, &mut timer) != 0 {
                return Err(io::Error::last_os_error());
            }
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, alarm_signal());
            Ok(SignalAlarm {
                timer,
                slot,
                set,
                timeout: timespec(100_000_000),
            })
        }
    }

    fn arm(&self, due: u64) {
        self.slot.store(0, Ordering::Release);
        let spec = libc::itimerspec {
            it_interval: timespec(0),
            it_value: timespec(due),
        };
        // SAFETY: our timer, a valid spec.
        unsafe {
            libc::timer_settime(self.timer, libc::TIMER_ABSTIME, &spec, std::ptr::null_mut())
        };
    }

    /// When the handler ran, if it has.
    fn taken(&self) -> Option<u64> {
        match self.slot.load(Ordering::Acquire) {
            0 => None,
            t => Some(t),
        }
    }

    /// Block until the alarm has been taken; returns when this thread ran for it, or `None` if `stop`
    /// was set first.
    fn wait(&self, stop: &AtomicBool) -> Option<u64> {
        // Block the signal, so it cannot slip in between the check and the wait; take it with
        // sigtimedwait, which returns when this thread runs again.
        // SAFETY: valid set pointers.
        unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &self.set, std::ptr::null_mut()) };
        let t = loop {
            if let Some(t) = self.taken() {
                break Some(t);
            }
            if stop.load(Ordering::Relaxed) {
                break None;
            }
            // SAFETY: valid pointers.
            let s = unsafe { libc::sigtimedwait(&self.set, std::ptr::null_mut(), &self.timeout) };
            if s == alarm_signal() {
                break Some(read_clock(MONO));
            }
        };
        // SAFETY: as above.
        unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &self.set, std::ptr::null_mut()) };
        t
    }
}

impl Drop for SignalAlarm<'_> {
    fn drop(&mut self) {
        // SAFETY: block first so no handler runs for a signal still queued; it dies with the thread.
        unsafe {
            libc::pthread_sigmask(libc::SIG_BLOCK, &self.set, std::ptr::null_mut());
            libc::timer_delete(self.timer);
        }
    }
}

// ---- the processes --------------------------------------------------------------------------

struct Shared<'a> {
    cfg: &'a AlarmConfig,
    stop: &'a AtomicBool,
    /// Alarm-setting processes still taking alarms; computing neighbours stop when it reaches 0.
    remaining: AtomicUsize,
    /// Alarms taken so far by all processes (for a live progress line).
    taken: &'a AtomicU64,
    error: Mutex<Option<LatencyError>>,
}

impl Shared<'_> {
    fn over(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.remaining.load(Ordering::Relaxed) == 0
    }
    fn fail(&self, e: LatencyError) {
        self.error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(e);
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn request(cfg: &AlarmConfig, kind: AlarmKind) -> ThreadRequest {
    let (policy, priority) = match kind {
        AlarmKind::Cpu if cfg.neighbour_policy == Policy::Other => (Policy::Other, 0),
        AlarmKind::Cpu => (cfg.neighbour_policy, cfg.priority),
        _ => (cfg.policy, cfg.priority),
    };
    ThreadRequest {
        cpu: cfg.cpu,
        policy,
        priority,
        timer_slack_ns: Some(1),
        fall_back_on_refusal: true,
    }
}

/// One alarm process with signals: blk and pctK wait for the signal, cont computes through it.
fn signal_process(
    sh: &Shared,
    kind: AlarmKind,
    rng: &mut Rng,
    slot: &AtomicU64,
    rec: &mut Recorder,
    index: usize,
) {
    let cfg = sh.cfg;
    let alarm = match SignalAlarm::new(slot) {
        Ok(a) => a,
        Err(source) => {
            return sh.fail(LatencyError::Timer {
                thread: index,
                mode: "signal alarm",
                source,
            })
        }
    };
    let mut taken = 0u64;
    while taken < cfg.alarms && !sh.stop.load(Ordering::Relaxed) {
        let delay = rng.between(cfg.delay_min, cfg.delay_max);
        let due = read_clock(MONO) + delay;
        alarm.arm(due);
        let ran = match kind {
            AlarmKind::Blk => alarm.wait(sh.stop),
            AlarmKind::Pct(k) => {
                compute(delay * k as u64 / 100, u64::MAX, || {
                    sh.stop.load(Ordering::Relaxed)
                });
                alarm.wait(sh.stop)
            }
            AlarmKind::Cont => {
                let mut t = None;
                compute(u64::MAX, u64::MAX, || {
                    t = alarm.taken();
                    t.is_some() || sh.stop.load(Ordering::Relaxed)
                });
                t
            }
            AlarmKind::Cpu => unreachable!("cpu processes set no alarms"),
        };
        let Some(ran) = ran else { break };
        rec.record(ran.saturating_sub(due));
        taken += 1;
        sh.taken.fetch_add(1, Ordering::Relaxed);
    }
}

/// One alarm process with clock_nanosleep. pctK computes at most until the alarm is due (it cannot
/// sleep and compute at once).
fn nanosleep_process(sh: &Shared, kind: AlarmKind, rng: &mut Rng, rec: &mut Recorder) {
    let cfg = sh.cfg;
    // Its own 100 ms steps below see the stop flag; the waiter is never asked to slice.
    let mut w = AbsWaiter {
        clock: MONO,
        long: false,
    };
    let mut taken = 0u64;
    while taken < cfg.alarms && !sh.stop.load(Ordering::Relaxed) {
        let delay = rng.between(cfg.delay_min, cfg.delay_max);
        let due = read_clock(MONO) + delay;
        if let AlarmKind::Pct(k) = kind {
            compute(delay * k as u64 / 100, due, || {
                sh.stop.load(Ordering::Relaxed)
            });
        }
        // Sleep in steps of at most 100 ms so a stop request is seen.
        while due.saturating_sub(read_clock(MONO)) > 100_000_000 && !sh.stop.load(Ordering::Relaxed)
        {
            punctual_time::clock::sleep_rel(MONO, 100_000_000);
        }
        if sh.stop.load(Ordering::Relaxed) {
            break;
        }
        let obs = w.wait(due).expect("the absolute waiter always returns");
        rec.record(obs.done.saturating_sub(due));
        taken += 1;
        sh.taken.fetch_add(1, Ordering::Relaxed);
    }
}

/// Run the workload until every alarm-setting process has taken its alarms (or `stop` is set).
pub fn run_alarms(cfg: &AlarmConfig, stop: &AtomicBool) -> Result<AlarmOutcome, LatencyError> {
    run_alarms_counted(cfg, stop, &AtomicU64::new(0))
}

/// [`run_alarms`], counting every alarm taken in `taken` as it happens.
pub fn run_alarms_counted(
    cfg: &AlarmConfig,
    stop: &AtomicBool,
    taken: &AtomicU64,
) -> Result<AlarmOutcome, LatencyError> {
    assert!(
        cfg.delay_min > 0 && cfg.delay_min <= cfg.delay_max,
        "validated by the caller"
    );
    let kinds: Vec<AlarmKind> = cfg
        .workload
        .groups
        .iter()
        .flat_map(|g| std::iter::repeat_n(g.kind, g.count as usize))
        .collect();
    let n = kinds.len();
    let sh = Shared {
        cfg,
        stop,
        remaining: AtomicUsize::new(kinds.iter().filter(|k| k.sets_alarms()).count()),
        taken,
        error: Mutex::new(None),
    };
    let slots: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let barrier = Barrier::new(n);
    let results: Vec<Option<AlarmProcess>> = std::thread::scope(|s| {
        let handles: Vec<_> = kinds
            .iter()
            .copied()
            .enumerate()
            .map(|(index, kind)| {
                let (sh, slot, barrier) = (&sh, &slots[index], &barrier);
                std::thread::Builder::new()
                    .name(format!("punctual-alarm{index}"))
                    .spawn_scoped(s, move || {
                        let guards = setup_current_thread(&request(cfg, kind));
                        barrier.wait();
                        let guards = match guards {
                            Ok(g) => g,
                            Err(source) => {
                                sh.fail(LatencyError::Setup {
                                    thread: index,
                                    source,
                                });
                                if kind.sets_alarms() {
                                    sh.remaining.fetch_sub(1, Ordering::Relaxed);
                                }
                                return None;
                            }
                        };
                        let mut rec = Recorder::new();
                        let mut rng = Rng::new(cfg.seed, index as u64);
                        let cpu0 = thread_cpu_time();
                        let wall0 = read_clock(MONO);
                        match (kind, cfg.mechanism) {
                            (AlarmKind::Cpu, _) => compute(u64::MAX, u64::MAX, || sh.over()),
                            (_, Mechanism::Signal) => {
                                signal_process(sh, kind, &mut rng, slot, &mut rec, index)
                            }
                            (AlarmKind::Cont, Mechanism::Nanosleep) => {
                                // The computing half here; the alarms on a sibling thread.
                                let done = AtomicBool::new(false);
                                std::thread::scope(|s2| {
                                    let (done, rec, rng) = (&done, &mut rec, &mut rng);
                                    s2.spawn(move || {
                                        match setup_current_thread(&request(cfg, kind)) {
                                            Ok(_g) => {
                                                nanosleep_process(sh, AlarmKind::Blk, rng, rec)
                                            }
                                            Err(source) => sh.fail(LatencyError::Setup {
                                                thread: index,
                                                source,
                                            }),
                                        }
                                        sh.remaining.fetch_sub(1, Ordering::Relaxed);
                                        done.store(true, Ordering::Relaxed);
                                    });
                                    // Until every alarm process (this one's sibling included) is done.
                                    compute(u64::MAX, u64::MAX, || {
                                        done.load(Ordering::Relaxed) && sh.over()
                                    });
                                });
                            }
                            (_, Mechanism::Nanosleep) => {
                                nanosleep_process(sh, kind, &mut rng, &mut rec)
                            }
                        }
                        let sibling_counted =
                            kind == AlarmKind::Cont && cfg.mechanism == Mechanism::Nanosleep;
                        if kind.sets_alarms() && !sibling_counted {
                            sh.remaining.fetch_sub(1, Ordering::Relaxed);
                            // A cont process keeps computing until the others are done too.
                            if kind == AlarmKind::Cont && cfg.mechanism == Mechanism::Signal {
                                compute(u64::MAX, u64::MAX, || sh.over());
                            }
                        }
                        Some(AlarmProcess {
                            kind,
                            index,
                            recorder: rec,
                            cpu_ns: thread_cpu_time() - cpu0,
                            wall_ns: read_clock(MONO) - wall0,
                            policy: guards.policy,
                            priority: guards.priority,
                            fallback: guards.fallback.clone(),
                        })
                    })
                    .expect("spawning an alarm process thread")
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("alarm process panicked"))
            .collect()
    });
    if let Some(e) = sh.error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    Ok(AlarmOutcome {
        processes: results.into_iter().flatten().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_parse_and_label_like_the_paper() {
        let w: AlarmWorkload = "pct4:1,cpu:2".parse().unwrap();
        assert_eq!(w.processes(), 3);
        assert_eq!(w.alarm_processes(), 1);
        assert_eq!(w.paper_label(), ("4%".to_string(), "1+2CPU".to_string()));
        assert_eq!(w.to_string(), "pct4:1,cpu:2");
        let w: AlarmWorkload = "cont:8".parse().unwrap();
        assert_eq!(w.paper_label(), ("CONT".to_string(), "8".to_string()));
        assert_eq!("blk".parse::<AlarmWorkload>().unwrap().processes(), 1);
    }

    #[test]
    fn bad_workloads_are_refused_with_reasons() {
        assert!("cpu:2"
            .parse::<AlarmWorkload>()
            .unwrap_err()
            .contains("no alarms"));
        assert!("pct0:1"
            .parse::<AlarmWorkload>()
            .unwrap_err()
            .contains("1-99"));
        assert!("pct100"
            .parse::<AlarmWorkload>()
            .unwrap_err()
            .contains("cont"));
        assert!("blk:0"
            .parse::<AlarmWorkload>()
            .unwrap_err()
            .contains("count of 0"));
        assert!("cont:65"
            .parse::<AlarmWorkload>()
            .unwrap_err()
            .contains("limit"));
        assert!("wait:1"
            .parse::<AlarmWorkload>()
            .unwrap_err()
            .contains("valid: blk"));
        assert!("blk:x"
            .parse::<AlarmWorkload>()
            .unwrap_err()
            .contains("whole number"));
    }

    #[test]
    fn delays_are_uniform_in_range_and_reproducible() {
        let mut a = Rng::new(7, 3);
        let mut b = Rng::new(7, 3);
        let xs: Vec<u64> = (0..10_000).map(|_| a.between(1_000, 2_000)).collect();
        assert!(xs.iter().all(|&x| (1_000..=2_000).contains(&x)));
        assert_eq!(
            xs[..10],
            (0..10).map(|_| b.between(1_000, 2_000)).collect::<Vec<_>>()[..]
        );
        let mean = xs.iter().sum::<u64>() as f64 / xs.len() as f64;
        assert!((mean - 1_500.0).abs() < 15.0, "mean {mean}");
        assert_ne!(Rng::new(7, 4).next(), Rng::new(7, 3).next());
    }

    fn tiny(workload: &str, mechanism: Mechanism) -> AlarmConfig {
        AlarmConfig {
            alarms: 20,
            delay_min: 200_000,
            delay_max: 2_000_000,
            policy: Policy::Other,
            priority: 0,
            cpu: Some(punctual_rt::affinity::last_online_cpu()),
            ..AlarmConfig::paper(workload.parse().unwrap(), mechanism)
        }
    }

    #[test]
    fn every_alarm_process_takes_every_alarm_with_both_mechanisms() {
        for m in [Mechanism::Signal, Mechanism::Nanosleep] {
            let taken = AtomicU64::new(0);
            let out = run_alarms_counted(
                &tiny("blk:1,pct20:1,cont:1,cpu:1", m),
                &AtomicBool::new(false),
                &taken,
            )
            .unwrap();
            assert_eq!(
                taken.load(Ordering::Relaxed),
                60,
                "the live count saw every alarm"
            );
            assert_eq!(out.processes.len(), 4);
            for p in &out.processes {
                let want = if p.kind.sets_alarms() { 20 } else { 0 };
                assert_eq!(p.recorder.count(), want, "{:?} with {}", p.kind, m.name());
            }
            assert_eq!(out.merged().count(), 60);
            // The computing processes computed: they used CPU time.
            let cont = out
                .processes
                .iter()
                .find(|p| p.kind == AlarmKind::Cont)
                .unwrap();
            assert!(
                cont.cpu_ns > 1_000_000,
                "cont used only {} ns of CPU",
                cont.cpu_ns
            );
        }
    }

    /// Etsion put only the processes that set timers in the round-robin class: the CPU-bound
    /// neighbours are time-sharing, as in the simulated half.
    #[test]
    fn cpu_bound_neighbours_are_time_sharing_as_in_the_paper() {
        let cfg = AlarmConfig::paper("pct4:1,cpu:2".parse().unwrap(), Mechanism::Signal);
        let alarm = request(&cfg, AlarmKind::Pct(4));
        assert_eq!(
            (alarm.policy, alarm.priority),
            (Policy::Rr, DEFAULT_PRIORITY)
        );
        let cpu = request(&cfg, AlarmKind::Cpu);
        assert_eq!((cpu.policy, cpu.priority), (Policy::Other, 0));
        let all_rr = AlarmConfig {
            neighbour_policy: Policy::Rr,
            ..cfg
        };
        let cpu = request(&all_rr, AlarmKind::Cpu);
        assert_eq!((cpu.policy, cpu.priority), (Policy::Rr, DEFAULT_PRIORITY));
    }

    #[test]
    fn a_set_stop_flag_ends_the_run_early() {
        let mut cfg = tiny("blk:1,cont:1", Mechanism::Signal);
        cfg.alarms = 1_000_000;
        let stop = AtomicBool::new(true);
        let out = run_alarms(&cfg, &stop).unwrap();
        assert!(out.merged().count() <= 1);
    }
}
