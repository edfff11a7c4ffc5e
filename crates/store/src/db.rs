//! The two backends behind one small interface: statements written once with `?` placeholders and
//! portable types (`TEXT`, `BIGINT`, `BLOB`), translated for PostgreSQL (`$n`, `BYTEA`), so the
//! schema and every query are the same in a laptop's SQLite file and a fleet's server.

use crate::StoreError;
use std::path::Path;
use std::time::Duration;

/// A value bound to or read from a statement.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Val {
    Null,
    Int(i64),
    Text(String),
    Blob(Vec<u8>),
}

impl Val {
    pub fn int(&self) -> i64 {
        match self {
            Val::Int(i) => *i,
            Val::Text(t) => t.parse().unwrap_or(0),
            _ => 0,
        }
    }
    pub fn text(&self) -> String {
        match self {
            Val::Text(t) => t.clone(),
            Val::Int(i) => i.to_string(),
            Val::Blob(b) => String::from_utf8_lossy(b).into_owned(),
            Val::Null => String::new(),
        }
    }
    pub fn opt_text(&self) -> Option<String> {
        match self {
            Val::Null => None,
            v => Some(v.text()),
        }
    }
    pub fn blob(self) -> Vec<u8> {
        match self {
            Val::Blob(b) => b,
            Val::Text(t) => t.into_bytes(),
            _ => Vec::new(),
        }
    }
}

impl From<&str> for Val {
    fn from(s: &str) -> Val {
        Val::Text(s.into())
    }
}
impl From<String> for Val {
    fn from(s: String) -> Val {
        Val::Text(s)
    }
}
impl From<i64> for Val {
    fn from(i: i64) -> Val {
        Val::Int(i)
    }
}
impl From<Option<String>> for Val {
    fn from(s: Option<String>) -> Val {
        s.map_or(Val::Null, Val::Text)
    }
}

pub(crate) type Row = Vec<Val>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

/// One connection to a store.
pub(crate) trait Db: Send {
    fn dialect(&self) -> Dialect;
    /// Where it is, for messages (a URL with its password hidden).
    fn location(&self) -> &str;
    fn exec(&mut self, sql: &str, params: &[Val]) -> Result<u64, StoreError>;
    fn query(&mut self, sql: &str, params: &[Val]) -> Result<Vec<Row>, StoreError>;
    fn has_table(&mut self, name: &str) -> Result<bool, StoreError>;
    /// Start a transaction that holds the write lock from its first statement (SQLite's
    /// `BEGIN IMMEDIATE`: a deferred one could fail to upgrade its lock without waiting).
    fn begin(&mut self) -> Result<(), StoreError>;
}

/// Run `f` in a transaction: committed when it returns Ok, rolled back otherwise.
pub(crate) fn transaction<T>(
    db: &mut dyn Db,
    f: impl FnOnce(&mut dyn Db) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    db.begin()?;
    match f(db) {
        Ok(v) => {
            db.exec("COMMIT", &[])?;
            Ok(v)
        }
        Err(e) => {
            let _ = db.exec("ROLLBACK", &[]);
            Err(e)
        }
    }
}

// ---------------------------------------------------------------- SQLite

pub(crate) struct Sqlite {
    conn: rusqlite::Connection,
    location: String,
}

/// Two punctual processes storing at once wait for each other this long at most.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

impl Sqlite {
    pub fn open(path: &Path) -> Result<Sqlite, StoreError> {
        let location = path.display().to_string();
        // No URI names (a path is a path), and no symbolic link at the file itself: the caller
        // resolved a trusted one already (`checked_path`).
        use rusqlite::OpenFlags as F;
        let flags = F::SQLITE_OPEN_READ_WRITE
            | F::SQLITE_OPEN_CREATE
            | F::SQLITE_OPEN_NO_MUTEX
            | F::SQLITE_OPEN_NOFOLLOW;
        let conn = rusqlite::Connection::open_with_flags(path, flags)
            .map_err(|e| sqlite_err(&location, e))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| sqlite_err(&location, e))?;
        Ok(Sqlite { conn, location })
    }

    /// WAL (readers never wait for the writer, writers queue on the busy timeout), after the
    /// schema version was read: a database from a newer punctual is never written to.
    pub fn setup(&mut self) -> Result<(), StoreError> {
        if self
            .conn
            .is_readonly(rusqlite::MAIN_DB)
            .map_err(|e| sqlite_err(&self.location, e))?
        {
            return Err(StoreError::Unwritable {
                path: self.location.clone().into(),
                reason: "the database opens read-only".into(),
            });
        }
        let mode: String = self
            .conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(|e| sqlite_err(&self.location, e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Db {
                location: self.location.clone(),
                reason: format!("cannot switch to WAL (journal mode stays {mode})"),
            });
        }
        self.conn
            .execute_batch("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;")
            .map_err(|e| sqlite_err(&self.location, e))
    }
}

