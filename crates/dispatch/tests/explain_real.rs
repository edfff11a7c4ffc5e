//! `--explain` on real runs of this machine (root, tracefs, two CPUs): a FIFO 99 busy loop of
//! 200 us every 50 ms on the CPU a measured thread or a wake client runs on is named as the cause
//! of the late releases it made (at least 95 % of those whose window meets one of its bursts, and
//! never of one far from them); a client woken without lead on an idle CPU is late by its way back
//! from idle, and named so (`lead` or `wake_path`); a trace taken while a CPU latency request
//! of 0 is held reads each CPU with a polling idle state as having only polled. The
//! measured CPU is shielded (real-time mode) so the builds and tests of the rest of the machine add
//! few late releases of their own; everything is restored when the shield drops, also when a test
//! fails. What else makes releases late on a loaded machine (the host's steal, a kernel worker) is
//! whatever it is: the hog must be named for its own and only for its own. A release at a burst
//! named `steal`, or whose own window held a stop of the virtual CPU, is not the hog's to claim;
//! such releases may be at most a quarter of those at bursts.
//!
//! Why a 100 us bound and not 10 us: on this VM the timer tick alone takes about 40 us, so with a
//! 10 us bound the tick's late releases would outnumber the hog's; every hog hit is later than
//! 100 us and nothing else on a shielded CPU is.

use punctual_dispatch::measure::{run_plan_explained, run_plan_traced};
use punctual_dispatch::shield::{self, Shield};
use punctual_dispatch::RunConfig;
use punctual_explain::{Cause, ExplainConfig, Explanation};
use punctual_periodic::{Periodic, FLAG_REALTIME};
use punctual_rt::Policy;
use punctual_trace::capture::Captured;
use punctual_trace::event::EventKind;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const HOG_BURST_NS: u64 = 200_000;
const HOG_EVERY_NS: u64 = 50_000_000;
const BOUND: u64 = 100_000;

/// Root, tracing and two CPUs, or a visible skip. Returns the CPU to measure on: `last` says
/// which end. The hog tests take the first: on this project's VM the kernel does not record a
/// switch out of idle on CPU 1 (see `punctual_trace::idle_exit`, which puts them back from the
/// evidence), and the hog's count is judged against its own clock, so the CPU whose trace is
/// whole keeps that judgement exact. The idle client takes the last CPU, whose idle exits are
/// the ones put back.
fn ready(test: &str, last: bool) -> Option<usize> {
    if !punctual_testkit::tracing(test) {
        return None;
    }
    if punctual_rt::online_cpus().len() < 2 {
        punctual_testkit::skip(test, "needs two CPUs (one shielded, one for the rest)");
        return None;
    }
    Some(if last {
        punctual_rt::affinity::last_online_cpu()
    } else {
        punctual_rt::online_cpus()[0]
    })
}

/// Real-time mode on `cpu`, this process (hog, measured threads) staying.
fn shield_cpu(test: &str, cpu: usize) -> Option<Shield> {
    let plan = match shield::plan(&[cpu], &[std::process::id() as i32]) {
        Ok(p) if p.nested_in.is_none() => p,
        Ok(_) | Err(_) => {
            punctual_testkit::skip(test, "another shield holds the CPU");
            return None;
        }
    };
    match Shield::apply(&plan) {
        Ok(s) => Some(s),
        Err(e) => {
            punctual_testkit::skip(test, &format!("real-time mode refused: {e}"));
            None
        }
    }
}

/// One burst of the hog: when it began and ended, and whether the hog ran through it undisturbed
/// (its thread CPU time at least 90 % of the burst, and the burst at most 25 % longer than asked).
/// A FIFO 99 spinner is held up only by the kernel's fair server (a normal task pinned to the CPU
/// and starved), interrupt handlers (charged to it: no IRQ time accounting here) or the host
/// stopping the vCPU: the late releases of such a burst are not the hog's alone, and the test
/// does not judge them.
#[derive(Clone, Copy, Debug)]
struct Burst {
    began: u64,
    ended: u64,
    whole: bool,
    /// The CPU it ended on.
    cpu: i32,
}

