//! Real-time group scheduling: why a process with every privilege may still be refused SCHED_FIFO.
//!
//! With `CONFIG_RT_GROUP_SCHED`, every cpu cgroup has its own real-time budget
//! (`cpu.rt_runtime_us`), and a new group gets none: the kernel refuses a real-time policy to any
//! task in a group whose budget is 0 (EPERM, root or not). Containers and systemd services often run
//! in such a group; so do cgroup v2 child groups with the cpu controller, which get no budget on
//! such a kernel. The cure is to run in a group that has a budget (the root group has the
//! machine's, `sched_rt_runtime_us`), or to give the group one.
//!
//! [`GroupFacts::read`] gathers what decides it from `/proc/self/cgroup`, the mount table and the
//! groups' files; [`diagnose`] is a pure function of those facts (tested with injected ones, since
//! a machine shows one case at a time); [`MoveGuard`] moves this process into the group that has a
//! budget for the run, journalled, and back.

pub use crate::task::move_pid;
use std::path::{Path, PathBuf};

/// Which cgroup hierarchy holds the cpu controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// What decides whether this process's cpu cgroup may run real-time tasks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupFacts {
    pub version: Version,
    /// Where the hierarchy is mounted (`/sys/fs/cgroup/cpu`, `/sys/fs/cgroup`).
    pub mount: PathBuf,
    /// The group, relative to the mount (`/`, `/system.slice/x.service`).
    pub group: String,
    /// `cpu.rt_runtime_us` of the group, then of each parent up to the root: `None` where the
    /// file is absent (cgroup v2, or a kernel without real-time group scheduling).
    pub runtimes: Vec<(String, Option<i64>)>,
    /// cgroup v2: whether the cpu controller is enabled for the group (its parent's
    /// `cgroup.subtree_control` lists `cpu`). Always true for v1.
    pub cpu_controller: bool,
    /// `CONFIG_RT_GROUP_SCHED` from `/proc/config.gz`, when the kernel publishes its config.
    pub kernel_rt_group_sched: Option<bool>,
    /// `/proc/sys/kernel/sched_rt_runtime_us`: the machine's real-time budget (-1: unlimited).
    pub sched_rt_runtime_us: Option<i64>,
}

/// Why real-time scheduling is refused to a privileged process, and what fixes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    pub why: String,
    pub fix: String,
    /// The group to move to for the run (`--move-to-rt-cgroup`), when there is one.
    pub target: Option<PathBuf>,
}

/// The flag that moves punctual into a group with a real-time budget for a run.
pub const MOVE_FLAG: &str = "--move-to-rt-cgroup";

impl GroupFacts {
    /// This process's facts, or `None` when it is in no cpu cgroup hierarchy punctual can find.
    pub fn read() -> Option<GroupFacts> {
        let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let (version, mount, group) = locate(&cgroups, &mountinfo)?;
        let dir = |g: &str| group_dir(&mount, g);
        let mut runtimes = Vec::new();
        let mut g = group.clone();
        loop {
            let v = std::fs::read_to_string(dir(&g).join("cpu.rt_runtime_us"))
                .ok()
                .and_then(|s| s.trim().parse().ok());
            runtimes.push((g.clone(), v));
            if g == "/" {
                break;
            }
            g = parent(&g);
        }
        let cpu_controller = match version {
            Version::V1 => true,
            Version::V2 => {
                group != "/"
                    && std::fs::read_to_string(dir(&parent(&group)).join("cgroup.subtree_control"))
                        .is_ok_and(|s| s.split_whitespace().any(|c| c == "cpu"))
            }
        };
        Some(GroupFacts {
            version,
            mount,
            group,
            runtimes,
            cpu_controller,
            kernel_rt_group_sched: kernel_config("CONFIG_RT_GROUP_SCHED"),
            sched_rt_runtime_us: std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us")
                .ok()
                .and_then(|s| s.trim().parse().ok()),
        })
    }

