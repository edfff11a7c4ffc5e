use std::io;

/// Why a real-time setting could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum RtError {
    /// The request itself is wrong (priority out of range, CPU not online): a usage error.
    #[error("{0}")]
    Invalid(String),
    /// The system refused (permission, missing kernel feature). `fix` says what to do.
    #[error("{what} refused by the system: {source}. Fix: {fix}")]
    Refused {
        what: String,
        source: io::Error,
        fix: String,
    },
    /// Anything else the kernel or filesystem reported.
    #[error("{what}: {source}")]
    Io { what: String, source: io::Error },
}

impl RtError {
    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> Self {
        RtError::Io {
            what: what.into(),
            source,
        }
    }

    /// Map EPERM/EACCES to `Refused` with `fix`, everything else to `Io`.
    pub(crate) fn from_os(what: impl Into<String>, source: io::Error, fix: &str) -> Self {
        match source.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) | Some(libc::EBUSY) => RtError::Refused {
                what: what.into(),
                source,
                fix: fix.to_string(),
            },
            _ => RtError::Io {
                what: what.into(),
                source,
            },
        }
    }

    /// What failed and the system's error, without the fix (for messages that give the fix once,
    /// elsewhere).
    pub fn without_fix(&self) -> String {
        match self {
            RtError::Invalid(s) => s.clone(),
            RtError::Refused { what, source, .. } | RtError::Io { what, source } => {
                format!("{what}: {source}")
            }
        }
    }

    /// True when the system refused for lack of privilege (a fallback may apply).
    pub fn is_refusal(&self) -> bool {
        matches!(self, RtError::Refused { .. })
    }
}

impl From<RtError> for punctual_result::Failure {
    fn from(e: RtError) -> Self {
        match e {
            RtError::Invalid(_) => punctual_result::Failure::usage(e.to_string()),
            _ => punctual_result::Failure::system(e.to_string()),
        }
    }
}
