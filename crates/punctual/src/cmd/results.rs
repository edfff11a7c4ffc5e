//! `punctual results list|show|export|rm|import`: the results store (`punctual-store`).

use crate::args::parse_tag;
use clap::{Args, Subcommand};
use punctual_result::Failure;
use punctual_session::{Env, Exit};
use punctual_store::{view, Access, Filter, Store, StoreError};
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
    #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = parse_tag)]
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
    let mut text = String::new();
    match a.cmd {
        ResultsCmd::List(l) => {
            let filter = Filter {
                command: l.command,
                experiment: l.experiment,
                host: l.host,
                tags: l.tags,
                since: l.since,
                last: l.last,
            };
            let entries = store.list(&filter).map_err(Failure::from)?;
            text = view::list_table(&entries, &store.location()).render();
            if !text.ends_with('\n') {
                text.push('\n');
            }
        }
        ResultsCmd::Show { id } => text = store.show(&id).map_err(Failure::from)?,
        ResultsCmd::Export { id, output } => {
            for path in store.export(&id, &output)? {
                text.push_str(&format!("Wrote {}\n", path.display()));
            }
        }
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
        }
        ResultsCmd::Import { files } => {
            for f in files {
                let done = store.import_exported(&f).map_err(Failure::from)?;
                let what = match done.new {
                    true => "stored as",
                    false => "already stored as",
                };
                env.show(&format!("{}: {what} {}\n", f.display(), done.id), false);
            }
        }
    }
    if !text.is_empty() {
        env.show(&text, false);
    }
    Ok(Exit::Ok)
}
