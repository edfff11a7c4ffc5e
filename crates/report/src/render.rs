//! A [`Comparison`] as text (the default), Markdown or JSON. Each returns the bytes; the caller
//! decides where they go. Every number carries its unit (`us`, `%`); counts are bare. The text
//! fits 80 columns for the usual series names; `wide` adds the p50 and p99.9 changes.

use crate::compare::{series_title, Against, Change, Comparison, Method, SeriesComparison};
use punctual_result::Table;
use punctual_time::format_ns;

/// One table of the comparison, before it becomes text or Markdown.
struct Section {
    title: String,
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    notes: Vec<String>,
}

fn signed(p: f64) -> String {
    format!("{p:+.1}")
}

fn change_cell(c: &Change) -> String {
    format!("{} %", signed(c.change_percent))
}

/// Interval bounds to a tenth below 10 %, whole percent above (the digits a bound can carry).
fn bound(p: f64) -> String {
    if p.abs() < 10.0 {
        format!("{p:+.1}")
    } else {
        format!("{p:+.0}")
    }
}

fn interval_cell(c: &Change) -> String {
    format!("[{}, {}] %", bound(c.low_percent), bound(c.high_percent))
}

fn both_cell(c: &Change) -> String {
    format!("{} {}", change_cell(c), interval_cell(c))
}

/// "A (3 runs) against B (3 runs)", or "A, B and C, one run each".
pub fn what(c: &Comparison) -> String {
    let side = |s: &crate::compare::SideInfo| match s.runs {
        1 => s.label.clone(),
        n => format!("{} ({n} runs)", s.label),
    };
    let names: Vec<String> = c.sides.iter().map(side).collect();
    if c.single_runs() {
        match names.len() {
            2 => format!("{} against {}", names[1], names[0]),
            _ => format!("{} each against {}", names[1..].join(", "), names[0]),
        }
    } else {
        format!("{} against {}", names[1..].join(", "), names[0])
    }
}

/// A series' name, short when every series has the same kind (the kind is then in the titles).
fn name(c: &Comparison, s: &SeriesComparison) -> String {
    let one_kind = c.series.iter().all(|x| x.kind == s.kind);
    match (one_kind, s.cpu) {
        (true, Some(cpu)) => format!("{} (cpu {cpu})", s.name),
        (true, None) => s.name.clone(),
        (false, _) => series_title(&s.name, &s.kind, s.cpu),
    }
}

/// The kind every series shares, if they do.
fn common_kind(c: &Comparison) -> Option<&str> {
    let k = &c.series.first()?.kind;
    c.series.iter().all(|s| &s.kind == k).then_some(k.as_str())
}

fn short_source(s: &str) -> String {
    let shown = punctual_time::text::display_text(s, 200).into_owned();
    let n = shown.chars().count();
    if n <= 28 {
        shown
    } else {
        format!("…{}", shown.chars().skip(n - 27).collect::<String>())
    }
}

fn when(started_at: &str) -> String {
    started_at
        .chars()
        .take(19)
        .map(|c| if c == 'T' { ' ' } else { c })
        .collect()
}

fn sections(c: &Comparison, wide: bool) -> Vec<Section> {
    let mut out = vec![results(c)];
    out.extend(figures(c));
    for i in 1..c.sides.len() {
        out.push(verdicts(c, i, wide));
    }
    differences(c, &mut out);
    if !c.unmatched.is_empty() {
        out.push(unmatched(c));
    }
    out
}

/// What was compared: every run with its start, the machine's disturbance and tags.
fn results(c: &Comparison) -> Section {
    let share = |s: Option<f64>, d: usize| s.map_or("-".into(), |s| crate::human::percent(s, d));
    Section {
        title: format!("compare: {}", what(c)),
        header: [
            "result",
            "source",
            "started (UTC)",
            "steal",
            "others",
            "tags",
        ]
        .map(String::from)
        .to_vec(),
        rows: c
            .results
            .iter()
            .map(|r| {
                vec![
                    r.label.clone(),
                    short_source(&r.source),
                    when(&r.started_at),
                    share(r.steal, 2),
                    share(r.others, 0),
                    r.tags
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(","),
                ]
            })
            .collect(),
        notes: vec![
            "steal: the CPUs' time the host took during the run; others: the CPUs' time other \
             processes used (both as recorded by the run)."
                .into(),
        ],
    }
}

/// Per series, each side's figures (a typical run's percentiles when a side has several runs).
fn figures(c: &Comparison) -> Vec<Section> {
    let several = !c.single_runs();
    c.series
        .iter()
        .map(|s| {
            let rows = s
                .rows
                .iter()
                .map(|r| {
                    let ratio = |v: Option<f64>| v.map(|x| format!(" {x:.2}x")).unwrap_or_default();
                    let rt = r.ratios.as_ref();
                    vec![
                        r.label.clone(),
                        r.runs.to_string(),
                        r.count.to_string(),
                        format_ns(r.p50_ns),
                        format!("{}{}", format_ns(r.p99_ns), ratio(rt.and_then(|x| x.p99))),
                        format_ns(r.p99_9_ns),
                        format_ns(r.max_ns),
                        format!("{:.2} %", 100.0 * r.within_10us),
                        r.missed.to_string(),
                    ]
                })
                .collect();
            Section {
                title: series_title(&s.name, &s.kind, s.cpu),
                header: [
                    "side", "runs", "samples", "p50", "p99", "p99.9", "max", "<=10 us", "missed",
                ]
                .map(String::from)
                .to_vec(),
                rows,
                notes: if several && std::ptr::eq(s, &c.series[0]) {
                    vec!["Percentiles of a side of several runs: the geometric mean of its runs' own; max and counts over all of them.".into()]
                } else {
                    Vec::new()
                },
            }
        })
        .collect()
}

