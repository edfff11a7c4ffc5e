//! Issue 18: what a new user hits. One test per item, named after what it guards.

mod common;
use common::{is_root, punctual};
use std::collections::BTreeSet;
use std::io::Read;
use std::process::{Command, Stdio};

fn repo() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn compile_stream(dir: &std::path::Path) -> std::path::PathBuf {
    let out = dir.join("stream.pplan");
    punctual()
        .current_dir(repo())
        .args(["plan", "compile", "examples/plans/stream.toml", "--events"])
        .arg("examples/plans/stream.csv")
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    out
}

/// 18.7: `plan decode ... | head` ends quietly with exit 0 when the reader goes away.
#[test]
fn plan_decode_into_a_closed_pipe_exits_0_quietly() {
    let t = tempfile::tempdir().unwrap();
    let plan = compile_stream(t.path());
    let mut child = Command::new(common::bin_path())
        .args(["plan", "decode"])
        .arg(&plan)
        .env("PUNCTUAL_DATA_DIR", t.path().join("data"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read one line's worth, then close the pipe like `head -1` does; the decoded plan (about
    // 300 KB) is far more than the pipe holds, so punctual is still writing.
    let mut first = [0u8; 64];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(String::from_utf8_lossy(&first).starts_with("[plan]"));
    assert_eq!(status.code(), Some(0), "stderr: {err}");
    assert!(err.is_empty(), "stderr: {err}");
}

/// 18.8: the example plans run without errors on a machine where nothing listens on their UDP
/// port, and every series says so.
#[test]
fn the_shipped_example_plans_run_without_errors() {
    let t = tempfile::tempdir().unwrap();
    let stream = compile_stream(t.path());
    for (plan, dur) in [
        (repo().join("examples/plans/basic.toml"), "1700ms"),
        (stream, "1s"),
    ] {
        let doc_path = t.path().join("r.json");
        let out = punctual()
            .arg("run")
            .arg(&plan)
            .args(["-a", "1", "-D", dur, "--json"])
            .arg(&doc_path)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!stdout.contains("errors of"), "{stdout}");
        let doc = json(&doc_path);
        let mut udp_sent = 0;
        for s in doc["series"].as_array().unwrap() {
            assert_eq!(
                s.get("errors").and_then(|e| e.as_u64()).unwrap_or(0),
                0,
                "{s}"
            );
            udp_sent += s.get("sent").and_then(|e| e.as_u64()).unwrap_or(0);
        }
        assert!(
            udp_sent >= 2,
            "{} sent {udp_sent} datagrams",
            plan.display()
        );
    }
}

/// 18.9: `run -p 99` either runs at 99 or says (and records) why it does not.
#[test]
fn run_at_priority_99_under_the_watchdog_records_why_it_runs_at_98() {
    if !is_root() {
        punctual_testkit::skip(
            "run_at_priority_99_under_the_watchdog_records_why_it_runs_at_98",
            "needs root for SCHED_FIFO",
        );
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let doc_path = t.path().join("r.json");
    let plan = repo().join("examples/plans/basic.toml");
    let out = punctual()
        .arg("run")
        .arg(&plan)
        .args(["-p", "99", "-D", "200ms", "--json"])
        .arg(&doc_path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("fallback: priority: wanted 99, running with 98"),
        "{err}"
    );
    let doc = json(&doc_path);
    assert_eq!(doc["settings"]["priority"], 98);
    assert_eq!(doc["settings"]["policy"], "fifo");
    assert_eq!(doc["settings"]["fallbacks"][0]["setting"], "priority");
    // Asked without the watchdog, 99 is what runs; unasked, 98 without a fallback.
    for (args, prio) in [(&["-p", "99", "--watchdog", "off"][..], 99), (&[][..], 98)] {
        let out = punctual()
            .arg("run")
            .arg(&plan)
            .args(args)
            .args(["-D", "200ms", "--json"])
            .arg(&doc_path)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
        assert!(!String::from_utf8_lossy(&out.stderr).contains("fallback"));
        let doc = json(&doc_path);
        assert_eq!(doc["settings"]["priority"], prio, "{args:?}");
        assert_eq!(
            doc["settings"]["fallbacks"],
            serde_json::json!([]),
            "{args:?}"
        );
    }
}

fn help(path: &[String]) -> String {
    let out = punctual().args(path).arg("--help").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{path:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Every command path (`run`, `plan check`, ...), from the "Commands:" sections of the help.
fn command_paths() -> Vec<Vec<String>> {
    let mut todo = vec![Vec::<String>::new()];
    let mut all = Vec::new();
    while let Some(path) = todo.pop() {
        let text = help(&path);
        let mut in_cmds = false;
        for line in text.lines() {
            if line.starts_with("Commands:") {
                in_cmds = true;
                continue;
            }
            if in_cmds {
                if !line.starts_with("  ") {
                    in_cmds = false;
                    continue;
                }
                let name = line.split_whitespace().next().unwrap_or("");
                if line.starts_with("  ") && !line.starts_with("   ") && name != "help" {
                    let mut p = path.clone();
                    p.push(name.to_string());
                    todo.push(p);
                }
            }
        }
        all.push(path);
    }
    all
}

/// The long flags of one help text, and those that have no description.
fn flags(text: &str) -> (BTreeSet<String>, Vec<String>) {
    let lines: Vec<&str> = text.lines().collect();
    let mut seen = BTreeSet::new();
    let mut bare = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        if !(l.starts_with("  -") || l.starts_with("      --")) || !t.starts_with('-') {
            continue;
        }
        let Some(long) = t
            .split([' ', ','])
            .find(|w| w.starts_with("--"))
            .map(|w| w.trim_end_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-'))
        else {
            continue;
        };
        if long == "--help" || long == "--version" {
            continue;
        }
        seen.insert(long.to_string());
        // A description follows the flag on its line (after two spaces) or on the next line.
        let spec_end = t.find("  ").map(|k| t[k..].trim().is_empty());
        let next_is_text = lines
            .get(i + 1)
            .map(|n| n.starts_with("          ") && !n.trim_start().starts_with('-'))
            .unwrap_or(false);
        if spec_end.unwrap_or(true) && !next_is_text {
            bare.push(long.to_string());
        }
    }
    (seen, bare)
}

/// 18.11: every flag `--help` shows has a description and is documented in the README or a page
/// under docs/.
#[test]
fn every_flag_in_help_is_described_and_documented() {
    let mut docs = std::fs::read_to_string(repo().join("README.md")).unwrap();
    for e in std::fs::read_dir(repo().join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            docs.push_str(&std::fs::read_to_string(p).unwrap());
        }
    }
    let mut undocumented = Vec::new();
    let mut undescribed = Vec::new();
    let paths = command_paths();
    assert!(paths.len() > 15, "{paths:?}");
    for path in paths {
        let (seen, bare) = flags(&help(&path));
        for f in seen {
            if !docs.contains(&format!("`{f}")) && !docs.contains(&format!("{f} ")) {
                undocumented.push(format!("punctual {} {f}", path.join(" ")));
            }
        }
        for f in bare {
            undescribed.push(format!("punctual {} {f}", path.join(" ")));
        }
    }
    assert!(
        undescribed.is_empty(),
        "flags without a description: {undescribed:#?}"
    );
    assert!(
        undocumented.is_empty(),
        "flags in --help but in no README or docs page: {undocumented:#?}"
    );
}

/// Lines of `text` longer than `cols` characters, with their lengths.
fn wider_than(text: &str, cols: usize) -> Vec<(usize, &str)> {
    text.lines()
        .map(|l| (l.chars().count(), l))
        .filter(|(n, _)| *n > cols)
        .collect()
}

/// Issue 31: on an 80-column terminal (`COLUMNS=80` says so to a pipe) a new user's commands
/// print no line wider than 80 columns, on stdout nor stderr; `--wide` gives the full lines.
/// Widths only: no text whose width depends on a measured value is matched.
#[test]
fn a_new_users_commands_fit_an_80_column_terminal() {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("data");
    let basic = repo().join("examples/plans/basic.toml");
    let basic = basic.to_str().unwrap();
    let xine = repo().join("examples/sim/xine.toml");
    let mut runs: Vec<Vec<&str>> = vec![
        vec!["latency", "-D", "1s"],
        vec![
            "monitor",
            "-D",
            "1500ms",
            "--listen",
            "127.0.0.1:0",
            "--no-store",
        ],
        vec!["run", basic, "-a", "1", "-D", "1700ms"],
        vec!["plan", "check", basic],
        vec!["check", "-D", "4s"],
        vec!["experiment", "list"],
        vec!["simulate", "scenario", xine.to_str().unwrap()],
        vec!["results", "show", "latest"],
        vec!["results", "list"],
        // A refusal: the error is wrapped as notes are.
        vec!["simulate"],
    ];
    // The dry run plans against the machine's live shields: another test's shield on CPU 0
    // would make it refuse (exit 3).
    let _cpu = is_root().then(punctual_testkit::exclusive_cpu);
    if is_root() {
        runs.push(vec!["shield", "--cpus", "1", "--dry-run"]);
    } else {
        punctual_testkit::skip(
            "a_new_users_commands_fit_an_80_column_terminal (shield --dry-run)",
            "needs root to read every task's affinity",
        );
    }
    for args in &runs {
        let out = punctual()
            .env("PUNCTUAL_DATA_DIR", &data)
            .env("COLUMNS", "80")
            .args(args)
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(
            matches!(out.status.code(), Some(0..=2)),
            "{args:?}: {:?}\n{stderr}",
            out.status
        );
        assert!(!stdout.is_empty() || !stderr.is_empty(), "{args:?}");
        for (what, text) in [("stdout", &stdout), ("stderr", &stderr)] {
            let wide = wider_than(text, 80);
            assert!(
                wide.is_empty(),
                "{args:?}: {what} lines over 80 columns: {wide:#?}\n{text}"
            );
        }
    }
    // Every command's help (clap wraps it at COLUMNS; its usage line it does not wrap).
    for path in command_paths() {
        let out = punctual()
            .env("COLUMNS", "80")
            .args(&path)
            .arg("--help")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let wide = wider_than(&text, 80);
        assert!(wide.is_empty(), "{path:?} --help: {wide:#?}");
    }
    // The same check fails where lines are long: --wide (and a pipe without COLUMNS) keeps
    // them whole. plan check's notes are fixed text, wider than 80 when not wrapped.
    for wide in [&["--wide"][..], &[]] {
        let out = punctual()
            .env("PUNCTUAL_DATA_DIR", &data)
            .env_remove("COLUMNS")
            .args(["plan", "check", basic])
            .args(wide)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!wider_than(&stdout, 80).is_empty(), "{wide:?}: {stdout}");
    }
}
