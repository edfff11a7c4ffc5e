//! `exec`: start a program (argv, never a shell) as close to the instant as possible.
//!
//! A preparer thread forks the next child ahead of time; the child waits on a gate pipe after fork,
//! before exec, holding no descriptor but the gate, its standard three and its own error pipe
//! ([`punctual_rt::held`]: a held child that kept another thread's spawn pipe blocked that spawn
//! until its release, the start-up deadlock of issue 32). At the release the dispatcher writes one byte to the gate: one child
//! wakes, stamps the clock into a shared page, and execs. The preparer then reads the stamp and records
//! the child's start latency (release instant to child running) separately from the dispatcher's own
//! lateness and forks the next; a reaper thread collects finished children. Every child is prepared
//! by `punctual_rt::child`: default signal handling, SIGKILL when punctual dies (also while it still
//! waits for its release), no gate write end and no cpu_dma_latency request, every other descriptor
//! closed at exec, the watchdog's RLIMIT_RTTIME, the action's `priority` (FIFO), `user` and
//! `drop_caps`. A child that dies of RLIMIT_RTTIME (SIGXCPU, or SIGKILL at the hard limit) raises
//! the watchdog's [`Alarm`]. Children still running when the run ends are stopped (SIGTERM, then
//! SIGKILL).

use super::{ActionImpl, ActionReport};
use crate::engine::Fired;
use crate::watchdog::Alarm;
use punctual_rt::child::{close_in_children, ChildSetup, CloseInChildren, Credentials};
use punctual_rt::held::{spawn_held, Held};
use punctual_stats::Recorder;
use punctual_time::clock::read_clock;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A page shared with the children (MAP_SHARED | MAP_ANONYMOUS, created before any fork).
struct Stamp(*mut AtomicU64);
// SAFETY: the page is only accessed through atomics, and lives until the Stamp is dropped.
unsafe impl Send for Stamp {}
// SAFETY: as for Send: `&Stamp` gives access to atomics only, which any thread may use.
unsafe impl Sync for Stamp {}

impl Stamp {
    fn new() -> std::io::Result<Stamp> {
        // SAFETY: anonymous shared mapping of one page.
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
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Stamp(p as *mut AtomicU64))
    }
    fn get(&self) -> &AtomicU64 {
        // SAFETY: valid for the life of self.
        unsafe { &*self.0 }
    }
}

impl Drop for Stamp {
    fn drop(&mut self) {
        // SAFETY: unmapping our mapping.
        unsafe { libc::munmap(self.0 as *mut libc::c_void, 4096) };
    }
}

struct Shared {
    start_latency: Mutex<Recorder>,
    spawn_errors: AtomicU64,
    started: AtomicU64,
    killed_at_end: AtomicU64,
    first_error: Mutex<Option<String>>,
    done: AtomicBool,
}

/// How the children of one exec action are started.
#[derive(Clone, Debug, Default)]
pub struct ExecOptions {
    /// The action's name, for messages.
    pub name: String,
    /// SCHED_FIFO priority of the children (`None`: the normal class).
    pub priority: Option<u32>,
    /// Who the children run as.
    pub credentials: Option<Credentials>,
    /// Leave the children no capability.
    pub drop_caps: bool,
    /// RLIMIT_RTTIME for every child, microseconds (soft, hard): the watchdog's limits.
    pub rttime: Option<(u64, u64)>,
    /// Raised when a child dies of RLIMIT_RTTIME.
    pub alarm: Alarm,
}

impl ExecOptions {
    /// The child preparation these options ask for (the gate's write end is added per action).
    pub fn setup(&self) -> ChildSetup {
        let mut s = ChildSetup::new(nix::sys::signal::Signal::SIGKILL);
        if let Some(p) = self.priority {
            s = s.sched(punctual_rt::SchedParams {
                policy: punctual_rt::Policy::Fifo,
                priority: p,
            });
        }
        if let Some((soft, hard)) = self.rttime {
            s = s.rttime(soft, hard);
        }
        if let Some(c) = &self.credentials {
            s = s.credentials(c.clone());
        }
        if self.drop_caps {
            s = s.drop_caps();
        }
        s
    }
}

/// Why a child's death is the watchdog's business: it died of RLIMIT_RTTIME (SIGXCPU at the soft
/// limit; SIGKILL at the hard one, when it ran at a real-time priority under the limit).
fn rttime_death(status: std::process::ExitStatus, opts: &ExecOptions) -> Option<&'static str> {
    match status.signal()? {
        libc::SIGXCPU => Some("SIGXCPU (RLIMIT_RTTIME's soft limit)"),
        libc::SIGKILL if opts.priority.is_some() && opts.rttime.is_some() => {
            Some("SIGKILL (RLIMIT_RTTIME's hard limit, or someone else)")
        }
        _ => None,
    }
}