/// A thread named `pt-hog` at FIFO 99 on `cpu`: busy 200 us every 50 ms until `stop`.
fn hog(cpu: usize, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<Burst>> {
    std::thread::Builder::new()
        .name("pt-hog".into())
        .spawn(move || {
            let _g = punctual_rt::setup_current_thread(&punctual_rt::ThreadRequest {
                cpu: Some(cpu),
                policy: Policy::Fifo,
                priority: 99,
                timer_slack_ns: None,
                fall_back_on_refusal: false,
            })
            .expect("FIFO 99 as root");
            let now = || punctual_time::clock::read_clock(libc::CLOCK_MONOTONIC);
            let ran = || punctual_time::clock::read_clock(libc::CLOCK_THREAD_CPUTIME_ID);
            let mut next = now();
            let mut bursts = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let (began, ran_before) = (now(), ran());
                let until = began + HOG_BURST_NS;
                while now() < until {
                    std::hint::spin_loop();
                }
                let (ended, on_cpu) = (now(), ran() - ran_before);
                bursts.push(Burst {
                    began,
                    ended,
                    whole: on_cpu * 10 >= (ended - began) * 9
                        && (ended - began) * 4 <= HOG_BURST_NS * 5,
                    // SAFETY: sched_getcpu reads the calling thread's CPU; no pointers.
                    cpu: unsafe { libc::sched_getcpu() },
                });
                next += HOG_EVERY_NS;
                punctual_time::clock::sleep_abs(libc::CLOCK_MONOTONIC, next);
            }
            bursts
        })
        .unwrap()
}

/// Checks the hog is named for the late releases its bursts made, and for no other: of the late
/// releases whose window (from 500 us before the instant, which holds any hand-over, to when it
/// ran) meets a burst the hog ran through, at least 95 % are the hog's; of those that meet no
/// burst, none. Returns how many met a whole burst.
///
/// Those named `steal`, and those whose own window (from the planned hand-over) held a stop of the
/// virtual CPU (`dark_by_cpu`: a silent stretch where punctual's thread or its due timer had to
/// run), are judged for neither side, up to a quarter of the releases at bursts: a stop in the same
/// window is not the hog's to claim (CI once had three releases 358 us after a burst, no hog in
/// their windows, 19-25 us of their 60 us stolen, named `wake_path`). The hog cannot pass for
/// one: `steal` needs a stretch where the guest did nothing although it had to (a stall of the
/// loop's own short work, a due timer that did not fire), and a hog that takes the CPU leaves a
/// switch and its timers fire. Measured on this project's VM (issue 26): 100-220 us stops a few
/// hundred microseconds after a burst made 1-7 % of the releases at bursts late, which read
/// `dispatcher` before the loop logged its stalls and failed this test under CI's load.
fn check_hog(x: &Explanation, trace: &Captured, bursts: &[Burst]) -> usize {
    let named = |a: &punctual_explain::Attribution| {
        a.cause == Cause::Task
            && a.offender
                .as_deref()
                .is_some_and(|n| n.starts_with("pt-hog (pid "))
    };
    let (mut near, mut near_named, mut far_named) = (0usize, 0usize, 0usize);
    let mut near_stolen = 0usize;
    // Releases at a burst not named pt-hog whose own window held a stop of the virtual CPU.
    let mut near_stopped = 0usize;
    // No sleeper among these records: the loop's and the client's stalls are the trace's.
    let dark = punctual_explain::attribute::dark_by_cpu(trace, &[]);
    let mut others = Vec::new();
    let long = long_handlers(trace);
    for (r, a) in &x.details {
        let from = r.target.saturating_sub(500_000);
        // A 200 us burst makes a release late by about its length; one later than 1 ms had
        // something else on top (under a loaded suite: the fair server's turn for starved normal
        // tasks, attributed `throttle`), and is not the hog's to claim.
        let meets = |b: &&Burst| b.began < r.actual && b.ended > from;
        let at_burst = bursts.iter().any(|b| meets(&b));
        if at_burst && r.actual - r.target > 1_000_000 {
            continue;
        }
        // A burst the hog did not run through (see [`Burst`]) is judged for neither side, nor a
        // window that also held a handler longer than the bound (a 289 us tick once, the host
        // stretching it): the hog is not its only cause.
        let long_too = long.iter().any(|&(a, b)| a < r.actual && b > from);
        if bursts.iter().filter(meets).any(|b| !b.whole) || long_too {
            continue;
        }
        // Its own window: from the planned hand-over (or the instant) to when it ran.
        let own_from = r.handover.map_or(r.target, |h| h.planned.min(r.target));
        let stopped = dark
            .values()
            .flatten()
            .any(|&(a, b)| a < r.actual && b > own_from);
        match (at_burst, named(a)) {
            (true, false) if a.cause == Cause::Steal => near_stolen += 1,
            (true, false) if stopped => near_stopped += 1,
            (true, n) => {
                near += 1;
                near_named += n as usize;
                if !n && others.len() < 12 {
                    let b = bursts.iter().find(meets).unwrap();
                    others.push(format!(
                        "{} late, burst {} to {} from its instant on CPU {}: {:?} {:?} {}",
                        r.actual - r.target,
                        b.began as i64 - r.target as i64,
                        b.ended as i64 - r.target as i64,
                        b.cpu,
                        a.cause,
                        a.offender,
                        a.why
                    ));
                }
            }
            (false, true) => far_named += 1,
            (false, false) => {}
        }
    }
    let t = x.total();
    eprintln!(
        "{near_named} of {near} late releases at bursts named pt-hog; {near_stolen} steal, \
         {near_stopped} others at a stop"
    );
    assert!(
        near_named * 100 >= near * 95,
        "{near_named} of the {near} late releases at a burst named pt-hog: {t:?}\n{}",
        others.join("\n")
    );
    assert_eq!(far_named, 0, "pt-hog named away from its bursts: {t:?}");
    for o in &others {
        eprintln!("  not named: {o}");
    }
    let apart = near_stolen + near_stopped;
    assert!(
        apart * 4 <= near + apart,
        "{near_stolen} of the {} late releases at a burst named steal and {near_stopped} at a \
         stop: {t:?}",
        near + apart
    );
    near
}

