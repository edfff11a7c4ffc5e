//! Plain-text tables: a title, a header, rows (an empty row draws a rule), notes underneath. Columns
//! whose cells are all numbers (with or without units: `12.3 us`, `-4`, `99.90 %`) are right-aligned so
//! their digits line up; the first column and text columns are left-aligned.
//!
//! **Width.** Every table fits the width of [`width`] (SPEC section 2: output fits an 80-column
//! terminal), one mechanism for every command:
//! 1. a table narrower than the width is drawn as it is;
//! 2. otherwise text columns wrap at blanks (widest first, each down to its longest word, at most
//!    [`MIN_TEXT_COLUMN`] characters; the first column, the row's name, not below
//!    [`MIN_FIRST_COLUMN`]), numeric columns never wrap, so digits stay readable;
//! 3. a table still too wide is cut into blocks of columns, each repeating the first column (the
//!    row's name), stacked one under the other, as R prints a wide data frame;
//! 4. the title and notes wrap at blanks, continuation lines indented by two spaces.
//!
//! The width is the process's: the binary sets it once ([`set_width`] with [`Width::detect`]: `--wide`
//! for no limit, else `COLUMNS`, else the width of the terminal the tables go to, never under
//! [`MIN_COLUMNS`]). Output that is no terminal (a pipe, a file) has no limit: the promise of 80
//! columns is to people reading a terminal, and a file or a `grep` keeps every line whole, as
//! `git` and `systemctl` do; `COLUMNS=80` shows a pipe what an 80-column terminal shows. Until the
//! binary sets it the width is 80, so the libraries' snapshot tests show an 80-column terminal.

use punctual_time::format_ns;
use std::fmt::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Longest cell shown (a name is at most 64 characters; numbers are short; descriptions wrap).
pub const MAX_CELL_CHARS: usize = 200;
/// Longest title or note shown.
const MAX_TEXT_CHARS: usize = 2_000;
/// Width of a terminal whose width is unknown, and of tables before the binary sets one.
pub const DEFAULT_COLUMNS: usize = 80;
/// Narrowest width honoured (`COLUMNS=10` would make every word a line).
pub const MIN_COLUMNS: usize = 40;
/// A text column wraps down to its longest word, but to no more than this.
pub const MIN_TEXT_COLUMN: usize = 16;
/// The first column (the row's name) wraps down to this width at most; beyond, columns go into
/// blocks.
pub const MIN_FIRST_COLUMN: usize = 24;
/// Blanks between two columns.
const GAP: usize = 2;

/// How wide tables and text may be drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    Columns(usize),
    /// `--wide`: every table as wide as its widest row.
    Unlimited,
}

/// 0 stands for [`Width::Unlimited`].
static WIDTH: AtomicUsize = AtomicUsize::new(DEFAULT_COLUMNS);

/// Set the width every [`Table::render`] and [`wrap`] of this process uses.
pub fn set_width(w: Width) {
    let n = match w {
        Width::Columns(n) => n.max(MIN_COLUMNS),
        Width::Unlimited => 0,
    };
    WIDTH.store(n, Ordering::Relaxed);
}

/// The width set by [`set_width`] (80 columns until then).
pub fn width() -> Width {
    match WIDTH.load(Ordering::Relaxed) {
        0 => Width::Unlimited,
        n => Width::Columns(n),
    }
}

impl Width {
    /// The width for this process's output: `--wide` (`wide`) for no limit; else `COLUMNS` when it
    /// holds a number; else the width of the terminal on stdout (or on stderr when stdout is no
    /// terminal and stderr is: tables go there when an export takes stdout); else no limit (a
    /// pipe or a file). Never under [`MIN_COLUMNS`].
    pub fn detect(wide: bool) -> Width {
        if wide {
            return Width::Unlimited;
        }
        let columns = std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.trim().parse::<usize>().ok());
        let terminal = [libc::STDOUT_FILENO, libc::STDERR_FILENO]
            .into_iter()
            .find(|&fd| is_terminal(fd))
            .map(|fd| terminal_columns(fd).unwrap_or(DEFAULT_COLUMNS));
        match columns.or(terminal) {
            Some(n) => Width::Columns(n.max(MIN_COLUMNS)),
            None => Width::Unlimited,
        }
    }

    /// The limit in columns, `None` for unlimited.
    pub fn columns(self) -> Option<usize> {
        match self {
            Width::Columns(n) => Some(n),
            Width::Unlimited => None,
        }
    }
}

