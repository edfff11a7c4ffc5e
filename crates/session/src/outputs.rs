//! Where a run's results go: exports (`--json`, `--csv`, `--hist`), figures, the results store,
//! the limit, and the tables. Every path is checked when the [`Outputs`] is built, before anything
//! runs, so a bad path never costs a measurement; every file is written atomically at the end, so an
//! interrupted run never leaves half a file.

use crate::{Env, Report};
use punctual_result::export::Exporter;
use punctual_result::{Failure, Output, ResultDoc};
use std::path::{Path, PathBuf};

/// Whether two output paths end in the same file: the same inode when both exist, else the same
/// name in the same (canonical) directory, so `out.json` and `./out.json` match.
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
        return (x.dev(), x.ino()) == (y.dev(), y.ino());
    }
    let place = |p: &Path| {
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        (
            std::fs::canonicalize(&dir).unwrap_or(dir),
            p.file_name().map(|n| n.to_owned()),
        )
    };
    place(a) == place(b)
}

/// Where figures go.
#[derive(Clone, Debug)]
pub enum FigureTarget {
    /// `NAME.svg` for each figure in this directory.
    Dir(PathBuf),
    /// The first figure, to this file or stdout (`--plot FILE`).
    File { flag: &'static str, out: Output },
}

#[derive(Default)]
pub struct Outputs {
    exports: Vec<(&'static str, Output, Box<dyn Exporter>)>,
    figures: Option<FigureTarget>,
    /// The results store, checked when the outputs were (opened if it existed, else created by
    /// the first result written), and the tags to store with.
    store: Option<(punctual_store::Planned, Vec<(String, String)>)>,
    /// `--fail-above`: exit 1 when the measurement's worst value is above.
    pub fail_above: Option<u64>,
    /// `--repeat N`: the run being written (1-based) when there are several; files get `-K`.
    run: std::cell::Cell<Option<u32>>,
    /// Ids the store gave the documents written so far.
    stored: std::cell::RefCell<Vec<String>>,
}

pub use punctual_result::output::numbered;

impl Outputs {
    pub fn new() -> Outputs {
        Outputs::default()
    }

    fn stdout_count(&self) -> usize {
        let figure =
            matches!(&self.figures, Some(FigureTarget::File { out, .. }) if out.is_stdout());
        self.exports
            .iter()
            .filter(|(_, o, _)| o.is_stdout())
            .count()
            + usize::from(figure)
    }

    fn check(&self, flag: &str, out: &Output) -> Result<(), Failure> {
        out.check_writable()
            .map_err(|e| Failure::usage(format!("{flag}: {e}")))?;
        if out.is_stdout() && self.stdout_count() > 0 {
            return Err(Failure::usage(format!(
                "{flag} -: only one export can go to stdout"
            )));
        }
        if let Output::File(path) = out {
            let figure = match &self.figures {
                Some(FigureTarget::File {
                    flag,
                    out: Output::File(p),
                }) => Some((*flag, p)),
                _ => None,
            };
            let others = self
                .exports
                .iter()
                .filter_map(|(f, o, _)| match o {
                    Output::File(p) => Some((*f, p)),
                    Output::Stdout => None,
                })
                .chain(figure);
            for (other, p) in others {
                if same_file(path, p) {
                    return Err(Failure::usage(format!(
                        "{flag} and {other} name the same file {}: the second would replace the first; give each its own",
                        path.display()
                    )));
                }
            }
        }
        Ok(())
    }

    /// Export the document with `exporter` to `out` (given as `flag`, e.g. `--json`).
    pub fn export(
        mut self,
        flag: &'static str,
        out: Option<&Output>,
        exporter: impl Exporter + 'static,
    ) -> Result<Outputs, Failure> {
        if let Some(o) = out {
            self.check(flag, o)?;
            self.exports.push((flag, o.clone(), Box::new(exporter)));
        }
        Ok(self)
    }

    /// `--json FILE` and `--csv FILE`, the exports every measuring command takes.
    pub fn json_csv(self, json: Option<&Output>, csv: Option<&Output>) -> Result<Outputs, Failure> {
        self.export("--json", json, punctual_result::export::Json)?
            .export("--csv", csv, punctual_result::export::Csv)
    }

    /// Write the figures to `dir` (created when missing), e.g. `--figures DIR`.
    pub fn figures_dir(mut self, flag: &str, dir: PathBuf) -> Result<Outputs, Failure> {
        std::fs::create_dir_all(&dir)
            .map_err(|e| Failure::usage(format!("{flag} {}: {e}", dir.display())))?;
        Output::File(dir.join("figure.svg"))
            .check_writable()
            .map_err(|e| Failure::usage(format!("{flag}: {e}")))?;
        self.figures = Some(FigureTarget::Dir(dir));
        Ok(self)
    }

    /// Write the first figure to `out` (`--plot FILE`).
    pub fn figure_file(
        mut self,
        flag: &'static str,
        out: Option<&Output>,
    ) -> Result<Outputs, Failure> {
        if let Some(o) = out {
            self.check(flag, o)?;
            self.figures = Some(FigureTarget::File {
                flag,
                out: o.clone(),
            });
        }
        Ok(self)
    }

