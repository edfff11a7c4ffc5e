//! The signal thread, started before a command knows its CPUs, keeps off the CPUs its real-time
//! threads are pinned to (it would otherwise wake there on a signal).

use punctual_rt::sched::Policy;
use punctual_rt::signals::Interrupts;
use punctual_rt::thread::{setup_current_thread, ThreadRequest};

fn signal_thread_cpus() -> Option<Vec<usize>> {
    for t in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim() == "punctual-signal" {
            let tid: i32 = t.file_name().to_str()?.parse().ok()?;
            return punctual_rt::affinity::get(tid).ok();
        }
    }
    None
}

#[test]
fn the_signal_thread_keeps_off_a_cpu_a_real_time_thread_is_pinned_to() {
    let test = "the_signal_thread_keeps_off_a_cpu_a_real_time_thread_is_pinned_to";
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
    // The thread records its id when it starts.
    let t0 = std::time::Instant::now();
    while signal_thread_cpus().is_none() {
        assert!(t0.elapsed().as_secs() < 10, "no signal thread");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(signal_thread_cpus().unwrap().contains(&measured));
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
    let now = signal_thread_cpus().unwrap();
    assert!(!now.contains(&measured), "{now:?}");
    assert!(!now.is_empty());
}
