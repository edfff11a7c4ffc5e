//! Memory of the analysis, counted by a global allocator in this test binary of its own (one test,
//! so nothing else allocates meanwhile): issue 18 found 9 GB for a trace of 11,000 processes, a
//! histogram of about 270 KB per thread and two per process row.

use punctual_trace::analyze::{analyze, GroupBy};
use punctual_trace::render::{report_with, ReportOptions};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

struct Counting;

static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the counters only observe.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let now = NOW.fetch_add(l.size(), Relaxed) + l.size();
        PEAK.fetch_max(now, Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        NOW.fetch_sub(l.size(), Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let now = NOW.fetch_add(l.size(), Relaxed) + l.size();
        PEAK.fetch_max(now, Relaxed);
        System.alloc_zeroed(l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if new >= l.size() {
            let now = NOW.fetch_add(new - l.size(), Relaxed) + new - l.size();
            PEAK.fetch_max(now, Relaxed);
        } else {
            NOW.fetch_sub(l.size() - new, Relaxed);
        }
        System.realloc(p, l, new)
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const MIB: usize = 1 << 20;

#[test]
fn trace_analysis_memory_follows_the_trace_not_the_processes() {
    const PROCESSES: u32 = 100_000;
    let trace = punctual_trace::synth::short_processes(PROCESSES, 2, 120_000_000_000).build();
    let events = trace.events.len();
    let base = NOW.load(Relaxed);
    PEAK.store(base, Relaxed);

    let a = analyze(&trace);
    let analysed = NOW.load(Relaxed) - base;
    let o = ReportOptions {
        by: GroupBy::Process,
        ..Default::default()
    };
    let r = report_with(&a, &trace, &o, false);
    let peak = PEAK.load(Relaxed) - base;
    eprintln!(
        "{PROCESSES} processes, {events} events: analysis holds {} MiB, peak {} MiB over the trace",
        analysed / MIB,
        peak / MIB
    );
    // The report is whole: every process is ranked, the top rows are shown.
    let tasks = &r.tables[1];
    assert!(
        tasks.render().contains(&format!("{} more", PROCESSES - 15)),
        "{}",
        tasks.render()
    );
    assert!(r.series.is_empty());
    assert_eq!(
        a.threads.len() as u32,
        PROCESSES + PROCESSES / 4 + 1,
        "every thread and idle"
    );
    // One histogram per process would be 100,000 x 270 KB = 26 GB. The bound allows about 1 KB a
    // process, less than its share of the trace's own events (14 events of 40 bytes each).
    assert!(
        peak < 128 * MIB,
        "analysis and report of {PROCESSES} processes peaked at {} MiB over the trace",
        peak / MIB
    );
    drop(r);
    drop(a);
    // Nothing is held after the analysis is dropped (the trace is still alive).
    assert!(NOW.load(Relaxed) < base + MIB);
}