    /// The group's directory.
    pub fn dir(&self) -> PathBuf {
        group_dir(&self.mount, &self.group)
    }
}

/// The directory of group `g` (`/a/b`) in the hierarchy mounted at `mount`.
fn group_dir(mount: &Path, g: &str) -> PathBuf {
    match g.trim_matches('/') {
        "" => mount.to_path_buf(),
        rel => mount.join(rel),
    }
}

/// The parent of a group path (`/a/b` -> `/a`, `/a` -> `/`).
fn parent(g: &str) -> String {
    match g.trim_end_matches('/').rfind('/') {
        Some(0) | None => "/".into(),
        Some(i) => g[..i].into(),
    }
}

/// The hierarchy holding the cpu controller, its mount point and this process's group in it, from
/// `/proc/self/cgroup` and `/proc/self/mountinfo`.
fn locate(cgroups: &str, mountinfo: &str) -> Option<(Version, PathBuf, String)> {
    let mut v2_group = None;
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        if controllers.split(',').any(|c| c == "cpu") {
            let mount = mount_of(mountinfo, |fs, opts| {
                fs == "cgroup" && opts.split(',').any(|o| o == "cpu")
            })?;
            return Some((Version::V1, mount, path.to_string()));
        }
        if controllers.is_empty() {
            v2_group = Some(path.to_string());
        }
    }
    let group = v2_group?;
    let mount = mount_of(mountinfo, |fs, _| fs == "cgroup2")?;
    // A v2 hierarchy without the cpu controller has no say over real-time scheduling.
    let controllers = std::fs::read_to_string(mount.join("cgroup.controllers")).unwrap_or_default();
    if !controllers.split_whitespace().any(|c| c == "cpu") {
        return None;
    }
    Some((Version::V2, mount, group))
}

/// The first mount point in `mountinfo` whose filesystem type and super options `pick` accepts.
fn mount_of(mountinfo: &str, pick: impl Fn(&str, &str) -> bool) -> Option<PathBuf> {
    mountinfo.lines().find_map(|l| {
        // ID PARENT MAJ:MIN ROOT MOUNT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTS
        let (left, right) = l.split_once(" - ")?;
        let mount = left.split_whitespace().nth(4)?;
        let mut r = right.split_whitespace();
        let (fs, _src, opts) = (r.next()?, r.next()?, r.next().unwrap_or(""));
        pick(fs, opts).then(|| PathBuf::from(unescape(mount)))
    })
}

