//! What a run is handed from outside: wall clock, host facts, stop flag, terminal, the punctual
//! executable, and the system it changes. [`Env::real`] is this process on this machine;
//! [`Env::fake`] has fixed facts, changes nothing and captures what would be printed, so a
//! command's whole pipeline can be snapshot-tested with a canned outcome.

use crate::live::{Live, LiveSpec};
use punctual_load::{LoadKind, LoadReport, LoadSpec, Loads};
use punctual_result::{Failure, HostFacts};
use punctual_rt::host::StealMeter;
use punctual_rt::Privileges;
use std::any::Any;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// What a load supervisor returns when it stops: per instance, its kind, CPU and report.
pub type LoadReports = Vec<(LoadKind, Option<usize>, Option<LoadReport>)>;

/// Loads running for a measurement.
pub trait RunningLoads {
    /// Wait until every instance runs its body (or the timeout); how many did.
    fn wait_ready(&mut self, timeout: Duration, stop: &AtomicBool) -> usize;
    /// Stop and reap every instance; what each reported.
    fn stop(self: Box<Self>) -> LoadReports;
}

impl RunningLoads for Loads {
    fn wait_ready(&mut self, timeout: Duration, stop: &AtomicBool) -> usize {
        Loads::wait_ready(self, timeout, stop)
    }
    fn stop(self: Box<Self>) -> LoadReports {
        Loads::stop(*self)
    }
}

/// The parts of the machine a session changes or reads while it runs.
pub trait System: Send + Sync {
    fn privileges(&self) -> Privileges;
    /// `mlockall`, held until the returned guard drops.
    fn lock_memory(&self) -> Result<Box<dyn Any>, String>;
    /// Hold `/dev/cpu_dma_latency` at `us` until the returned guard drops.
    fn hold_dma_latency(&self, us: u32) -> Result<Box<dyn Any>, String>;
    /// Steal time per CPU from now on (`None`: the kernel does not report it).
    fn steal(&self) -> Option<StealMeter>;
    fn start_loads(&self, spec: &LoadSpec, exe: &Path) -> Result<Box<dyn RunningLoads>, Failure>;
}

/// This machine.
pub struct RealSystem;

impl System for RealSystem {
    fn privileges(&self) -> Privileges {
        Privileges::detect()
    }
    fn lock_memory(&self) -> Result<Box<dyn Any>, String> {
        punctual_rt::memlock::MlockGuard::lock_all()
            .map(|g| Box::new(g) as Box<dyn Any>)
            .map_err(|e| e.to_string())
    }
    fn hold_dma_latency(&self, us: u32) -> Result<Box<dyn Any>, String> {
        punctual_rt::dma::DmaLatencyGuard::request(us)
            .map(|g| Box::new(g) as Box<dyn Any>)
            .map_err(|e| e.to_string())
    }
    fn steal(&self) -> Option<StealMeter> {
        StealMeter::start()
    }
    fn start_loads(&self, spec: &LoadSpec, exe: &Path) -> Result<Box<dyn RunningLoads>, Failure> {
        // Loads start on the calling (main) thread: the parent-death signal follows the thread
        // that forked.
        Loads::start(spec, exe)
            .map(|l| Box::new(l) as Box<dyn RunningLoads>)
            .map_err(|e| Failure::system(e.to_string()))
    }
}

/// A machine that grants every privilege, changes nothing, reports no steal time, and whose loads
/// report fixed work (one unit in 1 ms of CPU per instance, pid 0).
pub struct FakeSystem;

/// The loads of [`FakeSystem`]: nothing runs; each instance reports fixed figures.
pub struct FakeLoads(Vec<(LoadKind, Option<usize>)>);

impl RunningLoads for FakeLoads {
    fn wait_ready(&mut self, _timeout: Duration, _stop: &AtomicBool) -> usize {
        self.0.len()
    }
    fn stop(self: Box<Self>) -> LoadReports {
        self.0
            .into_iter()
            .map(|(kind, cpu)| {
                let report = LoadReport {
                    kind: kind.name().into(),
                    pid: 0,
                    cpu,
                    ops: 1,
                    elapsed_ns: 1_000_000,
                    cpu_ns: Some(1_000_000),
                };
                (kind, cpu, Some(report))
            })
            .collect()
    }
}