#[test]
fn a_fifo_99_hog_on_the_dispatchers_cpu_is_named_for_its_late_releases() {
    let test = "a_fifo_99_hog_on_the_dispatchers_cpu_is_named_for_its_late_releases";
    let Some(cpu) = ready(test, false) else {
        return;
    };
    let _cpu = punctual_testkit::exclusive_cpu();
    let Some(_shield) = shield_cpu(test, cpu) else {
        return;
    };
    // A mark every 50 us on the shielded CPU: the loop spins from one release to the next, so
    // the hog's bursts are all that stops it there.
    let plan = punctual_plan::parse_str(
        &format!(
            "[plan]\nname = \"marks\"\ncpus = \"{cpu}\"\n[[task]]\nname = \"m\"\nperiod = \"50us\"\noffset = \"0us\"\naction = {{ kind = \"mark\" }}\n"
        ),
        "marks.toml",
        None,
    )
    .unwrap();
    let _dma = punctual_rt::dma::DmaLatencyGuard::request(0).ok();
    let stop = Arc::new(AtomicBool::new(false));
    let h = hog(cpu, stop.clone());
    let cfg = RunConfig {
        cpus: vec![cpu],
        duration: Some(5_000_000_000),
        shielded: true,
        ..RunConfig::default()
    };
    let explain = ExplainConfig {
        bound: BOUND,
        cpus: vec![cpu],
        quiet: vec![cpu],
        keep: None,
    };
    let run = run_plan_traced(plan, &cfg, Arc::new(AtomicBool::new(false)), None, &explain);
    stop.store(true, Ordering::Relaxed);
    let bursts = h.join().unwrap();
    let (out, trace, records, unlogged) = run.unwrap();
    assert!(out.trip.is_none());
    let explained = trace.explain(&records, &unlogged);
    let whole = whole_bursts(&bursts, 50);
    let near = check_hog(&explained, &trace.captured, &bursts);
    assert!(
        near >= whole,
        "{near} late releases at {whole} whole bursts: each makes at least one"
    );
}

