//! End-to-end runs of the binary: documents validated against the schema, every mode, every export,
//! interruption, the privilege-less fallback, and loads reaped. Counts and structure are asserted, never
//! speed.

mod common;
use common::{bin_path, is_root, pid_alive, punctual, valid_doc};
use punctual_testkit::skip as report_skip;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(60);

#[test]
fn every_mode_produces_the_asked_samples_and_a_valid_document() {
    let dir = tempfile::tempdir().unwrap();
    for mode in ["abs", "rel", "timerfd", "signal", "hybrid"] {
        let json = dir.path().join(format!("{mode}.json"));
        punctual()
            .args([
                "latency", "-t", "2", "-l", "120", "-i", "1ms", "--mode", mode, "--json",
            ])
            .arg(&json)
            .timeout(T)
            .assert()
            .success();
        let doc = valid_doc(&json);
        assert_eq!(doc["status"], "ok", "{mode}");
        assert_eq!(doc["settings"]["mode"], mode);
        // Steal time during the run, one entry per CPU (zero on bare metal, never absent on Linux).
        let steal = doc["settings"]["steal_ns"].as_object().unwrap();
        let cpus = doc["host"]["cpus"].as_u64().unwrap() as usize;
        assert_eq!(steal.len(), cpus, "{mode}: {steal:?}");
        assert!(steal.values().all(|v| v.is_u64()), "{mode}: {steal:?}");
        let series = doc["series"].as_array().unwrap();
        assert_eq!(series.len(), 3, "{mode}: two threads and a total");
        for s in &series[..2] {
            assert_eq!(s["count"], 120, "{mode}: {s}");
            assert!(s["min"].as_u64().unwrap() <= s["median"].as_u64().unwrap());
            assert!(s["median"].as_u64().unwrap() <= s["max"].as_u64().unwrap());
            assert!(s["cpu_ns"].as_u64().unwrap() > 0);
        }
        assert_eq!(series[2]["name"], "total");
        assert_eq!(series[2]["count"], 240);
        match mode {
            "hybrid" => assert!(series[0]["spin_margin_ns"].as_u64().unwrap() >= 2_000),
            "rel" => assert!(series[0].get("drift_ns").is_some()),
            _ => assert!(series[0].get("spin_margin_ns").is_none()),
        }
    }
}

#[test]
fn exports_agree_with_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let (json, csv, hist, samples) = (
        dir.path().join("o.json"),
        dir.path().join("o.csv"),
        dir.path().join("h.txt"),
        dir.path().join("s.csv"),
    );
    punctual()
        .args([
            "latency",
            "-t",
            "2",
            "-a",
            "0",
            "-l",
            "300",
            "-i",
            "500us",
            "--hist-buckets",
            "2000",
        ])
        .arg("--json")
        .arg(&json)
        .arg("--csv")
        .arg(&csv)
        .arg("--hist")
        .arg(&hist)
        .arg("--samples")
        .arg(&samples)
        .timeout(T)
        .assert()
        .success();
    let doc = valid_doc(&json);
    // Both threads were pinned to CPU 0 as asked.
    assert_eq!(doc["series"][0]["cpu"], 0);
    assert_eq!(doc["series"][1]["cpu"], 0);
    let csv = std::fs::read_to_string(&csv).unwrap();
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows.len(), 4, "header + 2 threads + total");
    // Each row names its run (id, start, host), then the series.
    let cols: Vec<&str> = rows[1].split(',').collect();
    assert_eq!(
        &cols[3..7],
        ["thread 0", "0", "wakeup_latency", "300"],
        "{}",
        rows[1]
    );
    assert_eq!(Some(cols[0]), doc["run_id"].as_str());
    assert_eq!(Some(cols[1]), doc["started_at"].as_str());
    // Every sample of every thread is in --samples, and each thread's releases step by the interval.
    let text = std::fs::read_to_string(&samples).unwrap();
    let mut per_thread: [Vec<(u64, u64)>; 2] = [vec![], vec![]];
    for line in text.lines().skip(1) {
        let f: Vec<u64> = line.split(',').map(|x| x.parse().unwrap()).collect();
        per_thread[f[0] as usize].push((f[1], f[2]));
    }
    for (t, v) in per_thread.iter().enumerate() {
        assert_eq!(v.len(), 300, "thread {t}");
        assert!(
            v.windows(2)
                .all(|w| w[1].0 > w[0].0 && (w[1].0 - w[0].0) % 500_000 == 0),
            "thread {t} releases off the grid"
        );
        let max = v.iter().map(|s| s.1).max().unwrap();
        assert_eq!(
            max,
            doc["series"][t]["max"].as_u64().unwrap(),
            "samples and document disagree on max"
        );
    }
    assert_eq!(doc["settings"]["samples_written"], 600);
    // The cyclictest histogram counts every sample, in range or as overflow.
    let hist = std::fs::read_to_string(&hist).unwrap();
    let mut sum = [0u64; 2];
    // Bucket lines: a column per thread (no total column); cyclictest ends with an empty line.
    for l in hist
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let f: Vec<u64> = l.split_whitespace().map(|x| x.parse().unwrap()).collect();
        assert_eq!(f.len(), 3, "{l}");
        sum[0] += f[1];
        sum[1] += f[2];
    }
    let over: Vec<u64> = hist
        .lines()
        .find(|l| l.starts_with("# Histogram Overflows:"))
        .unwrap()
        .split_whitespace()
        .skip(3)
        .map(|x| x.parse().unwrap())
        .collect();
    assert_eq!(sum[0] + over[0], 300);
    assert_eq!(sum[1] + over[1], 300);
}

