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
//!
//! The loop itself is here; where its releases come from (the heap, the events, the phases) is
//! `sources`, and how a release is counted once it has fired is `record`.

mod record;
mod sources;

use crate::partner::{Breathed, Look, Relay};
pub use crate::slot::SlotSpec;
use punctual_explain::{LateLog, StallKind, StallLog};
use punctual_periodic::channel::Ack;
use punctual_plan::Event;
use punctual_stats::{LiveHistogram, Recorder};
use punctual_time::{hybrid_until_primed, AutoMargin, Clock, MarginPolicy, Prime};
use record::{collect_owed_reports, count_missed, log_late, log_missed, publish, record_release};
pub use record::{LOG_MISSED_MAX, OWN_WORK_NS};
use sources::{Sources, Timed};
use std::cmp::Reverse;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Sleeps longer than this are cut into pieces, so a stop request is seen within it (and within a
/// breather's interval, when shorter: the watchdog reads the loop's blocks as they end).
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
/// ... and only when the next release is at least this far. The runs' sources are read from memory
/// ([`punctual_rt::host::SampledSteal`]): a read of `/proc/stat` on the loop's thread took 31 us at
/// the median and up to 341 us (nineteenth session), and made hand-overs late where this placement
/// left less room than that; the placement stays for any source that is not free.
pub const STEAL_READ_ROOM_NS: u64 = 1_000_000;

/// The running total of time the hypervisor took from the dispatcher's CPU (ns), read without
/// allocating or a system call. Late wake-ups during which it moved are stolen time, not the
/// kernel's latency.
pub trait StolenTime {
    fn total_ns(&self) -> u64;
}

impl StolenTime for punctual_rt::host::SampledSteal {
    fn total_ns(&self) -> u64 {
        self.total_ns()
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
    /// Whether firing is short work (a hand-over, a send): `--explain` logs a long one as a stall.
    #[inline(always)]
    fn short(&self, action: u16) -> bool {
        self.delegated(action)
    }
    /// Perform the action for the release at `target`.
    fn fire(&mut self, action: u16, target: u64, seq: u64, data: &[u8]) -> Fired;
    /// Just before [`Actions::fire`]: the loop's clock read before the one that found the instant
    /// passed, when it spun to the instant (`--explain`'s evidence that the virtual CPU stopped,
    /// for actions that judge their own lateness, as a replay's sends do).
    #[inline(always)]
    fn spin_read(&mut self, _action: u16, _last_read: Option<u64>) {}
    /// How long before the action's instant the loop calls [`Actions::prime`], once, during its
    /// spin (`None`: it does not). See [`punctual_time::Prime`].
    fn prime_lead(&self, _action: u16) -> Option<u64> {
        None
    }
    /// Ready the release due soon (its event's `data`) without performing it: the next
    /// [`Actions::fire`] of `action` is that release's (a send whose datagram is built and held
    /// back until the instant).
    fn prime(&self, _action: u16, _data: &[u8]) {}
    /// How far the action's later events moved from the plan's instants (a replay's sends that
    /// left a phase interference kept hitting, [`crate::rephase::stream_shift`]); 0: they did
    /// not. Read for each event, so a move made in [`Actions::fire`] applies from the next one.
    #[inline(always)]
    fn event_shift(&self, _action: u16) -> u64 {
        0
    }
    /// The last report of a delegated action, after the loop ended.
    fn finish(&mut self, action: u16) -> Option<Ack>;
    /// The earliest instant in `[from, before)` of a release handed to a client on the loop's own
    /// CPU that is still busy with it, and its action (`None`: none). The loop outranks its
    /// clients: it lets such a client run rather than spin across its instant (`yield_to_clients`).
    fn busy_here(&self, _from: u64, _before: u64) -> Option<(u64, u16)> {
        None
    }
    /// Block until the client of `action` comes back for its next release, at most `timeout_ns`.
    fn wait_client(&self, _action: u16, _timeout_ns: u64) {}
    /// For a delegated action: how the release its last report (from `fire` or `finish`) is
    /// about was handed over (`--explain` reads it; `None`: not known).
    fn handed(&self, _action: u16) -> Option<Handed> {
        None
    }
    /// The action itself, when it is short work any thread may fire (a mark, a datagram): the
    /// loop hands such a release to its breath partner for the breather it blocks in
    /// ([`crate::partner::Relay`]). `None`: only the loop fires it.
    fn relay(&mut self, _action: u16) -> Option<&mut dyn Fire> {
        None
    }
}

/// An action any thread may fire ([`Actions::relay`]).
pub trait Fire: Send {
    /// Perform the action for the release at `target`.
    fn fire(&mut self, target: u64, seq: u64, data: &[u8]) -> Fired;
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
    /// The loop's spin read before the one that found the hand-over due ([`Actions::spin_read`]).
    pub last_read: Option<u64>,
    /// The client's spin read before the one that found its instant passed (as it reported).
    pub client_read: Option<u64>,
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
    /// For a delegated action: where the bookkeeping began that made its last hand-over late
    /// (`Timed::own_from`), kept until the client's report on that release comes back.
    pub handed_own_from: Option<u64>,
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

/// Heartbeat for the watchdog: when the current action began (0 = none running), which, when the
/// loop last blocked, and the CPU-time clock of the thread running the loop (0 = not published),
/// so the watchdog can tell whether the loop is what holds its CPU.
#[derive(Default, Debug)]
pub struct Heartbeat {
    pub action_since: AtomicU64,
    pub action: AtomicU64,
    /// When the loop last came back from blocking in the kernel (CLOCK_MONOTONIC, ns): up to then
    /// its CPU was free for lower-priority work. Publishing the thread counts as a block.
    pub blocked_at: AtomicU64,
    pub cpu_clock: std::sync::atomic::AtomicI32,
    /// The loop thread's id (0 = not published), for the watchdog to see it blocked right now.
    pub tid: std::sync::atomic::AtomicI32,
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
            self.blocked(punctual_time::clock::read_clock(libc::CLOCK_MONOTONIC));
            // SAFETY: a plain system call without arguments that can fail.
            self.tid.store(unsafe { libc::gettid() }, Ordering::Relaxed);
            self.cpu_clock.store(id, Ordering::Release);
        }
    }

    pub fn withdraw_thread(&self) {
        self.cpu_clock.store(0, Ordering::Relaxed);
        self.tid.store(0, Ordering::Relaxed);
    }

    /// Whether the published thread is blocked in the kernel right now (sleeping, in an action
    /// that waits): its CPU is free for others. Reads `/proc`, so only for the watchdog.
    pub fn blocked_now(&self) -> bool {
        let tid = self.tid.load(Ordering::Relaxed);
        tid > 0
            && punctual_rt::ProcStat::read(format!("/proc/self/task/{tid}/stat"))
                .and_then(|s| s.field::<char>(3))
                .is_some_and(|c| matches!(c, 'S' | 'D' | 'I'))
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

    /// The loop came back at `at` from blocking in the kernel (a sleep, a breather).
    #[inline(always)]
    pub fn blocked(&self, at: u64) {
        self.blocked_at.store(at, Ordering::Relaxed);
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
    /// Who wakes the loop from a breather that has no room between releases
    /// ([`crate::partner`]; `None`: a timed sleep).
    pub partner: Option<&'a dyn crate::partner::Breath>,
    /// The CPU is shielded: the auto margin is not bounded by half the interval.
    pub shielded: bool,
    /// With the auto margin, releases at most this far off are spun to, never slept towards (0:
    /// only those closer than the kernel can wake the loop). For a loop alone on a shielded CPU:
    /// a sleep halts a virtual CPU, and its wake-up then waits on the host.
    pub spin_below: u64,
    /// The CPU's stolen time (`None`: not known; every late wake-up then counts as the kernel's).
    pub steal: Option<&'a dyn StolenTime>,
    /// The interference watched before the run (`--avoid-interference`), which a task that
    /// moves during the run keeps clear of ([`crate::rephase`]).
    pub avoid: Option<&'a punctual_plan::admission::Interference>,
    pub events: &'a [Event],
    /// For each plan action: the slot its events count in on this CPU (`None`: not on this CPU).
    pub event_slot: &'a [Option<usize>],
}

impl<'a> LoopConfig<'a> {
    /// The watched interference with the run's start, for a move ([`crate::rephase::next_shift`]).
    pub(super) fn avoiding(&self) -> Option<crate::rephase::Avoid<'a>> {
        self.avoid.map(|i| (i, self.start))
    }
}

#[derive(Default)]
pub struct LoopEnd {
    pub margin_ns: u64,
    pub breathers: u64,
    /// Of those, the ones a partner woke the loop from (no timer).
    pub breathers_partnered: u64,
    /// Releases the partner fired while the loop was in its breather ([`crate::partner::Relay`]).
    pub relayed: u64,
    /// Kernel wake-ups that came after the target itself.
    pub woke_late: u64,
    /// Of those, the ones during which the hypervisor took the CPU (left out of the margin).
    pub woke_late_stolen: u64,
    /// Releases spun through without sleeping: closer than the kernel can wake the loop.
    pub spun_through: u64,
    /// Waits, before a sleep or a spin, for a client on the loop's CPU to finish with a release
    /// due first.
    pub yields: u64,
    /// Sleeps the loop went to with a client on its CPU still busy with a release due more than
    /// [`CLIENT_BACK_NS`] before the sleep's end; and of those, the ones where a client was still
    /// busy at the loop's wake-up (found then, or waited for past it: [`leaves_clients`]).
    pub clients_left: u64,
    /// See `clients_left`.
    pub clients_left_busy: u64,
    /// `--explain`: where the loop stalled in its own short work or waiting for a due timer.
    pub stalls: StallLog,
}

/// The stall log of a loop whose slots keep their late releases (`--explain`), else one that
/// keeps nothing.
pub fn stall_log_for(stats: &[SlotStats]) -> StallLog {
    match stats.first().filter(|s| s.late.enabled()) {
        Some(s) => StallLog::new(s.late.bound()),
        None => StallLog::off(),
    }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Due {
    act_at: Reverse<u64>,
    slot: usize,
}

/// The loop's auto (or fixed) margin for its CPU.
fn loop_margin(cfg: &LoopConfig) -> AutoMargin {
    match cfg.margin {
        MarginPolicy::Auto if cfg.shielded => {
            AutoMargin::for_shielded(cfg.interval).capped(cfg.margin_cap)
        }
        MarginPolicy::Auto => AutoMargin::for_interval(cfg.interval).capped(cfg.margin_cap),
        MarginPolicy::Fixed(m) => AutoMargin::new(m, m, m),
    }
}

/// `--explain`: the loop's own bookkeeping between two releases, from the previous action's end
/// to the next top of the loop (recording, logging, choosing the next release): how long it took,
/// in powers of two, and where the current stretch began. A release the loop reached late from it
/// keeps that start (`OwnWork`): far longer than the bookkeeping's usual time with no guest event,
/// the virtual CPU was not running. Measured on a 10 us mark plan: most `dispatcher` releases left
/// were the loop arriving 10-180 us late with no spin and no guest event (docs/benchmarks.md).
struct Between {
    since: Option<u64>,
    counts: [u64; 64],
}

impl Default for Between {
    fn default() -> Self {
        Between {
            since: None,
            counts: [0; 64],
        }
    }
}

impl Between {
    /// The top of the loop at `now`: a stretch since the previous action's end is counted, and
    /// logged in `stalls` when long.
    #[inline(always)]
    fn top(&mut self, now: u64, stalls: &mut StallLog) {
        if let Some(d) = self.since {
            let took = now.saturating_sub(d);
            self.counts[(64 - took.leading_zeros()) as usize % 64] += 1;
            stalls.note(StallKind::Busy, d, now);
        }
    }

    /// The loop slept (a slice of a long wait): no bookkeeping stretch until the next action.
    #[inline(always)]
    fn slept(&mut self) {
        self.since = None;
    }

    /// Where the bookkeeping that made the loop late for an instant `due` (when it had to act)
    /// began: the previous action's end, when before `due` and the loop neither spun, slept nor
    /// was behind (`other`).
    #[inline(always)]
    fn own_from(&self, due: u64, other: bool) -> Option<u64> {
        self.since.filter(|&d| !other && d < due)
    }

    #[inline(always)]
    fn done(&mut self, at: u64) {
        self.since = Some(at);
    }

    /// The 99th percentile of the stretches, as the top of its power-of-two bucket (`u64::MAX`
    /// when none was counted).
    fn usual(&self) -> u64 {
        let all: u64 = self.counts.iter().sum();
        let mut seen = 0;
        for (b, &n) in self.counts.iter().enumerate() {
            seen += n;
            if all > 0 && seen * 100 >= all * 99 {
                return if b >= 63 { u64::MAX } else { 1u64 << b };
            }
        }
        u64::MAX
    }
}

/// Run one CPU's releases until `end`, the plan's end, or `stop`, logging the loop's stalls into
/// `stalls` (returned in [`LoopEnd::stalls`]; [`stall_log_for`] its slots, or one log a caller that
/// runs the loop in pieces keeps across them, as a replay does).
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
    stalls: StallLog,
) -> LoopEnd {
    let mut margin = loop_margin(cfg);
    // Everything the loop keeps is allocated here, before the first release.
    let mut sources = Sources::new(cfg, slots, &*actions);
    let mut breather = Breather::new(cfg.breather_every, clock.now(), heartbeat, cfg.partner);
    let mut steal = StealWatch::new(cfg.steal, clock.now());
    let mut slept_once = false;
    // How long the previous action ran (for --explain: a loop that arrives late because of it was
    // behind with its own work).
    let mut prev_work = 0u64;
    let mut end = LoopEnd {
        margin_ns: margin.margin(),
        stalls,
        ..LoopEnd::default()
    };
    let mut between = Between::default();
    // Releases a breather handed to the partner, `sources` already past them: taken first, in
    // order (fired by the partner, else by the loop, back first).
    let mut held: VecDeque<Held> = VecDeque::with_capacity(RELAY_MAX);

    loop {
        if held.is_empty() && stop.load(Ordering::Relaxed) {
            break;
        }
        let (r, mut firing, mut advanced) = match held.pop_front() {
            Some(h) => (h.r, h.fired, true),
            None => match sources.next(cfg, slots, &*actions) {
                Some(r) => (r, None, false),
                None => break,
            },
        };
        if r.target >= cfg.end {
            break;
        }
        let act_at = r.act_at;
        let action = slots[r.slot].action;
        let now = clock.now();
        let mut w = None;
        // The loop breathed before this release, and fires it itself.
        let mut behind_breather = false;
        if firing.is_none() {
            let m = margin.margin();
            between.top(now, &mut end.stalls);
            // Long sleeps in slices, so a stop request is seen.
            if !advanced && act_at > now && act_at - now > m + breather.slice() {
                clock.sleep_until(now + breather.slice());
                breather.blocked(clock.now());
                between.slept();
                continue;
            }
            let m = first_margin(cfg, m, end.spun_through == 0 && !slept_once);
            let gap = act_at.saturating_sub(now);
            let m = spin_margin(cfg, &margin, m, gap, &mut end.spun_through);
            let breathed = !advanced && breather.due(now, gap, m, margin.needed());
            if breathed {
                let ahead = (&mut sources, cfg, slots, &mut held);
                if breathe(clock, &mut breather, &mut end, (&r, action), actions, ahead) {
                    // `r` went to the partner, and is the first held. The partner fired what
                    // came due until the loop took the rest back, from its own thread, after
                    // its way back: those the loop fires came after the breather, not behind it.
                    firing = held.pop_front().and_then(|h| h.fired);
                    advanced = true;
                } else {
                    behind_breather = true;
                }
            }
            if firing.is_none() {
                let (waited, x) = wait_and_fire(
                    clock,
                    actions,
                    (&r, action),
                    m,
                    (&mut end, &mut breather, heartbeat),
                    (!breathed).then_some(now),
                    (&mut steal, &mut margin),
                );
                slept_once |= waited.slept;
                w = Some(waited);
                firing = Some(x);
            }
        }
        let Firing {
            started,
            fired,
            done,
            by,
        } = firing.expect("fired by the loop or its partner");
        let relayed = w.is_none();
        let slot = r.slot;
        let spec = &slots[slot];
        let delegated = actions.delegated(spec.action);

        // A release the partner fired came in a breather, as did one the loop fired after it.
        let behind = relayed || behind_breather || (now > act_at && prev_work >= now - act_at);
        let (slept, on_client) = w
            .as_ref()
            .map_or((false, false), |w| (w.slept, w.on_client));
        let last_read = w.as_ref().and_then(Waited::last_read);
        let timed = Timed {
            behind,
            started,
            done,
            fired,
            slept,
            woke: w.as_ref().map_or(started, |w| w.wake.woke),
            last_read,
            own_from: between.own_from(act_at, behind || slept || on_client || last_read.is_some()),
            by,
        };
        if relayed {
            // Not the loop's own work: no bookkeeping stretch from its end.
            between.slept();
        } else {
            prev_work = done - started;
            between.done(done);
        }
        settle(
            (&mut stats[slot], &progress[slot]),
            (slots, cfg),
            &mut sources,
            &*actions,
            (&r, &timed, delegated),
            advanced,
        );
        heartbeat
            .margin_ns
            .store(margin.margin(), Ordering::Relaxed);
    }
    steal.judge(clock.now(), &mut margin);
    end.woke_late_stolen = steal.stolen_wakes;
    collect_owed_reports(slots, stats, actions);
    let usual = between.usual();
    for st in stats.iter_mut() {
        st.late
            .set_own_work_usual(punctual_explain::WorkKind::Bookkeeping, usual);
    }
    sources.final_offsets(slots, stats);
    end.margin_ns = margin.margin();
    end
}

/// Count release `r`, timed `t`, in its slot: its lateness, the late log, a movable task's phase,
/// the releases whose instants it ran past (unless `sources` is already past it: `advanced`), and
/// the live figures.
#[inline(always)]
fn settle<A: Actions + ?Sized>(
    (st, pr): (&mut SlotStats, &SlotProgress),
    (slots, cfg): (&[SlotSpec], &LoopConfig),
    sources: &mut Sources,
    actions: &A,
    (r, t, delegated): (&sources::Release, &Timed, bool),
    advanced: bool,
) {
    let slot = r.slot;
    let spec = &slots[slot];
    let lateness = record_release(st, spec, delegated, r, t);
    if st.late.enabled() {
        log_late(st, slot, r, t, delegated, actions.handed(spec.action));
    }
    if delegated {
        st.handed_own_from = t.own_from;
    }
    if spec.movable {
        sources.watch_phase(st, slots, r, t, delegated, cfg);
    }
    if let Some(missed) = (!advanced)
        .then(|| sources.advance(cfg, spec, r, t.done, actions))
        .flatten()
    {
        if st.late.enabled() {
            log_missed(st, slot, spec, r, t, missed);
        }
        count_missed(st, pr, missed);
    }
    publish(pr, st, lateness);
}

/// How the loop waited for a release ([`wait_for`]).
struct Waited {
    wake: punctual_time::Wake,
    /// It slept in the kernel on a timer: only such a wake-up says anything about the kernel's
    /// wake-up latency (a loop running behind, or one a client woke, did not).
    slept: bool,
    /// It blocked first until a client on its CPU came back (its own work did not run on).
    on_client: bool,
}

impl Waited {
    /// The spin's clock read before the one that found the instant passed ([`Timed::last_read`]).
    fn last_read(&self) -> Option<u64> {
        (self.wake.done > self.wake.before_done).then_some(self.wake.before_done)
    }
}

/// One firing: when it started and ended, on the loop's clock, and how it went.
struct Firing {
    started: u64,
    fired: Fired,
    done: u64,
    /// Fired by the loop's partner ([`Relay`]): by which thread, where, and what it did before.
    by: Option<By>,
}

/// The partner thread that fired a release the loop handed over, the CPU it fired on, and what it
/// did before the look that found the release due: a late one is explained on that thread (one
/// due before the loop said it blocks is the loop's: it came to the partner late).
#[derive(Clone, Copy, Debug)]
pub(super) struct By {
    pub(super) tid: i32,
    pub(super) cpu: u32,
    pub(super) look: Look,
    /// How long its firing of the release before took (0: the first).
    pub(super) prev_work: u64,
}

/// The wait for release `r` of `action` ([`wait_for`], its stalls noted, a sleep's wake-up taught
/// to the margin), then its firing, watched by the heartbeat.
#[inline(always)]
fn wait_and_fire<C: Clock + ?Sized, A: Actions + ?Sized>(
    clock: &C,
    actions: &mut A,
    (r, action): (&sources::Release, u16),
    m: u64,
    (end, breather, heartbeat): (&mut LoopEnd, &mut Breather, &Heartbeat),
    from: Option<u64>,
    (steal, margin): (&mut StealWatch, &mut AutoMargin),
) -> (Waited, Firing) {
    let act_at = r.act_at;
    let w = wait_for(
        clock,
        &*actions,
        (act_at, action, r.data),
        m,
        end,
        breather,
        from,
        |at| steal.before_sleep(at, act_at, m, margin),
    );
    note_wait(&mut end.stalls, &w.wake, w.slept);
    if w.slept {
        note_wake(&w.wake, breather, end, margin, steal);
    }
    heartbeat.begin(action, w.wake.done);
    actions.spin_read(action, w.last_read());
    let started = clock.now();
    let fired = actions.fire(action, r.target, r.seq, r.data);
    let done = clock.now();
    heartbeat.end();
    if actions.short(action) {
        end.stalls.note(StallKind::Busy, started, done);
    }
    (
        w,
        Firing {
            started,
            fired,
            done,
            by: None,
        },
    )
}

/// The wait for a release at `act_at`: the clients on the loop's CPU let finish
/// ([`yield_to_clients`], counted in `end.yields`; `from` the loop's clock read before, for
/// `--explain`), then `before_sleep` given the clock, a kernel sleep to the margin `m` before
/// it, and the spin, which primes `action` where it asks to be ([`Actions::prime_lead`]).
///
/// When the loop is to sleep while a client on its CPU is still busy with a release due before
/// `act_at` and less than [`CLIENT_BACK_NS`] before the sleep's end, it blocks until that client
/// comes back first, instead of setting a timer that would preempt the client should it run late
/// (the loop outranks its clients); a client due earlier is left to finish while the loop sleeps,
/// and waited for when the loop wakes if still busy. A wait that found the client already back
/// did not block; the watchdog's own look at the thread's state covers that.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn wait_for<C: Clock + ?Sized, A: Actions + ?Sized>(
    clock: &C,
    actions: &A,
    (act_at, action, data): (u64, u16, &[u8]),
    m: u64,
    end: &mut LoopEnd,
    breather: &mut Breather,
    from: Option<u64>,
    before_sleep: impl FnOnce(u64),
) -> Waited {
    let prime = actions.prime_lead(action).map(|lead| Prime {
        lead,
        call: || actions.prime(action, data),
    });
    // A primed action is woken for at least its prime's lead before it.
    let m = prime.as_ref().map_or(m, |p| m.max(p.lead));
    let sleep_to = act_at.saturating_sub(m);
    let mut on_client = false;
    let mut now = clock.now();
    let to_sleep = now.saturating_add(MIN_SLEEP_NS) < sleep_to;
    let mut left_one = false;
    if to_sleep {
        // A client busy with a release due long before the wake-up: left to finish while the
        // loop sleeps, or (once too many of those were still busy then) waited for, which tells
        // as much: whether it came back before the loop's wake-up.
        let long_before = sleep_to.saturating_sub(CLIENT_BACK_NS);
        let early = actions.busy_here(0, long_before).is_some();
        let leave = leaves_clients(end);
        let left = if leave { long_before } else { 0 };
        on_client = yield_to_clients(clock, actions, (left, act_at), end, from);
        end.clients_left += u64::from(early);
        left_one = early && leave;
        if early && !leave && clock.now() >= sleep_to {
            end.clients_left_busy += 1;
        }
        if on_client {
            now = clock.now();
            breather.blocked(now);
        }
    }
    before_sleep(now);
    let before = clock.now();
    let wake = hybrid_until_primed(
        clock,
        act_at,
        m,
        || {
            let waited = yield_to_clients(clock, actions, (0, act_at), end, None);
            end.clients_left_busy += u64::from(left_one && waited);
            waited
        },
        prime,
    );
    let slept = before < wake.sleep_to;
    // A loop that spins to the release went from its read at the top to the spin's first read
    // with only short work: a stall there is logged like one in the spin (b60's 10 us plan: a
    // release 35 us late over 18 us of guest silence read `dispatcher` for want of it).
    if let (Some(top), false, false) = (from, to_sleep, slept) {
        end.stalls.note(StallKind::Busy, top, wake.woke);
    }
    Waited {
        slept,
        wake,
        on_client,
    }
}

/// How long after its instant a busy client still holds the loop back: one that has not come
/// back for its next release by then is stuck or at long work, and the loop's releases come first.
pub const CLIENT_WAIT_MAX_NS: u64 = 500_000;

/// Before it sleeps, the loop waits only for the clients on its CPU whose instants fall less than
/// this before its own wake-up. One due earlier has normally come back by then: the loop sleeps on
/// its timer and lets it finish, and looks again when it wakes (one still busy then is waited for
/// as before). Waiting on such a client instead had it wake the loop as it came back, which
/// preempted it: in b72's (d) disk 30 row, 29,778 of the clients' 59,800 switches out were that,
/// each followed by a stretch of the loop (p50 28 us) on the clients' CPU.
pub const CLIENT_BACK_NS: u64 = 50_000;

/// Whether the loop still leaves clients due long before its wake-up to finish while it sleeps
/// ([`CLIENT_BACK_NS`]): not once more than one in this many of those it left was still busy
/// when it woke. Clients with long work after their instants would otherwise take the loop's
/// timer in the middle of it and then wake the loop as they come back; the loop then waits for
/// every busy client before it sleeps, as it did before the twentieth session.
pub const CLIENTS_LEFT_BUSY_ONE_IN: u64 = 20;

/// See [`CLIENTS_LEFT_BUSY_ONE_IN`].
fn leaves_clients(end: &LoopEnd) -> bool {
    end.clients_left_busy
        .saturating_mul(CLIENTS_LEFT_BUSY_ONE_IN)
        <= end.clients_left
}

/// Before sleeping or spinning to `act_at`, let a client on the loop's CPU that is still busy
/// with a release due in `[left, act_at)` finish with it: block until it comes back for its next
/// release (it wakes the loop as it does), at most until `act_at`. The loop (FIFO 90) outranks
/// its clients (FIFO 80): measured under disk load, when an interrupt delayed a client on the
/// loop's CPU by 20-40 us its instant fell inside the loop's spin for the next hand-over, which
/// held it 100-240 us more (`dispatcher` at 438 of 853 late releases of kurt-periodic's (c) disk
/// 20). Counts each wait in `end.yields`; returns whether it waited.
///
/// A wait the loop came back from after its timeout is logged in `end.stalls` as a timer's, from the
/// timeout to its first clock read after: where the trace shows the guest silent while that
/// timer was due (and nothing woke the loop), or the loop back on its CPU before that read,
/// `--explain` reads the host's. Measured (seventh session): a client on the loop's CPU "ran"
/// 365 us past its instant with no guest event while the wait's 155 us timer was due, and 1.9-5.7
/// ms stretches after a client woke the loop read `dispatcher`.
///
/// From `from`, the loop's clock read before (the top of the loop, after its bookkeeping), to the
/// read after its first question it did only short work, logged as such: a client handed a
/// release waits for that stretch, and one the guest's trace shows silent is the host's
/// (measured, eighth session: a (d) client handed over 183 us early waited 279 us of silence on
/// its CPU for the loop to block, which read `dispatcher` for want of the loop's reads there).
/// So is its way into the wait until it blocks (a futex call that arms a timer) and back from
/// it, logged from the read before the wait to the one after when the client came back later
/// than twice the bound past its instant (ninth session: 137 us of silence between the loop's last read
/// and the futex call's first event, with the client handed its release waiting).
fn yield_to_clients<C: Clock + ?Sized, A: Actions + ?Sized>(
    clock: &C,
    actions: &A,
    (left, act_at): (u64, u64),
    end: &mut LoopEnd,
    mut from: Option<u64>,
) -> bool {
    let mut waited = false;
    let mut due = None;
    // The read before the last wait, and the instant of the client it waited for.
    let mut asked: Option<(u64, u64)> = None;
    loop {
        let busy = actions.busy_here(left, act_at);
        let now = clock.now();
        if let Some(from) = from.take() {
            end.stalls.note(StallKind::Busy, from, now);
        }
        if let Some(due) = due.take().filter(|&due| now > due) {
            end.stalls.note(StallKind::Timer, due, now);
        }
        // Past twice the bound: with the bound alone, the client's read, acknowledgement and
        // wake-up of the loop crossed it at almost every release of (d) 30 (3,700-4,300 stalls in
        // a 1.2 s row, where a loop keeps 16,384).
        let late = end.stalls.threshold().saturating_mul(2);
        if let Some((at, _)) = asked.take().filter(|&(_, t)| now > t.saturating_add(late)) {
            end.stalls.note(StallKind::Busy, at, now);
        }
        let Some((t, action)) = busy.filter(|&(t, _)| now < t.saturating_add(CLIENT_WAIT_MAX_NS))
        else {
            return waited;
        };
        let until = act_at.min(t.saturating_add(CLIENT_WAIT_MAX_NS));
        if until <= now.saturating_add(MIN_SLEEP_NS) {
            return waited;
        }
        due = Some(until);
        asked = Some((now, t));
        actions.wait_client(action, until - now);
        end.yields += 1;
        waited = true;
    }
}

/// A partner's breather is taken before a release at least this far off: one the loop reaches
/// later than that (an interrupt held it) is fired first, and the breather comes before the next.
/// Handed over, it was fired late wherever the partner's CPU was not ready for it: 10.3 us late in
/// one of four runs of the 10 us plan, the loop past a 7 us tick and the partner inside a 14 us
/// one on its own CPU.
pub const PARTNER_GAP_MIN_NS: u64 = 5_000;
/// ... for at most this long past the breather's due, so a loop that never has the gap still
/// breathes through its partner.
pub const PARTNER_DEFER_MAX_NS: u64 = 1_000_000;

/// How long a loop that handed its partner releases blocks on its own timer. Not the timed
/// breather's 20 us: on this VM a timer that short often ended before the loop had left its CPU
/// (its wake-up found it still running, which is no block: `partner::timed_block` tries again),
/// and in one of those runs every one did, for 4 s (eighteenth session). A plain C loop at FIFO 98
/// left its CPU in all but 13 of 2,000 futex waits of 20 us, and all but 1 of 2,000 of 50 us.
/// The partner fires the releases due meanwhile.
pub const RELAY_BLOCK_NS: u64 = 50_000;

/// The most releases one breather hands the partner: the one it lands on and those after it.
pub const RELAY_MAX: usize = 32;
/// ... within this much of the first. The loop came back from a breather 20-120 us after it
/// blocked here, longer where a kernel worker ran in it. With 100 us, a 10 us plan's loop came
/// back after its partner had fired all 8 releases it held, and fired the next one 12 us late
/// (b65, the sixteenth session).
pub const RELAY_AHEAD_NS: u64 = 300_000;

/// A release taken from [`Sources`] for a breather's partner, fired by it or not (yet).
struct Held<'e> {
    r: sources::Release<'e>,
    fired: Option<Firing>,
}

