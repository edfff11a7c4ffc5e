//! Re-phasing during a run (issue 16, item 6). `--avoid-interference` places automatic offsets away
//! from what a 0.5 s watch saw; interference that starts later, or whose period is longer than the
//! watch, then hits one task at the same phase release after release. The dispatch loop keeps, per
//! task that may move, a window of its last releases; when enough of them are late and the late ones
//! recur at a fixed spacing, the task's phase moves by a step that is no simple fraction of its
//! period. Everything here is fixed-size: it runs inside the loop and allocates nothing.

use crate::slot::SlotSpec;
use punctual_plan::admission::PhaseCosts;

/// A release later than this counts as late here (missed releases too).
pub const LATE_NS: u64 = 10_000;
/// Releases in the sliding window (the low bits of one `u64`).
pub const WINDOW: u32 = 50;
/// Late releases the window must hold before their pattern counts: 20 % of it. Below that a move
/// costs more (a gap of 1.4 periods, a phase admission control never saw) than it can save.
pub const MIN_LATE: u32 = 10;
/// The longest spacing looked for: at 20 % late, interference that hits every fifth release.
pub const MAX_SPACING: u32 = 5;
/// At most this many moves per task and run.
pub const MAX_MOVES: u32 = 3;
/// The step, as a share of the period: 1 - 1/φ. Its multiples modulo 1 never repeat and stay
/// evenly spread, so repeated moves do not come back to a phase already hit (a step of 1/4 or 1/2
/// would, and would fall on interference at a harmonic of the period).
pub const STEP: f64 = 0.381_966_011_250_105;
/// Multiples of the step a move tries before staying put because each would collide with another task.
const TRIES: u64 = 8;
/// Tenths: the share of the releases at the spacing that must be late, and the share of the late
/// releases that must fall there (8 of 10 each).
const CLASS_TENTHS: u32 = 8;

const fn class_mask(d: u32, r: u32) -> u64 {
    let mut m = 0u64;
    let mut i = r;
    while i < WINDOW {
        m |= 1 << i;
        i += d;
    }
    m
}

const CLASSES: usize = (MAX_SPACING * (MAX_SPACING + 1) / 2) as usize;

/// Every residue class of the window's bit positions for spacings 1 to [`MAX_SPACING`].
const CLASS_MASKS: [u64; CLASSES] = {
    let mut t = [0u64; CLASSES];
    let mut n = 0;
    let mut d = 1;
    while d <= MAX_SPACING {
        let mut r = 0;
        while r < d {
            t[n] = class_mask(d, r);
            n += 1;
            r += 1;
        }
        d += 1;
    }
    t
};

/// What the window says after a release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Stay,
    /// The late releases line up: move the task.
    Move,
    /// The first full window after a move is as late as before it: the lateness does not depend on
    /// the phase (a margin too small, a loaded CPU), so further moves cannot help.
    GiveUp,
}

/// One task's recent releases, late or not, by release index.
#[derive(Clone, Copy, Debug, Default)]
pub struct LateWindow {
    /// Bit `i`: release `newest - i` was late.
    bits: u64,
    newest: u64,
    first: u64,
    started: bool,
    /// Releases before this index were released at the phase before the last move.
    since: u64,
    /// The last release index dispatched (delegated actions report on it one release later).
    released: Option<u64>,
    moves: u32,
    /// No full window has been seen since the last move.
    fresh_move: bool,
    gave_up: bool,
}

impl LateWindow {
    /// Release `k` is being dispatched; returns the one before it (whose report a delegated action
    /// brings now).
    #[inline]
    pub fn released(&mut self, k: u64) -> Option<u64> {
        self.released.replace(k)
    }

    /// Release `k` was late (or not). Reports may come out of order (a wake client's arrives one
    /// release later than a missed release is counted).
    #[inline]
    pub fn observe(&mut self, k: u64, late: bool) {
        if k < self.since {
            return;
        }
        if !self.started {
            self.started = true;
            self.first = k;
            self.newest = k;
            self.bits = late as u64;
        } else if k > self.newest {
            let gap = k - self.newest;
            self.bits = if gap >= 64 { 0 } else { self.bits << gap };
            self.newest = k;
            self.bits |= late as u64;
        } else if late && self.newest - k < WINDOW as u64 {
            self.bits |= 1 << (self.newest - k);
        }
    }

