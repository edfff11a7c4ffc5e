//! The signal thread and the unstick thread, started before a command knows its CPUs, keep off
//! the CPUs its real-time threads are pinned to (they would otherwise wake there on a signal).

use punctual_rt::sched::Policy;
use punctual_rt::signals::Interrupts;
use punctual_rt::thread::{setup_current_thread, ThreadRequest};

/// The CPUs of the thread named `name` (as `comm` gives it: 15 characters).
fn helper_cpus(name: &str) -> Option<Vec<usize>> {
    for t in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim() == name {
            let tid: i32 = t.file_name().to_str()?.parse().ok()?;
            return punctual_rt::affinity::get(tid).ok();
        }
    }
    None
}

#[test]
fn the_signal_and_unstick_threads_keep_off_a_cpu_a_real_time_thread_is_pinned_to() {
    let test = "the_signal_and_unstick_threads_keep_off_a_cpu_a_real_time_thread_is_pinned_to";
    if !punctual_testkit::need_root(test, "SCHED_FIFO") {
        return;
    }
    let cpus = punctual_rt::affinity::online_cpus();
    if cpus.len() < 2 {
        punctual_testkit::skip(test, "needs two CPUs");
        return;
    }
    let measured = *cpus.last().unwrap();
    Interrupts::install();
    const HELPERS: [&str; 2] = ["punctual-signal", "punctual-unstic"];
    // Each thread records its id when it starts.
    let t0 = std::time::Instant::now();
    while HELPERS.iter().any(|h| helper_cpus(h).is_none()) {
        assert!(t0.elapsed().as_secs() < 10, "no signal or unstick thread");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    for h in HELPERS {
        assert!(helper_cpus(h).unwrap().contains(&measured), "{h}");
    }
    std::thread::spawn(move || {
        let _g = setup_current_thread(&ThreadRequest {
            cpu: Some(measured),
            policy: Policy::Fifo,
            priority: 10,
            timer_slack_ns: None,
            fall_back_on_refusal: false,
        })
        .expect("FIFO as root");
    })
    .join()
    .unwrap();
    for h in HELPERS {
        let now = helper_cpus(h).unwrap();
        assert!(!now.contains(&measured), "{h}: {now:?}");
        assert!(!now.is_empty(), "{h}");
    }
}
