//! The seeds' measurement experiments: each runs this machine through a seed's experiment and
//! prints the seed's table with the published numbers beside ours (SPEC section 5).

pub mod etsion_latency;
pub mod etsion_overhead;
pub mod mckenney_nanosleep;
pub mod published;
pub mod zeadally_dispatch;

use punctual_result::experiment::{Context, Experiment, Figure};
use punctual_result::{Failure, ResultDoc};
use std::sync::atomic::Ordering;

pub use etsion_latency::EtsionLatency;
pub use etsion_overhead::EtsionOverhead;
pub use mckenney_nanosleep::McKenneyNanosleep;
pub use zeadally_dispatch::ZeadallyDispatch;

/// Every measured experiment of this crate, for `punctual experiment list|run`.
pub fn all() -> Vec<Box<dyn Experiment>> {
    vec![
        Box::new(EtsionLatency::default()),
        Box::new(EtsionOverhead::default()),
        Box::new(McKenneyNanosleep::default()),
        Box::new(ZeadallyDispatch::default()),
    ]
}

/// A result document for an experiment run.
pub(crate) fn new_doc(ctx: &Context, experiment: &str, started_at: String) -> ResultDoc {
    let mut doc = ResultDoc::new(ctx.command.clone(), punctual_rt::host::detect(), started_at);
    doc.extra.insert("experiment".into(), experiment.into());
    doc.settings.extra.insert("quick".into(), ctx.quick.into());
    doc
}

/// Close a document: end time and status.
pub(crate) fn close_doc(ctx: &Context, doc: &mut ResultDoc) {
    doc.ended_at = punctual_result::now_rfc3339();
    if ctx.stop.load(Ordering::Relaxed) {
        doc.status = punctual_result::Status::Interrupted;
    }
}

/// Record a fallback once.
pub(crate) fn add_fallback(doc: &mut ResultDoc, f: Option<&punctual_result::Fallback>) {
    if let Some(f) = f {
        if !doc.settings.fallbacks.contains(f) {
            doc.settings.fallbacks.push(f.clone());
        }
    }
}

pub(crate) fn figure(
    name: &str,
    svg: Result<String, punctual_plot::PlotError>,
) -> Result<Figure, Failure> {
    svg.map(|svg| Figure {
        name: name.into(),
        svg,
    })
    .map_err(|e| Failure::system(e.to_string()))
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

/// The last online CPU (CPU 0 usually takes most device interrupts).
pub fn last_cpu() -> usize {
    *punctual_rt::online_cpus()
        .last()
        .expect("at least one CPU is online")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_like_the_papers() {
        assert_eq!(group(50_003), "50,003");
        assert_eq!(group(740_025), "740,025");
        assert_eq!(group(5), "5");
        assert_eq!(group(1_000_000), "1,000,000");
        assert_eq!(us(50_003_400), "50,003");
        assert_eq!(us(499), "0");
        assert_eq!(us2(1_180.0), "1.18");
    }

    #[test]
    fn published_table6_is_complete() {
        for r in &published::TABLE6 {
            let w: punctual_latency::alarms::AlarmWorkload = r.workload.parse().unwrap();
            assert_eq!(w.paper_label(), (r.ty.to_string(), r.number.to_string()));
        }
    }
}
