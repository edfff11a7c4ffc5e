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
    #[arg(long, value_name = "N", default_value_t = 2_000, value_parser = resamples)]
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

/// 100 to 1,000,000 bootstrap resamples, said in words (not Rust's range syntax).
fn resamples(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(n) if (100..=1_000_000).contains(&n) => Ok(n),
        _ => Err(format!(
            "'{s}' resamples: give a number from 100 to 1000000"
        )),
    }
}
