//! What `punctual results` shows and writes of stored results: the listing's table, a result's
//! text (its tables as the command printed them), and the files an export writes and an import
//! takes back. Pure text and bytes; the binary prints them.

use crate::{Entry, Store, StoreError, Stored};
use punctual_result::export::{Csv, Exporter};
use punctual_result::table::{self, Table};
use punctual_result::Failure;
use punctual_time::format_ns;
use std::path::{Path, PathBuf};

/// The listing: one row per entry, newest first as given; a note naming the store when empty.
pub fn list_table(entries: &[Entry], location: &str) -> Table {
    let mut t = Table::new(&[
        "id",
        "started",
        "command",
        "host",
        "kernel",
        "tags",
        "worst p99",
    ]);
    for e in entries {
        let mut command = match &e.experiment {
            Some(x) if e.command.starts_with("experiment") => format!("experiment {x}"),
            Some(x) => format!("{} ({x})", e.command),
            None => e.command.clone(),
        };
        if e.status != "ok" {
            command.push_str(&format!(" [{}]", e.status));
        }
        let tags: Vec<String> = e.tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let worst = e
            .worst_p99
            .as_ref()
            .map(|(s, ns)| format!("{} ({s})", format_ns(*ns)))
            .unwrap_or_default();
        t.row([
            e.id.clone(),
            listed_time(e),
            command,
            e.hostname.clone(),
            e.kernel.clone(),
            tags.join(","),
            worst,
        ]);
    }
    if entries.is_empty() {
        t.note(format!("no stored results match (store: {location})"));
    }
    t
}

/// When an entry was measured, to the second (the store keeps the exact times); a simulation's
/// own clock starts at the epoch, so when it was stored says more.
fn listed_time(e: &Entry) -> String {
    let when = if e.started_at.starts_with("1970-01-01") {
        &e.stored_at
    } else {
        &e.started_at
    };
    when.chars()
        .take(19)
        .map(|c| if c == 'T' { ' ' } else { c })
        .collect()
}

/// `results show`: the heading (id, command, when, host, status, tags), then the tables as the
/// command printed them (`tables`; for a result without them, each series' summary), then the
/// figures kept with it. `spec` names a result that has no id (a file).
pub fn show_text(stored: &Stored, tables: Option<&str>, spec: &str) -> String {
    let d = &stored.doc;
    let name = stored.id.as_deref().unwrap_or(spec);
    let mut text = format!(
        "Result {name} · {} · {} on {} ({}, {}) · {}",
        std::iter::once("punctual")
            .chain(d.command.iter().skip(1).map(String::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        d.started_at,
        d.host.hostname,
        d.host.kernel,
        d.host.preempt,
        serde_json::to_value(d.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
    );
    if !stored.tags.is_empty() {
        let tags: Vec<String> = stored
            .tags
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        text.push_str(&format!("\nTags: {}", tags.join(", ")));
    }
    let mut text = table::wrap(&text) + "\n\n";
    match tables {
        Some(t) => {
            // Shown as the command showed them, but nothing from a store may steer the terminal.
            for line in t.lines() {
                text.push_str(&punctual_time::text::display_text(line, 4_000));
                text.push('\n');
            }
        }
        None => {
            text.push_str(&table::series_table(d).render());
            text.push_str(
                "\n(The command's own tables were not kept with this result (it was imported from \
                 a file): this is the summary of each series in its document.)\n",
            );
        }
    }
    if !stored.figures.is_empty() {
        let names: Vec<&str> = stored.figures.iter().map(|(n, _)| n.as_str()).collect();
        text.push_str(&table::wrap(&format!(
            "\nFigures: {} (punctual results export {name} -o DIR)\n",
            names.join(", "),
        )));
    }
    text
}

/// The files `results export` writes for a result, by name: `STEM.json` (with its tags and run
/// id, so importing it anywhere keeps both and stores it once), `STEM.csv`, `STEM.txt` (the
/// tables, when kept) and `STEM-NAME` per figure. STEM is the id, else the file's stem.
pub fn export_files(stored: &Stored, tables: Option<String>, spec: &str) -> Vec<(String, Vec<u8>)> {
    let stem = stored.id.clone().unwrap_or_else(|| {
        Path::new(spec)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "result".into())
    });
    let exported = stored.exported();
    let mut files: Vec<(String, Vec<u8>)> = vec![
        (format!("{stem}.json"), exported.to_json().into_bytes()),
        (format!("{stem}.csv"), Csv.export(&exported)),
    ];
    if let Some(t) = tables {
        files.push((format!("{stem}.txt"), t.into_bytes()));
    }
    for (name, bytes) in &stored.figures {
        // A name from a shared store never leaves DIR; the id in front keeps two runs of one
        // experiment in one directory apart (issue 31: the second overwrote the first's).
        let safe: String = name
            .chars()
            .map(|c| if c == '/' || c.is_control() { '_' } else { c })
            .collect();
        let safe = safe.trim_start_matches('.');
        files.push((
            format!("{stem}-{}", if safe.is_empty() { "figure" } else { safe }),
            bytes.clone(),
        ));
    }
    files
}

/// Write [`export_files`] into `dir` (created if missing), each file atomically; the paths
/// written. A directory that cannot be made is the user's (exit 2), a failed write the system's.
pub fn write_export(
    stored: &Stored,
    tables: Option<String>,
    spec: &str,
    dir: &Path,
) -> Result<Vec<PathBuf>, Failure> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Failure::usage(format!("-o {}: {e}", dir.display())))?;
    let mut written = Vec::new();
    for (name, bytes) in export_files(stored, tables, spec) {
        let path = dir.join(&name);
        punctual_result::output::write_atomic(&path, &bytes)
            .map_err(|e| Failure::system(format!("writing {}: {e}", path.display())))?;
        written.push(path);
    }
    Ok(written)
}

