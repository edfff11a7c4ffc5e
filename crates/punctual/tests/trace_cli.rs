//! `punctual trace`: bad input, system refusals, a traced command, and cleanup after SIGINT, a second
//! SIGINT and SIGKILL. Tests that need root and tracefs print SKIPPED otherwise.

use assert_cmd::Command;
use predicates::prelude::*;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

fn punctual() -> Command {
    let mut c = Command::cargo_bin("punctual").unwrap();
    // Keep stored results out of the user's data directory.
    c.env("PUNCTUAL_DATA_DIR", punctual_testkit::data_dir());
    c
}

fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("punctual")
}

use punctual_testkit::tracing as tracing_available;

/// A tracefs view of the test's own (the child is pointed at it with PUNCTUAL_TRACEFS).
struct View(tempfile::TempDir);

impl View {
    fn mount() -> View {
        let d = tempfile::tempdir().unwrap();
        let st = std::process::Command::new("mount")
            .args(["-t", "tracefs", "nodev"])
            .arg(d.path())
            .status()
            .unwrap();
        assert!(st.success(), "mounting a tracefs view");
        View(d)
    }
    fn root(&self) -> &Path {
        self.0.path()
    }
    fn instance(&self, pid: u32) -> PathBuf {
        self.root()
            .join("instances")
            .join(format!("punctual-{pid}"))
    }
}

impl Drop for View {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.0.path())
            .status();
    }
}

fn synthetic_file(dir: &Path) -> PathBuf {
    let mut s = punctual_trace::synth::Synth::new(1, 0, 100_000_000).task(10, 10, "worker");
    for i in 0..2_000u64 {
        s.switch(i * 40_000 + 1_000, 0, 0, 0, 10).switch(
            i * 40_000 + 21_000,
            0,
            10,
            punctual_trace::synth::SLEEPING,
            0,
        );
    }
    let p = dir.join("synthetic.ptf");
    std::fs::write(&p, s.file_bytes()).unwrap();
    p
}

