//! Real shields on this machine (root only): a second shield over held CPUs is refused, and tasks
//! forked during a shield get their full mask back (issue 19, items 4 and 5). Every test restores
//! what it shielded, also when it fails (the shield restores on drop).

use punctual_dispatch::shield::{self, Shield};
use std::process::{Command, Stdio};

fn ready(name: &str) -> Option<Vec<usize>> {
    // SAFETY: plain syscall.
    if unsafe { libc::geteuid() } != 0 {
        punctual_testkit::skip(name, "needs root to move tasks and IRQs");
        return None;
    }
    let online = punctual_rt::online_cpus();
    if online.len() < 2 {
        punctual_testkit::skip(name, "needs two CPUs");
        return None;
    }
    Some(online)
}

use punctual_testkit::irq_affinities as irq_state;

#[test]
fn a_second_shield_over_held_cpus_is_refused_and_the_first_restores_everything() {
    let name = "a_second_shield_over_held_cpus_is_refused_and_the_first_restores_everything";
    let Some(online) = ready(name) else { return };
    // One shield at a time on this machine: a second one over the same CPU is refused by design.
    let _cpu = punctual_testkit::exclusive_cpu();
    let cpu = *online.last().unwrap();
    let before = irq_state();
    let rt_before = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").unwrap();
    let me = std::process::id() as i32;
    let plan = shield::plan(&[cpu], &[me]).unwrap();
    let held = Shield::apply(&plan).unwrap();
    assert!(held.applied > 0);

    // The same CPU again: refused before anything changes, by plan and by apply, as something
    // the system refuses (exit 3), not bad input.
    let e = shield::plan(&[cpu], &[me]).unwrap_err();
    assert!(matches!(e, shield::ShieldError::System(_)), "{e:?}");
    let e = e.to_string();
    assert!(
        e.contains("already shielded") && e.contains("refused"),
        "{e}"
    );
    let during = irq_state();
    let e = Shield::apply(&plan).err().expect("refused").to_string();
    assert!(e.contains("already shielded"), "{e}");
    assert_eq!(irq_state(), during, "a refused shield changes nothing");
    // Every other CPU with it: nothing would be left for the system.
    let rest: Vec<usize> = online.iter().copied().filter(|&c| c != cpu).collect();
    if let Err(e) = shield::plan(&rest, &[me]) {
        assert!(e.to_string().contains("every online CPU"), "{e}");
    } else {
        panic!("shielding the remaining CPUs {rest:?} was accepted");
    }

    let r = held.restore();
    assert!(r.failed.is_empty(), "{r:?}");
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").unwrap(),
        rt_before
    );
    // Only IRQs someone else changed meanwhile may differ, and those are reported.
    let after = irq_state();
    for ((path, b), (_, a)) in before.iter().zip(&after) {
        if a != b {
            assert!(
                r.left_changed
                    .iter()
                    .any(|(t, _)| t.to_string().contains(path.as_str())),
                "{path}: {b:?} became {a:?} and was not reported: {r:?}"
            );
        }
    }
    // And the CPU can be shielded again.
    let again = Shield::apply(&shield::plan(&[cpu], &[me]).unwrap()).unwrap();
    drop(again);
}

#[test]
fn a_task_forked_under_a_shield_gets_its_full_mask_back() {
    let name = "a_task_forked_under_a_shield_gets_its_full_mask_back";
    let Some(online) = ready(name) else { return };
    // One shield at a time on this machine: a second one over the same CPU is refused by design.
    let _cpu = punctual_testkit::exclusive_cpu();
    let cpu = *online.last().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let go = tmp.path().join("go");
    let mut parent = Command::new("/bin/sh")
        .arg("-c")
        .arg(format!(
            "while [ ! -e {} ]; do sleep 0.01; done; sleep 30 & wait",
            go.display()
        ))
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let ppid = parent.id() as i32;
    // The runner may pin its tests to one CPU (CI does): the parent gets every online CPU before
    // it forks, so the shielded one is in the mask its child must get back.
    punctual_rt::affinity::set(ppid, &online).unwrap();
    let full = punctual_rt::affinity::get(ppid).unwrap();
    assert!(full.contains(&cpu), "the test's process may use CPU {cpu}");
    let me = std::process::id() as i32;
    let held = Shield::apply(&shield::plan(&[cpu], &[me]).unwrap()).unwrap();
    std::fs::write(&go, "").unwrap();
    // The moved process forks now: its child inherits the reduced mask.
    let t0 = std::time::Instant::now();
    let child = loop {
        // The `sleep 30`, not one of the waiting loop's short sleeps (forked before the shield).
        let found = std::fs::read_to_string(format!("/proc/{ppid}/task/{ppid}/children"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|c| c.parse::<i32>().ok())
            .find(|&c| {
                std::fs::read(format!("/proc/{c}/cmdline")).is_ok_and(|s| s == b"sleep\x0030\x00")
            });
        if let Some(c) = found {
            break c;
        }
        assert!(t0.elapsed().as_secs() < 5, "the child never started");
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let under = punctual_rt::affinity::get(child).unwrap();
    let r = held.restore();
    let after = punctual_rt::affinity::get(child).unwrap_or_default();
    // SAFETY: the child of our child, found by its parent just above.
    unsafe { libc::kill(child, libc::SIGKILL) };
    let _ = parent.kill();
    let _ = parent.wait();
    assert!(!under.contains(&cpu), "forked under the shield: {under:?}");
    assert!(r.widened.contains(&child), "{r:?}");
    assert_eq!(after, full, "the child's mask after the shield");
}
