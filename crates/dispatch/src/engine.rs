//! The dispatch loop of one CPU, on an injected clock.
//!
//! Releases come from the CPU's periodic tasks (a binary heap keyed by the instant the dispatcher must
//! act) and from its one-shot events (a cursor over the sorted event array). For each release at
//! instant `T` the loop acts at `T - lead` (the lead is zero except for `wake` actions, whose clients
//! spin to `T` themselves): it sleeps until a margin before that, spins to it, performs the action
//! and records the lateness. Nothing in the loop allocates, locks or prints.
//!
//! Missed releases (whose instant had passed when the task's previous release finished):
//!
//! ```text
//! period  |-------|-------|-------|-------|
//! release k runs long:   [=========]
//! skip:       k                        k+3        (k+1, k+2 counted missed, not run)
//! catch_up:   k          k+1 k+2       k+3        (k+1, k+2 counted missed, run at once, late)
//! ```
//!
//! A task that may move (`SlotSpec::movable`) whose late releases line up is re-phased
//! ([`crate::rephase`]): its later releases come a shift after the plan's instants.

use crate::rephase::{self, LateWindow, Verdict};
pub use crate::slot::SlotSpec;
use punctual_explain::{Handover, LateLog, LateRelease, Waiter};
use punctual_periodic::channel::Ack;
use punctual_plan::{Event, MissPolicy};
use punctual_stats::{LiveHistogram, Recorder};
use punctual_time::{hybrid_until, AutoMargin, Clock, MarginPolicy};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Sleeps longer than this are cut into pieces, so a stop request is seen within it.
pub const SLEEP_SLICE_NS: u64 = 100_000_000;
/// How long a breather sleeps.
pub const BREATHER_NS: u64 = 20_000;
/// A sleep shorter than this beyond the margin the kernel needs is not worth its system call: the
/// loop spins through instead.
pub const MIN_SLEEP_NS: u64 = 5_000;
/// The margin of the first sleep, before any wake-up was seen (at most the margin cap).
pub const FIRST_MARGIN_NS: u64 = 200_000;
/// On a shielded CPU whose only work is the loop's own actions, releases at most this far off are
/// spun to rather than slept towards ([`LoopConfig::spin_below`]): nothing else needs the CPU, and
/// a sleep halts the virtual CPU, whose wake-up then waits on the host (docs/benchmarks.md: 500 us
/// spacing, five alternated rounds, a replay's receiver within 1 % 90.9 % sleeping, 94.9 % spinning).
pub const SHIELDED_SPIN_BELOW_NS: u64 = 1_000_000;
/// How often the loop refreshes its reading of the CPU's stolen time when no late wake-up asked.
pub const STEAL_REFRESH_NS: u64 = 50_000_000;
/// ... and only when the next release is at least this far: a read of `/proc/stat` takes tens of
/// microseconds, which dense releases cannot spare.
pub const STEAL_READ_ROOM_NS: u64 = 1_000_000;

/// The running total of time the hypervisor took from the dispatcher's CPU (ns), read without
/// allocating. Late wake-ups during which it moved are stolen time, not the kernel's latency.
pub trait StolenTime {
    fn total_ns(&self) -> u64;
}

impl StolenTime for punctual_rt::host::CpuSteal {
    fn total_ns(&self) -> u64 {
        self.total_ns().unwrap_or(0)
    }
}

/// What an action reports about one firing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fired {
    /// The action failed (send error, spawn error, plugin returned non-zero).
    pub error: bool,
    /// For delegated actions (`wake`): how the client fared with the previous release.
    pub previous: Option<Ack>,
}

/// The actions of one CPU, indexed by the plan's action table.
pub trait Actions {
    /// How long before the release instant the dispatcher must act.
    fn lead(&self, action: u16) -> u64;
    /// Whether the release's lateness is measured by someone else (a wake client) and reported back.
    fn delegated(&self, action: u16) -> bool;
    /// Perform the action for the release at `target`.
    fn fire(&mut self, action: u16, target: u64, seq: u64, data: &[u8]) -> Fired;
    /// The last report of a delegated action, after the loop ended.
    fn finish(&mut self, action: u16) -> Option<Ack>;
    /// For a delegated action: how the release its last report (from `fire` or `finish`) is
    /// about was handed over (`--explain` reads it; `None`: not known).
    fn handed(&self, _action: u16) -> Option<Handed> {
        None
    }
}

/// How a delegated release was handed over, for explaining it when its client reports it late.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handed {
    /// The release instant.
    pub target: u64,
    /// When the dispatcher meant to hand it over (the instant less the lead) and when it did.
    pub planned: u64,
    pub at: u64,
    /// The lead the client's wake-ups called for, before the cap.
    pub lead_needed: u64,
    /// The client's thread and the CPU it reported from (0 when the client does not say).
    pub client_tid: i32,
    pub client_cpu: u32,
}

/// KURT's rtstats for one slot.
pub struct SlotStats {
    /// Lateness of every release (for delegated actions: as the client measured it).
    pub lateness: Recorder,
    /// For delegated actions: how late the dispatcher itself acted (relative to `T - lead`).
    pub dispatch: Option<Recorder>,
    pub releases: u64,
    pub overruns: u64,
    pub errors: u64,
    /// Times the task's phase moved during the run.
    pub rephased: u32,
    /// A move did not take the lateness away, so the task stayed where it was after it.
    pub rephase_gave_up: bool,
    /// For a periodic task: its offset at the end of the run (the plan's, plus any moves, within
    /// the period).
    pub offset_ns: Option<u64>,
    /// `--explain`: its releases outside the bound (series = the slot's index on its CPU). Keeps
    /// nothing unless given a bound.
    pub late: LateLog,
}

/// Live figures of one slot, written with relaxed stores.
#[repr(align(64))]
#[derive(Default, Debug)]
pub struct SlotProgress {
    pub releases: AtomicU64,
    pub max_ns: AtomicU64,
    pub missed: AtomicU64,
    /// Releases whose action ran longer than the task's wcet.
    pub overruns: AtomicU64,
    /// When set, every lateness and missed release also goes here as it happens (relaxed atomic
    /// increments), for `run --metrics`.
    pub live: Option<std::sync::Arc<LiveHistogram>>,
}

impl SlotProgress {
    /// Progress that also feeds a live histogram of the slot's lateness.
    pub fn with_live() -> SlotProgress {
        SlotProgress {
            live: Some(std::sync::Arc::new(LiveHistogram::new())),
            ..SlotProgress::default()
        }
    }
}

/// Heartbeat for the watchdog: when the current action began (0 = none running), which, and the
/// CPU-time clock of the thread running the loop (0 = not published), so the watchdog can tell
/// whether the loop is what holds its CPU.
#[derive(Default, Debug)]
pub struct Heartbeat {
    pub action_since: AtomicU64,
    pub action: AtomicU64,
    pub cpu_clock: std::sync::atomic::AtomicI32,
    /// The spin margin in use (ns), for `run --metrics`.
    pub margin_ns: AtomicU64,
}

impl Heartbeat {
    /// Publish the calling thread's CPU-time clock: call it on the thread that runs the loop, and
    /// [`Heartbeat::withdraw_thread`] when the loop is over.
    pub fn publish_thread(&self) {
        let mut id: libc::clockid_t = 0;
        // SAFETY: pthread_self is the calling thread; `id` is a valid out-pointer.
        if unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) } == 0 {
            self.cpu_clock.store(id, Ordering::Relaxed);
        }
    }

    pub fn withdraw_thread(&self) {
        self.cpu_clock.store(0, Ordering::Relaxed);
    }

    /// CPU time the published thread has used, if it published its clock.
    pub fn thread_cpu_ns(&self) -> Option<u64> {
        let id = self.cpu_clock.load(Ordering::Relaxed);
        if id == 0 {
            return None;
        }
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a thread CPU clock of this process; a thread that ended makes it fail (EINVAL).
        (unsafe { libc::clock_gettime(id, &mut ts) } == 0)
            .then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    }

    /// Action `action` begins at `at`.
    #[inline(always)]
    fn begin(&self, action: u16, at: u64) {
        self.action.store(action as u64, Ordering::Relaxed);
        self.action_since.store(at.max(1), Ordering::Release);
    }

    /// No action runs.
    #[inline(always)]
    fn end(&self) {
        self.action_since.store(0, Ordering::Release);
    }
}

pub struct LoopConfig<'a> {
    /// Absolute instant of the plan's offset 0.
    pub start: u64,
    /// Absolute instant after which nothing is released (`u64::MAX`: no limit).
    pub end: u64,
    pub margin: MarginPolicy,
    /// The shortest period on this CPU (sizes the auto margin), or 1 ms.
    pub interval: u64,
    /// The most the auto margin may grow to (`u64::MAX`: only the interval's own bound).
    pub margin_cap: u64,
    /// Force a short sleep when the loop has not blocked for this long (`None`: never).
    pub breather_every: Option<u64>,
    /// The CPU is shielded: the auto margin is not bounded by half the interval.
    pub shielded: bool,
    /// With the auto margin, releases at most this far off are spun to, never slept towards (0:
    /// only those closer than the kernel can wake the loop). For a loop alone on a shielded CPU:
    /// a sleep halts a virtual CPU, and its wake-up then waits on the host.
    pub spin_below: u64,
    /// The CPU's stolen time (`None`: not known; every late wake-up then counts as the kernel's).
    pub steal: Option<&'a dyn StolenTime>,
    pub events: &'a [Event],
    /// For each plan action: the slot its events count in on this CPU (`None`: not on this CPU).
    pub event_slot: &'a [Option<usize>],
}