/// A breather before release `r` of `action`: woken by the partner where it stands by for one
/// without room, else a timed pause. Either is a wait the loop chose: one that ran past the
/// release is a stall. Where any thread may fire the action ([`Actions::relay`]), the partner is
/// handed `r` and the releases of the same action that follow it ([`RELAY_MAX`],
/// [`RELAY_AHEAD_NS`]), taken from `sources` into `held`, and fires each at its instant while the
/// loop is not back. Returns whether it was: `r` is then the first held.
fn breathe<'e, C: Clock + ?Sized, A: Actions + ?Sized>(
    clock: &C,
    breather: &mut Breather,
    end: &mut LoopEnd,
    (r, action): (&sources::Release<'e>, u16),
    actions: &mut A,
    (sources, cfg, slots, held): (
        &mut Sources,
        &LoopConfig<'e>,
        &[SlotSpec],
        &mut VecDeque<Held<'e>>,
    ),
) -> bool {
    let from = clock.now();
    let act_at = r.act_at;
    let partnered = breather.take_partnered();
    let handed = partnered && actions.relay(action).is_some();
    let breathed = if !partnered {
        Breathed::default()
    } else if !handed {
        breather.partner_breathe(None)
    } else {
        take_ahead(sources, cfg, slots, &*actions, *r, held);
        let a = actions.relay(action).expect("relayable");
        let at = held[0].r.act_at;
        let mut k: usize = 0;
        // The partner's thread and CPU, read once it fired its first (a system call after it).
        let mut partner = None;
        let mut fire = |mut look: Look| {
            // How long the partner's firing before this one took (its own work, when the look
            // says it was busy).
            let prev_work = k
                .checked_sub(1)
                .and_then(|j| held[j].fired.as_ref())
                .map_or(0, |f| f.done.saturating_sub(f.started));
            let h = &mut held[k];
            let started = loop {
                let t = clock.now();
                if t >= h.r.act_at {
                    break t;
                }
                look = Look {
                    last_read: t,
                    busy: false,
                    ..look
                };
                std::hint::spin_loop();
            };
            let fired = a.fire(h.r.target, h.r.seq, h.r.data);
            let done = clock.now();
            let (tid, cpu) = *partner.get_or_insert_with(punctual_explain::here);
            h.fired = Some(Firing {
                started,
                fired,
                done,
                // Due before the loop said it blocks: late by the loop's way into the breather.
                by: (h.r.target >= look.took).then_some(By {
                    tid,
                    cpu,
                    look,
                    prev_work,
                }),
            });
            k += 1;
            held.get(k).map(|h| h.r.act_at)
        };
        // The loop comes back on its own timer: the partner fires its releases meanwhile, and a
        // wake-up call would hold it (partner.rs).
        breather.partner_breathe(Some(Relay {
            at,
            fire: &mut fire,
            back_in: RELAY_BLOCK_NS,
        }))
    };
    // The partner's wake-up is when the loop's was due: before it the loop idled by its own
    // choice (`dispatcher`), after it its CPU had to bring it back.
    let due = if let Some(woke_at) = breathed.woke_at {
        end.breathers_partnered += 1;
        woke_at.clamp(from, clock.now())
    } else {
        clock.pause(BREATHER_NS);
        from + BREATHER_NS
    };
    end.breathers += 1;
    end.relayed += held.iter().filter(|h| h.fired.is_some()).count() as u64;
    let woke = clock.now();
    breather.blocked(woke);
    if woke > act_at {
        end.stalls.note(StallKind::Timer, due, woke);
    }
    handed
}