    fn full(&self) -> bool {
        self.started && self.newest - self.first + 1 >= WINDOW as u64
    }

    /// At least [`MIN_LATE`] of the window's releases were late and they recur at a fixed spacing
    /// of at most [`MAX_SPACING`]: at that spacing, one residue class of release indices holds 80 %
    /// of the late releases and is itself 80 % late. Lateness from a loaded CPU or a slow kernel
    /// falls on every class alike and fails the first test unless nearly every release is late.
    pub fn aligned(&self) -> bool {
        let w = self.bits & ((1u64 << WINDOW) - 1);
        let late = w.count_ones();
        if late < MIN_LATE {
            return false;
        }
        CLASS_MASKS.iter().any(|&class| {
            let hit = (w & class).count_ones();
            hit * 10 >= class.count_ones() * CLASS_TENTHS && hit * 10 >= late * CLASS_TENTHS
        })
    }

    /// Whether to move the task now, judged after each observation; at most once per window,
    /// since a move starts the window afresh.
    #[inline]
    pub fn verdict(&mut self) -> Verdict {
        if self.gave_up || !self.full() {
            return Verdict::Stay;
        }
        let aligned = self.aligned();
        if self.fresh_move {
            self.fresh_move = false;
            if aligned {
                self.gave_up = true;
                return Verdict::GiveUp;
            }
            return Verdict::Stay;
        }
        if aligned && self.moves < MAX_MOVES {
            Verdict::Move
        } else {
            Verdict::Stay
        }
    }

    /// The task moved; its releases from index `next` on follow the new phase.
    pub fn moved(&mut self, next: u64) {
        self.moves += 1;
        self.fresh_move = true;
        self.restart(next);
    }

    /// Starts the window afresh at release `next` (no clear phase to move to: look again a
    /// window later rather than at every release).
    pub fn restart(&mut self, next: u64) {
        self.started = false;
        self.bits = 0;
        self.since = next;
    }