#[test]
fn a_fifo_99_hog_on_a_wake_clients_cpu_is_named_for_its_late_releases() {
    let test = "a_fifo_99_hog_on_a_wake_clients_cpu_is_named_for_its_late_releases";
    let Some(cpu) = ready(test, false) else {
        return;
    };
    let _cpu = punctual_testkit::exclusive_cpu();
    let Some(_shield) = shield_cpu(test, cpu) else {
        return;
    };
    let channel = format!("explain-hog-{}", std::process::id());
    let plan = punctual_plan::parse_str(
        &format!(
            "[plan]\nname = \"hog\"\ncpus = \"{cpu}\"\n[[task]]\nname = \"c\"\nperiod = \"100us\"\noffset = \"0us\"\naction = {{ kind = \"wake\", channel = \"{channel}\" }}\n"
        ),
        "hog.toml",
        None,
    )
    .unwrap();
    let client = client_on(cpu, channel);
    let _dma = punctual_rt::dma::DmaLatencyGuard::request(0).ok();
    let stop = Arc::new(AtomicBool::new(false));
    let h = hog(cpu, stop.clone());
    let cfg = RunConfig {
        cpus: vec![cpu],
        duration: Some(6_000_000_000),
        shielded: true,
        ..RunConfig::default()
    };
    let explain = ExplainConfig {
        bound: BOUND,
        cpus: vec![cpu],
        quiet: vec![cpu],
        keep: None,
    };
    let run = run_plan_traced(plan, &cfg, Arc::new(AtomicBool::new(false)), None, &explain);
    stop.store(true, Ordering::Relaxed);
    let bursts = h.join().unwrap();
    let _ = client.join();
    let (out, trace, records, unlogged) = run.unwrap();
    assert!(out.trip.is_none());
    let explained = trace.explain(&records, &unlogged);
    let whole = whole_bursts(&bursts, 60);
    let near = check_hog(&explained, &trace.captured, &bursts);
    assert!(
        near >= whole / 2,
        "{near} late releases at {whole} whole bursts"
    );
}

/// The handlers (device IRQ, softirq, system vector) longer than [`BOUND`] on the traced CPUs,
/// from the raw events: (entry, exit).
fn long_handlers(trace: &Captured) -> Vec<(u64, u64)> {
    let mut long = Vec::new();
    for evs in &trace.events {
        let mut open: Vec<u64> = Vec::new();
        for e in evs {
            match e.kind {
                EventKind::IrqEntry { .. }
                | EventKind::SoftirqEntry { .. }
                | EventKind::VectorEntry { .. } => open.push(e.ts),
                EventKind::IrqExit { .. }
                | EventKind::SoftirqExit { .. }
                | EventKind::VectorExit { .. } => {
                    if let Some(a) = open.pop().filter(|&a| e.ts - a > BOUND) {
                        long.push((a, e.ts));
                    }
                }
                _ => {}
            }
        }
    }
    long
}

/// How many bursts the hog ran through, after checking there were at least `at_least` and that
/// at most one in ten was cut (the fair server may take 5 % of the CPU; more is a finding).
fn whole_bursts(bursts: &[Burst], at_least: usize) -> usize {
    let whole = bursts.iter().filter(|b| b.whole).count();
    assert!(bursts.len() >= at_least, "{} bursts", bursts.len());
    assert!(
        whole * 10 >= bursts.len() * 9,
        "the hog ran through only {whole} of its {} bursts: {:?}",
        bursts.len(),
        bursts
            .iter()
            .filter(|b| !b.whole)
            .take(5)
            .collect::<Vec<_>>()
    );
    whole
}

/// A wake client thread on `cpu` (FIFO 80, as kurt-periodic's), until its channel ends.
fn client_on(cpu: usize, channel: String) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        punctual_rt::affinity::set(0, &[cpu]).unwrap();
        let mut p = Periodic::attach(&channel, FLAG_REALTIME).expect("attached");
        while p.wait_next_period().is_ok() {}
    })
}