/// What `results export` wrote beside `STEM.json`: the figures `STEM-NAME.svg` and the tables
/// `STEM.txt`, so an import keeps them.
pub fn exported_beside(doc: &Path) -> (Vec<(String, Vec<u8>)>, Option<String>) {
    let (Some(dir), Some(stem)) = (doc.parent(), doc.file_stem().and_then(|s| s.to_str())) else {
        return (Vec::new(), None);
    };
    let prefix = format!("{stem}-");
    let mut figures: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let figure = name.strip_prefix(&prefix)?.to_string();
            (figure.ends_with(".svg") && e.file_type().ok()?.is_file())
                .then(|| Some((figure, std::fs::read(e.path()).ok()?)))?
        })
        .collect();
    figures.sort();
    let tables = std::fs::read_to_string(dir.join(format!("{stem}.txt"))).ok();
    (figures, tables)
}

impl Store {
    /// The tables kept with a stored result (`None` for a file, or a result stored without them).
    pub fn tables_of(&self, stored: &Stored) -> Result<Option<String>, StoreError> {
        match &stored.id {
            Some(id) => self.tables(id),
            None => Ok(None),
        }
    }

    /// `results show SPEC`'s text ([`show_text`]).
    pub fn show(&self, spec: &str) -> Result<String, StoreError> {
        let stored = self.resolve(spec)?;
        let tables = self.tables_of(&stored)?;
        Ok(show_text(&stored, tables.as_deref(), spec))
    }

    /// `results export SPEC -o DIR` ([`write_export`]).
    pub fn export(&self, spec: &str, dir: &Path) -> Result<Vec<PathBuf>, Failure> {
        let stored = self.resolve(spec).map_err(Failure::from)?;
        let tables = self.tables_of(&stored).map_err(Failure::from)?;
        write_export(&stored, tables, spec, dir)
    }

    /// Import a result file with the figures and tables `results export` wrote beside it.
    pub fn import_exported(&self, path: &Path) -> Result<crate::Imported, StoreError> {
        let (figures, tables) = exported_beside(path);
        self.import_with(path, &figures, tables.as_deref())
    }
}
