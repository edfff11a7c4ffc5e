//! A [`Comparison`] as text (the default), Markdown or JSON. Each returns the bytes; the caller
//! decides where they go. Every number carries its unit (`us`, `%`, `x`); counts are bare.

use crate::compare::{series_title, Change, Comparison};
use punctual_result::Table;
use punctual_time::format_ns;

/// One table of the comparison, before it becomes text or Markdown.
struct Section {
    title: String,
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    notes: Vec<String>,
}

fn ratio(r: Option<f64>) -> String {
    r.map(|r| format!(" ({r:.2}x)")).unwrap_or_default()
}

fn signed(p: f64) -> String {
    format!("{p:+.1}")
}

fn change_cell(c: &Change) -> String {
    format!(
        "{} % [{}, {}] %",
        signed(c.change_percent),
        signed(c.low_percent),
        signed(c.high_percent)
    )
}

fn sections(c: &Comparison) -> Vec<Section> {
    let mut out = vec![matching(c), verdicts(c)];
    differences(c, &mut out);
    if !c.unmatched.is_empty() {
        out.push(unmatched(c));
    }
    out
}

/// The matching series side by side, ratios to the first result.
fn matching(c: &Comparison) -> Section {
    let mut rows = Vec::new();
    for s in &c.series {
        for (i, r) in s.rows.iter().enumerate() {
            let rt = r.ratios.as_ref();
            rows.push(vec![
                if i == 0 {
                    series_title(&s.name, &s.kind, s.cpu)
                } else {
                    String::new()
                },
                r.label.clone(),
                r.count.to_string(),
                format!("{}{}", format_ns(r.p50_ns), ratio(rt.and_then(|x| x.p50))),
                format!("{}{}", format_ns(r.p99_ns), ratio(rt.and_then(|x| x.p99))),
                format!(
                    "{}{}",
                    format_ns(r.p99_9_ns),
                    ratio(rt.and_then(|x| x.p99_9))
                ),
                format!("{}{}", format_ns(r.max_ns), ratio(rt.and_then(|x| x.max))),
                format!("{:.2} %", 100.0 * r.within_10us),
                r.missed.to_string(),
            ]);
        }
    }
    let results: Vec<String> = c
        .results
        .iter()
        .map(|r| {
            format!(
                "{} = {} ({}, {})",
                r.label, r.source, r.command, r.started_at
            )
        })
        .collect();
    Section {
        title: "compare: matching series (ratios to A)".into(),
        header: [
            "series",
            "result",
            "samples",
            "p50",
            "p99",
            "p99.9",
            "max",
            "within 10 us",
            "missed",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        notes: results,
    }
}

/// Each series' percentile changes with their intervals, and its verdict.
fn verdicts(c: &Comparison) -> Section {
    let mut header = vec!["series".to_string(), "result".to_string()];
    let names: Vec<String> = c
        .series
        .first()
        .and_then(|s| s.against.first())
        .map(|a| a.changes.iter().map(|ch| ch.percentile.clone()).collect())
        .unwrap_or_else(|| {
            crate::compare::COMPARED
                .iter()
                .map(|p| p.0.to_string())
                .collect()
        });
    header.extend(names.iter().map(|n| format!("p{n} change [interval]")));
    header.push(format!("verdict (p{})", c.percentile));
    let mut rows = Vec::new();
    for s in &c.series {
        for (i, a) in s.against.iter().enumerate() {
            let mut row = vec![
                if i == 0 {
                    series_title(&s.name, &s.kind, s.cpu)
                } else {
                    String::new()
                },
                format!("{} vs A", a.label),
            ];
            row.extend(
                names
                    .iter()
                    .map(|n| a.change(n).map(change_cell).unwrap_or_else(|| "-".into())),
            );
            row.push(a.verdict.words().into());
            rows.push(row);
        }
    }
    Section {
        title: format!(
            "verdicts: {:.0} % bootstrap intervals of each percentile's difference ({} resamples of the histograms, seed {:#x})",
            100.0 * c.confidence,
            c.resamples,
            c.seed
        ),
        header,
        rows,
        notes: vec![format!(
            "A regression or improvement needs the p{} interval to exclude zero and a change of at least {} %.",
            c.percentile, c.min_change_percent
        )],
    }
}

/// Host facts and settings that differ between the results.
fn differences(c: &Comparison, out: &mut Vec<Section>) {
    for (title, diffs) in [
        ("host differences", &c.host_differences),
        ("settings differences", &c.settings_differences),
    ] {
        let mut header = vec!["field".to_string()];
        header.extend(c.results.iter().map(|r| r.label.clone()));
        let mut s = Section {
            title: title.into(),
            header,
            rows: diffs
                .iter()
                .map(|d| {
                    let mut row = vec![d.field.clone()];
                    row.extend(d.values.iter().cloned());
                    row
                })
                .collect(),
            notes: Vec::new(),
        };
        if diffs.is_empty() {
            s.notes.push("none".into());
        }
        out.push(s);
    }
}

/// Series not in every result, with why.
fn unmatched(c: &Comparison) -> Section {
    Section {
        title: "series not compared (not in every result)".into(),
        header: ["series", "in", "why"].map(String::from).to_vec(),
        rows: c
            .unmatched
            .iter()
            .map(|u| {
                vec![
                    series_title(&u.name, &u.kind, u.cpu),
                    if u.in_results.is_empty() {
                        "-".into()
                    } else {
                        u.in_results.join(", ")
                    },
                    u.why.clone(),
                ]
            })
            .collect(),
        notes: Vec::new(),
    }
}

/// The human tables.
pub fn text(c: &Comparison) -> String {
    let mut out = String::new();
    for s in sections(c) {
        let mut t = Table::new(&[]).titled(s.title);
        t.header = s.header;
        if s.rows.is_empty() {
            t.header.clear();
        }
        for r in s.rows {
            t.row(r);
        }
        for n in s.notes {
            t.note(n);
        }
        out.push_str(&t.render());
        out.push('\n');
    }
    out
}

/// A Markdown cell: one line, no pipe that would split the cell, no control characters.
fn md(s: &str) -> String {
    md_text(s, punctual_result::table::MAX_CELL_CHARS)
}

fn md_text(s: &str, max: usize) -> String {
    punctual_time::text::display_text(s, max).replace('|', "\\|")
}

/// GitHub-flavoured Markdown tables (for pull requests and CI summaries).
pub fn markdown(c: &Comparison) -> String {
    let mut out = String::new();
    for s in sections(c) {
        out.push_str(&format!("### {}\n\n", md_text(&s.title, 2_000)));
        if !s.rows.is_empty() {
            out.push_str(&format!(
                "| {} |\n",
                s.header
                    .iter()
                    .map(|h| md(h))
                    .collect::<Vec<_>>()
                    .join(" | ")
            ));
            out.push('|');
            // Right-aligned where every cell is a number (with its unit), as the text tables do.
            for i in 0..s.header.len() {
                let numeric = i > 0
                    && s.rows.iter().all(|r| {
                        r.get(i).is_some_and(|c| {
                            c.starts_with(|ch: char| ch.is_ascii_digit() || ch == '+' || ch == '-')
                        })
                    });
                out.push_str(if numeric { " ---: |" } else { " --- |" });
            }
            out.push('\n');
            for r in &s.rows {
                out.push_str(&format!(
                    "| {} |\n",
                    r.iter().map(|c| md(c)).collect::<Vec<_>>().join(" | ")
                ));
            }
            out.push('\n');
        }
        for n in &s.notes {
            out.push_str(&format!("- {}\n", md_text(n, 2_000)));
        }
        if !s.notes.is_empty() {
            out.push('\n');
        }
    }
    out
}

/// The comparison as JSON (`punctual.compare/1`).
pub fn json(c: &Comparison) -> String {
    #[derive(serde::Serialize)]
    struct Document<'a> {
        schema: &'static str,
        #[serde(flatten)]
        comparison: &'a Comparison,
    }
    let doc = Document {
        schema: "punctual.compare/1",
        comparison: c,
    };
    let mut s = serde_json::to_string_pretty(&doc).expect("comparisons always serialise");
    s.push('\n');
    s
}