#[test]
fn a_client_woken_without_lead_on_an_idle_cpu_is_late_by_its_way_back_from_idle() {
    let test = "a_client_woken_without_lead_on_an_idle_cpu_is_late_by_its_way_back_from_idle";
    let Some(cpu) = ready(test, true) else {
        return;
    };
    let _cpu = punctual_testkit::exclusive_cpu();
    // The client's CPU is shielded and nothing runs there between its releases, so it halts; the
    // dispatcher is on the other CPU and wakes it at its instants, without lead: the client is late
    // by its way back from idle, its usual one (`lead`: a lead would have covered it) or a slower
    // one (`wake_path`). (With the automatic lead, a run may have no wake-up slower than the lead
    // covers: whether `wake_path` shows is chance.) The dispatcher's CPU is not shielded and may
    // make some releases late of its own (a normal task in a kernel that is not preemptible).
    let Some(_shield) = shield_cpu(test, cpu) else {
        return;
    };
    let other = *punctual_rt::online_cpus()
        .iter()
        .find(|&&c| c != cpu)
        .unwrap();
    let channel = format!("explain-idle-{}", std::process::id());
    let plan = punctual_plan::parse_str(
        &format!(
            "[plan]\nname = \"idle\"\ncpus = \"{other}\"\n[[task]]\nname = \"c\"\nperiod = \"1ms\"\noffset = \"0us\"\naction = {{ kind = \"wake\", channel = \"{channel}\" }}\n"
        ),
        "idle.toml",
        None,
    )
    .unwrap();
    let client = client_on(cpu, channel);
    let cfg = RunConfig {
        cpus: vec![other],
        duration: Some(6_000_000_000),
        // No lead: the client is woken at its instant, so each release waits for its CPU to
        // leave idle (how long that takes is what this test looks at).
        wake_lead: Some(punctual_time::margin::MarginPolicy::Fixed(0)),
        ..RunConfig::default()
    };
    let explain = ExplainConfig {
        bound: punctual_explain::DEFAULT_BOUND_NS,
        cpus: vec![],
        quiet: vec![cpu],
        keep: None,
    };
    let run = run_plan_explained(
        plan,
        &cfg,
        Arc::new(AtomicBool::new(false)),
        None,
        Some(&explain),
    );
    let _ = client.join();
    let (_, explained) = run.unwrap();
    let explained = explained.expect("explained");
    let t = explained.total();
    let late: u64 = Cause::ALL.iter().map(|&c| t.count(c)).sum();
    let idle = t.count(Cause::Lead) + t.count(Cause::WakePath);
    assert!(
        idle > 0 && idle * 2 > late,
        "{t:?}\n{}",
        serde_json::to_string_pretty(&explained.examples_json()).unwrap()
    );
}

#[test]
fn a_trace_taken_while_idle_may_only_poll_reads_each_polling_cpu_as_polled() {
    let test = "a_trace_taken_while_idle_may_only_poll_reads_each_polling_cpu_as_polled";
    if ready(test, true).is_none() {
        return;
    }
    let polling: Vec<usize> = punctual_rt::online_cpus()
        .into_iter()
        .filter(|&c| punctual_trace::capture::poll_state_of(c).is_some())
        .collect();
    if polling.is_empty() {
        punctual_testkit::skip(test, "no CPU has a polling idle state (cpuidle POLL)");
        return;
    }
    // A CPU latency request of 0 leaves the cpuidle governor no state but the polling one, as
    // every punctual session holds it: the counters read around the trace must say so.
    let _dma = punctual_rt::dma::DmaLatencyGuard::request(0).expect("cpu_dma_latency");
    let x = punctual_explain::Explainer::start(&ExplainConfig::default()).expect("tracing");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let trace = x.stop().expect("stopped");
    let c = &trace.captured;
    for cpu in polling {
        let i = c.cpus.iter().position(|&t| t == cpu).expect("traced");
        assert!(c.idle_polled[i], "CPU {cpu}: {:?}", c.idle_polled);
        assert_eq!(c.idle_unsaid(cpu), c.poll_state(cpu));
    }
}
