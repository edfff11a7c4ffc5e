//! What every experiment's report does alike: mark its document, name its figures, print numbers
//! as the seeds print them, and refuse to start without the real-time class it is about. Only the
//! experiments use these; the registry ([`crate::registry`]) stays in `lib.rs`.

use punctual_result::{Failure, ResultDoc};
use punctual_session::Figure;

/// Refuse to start an experiment whose point is real-time processes when the session could not
/// have them (the kernel refused SCHED_FIFO: no privilege, or a cgroup without real-time
/// budget). The session's fallback line already said why and how to fix it; this says what it
/// means for the experiment, before anything runs, instead of letting its processes fail one by
/// one (kurt-periodic's clients did, and the run died 10 s later waiting for them).
pub fn needs_realtime(ctx: &punctual_session::Ctx, name: &str, what: &str) -> Result<(), Failure> {
    if ctx.rt.policy.is_realtime() {
        return Ok(());
    }
    Err(Failure::system(format!(
        "{name} measures {what} under SCHED_FIFO, which this process cannot have here (the \
         fallback above says why and how to fix it); nothing was measured"
    )))
}

/// Mark a document as an experiment's: its name and whether it was the quick version.
pub fn mark(doc: &mut ResultDoc, name: &str, quick: bool) {
    doc.extra.insert("experiment".into(), name.into());
    doc.settings.extra.insert("quick".into(), quick.into());
}

/// Mark a simulated experiment's document: its numbers come from the simulator's clock. Its
/// timestamps stay real, unlike `punctual simulate`'s: the results store sorts by them.
pub fn simulated_clock(doc: &mut ResultDoc) {
    doc.settings
        .extra
        .insert("clock".into(), "simulated".into());
}

/// A figure from a plot, or the reason it could not be drawn.
pub fn figure(
    name: &str,
    svg: Result<String, punctual_plot::PlotError>,
) -> Result<Figure, Failure> {
    svg.map(|svg| Figure {
        name: name.into(),
        svg,
    })
    .map_err(|e| Failure::system(format!("drawing {name}: {e}")))
}

/// Microseconds as the seeds print them: whole, with thousands separators (`50,003`).
pub fn us(ns: u64) -> String {
    group((ns + 500) / 1000)
}

/// Microseconds with two decimals (`1.18`), for small costs.
pub fn us2(ns: f64) -> String {
    format!("{:.2}", ns / 1000.0)
}

/// `1234567` -> `1,234,567`.
pub fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_printed_as_the_seeds_print_them() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1_000), "1,000");
        assert_eq!(group(1_234_567), "1,234,567");
        assert_eq!(us(50_003_400), "50,003");
        assert_eq!(us(499), "0");
        assert_eq!(us2(1_180.0), "1.18");
    }
}
