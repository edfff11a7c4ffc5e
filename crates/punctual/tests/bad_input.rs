//! Every malformed or absurd input exits 2 with a message naming the flag and the fix, and writes
//! nothing (issue 3, "Bad input").

mod common;
use common::punctual;
use predicates::prelude::*;

/// Run with a --json and --csv target in a fresh directory; assert exit 2, the message, and that the
/// directory is still empty afterwards.
fn refused(args: &[&str], message: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let csv = dir.path().join("out.csv");
    let mut cmd = punctual();
    cmd.args(args)
        .arg("--json")
        .arg(&json)
        .arg("--csv")
        .arg(&csv);
    let out = cmd
        .timeout(std::time::Duration::from_secs(20))
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    for m in message {
        assert!(
            stderr.contains(m),
            "stderr for {args:?} lacks '{m}':\n{stderr}"
        );
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "{args:?} wrote something"
    );
}

#[test]
fn bare_number_interval_gets_a_unit_hint() {
    refused(
        &["latency", "-i", "1000"],
        &["--interval", "did you mean 1000us?"],
    );
}

/// Issue 18.10: the hint is the unit that makes the number plausible for that flag: a run's length
/// in seconds.
#[test]
fn bare_number_duration_gets_a_unit_hint() {
    refused(
        &["latency", "-D", "10"],
        &["--duration", "did you mean 10s?"],
    );
    refused(&["check", "-D", "30"], &["--duration", "did you mean 30s?"]);
    refused(
        &["simulate", "-w", "cont:1", "-D", "60"],
        &["--duration", "did you mean 60s?"],
    );
}

#[test]
fn zero_interval() {
    refused(
        &["latency", "-i", "0us"],
        &["-i/--interval", "more than zero"],
    );
}

#[test]
fn negative_interval() {
    refused(&["latency", "--interval=-5ms"], &["--interval", "negative"]);
}

#[test]
fn interval_too_small_without_force() {
    refused(
        &["latency", "-i", "5us", "-l", "10"],
        &["-i/--interval", "--force"],
    );
}

#[test]
fn interval_too_small_is_allowed_with_force() {
    let dir = tempfile::tempdir().unwrap();
    punctual()
        .args([
            "latency", "-i", "5us", "--force", "-t", "1", "-l", "50", "--json",
        ])
        .arg(dir.path().join("o.json"))
        .timeout(std::time::Duration::from_secs(30))
        .assert()
        .success();
}

#[test]
fn too_many_threads() {
    refused(&["latency", "-t", "100000"], &["-t/--threads", "1 to 256"]);
    refused(&["latency", "-t", "0"], &["-t/--threads"]);
}

#[test]
fn unknown_mode_policy_and_clock() {
    refused(
        &["latency", "--mode", "busy"],
        &["--mode", "abs, rel, timerfd, signal, hybrid"],
    );
    refused(
        &["latency", "--policy", "deadline"],
        &["--policy", "fifo, rr, other"],
    );
    refused(
        &["latency", "--clock", "tai"],
        &["--clock", "monotonic, realtime"],
    );
}

#[test]
fn cpu_not_online() {
    refused(
        &["latency", "-a", "999"],
        &["-a/--affinity", "CPU 999 not online"],
    );
    refused(&["latency", "-a", "x"], &["-a/--affinity"]);
    refused(
        &["check", "-a", "64"],
        &["-a/--affinity", "CPU 64 not online"],
    );
    refused(
        &["latency", "-a", "4000"],
        &["-a/--affinity", "beyond the 1024 CPUs"],
    );
}

#[test]
fn duration_that_overflows() {
    refused(
        &["latency", "-D", "99999999999999999999s"],
        &["--duration", "too long"],
    );
}

