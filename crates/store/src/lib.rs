//! The results store: every result document punctual writes, with its figures and the user's tags,
//! in a SQLite database in the data directory (`results.db`), or in PostgreSQL so a fleet of
//! machines shares one history (`--store postgres://...`, `PUNCTUAL_STORE`).
//!
//! Results are addressed like git commits: a 12-hex-digit id, any unambiguous prefix of it,
//! `latest`, `latest~N` (by the time the measurement started), or the path of a result file. The
//! schema is versioned (`schema_version`, migrations applied in order); a database from a newer
//! punctual is refused and never written. The JSON files the store used to keep
//! (`DATA/results/*.json`) are imported once, the first time the default store opens.
//!
//! Reading is [`Resolver`] (files, ids and tags named on a command line, for `compare`, `report`
//! and `advise`) and [`view`] (what `results list|show|export|import` show and write).
//!
//! A library: it never prints. What happened while opening (files imported or skipped) is kept
//! for the caller in [`Store::take_notes`].

mod db;
mod error;
mod identity;
mod planned;
mod resolver;
mod url;
pub mod view;

pub use error::StoreError;
pub use planned::Planned;
pub use resolver::{Latest, Named, Resolver, SideSpec};
pub use url::redact;

/// A tag as `--tag` gives it: `KEY=VALUE` with a key.
pub fn parse_tag(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("'{s}': a tag is KEY=VALUE (kernel=6.12-rt)")),
    }
}

use db::{transaction, Db, Dialect, Postgres, Sqlite, Val};
use punctual_result::ResultDoc;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A run id made from the document's content (the first 32 hex digits of its digest, see
/// `identity`), for deterministic computations (simulations): the same inputs give the same
/// document, so they give the same id, whatever the command line said about where the output goes
/// or how many threads computed it (the command is left out).
pub fn content_run_id(doc: &ResultDoc) -> Result<String, StoreError> {
    let mut d = doc.clone();
    d.command.clear();
    Ok(identity::digest(&d)?[..32].to_string())
}

/// The environment variable naming the store (a path or a `postgres://` URL).
pub const STORE_VAR: &str = "PUNCTUAL_STORE";

/// The schema version this punctual writes (the number of migrations).
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Each migration takes the schema from its index to its index + 1. Statements are written once
/// for both backends (see `db`): only `TEXT`, `BIGINT` and `BLOB`.
const MIGRATIONS: &[&[&str]] = &[
    &[
        "CREATE TABLE schema_version (version BIGINT NOT NULL)",
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "CREATE TABLE results (
        id TEXT PRIMARY KEY,
        digest TEXT NOT NULL,
        stored_at TEXT NOT NULL,
        stored_ns BIGINT NOT NULL,
        started_at TEXT NOT NULL,
        started_ns BIGINT NOT NULL,
        command TEXT NOT NULL,
        experiment TEXT,
        status TEXT NOT NULL,
        hostname TEXT NOT NULL,
        kernel TEXT NOT NULL,
        preempt TEXT NOT NULL,
        cpu_model TEXT NOT NULL,
        virtualized BIGINT NOT NULL,
        worst_series TEXT,
        worst_p99_ns BIGINT
    )",
        "CREATE INDEX results_order ON results (started_ns, stored_ns, id)",
        // Documents apart from the columns listed, so a listing reads a small table.
        "CREATE TABLE documents (
        result_id TEXT PRIMARY KEY REFERENCES results (id) ON DELETE CASCADE,
        doc TEXT NOT NULL,
        tables TEXT
    )",
        "CREATE INDEX results_command ON results (command)",
        "CREATE INDEX results_host ON results (hostname)",
        "CREATE INDEX results_digest ON results (digest)",
        "CREATE TABLE figures (
        result_id TEXT NOT NULL REFERENCES results (id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        media_type TEXT NOT NULL,
        bytes BLOB NOT NULL,
        PRIMARY KEY (result_id, name)
    )",
        "CREATE TABLE tags (
        result_id TEXT NOT NULL REFERENCES results (id) ON DELETE CASCADE,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (result_id, key)
    )",
        "CREATE INDEX tags_key_value ON tags (key, value)",
    ],
    &[
        // The run's own id (the document's `run_id`, or the store id for documents without one), so
        // an export imported anywhere is recognised; `digest` becomes a SHA-256 (see `identity`) and
        // is recomputed for every stored document by `refile`.
        "ALTER TABLE results ADD COLUMN run_id TEXT",
        "CREATE INDEX results_run_id ON results (run_id)",
    ],
];

/// The `meta` key recording that the old JSON files were imported.
const JSON_IMPORTED: &str = "json_files_imported";

/// Where results are kept: `$XDG_DATA_HOME/punctual` (usually `~/.local/share/punctual`), or
/// `PUNCTUAL_DATA_DIR` when a privileged process may believe it (`punctual_rt::env::trusted_dir`).
pub fn data_dir() -> PathBuf {
    if let Some(d) = punctual_rt::env::trusted_dir(punctual_rt::env::DATA_DIR).path() {
        return d;
    }
    dirs::data_dir()
        .unwrap_or_else(|| PathBuf::from(".local/share"))
        .join("punctual")
}

