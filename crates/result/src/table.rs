//! Plain-text tables: a title, a header, rows (an empty row draws a rule), notes underneath. Columns
//! whose cells are all numbers (with or without units: `12.3 us`, `-4`, `99.90 %`) are right-aligned so
//! their digits line up; the first column and text columns are left-aligned.

use punctual_time::format_ns;
use std::fmt::Write;

/// Longest cell shown (a name is at most 64 characters; numbers are short).
pub const MAX_CELL_CHARS: usize = 120;
/// Longest title or note shown.
const MAX_TEXT_CHARS: usize = 2_000;

fn shown(s: &str, max: usize) -> String {
    punctual_time::text::display_text(s, max).into_owned()
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    pub title: Option<String>,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    pub notes: Vec<String>,
}

impl Table {
    pub fn new(header: &[&str]) -> Self {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    pub fn titled(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) -> &mut Self {
        self.rows.push(cells.into_iter().map(Into::into).collect());
        self
    }

    /// A horizontal rule between groups of rows.
    pub fn rule(&mut self) -> &mut Self {
        self.rows.push(Vec::new());
        self
    }

    pub fn note(&mut self, note: impl Into<String>) -> &mut Self {
        self.notes.push(note.into());
        self
    }

    /// The table as text. Every cell, the title and the notes are shown through
    /// [`punctual_time::text::display_text`]: names from files (tasks, scenarios, traced commands)
    /// reach tables, and none of them may steer the terminal; a cell is cut at
    /// [`MAX_CELL_CHARS`] characters.
    pub fn render(&self) -> String {
        let safe = Table {
            title: self.title.as_deref().map(|t| shown(t, MAX_TEXT_CHARS)),
            header: self
                .header
                .iter()
                .map(|c| shown(c, MAX_CELL_CHARS))
                .collect(),
            rows: self
                .rows
                .iter()
                .map(|r| r.iter().map(|c| shown(c, MAX_CELL_CHARS)).collect())
                .collect(),
            notes: self
                .notes
                .iter()
                .map(|n| shown(n, MAX_TEXT_CHARS))
                .collect(),
        };
        safe.render_plain()
    }

    fn render_plain(&self) -> String {
        let ncols = self
            .rows
            .iter()
            .map(Vec::len)
            .chain([self.header.len()])
            .max()
            .unwrap_or(0);
        let mut widths = vec![0usize; ncols];
        for r in std::iter::once(&self.header).chain(self.rows.iter()) {
            for (i, c) in r.iter().enumerate() {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
        let numeric: Vec<bool> = (0..ncols)
            .map(|i| {
                let mut cells = self
                    .rows
                    .iter()
                    .filter_map(|r| r.get(i))
                    .filter(|c| !c.is_empty())
                    .peekable();
                i > 0 && cells.peek().is_some() && cells.all(|c| looks_numeric(c))
            })
            .collect();
        let total: usize = widths.iter().sum::<usize>() + 2 * ncols.saturating_sub(1);
        let line = |cells: &[String]| {
            let mut s = String::new();
            for (i, w) in widths.iter().enumerate() {
                let c = cells.get(i).map(String::as_str).unwrap_or("");
                let pad = w - c.chars().count();
                if i > 0 {
                    s.push_str("  ");
                }
                if numeric[i] {
                    s.extend(std::iter::repeat_n(' ', pad));
                    s.push_str(c);
                } else {
                    s.push_str(c);
                    s.extend(std::iter::repeat_n(' ', pad));
                }
            }
            s.trim_end().to_string()
        };
        let mut out = String::new();
        if let Some(t) = &self.title {
            let _ = writeln!(out, "{t}");
        }
        if !self.header.is_empty() {
            let _ = writeln!(out, "{}", line(&self.header));
            let _ = writeln!(out, "{}", "-".repeat(total));
        }
        for r in &self.rows {
            if r.is_empty() {
                let _ = writeln!(out, "{}", "-".repeat(total));
            } else {
                let _ = writeln!(out, "{}", line(r));
            }
        }
        for n in &self.notes {
            let _ = writeln!(out, "{n}");
        }
        out
    }
}

/// A number, optionally signed or bounded (`-4`, `+1.5`, `<10`, `~3`), or a dash standing for none.
fn looks_numeric(cell: &str) -> bool {
    let t = cell.trim_start_matches(['-', '+', '<', '>', '~', '=', ' ']);
    cell == "-"
        || t.starts_with(|c: char| c.is_ascii_digit())
        || (t.starts_with('.') && t[1..].starts_with(|c: char| c.is_ascii_digit()))
}

impl std::fmt::Display for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render())
    }
}

/// Every series' summary, from the document alone.
pub fn series_table(d: &crate::ResultDoc) -> Table {
    let mut t = Table::new(&[
        "series", "kind", "cpu", "samples", "min", "p50", "p99", "p99.9", "max", "mean", "missed",
    ]);
    for s in &d.series {
        let m = &s.summary;
        t.row([
            s.name.clone(),
            s.kind.clone(),
            s.cpu.map(|c| c.to_string()).unwrap_or_default(),
            m.count.to_string(),
            format_ns(m.min),
            format_ns(m.percentiles.p50),
            format_ns(m.percentiles.p99),
            format_ns(m.percentiles.p99_9),
            format_ns(m.max),
            format_ns(m.mean),
            m.missed_periods.to_string(),
        ]);
    }
    if d.series.is_empty() {
        t.note("this result has no series");
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_columns_stay_left_aligned() {
        let mut t = Table::new(&["name", "what", "n"]);
        t.row(["a", "a long description", "5"])
            .row(["bb", "short", "-12.5 us"])
            .row(["c", "x", "-"]);
        let out = t.render();
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines[3].starts_with("bb    short               -12.5 us"),
            "{out}"
        );
        assert!(lines[2].ends_with("       5"), "{out}");
        assert!(
            looks_numeric("99.90 %")
                && looks_numeric("<10 us")
                && !looks_numeric("yes")
                && !looks_numeric("-x")
        );
    }

    #[test]
    fn names_in_tables_cannot_steer_the_terminal() {
        let mut t = Table::new(&["task", "max"]).titled("tasks of \u{1b}[2Jx");
        t.row(["evil\u{1b}[31m\u{202e}", "12 us"]);
        t.row([&"n".repeat(10_000), "1 us"]);
        t.note("from plan\u{2066}");
        let out = t.render();
        assert!(
            !out.contains('\u{1b}') && !out.contains('\u{202e}') && !out.contains('\u{2066}'),
            "{out}"
        );
        assert!(out.contains("evil\\u{001b}[31m\\u{202e}"), "{out}");
        assert!(out.lines().all(|l| l.chars().count() < 200), "{out}");
    }

    #[test]
    fn renders_aligned() {
        let mut t = Table::new(&["series", "p50", "max"]).titled("Wake-up latency");
        t.row(["thread 0", "3.10 us", "120 us"])
            .rule()
            .row(["total", "3.10 us", "1.20 ms"]);
        t.note("times are lateness after the intended release");
        insta::assert_snapshot!(t.render());
    }
}
