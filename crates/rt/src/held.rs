//! A child forked ahead of time and held between `fork` and `exec` until its instant (the `exec`
//! action's pre-forked children), without holding anything of anyone else's while it waits.
//!
//! `Command::spawn` cannot do this safely: a child held in `pre_exec` keeps every descriptor the
//! process had at its fork until it execs, among them the close-on-exec pipe through which another
//! thread's `Command::spawn`, in flight at that moment, learns that *its* child has exec'd. That
//! spawn then blocks until the held child is released, and when the thread that would release it is
//! the one blocked, nothing moves (the start-up deadlock of issue 32). [`spawn_held`] forks itself,
//! so it knows its own error pipe, and the child closes every descriptor but its standard three,
//! that pipe and the ones the caller names, at once, before it waits.

use crate::child::ChildSetup;
use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;

/// A child started by [`spawn_held`]: a process id to wait for (as `std::process::Child` is).
#[derive(Debug)]
pub struct Held {
    pid: libc::pid_t,
    status: Option<ExitStatus>,
}

impl Held {
    pub fn id(&self) -> u32 {
        self.pid as u32
    }

    /// Its exit status if it has ended (reaping it), without blocking.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.wait_flags(libc::WNOHANG)
    }

    /// Waits for it to end (reaping it).
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        loop {
            if let Some(s) = self.wait_flags(0)? {
                return Ok(s);
            }
        }
    }

    /// SIGKILL, unless it has already been reaped (the pid may belong to someone else by then);
    /// moved and demoted first if real-time work holds its CPUs ([`crate::signals::unstick_process`]).
    pub fn kill(&mut self) -> io::Result<()> {
        if self.status.is_none() {
            crate::signals::unstick_process(self.id());
        }
        self.signal(libc::SIGKILL)
    }

    /// Sends `sig`, unless it has already been reaped.
    pub fn signal(&mut self, sig: libc::c_int) -> io::Result<()> {
        if self.status.is_some() {
            return Ok(());
        }
        // SAFETY: signalling our own unreaped child: the pid cannot have been reused.
        if unsafe { libc::kill(self.pid, sig) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn wait_flags(&mut self, flags: libc::c_int) -> io::Result<Option<ExitStatus>> {
        if let Some(s) = self.status {
            return Ok(Some(s));
        }
        let mut raw = 0;
        loop {
            // SAFETY: waiting for our own child.
            let r = unsafe { libc::waitpid(self.pid, &mut raw, flags) };
            if r == self.pid {
                let s = ExitStatus::from_raw(raw);
                self.status = Some(s);
                return Ok(Some(s));
            }
            if r == 0 {
                return Ok(None);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

fn cstring(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} holds a NUL byte", s.to_string_lossy()),
        )
    })
}

/// The environment variable every held child carries: `PUNCTUAL_EXEC_OF=<pid>:<start time>:<n>`,
/// this punctual and the exec action that started it (one process can run several plans, as the
/// tests do). Its descendants inherit it, so what an exec child leaves running (a daemon that
/// forked away and reparented to init) is found at the end of the run ([`marked_processes`]) and
/// stopped (issue 32: daemonising grandchildren outlived the run).
pub const EXEC_MARKER: &str = "PUNCTUAL_EXEC_OF";

/// A new `PUNCTUAL_EXEC_OF=<this pid>:<its start time>:<n>`, unique to the caller (an exec action).
pub fn exec_marker() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let pid = std::process::id() as i32;
    format!(
        "{EXEC_MARKER}={pid}:{}:{}",
        crate::journal::task_start_time(pid).unwrap_or(0),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

/// Every process whose environment carries `marker` (an [`exec_marker`]; root reads every
/// process's environment, an unprivileged punctual finds its own user's).
pub fn marked_processes(marker: &str) -> Vec<i32> {
    let want = marker.as_bytes();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|kv| kv == want))
        })
        .collect()
}