/// A stored result, or one read from a file (`id` is `None` then).
#[derive(Clone, Debug, PartialEq)]
pub struct Stored {
    pub id: Option<String>,
    pub doc: ResultDoc,
    /// (name, bytes): `etsion-latency-fig7.svg`.
    pub figures: Vec<(String, Vec<u8>)>,
    pub tags: Vec<(String, String)>,
}

impl Stored {
    /// The document as an export carries it: the tags the store holds written into it, and a
    /// document from before run ids given the id this store knows it by, so importing the export
    /// anywhere keeps both and importing it here again stores nothing new.
    pub fn exported(&self) -> ResultDoc {
        let mut d = self.doc.clone();
        for (k, v) in &self.tags {
            d.tags.insert(k.clone(), v.clone());
        }
        if d.run_id.is_none() {
            d.run_id = self.id.clone();
        }
        d
    }
}

/// What `import` did with a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Imported {
    pub id: String,
    /// False when the run was already stored (by run id or content): nothing was written.
    pub new: bool,
}

/// Whether opening may create the store (commands that write results) or only opens one that
/// exists (commands that read them: nothing is created by looking).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Create,
    Existing,
}

/// What to list. Every field narrows; the default lists everything, newest first.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// `latency`, or `trace` for every `trace ...` subcommand, or `trace analyze`.
    pub command: Option<String>,
    pub experiment: Option<String>,
    /// The hostname the result was measured on.
    pub host: Option<String>,
    /// Every one must be set on the result.
    pub tags: Vec<(String, String)>,
    /// Started at or after: RFC 3339 (`2026-11-01T08:00:00Z`), a date (`2026-11-01`, UTC), or a
    /// duration ago (`24h`, `7d`).
    pub since: Option<String>,
    /// Only the newest N.
    pub last: Option<usize>,
}

/// One line of a listing.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub id: String,
    pub started_at: String,
    pub stored_at: String,
    /// The subcommand: `latency`, `bench ctxsw`, `trace analyze`, `experiment run`.
    pub command: String,
    pub experiment: Option<String>,
    /// `ok`, `limit_exceeded`, `interrupted`, `watchdog`.
    pub status: String,
    pub hostname: String,
    pub kernel: String,
    pub preempt: String,
    pub cpu_model: String,
    pub virtualized: bool,
    pub tags: Vec<(String, String)>,
    /// The series with the highest p99, and that p99 in ns.
    pub worst_p99: Option<(String, u64)>,
}

/// A results store: a SQLite file or a PostgreSQL database.
pub struct Store {
    db: Mutex<Box<dyn Db>>,
    notes: Mutex<Vec<String>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Store({})", self.location())
    }
}

impl Store {
    /// `PUNCTUAL_STORE` when set (a path or a `postgres://` URL), else `results.db` in
    /// [`data_dir`], importing the old JSON files there on first use.
    pub fn open_default() -> Result<Store, StoreError> {
        Store::open_default_for(Access::Create)
    }

    /// The store `--store` names (`None`: [`Store::open_default`]'s), opened for `access`.
    pub fn open_for(location: Option<&str>, access: Access) -> Result<Store, StoreError> {
        match location {
            Some(l) => Store::open_with(l, access),
            None => Store::open_default_for(access),
        }
    }

    /// `PUNCTUAL_STORE` when it is set, checked: a privileged punctual uses a SQLite path only
    /// in a place nobody else could have prepared.
    fn store_var() -> Result<Option<String>, StoreError> {
        match std::env::var(STORE_VAR) {
            Ok(v) if !v.is_empty() => {
                if !is_postgres(&v) && punctual_rt::env::privileged() {
                    // Like PUNCTUAL_DATA_DIR: root writes there only if nobody else could have
                    // prepared the place.
                    let dir = Path::new(&v).parent().unwrap_or(Path::new("/"));
                    punctual_rt::env::check_private_path(dir).map_err(|why| {
                        StoreError::Invalid(format!(
                            "{STORE_VAR}={v} is not used by a privileged punctual: {why}"
                        ))
                    })?;
                }
                Ok(Some(v))
            }
            _ => Ok(None),
        }
    }

    fn open_default_for(access: Access) -> Result<Store, StoreError> {
        match Store::store_var()? {
            Some(v) => Store::open_with(&v, access),
            None => {
                let dir = data_dir();
                let db = dir.join("results.db");
                // Reading never creates a store, unless there are old result files to import.
                if access == Access::Existing && !db.exists() && !dir.join("results").is_dir() {
                    return Err(StoreError::Absent {
                        location: db.display().to_string(),
                    });
                }
                Store::open_in(&dir)
            }
        }
    }

    /// A SQLite file at `path` (created with its directory when missing), or a PostgreSQL
    /// database (`postgres://user@host/db`, `postgresql:///db?host=/run/postgresql`).
    pub fn open(url_or_path: &str) -> Result<Store, StoreError> {
        Store::open_with(url_or_path, Access::Create)
    }