fn sqlite_err(location: &str, e: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode as C;
    let code = e.sqlite_error_code();
    match code {
        Some(C::NotADatabase | C::DatabaseCorrupt) => StoreError::Corrupt {
            location: location.into(),
            reason: e.to_string(),
        },
        Some(C::DatabaseBusy | C::DatabaseLocked) => StoreError::Busy {
            location: location.into(),
            reason: e.to_string(),
        },
        Some(C::ReadOnly | C::CannotOpen | C::PermissionDenied | C::DiskFull) => {
            StoreError::Unwritable {
                path: location.into(),
                reason: e.to_string(),
            }
        }
        _ => StoreError::Db {
            location: location.into(),
            reason: e.to_string(),
        },
    }
}

impl rusqlite::ToSql for Val {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match self {
            Val::Null => ValueRef::Null,
            Val::Int(i) => ValueRef::Integer(*i),
            Val::Text(t) => ValueRef::Text(t.as_bytes()),
            Val::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

impl Db for Sqlite {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }
    fn location(&self) -> &str {
        &self.location
    }
    fn exec(&mut self, sql: &str, params: &[Val]) -> Result<u64, StoreError> {
        let n = if params.is_empty() && !sql.contains('?') {
            self.conn.execute_batch(sql).map(|_| 0)
        } else {
            self.conn
                .prepare_cached(sql)
                .and_then(|mut st| st.execute(rusqlite::params_from_iter(params.iter())))
                .map(|n| n as u64)
        };
        n.map_err(|e| sqlite_err(&self.location, e))
    }
    fn query(&mut self, sql: &str, params: &[Val]) -> Result<Vec<Row>, StoreError> {
        let run = || -> rusqlite::Result<Vec<Row>> {
            let mut st = self.conn.prepare_cached(sql)?;
            let n = st.column_count();
            let mut rows = st.query(rusqlite::params_from_iter(params.iter()))?;
            let mut out = Vec::new();
            while let Some(r) = rows.next()? {
                let mut row = Vec::with_capacity(n);
                for i in 0..n {
                    use rusqlite::types::ValueRef;
                    row.push(match r.get_ref(i)? {
                        ValueRef::Null => Val::Null,
                        ValueRef::Integer(v) => Val::Int(v),
                        ValueRef::Real(v) => Val::Int(v as i64),
                        ValueRef::Text(t) => Val::Text(String::from_utf8_lossy(t).into_owned()),
                        ValueRef::Blob(b) => Val::Blob(b.to_vec()),
                    });
                }
                out.push(row);
            }
            Ok(out)
        };
        run().map_err(|e| sqlite_err(&self.location, e))
    }
    fn has_table(&mut self, name: &str) -> Result<bool, StoreError> {
        let rows = self.query(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?",
            &[name.into()],
        )?;
        Ok(rows.first().is_some_and(|r| r[0].int() > 0))
    }
    fn begin(&mut self) -> Result<(), StoreError> {
        self.exec("BEGIN IMMEDIATE", &[])?;
        Ok(())
    }
}

// ---------------------------------------------------------------- PostgreSQL

pub(crate) struct Postgres {
    client: postgres::Client,
    location: String,
}

impl Postgres {
    pub fn connect(url: &str) -> Result<Postgres, StoreError> {
        let location = crate::redact(url);
        let mut config: postgres::Config = url
            .parse()
            .map_err(|e| StoreError::Invalid(format!("{location}: not a PostgreSQL URL ({e})")))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        let client = config
            .connect(postgres::NoTls)
            .map_err(|e| StoreError::Unreachable {
                location: location.clone(),
                reason: pg_reason(&e),
            })?;
        Ok(Postgres { client, location })
    }