/// Take `r` and the releases of its action that follow it within [`RELAY_AHEAD_NS`] (at most
/// [`RELAY_MAX`] in all, none of a task that moves its phase, none past the run's end) from
/// `sources` into `held`, as if each was fired on time.
fn take_ahead<'e, A: Actions + ?Sized>(
    sources: &mut Sources,
    cfg: &LoopConfig<'e>,
    slots: &[SlotSpec],
    actions: &A,
    r: sources::Release<'e>,
    held: &mut VecDeque<Held<'e>>,
) {
    let action = slots[r.slot].action;
    let mut cur = r;
    loop {
        // Fired at its instant, nothing after it is missed.
        sources.advance(cfg, &slots[cur.slot], &cur, cur.act_at, actions);
        held.push_back(Held {
            r: cur,
            fired: None,
        });
        if held.len() >= RELAY_MAX {
            return;
        }
        match sources.next(cfg, slots, actions) {
            Some(n)
                if slots[n.slot].action == action
                    && !slots[n.slot].movable
                    && n.target < cfg.end
                    && n.act_at <= r.act_at.saturating_add(RELAY_AHEAD_NS) =>
            {
                cur = n
            }
            _ => return,
        }
    }
}

/// The margin `m` the loop sleeps to before a release `gap` away, or `u64::MAX` when it spins
/// through (counted in `spun`): with the automatic margin, closer than the kernel can wake the loop
/// (and within what the CPU's budget allows each release), where a sleep would only make the
/// release late, or closer than [`LoopConfig::spin_below`].
#[inline(always)]
fn spin_margin(cfg: &LoopConfig, margin: &AutoMargin, m: u64, gap: u64, spun: &mut u64) -> u64 {
    let auto = matches!(cfg.margin, MarginPolicy::Auto);
    let dense = gap <= margin.needed().saturating_add(MIN_SLEEP_NS) && gap <= cfg.margin_cap;
    if auto && (dense || gap <= cfg.spin_below) {
        *spun += 1;
        u64::MAX
    } else {
        m
    }
}

