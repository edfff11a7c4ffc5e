//! Every child process punctual starts is prepared here, between `fork` and `exec`, in one way: it
//! dies with punctual, it does not inherit punctual's signal handling, descriptors or
//! `/dev/cpu_dma_latency` request, and it runs where, how and as whom it was asked to.
//!
//! [`ChildSetup`] is built in the parent (everything that allocates or reads files happens there);
//! [`ChildSetup::apply`] runs in the child and makes only async-signal-safe system calls, so it may
//! follow a `fork` of a multi-threaded process (as `Command::pre_exec` does). In order:
//!
//! 1. every signal back to its default disposition and (unless kept) an empty signal mask: a child waiting before
//!    its exec must not run punctual's SIGTERM handling (the parent-death signal would be caught
//!    and ignored);
//! 2. the parent-death signal (`PR_SET_PDEATHSIG`), then a check that the parent is still the
//!    process that forked (it may have died before the signal was armed);
//! 3. process group, CPU affinity, scheduling class, `RLIMIT_RTTIME`;
//! 4. descriptors registered with [`close_in_children`] are closed now (the cpu_dma_latency
//!    request, exec gates' write ends), every other descriptor above 2 is marked close-on-exec;
//! 5. identity: capability bounding set dropped, supplementary groups, gid, uid, every capability
//!    set cleared and `no_new_privs` set, as asked;
//! 6. after an identity change the parent-death signal again (the kernel clears it when the
//!    effective uid or gid changes), and the parent check again.
//!
//! The parent-death signal follows the *thread* that forked: fork from a thread that lives as long
//! as the child should.

use nix::sys::signal::Signal;
use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};

/// Descriptors no child may hold even before its exec.
const SLOTS: usize = 64;
static CLOSE_IN_CHILDREN: [AtomicI32; SLOTS] = [const { AtomicI32::new(-1) }; SLOTS];

/// A descriptor registered with [`close_in_children`]; unregistered on drop (drop it before closing
/// the descriptor).
#[must_use = "dropping the registration unregisters the descriptor at once"]
#[derive(Debug)]
pub struct CloseInChildren {
    slot: Option<usize>,
}

impl Drop for CloseInChildren {
    fn drop(&mut self) {
        if let Some(s) = self.slot {
            CLOSE_IN_CHILDREN[s].store(-1, Ordering::SeqCst);
        }
    }
}

/// Have every child prepared by [`ChildSetup::apply`] close `fd` at once (not only at exec): a
/// pre-forked child waiting for its release must not keep a cpu_dma_latency request or a pipe's
/// write end alive. When every slot is taken the descriptor is still close-on-exec; the
/// registration then does nothing.
pub fn close_in_children(fd: i32) -> CloseInChildren {
    for (i, s) in CLOSE_IN_CHILDREN.iter().enumerate() {
        if s.compare_exchange(-1, fd, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return CloseInChildren { slot: Some(i) };
        }
    }
    CloseInChildren { slot: None }
}

/// Who a child runs as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    /// The name it was looked up by (or the number, as written).
    pub user: String,
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups (the user's, from the group database).
    pub groups: Vec<u32>,
}

impl Credentials {
    /// Look a user up by name or number (`"nobody"`, `"65534"`) in the user database. A number
    /// must have an entry too: its group comes from there.
    pub fn lookup(user: &str) -> Result<Credentials, String> {
        use nix::unistd::{Gid, Uid, User};
        let found = match user.parse::<u32>() {
            Ok(n) => User::from_uid(Uid::from_raw(n)),
            Err(_) => User::from_name(user),
        }
        .map_err(|e| format!("looking up user '{user}': {e}"))?;
        let Some(u) = found else {
            return Err(format!(
                "user '{user}' does not exist on this machine (see /etc/passwd); give an existing user name or uid"
            ));
        };
        let groups = match std::ffi::CString::new(u.name.as_bytes()) {
            Ok(c) => nix::unistd::getgrouplist(&c, u.gid)
                .map(|g| g.into_iter().map(Gid::as_raw).collect())
                .unwrap_or_else(|_| vec![u.gid.as_raw()]),
            Err(_) => vec![u.gid.as_raw()],
        };
        Ok(Credentials {
            user: user.to_string(),
            uid: u.uid.as_raw(),
            gid: u.gid.as_raw(),
            groups,
        })
    }
}

