//! `punctual trace record` and `trace analyze` through the whole lifecycle on the fake environment:
//! what a user reads and the document, pinned (analysis of a fixture file; a canned recording).

use punctual_result::Output;
use punctual_session::{drive, Canned, Env, Exit, Outputs};
use punctual_trace::measure::{Analyze, Record};
use punctual_trace::record::{RecordConfig, RecordSummary};
use punctual_trace::render::ReportOptions;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

#[test]
fn analyze_through_the_lifecycle() {
    let dir = tempfile::tempdir().unwrap();
    let json = Output::File(dir.path().join("a.json"));
    let out = Outputs::new().json_csv(Some(&json), None).unwrap();
    let env = Env::fake(&["punctual", "trace", "analyze", "sleep-1ms.ptf"]);
    let mut m = Analyze {
        file: fixture("sleep-1ms.ptf"),
        opts: ReportOptions::default(),
        partial: false,
    };
    assert_eq!(drive(&mut m, &out, &env).unwrap(), Exit::Ok);
    let (stdout, stderr) = env.captured();
    assert!(!stderr.contains("steal"), "an analysis has no steal time");
    insta::assert_snapshot!("analyze_stdout", stdout);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("a.json")).unwrap()).unwrap();
    // The trace's own times, not the fake environment's (this fixture names no host: the
    // analysing machine's stands in).
    assert_ne!(doc["started_at"], "2026-01-01T00:00:00Z");
    assert_eq!(doc["host"]["hostname"], "testbox");
    assert_eq!(doc["settings"]["by"], "process");
}

#[test]
fn record_through_the_lifecycle() {
    let summary = RecordSummary {
        path: "/tmp/run.ptf".into(),
        events: 123_456,
        bytes: 1_300_000,
        duration_ns: 10_000_000_000,
        lost: Default::default(),
        cpus: vec![0, 1],
        events_enabled: vec!["sched_switch".into(), "sched_waking".into()],
        target: None,
        target_status: None,
        interrupted: false,
        mounted_tracefs: false,
        tracefs: "/sys/kernel/tracing".into(),
        recorder_cpu_ns: 120_000_000,
    };
    let env = Env::fake(&["punctual", "trace", "record", "-o", "/tmp/run.ptf"]);
    let m = Record::new(RecordConfig::new("/tmp/run.ptf".into()));
    let exit = drive(&mut Canned::new(m, summary), &Outputs::new(), &env).unwrap();
    assert_eq!(exit, Exit::Ok);
    insta::assert_snapshot!("record_stdout", env.captured().0);
}
