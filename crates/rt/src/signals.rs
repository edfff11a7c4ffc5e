//! SIGINT/SIGTERM handling. The handlers are installed first thing (before a command changes
//! anything), unarmed: a signal then undoes every journalled system change and exits with 130 at
//! once, as the default action would end the process, but with the system restored and SPEC's exit
//! code. A command whose loops poll the stop flag arms it ([`Interrupts::arm`]); from then the first
//! signal sets the flag (the loops finish the current period, results are written, guards restore)
//! and a second one undoes everything at once and exits with 130. A dedicated thread receives the
//! signals, so none of this runs in a signal handler.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};

pub const EXIT_INTERRUPTED: i32 = 130;

pub struct Interrupts {
    stop: Arc<AtomicBool>,
    signal: AtomicI32,
    armed: AtomicBool,
}

static GLOBAL: OnceLock<Interrupts> = OnceLock::new();

impl Interrupts {
    /// Install the handlers once for the process; later calls return the same instance.
    pub fn install() -> &'static Interrupts {
        GLOBAL.get_or_init(|| {
            let interrupts = Interrupts {
                stop: Arc::new(AtomicBool::new(false)),
                signal: AtomicI32::new(0),
                armed: AtomicBool::new(false),
            };
            match signal_hook::iterator::Signals::new([libc::SIGINT, libc::SIGTERM]) {
                Ok(mut signals) => {
                    std::thread::Builder::new()
                        .name("punctual-signals".into())
                        .spawn(move || {
                            for sig in signals.forever() {
                                let me = GLOBAL.get().expect("initialised before signals arrive");
                                let first = me.signal.swap(sig, Ordering::SeqCst) == 0;
                                if !me.armed.load(Ordering::SeqCst) {
                                    abort_now("interrupted");
                                }
                                if first {
                                    me.stop.store(true, Ordering::SeqCst);
                                } else {
                                    abort_now("second interrupt");
                                }
                            }
                        })
                        .expect("spawning the signal thread");
                }
                Err(e) => {
                    use std::io::Write;
                    let _ = writeln!(
                        std::io::stderr(),
                        "punctual: cannot install signal handlers: {e}"
                    );
                }
            }
            interrupts
        })
    }

    /// The flag loops poll. Shared, so a command can also set it (its duration ended).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// From now on the first signal only sets the stop flag: the caller polls it often enough to
    /// end within a second (scripts/fault-inject.sh checks this for every command). A signal that
    /// came before arming has already ended the process.
    pub fn arm(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }

    /// A signal asked us to stop.
    pub fn requested(&self) -> bool {
        self.signal.load(Ordering::SeqCst) != 0
    }

    /// The first signal received, if any.
    pub fn signal(&self) -> Option<i32> {
        match self.signal.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }
}

fn abort_now(why: &str) -> ! {
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "\npunctual: {why}, restoring system settings and stopping now"
    );
    for (change, err) in crate::journal::global().undo_all() {
        let _ = writeln!(
            std::io::stderr(),
            "punctual: could not restore {change}: {err}"
        );
    }
    std::process::exit(EXIT_INTERRUPTED)
}