pub struct LoopEnd {
    pub margin_ns: u64,
    pub breathers: u64,
    /// Kernel wake-ups that came after the target itself.
    pub woke_late: u64,
    /// Of those, the ones during which the hypervisor took the CPU (left out of the margin).
    pub woke_late_stolen: u64,
    /// Releases spun through without sleeping: closer than the kernel can wake the loop.
    pub spun_through: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Due {
    act_at: Reverse<u64>,
    slot: usize,
}

/// Run one CPU's releases until `end`, the plan's end, or `stop`.
#[allow(clippy::too_many_arguments)]
pub fn dispatch<C: Clock + ?Sized, A: Actions + ?Sized>(
    clock: &C,
    cfg: &LoopConfig,
    slots: &[SlotSpec],
    stats: &mut [SlotStats],
    actions: &mut A,
    stop: &AtomicBool,
    progress: &[SlotProgress],
    heartbeat: &Heartbeat,
) -> LoopEnd {
    let mut margin = match cfg.margin {
        MarginPolicy::Auto if cfg.shielded => {
            AutoMargin::for_shielded(cfg.interval).capped(cfg.margin_cap)
        }
        MarginPolicy::Auto => AutoMargin::for_interval(cfg.interval).capped(cfg.margin_cap),
        MarginPolicy::Fixed(m) => AutoMargin::new(m, m, m),
    };
    // Everything the loop keeps is allocated here, before the first release.
    let mut sources = Sources::new(cfg, slots, &*actions);
    let mut breather = Breather::new(cfg.breather_every, clock.now());
    let mut steal = StealWatch::new(cfg.steal, clock.now());
    let mut slept_once = false;
    // How long the previous action ran (for --explain: a loop that arrives late because of it was
    // behind with its own work).
    let mut prev_work = 0u64;
    let mut end = LoopEnd {
        margin_ns: margin.margin(),
        breathers: 0,
        woke_late: 0,
        woke_late_stolen: 0,
        spun_through: 0,
    };

    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let Some(r) = sources.next(cfg, slots, &*actions) else {
            break;
        };
        if r.target >= cfg.end {
            break;
        }
        let act_at = r.act_at;
        // Long sleeps in slices, so a stop request is seen.
        let now = clock.now();
        let m = margin.margin();
        if act_at > now && act_at - now > m + SLEEP_SLICE_NS {
            clock.sleep_until(now + SLEEP_SLICE_NS);
            breather.blocked(clock.now());
            continue;
        }
        // The first release has not learnt the kernel's wake-up latency yet: it sleeps with room.
        let auto = matches!(cfg.margin, MarginPolicy::Auto);
        let m = if auto && end.spun_through == 0 && !slept_once {
            m.max(FIRST_MARGIN_NS.min(cfg.margin_cap))
        } else {
            m
        };
        let gap = act_at.saturating_sub(now);
        // The steal reading is refreshed only where it costs no release: before a long sleep.
        if gap > STEAL_READ_ROOM_NS {
            steal.refresh(now);
        }
        // Closer than the kernel can wake the loop (and within what the CPU's budget allows each
        // release): a sleep would only make the release late, so the loop spins through.
        let dense = gap <= margin.needed().saturating_add(MIN_SLEEP_NS) && gap <= cfg.margin_cap;
        let m = if auto && (dense || gap <= cfg.spin_below) {
            end.spun_through += 1;
            u64::MAX
        } else {
            m
        };
        let breathed = breather.due(now, gap, m, margin.needed());
        if breathed {
            clock.pause(BREATHER_NS);
            end.breathers += 1;
            breather.blocked(clock.now());
        }
        let w = hybrid_until(clock, act_at, m);
        // Only a real kernel sleep says anything about wake-up latency (a loop running behind does not sleep).
        let slept = w.sleep_to > now;
        slept_once |= slept;
        let late_wake = slept
            .then(|| note_wake(&w, &mut breather, &mut end, &mut margin))
            .flatten();
        let slot = r.slot;
        let spec = &slots[slot];
        heartbeat.begin(spec.action, w.done);
        let started = clock.now();
        let fired = actions.fire(spec.action, r.target, r.seq, r.data);
        let done = clock.now();
        heartbeat.end();

        let behind = breathed || (now > act_at && prev_work >= now - act_at);
        prev_work = done - started;
        let timed = Timed {
            behind,
            started,
            done,
            fired,
            slept,
            woke: w.woke,
            last_read: (w.done > w.before_done).then_some(w.before_done),
        };
        let delegated = actions.delegated(spec.action);
        let lateness = record_release(&mut stats[slot], spec, delegated, &r, &timed);
        if stats[slot].late.enabled() {
            log_late(
                &mut stats[slot],
                slot,
                &r,
                &timed,
                delegated,
                actions.handed(spec.action),
            );
        }
        if spec.movable {
            sources.watch_phase(&mut stats[slot], slots, &r, &timed, delegated);
        }
        if let Some(missed) = sources.advance(cfg, spec, &r, done, &*actions) {
            if stats[slot].late.enabled() {
                log_missed(&mut stats[slot], slot, spec, &r, &timed, missed);
            }
            count_missed(&mut stats[slot], &progress[slot], missed);
        }
        publish(&progress[slot], &stats[slot], lateness);
        heartbeat
            .margin_ns
            .store(margin.margin(), Ordering::Relaxed);
        match late_wake {
            // A late wake-up while the hypervisor held the CPU says nothing about the kernel: the
            // margin does not chase it (no margin covers stolen time).
            Some(_) if steal.moved(done) => end.woke_late_stolen += 1,
            Some(l) => margin.observe(l),
            None => {}
        }
    }
    collect_owed_reports(slots, stats, actions);
    sources.final_offsets(slots, stats);
    end.margin_ns = margin.margin();
    end
}

/// What a kernel sleep's wake-up says: the loop blocked until it woke; one on time teaches the
/// margin; a late one is counted and returned, judged after the action (reading the stolen time
/// never delays a release).
fn note_wake(
    w: &punctual_time::sleep::Wake,
    breather: &mut Breather,
    end: &mut LoopEnd,
    margin: &mut AutoMargin,
) -> Option<u64> {
    if w.woke <= w.sleep_to {
        return None;
    }
    breather.blocked(w.woke);
    if w.woke_late() {
        end.woke_late += 1;
        return Some(w.sleep_latency());
    }
    margin.observe(w.sleep_latency());
    None
}

/// When a loop that has not blocked for a long time (dense releases) takes a short breather, so
/// lower-priority work on its CPU (the watchdog's canary, kernel threads) gets to run: where no
/// release falls (the next one at least the breather and the kernel's wake-up away) when the plan
/// has such room; in a plan without any, in the widest gap seen since the loop last blocked; and
/// at once when twice overdue. A breather that lands on a release makes it late by the loop's own
/// doing (`--explain`'s `dispatcher`).
struct Breather {
    every: Option<u64>,
    last_block: u64,
    /// The widest gap between releases since the loop last blocked.
    widest: u64,
}

impl Breather {
    fn new(every: Option<u64>, now: u64) -> Breather {
        Breather {
            every,
            last_block: now,
            widest: 0,
        }
    }

    /// The loop blocked (slept in the kernel) until `at`.
    #[inline(always)]
    fn blocked(&mut self, at: u64) {
        self.last_block = at;
        self.widest = 0;
    }

    /// Whether to breathe now, with the next action `gap` away, a margin `m` the loop would
    /// sleep to and `needed` the kernel's wake-up latency.
    #[inline(always)]
    fn due(&mut self, now: u64, gap: u64, m: u64, needed: u64) -> bool {
        let Some(every) = self.every else {
            return false;
        };
        let room = BREATHER_NS
            .saturating_add(needed)
            .saturating_add(MIN_SLEEP_NS);
        let roomy_seen = self.widest >= room;
        self.widest = self.widest.max(gap);
        let unblocked = now.saturating_sub(self.last_block);
        // A loop that will sleep before the release blocks anyway.
        if unblocked <= every || gap >= m {
            return false;
        }
        gap >= room || (!roomy_seen && gap >= self.widest) || unblocked > every.saturating_mul(2)
    }
}

/// The CPU's stolen time as the loop last read it.
struct StealWatch<'a> {
    source: Option<&'a dyn StolenTime>,
    seen: u64,
    read_at: u64,
}

impl<'a> StealWatch<'a> {
    fn new(source: Option<&'a dyn StolenTime>, now: u64) -> Self {
        StealWatch {
            source,
            seen: source.map_or(0, |s| s.total_ns()),
            read_at: now,
        }
    }

    /// Whether stolen time grew since the last reading (at most [`STEAL_REFRESH_NS`] ago).
    fn moved(&mut self, now: u64) -> bool {
        let Some(s) = self.source else { return false };
        let t = s.total_ns();
        let moved = t > self.seen;
        self.seen = t;
        self.read_at = now;
        moved
    }

    fn refresh(&mut self, now: u64) {
        if let Some(s) = self.source {
            if now.saturating_sub(self.read_at) > STEAL_REFRESH_NS {
                self.seen = s.total_ns();
                self.read_at = now;
            }
        }
    }
}