    /// [`Store::open`] for `access`: with [`Access::Existing`] a missing file or a database
    /// without the schema is [`StoreError::Absent`] and nothing is created. A path is checked as
    /// output files are (`punctual_result::output::resolve`): a symbolic link on the way is
    /// followed only where no other user could have made it. A URL whose scheme is not postgres
    /// is refused rather than taken for a file name.
    pub fn open_with(url_or_path: &str, access: Access) -> Result<Store, StoreError> {
        if is_postgres(url_or_path) {
            let mut db = Postgres::connect(url_or_path)?;
            if access == Access::Existing && check_version(&mut db)? == 0 {
                return Err(StoreError::Absent {
                    location: db.location().to_string(),
                });
            }
            migrate(&mut db)?;
            return Ok(Store::new(Box::new(db)));
        }
        if let Some(scheme) = url_scheme(url_or_path) {
            return Err(unknown_scheme(url_or_path, scheme));
        }
        let path = Path::new(url_or_path);
        // A reader names a store that is there: a typo is exit 2 and creates nothing.
        if access == Access::Existing && std::fs::symlink_metadata(path).is_err() {
            return Err(StoreError::Absent {
                location: path.display().to_string(),
            });
        }
        let checked = checked_path(path)?;
        if access == Access::Existing && !checked.exists() {
            return Err(StoreError::Absent {
                location: path.display().to_string(),
            });
        }
        Store::open_sqlite(&checked, None)
    }

    /// `DIR/results.db`, importing `DIR/results/*.json` the first time (the default store, with
    /// DIR the data directory).
    pub fn open_in(dir: &Path) -> Result<Store, StoreError> {
        create_dir(dir)?;
        Store::open_sqlite(&dir.join("results.db"), Some(&dir.join("results")))
    }

    /// Two processes creating the database at once can meet in SQLite's lock upgrade (switching
    /// to WAL, the first migration), where it answers "locked" at once instead of waiting: the
    /// whole opening is retried until the busy timeout.
    fn open_sqlite(path: &Path, json_dir: Option<&Path>) -> Result<Store, StoreError> {
        let start = std::time::Instant::now();
        loop {
            match Store::open_sqlite_once(path, json_dir) {
                Err(StoreError::Busy { .. }) if start.elapsed() < db::BUSY_TIMEOUT => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                r => return r,
            }
        }
    }

    fn open_sqlite_once(path: &Path, json_dir: Option<&Path>) -> Result<Store, StoreError> {
        let mut db = Sqlite::open(path)?;
        // The version is read before anything is written: a newer or corrupt file stays as it was.
        check_version(&mut db)?;
        db.setup()?;
        migrate(&mut db)?;
        let store = Store::new(Box::new(db));
        if let Some(dir) = json_dir {
            store.import_json_once(dir)?;
        }
        Ok(store)
    }

    fn new(db: Box<dyn Db>) -> Store {
        Store {
            db: Mutex::new(db),
            notes: Mutex::new(Vec::new()),
        }
    }

    fn db(&self) -> std::sync::MutexGuard<'_, Box<dyn Db>> {
        // A panic while holding the lock leaves the connection usable: every write is a transaction.
        self.db.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Where the store is: a path, or a URL with its password hidden.
    pub fn location(&self) -> String {
        self.db().location().to_string()
    }