fn is_terminal(fd: i32) -> bool {
    // SAFETY: isatty only inspects the descriptor.
    unsafe { libc::isatty(fd) == 1 }
}

/// The width of the terminal on `fd`, if it is one and knows its width.
fn terminal_columns(fd: i32) -> Option<usize> {
    // SAFETY: winsize is four u16: all zeros is valid.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes one winsize into `ws`, a live local of that type; a descriptor
    // that is no terminal fails with ENOTTY and writes nothing.
    let ok = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) } == 0;
    (ok && ws.ws_col > 0).then_some(ws.ws_col as usize)
}

fn shown(s: &str, max: usize) -> String {
    punctual_time::text::display_text(s, max).into_owned()
}

/// `text` with every line longer than the process's [`width`] wrapped at blanks; a continuation
/// line keeps the line's own indentation plus two spaces. Lines that fit (preformatted figures,
/// lists) are left as they are; a word longer than the width stays whole on its own line.
pub fn wrap(text: &str) -> String {
    wrap_at(text, width())
}

/// [`wrap`] at a given width.
pub fn wrap_at(text: &str, w: Width) -> String {
    let Some(cols) = w.columns() else {
        return text.to_string();
    };
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&wrap_line(line, cols).join("\n"));
    }
    out
}

/// Units a figure carries: never put on the line after their number.
const UNITS: &[&str] = &[
    "ns", "us", "ms", "s", "m", "h", "%", "B", "KiB", "MiB", "GiB", "Hz", "kHz", "x",
];

/// The words of `text` split at blanks, a unit kept with the number before it (`12.5 us`).
fn words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in text.split(' ').filter(|w| !w.is_empty()) {
        let unit = UNITS.contains(&w.trim_end_matches([',', ';', ':', '.', ')']));
        match out.last_mut() {
            Some(prev) if unit && prev.ends_with(|c: char| c.is_ascii_digit()) => {
                prev.push(' ');
                prev.push_str(w);
            }
            _ => out.push(w.to_string()),
        }
    }
    out
}

/// One line wrapped to `cols`, continuation lines indented by its indentation plus two.
fn wrap_line(line: &str, cols: usize) -> Vec<String> {
    if line.chars().count() <= cols {
        return vec![line.to_string()];
    }
    let indent = line.len() - line.trim_start_matches(' ').len();
    let first = &line[..indent];
    let rest = " ".repeat((indent + 2).min(cols / 2));
    let mut lines = Vec::new();
    let mut cur = first.to_string();
    let mut cur_len = indent;
    let mut empty = true;
    for word in words(&line[indent..]) {
        let n = word.chars().count();
        if !empty && cur_len + 1 + n > cols {
            lines.push(std::mem::replace(&mut cur, rest.clone()));
            cur_len = rest.len();
            empty = true;
        }
        if !empty {
            cur.push(' ');
            cur_len += 1;
        }
        cur.push_str(&word);
        cur_len += n;
        empty = false;
    }
    lines.push(cur);
    lines
}

