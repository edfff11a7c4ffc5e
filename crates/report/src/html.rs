//! One self-contained HTML report of one or more result documents: inline CSS and SVG, nothing
//! fetched, no script. Figures are drawn from the histograms (and, for lateness over time, from a
//! binned samples file), never from every sample, so the size does not grow with the run.

use crate::compare::{percentile_name, series_title};
use crate::timeline::Timeline;
use punctual_plot::{histogram_buckets, histogram_plot, line_plot, percentile_plot, Line};
use punctual_result::{ResultDoc, Series};
use punctual_stats::Recorder;
use punctual_time::format_ns;
use serde_json::Value;
use std::fmt::Write;

/// One document in the report, with how the user named it.
#[derive(Clone, Debug)]
pub struct ReportInput<'a> {
    pub source: String,
    pub doc: &'a ResultDoc,
}

/// The page and the titles of its figures, in order (one `<svg>` each).
#[derive(Clone, Debug)]
pub struct Report {
    pub html: String,
    pub figures: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("report needs at least one result")]
    Empty,
    #[error("result {source_name}, series '{series}': {error}")]
    Histogram {
        source_name: String,
        series: String,
        error: String,
    },
    #[error("{0}")]
    Plot(String),
}

impl From<ReportError> for punctual_result::Failure {
    fn from(e: ReportError) -> Self {
        match e {
            ReportError::Plot(_) => punctual_result::Failure::system(e.to_string()),
            _ => punctual_result::Failure::usage(e.to_string()),
        }
    }
}

const CSS: &str = "body{font-family:sans-serif;margin:2em;max-width:1100px;color:#222}\
h1{font-size:1.6em}h2{border-bottom:2px solid #1f77b4;padding-bottom:.2em;margin-top:2em}\
table{border-collapse:collapse;margin:.6em 0 1.2em}th,td{border:1px solid #ccc;padding:.25em .6em}\
th{background:#f0f4f8;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}\
figure{margin:1em 0}figure svg{max-width:100%;height:auto}figcaption{font-size:.9em;color:#555}\
.fallback{background:#fff4e0}.bad{color:#b00}.good{color:#070}";

/// `&`, `<`, `>`, `"` and `'` escaped; control characters shown escaped as in tables.
pub fn esc(s: &str) -> String {
    let s = punctual_time::text::display_text(s, 2_000);
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn looks_numeric(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '+')
        && s.chars().filter(|c| c.is_ascii_digit()).count() > 0
}