    pub fn moves(&self) -> u32 {
        self.moves
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Whether a task of period `p` at phase `a`, whose action takes `w`, keeps clear of one of period
/// `q` at phase `b` taking `v` (admission control's collision: a release due inside the other's
/// `[T, T + max(wcet, 1 us))`). The closest their releases come is the phases' distance modulo
/// gcd(p, q), on either side.
pub fn clear(a: u64, p: u64, w: Option<u64>, b: u64, q: u64, v: Option<u64>) -> bool {
    let g = gcd(p, q).max(1);
    let after = (a % g + g - b % g) % g;
    after >= v.unwrap_or(0).max(1_000) && g - after >= w.unwrap_or(0).max(1_000)
}

/// The shift of `slot` after one move: its current shift plus the first multiple of [`STEP`] (modulo
/// the period, so the phase moves forward by less than a period and no release is skipped) at which
/// it collides with no other periodic slot on the CPU, as they stand now. `None`: every try collides.
///
/// Two releases whose [`SlotSpec::lead_in`] is on one CPU collide when their spans there overlap
/// too, each release taken as `[instant - lead-in, instant + its own time)`: a (d) 20 row once had
/// one process 84 us late at 798 of its 1,000 releases, the loop spinning across its instant on
/// their CPU for the next process's hand-over.
pub fn next_shift(
    slot: usize,
    slots: &[SlotSpec],
    shifts: &[u64],
    avoid: Option<Avoid>,
) -> Option<u64> {
    let s = &slots[slot];
    let p = s.period?;
    let step = ((p as f64 * STEP) as u64).max(1);
    (1..=TRIES).find_map(|c| {
        let delta = (c * step) % p;
        let cand = shifts[slot] + delta;
        let free = slots
            .iter()
            .enumerate()
            .all(|(j, o)| j == slot || apart(s, s.offset + cand, o, o.offset + shifts[j]));
        (delta > 0 && free && quiet(avoid, s.offset + cand, p)).then_some(cand)
    })
}

/// The interference watched before the run and the run's start, which a move keeps away from.
pub type Avoid<'a> = (&'a punctual_plan::admission::Interference, u64);

/// A window of the watched interference came near at most this share of a phase's instants:
/// more is periodic interference (the tick at HZ comes near every other release of a 10 ms task
/// at 5 of its phases in every 2 ms), less is a stop that happened once.
pub const MOVE_NEAR_SHARE: f64 = 0.1;

/// Whether instants at `phase` (from the run's start) every `p` keep clear of the periodic
/// interference watched before the run. A move once put a (d) 30 process 5.8 us after a 4 ms
/// boundary every other period, where the tick fires 8-14 us past it on this VM: late 16-19 us at
/// 126 releases in 10 s (docs/benchmarks.md, b44).
fn quiet(avoid: Option<Avoid>, phase: u64, p: u64) -> bool {
    avoid.is_none_or(|(inf, start)| {
        inf.near_share(
            start.saturating_add(phase),
            p,
            punctual_plan::admission::AVOID_GUARD,
        ) <= MOVE_NEAR_SHARE
    })
}

/// Whether `slot`'s group moves with it: the movable tasks of its period whose clients share its
/// client's CPU ([`SlotSpec::lead_in`]), `slot` included.
pub fn in_group(slot: usize, slots: &[SlotSpec], j: usize) -> bool {
    let (s, o) = (&slots[slot], &slots[j]);
    let cpu = |t: &SlotSpec| t.lead_in.map(|(c, _)| c);
    j == slot || (o.movable && o.period == s.period && cpu(o).is_some() && cpu(o) == cpu(s))
}

/// When no shift of `slot` alone is clear ([`next_shift`]): one shift added to every task of its
/// group ([`in_group`]), so the clients on that CPU keep their spacing and leave a phase hit by
/// interference together. The first multiple of [`STEP`] of the group's spacing (the period over
/// its size) at which every task of the group is clear of the tasks that stay. `None`: alone, or
/// every try collides. With 30 clients spread over 10 ms at their lead caps there is no room for
/// one to move (a process sat on a 55 us stop the host made every 10 ms, late at 455 releases),
/// but the whole grid may turn by a share of the 333 us between them.
pub fn group_shift(
    slot: usize,
    slots: &[SlotSpec],
    shifts: &[u64],
    avoid: Option<Avoid>,
) -> Option<u64> {
    let s = &slots[slot];
    let p = s.period?;
    let n = (0..slots.len())
        .filter(|&j| in_group(slot, slots, j))
        .count() as u64;
    if n < 2 {
        return None;
    }
    let step = ((p / n) as f64 * STEP) as u64;
    (1..=TRIES).find_map(|c| {
        let delta = (c * step) % p;
        let free = (0..slots.len())
            .filter(|&j| in_group(slot, slots, j))
            .all(|j| {
                let a = slots[j].offset + shifts[j] + delta;
                quiet(avoid, a, p)
                    && slots.iter().enumerate().all(|(k, o)| {
                        in_group(slot, slots, k) || apart(&slots[j], a, o, o.offset + shifts[k])
                    })
            });
        (delta > 0 && free).then_some(delta)
    })
}

/// Whether task `s` at phase `a` keeps clear of task `o` at phase `b`: the actions' own time, and
/// their spans before the instant on a CPU both keep busy: a client's lead-in against another's
/// ([`SlotSpec::lead_in`]) or against the loop's spin for a hand-over elsewhere
/// ([`SlotSpec::loop_in`]). Two such spins are the loop's to order (its releases come one after
/// the other), and at their caps they would leave no room to move on a machine whose clients
/// have a CPU each. Not periodic: nothing to collide with.
fn apart(s: &SlotSpec, a: u64, o: &SlotSpec, b: u64) -> bool {
    let (Some(p), Some(q)) = (s.period, o.period) else {
        return true;
    };
    let span = |w: Option<u64>, before: u64| Some(w.unwrap_or(0).max(1_000) + before);
    let with = |sb: u64, ob: u64| {
        let (sb, ob) = (sb.min(p), ob.min(q));
        clear(
            a + p - sb,
            p,
            span(s.wcet, sb),
            b + q - ob,
            q,
            span(o.wcet, ob),
        )
    };
    let pairs = [
        (s.lead_in, o.lead_in),
        (s.lead_in, o.loop_in),
        (s.loop_in, o.lead_in),
    ];
    let mut shared = false;
    for (x, y) in pairs {
        if let (Some((x, sb)), Some((y, ob))) = (x, y) {
            if x == y {
                shared = true;
                if !with(sb, ob) {
                    return false;
                }
            }
        }
    }
    // With spans on one CPU, the actions' own times are inside them.
    shared || with(0, 0)
}

/// Late events of one stream at a fixed spacing (a replay's sends), by index, kept to see whether
/// they line up: interference with a period of `d` events sitting on one phase of them (on this
/// VM the host stops a vCPU for 55-70 us every 10 ms, drifting against the guest's clock: in one
/// replay trace 184 of 259 late sends in 2 s were one send in 20, the 10 ms's).
#[derive(Clone, Copy, Debug, Default)]
pub struct LateEvents {
    ring: [u64; EVENT_RING],
    len: usize,
    next: usize,
}

/// Late events [`LateEvents`] keeps.
pub const EVENT_RING: usize = 16;
/// Of them, how many must fall on one spacing's class, among its last [`EVENT_RING`] members:
/// half of those late. A send late by chance (1 in 100 here) puts 8 in one class of 16 about
/// never; a stop sitting on the class makes nearly all of its members late.
pub const EVENT_LINED: usize = 8;
/// The longest spacing looked for, in events (a 10 ms period at 10 us apart).
pub const EVENT_MAX_SPACING: u64 = 1_000;

impl LateEvents {
    /// Event `k` was late (events come in increasing order). Returns the smallest spacing `d`
    /// (2 or more) at which the late events kept line up: over the span they cover (at most
    /// [`EVENT_RING`] of the class), [`EVENT_LINED`] or more are `k - j * d`, at least half of
    /// that class was late, and the other events were late less than a quarter as often (a slow
    /// stream, late at every event, is late in every class alike).
    pub fn late(&mut self, k: u64) -> Option<u64> {
        self.ring[self.next] = k;
        self.next = (self.next + 1) % EVENT_RING;
        self.len = (self.len + 1).min(EVENT_RING);
        if self.len < EVENT_LINED {
            return None;
        }
        let kept = &self.ring[..self.len];
        let oldest = kept.iter().copied().min().unwrap_or(k);
        let lined = |d: u64| {
            let lo = oldest.max(k.saturating_sub((EVENT_RING as u64 - 1) * d));
            let (n, members) = (k - lo + 1, (k - lo) / d + 1);
            let within = kept.iter().filter(|&&e| e >= lo && e <= k).count() as u64;
            let hits = kept
                .iter()
                .filter(|&&e| e >= lo && e <= k && (k - e).is_multiple_of(d))
                .count() as u64;
            hits >= EVENT_LINED as u64
                && hits * 2 >= members
                && (within - hits) * 4 * members < hits * (n - members)
        };
        kept.iter()
            .filter_map(|&e| k.checked_sub(e))
            .filter(|&d| (2..=EVENT_MAX_SPACING).contains(&d))
            .filter(|&d| lined(d))
            .min()
    }

