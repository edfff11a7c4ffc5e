//! Timer wake-up latency, measured the way cyclictest does and in the ways the seeds did: threads
//! pinned to CPUs wait for absolute release times (`next += interval`, never summed deltas) with one of
//! five mechanisms, and record how late they ran. [`check`] builds the 30-second machine check on it.

pub mod alarms;
pub mod check;
pub mod cyclic;
mod engine;
pub mod measure;
mod modes;
pub mod report;
pub mod request;
mod samples;

pub use engine::{
    run, run_observed, run_with, Config, Observe, Outcome, Progress, RunExtras, Start, Stop,
    ThreadResult, MAX_INTERVAL, MAX_RUN, MAX_THREADS,
};
pub use modes::Mode;

/// Why a measurement could not run.
#[derive(Debug, thiserror::Error)]
pub enum LatencyError {
    /// A setting out of range (exit 2), with the flag that fixes it.
    #[error("{flag}: {why}")]
    Invalid { flag: &'static str, why: String },
    #[error("thread {thread}: {source}")]
    Setup {
        thread: usize,
        source: punctual_rt::RtError,
    },
    #[error("thread {thread}: setting up the {mode} timer: {source}")]
    Timer {
        thread: usize,
        mode: &'static str,
        source: std::io::Error,
    },
    #[error("writing samples: {0}")]
    Samples(std::io::Error),
    #[error("starting the load: {0}")]
    Load(#[from] punctual_load::LoadError),
}

impl From<LatencyError> for punctual_result::Failure {
    fn from(e: LatencyError) -> Self {
        match e {
            LatencyError::Setup {
                source: punctual_rt::RtError::Invalid(_),
                ..
            }
            | LatencyError::Invalid { .. } => punctual_result::Failure::usage(e.to_string()),
            _ => punctual_result::Failure::system(e.to_string()),
        }
    }
}
