//! SIGINT/SIGTERM handling. The first signal sets a stop flag that loops poll (they finish the current
//! period, results are written, guards restore). A second signal undoes every journalled system change
//! at once and exits with 130. A dedicated thread receives the signals, so none of this runs in a
//! signal handler.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};

pub const EXIT_INTERRUPTED: i32 = 130;

pub struct Interrupts {
    stop: Arc<AtomicBool>,
    signal: AtomicI32,
}

static GLOBAL: OnceLock<Interrupts> = OnceLock::new();

impl Interrupts {
    /// Install the handlers once for the process; later calls return the same instance.
    pub fn install() -> &'static Interrupts {
        GLOBAL.get_or_init(|| {
            let interrupts = Interrupts {
                stop: Arc::new(AtomicBool::new(false)),
                signal: AtomicI32::new(0),
            };
            match signal_hook::iterator::Signals::new([libc::SIGINT, libc::SIGTERM]) {
                Ok(mut signals) => {
                    std::thread::Builder::new()
                        .name("punctual-signals".into())
                        .spawn(move || {
                            for sig in signals.forever() {
                                let me = GLOBAL.get().expect("initialised before signals arrive");
                                if me.signal.swap(sig, Ordering::SeqCst) == 0 {
                                    me.stop.store(true, Ordering::SeqCst);
                                } else {
                                    abort_now();
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

fn abort_now() -> ! {
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "\npunctual: second interrupt, restoring system settings and stopping now"
    );
    for (change, err) in crate::journal::global().undo_all() {
        let _ = writeln!(
            std::io::stderr(),
            "punctual: could not restore {change}: {err}"
        );
    }
    std::process::exit(EXIT_INTERRUPTED)
}
