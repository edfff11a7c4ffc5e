//! Comparing sides of one or more runs each: matching series side by side, what differs in the
//! host and the settings, what the machine was doing (steal, other processes), and a verdict per
//! series from a confidence interval of the ratio of the two sides' percentile.
//!
//! With several runs on a side the interval comes from the spread between runs ([`crate::runs`]);
//! with one run on each side only the noise inside each run is known, from a bootstrap of the two
//! histograms ([`crate::bootstrap`]), and the comparison says so: one disturbed run then reads as
//! a change.

use crate::bootstrap::{ratio_interval, Empirical, Rng};
use crate::runs::{self, RatioInterval};
use punctual_result::{Failure, ResultDoc};
use serde::Serialize;
use serde_json::Value;

/// The percentiles compared for every series (label, milli-percent).
pub const COMPARED: [(&str, u64); 3] = [("50", 50_000), ("99", 99_000), ("99.9", 99_900)];

/// Settings that are measurements of the run, not choices: never a "difference".
const MEASURED: [&str; 5] = [
    "steal_ns",
    "steal_window_ns",
    "others_cpu_ns",
    "load_reports",
    "samples_dropped",
];

/// Flags that say where results go, not how the run was made: left out of the command compared.
const OUTPUT_FLAGS: [&str; 9] = [
    "--json",
    "--csv",
    "--hist",
    "--samples",
    "--store",
    "--tag",
    "--repeat",
    "--plot",
    "--figures",
];

/// One document to compare, with how the user named it.
#[derive(Clone, Debug)]
pub struct Input<'a> {
    /// What the user typed (a file, an id, `latest`).
    pub source: String,
    pub doc: &'a ResultDoc,
}

/// How the verdicts are reached.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// The percentile the verdict and `--fail-on-regression` look at, in milli-percent.
    pub percentile: u64,
    /// Bootstrap replicates per percentile (one run per side).
    pub resamples: usize,
    /// Of the interval, e.g. 0.95; `None`: 0.99 from histograms (thousands of samples know
    /// their own noise well), 0.95 across runs (a handful of runs leave few degrees of freedom).
    pub confidence: Option<f64>,
    /// Changes smaller than this (percent of the baseline's value) are "no significant change"
    /// even when the interval excludes them: with millions of samples the interval of a 0.3 %
    /// change can be narrow, and nobody gates a kernel on 0.3 %.
    pub min_change_percent: f64,
    pub seed: u64,
}

