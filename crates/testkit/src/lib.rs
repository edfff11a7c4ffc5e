//! What the workspace's tests share (a dev-dependency of every crate, depending on nothing of ours):
//!
//! - **Skips that show.** libtest captures `print!`/`eprint!` of a passing test, so a test that
//!   returns early after `eprintln!("SKIPPED ...")` reads as a plain `ok`. [`skip`] writes to the
//!   process's standard error itself, which the harness does not capture: every skip is a line of
//!   the plain `cargo test` output. A missing *tool* ([`tool`]) is a skip on a developer's machine and
//!   a failure in CI (`CI` or `PUNCTUAL_CI` set, as `.ci/run` does), where every tool is installed.
//! - **One lock for tests that need a CPU to themselves** ([`exclusive_cpu`]): a timing test that
//!   pins work to a CPU and asserts what happened there takes it, so no other test of any binary
//!   (libtest runs a binary's tests in parallel; `cargo nextest` runs binaries in parallel too)
//!   pins its own work there at the same time. It is an `flock` on one file in the temporary
//!   directory, so it holds across threads and processes and is released if a test process dies.
//!   Tests that apply a real shield take it too: shields are machine-wide, and a second one over the
//!   same CPU (another test binary, another checkout) is refused.
//! - **Someone else's work on a CPU** ([`Spinner`]): a process busy on one CPU, at SCHED_FIFO when
//!   asked, killed on drop, for tests that provoke contamination or starvation on purpose.
//! - **Table text without widths** ([`squash`], [`has_row`]): a table's column widths follow the
//!   widest value in a column, and a measured value can be any width. Tests compare rows with every
//!   run of blanks made one space, never with the spacing of one run. Sentences in notes and cells
//!   wrap at the terminal's width (80 columns in library tests): [`has_text`] finds them across the
//!   line breaks.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

/// Say that `test` could not run here and why, on a line of its own in the `cargo test` output.
pub fn skip(test: &str, why: &str) {
    // Not eprintln!: the harness would capture it and show nothing for a passing test.
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "SKIPPED {test}: {why}");
    let _ = err.flush();
}

/// Whether this is a CI run, where every tool the tests use is installed and a missing one is a
/// failure rather than a skip.
pub fn in_ci() -> bool {
    ["PUNCTUAL_CI", "CI"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|s| switched_on(&s)))
}

/// How CI variables are read: set to anything but empty, `0` or `false`.
fn switched_on(v: &std::ffi::OsStr) -> bool {
    !v.is_empty() && v != "0" && v != "false"
}

/// The path of `name` on `PATH`, if there is an executable by that name.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A tool `test` needs: its path, or `None` after a visible skip naming the Debian package that has
/// it. In CI a missing tool fails the test instead (`.ci/run` installs every one).
pub fn tool(test: &str, name: &str, package: &str) -> Option<PathBuf> {
    if let Some(p) = which(name) {
        return Some(p);
    }
    missing(
        test,
        &format!("{name} is not installed (apt-get install -y {package})"),
    );
    None
}

/// Something `test` needs that is not a privilege (a tool, a file a package installs) is missing:
/// a visible skip, or in CI a failure.
pub fn missing(test: &str, why: &str) {
    if in_ci() {
        panic!("{test}: {why}; in CI every tool the tests use must be installed (.ci/run)");
    }
    skip(test, why);
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// `true` when running as root; otherwise a visible skip (`needs root: why`) and `false`.
pub fn need_root(test: &str, why: &str) -> bool {
    if is_root() {
        return true;
    }
    skip(test, &format!("needs root ({why})"));
    false
}

/// Whether the kernel's tracing can be used here (root, and a kernel with tracefs); a visible skip
/// when not.
pub fn tracing(test: &str) -> bool {
    if !need_root(test, "tracefs") {
        return false;
    }
    let fs = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
    if !fs.contains("tracefs") {
        skip(test, "this kernel has no tracefs");
        return false;
    }
    true
}

/// The online CPUs, as the kernel lists them.
pub fn online_cpus() -> Vec<usize> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let mut cpus = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let mut ends = part.split('-').map(|n| n.trim().parse::<usize>());
        match (ends.next(), ends.next()) {
            (Some(Ok(a)), Some(Ok(b))) => cpus.extend(a..=b),
            (Some(Ok(a)), None) => cpus.push(a),
            _ => {}
        }
    }
    cpus
}

/// Held while a test has a CPU to itself; released on drop (or when the process ends).
#[must_use = "the CPU is only the test's while the guard lives"]
pub struct CpuLock {
    _file: std::fs::File,
}

/// Wait until no other test holds a CPU to itself, then hold it until the guard drops. Every test
/// that pins timing-sensitive work to a CPU and asserts on what happened there takes this lock
/// first (one lock for all CPUs: on the 2-CPU machines CI runs on, the tests share one spare CPU).
pub fn exclusive_cpu() -> CpuLock {
    let path = std::env::temp_dir().join("punctual-tests-cpu.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("opening the test CPU lock {}: {e}", path.display()));
    // Others may create it under another umask; the lock works on any file we can open.
    loop {
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            panic!("locking {}: {e}", path.display());
        }
    }
    CpuLock { _file: file }
}

/// This test process's own `PUNCTUAL_DATA_DIR` for the punctual processes it starts: results
/// and journals stay out of the user's directories and out of other test processes' (by pid and
/// start time: a reused pid found an older process's store once). Removed when the test process
/// exits (an `atexit` handler; libtest exits through `exit` whether tests passed or not), so
/// suite runs leave nothing in the temporary directory (45 directories a run before).
pub fn data_dir() -> std::path::PathBuf {
    static DATA: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    extern "C" fn remove() {
        if let Some(d) = DATA.get() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
    DATA.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        // SAFETY: registers a plain function that only reads a set OnceLock and removes a path.
        unsafe { libc::atexit(remove) };
        std::env::temp_dir().join(format!(
            "punctual-test-data-{}-{nanos:x}",
            std::process::id()
        ))
    })
    .clone()
}

