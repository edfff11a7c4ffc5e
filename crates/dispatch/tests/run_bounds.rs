//! A run ends by its plan's duration, and two runs a watchdog acts on do not share a process at
//! once (issue 32: a test of exec_children.rs hung 1,760 s holding the machine's test CPU lock).

use punctual_dispatch::{execute, prepare, progress_for, Outcome, RunConfig};
use punctual_rt::Policy;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const PLAN: &str = r#"
[plan]
duration = "300ms"
[[task]]
name = "tick"
period = "10ms"
action = { kind = "mark" }
"#;

fn config(watchdog: Option<u64>) -> RunConfig {
    RunConfig {
        cpus: vec![punctual_rt::affinity::last_online_cpu()],
        policy: Policy::Other,
        priority: 0,
        watchdog,
        ..RunConfig::default()
    }
}

fn run(text: &str, cfg: &RunConfig, stop: Arc<AtomicBool>) -> Outcome {
    let plan = punctual_plan::parse_str(text, "t.toml", None).unwrap();
    let p = prepare(plan, cfg, &stop).unwrap();
    let progress = progress_for(&p);
    execute(p, cfg, stop, progress).unwrap()
}

/// `RunConfig::duration` left out (the binary resolves it; a library caller or a test may not):
/// the run ran until stopped. Here a backstop stops it after 20 s; the run must end by itself first.
#[test]
fn a_run_ends_by_the_plans_duration_when_the_config_leaves_it_out() {
    let stop = Arc::new(AtomicBool::new(false));
    let fired = Arc::new(AtomicBool::new(false));
    let backstop = {
        let (stop, fired) = (stop.clone(), fired.clone());
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let h = std::thread::spawn(move || {
            if rx.recv_timeout(Duration::from_secs(20)).is_err() {
                fired.store(true, Ordering::SeqCst);
                stop.store(true, Ordering::SeqCst);
            }
        });
        (h, tx)
    };
    let cfg = config(None);
    assert_eq!(cfg.duration, None);
    let o = run(PLAN, &cfg, stop);
    let _ = backstop.1.send(());
    backstop.0.join().unwrap();
    assert!(
        !fired.load(Ordering::SeqCst),
        "the run ended only when stopped"
    );
    // 300 ms of a 10 ms task: at most 30 releases (fewer when a loaded machine made it skip).
    let releases: u64 = o.slots.iter().map(|s| s.stats.releases).sum();
    assert!((1..=30).contains(&releases), "{releases} releases");
}

/// Two watched runs started at once from two threads of one process: the second begins after the
/// first has ended (a watchdog's trip demotes every real-time thread of the process; it must
/// not reach a run that is not its own).
#[test]
fn two_watched_runs_of_one_process_take_turns() {
    let spans: Vec<(u64, u64)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let cfg = RunConfig {
                        duration: Some(300_000_000),
                        ..config(Some(2_000_000_000))
                    };
                    let o = run(PLAN, &cfg, Arc::default());
                    let end = punctual_time::clock::read_clock(libc::CLOCK_MONOTONIC);
                    (o.start, end)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let (a, b) = (spans[0], spans[1]);
    assert!(a.0 > 0 && b.0 > 0, "{spans:?}");
    assert!(
        a.1 <= b.0 || b.1 <= a.0,
        "the runs overlapped: {spans:?} (start, returned)"
    );
}
