//! A process as the journal and the modules that change the system name it: its identity across
//! pid reuse (pid + start time) and its cgroup.

use std::path::Path;

/// Start time of a task in clock ticks since boot (field 22 of /proc/PID/stat).
pub fn task_start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
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
