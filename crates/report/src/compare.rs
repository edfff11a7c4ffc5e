//! Comparing two or more result documents: matching series side by side, what differs in the host
//! and the settings, and a verdict per series from a bootstrap interval of each percentile's
//! difference (see [`crate::bootstrap`]), not from a bare ratio.

use crate::bootstrap::{difference_interval, Empirical, Interval, Rng};
use punctual_result::{Failure, ResultDoc};
use serde::Serialize;
use serde_json::Value;

/// The percentiles compared for every series (label, milli-percent).
pub const COMPARED: [(&str, u64); 3] = [("50", 50_000), ("99", 99_000), ("99.9", 99_900)];

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
    /// Bootstrap replicates per percentile.
    pub resamples: usize,
    /// Of the interval, e.g. 0.99.
    pub confidence: f64,
    /// Changes smaller than this (percent of the first result's value) are "no significant
    /// change" even when the interval excludes zero: with millions of samples the interval of a
    /// 0.3 % change can be narrow, and nobody gates a kernel on 0.3 %.
    pub min_change_percent: f64,
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            percentile: 99_000,
            resamples: 2_000,
            confidence: 0.99,
            min_change_percent: 5.0,
            seed: 0x7075_6e63_7475_616c, // "punctual"
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// Fewer than two documents: there is nothing to compare against.
    #[error("compare needs at least two results, got {0}")]
    TooFew(usize),
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
}

impl From<CompareError> for Failure {
    fn from(e: CompareError) -> Failure {
        Failure::usage(e.to_string())
    }
}

/// The label of the i-th result: A, B, ... Z, R27, R28...
pub fn label(i: usize) -> String {
    if i < 26 {
        ((b'A' + i as u8) as char).to_string()
    } else {
        format!("R{}", i + 1)
    }
}

/// A percentile in milli-percent as its document key (`99_900` -> "99.9").
pub fn percentile_name(milli_percent: u64) -> String {
    let s = format!("{:.3}", milli_percent as f64 / 1000.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// "99.9" or "99.9%" -> 99_900.
pub fn parse_percentile(s: &str) -> Result<u64, CompareError> {
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| CompareError::Percentile(s.into()))?;
    if !(v > 0.0 && v <= 100.0) {
        return Err(CompareError::Percentile(s.into()));
    }
    Ok((v * 1000.0).round() as u64)
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResultInfo {
    pub label: String,
    pub source: String,
    pub command: String,
    pub started_at: String,
    pub status: String,
}

/// A field whose value differs between results: one value per result, in order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Difference {
    pub field: String,
    pub values: Vec<String>,
}

/// One result's numbers for a series; ratios are to the first result (absent in the first).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub label: String,
    pub count: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p99_9_ns: u64,
    pub max_ns: u64,
    pub within_10us: f64,
    pub missed: u64,
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

/// One percentile of one result against the first.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Change {
    pub percentile: String,
    pub base_ns: u64,
    pub other_ns: u64,
    /// The interval of other - base, in ns.
    pub interval: Interval,
    /// Point change and interval bounds in percent of `base_ns`.
    pub change_percent: f64,
    pub low_percent: f64,
    pub high_percent: f64,
    /// The interval excludes zero.
    pub significant: bool,
}

/// A result against the first, for one series.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Against {
    pub label: String,
    pub verdict: Verdict,
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
    pub rows: Vec<Row>,
    /// One per result after the first.
    pub against: Vec<Against>,
}

