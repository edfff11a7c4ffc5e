//! `punctual compare A B` or `compare A1 A2 A3 -- B1 B2 B3`: matching series side by side with a
//! verdict that weighs the noise (`punctual_report::compare`), as text, Markdown or JSON;
//! `--fail-on-regression` for CI.

use crate::args::tag;
use clap::Args;
use punctual_report::compare::{parse_percentile, Options};
use punctual_report::render;
use punctual_result::{Failure, Output};
use punctual_session::store::{Named, Resolver};
use punctual_session::{Env, Exit};

/// Which results make which side, for `compare` and `report`.
#[derive(Args, Debug)]
pub struct SideArgs {
    /// Results: files (`--json FILE` of any command), stored ids (a unique prefix is enough),
    /// latest, latest~N. Each is a side of its own, the first the baseline; or, with `--`, those
    /// before are the baseline's runs and those after the other side's.
    #[arg(value_name = "RESULT")]
    pub results: Vec<String>,
    /// The other side's runs (after `--`).
    #[arg(last = true, value_name = "OTHER")]
    pub against: Vec<String>,
    /// A side made of the newest --last N stored results with this tag; once per side
    /// (--tag kernel=6.1 --tag kernel=6.12).
    #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = tag)]
    pub tags: Vec<(String, String)>,
    /// With --tag: how many of the newest tagged results make each side.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub last: u32,
    /// With --tag: only results of this command (latency, check, ...).
    #[arg(long, value_name = "COMMAND")]
    pub command: Option<String>,
    /// The results store ids and tags are read from: a SQLite file or postgres://USER@HOST/DB
    /// (default: PUNCTUAL_STORE, or results.db in the data directory). Never created by reading.
    #[arg(long, value_name = "PATH|URL")]
    pub store: Option<String>,
}

impl SideArgs {
    /// The sides, each a list of results (stored ids resolved in one store).
    pub fn sides(&self, least: usize) -> Result<Vec<Vec<Named>>, Failure> {
        if self.command.is_some() && self.tags.is_empty() {
            return Err(Failure::usage(
                "--command selects tagged results; add --tag KEY=VALUE",
            ));
        }
        if let Some(flag) = self.against.iter().find(|a| a.starts_with("--")) {
            return Err(Failure::usage(format!(
                "{flag} after `--` is taken for a result; give options before `--` (compare \
                 --json - A1 A2 -- B1 B2)"
            )));
        }
        let mut r = Resolver::new(self.store.as_deref());
        let all = |r: &mut Resolver, specs: &[String]| -> Result<Vec<Named>, Failure> {
            specs.iter().map(|s| r.resolve(s)).collect()
        };
        let sides = if !self.tags.is_empty() {
            if !self.results.is_empty() || !self.against.is_empty() {
                return Err(Failure::usage(
                    "give results or --tag sides, not both (--tag K=V makes a side of stored results)",
                ));
            }
            let last = self.last as usize;
            self.tags
                .iter()
                .map(|t| r.tagged(std::slice::from_ref(t), self.command.as_deref(), last))
                .collect::<Result<Vec<_>, _>>()?
        } else if !self.against.is_empty() {
            if self.results.is_empty() {
                return Err(Failure::usage(
                    "nothing before `--`: give the baseline's runs first (A1 A2 -- B1 B2)",
                ));
            }
            vec![all(&mut r, &self.results)?, all(&mut r, &self.against)?]
        } else {
            all(&mut r, &self.results)?
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
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    #[command(flatten)]
    pub sides: SideArgs,
    /// Exit 1 when a series' verdict percentile rose by more than PERCENT (default 5) with its
    /// interval above no change. Give the results first, or write --fail-on-regression=PERCENT.
    #[arg(long, value_name = "PERCENT", num_args = 0..=1, default_missing_value = "5")]
    pub fail_on_regression: Option<String>,
    /// The percentile the verdict and --fail-on-regression look at.
    #[arg(long, value_name = "P", default_value = "99")]
    pub percentile: String,
    /// Changes smaller than this many percent are "no significant change", whatever the interval.
    #[arg(long, value_name = "PERCENT", default_value = "5")]
    pub min_change: String,
    /// Of the intervals (default: 95 across runs, 99 from one run's histograms).
    #[arg(long, value_name = "PERCENT")]
    pub confidence: Option<String>,
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

/// The comparison's options from the flags.
pub fn options(a: &CompareArgs) -> Result<Options, Failure> {
    let confidence = match &a.confidence {
        Some(c) => Some(percent("--confidence", c)?)
            .filter(|c| (50.0..100.0).contains(c))
            .map(|c| c / 100.0)
            .ok_or_else(|| Failure::usage("--confidence takes 50 to 99.99 (percent)"))
            .map(Some)?,
        None => None,
    };
    Ok(Options {
        percentile: parse_percentile(&a.percentile)
            .map_err(|e| Failure::usage(format!("--percentile: {e}")))?,
        resamples: a.resamples as usize,
        min_change_percent: percent("--min-change", &a.min_change)?,
        confidence,
        seed: a.seed.unwrap_or(Options::default().seed),
    })
}

/// The documents of `sides` as the comparison takes them.
pub fn inputs(sides: &[Vec<Named>]) -> Vec<Vec<punctual_report::Input<'_>>> {
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
    let limit = a
        .fail_on_regression
        .as_deref()
        .map(|s| percent("--fail-on-regression", s))
        .transpose()?;
    let opts = options(&a)?;
    if let Some(out) = &a.json {
        out.check_writable()
            .map_err(|e| Failure::usage(format!("--json {out}: {e}")))?;
    }
    let sides = a.sides.sides(2)?;
    let c = punctual_report::compare_sides(&inputs(&sides), &opts).map_err(Failure::from)?;
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
