//! `punctual results list|show|export|rm|import`: the results store (`punctual-store`).

use crate::args::tag;
use clap::{Args, Subcommand};
use punctual_result::export::{Csv, Exporter};
use punctual_result::{Failure, Table};
use punctual_session::{Env, Exit};
use punctual_store::{Access, Filter, Store, StoreError, Stored};
use punctual_time::format_ns;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ResultsArgs {
    /// The results store: a SQLite file or postgres://USER@HOST/DB (default: PUNCTUAL_STORE, or
    /// results.db in the data directory).
    #[arg(long, value_name = "PATH|URL", global = true)]
    pub store: Option<String>,
    #[command(subcommand)]
    pub cmd: ResultsCmd,
}

#[derive(Subcommand, Debug)]
pub enum ResultsCmd {
    /// List stored results, newest first.
    List(ListArgs),
    /// Show a result's tables again (ID: an id, a unique prefix, latest, latest~N, or a file).
    Show { id: String },
    /// Write a result's document (JSON), its CSV and its figures into DIR.
    Export {
        id: String,
        /// The directory to write ID.json, ID.csv, ID.txt (the tables) and the figures (ID-NAME.svg)
        /// into (created if missing).
        #[arg(short = 'o', long, value_name = "DIR")]
        output: PathBuf,
    },
    /// Remove stored results with their figures and tags.
    #[command(name = "rm")]
    Remove {
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// Store result files (from this machine or others), with the tables and figures `export`
    /// wrote beside them.
    Import {
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Only this command (`latency`; `trace` takes every trace subcommand).
    #[arg(long, value_name = "COMMAND")]
    pub command: Option<String>,
    /// Only this experiment.
    #[arg(long, value_name = "NAME")]
    pub experiment: Option<String>,
    /// Only results measured on this host (its hostname).
    #[arg(long, value_name = "HOSTNAME")]
    pub host: Option<String>,
    /// Only results with this tag (repeatable: all must match).
    #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = tag)]
    pub tags: Vec<(String, String)>,
    /// Only results started since: 2026-11-01, 2026-11-01T08:00:00Z, or a duration ago (24h, 7d).
    #[arg(long, value_name = "WHEN")]
    pub since: Option<String>,
    /// Only the newest N.
    #[arg(long, value_name = "N")]
    pub last: Option<usize>,
}

pub fn run(a: ResultsArgs, env: &Env) -> anyhow::Result<Exit> {
    // Only import creates a store: looking at one that is not there creates nothing.
    let access = match a.cmd {
        ResultsCmd::Import { .. } => Access::Create,
        _ => Access::Existing,
    };
    let store = match Store::open_for(a.store.as_deref(), access) {
        // The default store on a new machine: nothing stored yet. A named one is a typo (exit 2).
        Err(StoreError::Absent { location })
            if a.store.is_none() && matches!(a.cmd, ResultsCmd::List(_)) =>
        {
            env.show(
                &format!("No stored results: there is no results store at {location} yet.\n"),
                false,
            );
            return Ok(Exit::Ok);
        }
        r => r.map_err(Failure::from)?,
    };
    for note in store.take_notes() {
        env.note(&note);
    }
    match a.cmd {
        ResultsCmd::List(l) => list(&store, l, env),
        ResultsCmd::Show { id } => show(&store, &id, env),
        ResultsCmd::Export { id, output } => export(&store, &id, &output, env),
        ResultsCmd::Remove { ids } => {
            // Every id is resolved first: one bad id removes nothing.
            let full: Vec<String> = ids
                .iter()
                .map(|i| store.resolve_stored_id(i))
                .collect::<Result<_, _>>()
                .map_err(Failure::from)?;
            for id in full {
                store.remove(&id).map_err(Failure::from)?;
                env.show(&format!("Removed {id}\n"), false);
            }
            Ok(Exit::Ok)
        }
        ResultsCmd::Import { files } => {
            for f in files {
                let (figures, tables) = exported_beside(&f);
                let done = store
                    .import_with(&f, &figures, tables.as_deref())
                    .map_err(Failure::from)?;
                let what = if done.new {
                    "stored as"
                } else {
                    "already stored as"
                };
                env.show(&format!("{}: {what} {}\n", f.display(), done.id), false);
            }
            Ok(Exit::Ok)
        }
    }
}

/// What `results export` wrote beside `STEM.json`: the figures `STEM-NAME` and the tables
/// `STEM.txt`, so an import keeps them.
fn exported_beside(doc: &std::path::Path) -> (Vec<(String, Vec<u8>)>, Option<String>) {
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

fn list(store: &Store, l: ListArgs, env: &Env) -> anyhow::Result<Exit> {
    let filter = Filter {
        command: l.command,
        experiment: l.experiment,
        host: l.host,
        tags: l.tags,
        since: l.since,
        last: l.last,
    };
    let entries = store.list(&filter).map_err(Failure::from)?;
    let mut t = Table::new(&[
        "id",
        "started",
        "command",
        "host",
        "kernel",
        "tags",
        "worst p99",
    ]);
    for e in &entries {
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
        // A simulation's own clock starts at the epoch: when it was stored says more.
        let when = if e.started_at.starts_with("1970-01-01") {
            &e.stored_at
        } else {
            &e.started_at
        };
        // To the second: the store keeps the exact times.
        let when: String = when
            .chars()
            .take(19)
            .map(|c| if c == 'T' { ' ' } else { c })
            .collect();
        t.row([
            e.id.clone(),
            when,
            command,
            e.hostname.clone(),
            e.kernel.clone(),
            tags.join(","),
            worst,
        ]);
    }
    if entries.is_empty() {
        t.note(format!(
            "no stored results match (store: {})",
            store.location()
        ));
    }
    let mut text = t.render();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    env.show(&text, false);
    Ok(Exit::Ok)
}

fn show(store: &Store, spec: &str, env: &Env) -> anyhow::Result<Exit> {
    let stored = store.resolve(spec).map_err(Failure::from)?;
    let d = &stored.doc;
    let mut text = format!(
        "Result {} · {} · {} on {} ({}, {}) · {}",
        stored.id.as_deref().unwrap_or(spec),
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
    let mut text = punctual_result::table::wrap(&text) + "\n\n";
    let tables = match &stored.id {
        Some(id) => store.tables(id).map_err(Failure::from)?,
        None => None,
    };
    match tables {
        Some(t) => {
            // Shown as the command showed them, but nothing from a store may steer the terminal.
            for line in t.lines() {
                text.push_str(&punctual_time::text::display_text(line, 4_000));
                text.push('\n');
            }
        }
        None => {
            text.push_str(&punctual_result::table::series_table(d).render());
            text.push_str(
                "\n(The command's own tables were not kept with this result (it was imported from \
                 a file): this is the summary of each series in its document.)\n",
            );
        }
    }
    if !stored.figures.is_empty() {
        let names: Vec<&str> = stored.figures.iter().map(|(n, _)| n.as_str()).collect();
        text.push_str(&punctual_result::table::wrap(&format!(
            "\nFigures: {} (punctual results export {} -o DIR)\n",
            names.join(", "),
            stored.id.as_deref().unwrap_or(spec)
        )));
    }
    env.show(&text, false);
    Ok(Exit::Ok)
}

fn export(store: &Store, spec: &str, dir: &std::path::Path, env: &Env) -> anyhow::Result<Exit> {
    let stored: Stored = store.resolve(spec).map_err(Failure::from)?;
    std::fs::create_dir_all(dir)
        .map_err(|e| Failure::usage(format!("-o {}: {e}", dir.display())))?;
    let stem = stored.id.clone().unwrap_or_else(|| {
        std::path::Path::new(spec)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "result".into())
    });
    let mut files: Vec<(String, Vec<u8>)> = vec![
        // With its tags and run id, so importing it anywhere keeps both and stores it once.
        (
            format!("{stem}.json"),
            stored.exported().to_json().into_bytes(),
        ),
        (format!("{stem}.csv"), Csv.export(&stored.exported())),
    ];
    // The tables as the command printed them, so an import shows them again.
    let tables = match stored.id.as_deref() {
        Some(id) => store.tables(id).map_err(Failure::from)?,
        None => None,
    };
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
    let mut text = String::new();
    for (name, bytes) in files {
        let path = dir.join(&name);
        punctual_result::output::write_atomic(&path, &bytes)
            .map_err(|e| Failure::system(format!("writing {}: {e}", path.display())))?;
        text.push_str(&format!("Wrote {}\n", path.display()));
    }
    env.show(&text, false);
    Ok(Exit::Ok)
}
