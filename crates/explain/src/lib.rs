//! Every late release explained (SPEC section 9, `--explain`).
//!
//! A timing loop writes each release outside its bound into a preallocated [`LateLog`]
//! ([`record`]): the instant, when it ran, its thread and CPU, and for a released client when and
//! from where it was handed over. Meanwhile a private tracefs instance keeps the kernel events of
//! the CPUs involved in memory ([`punctual_trace::capture`], started by [`Explainer::start`]).
//! After the run each record gets one cause from that trace ([`attribute`], over a per-CPU
//! account of who had the CPU: [`timeline`]), counted per series with the offenders by name
//! ([`summary`]) and shown as tables, a figure and `lateness_causes` in the document ([`render`]).
//!
//! The attribution is pure: it reads a [`punctual_trace::capture::Captured`], which tests build
//! from synthetic events.

pub mod attribute;
pub mod feed;
pub mod record;
pub mod render;
pub mod summary;
pub mod timeline;

pub use attribute::{Attribution, Cause};
pub use feed::LateFeed;
pub use record::{
    here, own_thread, Handover, LateLog, LateRelease, OwnWork, Stall, StallKind, StallLog, Waiter,
    WorkKind, LOG_CAPACITY, STALL_CAPACITY, STALL_CAPACITY_MAX, STALL_LOG_NS,
};
pub use summary::{explain, Explanation, Tally};

use punctual_trace::capture::{Capture, CaptureConfig, Captured};

/// The bound a release is late beyond, unless the plan or `--explain-bound` says otherwise.
pub const DEFAULT_BOUND_NS: u64 = 10_000;

/// Why explaining could not be done.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// Tracing is not available or was refused (exit 3, with the fix).
    #[error("--explain needs a kernel trace: {0}")]
    Trace(#[from] punctual_trace::TraceError),
}

impl From<ExplainError> for punctual_result::Failure {
    fn from(e: ExplainError) -> Self {
        match e {
            ExplainError::Trace(t) => {
                let f: punctual_result::Failure = t.into();
                punctual_result::Failure {
                    message: format!("--explain needs a kernel trace: {}", f.message),
                    ..f
                }
            }
        }
    }
}

/// A bound as the document's keys name thresholds: `10us`, `1500ns`, `2ms`.
pub fn bound_key(ns: u64) -> String {
    if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1_000) {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

/// What `--explain` was asked for.
#[derive(Clone, Debug)]
pub struct ExplainConfig {
    /// Releases later than this are explained.
    pub bound: u64,
    /// CPUs to trace (empty: all online CPUs).
    pub cpus: Vec<usize>,
    /// CPUs the trace's drain thread keeps off when others remain (shielded ones, and a run's
    /// wake clients').
    pub quiet: Vec<usize>,
    /// `--explain-trace`: keep the trace behind the explanation in a file.
    pub keep: Option<KeepTrace>,
}

/// `--explain-trace FILE`: where the kernel trace an explanation was read from is kept, as a
/// punctual trace file (`punctual trace analyze FILE`). A command that traces more than once
/// (`check`, a `--repeat`) keeps the first in FILE and the next ones in FILE-2, FILE-3...
#[derive(Clone, Debug)]
pub struct KeepTrace {
    pub path: std::path::PathBuf,
    made: std::sync::Arc<std::sync::atomic::AtomicU32>,
}

impl KeepTrace {
    pub fn new(path: impl Into<std::path::PathBuf>) -> KeepTrace {
        KeepTrace {
            path: path.into(),
            made: Default::default(),
        }
    }

    /// The file for the next trace.
    fn next_path(&self) -> std::path::PathBuf {
        let n = self.made.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n == 0 {
            return self.path.clone();
        }
        punctual_result::output::numbered(&self.path, n + 1)
    }

    /// Write `c` to the next file: its path, or why it could not be written.
    fn write(&self, c: &punctual_trace::capture::Captured) -> Result<std::path::PathBuf, String> {
        write_kept(&self.next_path(), c)
    }
}

/// Write `c` to `path` as a trace file, with this process's command line: the path, or why it
/// could not be written. Written beside it first and renamed over it, so a write that fails (a
/// full disk) leaves a file written before whole.
fn write_kept(
    path: &std::path::Path,
    c: &punctual_trace::capture::Captured,
) -> Result<std::path::PathBuf, String> {
    let command: Vec<String> = std::env::args().collect();
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = std::path::PathBuf::from(partial);
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(std::fs::File::create(&partial)?);
        c.write_file(&mut f, &command)?;
        f.flush()?;
        drop(f);
        std::fs::rename(&partial, path)
    };
    write().map(|()| path.to_path_buf()).map_err(|e| {
        let _ = std::fs::remove_file(&partial);
        format!("{}: {e}", path.display())
    })
}

impl ExplainConfig {
    /// Explain every release later than `bound`, which must be more than zero.
    pub fn bounded(bound: u64) -> Result<ExplainConfig, String> {
        if bound == 0 {
            return Err("--explain-bound must be more than zero, e.g. 10us".into());
        }
        Ok(ExplainConfig {
            bound,
            ..Default::default()
        })
    }
}