/// Where the releases come from: the periodic tasks' heap and the event cursor, with each task's
/// release index and each event slot's sequence number. Allocated once, before the loop.
struct Sources {
    heap: BinaryHeap<Due>,
    /// Per task: release index of the next release.
    next_k: Vec<u64>,
    /// Per task: the instant through which missed releases were already counted (catch_up runs
    /// them without counting them twice).
    counted_through: Vec<u64>,
    /// Per task: how far its phase moved during the run (added to its offset).
    shift: Vec<u64>,
    /// Per movable task: its recent releases, late or not.
    windows: Vec<LateWindow>,
    /// Index of the next event of this CPU in `LoopConfig::events` (or its length).
    ev: usize,
    /// Per event slot: sequence number of its next event.
    event_seq: Vec<u64>,
}

/// The next release, as [`Sources::next`] chose it.
struct Release<'e> {
    /// When the dispatcher acts: the release instant less the action's lead.
    act_at: u64,
    from_event: bool,
    slot: usize,
    /// The release instant.
    target: u64,
    seq: u64,
    data: &'e [u8],
}

/// One firing as the loop timed it.
struct Timed {
    /// The loop came to this release late because of its own work: the previous action ran past
    /// the instant it had to act at, or it took a breather just before.
    behind: bool,
    started: u64,
    done: u64,
    fired: Fired,
    /// The loop slept in the kernel before this release.
    slept: bool,
    /// When that sleep ended.
    woke: u64,
    /// The spin's clock read before the one that found the instant passed (`None`: it did not
    /// spin): from it to `started` the loop only read the clock and noted the start.
    last_read: Option<u64>,
}

impl Sources {
    fn new<A: Actions + ?Sized>(cfg: &LoopConfig, slots: &[SlotSpec], actions: &A) -> Sources {
        let mut heap: BinaryHeap<Due> = BinaryHeap::with_capacity(slots.len());
        for (i, s) in slots.iter().enumerate() {
            if s.period.is_some() {
                let t = cfg.start + s.offset;
                heap.push(Due {
                    act_at: Reverse(t.saturating_sub(actions.lead(s.action))),
                    slot: i,
                });
            }
        }
        let mut sources = Sources {
            heap,
            next_k: vec![0; slots.len()],
            counted_through: vec![0; slots.len()],
            shift: vec![0; slots.len()],
            windows: vec![LateWindow::default(); slots.len()],
            ev: 0,
            event_seq: vec![0u64; slots.len()],
        };
        sources.skip_foreign(cfg);
        sources
    }

    /// Counts release `r` of a movable task in its window and moves the task when its late
    /// releases line up: the next release (not yet in the heap) and all after it follow the new
    /// phase.
    #[inline(always)]
    fn watch_phase(
        &mut self,
        st: &mut SlotStats,
        slots: &[SlotSpec],
        r: &Release,
        t: &Timed,
        delegated: bool,
    ) {
        let w = &mut self.windows[r.slot];
        let previous = w.released(r.seq);
        let seen = if delegated {
            // The client reports on the release before this one.
            match (previous, t.fired.previous) {
                (Some(k), Some(Ack::Done { lateness, .. })) => {
                    Some((k, lateness > rephase::LATE_NS))
                }
                (Some(k), Some(Ack::Missed)) => Some((k, true)),
                _ => None,
            }
        } else {
            Some((r.seq, t.started.saturating_sub(r.target) > rephase::LATE_NS))
        };
        let Some((k, late)) = seen else { return };
        w.observe(k, late);
        match w.verdict() {
            Verdict::Move => match rephase::next_shift(r.slot, slots, &self.shift) {
                Some(shift) => {
                    self.shift[r.slot] = shift;
                    self.windows[r.slot].moved(r.seq + 1);
                    st.rephased += 1;
                }
                None => self.windows[r.slot].restart(r.seq + 1),
            },
            Verdict::GiveUp => st.rephase_gave_up = true,
            Verdict::Stay => {}
        }
    }

    /// Each task's offset at the end: the plan's plus the moves, within its period.
    fn final_offsets(&self, slots: &[SlotSpec], stats: &mut [SlotStats]) {
        for (i, s) in slots.iter().enumerate() {
            stats[i].offset_ns = s.period.map(|p| (s.offset + self.shift[i]) % p);
        }
    }

    /// Moves the event cursor past events of actions on other CPUs.
    #[inline(always)]
    fn skip_foreign(&mut self, cfg: &LoopConfig) {
        while self.ev < cfg.events.len()
            && cfg.event_slot[cfg.events[self.ev].action as usize].is_none()
        {
            self.ev += 1;
        }
    }

    /// The next release: the earlier of the heap's top and the event cursor (ties: tasks first);
    /// `None` when neither has one left.
    #[inline(always)]
    fn next<'e, A: Actions + ?Sized>(
        &self,
        cfg: &LoopConfig<'e>,
        slots: &[SlotSpec],
        actions: &A,
    ) -> Option<Release<'e>> {
        let task_due = self.heap.peek().map(|d| (d.act_at.0, d.slot));
        let event_due = (self.ev < cfg.events.len()).then(|| {
            let e = &cfg.events[self.ev];
            let t = cfg.start + e.at;
            (t.saturating_sub(actions.lead(e.action)), t)
        });
        let (act_at, from_event) = match (task_due, event_due) {
            (None, None) => return None,
            (Some((a, _)), Some((b, _))) if b < a => (b, true),
            (Some((a, _)), _) => (a, false),
            (None, Some((b, _))) => (b, true),
        };
        let (slot, target, seq, data): (usize, u64, u64, &[u8]) = if from_event {
            let e = &cfg.events[self.ev];
            let slot = cfg.event_slot[e.action as usize].expect("foreign events are skipped");
            (slot, cfg.start + e.at, self.event_seq[slot], e.data())
        } else {
            let (_, slot) = task_due.expect("chosen");
            let s = &slots[slot];
            (
                slot,
                cfg.start
                    + s.offset
                    + self.shift[slot]
                    + self.next_k[slot] * s.period.expect("a task"),
                self.next_k[slot],
                &[][..],
            )
        };
        Some(Release {
            act_at,
            from_event,
            slot,
            target,
            seq,
            data,
        })
    }

    /// Moves the source of release `r` on; `done` is when its action returned. Returns the number
    /// of releases newly counted as missed, when the task's next instant had passed by `done`.
    #[inline(always)]
    fn advance<A: Actions + ?Sized>(
        &mut self,
        cfg: &LoopConfig,
        spec: &SlotSpec,
        r: &Release,
        done: u64,
        actions: &A,
    ) -> Option<u64> {
        let slot = r.slot;
        if r.from_event {
            self.event_seq[slot] += 1;
            self.ev += 1;
            self.skip_foreign(cfg);
            return None;
        }
        self.heap.pop();
        let p = spec.period.expect("a task");
        let mut k = self.next_k[slot] + 1;
        let base = cfg.start + spec.offset + self.shift[slot];
        let next = base + k * p;
        let mut missed = None;
        if done >= next {
            // Releases whose instant passed while this one ran: missed (only those before the
            // run's end: a late last release does not miss releases the run would never have had).
            let passed = (done - next) / p + 1;
            let before_end = if next < cfg.end {
                (done.min(cfg.end - 1) - next) / p + 1
            } else {
                0
            };
            let new = match spec.miss {
                MissPolicy::Skip => before_end,
                MissPolicy::CatchUp if before_end == 0 => 0,
                MissPolicy::CatchUp => {
                    let through = next + (before_end - 1) * p;
                    let already = if self.counted_through[slot] >= next {
                        (self.counted_through[slot] - next) / p + 1
                    } else {
                        0
                    };
                    self.counted_through[slot] = self.counted_through[slot].max(through);
                    before_end.saturating_sub(already)
                }
            };
            missed = Some(new);
            if spec.miss == MissPolicy::Skip {
                k += passed;
                if spec.movable {
                    // Skipped releases are late ones for re-phasing (caught-up ones are timed when run).
                    for j in 1..=passed.min(64) {
                        self.windows[slot].observe(self.next_k[slot] + j, true);
                    }
                }
            }
        }
        self.next_k[slot] = k;
        let t = base + k * p;
        self.heap.push(Due {
            act_at: Reverse(t.saturating_sub(actions.lead(spec.action))),
            slot,
        });
        missed
    }
}

/// Counts one release in its slot's statistics. Returns its lateness for the live figures (`None`:
/// a delegated action whose client has not reported on its previous release).
#[inline(always)]
fn record_release(
    st: &mut SlotStats,
    spec: &SlotSpec,
    delegated: bool,
    r: &Release,
    t: &Timed,
) -> Option<u64> {
    st.releases += 1;
    if t.fired.error {
        st.errors += 1;
    }
    if spec.wcet.is_some_and(|w| t.done - t.started > w) {
        st.overruns += 1;
    }
    let mut lateness = None;
    if delegated {
        let own = t.started.saturating_sub(r.act_at);
        if let Some(d) = st.dispatch.as_mut() {
            d.record(own);
        }
        match t.fired.previous {
            Some(Ack::Done {
                lateness: l,
                woke_late,
                ..
            }) => {
                st.lateness.record(l);
                if woke_late {
                    st.lateness.add_woke_late();
                }
                lateness = Some(l);
            }
            Some(Ack::Missed) => st.lateness.add_missed(1),
            None => {}
        }
    } else {
        let l = t.started.saturating_sub(r.target);
        st.lateness.record(l);
        if t.slept && t.woke > r.target {
            st.lateness.add_woke_late();
        }
        lateness = Some(l);
    }
    lateness
}

