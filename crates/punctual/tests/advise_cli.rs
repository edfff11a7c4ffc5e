//! `punctual advise` end to end: inputs, result files, verdicts and exit codes (issue 15).

mod common;
use common::punctual;
use predicates::prelude::*;

/// A `latency` result measured here, with its p99.9 set to `p999_ns` and its policy to `policy`.
fn result(dir: &std::path::Path, name: &str, policy: &str, p999_ns: u64) -> std::path::PathBuf {
    let path = dir.join(name);
    punctual()
        .args(["latency", "-D", "300ms", "--policy", "other", "--json"])
        .arg(&path)
        .assert()
        .success();
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    doc["settings"]["policy"] = policy.into();
    for s in doc["series"].as_array_mut().unwrap() {
        s["percentiles"]["99.9"] = p999_ns.into();
    }
    std::fs::write(&path, doc.to_string()).unwrap();
    path
}

#[test]
fn advise_without_a_deadline_names_the_missing_input() {
    punctual()
        .arg("advise")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--deadline"));
}

#[test]
fn advise_decides_with_the_result_files_it_is_given() {
    let t = tempfile::tempdir().unwrap();
    let rt = result(t.path(), "rt.json", "fifo", 500_000);
    let fast = result(t.path(), "fast.json", "other", 8_000_000);
    // Real time meets 10 ms, real fast (8 ms + 5 ms) does not: real time, with its settings.
    punctual()
        .args(["advise", "--deadline", "10ms", "--work", "5ms", "--from"])
        .arg(&rt)
        .arg("--from")
        .arg(&fast)
        .assert()
        .code(0)
        .stdout(
            predicate::str::contains("Verdict: real time")
                .and(predicate::str::contains("--policy fifo -p 98")),
        );
    // 250 us cannot be met with a 500 us p99.9: exit 1 with the figures.
    punctual()
        .args(["advise", "--deadline", "250us", "--work", "100us", "--from"])
        .arg(&rt)
        .assert()
        .code(1)
        .stdout(predicate::str::contains("p99.9 start latency is 500 us"));
    // Only real fast measured: measure real time first.
    punctual()
        .args(["advise", "--deadline", "10ms", "--from"])
        .arg(&fast)
        .assert()
        .code(0)
        .stdout(
            predicate::str::contains("Verdict: benchmark both")
                .and(predicate::str::contains("punctual check")),
        );
    // The JSON carries the steps and the verdict.
    let out = punctual()
        .args(["advise", "--deadline", "10ms", "--json", "-", "--from"])
        .arg(&rt)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["advice"]["verdict"], "real-time");
    assert!(v["advice"]["steps"].as_array().unwrap().len() >= 6);
}

#[test]
fn advise_refuses_results_it_cannot_read() {
    let t = tempfile::tempdir().unwrap();
    let rt = result(t.path(), "r.json", "fifo", 500_000);
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&rt).unwrap()).unwrap();
    doc["command"][1] = "run".into();
    std::fs::write(&rt, doc.to_string()).unwrap();
    punctual()
        .args(["advise", "--deadline", "1ms", "--from"])
        .arg(&rt)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "advise reads `check`, `latency` and `mckenney-choose` results",
        ));
    punctual()
        .args(["advise", "--deadline", "1ms", "--from", "/nonexistent.json"])
        .assert()
        .code(2);
}

/// A `mckenney-choose` result given with `--from` supplies both configurations' start latency and
/// real time's measured slowdown, and the step says the slowdown was measured.
#[test]
fn advise_uses_the_slowdowns_a_choose_result_measured() {
    let t = tempfile::tempdir().unwrap();
    let path = result(t.path(), "choose.json", "fifo", 40_000);
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    doc["command"] = serde_json::json!(["punctual", "experiment", "run", "mckenney-choose"]);
    doc["experiment"] = "mckenney-choose".into();
    doc["slowdowns"] = serde_json::json!({"compute": 1.0, "kernel": 1.1, "io": 1.5});
    let rt = doc["series"][0].clone();
    let mut fast = rt.clone();
    fast["name"] = "real fast loaded".into();
    fast["configuration"] = "real_fast".into();
    fast["percentiles"]["99.9"] = 4_000_000.into();
    let mut rt = rt;
    rt["name"] = "real time loaded".into();
    rt["configuration"] = "real_time".into();
    doc["series"] = serde_json::json!([rt, fast]);
    std::fs::write(&path, doc.to_string()).unwrap();
    // 40 us + 10 ms x 1.5 and 4 ms + 10 ms both meet 20 ms: real fast, crossing at 7.92 ms.
    punctual()
        .args(["advise", "--deadline", "20ms", "--work", "10ms"])
        .args(["--work-kind", "io", "--from"])
        .arg(&path)
        .assert()
        .code(0)
        .stdout(
            predicate::str::contains("io work x1.500, measured here by mckenney-choose")
                .and(predicate::str::contains("Verdict: real fast"))
                .and(predicate::str::contains(
                    "longer than 7.92 ms complete sooner real fast",
                )),
        );
}
