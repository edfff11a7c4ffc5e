//! Host facts and settings once: what every run shares in one table, then only what differs, a
//! row per run; the fallbacks runs had to take. Values in words and units, never JSON.

use super::{esc, table, Run};
use crate::human;
use std::fmt::Write;

/// Settings that are measurements of the run (shown under "Time taken" or nowhere).
const MEASURED: [&str; 5] = [
    "steal_ns",
    "steal_window_ns",
    "others_cpu_ns",
    "load_reports",
    "samples_dropped",
];

/// A run's host facts and settings as (name, value) in words.
fn fields(r: &Run<'_>) -> Vec<(String, String)> {
    let d = r.doc();
    let h = &d.host;
    let yes = |b: bool| if b { "yes" } else { "no" }.to_string();
    let s = &d.settings;
    let mut out = vec![
        ("hostname".to_string(), h.hostname.clone()),
        ("kernel".into(), h.kernel.clone()),
        ("preemption".into(), h.preempt.clone()),
        ("PREEMPT_RT".into(), yes(h.realtime)),
        ("CPUs".into(), h.cpus.to_string()),
        ("CPU model".into(), h.cpu_model.clone()),
        ("clocksource".into(), h.clocksource.clone()),
        ("virtualised".into(), yes(h.virtualized)),
        (
            "HZ".into(),
            h.hz.map_or("unknown".into(), |z| z.to_string()),
        ),
        ("command".into(), crate::compare::command_words(d).join(" ")),
        (
            "policy".into(),
            s.policy.clone().unwrap_or_else(|| "-".into()),
        ),
        (
            "priority".into(),
            s.priority.map_or("-".into(), |p| p.to_string()),
        ),
        ("mlock".into(), s.mlock.map_or("-".into(), yes)),
        (
            "cpu_dma_latency".into(),
            s.dma_latency_us.map_or("left alone".into(), |u| {
                punctual_time::format_ns(u64::from(u) * 1000)
            }),
        ),
    ];
    for (k, v) in &s.extra {
        if !MEASURED.contains(&k.as_str()) {
            out.push((human::key(k), human::value(k, v)));
        }
    }
    if let Some(e) = d.extra.get("experiment").and_then(|v| v.as_str()) {
        out.push(("experiment".into(), e.to_string()));
    }
    out
}

/// The section: shared values, then differences per run, then fallbacks.
pub(super) fn setup(runs: &[Run<'_>]) -> String {
    let per: Vec<Vec<(String, String)>> = runs.iter().map(fields).collect();
    let mut names: Vec<String> = Vec::new();
    for (n, _) in per.iter().flatten() {
        if !names.contains(n) {
            names.push(n.clone());
        }
    }
    let value = |run: &Vec<(String, String)>, n: &str| {
        run.iter()
            .find(|f| f.0 == n)
            .map_or("(absent)".to_string(), |f| f.1.clone())
    };
    let (mut same, mut differ) = (Vec::new(), Vec::new());
    for n in names {
        let first = value(&per[0], &n);
        if per.iter().all(|p| value(p, &n) == first) {
            same.push(vec![n, first]);
        } else {
            differ.push(n);
        }
    }
    let mut out = String::new();
    if runs.len() > 1 {
        out.push_str("<h3>The same in every result</h3>\n");
    }
    table(&mut out, &["", "value"], &same);
    if runs.len() > 1 {
        out.push_str("<h3>Different between results</h3>\n");
        if differ.is_empty() {
            out.push_str(
                "<p class=\"why\">Nothing: every result ran on the same host with the same \
                 settings.</p>\n",
            );
        } else {
            differences(&mut out, runs, &per, &differ);
        }
    }
    fallbacks(&mut out, runs);
    out
}

/// The fields that differ, a row per run; a command by the words that differ.
fn differences(
    out: &mut String,
    runs: &[Run<'_>],
    per: &[Vec<(String, String)>],
    differ: &[String],
) {
    let commands: Vec<Vec<String>> = runs
        .iter()
        .map(|r| crate::compare::command_words(r.doc()))
        .collect();
    let command_diff = crate::compare::command_differences(&commands);
    let mut header: Vec<&str> = vec!["result"];
    header.extend(differ.iter().map(String::as_str));
    let rows: Vec<Vec<String>> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut row = vec![r.label.clone()];
            for n in differ {
                row.push(if n == "command" {
                    command_diff.get(i).cloned().unwrap_or_default()
                } else {
                    per[i]
                        .iter()
                        .find(|f| &f.0 == n)
                        .map_or("(absent)".into(), |f| f.1.clone())
                });
            }
            row
        })
        .collect();
    table(out, &header, &rows);
}

fn fallbacks(out: &mut String, runs: &[Run<'_>]) {
    let rows: Vec<Vec<String>> = runs
        .iter()
        .flat_map(|r| {
            r.doc().settings.fallbacks.iter().map(move |f| {
                vec![
                    r.label.clone(),
                    f.setting.clone(),
                    f.wanted.clone(),
                    f.got.clone(),
                    f.why.clone(),
                    f.fix.clone(),
                ]
            })
        })
        .collect();
    if rows.is_empty() {
        out.push_str("<p>Fallbacks: none (every setting asked for was had).</p>\n");
        return;
    }
    let _ =
        writeln!(
        out,
        "<div class=\"note\"><p>Fallbacks: settings {} could not have; their figures are worse \
         than this machine can do with them.</p>",
        esc(if runs.len() > 1 { "some runs" } else { "the run" })
    );
    table(
        out,
        &["result", "setting", "wanted", "got", "why", "fix"],
        &rows,
    );
    out.push_str("</div>\n");
}
