//! Error classes shared by every library; `punctual_measure::Exit::of` maps them to SPEC's exit
//! codes (usage 2, system 3, interrupted 130), the one place that chooses a number.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Bad input or usage: nothing ran, nothing was written.
    Usage,
    /// The system refused (privilege, missing kernel feature) or failed.
    System,
    /// Stopped by a signal before finishing.
    Interrupted,
}

/// A classified error with a message that names the cause and the fix.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    pub class: Class,
    pub message: String,
}

impl Failure {
    pub fn usage(message: impl Into<String>) -> Self {
        Failure {
            class: Class::Usage,
            message: message.into(),
        }
    }
    pub fn system(message: impl Into<String>) -> Self {
        Failure {
            class: Class::System,
            message: message.into(),
        }
    }
    pub fn interrupted() -> Self {
        Failure {
            class: Class::Interrupted,
            message: "interrupted".into(),
        }
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::system(e.to_string())
    }
}
