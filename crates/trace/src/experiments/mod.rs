//! The seeds' experiments this crate reproduces on a real trace: KURT's Table 4.3 (`kurt-irq`) and
//! the real half of Etsion et al.'s billing study (`etsion-billing`).

mod etsion_billing;
mod kurt_irq;

pub use etsion_billing::EtsionBilling;
pub use kurt_irq::KurtIrq;

use crate::analyze::{analyze, Analysis};
use crate::file::{read_trace_file, TraceData};
use crate::kernel::EventGroups;
use crate::record::{record, RecordConfig, RecordProgress};
use punctual_result::experiment::Context;
use punctual_result::Failure;
use std::sync::atomic::Ordering;

/// Record `duration_ns` of `groups` into a temporary file and read it back.
pub(crate) fn trace_for(
    ctx: &Context,
    groups: EventGroups,
    duration_ns: u64,
) -> Result<(TraceData, Analysis), Failure> {
    let dir = tempfile::Builder::new()
        .prefix("punctual-exp-trace-")
        .tempdir()
        .map_err(|e| Failure::system(format!("creating a scratch directory: {e}")))?;
    let path = dir.path().join("trace.ptf");
    let mut cfg = RecordConfig::new(path.clone());
    cfg.groups = groups;
    cfg.duration = Some(duration_ns);
    cfg.argv = ctx.command.clone();
    cfg.host = Some(punctual_rt::host::detect());
    let progress = RecordProgress::default();
    let summary = record(&cfg, &ctx.stop, &progress)?;
    if ctx.stop.load(Ordering::Relaxed) && summary.interrupted {
        // Still analyse what was recorded: partial results are results.
    }
    let trace = read_trace_file(&path)
        .map_err(|e| Failure::system(format!("reading back the trace: {e}")))?;
    let analysis = analyze(&trace);
    Ok((trace, analysis))
}

pub(crate) fn new_doc(ctx: &Context) -> punctual_result::ResultDoc {
    punctual_result::ResultDoc::new(
        ctx.command.clone(),
        punctual_rt::host::detect(),
        punctual_result::now_rfc3339(),
    )
}
