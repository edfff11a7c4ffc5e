//! A run reads its CPUs' stolen time on a thread of its own (`punctual-steal`), not on its
//! dispatch loops, and leaves that thread behind no longer than the run. In a test binary of its
//! own: the thread is found by name among this process's threads.

use punctual_dispatch::{execute, prepare, progress_for, RunConfig};
use punctual_rt::Policy;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const PLAN: &str = r#"
[plan]
duration = "400ms"
[[task]]
name = "tick"
period = "10ms"
action = { kind = "mark" }
"#;

fn samplers() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .filter(|c| c.trim() == "punctual-steal")
        .count()
}

#[test]
fn a_run_reads_steal_on_a_thread_of_its_own_and_ends_it() {
    if punctual_rt::host::steal_ns().is_none() {
        punctual_testkit::skip(
            "a_run_reads_steal_on_a_thread_of_its_own_and_ends_it",
            "/proc/stat has no steal column here",
        );
        return;
    }
    let cfg = RunConfig {
        cpus: vec![punctual_rt::affinity::last_online_cpu()],
        policy: Policy::Other,
        priority: 0,
        ..RunConfig::default()
    };
    assert_eq!(samplers(), 0);
    let stop = Arc::new(AtomicBool::new(false));
    let running = Arc::new(AtomicBool::new(true));
    let seen = std::thread::scope(|s| {
        let watch = s.spawn(|| {
            let mut most = 0;
            while running.load(Ordering::SeqCst) {
                most = most.max(samplers());
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            most
        });
        let plan = punctual_plan::parse_str(PLAN, "t.toml", None).unwrap();
        let p = prepare(plan, &cfg, &stop).unwrap();
        let progress = progress_for(&p);
        let o = execute(p, &cfg, stop.clone(), progress).unwrap();
        running.store(false, Ordering::SeqCst);
        assert!(o.slots.iter().map(|s| s.stats.releases).sum::<u64>() > 0);
        watch.join().unwrap()
    });
    assert_eq!(seen, 1, "one sampler for the run");
    assert_eq!(samplers(), 0, "the sampler outlived the run");
}
