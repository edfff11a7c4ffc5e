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

/// Whether any live process has `needle` in its command line (the tag of one test's runs).
fn tagged_alive(needle: &str) -> Vec<String> {
    let mut found = vec![];
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(c) = std::fs::read(e.path().join("cmdline")) {
            if String::from_utf8_lossy(&c).contains(needle) {
                found.push(name);
            }
        }
    }
    found
}

/// Issue 32, item 1: a signal at random points of start-up (while exec children are pre-forked
/// and wake clients spawned and attaching) ends every run as interrupted, promptly, leaving no
/// process, channel or journal. `scripts/fault-inject.sh` (FI_RANDOM) does the same hundreds of
/// times with the 1 s bound on a quiet machine; here the bound is 5 s so a loaded test machine
/// cannot fail it, while a hang (the 30 s attach timeout, or for ever) still does.
#[test]
fn signal_at_random_points_of_start_up_ends_every_run_within_bound_and_restored() {
    let dir = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let exe = common::bin_path();
    // A fixed xorshift sequence: random points, the same ones every run of the test.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut slow = vec![];
    for k in 0..24 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let delay = Duration::from_millis(x % 400);
        let signal = if k % 2 == 0 {
            libc::SIGTERM
        } else {
            libc::SIGINT
        };
        let tag = format!("rs{}-{k}", std::process::id());
        let mut plan = exec_and_wake_plan(&exe.display().to_string(), &tag);
        plan = plan.replace("duration = \"200ms\"", "duration = \"20s\"");
        let plan = write_file(dir.path(), "p.toml", &plan);
        let mut child = std::process::Command::new(&exe)
            .args(["run", "--no-store", "--attach-timeout", "30s"])
            .arg(&plan)
            .env("PUNCTUAL_SHM_DIR", dir.path())
            .env("PUNCTUAL_STATE_DIR", state.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, signal) };
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if t0.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("signal {signal} {delay:?} into start-up: still running 30 s later");
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let took = t0.elapsed();
        if took > Duration::from_secs(5) {
            slow.push((delay, took));
        }
        assert_eq!(
            status.code(),
            Some(130),
            "signal {signal} {delay:?} into start-up"
        );
        // Everything it started is gone within a second (clients get SIGTERM and detach).
        // (Clients carry the tag; held exec children are forks of the run, with its plan path.)
        let plan_path = plan.display().to_string();
        let left = || [tagged_alive(&tag), tagged_alive(&plan_path)].concat();
        let t1 = Instant::now();
        while !left().is_empty() && t1.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(left(), Vec::<String>::new(), "{delay:?}: left");
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != "p.toml")
            .collect();
        assert!(left.is_empty(), "{delay:?}: channels left {left:?}");
        let journals: Vec<_> = std::fs::read_dir(state.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("journal"))
            .collect();
        assert!(journals.is_empty(), "{delay:?}: journals left {journals:?}");
    }
    assert!(slow.is_empty(), "ended later than 5 s: {slow:?}");
}
