//! Results named on a command line (files, ids, prefixes, `latest~N`, tags), for the commands that
//! only read them (`compare`, `report`, `advise`): files are read without touching any store, and
//! the store (`--store`, else `PUNCTUAL_STORE`, else the data directory's) is opened the first
//! time a name needs it, never created.

use crate::{Access, Entry, Filter, Store, Stored};
use punctual_result::{Failure, ResultDoc};

/// Largest result document read from a file (a 10-million-sample result is well under 1 MB:
/// histograms, not samples); a bigger file is not a result document.
const MAX_DOC_BYTES: u64 = 256 << 20;

/// A result named on the command line, with what the store keeps beside it (none for a file).
#[derive(Clone, Debug)]
pub struct Named {
    /// As the user named it (a file, an id, `latest~1`, or `tag k=v` for a selection).
    pub source: String,
    pub stored: Stored,
    /// The tables the command printed, when the result is stored.
    pub tables: Option<String>,
}

/// Which results make which side of a comparison, as the command line gave them.
#[derive(Clone, Debug, Default)]
pub struct SideSpec {
    /// Results, each a side of its own; or, with `against`, the baseline's runs.
    pub results: Vec<String>,
    /// The other side's runs (after `--`).
    pub against: Vec<String>,
    /// A side of the newest `last` stored results per tag.
    pub tags: Vec<(String, String)>,
    pub last: usize,
    /// With `tags`: only results of this command.
    pub command: Option<String>,
}

/// Opens the store on first need and resolves names in it (see the module's comment).
/// The newest whole stored result of a kind ([`Resolver::latest_of`]).
#[derive(Debug)]
pub struct Latest {
    /// How the result is named to the user.
    pub source: String,
    pub doc: ResultDoc,
    /// Newer results of the kind passed over, one line each.
    pub skipped: Vec<String>,
}

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
            let s = Store::open_for(self.location.as_deref(), Access::Existing)
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
                let tables = store.tables_of(&stored).map_err(Failure::from)?;
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
        let doc =
            ResultDoc::from_json(&text).map_err(|e| Failure::usage(format!("{spec}: {e}")))?;
        Ok(Named {
            source: spec.to_string(),
            stored: Stored {
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

    /// Every name in `specs`, in order.
    pub fn resolve_all(&mut self, specs: &[String]) -> Result<Vec<Named>, Failure> {
        specs.iter().map(|s| self.resolve(s)).collect()
    }

    /// The newest `last` stored results carrying every tag in `tags` (and of `command`, when
    /// given), oldest first. Exit 2 when none match.
    pub fn tagged(
        &mut self,
        tags: &[(String, String)],
        command: Option<&str>,
        last: usize,
    ) -> Result<Vec<Named>, Failure> {
        let filter = Filter {
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

    /// The sides `spec` names, each a list of results; at least `least` of them (exit 2 with
    /// what to give otherwise).
    pub fn sides(&mut self, spec: &SideSpec, least: usize) -> Result<Vec<Vec<Named>>, Failure> {
        if spec.command.is_some() && spec.tags.is_empty() {
            return Err(Failure::usage(
                "--command selects tagged results; add --tag KEY=VALUE",
            ));
        }
        if let Some(flag) = spec.against.iter().find(|a| a.starts_with("--")) {
            return Err(Failure::usage(format!(
                "{flag} after `--` is taken for a result; give options before `--` (compare \
                 --json - A1 A2 -- B1 B2)"
            )));
        }
        let sides = if !spec.tags.is_empty() {
            if !spec.results.is_empty() || !spec.against.is_empty() {
                return Err(Failure::usage(
                    "give results or --tag sides, not both (--tag K=V makes a side of stored results)",
                ));
            }
            spec.tags
                .iter()
                .map(|t| self.tagged(std::slice::from_ref(t), spec.command.as_deref(), spec.last))
                .collect::<Result<Vec<_>, _>>()?
        } else if !spec.against.is_empty() {
            if spec.results.is_empty() {
                return Err(Failure::usage(
                    "nothing before `--`: give the baseline's runs first (A1 A2 -- B1 B2)",
                ));
            }
            vec![
                self.resolve_all(&spec.results)?,
                self.resolve_all(&spec.against)?,
            ]
        } else {
            self.resolve_all(&spec.results)?
                .into_iter()
                .map(|n| vec![n])
                .collect()
        };
        if sides.len() < least {
            return Err(Failure::usage(format!(
                "give at least {least} results (A B), two sets of runs (A1 A2 -- B1 B2), or \
                 --tag K=V per side"
            )));
        }
        Ok(sides)
    }

    /// The newest whole stored result `filter` selects (status `ok` or `limit_exceeded`), and the
    /// newer ones skipped because they are not (interrupted, a watchdog's stop). `None` when there
    /// is no store or no such result.
    pub fn newest_whole(
        &mut self,
        filter: &Filter,
    ) -> Result<Option<(Stored, Vec<Entry>)>, Failure> {
        let Some(store) = self.store_if_any()? else {
            return Ok(None);
        };
        let mut entries = store.list(filter).map_err(Failure::from)?;
        let Some(at) = entries
            .iter()
            .position(|e| e.status == "ok" || e.status == "limit_exceeded")
        else {
            return Ok(None);
        };
        let stored = store.resolve(&entries[at].id).map_err(Failure::from)?;
        entries.truncate(at);
        Ok(Some((stored, entries)))
    }

    /// The newest whole stored `check` of `host` (or, with `experiment`, that experiment's run):
    /// named as `advise` names its sources ("stored check ID"), with a line for each newer result
    /// skipped because it is not a whole measurement.
    pub fn latest_of(
        &mut self,
        host: &str,
        experiment: Option<&str>,
    ) -> Result<Option<Latest>, Failure> {
        let filter = Filter {
            command: experiment.is_none().then(|| "check".into()),
            experiment: experiment.map(Into::into),
            host: Some(host.into()),
            last: Some(20),
            ..Default::default()
        };
        let what = experiment.unwrap_or("check");
        let Some((stored, skipped)) = self.newest_whole(&filter)? else {
            return Ok(None);
        };
        let skipped = skipped.iter().map(|e| {
            format!(
                "skipped the newer {what} {} ({}): it is not a whole measurement",
                e.id, e.status
            )
        });
        Ok(Some(Latest {
            source: format!("stored {what} {}", stored.id.unwrap_or_default()),
            doc: stored.doc,
            skipped: skipped.collect(),
        }))
    }
}
