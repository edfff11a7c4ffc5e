//! The scheduling classes punctual uses and a class with its priority: named here, below the
//! modules that set them ([`crate::sched`], [`crate::child`]) and the one that decides which a
//! run may have ([`crate::privilege`]).

use crate::RtError;

/// The scheduling classes punctual uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    Fifo,
    Rr,
    Other,
}

impl Policy {
    pub fn name(self) -> &'static str {
        match self {
            Policy::Fifo => "fifo",
            Policy::Rr => "rr",
            Policy::Other => "other",
        }
    }
    pub(crate) fn raw(self) -> libc::c_int {
        match self {
            Policy::Fifo => libc::SCHED_FIFO,
            Policy::Rr => libc::SCHED_RR,
            Policy::Other => libc::SCHED_OTHER,
        }
    }
    pub(crate) fn from_raw(raw: libc::c_int) -> Option<Policy> {
        match raw & !libc::SCHED_RESET_ON_FORK {
            libc::SCHED_FIFO => Some(Policy::Fifo),
            libc::SCHED_RR => Some(Policy::Rr),
            libc::SCHED_OTHER => Some(Policy::Other),
            _ => None,
        }
    }
    pub fn is_realtime(self) -> bool {
        self != Policy::Other
    }
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fifo" | "FIFO" => Ok(Policy::Fifo),
            "rr" | "RR" => Ok(Policy::Rr),
            "other" | "OTHER" | "normal" => Ok(Policy::Other),
            other => Err(format!("unknown policy '{other}' (valid: fifo, rr, other)")),
        }
    }
}

/// A policy with its priority (1..=99 for fifo/rr, 0 for other).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SchedParams {
    pub policy: Policy,
    pub priority: u32,
}

impl SchedParams {
    pub fn validate(&self) -> Result<(), RtError> {
        match self.policy {
            Policy::Fifo | Policy::Rr if !(1..=99).contains(&self.priority) => Err(RtError::Invalid(
                format!("priority {} is outside 1..=99 for {}; pass -p/--priority 1..99", self.priority, self.policy),
            )),
            Policy::Other if self.priority != 0 => Err(RtError::Invalid(format!(
                "priority {} has no meaning for policy other; drop -p/--priority or use --policy fifo",
                self.priority
            ))),
            _ => Ok(()),
        }
    }
}