#[test]
fn record_refuses_bad_input_with_exit_2_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.ptf");
    let o = out.to_str().unwrap();
    punctual()
        .args(["trace", "record", "-o", o, "--events", "sched,disk"])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("unknown event group 'disk'")
                .and(predicate::str::contains("sched, irq, timer")),
        );
    punctual()
        .args(["trace", "record", "-o", o, "--buffer-size", "4096"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("did you mean 4096K"));
    punctual()
        .args(["trace", "record", "-o", "-"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("must be a file"));
    punctual()
        .args(["trace", "record", "-o", "/nonexistent-dir/t.ptf"])
        .assert()
        .code(2);
    punctual()
        .args(["trace", "record", "-o", o, "-D", "10"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("did you mean"));
    punctual()
        .args(["trace", "record", "-o", o, "--", "/nonexistent/command"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("command not found"));
    assert!(!out.exists(), "nothing written on bad input");
}

#[test]
fn analyze_refuses_missing_foreign_and_damaged_files() {
    let dir = tempfile::tempdir().unwrap();
    punctual()
        .args(["trace", "analyze", "/nonexistent.ptf"])
        .assert()
        .code(2);
    let foreign = dir.path().join("foreign.ptf");
    std::fs::write(&foreign, b"\x7fELF\x02\x01\x01 not a trace").unwrap();
    punctual()
        .args(["trace", "analyze"])
        .arg(&foreign)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not a punctual trace file"));
    let good = synthetic_file(dir.path());
    punctual()
        .args(["trace", "analyze", "--hz", "0"])
        .arg(&good)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--hz"));
    punctual()
        .args(["trace", "analyze", "--task", "nobody"])
        .arg(&good)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--task nobody"));

    // Truncated: the tables cover what was read, the error says where reading stopped.
    let bytes = std::fs::read(&good).unwrap();
    let cut = dir.path().join("cut.ptf");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let json = dir.path().join("cut.json");
    punctual()
        .args(["trace", "analyze", "--json"])
        .arg(&json)
        .arg(&cut)
        .assert()
        .code(2)
        .stdout(predicate::str::contains("worker [10]"))
        .stderr(
            predicate::str::contains("damaged or truncated")
                .and(predicate::str::contains("at byte")),
        );
    assert!(
        !json.exists(),
        "no export from a damaged file without --partial"
    );
    punctual()
        .args(["trace", "analyze", "--partial", "--json"])
        .arg(&json)
        .arg(&cut)
        .assert()
        .success();
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(doc["trace_file"]["complete"], false);
    assert!(doc["trace_file"]["integrity"]["events"].as_u64().unwrap() > 100);

    // Whole: a result document per SPEC section 3, with the quanta of the worker.
    let json = dir.path().join("good.json");
    punctual()
        .args(["trace", "analyze", "--json"])
        .arg(&json)
        .arg(&good)
        .assert()
        .success();
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(doc["schema"], "punctual.result/1");
    let q = doc["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == "effective_quantum")
        .unwrap();
    assert_eq!(
        (q["count"].as_u64(), q["min"].as_u64(), q["max"].as_u64()),
        (Some(2_000), Some(20_000), Some(20_000))
    );
}

#[test]
fn system_refusals_exit_3_with_the_fix() {
    if !tracing_available("system_refusals_exit_3_with_the_fix") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let o = dir.path().join("t.ptf");
    punctual()
        .args([
            "trace",
            "record",
            "-D",
            "100ms",
            "--buffer-size",
            "64G",
            "-o",
        ])
        .arg(&o)
        .assert()
        .code(3)
        .stderr(predicate::str::contains("refused --buffer-size"));
    punctual()
        .env("PUNCTUAL_TRACEFS", "/nonexistent")
        .args(["trace", "record", "-D", "100ms", "-o"])
        .arg(&o)
        .assert()
        .code(3)
        .stderr(predicate::str::contains("no tracefs"));
    if Path::new("/usr/bin/setpriv").exists() {
        let out = std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(bin())
            .args([
                "trace",
                "record",
                "-D",
                "100ms",
                "-o",
                "/tmp/punctual-nobody-test.ptf",
            ])
            .env_remove("PUNCTUAL_STATE_DIR")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{err}");
        assert!(err.contains("run punctual as root"), "{err}");
        let _ = std::fs::remove_file("/tmp/punctual-nobody-test.ptf");
    }
}

#[test]
fn traces_a_command_for_its_lifetime() {
    if !tracing_available("traces_a_command_for_its_lifetime") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let o = dir.path().join("t.ptf");
    let t0 = Instant::now();
    punctual()
        .args(["trace", "record", "--events", "sched", "-o"])
        .arg(&o)
        .args(["--", "sleep", "0.3"])
        .assert()
        .success()
        .stdout(predicate::str::contains("exit status 0"));
    assert!(t0.elapsed() < Duration::from_secs(5));
    let json = dir.path().join("a.json");
    punctual()
        .args(["trace", "analyze", "--task", "sleep", "--json"])
        .arg(&json)
        .arg(&o)
        .assert()
        .success()
        .stdout(predicate::str::contains("Timeline of the chosen task"));
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert!(!doc["timeline"].as_array().unwrap().is_empty());
    let window = doc["window_ns"].as_u64().unwrap();
    assert!((250_000_000..3_000_000_000).contains(&window), "{window}");
}

struct Child {
    child: std::process::Child,
    state: tempfile::TempDir,
    out: PathBuf,
}

fn start_recording(view: &View, dir: &Path) -> Child {
    let state = tempfile::tempdir().unwrap();
    let out = dir.join("t.ptf");
    let child = std::process::Command::new(bin())
        .env("PUNCTUAL_TRACEFS", view.root())
        .env("PUNCTUAL_STATE_DIR", state.path())
        .args([
            "trace",
            "record",
            "-D",
            "30s",
            "--events",
            "sched,irq",
            "-o",
        ])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let inst = view.instance(child.id());
    let t0 = Instant::now();
    while !inst.join("tracing_on").exists()
        || std::fs::read_to_string(inst.join("tracing_on"))
            .unwrap_or_default()
            .trim()
            != "1"
    {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the instance never started tracing"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));
    Child { child, state, out }
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: sending a signal to a child we started.
    unsafe { libc::kill(pid as i32, sig) };
}

fn wait(c: &mut std::process::Child) -> std::process::ExitStatus {
    let t0 = Instant::now();
    loop {
        if let Some(s) = c.try_wait().unwrap() {
            return s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the recorder did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A later punctual run with the same state directory restores what the dead one left.
fn next_start(view: &View, state: &Path, dir: &Path) -> String {
    let out = std::process::Command::new(bin())
        .env("PUNCTUAL_TRACEFS", view.root())
        .env("PUNCTUAL_STATE_DIR", state)
        .args(["trace", "record", "-D", "100ms", "--events", "timer", "-o"])
        .arg(dir.join("next.ptf"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn sigint_stops_with_130_a_complete_file_and_no_instance() {
    if !tracing_available("sigint_stops_with_130_a_complete_file_and_no_instance") {
        return;
    }
    let view = View::mount();
    let dir = tempfile::tempdir().unwrap();
    let mut c = start_recording(&view, dir.path());
    let pid = c.child.id();
    signal(pid, libc::SIGINT);
    assert_eq!(wait(&mut c.child).code(), Some(130));
    assert!(!view.instance(pid).exists(), "instance left after SIGINT");
    let t = punctual_trace::file::read_trace_file(&c.out).unwrap();
    assert!(t.integrity.complete(), "{}", t.integrity.describe());
    assert!(t.trailer.unwrap().interrupted);
    assert_eq!(
        std::fs::read_dir(c.state.path()).unwrap().count(),
        0,
        "journal left after a clean stop"
    );
}

#[test]
fn sigkill_leaves_an_instance_the_next_start_removes() {
    if !tracing_available("sigkill_leaves_an_instance_the_next_start_removes") {
        return;
    }
    let view = View::mount();
    let dir = tempfile::tempdir().unwrap();
    let mut c = start_recording(&view, dir.path());
    let pid = c.child.id();
    signal(pid, libc::SIGKILL);
    let _ = wait(&mut c.child);
    assert!(
        view.instance(pid).exists(),
        "SIGKILL cannot clean up: the instance is still there"
    );
    assert!(c.state.path().join(format!("journal-{pid}.json")).exists());
    let err = next_start(&view, c.state.path(), dir.path());
    assert!(
        err.contains(&format!(
            "restored 3 setting(s) left by an earlier run (pid {pid})"
        )),
        "{err}"
    );
    assert!(
        !view.instance(pid).exists(),
        "the next start removed the instance"
    );
    // The partial file of the killed run is readable up to its last whole block.
    if let Ok(t) = punctual_trace::file::read_trace_file(&c.out) {
        assert!(!t.integrity.complete());
    }
}

#[test]
fn a_second_sigint_stops_at_once_and_tracing_is_off() {
    if !tracing_available("a_second_sigint_stops_at_once_and_tracing_is_off") {
        return;
    }
    let view = View::mount();
    let dir = tempfile::tempdir().unwrap();
    let mut c = start_recording(&view, dir.path());
    let pid = c.child.id();
    signal(pid, libc::SIGINT);
    signal(pid, libc::SIGINT);
    assert_eq!(wait(&mut c.child).code(), Some(130));
    let inst = view.instance(pid);
    if inst.exists() {
        // Still held open when the second signal came: stopped, and left to the next start.
        assert_eq!(
            std::fs::read_to_string(inst.join("tracing_on"))
                .unwrap()
                .trim(),
            "0"
        );
        next_start(&view, c.state.path(), dir.path());
        assert!(!inst.exists(), "the next start removed the instance");
    }
}