/// How a child is prepared between fork and exec (see the module documentation).
#[derive(Clone)]
pub struct ChildSetup {
    parent: libc::pid_t,
    death_signal: libc::c_int,
    process_group: bool,
    keep_signal_mask: bool,
    cpus: Option<libc::cpu_set_t>,
    sched: Option<(libc::c_int, libc::c_int)>,
    rttime: Option<libc::rlimit>,
    close_now: Vec<i32>,
    credentials: Option<Credentials>,
    drop_caps: bool,
}

impl std::fmt::Debug for ChildSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildSetup")
            .field("parent", &self.parent)
            .field("death_signal", &self.death_signal)
            .field("process_group", &self.process_group)
            .field("keep_signal_mask", &self.keep_signal_mask)
            .field("pinned", &self.cpus.is_some())
            .field("sched", &self.sched)
            .field("rttime", &self.rttime.map(|r| (r.rlim_cur, r.rlim_max)))
            .field("close_now", &self.close_now)
            .field("credentials", &self.credentials)
            .field("drop_caps", &self.drop_caps)
            .finish()
    }
}

/// Linux capability interface, version 3 (two 32-bit words per set).
const CAP_VERSION_3: u32 = 0x2008_0522;
/// Above every capability the kernel knows (CAP_LAST_CAP is 40 on 6.x); PR_CAPBSET_DROP of an
/// unknown one fails with EINVAL, which is ignored.
const CAP_PROBE: libc::c_ulong = 64;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

impl ChildSetup {
    /// A child that gets `death_signal` when the forking thread dies (loads take SIGTERM so they can
    /// report; children that must never outlive punctual take SIGKILL).
    pub fn new(death_signal: Signal) -> ChildSetup {
        ChildSetup {
            // SAFETY: getpid has no preconditions.
            parent: unsafe { libc::getpid() },
            death_signal: death_signal as libc::c_int,
            process_group: false,
            keep_signal_mask: false,
            cpus: None,
            sched: None,
            rttime: None,
            close_now: Vec::new(),
            credentials: None,
            drop_caps: false,
        }
    }

    /// Lead a process group of its own (so a group kill reaches whatever it starts).
    pub fn process_group(mut self) -> Self {
        self.process_group = true;
        self
    }

    /// Keep the signal mask the forking thread has (a forked body that waits for a signal with
    /// `sigwaitinfo` needs it blocked from the start). Dispositions are still reset.
    pub fn keep_signal_mask(mut self) -> Self {
        self.keep_signal_mask = true;
        self
    }

