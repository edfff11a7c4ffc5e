//! `punctual compare A B [C...]`: matching series side by side with a noise-aware verdict
//! (`punctual_report::compare`), as text, Markdown or JSON; `--fail-on-regression` for CI.

use clap::Args;
use punctual_report::compare::{parse_percentile, Options};
use punctual_report::render;
use punctual_result::{Failure, Output, ResultDoc};
use punctual_session::{Env, Exit};
use std::path::Path;

/// Largest result document read (a 10-million-sample result is well under 1 MB: histograms, not
/// samples); a bigger file is not a result document.
const MAX_DOC_BYTES: u64 = 256 << 20;

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Results to compare, the first being the baseline: result files (`--json FILE` of any
    /// command). Ids and `latest` need the results store.
    #[arg(value_name = "RESULT", required = true, num_args = 2..)]
    pub results: Vec<String>,
    /// Exit 1 when a series' verdict percentile rose by more than PERCENT (default 5) with its
    /// interval above zero. Give the results first, or write --fail-on-regression=PERCENT.
    #[arg(long, value_name = "PERCENT", num_args = 0..=1, default_missing_value = "5")]
    pub fail_on_regression: Option<String>,
    /// The percentile the verdict and --fail-on-regression look at.
    #[arg(long, value_name = "P", default_value = "99")]
    pub percentile: String,
    /// Changes smaller than this many percent are "no significant change", whatever the interval.
    #[arg(long, value_name = "PERCENT", default_value = "5")]
    pub min_change: String,
    /// Bootstrap resamples per percentile.
    #[arg(long, value_name = "N", default_value_t = 2_000, value_parser = clap::value_parser!(u32).range(100..=1_000_000))]
    pub resamples: u32,
    /// Seed of the bootstrap (the same documents and seed give the same verdicts).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Print Markdown tables instead of text (for pull requests and CI summaries).
    #[arg(long)]
    pub markdown: bool,
    /// Write the comparison as JSON to FILE (`-` = stdout; the tables then go to stderr).
    #[arg(long, value_name = "FILE|-")]
    pub json: Option<Output>,
}

/// A result named on the command line, as a document: a result file, else a stored id, id
/// prefix, `latest` or `latest~N` from the results store (`PUNCTUAL_STORE` or the data directory).
pub fn resolve(spec: &str) -> Result<ResultDoc, Failure> {
    let path = Path::new(spec);
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let store = punctual_session::store::open(None)?;
            return Ok(store.resolve(spec).map_err(Failure::from)?.doc);
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
    ResultDoc::from_json(&text).map_err(|e| {
        Failure::usage(format!(
            "{spec} is not a punctual result document (punctual.result/1): {e}"
        ))
    })
}

/// "10", "10%", "2.5" -> percent.
fn percent(flag: &str, s: &str) -> Result<f64, Failure> {
    s.trim()
        .trim_end_matches('%')
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| {
            Failure::usage(format!(
                "{flag} takes a percentage such as 10 or 2.5%, not '{}' (give the results \
                 first, or write {flag}=10)",
                punctual_time::text::display_name(s)
            ))
        })
}

pub fn run(a: CompareArgs, env: &Env) -> anyhow::Result<Exit> {
    let limit = a
        .fail_on_regression
        .as_deref()
        .map(|s| percent("--fail-on-regression", s))
        .transpose()?;
    let mut opts = Options {
        percentile: parse_percentile(&a.percentile)
            .map_err(|e| Failure::usage(format!("--percentile: {e}")))?,
        resamples: a.resamples as usize,
        min_change_percent: percent("--min-change", &a.min_change)?,
        ..Options::default()
    };
    if let Some(seed) = a.seed {
        opts.seed = seed;
    }
    if let Some(out) = &a.json {
        out.check_writable()
            .map_err(|e| Failure::usage(format!("--json {out}: {e}")))?;
    }
    let docs = a
        .results
        .iter()
        .map(|s| resolve(s))
        .collect::<Result<Vec<_>, _>>()?;
    let inputs: Vec<punctual_report::Input> = a
        .results
        .iter()
        .zip(&docs)
        .map(|(s, doc)| punctual_report::Input {
            source: s.clone(),
            doc,
        })
        .collect();
    let c = punctual_report::compare(&inputs, &opts).map_err(Failure::from)?;
    if c.series.is_empty() {
        let why: Vec<String> = c
            .unmatched
            .iter()
            .map(|u| {
                format!(
                    "{}: {}",
                    punctual_report::compare::series_title(&u.name, &u.kind, u.cpu),
                    u.why
                )
            })
            .collect();
        return Err(Failure::usage(format!(
            "no series is in every result, nothing to compare ({})",
            why.join("; ")
        ))
        .into());
    }
    let json_to_stdout = a.json.as_ref().is_some_and(Output::is_stdout);
    let tables = if a.markdown {
        render::markdown(&c)
    } else {
        render::text(&c)
    };
    env.show(&tables, json_to_stdout);
    match &a.json {
        Some(Output::Stdout) => env.show(&render::json(&c), false),
        Some(out) => out
            .write(render::json(&c).as_bytes())
            .map_err(|e| Failure::system(format!("writing --json {out}: {e}")))?,
        None => {}
    }
    let Some(limit) = limit else {
        return Ok(Exit::Ok);
    };
    let breaches = c.regressions_over(limit);
    for b in &breaches {
        env.note(&format!(
            "regression: {} in {} rose {:+.1} % at p{} (limit {limit} %)",
            b.series, b.against, b.change_percent, c.percentile
        ));
    }
    Ok(Exit::limit_if(!breaches.is_empty()))
}

