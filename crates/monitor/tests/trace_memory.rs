//! The monitor's kernel trace runs for days: each snapshot forgets what lies before the instant
//! it is given, so what the trace holds follows that instant, never the uptime (issue 27, bounded
//! memory with attribution on). A real trace of every online CPU, asked every 100 ms to keep only
//! the last 300 ms.

use punctual_monitor::attribution::start_trace;
use std::time::Duration;

fn now() -> u64 {
    punctual_time::clock::read_clock(libc::CLOCK_MONOTONIC)
}

#[test]
fn snapshots_forget_what_is_before_the_instant_they_are_given() {
    let test = "snapshots_forget_what_is_before_the_instant_they_are_given";
    if !punctual_testkit::tracing(test) {
        return;
    }
    let cpus = punctual_testkit::online_cpus();
    let trace = start_trace(&cpus).expect("a trace");
    let mut keep_from = 0;
    let mut seen = 0;
    let mut readings = Vec::new();
    for _ in 0..40 {
        std::thread::sleep(Duration::from_millis(100));
        let asked = now().saturating_sub(300_000_000);
        let s = trace.snapshot(asked).expect("a snapshot");
        // What the previous snapshot said to forget is gone from this one.
        for (i, ev) in s.events.iter().enumerate() {
            assert!(ev.iter().all(|e| e.ts >= keep_from), "CPU {}", s.cpus[i]);
            assert!(s.covered_from[i] >= keep_from);
        }
        // At most one steal reading before it is kept (the one a window starting there needs).
        assert!(s.steal.iter().filter(|x| x.ts < keep_from).count() <= 1);
        assert!(s.end_ns > asked);
        seen += s.events.iter().map(Vec::len).sum::<usize>();
        readings.push(s.steal.len());
        keep_from = asked;
    }
    assert!(seen > 0, "the trace saw events");
    // Steal is read every drain pass (50 ms): about 400 ms of readings held, not 4 s of them.
    let last = *readings.last().unwrap();
    assert!(last <= 20, "{readings:?}");
    drop(trace);
}