#[test]
fn unwritable_output_is_caught_before_measuring() {
    let dir = tempfile::tempdir().unwrap();
    let start = std::time::Instant::now();
    punctual()
        .args([
            "latency",
            "-D",
            "60s",
            "--json",
            "/nonexistent-dir/out.json",
            "--csv",
        ])
        .arg(dir.path().join("a.csv"))
        .timeout(std::time::Duration::from_secs(20))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--json").and(predicate::str::contains("does not exist")));
    assert!(
        start.elapsed().as_secs() < 15,
        "it measured before checking the path"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    punctual()
        .args(["latency", "--hist", "/proc/version"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--hist"));
    punctual()
        .args(["latency", "--samples", "/nonexistent-dir/s.csv"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--samples"));
}

#[test]
fn zero_loops_and_zero_duration() {
    refused(&["latency", "-l", "0"], &["-l/--loops"]);
    refused(&["latency", "-D", "0s"], &["--duration", "more than zero"]);
}

#[test]
fn duration_and_loops_together() {
    refused(
        &["latency", "-D", "1s", "-l", "5"],
        &["--duration", "--loops"],
    );
}

#[test]
fn priority_out_of_range_or_meaningless() {
    refused(&["latency", "-p", "100"], &["--priority"]);
    refused(&["latency", "-p", "0"], &["-p/--priority", "1..=99"]);
    refused(
        &["latency", "--policy", "other", "-p", "5"],
        &["-p/--priority", "other"],
    );
}

#[test]
fn spin_margin_outside_hybrid_or_too_large() {
    refused(
        &["latency", "--spin-margin", "50us"],
        &["--spin-margin", "--mode hybrid"],
    );
    refused(
        &[
            "latency",
            "--mode",
            "hybrid",
            "--spin-margin",
            "2ms",
            "-i",
            "1ms",
        ],
        &["--spin-margin", "shorter than the interval"],
    );
    refused(
        &["latency", "--mode", "hybrid", "--spin-margin", "50"],
        &["--spin-margin", "did you mean 50us?"],
    );
}

#[test]
fn bad_load_specs() {
    refused(
        &["latency", "--load", "gpu:2"],
        &["--load", "unknown load 'gpu'", "valid: cpu, sort, io"],
    );
    refused(&["latency", "--load", "cpu:0"], &["--load", "count of 0"]);
    refused(&["latency", "--load", "cpu:9999"], &["--load", "limit"]);
}

#[test]
fn bad_dma_latency() {
    refused(
        &["latency", "--dma-latency", "5"],
        &["--dma-latency", "did you mean 5us?"],
    );
}

#[test]
fn check_wants_one_cpu_and_a_real_duration() {
    refused(&["check", "-a", "0-1"], &["-a/--affinity", "one CPU"]);
    refused(&["check", "-D", "100ms"], &["-D/--duration", "too short"]);
}

#[test]
fn two_exports_to_stdout() {
    punctual()
        .args(["latency", "--json", "-", "--csv", "-"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("only one export can go to stdout"));
}

#[test]
fn unknown_experiment() {
    punctual()
        .args(["experiment", "run", "no-such-thing"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown experiment"));
}

/// `--explain-trace` on an experiment that traces nothing is refused before it runs, and one that
/// cannot be written too (an etsion-frames run would take seconds, kurt-periodic minutes).
#[test]
fn explain_trace_where_nothing_is_traced_or_written() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.trace");
    punctual()
        .args([
            "experiment",
            "run",
            "etsion-frames",
            "--no-store",
            "--explain-trace",
        ])
        .arg(&file)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--explain-trace: 'etsion-frames' does not trace its rows (only kurt-periodic does)",
        ));
    punctual()
        .args([
            "experiment",
            "run",
            "kurt-periodic",
            "--no-store",
            "--explain-trace",
        ])
        .arg(dir.path().join("no/such/dir/t.trace"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--explain-trace"));
    assert!(!file.exists());
}

/// [`refused`] for commands without --json/--csv: exit 2 naming the flag, in a directory that
/// stays empty.
fn refused_plain(args: &[&str], message: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let out = punctual()
        .current_dir(dir.path())
        .args(args)
        .timeout(std::time::Duration::from_secs(20))
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    for m in message {
        assert!(
            stderr.contains(m),
            "stderr for {args:?} lacks '{m}':\n{stderr}"
        );
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// Found by scripts/bad-input.sh (issue 19 item 9): `-D 18446744073s` made `run`, `bench`,
/// `trace record` end at once with exit 0 (the end wrapped) and `shield` hold for ever; `shield
/// -D 0s` shielded and lifted at once with exit 0.
#[test]
fn run_durations_beyond_a_year_or_zero_are_refused_by_every_command() {
    let plan = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        plan.path(),
        "[[task]]\nname = \"t\"\nperiod = \"10ms\"\naction = { kind = \"mark\" }\n",
    )
    .unwrap();
    let p = plan.path().to_str().unwrap();
    for d in ["18446744073709551615ns", "18446744073s", "8761h", "0s"] {
        refused(&["run", p, "-D", d], &["--duration"]);
        refused(&["check", "-D", d], &["--duration"]);
        for b in ["ctxsw", "trap", "memcpy", "dispatch", "gaps"] {
            refused(&["bench", b, "-D", d], &["--duration"]);
        }
        refused_plain(
            &["trace", "record", "-o", "t.ptf", "-D", d],
            &["--duration"],
        );
        refused_plain(&["shield", "--cpus", "0", "-D", d], &["--duration"]);
    }
}

/// Found by scripts/bad-input.sh (issue 19 item 9): `bench alarm --max-delay 18446744073s` ran
/// until interrupted; `run --watchdog/--attach-timeout 18446744073s` were taken; an RR timeslice
/// beyond the sysctl's range was refused by the kernel after the start, as exit 3.
#[test]
fn waits_beyond_an_hour_and_timeslices_beyond_the_sysctl_are_refused() {
    let plan = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        plan.path(),
        "[[task]]\nname = \"t\"\nperiod = \"10ms\"\naction = { kind = \"mark\" }\n",
    )
    .unwrap();
    let p = plan.path().to_str().unwrap();
    for d in ["18446744073709551615ns", "18446744073s", "61min"] {
        refused(&["bench", "alarm", "--max-delay", d], &["--max-delay"]);
        refused(&["bench", "alarm", "--min-delay", d], &["--min-delay"]);
        refused(&["run", p, "--watchdog", d], &["--watchdog"]);
        refused(&["run", p, "--attach-timeout", d], &["--attach-timeout"]);
        refused_plain(
            &["plan", "check", p, "--spin-margin", d],
            &["--spin-margin"],
        );
        refused_plain(
            &["simulate", "frames", "--frames", "2", "--poll", d],
            &["--poll"],
        );
    }
    refused_plain(
        &["simulate", "frames", "--frames", "2", "--poll", "0s"],
        &["--poll"],
    );
    refused(
        &["bench", "alarm", "--rr-timeslice", "18446744073s"],
        &["--rr-timeslice"],
    );
}

/// Found by scripts/bad-input.sh (issue 19 item 10): `--load=` ran without load (the check's title
/// said "with load "), `--bound 50%%` was read as 50 %, `shield --restore --cpus 1` ignored --cpus.
#[test]
fn empty_loads_doubled_percent_signs_and_restore_with_cpus_are_refused() {
    let plan = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        plan.path(),
        "[[task]]\nname = \"t\"\nperiod = \"10ms\"\naction = { kind = \"mark\" }\n",
    )
    .unwrap();
    let p = plan.path().to_str().unwrap();
    refused(&["latency", "-D", "1s", "--load="], &["--load"]);
    refused(&["check", "-D", "2s", "--load= "], &["--load"]);
    refused(&["run", p, "-D", "1s", "--load="], &["--load"]);
    refused(&["run", p, "-D", "1s", "--bound", "50%%"], &["--bound"]);
    refused_plain(
        &["shield", "--restore", "--cpus", "0"],
        &["--restore", "--cpus"],
    );
    refused_plain(
        &["shield", "--restore", "-D", "1s"],
        &["--restore", "--duration"],
    );
}

/// Found by scripts/bad-input.sh (issue 19): `latency --json F --csv F` measured, then wrote the
/// CSV over the JSON, exit 0.
#[test]
fn two_exports_to_one_file_are_refused_before_measuring() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("out");
    let out = punctual()
        .args(["latency", "-D", "1s", "--json"])
        .arg(&f)
        .arg("--csv")
        .arg(&f)
        .timeout(std::time::Duration::from_secs(20))
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        stderr.contains("--json") && stderr.contains("--csv"),
        "{stderr}"
    );
    assert!(!f.exists());
}

/// Found by scripts/bad-input.sh (issue 19 item 11): an unknown experiment's name was echoed raw.
#[test]
fn unknown_experiment_names_are_shown_escaped() {
    let out = punctual()
        .args(["experiment", "run", "\u{1b}[31mred\u{202e}"])
        .timeout(std::time::Duration::from_secs(20))
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(stderr.contains("unknown experiment"), "{stderr}");
    assert!(
        !stderr.contains('\u{1b}') && !stderr.contains('\u{202e}'),
        "{stderr:?}"
    );
}

/// Found by scripts/bad-input.sh (issue 19): a scenario's own quantum or duration was refused
/// naming only `--quantum`/`-D`, flags the user never gave; `plan check -a 999` named neither the
/// flag nor the plan ("dispatcher CPUs").
#[test]
fn scenario_values_name_the_file_and_offline_affinity_names_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let sc = dir.path().join("quantum-zero.toml");
    std::fs::write(
        &sc,
        "[sim]\nname = \"s\"\nhz = 100\nquantum = \"0ms\"\nduration = \"1s\"\nworkload = \"cont:2\"\n",
    )
    .unwrap();
    refused(
        &["simulate", "scenario", sc.to_str().unwrap()],
        &["quantum-zero.toml"],
    );
    let plan = dir.path().join("p.toml");
    std::fs::write(
        &plan,
        "[[task]]\nname = \"t\"\nperiod = \"10ms\"\naction = { kind = \"mark\" }\n",
    )
    .unwrap();
    let out = punctual()
        .args(["plan", "check", plan.to_str().unwrap(), "-a", "999"])
        .timeout(std::time::Duration::from_secs(20))
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(stderr.contains("--affinity"), "{stderr}");
}

/// Issue 32: `latency` and `trace analyze` refusals (an interval over an hour, `--hist` or
/// `--samples` where no file can go, an empty or garbage trace) created an empty `results.db`
/// before refusing: the store was opened when the outputs were checked. It is now only checked
/// then and created when there is a result to keep. Covered: the default store in an existing and
/// in a missing data directory, and a store named with `--store`; then a run that succeeds creates
/// it, so the test would see one.
#[test]
fn a_refused_latency_creates_no_store() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("inputs");
    std::fs::create_dir(&inputs).unwrap();
    let empty = common::write_file(&inputs, "empty.ptf", "");
    let garbage = common::write_file(
        &inputs,
        "garbage.ptf",
        "PTF?this is not a trace\n\0\x01\x02",
    );
    let subdir = inputs.join("adir");
    std::fs::create_dir(&subdir).unwrap();
    let missing = dir.path().join("missing/out.txt");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "latency".into(),
                "-i".into(),
                "2h".into(),
                "-D".into(),
                "1s".into(),
            ],
            "--interval",
        ),
        (
            vec![
                "latency".into(),
                "-D".into(),
                "1s".into(),
                "--hist".into(),
                missing.display().to_string(),
            ],
            "--hist",
        ),
        (
            vec![
                "latency".into(),
                "-D".into(),
                "1s".into(),
                "--samples".into(),
                subdir.display().to_string(),
            ],
            "--samples",
        ),
        (
            vec![
                "latency".into(),
                "-D".into(),
                "1s".into(),
                "--hist".into(),
                "/proc/version".into(),
            ],
            "--hist",
        ),
        (
            vec![
                "trace".into(),
                "analyze".into(),
                empty.display().to_string(),
            ],
            "empty.ptf",
        ),
        (
            vec![
                "trace".into(),
                "analyze".into(),
                garbage.display().to_string(),
            ],
            "garbage.ptf",
        ),
    ];
    for (k, (args, names)) in cases.iter().enumerate() {
        let data = dir.path().join(format!("data-{k}"));
        std::fs::create_dir(&data).unwrap();
        let absent = dir.path().join(format!("absent-{k}/punctual"));
        let named = dir.path().join(format!("named-{k}.db"));
        for (what, data_dir, store) in [
            ("an existing data directory", &data, None),
            ("a missing data directory", &absent, None),
            ("--store", &data, Some(&named)),
        ] {
            let mut cmd = punctual();
            cmd.args(args).env("PUNCTUAL_DATA_DIR", data_dir);
            if let Some(s) = store {
                cmd.arg("--store").arg(s);
            }
            let o = cmd
                .timeout(std::time::Duration::from_secs(30))
                .output()
                .unwrap();
            let e = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{args:?} with {what}: {e}");
            assert!(
                e.contains(names),
                "{args:?} with {what} does not name {names}: {e}"
            );
            let left: Vec<_> = std::fs::read_dir(&data)
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .collect();
            assert!(left.is_empty(), "{args:?} with {what} created {left:?}");
            assert!(
                !absent.exists() && !absent.parent().unwrap().exists(),
                "{args:?} made {}",
                absent.display()
            );
            assert!(
                !named.exists(),
                "{args:?} with {what} created {}",
                named.display()
            );
        }
    }
    // The same check sees a store that is made: a short run that succeeds creates each.
    let data = dir.path().join("absent-ok/punctual");
    let named = dir.path().join("named-ok.db");
    let sim = [
        "simulate",
        "--hz",
        "100",
        "--workload",
        "cont:1",
        "--duration",
        "1s",
    ];
    for store in [None, Some(&named)] {
        let mut cmd = punctual();
        cmd.args(sim).env("PUNCTUAL_DATA_DIR", &data);
        if let Some(s) = store {
            cmd.arg("--store").arg(s);
        }
        let o = cmd
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stdout).contains("Result stored:"));
    }
    assert!(data.join("results.db").is_file());
    assert!(named.is_file());
}
