//! Issue 32, Low (memory amplification): a 250 KB crafted trace whose every event names a new
//! hrtimer function made `trace analyze` take 1.1 GB (a 270 KB histogram per source, two for
//! hrtimers). Sources now cost their samples until they have many; this file runs alone in its
//! own process so the peak resident size is this test's.

use punctual_trace::event::EventKind;
use punctual_trace::file::{read_trace, TraceWriter};

fn peak_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn memory_amplification_a_trace_naming_a_new_source_in_every_event_stays_small() {
    let header = punctual_trace::file::Header {
        clock: "mono".into(),
        started_at: "2026-01-01T00:00:00Z".into(),
        start_ns: 1_000,
        host: None,
        cpus: vec![0],
        events: vec!["timer/hrtimer_expire_entry".into()],
        buffer_kb: 1024,
        command: vec![],
        target: None,
    };
    let mut w = TraceWriter::new(Vec::new(), &header).unwrap();
    let mut ts = 1_000;
    for f in 0..8_000u64 {
        for kind in [
            EventKind::HrtimerStart {
                timer: f,
                function: 0x1000 + f,
                expires: ts + 10,
            },
            EventKind::HrtimerEntry {
                timer: f,
                function: 0x1000 + f,
                now: Some(ts + 20),
            },
            EventKind::HrtimerExit { timer: f },
        ] {
            ts += 10;
            w.push(0, ts, &kind).unwrap();
        }
    }
    let bytes = w
        .finish(&punctual_trace::file::Trailer {
            end_ns: ts + 1,
            ..Default::default()
        })
        .unwrap();
    let trace = read_trace(&bytes).unwrap();
    let before = peak_kb();
    let a = punctual_trace::analyze::analyze(&trace);
    let grew_mb = peak_kb().saturating_sub(before) / 1024;
    assert!(a.sources.len() >= 4_000, "{} sources", a.sources.len());
    // 4096 sources with a histogram each for durations and lateness: over 2 GB before.
    assert!(
        grew_mb < 100,
        "analysing a {} KB trace grew the peak by {grew_mb} MB",
        bytes.len() / 1024
    );
}