impl Default for ExplainConfig {
    fn default() -> Self {
        ExplainConfig {
            bound: DEFAULT_BOUND_NS,
            cpus: Vec::new(),
            quiet: Vec::new(),
            keep: None,
        }
    }
}

impl ExplainConfig {
    /// A log for one timing thread.
    pub fn log(&self) -> LateLog {
        LateLog::new(self.bound, LOG_CAPACITY)
    }
}

/// A capture running beside a measurement.
pub struct Explainer {
    capture: Capture,
    bound: u64,
    keep: Option<KeepTrace>,
}

impl Explainer {
    /// Start tracing the CPUs `cfg` names (before the measured run starts).
    pub fn start(cfg: &ExplainConfig) -> Result<Explainer, ExplainError> {
        let capture = Capture::start(&CaptureConfig {
            cpus: cfg.cpus.clone(),
            drain_off: cfg.quiet.clone(),
            ..CaptureConfig::default()
        })?;
        Ok(Explainer {
            capture,
            bound: cfg.bound,
            keep: cfg.keep.clone(),
        })
    }

    /// Stop tracing and keep the trace (to explain records that arrive afterwards).
    pub fn stop(self) -> Result<Trace, ExplainError> {
        let mut captured = self.capture.finish()?;
        if let Some(k) = &self.keep {
            captured.kept_in = Some(k.write(&captured));
        }
        Ok(Trace {
            captured,
            bound: self.bound,
        })
    }
}

/// A finished capture.
pub struct Trace {
    pub captured: Captured,
    pub bound: u64,
}

impl Trace {
    /// Explain the records; `unlogged`: per series, late releases the logs had no room for.
    pub fn explain(&self, records: &[LateRelease], unlogged: &[(u32, u64)]) -> Explanation {
        explain(&self.captured, self.bound, records, unlogged)
    }

    /// Add the measuring threads' stalls, handed over once the run is done (the trace stops
    /// first). A trace kept in a file (`--explain-trace`) is written again with them, so the file
    /// holds all the explanation was read from; written at [`Explainer::stop`] already, it keeps
    /// the events whatever happens after.
    /// `dropped`: those the threads' logs had no room for, shown with the capture's figures.
    pub fn add_stalls(&mut self, stalls: impl IntoIterator<Item = Stall>, dropped: u64) {
        let before = self.captured.stalls.len();
        self.captured.stalls.extend(stalls);
        self.captured.stalls_dropped += dropped;
        if self.captured.stalls.len() == before && dropped == 0 {
            return;
        }
        if let Some(Ok(path)) = self.captured.kept_in.clone() {
            self.captured.kept_in = Some(write_kept(&path, &self.captured));
        }
    }
}

#[cfg(test)]
mod keep_tests {
    #[test]
    fn each_trace_after_the_first_gets_its_own_numbered_file() {
        let k = super::KeepTrace::new("/tmp/run/late.trace");
        let again = k.clone();
        assert_eq!(k.next_path(), std::path::Path::new("/tmp/run/late.trace"));
        assert_eq!(
            again.next_path(),
            std::path::Path::new("/tmp/run/late-2.trace")
        );
        assert_eq!(k.next_path(), std::path::Path::new("/tmp/run/late-3.trace"));
        let bare = super::KeepTrace::new("late");
        bare.next_path();
        assert_eq!(bare.next_path(), std::path::Path::new("late-2"));
    }

    /// The stalls the run hands over after the trace stopped reach the kept file: read back, it
    /// holds every stall the explanation read.
    #[test]
    fn a_kept_trace_is_written_again_with_the_stalls_handed_over_after_it_stopped() {
        use punctual_trace::capture::{Stall, StallKind};
        let dir = tempfile::tempdir().unwrap();
        let keep = super::KeepTrace::new(dir.path().join("late.trace"));
        let mut captured = punctual_trace::synth::Synth::new(1, 1_000, 9_000_000).captured();
        captured.kept_in = Some(keep.write(&captured));
        let mut trace = super::Trace {
            captured,
            bound: 10_000,
        };
        let stall = |tid, from| Stall {
            tid,
            cpu: 0,
            kind: StallKind::Busy,
            from,
            to: from + 50_000,
        };
        trace.add_stalls([stall(7, 2_000)], 0);
        trace.add_stalls([stall(8, 5_000)], 3);
        let path = trace.captured.kept_in.clone().unwrap().unwrap();
        let t = punctual_trace::file::read_trace_file(&path).unwrap();
        assert!(t.integrity.complete(), "{}", t.integrity.describe());
        let trailer = t.trailer.unwrap();
        assert_eq!(trailer.stalls, vec![stall(7, 2_000), stall(8, 5_000)]);
        // And how many the logs had no room for.
        assert_eq!(trailer.stalls_dropped, 3);
        // Nothing left beside it.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("late.trace")]);
    }
}

#[cfg(test)]
mod bound_tests {
    #[test]
    fn a_bound_must_be_more_than_zero() {
        assert_eq!(super::ExplainConfig::bounded(10_000).unwrap().bound, 10_000);
        let e = super::ExplainConfig::bounded(0).unwrap_err();
        assert_eq!(e, "--explain-bound must be more than zero, e.g. 10us");
    }
}
