//! `punctual simulate` end to end: the real binary, its outputs, and every bad input refused with
//! exit 2 before anything runs or is written.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

fn punctual() -> Command {
    let mut c = Command::cargo_bin("punctual").unwrap();
    c.env_remove("SOURCE_DATE_EPOCH");
    // Keep stored results out of the user's data directory.
    c.env("PUNCTUAL_DATA_DIR", punctual_testkit::data_dir());
    c
}

fn json_of(args: &[&str]) -> Value {
    let out = punctual()
        .args(args)
        .args(["--json", "-"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    serde_json::from_slice(&out).expect("stdout is the result document")
}

#[test]
fn workload_run_writes_a_valid_document_with_events_and_series_per_task() {
    let doc = json_of(&[
        "simulate",
        "--hz",
        "100",
        "--quantum",
        "60ms",
        "--policy",
        "rr",
        "--workload",
        "cont:4,blk:2",
        "-D",
        "30s",
    ]);
    let schema: Value = serde_json::from_str(punctual_result::SCHEMA_JSON).unwrap();
    let v = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = v
        .iter_errors(&doc)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    assert!(
        doc["events"].as_u64().unwrap() >= 3000,
        "at least the ticks"
    );
    assert_eq!(doc["simulated_ns"], 30_000_000_000u64);
    assert!(
        doc["settings"].get("policy").is_none(),
        "no real-time settings for a simulation"
    );
    assert_eq!(doc["settings"]["scheduler"], "rr");
    let series = doc["series"].as_array().unwrap();
    let find = |name: &str, kind: &str| {
        series
            .iter()
            .find(|s| s["name"] == name && s["kind"] == kind)
            .cloned()
    };
    let cont0 = find("cont 0", "effective_quantum").expect("per-task series");
    assert!(cont0["billing_ratio"].as_f64().unwrap() > 0.9);
    assert!(cont0["quanta_per_s"].as_f64().unwrap() > 0.0);
    assert!(find("cont 0", "alarm_latency").is_some());
    assert!(
        find("cont (4 tasks)", "alarm_latency").is_some(),
        "pooled per group"
    );
    // The worst CONT latency is at most (N - 1) quanta plus overheads.
    let max = find("cont (4 tasks)", "alarm_latency").unwrap()["max"]
        .as_u64()
        .unwrap();
    assert!(max <= 3 * 60_000_000 + 1_000_000, "{max}");
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    let run = |seed: &str| {
        punctual()
            .args([
                "simulate",
                "-w",
                "pct8:3,typist",
                "--hz",
                "1000",
                "-D",
                "20s",
                "--seed",
                seed,
                "--json",
                "-",
            ])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone()
    };
    let a = run("7");
    assert_eq!(a, run("7"), "byte-identical for the same seed");
    assert_ne!(a, run("8"));
}

#[test]
fn sweep_runs_every_hz_and_quantum() {
    let doc = json_of(&[
        "simulate",
        "--hz",
        "100,1000,20000",
        "--quantum",
        "6ticks",
        "--workload",
        "cont:8,blk:2",
        "-D",
        "10s",
    ]);
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    let q: Vec<u64> = runs
        .iter()
        .map(|r| r["quantum_ns"].as_u64().unwrap())
        .collect();
    assert_eq!(
        q,
        vec![60_000_000, 6_000_000, 300_000],
        "6 ticks at each HZ"
    );
    let names: Vec<&str> = doc["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"cont 0 @20000Hz 6ticks"), "{names:?}");
    let total: u64 = runs.iter().map(|r| r["events"].as_u64().unwrap()).sum();
    assert_eq!(doc["events"].as_u64().unwrap(), total);
}

#[test]
fn jobs_do_not_change_the_output() {
    let run = |j: &str| {
        punctual()
            .args([
                "simulate",
                "--hz",
                "100,250,1000",
                "-w",
                "cont:3",
                "-D",
                "10s",
                "-j",
                j,
                "--csv",
                "-",
            ])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone()
    };
    assert_eq!(run("1"), run("2"));
}

#[test]
fn frames_reports_shown_and_skipped_per_shift() {
    let doc = json_of(&[
        "simulate", "frames", "--fps", "60", "--hz", "100", "--frames", "300", "--shifts", "12",
    ]);
    let series = doc["series"].as_array().unwrap();
    assert_eq!(series.len(), 12);
    let skipping = series
        .iter()
        .filter(|s| s["frames_skipped"].as_u64().unwrap() > 0)
        .count();
    assert_eq!(skipping, 6, "half the shifts skip");
    for s in series {
        let shown = s["frames_shown"].as_u64().unwrap();
        assert!(shown == 300 || shown == 200, "{shown}");
    }
    let text = punctual()
        .args([
            "simulate", "frames", "--fps", "60", "--hz", "1000", "--frames", "100", "--shifts", "4",
        ])
        .assert()
        .success();
    text.stdout(predicate::str::contains("skipped frames").and(predicate::str::contains("none")));
}

#[test]
fn scenario_runs_and_flags_override_it() {
    let root =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/sim/xine.toml");
    let doc = json_of(&[
        "simulate",
        "scenario",
        root.to_str().unwrap(),
        "-D",
        "10s",
        "--hz",
        "1000",
    ]);
    assert_eq!(doc["runs"].as_array().unwrap().len(), 1);
    assert_eq!(doc["settings"]["hz"], serde_json::json!([1000]));
    assert!(doc["series"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["name"] == "X"));
}

#[test]
fn plot_and_csv_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("f.svg");
    let csv = dir.path().join("r.csv");
    punctual()
        .args([
            "simulate",
            "-w",
            "cont:2",
            "-D",
            "5s",
            "--plot",
            svg.to_str().unwrap(),
            "--csv",
            csv.to_str().unwrap(),
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("billing"));
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    assert!(std::fs::read_to_string(&csv).unwrap().lines().count() >= 3);
}

#[test]
fn bad_input_exits_2_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.json");
    let bad_scenario = dir.path().join("bad.toml");
    std::fs::write(
        &bad_scenario,
        "[sim]\nhz = 100\n\n[[task]]\nbehaviour = \"juggler\"\n",
    )
    .unwrap();
    let malformed = dir.path().join("malformed.toml");
    std::fs::write(&malformed, "[sim]\nhz = [100,\n").unwrap();
    let o = out.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["simulate", "-w", "cont:2", "--hz", "0"], "--hz"),
        (vec!["simulate", "-w", "cont:2", "--hz", "2000000"], "1 MHz"),
        (
            vec![
                "simulate",
                "-w",
                "cont:2",
                "--hz",
                "100",
                "--quantum",
                "5ms",
            ],
            "under one tick",
        ),
        (
            vec!["simulate", "-w", "cont:2", "--quantum", "0ticks"],
            "under one tick",
        ),
        (
            vec!["simulate", "-w", "cont:2", "--policy", "edf"],
            "valid: rr, fifo, linux24, fair, plan",
        ),
        (
            vec!["simulate", "-w", "cont:2", "--timer", "hpet"],
            "valid: periodic, oneshot, soft, firm",
        ),
        (
            vec!["simulate", "-w", "dancer:2"],
            "unknown behaviour 'dancer'",
        ),
        (
            vec!["simulate", "-w", "cont:2", "-D", "60"],
            "did you mean 60s?",
        ),
        (
            vec![
                "simulate", "-w", "cont:2", "--hz", "150000", "-D", "100000s",
            ],
            "events",
        ),
        (
            vec!["simulate", "-w", "cont:2", "--hz", "1000000"],
            "nothing but take interrupts",
        ),
        (vec!["simulate"], "give a workload"),
        (vec!["simulate", "frames", "--frames", "0"], "--frames"),
        (
            vec!["simulate", "scenario", bad_scenario.to_str().unwrap()],
            "bad.toml:5:13",
        ),
        (
            vec!["simulate", "scenario", malformed.to_str().unwrap()],
            "malformed.toml:",
        ),
        (
            vec!["simulate", "scenario", "/nonexistent/x.toml"],
            "reading scenario",
        ),
    ];
    for (args, needle) in cases {
        punctual()
            .args(&args)
            .args(["--json", o])
            .assert()
            .code(2)
            .stderr(predicate::str::contains(needle));
        assert!(!out.exists(), "{args:?} wrote output");
    }
}

