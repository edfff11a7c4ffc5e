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

/// Start time of a task in clock ticks since boot (field 22 of /proc/PID/stat).
pub fn task_start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_fields(&stat)?.1.get(22 - 3)?.parse().ok()
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
}
