//! Issue 31 item 9: the smaller wrong words a new user met in a first hour, one regression test
//! each, named after what it guards. (Item 8 is in results_cli.rs, the kurt-periodic target's
//! pass/fail in crates/experiments/tests/snapshots_kurt.rs.)

mod common;
use common::{bin_path, last_cpu, punctual, stderr};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn repo() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `punctual ARGS` with `umask` in force.
fn with_umask(umask: u32, args: &[&str], dir: &Path) -> std::process::Output {
    let mut c = Command::new(bin_path());
    c.args(args).env("PUNCTUAL_DATA_DIR", dir.join("data"));
    // SAFETY: umask is async-signal-safe.
    unsafe {
        c.pre_exec(move || {
            libc::umask(umask as libc::mode_t);
            Ok(())
        });
    }
    c.output().unwrap()
}

#[test]
fn samples_files_honour_the_umask() {
    let t = tempfile::tempdir().unwrap();
    for (umask, mode) in [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)] {
        let samples = t.path().join(format!("s{umask:o}.csv"));
        let json = t.path().join(format!("s{umask:o}.json"));
        let o = with_umask(
            umask,
            &[
                "latency",
                "--policy",
                "other",
                "-t",
                "1",
                "-D",
                "100ms",
                "--no-store",
                "--samples",
                samples.to_str().unwrap(),
                "--json",
                json.to_str().unwrap(),
            ],
            t.path(),
        );
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let got = std::fs::metadata(&samples).unwrap().permissions().mode() & 0o777;
        let doc = std::fs::metadata(&json).unwrap().permissions().mode() & 0o777;
        assert_eq!(got, mode, "--samples under umask {umask:03o}: {got:o}");
        assert_eq!(got, doc, "--samples and --json differ");
    }
}