    /// Keep the document, its figures and `tags` in the results store at `location` (`--store`;
    /// `None`: `PUNCTUAL_STORE` or the data directory). The store is checked now, so an
    /// unwritable one fails before anything is measured (exit 3, naming `--no-store`); one that
    /// does not exist yet is created by [`Outputs::write`], so a refusal after this creates none.
    pub fn store(
        mut self,
        location: Option<&str>,
        tags: Vec<(String, String)>,
    ) -> Result<Outputs, Failure> {
        self.store = Some((crate::store::plan(location)?, tags));
        Ok(self)
    }

    /// Whether the document goes into the results store.
    pub fn stores(&self) -> bool {
        self.store.is_some()
    }

    /// Whether a run's results are kept anywhere but the terminal: an export, figures, the store.
    pub fn keeps_results(&self) -> bool {
        !self.exports.is_empty() || self.figures.is_some() || self.store.is_some()
    }

    /// Check that `n` runs can each write their own files (`out-1.json` ... `out-N.json`): an
    /// export to stdout cannot be told apart, so it is refused for `n > 1`.
    pub fn repeated(self, n: u32) -> Result<Outputs, Failure> {
        if n <= 1 {
            return Ok(self);
        }
        let figure = match &self.figures {
            Some(FigureTarget::File { flag, out }) => Some((*flag, out)),
            _ => None,
        };
        for (flag, out) in self.exports.iter().map(|(f, o, _)| (*f, o)).chain(figure) {
            match out {
                Output::Stdout => {
                    return Err(Failure::usage(format!(
                        "{flag} -: with --repeat each run writes its own file; give a file name \
                         (FILE becomes FILE-1, FILE-2 ...)"
                    )))
                }
                Output::File(p) => {
                    for k in 1..=n {
                        Output::File(numbered(p, k))
                            .check_writable()
                            .map_err(|e| Failure::usage(format!("{flag}: {e}")))?;
                    }
                }
            }
        }
        if matches!(self.figures, Some(FigureTarget::Dir(_))) {
            return Err(Failure::usage(
                "figures of repeated runs would replace each other in one directory; \
                 drop --repeat or the figures",
            ));
        }
        Ok(self)
    }

    /// The run `write` writes next (1-based), for `--repeat`.
    pub fn set_run(&self, k: u32) {
        self.run.set(Some(k));
    }

    /// Ids the store gave the documents written so far, in order.
    pub fn stored_ids(&self) -> Vec<String> {
        self.stored.borrow().clone()
    }

    fn place(&self, out: &Output) -> Output {
        match (out, self.run.get()) {
            (Output::File(p), Some(k)) => Output::File(numbered(p, k)),
            _ => out.clone(),
        }
    }

    pub fn fail_above(mut self, limit: Option<u64>) -> Outputs {
        self.fail_above = limit;
        self
    }

    /// Whether the tables may use stdout (they move to stderr when an export goes there).
    pub fn stdout_free(&self) -> bool {
        self.stdout_count() == 0
    }

    /// Write everything at the end of a run: exports, figures, the store, then the tables (with
    /// where the figures and the stored result went).
    /// The document is given its run id and the store's tags first, so every copy carries them.
    pub fn write(&self, doc: &ResultDoc, report: &Report, env: &Env) -> Result<(), Failure> {
        let mut doc = doc.clone();
        if doc.run_id.is_none() {
            // A simulation gives the same document for the same inputs: its id follows suit.
            let simulated =
                doc.settings.extra.get("clock").and_then(|c| c.as_str()) == Some("simulated");
            doc.run_id = Some(match simulated {
                true => punctual_store::content_run_id(&doc)?,
                false => env.run_id(),
            });
        }
        if let Some((_, tags)) = &self.store {
            for (k, v) in tags {
                doc.tags.insert(k.clone(), v.clone());
            }
        }
        let doc = &doc;
        let mut text = report.render();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        // Where the files went, after a blank line.
        let mut wrote = String::new();
        match &self.figures {
            Some(FigureTarget::Dir(dir)) => {
                for f in &report.figures {
                    let path = dir.join(format!("{}.svg", f.name));
                    punctual_result::output::write_atomic(&path, f.svg.as_bytes())
                        .map_err(|e| Failure::system(format!("writing {}: {e}", path.display())))?;
                    wrote.push_str(&format!("Figure: {}\n", path.display()));
                }
            }
            Some(FigureTarget::File { flag, out }) => {
                let out = &self.place(out);
                let f = report.figures.first().ok_or_else(|| {
                    Failure::system(format!("{flag}: this run has nothing to draw"))
                })?;
                out.write(f.svg.as_bytes())
                    .map_err(|e| Failure::system(format!("writing {flag} {out}: {e}")))?;
            }
            None => {}
        }
        for (flag, out, exporter) in &self.exports {
            let out = self.place(out);
            out.write(&exporter.export(doc))
                .map_err(|e| Failure::system(format!("writing {flag} {out}: {e}")))?;
        }
        // Last: the history. Figures are stored with this result only, so no later run (nor an
        // interrupted one) replaces them.
        if let Some((planned, tags)) = &self.store {
            let store = planned.get()?;
            for note in store.take_notes() {
                env.note(&note);
            }
            let figures: Vec<(String, Vec<u8>)> = report
                .figures
                .iter()
                .map(|f| (format!("{}.svg", f.name), f.svg.clone().into_bytes()))
                .collect();
            let id = store.put_with_tables(doc, &figures, tags, Some(&text))?;
            wrote.push_str(&format!("Result stored: {id}\n"));
            self.stored.borrow_mut().push(id);
        }
        if !wrote.is_empty() {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&wrote);
        }
        env.show(&text, !self.stdout_free());
        Ok(())
    }
}
