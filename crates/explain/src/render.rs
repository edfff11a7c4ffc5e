//! The explanation as the user reads it: a table "late releases by cause" per series, the top
//! offenders by name, a stacked-bar figure, and the series' `lateness_causes` in the document.

use crate::attribute::Cause;
use crate::summary::{Explanation, Tally};
use punctual_result::{ResultDoc, Table};
use punctual_time::format_ns;

/// Offenders listed per series in the table (and kept in the document).
pub const TOP_OFFENDERS: usize = 3;

/// `task 120, irq 30, wake_path 2`: the non-zero causes, most releases first.
pub fn causes_cell(t: &Tally) -> String {
    let mut v: Vec<(Cause, u64)> = Cause::ALL
        .iter()
        .map(|c| (*c, t.count(*c)))
        .filter(|(_, n)| *n > 0)
        .collect();
    v.sort_by_key(|x| std::cmp::Reverse(x.1));
    if v.is_empty() {
        return "-".into();
    }
    v.iter()
        .map(|(c, n)| format!("{} {n}", c.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The tables: late releases by cause per named series, then the top offenders.
pub fn tables(x: &Explanation, names: &[(u32, String)]) -> Vec<Table> {
    let mut t = Table::new(&["series", "late", "causes"]).titled(format!(
        "Late releases by cause (later than {}), from a kernel trace of CPU {}",
        format_ns(x.bound),
        punctual_rt::format_cpu_list(&x.capture.cpus)
    ));
    let mut o = Table::new(&["series", "cause", "offender", "releases"])
        .titled("Top offenders by name".to_string());
    for (id, name) in names {
        let tally = x.tally(*id);
        t.row([name.clone(), tally.late().to_string(), causes_cell(&tally)]);
        for (c, who, n) in tally.offenders.iter().take(TOP_OFFENDERS) {
            o.row([
                name.clone(),
                c.name().to_string(),
                who.clone(),
                n.to_string(),
            ]);
        }
    }
    let total = x.total();
    if total.unlogged > 0 {
        t.note(format!(
            "{} late release(s) did not fit the timing threads' logs and count as unexplained.",
            total.unlogged
        ));
    }
    let c = &x.capture;
    t.note(format!(
        "trace: {} events over {}, {} in memory at most, drain {} of CPU; {} evicted, {} lost.",
        c.events,
        format_ns(c.window_ns),
        bytes(c.peak_memory_bytes),
        format_ns(c.drain_cpu_ns),
        c.evicted,
        c.lost
    ));
    if c.stalls_dropped > 0 {
        t.note(format!(
            "{} of the timing threads' {} stalls did not fit their logs; a late release in one \
             may read as punctual's own.",
            c.stalls_dropped,
            c.stalls + c.stalls_dropped
        ));
    }
    match &c.kept_in {
        Some(Ok(path)) => {
            t.note(format!(
                "trace kept in {path}: punctual trace analyze {path}"
            ));
        }
        Some(Err(why)) => {
            t.note(format!("trace not kept: {why}"));
        }
        None => {}
    }
    let mut out = vec![t];
    if !o.rows.is_empty() {
        out.push(o);
    }
    out
}

fn bytes(b: u64) -> String {
    if b >= 1 << 20 {
        format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
    } else {
        format!("{:.0} KiB", b as f64 / 1024.0)
    }
}

/// Late releases by cause as a stacked bar per series, in % of the series' releases (`counts`:
/// releases per named series).
pub fn figure(
    x: &Explanation,
    names: &[(u32, String)],
    counts: &[u64],
) -> Result<String, punctual_plot::PlotError> {
    let cats: Vec<String> = names.iter().map(|(_, n)| n.clone()).collect();
    let groups: Vec<(String, Vec<f64>)> = Cause::ALL
        .iter()
        .map(|c| {
            (
                c.name().to_string(),
                names
                    .iter()
                    .zip(counts)
                    .map(|((id, _), &n)| x.tally(*id).count(*c) as f64 * 100.0 / n.max(1) as f64)
                    .collect(),
            )
        })
        .collect();
    punctual_plot::stacked_bar_plot(
        &format!("late releases by cause (later than {})", format_ns(x.bound)),
        "% of the series' releases",
        &cats,
        &groups,
    )
}

/// Put each named series' causes (and top offenders) on the document's series of that name, and
/// the capture's figures under `settings.explain`.
pub fn fill_doc(doc: &mut ResultDoc, x: &Explanation, names: &[(u32, String)]) {
    for (id, name) in names {
        let tally = x.tally(*id);
        for s in doc.series.iter_mut().filter(|s| &s.name == name) {
            s.extra.insert("lateness_causes".into(), tally.to_json());
            s.extra.insert(
                "lateness_offenders".into(),
                tally.offenders_json(TOP_OFFENDERS),
            );
        }
    }
    let mut settings = x.capture.to_json(x.bound);
    settings["examples"] = x.examples_json();
    settings["latest"] = x.worst_json();
    doc.settings.extra.insert("explain".into(), settings);
}

/// Everything `--explain` adds to a run's output: the series' causes and the capture's figures
/// in the document, the tables, and the figure (named `late-by-cause`). `counts`: releases per
/// named series, for the figure's shares.
pub fn present(
    doc: &mut ResultDoc,
    x: &Explanation,
    names: &[(u32, String)],
    counts: &[u64],
) -> (Vec<Table>, Result<String, punctual_plot::PlotError>) {
    fill_doc(doc, x, names);
    (tables(x, names), figure(x, names, counts))
}

/// A run's report with `--explain`'s tables after its own and the figure (`late-by-cause`) among
/// its figures; the document gets the causes ([`present`]).
pub fn into_report(
    mut out: punctual_measure::Report,
    doc: &mut ResultDoc,
    x: &Explanation,
    names: &[(u32, String)],
    counts: &[u64],
) -> Result<punctual_measure::Report, punctual_result::Failure> {
    let (tables, svg) = present(doc, x, names, counts);
    out.tables.extend(tables);
    out.figures.push(punctual_measure::Figure {
        name: "late-by-cause".into(),
        svg: svg.map_err(|e| punctual_result::Failure::system(e.to_string()))?,
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stalls the threads had no room for are said under the table, with how many were logged;
    /// a run that logged them all says nothing of it.
    #[test]
    fn the_table_says_when_stalls_did_not_fit_the_logs() {
        let mut x = Explanation::default();
        x.capture.stalls = 5;
        let text = |x: &Explanation| {
            tables(x, &[(0, "plan".into())])[0].render_at(punctual_result::table::Width::Unlimited)
        };
        assert!(!text(&x).contains("did not fit"), "{}", text(&x));
        x.capture.stalls_dropped = 2;
        assert!(
            text(&x).contains("2 of the timing threads' 7 stalls did not fit their logs"),
            "{}",
            text(&x)
        );
        assert_eq!(x.capture.to_json(10_000)["stalls_dropped"], 2);
    }
}
