//! The report's figures: each series' distribution in every run (percentiles and histograms on a
//! scale shared by every figure of the same quantity), the time the machine took from the CPUs
//! (only when it took any), and lateness over time from samples files.

use super::{color, esc, table, ReportError, Run};
use crate::compare::series_title;
use crate::human;
use crate::timeline::Timeline;
use punctual_plot::{Curve, HistScale, Line};
use punctual_stats::Recorder;
use punctual_time::format_ns;
use std::fmt::Write;

/// Runs drawn on one figure at most (more take more figures on the same scale).
const PER_FIGURE: usize = 10;

#[derive(Default)]
pub(super) struct Figures {
    pub titles: Vec<String>,
}

impl Figures {
    /// An SVG inside a figure, with a `<title>` so it is named for readers (and for tests that
    /// count figures).
    fn add(
        &mut self,
        out: &mut String,
        title: &str,
        caption: &str,
        svg: Result<String, punctual_plot::PlotError>,
    ) -> Result<(), ReportError> {
        self.add_with_legend(out, title, caption, &[], svg)
    }

    /// [`Figures::add`] with the curves named under the figure (a swatch of each colour), where
    /// a legend covers no data however many runs there are.
    fn add_with_legend(
        &mut self,
        out: &mut String,
        title: &str,
        caption: &str,
        legend: &[Curve<'_>],
        svg: Result<String, punctual_plot::PlotError>,
    ) -> Result<(), ReportError> {
        let svg = svg.map_err(|e| ReportError::Plot(format!("{title}: {e}")))?;
        let at = svg.find('>').map(|i| i + 1).unwrap_or(0);
        let mut names = String::new();
        for c in legend {
            let (r, g, b) = c.color;
            let _ = write!(
                names,
                "<span class=\"key\"><span style=\"color:#{r:02x}{g:02x}{b:02x}\">&#9632;</span> {}</span> ",
                esc(&c.label)
            );
        }
        if !names.is_empty() {
            names = format!("<span class=\"keys\">{names}</span><br>");
        }
        let _ = writeln!(
            out,
            "<figure>{}<title>{}</title>{}<figcaption>{names}{}</figcaption></figure>",
            &svg[..at],
            esc(title),
            &svg[at..],
            esc(caption)
        );
        self.titles.push(title.to_string());
        Ok(())
    }
}

fn recorder(r: &Run<'_>, s: &punctual_result::Series) -> Result<Recorder, ReportError> {
    s.recorder().map_err(|e| ReportError::Histogram {
        source_name: r.input.source.clone(),
        series: s.name.clone(),
        error: e.to_string(),
    })
}

type Key = (String, String, Option<usize>);

/// Per series (name, kind, CPU), in order of first appearance: a percentile figure and a
/// histogram of every run that has samples in it; histograms of one kind share their scale.
pub(super) fn distributions(
    runs: &[Run<'_>],
    figs: &mut Figures,
) -> Result<Result<String, String>, ReportError> {
    let mut keys: Vec<Key> = Vec::new();
    for r in runs {
        for s in &r.doc().series {
            let k = (s.name.clone(), s.kind.clone(), s.cpu);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    // Every run's recorder per key (runs without samples in it left out, and named).
    let mut per_key: Vec<(Key, Vec<(usize, Recorder)>)> = Vec::new();
    let mut empty: Vec<String> = Vec::new();
    for k in keys {
        let mut recs = Vec::new();
        for (i, r) in runs.iter().enumerate() {
            let Some(s) = r
                .doc()
                .series
                .iter()
                .find(|s| s.name == k.0 && s.kind == k.1 && s.cpu == k.2)
            else {
                continue;
            };
            if s.summary.count == 0 {
                empty.push(format!("{} in {}", series_title(&k.0, &k.1, k.2), r.label));
                continue;
            }
            recs.push((i, recorder(r, s)?));
        }
        if !recs.is_empty() {
            per_key.push((k, recs));
        }
    }
    if per_key.is_empty() {
        return Ok(Err(
            "No series has samples, so there is no distribution to draw.".into(),
        ));
    }
    // One scale per kind, over every run of every series of that kind.
    let mut scales: Vec<(String, HistScale)> = Vec::new();
    for (k, _) in &per_key {
        if scales.iter().all(|(kind, _)| kind != &k.1) {
            let all: Vec<&Recorder> = per_key
                .iter()
                .filter(|(k2, _)| k2.1 == k.1)
                .flat_map(|(_, r)| r.iter().map(|(_, rec)| rec))
                .collect();
            scales.push((k.1.clone(), HistScale::of(&all)));
        }
    }
    // Every run the only one of its side.
    let single = runs.iter().all(|r| r.index == 0);
    let mut out = String::new();
    for (k, recs) in &per_key {
        let quantity = human::quantity(&k.1);
        let scale = scales.iter().find(|(kind, _)| kind == &k.1).map(|s| s.1);
        let scale = scale.expect("a scale per kind");
        let name = series_title(&k.0, &k.1, k.2);
        let _ = writeln!(out, "<h3>{}</h3>", esc(&name));
        for (part, chunk) in recs.chunks(PER_FIGURE).enumerate() {
            let curves: Vec<Curve<'_>> = chunk
                .iter()
                .map(|(i, rec)| Curve {
                    label: runs[*i].name.clone(),
                    rec,
                    color: color(&runs[*i], single),
                })
                .collect();
            let suffix = if recs.len() > PER_FIGURE {
                format!(" ({} of {})", part + 1, recs.len().div_ceil(PER_FIGURE))
            } else {
                String::new()
            };
            let title = format!("{name}: percentiles{suffix}");
            figs.add_with_legend(
                &mut out,
                &title,
                &format!(
                    "{} against percentile on a nines axis (90, 99, 99.9 ... evenly spaced), one \
                     line per run; the deepest percentile drawn is one sample in the run's count.",
                    capitalised(quantity)
                ),
                &curves,
                punctual_plot::percentiles(&title, quantity, &curves, false),
            )?;
            let title = format!("{name}: histogram{suffix}");
            figs.add_with_legend(
                &mut out,
                &title,
                &format!(
                    "Samples per bucket on a logarithmic count axis, {} buckets from {} to {}{}; \
                     every {} figure shares this scale.",
                    scale.buckets,
                    format_ns(scale.lo_ns),
                    format_ns(scale.hi_ns),
                    if scale.log_x {
                        ", spaced logarithmically (the values span more than 20 times)"
                    } else {
                        ""
                    },
                    quantity
                ),
                &curves,
                punctual_plot::histograms(&title, quantity, &scale, &curves, false),
            )?;
        }
    }
    if !empty.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"why\">Without samples, so not drawn: {}.</p>",
            esc(&empty.join(", "))
        );
    }
    Ok(Ok(out))
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// Per run and CPU, the share of the run the host took (steal) and the share `bench gaps`' loop
/// lost; per run, other processes' share. A figure only when any of them is above zero.
pub(super) fn taken(
    runs: &[Run<'_>],
    figs: &mut Figures,
) -> Result<Result<String, String>, ReportError> {
    let num = |v: Option<&serde_json::Value>| v.and_then(serde_json::Value::as_f64);
    let mut rows = Vec::new();
    // (run label, cpu, steal %, gaps %)
    let mut cells: Vec<(String, usize, Option<f64>, Option<f64>)> = Vec::new();
    for r in runs {
        let d = r.doc();
        let window = num(d.settings.extra.get("steal_window_ns")).filter(|w| *w > 0.0);
        let steal: Vec<(usize, f64)> = match (d.settings.extra.get("steal_ns"), window) {
            (Some(serde_json::Value::Object(m)), Some(w)) => m
                .iter()
                .filter_map(|(c, v)| Some((c.parse().ok()?, v.as_f64()? / w * 100.0)))
                .collect(),
            _ => Vec::new(),
        };
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
        let mut cpus: Vec<usize> = steal.iter().chain(&gaps).map(|(c, _)| *c).collect();
        cpus.sort_unstable();
        cpus.dedup();
        let at = |v: &[(usize, f64)], c: usize| v.iter().find(|(x, _)| *x == c).map(|(_, p)| *p);
        let others = crate::compare::taken(d).1;
        for (n, &c) in cpus.iter().enumerate() {
            let pct = |p: Option<f64>| p.map_or("-".into(), |p| format!("{p:.2} %"));
            rows.push(vec![
                if n == 0 {
                    r.label.clone()
                } else {
                    String::new()
                },
                format!("CPU {c}"),
                pct(at(&steal, c)),
                pct(at(&gaps, c)),
                if n == 0 {
                    others.map_or("-".into(), |o| human::percent(o, 0))
                } else {
                    String::new()
                },
            ]);
            cells.push((r.label.clone(), c, at(&steal, c), at(&gaps, c)));
        }
    }
    if rows.is_empty() {
        return Ok(Err(
            "Not recorded: none of these runs measured steal time or gaps (pure \
                       computation, or a document from before punctual recorded them)."
                .into(),
        ));
    }
    let mut out = String::new();
    table(
        &mut out,
        &[
            "result",
            "CPU",
            "host steal (% of the run)",
            "gaps lost (% of the loop's time)",
            "other processes (% of all CPUs)",
        ],
        &rows,
    );
    let any = cells
        .iter()
        .any(|c| c.2.unwrap_or(0.0) > 0.0 || c.3.unwrap_or(0.0) > 0.0);
    if !any {
        out.push_str(
            "<p class=\"why\">No figure: the host took no time from any CPU during these runs \
             (steal and gaps all zero).</p>\n",
        );
        return Ok(Ok(out));
    }
    // Categories: runs; a bar per CPU for steal, and for gaps where a run measured them.
    let mut labels: Vec<String> = cells.iter().map(|c| c.0.clone()).collect();
    labels.dedup();
    let mut cpus: Vec<usize> = cells.iter().map(|c| c.1).collect();
    cpus.sort_unstable();
    cpus.dedup();
    let mut groups = Vec::new();
    for (what, pick) in [("steal", 2usize), ("gaps", 3)] {
        for &c in &cpus {
            let values: Vec<f64> = labels
                .iter()
                .map(|l| {
                    cells
                        .iter()
                        .find(|x| &x.0 == l && x.1 == c)
                        .and_then(|x| if pick == 2 { x.2 } else { x.3 })
                        .unwrap_or(0.0)
                })
                .collect();
            if values.iter().any(|v| *v > 0.0) {
                groups.push((format!("{what}, CPU {c}"), values));
            }
        }
    }
    let title = "Time taken from each CPU";
    figs.add(
        &mut out,
        title,
        "Steal: time the hypervisor ran something else while the CPU had work (/proc/stat); gaps: \
         time a busy loop on the CPU did not run (interrupts, the tick, the host). Releases inside \
         either are late by the rest of it.",
        punctual_plot::bar_plot(title, "% of the time", &labels, &groups),
    )?;
    Ok(Ok(out))
}

/// Lateness over time, one figure per samples file.
pub(super) fn timelines(timelines: &[Timeline], figs: &mut Figures) -> Result<String, ReportError> {
    let mut out = String::new();
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
            punctual_plot::line_plot(
                &title,
                "time (s)",
                "worst latency (us)",
                &lines,
                false,
                true,
            ),
        )?;
    }
    Ok(out)
}