    /// What opening the store did that the user should read (JSON files imported or skipped).
    pub fn take_notes(&self) -> Vec<String> {
        std::mem::take(&mut *self.notes.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Keep a document with its figures (name, bytes) and tags; return its new id.
    pub fn put(
        &self,
        doc: &ResultDoc,
        figures: &[(String, Vec<u8>)],
        tags: &[(String, String)],
    ) -> Result<String, StoreError> {
        self.put_with_tables(doc, figures, tags, None)
    }

    /// [`Store::put`], also keeping the tables as the command showed them, so `results show`
    /// prints them again exactly (most tables are drawn from the run's outcome, not only from the
    /// document).
    pub fn put_with_tables(
        &self,
        doc: &ResultDoc,
        figures: &[(String, Vec<u8>)],
        tags: &[(String, String)],
        tables: Option<&str>,
    ) -> Result<String, StoreError> {
        check_tags(tags)?;
        for (i, (name, _)) in figures.iter().enumerate() {
            if name.is_empty() || figures[..i].iter().any(|(n, _)| n == name) {
                return Err(StoreError::Invalid(format!(
                    "figure names must be distinct and not empty ('{name}')"
                )));
            }
        }
        let mut db = self.db();
        transaction(&mut **db, |db| insert(db, doc, figures, tags, tables))
    }

    /// The tables as the command showed them when `id` was stored (`None` for results imported
    /// from files, whose tables were not kept).
    pub fn tables(&self, id: &str) -> Result<Option<String>, StoreError> {
        let rows = self.db().query(
            "SELECT d.tables FROM results r LEFT JOIN documents d ON d.result_id = r.id \
                 WHERE r.id = ?",
            &[id.into()],
        )?;
        match rows.into_iter().next() {
            Some(r) => Ok(r[0].opt_text()),
            None => Err(StoreError::UnknownId { spec: id.into() }),
        }
    }

    /// A result by id, unique id prefix, `latest`, `latest~N`, or the path of a result file.
    pub fn resolve(&self, spec: &str) -> Result<Stored, StoreError> {
        let id = match self.resolve_id(spec)? {
            Resolved::Id(id) => id,
            Resolved::File(path) => {
                return Ok(Stored {
                    id: None,
                    doc: read_doc(&path)?,
                    figures: Vec::new(),
                    tags: Vec::new(),
                })
            }
        };
        let mut db = self.db();
        let rows = db.query(
            "SELECT doc FROM documents WHERE result_id = ?",
            &[id.clone().into()],
        )?;
        let text = rows
            .into_iter()
            .next()
            .map(|r| r[0].text())
            .ok_or_else(|| StoreError::UnknownId { spec: spec.into() })?;
        let doc = ResultDoc::from_json(&text).map_err(|e| StoreError::Corrupt {
            location: db.location().to_string(),
            reason: format!("result {id} does not parse: {e}"),
        })?;
        let figures = db
            .query(
                "SELECT name, bytes FROM figures WHERE result_id = ? ORDER BY name",
                &[id.clone().into()],
            )?
            .into_iter()
            .map(|mut r| {
                let bytes = r.pop().map(Val::blob).unwrap_or_default();
                (r[0].text(), bytes)
            })
            .collect();
        let tags = db
            .query(
                "SELECT key, value FROM tags WHERE result_id = ? ORDER BY key",
                &[id.clone().into()],
            )?
            .into_iter()
            .map(|r| (r[0].text(), r[1].text()))
            .collect();
        Ok(Stored {
            id: Some(id),
            doc,
            figures,
            tags,
        })
    }

    /// The full id `spec` names in the store (an id, a unique prefix, `latest`, `latest~N`).
    pub fn resolve_stored_id(&self, spec: &str) -> Result<String, StoreError> {
        match self.resolve_id(spec)? {
            Resolved::Id(id) => Ok(id),
            Resolved::File(p) => Err(StoreError::Invalid(format!(
                "{} is a file, not a stored result (import it with `punctual results import`)",
                p.display()
            ))),
        }
    }

    fn resolve_id(&self, spec: &str) -> Result<Resolved, StoreError> {
        if let Some(rest) = spec.strip_prefix("latest") {
            let n: i64 = match rest.strip_prefix('~') {
                None if rest.is_empty() => 0,
                Some(n) => n.parse().map_err(|_| {
                    StoreError::Invalid(format!(
                        "'{spec}': latest~N takes a count (latest~1 is the one before the latest)"
                    ))
                })?,
                None => return self.resolve_path_or_unknown(spec),
            };
            let rows = self.db().query(
                "SELECT id FROM results ORDER BY started_ns DESC, stored_ns DESC, id DESC \
                 LIMIT 1 OFFSET ?",
                &[n.into()],
            )?;
            return rows
                .into_iter()
                .next()
                .map(|r| Resolved::Id(r[0].text()))
                .ok_or_else(|| StoreError::UnknownId { spec: spec.into() });
        }
        let is_prefix =
            !spec.is_empty() && spec.len() <= ID_LEN && spec.bytes().all(|b| b.is_ascii_hexdigit());
        if is_prefix && !Path::new(spec).is_file() {
            let prefix = spec.to_ascii_lowercase();
            let ids: Vec<String> = self
                .db()
                .query(
                    "SELECT id FROM results WHERE id LIKE ? ORDER BY id LIMIT 11",
                    &[format!("{prefix}%").into()],
                )?
                .into_iter()
                .map(|r| r[0].text())
                .collect();
            return match ids.len() {
                0 => Err(StoreError::UnknownId { spec: spec.into() }),
                1 => Ok(Resolved::Id(ids.into_iter().next().unwrap_or_default())),
                _ => {
                    let mut candidates = ids;
                    if candidates.len() > 10 {
                        candidates.truncate(10);
                        candidates.push("...".into());
                    }
                    Err(StoreError::Ambiguous {
                        prefix: spec.into(),
                        candidates,
                    })
                }
            };
        }
        self.resolve_path_or_unknown(spec)
    }

    fn resolve_path_or_unknown(&self, spec: &str) -> Result<Resolved, StoreError> {
        let path = Path::new(spec);
        if path.is_file() {
            return Ok(Resolved::File(path.to_path_buf()));
        }
        if spec.contains('/') || spec.ends_with(".json") {
            return Err(StoreError::NotAResult {
                path: path.to_path_buf(),
                reason: "no such file".into(),
            });
        }
        Err(StoreError::UnknownId { spec: spec.into() })
    }

    /// The stored results `filter` selects, newest first.
    pub fn list(&self, filter: &Filter) -> Result<Vec<Entry>, StoreError> {
        let (clause, params) = where_clause(filter)?;
        let mut sql = format!(
            "SELECT id, started_at, stored_at, command, experiment, status, hostname, kernel, \
             preempt, cpu_model, virtualized, worst_series, worst_p99_ns FROM results r{clause} \
             ORDER BY started_ns DESC, stored_ns DESC, id DESC"
        );
        let mut p = params.clone();
        if let Some(n) = filter.last {
            sql.push_str(" LIMIT ?");
            p.push(Val::Int(i64::try_from(n).unwrap_or(i64::MAX)));
        }
        let mut db = self.db();
        let rows = db.query(&sql, &p)?;
        let mut entries: Vec<Entry> = rows
            .into_iter()
            .map(|r| Entry {
                id: r[0].text(),
                started_at: r[1].text(),
                stored_at: r[2].text(),
                command: r[3].text(),
                experiment: r[4].opt_text(),
                status: r[5].text(),
                hostname: r[6].text(),
                kernel: r[7].text(),
                preempt: r[8].text(),
                cpu_model: r[9].text(),
                virtualized: r[10].int() != 0,
                tags: Vec::new(),
                worst_p99: r[11]
                    .opt_text()
                    .map(|s| (s, u64::try_from(r[12].int()).unwrap_or(0))),
            })
            .collect();
        // One query for the listed results' tags, rather than one per result: by id for a short
        // listing, with the listing's own conditions for a long one.
        let tag_rows = if entries.len() <= 200 {
            if entries.is_empty() {
                Vec::new()
            } else {
                let marks = vec!["?"; entries.len()].join(", ");
                let ids: Vec<Val> = entries.iter().map(|e| e.id.clone().into()).collect();
                db.query(
                    &format!(
                        "SELECT result_id, key, value FROM tags WHERE result_id IN ({marks}) \
                         ORDER BY key"
                    ),
                    &ids,
                )?
            }
        } else {
            db.query(
                &format!(
                    "SELECT t.result_id, t.key, t.value FROM tags t JOIN results r \
                     ON r.id = t.result_id{clause} ORDER BY t.key"
                ),
                &params,
            )?
        };
        let index: HashMap<String, usize> = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.id.clone(), i))
            .collect();
        for r in tag_rows {
            if let Some(&i) = index.get(&r[0].text()) {
                entries[i].tags.push((r[1].text(), r[2].text()));
            }
        }
        Ok(entries)
    }