/// Stop every process carrying `marker`: SIGTERM, up to `grace` for them to go, then SIGKILL.
/// Returns how many there were.
pub fn stop_marked(marker: &str, grace: std::time::Duration) -> usize {
    let found = marked_processes(marker);
    for &p in &found {
        // SAFETY: signalling processes that carry our marker (started by our exec children).
        unsafe { libc::kill(p, libc::SIGTERM) };
    }
    let t0 = std::time::Instant::now();
    while t0.elapsed() < grace && !marked_processes(marker).is_empty() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    for p in marked_processes(marker) {
        // SAFETY: as above.
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
    found.len()
}

/// Forks a child prepared by `setup`, keeping only descriptors 0-2 (standard input from
/// `/dev/null`) and `keep`, runs `hold` in it (which may `_exit` to end it without exec), then
/// execs `program` with `args` and this process's environment plus `marker` (an
/// [`exec_marker`]). Returns once the child has exec'd, ended, or failed to prepare or exec (that
/// error is returned, the child reaped).
///
/// # Safety
/// `hold` runs in a forked child of a multi-threaded process: it must make async-signal-safe calls
/// only, allocate nothing and take no lock.
pub unsafe fn spawn_held(
    setup: &ChildSetup,
    marker: &str,
    program: &Path,
    args: &[String],
    keep: &[RawFd],
    hold: impl Fn(),
) -> io::Result<Held> {
    // Everything that allocates happens here, before the fork.
    let path = cstring(program.as_os_str())?;
    let mut argv_c = vec![path.clone()];
    for a in args {
        argv_c.push(cstring(OsStr::new(a))?);
    }
    let mut envp_c = vec![cstring(OsStr::new(marker))?];
    for (k, v) in std::env::vars_os().filter(|(k, _)| k != EXEC_MARKER) {
        let mut kv = k.as_bytes().to_vec();
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        if let Ok(c) = CString::new(kv) {
            envp_c.push(c);
        }
    }
    let argv: Vec<*const libc::c_char> = argv_c
        .iter()
        .map(|c| c.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let envp: Vec<*const libc::c_char> = envp_c
        .iter()
        .map(|c| c.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let devnull = std::fs::File::open("/dev/null")?;
    let (err_r, err_w) = cloexec_pipe()?;
    let mut kept: Vec<RawFd> = keep
        .iter()
        .copied()
        .chain([err_w.as_raw_fd()])
        .filter(|&fd| fd > 2)
        .collect();
    kept.sort_unstable();
    kept.dedup();

    let pid = libc::fork();
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        let report = |e: i32| -> ! {
            let b = e.to_ne_bytes();
            libc::write(err_w.as_raw_fd(), b.as_ptr().cast(), b.len());
            libc::_exit(127)
        };
        if let Err(e) = setup.apply() {
            report(e.raw_os_error().unwrap_or(libc::EINVAL));
        }
        if libc::dup2(devnull.as_raw_fd(), 0) < 0 {
            report(*libc::__errno_location());
        }
        close_all_but(&kept);
        hold();
        libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr());
        report(*libc::__errno_location());
    }
    drop(err_w);
    drop(devnull);
    let mut held = Held { pid, status: None };
    let mut buf = [0u8; 4];
    let mut got = 0;
    while got < buf.len() {
        let n = libc::read(
            err_r.as_raw_fd(),
            buf[got..].as_mut_ptr().cast(),
            buf.len() - got,
        );
        if n > 0 {
            got += n as usize;
        } else if n == 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            break; // EOF: the exec happened (or the hold ended the child)
        }
    }
    if got == buf.len() {
        let _ = held.wait();
        return Err(io::Error::from_raw_os_error(i32::from_ne_bytes(buf)));
    }
    Ok(held)
}

fn cloexec_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: a valid out array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh descriptors we own.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Closes every descriptor from 3 up except `kept` (sorted, each above 2). Async-signal-safe.
unsafe fn close_all_but(kept: &[RawFd]) {
    let mut from: libc::c_uint = 3;
    for &k in kept {
        let k = k as libc::c_uint;
        if k > from {
            close_range(from, k - 1);
        }
        from = k + 1;
    }
    close_range(from, libc::c_uint::MAX);
}

