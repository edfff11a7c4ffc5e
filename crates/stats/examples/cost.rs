//! Cost of measuring, side by side in one process: recording a sample against reading the clock that
//! produced it, memory before and after 10 million samples, and the time to compute every percentile.
//!
//! cargo run --release -p punctual-stats --example cost

use punctual_stats::Recorder;
use std::hint::black_box;
use std::time::Instant;

const N: u64 = 10_000_000;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn values() -> impl Iterator<Item = u64> {
    // Spread over 0..5 ms with a few long ones, like a wake-up latency distribution.
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    (0..N).map(move |i| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if i % 100_000 == 0 {
            3_000_000 + x % 2_000_000
        } else {
            2_000 + x % 50_000
        }
    })
}

fn main() {
    let rss0 = rss_kib();
    let mut r = Recorder::new();
    let rss_empty = rss_kib();

    let t = Instant::now();
    for v in values() {
        black_box(v);
    }
    let baseline = t.elapsed().as_nanos() as f64 / N as f64;

    let t = Instant::now();
    for v in values() {
        r.record(black_box(v));
    }
    let record = t.elapsed().as_nanos() as f64 / N as f64 - baseline;
    let rss_full = rss_kib();

    let t = Instant::now();
    for _ in 0..N {
        black_box(punctual_time::clock::read_clock(libc::CLOCK_MONOTONIC));
    }
    let clock = t.elapsed().as_nanos() as f64 / N as f64;

    let t = Instant::now();
    let s = r.summary();
    let summary_ms = t.elapsed().as_secs_f64() * 1e3;
    black_box(&s);

    println!("samples recorded:                 {N}");
    println!("record one sample:                {record:.1} ns");
    println!("read CLOCK_MONOTONIC (vDSO):      {clock:.1} ns");
    println!("record / clock read:              {:.2}", record / clock);
    println!(
        "RSS before recorder:              {:.1} MiB",
        rss0 as f64 / 1024.0
    );
    println!(
        "RSS with empty recorder:          {:.1} MiB",
        rss_empty as f64 / 1024.0
    );
    println!(
        "RSS after 10 million samples:     {:.1} MiB",
        rss_full as f64 / 1024.0
    );
    println!("summary (all percentiles, within): {summary_ms:.2} ms");
    println!(
        "p50 {} ns, p99.999 {} ns, max {} ns",
        s.percentiles.p50, s.percentiles.p99_999, s.max
    );
}