    /// Forget the late events kept (the stream moved: they say nothing of its new phase).
    pub fn clear(&mut self) {
        self.len = 0;
        self.next = 0;
    }
}

/// The shift (from the stream's start, `current` now) for the rest of a stream of events
/// `spacing` apart whose late ones line up: forward by a multiple of [`STEP`] of the spacing
/// (modulo it, the first `TRIES`, at least a quarter of the spacing from the old phase) whose
/// instants keep clear of the periodic interference watched before the run (near at most
/// [`MOVE_NEAR_SHARE`] of them), the one of least cost (the first without a watch). `avoid`:
/// the watch's costs by phase of the spacing, computed before the run (this runs inside the
/// dispatch loop), and the stream's start. The cost counts the stretch before each instant too:
/// after one of b54's moves, made when only the guard counted, the late sends came one in 8, the
/// tick's 4 ms. `None`: every try comes near it.
pub fn stream_shift(current: u64, spacing: u64, avoid: Option<(&PhaseCosts, u64)>) -> Option<u64> {
    let step = ((spacing as f64 * STEP) as u64).max(1);
    // At least a quarter of the spacing away from where the late ones were, on either side: a
    // step that comes back near the old phase (the eighth comes within 6 % of it) stays under
    // the stop that set the move off (a first version, least cost alone, hopped 28-45 us at a
    // time and moved 14 times in a minute).
    let far = |delta: u64| delta.min(spacing - delta) >= spacing / 4;
    let tries = (1..=TRIES)
        .map(|c| (c * step) % spacing)
        .filter(|&delta| delta > 0 && far(delta))
        .map(|delta| current.saturating_add(delta));
    match avoid {
        None => tries.take(1).next(),
        Some((costs, start)) => tries
            .map(|cand| (cand, costs.at(start.saturating_add(cand))))
            .filter(|(_, cost)| cost.near <= MOVE_NEAR_SHARE)
            .reduce(|best, next| if next.1.cheaper(&best.1) { next } else { best })
            .map(|(cand, _)| cand),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(late: impl Fn(u64) -> bool, n: u64) -> LateWindow {
        let mut w = LateWindow::default();
        for k in 0..n {
            w.observe(k, late(k));
        }
        w
    }

    #[test]
    fn late_releases_at_a_fixed_spacing_are_aligned() {
        for d in 1..=MAX_SPACING as u64 {
            let w = window(|k| k % d == 2 % d, 50);
            assert!(w.aligned(), "every {d}th release late");
        }
        // Every 6th is under 20 %; nothing late is nothing.
        assert!(!window(|k| k % 6 == 0, 50).aligned());
        assert!(!window(|_| false, 50).aligned());
        // One miss in the class still lines up (80 %).
        assert!(window(|k| k % 3 == 0 && k != 9, 50).aligned());
    }

    #[test]
    fn scattered_late_releases_are_not_aligned() {
        // 30 % late, from a fixed xorshift sequence: in no window of 50 do they line up.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut w = LateWindow::default();
        for k in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            w.observe(k, x % 10 < 3);
            if k >= 50 {
                assert!(!w.aligned(), "release {k}: {:#x}", w.bits);
            }
        }
    }

    #[test]
    fn a_window_moves_once_then_gives_up_when_the_lateness_stays() {
        let mut w = LateWindow::default();
        let mut verdicts = vec![];
        for k in 0..200 {
            w.observe(k, true);
            let v = w.verdict();
            if v == Verdict::Move {
                w.moved(k + 1);
            }
            if v != Verdict::Stay {
                verdicts.push((k, v));
            }
        }
        assert_eq!(verdicts, vec![(49, Verdict::Move), (99, Verdict::GiveUp)]);
        assert_eq!(w.moves(), 1);
    }

    #[test]
    fn reports_on_releases_before_the_move_do_not_count_after_it() {
        let mut w = LateWindow::default();
        w.moved(100);
        w.observe(99, true);
        assert!(!w.started);
        w.observe(100, false);
        w.observe(101, true);
        w.observe(100, true);
        assert_eq!(w.bits, 0b11);
    }

    #[test]
    fn collisions_are_judged_modulo_the_common_divisor() {
        // 4 ms and 6 ms: releases come within gcd 2 ms of each other.
        assert!(!clear(
            1_000_000, 4_000_000, None, 3_000_000, 6_000_000, None
        ));
        assert!(clear(
            1_500_000, 4_000_000, None, 3_000_000, 6_000_000, None
        ));
        // 200 us of wcet on the earlier task: 150 us after it is a collision, 250 us is not.
        assert!(!clear(
            150_000,
            1_000_000,
            None,
            0,
            1_000_000,
            Some(200_000)
        ));
        assert!(clear(250_000, 1_000_000, None, 0, 1_000_000, Some(200_000)));
        assert!(!clear(
            0,
            1_000_000,
            Some(200_000),
            100_000,
            1_000_000,
            None
        ));
        assert!(clear(0, 1_000_000, Some(200_000), 900_000, 1_000_000, None));
    }

    fn spec(period: u64, offset: u64) -> SlotSpec {
        SlotSpec {
            name: "t".into(),
            action: 0,
            period: Some(period),
            offset,
            wcet: Some(100_000),
            miss: Default::default(),
            movable: true,
            lead_in: None,
            loop_in: None,
        }
    }

    #[test]
    fn a_move_skips_phases_near_the_periodic_interference_watched_before_the_run() {
        use punctual_plan::admission::Interference;
        const MS: u64 = 1_000_000;
        let start = 1_000 * MS;
        let one = [spec(10 * MS, 0)];
        let step = 3_819_660;
        // Plain, the first multiple of the step is taken.
        assert_eq!(next_shift(0, &one, &[0], None), Some(step));
        // A tick watched for 0.5 s before the start, 15 us every 4 ms just where the first
        // candidate's releases fall every other period: the next one is taken.
        let ticks = (0..125).map(|k| (start - 500 * MS + k * 4 * MS + step - 5_000, 15_000));
        let tick = Interference::new(start - 500 * MS, start, ticks);
        assert_eq!(
            next_shift(0, &one, &[0], Some((&tick, start))),
            Some(2 * step)
        );
        // A stop watched once near the first candidate does not keep the task from it.
        let once = Interference::new(start - 500 * MS, start, [(start - 10 * MS + step, 15_000)]);
        assert_eq!(next_shift(0, &one, &[0], Some((&once, start))), Some(step));
        // Interference near every candidate: no move.
        let everywhere = (0..500_000).map(|k| (start - 500 * MS + k * 1_000, 100));
        let all = Interference::new(start - 500 * MS, start, everywhere);
        assert_eq!(next_shift(0, &one, &[0], Some((&all, start))), None);
    }

    #[test]
    fn a_move_steps_by_the_golden_share_and_skips_phases_that_collide() {
        let one = [spec(4_000_000, 0)];
        assert_eq!(next_shift(0, &one, &[0], None), Some(1_527_864));
        // Another 4 ms task right at 1.528 ms: the next multiple (3.056 ms) is taken.
        let two = [spec(4_000_000, 0), spec(4_000_000, 1_527_864)];
        assert_eq!(next_shift(0, &two, &[0, 0], None), Some(3_055_728));
        // Moves add up (the phase goes forward by less than a period each time).
        assert_eq!(
            next_shift(0, &one, &[3_055_728], None),
            Some(3_055_728 + 1_527_864)
        );
        // Beside a 150 us task whose action takes 100 us, no phase is clear: no move.
        let busy = [spec(4_000_000, 0), spec(150_000, 0)];
        assert_eq!(next_shift(0, &busy, &[0, 0], None), None);
    }

    /// 20 wake clients at 10 ms, 500 us apart, on one CPU: the move a lone task would take (to
    /// 3.82 ms, 180 us before another client's instant) is refused while their lead-ins (a
    /// client's lead cap, with the loop's margin cap when the clients share the loop's CPU) reach
    /// across; with short lead-ins it is taken, and clients on other CPUs never collide.
    #[test]
    fn a_move_keeps_clear_of_other_clients_lead_ins_on_their_cpu() {
        let p = 10_000_000;
        let clients = |cpu: usize, before: u64| -> Vec<SlotSpec> {
            (0..20)
                .map(|i| SlotSpec {
                    wcet: None,
                    lead_in: Some((cpu, before)),
                    loop_in: None,
                    ..spec(p, i * 500_000)
                })
                .collect()
        };
        let shifts = [0u64; 20];
        let step = (p as f64 * STEP) as u64;
        // Lead-ins of 10 us: the first step (3.82 ms, 320 us past a client) is clear.
        assert_eq!(
            next_shift(0, &clients(1, 10_000), &shifts, None),
            Some(step)
        );
        // 250 us of lead and 125 us of margin: no phase between clients 500 us apart has
        // room for two such spans, so the task stays.
        assert_eq!(next_shift(0, &clients(1, 375_000), &shifts, None), None);
        // 200 us each: the tries land 320, 139, 459 us past a client (within 200 us of one
        // side), then 279 us: 221 us before the next, clear.
        assert_eq!(
            next_shift(0, &clients(1, 200_000), &shifts, None),
            Some((4 * step) % p)
        );
        // The other clients on another CPU than the moving one: their lead-ins do not count.
        let mut mixed = clients(0, 375_000);
        mixed[0].lead_in = Some((1, 375_000));
        assert_eq!(next_shift(0, &mixed, &shifts, None), Some(step));
        // Not placed: only the actions' own time counts, as before.
        let mut unplaced = clients(1, 375_000);
        for s in &mut unplaced {
            s.lead_in = None;
        }
        assert_eq!(next_shift(0, &unplaced, &shifts, None), Some(step));
    }

    /// The loop's spin before a hand-over to a client on another CPU is on the loop's CPU: a
    /// client there may not move into it.
    #[test]
    fn a_move_keeps_clear_of_the_loops_spin_for_a_client_elsewhere() {
        let p = 10_000_000;
        let step = (p as f64 * STEP) as u64;
        // Client 0 on the loop's CPU 1; client 1 on CPU 0, whose hand-over the loop spins for
        // on CPU 1 up to 300 us before its instant, 150 us after where the first try puts 0.
        let here = SlotSpec {
            wcet: None,
            lead_in: Some((1, 100_000)),
            ..spec(p, 0)
        };
        let elsewhere = SlotSpec {
            wcet: None,
            lead_in: Some((0, 100_000)),
            loop_in: Some((1, 300_000)),
            movable: false,
            ..spec(p, step + 150_000)
        };
        let shifts = [0u64; 2];
        assert_eq!(
            next_shift(0, &[here.clone(), elsewhere.clone()], &shifts, None),
            Some((2 * step) % p)
        );
        // Without the loop's span, only the clients' own CPUs counted: the first try was taken.
        let unseen = SlotSpec {
            loop_in: None,
            ..elsewhere.clone()
        };
        assert_eq!(next_shift(0, &[here, unseen], &shifts, None), Some(step));
        // Two spins of the loop's own are its to order: a client on a third CPU moves into it.
        let third = SlotSpec {
            wcet: None,
            lead_in: Some((2, 100_000)),
            loop_in: Some((1, 300_000)),
            ..spec(p, 0)
        };
        assert_eq!(
            next_shift(0, &[third, elsewhere], &shifts, None),
            Some(step)
        );
    }

    /// The same 20 clients at their caps: none may move alone, but the group turns together by
    /// a share of the 500 us between them, unless a task that stays is in the way.
    #[test]
    fn a_group_with_no_room_for_one_moves_together() {
        let p = 10_000_000;
        let mut d: Vec<SlotSpec> = (0..20)
            .map(|i| SlotSpec {
                wcet: None,
                lead_in: Some((1, 375_000)),
                loop_in: None,
                ..spec(p, i * 500_000)
            })
            .collect();
        let shifts = [0u64; 21];
        assert_eq!(next_shift(0, &d, &shifts[..20], None), None);
        let step = (500_000.0 * STEP) as u64;
        assert_eq!(group_shift(0, &d, &shifts[..20], None), Some(step));
        assert!((0..20).all(|j| in_group(0, &d, j)));
        // A fixed task (not movable, not a client, 100 us of its own) 1 ns after where the first
        // turn puts client 0: that turn collides, the second (382 us) is clear of it.
        d.push(SlotSpec {
            movable: false,
            lead_in: None,
            loop_in: None,
            ..spec(p, step + 1)
        });
        assert!(!in_group(0, &d, 20));
        assert_eq!(group_shift(0, &d, &shifts, None), Some(2 * step));
        // Alone on its CPU: no group.
        let mut alone = d.clone();
        for s in alone.iter_mut().skip(1) {
            s.lead_in = Some((0, 375_000));
        }
        assert_eq!(group_shift(0, &alone, &shifts, None), None);
    }

    #[test]
    fn a_window_without_a_clear_phase_is_judged_again_a_window_later() {
        let mut w = window(|_| true, 50);
        assert_eq!(w.verdict(), Verdict::Move);
        w.restart(50);
        w.observe(50, true);
        assert_eq!(w.verdict(), Verdict::Stay);
        for k in 51..99 {
            w.observe(k, true);
        }
        assert_eq!(w.verdict(), Verdict::Stay, "49 releases");
        w.observe(99, true);
        assert_eq!(w.verdict(), Verdict::Move);
        assert_eq!(w.moves(), 0);
    }

    #[test]
    fn late_events_lined_up_at_one_spacing_are_found_and_scattered_ones_are_not() {
        // Every 20th event late from 1,000 on: found at the 8th, with its spacing.
        let mut l = LateEvents::default();
        let found: Vec<Option<u64>> = (0..8).map(|j| l.late(1_000 + 20 * j)).collect();
        assert_eq!(&found[..7], &[None; 7]);
        assert_eq!(found[7], Some(20));
        // With others late between them (one every other period), still found.
        let mut l = LateEvents::default();
        let mut got = None;
        for j in 0..8u64 {
            assert_eq!(got, None);
            if j % 2 == 1 {
                l.late(2_000 + 20 * j + 7);
            }
            got = l.late(2_000 + 20 * j + 10);
        }
        assert_eq!(got, Some(20));
        // Scattered late events (no common spacing), and consecutive ones: nothing.
        let mut l = LateEvents::default();
        for k in [
            3u64, 50, 51, 130, 211, 300, 417, 512, 640, 701, 833, 900, 1_001,
        ] {
            assert_eq!(l.late(k), None, "{k}");
        }
        let mut l = LateEvents::default();
        assert!((0..40u64).all(|k| l.late(k).is_none()));
        // One class, but fewer than half of its members late (2 in 5): nothing.
        let mut l = LateEvents::default();
        assert!([0u64, 2, 5, 7, 10, 12, 15, 17, 20, 22, 25, 27, 30, 32]
            .iter()
            .all(|j| l.late(j * 20).is_none()));
        // Cleared after a move: it takes eight more.
        let mut l = LateEvents::default();
        (0..8u64).for_each(|j| {
            l.late(20 * j);
        });
        l.clear();
        assert!((8..15u64).all(|j| l.late(20 * j).is_none()));
        assert_eq!(l.late(20 * 15), Some(20));
    }

    #[test]
    fn a_stream_moves_forward_by_a_step_and_keeps_off_the_watched_tick() {
        // 500 us apart, at phase 100 us: the first step (191 us) is clear without a watch.
        assert_eq!(
            stream_shift(100_000, 500_000, None),
            Some(100_000 + 190_983)
        );
        // A tick at 4 ms boundaries + 280-340 us: the first step lands on it every eighth
        // send, so the next clear multiple is taken.
        let t0 = 1_000_000_000u64;
        let ticks = (0..125).map(|k| (t0 + k * 4_000_000 + 280_000, 60_000));
        let inf = punctual_plan::admission::Interference::new(t0, t0 + 500_000_000, ticks);
        let guard = punctual_plan::admission::AVOID_GUARD;
        let costs = inf.phase_costs(500_000, guard);
        let s = stream_shift(100_000, 500_000, Some((&costs, t0))).unwrap();
        assert!(s > 100_000 && s < 600_000, "{s}");
        assert_ne!(s, 100_000 + 190_983);
        assert!(inf.near_share(t0 + s, 500_000, punctual_plan::admission::AVOID_GUARD) <= 0.1);
        // Of the steps a quarter of the spacing or more away, the first lands on the tick, the
        // fourth within the guard after it, the seventh 97 us after it (where the loop wakes and
        // primes the send); the sixth leaves 406 us and is taken.
        let lead = punctual_plan::admission::AVOID_LEAD_SPAN;
        assert!(inf.lead_share(t0 + 100_000 + 336_881, 500_000, lead) > 0.0);
        assert_eq!(s, 100_000 + 145_898);
        assert_eq!(inf.lead_share(t0 + s, 500_000, lead), 0.0);
        // Never back near the old phase: of all the steps, the chosen one is a quarter of the
        // spacing or more from it, with a watch or without.
        for cur in (0..500_000).step_by(7_919) {
            for avoid in [None, Some((&costs, t0))] {
                if let Some(n) = stream_shift(cur, 500_000, avoid) {
                    let d = (n - cur) % 500_000;
                    assert!(d.min(500_000 - d) >= 125_000, "{cur} -> {n}");
                }
            }
        }
        // Nowhere clear: no move.
        let all =
            punctual_plan::admission::Interference::new(t0, t0 + 500_000_000, [(t0, 500_000_000)]);
        let all = all.phase_costs(500_000, guard);
        assert_eq!(stream_shift(0, 500_000, Some((&all, t0))), None);
    }
}