impl Options {
    /// The confidence of intervals reached by `method`.
    pub fn confidence_for(&self, method: Method) -> f64 {
        self.confidence.unwrap_or(match method {
            Method::BetweenRuns => 0.95,
            Method::WithinRun => 0.99,
        })
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            percentile: 99_000,
            resamples: 2_000,
            confidence: None,
            min_change_percent: 5.0,
            seed: 0x7075_6e63_7475_616c, // "punctual"
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// Fewer than two sides: there is nothing to compare against.
    #[error("compare needs at least two results (or two sides: A1 A2 -- B1 B2), got {0}")]
    TooFew(usize),
    /// A side without runs (`compare -- B1`).
    #[error("side {0} has no results")]
    EmptySide(String),
    /// A series' histogram cannot be read (a damaged or hand-edited document).
    #[error("result {label} ({source_name}), series '{series}': {error}")]
    Histogram {
        label: String,
        source_name: String,
        series: String,
        error: String,
    },
    /// `--percentile` outside (0, 100].
    #[error("percentile {0} is outside 0-100 (e.g. 99 or 99.9)")]
    Percentile(String),
    /// No series is in every result; each unmatched one with why.
    #[error("no series is in every result, nothing to compare ({0})")]
    NoCommonSeries(String),
}

impl From<CompareError> for Failure {
    fn from(e: CompareError) -> Failure {
        Failure::usage(e.to_string())
    }
}

/// The label of the i-th side: A, B, ... Z, S27, S28...
pub fn label(i: usize) -> String {
    if i < 26 {
        ((b'A' + i as u8) as char).to_string()
    } else {
        format!("S{}", i + 1)
    }
}

/// The label of run `j` of side `i` (of `n` runs): `A` when the side has one run, else `A1`, `A2`.
pub fn run_label(i: usize, j: usize, n: usize) -> String {
    if n == 1 {
        label(i)
    } else {
        format!("{}{}", label(i), j + 1)
    }
}

/// A percentile in milli-percent as its document key (`99_900` -> "99.9").
pub fn percentile_name(milli_percent: u64) -> String {
    let s = format!("{:.3}", milli_percent as f64 / 1000.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// "99.9" or "99.9%" -> 99_900 (`punctual_time::parse_percent_in`, above 0 and at most 100).
pub fn parse_percentile(s: &str) -> Result<u64, CompareError> {
    use std::ops::Bound::{Excluded, Included};
    let v = punctual_time::parse_percent_in(s, (Excluded(0.0), Included(100.0)))
        .map_err(|_| CompareError::Percentile(s.into()))?;
    Ok((v * 1000.0).round() as u64)
}

/// A change in percent, 0 or more (`--min-change`).
pub fn parse_change(s: &str) -> Result<f64, String> {
    punctual_time::parse_percent_in(s, 0.0..).map_err(|e| e.to_string())
}

/// `--fail-on-regression`'s limit: the flag takes an optional value, so a result given after it is
/// read as one; the refusal says so.
pub fn parse_regression_limit(s: &str) -> Result<f64, String> {
    parse_change(s)
        .map_err(|e| format!("{e} (give the results first, or write --fail-on-regression=10)"))
}

/// 100 to 1,000,000 bootstrap resamples, said in words (not Rust's range syntax).
pub fn parse_resamples(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(n) if (100..=1_000_000).contains(&n) => Ok(n),
        _ => Err(format!(
            "'{s}' resamples: give a number from 100 to 1000000"
        )),
    }
}

/// One run, as the comparison names it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResultInfo {
    /// `A1`, or `A` for a side of one run.
    pub label: String,
    pub side: String,
    pub source: String,
    pub command: String,
    pub started_at: String,
    pub status: String,
    pub tags: Vec<(String, String)>,
    /// Share of the CPUs' time the hypervisor took during the run (`None`: not recorded).
    pub steal: Option<f64>,
    /// Share of the CPUs' time other processes used during the run.
    pub others: Option<f64>,
}

/// A side: its runs' mean steal and other load.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SideInfo {
    pub label: String,
    pub runs: usize,
    pub steal: Option<f64>,
    pub others: Option<f64>,
}

/// A field whose value differs between sides: one value per side, in order (a side whose runs
/// disagree shows each run's value).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Difference {
    pub field: String,
    pub values: Vec<String>,
}

/// One side's numbers for a series. With several runs, percentiles are the geometric mean of the
/// runs' own (a typical run), `max` and the counts over all runs; ratios are to the first side.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub label: String,
    pub runs: usize,
    pub count: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p99_9_ns: u64,
    pub max_ns: u64,
    pub within_10us: f64,
    pub missed: u64,
    /// Each run's value of the verdict percentile, in order.
    pub per_run_ns: Vec<u64>,
    pub ratios: Option<Ratios>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Ratios {
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    pub p99_9: Option<f64>,
    pub max: Option<f64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Regression,
    Improvement,
    NoSignificantChange,
    /// One side has no samples: nothing to test.
    NoSamples,
}

impl Verdict {
    pub fn words(self) -> &'static str {
        match self {
            Verdict::Regression => "regression",
            Verdict::Improvement => "improvement",
            Verdict::NoSignificantChange => "no significant change",
            Verdict::NoSamples => "no samples",
        }
    }
}

/// Where an interval comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Welch's t interval over the runs' own percentiles ([`crate::runs`]).
    BetweenRuns,
    /// A bootstrap of the two histograms: the noise inside one run only.
    WithinRun,
}

/// One percentile of a side against the baseline side.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Change {
    pub percentile: String,
    pub base_ns: u64,
    pub other_ns: u64,
    /// other / base, with its interval.
    pub interval: RatioInterval,
    /// The ratio and its interval as changes in percent (never below -100).
    pub change_percent: f64,
    pub low_percent: f64,
    pub high_percent: f64,
    /// The interval excludes no change (a ratio of 1).
    pub significant: bool,
}