/// mountinfo escapes blanks and backslashes as octal (`\040`).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = (b[i] == b'\\' && i + 4 <= b.len())
            .then(|| std::str::from_utf8(&b[i + 1..i + 4]).ok())
            .flatten()
            .and_then(|d| u8::from_str_radix(d, 8).ok());
        match octal {
            Some(v) => {
                out.push(v);
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A `y`/`n` option of the running kernel's configuration (`/proc/config.gz`), when published.
fn kernel_config(option: &str) -> Option<bool> {
    let out = std::process::Command::new("zcat")
        .arg("/proc/config.gz")
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let set = format!("{option}=y");
    let unset = format!("# {option} is not set");
    text.lines().find_map(|l| {
        if l == set {
            Some(true)
        } else if l == unset {
            Some(false)
        } else {
            None
        }
    })
}

/// Why real-time scheduling is refused here, if the facts say: the machine's budget is 0, or the
/// group's (real-time group scheduling). `None`: nothing in the cgroups explains a refusal.
pub fn diagnose(f: &GroupFacts) -> Option<Blocked> {
    if f.sched_rt_runtime_us == Some(0) {
        return Some(Blocked {
            why: "the kernel gives real-time tasks no time at all (/proc/sys/kernel/sched_rt_runtime_us is 0)"
                .into(),
            fix: "echo 950000 > /proc/sys/kernel/sched_rt_runtime_us".into(),
            target: None,
        });
    }
    // -1: real-time throttling is off (a shield in real-time mode turns it off), and with it
    // every group's budget; nothing in the cgroups refuses anyone now.
    if f.group == "/" || f.sched_rt_runtime_us == Some(-1) {
        return None;
    }
    let dir = f.dir();
    let shown = crate::text::display_path(&dir);
    match f.runtimes.first() {
        Some((_, Some(0))) => {
            // The nearest parent with a budget (the root group has the machine's).
            let target = f
                .runtimes
                .iter()
                .find(|(_, v)| v.is_some_and(|v| v != 0))
                .map(|(g, _)| group_dir(&f.mount, g));
            let to = target
                .as_deref()
                .map(crate::text::display_path)
                .unwrap_or_else(|| "a group with a budget".into());
            Some(Blocked {
                why: format!(
                    "punctual runs in cgroup {shown}, whose cpu.rt_runtime_us is 0: with real-time \
                     group scheduling (CONFIG_RT_GROUP_SCHED) the kernel refuses SCHED_FIFO and \
                     SCHED_RR to its tasks, root or not"
                ),
                fix: format!(
                    "pass {MOVE_FLAG} (punctual moves itself to {to} for the run and back after), \
                     start punctual outside the group, or give the group a budget: echo 950000 > \
                     {shown}/cpu.rt_runtime_us (each parent's first)"
                ),
                target,
            })
        }
        Some((_, None))
            if f.version == Version::V2
                && f.cpu_controller
                && f.kernel_rt_group_sched == Some(true) =>
        {
            let root = crate::text::display_path(&f.mount);
            Some(Blocked {
                why: format!(
                    "punctual runs in cgroup v2 group {shown} with the cpu controller, on a kernel \
                     with real-time group scheduling (CONFIG_RT_GROUP_SCHED): such groups get no \
                     real-time budget, so the kernel refuses SCHED_FIFO and SCHED_RR to their tasks"
                ),
                fix: format!(
                    "pass {MOVE_FLAG} (punctual moves itself to the root group {root} for the run \
                     and back after), or start punctual in the root group"
                ),
                target: Some(f.mount.clone()),
            })
        }
        _ => None,
    }
}

/// Why the kernel refused a real-time policy to a process that has the privilege, and the fix:
/// the cgroup's budget when that is it, else the other causes that remain.
pub fn refusal() -> Blocked {
    GroupFacts::read()
        .as_ref()
        .and_then(diagnose)
        .unwrap_or_else(|| Blocked {
            why: "the kernel refused a real-time policy although this process has the privilege"
                .into(),
            fix: "look for what else may refuse it: a cgroup without real-time budget \
                  (cpu.rt_runtime_us), a seccomp filter, a security module"
                .into(),
            target: None,
        })
}

/// Whether the kernel lets this process take a real-time policy: tried on a short-lived thread,
/// which is then gone (threads of one process share its cgroup). `Err` carries the error.
pub fn probe() -> Result<(), std::io::Error> {
    std::thread::spawn(|| {
        let p = libc::sched_param { sched_priority: 1 };
        // SAFETY: sets the policy of this probe thread only, which ends right after.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &p) }
            == 0
        {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    })
    .join()
    .unwrap_or_else(|_| Err(std::io::Error::other("the probe thread panicked")))
}

/// This process moved into another cpu cgroup for a run; moved back on drop. The move is in the
/// journal first, so a second Ctrl-C puts it back too.
pub struct MoveGuard {
    from: PathBuf,
    to: PathBuf,
    _journal: crate::journal::ChangeGuard,
}

impl MoveGuard {
    /// Move this whole process (every thread) into the group directory `to`, remembering the
    /// group it is in now.
    pub fn to(facts: &GroupFacts, to: &Path) -> Result<MoveGuard, crate::RtError> {
        let from = facts.dir();
        let pid = std::process::id() as i32;
        let start_time = crate::task::task_start_time(pid).unwrap_or(0);
        let guard = crate::journal::global()
            .record(crate::journal::Change::CgroupMove {
                pid,
                start_time,
                group: from.clone(),
            })
            .map_err(|e| crate::RtError::io("writing the journal", e))?;
        move_pid(to, pid).map_err(|e| {
            crate::RtError::from_os(
                format!(
                    "moving punctual to cgroup {}",
                    crate::text::display_path(to)
                ),
                e,
                "run as root in a cgroup hierarchy it may write",
            )
        })?;
        Ok(MoveGuard {
            from,
            to: to.to_path_buf(),
            _journal: guard,
        })
    }

    pub fn from(&self) -> &Path {
        &self.from
    }

    pub fn to_dir(&self) -> &Path {
        &self.to
    }

    /// Move back into the group the process came from. The kernel refuses while a thread still
    /// runs under a real-time policy (the group has no budget for it).
    pub fn back(self) -> std::io::Result<()> {
        self._journal.undo_now()
    }
}

/// `--move-to-rt-cgroup`: move this process where real-time scheduling is allowed, if its own group
/// refuses it. Returns the guard (`None`: nothing needed moving) and what was done, to be said.
pub fn enter_for_run() -> Result<(Option<MoveGuard>, String), punctual_result::Failure> {
    use crate::text::display_path;
    let Some(facts) = GroupFacts::read() else {
        let none = format!("{MOVE_FLAG}: no cpu cgroup hierarchy found; nothing moved");
        return Ok((None, none));
    };
    let Some(blocked) = diagnose(&facts) else {
        let dir = display_path(&facts.dir());
        let allowed =
            format!("{MOVE_FLAG}: cgroup {dir} allows real-time scheduling; nothing moved");
        return Ok((None, allowed));
    };
    let Some(target) = blocked.target else {
        return Err(punctual_result::Failure::system(format!(
            "{MOVE_FLAG}: {}; no group to move to. Fix: {}",
            blocked.why, blocked.fix
        )));
    };
    let g = MoveGuard::to(&facts, &target)?;
    let moved = format!(
        "moved to cgroup {} for this run (from {}, which has no real-time budget); moved back at the end",
        display_path(g.to_dir()),
        display_path(g.from())
    );
    Ok((Some(g), moved))
}

impl MoveGuard {
    /// Back to the group the process came from ([`MoveGuard::back`]); what to say when the
    /// kernel refuses.
    pub fn leave(self) -> Option<String> {
        let from = crate::text::display_path(&self.from);
        let refused = self.back().err();
        refused.map(|e| format!("could not move back to cgroup {from}: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v1(group: &str, runtimes: &[(&str, Option<i64>)]) -> GroupFacts {
        GroupFacts {
            version: Version::V1,
            mount: "/sys/fs/cgroup/cpu".into(),
            group: group.into(),
            runtimes: runtimes.iter().map(|(g, v)| (g.to_string(), *v)).collect(),
            cpu_controller: true,
            kernel_rt_group_sched: Some(true),
            sched_rt_runtime_us: Some(950_000),
        }
    }

    #[test]
    fn a_v1_group_without_a_budget_is_named_with_the_flag_and_the_group_to_move_to() {
        let f = v1(
            "/docker/abc",
            &[
                ("/docker/abc", Some(0)),
                ("/docker", Some(0)),
                ("/", Some(950_000)),
            ],
        );
        let b = diagnose(&f).expect("blocked");
        assert!(b.why.contains("/sys/fs/cgroup/cpu/docker/abc"), "{}", b.why);
        assert!(b.why.contains("cpu.rt_runtime_us is 0"), "{}", b.why);
        assert!(b.why.contains("CONFIG_RT_GROUP_SCHED"), "{}", b.why);
        assert!(b.fix.contains(MOVE_FLAG), "{}", b.fix);
        assert_eq!(b.target.as_deref(), Some(Path::new("/sys/fs/cgroup/cpu")));
        // Not the privilege advice: this process has the privilege.
        assert!(
            !b.fix.contains("setcap") && !b.fix.contains("ulimit"),
            "{}",
            b.fix
        );
    }

    #[test]
    fn the_nearest_parent_with_a_budget_is_the_target() {
        let f = v1(
            "/rt/job",
            &[
                ("/rt/job", Some(0)),
                ("/rt", Some(500_000)),
                ("/", Some(950_000)),
            ],
        );
        assert_eq!(
            diagnose(&f).unwrap().target.as_deref(),
            Some(Path::new("/sys/fs/cgroup/cpu/rt"))
        );
    }

    #[test]
    fn groups_with_a_budget_and_the_root_group_are_not_blocked() {
        assert_eq!(diagnose(&v1("/", &[("/", Some(950_000))])), None);
        let f = v1("/rt", &[("/rt", Some(100_000)), ("/", Some(950_000))]);
        assert_eq!(diagnose(&f), None);
        // Without real-time group scheduling there is no per-group file at all.
        let mut f = v1("/a", &[("/a", None), ("/", None)]);
        f.kernel_rt_group_sched = Some(false);
        assert_eq!(diagnose(&f), None);
    }

    #[test]
    fn a_v2_child_group_with_the_cpu_controller_on_an_rt_group_kernel_is_blocked() {
        let f = GroupFacts {
            version: Version::V2,
            mount: "/sys/fs/cgroup".into(),
            group: "/system.slice/app.service".into(),
            runtimes: vec![
                ("/system.slice/app.service".into(), None),
                ("/system.slice".into(), None),
                ("/".into(), None),
            ],
            cpu_controller: true,
            kernel_rt_group_sched: Some(true),
            sched_rt_runtime_us: Some(950_000),
        };
        let b = diagnose(&f).expect("blocked");
        assert!(
            b.why.contains("cgroup v2") && b.why.contains("app.service"),
            "{}",
            b.why
        );
        assert_eq!(b.target.as_deref(), Some(Path::new("/sys/fs/cgroup")));
        // The same group without the cpu controller, or on a kernel without RT groups: fine.
        let off = GroupFacts {
            cpu_controller: false,
            ..f.clone()
        };
        assert_eq!(diagnose(&off), None);
        let plain = GroupFacts {
            kernel_rt_group_sched: Some(false),
            ..f
        };
        assert_eq!(diagnose(&plain), None);
    }

    #[test]
    fn with_real_time_throttling_off_no_group_budget_is_enforced() {
        let mut f = v1(
            "/docker/abc",
            &[("/docker/abc", Some(0)), ("/", Some(950_000))],
        );
        f.sched_rt_runtime_us = Some(-1);
        assert_eq!(diagnose(&f), None);
    }

    #[test]
    fn a_machine_without_any_real_time_budget_says_so() {
        let mut f = v1("/", &[("/", Some(950_000))]);
        f.sched_rt_runtime_us = Some(0);
        let b = diagnose(&f).unwrap();
        assert!(b.why.contains("sched_rt_runtime_us is 0"), "{}", b.why);
        assert!(b.target.is_none());
    }

    #[test]
    fn the_cpu_hierarchy_is_found_in_v1_and_v2_mount_tables() {
        let cg1 = "4:memory:/x\n1:cpu:/punctual-t\n0::/\n";
        let mi1 = "30 25 0:26 / /sys/fs/cgroup/cpu rw,relatime shared:9 - cgroup cgroup rw,cpu\n\
                   31 25 0:27 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            locate(cg1, mi1),
            Some((
                Version::V1,
                PathBuf::from("/sys/fs/cgroup/cpu"),
                "/punctual-t".into()
            ))
        );
        // cpu,cpuacct co-mounted, with a blank in the mount point.
        let cg = "3:cpu,cpuacct:/a b\n";
        let mi = "30 25 0:26 / /mnt/cg\\040cpu rw - cgroup cgroup rw,cpu,cpuacct\n";
        assert_eq!(
            locate(cg, mi).map(|l| l.1),
            Some(PathBuf::from("/mnt/cg cpu"))
        );
        assert_eq!(parent("/a/b"), "/a");
        assert_eq!(parent("/a"), "/");
    }
}
