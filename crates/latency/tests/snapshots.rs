//! What users read from `punctual latency` and `punctual check`, pinned: the whole lifecycle runs in
//! a fake environment (fixed host and clock, nothing changed on the machine) on canned outcomes.

use punctual_latency::check::{CheckConfig, CheckOutcome, PhaseResult, PHASES};
use punctual_latency::measure::{Check, Latency, SamplesOut};
use punctual_latency::{Config, Mode, Outcome, Stop, ThreadResult};
use punctual_result::Output;
use punctual_rt::{Policy, RtWant};
use punctual_session::{drive, Canned, Env, Exit, Outputs};
use punctual_stats::Recorder;
use punctual_time::{ClockId, MarginPolicy};

const WANT: RtWant = RtWant {
    policy: Policy::Fifo,
    priority: 99,
    mlock: true,
    dma_latency_us: Some(0),
};

/// 1000 samples from `base` ns, spread over 4 us, one 60 us outlier, one missed period.
fn recorder(base: u64) -> Recorder {
    let mut r = Recorder::new();
    for i in 0..1000u64 {
        r.record(base + (i * 37) % 4_000 + if i == 999 { 60_000 } else { 0 });
    }
    r.add_missed(1);
    r
}

fn thread(index: usize, base: u64, margin: Option<u64>) -> ThreadResult {
    ThreadResult {
        index,
        cpu: Some(index),
        recorder: recorder(base),
        cpu_ns: 12_000_000,
        wall_ns: 1_000_000_000,
        policy: Policy::Fifo,
        priority: 99,
        fallback: None,
        margin_ns: margin,
        drift_ns: None,
        dropped_samples: 0,
    }
}

/// Run `m` on its canned outcome; returns (exit, stdout, stderr, the JSON document).
fn pipeline<M: punctual_session::Measurement>(
    m: M,
    outcome: M::Outcome,
    command: &[&str],
    fail_above: Option<u64>,
) -> (Exit, String, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let json = Output::File(dir.path().join("r.json"));
    let out = Outputs::new()
        .json_csv(Some(&json), None)
        .unwrap()
        .fail_above(fail_above);
    let env = Env::fake(command);
    let exit = drive(&mut Canned::new(m, outcome), &out, &env).unwrap();
    let (stdout, stderr) = env.captured();
    let doc = std::fs::read_to_string(dir.path().join("r.json")).unwrap();
    (exit, stdout, stderr, doc)
}

fn latency_config(mode: Mode) -> Config {
    Config {
        threads: vec![Some(0), Some(1)],
        interval: 1_000_000,
        stop: Stop::Duration(1_000_000_000),
        clock: ClockId::Monotonic,
        mode,
        margin: MarginPolicy::Auto,
        policy: Policy::Fifo,
        priority: 99,
        timer_slack_ns: None,
    }
}

#[test]
fn latency_table_and_document() {
    let outcome = Outcome {
        threads: vec![thread(0, 3_000, None), thread(1, 5_000, None)],
        samples_written: 0,
        first_release: 0,
    };
    let m = Latency::new(latency_config(Mode::Abs), WANT, Default::default(), None);
    let (exit, stdout, stderr, doc) = pipeline(
        m,
        (outcome, SamplesOut::default()),
        &["punctual", "latency", "-a", "0-1"],
        None,
    );
    assert_eq!(exit, Exit::Ok);
    assert_eq!(stderr, "");
    insta::assert_snapshot!("latency_table", stdout);
    insta::assert_snapshot!("latency_json", doc);
}

#[test]
fn latency_hybrid_over_the_limit_under_load() {
    let outcome = Outcome {
        threads: vec![thread(0, 100, Some(7_000))],
        samples_written: 0,
        first_release: 0,
    };
    let mut cfg = latency_config(Mode::Hybrid);
    cfg.threads = vec![Some(1)];
    let m = Latency::new(cfg, WANT, "cpu:1@0".parse().unwrap(), None);
    let (exit, stdout, stderr, doc) = pipeline(
        m,
        (outcome, SamplesOut::default()),
        &[
            "punctual",
            "latency",
            "--mode",
            "hybrid",
            "--fail-above",
            "50us",
        ],
        Some(50_000),
    );
    assert_eq!(exit, Exit::LimitExceeded);
    assert!(stderr.contains("limit exceeded: worst sample"), "{stderr}");
    assert!(doc.contains("\"status\": \"limit_exceeded\""));
    assert!(
        doc.contains("\"load\": \"cpu:1@0\""),
        "the load is recorded"
    );
    insta::assert_snapshot!("latency_hybrid_table", stdout);
}

#[test]
fn check_tables_and_verdict() {
    let phases = PHASES
        .iter()
        .enumerate()
        .map(|(i, &phase)| PhaseResult {
            phase,
            thread: thread(0, [20_000, 50, 40_000, 80][i], Some(30_000)),
        })
        .collect();
    let outcome = CheckOutcome {
        phases,
        loads: Vec::new(),
    };
    let cfg = CheckConfig {
        cpu: 1,
        duration: 4_000_000_000,
        interval: 1_000_000,
        load: "cpu:2@0-1,io:1".parse().unwrap(),
        exe: "/usr/bin/punctual".into(),
        policy: Policy::Fifo,
        priority: 99,
        timer_slack_ns: None,
        hybrid_first: false,
    };
    let (exit, stdout, _stderr, doc) =
        pipeline(Check::new(cfg, WANT), outcome, &["punctual", "check"], None);
    assert_eq!(exit, Exit::Ok);
    insta::assert_snapshot!("check_tables", stdout);
    let v: serde_json::Value = serde_json::from_str(&doc).unwrap();
    assert_eq!(v["series"].as_array().unwrap().len(), 4);
    assert!(v["verdict"].is_array() || v["verdict"].is_object());
}
