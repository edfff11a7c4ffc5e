//! What some runs carry beyond their series: `check`'s verdicts per deadline class, and an
//! experiment's own output (its numbers beside the published ones, and the figures and tables the
//! results store kept with it, embedded so the page stays one file).

use super::{esc, table, Run};
use crate::compare::percentile_name;
use base64::Engine;
use punctual_time::format_ns;
use serde_json::Value;
use std::fmt::Write;

fn show(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => crate::human::value("", other),
    }
}

/// `check`'s verdicts, a table per run that has them; `None` when no run does.
pub(super) fn check_verdicts(runs: &[Run<'_>]) -> Option<String> {
    let mut out = String::new();
    for r in runs {
        let Some(Value::Array(classes)) = r.doc().extra.get("verdict") else {
            continue;
        };
        let cell = |v: &Value| match v {
            Value::Object(o) => format!(
                "{} ({})",
                show(o.get("serves").unwrap_or(&Value::Null)),
                o.get("fraction_within")
                    .and_then(Value::as_f64)
                    .map(|f| crate::human::percent(f, 3))
                    .unwrap_or_else(|| "-".into())
            ),
            _ => "-".into(),
        };
        let rows: Vec<Vec<String>> = classes
            .iter()
            .map(|c| {
                vec![
                    show(c.get("class").unwrap_or(&Value::Null)),
                    c.get("bound_ns")
                        .and_then(Value::as_u64)
                        .map(format_ns)
                        .unwrap_or_else(|| "-".into()),
                    cell(c.get("plain_sleep").unwrap_or(&Value::Null)),
                    cell(c.get("hybrid").unwrap_or(&Value::Null)),
                ]
            })
            .collect();
        if runs.len() > 1 {
            let _ = writeln!(out, "<h3>{}</h3>", esc(&r.name));
        }
        table(
            &mut out,
            &[
                "deadline class",
                "bound",
                "plain sleep",
                "punctual (hybrid)",
            ],
            &rows,
        );
    }
    (!out.is_empty()).then_some(out)
}

/// Series carrying published numbers (`published_*` extras): ours beside the seed's.
fn published(d: &punctual_result::ResultDoc) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for s in &d.series {
        for (k, v) in &s.extra {
            let Some(what) = k.strip_prefix("published_") else {
                continue;
            };
            if what == "us" {
                // Etsion Table 6 style: {"0.9": us, "0.95": us, "0.99": us, "max": us}.
                let Value::Object(o) = v else { continue };
                for (q, pv) in o {
                    let mp = q
                        .parse::<f64>()
                        .ok()
                        .map(|f| (f * 100_000.0).round() as u64);
                    let ours = match (q.as_str(), mp) {
                        ("max", _) => Some(s.summary.max),
                        (_, Some(mp)) => s.recorder().ok().map(|r| r.percentile(mp)),
                        _ => None,
                    };
                    rows.push(vec![
                        s.name.clone(),
                        mp.map_or_else(|| q.clone(), |mp| format!("p{}", percentile_name(mp))),
                        ours.map_or("-".into(), format_ns),
                        pv.as_f64()
                            .map(|u| format_ns((u * 1000.0) as u64))
                            .unwrap_or_else(|| show(pv)),
                    ]);
                }
            } else {
                rows.push(vec![
                    s.name.clone(),
                    what.replace('_', " "),
                    s.extra.get(what).map(show).unwrap_or_else(|| "-".into()),
                    show(v),
                ]);
            }
        }
    }
    rows
}

/// Per run that has any: its numbers beside the published ones, the tables and figures the
/// store kept with it. `None` when no run has any of them.
pub(super) fn experiments(runs: &[Run<'_>]) -> Option<String> {
    let mut out = String::new();
    let mut without = Vec::new();
    for r in runs {
        let d = r.doc();
        let rows = published(d);
        let experiment = d.extra.get("experiment").and_then(Value::as_str);
        let stored = !r.input.figures.is_empty() || r.input.tables.is_some();
        if rows.is_empty() && !stored {
            if experiment.is_some() {
                without.push(r.label.clone());
            }
            continue;
        }
        let _ = writeln!(
            out,
            "<h3>{}{}</h3>",
            esc(&r.name),
            experiment
                .map(|e| format!(": experiment {}", esc(e)))
                .unwrap_or_default()
        );
        if !rows.is_empty() {
            out.push_str("<p>Ours beside the published numbers:</p>\n");
            table(&mut out, &["series", "figure", "ours", "published"], &rows);
        }
        if let Some(t) = r
            .input
            .tables
            .filter(|t| experiment.is_some() && !t.trim().is_empty())
        {
            // Line by line: `esc` shows control characters (newlines too) escaped.
            let lines: Vec<String> = t.trim_end().lines().map(esc).collect();
            let _ = writeln!(
                out,
                "<p>The tables as the command printed them:</p>\n<pre>{}</pre>",
                lines.join("\n")
            );
        }
        for (name, bytes) in r.input.figures {
            let media = punctual_media_type(name, bytes);
            if !media.starts_with("image/") {
                continue;
            }
            // As an image, never inline markup: a figure from a shared store runs no script.
            let _ = writeln!(
                out,
                "<figure><img alt=\"{}\" src=\"data:{media};base64,{}\"><figcaption>{}</figcaption></figure>",
                esc(name),
                base64::engine::general_purpose::STANDARD.encode(bytes),
                esc(name)
            );
        }
    }
    if !without.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"why\">{}: an experiment's own figures and tables are kept in the results \
             store; name the run by its id to include them.</p>",
            esc(&without.join(", "))
        );
    }
    (!out.is_empty()).then_some(out)
}

/// An image's media type from its name or first bytes (only SVG and PNG are embedded).
fn punctual_media_type(name: &str, bytes: &[u8]) -> &'static str {
    let lower = name.to_ascii_lowercase();
    if lower.ends_with(".svg") || bytes.starts_with(b"<svg") || bytes.starts_with(b"<?xml") {
        "image/svg+xml"
    } else if lower.ends_with(".png") || bytes.starts_with(b"\x89PNG") {
        "image/png"
    } else {
        "application/octet-stream"
    }
}
