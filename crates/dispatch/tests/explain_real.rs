//! `--explain` on real runs of this machine (root, tracefs, two CPUs): a FIFO 99 busy loop of
//! 200 us every 50 ms on the CPU a measured thread or a wake client runs on is named as the cause
//! of the late releases it made (at least 95 % of those whose window meets one of its bursts, and
//! never of one far from them); a client on an idle CPU is late through the wake path. The
//! measured CPU is shielded (real-time mode) so the builds and tests of the rest of the machine add
//! few late releases of their own; everything is restored when the shield drops, also when a test
//! fails. What else makes releases late on a loaded machine (the host's steal, a kernel worker) is
//! whatever it is: the hog must be named for its own and only for its own.
//!
//! Why a 100 us bound and not 10 us: on this VM the timer tick alone takes about 40 us, so with a
//! 10 us bound the tick's late releases would outnumber the hog's; every hog hit is later than
//! 100 us and nothing else on a shielded CPU is.

use punctual_dispatch::measure::run_plan_explained;
use punctual_dispatch::shield::{self, Shield};
use punctual_dispatch::RunConfig;
use punctual_explain::{Cause, ExplainConfig, Explanation};
use punctual_periodic::{Periodic, FLAG_REALTIME};
use punctual_rt::Policy;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const HOG_BURST_NS: u64 = 200_000;
const HOG_EVERY_NS: u64 = 50_000_000;
const BOUND: u64 = 100_000;

/// Root, tracing and two CPUs, or a visible skip. Returns the CPU to measure on.
fn ready(test: &str) -> Option<usize> {
    if !punctual_testkit::tracing(test) {
        return None;
    }
    if punctual_rt::online_cpus().len() < 2 {
        punctual_testkit::skip(test, "needs two CPUs (one shielded, one for the rest)");
        return None;
    }
    Some(0)
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

/// A thread named `pt-hog` at FIFO 99 on `cpu`: busy 200 us every 50 ms until `stop`. Returns
/// each burst's start and end.
fn hog(cpu: usize, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<(u64, u64)>> {
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
            let mut next = now();
            let mut bursts = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let began = now();
                let until = began + HOG_BURST_NS;
                while now() < until {
                    std::hint::spin_loop();
                }
                bursts.push((began, now()));
                next += HOG_EVERY_NS;
                punctual_time::clock::sleep_abs(libc::CLOCK_MONOTONIC, next);
            }
            bursts
        })
        .unwrap()
}

/// Checks the hog is named for the late releases its bursts made, and for no other: of the late
/// releases whose window (from 500 us before the instant, which holds any hand-over, to when it
/// ran) meets a burst, at least 95 % are the hog's; of the others, none. Returns how many met a
/// burst.
fn check_hog(x: &Explanation, bursts: &[(u64, u64)]) -> usize {
    let named = |a: &punctual_explain::Attribution| {
        a.cause == Cause::Task
            && a.offender
                .as_deref()
                .is_some_and(|n| n.starts_with("pt-hog (pid "))
    };
    let (mut near, mut near_named, mut far_named) = (0usize, 0usize, 0usize);
    let mut others = Vec::new();
    for (r, a) in &x.details {
        let from = r.target.saturating_sub(500_000);
        // A 200 us burst makes a release late by about its length; one later than 1 ms had
        // something else on top (under a loaded suite: the fair server's turn for starved normal
        // tasks, attributed `throttle`), and is not the hog's to claim.
        let at_burst = bursts.iter().any(|&(b0, b1)| b0 < r.actual && b1 > from);
        if at_burst && r.actual - r.target > 1_000_000 {
            continue;
        }
        match (at_burst, named(a)) {
            (true, n) => {
                near += 1;
                near_named += n as usize;
                if !n && others.len() < 5 {
                    let b = bursts
                        .iter()
                        .find(|&&(b0, b1)| b0 < r.actual && b1 > from)
                        .unwrap();
                    others.push(format!(
                        "{} late, burst {} to {} from its instant: {:?} {:?} {}",
                        r.actual - r.target,
                        b.0 as i64 - r.target as i64,
                        b.1 as i64 - r.target as i64,
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
    assert!(
        near_named * 100 >= near * 95,
        "{near_named} of the {near} late releases at a burst named pt-hog: {t:?}\n{}",
        others.join("\n")
    );
    assert_eq!(far_named, 0, "pt-hog named away from its bursts: {t:?}");
    near
}

#[test]
fn a_fifo_99_hog_on_the_dispatchers_cpu_is_named_for_its_late_releases() {
    let test = "a_fifo_99_hog_on_the_dispatchers_cpu_is_named_for_its_late_releases";
    let Some(cpu) = ready(test) else { return };
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
    };
    let run = run_plan_explained(
        plan,
        &cfg,
        Arc::new(AtomicBool::new(false)),
        None,
        Some(&explain),
    );
    stop.store(true, Ordering::Relaxed);
    let bursts = h.join().unwrap();
    let (out, explained) = run.unwrap();
    assert!(out.trip.is_none());
    let explained = explained.expect("explained");
    assert!(bursts.len() >= 50, "{} bursts", bursts.len());
    let near = check_hog(&explained, &bursts);
    assert!(
        near >= bursts.len(),
        "{near} late releases at {} bursts: each burst makes at least one",
        bursts.len()
    );
}

#[test]
fn a_fifo_99_hog_on_a_wake_clients_cpu_is_named_for_its_late_releases() {
    let test = "a_fifo_99_hog_on_a_wake_clients_cpu_is_named_for_its_late_releases";
    let Some(cpu) = ready(test) else { return };
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
    };
    let run = run_plan_explained(
        plan,
        &cfg,
        Arc::new(AtomicBool::new(false)),
        None,
        Some(&explain),
    );
    stop.store(true, Ordering::Relaxed);
    let bursts = h.join().unwrap();
    let _ = client.join();
    let (out, explained) = run.unwrap();
    assert!(out.trip.is_none());
    let explained = explained.expect("explained");
    assert!(bursts.len() >= 60, "{} bursts", bursts.len());
    let near = check_hog(&explained, &bursts);
    assert!(
        near >= bursts.len() / 2,
        "{near} late releases at {} bursts",
        bursts.len()
    );
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
fn a_client_on_an_idle_cpu_is_late_through_the_wake_path() {
    let test = "a_client_on_an_idle_cpu_is_late_through_the_wake_path";
    let Some(cpu) = ready(test) else { return };
    let _cpu = punctual_testkit::exclusive_cpu();
    // The client's CPU is shielded and nothing runs there between its releases, so it halts; the
    // dispatcher is on the other CPU. The automatic lead covers the client's usual wake-ups from
    // halt; the ones slower than those are late through the wake path.
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
        ..RunConfig::default()
    };
    let explain = ExplainConfig {
        bound: punctual_explain::DEFAULT_BOUND_NS,
        cpus: vec![],
        quiet: vec![cpu],
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
    assert!(
        t.count(Cause::WakePath) > 0,
        "{t:?}\n{}",
        serde_json::to_string_pretty(&explained.examples_json()).unwrap()
    );
}