/// The margin of a release before the loop has either slept or spun through one (`first`): the
/// kernel's wake-up latency is not learnt yet, so an automatic margin leaves room.
fn first_margin(cfg: &LoopConfig, m: u64, first: bool) -> u64 {
    if first && matches!(cfg.margin, MarginPolicy::Auto) {
        m.max(FIRST_MARGIN_NS.min(cfg.margin_cap))
    } else {
        m
    }
}

/// `--explain`: where the wait for a release stalled. A wake-up within the margin is only the
/// kernel's usual latency (on this VM about 20 us, at every sleep): only one that came after the
/// instant is kept, from when the timer was due; the spin's longest step; and its prime call.
#[inline(always)]
fn note_wait(stalls: &mut StallLog, w: &punctual_time::sleep::Wake, slept: bool) {
    if slept && w.woke_late() {
        stalls.note(StallKind::Timer, w.sleep_to, w.woke);
    }
    stalls.note(StallKind::Busy, w.longest_step.0, w.longest_step.1);
    if let Some((from, to)) = w.primed {
        stalls.note(StallKind::Busy, from, to);
    }
}

/// What a kernel sleep's wake-up says: the loop blocked until it woke; one on time teaches the
/// margin; a late one is counted and left to `steal` to judge before the loop next sleeps
/// (reading the stolen time never delays a release, nor a client handed one: [`StealWatch`]).
fn note_wake(
    w: &punctual_time::sleep::Wake,
    breather: &mut Breather,
    end: &mut LoopEnd,
    margin: &mut AutoMargin,
    steal: &mut StealWatch,
) {
    if w.woke <= w.sleep_to {
        return;
    }
    breather.blocked(w.woke);
    if w.woke_late() {
        end.woke_late += 1;
        steal.pending = Some(w.sleep_latency());
        return;
    }
    margin.observe(w.sleep_latency());
}

