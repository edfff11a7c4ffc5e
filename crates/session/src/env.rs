//! What a run is handed from outside: wall clock, host facts, stop flag, terminal, the punctual
//! executable, and the system it changes. [`Env::real`] is this process on this machine;
//! [`Env::fake`] has fixed facts, changes nothing and captures what would be printed, so a
//! command's whole pipeline can be snapshot-tested with a canned outcome.

use crate::live::Live;
use punctual_measure::{fake_host, FakeSystem, LiveSpec, RealSystem, System};
use punctual_result::HostFacts;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

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

    /// A new run id for a document ([`ResultDoc::run_id`](punctual_result::ResultDoc::run_id)): random, or always the same one in a
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