#[test]
fn json_to_stdout_moves_the_table_to_stderr() {
    let out = punctual()
        .args(["latency", "-t", "1", "-l", "20", "--json", "-"])
        .timeout(T)
        .assert()
        .success();
    let o = out.get_output();
    let doc: serde_json::Value =
        serde_json::from_slice(&o.stdout).expect("stdout is exactly the document");
    assert_eq!(doc["series"][0]["count"], 20);
    assert!(String::from_utf8_lossy(&o.stderr).contains("Wake-up latency"));
}

#[test]
fn fail_above_exits_1_and_records_the_status() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("o.json");
    // 1 ns: no wake-up is that punctual.
    punctual()
        .args([
            "latency",
            "-t",
            "1",
            "-l",
            "20",
            "--fail-above",
            "1ns",
            "--json",
        ])
        .arg(&json)
        .timeout(T)
        .assert()
        .code(1);
    assert_eq!(valid_doc(&json)["status"], "limit_exceeded");
    // An hour: always within.
    punctual()
        .args(["latency", "-t", "1", "-l", "20", "--fail-above", "1h"])
        .timeout(T)
        .assert()
        .success();
}

#[test]
fn interrupted_run_exits_130_with_partial_valid_results_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("o.json");
    let state = dir.path().join("state");
    let mut child = std::process::Command::new(bin_path())
        .args([
            "latency", "-t", "1", "-D", "60s", "--load", "cpu:1", "--json",
        ])
        .arg(&json)
        .env("PUNCTUAL_STATE_DIR", &state)
        .env("PUNCTUAL_DATA_DIR", dir.path().join("data"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let start = Instant::now();
    // SAFETY: signalling our own child by pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "took {:?} to stop",
        start.elapsed()
    );
    let doc = valid_doc(&json);
    assert_eq!(doc["status"], "interrupted");
    let n = doc["series"][0]["count"].as_u64().unwrap();
    assert!(n > 100 && n < 60_000, "partial count {n}");
    // The load process was reaped; no journal was left.
    let reports = doc["settings"]["load_reports"].as_array().unwrap();
    assert_eq!(reports.len(), 1);
    assert!(!pid_alive(reports[0]["pid"].as_i64().unwrap()));
    assert!(!state.exists() || std::fs::read_dir(&state).unwrap().count() == 0);
}

#[test]
fn one_interrupt_ends_a_long_interval_run_before_its_next_release() {
    // A 10 s interval: the thread sleeps towards its next release in slices of at most a second, so
    // one interrupt ends the run without waiting for that release (about 8.5 s away when it comes).
    // (The second interrupt, for a run the first cannot end, is in dispatch_cli.rs.)
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(bin_path())
        .args(["latency", "-t", "1", "-i", "10s", "-D", "60s", "--json"])
        .arg(dir.path().join("l.json"))
        .env("PUNCTUAL_DATA_DIR", dir.path().join("data"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: signalling our own child by pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("never stopped");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130));
    // Not a speed bound: the next release is 8.5 s after the signal, and the run must not wait
    // for it.
    assert!(
        start.elapsed() < Duration::from_secs(6),
        "waited {:?} for the next release",
        start.elapsed()
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("l.json")).unwrap()).unwrap();
    assert_eq!(doc["status"], "interrupted");
}

