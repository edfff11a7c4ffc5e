//! Experiments that answer from a kernel trace (`kurt-irq`, the real half of `etsion-billing`):
//! record a stretch of the machine into a scratch file and read it back.

use punctual_result::{Failure, ResultDoc};
use punctual_rt::{Policy, RtWant};
use punctual_session::Ctx;
use punctual_trace::analyze::{analyze, Analysis};
use punctual_trace::file::{read_trace_file, TraceData};
use punctual_trace::kernel::EventGroups;
use punctual_trace::record::{record, RecordConfig, RecordProgress};

/// Record `duration_ns` of `groups` into a temporary file (gone when this returns) and read it
/// back with its analysis. Stopped early (Ctrl-C), what was recorded is still returned: partial
/// results are results. `progress` is the recorder's, for the live line.
pub fn trace_for(
    ctx: &Ctx,
    groups: EventGroups,
    duration_ns: u64,
    progress: &RecordProgress,
) -> Result<(TraceData, Analysis), Failure> {
    let dir = tempfile::Builder::new()
        .prefix("punctual-exp-trace-")
        .tempdir()
        .map_err(|e| Failure::system(format!("creating a scratch directory: {e}")))?;
    let path = dir.path().join("trace.ptf");
    let mut cfg = RecordConfig::new(path.clone());
    cfg.groups = groups;
    cfg.duration = Some(duration_ns);
    cfg.argv = ctx.command().to_vec();
    cfg.host = Some(ctx.host());
    record(&cfg, ctx.stop(), progress)?;
    let trace = read_trace_file(&path)
        .map_err(|e| Failure::system(format!("reading back the trace: {e}")))?;
    let analysis = analyze(&trace);
    Ok((trace, analysis))
}

/// Time an activity's generators get to start before its phase is traced.
pub const SETTLE_MS: u64 = 200;

/// One phase of a traced experiment: let `g`'s activity settle, trace `secs` of `groups` beside
/// it, then stop it. What was recorded is returned even when stopped early.
pub fn trace_beside(
    ctx: &Ctx,
    g: crate::workload::Generators,
    groups: EventGroups,
    secs: u64,
    progress: &RecordProgress,
) -> Result<Analysis, Failure> {
    Ok(trace_run(ctx, g, groups, secs, progress)?.1)
}

/// [`trace_beside`], with the trace itself.
pub fn trace_run(
    ctx: &Ctx,
    g: crate::workload::Generators,
    groups: EventGroups,
    secs: u64,
    progress: &RecordProgress,
) -> Result<(TraceData, Analysis), Failure> {
    std::thread::sleep(std::time::Duration::from_millis(SETTLE_MS));
    let traced = trace_for(ctx, groups, secs * 1_000_000_000, progress);
    g.stop();
    traced
}

/// The live line of `phases` traced phases of `secs` each (settling included): events recorded.
pub fn phases_live(
    progress: &std::sync::Arc<RecordProgress>,
    secs: u64,
    phases: usize,
) -> punctual_session::LiveSpec {
    let p = progress.clone();
    let per = secs * 1_000_000_000 + SETTLE_MS * 1_000_000;
    punctual_session::LiveSpec::timed(per * phases as u64, move || {
        format!(
            "{} events",
            p.events.load(std::sync::atomic::Ordering::Relaxed)
        )
    })
}

/// What a traced experiment holds: nothing real-time (the activity traced stands for ordinary
/// applications, and the handlers traced are the kernel's), yet the session still records the
/// hypervisor's steal time, which lengthens what is traced.
pub const WANTS: RtWant = RtWant {
    policy: Policy::Other,
    priority: 0,
    mlock: false,
    dma_latency_us: None,
};

/// The session's plan gives threads of the normal class 1 ns of timer slack, but no thread of a
/// traced experiment takes it (the generators keep the default, as the applications they stand
/// for do): the document must not say it was held.
pub fn unclaim_timer_slack(doc: &mut ResultDoc) {
    doc.settings.extra.remove("timer_slack_ns");
}
