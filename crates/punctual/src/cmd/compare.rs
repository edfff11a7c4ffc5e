//! `punctual compare A B` or `compare A1 A2 A3 -- B1 B2 B3`: matching series side by side with a
//! verdict that weighs the noise (`punctual_report::compare`), as text, Markdown or JSON;
//! `--fail-on-regression` for CI.

use crate::args::{share, SideArgs};
use clap::Args;
use punctual_report::compare::Options;
use punctual_report::render;
use punctual_result::{Failure, Output};
use punctual_session::{Env, Exit};
use punctual_store::Named;

#[derive(Args, Debug)]
pub struct CompareArgs {
    #[command(flatten)]
    pub sides: SideArgs,
    /// Exit 1 when a series' verdict percentile rose by more than PERCENT (default 5) with its
    /// interval above no change. Give the results first, or write --fail-on-regression=PERCENT.
    #[arg(long, value_name = "PERCENT", num_args = 0..=1, default_missing_value = "5", value_parser = regression_limit)]
    pub fail_on_regression: Option<f64>,
    /// The percentile the verdict and --fail-on-regression look at.
    #[arg(long, value_name = "P", default_value = "99", value_parser = percentile)]
    pub percentile: u64,
    /// Changes smaller than this many percent are "no significant change", whatever the interval.
    #[arg(long, value_name = "PERCENT", default_value = "5", value_parser = change)]
    pub min_change: f64,
    /// Of the intervals (default: 95 across runs, 99 from one run's histograms).
    #[arg(long, value_name = "PERCENT", value_parser = |s: &str| share(s, 50.0..100.0))]
    pub confidence: Option<f64>,
    /// Bootstrap resamples per percentile (one run per side).
    #[arg(long, value_name = "N", default_value_t = 2_000, value_parser = resamples)]
    pub resamples: u32,
    /// Seed of the bootstrap (the same documents and seed give the same verdicts).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Also the p50 and p99.9 changes (wider than 80 columns).
    #[arg(long)]
    pub wide: bool,
    /// Print Markdown tables instead of text (for pull requests and CI summaries).
    #[arg(long)]
    pub markdown: bool,
    /// Write the comparison as JSON to FILE (`-` = stdout; the tables then go to stderr).
    #[arg(long, value_name = "FILE|-")]
    pub json: Option<Output>,
}

/// A change in percent, 0 or more.
fn change(s: &str) -> Result<f64, String> {
    punctual_time::parse_percent_in(s, 0.0..).map_err(|e| e.to_string())
}

/// `--fail-on-regression`'s limit: it takes an optional value, so a result given after it is
/// read as one.
fn regression_limit(s: &str) -> Result<f64, String> {
    change(s).map_err(|e| format!("{e} (give the results first, or write --fail-on-regression=10)"))
}

/// "99.9" -> 99_900 milli-percent.
fn percentile(s: &str) -> Result<u64, String> {
    punctual_report::compare::parse_percentile(s).map_err(|e| e.to_string())
}

/// The documents of `sides` as the comparison takes them.
fn inputs(sides: &[Vec<Named>]) -> Vec<Vec<punctual_report::Input<'_>>> {
    sides
        .iter()
        .map(|side| {
            side.iter()
                .map(|n| punctual_report::Input {
                    source: n.source.clone(),
                    doc: &n.stored.doc,
                })
                .collect()
        })
        .collect()
}

pub fn run(a: CompareArgs, env: &Env) -> anyhow::Result<Exit> {
    let opts = Options {
        percentile: a.percentile,
        resamples: a.resamples as usize,
        min_change_percent: a.min_change,
        confidence: a.confidence,
        seed: a.seed.unwrap_or(Options::default().seed),
    };
    if let Some(out) = &a.json {
        out.check_writable()
            .map_err(|e| Failure::usage(format!("--json {out}: {e}")))?;
    }
    let sides = a.sides.sides(2)?;
    let c = punctual_report::compare_sides(&inputs(&sides), &opts)
        .and_then(|c| c.with_series())
        .map_err(Failure::from)?;
    let json_to_stdout = a.json.as_ref().is_some_and(Output::is_stdout);
    let tables = if a.markdown {
        render::markdown(&c)
    } else {
        render::text(&c, a.wide)
    };
    env.show(&tables, json_to_stdout);
    match &a.json {
        Some(Output::Stdout) => env.show(&render::json(&c), false),
        Some(out) => out
            .write(render::json(&c).as_bytes())
            .map_err(|e| Failure::system(format!("writing --json {out}: {e}")))?,
        None => {}
    }
    let Some(limit) = a.fail_on_regression else {
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
