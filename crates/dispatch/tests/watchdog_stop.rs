//! A long watchdog threshold does not hold the end of a run (found by scripts/bad-input.sh, issue 19
//! item 9): the watchdog's threads slept a quarter of the threshold between checks and `stop` joins
//! them, so `run --watchdog 60s` ended 15 s late and `--watchdog 18446744073s` never ended, Ctrl-C
//! included.

use punctual_dispatch::engine::Heartbeat;
use punctual_dispatch::watchdog::{Alarm, Mode, Watchdog};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn stop_takes(threshold_ns: u64) -> Duration {
    stop_takes_in(threshold_ns, Mode::default())
}

fn stop_takes_in(threshold_ns: u64, mode: Mode) -> Duration {
    let cpu = punctual_rt::affinity::last_online_cpu();
    let heartbeats: Arc<[Heartbeat]> = vec![Heartbeat::default()].into();
    // Not real-time: no starvation watch, no RLIMIT_RTTIME, no privileges needed; the watchdog thread's loop
    // is the one under test.
    let w = Watchdog::start(
        threshold_ns,
        &[cpu],
        heartbeats,
        Arc::new(AtomicBool::new(false)),
        mode,
        vec!["a".into()],
        Alarm::default(),
    );
    std::thread::sleep(Duration::from_millis(50));
    let t0 = Instant::now();
    let trip = w.stop();
    let took = t0.elapsed();
    assert!(trip.is_none(), "nothing should have tripped: {trip:?}");
    took
}

#[test]
fn watchdog_with_a_long_threshold_stops_promptly() {
    let minute = 60_000_000_000u64;
    let took = stop_takes(minute);
    // Before the fix: a quarter of the threshold (15 s).
    assert!(
        took < Duration::from_nanos(minute / 8),
        "stopping a 60 s watchdog took {took:?}"
    );
}

#[test]
fn watchdog_with_an_absurd_threshold_stops_at_all() {
    // 18446744073 s, the bad-input script's value: before the fix `stop` slept for 146 years.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(stop_takes(18_446_744_073_000_000_000));
    });
    assert!(
        rx.recv_timeout(Duration::from_secs(60)).is_ok(),
        "stopping a watchdog of 18446744073 s did not return within a minute"
    );
}

/// Issue 32, item 1: with the default threshold (2 s) the watchdog's threads (then its canaries
/// too) slept a quarter of it, 0.5 s, between checks, and `stop` joined them: every run,
/// interrupted ones included, ended up to 0.5 s late (SIGINT 1.1 s into a run took 1.15 s). `stop`
/// now unparks them; before the fix this took about 450 ms, the bound leaves a loaded machine room.
#[test]
fn a_real_time_watchdog_stops_at_once() {
    // SAFETY: plain syscall.
    if unsafe { libc::geteuid() } != 0 {
        punctual_testkit::skip(
            "a_real_time_watchdog_stops_at_once",
            "a real-time watchdog (FIFO 99) needs root",
        );
        return;
    }
    let mode = Mode {
        realtime: true,
        ..Mode::default()
    };
    let took = stop_takes_in(2_000_000_000, mode);
    assert!(
        took < Duration::from_millis(250),
        "stopping a real-time watchdog took {took:?}"
    );
}