#[cfg(test)]
mod tests {
    use crate::cli::{Cli, Command};
    use clap::Parser;
    use punctual_result::{doc::kind, ResultDoc, Series};
    use punctual_session::{Env, Exit};
    use punctual_stats::Recorder;

    /// A latency document whose thread `t` wakes `base + spread` ns late, p99 scaled by `tail`.
    fn doc(threads: &[(usize, u64)], tail: f64) -> ResultDoc {
        let mut d = ResultDoc::new(
            vec![
                "punctual".into(),
                "latency".into(),
                "-D".into(),
                "2s".into(),
            ],
            Env::fake(&[]).host(),
            "2026-01-01T00:00:00Z".into(),
        );
        d.settings.policy = Some("fifo".into());
        d.settings.priority = Some(99);
        for &(t, base) in threads {
            let mut r = Recorder::new();
            for i in 0..20_000u64 {
                let body = base + (i * 7919) % 4_000;
                let v = if i % 50 == 0 {
                    ((20_000 + (i * 104_729) % 30_000) as f64 * tail) as u64
                } else {
                    body
                };
                r.record(v);
            }
            r.add_missed(t as u64);
            d.series.push(Series::from_recorder(
                format!("thread {t}"),
                kind::WAKEUP_LATENCY,
                Some(t),
                &r,
            ));
        }
        d
    }

    fn run_cli(args: &[&str], env: &Env) -> anyhow::Result<Exit> {
        let cli = Cli::try_parse_from(args).expect("valid flags");
        let Command::Compare(a) = cli.command else {
            panic!("not compare")
        };
        super::run(a, env)
    }

    struct Files {
        dir: tempfile::TempDir,
    }

    impl Files {
        fn new(docs: &[(&str, ResultDoc)]) -> Files {
            let dir = tempfile::tempdir().unwrap();
            for (name, d) in docs {
                std::fs::write(dir.path().join(name), d.to_json()).unwrap();
            }
            Files { dir }
        }
        fn path(&self, name: &str) -> String {
            self.dir.path().join(name).to_string_lossy().into_owned()
        }
        /// Output without the temporary directory's name.
        fn clean(&self, s: &str) -> String {
            s.replace(&format!("{}/", self.dir.path().display()), "")
        }
    }

    #[test]
    fn compare_text_and_markdown_snapshots() {
        let f = Files::new(&[
            ("a.json", doc(&[(0, 3_000), (1, 5_000)], 1.0)),
            ("b.json", {
                let mut b = doc(&[(0, 3_000), (1, 5_000), (2, 4_000)], 1.25);
                b.host.kernel = "6.13.0-rt".into();
                b.settings.policy = Some("other".into());
                b
            }),
        ]);
        let env = Env::fake(&["punctual", "compare"]);
        let exit = run_cli(
            &["punctual", "compare", &f.path("a.json"), &f.path("b.json")],
            &env,
        )
        .unwrap();
        assert_eq!(
            exit,
            Exit::Ok,
            "no --fail-on-regression: a regression is reported, not an exit"
        );
        let (out, err) = env.captured();
        assert!(err.is_empty(), "{err}");
        insta::assert_snapshot!("compare_text", f.clean(&out));

        let env = Env::fake(&["punctual", "compare"]);
        run_cli(
            &[
                "punctual",
                "compare",
                "--markdown",
                &f.path("a.json"),
                &f.path("b.json"),
            ],
            &env,
        )
        .unwrap();
        insta::assert_snapshot!("compare_markdown", f.clean(&env.captured().0));
    }