/// Releases whose instant passed before the previous one finished, counted everywhere.
#[inline(always)]
fn count_missed(st: &mut SlotStats, pr: &SlotProgress, missed: u64) {
    st.lateness.add_missed(missed);
    pr.missed.fetch_add(missed, Ordering::Relaxed);
    if let Some(h) = &pr.live {
        h.add_missed(missed);
    }
}

/// The slot's live figures: releases and overruns so far, the largest lateness, and (when kept)
/// every lateness in the live histogram.
#[inline(always)]
fn publish(pr: &SlotProgress, st: &SlotStats, lateness: Option<u64>) {
    pr.releases.store(st.releases, Ordering::Relaxed);
    pr.overruns.store(st.overruns, Ordering::Relaxed);
    if let Some(l) = lateness {
        if l > pr.max_ns.load(Ordering::Relaxed) {
            pr.max_ns.store(l, Ordering::Relaxed);
        }
        if let Some(h) = &pr.live {
            h.record(l);
        }
    }
}

/// Missed releases logged one by one for `--explain`, at most this many per late release.
pub const LOG_MISSED_MAX: u64 = 8;
/// An action that ran at least this long over a missed instant was the loop's own work.
pub const OWN_WORK_NS: u64 = 5_000;

/// `--explain`: keep a release later than the log's bound. Self-timed releases are the loop's
/// (its thread, its CPU); a delegated one is its client's report on the release before, kept
/// with how that release was handed over.
#[cold]
fn log_late(
    st: &mut SlotStats,
    slot: usize,
    r: &Release,
    t: &Timed,
    delegated: bool,
    handed: Option<Handed>,
) {
    if !delegated {
        if st.late.is_late(t.started.saturating_sub(r.target)) {
            let (tid, cpu) = punctual_explain::here();
            st.late.push(LateRelease {
                series: slot as u32,
                tid,
                cpu,
                waiter: Waiter::Loop,
                target: r.target,
                actual: t.started,
                handover: None,
                behind: t.behind,
                last_read: t.last_read,
            });
        }
        return;
    }
    let (Some(h), Some(ack)) = (handed, t.fired.previous) else {
        return;
    };
    let actual = match ack {
        Ack::Done { lateness, .. } if st.late.is_late(lateness) => h.target + lateness,
        Ack::Done { .. } => return,
        // Not taken before the next release: late by at least that long.
        Ack::Missed => t.started.max(h.target + 1),
    };
    push_client(&mut st.late, slot, h, actual);
}

fn push_client(log: &mut LateLog, slot: usize, h: Handed, actual: u64) {
    let (tid, cpu) = punctual_explain::here();
    log.push(LateRelease {
        series: slot as u32,
        tid: h.client_tid,
        cpu: h.client_cpu,
        waiter: Waiter::Client,
        target: h.target,
        actual,
        handover: Some(Handover {
            tid,
            cpu,
            planned: h.planned,
            at: h.at,
            lead_needed: h.lead_needed,
        }),
        behind: false,
        last_read: None,
    });
}

/// `--explain`: the instants a release's lateness made the loop skip (the first
/// [`LOG_MISSED_MAX`]), each late until the loop got past it (kept when that is beyond the
/// bound). A delegated release skipped was never handed over: the loop's, like any other.
#[cold]
fn log_missed(
    st: &mut SlotStats,
    slot: usize,
    spec: &SlotSpec,
    r: &Release,
    t: &Timed,
    missed: u64,
) {
    let Some(p) = spec.period else { return };
    let (tid, cpu) = punctual_explain::here();
    for j in 1..=missed.min(LOG_MISSED_MAX) {
        let m = r.target + j * p;
        if !st.late.is_late(t.done.saturating_sub(m)) {
            continue;
        }
        st.late.push(LateRelease {
            series: slot as u32,
            tid,
            cpu,
            waiter: Waiter::Loop,
            target: m,
            actual: t.done.max(m + 1),
            handover: None,
            // The action itself was running over the instant, and for long: the loop's work.
            behind: t.started <= m && t.done - t.started >= OWN_WORK_NS,
            last_read: None,
        });
    }
}

/// After the loop: the reports delegated actions still owe on their last release.
fn collect_owed_reports<A: Actions + ?Sized>(
    slots: &[SlotSpec],
    stats: &mut [SlotStats],
    actions: &mut A,
) {
    for (i, s) in slots.iter().enumerate() {
        if actions.delegated(s.action) && stats[i].releases > 0 {
            let ack = actions.finish(s.action);
            if let (Some(h), true) = (actions.handed(s.action), stats[i].late.enabled()) {
                match ack {
                    Some(Ack::Done { lateness, .. }) if stats[i].late.is_late(lateness) => {
                        push_client(&mut stats[i].late, i, h, h.target + lateness)
                    }
                    // Never taken, and the run is over: when it would have run is not known.
                    Some(Ack::Missed) => stats[i].late.dropped += 1,
                    _ => {}
                }
            }
            match ack {
                Some(Ack::Done {
                    lateness,
                    woke_late,
                    ..
                }) => {
                    stats[i].lateness.record(lateness);
                    if woke_late {
                        stats[i].lateness.add_woke_late();
                    }
                }
                Some(Ack::Missed) => stats[i].lateness.add_missed(1),
                None => {}
            }
        }
    }
}

