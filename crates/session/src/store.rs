//! The results store as the lifecycle's last step: every result document, with its figures and the
//! user's tags, goes into `punctual_store::Store` (SQLite in the data directory, or PostgreSQL).
//! The store is checked when the outputs are, before anything runs, so an unwritable data
//! directory or an unreachable server costs no measurement; a store that does not exist yet is
//! created only when there is a result to keep.

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

/// Largest result document read from a file (a 10-million-sample result is well under 1 MB:
/// histograms, not samples); a bigger file is not a result document.
const MAX_DOC_BYTES: u64 = 256 << 20;

/// A result named on the command line, with what the store keeps beside it (none for a file).
#[derive(Clone, Debug)]
pub struct Named {
    /// As the user named it (a file, an id, `latest~1`, or `tag k=v` for a selection).
    pub source: String,
    pub stored: punctual_store::Stored,
    /// The tables the command printed, when the result is stored.
    pub tables: Option<String>,
}

/// Results named by file, id, prefix, `latest~N` or tag, for commands that only read them
/// (`compare`, `report`, `advise`): files are read without touching any store, and the store
/// (`--store`, else `PUNCTUAL_STORE`, else the data directory's) is opened the first time a name
/// needs it, never created.
pub struct Resolver {
    location: Option<String>,
    store: Option<Store>,
}

impl Resolver {
    pub fn new(location: Option<&str>) -> Resolver {
        Resolver {
            location: location.map(str::to_string),
            store: None,
        }
    }

    /// The store, opened now if it was not yet (exit 2 when there is none).
    pub fn store(&mut self) -> Result<&Store, Failure> {
        if self.store.is_none() {
            let s = Store::open_for(self.location.as_deref(), punctual_store::Access::Existing)
                .map_err(Failure::from)?;
            self.store = Some(s);
        }
        Ok(self.store.as_ref().expect("opened above"))
    }

    /// The store if there is one (`None` when nothing was ever stored there).
    pub fn store_if_any(&mut self) -> Result<Option<&Store>, Failure> {
        match self.store() {
            Ok(_) => Ok(self.store.as_ref()),
            Err(f) if f.class == punctual_result::Class::Usage => Ok(None),
            Err(f) => Err(f),
        }
    }

    /// A result file, else a stored id, id prefix, `latest` or `latest~N`.
    pub fn resolve(&mut self, spec: &str) -> Result<Named, Failure> {
        let path = std::path::Path::new(spec);
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let store = self.store().map_err(|f| {
                    if spec.contains('/') || spec.ends_with(".json") {
                        Failure::usage(format!("{spec}: no such file"))
                    } else {
                        f
                    }
                })?;
                let stored = store.resolve(spec).map_err(Failure::from)?;
                let tables = match &stored.id {
                    Some(id) => store.tables(id).map_err(Failure::from)?,
                    None => None,
                };
                return Ok(Named {
                    source: spec.to_string(),
                    stored,
                    tables,
                });
            }
            Err(e) => return Err(Failure::usage(format!("reading {spec}: {e}"))),
        };
        if !meta.is_file() || meta.len() > MAX_DOC_BYTES {
            return Err(Failure::usage(format!(
                "{spec} is not a result document (not a regular file under {} MB)",
                MAX_DOC_BYTES >> 20
            )));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| Failure::usage(format!("reading {spec}: {e}")))?;
        let doc = punctual_result::ResultDoc::from_json(&text)
            .map_err(|e| Failure::usage(format!("{spec}: {e}")))?;
        Ok(Named {
            source: spec.to_string(),
            stored: punctual_store::Stored {
                id: None,
                tags: doc
                    .tags
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                doc,
                figures: Vec::new(),
            },
            tables: None,
        })
    }

    /// The newest `last` stored results carrying every tag in `tags` (and of `command`, when
    /// given), oldest first. Exit 2 when none match.
    pub fn tagged(
        &mut self,
        tags: &[(String, String)],
        command: Option<&str>,
        last: usize,
    ) -> Result<Vec<Named>, Failure> {
        let filter = punctual_store::Filter {
            tags: tags.to_vec(),
            command: command.map(str::to_string),
            last: Some(last),
            ..Default::default()
        };
        let store = self.store()?;
        let mut entries = store.list(&filter).map_err(Failure::from)?;
        let what: Vec<String> = tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if entries.is_empty() {
            return Err(Failure::usage(format!(
                "no stored result is tagged {}{} (in {})",
                what.join(","),
                command.map(|c| format!(" from {c}")).unwrap_or_default(),
                store.location()
            )));
        }
        entries.reverse();
        let mut out = Vec::new();
        for e in entries {
            let mut n = self.resolve(&e.id)?;
            n.source = e.id;
            out.push(n);
        }
        Ok(out)
    }
}