/// A side against the first, for one series.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Against {
    pub label: String,
    pub verdict: Verdict,
    pub method: Method,
    /// Of the intervals in `changes`.
    pub confidence: f64,
    pub changes: Vec<Change>,
}

impl Against {
    /// The change at `percentile` (its document key).
    pub fn change(&self, percentile: &str) -> Option<&Change> {
        self.changes.iter().find(|c| c.percentile == percentile)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SeriesComparison {
    pub name: String,
    pub kind: String,
    pub cpu: Option<usize>,
    /// One per side.
    pub rows: Vec<Row>,
    /// One per side after the first.
    pub against: Vec<Against>,
}

/// A series that is not in every run, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Unmatched {
    pub name: String,
    pub kind: String,
    pub cpu: Option<usize>,
    pub in_results: Vec<String>,
    pub why: String,
}

/// Everything `compare` found: render it with [`crate::render`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    pub results: Vec<ResultInfo>,
    pub sides: Vec<SideInfo>,
    /// The percentile verdicts look at (document key, e.g. "99").
    pub percentile: String,
    /// As asked for (`None`: each method's default, see [`Options::confidence`]).
    pub confidence: Option<f64>,
    pub resamples: usize,
    pub min_change_percent: f64,
    pub seed: u64,
    pub host_differences: Vec<Difference>,
    pub settings_differences: Vec<Difference>,
    /// Sentences on steal and other load that differed between the sides (the verdicts may be
    /// the machine's rather than the change's).
    pub disturbances: Vec<String>,
    pub series: Vec<SeriesComparison>,
    pub unmatched: Vec<Unmatched>,
}

/// A regression past a `--fail-on-regression` limit.
#[derive(Clone, Debug, PartialEq)]
pub struct Breach {
    pub series: String,
    pub against: String,
    pub change_percent: f64,
}

impl Comparison {
    /// Series whose verdict percentile rose by more than `percent` with the interval above one.
    pub fn regressions_over(&self, percent: f64) -> Vec<Breach> {
        let mut out = Vec::new();
        for s in &self.series {
            for a in &s.against {
                if let Some(c) = a.change(&self.percentile) {
                    if c.significant && c.interval.low > 1.0 && c.change_percent > percent {
                        out.push(Breach {
                            series: series_title(&s.name, &s.kind, s.cpu),
                            against: a.label.clone(),
                            change_percent: c.change_percent,
                        });
                    }
                }
            }
        }
        out
    }

    /// What `--fail-on-regression` says on stderr: a line per series that rose more than `limit`
    /// percent (none: within the limit).
    pub fn regression_notes(&self, limit: f64) -> Vec<String> {
        let breaches = self.regressions_over(limit);
        let line = |b: &Breach| {
            format!(
                "regression: {} in {} rose {:+.1} % at p{} (limit {limit} %)",
                b.series, b.against, b.change_percent, self.percentile
            )
        };
        breaches.iter().map(line).collect()
    }

    /// The comparison, unless no series is in every result ([`CompareError::NoCommonSeries`],
    /// naming each unmatched series and why).
    pub fn with_series(self) -> Result<Comparison, CompareError> {
        if !self.series.is_empty() {
            return Ok(self);
        }
        let why: Vec<String> = self
            .unmatched
            .iter()
            .map(|u| format!("{}: {}", series_title(&u.name, &u.kind, u.cpu), u.why))
            .collect();
        Err(CompareError::NoCommonSeries(why.join("; ")))
    }

    /// Whether every side has one run (verdicts from the histograms alone).
    pub fn single_runs(&self) -> bool {
        self.sides.iter().all(|s| s.runs == 1)
    }
}

/// "thread 0 (wakeup_latency, cpu 0)".
pub fn series_title(name: &str, kind: &str, cpu: Option<usize>) -> String {
    match cpu {
        Some(c) => format!("{name} ({kind}, cpu {c})"),
        None => format!("{name} ({kind})"),
    }
}