/// A process spinning on one CPU, standing for someone else's work there (another test, another
/// tool): a shell's busy loop, pinned, optionally at SCHED_FIFO. Killed by its pid and reaped on
/// drop. Tests that start one hold [`exclusive_cpu`] first.
pub struct Spinner {
    child: std::process::Child,
}

impl Spinner {
    /// Start spinning on `cpu`, at SCHED_FIFO `fifo` when given (needs root). Panics when the
    /// kernel refuses: the caller checked the privilege.
    pub fn start(cpu: usize, fifo: Option<i32>) -> Spinner {
        use std::os::unix::process::CommandExt;
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", "while :; do :; done"])
            .stdin(std::process::Stdio::null());
        // A test process killed outright (RLIMIT_RTTIME, a timeout) must not leave a real-time
        // spinner behind: it dies with the thread that started it.
        // SAFETY: prctl is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd.spawn().expect("starting sh");
        let s = Spinner { child };
        let pid = s.child.id() as libc::pid_t;
        // SAFETY: a zeroed cpu_set_t is empty; CPU_SET and sched_setaffinity act on our child.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            let rc = libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set);
            assert_eq!(
                rc,
                0,
                "pinning the spinner: {}",
                std::io::Error::last_os_error()
            );
        }
        if let Some(prio) = fifo {
            let p = libc::sched_param {
                sched_priority: prio,
            };
            // SAFETY: setting the policy of our own child.
            let rc = unsafe { libc::sched_setscheduler(pid, libc::SCHED_FIFO, &p) };
            assert_eq!(
                rc,
                0,
                "FIFO for the spinner: {}",
                std::io::Error::last_os_error()
            );
        }
        s
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Set the spinner's nice value (a negative one needs root): at -20 a normal-class spinner
    /// takes about 98 % of a CPU shared with nice-0 work, so it stays the busiest there however
    /// loaded the machine is.
    pub fn nice(&self, nice: i32) {
        // SAFETY: setting the nice value of our own child.
        let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, self.child.id(), nice) };
        assert_eq!(
            rc,
            0,
            "nice for the spinner: {}",
            std::io::Error::last_os_error()
        );
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `text` with every run of blanks (spaces, tabs) made one space and each line's ends trimmed.
pub fn squash(text: &str) -> String {
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether `text` holds `row` once blanks are squashed in both: a table row whose published
/// figures are fixed while the column widths follow measured values.
pub fn has_row(text: &str, row: &str) -> bool {
    squash(text).contains(&squash(row))
}

/// Whether `text` holds the words of `needle` in order, whatever blanks and line breaks lie
/// between them: a sentence in a note or cell that a terminal's width wrapped.
pub fn has_text(text: &str, needle: &str) -> bool {
    let words = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    words(text).contains(&words(needle))
}

/// Every IRQ's affinity and the default one, as the kernel spells them (sorted): what a shield
/// moves, for tests that check it was put back.
pub fn irq_affinities() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = std::fs::read_dir("/proc/irq")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|e| {
            let p = e.path().join("smp_affinity_list");
            Some((p.display().to_string(), std::fs::read_to_string(&p).ok()?))
        })
        .collect();
    v.push((
        "default".into(),
        std::fs::read_to_string("/proc/irq/default_smp_affinity").unwrap_or_default(),
    ));
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_match_whatever_the_column_widths() {
        let narrow = "name   paper  0.55  34.68\nother  here   1.20  9.10\n";
        let wide = "name        paper      0.55     34.68\nother       here   12345.20      9.10\n";
        for t in [narrow, wide] {
            assert!(has_row(t, "name paper 0.55 34.68"), "{t}");
            assert!(has_row(t, "name    paper 0.55   34.68"), "{t}");
            assert!(!has_row(t, "name paper 0.55 34.69"), "{t}");
        }
        // Squashing keeps lines apart: a row never matches across a line break.
        assert!(!has_row(narrow, "34.68 other"));
    }

    #[test]
    fn text_matches_across_the_line_breaks_of_wrapping() {
        let wrapped = "task 'tick' re-phased 2 time(s), now at offset\n  763932ns\n";
        assert!(has_text(wrapped, "now at offset 763932ns"));
        assert!(!has_text(wrapped, "now at offset 76393ns"));
    }

    #[test]
    fn the_cpu_lock_excludes_other_holders_until_dropped() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let held = exclusive_cpu();
        let got = Arc::new(AtomicBool::new(false));
        let g = got.clone();
        let t = std::thread::spawn(move || {
            let _l = exclusive_cpu();
            g.store(true, Ordering::SeqCst);
        });
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!got.load(Ordering::SeqCst), "a second holder got the lock");
        drop(held);
        t.join().unwrap();
        assert!(got.load(Ordering::SeqCst));
    }

    #[test]
    fn online_cpus_are_listed() {
        let cpus = online_cpus();
        assert!(!cpus.is_empty());
        assert!(cpus.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn ci_variables_are_on_unless_empty_zero_or_false() {
        for (v, on) in [
            ("1", true),
            ("true", true),
            ("yes", true),
            ("0", false),
            ("false", false),
            ("", false),
        ] {
            assert_eq!(switched_on(std::ffi::OsStr::new(v)), on, "{v:?}");
        }
    }
}