unsafe fn close_range(first: libc::c_uint, last: libc::c_uint) {
    if libc::syscall(libc::SYS_close_range, first, last, 0 as libc::c_uint) == 0 {
        return;
    }
    // Kernels before 5.9: one close per possible descriptor.
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
    let top = (lim.rlim_cur.min(1 << 16) as libc::c_uint).min(last.saturating_add(1));
    for fd in first..top {
        libc::close(fd as libc::c_int);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::signal::Signal;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// One shared page: word 0 releases the held child, word 1 is where it writes its pid.
    struct Page(*mut libc::c_void);
    // SAFETY: the page is only accessed through atomics and stays mapped for the test's life.
    unsafe impl Send for Page {}
    // SAFETY: as for Send: `&Page` reaches only atomics, which any thread may use at once.
    unsafe impl Sync for Page {}
    impl Page {
        fn new() -> Page {
            // SAFETY: an anonymous shared mapping of one page.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    4096,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            assert_ne!(p, libc::MAP_FAILED);
            Page(p)
        }
        fn word(&self, i: usize) -> &AtomicU64 {
            // SAFETY: within the page, which lives as long as self.
            unsafe { &*(self.0 as *const AtomicU64).add(i) }
        }
    }
    impl Drop for Page {
        fn drop(&mut self) {
            // SAFETY: our mapping.
            unsafe { libc::munmap(self.0, 4096) };
        }
    }

    /// The cause of issue 32's start-up deadlock, checked where it lived: while it waits for its
    /// release, a held child holds no descriptor of the parent's but the ones it was given (before,
    /// it held every one, among them other threads' spawn pipes).
    #[test]
    fn a_held_child_holds_nothing_of_the_parents_while_it_waits() {
        let page = std::sync::Arc::new(Page::new());
        // Close-on-exec, as Command's error pipes are: the old hold kept them until its exec.
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let (keep_r, _keep_w) = nix::unistd::pipe().unwrap();
        let keep = keep_r.as_raw_fd();
        let p = page.clone();
        let spawner = std::thread::spawn(move || {
            let base = p.0 as usize;
            let setup = ChildSetup::new(Signal::SIGKILL);
            // SAFETY: the hold stores, loads and sleeps: async-signal-safe.
            let held = unsafe {
                spawn_held(
                    &setup,
                    &exec_marker(),
                    Path::new("/bin/true"),
                    &[],
                    &[keep],
                    move || {
                        let words = base as *const AtomicU64;
                        (*words.add(1)).store(libc::getpid() as u64, Ordering::Release);
                        while (*words).load(Ordering::Acquire) == 0 {
                            libc::usleep(1000);
                        }
                    },
                )
            };
            // Waited for here: the parent-death signal follows the thread that forked.
            held.map(|mut h| h.wait())
        });
        let t0 = std::time::Instant::now();
        let pid = loop {
            let pid = page.word(1).load(Ordering::Acquire);
            if pid != 0 {
                break pid;
            }
            assert!(t0.elapsed().as_secs() < 30, "the held child never started");
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        let fds: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        page.word(0).store(1, Ordering::Release);
        let status = spawner.join().unwrap().unwrap().unwrap();
        assert!(status.success(), "{status:?}");
        assert!(
            !fds.contains(&r.as_raw_fd()),
            "holds the parent's pipe: {fds:?}"
        );
        assert!(
            !fds.contains(&w.as_raw_fd()),
            "holds the parent's pipe: {fds:?}"
        );
        assert!(fds.contains(&keep), "the kept descriptor is gone: {fds:?}");
        // 0-2, the kept one and its own error pipe: nothing else.
        assert_eq!(fds.len(), 5, "{fds:?}");
    }

    #[test]
    fn a_program_that_cannot_be_run_is_an_error_and_the_child_is_reaped() {
        let setup = ChildSetup::new(Signal::SIGKILL);
        // SAFETY: the hold does nothing.
        let e = unsafe {
            spawn_held(
                &setup,
                &exec_marker(),
                Path::new("/nonexistent/prog"),
                &[],
                &[],
                || {},
            )
        }
        .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "{e}");
    }

    #[test]
    fn a_hold_that_ends_the_child_returns_without_exec() {
        let setup = ChildSetup::new(Signal::SIGKILL);
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let args = vec!["-c".to_string(), format!("touch {}", marker.display())];
        // SAFETY: _exit is async-signal-safe.
        let mut h = unsafe {
            spawn_held(
                &setup,
                &exec_marker(),
                Path::new("/bin/sh"),
                &args,
                &[],
                || libc::_exit(3),
            )
        }
        .unwrap();
        assert_eq!(h.wait().unwrap().code(), Some(3));
        assert!(!marker.exists(), "the program ran");
        // Arguments and the environment reach a program that does run.
        let path = std::env::var("PATH").unwrap_or_default();
        let args = vec![
            "-c".to_string(),
            format!("test \"$PATH\" = '{path}' && touch {}", marker.display()),
        ];
        // SAFETY: the hold does nothing.
        let mut h = unsafe {
            spawn_held(
                &setup,
                &exec_marker(),
                Path::new("/bin/sh"),
                &args,
                &[],
                || {},
            )
        }
        .unwrap();
        assert!(h.wait().unwrap().success());
        assert!(marker.exists());
    }
}
