//! A run always starts or refuses, and a signal ends it in any phase, start-up included (issue 32,
//! item 1). `scripts/fault-inject.sh` with `FI_RANDOM` sends hundreds of signals at random points;
//! these are the regressions of the two causes it found.

mod common;

use common::{punctual, stderr, write_file};
use std::time::{Duration, Instant};

/// A plan of four exec actions and four wake actions whose clients punctual spawns: the preparer
/// threads fork held children while the main thread spawns the clients.
fn exec_and_wake_plan(exe: &str, tag: &str) -> String {
    let mut plan = String::from("[plan]\nname = \"startup\"\nduration = \"200ms\"\n");
    for i in 0..4 {
        plan += &format!(
            "\n[[task]]\nname = \"x{i}\"\nperiod = \"10ms\"\noffset = \"auto\"\n\
             action = {{ kind = \"exec\", argv = [\"/bin/true\"] }}\n\
             \n[[task]]\nname = \"c{i}\"\nperiod = \"10ms\"\noffset = \"auto\"\n\
             action = {{ kind = \"wake\", channel = \"{tag}-{i}\", spawn = [\"{exe}\", \"__periodic\", \
             \"--mode\", \"wake\", \"--period-ns\", \"10000000\", \"--channel\", \"{tag}-{i}\"] }}\n"
        );
    }
    plan
}

/// Issue 32, item 1, the deadlock: a held exec child kept the pipe through which the main thread's
/// spawn of a wake client learns of its exec, and the spawn waited for a release only the main
/// thread could give. Before the fix a quarter of these starts hung.
#[test]
fn run_with_exec_actions_and_spawned_wake_clients_always_starts() {
    let dir = tempfile::tempdir().unwrap();
    let exe = common::bin_path();
    for k in 0..8 {
        let tag = format!("st{}-{k}", std::process::id());
        let plan = write_file(
            dir.path(),
            "p.toml",
            &exec_and_wake_plan(&exe.display().to_string(), &tag),
        );
        let t0 = Instant::now();
        let o = punctual()
            .args(["run", "--no-store", "--attach-timeout", "30s"])
            .arg(&plan)
            .env("PUNCTUAL_SHM_DIR", dir.path())
            // Far above any start: a hang is a hang, not a slow machine.
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "start {k} did not finish ({:?}): {}",
            t0.elapsed(),
            stderr(&o)
        );
    }
}

/// Issue 32, item 1, the signal: SIGTERM while the run waits for its wake clients used to set a
/// flag nobody read; the run waited out the attach timeout and exited 3 ("no client attached").
#[test]
fn sigterm_while_waiting_for_wake_clients_ends_the_run_as_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    // A client that never attaches.
    let plan = write_file(
        dir.path(),
        "p.toml",
        &format!(
            "[[task]]\nname = \"c\"\nperiod = \"10ms\"\n\
             action = {{ kind = \"wake\", channel = \"never-{}\", spawn = [\"/bin/sleep\", \"60\"] }}\n",
            std::process::id()
        ),
    );
    let mut cmd = std::process::Command::new(common::bin_path());
    cmd.args(["run", "--no-store", "--attach-timeout", "60s"])
        .arg(&plan)
        .env("PUNCTUAL_SHM_DIR", dir.path())
        .env(
            "PUNCTUAL_DATA_DIR",
            dir.path().join("data").display().to_string(),
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    // Well into the wait for the client (the sleep is spawned at once).
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(50) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the run did not end after SIGTERM: it waited for the attach timeout");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(!err.contains("no client attached"), "{err}");
}