#[test]
fn the_event_estimate_is_refused_with_the_figure() {
    punctual()
        .args([
            "simulate", "-w", "cont:2", "--hz", "150000", "-D", "100000s",
        ])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("would process about")
                .and(predicate::str::contains("--max-events")),
        );
}

#[test]
fn fail_above_exits_1_when_a_simulated_alarm_is_later() {
    punctual()
        .args([
            "simulate",
            "-w",
            "cont:4",
            "-D",
            "20s",
            "--fail-above",
            "1ms",
        ])
        .assert()
        .code(1);
    punctual()
        .args([
            "simulate",
            "-w",
            "cont:4",
            "-D",
            "20s",
            "--fail-above",
            "1s",
        ])
        .assert()
        .code(0);
}

#[test]
fn experiments_are_listed() {
    punctual()
        .args(["experiment", "list"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("etsion-frames")
                .and(predicate::str::contains("etsion-billing --sim"))
                .and(predicate::str::contains("etsion-latency --sim")),
        );
}

#[test]
fn etsion_frames_quick_runs_and_writes_its_figures() {
    let dir = tempfile::tempdir().unwrap();
    punctual()
        .env("PUNCTUAL_DATA_DIR", dir.path())
        .args([
            "experiment",
            "run",
            "etsion-frames",
            "--quick",
            "--figures",
            dir.path().to_str().unwrap(),
        ])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("frame 2 of 3")
                .and(predicate::str::contains("frame 2 (5.00-6.67 ms)")),
        );
    assert!(dir.path().join("etsion-frames-fig1.svg").exists());
    assert!(dir.path().join("etsion-frames-fig5.svg").exists());
}

#[test]
fn interrupted_simulation_exits_130_with_partial_results() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("partial.json");
    let exe = assert_cmd::cargo::cargo_bin("punctual");
    // Long enough that it cannot finish before the signal (about 10^9 events).
    let mut child = std::process::Command::new(exe)
        .env("PUNCTUAL_DATA_DIR", punctual_testkit::data_dir())
        .args([
            "simulate",
            "-w",
            "cont:8",
            "--hz",
            "100000",
            "-D",
            "10000s",
            "--irq-cost",
            "0ns",
            "--irq-indirect",
            "0ns",
        ])
        .args(["--json", out.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    // SAFETY: kill touches no memory; the pid is our child's, not yet waited for, so it cannot
    // have been reused by another process.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(doc["status"], "interrupted");
    let simulated = doc["simulated_ns"].as_u64().unwrap();
    assert!(
        simulated > 0 && simulated < 10_000_000_000_000,
        "{simulated}"
    );
}