    /// Remove a stored result (an id, a unique prefix, `latest`...) with its figures and tags;
    /// return its full id.
    pub fn remove(&self, id: &str) -> Result<String, StoreError> {
        let id = self.resolve_stored_id(id)?;
        let mut db = self.db();
        transaction(&mut **db, |db| {
            let key = [Val::from(id.as_str())];
            db.exec("DELETE FROM figures WHERE result_id = ?", &key)?;
            db.exec("DELETE FROM tags WHERE result_id = ?", &key)?;
            db.exec("DELETE FROM documents WHERE result_id = ?", &key)?;
            db.exec("DELETE FROM results WHERE id = ?", &key)?;
            Ok(())
        })?;
        Ok(id)
    }

    /// Store a result file (from this machine or another) with the tags it carries. A run
    /// already stored (the same run id, or the same content: see `identity`) is not stored again:
    /// its id is returned with `new: false`.
    pub fn import(&self, path: &Path) -> Result<Imported, StoreError> {
        self.import_with(path, &[], None)
    }

    /// [`Store::import`], with the figures and tables that travelled with the document (as
    /// `results export` writes them beside it). A run already stored keeps what it has.
    pub fn import_with(
        &self,
        path: &Path,
        figures: &[(String, Vec<u8>)],
        tables: Option<&str>,
    ) -> Result<Imported, StoreError> {
        let doc = read_doc(path)?;
        let mut db = self.db();
        transaction(&mut **db, |db| import_doc(db, &doc, figures, tables))
    }

    /// [`Store::import`] of a document already read.
    pub fn import_doc(&self, doc: &ResultDoc) -> Result<Imported, StoreError> {
        let mut db = self.db();
        transaction(&mut **db, |db| import_doc(db, doc, &[], None))
    }

    fn import_json_once(&self, dir: &Path) -> Result<(), StoreError> {
        let mut db = self.db();
        if done(&mut **db)? {
            return Ok(());
        }
        let notes = transaction(&mut **db, |db| {
            // Another process may have imported them while this one waited for the lock.
            if done(db)? {
                return Ok(Vec::new());
            }
            let mut notes = Vec::new();
            let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
                .map(|rd| {
                    rd.filter_map(|e| e.ok().map(|e| e.path()))
                        .filter(|p| p.extension().is_some_and(|x| x == "json"))
                        .collect()
                })
                .unwrap_or_default();
            files.sort();
            let mut imported = 0;
            for f in &files {
                match read_doc(f) {
                    Ok(doc) => {
                        if import_doc(db, &doc, &[], None)?.new {
                            imported += 1;
                        }
                    }
                    Err(e) => notes.push(format!(
                        "not imported into the results store: {e}; the file is left in place"
                    )),
                }
            }
            if imported > 0 {
                notes.push(format!(
                    "imported {imported} result file(s) from {} into the results store (the files are left in place)",
                    dir.display()
                ));
            }
            db.exec(
                "INSERT INTO meta (key, value) VALUES (?, ?)",
                &[JSON_IMPORTED.into(), punctual_result::now_rfc3339().into()],
            )?;
            Ok(notes)
        })?;
        self.notes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(notes);
        Ok(())
    }
}

enum Resolved {
    Id(String),
    File(PathBuf),
}

use identity::ID_LEN;

