//! The live line: what is running, elapsed against expected time, and the measurement's own
//! figures, on stderr, at most 4 redraws a second, only when stderr is a terminal (the [`Env`]
//! decides). One mechanism for every command and experiment.
//!
//! [`Env`]: crate::Env

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// What a measurement shows while it runs.
pub struct LiveSpec {
    /// The bar's length in the unit `poll` reports; `None`: no bar, elapsed time only.
    pub total: Option<u64>,
    /// (position, figures), asked 4 times a second from another thread: read atomics, never lock
    /// what a timing loop holds.
    pub poll: Box<dyn Fn() -> (u64, String) + Send>,
}

impl LiveSpec {
    /// A bar of elapsed wall time against `expected_ns`, with `figures()` beside it.
    pub fn timed(expected_ns: u64, figures: impl Fn() -> String + Send + 'static) -> LiveSpec {
        let t0 = Instant::now();
        LiveSpec {
            total: Some((expected_ns / 1_000_000).max(1)),
            poll: Box::new(move || (t0.elapsed().as_millis() as u64, figures())),
        }
    }

    /// Elapsed time and `figures()`, for runs of unknown length.
    pub fn open(figures: impl Fn() -> String + Send + 'static) -> LiveSpec {
        LiveSpec {
            total: None,
            poll: Box::new(move || (0, figures())),
        }
    }

    /// A bar of `position()` out of `total` units (alarms taken, nanoseconds simulated).
    pub fn counted(total: u64, poll: impl Fn() -> (u64, String) + Send + 'static) -> LiveSpec {
        LiveSpec {
            total: Some(total),
            poll: Box::new(poll),
        }
    }
}

/// A live line, or nothing (not a terminal, a fake environment, a short run).
pub struct Live {
    bar: Option<indicatif::ProgressBar>,
    done: Arc<AtomicBool>,
    ticker: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Live {
    pub fn idle() -> Live {
        Live {
            bar: None,
            done: Arc::new(AtomicBool::new(false)),
            ticker: Default::default(),
        }
    }

    /// Draw `spec` on stderr until `finish` (or drop). One draw per 250 ms tick: the figures are
    /// read by the style when it draws, so updating them never draws on its own (indicatif's own
    /// limiter lets bursts through).
    pub fn start(prefix: impl Into<String>, spec: LiveSpec) -> Live {
        let done = Arc::new(AtomicBool::new(false));
        let figures = Arc::new(std::sync::Mutex::new(String::new()));
        let bar = indicatif::ProgressBar::with_draw_target(
            spec.total,
            indicatif::ProgressDrawTarget::stderr_with_hz(4),
        );
        let template = if spec.total.is_some() {
            "{prefix} [{bar:30}] {elapsed}/{duration} {figures}"
        } else {
            "{prefix} {elapsed} {figures}"
        };
        let shown = figures.clone();
        bar.set_style(
            indicatif::ProgressStyle::with_template(template)
                .expect("static template")
                .with_key(
                    "figures",
                    move |_: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                        let _ = w.write_str(&shown.lock().map(|f| f.clone()).unwrap_or_default());
                    },
                )
                .progress_chars("=> "),
        );
        bar.set_prefix(prefix.into());
        let ticker = {
            let (bar, done, poll) = (bar.clone(), done.clone(), spec.poll);
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    let (at, msg) = poll();
                    if let Ok(mut f) = figures.lock() {
                        *f = msg;
                    }
                    bar.set_position(at);
                    std::thread::sleep(std::time::Duration::from_millis(250));
                }
            })
        };
        Live {
            bar: Some(bar),
            done,
            ticker: std::sync::Mutex::new(Some(ticker)),
        }
    }

    pub fn set_prefix(&self, p: impl Into<String>) {
        if let Some(b) = &self.bar {
            b.set_prefix(p.into());
        }
    }

    /// Stop drawing and clear the line (before the tables are printed).
    pub fn finish(&self) {
        self.done.store(true, Ordering::Relaxed);
        let ticker = self.ticker.lock().map(|mut t| t.take()).unwrap_or(None);
        if let Some(t) = ticker {
            let _ = t.join();
        }
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.finish();
    }
}