impl SlotStats {
    pub fn new(delegated: bool) -> Self {
        SlotStats {
            lateness: Recorder::new(),
            dispatch: delegated.then(Recorder::new),
            releases: 0,
            overruns: 0,
            errors: 0,
            rephased: 0,
            rephase_gave_up: false,
            offset_ns: None,
            late: LateLog::off(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use punctual_time::ManualClock;
    use std::sync::Arc;

    /// Fake actions: each firing is logged with the clock time and may take `work` ns.
    struct Fake {
        clock: ManualClock,
        log: Vec<(u16, u64, u64, u64)>, // (action, target, seq, at)
        work: Vec<u64>,                 // per action
        long_once: Option<(u16, u64, u64)>, // (action, nth firing, extra work)
        lead: u64,
        delegated: bool,
        counts: Vec<u64>,
        /// For delegated actions: the client's report on the release before, from its target.
        client: Option<fn(u64) -> Ack>,
        /// The loop asked for the final report.
        finished: bool,
        /// Per action, its lead (else `lead`).
        leads: Vec<u64>,
    }

    impl Fake {
        fn new(clock: &ManualClock, actions: usize) -> Self {
            Fake {
                clock: clock.clone(),
                log: vec![],
                work: vec![0; actions],
                long_once: None,
                lead: 0,
                delegated: false,
                counts: vec![0; actions],
                client: None,
                finished: false,
                leads: Vec::new(),
            }
        }
    }

    impl Actions for Fake {
        fn lead(&self, action: u16) -> u64 {
            self.leads
                .get(action as usize)
                .copied()
                .unwrap_or(self.lead)
        }
        fn delegated(&self, _: u16) -> bool {
            self.delegated
        }
        fn fire(&mut self, action: u16, target: u64, seq: u64, _data: &[u8]) -> Fired {
            let at = self.clock.now();
            self.log.push((action, target, seq, at));
            let n = self.counts[action as usize];
            self.counts[action as usize] += 1;
            let mut work = self.work[action as usize];
            if let Some((a, nth, extra)) = self.long_once {
                if a == action && nth == n {
                    work += extra;
                }
            }
            self.clock.advance(work);
            let before = self.log.iter().rev().filter(|l| l.0 == action).nth(1);
            let previous = match (self.delegated && n > 0, self.client, before) {
                (false, _, _) => None,
                (true, Some(client), Some(l)) => Some(client(l.1)),
                _ => Some(Ack::Done {
                    lateness: 7,
                    wake_latency: Some(1),
                    woke_late: false,
                }),
            };
            Fired {
                error: false,
                previous,
            }
        }
        fn finish(&mut self, _: u16) -> Option<Ack> {
            self.finished = true;
            Some(Ack::Done {
                lateness: 9,
                wake_latency: None,
                woke_late: false,
            })
        }
        fn handed(&self, action: u16) -> Option<Handed> {
            // The release the last report was about: the one before the last firing, or the last
            // one once the loop asked for its final report.
            let back = if self.finished { 0 } else { 1 };
            let l = self.log.iter().rev().filter(|l| l.0 == action).nth(back)?;
            Some(Handed {
                target: l.1,
                planned: l.1 - self.lead,
                at: l.3,
                lead_needed: 0,
                client_tid: 77,
                client_cpu: 1,
            })
        }
    }

    fn task(
        name: &str,
        action: u16,
        period: u64,
        offset: u64,
        wcet: Option<u64>,
        miss: MissPolicy,
    ) -> SlotSpec {
        SlotSpec {
            name: name.into(),
            action,
            period: Some(period),
            offset,
            wcet,
            miss,
            movable: false,
        }
    }

    struct Run {
        stats: Vec<SlotStats>,
        end: LoopEnd,
    }

    /// The loop from `start` to `end` with every other setting at its plainest: auto margin sized
    /// for a 1 ms interval, no cap, no breathers, not shielded, no steal meter, no events.
    fn loop_cfg<'a>(start: u64, end: u64) -> LoopConfig<'a> {
        LoopConfig {
            start,
            end,
            margin: MarginPolicy::Auto,
            interval: 1_000_000,
            margin_cap: u64::MAX,
            breather_every: None,
            shielded: false,
            spin_below: 0,
            steal: None,
            events: &[],
            event_slot: &[None],
        }
    }

    fn run(
        clock: &ManualClock,
        slots: &[SlotSpec],
        fake: &mut Fake,
        events: &[Event],
        event_slot: &[Option<usize>],
        end: u64,
        margin: MarginPolicy,
    ) -> Run {
        run_capped(
            clock,
            slots,
            fake,
            events,
            event_slot,
            end,
            margin,
            u64::MAX,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn run_capped(
        clock: &ManualClock,
        slots: &[SlotSpec],
        fake: &mut Fake,
        events: &[Event],
        event_slot: &[Option<usize>],
        end: u64,
        margin: MarginPolicy,
        margin_cap: u64,
    ) -> Run {
        let mut stats: Vec<SlotStats> = slots
            .iter()
            .map(|_| SlotStats::new(fake.delegated))
            .collect();
        let progress: Vec<SlotProgress> = slots.iter().map(|_| SlotProgress::default()).collect();
        let cfg = LoopConfig {
            margin,
            margin_cap,
            events,
            event_slot,
            ..loop_cfg(1_000_000, end)
        };
        let e = dispatch(
            clock,
            &cfg,
            slots,
            &mut stats,
            fake,
            &AtomicBool::new(false),
            &progress,
            &Heartbeat::default(),
        );
        for (s, p) in stats.iter().zip(&progress) {
            assert_eq!(p.releases.load(Ordering::Relaxed), s.releases);
        }
        Run { stats, end: e }
    }

    #[test]
    fn releases_come_in_time_order_across_tasks_and_events_and_none_is_lost() {
        let clock = ManualClock::with_wake_latency(0, 20, |_| 15_000);
        let slots = vec![
            task("a", 0, 1_000_000, 0, None, MissPolicy::Skip),
            task("b", 1, 3_000_000, 500_000, None, MissPolicy::Skip),
            SlotSpec {
                name: "ev".into(),
                action: 2,
                period: None,
                offset: 0,
                wcet: None,
                miss: MissPolicy::Skip,
                movable: false,
            },
        ];
        let events = [
            Event::new(250_000, 2, &[1]),
            Event::new(250_000, 2, &[2]),
            Event::new(7_700_000, 2, &[3]),
        ];
        let mut fake = Fake::new(&clock, 3);
        let r = run(
            &clock,
            &slots,
            &mut fake,
            &events,
            &[None, None, Some(2)],
            1_000_000 + 10_000_000,
            MarginPolicy::Auto,
        );
        let targets: Vec<u64> = fake.log.iter().map(|l| l.1).collect();
        let mut sorted = targets.clone();
        sorted.sort_unstable();
        assert_eq!(targets, sorted, "released out of order");
        // a: 10 releases in 10 ms; b: at 0.5, 3.5, 6.5, 9.5 ms; 3 events.
        assert_eq!(r.stats[0].releases, 10);
        assert_eq!(r.stats[1].releases, 4);
        assert_eq!(r.stats[2].releases, 3);
        assert_eq!(fake.log.len(), 17);
        // Every release ran at or after its instant, within the spin's clock reads.
        for (_, target, _, at) in &fake.log {
            assert!(
                at >= target && at - target < 2_000,
                "target {target} at {at}"
            );
        }
        // Event sequence numbers count per slot.
        let seqs: Vec<u64> = fake.log.iter().filter(|l| l.0 == 2).map(|l| l.2).collect();
        assert_eq!(seqs, vec![0, 1, 2]);
        assert_eq!(
            r.stats
                .iter()
                .map(|s| s.lateness.missed_periods())
                .sum::<u64>(),
            0
        );
    }

    /// [`run`] with `--explain`'s logs on (bound 10 us).
    fn run_explained(
        clock: &ManualClock,
        slots: &[SlotSpec],
        fake: &mut Fake,
        end: u64,
        margin: MarginPolicy,
    ) -> Vec<SlotStats> {
        let mut stats: Vec<SlotStats> = slots
            .iter()
            .map(|_| {
                let mut s = SlotStats::new(fake.delegated);
                s.late = LateLog::new(10_000, 1024);
                s
            })
            .collect();
        let progress: Vec<SlotProgress> = slots.iter().map(|_| SlotProgress::default()).collect();
        let cfg = LoopConfig {
            margin,
            ..loop_cfg(1_000_000, end)
        };
        dispatch(
            clock,
            &cfg,
            slots,
            &mut stats,
            fake,
            &AtomicBool::new(false),
            &progress,
            &Heartbeat::default(),
        );
        stats
    }

    #[test]
    fn explain_keeps_the_releases_a_long_action_made_the_loop_miss_as_its_own() {
        let clock = ManualClock::new(0, 10);
        let slots = vec![task("a", 0, 1_000_000, 0, None, MissPolicy::Skip)];
        let mut fake = Fake::new(&clock, 1);
        fake.long_once = Some((0, 2, 2_600_000)); // release 2 runs 2.6 ms: releases 3 and 4 pass
        let stats = run_explained(
            &clock,
            &slots,
            &mut fake,
            1_000_000 + 10_000_000,
            MarginPolicy::Fixed(50_000),
        );
        let late = stats[0].late.records();
        let offsets: Vec<u64> = late
            .iter()
            .map(|r| (r.target - 1_000_000) / 1_000_000)
            .collect();
        assert_eq!(offsets, vec![3, 4], "{late:?}");
        let (tid, _) = punctual_explain::here();
        for r in late {
            assert_eq!(r.waiter, Waiter::Loop);
            assert_eq!(r.tid, tid, "the loop's own thread");
            assert!(
                r.behind,
                "the action ran over the instant: the loop's own work"
            );
            assert!(r.actual > r.target + 10_000);
            assert_eq!(r.series, 0);
        }
        // Without a bound nothing is kept.
        let clock = ManualClock::new(0, 10);
        let mut fake = Fake::new(&clock, 1);
        fake.long_once = Some((0, 2, 2_600_000));
        let r = run(
            &clock,
            &slots,
            &mut fake,
            &[],
            &[None],
            11_000_000,
            MarginPolicy::Fixed(50_000),
        );
        assert!(r.stats[0].late.records().is_empty());
    }

    #[test]
    fn explain_keeps_a_clients_late_report_with_how_its_release_was_handed_over() {
        let clock = ManualClock::new(0, 10);
        let slots = vec![task("c", 0, 1_000_000, 0, None, MissPolicy::Skip)];
        let mut fake = Fake::new(&clock, 1);
        fake.delegated = true;
        fake.lead = 100_000;
        // The client reports the release at offset 3 ms 50 us late, the others on time.
        fake.client = Some(|target| Ack::Done {
            lateness: if target == 4_000_000 { 50_000 } else { 2_000 },
            wake_latency: Some(1_000),
            woke_late: false,
        });
        let stats = run_explained(
            &clock,
            &slots,
            &mut fake,
            1_000_000 + 6_000_000,
            MarginPolicy::Fixed(20_000),
        );
        let late = stats[0].late.records();
        assert_eq!(late.len(), 1, "{late:?}");
        let r = late[0];
        assert_eq!((r.target, r.actual), (4_000_000, 4_050_000));
        assert_eq!((r.tid, r.cpu, r.waiter), (77, 1, Waiter::Client));
        let h = r.handover.expect("handed over");
        assert_eq!(h.planned, 4_000_000 - 100_000);
        assert!(h.at >= h.planned && h.at < r.target, "{h:?}");
        assert_eq!(h.tid, punctual_explain::here().0, "the dispatcher's thread");
    }

    #[test]
    fn thirty_clients_on_fifteen_cpus_get_the_per_cpu_lead_cap_without_overlapping() {
        // kurt-periodic's 30 wake tasks at 10 ms, evenly phased, placed two per CPU on CPUs 1-15:
        // each action's lead is its CPU's cap, and the dispatcher acts that far ahead of each
        // instant, on the injected clock.
        let text: String = (0..30)
            .map(|i| {
                format!(
                    "[[task]]\nname = \"t{i}\"\nperiod = \"10ms\"\noffset = \"{}us\"\naction = {{ kind = \"wake\", channel = \"c{i}\" }}\n",
                    i * 10_000 / 30
                )
            })
            .collect();
        let plan = punctual_plan::parse_str(&text, "t.toml", None).unwrap();
        let placement = crate::place_clients(30, &[0], &(0..16).collect::<Vec<_>>(), None);
        let placed: Vec<(u16, usize)> = placement
            .iter()
            .enumerate()
            .map(|(i, &c)| (i as u16, c))
            .collect();
        let caps = crate::wake_lead_caps(&plan, &placed);
        // The plan's wake cap would be 166 us; per CPU it is 2.5 ms, held to the period's own
        // 2 ms bound by the lead's estimator.
        let leads: Vec<u64> = caps.iter().map(|&c| c.min(AutoMargin::CEILING)).collect();
        assert!(leads.iter().all(|&l| l == 2_000_000), "{leads:?}");
        let clock = ManualClock::new(0, 10);
        let slots: Vec<SlotSpec> = plan
            .tasks
            .iter()
            .map(|t| {
                task(
                    &t.name,
                    t.action,
                    t.period,
                    t.offset.ns(),
                    None,
                    MissPolicy::Skip,
                )
            })
            .collect();
        let mut fake = Fake::new(&clock, 30);
        fake.delegated = true;
        fake.leads = leads.clone();
        run(
            &clock,
            &slots,
            &mut fake,
            &[],
            &[None],
            1_000_000 + 30_000_000,
            MarginPolicy::Fixed(10_000),
        );
        // Each release handed over its lead before its instant (within the clock's read cost),
        // once the run had begun that long before.
        for &(a, target, _, at) in fake.log.iter().filter(|l| l.1 >= 4_000_000) {
            let planned = target - leads[a as usize];
            assert!(
                at >= planned && at - planned < 5_000,
                "action {a}: {at} vs {planned}"
            );
        }
        // On each CPU, one client's spin [T - lead, T] never overlaps the next one's.
        for cpu in 1..16 {
            let mut spins: Vec<(u64, u64)> = fake
                .log
                .iter()
                .filter(|l| placement[l.0 as usize] == cpu && l.1 >= 4_000_000)
                .map(|l| (l.1 - leads[l.0 as usize], l.1))
                .collect();
            spins.sort_unstable();
            assert!(spins.len() >= 3, "CPU {cpu}: {spins:?}");
            for w in spins.windows(2) {
                assert!(w[0].1 <= w[1].0, "CPU {cpu}: {w:?}");
            }
        }
    }

    #[test]
    fn skip_counts_missed_releases_and_resumes_at_the_first_future_one() {
        let clock = ManualClock::new(0, 10);
        let slots = vec![task("a", 0, 1_000_000, 0, Some(500_000), MissPolicy::Skip)];
        let mut fake = Fake::new(&clock, 1);
        fake.long_once = Some((0, 2, 2_600_000)); // release 2 runs 2.6 ms: releases 3 and 4 pass
        let r = run(
            &clock,
            &slots,
            &mut fake,
            &[],
            &[None],
            1_000_000 + 10_000_000,
            MarginPolicy::Fixed(50_000),
        );
        let ks: Vec<u64> = fake
            .log
            .iter()
            .map(|l| (l.1 - 1_000_000) / 1_000_000)
            .collect();
        assert_eq!(ks, vec![0, 1, 2, 5, 6, 7, 8, 9]);
        assert_eq!(r.stats[0].lateness.missed_periods(), 2);
        assert_eq!(r.stats[0].overruns, 1);
        assert_eq!(
            r.stats[0].releases + r.stats[0].lateness.missed_periods(),
            10,
            "every release is run or counted"
        );
    }

    #[test]
    fn catch_up_runs_every_release_late_and_counts_each_missed_once() {
        let clock = ManualClock::new(0, 10);
        let slots = vec![task("a", 0, 1_000_000, 0, None, MissPolicy::CatchUp)];
        let mut fake = Fake::new(&clock, 1);
        fake.work = vec![100_000];
        fake.long_once = Some((0, 2, 2_600_000));
        let r = run(
            &clock,
            &slots,
            &mut fake,
            &[],
            &[None],
            1_000_000 + 10_000_000,
            MarginPolicy::Fixed(50_000),
        );
        let ks: Vec<u64> = fake
            .log
            .iter()
            .map(|l| (l.1 - 1_000_000) / 1_000_000)
            .collect();
        assert_eq!(ks, (0..10).collect::<Vec<_>>(), "nothing skipped");
        assert_eq!(
            r.stats[0].lateness.missed_periods(),
            2,
            "releases 3 and 4 passed while 2 ran"
        );
        // The caught-up releases ran late, back to back.
        let late: Vec<u64> = fake.log.iter().map(|l| l.3 - l.1).collect();
        assert!(
            late[3] > 1_000_000 && late[4] > 0 && late[6] < 1_000,
            "{late:?}"
        );
    }

    #[test]
    fn overruns_are_counted_against_wcet() {
        let clock = ManualClock::new(0, 10);
        let slots = vec![task("a", 0, 1_000_000, 0, Some(200_000), MissPolicy::Skip)];
        let mut fake = Fake::new(&clock, 1);
        fake.work = vec![150_000];
        fake.long_once = Some((0, 4, 100_000));
        let r = run(
            &clock,
            &slots,
            &mut fake,
            &[],
            &[None],
            1_000_000 + 8_000_000,
            MarginPolicy::Auto,
        );
        assert_eq!(r.stats[0].releases, 8);
        assert_eq!(r.stats[0].overruns, 1);
        assert_eq!(r.stats[0].lateness.missed_periods(), 0);
    }

    #[test]
    fn delegated_actions_act_a_lead_early_and_record_the_clients_lateness() {
        let clock = ManualClock::new(0, 10);
        let slots = vec![task("w", 0, 1_000_000, 0, None, MissPolicy::Skip)];
        let mut fake = Fake::new(&clock, 1);
        fake.lead = 80_000;
        fake.delegated = true;
        let r = run(
            &clock,
            &slots,
            &mut fake,
            &[],
            &[None],
            1_000_000 + 5_000_000,
            MarginPolicy::Fixed(20_000),
        );
        for (_, target, _, at) in &fake.log {
            assert!(
                *at >= target - 80_000 && *at < target - 78_000,
                "acted at {at} for {target}"
            );
        }
        // 5 releases: 4 reports during the run (of the previous one) and 1 at the end.
        assert_eq!(r.stats[0].lateness.count(), 5);
        assert_eq!(r.stats[0].lateness.max(), Some(9));
        assert_eq!(r.stats[0].dispatch.as_ref().unwrap().count(), 5);
    }

    #[test]
    fn the_auto_margin_learns_the_wake_latency() {
        let clock = ManualClock::with_wake_latency(0, 20, |_| 30_000);
        let slots = vec![task("a", 0, 1_000_000, 0, None, MissPolicy::Skip)];
        let mut fake = Fake::new(&clock, 1);
        let r = run(
            &clock,
            &slots,
            &mut fake,
            &[],
            &[None],
            1_000_000 + 500_000_000,
            MarginPolicy::Auto,
        );
        assert_eq!(r.stats[0].releases, 500);
        assert!(
            (31_000..=40_000).contains(&r.end.margin_ns),
            "margin {}",
            r.end.margin_ns
        );
        assert_eq!(r.stats[0].lateness.woke_late(), 0);
        assert!(r.stats[0].lateness.max().unwrap() < 1_000);
    }

    #[test]
    fn a_margin_cap_holds_even_when_the_kernel_wakes_later() {
        // Wake-ups 30 us late against a cap of 20 us: the loop keeps its 20 us (and its CPU budget)
        // and every release is counted as woken late, about 10 us after the instant.
        let clock = ManualClock::with_wake_latency(0, 20, |_| 30_000);
        let slots = vec![task("a", 0, 1_000_000, 0, None, MissPolicy::Skip)];
        let mut fake = Fake::new(&clock, 1);
        let r = run_capped(
            &clock,
            &slots,
            &mut fake,
            &[],
            &[None],
            1_000_000 + 100_000_000,
            MarginPolicy::Auto,
            20_000,
        );
        assert_eq!(r.stats[0].releases, 100);
        assert_eq!(r.end.margin_ns, 20_000);
        assert_eq!(r.end.woke_late, 100);
        let late = &r.stats[0].lateness;
        assert!(
            (10_000..11_000).contains(&late.min().unwrap()),
            "{:?}",
            late.min()
        );
    }

    /// One task of `period` on a CPU, shielded or capped, with the stolen time `steal` reports.
    fn run_one(
        clock: &ManualClock,
        period: u64,
        runs_for: u64,
        margin_cap: u64,
        shielded: bool,
        steal: Option<&dyn StolenTime>,
    ) -> (Run, Fake) {
        let slots = vec![task("a", 0, period, 0, None, MissPolicy::Skip)];
        let mut fake = Fake::new(clock, 1);
        let mut stats = vec![SlotStats::new(false)];
        let progress = vec![SlotProgress::default()];
        let cfg = LoopConfig {
            interval: period,
            margin_cap,
            shielded,
            steal,
            ..loop_cfg(1_000_000, 1_000_000 + runs_for)
        };
        let end = dispatch(
            clock,
            &cfg,
            &slots,
            &mut stats,
            &mut fake,
            &AtomicBool::new(false),
            &progress,
            &Heartbeat::default(),
        );
        (Run { stats, end }, fake)
    }

    /// A clock whose sleeps wake `latency` late, counting them.
    fn counting_clock(latency: u64) -> (ManualClock, Arc<AtomicU64>) {
        let sleeps = Arc::new(AtomicU64::new(0));
        let n = sleeps.clone();
        let clock = ManualClock::with_wake_latency(0, 20, move |_| {
            n.fetch_add(1, Ordering::SeqCst);
            latency
        });
        (clock, sleeps)
    }

    #[test]
    fn dense_releases_on_a_shielded_cpu_are_spun_through_without_sleeping() {
        // A release every 10 us, a kernel that wakes 15 us late: the first wake-up (with the
        // first release's generous margin) teaches the loop, which never sleeps again; no release
        // is missed or late.
        let (clock, sleeps) = counting_clock(15_000);
        let (r, fake) = run_one(&clock, 10_000, 100_000_000, u64::MAX, true, None);
        let st = &r.stats[0];
        assert_eq!(st.releases, 10_000);
        assert_eq!(st.lateness.missed_periods(), 0);
        assert!(sleeps.load(Ordering::SeqCst) <= 2, "{sleeps:?} sleeps");
        assert!(r.end.spun_through >= 9_990, "{}", r.end.spun_through);
        let late = fake.log.iter().filter(|l| l.3 - l.1 > 1_000).count();
        assert_eq!(late, 0, "releases more than 1 us late");
        // The same plan held to a 5 us margin (an unshielded CPU's budget) sleeps each time and
        // comes late: what the spin-through avoids.
        let (clock, sleeps) = counting_clock(15_000);
        let (r, _) = run_one(&clock, 10_000, 100_000_000, 5_000, false, None);
        assert!(sleeps.load(Ordering::SeqCst) > 1_000, "{sleeps:?}");
        assert!(r.end.woke_late > 1_000, "{}", r.end.woke_late);
    }

    #[test]
    fn releases_within_spin_below_are_spun_to_and_farther_ones_slept_towards() {
        // A release every 500 us, a kernel that wakes on time: by default the loop sleeps before
        // each one; with spin_below 1 ms it never sleeps after the first; with 400 us it sleeps
        // again. Every release on time in all three.
        let runs = |spin_below: u64| {
            let (clock, sleeps) = counting_clock(0);
            let slots = vec![task("a", 0, 500_000, 0, None, MissPolicy::Skip)];
            let mut fake = Fake::new(&clock, 1);
            let mut stats = vec![SlotStats::new(false)];
            let cfg = LoopConfig {
                interval: 500_000,
                shielded: true,
                spin_below,
                ..loop_cfg(1_000_000, 1_000_000 + 500_000_000)
            };
            let progress = vec![SlotProgress::default()];
            let stop = AtomicBool::new(false);
            let hb = Heartbeat::default();
            let end = dispatch(
                &clock, &cfg, &slots, &mut stats, &mut fake, &stop, &progress, &hb,
            );
            assert_eq!(stats[0].releases, 1_000);
            assert_eq!(stats[0].lateness.missed_periods(), 0);
            let late = fake.log.iter().filter(|l| l.3 - l.1 > 1_000).count();
            assert_eq!(
                late, 0,
                "releases more than 1 us late (spin_below {spin_below})"
            );
            (sleeps.load(Ordering::SeqCst), end.spun_through)
        };
        let (slept, spun) = runs(0);
        assert!(slept >= 999 && spun == 0, "{slept} sleeps, {spun} spun");
        let (slept, spun) = runs(1_000_000);
        assert!(slept <= 1 && spun >= 999, "{slept} sleeps, {spun} spun");
        let (slept, _) = runs(400_000);
        assert!(slept >= 999, "{slept} sleeps");
    }

    #[test]
    fn a_shielded_cpus_margin_exceeds_half_the_interval_when_wake_ups_need_it() {
        // 40 us period, wake-ups 25 us late: half the interval (20 us) is not enough.
        let (clock, _) = counting_clock(25_000);
        let (shielded, _) = run_one(&clock, 40_000, 40_000_000, u64::MAX, true, None);
        assert!(
            shielded.end.margin_ns > 25_000,
            "{}",
            shielded.end.margin_ns
        );
        assert!(shielded.end.woke_late <= 1, "{}", shielded.end.woke_late);
        let (clock, _) = counting_clock(25_000);
        let (plain, _) = run_one(&clock, 40_000, 40_000_000, u64::MAX, false, None);
        assert_eq!(plain.end.margin_ns, 20_000);
        assert!(plain.end.woke_late > 900, "{}", plain.end.woke_late);
    }

    struct InjectedSteal(Arc<AtomicU64>);
    impl StolenTime for InjectedSteal {
        fn total_ns(&self) -> u64 {
            self.0.load(Ordering::SeqCst)
        }
    }

    #[test]
    fn the_margin_does_not_chase_late_wake_ups_that_coincide_with_stolen_time() {
        // 1 ms task; the kernel wakes in 15 us, but every 20th sleep the host holds the CPU for
        // 800 us, and the steal counter says so.
        let run = |meter: bool| {
            let stolen = Arc::new(AtomicU64::new(0));
            let n = Arc::new(AtomicU64::new(0));
            let (s2, n2) = (stolen.clone(), n.clone());
            let clock = ManualClock::with_wake_latency(0, 20, move |_| {
                if n2.fetch_add(1, Ordering::SeqCst) % 20 == 19 {
                    s2.fetch_add(800_000, Ordering::SeqCst);
                    800_000
                } else {
                    15_000
                }
            });
            let steal = InjectedSteal(stolen);
            let source: Option<&dyn StolenTime> = if meter { Some(&steal) } else { None };
            run_one(&clock, 1_000_000, 400_000_000, u64::MAX, false, source).0
        };
        let with = run(true);
        assert!(with.end.margin_ns < 40_000, "margin {}", with.end.margin_ns);
        assert!(
            with.end.woke_late_stolen >= 15,
            "{}",
            with.end.woke_late_stolen
        );
        assert_eq!(with.end.woke_late_stolen, with.end.woke_late);
        // Without the meter the same holds drive the margin to its bound (half the period).
        let without = run(false);
        assert_eq!(without.end.margin_ns, 500_000);
        assert_eq!(without.end.woke_late_stolen, 0);
    }

    #[test]
    fn a_late_last_release_does_not_count_releases_after_the_end_as_missed() {
        // 2 ms task for 20 ms; the last release (at 18 ms) runs 7 ms: the 20, 22 and 24 ms
        // instants pass while it runs, but the run ends at 20 ms, so none of them counts.
        for miss in [MissPolicy::Skip, MissPolicy::CatchUp] {
            let clock = ManualClock::new(0, 10);
            let slots = vec![task("a", 0, 2_000_000, 0, None, miss)];
            let mut fake = Fake::new(&clock, 1);
            fake.long_once = Some((0, 9, 7_000_000));
            let r = run(
                &clock,
                &slots,
                &mut fake,
                &[],
                &[None],
                1_000_000 + 20_000_000,
                MarginPolicy::Auto,
            );
            let st = &r.stats[0];
            assert_eq!(st.releases, 10, "{miss:?}");
            assert_eq!(st.lateness.missed_periods(), 0, "{miss:?}");
        }
    }

    #[test]
    fn a_plan_with_only_events_ends_after_the_last_one() {
        let clock = ManualClock::new(0, 10);
        let slots = vec![SlotSpec {
            name: "e".into(),
            action: 0,
            period: None,
            offset: 0,
            wcet: None,
            miss: MissPolicy::Skip,
            movable: false,
        }];
        let events: Vec<Event> = (0..1000u64)
            .map(|i| Event::new(i * 10_000, 0, &[]))
            .collect();
        let mut fake = Fake::new(&clock, 1);
        let r = run(
            &clock,
            &slots,
            &mut fake,
            &events,
            &[Some(0)],
            u64::MAX,
            MarginPolicy::Auto,
        );
        assert_eq!(r.stats[0].releases, 1000);
        assert!(r.stats[0].lateness.max().unwrap() < 1_000);
    }

    /// A CPU taken away at a fixed period: from `after` on, during `[from + k * every, + len)` the
    /// thread does not run, so a clock read or a wake-up that falls there happens at the window's
    /// end (a host timer, or an IRQ, that began after the watch before the run). Wake-ups otherwise
    /// come `base` late.
    #[derive(Clone)]
    struct Taken {
        clock: ManualClock,
        after: u64,
        from: u64,
        every: u64,
        len: u64,
    }

    impl Taken {
        fn new(base: u64, after: u64, from: u64, every: u64, len: u64) -> Taken {
            Taken {
                clock: ManualClock::with_wake_latency(0, 1_000, move |_| base),
                after,
                from,
                every,
                len,
            }
        }

        /// Moves the clock out of a window it is in.
        fn run_out(&self) -> u64 {
            let t = self.clock.peek();
            if t >= self.after && t >= self.from && (t - self.from) % self.every < self.len {
                let end = t + self.len - (t - self.from) % self.every;
                self.clock.advance(end - t);
                return end;
            }
            t
        }
    }

    impl Clock for Taken {
        fn now(&self) -> u64 {
            self.clock.now();
            self.run_out()
        }
        fn sleep_until(&self, t: u64) {
            self.clock.sleep_until(t);
            self.run_out();
        }
    }

    /// A 4 ms task at `offset` for 1 s on the auto margin, with the CPU taken for 200 us around
    /// each of its plan instants from 100 ms on. Returns the statistics and the fake's log.
    fn under_periodic_interference(offset: u64, movable: bool) -> (SlotStats, Fake) {
        let start = 1_000_000;
        let clock = Taken::new(
            15_000,
            start + 100_000_000,
            start + offset - 100_000,
            4_000_000,
            200_000,
        );
        let mut spec = task("a", 0, 4_000_000, offset, None, MissPolicy::Skip);
        spec.movable = movable;
        let mut fake = Fake::new(&clock.clock, 1);
        let mut stats = vec![SlotStats::new(false)];
        let cfg = LoopConfig {
            interval: 4_000_000,
            ..loop_cfg(start, start + 1_000_000_000)
        };
        dispatch(
            &clock,
            &cfg,
            &[spec],
            &mut stats,
            &mut fake,
            &AtomicBool::new(false),
            &[SlotProgress::default()],
            &Heartbeat::default(),
        );
        (stats.pop().unwrap(), fake)
    }

    fn late(l: &(u16, u64, u64, u64)) -> bool {
        l.3 - l.1 > rephase::LATE_NS
    }

    #[test]
    fn a_task_whose_late_releases_line_up_with_unseen_interference_is_rephased() {
        let (st, fake) = under_periodic_interference(0, true);
        assert_eq!(st.rephased, 1);
        assert!(!st.rephase_gave_up);
        // Moved by 1 - 1/phi of its period.
        assert_eq!(st.offset_ns, Some(1_527_864));
        let on_plan = |l: &(u16, u64, u64, u64)| (l.1 - 1_000_000).is_multiple_of(4_000_000);
        let moved_at = fake
            .log
            .iter()
            .position(|l| !on_plan(l))
            .expect("a moved release");
        let (before, after) = fake.log.split_at(moved_at);
        // Late from 100 ms on (release 25) until a window of 50 held 40 late ones in a row.
        let late_before = before.iter().filter(|l| late(l)).count();
        assert!(
            (38..=45).contains(&late_before),
            "{late_before} late before the move"
        );
        assert!(before.iter().take(25).all(|l| !late(l)));
        // Every release after the move follows the new phase and is on time.
        assert!(after.len() > 150, "{} releases after the move", after.len());
        assert!(
            after.iter().all(|l| !on_plan(l) && !late(l)),
            "late after the move"
        );
        assert_eq!(st.lateness.missed_periods(), 0, "the move skips nothing");
        assert_eq!(st.releases as usize, fake.log.len());
    }

    #[test]
    fn a_task_with_an_explicit_offset_is_never_moved_and_stays_late() {
        // The same interference on a task that may not move (the run without re-phasing): every
        // release from 100 ms on is late, to the end.
        let (st, fake) = under_periodic_interference(0, false);
        assert_eq!(st.rephased, 0);
        assert_eq!(st.offset_ns, Some(0));
        assert!(fake
            .log
            .iter()
            .all(|l| (l.1 - 1_000_000).is_multiple_of(4_000_000)));
        let late_ones = fake.log.iter().filter(|l| late(l)).count();
        assert!(late_ones >= 220, "{late_ones} of {} late", fake.log.len());
        assert!(fake.log.iter().rev().take(50).all(late));
    }

    #[test]
    fn scattered_late_releases_do_not_move_a_task() {
        // 30 % of the wake-ups (a fixed xorshift sequence) come 100 us late on a fixed 50 us
        // margin: as many late releases as the interference above would make, in no pattern.
        let state = Arc::new(AtomicU64::new(0x2545_F491_4F6C_DD1D));
        let clock = ManualClock::with_wake_latency(0, 20, move |_| {
            let mut x = state.load(Ordering::SeqCst);
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            state.store(x, Ordering::SeqCst);
            if x % 10 < 3 {
                150_000
            } else {
                15_000
            }
        });
        let mut slots = vec![task("a", 0, 4_000_000, 0, None, MissPolicy::Skip)];
        slots[0].movable = true;
        let mut fake = Fake::new(&clock, 1);
        let r = run(
            &clock,
            &slots,
            &mut fake,
            &[],
            &[None],
            1_000_000 + 8_000_000_000,
            MarginPolicy::Fixed(50_000),
        );
        let late_ones = fake.log.iter().filter(|l| late(l)).count();
        assert_eq!(fake.log.len(), 2_000);
        assert!((500..=700).contains(&late_ones), "{late_ones} late");
        assert_eq!(r.stats[0].rephased, 0);
        assert_eq!(r.stats[0].offset_ns, Some(0));
    }

    #[test]
    fn a_task_late_at_every_phase_moves_once_and_then_stays() {
        // Every wake-up 30 us late on a fixed 5 us margin: late wherever the task is, so the one
        // move changes nothing and the loop leaves the task where that move put it.
        let clock = ManualClock::with_wake_latency(0, 20, |_| 30_000);
        let mut slots = vec![task("a", 0, 4_000_000, 0, None, MissPolicy::Skip)];
        slots[0].movable = true;
        let mut fake = Fake::new(&clock, 1);
        let r = run(
            &clock,
            &slots,
            &mut fake,
            &[],
            &[None],
            1_000_000 + 2_000_000_000,
            MarginPolicy::Fixed(5_000),
        );
        assert!(fake.log.iter().all(late));
        assert_eq!(r.stats[0].rephased, 1);
        assert!(r.stats[0].rephase_gave_up);
        assert_eq!(r.stats[0].offset_ns, Some(1_527_864));
    }

    #[test]
    fn a_wake_task_is_rephased_on_its_clients_reports() {
        // The client is taken 120 us at the plan's phase of a 2 ms task (and misses every 10th of
        // those releases outright); it reports one release later. Releases at any other phase are
        // on time.
        fn client(target: u64) -> Ack {
            let k = (target - 1_000_000) / 2_000_000;
            match (target - 1_000_000) % 2_000_000 {
                0 if k % 10 == 9 => Ack::Missed,
                0 => Ack::Done {
                    lateness: 120_000,
                    wake_latency: Some(1),
                    woke_late: true,
                },
                _ => Ack::Done {
                    lateness: 3_000,
                    wake_latency: Some(1),
                    woke_late: false,
                },
            }
        }
        let clock = ManualClock::with_wake_latency(0, 20, |_| 15_000);
        let mut slots = vec![task("w", 0, 2_000_000, 0, None, MissPolicy::Skip)];
        slots[0].movable = true;
        let mut fake = Fake::new(&clock, 1);
        fake.delegated = true;
        fake.lead = 50_000;
        fake.client = Some(client);
        let r = run(
            &clock,
            &slots,
            &mut fake,
            &[],
            &[None],
            1_000_000 + 400_000_000,
            MarginPolicy::Auto,
        );
        let st = &r.stats[0];
        assert_eq!(st.rephased, 1);
        assert!(!st.rephase_gave_up);
        assert_eq!(st.offset_ns, Some(763_932));
        // The client's 50 reports on the old phase, then the new phase only: on time.
        let moved = fake
            .log
            .iter()
            .position(|l| (l.1 - 1_000_000) % 2_000_000 != 0);
        assert_eq!(
            moved,
            Some(51),
            "moved after the report on release 49 came with release 50"
        );
        assert!(st.lateness.max().unwrap() == 120_000 && st.lateness.missed_periods() == 5);
        assert_eq!(
            st.lateness.count() + st.lateness.missed_periods(),
            st.releases,
            "every release is reported once"
        );
        assert_eq!(
            st.releases, 200,
            "the last one, 0.76 ms later, still falls before the end"
        );
    }

    #[test]
    fn breathers_are_taken_when_the_loop_never_blocks() {
        let clock = ManualClock::new(0, 1_000);
        let slots = vec![SlotSpec {
            name: "e".into(),
            action: 0,
            period: None,
            offset: 0,
            wcet: None,
            miss: MissPolicy::Skip,
            movable: false,
        }];
        let events: Vec<Event> = (0..100_000u64)
            .map(|i| Event::new(i * 10_000, 0, &[]))
            .collect();
        let mut fake = Fake::new(&clock, 1);
        let mut stats = vec![SlotStats::new(false)];
        let progress = vec![SlotProgress::default()];
        let cfg = LoopConfig {
            margin: MarginPolicy::Fixed(50_000),
            breather_every: Some(100_000_000),
            events: &events,
            event_slot: &[Some(0)],
            ..loop_cfg(1_000_000, u64::MAX)
        };
        let e = dispatch(
            &clock,
            &cfg,
            &slots,
            &mut stats,
            &mut fake,
            &AtomicBool::new(false),
            &progress,
            &Heartbeat::default(),
        );
        // One second of back-to-back events: about one breather per 100 ms.
        assert!((8..=11).contains(&e.breathers), "{}", e.breathers);
        assert_eq!(stats[0].releases, 100_000);
    }

    #[test]
    fn breathers_go_where_no_release_falls_when_the_plan_has_such_room() {
        let clock = ManualClock::new(0, 100);
        let slots = vec![SlotSpec {
            name: "e".into(),
            action: 0,
            period: None,
            offset: 0,
            wcet: None,
            miss: MissPolicy::Skip,
            movable: false,
        }];
        // Bursts of events 10 us apart, then 150 us of room, over and over for 1 s.
        let mut events = Vec::new();
        let mut t = 0;
        while t < 1_000_000_000 {
            for k in 0..20 {
                events.push(Event::new(t + k * 10_000, 0, &[]));
            }
            t += 20 * 10_000 + 150_000;
        }
        let n = events.len() as u64;
        let mut fake = Fake::new(&clock, 1);
        let mut stats = vec![SlotStats::new(false)];
        let progress = vec![SlotProgress::default()];
        // A loop alone on a shielded CPU spins through it all (it never blocks by itself).
        let cfg = LoopConfig {
            interval: 100_000,
            breather_every: Some(100_000_000),
            shielded: true,
            spin_below: SHIELDED_SPIN_BELOW_NS,
            events: &events,
            event_slot: &[Some(0)],
            ..loop_cfg(1_000_000, u64::MAX)
        };
        let e = dispatch(
            &clock,
            &cfg,
            &slots,
            &mut stats,
            &mut fake,
            &AtomicBool::new(false),
            &progress,
            &Heartbeat::default(),
        );
        assert!((8..=11).contains(&e.breathers), "{}", e.breathers);
        assert_eq!(stats[0].releases, n);
        // Every breather fell in the room: not one release came late.
        let worst = fake.log.iter().map(|l| l.3 - l.1).max().unwrap();
        assert!(worst < 5_000, "a release {worst} ns late");
    }

    #[test]
    fn stop_ends_the_loop_and_end_bounds_it() {
        let clock = ManualClock::new(0, 10);
        let slots = vec![task("a", 0, 1_000_000, 0, None, MissPolicy::Skip)];
        let mut fake = Fake::new(&clock, 1);
        let mut stats = vec![SlotStats::new(false)];
        let progress = vec![SlotProgress::default()];
        let cfg = loop_cfg(0, u64::MAX);
        dispatch(
            &clock,
            &cfg,
            &slots,
            &mut stats,
            &mut fake,
            &AtomicBool::new(true),
            &progress,
            &Heartbeat::default(),
        );
        assert_eq!(stats[0].releases, 0);
    }
}
