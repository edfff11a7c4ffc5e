//! `punctual simulate` through the whole lifecycle on the fake environment: what a user reads and
//! the document, pinned (the simulator is deterministic, so no canned outcome is needed).

use punctual_result::Output;
use punctual_session::{drive, Env, Exit, Outputs};
use punctual_sim::frames::FramesConfig;
use punctual_sim::measure::{Frames, Sweep};
use punctual_sim::{parse_workload, Quantum, RunConfig};

const S: u64 = 1_000_000_000;

fn outputs(dir: &std::path::Path, limit: Option<u64>) -> Outputs {
    let json = Output::File(dir.join("r.json"));
    Outputs::new()
        .json_csv(Some(&json), None)
        .unwrap()
        .fail_above(limit)
}

#[test]
fn sweep_through_the_lifecycle() {
    let cfg = |hz| RunConfig {
        hz,
        quantum: Quantum::Ticks(6),
        duration: 5 * S,
        tasks: parse_workload("cont:2,blk:1").unwrap(),
        ..RunConfig::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let env = Env::fake(&[
        "punctual",
        "simulate",
        "-w",
        "cont:2,blk:1",
        "--hz",
        "100,1000",
    ]);
    let mut m = Sweep::new(vec![cfg(100), cfg(1000)], 1, Some("cont:2,blk:1".into())).unwrap();
    // A limit below the CONT alarm latency: the run says so and exits 1.
    let exit = drive(&mut m, &outputs(dir.path(), Some(1_000_000)), &env).unwrap();
    assert_eq!(exit, Exit::LimitExceeded);
    let (stdout, stderr) = env.captured();
    assert!(stderr.contains("worst simulated alarm latency"), "{stderr}");
    assert!(!stderr.contains("steal"), "a simulation has no steal time");
    insta::assert_snapshot!("simulate_sweep_stdout", stdout);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(doc["started_at"], "1970-01-01T00:00:00Z", "simulated clock");
    assert_eq!(doc["settings"]["clock"], "simulated");
    assert!(
        doc["settings"].get("policy").is_none(),
        "nothing real-time held"
    );
    insta::assert_json_snapshot!("simulate_sweep_settings", doc["settings"]);
}

#[test]
fn frames_through_the_lifecycle() {
    let base = FramesConfig {
        frames: 60,
        shifts: 12,
        ..FramesConfig::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let env = Env::fake(&["punctual", "simulate", "frames"]);
    let mut m = Frames::new(&base, &[100], &[60_000]).unwrap();
    let exit = drive(&mut m, &outputs(dir.path(), None), &env).unwrap();
    assert_eq!(exit, Exit::Ok);
    insta::assert_snapshot!("simulate_frames_stdout", env.captured().0);
}
