//! Issue 19 item 10: the status punctual reports matches what happened. One test per case,
//! named after it.

mod common;
use common::{bin_path, is_root, punctual};
use predicates::prelude::*;

#[test]
fn a_shield_without_privilege_exits_3_and_restores_what_it_changed() {
    if !is_root()
        || std::process::Command::new("setpriv")
            .arg("--version")
            .output()
            .is_err()
    {
        punctual_testkit::skip(
            "a_shield_without_privilege_exits_3_and_restores_what_it_changed",
            "needs root and setpriv to run punctual as an unprivileged user",
        );
        return;
    }
    // A copy anyone may run, outside the (possibly private) target directory.
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("punctual");
    std::fs::copy(bin_path(), &exe).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let before = std::fs::read_to_string("/proc/irq/default_smp_affinity").unwrap();
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&exe)
        .args(["shield", "--cpus", "1", "-D", "1s"])
        .env("HOME", dir.path())
        .env_remove("PUNCTUAL_STATE_DIR")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    // Refused either at the shield registry (another root run left its state directory) or by
    // the kernel, change by change: both say to run as root.
    assert!(err.contains("run as root"), "{err}");
    assert_eq!(
        std::fs::read_to_string("/proc/irq/default_smp_affinity").unwrap(),
        before
    );
}

#[test]
fn a_load_on_an_offline_cpu_is_bad_input_naming_load() {
    punctual()
        .args(["latency", "-D", "1s", "--load", "cpu@999"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--load").and(predicate::str::contains("not online")));
}

#[test]
fn run_with_a_zero_duration_is_refused_like_every_other_command() {
    punctual()
        .args(["run", "examples/plans/basic.toml", "-D", "0s"])
        .current_dir(env!("CARGO_MANIFEST_DIR").to_string() + "/../..")
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("--duration")
                .and(predicate::str::contains("a run must last more than zero")),
        );
}

#[test]
fn check_titles_itself_with_its_own_interval() {
    let out = punctual()
        .args(["check", "-D", "1s", "-i", "5ms", "--load", "cpu:1"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("(5.00 ms period, CPU "),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
