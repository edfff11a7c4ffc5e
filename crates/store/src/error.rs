//! What can go wrong with the store, each with its cause and the fix, classified for SPEC's exit
//! codes (2: the user named something that is not there; 3: the system refused).

use punctual_result::{Class, Failure};
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No stored result has this id or prefix.
    #[error("no stored result '{spec}' (give an id or a unique prefix from `punctual results list`, latest, latest~N, or a result file)")]
    UnknownId { spec: String },

    /// A prefix that more than one id starts with.
    #[error("'{prefix}' is ambiguous: it starts {} ids ({}); give more characters", .candidates.len(), .candidates.join(", "))]
    Ambiguous {
        prefix: String,
        candidates: Vec<String>,
    },

    /// A file given as a result that is not one.
    #[error("{}: not a punctual result document ({reason})", .path.display())]
    NotAResult { path: PathBuf, reason: String },

    /// A command that only reads results was pointed at a store that does not exist (yet).
    #[error("there is no results store at {location} (nothing has been stored there yet); name another with --store or PUNCTUAL_STORE")]
    Absent { location: String },

    /// Bad input to the store itself (a tag, a filter).
    #[error("{0}")]
    Invalid(String),

    /// The database file cannot be read as a database.
    #[error("the results store {location} is corrupt or not a database ({reason}); nothing was changed. Move it aside (mv {location} {location}.bad) and the next run starts a new one, or pass --no-store")]
    Corrupt { location: String, reason: String },

    /// A database written by a newer punctual: never touched.
    #[error("the results store {location} has schema version {found}, newer than this punctual knows ({supported}); it was left untouched. Use a newer punctual, another store (--store or PUNCTUAL_STORE), or --no-store")]
    NewerSchema {
        location: String,
        found: i64,
        supported: i64,
    },

    /// The data directory or the database file cannot be written.
    #[error("cannot write the results store at {}: {reason}. Make it writable, set PUNCTUAL_DATA_DIR (or --store) to a writable place, or pass --no-store", .path.display())]
    Unwritable { path: PathBuf, reason: String },

    /// The PostgreSQL server cannot be reached (or refused the connection).
    #[error("cannot reach the PostgreSQL results store {location}: {reason}. Check the server and the URL, or pass --no-store")]
    Unreachable { location: String, reason: String },

    /// Another punctual held the database longer than the busy timeout.
    #[error("results store {location}: {reason} (another punctual kept it busy)")]
    Busy { location: String, reason: String },
    /// Any other database error.
    #[error("results store {location}: {reason}")]
    Db { location: String, reason: String },
}

impl StoreError {
    /// 2 for what the user named, 3 for what the system refused.
    pub fn class(&self) -> Class {
        match self {
            StoreError::UnknownId { .. }
            | StoreError::Ambiguous { .. }
            | StoreError::NotAResult { .. }
            | StoreError::Absent { .. }
            | StoreError::Invalid(_) => Class::Usage,
            StoreError::Corrupt { .. }
            | StoreError::NewerSchema { .. }
            | StoreError::Unwritable { .. }
            | StoreError::Unreachable { .. }
            | StoreError::Busy { .. }
            | StoreError::Db { .. } => Class::System,
        }
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Failure {
        Failure {
            class: e.class(),
            message: e.to_string(),
        }
    }
}
