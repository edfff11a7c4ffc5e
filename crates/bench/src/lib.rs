//! Micro-measurements of the costs the seeds measured beside timer latency (the seeds' tables
//! built from them are in `punctual-experiments`).
//!
//! - [`ctxsw`]: two processes on one CPU passing a byte through pipes (Etsion Table 2, Ousterhout's
//!   method, `perf bench sched pipe`), or a futex word;
//! - [`trap`]: the raw `getpid` system call (Etsion Table 2);
//! - [`memcpy`]: copy bandwidth at sizes inside each cache level and in memory (Etsion Table 2);
//! - [`dispatch`]: an event raised on one CPU (eventfd, pipe or signal) to the first instruction of
//!   the process woken on another (Zeadally's process dispatch latency);
//! - [`gaps`]: a tight loop per CPU that records every interruption above a threshold, attributed
//!   to interrupt sources, with the cost of the timer tick (Etsion Table 1, oslat's method).
//!
//! Each returns recorders and figures; [`request`] checks what the command line asks for into
//! their configurations. Nothing here prints.

pub mod ctxsw;
pub mod dispatch;
pub mod gaps;
pub mod measure;
pub mod memcpy;
pub mod report;
pub mod request;
mod shared;
pub mod trap;
pub mod tsc;

/// Why a measurement could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Bad input: nothing ran.
    #[error("{0}")]
    Invalid(String),
    #[error("{what}: {source}")]
    Os {
        what: &'static str,
        source: std::io::Error,
    },
    #[error("{0}")]
    Rt(#[from] punctual_rt::RtError),
    #[error("{0}")]
    Latency(#[from] punctual_latency::LatencyError),
    #[error("starting the load: {0}")]
    Load(#[from] punctual_load::LoadError),
}

impl BenchError {
    pub(crate) fn os(what: &'static str) -> Self {
        BenchError::Os {
            what,
            source: std::io::Error::last_os_error(),
        }
    }
}

impl From<BenchError> for punctual_result::Failure {
    fn from(e: BenchError) -> Self {
        match e {
            BenchError::Invalid(m) => punctual_result::Failure::usage(m),
            BenchError::Rt(r) => r.into(),
            BenchError::Latency(l) => l.into(),
            other => punctual_result::Failure::system(other.to_string()),
        }
    }
}

/// Series kinds: the one vocabulary of the result document.
pub use punctual_result::doc::kind;
