//! `--explain` as a user meets it: its flags, its tables and document on a real `latency` and
//! `run`, and nothing at all when it is not asked for.

mod common;

use common::{punctual, valid_doc, write_file};
use predicates::prelude::*;

#[test]
fn the_explain_flags_need_explain_and_a_unit() {
    punctual()
        .args(["latency", "-D", "1s", "--explain-bound", "20us"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--explain"));
    punctual()
        .args(["latency", "-D", "1s", "--explain", "--explain-bound", "20"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("did you mean"));
    punctual()
        .args(["latency", "-D", "1s", "--explain", "--explain-bound", "0us"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("more than zero"));
    punctual()
        .args(["latency", "-D", "1s", "--explain-trace", "t.trace"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--explain"));
    punctual()
        .args(["latency", "-D", "1s", "--explain", "--explain-trace"])
        .arg("/nonexistent-punctual-dir/t.trace")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--explain-trace: directory"));
    punctual()
        .args(["run", "--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains("--explain-figure"));
}

/// Tracefs instances of punctual processes that exist now.
fn instances() -> Vec<String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter(|l| l.split_whitespace().nth(2) == Some("tracefs"))
        .filter_map(|l| l.split_whitespace().nth(1))
        .flat_map(|m| {
            std::fs::read_dir(format!("{m}/instances"))
                .into_iter()
                .flatten()
        })
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("punctual-"))
        .collect()
}

#[test]
fn without_explain_nothing_is_traced_and_nothing_is_added() {
    let test = "without_explain_nothing_is_traced_and_nothing_is_added";
    if !punctual_testkit::need_root(test, "real-time latency threads") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    // The run's own tracefs instances are named after its pid (`punctual-<pid>[-n]`): looked for
    // while it runs, since other processes' instances may come and go meanwhile.
    let mut child = std::process::Command::new(common::bin_path())
        .args(["latency", "-D", "1s", "-a", "0", "--no-store", "--json"])
        .arg(&json)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let own = format!("punctual-{}", child.id());
    let mut seen = Vec::new();
    loop {
        let done = child.try_wait().unwrap();
        seen.extend(
            instances()
                .into_iter()
                .filter(|n| *n == own || n.starts_with(&format!("{own}-"))),
        );
        if done.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(seen.is_empty(), "a run without --explain made {seen:?}");
    let out = o.stdout;
    let text = String::from_utf8(out).unwrap();
    assert!(!text.contains("Late releases by cause"), "{text}");
    assert!(!text.contains("Top offenders"), "{text}");
    let doc = valid_doc(&json);
    assert!(doc["settings"].get("explain").is_none());
    for s in doc["series"].as_array().unwrap() {
        for key in [
            "lateness_causes",
            "lateness_offenders",
            "floor",
            "floor_instants",
        ] {
            assert!(s.get(key).is_none(), "{key} in {s}");
        }
    }
}

#[test]
fn latency_explained_counts_every_late_sample_by_cause_in_the_document() {
    let test = "latency_explained_counts_every_late_sample_by_cause_in_the_document";
    if !punctual_testkit::tracing(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let svg = dir.path().join("late.svg");
    let kept = dir.path().join("late.trace");
    let out = punctual()
        .args([
            "latency",
            "-D",
            "2s",
            "-i",
            "1ms",
            "-a",
            "0",
            "--no-store",
            "--explain",
            "--explain-figure",
        ])
        .arg(&svg)
        .arg("--explain-trace")
        .arg(&kept)
        .arg("--json")
        .arg(&json)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains("Late releases by cause (later than 10.0 us)"),
        "{text}"
    );
    // The trace the causes were read from is kept, and `trace analyze` reads it whole.
    assert!(text.contains("trace kept in "), "{text}");
    let analyzed = dir.path().join("analyzed.json");
    punctual()
        .args(["trace", "analyze", "--no-store", "--json"])
        .arg(&analyzed)
        .arg(&kept)
        .assert()
        .success();
    let a = valid_doc(&analyzed);
    assert!(a["series"].as_array().is_some_and(|s| !s.is_empty()), "{a}");
    let doc = valid_doc(&json);
    let x = &doc["settings"]["explain"];
    assert_eq!(x["bound_ns"], 10_000);
    assert_eq!(x["trace_file"], kept.display().to_string());
    assert!(x["events"].as_u64().unwrap() > 0);
    // Each traced CPU's share of the events (what each pays for), adding up to all of them.
    let by_cpu = x["events_by_cpu"].as_object().expect("events_by_cpu");
    let traced: Vec<String> = x["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.to_string())
        .collect();
    assert!(by_cpu.keys().all(|c| traced.contains(c)), "{by_cpu:?}");
    let sum: u64 = by_cpu.values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(sum, x["events"].as_u64().unwrap());
    let s = doc["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "thread 0")
        .unwrap();
    let causes = s["lateness_causes"].as_object().expect("lateness_causes");
    let total: u64 = causes.values().map(|v| v.as_u64().unwrap()).sum();
    // Every sample later than the bound is counted once, and missed releases later than it too.
    let count = s["count"].as_u64().unwrap();
    let late = count - (s["within"]["10us"].as_f64().unwrap() * count as f64).round() as u64;
    let missed = s["missed_periods"].as_u64().unwrap();
    assert!(
        total >= late && total <= late + missed,
        "{total} for {late} late, {missed} missed"
    );
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
}

#[test]
fn run_explained_names_causes_per_task_and_records_the_floor() {
    let test = "run_explained_names_causes_per_task_and_records_the_floor";
    if !punctual_testkit::tracing(test) {
        return;
    }
    let _cpu = punctual_testkit::exclusive_cpu();
    let dir = tempfile::tempdir().unwrap();
    let plan = write_file(
        dir.path(),
        "p.toml",
        "[plan]\nname = \"p\"\n[[task]]\nname = \"tick\"\nperiod = \"1ms\"\naction = { kind = \"mark\" }\n",
    );
    let json = dir.path().join("r.json");
    let out = punctual()
        .args(["run"])
        .arg(&plan)
        .args([
            "-D",
            "2s",
            "--no-store",
            "--explain",
            "--explain-bound",
            "2us",
            "--json",
        ])
        .arg(&json)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("Late releases by cause"), "{text}");
    assert!(text.contains("floor on CPU"), "{text}");
    let doc = valid_doc(&json);
    let s = doc["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "tick")
        .unwrap();
    assert!(s["lateness_causes"].is_object(), "{s}");
    let floor = s["floor_instants"]["2us"].as_f64().expect("floor_instants");
    assert!((0.0..=1.0).contains(&floor));
    assert!(s["floor"]["2us"].as_f64().is_some());
}