fn is_postgres(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

/// `mysql` in `mysql://...`: a URL rather than a path (a scheme of letters, digits, `+-.`).
fn url_scheme(s: &str) -> Option<&str> {
    let (scheme, _) = s.split_once("://")?;
    let mut chars = scheme.chars();
    (chars.next()?.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)))
    .then_some(scheme)
}

/// A `SCHEME://` that is not PostgreSQL's: refused rather than taken for a file name.
fn unknown_scheme(url_or_path: &str, scheme: &str) -> StoreError {
    StoreError::Invalid(format!(
        "--store {}: unknown URL scheme '{scheme}://', not a store this punctual knows; \
         give a file path (results.db) or postgres://USER@HOST/DB",
        crate::redact(&punctual_time::text::display_text(url_or_path, 200))
    ))
}

/// The SQLite file to open for `path`, checked as output files are: every symbolic link on the
/// way must sit in a directory only its owner (the user or root) can write. A link at the end is
/// replaced by where it leads, and the file is then opened without following links, so nothing
/// swapped in after the check is followed.
fn checked_path(path: &Path) -> Result<PathBuf, StoreError> {
    let shown = || punctual_time::text::display_path(path);
    let r = punctual_result::output::resolve(path).map_err(|e| {
        StoreError::Invalid(format!(
            "results store {}: {e}{}",
            shown(),
            if e.kind() == std::io::ErrorKind::NotFound {
                " (a store's directory is not created: make it, or check for a typo)"
            } else {
                ""
            }
        ))
    })?;
    // SQLite creates files beside the database (-wal, -shm, -journal) that another user could
    // plant as links: a privileged punctual keeps a store only in a directory nobody else writes.
    if punctual_rt::env::privileged() {
        r.dir_private().map_err(|why| {
            StoreError::Invalid(format!(
                "results store {}: its directory {} {why}; SQLite creates files beside the \
                 database (-wal, -shm) that another user could plant as links, so a privileged \
                 punctual keeps a store in a directory only it can write",
                shown(),
                r.dir_shown()
            ))
        })?;
    }
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return std::fs::canonicalize(path).map_err(|e| StoreError::Unwritable {
            path: path.to_path_buf(),
            reason: e.to_string(),
        });
    }
    Ok(path.to_path_buf())
}

fn create_dir(dir: &Path) -> Result<(), StoreError> {
    std::fs::create_dir_all(dir).map_err(|e| StoreError::Unwritable {
        path: dir.to_path_buf(),
        reason: e.to_string(),
    })
}

fn done(db: &mut dyn Db) -> Result<bool, StoreError> {
    Ok(!db
        .query(
            "SELECT value FROM meta WHERE key = ?",
            &[JSON_IMPORTED.into()],
        )?
        .is_empty())
}

