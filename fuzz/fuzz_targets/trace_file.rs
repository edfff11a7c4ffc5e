//! A trace file: read (damage is reported, never a panic), analysed, and rendered with every table,
//! series and figure `punctual trace analyze --task` makes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use punctual_trace::analyze::{analyze, GroupBy};
use punctual_trace::render::{report_with, ReportOptions};

fuzz_target!(|data: &[u8]| {
    let Ok(trace) = punctual_trace::file::read_trace(data) else {
        return;
    };
    let a = analyze(&trace);
    let (lo, hi) = a.window;
    assert!(lo <= hi);
    for s in a.sources.values() {
        if let Some(max) = s.durations.max() {
            assert!(max <= hi - lo, "a handler longer than the trace");
        }
    }
    // By thread, with the document's series (every group's histograms), and a task's timeline.
    let o = ReportOptions {
        by: GroupBy::Thread,
        task: a.threads.keys().nth(1).map(|t| t.to_string()),
        ..Default::default()
    };
    let r = report_with(&a, &trace, &o, true);
    for t in &r.tables {
        let _ = t.render();
    }
});