/// How the interval of `a` was reached, in one sentence.
fn method_note(c: &Comparison, a: &Against) -> String {
    match a.method {
        Method::BetweenRuns => format!(
            "{:.0} % interval of the ratio across runs (Welch's t on each run's own p{} in log \
             scale): the spread between runs is weighed.",
            100.0 * a.confidence,
            c.percentile
        ),
        Method::WithinRun => format!(
            "{:.0} % bootstrap interval from the two histograms ({} resamples, seed {:#x}): one \
             run per side, so only the noise inside each run is weighed; a neighbour's load or \
             the host's steal during one run reads as a change. Give several runs per side \
             (--repeat 3, then compare A1 A2 A3 -- B1 B2 B3).",
            100.0 * a.confidence,
            c.resamples,
            c.seed
        ),
    }
}

/// Side `i` against the first: the verdict percentile, its change and interval, the verdict.
fn verdicts(c: &Comparison, i: usize, wide: bool) -> Section {
    let base = &c.sides[0].label;
    let other = &c.sides[i].label;
    let p = &c.percentile;
    let mut header = vec![
        "series".to_string(),
        format!("p{p} {base}"),
        format!("p{p} {other}"),
        "change".to_string(),
        "interval".to_string(),
    ];
    let extra: Vec<&str> = crate::compare::COMPARED
        .iter()
        .map(|x| x.0)
        .filter(|x| x != p)
        .collect();
    if wide {
        header.extend(extra.iter().map(|x| format!("p{x} change [interval]")));
    }
    header.push("verdict".into());
    let mut rows = Vec::new();
    let mut note = None;
    for s in &c.series {
        let a = &s.against[i - 1];
        let ch = a.change(p);
        let mut row = vec![
            name(c, s),
            ch.map_or("-".into(), |c| format_ns(c.base_ns)),
            ch.map_or("-".into(), |c| format_ns(c.other_ns)),
            ch.map_or("-".into(), change_cell),
            ch.map_or("-".into(), interval_cell),
        ];
        if wide {
            row.extend(
                extra
                    .iter()
                    .map(|x| a.change(x).map_or("-".into(), both_cell)),
            );
        }
        row.push(a.verdict.words().into());
        rows.push(row);
        note.get_or_insert_with(|| method_note(c, a));
    }
    let mut notes: Vec<String> = note.into_iter().collect();
    notes.push(format!(
        "A regression or improvement needs the interval to exclude no change and a change of at \
         least {} % (--min-change).",
        c.min_change_percent
    ));
    notes.extend(
        c.disturbances
            .iter()
            .filter(|d| d.contains(&format!("during {other};")))
            .cloned(),
    );
    let kind = common_kind(c).map(|k| format!(", {k}")).unwrap_or_default();
    Section {
        title: format!("verdicts: {other} against {base} at p{p}{kind}"),
        header,
        rows,
        notes,
    }
}

/// Host facts and settings that differ between the sides: one row per side.
fn differences(c: &Comparison, out: &mut Vec<Section>) {
    for (title, diffs) in [
        ("host facts that differ", &c.host_differences),
        ("settings that differ", &c.settings_differences),
    ] {
        let mut rows = Vec::new();
        for d in diffs {
            for (i, v) in d.values.iter().enumerate() {
                rows.push(vec![
                    if i == 0 {
                        d.field.clone()
                    } else {
                        String::new()
                    },
                    c.sides[i].label.clone(),
                    v.clone(),
                ]);
            }
        }
        let notes = if diffs.is_empty() {
            vec![format!(
                "none: every side has the same {}",
                title.split(' ').next().unwrap_or("")
            )]
        } else {
            Vec::new()
        };
        out.push(Section {
            title: title.into(),
            header: ["field", "side", "value"].map(String::from).to_vec(),
            rows,
            notes,
        });
    }
}

/// Series not in every run, with why.
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

/// `text` in lines of at most `width` characters, broken at spaces.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// The human tables; notes wrapped to 80 columns.
pub fn text(c: &Comparison, wide: bool) -> String {
    let mut out = String::new();
    for s in sections(c, wide) {
        let mut t = Table::new(&[]).titled(s.title);
        t.header = s.header;
        if s.rows.is_empty() {
            t.header.clear();
        }
        for r in s.rows {
            t.row(r);
        }
        for n in s.notes {
            for line in wrap(&n, 80) {
                t.note(line);
            }
        }
        out.push_str(&t.render());
        out.push('\n');
    }
    out
}

/// A Markdown cell: one line, no pipe that would split the cell, no control characters.
fn md(s: &str) -> String {
    md_text(s, 2_000)
}

fn md_text(s: &str, max: usize) -> String {
    punctual_time::text::display_text(s, max).replace('|', "\\|")
}

/// GitHub-flavoured Markdown tables (for pull requests and CI summaries), every percentile.
pub fn markdown(c: &Comparison) -> String {
    let mut out = String::new();
    for s in sections(c, true) {
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
                            c.starts_with(|ch: char| {
                                ch.is_ascii_digit() || ch == '+' || ch == '-' || ch == '['
                            })
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

/// The comparison as JSON (`punctual.compare/2`: sides of runs, ratio intervals).
pub fn json(c: &Comparison) -> String {
    #[derive(serde::Serialize)]
    struct Document<'a> {
        schema: &'static str,
        #[serde(flatten)]
        comparison: &'a Comparison,
    }
    let doc = Document {
        schema: "punctual.compare/2",
        comparison: c,
    };
    let mut s = serde_json::to_string_pretty(&doc).expect("comparisons always serialise");
    s.push('\n');
    s
}