fn read_doc(path: &Path) -> Result<ResultDoc, StoreError> {
    let text = std::fs::read_to_string(path).map_err(|e| StoreError::NotAResult {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    ResultDoc::from_json(&text).map_err(|e| StoreError::NotAResult {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

fn check_tags(tags: &[(String, String)]) -> Result<(), StoreError> {
    for (i, (k, v)) in tags.iter().enumerate() {
        if k.is_empty() || k.contains('=') || k.chars().chain(v.chars()).any(char::is_control) {
            return Err(StoreError::Invalid(format!(
                "--tag {k}={v}: a tag is KEY=VALUE, the key not empty, without '=' or control characters"
            )));
        }
        if tags[..i].iter().any(|(other, _)| other == k) {
            return Err(StoreError::Invalid(format!("--tag {k}: given twice")));
        }
    }
    Ok(())
}

fn read_version(db: &mut dyn Db) -> Result<i64, StoreError> {
    if !db.has_table("schema_version")? {
        return Ok(0);
    }
    Ok(db
        .query("SELECT MAX(version) FROM schema_version", &[])?
        .first()
        .map_or(0, |r| r[0].int()))
}

fn check_version(db: &mut dyn Db) -> Result<i64, StoreError> {
    let found = read_version(db)?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema {
            location: db.location().to_string(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(found)
}

fn migrate(db: &mut dyn Db) -> Result<(), StoreError> {
    if check_version(db)? == SCHEMA_VERSION {
        return Ok(());
    }
    transaction(db, |db| {
        if db.dialect() == Dialect::Postgres {
            // Machines of a fleet creating the schema at once: one does, the others wait and see it.
            db.exec("SELECT pg_advisory_xact_lock(7213013)", &[])?;
        }
        let from = check_version(db)?;
        for (i, m) in MIGRATIONS.iter().enumerate().skip(from as usize) {
            for stmt in *m {
                db.exec(stmt, &[])?;
            }
            if i == 1 {
                refile(db)?;
            }
        }
        if from == 0 {
            db.exec(
                "INSERT INTO schema_version (version) VALUES (?)",
                &[SCHEMA_VERSION.into()],
            )?;
        } else {
            db.exec(
                "UPDATE schema_version SET version = ?",
                &[SCHEMA_VERSION.into()],
            )?;
        }
        Ok(())
    })
}

/// The id: 12 hex digits of a hash of the document and the time it was stored (and a counter, in
/// the unlikely case the first is taken).
fn new_id(json: &str, now_ns: i128, attempt: u32) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    json.hash(&mut h);
    now_ns.hash(&mut h);
    std::process::id().hash(&mut h);
    attempt.hash(&mut h);
    format!("{:016x}", h.finish())[..ID_LEN].to_string()
}

/// Migration 2: every stored document's digest as `identity` computes it, and its run id (the
/// document's own, or the id it is stored under).
fn refile(db: &mut dyn Db) -> Result<(), StoreError> {
    let rows = db.query("SELECT result_id, doc FROM documents", &[])?;
    for r in rows {
        let (id, text) = (r[0].text(), r[1].text());
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
                location: db.location().to_string(),
                reason: format!("result {id} does not parse: {e}"),
            })?;
        let run_id = value
            .get("run_id")
            .and_then(|v| v.as_str())
            .filter(|r| r.len() == 32 && r.bytes().all(|b| b.is_ascii_hexdigit()))
            .map_or_else(|| id.clone(), str::to_ascii_lowercase);
        db.exec(
            "UPDATE results SET digest = ?, run_id = ? WHERE id = ?",
            &[
                identity::digest_value(value).into(),
                run_id.into(),
                id.into(),
            ],
        )?;
    }
    Ok(())
}

fn import_doc(
    db: &mut dyn Db,
    doc: &ResultDoc,
    figures: &[(String, Vec<u8>)],
    tables: Option<&str>,
) -> Result<Imported, StoreError> {
    let known = |rows: Vec<db::Row>| {
        rows.into_iter().next().map(|r| Imported {
            id: r[0].text(),
            new: false,
        })
    };
    if let Some(run) = identity::run_id(doc)? {
        let rows = db.query("SELECT id FROM results WHERE run_id = ?", &[run.into()])?;
        if let Some(found) = known(rows) {
            return Ok(found);
        }
    }
    let rows = db.query(
        "SELECT id FROM results WHERE digest = ? ORDER BY stored_ns LIMIT 1",
        &[identity::digest(doc)?.into()],
    )?;
    if let Some(found) = known(rows) {
        return Ok(found);
    }
    let id = insert(db, doc, figures, &[], tables)?;
    Ok(Imported { id, new: true })
}

fn insert(
    db: &mut dyn Db,
    doc: &ResultDoc,
    figures: &[(String, Vec<u8>)],
    tags: &[(String, String)],
    tables: Option<&str>,
) -> Result<String, StoreError> {
    let json = serde_json::to_string(doc).map_err(|e| StoreError::Invalid(e.to_string()))?;
    let run = identity::run_id(doc)?;
    // The document's tags travel with it; those given with the put (`--tag`) win.
    let mut all_tags: Vec<(String, String)> = tags.to_vec();
    for (k, v) in &doc.tags {
        if !all_tags.iter().any(|(t, _)| t == k) {
            all_tags.push((k.clone(), v.clone()));
        }
    }
    check_tags(&all_tags)?;
    let now = time::OffsetDateTime::now_utc();
    let now_ns = now.unix_timestamp_nanos();
    let mut free = |id: &str| -> Result<bool, StoreError> {
        Ok(db
            .query("SELECT 1 FROM results WHERE id = ?", &[id.into()])?
            .is_empty())
    };
    // Filed under its run id where that is free (another run may hold those 12 digits).
    let mut id = match &run {
        Some(r) if free(&r[..ID_LEN])? => r[..ID_LEN].to_string(),
        _ => String::new(),
    };
    let mut attempt = 0;
    while id.is_empty() {
        let candidate = new_id(&json, now_ns, attempt);
        if free(&candidate)? {
            id = candidate;
        }
        attempt += 1;
    }
    let run = run.unwrap_or_else(|| id.clone());

    let (command, experiment) = command_of(doc);
    let worst = doc
        .series
        .iter()
        .max_by_key(|s| s.summary.percentiles.p99)
        .map(|s| (s.name.clone(), s.summary.percentiles.p99));
    let status = serde_json::to_value(doc.status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let h = &doc.host;
    db.exec(
        "INSERT INTO results (id, digest, stored_at, stored_ns, started_at, started_ns, command, \
         experiment, status, hostname, kernel, preempt, cpu_model, virtualized, worst_series, \
         worst_p99_ns, run_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        &[
            id.clone().into(),
            identity::digest(doc)?.into(),
            punctual_result::rfc3339_at(now_ns).into(),
            clamp_ns(now_ns).into(),
            doc.started_at.clone().into(),
            // Simulations carry simulated timestamps (the epoch): they sort by when they were stored.
            clamp_ns(
                parse_rfc3339(&doc.started_at)
                    .filter(|&t| t > 0)
                    .unwrap_or(now_ns),
            )
            .into(),
            command.into(),
            experiment.into(),
            status.into(),
            h.hostname.clone().into(),
            h.kernel.clone().into(),
            h.preempt.clone().into(),
            h.cpu_model.clone().into(),
            i64::from(h.virtualized).into(),
            worst.as_ref().map(|w| w.0.clone()).into(),
            worst.map_or(Val::Null, |w| {
                Val::Int(i64::try_from(w.1).unwrap_or(i64::MAX))
            }),
            run.into(),
        ],
    )?;
    db.exec(
        "INSERT INTO documents (result_id, doc, tables) VALUES (?, ?, ?)",
        &[
            id.clone().into(),
            json.into(),
            tables.map(str::to_string).into(),
        ],
    )?;
    for (name, bytes) in figures {
        db.exec(
            "INSERT INTO figures (result_id, name, media_type, bytes) VALUES (?, ?, ?, ?)",
            &[
                id.clone().into(),
                name.clone().into(),
                media_type(name, bytes).into(),
                Val::Blob(bytes.clone()),
            ],
        )?;
    }
    for (k, v) in &all_tags {
        db.exec(
            "INSERT INTO tags (result_id, key, value) VALUES (?, ?, ?)",
            &[id.clone().into(), k.clone().into(), v.clone().into()],
        )?;
    }
    Ok(id)
}

fn clamp_ns(ns: i128) -> i64 {
    i64::try_from(ns).unwrap_or(if ns < 0 { i64::MIN } else { i64::MAX })
}

/// A figure's media type, from its name or, failing that, its first bytes.
pub fn media_type(name: &str, bytes: &[u8]) -> &'static str {
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("csv") => "text/csv",
        Some("json") => "application/json",
        Some("html") => "text/html",
        _ if bytes.starts_with(b"<svg") || bytes.starts_with(b"<?xml") => "image/svg+xml",
        _ if bytes.starts_with(b"\x89PNG") => "image/png",
        _ => "application/octet-stream",
    }
}

/// The subcommand a document came from (`latency`, `bench ctxsw`, `trace analyze`, `experiment
/// run`) and the experiment's name, from the command line recorded in it.
pub fn command_of(doc: &ResultDoc) -> (String, Option<String>) {
    let words: Vec<&str> = doc
        .command
        .iter()
        .skip(1)
        .map(String::as_str)
        .take_while(|w| !w.starts_with('-'))
        .collect();
    let is_sub = |w: &&str| {
        w.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    let command = match words.first() {
        None => "unknown".to_string(),
        Some(&w) if ["trace", "bench", "simulate", "experiment", "plan"].contains(&w) => {
            match words.get(1).copied().filter(is_sub) {
                Some(sub) => format!("{w} {sub}"),
                None => w.to_string(),
            }
        }
        Some(&w) => w.to_string(),
    };
    let experiment = doc
        .extra
        .get("experiment")
        .and_then(|v| v.as_str())
        .map(str::to_string)
        .or_else(|| {
            (words.first() == Some(&"experiment") && words.get(1) == Some(&"run"))
                .then(|| words.get(2).map(|s| s.to_string()))
                .flatten()
        });
    (command, experiment)
}

fn parse_rfc3339(s: &str) -> Option<i128> {
    time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .ok()
        .map(|t| t.unix_timestamp_nanos())
}

/// `--since`: RFC 3339, a date (UTC midnight), or a duration ago (`24h`, `30m`, `7d`).
pub fn parse_since(s: &str) -> Result<i128, StoreError> {
    if let Some(t) = parse_rfc3339(s) {
        return Ok(t);
    }
    let date_fmt = time::macros::format_description!("[year]-[month]-[day]");
    if let Ok(d) = time::Date::parse(s, &date_fmt) {
        return Ok(d.midnight().assume_utc().unix_timestamp_nanos());
    }
    let ago = match s.strip_suffix('d').and_then(|n| n.parse::<u64>().ok()) {
        Some(days) => Some(u128::from(days) * 86_400 * 1_000_000_000),
        None => punctual_time::parse_duration_ns(s).ok().map(u128::from),
    };
    match ago {
        Some(ns) => Ok(time::OffsetDateTime::now_utc().unix_timestamp_nanos() - ns as i128),
        None => Err(StoreError::Invalid(format!(
            "--since {s}: give a time (2026-11-01T08:00:00Z), a date (2026-11-01) or a duration ago (24h, 7d)"
        ))),
    }
}

fn where_clause(f: &Filter) -> Result<(String, Vec<Val>), StoreError> {
    let mut conds: Vec<String> = Vec::new();
    let mut params: Vec<Val> = Vec::new();
    if let Some(c) = &f.command {
        conds.push("(r.command = ? OR r.command LIKE ?)".into());
        params.push(c.clone().into());
        params.push(format!("{c} %").into());
    }
    if let Some(e) = &f.experiment {
        conds.push("r.experiment = ?".into());
        params.push(e.clone().into());
    }
    if let Some(h) = &f.host {
        conds.push("r.hostname = ?".into());
        params.push(h.clone().into());
    }
    for (k, v) in &f.tags {
        conds.push(
            "EXISTS (SELECT 1 FROM tags x WHERE x.result_id = r.id AND x.key = ? AND x.value = ?)"
                .into(),
        );
        params.push(k.clone().into());
        params.push(v.clone().into());
    }
    if let Some(s) = &f.since {
        conds.push("r.started_ns >= ?".into());
        params.push(clamp_ns(parse_since(s)?).into());
    }
    let clause = if conds.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conds.join(" AND "))
    };
    Ok((clause, params))
}
