//! Issue 31 item 5: root in a cpu cgroup without real-time budget (real-time group scheduling,
//! as in many containers and services). `check` and `latency` advised "run as root, setcap,
//! ulimit -r" to a process that was root with every capability, twice in one message, and
//! `experiment run kurt-periodic` died after 10 s waiting for clients that could not set FIFO.
//!
//! These tests make such a group where the kernel allows it (a cgroup v1 cpu hierarchy with
//! `cpu.rt_runtime_us`: a new group's budget is 0) and run punctual inside it. Elsewhere they skip
//! visibly; the diagnosis itself is tested with injected facts in `punctual_rt::rtgroup`.

mod common;
use common::stderr;
use std::path::PathBuf;

/// A cpu cgroup made for one test, whose real-time budget is 0; removed on drop. It holds the
/// test CPU lock: what these tests see depends on the machine's real-time throttling, which
/// shield tests turn off (`sched_rt_runtime_us` -1), and with it every group's budget.
struct NoBudgetGroup {
    dir: PathBuf,
    _cpu: punctual_testkit::CpuLock,
}

fn throttling_off() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").is_ok_and(|s| s.trim() == "-1")
}

/// Whether the kernel enforced group budgets through the test; a visible skip when not (a shield
/// outside this test suite turned real-time throttling off meanwhile).
fn enforced(test: &str) -> bool {
    if throttling_off() {
        punctual_testkit::skip(
            test,
            "real-time throttling is off (sched_rt_runtime_us -1, a shield elsewhere?): the kernel \
             enforces no group budget now",
        );
        return false;
    }
    true
}

impl NoBudgetGroup {
    fn create(test: &str) -> Option<NoBudgetGroup> {
        if !punctual_testkit::need_root(test, "making a cpu cgroup") {
            return None;
        }
        let cpu = punctual_testkit::exclusive_cpu();
        if !enforced(test) {
            return None;
        }
        let Some(facts) = punctual_rt::rtgroup::GroupFacts::read() else {
            punctual_testkit::skip(test, "no cpu cgroup hierarchy is mounted");
            return None;
        };
        if facts.version == punctual_rt::rtgroup::Version::V2 {
            punctual_testkit::skip(
                test,
                "the cpu controller is on cgroup v2: a child group with it would change the \
                 machine's root cgroup (subtree_control); the diagnosis is tested with injected \
                 facts (punctual_rt::rtgroup::tests)",
            );
            return None;
        }
        let dir = facts.dir().join(format!(
            "punctual-test-{}-{}",
            std::process::id(),
            test.len()
        ));
        if let Err(e) = std::fs::create_dir(&dir) {
            punctual_testkit::skip(test, &format!("cannot make {}: {e}", dir.display()));
            return None;
        }
        let g = NoBudgetGroup { dir, _cpu: cpu };
        match std::fs::read_to_string(g.dir.join("cpu.rt_runtime_us")) {
            Ok(v) if v.trim() == "0" => Some(g),
            Ok(v) => {
                punctual_testkit::skip(test, &format!("a new group gets budget {}", v.trim()));
                None
            }
            Err(_) => {
                punctual_testkit::skip(
                    test,
                    "this kernel has no real-time group scheduling (no cpu.rt_runtime_us); the \
                     diagnosis is tested with injected facts (punctual_rt::rtgroup::tests)",
                );
                None
            }
        }
    }

    /// `punctual ARGS` started inside the group (a shell moves itself in, then becomes punctual).
    fn punctual(&self, args: &[&str]) -> std::process::Output {
        let mut script = format!(
            "echo $$ > '{}/cgroup.procs' && exec '{}'",
            self.dir.display(),
            common::bin_path().display()
        );
        for a in args {
            script.push_str(&format!(" '{a}'"));
        }
        let mut sh = std::process::Command::new("sh");
        sh.args(["-c", &script]);
        sh.env("PUNCTUAL_DATA_DIR", punctual_testkit::data_dir());
        sh.output().unwrap()
    }
}

impl Drop for NoBudgetGroup {
    fn drop(&mut self) {
        // The processes that were in it have ended; the kernel may take a moment to say so.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

#[test]
fn in_a_cgroup_without_real_time_budget_latency_names_the_cgroup_once_and_falls_back() {
    let test = "in_a_cgroup_without_real_time_budget_latency_names_the_cgroup_once";
    let Some(g) = NoBudgetGroup::create(test) else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let json = t.path().join("l.json");
    let o = g.punctual(&["latency", "-D", "300ms", "--json", json.to_str().unwrap()]);
    if !enforced(test) {
        return;
    }
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    assert!(
        e.contains("cpu.rt_runtime_us is 0"),
        "the cause is not named: {e}"
    );
    assert!(
        e.contains(&g.dir.display().to_string()),
        "the group is not named: {e}"
    );
    assert_eq!(
        e.matches("--move-to-rt-cgroup").count(),
        1,
        "advice not once: {e}"
    );
    assert!(
        !e.contains("setcap") && !e.contains("ulimit"),
        "privilege advice to root: {e}"
    );
    let doc = common::valid_doc(&json);
    assert_eq!(doc["settings"]["policy"], "other", "{doc}");
    let why = doc["settings"]["fallbacks"][0]["why"].as_str().unwrap();
    assert!(why.contains("cpu.rt_runtime_us is 0"), "{why}");
}

#[test]
fn move_to_rt_cgroup_runs_at_fifo_from_a_cgroup_without_budget() {
    let test = "move_to_rt_cgroup_runs_at_fifo_from_a_cgroup_without_budget";
    let Some(g) = NoBudgetGroup::create(test) else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let json = t.path().join("l.json");
    let o = g.punctual(&[
        "latency",
        "--move-to-rt-cgroup",
        "-D",
        "300ms",
        "--json",
        json.to_str().unwrap(),
    ]);
    if !enforced(test) {
        return;
    }
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    assert!(e.contains("moved to cgroup"), "{e}");
    assert!(!e.contains("fallback: scheduling policy"), "{e}");
    assert!(!e.contains("could not move back"), "{e}");
    let doc = common::valid_doc(&json);
    assert_eq!(doc["settings"]["policy"], "fifo", "{doc}");
}

#[test]
fn kurt_periodic_in_a_cgroup_without_budget_fails_before_it_starts() {
    let test = "kurt_periodic_in_a_cgroup_without_budget_fails_before_it_starts";
    let Some(g) = NoBudgetGroup::create(test) else {
        return;
    };
    let t0 = std::time::Instant::now();
    let o = g.punctual(&[
        "experiment",
        "run",
        "kurt-periodic",
        "--quick",
        "--no-store",
    ]);
    let took = t0.elapsed();
    if !enforced(test) {
        return;
    }
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{e}");
    assert!(e.contains("nothing was measured"), "{e}");
    assert!(e.contains("cpu.rt_runtime_us is 0"), "{e}");
    assert!(!e.contains("no client attached"), "{e}");
    // Before: 10 s of waiting for clients that had exited.
    assert!(
        took < std::time::Duration::from_secs(8),
        "took {took:?}: {e}"
    );
}
