//! The dispatch loop on a manual clock with fake actions.

use super::*;
use crate::rephase;
use punctual_explain::{LateRelease, Waiter};
use punctual_plan::MissPolicy;
use punctual_time::ManualClock;
use std::sync::Arc;

/// Fake actions: each firing is logged with the clock time and may take `work` ns.
struct Fake {
    clock: ManualClock,
    log: Vec<(u16, u64, u64, u64)>,     // (action, target, seq, at)
    work: Vec<u64>,                     // per action
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
    /// After the nth firing, the loop's bookkeeping stalls this long (the clock jumps when the
    /// loop next asks whether the action is delegated, after the action's end).
    stall_after: std::cell::Cell<Option<(u64, u64)>>,
    /// After the nth firing, the loop's way into its next wait stalls this long (the clock jumps
    /// when the loop asks for the action's prime lead, after its read at the top).
    stall_before_wait: std::cell::Cell<Option<(u64, u64)>>,
    /// A client on the loop's CPU with its instant here: it acknowledges once it has read its
    /// clock there ([`crate::budget::CLIENT_READ_NS`] past it); every question the loop asked,
    /// with when and the answer.
    client_here: Option<u64>,
    /// The client never acknowledges.
    client_stuck: bool,
    /// A wait for the client comes back this long after its timeout.
    wait_overshoot: u64,
    /// The first question that finds the client busy takes this long (the loop's way to its wait
    /// stalls there).
    stall_in_question: std::cell::Cell<Option<u64>>,
    /// The client comes back this long after reading its clock at its instant.
    back_late: u64,
    /// The client has a release every this long from `client_here` on, each handed to it half
    /// this before its instant (`None`: the one release).
    client_every: Option<u64>,
    asked: std::cell::RefCell<Vec<(u64, Option<u64>)>>,
    /// The one action is handed to a breath partner ([`Actions::relay`]): its firings there.
    relay_to: Option<RelayLog>,
}

/// A relayable action on the manual clock: each firing logged as (target, seq, at).
struct RelayLog {
    clock: ManualClock,
    log: Vec<(u64, u64, u64)>,
}

impl Fire for RelayLog {
    fn fire(&mut self, target: u64, seq: u64, _: &[u8]) -> Fired {
        self.log.push((target, seq, self.clock.now()));
        Fired {
            error: false,
            previous: None,
        }
    }
}

impl Fake {
    /// The instant of the release the client beside the loop is busy with at `now`.
    fn client_instant_at(&self, now: u64) -> Option<u64> {
        let t0 = self.client_here?;
        let t = match self.client_every {
            None => t0,
            Some(p) => t0 + (now + p / 2).checked_sub(t0)? / p * p,
        };
        (self.client_stuck || now < t + crate::budget::CLIENT_READ_NS + self.back_late).then_some(t)
    }

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
            stall_after: std::cell::Cell::new(None),
            stall_before_wait: std::cell::Cell::new(None),
            client_here: None,
            client_stuck: false,
            wait_overshoot: 0,
            stall_in_question: std::cell::Cell::new(None),
            back_late: 0,
            client_every: None,
            asked: Default::default(),
            relay_to: None,
        }
    }
}