fn table(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
    out.push_str("<table><tr>");
    for h in header {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr>\n");
    for r in rows {
        out.push_str("<tr>");
        for c in r {
            let class = if looks_numeric(c) { " class=\"n\"" } else { "" };
            let _ = write!(out, "<td{class}>{}</td>", esc(c));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

struct Figures {
    titles: Vec<String>,
}

impl Figures {
    /// An SVG from `punctual-plot` inside a figure, with a `<title>` so it is named for readers
    /// (and for tests that count figures).
    fn add(
        &mut self,
        out: &mut String,
        title: &str,
        caption: &str,
        svg: Result<String, punctual_plot::PlotError>,
    ) -> Result<(), ReportError> {
        let svg = svg.map_err(|e| ReportError::Plot(format!("{title}: {e}")))?;
        let at = svg.find('>').map(|i| i + 1).unwrap_or(0);
        let _ = writeln!(
            out,
            "<figure>{}<title>{}</title>{}<figcaption>{}</figcaption></figure>",
            &svg[..at],
            esc(title),
            &svg[at..],
            esc(caption)
        );
        self.titles.push(title.to_string());
        Ok(())
    }
}

fn recorder(source: &str, s: &Series) -> Result<Recorder, ReportError> {
    s.recorder().map_err(|e| ReportError::Histogram {
        source_name: source.into(),
        series: s.name.clone(),
        error: e.to_string(),
    })
}

fn pct(f: f64) -> String {
    format!("{:.3} %", 100.0 * f)
}

fn show(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// A bucket width of 1, 2 or 5 times a power of ten, giving about 300 buckets up to `upper`.
fn bucket_width(upper: u64) -> u64 {
    let raw = (upper / 300).max(1);
    let mut p = 1u64;
    loop {
        for m in [1, 2, 5] {
            if p.saturating_mul(m) >= raw {
                return p * m;
            }
        }
        p = p.saturating_mul(10);
    }
}

/// The whole report. `timelines` are drawn as "lateness over time" figures after the documents.
pub fn report(inputs: &[ReportInput<'_>], timelines: &[Timeline]) -> Result<Report, ReportError> {
    if inputs.is_empty() {
        return Err(ReportError::Empty);
    }
    let mut figs = Figures { titles: Vec::new() };
    let mut out = String::new();
    let title = if inputs.len() == 1 {
        format!("punctual report: {}", inputs[0].doc.command.join(" "))
    } else {
        format!("punctual report: {} results", inputs.len())
    };
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\"><title>{}</title>\
         <style>{CSS}</style></head><body>\n<h1>{}</h1>\n",
        esc(&title),
        esc(&title)
    );
    let rows: Vec<Vec<String>> = inputs
        .iter()
        .enumerate()
        .map(|(i, inp)| {
            vec![
                crate::compare::label(i),
                inp.source.clone(),
                inp.doc.command.join(" "),
                inp.doc.started_at.clone(),
                show(&serde_json::to_value(inp.doc.status).unwrap_or(Value::Null)),
            ]
        })
        .collect();
    table(
        &mut out,
        &["result", "source", "command", "started", "status"],
        &rows,
    );

    if inputs.len() > 1 {
        overlays(&mut out, &mut figs, inputs)?;
    }
    for (i, inp) in inputs.iter().enumerate() {
        document(&mut out, &mut figs, &crate::compare::label(i), inp)?;
    }
    if !timelines.is_empty() {
        out.push_str("<h2>Lateness over time</h2>\n");
    }
    for t in timelines {
        let lines: Vec<Line> = t
            .threads
            .iter()
            .map(|(n, bins)| Line {
                label: format!("thread {n}"),
                points: bins
                    .iter()
                    .enumerate()
                    .filter(|(_, &v)| v > 0)
                    .map(|(i, &v)| ((i as u64 * t.bin_ns) as f64 / 1e9, v as f64 / 1e3))
                    .collect(),
            })
            .collect();
        let title = format!("Lateness over time: {}", t.source);
        figs.add(
            &mut out,
            &title,
            &format!(
                "The worst sample in each {} of the run, per thread ({} samples; log axis).",
                format_ns(t.bin_ns),
                t.samples
            ),
            line_plot(
                &title,
                "time (s)",
                "worst latency (us)",
                &lines,
                false,
                true,
            ),
        )?;
    }
    out.push_str("<p><small>Drawn by punctual from the result documents' histograms.</small></p>\n</body></html>\n");
    Ok(Report {
        html: out,
        figures: figs.titles,
    })
}

/// Several results: each series present in more than one overlays its CDFs.
fn overlays(
    out: &mut String,
    figs: &mut Figures,
    inputs: &[ReportInput<'_>],
) -> Result<(), ReportError> {
    out.push_str("<h2>Results overlaid</h2>\n");
    let mut keys: Vec<(String, String, Option<usize>)> = Vec::new();
    for inp in inputs {
        for s in &inp.doc.series {
            let k = (s.name.clone(), s.kind.clone(), s.cpu);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    for k in keys {
        let mut lines = Vec::new();
        for (i, inp) in inputs.iter().enumerate() {
            if let Some(s) = inp
                .doc
                .series
                .iter()
                .find(|s| s.name == k.0 && s.kind == k.1 && s.cpu == k.2)
            {
                if s.summary.count > 0 {
                    lines.push((crate::compare::label(i), recorder(&inp.source, s)?));
                }
            }
        }
        if lines.len() < 2 {
            continue;
        }
        let refs: Vec<(String, &Recorder)> = lines.iter().map(|(l, r)| (l.clone(), r)).collect();
        let title = format!("CDF: {}", series_title(&k.0, &k.1, k.2));
        figs.add(
            out,
            &title,
            "Latency against percentile on an exponential axis (90, 99, 99.9 ... evenly spaced), one line per result.",
            percentile_plot(&title, &refs),
        )?;
    }
    Ok(())
}

fn document(
    out: &mut String,
    figs: &mut Figures,
    label: &str,
    inp: &ReportInput<'_>,
) -> Result<(), ReportError> {
    let d = inp.doc;
    let _ = write!(
        out,
        "<h2>{}: {}</h2>\n<p><code>{}</code><br>{} to {}, status {}, {} {}</p>\n",
        esc(label),
        esc(&inp.source),
        esc(&d.command.join(" ")),
        esc(&d.started_at),
        esc(&d.ended_at),
        esc(&show(
            &serde_json::to_value(d.status).unwrap_or(Value::Null)
        )),
        esc(&d.tool.name),
        esc(&d.tool.version)
    );
    if let Some(e) = d.extra.get("experiment") {
        let _ = writeln!(out, "<p>Experiment <b>{}</b></p>", esc(&show(e)));
    }
    host_section(out, d);
    settings_section(out, d);
    verdict_section(out, d);
    series_section(out, d);
    taken_section(out, figs, label, d)?;
    let with_samples: Vec<&Series> = d.series.iter().filter(|s| s.summary.count > 0).collect();
    if !with_samples.is_empty() {
        let recs: Vec<(String, Recorder)> = with_samples
            .iter()
            .map(|s| Ok((s.name.clone(), recorder(&inp.source, s)?)))
            .collect::<Result<_, ReportError>>()?;
        // One CDF figure holds at most 8 lines (the palette); more series take more figures.
        for (part, chunk) in recs.chunks(8).enumerate() {
            let refs: Vec<(String, &Recorder)> =
                chunk.iter().map(|(n, r)| (n.clone(), r)).collect();
            let title = if recs.len() > 8 {
                format!(
                    "{label}: CDF, series {}-{}",
                    part * 8 + 1,
                    part * 8 + chunk.len()
                )
            } else {
                format!("{label}: CDF")
            };
            figs.add(
                out,
                &title,
                "Latency against percentile on an exponential axis (the SVR4 study's and Etsion Fig. 7's style).",
                percentile_plot(&title, &refs),
            )?;
        }
        for ((name, r), s) in recs.iter().zip(&with_samples) {
            // The whole range: the log count axis is there so that rare long samples show.
            let max = r.max().unwrap_or(0);
            let width = bucket_width(max.max(1));
            let buckets = histogram_buckets(r, width);
            let title = format!(
                "{label}: histogram of {}",
                series_title(name, &s.kind, s.cpu)
            );
            let caption = format!(
                "Counts per {} bucket up to the maximum ({}) on a logarithmic count axis.",
                format_ns(width),
                format_ns(max)
            );
            figs.add(
                out,
                &title,
                &caption,
                histogram_plot(&title, "latency (us)", &buckets),
            )?;
        }
    }
    Ok(())
}

/// Per CPU, the share of the run the host took (steal, from `settings.steal_ns` over
/// `steal_window_ns`) and the share lost to gaps a busy loop saw (`gap` series: `lost_ns` over
/// `duration_ns`): the time no setting inside the guest can give back. Nothing when the document
/// has neither.
fn taken_section(
    out: &mut String,
    figs: &mut Figures,
    label: &str,
    d: &ResultDoc,
) -> Result<(), ReportError> {
    let num = |v: Option<&Value>| v.and_then(Value::as_f64);
    let window = num(d.settings.extra.get("steal_window_ns")).filter(|w| *w > 0.0);
    let mut steal: Vec<(usize, f64)> = match (d.settings.extra.get("steal_ns"), window) {
        (Some(Value::Object(m)), Some(w)) => m
            .iter()
            .filter_map(|(c, v)| Some((c.parse().ok()?, v.as_f64()? / w * 100.0)))
            .collect(),
        _ => Vec::new(),
    };
    steal.sort_by_key(|(c, _)| *c);
    let gaps: Vec<(usize, f64)> = d
        .series
        .iter()
        .filter(|s| s.kind == punctual_result::doc::kind::GAP)
        .filter_map(|s| {
            let lost = num(s.extra.get("lost_ns"))?;
            let dur = num(s.extra.get("duration_ns")).filter(|x| *x > 0.0)?;
            Some((s.cpu?, lost / dur * 100.0))
        })
        .collect();
    if steal.is_empty() && gaps.is_empty() {
        return Ok(());
    }
    out.push_str(
        "<h3>Time taken from the CPUs</h3>
",
    );
    let mut cpus: Vec<usize> = steal.iter().chain(&gaps).map(|(c, _)| *c).collect();
    cpus.sort_unstable();
    cpus.dedup();
    let at = |v: &[(usize, f64)], c: usize| v.iter().find(|(x, _)| *x == c).map(|(_, p)| *p);
    let pct = |p: Option<f64>| p.map_or("-".into(), |p| format!("{p:.2} %"));
    table(
        out,
        &[
            "cpu",
            "host steal (% of the run)",
            "gaps lost (% of the loop's time)",
        ],
        &cpus
            .iter()
            .map(|&c| vec![c.to_string(), pct(at(&steal, c)), pct(at(&gaps, c))])
            .collect::<Vec<_>>(),
    );
    let mut groups = Vec::new();
    if !steal.is_empty() {
        groups.push((
            "host steal".to_string(),
            cpus.iter().map(|&c| at(&steal, c).unwrap_or(0.0)).collect(),
        ));
    }
    if !gaps.is_empty() {
        groups.push((
            "gaps (bench gaps)".to_string(),
            cpus.iter().map(|&c| at(&gaps, c).unwrap_or(0.0)).collect(),
        ));
    }
    let names: Vec<String> = cpus.iter().map(|c| format!("CPU {c}")).collect();
    let title = format!("{label}: time taken from each CPU");
    figs.add(
        out,
        &title,
        "Steal: time the hypervisor ran something else while the CPU had work (/proc/stat); gaps: time a busy loop on the CPU did not run (interrupts, the tick, the host). Releases inside either are late by the rest of it.",
        punctual_plot::bar_plot(&title, "% of the time", &names, &groups),
    )
}

/// The host facts the result was measured on.
fn host_section(out: &mut String, d: &ResultDoc) {
    out.push_str("<h3>Host</h3>\n");
    let h = &d.host;
    let facts = [
        ("hostname", h.hostname.clone()),
        ("kernel", h.kernel.clone()),
        ("preempt", h.preempt.clone()),
        ("realtime", h.realtime.to_string()),
        ("cpus", h.cpus.to_string()),
        ("cpu model", h.cpu_model.clone()),
        ("clocksource", h.clocksource.clone()),
        ("virtualized", h.virtualized.to_string()),
        (
            "HZ",
            h.hz.map(|z| z.to_string()).unwrap_or_else(|| "-".into()),
        ),
    ];
    table(
        out,
        &["fact", "value"],
        &facts
            .iter()
            .map(|(k, v)| vec![k.to_string(), v.clone()])
            .collect::<Vec<_>>(),
    );
}

/// Settings, the extras and the fallbacks.
fn settings_section(out: &mut String, d: &ResultDoc) {
    out.push_str("<h3>Settings</h3>\n");
    let s = &d.settings;
    let mut rows = vec![
        vec![
            "policy".into(),
            s.policy.clone().unwrap_or_else(|| "-".into()),
        ],
        vec![
            "priority".into(),
            s.priority
                .map(|p| p.to_string())
                .unwrap_or_else(|| "-".into()),
        ],
        vec![
            "mlock".into(),
            s.mlock.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
        ],
        vec![
            "dma_latency".into(),
            s.dma_latency_us
                .map(|u| format!("{u} us"))
                .unwrap_or_else(|| "off".into()),
        ],
    ];
    for (k, v) in &s.extra {
        rows.push(vec![k.clone(), show(v)]);
    }
    table(out, &["setting", "value"], &rows);
    if s.fallbacks.is_empty() {
        out.push_str("<p>Fallbacks: none (every setting asked for was had).</p>\n");
    } else {
        out.push_str(
            "<div class=\"fallback\"><p>Fallbacks: settings this run could not have.</p>\n",
        );
        table(
            out,
            &["setting", "wanted", "got", "why", "fix"],
            &s.fallbacks
                .iter()
                .map(|f| {
                    vec![
                        f.setting.clone(),
                        f.wanted.clone(),
                        f.got.clone(),
                        f.why.clone(),
                        f.fix.clone(),
                    ]
                })
                .collect::<Vec<_>>(),
        );
        out.push_str("</div>\n");
    }
}

/// `check` verdicts, where the document has them.
fn verdict_section(out: &mut String, d: &ResultDoc) {
    if let Some(Value::Array(classes)) = d.extra.get("verdict") {
        out.push_str("<h3>Check verdicts</h3>\n");
        let cell = |v: &Value| match v {
            Value::Object(o) => format!(
                "{} ({})",
                show(o.get("serves").unwrap_or(&Value::Null)),
                o.get("fraction_within")
                    .and_then(Value::as_f64)
                    .map(pct)
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
        table(
            out,
            &[
                "deadline class",
                "bound",
                "plain sleep",
                "punctual (hybrid)",
            ],
            &rows,
        );
    }
}

/// Each series' numbers.
fn series_section(out: &mut String, d: &ResultDoc) {
    out.push_str("<h3>Series</h3>\n");
    let rows: Vec<Vec<String>> = d
        .series
        .iter()
        .map(|s| {
            let m = &s.summary;
            let p = &m.percentiles;
            vec![
                s.name.clone(),
                s.kind.clone(),
                s.cpu.map(|c| c.to_string()).unwrap_or_else(|| "-".into()),
                m.count.to_string(),
                format_ns(m.min),
                format_ns(p.p50),
                format_ns(p.p90),
                format_ns(p.p99),
                format_ns(p.p99_9),
                format_ns(p.p99_99),
                format_ns(m.max),
                format_ns(m.mean),
                pct(m.within.us10),
                pct(m.within.us100),
                m.missed_periods.to_string(),
                m.woke_late.to_string(),
            ]
        })
        .collect();
    table(
        out,
        &[
            "series",
            "kind",
            "cpu",
            "samples",
            "min",
            "p50",
            "p90",
            "p99",
            "p99.9",
            "p99.99",
            "max",
            "mean",
            "within 10 us",
            "within 100 us",
            "missed",
            "woke late",
        ],
        &rows,
    );
    published(out, d);
}

/// Series that carry published numbers (`published_*` extras): ours beside the seed's.
fn published(out: &mut String, d: &ResultDoc) {
    let mut rows = Vec::new();
    for s in &d.series {
        for (k, v) in &s.extra {
            let Some(what) = k.strip_prefix("published_") else {
                continue;
            };
            if what == "us" {
                // Etsion Table 6 style: {"0.9": us, "0.95": us, "0.99": us, "max": us}.
                if let Value::Object(o) = v {
                    for (q, pv) in o {
                        let ours = match q.as_str() {
                            "max" => Some(s.summary.max),
                            q => q
                                .parse::<f64>()
                                .ok()
                                .map(|f| (f * 100_000.0).round() as u64)
                                .and_then(|mp| s.recorder().ok().map(|r| r.percentile(mp))),
                        };
                        let name = if q == "max" {
                            "max".to_string()
                        } else {
                            q.parse::<f64>()
                                .map(|f| {
                                    format!("p{}", percentile_name((f * 100_000.0).round() as u64))
                                })
                                .unwrap_or_else(|_| q.clone())
                        };
                        rows.push(vec![
                            s.name.clone(),
                            name,
                            ours.map(format_ns).unwrap_or_else(|| "-".into()),
                            pv.as_f64()
                                .map(|u| format_ns((u * 1000.0) as u64))
                                .unwrap_or_else(|| show(pv)),
                        ]);
                    }
                }
            } else {
                rows.push(vec![
                    s.name.clone(),
                    what.to_string(),
                    s.extra.get(what).map(show).unwrap_or_else(|| "-".into()),
                    show(v),
                ]);
            }
        }
    }
    if !rows.is_empty() {
        out.push_str("<h3>Experiment: ours and the published numbers</h3>\n");
        table(out, &["series", "figure", "ours", "published"], &rows);
    }
}
