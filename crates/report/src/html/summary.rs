//! The top of the report: what was compared, the verdict per series with its interval, the host
//! and the worst figures; the table of runs; every series' numbers.

use super::{esc, table, table_classed, Run};
use crate::compare::{compare_sides, series_title, Input, Options, Verdict};
use crate::human;
use punctual_time::format_ns;
use std::fmt::Write;

/// The page's title: the command of a single run, else what was compared.
pub(super) fn title(sides: &[Vec<super::ReportInput<'_>>], runs: &[Run<'_>]) -> String {
    if runs.len() == 1 {
        let words = crate::compare::command_words(runs[0].doc());
        return format!("punctual report: {}", words.join(" "));
    }
    let counts: Vec<String> = sides
        .iter()
        .enumerate()
        .map(|(i, s)| match s.len() {
            1 => crate::compare::label(i),
            n => format!("{} ({n} runs)", crate::compare::label(i)),
        })
        .collect();
    match counts.len() {
        1 => format!("punctual report: {}", counts[0]),
        2 => format!("punctual report: {} against {}", counts[1], counts[0]),
        n => format!(
            "punctual report: {} and {} each against {}",
            counts[1..n - 1].join(", "),
            counts[n - 1],
            counts[0]
        ),
    }
}

/// What was compared, the verdicts, the host, the worst figures.
pub(super) fn summary(
    sides: &[Vec<super::ReportInput<'_>>],
    runs: &[Run<'_>],
    opts: &Options,
) -> String {
    let mut out = String::new();
    out.push_str("<p>");
    for (i, side) in sides.iter().enumerate() {
        let members: Vec<String> = runs
            .iter()
            .filter(|r| r.side == i)
            .map(|r| {
                // A side of one run is named by the side's letter already.
                if side.len() == 1 {
                    r.name
                        .split_once(' ')
                        .map_or(r.name.clone(), |x| x.1.to_string())
                } else {
                    r.name.clone()
                }
            })
            .collect();
        let cmd = crate::compare::command_words(side[0].doc).join(" ");
        let _ = write!(
            out,
            "<b>{}</b>: {} <code>{}</code>{}<br>",
            esc(&crate::compare::label(i)),
            esc(&members.join(", ")),
            esc(&cmd),
            if i == 0 && sides.len() > 1 {
                " (the baseline)"
            } else {
                ""
            }
        );
    }
    out.push_str("</p>\n");
    verdicts(&mut out, sides, opts);
    host_line(&mut out, runs);
    worst(&mut out, runs);
    out
}

/// The verdict per series and side, from the same comparison `punctual compare` makes.
fn verdicts(out: &mut String, sides: &[Vec<super::ReportInput<'_>>], opts: &Options) {
    if sides.len() < 2 {
        out.push_str(
            "<p class=\"why\">One side only: no verdict (report two results, or A1 A2 -- B1 B2, \
             to compare).</p>\n",
        );
        return;
    }
    let inputs: Vec<Vec<Input<'_>>> = sides
        .iter()
        .map(|s| {
            s.iter()
                .map(|r| Input {
                    source: r.source.clone(),
                    doc: r.doc,
                })
                .collect()
        })
        .collect();
    let c = match compare_sides(&inputs, opts) {
        Ok(c) if !c.series.is_empty() => c,
        Ok(c) => {
            let _ = writeln!(
                out,
                "<p class=\"why\">No verdict: no series is in every result ({}).</p>",
                esc(&c
                    .unmatched
                    .iter()
                    .map(|u| format!("{}: {}", series_title(&u.name, &u.kind, u.cpu), u.why))
                    .collect::<Vec<_>>()
                    .join("; "))
            );
            return;
        }
        Err(e) => {
            let _ = writeln!(
                out,
                "<p class=\"why\">No verdict: {}.</p>",
                esc(&e.to_string())
            );
            return;
        }
    };
    let p = &c.percentile;
    let mut notes: Vec<String> = Vec::new();
    for (i, side) in c.sides.iter().enumerate().skip(1) {
        let base = &c.sides[0].label;
        let mut rows = Vec::new();
        let mut classes = Vec::new();
        for s in &c.series {
            let a = &s.against[i - 1];
            let ch = a.change(p);
            rows.push(vec![
                series_title(&s.name, &s.kind, s.cpu),
                ch.map_or("-".into(), |c| format_ns(c.base_ns)),
                ch.map_or("-".into(), |c| format_ns(c.other_ns)),
                ch.map_or("-".into(), |c| format!("{:+.1} %", c.change_percent)),
                ch.map_or("-".into(), |c| {
                    format!("[{:+.1}, {:+.1}] %", c.low_percent, c.high_percent)
                }),
                a.verdict.words().to_string(),
            ]);
            classes.push(match a.verdict {
                Verdict::Regression => "regression",
                Verdict::Improvement => "improvement",
                _ => "",
            });
        }
        let regressions = classes.iter().filter(|c| **c == "regression").count();
        let _ = writeln!(
            out,
            "<h3>{} against {}: {}</h3>",
            esc(&side.label),
            esc(base),
            if regressions > 0 {
                format!("<span class=\"bad\">{regressions} regression(s)</span>")
            } else {
                "no regression".to_string()
            }
        );
        table_classed(
            out,
            &[
                "series",
                &format!("p{p} {base}"),
                &format!("p{p} {}", side.label),
                "change",
                "interval",
                "verdict",
            ],
            &rows,
            &classes,
        );
        let method = c.series[0].against[i - 1].method;
        let conf = 100.0 * c.series[0].against[i - 1].confidence;
        let how = match method {
            crate::compare::Method::BetweenRuns => format!(
                "{conf:.0} % interval of the ratio across runs (Welch's t on each run's own p{p}): \
                 the spread between runs is weighed."
            ),
            crate::compare::Method::WithinRun => format!(
                "{conf:.0} % bootstrap interval from the two histograms: one run per side, so only \
                 the noise inside each run is weighed, and a disturbed run reads as a change. \
                 Several runs per side (--repeat 3) weigh the spread between runs."
            ),
        };
        let note = format!(
            "{how} A change needs its interval to exclude no change and to be at least {} %.",
            c.min_change_percent
        );
        // Said once when every side was compared the same way.
        if !notes.contains(&note) {
            notes.push(note);
        }
        if c.sides.len() == 2 || i + 1 == c.sides.len() {
            for n in &notes {
                let _ = writeln!(out, "<p class=\"sub\">{}</p>", esc(n));
            }
        }
        for d in c
            .disturbances
            .iter()
            .filter(|d| d.contains(&format!("during {};", side.label)))
        {
            let _ = writeln!(out, "<p class=\"note\">{}</p>", esc(d));
        }
    }
}

/// The host in one line when every run shares it.
fn host_line(out: &mut String, runs: &[Run<'_>]) {
    let h = &runs[0].doc().host;
    if runs.iter().all(|r| r.doc().host == *h) {
        let _ = writeln!(
            out,
            "<p>Host <b>{}</b>: kernel {}, preemption {}{}, {} CPUs ({}), HZ {}, clocksource {}{}.</p>",
            esc(&h.hostname),
            esc(&h.kernel),
            esc(&h.preempt),
            if h.realtime { " (PREEMPT_RT)" } else { "" },
            h.cpus,
            esc(&h.cpu_model),
            h.hz.map_or("unknown".into(), |z| z.to_string()),
            esc(&h.clocksource),
            if h.virtualized { ", virtualised" } else { "" }
        );
    } else {
        out.push_str("<p>The runs were made on different hosts: see Host and settings.</p>\n");
    }
}

/// The worst figures of all runs: highest p99, largest sample, missed periods, steal.
fn worst(out: &mut String, runs: &[Run<'_>]) {
    let mut rows = Vec::new();
    let all = runs
        .iter()
        .flat_map(|r| r.doc().series.iter().map(move |s| (r, s)))
        .filter(|(_, s)| s.summary.count > 0);
    let p99 = all.clone().max_by_key(|(_, s)| s.summary.percentiles.p99);
    let max = all.clone().max_by_key(|(_, s)| s.summary.max);
    let missed = all.clone().max_by_key(|(_, s)| s.summary.missed_periods);
    let at = |r: &Run<'_>, s: &punctual_result::Series| {
        format!("{} in {}", series_title(&s.name, &s.kind, s.cpu), r.label)
    };
    if let Some((r, s)) = p99 {
        rows.push(vec![
            "highest p99".into(),
            format_ns(s.summary.percentiles.p99),
            at(r, s),
        ]);
    }
    if let Some((r, s)) = max {
        rows.push(vec![
            "largest sample".into(),
            format_ns(s.summary.max),
            at(r, s),
        ]);
    }
    if let Some((r, s)) = missed.filter(|(_, s)| s.summary.missed_periods > 0) {
        rows.push(vec![
            "most missed periods".into(),
            s.summary.missed_periods.to_string(),
            at(r, s),
        ]);
    }
    let steal = runs
        .iter()
        .filter_map(|r| Some((r, crate::compare::taken(r.doc()).0?)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((r, share)) = steal.filter(|(_, s)| *s > 0.0) {
        rows.push(vec![
            "most steal".into(),
            human::percent(share, 2),
            format!("of the CPUs' time in {}", r.label),
        ]);
    }
    if rows.is_empty() {
        out.push_str(
            "<p class=\"why\">No series has samples, so there are no worst figures.</p>\n",
        );
        return;
    }
    out.push_str("<h3>Worst figures</h3>\n");
    table(out, &["", "value", "where"], &rows);
}

/// Every run: label, name, source, start, length, status, steal and other load.
pub(super) fn runs_table(runs: &[Run<'_>]) -> String {
    let mut out = String::new();
    let tagged = runs.iter().any(|r| !r.doc().tags.is_empty());
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            let d = r.doc();
            let (steal, others) = crate::compare::taken(d);
            let took = match (time_of(&d.started_at), time_of(&d.ended_at)) {
                (Some(a), Some(b)) if b >= a => format_ns((b - a) as u64),
                _ => "-".into(),
            };
            let tags: Vec<String> = d.tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let mut row = vec![r.label.clone()];
            if tagged {
                row.push(tags.join(", "));
            }
            row.extend([
                r.input.source.clone(),
                d.started_at
                    .chars()
                    .take(19)
                    .collect::<String>()
                    .replace('T', " "),
                took,
                serde_json::to_value(d.status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                steal.map_or("-".into(), |s| human::percent(s, 2)),
                others.map_or("-".into(), |s| human::percent(s, 0)),
            ]);
            row
        })
        .collect();
    let mut header = vec!["result"];
    if tagged {
        header.push("tags");
    }
    header.extend([
        "source",
        "started (UTC)",
        "took",
        "status",
        "steal",
        "others",
    ]);
    table(&mut out, &header, &rows);
    out.push_str(
        "<p class=\"sub\">Steal: the CPUs' time the host took during the run; others: the CPUs' \
         time other processes used (both as the run recorded them; - when it did not).</p>\n",
    );
    out
}

fn time_of(s: &str) -> Option<i128> {
    time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .ok()
        .map(|t| t.unix_timestamp_nanos())
}

/// Every run's series: samples, percentiles, max, within 10 us, missed periods.
pub(super) fn series_table(runs: &[Run<'_>]) -> Result<String, String> {
    let rows: Vec<Vec<String>> = runs
        .iter()
        .flat_map(|r| {
            r.doc().series.iter().map(move |s| {
                let m = &s.summary;
                let p = &m.percentiles;
                vec![
                    r.label.clone(),
                    series_title(&s.name, &s.kind, s.cpu),
                    m.count.to_string(),
                    format_ns(m.min),
                    format_ns(p.p50),
                    format_ns(p.p99),
                    format_ns(p.p99_9),
                    format_ns(m.max),
                    human::percent(m.within.us10, 2),
                    m.missed_periods.to_string(),
                ]
            })
        })
        .collect();
    if rows.is_empty() {
        return Err("The results hold no series.".into());
    }
    let mut out = String::new();
    table(
        &mut out,
        &[
            "result",
            "series",
            "samples",
            "min",
            "p50",
            "p99",
            "p99.9",
            "max",
            "within 10 us",
            "missed",
        ],
        &rows,
    );
    Ok(out)
}