impl System for FakeSystem {
    fn privileges(&self) -> Privileges {
        Privileges {
            euid: 0,
            cap_sys_nice: true,
            cap_ipc_lock: true,
            rlimit_rtprio: 99,
            rlimit_memlock: None,
            dma_latency_writable: true,
            realtime_refused: None,
        }
    }
    fn lock_memory(&self) -> Result<Box<dyn Any>, String> {
        Ok(Box::new(()))
    }
    fn hold_dma_latency(&self, _us: u32) -> Result<Box<dyn Any>, String> {
        Ok(Box::new(()))
    }
    fn steal(&self) -> Option<StealMeter> {
        None
    }
    fn start_loads(&self, spec: &LoadSpec, _exe: &Path) -> Result<Box<dyn RunningLoads>, Failure> {
        let mut instances = Vec::new();
        for item in &spec.items {
            for i in 0..item.count {
                instances.push((item.kind, item.cpu_for(i)));
            }
        }
        Ok(Box::new(FakeLoads(instances)))
    }
}

/// Where what the user reads goes.
pub enum Terminal {
    /// stdout and stderr of this process; live lines when stderr is a terminal.
    Real { live: bool },
    /// Kept for the test to read: (stdout, stderr).
    Captured(Mutex<(String, String)>),
}

/// Everything a run takes from outside.
pub struct Env {
    /// The command line, for the result document.
    pub command: Vec<String>,
    /// The punctual executable, for child processes (loads, wake clients, periodic processes).
    pub exe: PathBuf,
    pub system: Box<dyn System>,
    pub terminal: Terminal,
    /// Whether SIGINT/SIGTERM are this process's to catch (not in a fake environment).
    real: bool,
    stop: OnceLock<Arc<AtomicBool>>,
    interrupts: OnceLock<&'static punctual_rt::Interrupts>,
    host: OnceLock<HostFacts>,
    clock: Box<dyn Fn() -> String + Send + Sync>,
}

