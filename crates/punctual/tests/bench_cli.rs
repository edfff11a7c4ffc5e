//! `punctual bench` and `--load` from the command line: each bench runs and writes a result document
//! with its series; bad input exits 2 with the reason and runs nothing; a timeslice the kernel
//! refuses exits 3 and leaves the setting as it was.

use assert_cmd::Command;
use predicates::prelude::*;

fn punctual() -> Command {
    let mut c = Command::cargo_bin("punctual").unwrap();
    // Keep stored results out of the user's data directory.
    c.env("PUNCTUAL_DATA_DIR", punctual_testkit::data_dir());
    c
}

fn timeslice() -> String {
    std::fs::read_to_string("/proc/sys/kernel/sched_rr_timeslice_ms").unwrap()
}

#[test]
fn bad_input_exits_2_with_the_reason() {
    let cases: &[(&[&str], &str)] = &[
        (&["bench", "warp"], "unrecognized subcommand"),
        (
            &["latency", "-l", "5", "--load", "gpu:1"],
            "valid: cpu, sort, io, find, build, hackbench, mem",
        ),
        (&["latency", "-l", "5", "--load", "sort:0"], "count of 0"),
        (&["latency", "-l", "5", "--load", "hackbench:1000"], "limit"),
        (
            &["bench", "trap", "-D", "0s"],
            "a run must last more than zero",
        ),
        (&["bench", "trap", "-D", "5"], "did you mean"),
        (
            &["bench", "ctxsw", "--channel", "smoke"],
            "valid: pipe, futex",
        ),
        (&["bench", "ctxsw", "-a", "0-1"], "one CPU"),
        (&["bench", "ctxsw", "-a", "4095"], "-a/--affinity"),
        (&["bench", "memcpy", "--sizes", "100B"], "1KiB or more"),
        (
            &["bench", "memcpy", "--sizes", "64KiB,512GiB"],
            "available memory",
        ),
        (&["bench", "memcpy", "--sizes", "12parsecs"], "unknown unit"),
        (
            &["bench", "memcpy", "--method", "dma"],
            "valid: memcpy, loop",
        ),
        (
            &["bench", "dispatch", "--event", "smoke"],
            "valid: eventfd, pipe, signal",
        ),
        (
            &["bench", "dispatch", "-i", "10ms", "-D", "5ms"],
            "at least one",
        ),
        (
            &["bench", "dispatch", "--raiser-cpu", "4095"],
            "--raiser-cpu",
        ),
        (
            &["bench", "gaps", "--threshold", "0ns"],
            "--threshold must be more than zero",
        ),
        (&["bench", "gaps", "-p", "5"], "no meaning for policy other"),
        (&["bench", "alarm", "--workload", "cont:0"], "count of 0"),
        (&["bench", "alarm", "--workload", "cpu:2"], "sets no alarms"),
        (&["bench", "alarm", "--workload", "pct150"], "1-99"),
        (
            &["bench", "alarm", "--workload", "blk", "--alarms", "0"],
            "--alarms 0",
        ),
        (
            &[
                "bench",
                "alarm",
                "--workload",
                "blk",
                "--alarms",
                "99999999999",
            ],
            "1 to 1000000",
        ),
        (
            &[
                "bench",
                "alarm",
                "--workload",
                "blk",
                "--min-delay",
                "2s",
                "--max-delay",
                "1s",
            ],
            "--min-delay",
        ),
        (
            &[
                "bench",
                "alarm",
                "--workload",
                "blk",
                "--rr-timeslice",
                "500us",
            ],
            "whole milliseconds",
        ),
        (
            &[
                "bench",
                "alarm",
                "--workload",
                "blk",
                "--mechanism",
                "smoke",
            ],
            "valid: signal, nanosleep",
        ),
        (
            &["experiment", "run", "etsion-nothing"],
            "unknown experiment 'etsion-nothing'",
        ),
    ];
    let before = timeslice();
    for (args, why) in cases {
        punctual()
            .args(*args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(*why));
    }
    assert_eq!(timeslice(), before);
}

#[test]
fn an_export_path_that_cannot_be_written_refuses_before_running() {
    punctual()
        .args([
            "bench",
            "trap",
            "-D",
            "10s",
            "--json",
            "/nonexistent-dir/x.json",
        ])
        .timeout(std::time::Duration::from_secs(5))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--json"));
}

/// Past INT_MAX milliseconds the sysctl refuses the value (EINVAL); it used to be asked after the
/// start (exit 3), and is now refused as bad input before anything changes (issue 19's bad-input run).
#[test]
fn a_timeslice_beyond_the_sysctl_range_is_refused_and_changes_nothing() {
    let before = timeslice();
    punctual()
        .args([
            "bench",
            "alarm",
            "--workload",
            "blk",
            "--alarms",
            "1",
            "--rr-timeslice",
            "3000000000ms",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--rr-timeslice"));
    assert_eq!(timeslice(), before);
}

fn doc(args: &[&str]) -> serde_json::Value {
    let out = punctual()
        .args(args)
        .args(["--json", "-"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The human table moves to stderr when the document goes to stdout.
    assert!(!String::from_utf8_lossy(&out.stderr).is_empty());
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["schema"], "punctual.result/1");
    d
}

#[test]
fn each_bench_writes_a_document_with_its_series() {
    let d = doc(&["bench", "trap", "-D", "100ms"]);
    assert_eq!(d["series"][0]["kind"], "trap");
    assert!(d["series"][0]["count"].as_u64().unwrap() > 10);
    let d = doc(&[
        "bench",
        "ctxsw",
        "-D",
        "100ms",
        "--channel",
        "futex",
        "--policy",
        "other",
    ]);
    assert_eq!(d["series"][0]["kind"], "context_switch");
    assert_eq!(d["settings"]["channel"], "futex");
    let d = doc(&[
        "bench",
        "memcpy",
        "-D",
        "20ms",
        "--sizes",
        "16KiB,1MiB",
        "--method",
        "loop",
    ]);
    assert_eq!(d["series"].as_array().unwrap().len(), 2);
    assert_eq!(d["series"][1]["bytes"], 1 << 20);
    let d = doc(&[
        "bench", "dispatch", "-D", "200ms", "-i", "10ms", "--event", "pipe",
    ]);
    assert_eq!(d["series"][0]["kind"], "dispatch");
    assert_eq!(
        d["series"][0]["count"].as_u64().unwrap()
            + d["series"][0]["missed_periods"].as_u64().unwrap(),
        20
    );
    let d = doc(&["bench", "gaps", "-D", "300ms", "--load", "hackbench:1"]);
    assert_eq!(d["series"][0]["kind"], "gap");
    assert!(d["series"][0]["interrupts"].is_object());
    assert_eq!(d["settings"]["load"], "hackbench:1");
    assert_eq!(d["settings"]["load_reports"][0]["kind"], "hackbench");
    assert!(d["settings"]["load_reports"][0]["ops"].as_u64().unwrap() > 0);
    let d = doc(&[
        "bench",
        "alarm",
        "--workload",
        "blk:2,cpu:1",
        "--alarms",
        "5",
        "--max-delay",
        "3ms",
        "--policy",
        "other",
    ]);
    let series = d["series"].as_array().unwrap();
    assert_eq!(series.len(), 4, "three processes and all together");
    assert_eq!(series[3]["count"], 10);
    assert_eq!(series[2]["count"], 0, "the cpu process sets no alarms");
}
