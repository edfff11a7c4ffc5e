//! The live line: what is running, elapsed against expected time, and the measurement's own
//! figures, on stderr, at most 4 redraws a second, only when stderr is a terminal (the [`Env`]
//! decides). One mechanism for every command and experiment.
//!
//! [`Env`]: crate::Env

use punctual_measure::LiveSpec;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

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
