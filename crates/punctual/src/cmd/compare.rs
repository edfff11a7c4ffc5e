//! `punctual compare A B` or `compare A1 A2 A3 -- B1 B2 B3`: matching series side by side with a
//! verdict that weighs the noise (`punctual_report::compare`), as text, Markdown or JSON;
//! `--fail-on-regression` for CI.

use crate::args::{each_result, share, SideArgs};
use clap::Args;
use punctual_report::compare::{
    parse_change, parse_percentile, parse_regression_limit, parse_resamples, Options,
};
use punctual_report::render;
use punctual_result::{Failure, Output};
use punctual_session::{Env, Exit};

#[derive(Args, Debug)]
pub struct CompareArgs {
    #[command(flatten)]
    pub sides: SideArgs,
    /// Exit 1 when a series' verdict percentile rose by more than PERCENT (default 5) with its
    /// interval above no change. Give the results first, or write --fail-on-regression=PERCENT.
    #[arg(long, value_name = "PERCENT", num_args = 0..=1, default_missing_value = "5", value_parser = parse_regression_limit)]
    pub fail_on_regression: Option<f64>,
    /// The percentile the verdict and --fail-on-regression look at.
    #[arg(long, value_name = "P", default_value = "99", value_parser = parse_percentile)]
    pub percentile: u64,
    /// Changes smaller than this many percent are "no significant change", whatever the interval.
    #[arg(long, value_name = "PERCENT", default_value = "5", value_parser = parse_change)]
    pub min_change: f64,
    /// Of the intervals (default: 95 across runs, 99 from one run's histograms).
    #[arg(long, value_name = "PERCENT", value_parser = |s: &str| share(s, 50.0..100.0))]
    pub confidence: Option<f64>,
    /// Bootstrap resamples per percentile (one run per side).
    #[arg(long, value_name = "N", default_value_t = 2_000, value_parser = parse_resamples)]
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
    let inputs = each_result(&sides, |n| punctual_report::Input {
        source: n.source.clone(),
        doc: &n.stored.doc,
    });
    let c = punctual_report::compare_sides(&inputs, &opts)
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
    let breaches = c.regression_notes(limit);
    breaches.iter().for_each(|n| env.note(n));
    Ok(Exit::limit_if(!breaches.is_empty()))
}