type Key = (String, String, Option<usize>);

fn key_of(s: &punctual_result::Series) -> Key {
    (s.name.clone(), s.kind.clone(), s.cpu)
}

/// Compare `inputs`, each its own side (the first is the baseline).
pub fn compare(inputs: &[Input<'_>], opts: &Options) -> Result<Comparison, CompareError> {
    let sides: Vec<Vec<Input<'_>>> = inputs.iter().map(|i| vec![i.clone()]).collect();
    compare_sides(&sides, opts)
}

/// Compare sides of one or more runs each (the first side is the baseline).
pub fn compare_sides(sides: &[Vec<Input<'_>>], opts: &Options) -> Result<Comparison, CompareError> {
    if sides.len() < 2 {
        return Err(CompareError::TooFew(sides.iter().map(Vec::len).sum()));
    }
    if let Some(i) = sides.iter().position(Vec::is_empty) {
        return Err(CompareError::EmptySide(label(i)));
    }
    if opts.percentile == 0 || opts.percentile > 100_000 {
        return Err(CompareError::Percentile(percentile_name(opts.percentile)));
    }
    let results: Vec<ResultInfo> = sides
        .iter()
        .enumerate()
        .flat_map(|(i, side)| {
            side.iter()
                .enumerate()
                .map(move |(j, inp)| info(inp, run_label(i, j, side.len()), label(i)))
        })
        .collect();
    let side_infos: Vec<SideInfo> = sides
        .iter()
        .enumerate()
        .map(|(i, side)| {
            let mine: Vec<&ResultInfo> = results.iter().filter(|r| r.side == label(i)).collect();
            let mean = |f: fn(&ResultInfo) -> Option<f64>| {
                let v: Vec<f64> = mine.iter().filter_map(|r| f(r)).collect();
                (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
            };
            SideInfo {
                label: label(i),
                runs: side.len(),
                steal: mean(|r| r.steal),
                others: mean(|r| r.others),
            }
        })
        .collect();
    // Keys in order of first appearance, baseline first.
    let mut keys: Vec<Key> = Vec::new();
    for inp in sides.iter().flatten() {
        for s in &inp.doc.series {
            let k = key_of(s);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    let mut series = Vec::new();
    let mut unmatched = Vec::new();
    for (ki, k) in keys.iter().enumerate() {
        let found: Vec<Vec<Option<&punctual_result::Series>>> = sides
            .iter()
            .map(|side| {
                side.iter()
                    .map(|i| i.doc.series.iter().find(|s| key_of(s) == *k))
                    .collect()
            })
            .collect();
        if found.iter().flatten().all(Option::is_some) {
            let found: Vec<Vec<&punctual_result::Series>> = found
                .into_iter()
                .map(|f| f.into_iter().flatten().collect())
                .collect();
            let seed = opts.seed ^ (ki as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            series.push(compare_series(k, &found, sides, opts, seed)?);
        } else {
            let flat: Vec<Option<&punctual_result::Series>> = found.into_iter().flatten().collect();
            let inputs: Vec<&Input<'_>> = sides.iter().flatten().collect();
            unmatched.push(explain(k, &flat, &inputs, &results));
        }
    }
    Ok(Comparison {
        percentile: percentile_name(opts.percentile),
        confidence: opts.confidence,
        resamples: opts.resamples,
        min_change_percent: opts.min_change_percent,
        seed: opts.seed,
        host_differences: differences(sides, host_fields, false),
        settings_differences: differences(sides, settings_fields, true),
        disturbances: disturbances(&side_infos),
        results,
        sides: side_infos,
        series,
        unmatched,
    })
}

fn info(inp: &Input<'_>, label: String, side: String) -> ResultInfo {
    let d = inp.doc;
    let (steal, others) = taken(d);
    ResultInfo {
        label,
        side,
        source: inp.source.clone(),
        command: d.command.join(" "),
        started_at: d.started_at.clone(),
        status: serde_json::to_value(d.status)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default(),
        tags: d.tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        steal,
        others,
    }
}

/// The shares of the CPUs' time the host took (steal) and other processes used during a run,
/// from `settings.steal_ns`, `others_cpu_ns` and `steal_window_ns`.
pub fn taken(d: &ResultDoc) -> (Option<f64>, Option<f64>) {
    let x = &d.settings.extra;
    let Some(window) = x.get("steal_window_ns").and_then(Value::as_f64) else {
        return (None, None);
    };
    let cpus = (d.host.cpus.max(1)) as f64;
    let steal = x.get("steal_ns").and_then(Value::as_object).map(|m| {
        let sum: f64 = m.values().filter_map(Value::as_f64).sum();
        sum / (window.max(1.0) * m.len().max(1) as f64)
    });
    let others = x
        .get("others_cpu_ns")
        .and_then(Value::as_f64)
        .map(|o| (o / (window.max(1.0) * cpus)).min(1.0));
    (steal, others)
}

/// Sentences for steal and other load that differed between the baseline and another side: the
/// larger at least twice the smaller and 0.2 points more (steal), or half again and 10 points
/// more (other processes' share of the CPUs).
fn disturbances(sides: &[SideInfo]) -> Vec<String> {
    let base = &sides[0];
    let mut out = Vec::new();
    for s in &sides[1..] {
        let pair = |f: fn(&SideInfo) -> Option<f64>| Some((f(base)?, f(s)?));
        if let Some((a, b)) = pair(|x| x.steal) {
            let (lo, hi) = (a.min(b), a.max(b));
            if hi >= 2.0 * lo + 0.002 {
                out.push(format!(
                    "steal differed: the host took {} of the CPUs' time during {}, {} during {}; \
                     a change may be the host's rather than the system's under test",
                    crate::human::percent(a, 2),
                    base.label,
                    crate::human::percent(b, 2),
                    s.label
                ));
            }
        }
        if let Some((a, b)) = pair(|x| x.others) {
            let (lo, hi) = (a.min(b), a.max(b));
            if hi >= 1.5 * lo + 0.10 {
                out.push(format!(
                    "load differed: other processes used {} of the CPUs during {}, {} during {}; \
                     a change may be theirs",
                    crate::human::percent(a, 0),
                    base.label,
                    crate::human::percent(b, 0),
                    s.label
                ));
            }
        }
    }
    out
}

fn explain(
    k: &Key,
    found: &[Option<&punctual_result::Series>],
    inputs: &[&Input<'_>],
    results: &[ResultInfo],
) -> Unmatched {
    let mut why = Vec::new();
    let mut present = Vec::new();
    for ((f, inp), r) in found.iter().zip(inputs).zip(results) {
        let l = &r.label;
        if f.is_some() {
            present.push(l.clone());
            continue;
        }
        let same_name: Vec<String> = inp
            .doc
            .series
            .iter()
            .filter(|s| s.name == k.0)
            .map(|s| match s.cpu {
                Some(c) => format!("{} on cpu {c}", s.kind),
                None => format!("{} on no fixed cpu", s.kind),
            })
            .collect();
        if same_name.is_empty() {
            why.push(format!("absent from {l}"));
        } else {
            why.push(format!("in {l} it is {}", same_name.join(", ")));
        }
    }
    Unmatched {
        name: k.0.clone(),
        kind: k.1.clone(),
        cpu: k.2,
        in_results: present,
        why: why.join("; "),
    }
}

fn ratio(a: u64, b: u64) -> Option<f64> {
    (a > 0).then(|| b as f64 / a as f64)
}

/// The percentiles a comparison looks at: [`COMPARED`] and the verdict's.
fn compared(opts: &Options) -> Vec<u64> {
    let mut pcts: Vec<u64> = COMPARED.iter().map(|p| p.1).collect();
    if !pcts.contains(&opts.percentile) {
        pcts.push(opts.percentile);
    }
    pcts
}

/// One side's row: a typical run's percentiles (geometric mean), the counts over all runs.
fn row(label: String, runs: &[(&punctual_result::Series, Empirical)], mp: u64) -> Row {
    let gm = |f: &dyn Fn(&punctual_result::Series) -> u64| {
        let v: Vec<u64> = runs.iter().map(|(s, _)| f(s)).collect();
        runs::geometric_mean(&v).round() as u64
    };
    let count: u64 = runs.iter().map(|(s, _)| s.summary.count).sum();
    let within = if count == 0 {
        0.0
    } else {
        runs.iter()
            .map(|(s, _)| s.summary.within.us10 * s.summary.count as f64)
            .sum::<f64>()
            / count as f64
    };
    Row {
        label,
        runs: runs.len(),
        count,
        p50_ns: gm(&|s| s.summary.percentiles.p50),
        p99_ns: gm(&|s| s.summary.percentiles.p99),
        p99_9_ns: gm(&|s| s.summary.percentiles.p99_9),
        max_ns: runs.iter().map(|(s, _)| s.summary.max).max().unwrap_or(0),
        within_10us: within,
        missed: runs.iter().map(|(s, _)| s.summary.missed_periods).sum(),
        per_run_ns: runs.iter().map(|(_, e)| e.percentile(mp)).collect(),
        ratios: None,
    }
}

fn compare_series(
    k: &Key,
    found: &[Vec<&punctual_result::Series>],
    sides: &[Vec<Input<'_>>],
    opts: &Options,
    seed: u64,
) -> Result<SeriesComparison, CompareError> {
    // Per side, per run: the series and its histogram's distribution.
    let mut dists: Vec<Vec<(&punctual_result::Series, Empirical)>> = Vec::new();
    for (i, (side, inputs)) in found.iter().zip(sides).enumerate() {
        let mut runs = Vec::new();
        for (j, (s, inp)) in side.iter().zip(inputs).enumerate() {
            let rec = s.recorder().map_err(|e| CompareError::Histogram {
                label: run_label(i, j, side.len()),
                source_name: inp.source.clone(),
                series: s.name.clone(),
                error: e.to_string(),
            })?;
            runs.push((*s, Empirical::of(&rec)));
        }
        dists.push(runs);
    }
    let mut rows: Vec<Row> = dists
        .iter()
        .enumerate()
        .map(|(i, runs)| row(label(i), runs, opts.percentile))
        .collect();
    let base = rows[0].clone();
    for r in rows.iter_mut().skip(1) {
        r.ratios = Some(Ratios {
            p50: ratio(base.p50_ns, r.p50_ns),
            p99: ratio(base.p99_ns, r.p99_ns),
            p99_9: ratio(base.p99_9_ns, r.p99_9_ns),
            max: ratio(base.max_ns, r.max_ns),
        });
    }
    let mut rng = Rng::seeded(seed);
    let against = (1..dists.len())
        .map(|i| against(&dists[0], &dists[i], &rows[i].label, opts, &mut rng))
        .collect();
    Ok(SeriesComparison {
        name: k.0.clone(),
        kind: k.1.clone(),
        cpu: k.2,
        rows,
        against,
    })
}

type Runs<'a> = [(&'a punctual_result::Series, Empirical)];

/// Side `b` (labelled `label`) against the baseline side `a`.
fn against(a: &Runs<'_>, b: &Runs<'_>, label: &str, opts: &Options, rng: &mut Rng) -> Against {
    let between = a.len() > 1 || b.len() > 1;
    let method = if between {
        Method::BetweenRuns
    } else {
        Method::WithinRun
    };
    let confidence = opts.confidence_for(method);
    let empty = |r: &Runs<'_>| r.iter().all(|(_, e)| e.count() == 0);
    let mut changes = Vec::new();
    if !empty(a) && !empty(b) {
        for mp in compared(opts) {
            let per = |r: &Runs<'_>| -> Vec<u64> {
                r.iter()
                    .filter(|(_, e)| e.count() > 0)
                    .map(|(_, e)| e.percentile(mp))
                    .collect()
            };
            let (pa, pb) = (per(a), per(b));
            let iv = if between {
                runs::ratio_interval(&pa, &pb, confidence)
            } else {
                ratio_interval(&a[0].1, &b[0].1, mp, opts.resamples, confidence, rng)
            };
            let Some(iv) = iv else { continue };
            let pct = |r: f64| 100.0 * (r - 1.0);
            changes.push(Change {
                percentile: percentile_name(mp),
                base_ns: runs::geometric_mean(&pa).round() as u64,
                other_ns: runs::geometric_mean(&pb).round() as u64,
                interval: iv,
                change_percent: pct(iv.ratio),
                low_percent: pct(iv.low),
                high_percent: pct(iv.high),
                significant: iv.low > 1.0 || iv.high < 1.0,
            });
        }
    }
    let key = percentile_name(opts.percentile);
    let verdict = match changes.iter().find(|c| c.percentile == key) {
        None => Verdict::NoSamples,
        Some(c) if c.interval.low > 1.0 && c.change_percent >= opts.min_change_percent => {
            Verdict::Regression
        }
        Some(c) if c.interval.high < 1.0 && -c.change_percent >= opts.min_change_percent => {
            Verdict::Improvement
        }
        Some(_) => Verdict::NoSignificantChange,
    };
    Against {
        label: label.to_string(),
        verdict,
        method,
        confidence,
        changes,
    }
}

fn host_fields(doc: &ResultDoc) -> Vec<(String, String)> {
    let h = &doc.host;
    vec![
        ("hostname".into(), h.hostname.clone()),
        ("kernel".into(), h.kernel.clone()),
        ("preempt".into(), h.preempt.clone()),
        ("realtime".into(), yes(h.realtime)),
        ("cpus".into(), h.cpus.to_string()),
        ("cpu model".into(), h.cpu_model.clone()),
        ("clocksource".into(), h.clocksource.clone()),
        ("virtualized".into(), yes(h.virtualized)),
        (
            "HZ".into(),
            h.hz.map(|z| z.to_string()).unwrap_or_else(|| "-".into()),
        ),
    ]
}

fn yes(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

/// The command as it bears on the measurement: `punctual` for the program's path, and without
/// the flags that only say where results go (`--json FILE`, `--tag K=V`, `--store`, `--repeat`).
pub fn command_words(doc: &ResultDoc) -> Vec<String> {
    let mut out = Vec::new();
    let mut words = doc.command.iter().enumerate();
    while let Some((i, w)) = words.next() {
        if i == 0 {
            out.push("punctual".to_string());
            continue;
        }
        let flag = w.split('=').next().unwrap_or(w);
        if OUTPUT_FLAGS.contains(&flag) {
            if !w.contains('=') {
                words.next();
            }
            continue;
        }
        if w == "--no-store" {
            continue;
        }
        out.push(w.clone());
    }
    out
}

/// Where commands differ: the words between their common beginning and end, per command
/// (`… --load cpu:1 …`); empty when they are the same.
pub fn command_differences(commands: &[Vec<String>]) -> Vec<String> {
    if commands.windows(2).all(|w| w[0] == w[1]) {
        return Vec::new();
    }
    let shortest = commands.iter().map(Vec::len).min().unwrap_or(0);
    let prefix = (0..shortest)
        .take_while(|&i| commands.iter().all(|c| c[i] == commands[0][i]))
        .count();
    let suffix = (0..shortest - prefix)
        .take_while(|&i| {
            let at = |c: &Vec<String>| c[c.len() - 1 - i].clone();
            commands.iter().all(|c| at(c) == at(&commands[0]))
        })
        .count();
    commands
        .iter()
        .map(|c| {
            let middle = &c[prefix..c.len() - suffix];
            let mut s = String::new();
            if prefix > 0 {
                s.push_str("… ");
            }
            if middle.is_empty() {
                s.push_str("(nothing)");
            } else {
                s.push_str(&middle.join(" "));
            }
            if suffix > 0 {
                s.push_str(" …");
            }
            s
        })
        .collect()
}

fn settings_fields(doc: &ResultDoc) -> Vec<(String, String)> {
    let s = &doc.settings;
    let mut out = vec![
        (
            "status".into(),
            serde_json::to_value(doc.status)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default(),
        ),
        (
            "policy".into(),
            s.policy.clone().unwrap_or_else(|| "-".into()),
        ),
        (
            "priority".into(),
            s.priority
                .map(|p| p.to_string())
                .unwrap_or_else(|| "-".into()),
        ),
        (
            "mlock".into(),
            s.mlock.map(yes).unwrap_or_else(|| "-".into()),
        ),
        (
            "dma latency".into(),
            s.dma_latency_us
                .map(|u| punctual_time::format_ns(u64::from(u) * 1000))
                .unwrap_or_else(|| "off".into()),
        ),
        (
            "fallbacks".into(),
            if s.fallbacks.is_empty() {
                "none".into()
            } else {
                s.fallbacks
                    .iter()
                    .map(|f| format!("{}: {}", f.setting, f.got))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        ),
    ];
    for (k, v) in &s.extra {
        if !MEASURED.contains(&k.as_str()) {
            out.push((crate::human::key(k), crate::human::value(k, v)));
        }
    }
    out
}

/// Fields (from every document, union of names, in order of appearance) whose values differ
/// between sides. A side's value is its runs' when they agree; runs that disagree are listed, and
/// count as the same on two sides holding the same values (alternating runs).
fn differences(
    sides: &[Vec<Input<'_>>],
    fields: impl Fn(&ResultDoc) -> Vec<(String, String)>,
    with_command: bool,
) -> Vec<Difference> {
    let per: Vec<Vec<Vec<(String, String)>>> = sides
        .iter()
        .map(|side| side.iter().map(|i| fields(i.doc)).collect())
        .collect();
    let mut names: Vec<String> = Vec::new();
    for f in per.iter().flatten().flatten() {
        if !names.contains(&f.0) {
            names.push(f.0.clone());
        }
    }
    let mut out: Vec<Difference> = names
        .into_iter()
        .filter_map(|n| {
            let sets: Vec<Vec<String>> = per
                .iter()
                .map(|side| {
                    let mut v: Vec<String> = side
                        .iter()
                        .map(|run| {
                            run.iter()
                                .find(|f| f.0 == n)
                                .map(|f| f.1.clone())
                                .unwrap_or_else(|| "(absent)".into())
                        })
                        .collect();
                    v.sort();
                    v.dedup();
                    v
                })
                .collect();
            sets.iter().any(|v| v != &sets[0]).then(|| Difference {
                field: n,
                values: sets.iter().map(|v| v.join(" / ")).collect(),
            })
        })
        .collect();
    // The command, by the words that differ (a long command is never cut where it differs).
    if with_command {
        let commands: Vec<Vec<Vec<String>>> = sides
            .iter()
            .map(|side| side.iter().map(|i| command_words(i.doc)).collect())
            .collect();
        let mut distinct: Vec<Vec<String>> = commands.iter().flatten().cloned().collect();
        distinct.sort();
        distinct.dedup();
        let diff = command_differences(&distinct);
        let shown = |c: &Vec<String>| {
            let i = distinct.iter().position(|d| d == c).unwrap_or(0);
            diff.get(i).cloned().unwrap_or_default()
        };
        let per_side: Vec<Vec<String>> = commands
            .iter()
            .map(|side| {
                let mut v: Vec<String> = side.iter().map(shown).collect();
                v.sort();
                v.dedup();
                v
            })
            .collect();
        if !diff.is_empty() && per_side.iter().any(|v| v != &per_side[0]) {
            out.insert(
                0,
                Difference {
                    field: "command".into(),
                    values: per_side.iter().map(|v| v.join(" / ")).collect(),
                },
            );
        }
    }
    out
}

#[cfg(test)]
mod flag_tests {
    use super::*;

    #[test]
    fn the_flags_values_are_read_and_refused_in_words() {
        assert_eq!(parse_change("5"), Ok(5.0));
        assert!(parse_change("-1").is_err());
        let e = parse_regression_limit("latest").unwrap_err();
        assert!(e.ends_with("or write --fail-on-regression=10)"), "{e}");
        assert_eq!(parse_resamples("2000"), Ok(2000));
        for bad in ["99", "1000001", "x"] {
            let e = parse_resamples(bad).unwrap_err();
            assert_eq!(
                e,
                format!("'{bad}' resamples: give a number from 100 to 1000000")
            );
        }
    }
}
