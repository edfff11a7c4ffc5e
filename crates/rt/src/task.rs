//! A process as the journal and the modules that change the system name it: its identity across
//! pid reuse (pid + start time) and its cgroup.

use std::path::Path;

/// A `/proc/PID/stat` (or `task/TID/stat`) line split as the kernel writes it: the command name
/// (which may hold blanks and parentheses: it ends at the last ')') and the fields after it, from
/// field 3 (the state) on, so field N (1-based, as proc(5) numbers them) is `fields[N - 3]`.
pub fn stat_fields(stat: &str) -> Option<(&str, Vec<&str>)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?;
    Some((name, stat.get(close + 1..)?.split_whitespace().collect()))
}

/// A `/proc/PID/stat` (or `task/TID/stat`) file read and split ([`stat_fields`]).
pub struct ProcStat {
    pub name: String,
    fields: Vec<String>,
}

impl ProcStat {
    /// Read and split the stat file at `path`; `None` when it is gone or not a stat line.
    pub fn read(path: impl AsRef<Path>) -> Option<ProcStat> {
        let text = std::fs::read_to_string(path).ok()?;
        let (name, fields) = stat_fields(&text)?;
        Some(ProcStat {
            name: name.to_string(),
            fields: fields.into_iter().map(String::from).collect(),
        })
    }

    /// Read `/proc/PID/stat`.
    pub fn of(pid: i32) -> Option<ProcStat> {
        ProcStat::read(format!("/proc/{pid}/stat"))
    }

    /// Field `n`, 1-based as proc(5) numbers them (3, the state, or later), parsed.
    pub fn field<T: std::str::FromStr>(&self, n: usize) -> Option<T> {
        self.fields.get(n.checked_sub(3)?)?.parse().ok()
    }
}

/// A pidfd for process `pid` (`pidfd_open`, Linux 5.3): it names that process and no other for
/// as long as it is held, and becomes readable when the process exits. `None` where the kernel has
/// no pidfds or the process is gone.
pub fn pidfd_open(pid: i32) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: plain system call; a non-negative result is a new file descriptor we own.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a non-negative result is a descriptor pidfd_open just created; nothing else owns it.
    (fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
}

/// Whether the process behind a pidfd has exited: one `poll` that does not wait (no `/proc`
/// read, whose open alone took up to hundreds of microseconds here under load).
pub fn pidfd_exited(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    use std::os::fd::AsRawFd;
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd on the stack, a descriptor the caller holds, no wait.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents & (libc::POLLIN | libc::POLLHUP) != 0
}

/// Start time of a task in clock ticks since boot (field 22 of /proc/PID/stat).
pub fn task_start_time(pid: i32) -> Option<u64> {
    ProcStat::of(pid)?.field(22)
}

/// Whether task `tid` runs under SCHED_FIFO or SCHED_RR (false when it is gone).
pub fn is_realtime(tid: i32) -> bool {
    // SAFETY: sched_getscheduler only reads the task's policy. It carries the reset-on-fork flag
    // that punctual's real-time threads are set with; -1 (gone) matches neither policy.
    let policy = unsafe { libc::sched_getscheduler(tid) } & !libc::SCHED_RESET_ON_FORK;
    policy == libc::SCHED_FIFO || policy == libc::SCHED_RR
}

/// A task in state R (running or waiting for its CPU) when `/proc` was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Runnable {
    pub tid: i32,
    /// The CPU it last ran on (field 39).
    pub cpu: u32,
    pub comm: String,
}

/// Every thread on the system, as (process, thread) ids, a process's threads together.
pub fn threads() -> Vec<(i32, i32)> {
    let ids = |dir: &str| -> Vec<i32> {
        std::fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    ids("/proc")
        .into_iter()
        .flat_map(|pid| {
            ids(&format!("/proc/{pid}/task"))
                .into_iter()
                .map(move |tid| (pid, tid))
        })
        .collect()
}

/// Every task in state R, with its CPU: a CPU that lists exactly one held it throughout when
/// nothing switched there meanwhile (a trace without a `sched_switch` on that CPU).
pub fn runnable_tasks() -> Vec<Runnable> {
    threads()
        .into_iter()
        .filter_map(|(pid, tid)| {
            let st = ProcStat::read(format!("/proc/{pid}/task/{tid}/stat"))?;
            match (st.field::<char>(3), st.field::<u32>(39)) {
                (Some('R'), Some(cpu)) => Some(Runnable {
                    tid,
                    cpu,
                    comm: st.name,
                }),
                _ => None,
            }
        })
        .collect()
}

/// The parent of process `pid` (field 4 of /proc/PID/stat).
pub fn parent_pid(pid: i32) -> Option<i32> {
    ProcStat::of(pid)?.field(4)
}

/// Write `pid` into `group/cgroup.procs` (the whole process moves), never through a link.
pub fn move_pid(group: &Path, pid: i32) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(group.join("cgroup.procs"))?;
    f.write_all(pid.to_string().as_bytes())
}

#[cfg(test)]
mod stat_tests {
    use super::*;

    #[test]
    fn stat_fields_split_after_a_name_with_blanks_and_parentheses() {
        let (name, f) = stat_fields("42 (a (b) c) R 1 42 42 0").unwrap();
        assert_eq!(name, "a (b) c");
        assert_eq!(f, ["R", "1", "42", "42", "0"]);
        assert!(stat_fields("no name here").is_none());
    }

    #[test]
    fn proc_stat_numbers_fields_as_proc5_does() {
        // SAFETY: getppid and gettid have no preconditions.
        let (parent, me) = unsafe { (libc::getppid(), libc::gettid()) };
        let own = ProcStat::read(format!("/proc/self/task/{me}/stat")).expect("our own stat");
        assert_eq!(
            own.field::<char>(3),
            Some('R'),
            "field 3: the state of the reading thread"
        );
        assert_eq!(own.field::<i32>(4), Some(parent), "field 4: the parent");
        assert_eq!(
            own.field::<u64>(2),
            None,
            "fields 1 and 2 come before the name's end"
        );
        assert_eq!(parent_pid(std::process::id() as i32), Some(parent));
        let comm = std::fs::read_to_string(format!("/proc/self/task/{me}/comm")).unwrap();
        assert_eq!(own.name, comm.trim_end());
        assert!(ProcStat::of(-1).is_none());
    }

    #[test]
    fn runnable_tasks_list_the_reading_thread_on_its_cpu() {
        // SAFETY: gettid has no preconditions.
        let me = unsafe { libc::gettid() };
        let found = runnable_tasks();
        let own = found
            .iter()
            .find(|r| r.tid == me)
            .expect("the reader is running");
        // Unpinned, the thread may have moved since: only a CPU that is online is checked.
        assert!(
            crate::online_cpus().contains(&(own.cpu as usize)),
            "{own:?}"
        );
        let comm = std::fs::read_to_string(format!("/proc/self/task/{me}/comm")).unwrap();
        assert_eq!(own.comm, comm.trim_end());
        // A sleeping thread is not listed.
        let (tx, rx) = std::sync::mpsc::channel::<i32>();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let h = std::thread::spawn(move || {
            // SAFETY: as above.
            tx.send(unsafe { libc::gettid() }).unwrap();
            done_rx.recv().ok();
        });
        let sleeper = rx.recv().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while runnable_tasks().iter().any(|r| r.tid == sleeper) {
            assert!(
                std::time::Instant::now() < deadline,
                "{sleeper} stays runnable"
            );
        }
        done_tx.send(()).unwrap();
        h.join().unwrap();
    }
}
