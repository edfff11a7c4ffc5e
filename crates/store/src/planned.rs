//! A writer's store, checked before its run and created only when there is a result to keep.
//!
//! A command that writes results checks its store before it measures anything, so an unwritable
//! place or an unreachable server costs no measurement. Checking must not create: a run refused
//! for a bad flag or a damaged input file left an empty `results.db` behind (issue 32). So a store
//! that exists is opened at once (a corrupt file, a newer schema, a read-only database fail before
//! the run), and a store that does not exist yet is only probed with the rules its creation will
//! follow (a named path: resolved as every output is, its directory there and writable, private
//! for a privileged punctual; the default store: the nearest existing directory on the way to the
//! data directory writable; PostgreSQL: reached, schema version not newer). It is created by the
//! first [`Planned::get`], which applies the same checks again, since the run may have lasted hours.

use crate::db::{Db, Postgres};
use crate::{
    check_version, checked_path, data_dir, is_postgres, migrate, Access, Store, StoreError,
};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// A results store for a command that writes one result or more: open when it existed at the
/// check, else created by the first [`Planned::get`].
pub struct Planned {
    store: OnceLock<Store>,
    pending: Mutex<Option<Pending>>,
    location: String,
}

impl std::fmt::Debug for Planned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Planned({}, exists: {})", self.location, self.exists())
    }
}

/// What the first result creates.
enum Pending {
    /// A SQLite file the user named (`--store PATH`, `PUNCTUAL_STORE`).
    Named(String),
    /// `results.db` in the data directory, which is created with its parents when missing, and
    /// the old JSON files there imported.
    Default(PathBuf),
    /// A reachable PostgreSQL database without punctual's schema yet (`None` once created).
    Postgres(Option<Box<dyn Db>>),
}

impl Planned {
    /// Check the store `location` names (`None`: `PUNCTUAL_STORE`, else `results.db` in the data
    /// directory) for a command that will write to it. Nothing is created.
    pub fn check(location: Option<&str>) -> Result<Planned, StoreError> {
        match location {
            Some(l) => Planned::check_with(l),
            None => match Store::store_var()? {
                Some(v) => Planned::check_with(&v),
                None => Planned::check_in(&data_dir()),
            },
        }
    }

    fn check_with(url_or_path: &str) -> Result<Planned, StoreError> {
        if is_postgres(url_or_path) {
            let mut db = Postgres::connect(url_or_path)?;
            let location = db.location().to_string();
            if check_version(&mut db)? == 0 {
                return Ok(Planned::pending(
                    location,
                    Pending::Postgres(Some(Box::new(db))),
                ));
            }
            migrate(&mut db)?;
            return Ok(Planned::ready(Store::new(Box::new(db))));
        }
        let path = Path::new(url_or_path);
        if std::fs::symlink_metadata(path).is_ok() {
            // There already: opened as before (its checks need the file).
            return Store::open_with(url_or_path, Access::Create).map(Planned::ready);
        }
        // Also refuses unknown URL schemes, links others could have made, a missing directory, a
        // shared directory for a privileged punctual.
        let checked = checked_path_of(url_or_path)?;
        punctual_result::Output::File(checked.clone())
            .check_writable()
            .map_err(|reason| StoreError::Unwritable {
                path: checked.clone(),
                reason,
            })?;
        Ok(Planned::pending(
            checked.display().to_string(),
            Pending::Named(url_or_path.to_string()),
        ))
    }

    /// [`Planned::check`] for `DIR/results.db`, the default store with DIR the data directory
    /// (created with its parents by the first result, as [`Store::open_in`] does).
    pub fn check_in(dir: &Path) -> Result<Planned, StoreError> {
        let db = dir.join("results.db");
        if std::fs::symlink_metadata(&db).is_ok() {
            return Store::open_in(dir).map(Planned::ready);
        }
        creatable(dir)?;
        Ok(Planned::pending(
            db.display().to_string(),
            Pending::Default(dir.to_path_buf()),
        ))
    }

    fn ready(store: Store) -> Planned {
        let location = store.location();
        let cell = OnceLock::new();
        let _ = cell.set(store);
        Planned {
            store: cell,
            pending: Mutex::new(None),
            location,
        }
    }

    fn pending(location: String, p: Pending) -> Planned {
        Planned {
            store: OnceLock::new(),
            pending: Mutex::new(Some(p)),
            location,
        }
    }

    /// Whether the store exists now (it existed at the check, or a result created it).
    pub fn exists(&self) -> bool {
        self.store.get().is_some()
    }

    /// Where the store is, or will be: a path, or a URL with its password hidden.
    pub fn location(&self) -> String {
        match self.store.get() {
            Some(s) => s.location(),
            None => self.location.clone(),
        }
    }

    /// The store, created now if it did not exist (there is a result to keep).
    pub fn get(&self) -> Result<&Store, StoreError> {
        if let Some(s) = self.store.get() {
            return Ok(s);
        }
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = self.store.get() {
            return Ok(s);
        }
        let store = match pending.as_mut() {
            Some(Pending::Named(path)) => Store::open_with(path, Access::Create)?,
            Some(Pending::Default(dir)) => Store::open_in(dir)?,
            Some(Pending::Postgres(db)) => {
                let conn = db.as_mut().ok_or_else(|| StoreError::Db {
                    location: self.location.clone(),
                    reason: "the connection was lost while creating the schema".into(),
                })?;
                migrate(&mut **conn)?;
                Store::new(db.take().expect("checked above"))
            }
            None => unreachable!("a Planned is either open or pending"),
        };
        *pending = None;
        Ok(self.store.get_or_init(|| store))
    }
}

fn checked_path_of(url_or_path: &str) -> Result<PathBuf, StoreError> {
    // The scheme check of `open_with`, before the path is taken for a file name.
    if let Some(scheme) = crate::url_scheme(url_or_path) {
        return Err(crate::unknown_scheme(url_or_path, scheme));
    }
    checked_path(Path::new(url_or_path))
}

/// Whether `dir` could be created (with its parents) and written: a directory can be made in its
/// nearest existing ancestor. Tried, not inferred from permissions: root passes every permission
/// check, yet cannot make a directory in `/proc` or on a read-only or immutable place. The probe
/// directory is removed at once; the data directory itself is not created.
fn creatable(dir: &Path) -> Result<(), StoreError> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let unwritable = |reason: String| StoreError::Unwritable {
        path: dir.join("results.db"),
        reason,
    };
    let mut at = dir;
    loop {
        let here = if at.as_os_str().is_empty() {
            Path::new(".")
        } else {
            at
        };
        match std::fs::metadata(here) {
            Ok(m) if m.is_dir() => {
                let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let probe = here.join(format!(".punctual-probe-{}-{n}", std::process::id()));
                return match std::fs::create_dir(&probe) {
                    Ok(()) => {
                        let _ = std::fs::remove_dir(&probe);
                        Ok(())
                    }
                    Err(e) => Err(unwritable(format!(
                        "cannot create in {}: {e}",
                        here.display()
                    ))),
                };
            }
            Ok(_) => return Err(unwritable(format!("{} is not a directory", here.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match at.parent() {
                Some(p) => at = p,
                None => return Err(unwritable(e.to_string())),
            },
            Err(e) => return Err(unwritable(format!("{}: {e}", here.display()))),
        }
    }
}
