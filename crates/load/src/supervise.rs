//! Starting, pinning and reaping load processes.

use crate::{LoadKind, LoadReport, LoadSpec};
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The hidden subcommand of the punctual binary that runs a load body.
pub const HIDDEN_SUBCOMMAND: &str = "__load";

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("starting load '{kind}': {source}")]
    Spawn {
        kind: &'static str,
        source: std::io::Error,
    },
    #[error("creating the scratch directory for io loads: {0}")]
    Scratch(std::io::Error),
    #[error("{0}")]
    Cpu(#[from] punctual_rt::RtError),
    #[error("load '{kind}' needs {tool}, which cannot be started here; install it (apt-get install -y {package})")]
    Missing {
        kind: &'static str,
        tool: &'static str,
        package: &'static str,
    },
    #[error("load scheduling: {0}")]
    Sched(punctual_rt::RtError),
}

/// How load instances are started, beyond what the spec says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StartOptions {
    /// Scheduling class of every instance (default: inherited, normally SCHED_OTHER). Etsion's sort
    /// copies and CPU-bound processes share the SCHED_RR queue with the measured processes, so the
    /// RR timeslice decides how long each runs.
    pub sched: Option<punctual_rt::SchedParams>,
}

struct Instance {
    kind: LoadKind,
    cpu: Option<usize>,
    child: Child,
}

/// Running loads. Stop them with [`Loads::stop`] to get their reports; dropping also reaps them.
pub struct Loads {
    instances: Vec<Instance>,
    scratch: Option<tempfile::TempDir>,
}

impl Loads {
    /// No load.
    pub fn none() -> Self {
        Loads {
            instances: Vec::new(),
            scratch: None,
        }
    }

    /// Start every instance of `spec` by re-executing `exe` (the punctual binary).
    ///
    /// Call this from the thread that lives for the whole run (the main thread): the kernel sends the
    /// parent-death signal when the *thread* that forked a child exits.
    pub fn start(spec: &LoadSpec, exe: &Path) -> Result<Self, LoadError> {
        Self::start_with(spec, exe, &StartOptions::default())
    }

    /// [`Loads::start`] with a scheduling class for every instance.
    pub fn start_with(spec: &LoadSpec, exe: &Path, opts: &StartOptions) -> Result<Self, LoadError> {
        let mut loads = Loads::none();
        for item in &spec.items {
            if let Some(c) = &item.cpus {
                punctual_rt::affinity::check_online(c)?;
            }
        }
        if let Some(p) = opts.sched {
            p.validate().map_err(LoadError::Sched)?;
        }
        if spec.items.iter().any(|i| i.kind == LoadKind::Build)
            && !crate::body::build::compiler_available()
        {
            return Err(LoadError::Missing {
                kind: "build",
                tool: crate::body::build::COMPILER,
                package: "gcc",
            });
        }
        if spec.items.iter().any(|i| i.kind.needs_scratch()) {
            loads.scratch = Some(
                tempfile::Builder::new()
                    .prefix("punctual-load-")
                    .tempdir()
                    .map_err(LoadError::Scratch)?,
            );
        }
        for item in &spec.items {
            for i in 0..item.count {
                let cpu = item.cpu_for(i);
                let mut cmd = Command::new(exe);
                cmd.arg(HIDDEN_SUBCOMMAND).arg(item.kind.name());
                if let Some(c) = cpu {
                    cmd.arg("--cpu").arg(c.to_string());
                }
                if let Some(d) = &loads.scratch {
                    cmd.arg("--dir").arg(d.path());
                }
                cmd.stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::inherit());
                // Own process group (a terminal's Ctrl-C reaches punctual, which then stops the loads in
                // order), and SIGTERM if punctual dies, so the body cleans up, reports and exits.
                let mut setup =
                    punctual_rt::child::ChildSetup::new(nix::sys::signal::Signal::SIGTERM)
                        .process_group();
                if let Some(c) = cpu {
                    setup = setup.cpus(&[c]);
                }
                if let Some(p) = opts.sched {
                    setup = setup.sched(p);
                }
                setup.install(&mut cmd);
                let child = cmd.spawn().map_err(|source| LoadError::Spawn {
                    kind: item.kind.name(),
                    source,
                })?;
                loads.instances.push(Instance {
                    kind: item.kind,
                    cpu,
                    child,
                });
            }
        }
        Ok(loads)
    }

    /// Wait until every instance has said it is working (it handles SIGTERM from then on, so it will
    /// report), until `timeout`, or until `stop` is set (a signal: the wait looks every 50 ms).
    /// Returns how many did. Measurements that compare loads start their window after this, not
    /// while the instances are still starting.
    pub fn wait_ready(&mut self, timeout: Duration, stop: &AtomicBool) -> usize {
        let deadline = Instant::now() + timeout;
        let mut ready = 0;
        for inst in &mut self.instances {
            let Some(out) = inst.child.stdout.as_mut() else {
                continue;
            };
            // Read the first line byte by byte, so nothing of the later report is consumed.
            let mut line = Vec::new();
            let fd = std::os::fd::AsRawFd::as_raw_fd(out);
            loop {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let left = deadline
                    .saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(50));
                if left.is_zero() {
                    break;
                }
                let mut pfd = libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd.
                let n = unsafe {
                    libc::poll(&mut pfd, 1, left.as_millis().min(i32::MAX as u128) as i32)
                };
                if n < 0
                    && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
                {
                    break;
                }
                if n <= 0 {
                    continue; // a slice of the wait passed: look at stop and the deadline again
                }
                let mut b = [0u8; 1];
                match out.read(&mut b) {
                    Ok(1) if b[0] == b'\n' => break,
                    Ok(1) => line.push(b[0]),
                    _ => break,
                }
            }
            if line == crate::READY_LINE.as_bytes() {
                ready += 1;
            }
        }
        ready
    }

    pub fn pids(&self) -> Vec<u32> {
        self.instances.iter().map(|i| i.child.id()).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.instances.is_empty()
    }

    /// Stop every instance (SIGTERM, then SIGKILL to its whole process group after 2 s), reap it, and
    /// collect its report.
    /// An instance that had to be killed, or died early, has no report.
    pub fn stop(mut self) -> Vec<(LoadKind, Option<usize>, Option<LoadReport>)> {
        self.stop_all()
    }

    fn stop_all(&mut self) -> Vec<(LoadKind, Option<usize>, Option<LoadReport>)> {
        for inst in &self.instances {
            // Our own child, by pid, still unreaped: the pid cannot have been reused.
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(inst.child.id() as i32),
                nix::sys::signal::SIGTERM,
            );
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut out = Vec::new();
        for mut inst in self.instances.drain(..) {
            let mut exited = false;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = inst.child.try_wait() {
                    exited = true;
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            if !exited {
                // The instance leads its own group; anything it started (compilers) is in it too.
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(inst.child.id() as i32),
                    nix::sys::signal::SIGKILL,
                );
                let _ = inst.child.kill();
                let _ = inst.child.wait();
            }
            let mut text = String::new();
            if let Some(mut so) = inst.child.stdout.take() {
                let _ = so.read_to_string(&mut text);
            }
            let report = text
                .lines()
                .rev()
                .find_map(|l| serde_json::from_str::<LoadReport>(l).ok());
            out.push((inst.kind, inst.cpu, report));
        }
        out
    }
}

impl Drop for Loads {
    fn drop(&mut self) {
        self.stop_all();
    }
}