/// A cell's text in lines of at most `w` characters: broken at blanks, a longer word cut.
fn wrap_cell(cell: &str, w: usize) -> Vec<String> {
    if cell.chars().count() <= w || w == 0 {
        return vec![cell.to_string()];
    }
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut cur_len = 0;
    for word in words(cell) {
        let mut word: Vec<char> = word.chars().collect();
        if cur_len > 0 && cur_len + 1 + word.len() > w {
            lines.push(std::mem::take(&mut cur));
            cur_len = 0;
        }
        if cur_len > 0 {
            cur.push(' ');
            cur_len += 1;
        }
        while cur_len + word.len() > w {
            let take = w - cur_len;
            cur.extend(word.drain(..take));
            lines.push(std::mem::take(&mut cur));
            cur_len = 0;
        }
        cur_len += word.len();
        cur.extend(word);
    }
    if !cur.is_empty() || lines.is_empty() {
        lines.push(cur);
    }
    lines
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

    /// The table as text, fitted to the process's [`width`] (see the module's doc). Every cell,
    /// the title and the notes are shown through [`punctual_time::text::display_text`]: names from
    /// files (tasks, scenarios, traced commands) reach tables, and none of them may steer the
    /// terminal; a cell is cut at [`MAX_CELL_CHARS`] characters.
    pub fn render(&self) -> String {
        self.render_at(width())
    }

    /// [`Table::render`] at a given width.
    pub fn render_at(&self, w: Width) -> String {
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
        safe.render_plain(w)
    }

    fn ncols(&self) -> usize {
        self.rows
            .iter()
            .map(Vec::len)
            .chain([self.header.len()])
            .max()
            .unwrap_or(0)
    }

    fn render_plain(&self, w: Width) -> String {
        let ncols = self.ncols();
        let mut widths = vec![0usize; ncols];
        // The narrowest a column may become: numbers never wrap; text down to its longest word.
        let mut mins = vec![0usize; ncols];
        for r in std::iter::once(&self.header).chain(self.rows.iter()) {
            for (i, c) in r.iter().enumerate() {
                widths[i] = widths[i].max(c.chars().count());
                let word = words(c)
                    .iter()
                    .map(|w| w.chars().count())
                    .max()
                    .unwrap_or(0);
                mins[i] = mins[i].max(word.min(MIN_TEXT_COLUMN));
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
        for i in 0..ncols {
            if numeric[i] {
                mins[i] = widths[i];
            }
        }
        // The first column names the row, in every block: it wraps last, and not below
        // MIN_FIRST_COLUMN (columns go into blocks first).
        if let Some(first) = mins.first_mut() {
            *first = (*first).max(MIN_FIRST_COLUMN).min(widths[0]);
        }
        let blocks = match w.columns() {
            None => vec![(0..ncols).collect::<Vec<_>>()],
            Some(cols) => blocks(&mins, cols),
        };
        let mut out = String::new();
        if let Some(t) = &self.title {
            let _ = writeln!(out, "{}", wrap_at(t, w));
        }
        for (b, cols) in blocks.iter().enumerate() {
            if b > 0 {
                out.push('\n');
            }
            let mut bw: Vec<usize> = cols.iter().map(|&i| widths[i]).collect();
            if let Some(limit) = w.columns() {
                let bmins: Vec<usize> = cols.iter().map(|&i| mins[i]).collect();
                shrink(&mut bw, &bmins, limit);
            }
            let al: Vec<bool> = cols.iter().map(|&i| numeric[i]).collect();
            let pick = |r: &[String]| -> Vec<String> {
                cols.iter()
                    .map(|&i| r.get(i).cloned().unwrap_or_default())
                    .collect()
            };
            self.render_block(&mut out, &bw, &al, &pick);
        }
        for n in &self.notes {
            let _ = writeln!(out, "{}", wrap_at(n, w));
        }
        out
    }

    /// The header, rules and rows of one block of columns (`pick` chooses a row's cells), each
    /// cell wrapped to its column's width.
    fn render_block(
        &self,
        out: &mut String,
        widths: &[usize],
        numeric: &[bool],
        pick: &dyn Fn(&[String]) -> Vec<String>,
    ) {
        let wrap_row = |r: &[String]| -> Vec<Vec<String>> {
            pick(r)
                .iter()
                .zip(widths)
                .map(|(c, &w)| wrap_cell(c, w))
                .collect()
        };
        let header = (!self.header.is_empty()).then(|| wrap_row(&self.header));
        let rows: Vec<Option<Vec<Vec<String>>>> = self
            .rows
            .iter()
            .map(|r| (!r.is_empty()).then(|| wrap_row(r)))
            .collect();
        // Wrapping at blanks may leave a column narrower than it was allowed to be.
        let mut used = vec![0usize; widths.len()];
        for cells in header.iter().chain(rows.iter().flatten()) {
            for (i, lines) in cells.iter().enumerate() {
                for l in lines {
                    used[i] = used[i].max(l.chars().count());
                }
            }
        }
        let rule = "-".repeat(total(&used));
        let draw = |out: &mut String, cells: &[Vec<String>]| {
            let height = cells.iter().map(Vec::len).max().unwrap_or(1);
            for k in 0..height {
                let mut s = String::new();
                for (i, w) in used.iter().enumerate() {
                    let c = cells[i].get(k).map(String::as_str).unwrap_or("");
                    let pad = w.saturating_sub(c.chars().count());
                    if i > 0 {
                        s.push_str(&" ".repeat(GAP));
                    }
                    if numeric[i] {
                        s.extend(std::iter::repeat_n(' ', pad));
                        s.push_str(c);
                    } else {
                        s.push_str(c);
                        s.extend(std::iter::repeat_n(' ', pad));
                    }
                }
                let _ = writeln!(out, "{}", s.trim_end());
            }
        };
        if let Some(h) = &header {
            draw(out, h);
            let _ = writeln!(out, "{rule}");
        }
        for r in &rows {
            match r {
                None => {
                    let _ = writeln!(out, "{rule}");
                }
                Some(cells) => draw(out, cells),
            }
        }
    }
}

/// Width of columns `widths` side by side.
fn total(widths: &[usize]) -> usize {
    widths.iter().sum::<usize>() + GAP * widths.len().saturating_sub(1)
}

/// Columns in blocks that fit `cols` at their narrowest, each block after the first repeating
/// column 0. One block when the whole table fits.
fn blocks(mins: &[usize], cols: usize) -> Vec<Vec<usize>> {
    if mins.is_empty() || total(mins) <= cols {
        return vec![(0..mins.len()).collect()];
    }
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut cur = vec![0];
    for i in 1..mins.len() {
        let mut with: Vec<usize> = cur.iter().map(|&c| mins[c]).collect();
        with.push(mins[i]);
        if total(&with) > cols && cur.len() > 1 {
            out.push(std::mem::replace(&mut cur, vec![0, i]));
        } else {
            cur.push(i);
        }
    }
    out.push(cur);
    out
}

/// Narrow the widest column that may still shrink, one character at a time, until the columns fit
/// `cols` or none may shrink further.
fn shrink(widths: &mut [usize], mins: &[usize], cols: usize) {
    while total(widths) > cols {
        let widest = (0..widths.len())
            .filter(|&i| widths[i] > mins[i])
            .max_by_key(|&i| (widths[i], i));
        match widest {
            Some(i) => widths[i] -= 1,
            None => break,
        }
    }
}

/// A number, optionally signed or bounded (`-4`, `+1.5`, `<10`, `~3`), with or without a unit or
/// a note after a blank (`12.5 us`, `99.90 %`, `199 ms (thread 1)`), or a dash standing for none.
/// Dates (`2026-11-27 12:41:25`) and versions (`6.18.44-fc`) are text: right-aligning them pushed
/// their headers off their columns (`results list`, issue 31).
fn looks_numeric(cell: &str) -> bool {
    if cell == "-" {
        return true;
    }
    let t = cell.trim_start_matches(['-', '+', '<', '>', '~', '=', ' ']);
    let digits = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))
        .unwrap_or(t.len());
    let (number, rest) = t.split_at(digits);
    // What may follow the number: a unit or a short note, never a sentence (`1 timestamps before
    // their CPU's previous one ...` is text, and must wrap).
    let unit = rest.is_empty()
        || (rest.chars().count() <= MAX_NUMERIC_TAIL
            && (rest.starts_with([' ', '%', 'x', '/'])
                || (rest.starts_with(char::is_alphabetic)
                    && !rest.contains(|c: char| c.is_ascii_digit() || c == '-'))));
    number.chars().any(|c| c.is_ascii_digit()) && number.matches('.').count() <= 1 && unit
}

