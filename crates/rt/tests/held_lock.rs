//! Issue 32, seen again in a loaded whole suite (2026-11-29): `latency` on a CPU a FIFO 99 process
//! held, signalled 300 ms in, still ran 30 s later. Its measuring thread was runnable on the held
//! CPU, the unstick thread still parked, and the signal thread blocked in a futex: a stop before
//! the command armed the handlers (restore and exit at once) never woke the unstick thread, and
//! waited on something a thread that could not run held. Here a thread holds the standard error
//! lock the stop writes to, pinned at FIFO 99 to a CPU a FIFO 99 spinner holds.

use std::time::{Duration, Instant};

const CHILD: &str = "PUNCTUAL_HELD_LOCK_CHILD";
const TEST: &str = "a_stop_before_arming_frees_a_held_thread_holding_a_lock_it_needs";

/// The child: handlers installed, not armed; a thread takes the stderr lock and pins itself at
/// FIFO 99 to `cpu`, where it cannot run again; then it waits to be signalled.
fn child(cpu: usize) {
    punctual_rt::signals::Interrupts::install();
    std::thread::spawn(move || {
        let held = std::io::stderr().lock();
        let _g = punctual_rt::thread::setup_current_thread(&punctual_rt::thread::ThreadRequest {
            cpu: Some(cpu),
            policy: punctual_rt::sched::Policy::Fifo,
            priority: 99,
            timer_slack_ns: None,
            fall_back_on_refusal: false,
        })
        .expect("FIFO as root");
        let until = Instant::now() + Duration::from_secs(60);
        while Instant::now() < until && !punctual_rt::signals::Interrupts::install().requested() {
            std::hint::spin_loop();
        }
        drop(held);
    });
    std::thread::sleep(Duration::from_secs(120));
}

/// Whether a thread of `pid` is real-time.
fn held_realtime_thread(pid: i32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks
        .flatten()
        .filter_map(|t| t.file_name().to_str()?.parse::<i32>().ok())
        .any(punctual_rt::is_realtime)
}

#[test]
fn a_stop_before_arming_frees_a_held_thread_holding_a_lock_it_needs() {
    if let Ok(cpu) = std::env::var(CHILD) {
        child(cpu.parse().unwrap());
        return;
    }
    if !punctual_testkit::need_root(TEST, "SCHED_FIFO 99") {
        return;
    }
    let cpus = punctual_rt::affinity::online_cpus();
    if cpus.len() < 2 {
        punctual_testkit::skip(TEST, "needs a second CPU to move the held thread to");
        return;
    }
    let _cpu = punctual_testkit::exclusive_cpu();
    let last = *cpus.last().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let spinner = punctual_testkit::Spinner::start(last, Some(99));
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
        .env(CHILD, last.to_string())
        .env("PUNCTUAL_STATE_DIR", dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // A normal thread gets the real-time throttling's 5 % of the held CPU: enough to set itself
    // up; FIFO 99 behind the spinner it then does not run again.
    let t0 = Instant::now();
    while !held_realtime_thread(child.id() as i32) {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the child's thread never set itself up"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let t1 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if t1.elapsed() > Duration::from_secs(10) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    if status.is_none() {
        // Let the held thread run so the child can be killed, then fail.
        drop(spinner);
        let _ = child.kill();
        let _ = child.wait();
        panic!("the child still ran 10 s after SIGTERM");
    }
    drop(spinner);
    assert_eq!(
        status.unwrap().code(),
        Some(130),
        "restored and exited as interrupted"
    );
}
