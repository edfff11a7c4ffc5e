//! Plans for punctual's dispatcher (SPEC section 4): periodic tasks and explicit one-shot events,
//! each with an action, read from TOML ([`parse`]) or from the compact binary form ([`compiled`]),
//! validated, and admitted ([`admission`]) before anything runs. Nothing here prints or touches the
//! system.

pub mod admission;
pub mod compiled;
pub mod emit;
pub mod model;
pub mod open;
pub mod parse;
pub mod rtapp;

pub use compiled::load;
pub use model::{
    exact_duration, Action, ActionKind, Event, MissPolicy, NamedAction, Offset, Plan, Task,
    EVENT_DATA,
};
pub use parse::{parse_file, parse_str};

use std::path::PathBuf;

/// Why a plan could not be read. Every variant names the file; located ones the line and column.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A TOML syntax or validation error at a place in the file.
    #[error("{file}:{line}:{column}: {message}")]
    At {
        file: String,
        line: usize,
        column: usize,
        message: String,
    },
    /// A problem with the plan as a whole.
    #[error("{file}: {message}")]
    Invalid { file: String, message: String },
    /// A compiled plan of another version, or not a compiled plan.
    #[error("{file}: {message}")]
    Compiled { file: String, message: String },
    /// A compiled plan whose `field` contradicts the file (a count beyond its size, a record out of
    /// range): damaged or crafted. Nothing was allocated on the field's word.
    #[error("{file}: corrupt compiled plan: {field}: {message}")]
    Corrupt {
        file: String,
        field: &'static str,
        message: String,
    },
}

#[cfg(test)]
mod tests;
