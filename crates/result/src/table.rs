//! Plain-text tables: a title, a header, rows (an empty row draws a rule), notes underneath. The first
//! column is left-aligned, the others right-aligned, which suits labels followed by numbers.

use std::fmt::Write;

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

    pub fn render(&self) -> String {
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
        let total: usize = widths.iter().sum::<usize>() + 2 * ncols.saturating_sub(1);
        let line = |cells: &[String]| {
            let mut s = String::new();
            for (i, w) in widths.iter().enumerate() {
                let c = cells.get(i).map(String::as_str).unwrap_or("");
                let pad = w - c.chars().count();
                if i > 0 {
                    s.push_str("  ");
                }
                if i == 0 {
                    s.push_str(c);
                    s.extend(std::iter::repeat_n(' ', pad));
                } else {
                    s.extend(std::iter::repeat_n(' ', pad));
                    s.push_str(c);
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

impl std::fmt::Display for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