/// A series that is not in every result, and why.
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
    /// The percentile verdicts look at (document key, e.g. "99").
    pub percentile: String,
    pub confidence: f64,
    pub resamples: usize,
    pub min_change_percent: f64,
    pub seed: u64,
    pub host_differences: Vec<Difference>,
    pub settings_differences: Vec<Difference>,
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
    /// Series whose verdict percentile rose by more than `percent` with the interval above zero.
    pub fn regressions_over(&self, percent: f64) -> Vec<Breach> {
        let mut out = Vec::new();
        for s in &self.series {
            for a in &s.against {
                if let Some(c) = a.change(&self.percentile) {
                    if c.significant && c.interval.low_ns > 0 && c.change_percent > percent {
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

/// Compare `inputs` (the first is the baseline).
pub fn compare(inputs: &[Input<'_>], opts: &Options) -> Result<Comparison, CompareError> {
    if inputs.len() < 2 {
        return Err(CompareError::TooFew(inputs.len()));
    }
    if opts.percentile == 0 || opts.percentile > 100_000 {
        return Err(CompareError::Percentile(percentile_name(opts.percentile)));
    }
    let labels: Vec<String> = (0..inputs.len()).map(label).collect();
    // Keys in order of first appearance, baseline first.
    let mut keys: Vec<Key> = Vec::new();
    for inp in inputs {
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
        let found: Vec<Option<&punctual_result::Series>> = inputs
            .iter()
            .map(|i| i.doc.series.iter().find(|s| key_of(s) == *k))
            .collect();
        if found.iter().all(Option::is_some) {
            let found: Vec<&punctual_result::Series> = found.into_iter().flatten().collect();
            series.push(compare_series(
                k,
                &found,
                inputs,
                &labels,
                opts,
                opts.seed ^ (ki as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            )?);
        } else {
            unmatched.push(explain(k, &found, inputs, &labels));
        }
    }
    let mut pcts: Vec<u64> = COMPARED.iter().map(|p| p.1).collect();
    if !pcts.contains(&opts.percentile) {
        pcts.push(opts.percentile);
    }
    Ok(Comparison {
        results: inputs
            .iter()
            .zip(&labels)
            .map(|(i, l)| ResultInfo {
                label: l.clone(),
                source: i.source.clone(),
                command: i.doc.command.join(" "),
                started_at: i.doc.started_at.clone(),
                status: serde_json::to_value(i.doc.status)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default(),
            })
            .collect(),
        percentile: percentile_name(opts.percentile),
        confidence: opts.confidence,
        resamples: opts.resamples,
        min_change_percent: opts.min_change_percent,
        seed: opts.seed,
        host_differences: differences(inputs, host_fields),
        settings_differences: differences(inputs, settings_fields),
        series,
        unmatched,
    })
}

fn explain(
    k: &Key,
    found: &[Option<&punctual_result::Series>],
    inputs: &[Input<'_>],
    labels: &[String],
) -> Unmatched {
    let mut why = Vec::new();
    let mut present = Vec::new();
    for ((f, inp), l) in found.iter().zip(inputs).zip(labels) {
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

fn compare_series(
    k: &Key,
    found: &[&punctual_result::Series],
    inputs: &[Input<'_>],
    labels: &[String],
    opts: &Options,
    seed: u64,
) -> Result<SeriesComparison, CompareError> {
    let mut empiricals = Vec::new();
    for ((s, inp), l) in found.iter().zip(inputs).zip(labels) {
        let rec = s.recorder().map_err(|e| CompareError::Histogram {
            label: l.clone(),
            source_name: inp.source.clone(),
            series: s.name.clone(),
            error: e.to_string(),
        })?;
        empiricals.push(Empirical::of(&rec));
    }
    let base = &found[0].summary;
    let rows = found
        .iter()
        .zip(labels)
        .enumerate()
        .map(|(i, (s, l))| {
            let m = &s.summary;
            Row {
                label: l.clone(),
                count: m.count,
                p50_ns: m.percentiles.p50,
                p99_ns: m.percentiles.p99,
                p99_9_ns: m.percentiles.p99_9,
                max_ns: m.max,
                within_10us: m.within.us10,
                missed: m.missed_periods,
                ratios: (i > 0).then(|| Ratios {
                    p50: ratio(base.percentiles.p50, m.percentiles.p50),
                    p99: ratio(base.percentiles.p99, m.percentiles.p99),
                    p99_9: ratio(base.percentiles.p99_9, m.percentiles.p99_9),
                    max: ratio(base.max, m.max),
                }),
            }
        })
        .collect();
    let mut pcts: Vec<u64> = COMPARED.iter().map(|p| p.1).collect();
    if !pcts.contains(&opts.percentile) {
        pcts.push(opts.percentile);
    }
    let mut rng = Rng::seeded(seed);
    let mut against = Vec::new();
    for (e, l) in empiricals.iter().zip(labels).skip(1) {
        let mut changes = Vec::new();
        for &mp in &pcts {
            let Some(iv) = difference_interval(
                &empiricals[0],
                e,
                mp,
                opts.resamples,
                opts.confidence,
                &mut rng,
            ) else {
                continue;
            };
            let b = empiricals[0].percentile(mp);
            let pct = |ns: i64| {
                if b == 0 {
                    0.0
                } else {
                    100.0 * ns as f64 / b as f64
                }
            };
            changes.push(Change {
                percentile: percentile_name(mp),
                base_ns: b,
                other_ns: e.percentile(mp),
                interval: iv,
                change_percent: pct(iv.point_ns),
                low_percent: pct(iv.low_ns),
                high_percent: pct(iv.high_ns),
                significant: iv.low_ns > 0 || iv.high_ns < 0,
            });
        }
        let key = percentile_name(opts.percentile);
        let verdict = match changes.iter().find(|c| c.percentile == key) {
            None => Verdict::NoSamples,
            Some(c) if c.interval.low_ns > 0 && c.change_percent >= opts.min_change_percent => {
                Verdict::Regression
            }
            Some(c) if c.interval.high_ns < 0 && -c.change_percent >= opts.min_change_percent => {
                Verdict::Improvement
            }
            Some(_) => Verdict::NoSignificantChange,
        };
        against.push(Against {
            label: l.clone(),
            verdict,
            changes,
        });
    }
    Ok(SeriesComparison {
        name: k.0.clone(),
        kind: k.1.clone(),
        cpu: k.2,
        rows,
        against,
    })
}

/// A setting as people read it: objects as `key: value` pairs, lists one item after another,
/// nanoseconds (`*_ns` keys) as durations, never raw JSON (a 270-column cell, issue 31).
fn show(v: &Value) -> String {
    show_keyed("", v)
}

fn show_keyed(key: &str, v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        Value::Number(n) if key.ends_with("_ns") => n
            .as_u64()
            .map(punctual_time::format_ns)
            .unwrap_or_else(|| n.to_string()),
        Value::Array(items) if items.is_empty() => "none".into(),
        Value::Array(items) => items
            .iter()
            .map(|i| show_keyed(key, i))
            .collect::<Vec<_>>()
            .join("; "),
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| {
                // A map keyed by CPU number under a nanosecond field keeps its unit.
                let unit = if k.chars().all(|c| c.is_ascii_digit()) {
                    key
                } else {
                    k
                };
                format!("{k}: {}", show_keyed(unit, v))
            })
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}

fn host_fields(doc: &ResultDoc) -> Vec<(String, String)> {
    let h = &doc.host;
    vec![
        ("hostname".into(), h.hostname.clone()),
        ("kernel".into(), h.kernel.clone()),
        ("preempt".into(), h.preempt.clone()),
        ("realtime".into(), h.realtime.to_string()),
        ("cpus".into(), h.cpus.to_string()),
        ("cpu model".into(), h.cpu_model.clone()),
        ("clocksource".into(), h.clocksource.clone()),
        ("virtualized".into(), h.virtualized.to_string()),
        (
            "HZ".into(),
            h.hz.map(|z| z.to_string()).unwrap_or_else(|| "-".into()),
        ),
    ]
}

fn settings_fields(doc: &ResultDoc) -> Vec<(String, String)> {
    let s = &doc.settings;
    let mut out = vec![
        ("command".into(), doc.command.join(" ")),
        (
            "status".into(),
            show(&serde_json::to_value(doc.status).unwrap_or(Value::Null)),
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
            s.mlock.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
        ),
        (
            "dma_latency".into(),
            s.dma_latency_us
                .map(|u| format!("{u} us"))
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
        out.push((k.clone(), show_keyed(k, v)));
    }
    out
}

/// Fields (from every document, union of names, in order of appearance) whose values differ.
fn differences(
    inputs: &[Input<'_>],
    fields: impl Fn(&ResultDoc) -> Vec<(String, String)>,
) -> Vec<Difference> {
    let per: Vec<Vec<(String, String)>> = inputs.iter().map(|i| fields(i.doc)).collect();
    let mut names: Vec<&String> = Vec::new();
    for f in per.iter().flatten() {
        if !names.contains(&&f.0) {
            names.push(&f.0);
        }
    }
    names
        .into_iter()
        .filter_map(|n| {
            let values: Vec<String> = per
                .iter()
                .map(|p| {
                    p.iter()
                        .find(|f| &f.0 == n)
                        .map(|f| f.1.clone())
                        .unwrap_or_else(|| "(absent)".into())
                })
                .collect();
            values.iter().any(|v| v != &values[0]).then(|| Difference {
                field: n.clone(),
                values,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 31 item 7: `compare` printed nested settings as raw JSON, 270 columns of it.
    #[test]
    fn nested_settings_read_as_words_with_units_not_json() {
        let steal = serde_json::json!({"0": 1_500_000u64, "1": 0});
        assert_eq!(show_keyed("steal_ns", &steal), "0: 1.50 ms, 1: 0 ns");
        let loads = serde_json::json!([
            {"kind": "cpu", "cpu": 1, "elapsed_ns": 2_000_000_000u64},
            {"kind": "io", "cpu": null, "elapsed_ns": 5_000u64}
        ]);
        let shown = show_keyed("load_reports", &loads);
        // Keys keep the document's order, whatever serde_json's map keeps.
        let items: Vec<&str> = shown.split("; ").collect();
        assert_eq!(items.len(), 2, "{shown}");
        for (item, parts) in items.iter().zip([
            ["cpu: 1", "elapsed_ns: 2.00 s", "kind: cpu"],
            ["cpu: -", "elapsed_ns: 5.00 us", "kind: io"],
        ]) {
            for p in parts {
                assert!(item.contains(p), "{p} not in {item}");
            }
        }
        assert!(!shown.contains('{') && !shown.contains('"'), "{shown}");
        assert_eq!(show(&serde_json::json!([])), "none");
        assert_eq!(show(&serde_json::json!(true)), "true");
    }
}