pub struct Exec {
    gate: Option<OwnedFd>,
    /// Every child closes the gate's write end at once, so EOF reaches waiting children when the
    /// action stops (or punctual dies).
    gate_registered: Option<CloseInChildren>,
    targets: rtrb::Producer<u64>,
    shared: Arc<Shared>,
    preparer: Option<std::thread::JoinHandle<()>>,
    fired: u64,
    stop_word: StopWord,
}

/// The second word of the shared page: set when the run ends, so waiting children exit.
struct StopWord(usize);

impl StopWord {
    fn store(&self, v: u64, o: Ordering) {
        // SAFETY: points into the shared page, which the preparer thread keeps mapped until it ends;
        // the store happens before the preparer is joined.
        unsafe { (*(self.0 as *const AtomicU64)).store(v, o) }
    }
}

/// Find the program the way execvp would, before the run, so a typo is a usage error.
pub fn resolve(program: &str) -> Result<PathBuf, String> {
    let is_exec = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        p.is_file()
            && p.metadata()
                .map(|m| m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
    };
    if program.contains('/') {
        let p = PathBuf::from(program);
        return if is_exec(&p) {
            Ok(p)
        } else {
            Err(format!(
                "exec program {program} does not exist or is not executable"
            ))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    for dir in std::env::split_paths(&path) {
        let p = dir.join(program);
        if is_exec(&p) {
            return Ok(p);
        }
    }
    Err(format!(
        "exec program '{program}' is not in PATH; give its full path"
    ))
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: valid out array; both ends close on exec (the child reads its end before exec).
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fresh descriptors we own.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The reaper thread: collects finished children every 10 ms until the action stops, and raises
/// the alarm for a child that died of RLIMIT_RTTIME. `shown` names the program in the alarm.
fn spawn_reaper(
    sh: Arc<Shared>,
    children: Arc<Mutex<Vec<Held>>>,
    opts: ExecOptions,
    shown: String,
) -> Result<std::thread::JoinHandle<()>, String> {
    std::thread::Builder::new()
        .name("punctual-reap".into())
        .spawn(move || {
            while !sh.done.load(Ordering::Acquire) {
                children.lock().unwrap().retain_mut(|c| match c.try_wait() {
                    Ok(Some(st)) => {
                        if let Some(why) = rttime_death(st, &opts) {
                            opts.alarm.raise(format!(
                                "exec action '{}': child {} ({}) died of {why}: it ran at a real-time priority without blocking",
                                opts.name,
                                c.id(),
                                shown,
                            ));
                        }
                        false
                    }
                    _ => true,
                });
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        })
        .map_err(|e| format!("exec: starting the reaper thread: {e}"))
}

/// The preparer thread's state: it forks each child ahead of its release, records how late the
/// child started, and at the end stops what still runs.
struct Preparer {
    program: PathBuf,
    /// The environment entry every child of this action carries (and its descendants).
    marker: String,
    args: Vec<String>,
    setup: ChildSetup,
    /// The gate's read end, which every child waits on.
    gate_r: OwnedFd,
    stamp: Stamp,
    /// Release instants, in firing order, from the dispatcher.
    rx: rtrb::Consumer<u64>,
    sh: Arc<Shared>,
    children: Arc<Mutex<Vec<Held>>>,
    reaper: std::thread::JoinHandle<()>,
}

impl Preparer {
    fn run(mut self) {
        while !self.sh.done.load(Ordering::Acquire) {
            self.stamp.get().store(0, Ordering::Release);
            // Blocks until the child is released and has exec'd (or failed to).
            let r = self.spawn_gated();
            let started = self.stamp.get().load(Ordering::Acquire);
            self.count_spawn(r, started);
        }
        let Preparer {
            reaper,
            children,
            sh,
            gate_r,
            marker,
            ..
        } = self;
        let _ = reaper.join();
        // The run is over: stop what still runs.
        let mut children = std::mem::take(&mut *children.lock().unwrap());
        stop_children(&mut children, &sh, &marker);
        drop(gate_r);
    }

    /// The next child: prepared by `setup`, then held between fork and exec until its release.
    fn spawn_gated(&self) -> std::io::Result<Held> {
        let gate = self.gate_r.as_raw_fd();
        let stamp_ptr = self.stamp.0 as usize;
        let stop_ptr = self.stamp.0 as usize + 8;
        // SAFETY: wait_at_gate makes only async-signal-safe calls.
        unsafe {
            spawn_held(
                &self.setup,
                &self.marker,
                &self.program,
                &self.args,
                &[gate],
                || wait_at_gate(gate, stop_ptr, stamp_ptr),
            )
        }
    }

    /// Counts a spawn: the start latency of a released child (against its release instant), or
    /// the error of one that could not start.
    fn count_spawn(&mut self, r: std::io::Result<Held>, started: u64) {
        let sh = &self.sh;
        match r {
            Ok(child) => {
                if started != 0 {
                    if let Ok(target) = self.rx.pop() {
                        sh.start_latency
                            .lock()
                            .unwrap()
                            .record(started.saturating_sub(target));
                    }
                    sh.started.fetch_add(1, Ordering::Relaxed);
                }
                self.children.lock().unwrap().push(child);
            }
            Err(e) => {
                if started != 0 {
                    let _ = self.rx.pop();
                }
                sh.spawn_errors.fetch_add(1, Ordering::Relaxed);
                sh.first_error
                    .lock()
                    .unwrap()
                    .get_or_insert_with(|| e.to_string());
                if !sh.done.load(Ordering::Acquire) {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            }
        }
    }
}

/// In the child, between fork and exec: waits for the release byte on the gate, looking every
/// 50 ms whether the run has ended (EOF comes only once every copy of the write end is closed, and
/// a child forked by other code of this process holds one until its exec), then stamps the
/// time into the shared page. Exits the child if the run ends first. Async-signal-safe calls only.
///
/// # Safety
/// Only in a forked child; `stop_ptr` and `stamp_ptr` point at atomics in the shared page.
unsafe fn wait_at_gate(gate: RawFd, stop_ptr: usize, stamp_ptr: usize) {
    let mut b = 0u8;
    loop {
        if (*(stop_ptr as *const AtomicU64)).load(Ordering::Acquire) != 0 {
            libc::_exit(0); // the run ended before this child was needed
        }
        let mut pfd = libc::pollfd {
            fd: gate,
            events: libc::POLLIN,
            revents: 0,
        };
        if libc::poll(&mut pfd, 1, 50) <= 0 {
            continue;
        }
        let n = libc::read(gate, &mut b as *mut u8 as *mut libc::c_void, 1);
        if n == 1 {
            break;
        }
        if n == 0 {
            libc::_exit(0);
        }
    }
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    let now = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
    (*(stamp_ptr as *const AtomicU64)).store(now, Ordering::Release);
}

/// At the end of the run: children still running get 200 ms to end, then SIGTERM and 500 ms,
/// then SIGKILL.
fn stop_children(children: &mut Vec<Held>, sh: &Shared, marker: &str) {
    let t0 = std::time::Instant::now();
    while !children.is_empty() && t0.elapsed() < std::time::Duration::from_millis(200) {
        children.retain_mut(|c| !matches!(c.try_wait(), Ok(Some(_))));
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    for c in children.iter_mut() {
        sh.killed_at_end.fetch_add(1, Ordering::Relaxed);
        let _ = c.signal(libc::SIGTERM);
    }
    let t0 = std::time::Instant::now();
    while !children.is_empty() && t0.elapsed() < std::time::Duration::from_millis(500) {
        children.retain_mut(|c| !matches!(c.try_wait(), Ok(Some(_))));
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    for c in children.iter_mut() {
        let _ = c.kill();
        let _ = c.wait();
    }
    // What the children left behind (a daemon that forked away and reparented to init) carries
    // the run's marker in its environment.
    let left = punctual_rt::held::stop_marked(marker, std::time::Duration::from_millis(300));
    sh.killed_at_end.fetch_add(left as u64, Ordering::Relaxed);
}

impl Exec {
    pub fn prepare(argv: &[String], opts: ExecOptions) -> Result<Exec, String> {
        let program = resolve(&argv[0])?;
        let (gate_r, gate_w) = pipe().map_err(|e| format!("exec: creating the gate: {e}"))?;
        // SAFETY: the write end must never block the dispatcher.
        unsafe { libc::fcntl(gate_w.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
        let gate_registered = close_in_children(gate_w.as_raw_fd());
        let setup = opts.setup().close_now(gate_w.as_raw_fd());
        let stamp = Stamp::new().map_err(|e| format!("exec: {e}"))?;
        let stop_word = StopWord(stamp.0 as usize + 8);
        let (tx, rx) = rtrb::RingBuffer::<u64>::new(65_536);
        let shared = Arc::new(Shared {
            start_latency: Mutex::new(Recorder::new()),
            spawn_errors: AtomicU64::new(0),
            started: AtomicU64::new(0),
            killed_at_end: AtomicU64::new(0),
            first_error: Mutex::new(None),
            done: AtomicBool::new(false),
        });
        let args: Vec<String> = argv[1..].to_vec();
        let children: Arc<Mutex<Vec<Held>>> = Arc::default();
        let shown = program.display().to_string();
        let reaper = spawn_reaper(shared.clone(), children.clone(), opts, shown)?;
        let preparer = Preparer {
            program,
            marker: punctual_rt::held::exec_marker(),
            args,
            setup,
            gate_r,
            stamp,
            rx,
            sh: shared.clone(),
            children,
            reaper,
        };
        let preparer = std::thread::Builder::new()
            .name("punctual-exec".into())
            .spawn(move || preparer.run())
            .map_err(|e| {
                shared.done.store(true, Ordering::Release); // lets the reaper end
                format!("exec: starting the preparer thread: {e}")
            })?;
        Ok(Exec {
            gate: Some(gate_w),
            gate_registered: Some(gate_registered),
            targets: tx,
            shared,
            preparer: Some(preparer),
            fired: 0,
            stop_word,
        })
    }

    fn stop(&mut self) {
        self.shared.done.store(true, Ordering::Release);
        self.stop_word.store(1, Ordering::Release);
        // Closing the write end lets a waiting child see EOF and exit without exec (unregistered
        // first: a later child must not close whatever reuses the number).
        self.gate_registered = None;
        self.gate = None;
        if let Some(h) = self.preparer.take() {
            let _ = h.join();
        }
    }
}

impl ActionImpl for Exec {
    #[inline]
    fn fire(&mut self, target: u64, _seq: u64, _data: &[u8]) -> Fired {
        let _ = self.targets.push(target);
        let b = 1u8;
        let Some(gate) = &self.gate else {
            return Fired {
                error: true,
                previous: None,
            };
        };
        // SAFETY: writing one byte to our non-blocking pipe.
        let n = unsafe { libc::write(gate.as_raw_fd(), &b as *const u8 as *const libc::c_void, 1) };
        self.fired += 1;
        Fired {
            error: n != 1,
            previous: None,
        }
    }

    fn report(mut self: Box<Self>) -> ActionReport {
        // Let the last released child stamp its start before stopping the preparer.
        let t0 = read_clock(libc::CLOCK_MONOTONIC);
        while self.shared.started.load(Ordering::Relaxed)
            + self.shared.spawn_errors.load(Ordering::Relaxed)
            < self.fired
            && read_clock(libc::CLOCK_MONOTONIC) - t0 < 500_000_000
        {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        self.stop();
        let rec = std::mem::take(&mut *self.shared.start_latency.lock().unwrap());
        let mut extra = vec![
            (
                "started".to_string(),
                self.shared.started.load(Ordering::Relaxed).into(),
            ),
            (
                "spawn_errors".to_string(),
                self.shared.spawn_errors.load(Ordering::Relaxed).into(),
            ),
            (
                "killed_at_end".to_string(),
                self.shared.killed_at_end.load(Ordering::Relaxed).into(),
            ),
        ];
        if let Some(e) = self.shared.first_error.lock().unwrap().take() {
            extra.push(("first_spawn_error".into(), e.into()));
        }
        ActionReport {
            start_latency: Some(rec),
            extra,
        }
    }
}

impl Drop for Exec {
    fn drop(&mut self) {
        if self.preparer.is_some() {
            self.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_released_child_runs_and_its_start_latency_is_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("ran");
        let argv = vec![
            "/bin/sh".to_string(),
            "-c".into(),
            format!("echo x >> {}", out.display()),
        ];
        let mut e = Exec::prepare(&argv, ExecOptions::default()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50)); // the child is forked and waiting
        assert!(!out.exists(), "nothing runs before the release");
        for k in 0..3 {
            let t = read_clock(libc::CLOCK_MONOTONIC);
            assert!(!e.fire(t, k, &[]).error);
            std::thread::sleep(std::time::Duration::from_millis(60));
        }
        // Children still running when the action reports are stopped; let them finish first.
        let t0 = std::time::Instant::now();
        while std::fs::read_to_string(&out)
            .map(|s| s.lines().count())
            .unwrap_or(0)
            < 3
            && t0.elapsed().as_secs() < 5
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let r = Box::new(e).report();
        let rec = r.start_latency.unwrap();
        assert_eq!(rec.count(), 3);
        assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 3);
        assert_eq!(r.extra[0].1, 3);
    }

    #[test]
    fn a_missing_program_is_refused_before_the_run() {
        assert!(
            Exec::prepare(&["/nonexistent/prog".to_string()], ExecOptions::default())
                .err()
                .unwrap()
                .contains("does not exist")
        );
        assert!(resolve("definitely-not-a-program-xyz")
            .unwrap_err()
            .contains("not in PATH"));
        assert!(resolve("true").is_ok());
    }
}
