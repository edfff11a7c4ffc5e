//! What the measuring side knows about a release outside its bound, and the preallocated log the
//! timing loops write it into (one compare per release, a copy for the late ones, no allocation).

/// How the thread that had to run at the instant waits for it: decides what its own time and an
/// idle CPU mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Waiter {
    /// punctual's own dispatcher loop (sleeps to a margin before, spins, acts): a CPU idle until
    /// it ran, or its own time past the instant, is the loop's (`dispatcher`).
    Loop,
    /// A thread the kernel wakes at the instant (a `latency` thread, a process in
    /// `clock_nanosleep`): an idle CPU until it ran is the wake path (`wake_path`).
    Sleeper,
    /// A client released by another thread (a `wake` client): an idle CPU between the hand-over
    /// and its running is the wake path, its own time past the instant the hypervisor's (`steal`).
    Client,
    /// The loop's partner thread, firing a release the loop handed it for a breather: judged as
    /// the loop (its own time is punctual's), named as itself.
    Partner,
}

impl Waiter {
    /// punctual's own timing thread, the loop or its partner: its own time past the instant is
    /// the dispatcher's.
    pub fn is_punctuals(self) -> bool {
        matches!(self, Waiter::Loop | Waiter::Partner)
    }

    /// How an explanation names the thread.
    pub fn who(self) -> &'static str {
        match self {
            Waiter::Loop => "the loop",
            Waiter::Partner => "the loop's partner",
            Waiter::Sleeper => "the thread",
            Waiter::Client => "the client",
        }
    }
}

/// A release handed over by another thread (the dispatcher of a `wake` action).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handover {
    /// The thread that handed it over, and its CPU.
    pub tid: i32,
    pub cpu: u32,
    /// When it meant to hand over (the instant less the lead).
    pub planned: u64,
    /// When it did (just before the futex wake).
    pub at: u64,
    /// The lead the client's recent wake-ups call for, before any cap (`AutoMargin::needed`).
    pub lead_needed: u64,
    /// The dispatcher's clock read before the one that found the hand-over due, when it spun to
    /// it: as [`LateRelease::last_read`], for the dispatcher's side of a late hand-over.
    pub last_read: Option<u64>,
    /// The dispatcher's bookkeeping it reached the hand-over late from: as
    /// [`LateRelease::own_work`], for its side of a late hand-over.
    pub own_work: Option<OwnWork>,
    /// How long the dispatcher's bookkeeping after an action takes in this run when nothing stops
    /// it (its 99th percentile, as [`OwnWork::usual`]): what it does on the client's CPU between
    /// this hand-over and its next wait. `u64::MAX` until the run is over.
    pub bookkeeping: u64,
}

/// One release outside its bound. Times are CLOCK_MONOTONIC ns, the trace's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LateRelease {
    /// The series it counts in (the caller's numbering).
    pub series: u32,
    /// The thread that had to run at the instant, and the CPU it ran on when it noticed.
    pub tid: i32,
    pub cpu: u32,
    pub waiter: Waiter,
    /// The release instant, and when the thread ran (for a missed release: when the loop got
    /// past it).
    pub target: u64,
    pub actual: u64,
    pub handover: Option<Handover>,
    /// The loop was still busy with earlier work (a previous action, a breather) at the instant
    /// it had to act: [`Waiter::Loop`] only.
    pub behind: bool,
    /// A spinning loop's clock read before the one that found the instant passed: from it to
    /// `actual` the loop did nothing but read the clock (and note the start), so a window there
    /// with no guest event on its CPU is time the virtual CPU was not running guest code.
    pub last_read: Option<u64>,
    /// Bounded work of the thread's own from its last clock read to `actual`.
    pub own_work: Option<OwnWork>,
}

/// A stretch of bounded work of the thread's own that ends at a late release's `actual`: far
/// longer than it usually takes, with no guest event on its CPU, it is time the virtual CPU was not
/// running (as for [`LateRelease::last_read`]'s spin).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnWork {
    pub kind: WorkKind,
    /// The thread's clock read where it began.
    pub at: u64,
    /// How long it takes in this run when nothing stops it (its 99th percentile), filled in once
    /// the run is over; `u64::MAX` until then, which never judges it stopped.
    pub usual: u64,
}

/// What the thread was doing in an [`OwnWork`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkKind {
    /// A send call, up to the kernel's stamp (`actual`).
    Send,
    /// A dispatch loop's bookkeeping between the previous action's end and the next release.
    Bookkeeping,
}

impl LateRelease {
    pub fn lateness(&self) -> u64 {
        self.actual.saturating_sub(self.target)
    }
}

/// Late releases of one timing thread: allocated once, filled without allocating, and counted
/// past its capacity rather than grown.
#[derive(Clone, Debug, Default)]
pub struct LateLog {
    records: Vec<LateRelease>,
    /// Releases outside the bound that did not fit.
    pub dropped: u64,
    bound: u64,
}

