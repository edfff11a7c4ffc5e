//! One self-contained HTML report of one or more sides of runs, made to be pasted into a review:
//! inline CSS and SVG, nothing fetched, no script. It opens with what was compared and the
//! verdict per series, then the runs, the host and settings once (only differences per run),
//! the distributions series by series on shared scales, the time the machine took, and what
//! the store kept beside each run (the experiment's own figures and tables). A section with
//! nothing to show says why in one line. Figures are drawn from the histograms (and, for lateness
//! over time, from a binned samples file), never from every sample, so the size does not grow
//! with the run.

mod extras;
mod figures;
mod setup;
mod summary;

use crate::compare::{run_label, Options};
use crate::timeline::Timeline;
use punctual_result::ResultDoc;
use std::fmt::Write;

/// One document in the report, with how the user named it and what the store keeps with it.
#[derive(Clone, Debug)]
pub struct ReportInput<'a> {
    pub source: String,
    pub doc: &'a ResultDoc,
    /// Figures the results store keeps with the run (name, bytes); none for a file.
    pub figures: &'a [(String, Vec<u8>)],
    /// The tables as the command printed them (stored runs).
    pub tables: Option<&'a str>,
}

impl<'a> ReportInput<'a> {
    /// A document alone (a file).
    pub fn doc(source: impl Into<String>, doc: &'a ResultDoc) -> ReportInput<'a> {
        ReportInput {
            source: source.into(),
            doc,
            figures: &[],
            tables: None,
        }
    }
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

/// Every text at 12 px or more; figures at most their own width (900 px), so their 15 px text
/// is not shrunk below 12 px on a page 720 px wide or more.
const CSS: &str = "body{font-family:sans-serif;font-size:16px;margin:2em auto;max-width:1100px;\
padding:0 1.5em;color:#222;line-height:1.4}\
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:2px solid #1f77b4;padding-bottom:.2em;\
margin-top:2em}h3{margin-top:1.4em}\
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:14px}\
th,td{border:1px solid #ccc;padding:.25em .6em;vertical-align:top}\
th{background:#f0f4f8;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums;\
white-space:nowrap}td.t{white-space:nowrap}\
figure{margin:1.2em 0}figure svg,figure img{display:block;width:100%;max-width:900px;height:auto}\
figcaption{font-size:14px;color:#555;max-width:900px}\
.keys{color:#222;font-size:15px}.key{white-space:nowrap;margin-right:1em}\
pre{font-size:13px;background:#f7f7f7;padding:.6em;overflow-x:auto;max-width:100%}\
.note{background:#fff4e0;border-left:4px solid #e69500;padding:.4em .8em}\
.sub{color:#555;margin-top:0}.why{color:#555;font-style:italic}\
tr.regression td{background:#fde8e8}tr.improvement td{background:#e6f5e6}\
.bad{color:#b00;font-weight:bold}.good{color:#070;font-weight:bold}";

/// `&`, `<`, `>`, `"` and `'` escaped; control characters shown escaped as in tables.
pub fn esc(s: &str) -> String {
    let s = punctual_time::text::display_text(s, 4_000);
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

/// A short cell starting with a number (`31.0 us`, `+16.2 %`, `[+2.0, +31.3] %`, a date): set
/// right-aligned and never wrapped.
fn looks_numeric(s: &str) -> bool {
    s.chars().count() <= 32
        && s.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '+' || c == '[')
        && s.chars().any(|c| c.is_ascii_digit())
}

/// A table. Cells that read as numbers are right-aligned; `row_class` names a row's class
/// (`regression`).
fn table(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
    table_classed(out, header, rows, &[]);
}

fn table_classed(out: &mut String, header: &[&str], rows: &[Vec<String>], classes: &[&str]) {
    out.push_str("<table><tr>");
    for h in header {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr>\n");
    // Right-aligned where every cell of the column reads as a number, as the text tables do.
    let ncols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let numeric: Vec<bool> = (0..ncols)
        .map(|i| {
            let mut cells = rows
                .iter()
                .filter_map(|r| r.get(i))
                .filter(|c| !c.is_empty())
                .peekable();
            i > 0 && cells.peek().is_some() && cells.all(|c| looks_numeric(c) || c == "-")
        })
        .collect();
    for (i, r) in rows.iter().enumerate() {
        match classes.get(i).filter(|c| !c.is_empty()) {
            Some(c) => {
                let _ = write!(out, "<tr class=\"{c}\">");
            }
            None => out.push_str("<tr>"),
        }
        for (j, c) in r.iter().enumerate() {
            let class = if numeric[j] { " class=\"n\"" } else { "" };
            let _ = write!(out, "<td{class}>{}</td>", esc(c));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

/// A section: its heading and body, or one line saying why there is nothing.
fn section(out: &mut String, id: &str, title: &str, body: Result<String, String>) {
    let _ = writeln!(out, "<section id=\"{id}\">\n<h2>{}</h2>", esc(title));
    match body {
        Ok(b) => out.push_str(&b),
        Err(why) => {
            let _ = writeln!(out, "<p class=\"why\">{}</p>", esc(&why));
        }
    }
    out.push_str("</section>\n");
}

/// A run in the report: its label (`A1`), its side's index, its name in legends.
#[derive(Clone, Debug)]
struct Run<'a> {
    label: String,
    side: usize,
    /// Its position within its side.
    index: usize,
    name: String,
    input: &'a ReportInput<'a>,
}

impl Run<'_> {
    fn doc(&self) -> &ResultDoc {
        self.input.doc
    }
}

/// Ten colours apart from each other, for sides of one run each.
const DISTINCT: [(u8, u8, u8); 10] = [
    (31, 119, 180),
    (214, 39, 40),
    (44, 160, 44),
    (255, 127, 14),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
];

/// A run's colour: with one run a side, one of ten distinct colours per side; with several, a
/// family per side (blues, reds, greens, purples) and a shade per run.
fn color(run: &Run<'_>, single_runs: bool) -> (u8, u8, u8) {
    if single_runs {
        return DISTINCT[run.side % DISTINCT.len()];
    }
    let (side, index) = (run.side, run.index);
    const FAMILIES: [[(u8, u8, u8); 4]; 4] = [
        [
            (31, 119, 180),
            (23, 190, 207),
            (57, 59, 121),
            (107, 174, 214),
        ],
        [
            (214, 39, 40),
            (255, 127, 14),
            (140, 86, 75),
            (227, 119, 194),
        ],
        [(44, 160, 44), (188, 189, 34), (0, 100, 0), (116, 196, 118)],
        [
            (148, 103, 189),
            (127, 127, 127),
            (60, 60, 60),
            (158, 154, 200),
        ],
    ];
    FAMILIES[side % 4][index % 4]
}

/// A run's name in legends and tables: its label and tags, else its label and source.
fn run_name(label: &str, input: &ReportInput<'_>) -> String {
    let what = if input.doc.tags.is_empty() {
        let src = std::path::Path::new(&input.source)
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| input.source.clone());
        src
    } else {
        input
            .doc
            .tags
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let what: String = if what.chars().count() > 32 {
        what.chars().take(31).chain(['…']).collect()
    } else {
        what
    };
    format!("{label} {what}")
}

/// The whole report of `sides` (each one or more runs; the first is the baseline of the
/// verdicts). `timelines` are drawn as "lateness over time" figures at the end.
pub fn report(
    sides: &[Vec<ReportInput<'_>>],
    timelines: &[Timeline],
    opts: &Options,
) -> Result<Report, ReportError> {
    if sides.iter().all(Vec::is_empty) {
        return Err(ReportError::Empty);
    }
    let runs: Vec<Run<'_>> = sides
        .iter()
        .enumerate()
        .flat_map(|(i, side)| {
            side.iter().enumerate().map(move |(j, input)| {
                let label = run_label(i, j, side.len());
                Run {
                    name: run_name(&label, input),
                    label,
                    side: i,
                    index: j,
                    input,
                }
            })
        })
        .collect();
    let mut figs = figures::Figures::default();
    let mut out = String::new();
    let title = summary::title(sides, &runs);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\"><title>{}</title>\
         <style>{CSS}</style></head><body>\n<h1>{}</h1>\n",
        esc(&title),
        esc(&title)
    );
    section(
        &mut out,
        "summary",
        "Summary",
        Ok(summary::summary(sides, &runs, opts)),
    );
    section(&mut out, "runs", "Results", Ok(summary::runs_table(&runs)));
    section(
        &mut out,
        "setup",
        "Host and settings",
        Ok(setup::setup(&runs)),
    );
    section(
        &mut out,
        "distributions",
        "Distributions, series by series",
        figures::distributions(&runs, &mut figs)?,
    );
    section(&mut out, "series", "Series", summary::series_table(&runs));
    section(
        &mut out,
        "taken",
        "Time taken from the CPUs",
        figures::taken(&runs, &mut figs)?,
    );
    if let Some(body) = extras::check_verdicts(&runs) {
        section(&mut out, "check", "Check verdicts", Ok(body));
    }
    if let Some(body) = extras::experiments(&runs) {
        section(
            &mut out,
            "experiment",
            "The experiments' own figures and tables",
            Ok(body),
        );
    }
    if !timelines.is_empty() {
        section(
            &mut out,
            "timelines",
            "Lateness over time",
            Ok(figures::timelines(timelines, &mut figs)?),
        );
    }
    out.push_str(
        "<p class=\"sub\">Drawn by punctual from the result documents' histograms.</p>\n\
         </body></html>\n",
    );
    Ok(Report {
        html: out,
        figures: figs.titles,
    })
}