    /// Pin to these CPUs (checked online by the caller). CPUs beyond the set's size are ignored.
    pub fn cpus(mut self, cpus: &[usize]) -> Self {
        // SAFETY: an all-zero cpu_set_t is the empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &c in cpus {
            if c < 8 * std::mem::size_of::<libc::cpu_set_t>() {
                // SAFETY: c is within the set.
                unsafe { libc::CPU_SET(c, &mut set) };
            }
        }
        self.cpus = Some(set);
        self
    }

    /// Scheduling class for the child.
    pub fn sched(mut self, params: crate::SchedParams) -> Self {
        let policy = match params.policy {
            crate::Policy::Fifo => libc::SCHED_FIFO,
            crate::Policy::Rr => libc::SCHED_RR,
            crate::Policy::Other => libc::SCHED_OTHER,
        };
        self.sched = Some((policy, params.priority as libc::c_int));
        self
    }

    /// `RLIMIT_RTTIME` for the child (microseconds of real-time CPU without blocking: SIGXCPU at
    /// `soft_us`, SIGKILL at `hard_us`), never above the limits this process has now.
    pub fn rttime(mut self, soft_us: u64, hard_us: u64) -> Self {
        let mut now = libc::rlimit {
            rlim_cur: libc::RLIM_INFINITY,
            rlim_max: libc::RLIM_INFINITY,
        };
        // SAFETY: reading our own limit into a valid struct.
        unsafe { libc::getrlimit(libc::RLIMIT_RTTIME, &mut now) };
        let hard = hard_us.min(now.rlim_max);
        self.rttime = Some(libc::rlimit {
            rlim_cur: soft_us.min(hard),
            rlim_max: hard,
        });
        self
    }

    /// Close `fd` in the child before anything else runs there (besides the registered ones).
    pub fn close_now(mut self, fd: i32) -> Self {
        self.close_now.push(fd);
        self
    }

    /// Switch to this user (groups, gid, uid) before exec.
    pub fn credentials(mut self, c: Credentials) -> Self {
        self.credentials = Some(c);
        self
    }

    /// Leave no capability: bounding set emptied, every set cleared, `no_new_privs` (so no
    /// set-user-id program gets any back).
    pub fn drop_caps(mut self) -> Self {
        self.drop_caps = true;
        self
    }

    /// Let `cmd` be prepared this way.
    pub fn install(self, cmd: &mut Command) {
        // SAFETY: apply only makes async-signal-safe calls and does not allocate.
        unsafe {
            cmd.pre_exec(move || self.apply());
        }
    }

    /// Prepare the calling process (a freshly forked child). An error leaves it half prepared: the
    /// caller must not exec then (`Command` reports the error from `spawn`).
    ///
    /// # Safety
    /// Only in a child between fork and exec (it changes process-wide state: signal dispositions,
    /// descriptors, identity). It makes async-signal-safe calls only and does not allocate.
    pub unsafe fn apply(&self) -> io::Result<()> {
        let os = || Err(io::Error::last_os_error());
        // 1. Signals.
        // The raw system call: glibc's wrapper refuses its reserved signals (32, 33), which an
        // ignored disposition would otherwise carry through exec. An all-zero kernel sigaction
        // is SIG_DFL with no flags and an empty mask, whatever the architecture's layout.
        let dfl = [0u64; 4];
        for sig in 1..65 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::syscall(
                    libc::SYS_rt_sigaction,
                    sig as libc::c_long,
                    dfl.as_ptr(),
                    std::ptr::null_mut::<u64>(),
                    8 as libc::c_long,
                );
            }
        }
        if !self.keep_signal_mask {
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        }
        // 2. Die with the parent.
        self.arm_death_signal()?;
        // 3. Place and class.
        if self.process_group && libc::setpgid(0, 0) != 0 {
            return os();
        }
        if let Some(set) = &self.cpus {
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) != 0 {
                return os();
            }
        }
        if let Some((policy, priority)) = self.sched {
            let p = libc::sched_param {
                sched_priority: priority,
            };
            if libc::sched_setscheduler(0, policy, &p) != 0 {
                return os();
            }
        }
        if let Some(r) = &self.rttime {
            if libc::setrlimit(libc::RLIMIT_RTTIME, r) != 0 {
                return os();
            }
        }
        // 4. Descriptors.
        for &fd in &self.close_now {
            libc::close(fd);
        }
        for s in &CLOSE_IN_CHILDREN {
            let fd = s.load(Ordering::SeqCst);
            if fd >= 0 {
                libc::close(fd);
            }
        }
        cloexec_from(3);
        // 5. Identity.
        if self.drop_caps {
            for cap in 0..CAP_PROBE {
                libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
            }
        }
        if let Some(c) = &self.credentials {
            if libc::setgroups(c.groups.len(), c.groups.as_ptr()) != 0
                || libc::setgid(c.gid) != 0
                || libc::setuid(c.uid) != 0
            {
                return os();
            }
        }
        if self.drop_caps {
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
                0,
                0,
                0,
            );
            let header = CapHeader {
                version: CAP_VERSION_3,
                pid: 0,
            };
            let data = [CapData {
                effective: 0,
                permitted: 0,
                inheritable: 0,
            }; 2];
            if libc::syscall(libc::SYS_capset, &header, data.as_ptr()) != 0 {
                return os();
            }
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return os();
            }
        }
        // 6. The kernel cleared the parent-death signal with the identity change.
        if self.credentials.is_some() || self.drop_caps {
            self.arm_death_signal()?;
        }
        Ok(())
    }

    unsafe fn arm_death_signal(&self) -> io::Result<()> {
        if libc::prctl(
            libc::PR_SET_PDEATHSIG,
            self.death_signal as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
        if libc::getppid() != self.parent {
            libc::_exit(0); // the parent died before the signal was armed
        }
        Ok(())
    }
}

