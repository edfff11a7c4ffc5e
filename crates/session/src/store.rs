//! The results store as the lifecycle's last step: every result document, with its figures and the
//! user's tags, goes into `punctual_store::Store` (SQLite in the data directory, or PostgreSQL).
//! The store is opened when the outputs are checked, before anything runs, so an unwritable data
//! directory or an unreachable server costs no measurement.

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
    open_as(location, punctual_store::Access::Write)
}

/// Open the store a command only reads (`results list`/`show`/`export`, `compare`, `report`,
/// `advise`): nothing is created, so a typo in `--store` is exit 2, not a new database.
pub fn open_existing(location: Option<&str>) -> Result<Store, Failure> {
    open_as(location, punctual_store::Access::Read)
}

fn open_as(location: Option<&str>, access: punctual_store::Access) -> Result<Store, Failure> {
    match location {
        Some(l) => Store::open_as(l, access),
        None => Store::open_default_as(access),
    }
    .map_err(Failure::from)
}