    #[test]
    fn compare_fail_on_regression_exits_1_past_the_limit_and_0_below() {
        let f = Files::new(&[
            ("a.json", doc(&[(0, 3_000)], 1.0)),
            ("b.json", doc(&[(0, 3_000)], 1.25)),
        ]);
        let (a, b) = (f.path("a.json"), f.path("b.json"));
        let env = Env::fake(&["punctual", "compare"]);
        let exit = run_cli(
            &["punctual", "compare", &a, &b, "--fail-on-regression", "10"],
            &env,
        )
        .unwrap();
        assert_eq!(exit, Exit::LimitExceeded);
        assert!(
            env.captured().1.contains("regression: thread 0"),
            "{:?}",
            env.captured()
        );
        let env = Env::fake(&["punctual", "compare"]);
        let exit = run_cli(
            &["punctual", "compare", &a, &b, "--fail-on-regression=40"],
            &env,
        )
        .unwrap();
        assert_eq!(exit, Exit::Ok, "a 25 % rise is under a 40 % limit");
        // Improvements never fail the gate.
        let env = Env::fake(&["punctual", "compare"]);
        let exit = run_cli(
            &["punctual", "compare", &b, &a, "--fail-on-regression", "0"],
            &env,
        )
        .unwrap();
        assert_eq!(exit, Exit::Ok);
    }

    #[test]
    fn compare_json_to_stdout_moves_the_tables_to_stderr() {
        let f = Files::new(&[
            ("a.json", doc(&[(0, 3_000)], 1.0)),
            ("b.json", doc(&[(0, 3_000)], 1.0)),
        ]);
        let env = Env::fake(&["punctual", "compare"]);
        run_cli(
            &[
                "punctual",
                "compare",
                &f.path("a.json"),
                &f.path("b.json"),
                "--json",
                "-",
            ],
            &env,
        )
        .unwrap();
        let (out, err) = env.captured();
        let v: serde_json::Value = serde_json::from_str(&out).expect("clean JSON on stdout");
        assert_eq!(v["schema"], "punctual.compare/1");
        assert_eq!(
            v["series"][0]["against"][0]["verdict"],
            "no_significant_change"
        );
        assert!(err.contains("verdicts"));
    }

    #[test]
    fn compare_bad_input_names_the_problem() {
        let f = Files::new(&[
            ("a.json", doc(&[(0, 3_000)], 1.0)),
            ("c.json", doc(&[(1, 3_000)], 1.0)),
            ("junk.json", {
                let mut d = doc(&[], 1.0);
                d.schema = "x".into();
                d
            }),
        ]);
        std::fs::write(f.path("junk.json"), "{\"not\": 1}").unwrap();
        let env = Env::fake(&["punctual", "compare"]);
        let msg = |r: anyhow::Result<Exit>| {
            let e = r.expect_err("refused");
            let f = e
                .downcast_ref::<punctual_result::Failure>()
                .expect("a Failure");
            assert_eq!(f.class, punctual_result::Class::Usage);
            f.message.clone()
        };
        let m = msg(run_cli(
            &["punctual", "compare", &f.path("a.json"), "latest"],
            &env,
        ));
        assert!(m.contains("results store"), "{m}");
        let m = msg(run_cli(
            &[
                "punctual",
                "compare",
                &f.path("a.json"),
                &f.path("junk.json"),
            ],
            &env,
        ));
        assert!(m.contains("not a punctual result document"), "{m}");
        let m = msg(run_cli(
            &["punctual", "compare", &f.path("a.json"), &f.path("c.json")],
            &env,
        ));
        assert!(
            m.contains("thread 1 (wakeup_latency, cpu 1): absent from A"),
            "mismatched series are named: {m}"
        );
        let m = msg(run_cli(
            &[
                "punctual",
                "compare",
                "--fail-on-regression",
                &f.path("a.json"),
                &f.path("a.json"),
                &f.path("a.json"),
            ],
            &env,
        ));
        assert!(m.contains("give the results first"), "{m}");
    }
}
