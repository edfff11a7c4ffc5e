//! The results store as the lifecycle's last step: every result document, with its figures and the
//! user's tags, goes into `punctual_store::Store` (SQLite in the data directory, or PostgreSQL).
//! The store is checked when the outputs are, before anything runs, so an unwritable data
//! directory or an unreachable server costs no measurement; a store that does not exist yet is
//! created only when there is a result to keep. Reading results (`Resolver`) is the store's own.

use punctual_result::Failure;
use punctual_store::Store;
use std::path::PathBuf;

pub use punctual_store::data_dir;

/// Where the store used to keep JSON files (imported into the database on first use), and where
/// experiments put their figures when nothing else is asked for.
pub fn results_dir() -> PathBuf {
    data_dir().join("results")
}

/// Open the store a run will write to: `location` (`--store`: a path or a `postgres://` URL), or
/// `PUNCTUAL_STORE`, or `results.db` in the data directory. Exit 3 when it cannot be written,
/// with how to avoid it (`--no-store`).
pub fn open(location: Option<&str>) -> Result<Store, Failure> {
    Store::open_for(location, punctual_store::Access::Create).map_err(Failure::from)
}

/// Check the store a run will write to (as [`open`] names it) without creating it: a store that
/// exists is opened, a missing one is created when the first result is kept, so a run refused
/// after this check (a bad flag, a damaged input file) leaves no empty store behind (issue 32).
pub fn plan(location: Option<&str>) -> Result<punctual_store::Planned, Failure> {
    punctual_store::Planned::check(location).map_err(Failure::from)
}