/// When a loop that has not blocked for a long time (dense releases) takes a short breather, so
/// lower-priority work on its CPU (kernel threads) gets to run, and RLIMIT_RTTIME and the
/// watchdog see the loop block: where no release falls (the next one at least the breather and
/// the kernel's wake-up away) when the plan has such room; in a plan without any, in the widest
/// gap seen since the loop last blocked, or at once woken by the partner ([`crate::partner`]) when
/// it stands by (told when the breather is due and whether the loop saw room, by plain stores; one
/// not ready when due defers the breather, at most until twice overdue); and at once when twice
/// overdue. A breather that lands on a release makes it late by the loop's own doing
/// (`--explain`'s `dispatcher`).
struct Breather<'a> {
    every: Option<u64>,
    last_block: u64,
    /// The widest gap between releases since the loop last blocked.
    widest: u64,
    /// Where the watchdog reads when the loop last blocked.
    heartbeat: &'a Heartbeat,
    partner: Option<&'a dyn crate::partner::Breath>,
    /// The first release is yet to come: the way to it is the run's lead-in, not a gap of the
    /// plan (a loop that spun through it would otherwise wait for room that never comes).
    first: bool,
    /// The breather [`Breather::due`] said yes to is the partner's.
    partnered: bool,
}

impl<'a> Breather<'a> {
    fn new(
        every: Option<u64>,
        now: u64,
        heartbeat: &'a Heartbeat,
        partner: Option<&'a dyn crate::partner::Breath>,
    ) -> Breather<'a> {
        let b = Breather {
            every,
            last_block: now,
            widest: 0,
            heartbeat,
            partner,
            first: true,
            partnered: false,
        };
        b.tell_due();
        b
    }

    /// Whether the breather [`Breather::due`] chose is the partner's (asked once).
    fn take_partnered(&mut self) -> bool {
        std::mem::take(&mut self.partnered) && self.partner.is_some()
    }

    /// Take the partner's breather, handing it `relay` ([`crate::partner::Breath::breathe`]).
    fn partner_breathe(&self, relay: Option<Relay<'_>>) -> Breathed {
        self.partner
            .map_or_else(Breathed::default, |p| p.breathe(relay))
    }

    /// The longest sleep: [`SLEEP_SLICE_NS`], or the interval between breathers when shorter.
    #[inline(always)]
    fn slice(&self) -> u64 {
        self.every.map_or(SLEEP_SLICE_NS, |e| e.min(SLEEP_SLICE_NS))
    }

    /// The loop blocked (slept in the kernel) until `at`.
    #[inline(always)]
    fn blocked(&mut self, at: u64) {
        self.last_block = at;
        self.widest = 0;
        self.heartbeat.blocked(at);
        self.tell_due();
    }

    /// Tell the partner when the next breather is due.
    #[inline(always)]
    fn tell_due(&self) {
        if let (Some(p), Some(every)) = (self.partner, self.every) {
            p.due_at(self.last_block.saturating_add(every));
        }
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
        // A loop that will sleep before the release blocks anyway (and such a gap is no room to
        // wait for: the sleep starts a new count).
        if gap >= m {
            return false;
        }
        if !std::mem::take(&mut self.first) {
            self.widest = self.widest.max(gap);
        }
        if !roomy_seen && self.widest >= room {
            if let Some(p) = self.partner {
                p.room();
            }
        }
        let unblocked = now.saturating_sub(self.last_block);
        if unblocked <= every {
            return false;
        }
        if gap >= room {
            return true;
        }
        let overdue = unblocked > every.saturating_mul(2);
        // No room since the loop last blocked: the partner's breather (short: at once) once it
        // stands by, a timed one when twice overdue; without a partner, a timed one in the widest
        // gap. The partner's breather waits for a release at least [`PARTNER_GAP_MIN_NS`] away
        // (for at most [`PARTNER_DEFER_MAX_NS`]): the loop fires one due sooner itself, as it
        // would hand it over late.
        if let (Some(p), false) = (self.partner, roomy_seen) {
            let spared =
                gap >= PARTNER_GAP_MIN_NS || unblocked > every.saturating_add(PARTNER_DEFER_MAX_NS);
            self.partnered = spared && p.ready();
            return self.partnered || overdue;
        }
        overdue || (!roomy_seen && gap >= self.widest)
    }
}

