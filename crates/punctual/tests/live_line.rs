//! The live line (issue 12 item 5): commands that can run longer than 2 s show what runs, elapsed
//! and expected time on a terminal, at most 4 redraws a second, and nothing when stderr is not a
//! terminal. The terminal is a pseudo-terminal from util-linux `script`.

mod common;
use common::{bin_path, is_root};

/// Run `args` under a pseudo-terminal: everything the terminal received, and how long it took (s).
fn on_a_terminal(args: &[&str]) -> Option<(String, f64)> {
    let cmd = std::iter::once(bin_path().display().to_string())
        .chain(args.iter().map(|a| a.to_string()))
        .collect::<Vec<_>>()
        .join(" ");
    let t0 = std::time::Instant::now();
    let out = std::process::Command::new("script")
        .args(["-qfec", &cmd, "/dev/null"])
        .env("PUNCTUAL_DATA_DIR", punctual_testkit::data_dir())
        .output()
        .ok()?;
    Some((
        String::from_utf8_lossy(&out.stdout).into_owned(),
        t0.elapsed().as_secs_f64(),
    ))
}

fn have_script(test: &str) -> bool {
    let ok = std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        punctual_testkit::skip(test, "needs util-linux `script` for a pseudo-terminal");
    }
    ok
}

/// The line was drawn (label, bar, elapsed/expected) and never more than 4 times a second, over
/// `seconds` or the command's measured run if longer (a loaded machine stretches setup and
/// teardown: `trace record -D 2s` drew 14 times in a CI run).
fn check_line((out, took): &(String, f64), label: &str, seconds: f64, bar: bool) {
    let seconds = seconds.max(*took);
    let draws = out.matches(label).count();
    assert!(draws >= 2, "no live line for {label}:\n{out}");
    assert!(
        draws as f64 <= seconds * 4.0 + 3.0,
        "{draws} redraws in {seconds:.2} s for {label}"
    );
    if bar {
        assert!(out.contains(&format!("{label} [")), "{out}");
        assert!(out.contains("s/"), "elapsed/expected missing: {out}");
    }
}

#[test]
fn bench_and_latency_show_a_live_line_at_most_4_hz() {
    if !have_script("bench_and_latency_show_a_live_line_at_most_4_hz") {
        return;
    }
    let out = on_a_terminal(&["bench", "gaps", "-D", "2s"]).unwrap();
    check_line(&out, "bench gaps", 2.5, true);
    let out = on_a_terminal(&["latency", "-t", "1", "-D", "2s", "--policy", "other"]).unwrap();
    check_line(&out, "latency abs", 2.5, true);
}

#[test]
fn a_simulation_sweep_shows_a_live_line() {
    if !have_script("a_simulation_sweep_shows_a_live_line") {
        return;
    }
    let out = on_a_terminal(&[
        "simulate",
        "-w",
        "cont:8,blk:2",
        "--hz",
        "1000,20000",
        "-D",
        "600s",
    ])
    .unwrap();
    check_line(&out, "simulate", 30.0, true);
}

#[test]
fn shield_and_trace_record_show_a_live_line() {
    if !have_script("shield_and_trace_record_show_a_live_line") {
        return;
    }
    if !is_root() {
        punctual_testkit::skip(
            "shield_and_trace_record_show_a_live_line",
            "shield and trace record need root",
        );
        return;
    }
    let _cpu = punctual_testkit::exclusive_cpu();
    let last = punctual_rt::affinity::last_online_cpu().to_string();
    let out = on_a_terminal(&["shield", "--cpus", &last, "-D", "2s"]).unwrap();
    check_line(&out, &format!("shield CPU {last}"), 2.5, true);
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("t.ptf");
    let out = on_a_terminal(&["trace", "record", "-D", "2s", "-o", f.to_str().unwrap()]).unwrap();
    check_line(&out, "recording", 2.5, true);
}

#[test]
fn nothing_is_drawn_when_stderr_is_not_a_terminal() {
    let out = std::process::Command::new(bin_path())
        .env("PUNCTUAL_DATA_DIR", punctual_testkit::data_dir())
        .args(["bench", "gaps", "-D", "1s"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("bench gaps ["), "{err}");
    assert!(!err.contains('\r'), "{err}");
}