/// Longest unit or note after a number in a numeric cell (`ms (thread 1)`, `(0 loss markers)`).
const MAX_NUMERIC_TAIL: usize = 24;

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
                && looks_numeric("250us")
                && looks_numeric(".5")
                && looks_numeric("199 ms (thread 1)")
                && looks_numeric("1,234,567")
                && !looks_numeric("yes")
                && !looks_numeric("-x")
                && !looks_numeric("2026-11-27 12:41:25")
                && !looks_numeric("6.18.44-fc-v669")
                && !looks_numeric("v1")
                && !looks_numeric(
                    "1 timestamps before their CPU's previous one (put in time order)"
                )
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

    /// A table of two long text columns, as `experiment list` draws.
    fn described() -> Table {
        let mut t = Table::new(&["experiment", "reproduces", "duration"]);
        t.row([
            "etsion-overhead --sim",
            "Etsion 2003 Figs. 2-3, Sec. 3: added overhead of 100-20,000 Hz at 50 ms and 5(+1)-tick quanta, 1-8 sorts with a cache-resident array",
            "about 1 s; --quick under a second (simulation)",
        ])
        .row(["kurt-irq", "KURT thesis Table 4.3", "36 s (--quick: 12 s)"]);
        t.note("Run one with `punctual experiment run NAME`; --quick gives a reduced version in under a minute, and --figures DIR writes its SVG figures.");
        t
    }

    /// Eleven numeric columns, as every series summary has: too wide for any wrapping.
    fn numeric() -> Table {
        let mut t = Table::new(&[
            "series", "kind", "cpu", "samples", "min", "p50", "p99", "p99.9", "max", "mean",
            "missed",
        ]);
        t.row([
            "thread 0",
            "wakeup_latency",
            "1",
            "1000000",
            "1.20 us",
            "3.40 us",
            "12.5 us",
            "45.6 us",
            "1.234 ms",
            "3.80 us",
            "0",
        ]);
        t
    }

    fn widest_line(s: &str) -> usize {
        s.lines().map(|l| l.chars().count()).max().unwrap_or(0)
    }

    #[test]
    fn text_columns_wrap_to_the_width() {
        let out = described().render_at(Width::Columns(80));
        assert!(widest_line(&out) <= 80, "{out}");
        // Nothing is lost: every word is still there.
        for w in ["cache-resident", "array", "(simulation)", "SVG", "figures."] {
            assert!(out.contains(w), "{w} missing:\n{out}");
        }
        insta::assert_snapshot!("described_80", out);
        let wide = described().render_at(Width::Unlimited);
        assert!(widest_line(&wide) > 150, "{wide}");
        assert_eq!(wide.lines().count(), 5, "{wide}");
    }

    #[test]
    fn numeric_columns_never_wrap_and_go_into_blocks_repeating_the_name() {
        let out = numeric().render_at(Width::Columns(80));
        assert!(widest_line(&out) <= 80, "{out}");
        insta::assert_snapshot!("numeric_80", out);
        // Both blocks name the row, and every figure is shown whole.
        assert_eq!(out.matches("thread 0").count(), 2, "{out}");
        for f in ["1.234 ms", "45.6 us", "1000000", "wakeup_latency"] {
            assert!(out.contains(f), "{f} missing:\n{out}");
        }
        let wide = numeric().render_at(Width::Unlimited);
        assert_eq!(wide.lines().count(), 3, "{wide}");
    }

    #[test]
    fn a_table_that_fits_is_drawn_as_before() {
        let mut t = Table::new(&["series", "p50", "max"]);
        t.row(["thread 0", "3.10 us", "120 us"]);
        assert_eq!(
            t.render_at(Width::Columns(40)),
            t.render_at(Width::Unlimited)
        );
    }

    #[test]
    fn rows_of_wrapped_tables_still_line_up() {
        let out = described().render_at(Width::Columns(60));
        let header = out.lines().next().unwrap();
        let at = header.find("duration").unwrap();
        // Every line that has something in the last column starts it at the header's column.
        for l in out
            .lines()
            .skip(2)
            .take_while(|l| !l.starts_with("Run one"))
        {
            if l.chars().count() > at {
                let before: String = l.chars().take(at).collect();
                assert!(before.ends_with("  "), "misaligned: {l:?}\n{out}");
            }
        }
    }

    #[test]
    fn every_width_from_the_narrowest_fits_where_the_words_allow() {
        for cols in MIN_COLUMNS..=120 {
            let out = described().render_at(Width::Columns(cols));
            // The narrowest columns are the longest words (capped at 16): 21 + 2 + 16 + 2 + 16.
            let floor = 57.max(cols);
            assert!(widest_line(&out) <= floor, "at {cols}:\n{out}");
        }
    }

    #[test]
    fn free_text_wraps_with_its_indentation_and_keeps_long_words() {
        let text = "short line\n  an indented line that is much too long for twenty columns\n/a/very/long/path/that/cannot/break";
        let out = wrap_at(text, Width::Columns(20));
        insta::assert_snapshot!("free_text_20", out);
        assert!(out.contains("/a/very/long/path/that/cannot/break"));
        assert_eq!(wrap_at(text, Width::Unlimited), text);
    }

    #[test]
    fn the_width_is_read_from_columns_and_wide_wins() {
        assert_eq!(Width::detect(true), Width::Unlimited);
        // COLUMNS decides when set, and is never taken under 40.
        std::env::set_var("COLUMNS", "100");
        assert_eq!(Width::detect(false), Width::Columns(100));
        std::env::set_var("COLUMNS", "12");
        assert_eq!(Width::detect(false), Width::Columns(MIN_COLUMNS));
        std::env::remove_var("COLUMNS");
        // cargo test runs without a terminal on stdout and stderr (the harness captures both,
        // `cargo test | cat` too): no limit. Under a terminal the terminal's width decides.
        if !is_terminal(libc::STDOUT_FILENO) && !is_terminal(libc::STDERR_FILENO) {
            assert_eq!(Width::detect(false), Width::Unlimited);
        }
        // Before the binary sets it: 80, for the libraries' snapshots.
        assert_eq!(width(), Width::Columns(DEFAULT_COLUMNS));
    }

    #[test]
    fn a_unit_stays_on_the_line_of_its_number() {
        // "mlock on, dma latency 0" is 23 characters: a break at 24 would fall before "us,".
        let out = wrap_line("mlock on, dma latency 0 us, clock monotonic", 24);
        assert_eq!(out, ["mlock on, dma latency", "  0 us, clock monotonic"]);
        let cell = wrap_cell("spin margin 200 us (cap 5.00 ms)", 15);
        assert!(cell.iter().any(|l| l.contains("200 us")), "{cell:?}");
        assert!(cell.iter().any(|l| l.contains("5.00 ms)")), "{cell:?}");
    }

    /// Issue 31 item 7: `results list` printed "id  started" with "started" far to the right of
    /// the dates under it (dates and kernel versions were taken for numbers and right-aligned).
    #[test]
    fn results_list_headers_sit_over_their_columns() {
        let mut t = Table::new(&["id", "started", "command", "host", "kernel", "worst p99"]);
        t.row([
            "0f4c35561c42",
            "2026-11-27 12:41:25",
            "latency",
            "vm",
            "6.18.44-fc-v669",
            "199 ms (thread 1)",
        ]);
        let out = t.render_at(Width::Unlimited);
        let (header, row) = (out.lines().next().unwrap(), out.lines().nth(2).unwrap());
        for (h, cell) in [
            ("started", "2026-"),
            ("command", "latency"),
            ("kernel", "6.18"),
        ] {
            assert_eq!(
                header.find(h),
                row.find(cell),
                "{h} is not over its column:\n{out}"
            );
        }
    }
}