/// A directory of our own for journals: no other punctual on this machine (other tests, other
/// checkouts) replays our killed runs. The shield registry is the machine's whatever this says.
fn private_state(t: &Path) -> std::path::PathBuf {
    let d = t.join("state");
    std::fs::create_dir(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    d
}

fn shield(state: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(bin_path());
    c.arg("shield")
        .args(args)
        .env("PUNCTUAL_STATE_DIR", state)
        .env("PUNCTUAL_DATA_DIR", state.parent().unwrap().join("data"))
        .stdin(Stdio::null());
    c
}

/// Settings the machine's shield registry lists as held by `pid`.
fn held_by(pid: u32) -> usize {
    let file = punctual_rt::stacked::Registry::system().file();
    let Ok(text) = std::fs::read_to_string(file) else {
        return 0;
    };
    let registry: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    registry["entries"].as_array().map_or(0, |entries| {
        entries
            .iter()
            .filter(|e| {
                e["holders"]
                    .as_array()
                    .is_some_and(|h| h.iter().any(|h| h["owner"]["pid"] == pid))
            })
            .count()
    })
}

/// Start a shield over the last CPU and wait until it holds: its journal names the registry and
/// the registry lists what it changed (the journal entry is written before the first change).
fn live_shield(state: &Path, args: &[&str]) -> std::process::Child {
    let mut child = shield(state, args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let journal = state.join(format!("journal-{}.json", child.id()));
    let t0 = Instant::now();
    while !std::fs::read_to_string(&journal).is_ok_and(|j| j.contains("\"stacked\""))
        || held_by(child.id()) == 0
    {
        if let Ok(Some(st)) = child.try_wait() {
            let mut e = String::new();
            use std::io::Read;
            child.stderr.take().unwrap().read_to_string(&mut e).unwrap();
            panic!("the shield ended first ({st}): {e}");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the shield never held"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

fn interrupt(child: &std::process::Child) {
    // SAFETY: signalling our own child by pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
}

#[test]
fn shield_ctrl_c_says_what_it_did_not_that_results_were_written() {
    let test = "shield_ctrl_c_says_what_it_did_not_that_results_were_written";
    if !punctual_testkit::need_root(test, "a shield moves IRQs and tasks") {
        return;
    }
    let _cpu = punctual_testkit::exclusive_cpu();
    let t = tempfile::tempdir().unwrap();
    let state = private_state(t.path());
    let cpu = last_cpu().to_string();
    let child = live_shield(&state, &["--cpus", &cpu]);
    interrupt(&child);
    let o = child.wait_with_output().unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(130), "{e}");
    assert!(!e.contains("partial results written"), "{e}");
    // What it did say: that the shield was lifted and its changes restored (in the lifecycle's
    // words or the shield's own, depending on where the interrupt found it).
    assert!(e.contains("interrupted") && e.contains("restored"), "{e}");
}

#[test]
fn shield_restore_counts_every_setting_of_a_killed_shield_once() {
    let test = "shield_restore_counts_every_setting_of_a_killed_shield_once";
    if !punctual_testkit::need_root(test, "a shield moves IRQs and tasks") {
        return;
    }
    let _cpu = punctual_testkit::exclusive_cpu();
    let t = tempfile::tempdir().unwrap();
    let state = private_state(t.path());
    let cpu = last_cpu().to_string();
    let mut child = live_shield(&state, &["--cpus", &cpu, "-D", "60s"]);
    // What the shield holds: its entries in the registry (written ahead of the changes, all at
    // once; entries the kernel then refused are dropped), read until two reads agree.
    let pid = child.id();
    let mut held = held_by(pid);
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = held_by(pid);
        if now == held {
            break;
        }
        held = now;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let o = shield(&state, &["--restore"]).output().unwrap();
    let (out, e) = (String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{out}{e}");
    let both = format!("{out}{e}");
    assert_eq!(
        both.matches("left by an earlier run").count(),
        1,
        "said more than once:\n{both}"
    );
    // Every IRQ, task mask and sysctl the shield held, not one per journal entry (some may have
    // been changed since by another shield on this busy machine: counted apart).
    let number_after = |s: &str, key: &str| -> usize {
        s.split(key)
            .nth(1)
            .and_then(|l| l.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let line = out
        .lines()
        .find(|l| l.starts_with("restored "))
        .unwrap_or_else(|| panic!("no count:\n{out}"));
    let restored = number_after(line, "restored ");
    let left = number_after(line, "; ");
    assert!(held > 1, "the shield held {held} setting(s)");
    assert_eq!(restored + left, held, "{both}");
}

#[test]
fn a_conflict_with_a_live_shield_exits_3() {
    let test = "a_conflict_with_a_live_shield_exits_3";
    if !punctual_testkit::need_root(test, "a shield moves IRQs and tasks") {
        return;
    }
    let _cpu = punctual_testkit::exclusive_cpu();
    let t = tempfile::tempdir().unwrap();
    let state = private_state(t.path());
    second_shield_is_refused(&state, &state);
}

/// A live shield of the last CPU with journals in `first`, then a second one over it with
/// journals in `second`: refused with exit 3, and the first ends on Ctrl-C with 130.
fn second_shield_is_refused(first: &Path, second: &Path) {
    let cpu = last_cpu().to_string();
    let live = live_shield(first, &["--cpus", &cpu, "-D", "60s"]);
    let o = shield(second, &["--cpus", &cpu, "-D", "1s"])
        .output()
        .unwrap();
    interrupt(&live);
    let done = live.wait_with_output().unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{e}");
    assert!(e.contains("already shielded"), "{e}");
    assert_eq!(done.status.code(), Some(130), "{}", stderr(&done));
}

/// Found on this machine: every IRQ, `default_smp_affinity` and every user task (pid 1 too) left
/// on CPU 0 and `sched_rt_runtime_us` at -1, with no journal anywhere. Shields whose journals were
/// in different state directories (tests, other checkouts) each had a registry of their own, so
/// they stacked without seeing each other and were restored in the wrong order. The registry is
/// machine-wide now: a shield with a private state directory sees a live one elsewhere.
#[test]
fn shields_with_private_state_dirs_share_one_registry() {
    let test = "shields_with_private_state_dirs_share_one_registry";
    if !punctual_testkit::need_root(test, "a shield moves IRQs and tasks") {
        return;
    }
    let _cpu = punctual_testkit::exclusive_cpu();
    let before = machine_state();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (state_a, state_b) = (private_state(a.path()), private_state(b.path()));
    second_shield_is_refused(&state_a, &state_b);
    assert_eq!(machine_state(), before, "the machine is as it was");
}

/// What a shield changes: IRQ affinities, the default one, throttling, pid 1's mask.
fn machine_state() -> Vec<(String, String)> {
    let mut v = punctual_testkit::irq_affinities();
    let f = "/proc/sys/kernel/sched_rt_runtime_us";
    v.push((f.into(), std::fs::read_to_string(f).unwrap()));
    let status = std::fs::read_to_string("/proc/1/status").unwrap();
    let mask = status.lines().find(|l| l.starts_with("Cpus_allowed_list"));
    v.push(("pid 1".into(), mask.unwrap_or("").into()));
    v
}

#[test]
fn run_on_a_file_that_is_not_a_plan_says_what_a_plan_is() {
    let t = tempfile::tempdir().unwrap();
    let binary = t.path().join("data.bin");
    std::fs::write(&binary, [0u8, 159, 146, 150, 0xff, 0xfe, 7]).unwrap();
    let text = t.path().join("notes.txt");
    std::fs::write(&text, "hello world\n").unwrap();
    for f in [&binary, &text] {
        for cmd in [&["run"][..], &["plan", "check"][..]] {
            let o = punctual().args(cmd).arg(f).output().unwrap();
            let e = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{cmd:?} {}: {e}", f.display());
            assert!(!e.contains("UTF-8"), "{e}");
            assert!(
                e.contains("[plan], [[task]] and [[event]]") && e.contains("docs/plan-format.md"),
                "{cmd:?} {}: {e}",
                f.display()
            );
        }
    }
}

#[test]
fn the_basic_example_plans_comment_gives_its_tasks_periods() {
    let plan = std::fs::read_to_string(repo().join("examples/plans/basic.toml")).unwrap();
    let comment = plan.lines().next().unwrap();
    // Each task's period, as the comment would say it ("1ms" -> "1 ms"; 1 kHz for the mark).
    let mut periods = Vec::new();
    let mut kind_of_task = None;
    for l in plan.lines() {
        if l.starts_with("[[task]]") {
            kind_of_task = None;
        }
        if let Some(p) = l.strip_prefix("period = ") {
            kind_of_task = Some(p.trim_matches('"').to_string());
        }
        if let (Some(p), true) = (&kind_of_task, l.contains("kind = \"exec\"")) {
            periods.push(p.replace("ms", " ms"));
        }
    }
    assert!(!periods.is_empty(), "no exec task in {plan}");
    for p in periods {
        assert!(
            comment.contains(&format!("a {p} exec task")),
            "{comment:?} does not say {p}"
        );
    }
}

#[test]
fn etsion_frames_takes_sim_as_the_simulation_it_is() {
    let t = tempfile::tempdir().unwrap();
    let json = t.path().join("f.json");
    let o = punctual()
        .args([
            "experiment",
            "run",
            "etsion-frames",
            "--sim",
            "--quick",
            "--json",
        ])
        .arg(&json)
        .args(["--figures"])
        .arg(t.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc = common::valid_doc(&json);
    assert_eq!(doc["experiment"], "etsion-frames");
}

#[test]
fn run_help_gives_the_priority_run_uses() {
    let o = punctual().args(["run", "--help"]).output().unwrap();
    let help = punctual_testkit::squash(&String::from_utf8_lossy(&o.stdout));
    let p = help
        .split("--priority <N>")
        .nth(1)
        .unwrap_or_else(|| panic!("{help}"));
    let p: String = p.chars().take(200).collect();
    assert!(p.contains("default 98"), "{p}");
    assert!(!p.contains("default 99"), "{p}");
}

#[test]
fn simulate_help_lists_every_workload_kind() {
    // The kinds the parser takes, as its own error lists them.
    let o = punctual()
        .args(["simulate", "--workload", "nonsense:1"])
        .output()
        .unwrap();
    let e = stderr(&o);
    let valid = e
        .split("(valid: ")
        .nth(1)
        .and_then(|v| v.split(')').next())
        .unwrap_or_else(|| panic!("{e}"));
    let help = punctual().args(["simulate", "--help"]).output().unwrap();
    let help = punctual_testkit::squash(&String::from_utf8_lossy(&help.stdout));
    let kinds: Vec<&str> = valid.split(", ").collect();
    assert!(kinds.len() >= 11, "{kinds:?}");
    for k in kinds {
        assert!(help.contains(k), "--help does not list {k}:\n{help}");
    }
}

#[test]
fn an_out_of_range_priority_is_said_in_words() {
    for cmd in [&["latency"][..], &["run", "examples/plans/basic.toml"][..]] {
        let o = punctual()
            .current_dir(repo())
            .args(cmd)
            .args(["-p", "120"])
            .output()
            .unwrap();
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{e}");
        assert!(e.contains("1 (lowest) to 99 (highest)"), "{e}");
        assert!(!e.contains("..="), "{e}");
    }
}

/// The commands of the README's tour (its "Five things to try" block), as a new user types them
/// from the repository's root: each must run and end well. Only `check` is shortened (`-D 4s`
/// instead of its 30 s); everything else runs exactly as written, with a private results store.
#[test]
fn the_readme_tour_runs_as_written() {
    let test = "the_readme_tour_runs_as_written";
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let tour = readme
        .split("## Five things to try")
        .nth(1)
        .and_then(|s| s.split("```sh\n").nth(1))
        .and_then(|s| s.split("```").next())
        .unwrap_or_else(|| panic!("no tour block in the README"));
    let commands: Vec<Vec<String>> = tour
        .lines()
        .map(|l| l.split(" # ").next().unwrap().trim())
        .filter(|l| l.starts_with("punctual "))
        .map(|l| l.split_whitespace().skip(1).map(String::from).collect())
        .collect();
    assert!(commands.len() >= 5, "{tour}");
    if !punctual_testkit::need_root(test, "the tour runs real-time commands, as the README says") {
        return;
    }
    // check and latency time a CPU: nobody else's test may pin work there meanwhile.
    let _cpu = punctual_testkit::exclusive_cpu();
    let t = tempfile::tempdir().unwrap();
    for mut args in commands {
        if args[0] == "check" {
            args.extend(["-D".into(), "4s".into()]);
        }
        let o = Command::new(bin_path())
            .args(&args)
            .current_dir(repo())
            .env("PUNCTUAL_DATA_DIR", t.path().join("data"))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let code = o.status.code();
        // advise exits 1 when this machine cannot meet the deadline: an answer, not a failure.
        let fine = code == Some(0) || (args[0] == "advise" && code == Some(1));
        assert!(
            fine,
            "punctual {}: exit {code:?}\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&o.stdout),
            stderr(&o)
        );
        assert!(
            !o.stdout.is_empty(),
            "punctual {}: no output",
            args.join(" ")
        );
    }
}