/// What [`LateLog::new`] writes over its buffer before the run.
const FILLER: LateRelease = LateRelease {
    series: 0,
    tid: 0,
    cpu: 0,
    waiter: Waiter::Loop,
    target: 0,
    actual: 0,
    handover: None,
    behind: false,
    last_read: None,
    own_work: None,
};

/// Late releases one timing thread keeps at most (144 bytes each: 4.5 MiB).
pub const LOG_CAPACITY: usize = 32 * 1024;

impl LateLog {
    /// A log for releases later than `bound` ns, holding at most `capacity`.
    ///
    /// Every page of the log is written here: a timing loop that logs its first late releases
    /// into memory never touched takes a page fault per new page in the middle of its
    /// bookkeeping (page faults are not among the traced events), and a process that is not
    /// locked (`mlockall`: tests, library users) does not have them prefaulted.
    pub fn new(bound: u64, capacity: usize) -> LateLog {
        let mut records = Vec::with_capacity(capacity);
        records.resize(capacity, FILLER);
        records.clear();
        LateLog {
            records,
            dropped: 0,
            bound,
        }
    }

    /// A log that keeps nothing (`--explain` off): [`LateLog::is_late`] is always false.
    pub fn off() -> LateLog {
        LateLog {
            records: Vec::new(),
            dropped: 0,
            bound: u64::MAX,
        }
    }

    pub fn bound(&self) -> u64 {
        self.bound
    }

    pub fn enabled(&self) -> bool {
        self.bound != u64::MAX
    }

    /// Whether a release this late is outside the bound (and worth a record).
    #[inline(always)]
    pub fn is_late(&self, lateness: u64) -> bool {
        lateness > self.bound
    }

    /// The usual time of the records' own work ([`OwnWork::usual`]) of `kind`, once the run is over.
    pub fn set_own_work_usual(&mut self, kind: WorkKind, usual: u64) {
        let works = self.records.iter_mut().flat_map(|r| {
            let handed = r.handover.as_mut().and_then(|h| h.own_work.as_mut());
            r.own_work.as_mut().into_iter().chain(handed)
        });
        for w in works.filter(|w| w.kind == kind) {
            w.usual = usual;
        }
        if kind == WorkKind::Bookkeeping {
            for h in self.records.iter_mut().filter_map(|r| r.handover.as_mut()) {
                h.bookkeeping = usual;
            }
        }
    }

    /// Keep a record if there is room; count it otherwise.
    #[inline]
    pub fn push(&mut self, r: LateRelease) {
        if self.records.len() < self.records.capacity() {
            self.records.push(r);
        } else {
            self.dropped += 1;
        }
    }

    pub fn records(&self) -> &[LateRelease] {
        &self.records
    }

    /// Count every record in series `series` (a log kept per thread, counted per phase).
    pub fn relabel(&mut self, series: u32) {
        for r in &mut self.records {
            r.series = series;
        }
    }

    /// Add another thread's log (after the run).
    pub fn absorb(&mut self, other: LateLog) {
        self.dropped += other.dropped;
        self.records.extend(other.records);
    }

    pub fn into_records(self) -> (Vec<LateRelease>, u64) {
        (self.records, self.dropped)
    }
}

pub use punctual_trace::capture::{Stall, StallKind};

/// Stalls a thread logs at most (32 bytes each: 2 MiB). A loop beside clients on its CPU logs up
/// to 2,000 a second under disk load (kurt-periodic's (d) rows, ninth session): a 10 s row fits.
pub const STALL_CAPACITY: usize = 64 * 1024;

/// The most stalls a log sized to its run holds ([`StallLog::with_capacity`]: 32 MiB).
pub const STALL_CAPACITY_MAX: usize = 1024 * 1024;

/// The longest a stall may take before it is logged, whatever the bound: the host's stops on this
/// project's VM are 25-200 us, and a thread's own short work takes under a microsecond.
pub const STALL_LOG_NS: u64 = 20_000;

/// A timing thread's stalls ([`Stall`]) longer than its threshold (the bound, at most
/// [`STALL_LOG_NS`]): allocated once and written before the run, filled without allocating,
/// counted past its capacity.
#[derive(Clone, Debug)]
pub struct StallLog {
    stalls: Vec<Stall>,
    pub dropped: u64,
    threshold: u64,
    tid: i32,
    cpu: u32,
}

impl Default for StallLog {
    fn default() -> Self {
        StallLog::off()
    }
}

impl StallLog {
    /// A log for the calling thread on its CPU (pinned: the CPU does not change), for releases
    /// judged against `bound`.
    pub fn new(bound: u64) -> StallLog {
        StallLog::with_capacity(bound, STALL_CAPACITY)
    }

