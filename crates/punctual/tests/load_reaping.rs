//! Loads never outlive punctual: after SIGINT (punctual stops and reaps them) and after SIGKILL (the
//! parent-death signal makes each load clean up and exit), no load process, and nothing a load
//! started (the build load's compilers), is still running 2 s later, and the scratch directory is
//! gone.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// pid -> (parent pid, start time, state) for every process.
fn processes() -> BTreeMap<i32, (i32, u64, char)> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let f: Vec<&str> = stat[close + 2..].split_whitespace().collect();
        let (Some(state), Some(ppid), Some(start)) =
            (f[0].chars().next(), f[1].parse().ok(), f[19].parse().ok())
        else {
            continue;
        };
        out.insert(pid, (ppid, start, state));
    }
    out
}

/// Every process below `root`, with its start time (to tell a reused pid from a survivor).
fn descendants(root: i32) -> Vec<(i32, u64)> {
    let all = processes();
    let mut found = vec![];
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for (&pid, &(ppid, start, _)) in &all {
            if ppid == p {
                found.push((pid, start));
                frontier.push(pid);
            }
        }
    }
    found
}

fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

fn alive(survivors: &[(i32, u64)]) -> Vec<(i32, char, String)> {
    let now = processes();
    survivors
        .iter()
        .filter_map(|(pid, start)| match now.get(pid) {
            Some(&(_, s, state)) if s == *start && state != 'Z' => {
                Some((*pid, state, cmdline(*pid)))
            }
            _ => None,
        })
        .collect()
}

const LOADS: &str = "cpu:1,sort:1,io:1,find:1,build:1,hackbench:1,mem:1";

fn start(scratch: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_punctual"))
        .env("PUNCTUAL_DATA_DIR", punctual_testkit::data_dir())
        .args([
            "latency", "-t", "1", "-i", "10ms", "-D", "60s", "--load", LOADS,
        ])
        .env("TMPDIR", scratch)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Wait until all seven loads run and the build load has a compiler going; return the tree.
fn wait_for_loads(child: &mut Child) -> Vec<(i32, u64)> {
    let pid = child.id() as i32;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let tree = descendants(pid);
        let loads = tree
            .iter()
            .filter(|(p, _)| cmdline(*p).contains("__load"))
            .count();
        let compilers = tree
            .iter()
            .filter(|(p, _)| cmdline(*p).contains("gcc"))
            .count();
        if loads == 7 && compilers > 0 {
            return tree;
        }
        assert!(child.try_wait().unwrap().is_none(), "punctual exited early");
        assert!(
            Instant::now() < deadline,
            "loads did not start: {loads} loads, {compilers} compilers"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn assert_gone(tree: &[(i32, u64)], scratch: &Path, how: &str) {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let left = alive(tree);
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after {how}, still running 2 s later: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The scratch directory (io files, the build project) is removed by the last load to stop.
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let left: Vec<_> = std::fs::read_dir(scratch)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after {how}, left behind: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Each load process is named after its kind (`load-io`), not `punctual`: `--explain` names what
/// held a CPU by that name, and a load read as one of punctual's own threads.
fn assert_named(tree: &[(i32, u64)]) {
    for &(pid, _) in tree {
        let argv = cmdline(pid);
        let Some(kind) = argv
            .split_whitespace()
            .skip_while(|a| *a != "__load")
            .nth(1)
        else {
            continue;
        };
        // It names itself just after its exec: give a load seen at once a moment.
        let comm = || std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        let deadline = Instant::now() + Duration::from_secs(5);
        while comm().trim() != format!("load-{kind}") && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(comm().trim(), format!("load-{kind}"), "{argv}");
    }
}

#[test]
fn loads_are_reaped_after_sigint() {
    let scratch = tempfile::tempdir().unwrap();
    let mut child = start(scratch.path());
    let tree = wait_for_loads(&mut child);
    assert_named(&tree);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "interrupted runs exit 130");
    assert_gone(&tree, scratch.path(), "SIGINT");
}

#[test]
fn loads_are_reaped_after_sigkill() {
    let scratch = tempfile::tempdir().unwrap();
    let mut child = start(scratch.path());
    let tree = wait_for_loads(&mut child);
    child.kill().unwrap(); // SIGKILL: punctual gets no chance to stop anything itself
    child.wait().unwrap();
    assert_gone(&tree, scratch.path(), "SIGKILL");
}