    fn err(&self, e: postgres::Error) -> StoreError {
        if e.is_closed() {
            StoreError::Unreachable {
                location: self.location.clone(),
                reason: pg_reason(&e),
            }
        } else {
            StoreError::Db {
                location: self.location.clone(),
                reason: pg_reason(&e),
            }
        }
    }
}

/// The server's own message when there is one (the Display of a client error is only "db error").
fn pg_reason(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => db.message().to_string(),
        None => {
            let mut s = e.to_string();
            let mut src = std::error::Error::source(e);
            while let Some(cause) = src {
                s.push_str(&format!(": {cause}"));
                src = cause.source();
            }
            s
        }
    }
}

/// `?` placeholders to `$1, $2...`, and SQLite's type names to PostgreSQL's.
fn pg_sql(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push_str(&format!("${n}"));
        } else {
            out.push(c);
        }
    }
    out.replace(" BLOB", " BYTEA")
}

impl postgres::types::ToSql for Val {
    fn to_sql(
        &self,
        ty: &postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> Result<postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        use postgres::types::Type;
        match self {
            Val::Null => Ok(postgres::types::IsNull::Yes),
            Val::Int(i) if *ty == Type::INT4 => i32::try_from(*i)?.to_sql(ty, out),
            Val::Int(i) => i.to_sql(ty, out),
            Val::Text(t) => t.as_str().to_sql(ty, out),
            Val::Blob(b) => b.as_slice().to_sql(ty, out),
        }
    }
    fn accepts(_: &postgres::types::Type) -> bool {
        true
    }
    postgres::types::to_sql_checked!();
}

impl Db for Postgres {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }
    fn location(&self) -> &str {
        &self.location
    }
    fn exec(&mut self, sql: &str, params: &[Val]) -> Result<u64, StoreError> {
        let sql = pg_sql(sql);
        let r = if params.is_empty() {
            self.client.batch_execute(&sql).map(|_| 0)
        } else {
            let p: Vec<&(dyn postgres::types::ToSql + Sync)> = params
                .iter()
                .map(|v| v as &(dyn postgres::types::ToSql + Sync))
                .collect();
            self.client.execute(&sql, &p)
        };
        r.map_err(|e| self.err(e))
    }
    fn query(&mut self, sql: &str, params: &[Val]) -> Result<Vec<Row>, StoreError> {
        use postgres::types::Type;
        let sql = pg_sql(sql);
        let p: Vec<&(dyn postgres::types::ToSql + Sync)> = params
            .iter()
            .map(|v| v as &(dyn postgres::types::ToSql + Sync))
            .collect();
        let rows = self.client.query(&sql, &p).map_err(|e| self.err(e))?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let mut row = Vec::with_capacity(r.len());
            for (i, col) in r.columns().iter().enumerate() {
                let ty = col.type_();
                let v = if *ty == Type::INT8 {
                    r.try_get::<_, Option<i64>>(i).map(|v| v.map(Val::Int))
                } else if *ty == Type::INT4 {
                    r.try_get::<_, Option<i32>>(i)
                        .map(|v| v.map(|v| Val::Int(v.into())))
                } else if *ty == Type::BYTEA {
                    r.try_get::<_, Option<Vec<u8>>>(i).map(|v| v.map(Val::Blob))
                } else {
                    r.try_get::<_, Option<String>>(i).map(|v| v.map(Val::Text))
                };
                row.push(v.map_err(|e| self.err(e))?.unwrap_or(Val::Null));
            }
            out.push(row);
        }
        Ok(out)
    }
    fn has_table(&mut self, name: &str) -> Result<bool, StoreError> {
        let rows = self.query(
            "SELECT COUNT(*) FROM information_schema.tables \
             WHERE table_schema = current_schema() AND table_name = ?",
            &[name.into()],
        )?;
        Ok(rows.first().is_some_and(|r| r[0].int() > 0))
    }
    fn begin(&mut self) -> Result<(), StoreError> {
        self.exec("BEGIN", &[])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_and_types_translate_for_postgres() {
        assert_eq!(
            pg_sql("INSERT INTO t (a, b) VALUES (?, ?)"),
            "INSERT INTO t (a, b) VALUES ($1, $2)"
        );
        assert_eq!(
            pg_sql("CREATE TABLE f (b BLOB)"),
            "CREATE TABLE f (b BYTEA)"
        );
    }
}