    /// [`StallLog::new`] for a run that knows how many stalls it may log: room for `capacity`,
    /// within [`STALL_CAPACITY`] and [`STALL_CAPACITY_MAX`]. A replay's send with the receiving
    /// softirq inside takes 7-8 us, over a 5 us bound: measured (2026-11-30), 143,128 stalls in a
    /// minute of 120,000 sends, 77,592 of them past the fixed capacity.
    pub fn with_capacity(bound: u64, capacity: usize) -> StallLog {
        let capacity = capacity.clamp(STALL_CAPACITY, STALL_CAPACITY_MAX);
        let filler = Stall {
            tid: 0,
            cpu: 0,
            kind: StallKind::Busy,
            from: 0,
            to: 0,
        };
        let mut stalls = Vec::with_capacity(capacity);
        stalls.resize(capacity, filler);
        stalls.clear();
        let (tid, cpu) = here();
        StallLog {
            stalls,
            dropped: 0,
            threshold: bound.min(STALL_LOG_NS),
            tid,
            cpu,
        }
    }

    /// A log that keeps nothing (`--explain` off).
    pub fn off() -> StallLog {
        StallLog {
            stalls: Vec::new(),
            dropped: 0,
            threshold: u64::MAX,
            tid: 0,
            cpu: 0,
        }
    }

    /// The thread spent `[from, to]` (its clock reads) on `kind`: kept when longer than the
    /// threshold.
    #[inline(always)]
    pub fn note(&mut self, kind: StallKind, from: u64, to: u64) {
        if to.saturating_sub(from) <= self.threshold {
            return;
        }
        if self.stalls.len() < self.stalls.capacity() {
            self.stalls.push(Stall {
                tid: self.tid,
                cpu: self.cpu,
                kind,
                from,
                to,
            });
        } else {
            self.dropped += 1;
        }
    }

    /// How long a stretch must be to be kept (`u64::MAX` for a log that keeps nothing).
    pub fn threshold(&self) -> u64 {
        self.threshold
    }

    pub fn into_stalls(self) -> (Vec<Stall>, u64) {
        (self.stalls, self.dropped)
    }
}

/// Threads of this process that are punctual's own besides the ones a run's records name (its
/// watchdog): one of them holding a victim's CPU is `dispatcher`, not another `task`.
static OWN_THREADS: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

/// Declare `tid` one of punctual's own threads for the explanations made in this process.
pub fn own_thread(tid: i32) {
    let mut own = OWN_THREADS.lock().unwrap_or_else(|e| e.into_inner());
    if !own.contains(&tid) {
        own.push(tid);
    }
}

/// The threads declared with [`own_thread`].
pub fn own_threads() -> Vec<i32> {
    OWN_THREADS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

/// The calling thread's id and the CPU it runs on (for a record).
pub fn here() -> (i32, u32) {
    // SAFETY: gettid takes no arguments, touches no memory and cannot fail.
    let tid = unsafe { libc::gettid() };
    // SAFETY: sched_getcpu takes no arguments and touches no memory; a failure is -1 (made 0).
    let cpu = unsafe { libc::sched_getcpu() };
    (tid, cpu.max(0) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(target: u64) -> LateRelease {
        LateRelease {
            series: 0,
            tid: 1,
            cpu: 0,
            waiter: Waiter::Sleeper,
            target,
            actual: target + 20_000,
            handover: None,
            behind: false,
            last_read: None,
            own_work: None,
        }
    }

    #[test]
    fn a_full_log_counts_instead_of_growing() {
        let mut log = LateLog::new(10_000, 2);
        assert!(log.is_late(10_001) && !log.is_late(10_000));
        for t in 0..5 {
            log.push(rec(t));
        }
        assert_eq!(log.records().len(), 2);
        assert_eq!(log.dropped, 3);
        assert_eq!(log.records()[1].lateness(), 20_000);
        let mut other = LateLog::new(10_000, 4);
        other.push(rec(9));
        log.absorb(other);
        assert_eq!((log.records().len(), log.dropped), (3, 3));
    }

    #[test]
    fn a_stall_log_sized_to_its_run_holds_its_stalls_within_the_limits() {
        let fill = |log: &mut StallLog, n: u64| {
            for i in 0..n {
                log.note(StallKind::Busy, i * 100_000, i * 100_000 + 30_000);
            }
        };
        let n = STALL_CAPACITY as u64 + 1_000;
        let mut sized = StallLog::with_capacity(5_000, n as usize);
        fill(&mut sized, n);
        assert_eq!(sized.dropped, 0);
        assert_eq!(sized.into_stalls().0.len(), n as usize);
        let mut fixed = StallLog::new(5_000);
        fill(&mut fixed, n);
        assert_eq!(fixed.dropped, 1_000);
        // Never under the default, never over the most.
        assert_eq!(
            StallLog::with_capacity(5_000, 10).stalls.capacity(),
            STALL_CAPACITY
        );
        let most = StallLog::with_capacity(5_000, usize::MAX);
        assert_eq!(most.stalls.capacity(), STALL_CAPACITY_MAX);
    }

    #[test]
    fn an_off_log_finds_nothing_late() {
        let log = LateLog::off();
        assert!(!log.enabled());
        assert!(!log.is_late(u64::MAX - 1));
    }

    #[test]
    fn here_names_this_thread() {
        let (tid, cpu) = here();
        // SAFETY: gettid takes no arguments, touches no memory and cannot fail.
        let own = unsafe { libc::gettid() };
        assert_eq!(tid, own);
        assert!((cpu as usize) < 4096);
    }
}
