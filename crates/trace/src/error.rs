//! Why tracing or reading a trace failed, each case with its fix, and its class for the exit code.

use crate::file::ReadError;
use punctual_result::Failure;
use std::io;
use std::path::PathBuf;

pub const ROOT_FIX: &str =
    "run punctual as root (tracefs is root-only), or mount tracefs yourself \
     (`mount -t tracefs nodev /sys/kernel/tracing`) and give your user access to it";

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The command line is wrong (unknown event group, bad size...). Exit 2.
    #[error("{0}")]
    Usage(String),
    /// The kernel has no tracefs, or it cannot be found where it was said to be. Exit 3.
    #[error("no tracefs: {why}. Fix: {fix}")]
    NoTracefs { why: String, fix: String },
    /// Mounting tracefs, or using it, was refused. Exit 3.
    #[error("{what} {path}: {source}. Fix: {fix}", path = path.display())]
    Refused {
        what: String,
        path: PathBuf,
        source: io::Error,
        fix: String,
    },
    /// A kernel event punctual needs is not there (the kernel was built without it). Exit 3.
    #[error("this kernel has no trace event {event} ({why}); --events without the group that needs it avoids it")]
    EventMissing { event: String, why: String },
    /// The kernel refused the ring buffer size. Exit 3.
    #[error("the kernel refused --buffer-size {kb} KiB per CPU: {source}. Fix: ask for less (the default is 4M), or free memory")]
    BufferRefused { kb: u64, source: io::Error },
    /// The kernel's format files could not be understood. Exit 3.
    #[error("{0}; please report this kernel version")]
    Format(#[from] FormatError),
    /// Reading or writing failed. Exit 3.
    #[error("{what}: {source}")]
    Io { what: String, source: io::Error },
    /// The trace file is not punctual's or is damaged beyond reading. Exit 2.
    #[error(transparent)]
    File(#[from] ReadError),
}

impl TraceError {
    pub fn io(what: impl Into<String>, source: io::Error) -> Self {
        TraceError::Io {
            what: what.into(),
            source,
        }
    }

    /// An I/O error on a tracefs path: refusals (EPERM/EACCES) get the privilege fix.
    pub fn tracefs(what: &str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        let path = path.into();
        match source.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => TraceError::Refused {
                what: what.into(),
                path,
                source,
                fix: ROOT_FIX.into(),
            },
            _ => TraceError::Io {
                what: format!("{what} {}", path.display()),
                source,
            },
        }
    }
}

impl From<TraceError> for Failure {
    fn from(e: TraceError) -> Self {
        match &e {
            TraceError::Usage(_) => Failure::usage(e.to_string()),
            TraceError::File(ReadError::Io { .. }) => Failure::usage(e.to_string()),
            TraceError::File(_) => Failure::usage(e.to_string()),
            _ => Failure::system(e.to_string()),
        }
    }
}

/// Why a format file could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("format of {what}: {why}")]
pub struct FormatError {
    pub what: String,
    pub why: String,
}