/// Mark every descriptor from `first` up close-on-exec.
unsafe fn cloexec_from(first: u32) {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    if libc::syscall(
        libc::SYS_close_range,
        first as libc::c_uint,
        libc::c_uint::MAX,
        CLOSE_RANGE_CLOEXEC,
    ) == 0
    {
        return;
    }
    // Kernels before 5.11: one fcntl per possible descriptor.
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
    let top = lim.rlim_cur.min(1 << 16) as libc::c_int;
    for fd in first as libc::c_int..top {
        let flags = libc::fcntl(fd, libc::F_GETFD);
        if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
            libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Stdio;

    fn status_field(pid: u32, field: &str) -> Option<String> {
        let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        s.lines()
            .find(|l| l.starts_with(field))
            .map(|l| l[field.len()..].trim().to_string())
    }

    #[test]
    fn a_child_gets_default_signals_and_its_death_signal() {
        // SIGTERM ignored here, as a handler-holding parent would have it: the child must not be.
        // SAFETY: setting a disposition in this test process, restored below.
        let old = unsafe { libc::signal(libc::SIGUSR2, libc::SIG_IGN) };
        let mut cmd = Command::new("sleep");
        cmd.arg("30").stdin(Stdio::null());
        ChildSetup::new(Signal::SIGKILL).install(&mut cmd);
        let mut child = cmd.spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let ign = status_field(child.id(), "SigIgn:").unwrap();
        let blk = status_field(child.id(), "SigBlk:").unwrap();
        // SAFETY: restoring the disposition.
        unsafe { libc::signal(libc::SIGUSR2, old) };
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(u64::from_str_radix(&ign, 16).unwrap(), 0, "SigIgn {ign}");
        assert_eq!(u64::from_str_radix(&blk, 16).unwrap(), 0, "SigBlk {blk}");
    }

    #[test]
    fn registered_descriptors_are_closed_before_exec_and_others_at_exec() {
        use std::os::fd::AsRawFd;
        let (r, w) = nix::unistd::pipe().unwrap();
        // High numbers without close-on-exec, as a forgotten inherited descriptor would be.
        // SAFETY: duplicating our own descriptors.
        let (reg_fd, plain_fd) = unsafe {
            (
                libc::fcntl(w.as_raw_fd(), libc::F_DUPFD, 700),
                libc::fcntl(r.as_raw_fd(), libc::F_DUPFD, 700),
            )
        };
        assert!(reg_fd >= 700 && plain_fd >= 700);
        let reg = close_in_children(reg_fd);
        let setup = ChildSetup::new(Signal::SIGKILL);
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(format!(
                "test ! -e /proc/self/fd/{reg_fd} && test ! -e /proc/self/fd/{plain_fd}"
            ))
            .stdin(Stdio::null());
        // SAFETY: apply and fcntl are async-signal-safe; the errors carry no allocation.
        unsafe {
            cmd.pre_exec(move || {
                setup.apply()?;
                if libc::fcntl(reg_fd, libc::F_GETFD) != -1 {
                    return Err(io::Error::from_raw_os_error(libc::EEXIST));
                }
                if libc::fcntl(plain_fd, libc::F_GETFD) & libc::FD_CLOEXEC == 0 {
                    return Err(io::Error::from_raw_os_error(libc::ENOTSUP));
                }
                Ok(())
            });
        }
        let st = cmd.status();
        drop(reg);
        // SAFETY: closing our duplicates.
        unsafe {
            libc::close(reg_fd);
            libc::close(plain_fd);
        }
        let st =
            st.expect("the registered fd is closed and the other is close-on-exec in the child");
        assert!(st.success(), "a descriptor survived the exec");
    }

    #[test]
    fn an_unknown_user_is_refused_and_nobody_is_found() {
        let e = Credentials::lookup("no-such-user-punctual").unwrap_err();
        assert!(e.contains("does not exist"), "{e}");
        match Credentials::lookup("nobody") {
            Ok(c) => {
                assert_eq!(c.uid, 65534);
                assert_eq!(Credentials::lookup("65534").unwrap().uid, 65534);
            }
            Err(e) => punctual_testkit::skip(
                "an_unknown_user_is_refused_and_nobody_is_found",
                &format!("no user nobody here: {e}"),
            ),
        }
    }

    #[test]
    fn a_child_runs_as_the_user_without_capabilities() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            punctual_testkit::skip(
                "a_child_runs_as_the_user_without_capabilities",
                "needs root to change users",
            );
            return;
        }
        let Ok(nobody) = Credentials::lookup("nobody") else {
            punctual_testkit::skip(
                "a_child_runs_as_the_user_without_capabilities",
                "no user nobody",
            );
            return;
        };
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg("grep -E '^(Uid|Gid|CapEff|CapPrm|CapBnd|NoNewPrivs):' /proc/self/status")
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        ChildSetup::new(Signal::SIGKILL)
            .credentials(nobody)
            .drop_caps()
            .install(&mut cmd);
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let field = |f: &str| {
            text.lines()
                .find(|l| l.starts_with(f))
                .map(|l| {
                    l[f.len()..]
                        .split_whitespace()
                        .next()
                        .unwrap_or("")
                        .to_string()
                })
                .unwrap_or_default()
        };
        assert_eq!(field("Uid:"), "65534", "{text}");
        assert_eq!(field("CapEff:"), "0000000000000000", "{text}");
        assert_eq!(field("CapPrm:"), "0000000000000000", "{text}");
        assert_eq!(field("CapBnd:"), "0000000000000000", "{text}");
        assert_eq!(field("NoNewPrivs:"), "1", "{text}");

        // drop_caps alone: still uid 0, but with nothing to use it for.
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg("grep -E '^(Uid|CapEff|CapPrm):' /proc/self/status")
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        ChildSetup::new(Signal::SIGKILL)
            .drop_caps()
            .install(&mut cmd);
        let text = String::from_utf8_lossy(&cmd.output().unwrap().stdout).to_string();
        assert!(text.contains("CapEff:\t0000000000000000"), "{text}");
        assert!(text.contains("CapPrm:\t0000000000000000"), "{text}");
    }

    #[test]
    fn a_child_dies_when_the_forking_thread_dies_even_after_a_user_change() {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let creds = if root {
            Credentials::lookup("nobody").ok()
        } else {
            None
        };
        let pid = std::thread::spawn(move || {
            let mut cmd = Command::new("sleep");
            cmd.arg("30").stdin(Stdio::null());
            let mut s = ChildSetup::new(Signal::SIGKILL);
            if let Some(c) = creds {
                s = s.credentials(c);
            }
            s.install(&mut cmd);
            let child = cmd.spawn().unwrap();
            let pid = child.id();
            std::mem::forget(child); // reaped below by pid
            pid
        })
        .join()
        .unwrap();
        // The forking thread is gone: the child must be killed (and is our zombie until reaped).
        let mut status = 0;
        let t0 = std::time::Instant::now();
        let r = loop {
            // SAFETY: waiting for our own child by pid.
            let r = unsafe { libc::waitpid(pid as i32, &mut status, libc::WNOHANG) };
            if r != 0 || t0.elapsed().as_secs() >= 5 {
                break r;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        if r == 0 {
            // SAFETY: our own unreaped child.
            unsafe {
                libc::kill(pid as i32, libc::SIGKILL);
                libc::waitpid(pid as i32, &mut status, 0);
            }
            panic!("the child outlived the thread that forked it");
        }
        assert_eq!(r, pid as i32);
        assert!(libc::WIFSIGNALED(status), "status {status:#x}");
        assert_eq!(libc::WTERMSIG(status), libc::SIGKILL);
    }
}