#[test]
fn without_privileges_it_falls_back_says_how_to_fix_and_records_it() {
    if !is_root()
        || std::process::Command::new("setpriv")
            .arg("--version")
            .output()
            .is_err()
    {
        report_skip(
            "without_privileges_it_falls_back",
            "needs root (to drop capabilities) and setpriv",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("o.json");
    let out = std::process::Command::new("prlimit")
        .args([
            "--rtprio=0:0",
            "--memlock=65536:65536",
            "setpriv",
            "--bounding-set=-sys_nice,-ipc_lock",
            "--",
        ])
        .arg(bin_path())
        .args(["latency", "-t", "1", "-l", "50", "--json"])
        .arg(&json)
        .env("PUNCTUAL_DATA_DIR", dir.path().join("data"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("fallback: scheduling policy") && stderr.contains("Fix:"),
        "{stderr}"
    );
    let doc = valid_doc(&json);
    assert_eq!(doc["settings"]["policy"], "other");
    assert_eq!(doc["settings"]["timer_slack_ns"], 1);
    assert_eq!(doc["settings"]["mlock"], false);
    let f = doc["settings"]["fallbacks"].as_array().unwrap();
    assert!(f.iter().any(|x| x["setting"] == "scheduling policy"
        && x["fix"].as_str().unwrap().contains("RLIMIT_RTPRIO")));
    assert_eq!(doc["series"][0]["count"], 50);
}

#[test]
fn with_privileges_it_runs_fifo_99_with_memory_locked() {
    if !is_root() {
        report_skip("with_privileges_it_runs_fifo_99", "needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("o.json");
    punctual()
        .args(["latency", "-t", "1", "-l", "20", "--json"])
        .arg(&json)
        .timeout(T)
        .assert()
        .success();
    let doc = valid_doc(&json);
    assert_eq!(doc["settings"]["policy"], "fifo");
    assert_eq!(doc["settings"]["priority"], 99);
    assert_eq!(doc["settings"]["mlock"], true);
    assert_eq!(doc["settings"]["dma_latency_us"], 0);
    assert!(doc["settings"]["fallbacks"].as_array().unwrap().is_empty());
}

#[test]
fn check_runs_its_four_phases_stores_the_result_and_gives_a_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    let data = dir.path().join("data");
    let out = punctual()
        .env("PUNCTUAL_DATA_DIR", &data)
        .args(["check", "-D", "2s", "--json"])
        .arg(&json)
        .timeout(T)
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(
        stdout.contains("Verdict") && stdout.contains("+/-111 us injection window"),
        "{stdout}"
    );
    let doc = valid_doc(&json);
    let names: Vec<&str> = doc["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "plain sleep idle",
            "punctual hybrid idle",
            "plain sleep loaded",
            "punctual hybrid loaded"
        ]
    );
    for s in doc["series"].as_array().unwrap() {
        // 0.5 s at 1 ms: about 500 releases each (missed ones are counted, not recorded).
        let n = s["count"].as_u64().unwrap() + s["missed_periods"].as_u64().unwrap();
        assert!((450..=500).contains(&n), "{}: {n} releases", s["name"]);
    }
    assert_eq!(doc["verdict"].as_array().unwrap().len(), 3);
    // Stored in the results store, its id printed, the same document coming back out.
    let id = stdout
        .lines()
        .find_map(|l| l.strip_prefix("Result stored: "))
        .unwrap_or_else(|| panic!("no stored id in:\n{stdout}"))
        .to_string();
    assert!(data.join("results.db").exists());
    let exported = dir.path().join("export");
    punctual()
        .env("PUNCTUAL_DATA_DIR", &data)
        .args(["results", "export", &id, "-o"])
        .arg(&exported)
        .assert()
        .success();
    assert_eq!(valid_doc(&exported.join(format!("{id}.json"))), doc);
    // The load processes were reaped.
    for r in doc["settings"]["load_reports"].as_array().unwrap() {
        assert!(!pid_alive(r["pid"].as_i64().unwrap()));
        assert!(r["ops"].as_u64().unwrap() > 0, "load {r} did no work");
    }
}

#[test]
fn loads_run_pinned_and_are_reaped() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("o.json");
    punctual()
        .args([
            "latency",
            "-t",
            "1",
            "-l",
            "200",
            "--load",
            "cpu:2@0,io:1",
            "--json",
        ])
        .arg(&json)
        .timeout(T)
        .assert()
        .success();
    let doc = valid_doc(&json);
    assert_eq!(doc["settings"]["load"], "cpu:2@0,io:1");
    let reports = doc["settings"]["load_reports"].as_array().unwrap();
    assert_eq!(reports.len(), 3);
    for r in reports {
        assert!(!pid_alive(r["pid"].as_i64().unwrap()), "load {r} survived");
        if r["kind"] == "cpu" {
            assert_eq!(r["cpu"], 0);
        }
    }
    // The io load's scratch directory is gone.
    let leftovers = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().to_string();
            n.starts_with("punctual-io-")
        })
        .count();
    assert_eq!(leftovers, 0);
}
