//! Issue 27: "no allocation in the loop". The monitor's measuring threads are the latency engine
//! feeding the board's live histograms; here that engine runs as the monitor configures it (abs
//! mode, one pinned thread per CPU, progress with the live histogram) for 100 and for 2,000
//! loops, and the process allocates exactly as often in both: what it allocates is set-up and
//! result, nothing per sample. With a late bound of 0 every sample also takes the path of a late
//! release (offered to the CPU's feed for attribution), so that path is counted too. The only test in this binary, so the counting allocator sees
//! nothing else (libtest's own threads are idle while it runs).

use punctual_latency::{Config, Mode, Progress, Stop};
use punctual_monitor::metrics::Board;
use punctual_rt::sched::Policy;
use punctual_time::{ClockId, MarginPolicy};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

struct Counting;

// SAFETY: forwards to the system allocator, only counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Relaxed);
        System.alloc_zeroed(l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Relaxed);
        System.realloc(p, l, new)
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Allocations made by one monitor-shaped engine run of `loops` samples on CPU 0, and the
/// samples the live histogram received and the late releases the feed was offered.
fn allocations(loops: u64) -> (u64, u64, u64) {
    let board = Board::new(0);
    let hists = board.measure(&[0], 200_000);
    let late = board.late_counts(0);
    let progress: Arc<[Progress]> = Arc::from(vec![Progress {
        late: Some(late.feed.clone()),
        ..Progress::with_live(hists[0].clone())
    }]);
    let offered = late.feed.offered();
    let cfg = Config {
        threads: vec![Some(0)],
        interval: 200_000,
        stop: Stop::Loops(loops),
        clock: ClockId::Monotonic,
        mode: Mode::Abs,
        margin: MarginPolicy::Auto,
        // The loop is the same in every class; SCHED_OTHER needs no privilege.
        policy: Policy::Other,
        priority: 0,
        timer_slack_ns: None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let before = ALLOCATIONS.load(Relaxed);
    let out = punctual_latency::run(&cfg, &stop, None, Some(&progress)).expect("engine run");
    let made = ALLOCATIONS.load(Relaxed) - before;
    assert_eq!(out.threads[0].recorder.summary().count, loops);
    let offered = late.feed.offered() - offered;
    late.feed.take(0, &mut Vec::with_capacity(loops as usize));
    (made, progress[0].samples.load(Relaxed), offered)
}

#[test]
fn the_measuring_loop_allocates_nothing_per_sample() {
    // A first run pays for whatever is initialised once per process.
    allocations(50);
    let (short, short_seen, short_late) = allocations(100);
    let (long, long_seen, long_late) = allocations(2_000);
    assert_eq!((short_seen, long_seen), (100, 2_000));
    // Every sample was late (no wake-up takes 0 ns) and offered.
    assert_eq!((short_late, long_late), (100, 2_000));
    assert_eq!(
        short, long,
        "100 loops allocated {short} times, 2,000 loops {long} times: the loop allocates"
    );
}
