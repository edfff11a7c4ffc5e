//! Memory does not grow with uptime: a simulated week on an injected clock (samples recorded
//! into the live histograms, a scrape every 5 minutes, a window into a real SQLite store every 10
//! minutes) ends with exactly the heap an hour of it held. The only test in this binary, so the
//! counting allocator sees nothing else.

use punctual_monitor::config::Settings;
use punctual_monitor::expose::{render, Format};
use punctual_monitor::http::ServerStats;
use punctual_monitor::measure::{HistoryStore, Housekeeper};
use punctual_monitor::metrics::{registry, Board, HostLabels, Ops};
use punctual_result::ResultDoc;
use punctual_time::{Clock, ManualClock};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

static NOW: AtomicUsize = AtomicUsize::new(0);

struct Counting;

// SAFETY: forwards to the system allocator, only counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        NOW.fetch_add(l.size(), Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        NOW.fetch_sub(l.size(), Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        NOW.fetch_add(l.size(), Relaxed);
        System.alloc_zeroed(l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if new >= l.size() {
            NOW.fetch_add(new - l.size(), Relaxed);
        } else {
            NOW.fetch_sub(l.size() - new, Relaxed);
        }
        System.realloc(p, l, new)
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const SECOND: u64 = 1_000_000_000;
const MINUTE: u64 = 60 * SECOND;
const HOUR: u64 = 60 * MINUTE;
const WEEK: u64 = 7 * 24 * HOUR;
/// Samples recorded per simulated second (a tenth of a 1 ms monitor's, to keep the test short;
/// the histograms are fixed-size whatever the rate).
const PER_SECOND: u64 = 100;

#[test]
fn a_simulated_week_holds_the_memory_an_hour_held() {
    let dir = tempfile::tempdir().unwrap();
    let store =
        punctual_store::Store::open(dir.path().join("results.db").to_str().unwrap()).unwrap();
    let clock = ManualClock::new(1_000 * SECOND, 0);
    let board = Arc::new(Board::new(10_000));
    let ops = Arc::new(Ops::default());
    let settings = Settings::new(vec![0]);
    let hists = board.measure(&settings.cpus, settings.interval);
    let reg = registry(
        board.clone(),
        ops.clone(),
        Arc::new(ServerStats::default()),
        HostLabels(vec![("kernel", "test".into())]),
    );
    let template = ResultDoc::new(
        vec!["punctual".into(), "monitor".into()],
        punctual_session::Env::fake(&["punctual"]).host(),
        "2026-01-01T00:00:00Z".into(),
    );
    let steal_ns = AtomicUsize::new(0);
    let steal = move || Some(vec![(0usize, steal_ns.fetch_add(1_000, Relaxed) as u64)]);
    let mut keeper = Housekeeper::new(
        &clock,
        board.clone(),
        ops.clone(),
        Some(HistoryStore {
            store,
            tags: vec![("site".into(), "test".into())],
        }),
        template,
        &steal,
    );
    keeper.follow(&settings);
    let stop = AtomicBool::new(false);
    let start = clock.now();
    let mut k = 0u64;
    let mut windows = 0u64;
    let mut at_hour = None;
    let mut scrape_bytes = 0usize;
    while clock.now() - start < WEEK {
        for _ in 0..60 {
            for _ in 0..PER_SECOND {
                // Mostly tens of microseconds; now and then a long one that grows all week, so
                // values keep landing in buckets never used before.
                let v = if k.is_multiple_of(10_007) {
                    300_000 + k / 1_000
                } else {
                    2_000 + (k * 7919) % 50_000
                };
                hists[0].record(v);
                k += 1;
            }
            clock.sleep_until(clock.now() + SECOND);
        }
        let elapsed = clock.now() - start;
        keeper.tick(&settings, &stop);
        if elapsed.is_multiple_of(5 * MINUTE) {
            scrape_bytes = render(&reg, Format::Protobuf).unwrap().len();
        }
        if elapsed.is_multiple_of(10 * MINUTE) {
            windows += 1;
            // Each window is written before the next (the writer queues only a few).
            wait_for(|| ops.windows_stored.load(Relaxed) == windows);
        }
        if elapsed == HOUR {
            at_hour = Some(NOW.load(Relaxed));
        }
    }
    let at_week = NOW.load(Relaxed);
    let at_hour = at_hour.unwrap();
    assert_eq!(ops.windows_failed.load(Relaxed), 0);
    assert_eq!(windows, 7 * 24 * 6);
    assert!(scrape_bytes > 0);
    eprintln!(
        "heap after an hour {at_hour} B, after a week {at_week} B; {k} samples, {windows} windows stored"
    );
    assert_eq!(
        at_week, at_hour,
        "the heap after a simulated week must be the heap after an hour"
    );
    // The history is in the store, a window each, with the week's growing worst case.
    let store =
        punctual_store::Store::open(dir.path().join("results.db").to_str().unwrap()).unwrap();
    let listed = store
        .list(&punctual_store::Filter {
            tags: vec![("monitor".into(), "window".into())],
            ..Default::default()
        })
        .unwrap();
    assert_eq!(listed.len() as u64, windows);
    let last = store.resolve("latest").unwrap().doc;
    assert_eq!(last.series.len(), 1);
    assert_eq!(last.series[0].summary.count, 10 * 60 * PER_SECOND);
    assert_eq!(last.settings.extra["steal_window_ns"], 10 * MINUTE);
}

fn wait_for(done: impl Fn() -> bool) {
    let t0 = std::time::Instant::now();
    while !done() {
        assert!(
            t0.elapsed().as_secs() < 60,
            "the history writer fell behind"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}