impl Env {
    /// This process on this machine. From the first use of the stop flag (every `drive` begins
    /// with it) SIGINT/SIGTERM set it, and a second one restores every journalled change and exits
    /// 130. The host is detected when first asked for.
    pub fn real() -> Env {
        use std::io::IsTerminal;
        Env {
            // A store URL on the command line may carry a password: documents never do.
            command: std::env::args()
                .map(|a| punctual_store::redact(&a))
                .collect(),
            exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("punctual")),
            system: Box::new(RealSystem),
            terminal: Terminal::Real {
                live: std::io::stderr().is_terminal(),
            },
            real: true,
            stop: OnceLock::new(),
            interrupts: OnceLock::new(),
            host: OnceLock::new(),
            clock: Box::new(punctual_result::now_rfc3339),
        }
    }

    /// Fixed facts (`fake_host`, the clock at 2026-01-01T00:00:00Z), [`FakeSystem`], captured
    /// output, no signal handling.
    pub fn fake(command: &[&str]) -> Env {
        Env {
            command: command.iter().map(|s| s.to_string()).collect(),
            exe: PathBuf::from("/usr/bin/punctual"),
            system: Box::new(FakeSystem),
            terminal: Terminal::Captured(Mutex::new(Default::default())),
            real: false,
            stop: OnceLock::new(),
            interrupts: OnceLock::new(),
            host: OnceLock::from(fake_host()),
            clock: Box::new(|| "2026-01-01T00:00:00Z".into()),
        }
    }

    /// Keep what would be printed for the caller to read ([`Env::captured`]) instead of printing
    /// it (tests of real measurements).
    pub fn capture(mut self) -> Env {
        self.terminal = Terminal::Captured(Mutex::new(Default::default()));
        self
    }

    /// Catch SIGINT/SIGTERM from now on (the binary calls this first thing): until a command asks
    /// for the stop flag, a signal restores every journalled change and exits 130 at once.
    pub fn catch_interrupts(&self) {
        if self.real {
            self.interrupts
                .get_or_init(punctual_rt::Interrupts::install);
        }
    }

    /// The stop flag loops poll; the first call arms it: from then a signal sets it (and a second
    /// one restores and exits at once).
    pub fn stop(&self) -> &Arc<AtomicBool> {
        self.stop.get_or_init(|| {
            if self.real {
                let i = self
                    .interrupts
                    .get_or_init(punctual_rt::Interrupts::install);
                i.arm();
                i.stop_flag()
            } else {
                Arc::new(AtomicBool::new(false))
            }
        })
    }

    /// A signal asked us to stop (a command setting the stop flag itself is not an interruption;
    /// in a fake environment, setting the flag is how a test interrupts).
    pub fn interrupted(&self) -> bool {
        if self.real {
            self.interrupts.get().is_some_and(|i| i.requested())
        } else {
            self.stop().load(Ordering::Relaxed)
        }
    }

    /// The wall clock, RFC 3339 in UTC.
    pub fn now(&self) -> String {
        (self.clock)()
    }

    pub fn host(&self) -> HostFacts {
        self.host.get_or_init(punctual_rt::host::detect).clone()
    }

    /// A new run id for a document ([`ResultDoc::run_id`]): random, or always the same one in a
    /// fake environment, so its documents stay comparable.
    pub fn run_id(&self) -> String {
        if self.real {
            punctual_result::ResultDoc::new_run_id()
        } else {
            format!("{:032x}", 1)
        }
    }

    /// Human output (tables) on stdout, or on stderr when `stdout_taken` (an export went there).
    pub fn show(&self, text: &str, stdout_taken: bool) {
        // Report text may quote what others wrote (a send error, a file's names): escaped, not cut.
        let text = &*punctual_time::text::display_message(text, usize::MAX);
        match &self.terminal {
            Terminal::Real { .. } => {
                if stdout_taken {
                    let _ = std::io::stderr().write_all(text.as_bytes());
                } else {
                    let mut out = std::io::stdout().lock();
                    let _ = out.write_all(text.as_bytes());
                    let _ = out.flush();
                }
            }
            Terminal::Captured(c) => {
                let mut c = c.lock().expect("capture lock");
                if stdout_taken {
                    c.1.push_str(text);
                } else {
                    c.0.push_str(text);
                }
            }
        }
    }

    /// A line on stderr: `punctual: <msg>`, wrapped to the width tables use.
    pub fn note(&self, msg: &str) {
        let msg = punctual_time::text::display_message(msg, punctual_time::text::MAX_MESSAGE_CHARS);
        let line = punctual_result::table::wrap(&format!("punctual: {msg}")) + "\n";
        match &self.terminal {
            Terminal::Real { .. } => {
                let _ = std::io::stderr().write_all(line.as_bytes());
            }
            Terminal::Captured(c) => c.lock().expect("capture lock").1.push_str(&line),
        }
    }

    /// What a fake environment captured: (stdout, stderr).
    pub fn captured(&self) -> (String, String) {
        match &self.terminal {
            Terminal::Captured(c) => c.lock().expect("capture lock").clone(),
            Terminal::Real { .. } => Default::default(),
        }
    }

    /// A live line for `label`, drawn only on a real terminal.
    pub fn live(&self, label: String, spec: LiveSpec) -> Live {
        match self.terminal {
            Terminal::Real { live: true } => Live::start(label, spec),
            _ => Live::idle(),
        }
    }
}

/// The host of [`Env::fake`].
pub fn fake_host() -> HostFacts {
    HostFacts {
        kernel: "6.12.0-test".into(),
        preempt: "dynamic: full".into(),
        realtime: false,
        cpus: 2,
        clocksource: "tsc".into(),
        virtualized: true,
        hz: Some(250),
        hostname: "testbox".into(),
        cpu_model: "Test CPU @ 2.0GHz".into(),
    }
}