impl Actions for Fake {
    fn relay(&mut self, _: u16) -> Option<&mut dyn Fire> {
        self.relay_to.as_mut().map(|r| r as &mut dyn Fire)
    }
    fn lead(&self, action: u16) -> u64 {
        self.leads
            .get(action as usize)
            .copied()
            .unwrap_or(self.lead)
    }
    fn delegated(&self, _: u16) -> bool {
        if let Some((nth, ns)) = self.stall_after.get() {
            if self.counts.iter().sum::<u64>() == nth + 1 {
                self.stall_after.set(None);
                self.clock.advance(ns);
            }
        }
        self.delegated
    }
    fn prime_lead(&self, _: u16) -> Option<u64> {
        if let Some((nth, ns)) = self.stall_before_wait.get() {
            if self.counts.iter().sum::<u64>() == nth + 1 {
                self.stall_before_wait.set(None);
                self.clock.advance(ns);
            }
        }
        None
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
    fn busy_here(&self, from: u64, before: u64) -> Option<(u64, u16)> {
        let now = self.clock.now();
        let said = self
            .client_instant_at(now)
            .filter(|&t| (from..before).contains(&t));
        self.asked.borrow_mut().push((now, said));
        if said.is_some() {
            if let Some(ns) = self.stall_in_question.take() {
                self.clock.advance(ns);
            }
        }
        said.map(|t| (t, 0))
    }
    fn wait_client(&self, _: u16, timeout_ns: u64) {
        // The client comes back once it has read its clock at its instant (the loop, blocked,
        // no longer holds its CPU).
        let now = self.clock.now();
        let back = self
            .client_instant_at(now)
            .or(self.client_here)
            .filter(|_| !self.client_stuck)
            .map_or(u64::MAX, |t| {
                t + crate::budget::CLIENT_READ_NS + self.back_late
            });
        let waited = back.saturating_sub(now);
        if waited < timeout_ns {
            self.clock.advance(waited);
        } else {
            self.clock.advance(timeout_ns + self.wait_overshoot);
        }
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
            last_read: None,
            client_read: None,
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
        lead_in: None,
        loop_in: None,
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
        partner: None,
        shielded: false,
        spin_below: 0,
        steal: None,
        avoid: None,
        events: &[],
        event_slot: &[None],
    }
}

fn run<C: Clock + ?Sized>(
    clock: &C,
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
fn run_capped<C: Clock + ?Sized>(
    clock: &C,
    slots: &[SlotSpec],
    fake: &mut Fake,
    events: &[Event],
    event_slot: &[Option<usize>],
    end: u64,
    margin: MarginPolicy,
    margin_cap: u64,
) -> Run {
    let cfg = LoopConfig {
        margin,
        margin_cap,
        events,
        event_slot,
        ..loop_cfg(1_000_000, end)
    };
    run_as(clock, &cfg, slots, fake)
}

/// `slots` on one CPU as `cfg` says, without `--explain`; what each slot published matches what
/// it counted.
fn run_as<C: Clock + ?Sized>(
    clock: &C,
    cfg: &LoopConfig,
    slots: &[SlotSpec],
    fake: &mut Fake,
) -> Run {
    let mut stats: Vec<SlotStats> = slots
        .iter()
        .map(|_| SlotStats::new(fake.delegated))
        .collect();
    let progress: Vec<SlotProgress> = slots.iter().map(|_| SlotProgress::default()).collect();
    let e = dispatch(
        clock,
        cfg,
        slots,
        &mut stats,
        fake,
        &AtomicBool::new(false),
        &progress,
        &Heartbeat::default(),
        StallLog::off(),
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
            lead_in: None,
            loop_in: None,
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
    run_explained_end(clock, slots, fake, end, margin).0
}

/// [`run_explained`], with what the loop returned.
fn run_explained_end(
    clock: &ManualClock,
    slots: &[SlotSpec],
    fake: &mut Fake,
    end: u64,
    margin: MarginPolicy,
) -> (Vec<SlotStats>, LoopEnd) {
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
    let stalls = stall_log_for(&stats);
    let end = dispatch(
        clock,
        &cfg,
        slots,
        &mut stats,
        fake,
        &AtomicBool::new(false),
        &progress,
        &Heartbeat::default(),
        stalls,
    );
    (stats, end)
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
    let caps = crate::wake_lead_caps(&plan, &placed, &[0], &[]);
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
    let cfg = LoopConfig {
        interval: period,
        margin_cap,
        shielded,
        steal,
        ..loop_cfg(1_000_000, 1_000_000 + runs_for)
    };
    run_one_as(clock, &cfg, |_| {})
}

/// One task of `cfg.interval` on a CPU as `cfg` says, its actions set up by `setup`.
fn run_one_as(clock: &ManualClock, cfg: &LoopConfig, setup: impl FnOnce(&mut Fake)) -> (Run, Fake) {
    let slots = vec![task("a", 0, cfg.interval, 0, None, MissPolicy::Skip)];
    let mut fake = Fake::new(clock, 1);
    setup(&mut fake);
    let run = run_as(clock, cfg, &slots, &mut fake);
    (run, fake)
}

/// A clock whose sleeps wake 5 us after their timer, those due in `due` `late` after it.
fn waking_late_in(due: std::ops::Range<u64>, late: u64) -> ManualClock {
    ManualClock::with_wake_latency(0, 10, move |t| if due.contains(&t) { late } else { 5_000 })
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
            &clock,
            &cfg,
            &slots,
            &mut stats,
            &mut fake,
            &stop,
            &progress,
            &hb,
            StallLog::off(),
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
    let slots = event_slot();
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
        StallLog::off(),
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
    let mut slots = vec![task("w", 0, 2_000_000, 0, None, MissPolicy::Skip)];
    slots[0].movable = true;
    let (r, fake) = wake_clients_for_400ms(&slots, client);
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

/// `slots`, each its own wake action (by index) whose client reports what `client` says, for
/// 400 ms on the auto margin with a 50 us lead and 15 us wake-ups.
fn wake_clients_for_400ms(slots: &[SlotSpec], client: fn(u64) -> Ack) -> (Run, Fake) {
    let clock = ManualClock::with_wake_latency(0, 20, |_| 15_000);
    let mut fake = Fake::new(&clock, slots.len());
    fake.delegated = true;
    fake.lead = 50_000;
    fake.client = Some(client);
    let none = vec![None; slots.len()];
    let end = 1_000_000 + 400_000_000;
    let r = run(
        &clock,
        slots,
        &mut fake,
        &[],
        &none,
        end,
        MarginPolicy::Auto,
    );
    (r, fake)
}

/// Four wake clients on one CPU, 500 us apart in a 2 ms period, each spanning 400 us before its
/// instant there: none can move alone. The one whose phase the client is taken at moves with
/// its group, all four by the same share of their spacing, and is on time after.
#[test]
fn a_wake_group_with_no_room_for_one_turns_together() {
    fn client(target: u64) -> Ack {
        if (target - 1_000_000).is_multiple_of(2_000_000) {
            Ack::Done {
                lateness: 120_000,
                wake_latency: Some(1),
                woke_late: true,
            }
        } else {
            Ack::Done {
                lateness: 3_000,
                wake_latency: Some(1),
                woke_late: false,
            }
        }
    }
    let slots: Vec<SlotSpec> = (0..4u16)
        .map(|i| SlotSpec {
            movable: true,
            lead_in: Some((1, 400_000)),
            loop_in: None,
            ..task(
                "w",
                i,
                2_000_000,
                i as u64 * 500_000,
                None,
                MissPolicy::Skip,
            )
        })
        .collect();
    let (r, fake) = wake_clients_for_400ms(&slots, client);
    let turn = (500_000.0 * rephase::STEP) as u64;
    assert_eq!(r.stats[0].rephased, 1);
    let offsets: Vec<Option<u64>> = r.stats.iter().map(|s| s.offset_ns).collect();
    let want: Vec<Option<u64>> = (0..4).map(|i| Some(i * 500_000 + turn)).collect();
    assert_eq!(offsets, want, "all four turned by {turn} ns");
    assert!(r.stats[1..].iter().all(|s| s.rephased == 0));
    // Every hand-over came its lead before its instant: the others' releases already due when the
    // group turned were acted on at the new phase too, not `turn` early.
    let early = fake
        .log
        .iter()
        .map(|l| l.1.saturating_sub(l.3))
        .max()
        .unwrap();
    assert!(early <= 50_000, "a hand-over {early} ns before its instant");
    // After the turn, no release falls at the phase the client is taken at.
    let last = fake
        .log
        .iter()
        .rposition(|l| (l.1 - 1_000_000) % 2_000_000 == 0);
    let moved = fake.log.iter().position(|l| l.0 == 0 && l.1 % 500_000 != 0);
    assert!(last < moved, "{last:?} {moved:?}");
    assert_eq!(
        r.stats
            .iter()
            .map(|s| s.lateness.missed_periods())
            .sum::<u64>(),
        0
    );
}

/// One slot `e` that events release, action 0.
fn event_slot() -> Vec<SlotSpec> {
    vec![SlotSpec {
        name: "e".into(),
        action: 0,
        period: None,
        offset: 0,
        wcet: None,
        miss: MissPolicy::Skip,
        movable: false,
        lead_in: None,
        loop_in: None,
    }]
}

/// `events` from slot `e` on `clock` (reading `manual` underneath), `every` between breathers,
/// the plan starting at `start`, a fixed 50 us margin.
fn run_events<C: Clock>(
    clock: &C,
    manual: &ManualClock,
    events: &[Event],
    every: Option<u64>,
    start: u64,
    hb: &Heartbeat,
) -> (LoopEnd, Vec<SlotStats>) {
    let slots = event_slot();
    let mut fake = Fake::new(manual, 1);
    let mut stats = vec![SlotStats::new(false)];
    let progress = vec![SlotProgress::default()];
    let cfg = LoopConfig {
        margin: MarginPolicy::Fixed(50_000),
        breather_every: every,
        events,
        event_slot: &[Some(0)],
        ..loop_cfg(start, u64::MAX)
    };
    let e = dispatch(
        clock,
        &cfg,
        &slots,
        &mut stats,
        &mut fake,
        &AtomicBool::new(false),
        &progress,
        hb,
        StallLog::off(),
    );
    (e, stats)
}

/// One second of events 10 us apart on a manual clock, `every` between breathers.
fn back_to_back(every: Option<u64>, hb: &Heartbeat) -> (LoopEnd, Vec<SlotStats>) {
    let clock = ManualClock::new(0, 1_000);
    let events: Vec<Event> = (0..100_000u64)
        .map(|i| Event::new(i * 10_000, 0, &[]))
        .collect();
    run_events(&clock, &clock, &events, every, 1_000_000, hb)
}

#[test]
fn breathers_are_taken_when_the_loop_never_blocks() {
    let (e, stats) = back_to_back(Some(100_000_000), &Heartbeat::default());
    // One second of back-to-back events: about one breather per 100 ms.
    assert!((8..=11).contains(&e.breathers), "{}", e.breathers);
    assert_eq!(stats[0].releases, 100_000);
}

/// The watchdog reads when the loop last blocked from its heartbeat: a dense loop's breathers are
/// its blocks, and one that never breathes last blocked before its first release.
#[test]
fn the_heartbeat_says_when_the_loop_last_blocked() {
    let hb = Heartbeat::default();
    let (e, _) = back_to_back(Some(100_000_000), &hb);
    let last = hb.blocked_at.load(Ordering::Relaxed);
    // The last breather fell in the last ~200 ms of the second of releases (1 ms lead-in).
    assert!(e.breathers > 0);
    assert!((800_000_000..=1_010_000_000).contains(&last), "{last}");
    let hb = Heartbeat::default();
    let (e, _) = back_to_back(None, &hb);
    assert_eq!(e.breathers, 0);
    // It slept towards the first release (1 ms, 50 us margin), then spun through the rest.
    let last = hb.blocked_at.load(Ordering::Relaxed);
    assert!((900_000..1_000_000).contains(&last), "{last}");
}

/// `events` (from 1 ms on) on a shielded CPU whose loop spins through them all (it never blocks
/// by itself), the shortest period `interval`, breathers due every 100 ms, with `partner` when
/// given. Returns what the loop said and each firing; every event was released.
fn spin_through(
    clock: &ManualClock,
    events: &[Event],
    interval: u64,
    partner: Option<&FakePartner>,
) -> (LoopEnd, Fake) {
    spin_through_relaying(clock, events, interval, partner, false)
}

/// [`spin_through`], the action handed to the partner for its breathers when `relay`.
fn spin_through_relaying(
    clock: &ManualClock,
    events: &[Event],
    interval: u64,
    partner: Option<&FakePartner>,
    relay: bool,
) -> (LoopEnd, Fake) {
    let slots = event_slot();
    let mut fake = Fake::new(clock, 1);
    if relay {
        fake.relay_to = Some(RelayLog {
            clock: clock.clone(),
            log: vec![],
        });
    }
    let mut stats = vec![SlotStats::new(false)];
    let progress = vec![SlotProgress::default()];
    let cfg = LoopConfig {
        interval,
        breather_every: Some(100_000_000),
        partner: partner.map(|p| p as &dyn crate::partner::Breath),
        shielded: true,
        spin_below: SHIELDED_SPIN_BELOW_NS,
        events,
        event_slot: &[Some(0)],
        ..loop_cfg(1_000_000, u64::MAX)
    };
    let e = dispatch(
        clock,
        &cfg,
        &slots,
        &mut stats,
        &mut fake,
        &AtomicBool::new(false),
        &progress,
        &Heartbeat::default(),
        StallLog::new(10_000),
    );
    assert_eq!(stats[0].releases, events.len() as u64);
    (e, fake)
}

/// Bursts of events 10 us apart, then 150 us of room, over and over for 1 s ([`spin_through`]).
fn bursts_with(partner: Option<&FakePartner>, clock: &ManualClock) -> (LoopEnd, Fake) {
    let mut events = Vec::new();
    let mut t = 0;
    while t < 1_000_000_000 {
        for k in 0..20 {
            events.push(Event::new(t + k * 10_000, 0, &[]));
        }
        t += 20 * 10_000 + 150_000;
    }
    spin_through(clock, &events, 100_000, partner)
}

#[test]
fn breathers_go_where_no_release_falls_when_the_plan_has_such_room() {
    let clock = ManualClock::new(0, 100);
    let (e, fake) = bursts_with(None, &clock);
    assert!((8..=11).contains(&e.breathers), "{}", e.breathers);
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
        StallLog::off(),
    );
    assert_eq!(stats[0].releases, 0);
}

/// A 10 us task for 3 ms from 1 ms on, spun through, whose loop's bookkeeping stalls 40 us after
/// the 6th firing; `setup` adjusts the actions first.
fn stalled_dense(setup: impl FnOnce(&mut Fake)) -> (Vec<SlotStats>, Fake) {
    let (stats, _, fake) = stalled_dense_end(setup);
    (stats, fake)
}

/// [`stalled_dense`], with what the loop returned.
fn stalled_dense_end(setup: impl FnOnce(&mut Fake)) -> (Vec<SlotStats>, LoopEnd, Fake) {
    let clock = ManualClock::new(0, 10);
    let slots = vec![task("a", 0, 10_000, 0, None, MissPolicy::Skip)];
    let mut fake = Fake::new(&clock, 1);
    fake.stall_after.set(Some((5, 40_000)));
    setup(&mut fake);
    let end = 1_000_000 + 3_000_000;
    let (stats, le) = run_explained_end(&clock, &slots, &mut fake, end, MarginPolicy::Auto);
    (stats, le, fake)
}

/// Issue 26: the loop logs where it stalled in its own short work, whoever's window that falls
/// in (`--explain` finds the guest silent there): its bookkeeping stall, from the 6th action's
/// end, and nothing of its usual reads.
#[test]
fn the_loop_logs_a_stall_in_its_own_bookkeeping() {
    let (_, le, fake) = stalled_dense_end(|_| {});
    one_stall_after_the_sixth(le, &fake);
}

/// The loop logged one stall, `Busy`, of the 40 us its clock jumped, from the 6th action's end.
fn one_stall_after_the_sixth(le: LoopEnd, fake: &Fake) {
    let fired: Vec<u64> = fake.log.iter().map(|l| l.3).collect();
    let (stalls, dropped) = le.stalls.into_stalls();
    assert_eq!(dropped, 0);
    assert_eq!(stalls.len(), 1, "{stalls:?}");
    let s = stalls[0];
    assert_eq!(s.kind, punctual_explain::StallKind::Busy);
    assert!(s.to - s.from >= 40_000, "{s:?}");
    assert!(
        fired[5] <= s.from && s.from < fired[5] + 1_000,
        "{s:?} {fired:?}"
    );
}

/// A loop spinning through dense releases that stalls on its way from the top of the loop to its
/// spin (where the 10 us plan's one `dispatcher` release of b60 had no stall logged): the stall is
/// logged, from the top's read.
#[test]
fn the_loop_logs_a_stall_on_its_way_into_the_spin() {
    let (_, le, fake) = stalled_dense_end(|f| {
        f.stall_after.set(None);
        f.stall_before_wait.set(Some((5, 40_000)));
    });
    one_stall_after_the_sixth(le, &fake);
}

/// A wake-up that came after the instant is logged from when the timer was due; the wake-ups
/// within the margin (the kernel's usual latency) are not.
#[test]
fn the_loop_logs_a_wake_up_that_came_after_its_instant() {
    // 1 ms task; every wake-up 5 us after the timer, the one due just before 3 ms 60 us after.
    let clock = waking_late_in(2_900_000..3_000_000, 60_000);
    let slots = vec![task("a", 0, 1_000_000, 0, None, MissPolicy::Skip)];
    let mut fake = Fake::new(&clock, 1);
    let (_, le) = run_explained_end(
        &clock,
        &slots,
        &mut fake,
        6_000_000,
        MarginPolicy::Fixed(20_000),
    );
    let (stalls, _) = le.stalls.into_stalls();
    assert_eq!(stalls.len(), 1, "{stalls:?}");
    let s = stalls[0];
    assert_eq!(s.kind, punctual_explain::StallKind::Timer);
    assert_eq!(s.from, 3_000_000 - 20_000);
    assert!(s.to >= s.from + 60_000 && s.to < s.from + 61_000, "{s:?}");
}

/// Without `--explain` nothing is logged (and nothing allocated).
#[test]
fn without_explain_the_loop_logs_no_stall() {
    let clock = ManualClock::new(0, 10);
    let slots = vec![task("a", 0, 10_000, 0, None, MissPolicy::Skip)];
    let mut fake = Fake::new(&clock, 1);
    fake.stall_after.set(Some((5, 40_000)));
    let run = run(
        &clock,
        &slots,
        &mut fake,
        &[],
        &[],
        4_000_000,
        MarginPolicy::Auto,
    );
    assert!(run.stats[0].releases > 100);
    assert_eq!(run.end.stalls.into_stalls(), (Vec::new(), 0));
}

/// Issue 26: a release the loop reached late from its own bookkeeping (no spin: it was already
/// past the instant at the top of the loop) keeps where that bookkeeping began, the previous
/// action's end, with the run's usual bookkeeping time filled in after the loop.
#[test]
fn a_release_reached_late_from_the_loops_bookkeeping_keeps_where_it_began() {
    let (stats, fake) = stalled_dense(|_| {});
    let fired: Vec<u64> = fake.log.iter().map(|l| l.3).collect();
    let late = stats[0].late.records();
    let first = late.first().expect("the stall made a release late");
    let w = first
        .own_work
        .unwrap_or_else(|| panic!("reached from bookkeeping: {first:?}"));
    assert_eq!(w.kind, punctual_explain::WorkKind::Bookkeeping);
    assert!(w.at < first.target, "{w:?} {first:?}");
    assert!(
        fired[5] <= w.at && w.at < fired[5] + 1_000,
        "begins at the 6th action's end: {w:?}, fired at {}",
        fired[5]
    );
    assert!(first.last_read.is_none() && !first.behind, "{first:?}");
    // The usual stretch is the loop's few reads, far below the stall.
    assert!(w.usual < 1_000, "{w:?}");
    // The releases due during the stall were skipped: members of its chain, which take its cause
    // when explained (summary's chains), with nothing of their own.
    for r in &late[1..] {
        assert!(r.target <= first.actual && r.own_work.is_none(), "{r:?}");
    }
}

/// The same for a hand-over: the client's late report on the release the loop handed over late
/// from its bookkeeping carries that bookkeeping's start with the hand-over.
#[test]
fn a_hand_over_reached_late_from_the_loops_bookkeeping_keeps_where_it_began() {
    let (stats, _) = stalled_dense(|fake| {
        fake.delegated = true;
        // The client reports the 7th release (handed over after the stall) 60 us late, the rest
        // on time.
        fake.client = Some(|target| Ack::Done {
            lateness: if target == 1_060_000 { 60_000 } else { 7 },
            wake_latency: Some(1),
            woke_late: false,
        });
    });
    let late = stats[0].late.records();
    let r = late
        .iter()
        .find(|r| r.target == 1_060_000)
        .unwrap_or_else(|| panic!("the client's late report is kept: {late:?}"));
    let h = r.handover.expect("a hand-over");
    let w = h.own_work.expect("reached from bookkeeping");
    assert_eq!(w.kind, punctual_explain::WorkKind::Bookkeeping);
    assert!(w.at < h.planned && h.at > h.planned + 30_000, "{h:?}");
    assert!(w.usual < 1_000, "{w:?}");
}

/// The loop releasing every 1 ms from 1 ms (a `margin`) until `end`, beside a client on its CPU
/// with its instant at `instant` (busy with it until it has read its clock there; `None`: no
/// client); a `stuck` client never reads its clock. With every kernel sleep the loop took, from
/// and to.
fn beside_a_client(
    instant: Option<u64>,
    stuck: bool,
    end: u64,
    margin: MarginPolicy,
) -> (Fake, Run, Vec<(u64, u64)>) {
    beside_a_client_with(instant, end, margin, |f| f.client_stuck = stuck)
}

/// [`beside_a_client`], the fake client set up by `setup`.
fn beside_a_client_with(
    instant: Option<u64>,
    end: u64,
    margin: MarginPolicy,
    setup: impl FnOnce(&mut Fake),
) -> (Fake, Run, Vec<(u64, u64)>) {
    let clock = SleepLog {
        clock: ManualClock::with_wake_latency(0, 10, |_| 15_000),
        sleeps: Default::default(),
    };
    let slots = vec![task("a", 0, 1_000_000, 0, None, MissPolicy::Skip)];
    let mut fake = Fake::new(&clock.clock, 1);
    fake.client_here = instant;
    setup(&mut fake);
    let r = run(&clock, &slots, &mut fake, &[], &[None], end, margin);
    let sleeps = clock.sleeps.into_inner().unwrap();
    (fake, r, sleeps)
}

/// 40 us before the loop's second release, inside its 100 us spin.
const CLIENTS_INSTANT: u64 = 2_000_000 - 40_000;
const FIXED_100_US: MarginPolicy = MarginPolicy::Fixed(100_000);

#[test]
fn the_loop_lets_a_client_on_its_cpu_take_its_instant_before_spinning_across_it() {
    let (fake, _, sleeps) = beside_a_client(Some(CLIENTS_INSTANT), false, 3_500_000, FIXED_100_US);
    let t = CLIENTS_INSTANT;
    let back = t + crate::budget::CLIENT_READ_NS;
    let asked = fake.asked.borrow();
    // Before sleeping to its second release, the loop found the client still busy with a
    // release due first and waited for it instead of setting a timer that could fire over it
    // (the client late) or spinning across its instant; it asked again once the client had read
    // its clock and come back, and only then spun.
    let first = asked.iter().position(|a| a.1 == Some(t)).expect("asked");
    assert!(
        asked[first].0 >= 1_000_000 && asked[first].0 < 1_100_000,
        "{asked:?}"
    );
    let next = asked[first + 1];
    assert!(next.1.is_none() && next.0 >= back, "{asked:?}");
    assert!(
        sleeps
            .iter()
            .all(|&(from, to)| to <= 1_000_000 || from >= back),
        "a timer while the client was busy: {sleeps:?}"
    );
    // Its own release still went out on time, and the one after it was never held back.
    second_on_time(&fake);
    assert_eq!(
        asked.iter().filter(|a| a.1.is_some()).count(),
        1,
        "{asked:?}"
    );
}

#[test]
fn a_client_that_never_acknowledges_holds_the_loop_at_most_until_its_own_release() {
    let (fake, r, sleeps) = beside_a_client(Some(CLIENTS_INSTANT), true, 4_500_000, FIXED_100_US);
    assert_eq!(fake.log.len(), 4, "{:?}", fake.log);
    // Each release at its instant, give or take the loop's clock reads after its wait (10 ns each
    // on this clock).
    for (_, target, _, at) in &fake.log {
        assert!(*at >= *target && *at < target + 200, "{:?}", fake.log);
    }
    // It waited for the client (due 40 us before the second release) from its first release
    // until its second, and asked again when its wait ended. After it, the client's instant lay
    // far before the loop's next wake-up: the loop slept on its timer, the client free to run,
    // and when it woke the client had been busy longer than CLIENT_WAIT_MAX_NS past its instant,
    // so it never waited again.
    let asked = fake.asked.borrow();
    let ended = |at: u64| asked.iter().any(|a| a.0 >= at && a.0 < at + 1_000);
    assert!(ended(2_000_000), "{asked:?}");
    assert_eq!(r.end.yields, 1, "{asked:?}");
    assert!(
        sleeps
            .iter()
            .any(|&(from, to)| from > 2_000_000 && to == 2_900_000),
        "{sleeps:?}"
    );
    assert!(
        asked
            .iter()
            .any(|a| a.0 > 2_900_000 && a.1 == Some(CLIENTS_INSTANT)),
        "{asked:?}"
    );
}

/// `--explain`: a wait for a client that the loop came back from 30 us after its timeout (its
/// own release) is logged as a timer's, from the timeout to its first clock read after (where
/// the trace shows the guest silent while it was due, or the loop back on its CPU and silent,
/// the host held it); a wait the client ended in time is not.
#[test]
fn a_wait_for_a_client_that_ends_past_its_timeout_is_logged_as_a_stall() {
    for (stuck, logged) in [(true, 1), (false, 0)] {
        let clock = ManualClock::new(0, 10);
        let slots = vec![task("a", 0, 1_000_000, 0, None, MissPolicy::Skip)];
        let mut fake = Fake::new(&clock, 1);
        fake.client_here = Some(CLIENTS_INSTANT);
        fake.client_stuck = stuck;
        fake.wait_overshoot = 30_000;
        let (_, le) = run_explained_end(&clock, &slots, &mut fake, 2_500_000, FIXED_100_US);
        let (stalls, _) = le.stalls.into_stalls();
        let waits: Vec<_> = stalls.iter().filter(|s| s.from == 2_000_000).collect();
        assert_eq!(waits.len(), logged, "stuck {stuck}: {stalls:?}");
        if let Some(s) = waits.first() {
            assert_eq!(s.kind, punctual_explain::StallKind::Timer);
            assert!(s.to >= 2_030_000 && s.to < 2_031_000, "{s:?}");
        }
    }
}

/// `--explain`, the loop beside a client on its CPU (instant `CLIENTS_INSTANT`), with `setup`
/// applied: its `Busy` stalls, and when it first asked about the client and found it busy.
fn busy_stalls_beside_a_client(
    setup: impl FnOnce(&mut Fake),
) -> (Vec<punctual_explain::Stall>, u64) {
    let clock = ManualClock::new(0, 10);
    let slots = vec![task("a", 0, 1_000_000, 0, None, MissPolicy::Skip)];
    let mut fake = Fake::new(&clock, 1);
    fake.client_here = Some(CLIENTS_INSTANT);
    setup(&mut fake);
    let (_, le) = run_explained_end(&clock, &slots, &mut fake, 2_500_000, FIXED_100_US);
    let (stalls, _) = le.stalls.into_stalls();
    let asked = fake.asked.borrow();
    let question = asked.iter().find(|a| a.1.is_some()).expect("asked").0;
    let busy = stalls
        .into_iter()
        .filter(|s| s.kind == punctual_explain::StallKind::Busy)
        .collect();
    (busy, question)
}

/// `--explain`: from the top of the loop to its wait for a client on its CPU (which waits for the
/// loop to block) the loop does only short work; a stall there is logged, from the loop's read
/// at the top.
#[test]
fn the_loop_logs_a_stall_on_its_way_to_block_for_a_client() {
    for (stall, logged) in [(40_000, 1), (0, 0)] {
        let (busy, question) =
            busy_stalls_beside_a_client(|f| f.stall_in_question.set(Some(stall)));
        assert_eq!(busy.len(), logged, "stall {stall}: {busy:?} at {question}");
        if let Some(s) = busy.first() {
            assert!(s.from <= question && question - s.from < 1_000, "{s:?}");
            assert!(s.to >= question + stall, "{s:?} at {question}");
        }
    }
}

/// `--explain`: a client that came back late (twice the bound past its instant) may have waited
/// for the loop to block: the loop's way into its wait and back is logged, from its read before
/// the wait to the one after; a client back in time (its read, acknowledgement and the loop's
/// wake-up within that) logs nothing.
#[test]
fn the_loop_logs_its_wait_for_a_client_that_came_back_late() {
    for (late, logged) in [(20_000, 1), (10_000, 0), (0, 0)] {
        let (busy, question) = busy_stalls_beside_a_client(|f| f.back_late = late);
        let back = CLIENTS_INSTANT + crate::budget::CLIENT_READ_NS + late;
        assert_eq!(busy.len(), logged, "late {late}: {busy:?} at {question}");
        if let Some(s) = busy.first() {
            assert!(
                s.from >= question && s.from - question < 1_000,
                "{s:?} at {question}"
            );
            assert!(s.to >= back && s.to - back < 1_000, "{s:?}");
        }
    }
}

/// A steal meter that keeps when it was read.
struct ReadLog {
    clock: ManualClock,
    reads: std::cell::RefCell<Vec<u64>>,
}

impl StolenTime for ReadLog {
    fn total_ns(&self) -> u64 {
        self.reads.borrow_mut().push(self.clock.peek());
        0
    }
}

/// The loop reads its steal meter to refresh it before a long sleep and to judge a late wake-up,
/// before it sleeps, and never between the instant of a client on its CPU and that client's
/// return, where the read would hold the client.
#[test]
fn the_loop_reads_the_stolen_time_before_it_sleeps_never_over_a_clients_instant() {
    // A 3 ms task from 1 ms: the 52 ms release is the first after a refresh is due (50 ms), and
    // its wake-up comes 50 us after its instant; the client beside it has its instant at 52.5 ms,
    // far before the loop's next wake-up (54.9 ms), so the loop sleeps without waiting for it.
    let clock = waking_late_in(51_800_000..52_000_000, 150_000);
    let meter = ReadLog {
        clock: clock.clone(),
        reads: Default::default(),
    };
    let instant = 52_500_000;
    let cfg = LoopConfig {
        margin: FIXED_100_US,
        interval: 3_000_000,
        steal: Some(&meter),
        ..loop_cfg(1_000_000, 60_000_000)
    };
    let (Run { end, .. }, _) = run_one_as(&clock, &cfg, |f| f.client_here = Some(instant));
    assert_eq!((end.woke_late, end.woke_late_stolen), (1, 0));
    let back = instant + crate::budget::CLIENT_READ_NS;
    let reads = meter.reads.into_inner();
    assert!(
        reads.iter().all(|&r| !(instant..back).contains(&r)),
        "read over the client's instant: {reads:?}"
    );
    assert!(
        reads.iter().any(|&r| (52_000_000..54_900_000).contains(&r)),
        "not judged before the sleep: {reads:?}"
    );
}

/// A late wake-up is judged (the meter read) only where the loop will sleep: not before a
/// release it spins to at once, which the read would make late.
#[test]
fn a_late_wake_up_is_judged_where_the_loop_sleeps_not_before_a_release_due_at_once() {
    // Two 1 ms tasks 20 us apart from 1 ms; the wake-up for the 3 ms pair comes 30 us late, so
    // its second release is due as the first is done.
    let clock = waking_late_in(2_900_000..3_000_000, 130_000);
    let meter = ReadLog {
        clock: clock.clone(),
        reads: Default::default(),
    };
    let slots = vec![
        task("a", 0, 1_000_000, 0, None, MissPolicy::Skip),
        task("b", 1, 1_000_000, 20_000, None, MissPolicy::Skip),
    ];
    let mut fake = Fake::new(&clock, 2);
    let cfg = LoopConfig {
        margin: FIXED_100_US,
        steal: Some(&meter),
        ..loop_cfg(1_000_000, 5_000_000)
    };
    let Run { end, .. } = run_as(&clock, &cfg, &slots, &mut fake);
    assert_eq!(end.woke_late, 1);
    let second = fake
        .log
        .iter()
        .find(|l| l.0 == 1 && l.1 == 3_020_000)
        .expect("fired")
        .3;
    let reads = meter.reads.into_inner();
    assert!(
        !reads.iter().any(|&r| (2_900_000..second).contains(&r)),
        "read before the pair's second release ({second}): {reads:?}"
    );
    assert!(
        reads.iter().any(|&r| (second..3_900_000).contains(&r)),
        "not judged before the next sleep: {reads:?}"
    );
}

/// A manual clock that keeps every sleep: from when, to when it was asked to end.
struct SleepLog {
    clock: ManualClock,
    sleeps: std::sync::Mutex<Vec<(u64, u64)>>,
}

impl Clock for SleepLog {
    fn now(&self) -> u64 {
        self.clock.now()
    }

    fn sleep_until(&self, t: u64) {
        self.sleeps.lock().unwrap().push((self.clock.peek(), t));
        self.clock.sleep_until(t);
    }
}

#[test]
fn a_client_due_well_before_the_loops_wake_up_is_left_to_finish_while_the_loop_sleeps() {
    // The client's instant 500 us before the loop's second release, 400 us before its wake-up
    // (more than CLIENT_BACK_NS): the loop does not wait for it to come back (which would have it
    // woken by the client, preempting it) but sleeps to its margin at once; the client is back
    // when the loop wakes, and the release is on time.
    let t = 1_500_000;
    let (fake, r, sleeps) = beside_a_client(Some(t), false, 2_500_000, FIXED_100_US);
    assert!(
        sleeps.iter().any(|&(from, to)| from < t && to == 1_900_000),
        "{sleeps:?}"
    );
    assert_eq!(r.end.yields, 0);
    second_on_time(&fake);
}

#[test]
fn a_client_left_to_finish_and_still_busy_when_the_loop_wakes_is_waited_for() {
    // The same client, back 430 us late: still busy when the loop wakes from its timer, so the
    // loop waits for it there rather than spin over it, and still releases on time.
    let t = 1_500_000;
    let (fake, r, sleeps) =
        beside_a_client_with(Some(t), 2_500_000, FIXED_100_US, |f| f.back_late = 430_000);
    let back = t + crate::budget::CLIENT_READ_NS + 430_000;
    assert!(
        sleeps.iter().any(|&(from, to)| from < t && to == 1_900_000),
        "{sleeps:?}"
    );
    let asked = fake.asked.borrow();
    assert!(
        asked
            .iter()
            .any(|&(at, said)| at >= 1_900_000 && at < back && said == Some(t)),
        "{asked:?}"
    );
    assert_eq!(r.end.yields, 1);
    drop(asked);
    second_on_time(&fake);
}

/// A client with a release every 1 ms, 500 us before each of the loop's, coming back `back_late`
/// after its instant: the loop's run to 20 ms.
fn beside_a_periodic_client(back_late: u64) -> (Fake, Run) {
    let (fake, r, _) = beside_a_client_with(Some(1_500_000), 20_500_000, FIXED_100_US, |f| {
        f.client_every = Some(1_000_000);
        f.back_late = back_late;
    });
    (fake, r)
}

#[test]
fn a_periodic_client_that_is_back_long_before_the_loops_wake_up_never_wakes_it() {
    // Back 5 us after each instant, 395 us before the loop wakes: the loop leaves it every time
    // and never waits for it.
    let (fake, r) = beside_a_periodic_client(0);
    assert_eq!(r.end.yields, 0);
    assert!(r.end.clients_left >= 17, "{}", r.end.clients_left);
    assert_eq!(r.end.clients_left_busy, 0);
    for (_, target, _, at) in &fake.log {
        assert!(*at >= *target && *at < target + 200, "{:?}", fake.log);
    }
}

#[test]
fn a_periodic_client_still_busy_when_the_loop_wakes_is_waited_for_before_the_loop_sleeps() {
    // Back 430 us after each instant, 35 us after the loop's wake-up: the first time the loop
    // left it, it found it busy when it woke; from then on it waits for it before it sleeps
    // (its timer no longer lands in the client's work), and every release stays on time.
    let (fake, r) = beside_a_periodic_client(430_000);
    assert_eq!(r.end.clients_left_busy, r.end.clients_left);
    assert!(r.end.clients_left >= 17, "{}", r.end.clients_left);
    let asked = fake.asked.borrow();
    // Questions that found the client busy after the loop's wake-up (900 us into each period):
    // only in the first period it was left.
    let at_wake = asked
        .iter()
        .filter(|&&(at, said)| said.is_some() && at % 1_000_000 >= 900_000)
        .count();
    assert_eq!(at_wake, 1, "{asked:?}");
    drop(asked);
    for (_, target, _, at) in &fake.log {
        assert!(*at >= *target && *at < target + 200, "{:?}", fake.log);
    }
}

/// The loop's second release (due at 2 ms) went out within 100 ns of its instant.
fn second_on_time(fake: &Fake) {
    let second = fake.log[1];
    assert!(
        second.3 >= 2_000_000 && second.3 < 2_000_100,
        "{:?}",
        fake.log
    );
}

#[test]
fn waiting_for_a_client_teaches_the_margin_nothing() {
    // An automatic margin learns the kernel's wake-ups (15 us here). A wait for the client that
    // ends after the loop's planned wake-up (here at the loop's release: the client comes back
    // 3 us after it) is no kernel wake-up: the margin and the count of late wake-ups come out
    // as in the same run without the client. The loop waited once, before its second release
    // (until it); before its third the client was due long before the loop's wake-up, and back
    // by then.
    let (_, alone, _) = beside_a_client(None, false, 4_500_000, MarginPolicy::Auto);
    let (_, beside, _) = beside_a_client(
        Some(2_000_000 - 2_000),
        false,
        4_500_000,
        MarginPolicy::Auto,
    );
    assert_eq!(
        (beside.end.margin_ns, beside.end.woke_late),
        (alone.end.margin_ns, alone.end.woke_late)
    );
    assert_eq!(beside.end.yields, 1);
}

/// A loop waiting 1 s for its release blocks in slices no longer than its breathers' interval,
/// so the watchdog (threshold four times that) sees it block while it waits.
#[test]
fn a_long_wait_is_cut_at_the_breathers_interval() {
    for (every, longest) in [(Some(25_000_000), 25_000_000), (None, SLEEP_SLICE_NS)] {
        let clock = SleepLog {
            clock: ManualClock::new(0, 1_000),
            sleeps: Default::default(),
        };
        let events = [Event::new(1_000_000_000, 0, &[])];
        let hb = Heartbeat::default();
        let (_, stats) = run_events(&clock, &clock.clock, &events, every, 0, &hb);
        assert_eq!(stats[0].releases, 1);
        let sleeps = clock.sleeps.lock().unwrap();
        let most = sleeps.iter().map(|(from, to)| to - from).max().unwrap();
        assert!(
            most <= longest && most > longest / 2,
            "{most} ns against {longest}"
        );
        assert!(sleeps.len() as u64 >= 1_000_000_000 / longest);
    }
}

/// A breath partner on the manual clock: it stands by `ready_after` after the stand-by lead
/// before a breather due without room, and a breather it wakes the loop from lasts `lasts` (its
/// wake-up sent halfway).
struct FakePartner {
    clock: ManualClock,
    ready_after: u64,
    lasts: u64,
    due: AtomicU64,
    roomy: AtomicBool,
    rooms: AtomicU64,
    served: AtomicU64,
    /// For each breather handed releases: how far off the first was (ns; negative: past).
    ahead: std::sync::Mutex<Vec<i64>>,
    /// In each breather, the partner is held this long at the instant of the release it fires
    /// `.0`-th: by its own work (`.2`: firing the one before ran long) or with its CPU stopped.
    held_at: Option<(usize, u64, bool)>,
    /// The loop says it blocks this long after the breather began (its way in was slow).
    said_after: u64,
    /// It takes the releases handed over this long after the loop said it blocks.
    takes_after: u64,
}

impl FakePartner {
    fn new(clock: &ManualClock, ready_after: u64, lasts: u64) -> Self {
        FakePartner {
            clock: clock.clone(),
            ready_after,
            lasts,
            due: AtomicU64::new(u64::MAX),
            roomy: AtomicBool::new(false),
            rooms: AtomicU64::new(0),
            served: AtomicU64::new(0),
            ahead: Default::default(),
            held_at: None,
            said_after: 0,
            takes_after: 0,
        }
    }
}

impl crate::partner::Breath for FakePartner {
    fn due_at(&self, at: u64) {
        self.roomy.store(false, Ordering::Relaxed);
        self.due.store(at, Ordering::Relaxed);
    }
    fn room(&self) {
        self.roomy.store(true, Ordering::Relaxed);
        self.rooms.fetch_add(1, Ordering::Relaxed);
    }
    fn ready(&self) -> bool {
        let due = self.due.load(Ordering::Relaxed);
        let from = due
            .saturating_sub(crate::partner::STAND_BY_LEAD_NS)
            .saturating_add(self.ready_after);
        !self.roomy.load(Ordering::Relaxed) && due != u64::MAX && self.clock.peek() >= from
    }
    fn breathe(&self, relay: Option<crate::partner::Relay<'_>>) -> crate::partner::Breathed {
        if !self.ready() {
            return crate::partner::Breathed::default();
        }
        let back = self.clock.peek() + self.lasts;
        // The releases handed over that come due before the loop is back are fired at their
        // instants.
        let mut relayed = false;
        if let Some(crate::partner::Relay { at, fire, .. }) = relay {
            let off = at as i64 - self.clock.peek() as i64;
            self.ahead.lock().unwrap().push(off);
            let mut next = Some(at);
            self.clock.advance(self.said_after);
            let took = self.clock.peek();
            self.clock.advance(self.takes_after);
            let mut look = crate::partner::Look {
                took,
                last_read: self.clock.peek(),
                busy: false,
            };
            let mut k = 0;
            while let Some(at) = next.filter(|&at| at < back) {
                let now = self.clock.peek();
                if now < at {
                    // It read its clock before the instant, then spun to it.
                    look = crate::partner::Look {
                        last_read: now,
                        busy: false,
                        ..look
                    };
                    self.clock.advance(at - now);
                }
                if let Some((_, by, busy)) = self.held_at.filter(|h| h.0 == k) {
                    look.busy |= busy;
                    self.clock.advance(by);
                }
                let found = self.clock.peek();
                // Fired from the partner's own thread, as the real one does.
                next = std::thread::scope(|s| s.spawn(|| fire(look)).join()).expect("fired");
                look = crate::partner::Look {
                    last_read: found,
                    busy: true,
                    ..look
                };
                relayed = true;
                k += 1;
            }
        }
        self.clock.advance(back.saturating_sub(self.clock.peek()));
        self.served.fetch_add(1, Ordering::Relaxed);
        crate::partner::Breathed {
            // It woke the loop halfway through.
            woke_at: Some(back - self.lasts / 2),
            relayed,
        }
    }
}

/// One second of releases 10 us apart from 1 ms on, breathers due every 100 ms; a timed sleep
/// wakes 26 us late (this VM's kernel); `partner` wakes the loop from them when given.
/// Returns what the loop said and the latest release's lateness.
fn dense_with(clock: &ManualClock, partner: Option<&FakePartner>) -> (LoopEnd, u64) {
    let events: Vec<Event> = (0..100_000u64)
        .map(|k| Event::new(k * 10_000, 0, &[]))
        .collect();
    let (e, fake) = spin_through(clock, &events, 10_000, partner);
    let worst = fake.log.iter().map(|l| l.3 - l.1).max().unwrap();
    (e, worst)
}

fn vm_clock() -> ManualClock {
    ManualClock::with_wake_latency(0, 100, |_| 26_000)
}

#[test]
fn a_plan_without_room_breathes_through_its_partner_and_keeps_its_releases() {
    // Alone, each 20 us breather on a 26 us wake-up makes releases late by tens of us.
    let clock = vm_clock();
    let (e, worst) = dense_with(&clock, None);
    assert!((8..=11).contains(&e.breathers), "{}", e.breathers);
    assert_eq!(e.breathers_partnered, 0);
    assert!(
        worst > 30_000,
        "a timed breather made no release late: {worst} ns"
    );
    // The partner stands by 50 us into its lead and wakes the loop in 5 us.
    let clock = vm_clock();
    let p = FakePartner::new(&clock, 50_000, 5_000);
    let (e, worst) = dense_with(&clock, Some(&p));
    assert!((8..=11).contains(&e.breathers), "{}", e.breathers);
    assert_eq!(e.breathers_partnered, e.breathers);
    assert_eq!(p.served.load(Ordering::Relaxed), e.breathers);
    // The loop never said it had room.
    assert_eq!(p.rooms.load(Ordering::Relaxed), 0);
    assert!(worst < 10_000, "a release {worst} ns late");
}

/// A partner's breather that runs past a release is logged as a wait whose wake-up was due when
/// the partner sent it (before that the loop idled by its own choice), not from the breather's
/// start.
#[test]
fn a_partnered_breather_is_logged_from_the_partners_wake_up() {
    let clock = vm_clock();
    // It stands by 50 us into its lead, and the loop is back 30 us after it blocked.
    let p = FakePartner::new(&clock, 50_000, 30_000);
    let (e, _) = dense_with(&clock, Some(&p));
    assert!(e.breathers_partnered >= 8, "{}", e.breathers_partnered);
    let (stalls, _) = e.stalls.into_stalls();
    let timers: Vec<_> = stalls
        .iter()
        .filter(|s| s.kind == punctual_explain::StallKind::Timer)
        .collect();
    assert_eq!(timers.len() as u64, e.breathers_partnered, "{stalls:?}");
    for s in timers {
        // The fake partner woke the loop halfway through its 30 us.
        assert!((15_000..16_000).contains(&(s.to - s.from)), "{s:?}");
    }
}

/// At least 8 breathers were partnered, and the partner fired `each` releases in every one.
fn relayed_per_breather(e: &LoopEnd, each: std::ops::RangeInclusive<u64>) {
    let n = e.breathers_partnered;
    assert!(n >= 8, "{n}");
    assert!(
        (each.start() * n..=each.end() * n).contains(&e.relayed),
        "{} of {n} breathers",
        e.relayed
    );
}

/// The releases a partner's breather would make late are handed to the partner, which fires each
/// at its instant: a 45 us breather before releases 10 us apart makes none late, and every release
/// is fired once, by one of the two.
#[test]
fn the_releases_a_partnered_breather_runs_over_are_fired_by_the_partner_on_time() {
    let events: Vec<Event> = (0..100_000u64)
        .map(|k| Event::new(k * 10_000, 0, &[]))
        .collect();
    let late = |fake: &Fake| {
        let relayed = fake.relay_to.as_ref().map_or(&[][..], |r| &r.log[..]);
        let mut all: Vec<(u64, u64)> = fake.log.iter().map(|l| (l.2, l.3 - l.1)).collect();
        all.extend(relayed.iter().map(|r| (r.1, r.2 - r.0)));
        all.sort_unstable();
        // Each release once.
        assert_eq!(all.len(), events.len());
        assert!(all.iter().enumerate().all(|(k, a)| a.0 == k as u64));
        all.iter().map(|a| a.1).max().unwrap()
    };
    // Not handed over: the releases the breather lands on are late.
    let clock = vm_clock();
    let p = FakePartner::new(&clock, 50_000, 45_000);
    let (e, fake) = spin_through_relaying(&clock, &events, 10_000, Some(&p), false);
    assert!(e.breathers_partnered >= 8, "{}", e.breathers_partnered);
    assert_eq!(e.relayed, 0);
    assert!(late(&fake) > 10_000, "{} ns", late(&fake));
    // Handed over: the partner fires them, and the loop is back for the one after.
    let clock = vm_clock();
    let p = FakePartner::new(&clock, 50_000, 45_000);
    let (e, fake) = spin_through_relaying(&clock, &events, 10_000, Some(&p), true);
    // Four or five a breather: those due in its 45 us.
    relayed_per_breather(&e, 4..=5);
    let relayed = fake.relay_to.as_ref().unwrap().log.len() as u64;
    assert_eq!(relayed, e.relayed);
    assert!(late(&fake) < 10_000, "a release {} ns late", late(&fake));
}

/// A breather in which a kernel worker ran keeps the loop away for 200 us: the partner fires
/// every release of the 10 us plan due in it, not only the first few (b65: the loop came back
/// after its partner had fired the 8 it held, and fired the next one 12 us late).
#[test]
fn the_partner_covers_a_breather_a_kernel_worker_stretched() {
    let events: Vec<Event> = (0..100_000u64)
        .map(|k| Event::new(k * 10_000, 0, &[]))
        .collect();
    let clock = vm_clock();
    let p = FakePartner::new(&clock, 50_000, 200_000);
    let (e, fake) = spin_through_relaying(&clock, &events, 10_000, Some(&p), true);
    // Nineteen or twenty a breather: those due in its 200 us.
    relayed_per_breather(&e, 19..=20);
    let relayed = &fake.relay_to.as_ref().unwrap().log;
    let worst = relayed.iter().map(|r| r.2 - r.0).max().unwrap();
    assert!(worst < 10_000, "a relayed release {worst} ns late");
    let worst = fake.log.iter().map(|l| l.3 - l.1).max().unwrap();
    assert!(worst < 10_000, "a release the loop fired {worst} ns late");
}

/// Releases 10 us apart from 1 ms on (`n` of them), explained past 10 us, the loop's breathers
/// (every 100 ms) served by a partner that stands by 50 us into its lead and lasts `lasts`, both
/// set up further by `setup`: what the loop said, the late records, and for each breather handed
/// releases how far off the first was.
fn relayed_run(
    n: u64,
    lasts: u64,
    setup: impl FnOnce(&mut FakePartner, &mut Fake),
) -> (LoopEnd, Vec<LateRelease>, Vec<i64>) {
    let events: Vec<Event> = (0..n).map(|k| Event::new(k * 10_000, 0, &[])).collect();
    let clock = vm_clock();
    let mut p = FakePartner::new(&clock, 50_000, lasts);
    let slots = event_slot();
    let mut fake = Fake::new(&clock, 1);
    fake.relay_to = Some(RelayLog {
        clock: clock.clone(),
        log: vec![],
    });
    setup(&mut p, &mut fake);
    let mut stats = vec![SlotStats::new(false)];
    stats[0].late = LateLog::new(10_000, 1024);
    let cfg = LoopConfig {
        interval: 10_000,
        breather_every: Some(100_000_000),
        partner: Some(&p as &dyn crate::partner::Breath),
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
        &[SlotProgress::default()],
        &Heartbeat::default(),
        StallLog::new(10_000),
    );
    let ahead = p.ahead.lock().unwrap().clone();
    assert_eq!(ahead.len() as u64, e.breathers_partnered);
    (e, stats[0].late.records().to_vec(), ahead)
}

/// [`relayed_run`] over three seconds with a partner that lasts 100 us: the late records and the
/// partnered breathers.
fn relayed_late(setup: impl FnOnce(&mut FakePartner)) -> (Vec<LateRelease>, u64) {
    let (e, late, _) = relayed_run(30_000, 100_000, |p, _| setup(p));
    assert!(e.breathers_partnered >= 2, "{}", e.breathers_partnered);
    (late, e.breathers_partnered)
}

/// Issue 26: a release the partner fired late is recorded on the partner's thread, not the
/// loop's, with what the partner did before it. Held at the instant, after a read of its clock or
/// after a firing too short to account for it, it is not behind and that read is kept (a stop
/// there reads `steal`). The two that fell due while it was held came before the work it was
/// doing then: neither behind nor with a read of their own.
#[test]
fn a_release_the_partner_fired_late_is_recorded_as_the_partners() {
    let (me, _) = punctual_explain::here();
    for busy in [false, true] {
        // The third release of each breather, 30 us.
        let (late, breathers) = relayed_late(|p| p.held_at = Some((2, 30_000, busy)));
        let partners: Vec<_> = late.iter().filter(|r| r.tid != me).collect();
        // The held one and the two due in its 30 us, in every breather; nothing else was late.
        assert_eq!(
            partners.len() as u64,
            3 * breathers,
            "busy {busy}: {late:?}"
        );
        assert_eq!(partners.len(), late.len(), "busy {busy}: {late:?}");
        assert!(
            partners.iter().all(|r| r.waiter == Waiter::Partner),
            "{late:?}"
        );
        for held in partners.chunks(3) {
            let first = held[0];
            assert!(first.lateness() >= 20_000, "{first:?}");
            // Held after a read before the instant, or after a short firing that began before it:
            // not behind, and that read kept.
            assert!(!first.behind, "{first:?}");
            let read = first.last_read.expect("its read before the instant");
            assert!(read <= first.target, "{first:?}");
            for r in &held[1..] {
                assert!(!r.behind && r.last_read.is_none(), "{r:?}");
                assert!(r.target > first.target && r.target < first.actual, "{r:?}");
            }
        }
    }
}

/// How the partner's look becomes a late record: behind only where its own firing of the release
/// before began before the instant and lasted the lateness; a read after the instant (it was late
/// on the one before) leaves no read; else its read stands, as a spin's.
#[test]
fn the_partners_record_is_behind_only_where_its_own_work_covers_the_lateness() {
    let target = 1_000_000;
    let record = |busy: bool, last_read: u64, prev_work: u64| {
        let r = sources::Release {
            act_at: target,
            from_event: false,
            slot: 0,
            target,
            seq: 0,
            data: &[],
        };
        let started = target + 25_000;
        let t = Timed {
            behind: true,
            started,
            done: started + 100,
            fired: Fired {
                error: false,
                previous: None,
            },
            slept: false,
            woke: started,
            last_read: None,
            own_from: None,
            by: Some(By {
                tid: 7,
                cpu: 3,
                look: crate::partner::Look {
                    took: 0,
                    last_read,
                    busy,
                },
                prev_work,
            }),
        };
        let l = record::self_timed(0, &r, &t);
        assert_eq!((l.tid, l.cpu, l.waiter), (7, 3, Waiter::Partner));
        (l.behind, l.last_read)
    };
    // Its firing before began 2 us before the instant and took 30 us: its own work.
    assert_eq!(record(true, target - 2_000, 30_000), (true, None));
    // ... took 1 us: something else held it after; its read stands.
    assert_eq!(
        record(true, target - 2_000, 1_000),
        (false, Some(target - 2_000))
    );
    // Began after the instant: late on the one before.
    assert_eq!(record(true, target + 5_000, 30_000), (false, None));
    // A spin up to it.
    assert_eq!(record(false, target - 300, 0), (false, Some(target - 300)));
}

/// A release due before the loop said it blocks came to the partner late, by the loop's way into
/// its breather: it stays the loop's, behind its breather. One due after, which the partner looked
/// at late, is the partner's, with no read of its own (its CPU's trace decides).
#[test]
fn a_release_due_before_the_loop_said_it_blocks_stays_the_loops() {
    let (me, _) = punctual_explain::here();
    // The loop hands over 9-10 us ahead, and says it blocks 25 us later.
    let (late, breathers) = relayed_late(|p| p.said_after = 25_000);
    let loops: Vec<_> = late.iter().filter(|r| r.tid == me).collect();
    assert_eq!(loops.len() as u64, breathers, "{late:?}");
    assert_eq!(loops.len(), late.len(), "{late:?}");
    assert!(
        loops
            .iter()
            .all(|r| r.behind && r.lateness() >= 10_000 && r.waiter == Waiter::Loop),
        "{loops:?}"
    );
    // The loop says so at once; the partner looks 25 us later.
    let (late, breathers) = relayed_late(|p| p.takes_after = 25_000);
    let partners: Vec<_> = late.iter().filter(|r| r.tid != me).collect();
    assert_eq!(partners.len() as u64, breathers, "{late:?}");
    assert_eq!(partners.len(), late.len(), "{late:?}");
    assert!(
        partners.iter().all(|r| !r.behind
            && r.last_read.is_none()
            && r.lateness() >= 10_000
            && r.waiter == Waiter::Partner),
        "{partners:?}"
    );
}

/// A loop that reaches the release its partner's breather is due before already late (its
/// previous action ran over) fires that one itself and breathes before the next: a release
/// handed over past its instant is late by the hand-over.
#[test]
fn a_partnered_breather_waits_for_a_release_the_partner_can_take_in_time() {
    let run = |stall: bool| {
        let (e, _, ahead) = relayed_run(100_000, 25_000, |_, fake| {
            // The breather comes due at 100 ms, at the top for the release after the one due
            // at 100 ms (the 9,901st), which ran 12 us: past the next instant.
            if stall {
                fake.long_once = Some((0, 9_900, 12_000));
            }
        });
        assert!(e.breathers_partnered >= 8, "{}", e.breathers_partnered);
        ahead
    };
    // The loop keeps its pace: each breather hands over a release 9-10 us off.
    assert!(run(false).iter().all(|&a| a >= 9_000), "{:?}", run(false));
    // The first breather came due with the loop 2 us late: it waited for the next release.
    let ahead = run(true);
    assert!(
        ahead.iter().all(|&a| a >= PARTNER_GAP_MIN_NS as i64),
        "{ahead:?}"
    );
}

#[test]
fn a_partner_that_never_stands_by_defers_the_breather_to_twice_overdue_then_the_timer() {
    let clock = vm_clock();
    let p = FakePartner::new(&clock, u64::MAX, 5_000);
    let (e, _) = dense_with(&clock, Some(&p));
    // Every 200 ms instead of 100 ms, each on the timer.
    assert!((4..=6).contains(&e.breathers), "{}", e.breathers);
    assert_eq!(e.breathers_partnered, 0);
    assert_eq!(p.served.load(Ordering::Relaxed), 0);
}

#[test]
fn a_plan_with_room_tells_its_partner_and_breathes_on_its_timer() {
    let clock = ManualClock::new(0, 100);
    let p = FakePartner::new(&clock, 0, 5_000);
    let (e, fake) = bursts_with(Some(&p), &clock);
    assert!((8..=11).contains(&e.breathers), "{}", e.breathers);
    assert_eq!(e.breathers_partnered, 0);
    assert_eq!(p.served.load(Ordering::Relaxed), 0);
    // Room was seen (and said) in every stretch between blocks.
    assert!(p.rooms.load(Ordering::Relaxed) >= e.breathers);
    // Every breather fell in the room: not one release came late.
    let worst = fake.log.iter().map(|l| l.3 - l.1).max().unwrap();
    assert!(worst < 5_000, "a release {worst} ns late");
}