/// The CPU's stolen time as the loop last read it, and the late wake-up it is yet to judge by it.
///
/// Reading it (`/proc/stat`) is a system call: 3 us at the median pinned at FIFO 90 here, 156 us
/// at the 99.9th percentile and 384 us at most (against 54 us and 159 us for 5 us of plain
/// spinning), and longer with more CPUs and interrupts to sum. So the loop reads it only before a
/// sleep, once the clients on its CPU had their turn: after a hand-over to one of them, the
/// client waits for every microsecond the loop keeps its CPU.
struct StealWatch<'a> {
    source: Option<&'a dyn StolenTime>,
    seen: u64,
    read_at: u64,
    /// The last release's kernel wake-up came this late after its timer: judged before the next
    /// sleep.
    pending: Option<u64>,
    /// Late wake-ups during which the hypervisor took the CPU.
    stolen_wakes: u64,
}

impl<'a> StealWatch<'a> {
    fn new(source: Option<&'a dyn StolenTime>, now: u64) -> Self {
        StealWatch {
            source,
            seen: source.map_or(0, |s| s.total_ns()),
            read_at: now,
            pending: None,
            stolen_wakes: 0,
        }
    }

    /// Before the loop sleeps to a release at `act_at` with the margin `m` (its clients had their
    /// turn): the late wake-up left to judge is judged where the loop will sleep (the read
    /// shortens the sleep, not the release), and the reading refreshed where the sleep has room.
    #[inline(always)]
    fn before_sleep(&mut self, now: u64, act_at: u64, m: u64, margin: &mut AutoMargin) {
        let room = act_at.saturating_sub(now);
        if room > m.saturating_add(MIN_SLEEP_NS) {
            self.judge(now, margin);
        }
        if room > STEAL_READ_ROOM_NS {
            self.refresh(now);
        }
    }

    /// A late wake-up while the hypervisor held the CPU says nothing about the kernel: the
    /// margin does not chase it (no margin covers stolen time); any other teaches it.
    fn judge(&mut self, now: u64, margin: &mut AutoMargin) {
        match self.pending.take() {
            Some(_) if self.moved(now) => self.stolen_wakes += 1,
            Some(l) => margin.observe(l),
            None => {}
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

#[cfg(test)]
mod tests;
