//! Cost of recording one sample, beside the cost of the clock read that produces it (the ratio is
//! what matters: recording must be small next to measuring).
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use punctual_stats::Recorder;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("per-sample");
    let mut r = Recorder::new();
    let mut x = 12_345u64;
    g.bench_function("Recorder::record", |b| {
        b.iter(|| {
            // xorshift keeps values spread over the histogram without a table lookup
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            r.record(black_box(x % 5_000_000));
        })
    });
    g.bench_function("clock_gettime(MONOTONIC)", |b| {
        b.iter(|| {
            let mut ts = libc_timespec();
            // SAFETY: clock_gettime writes one timespec (two 64-bit fields on 64-bit Linux, as declared)
            // into `ts`, a live local; clock 1 is CLOCK_MONOTONIC, which exists on Linux.
            unsafe { clock_gettime(1, &mut ts) };
            black_box(ts)
        })
    });
    g.finish();
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Timespec {
    s: i64,
    ns: i64,
}
fn libc_timespec() -> Timespec {
    Timespec { s: 0, ns: 0 }
}
extern "C" {
    fn clock_gettime(id: i32, ts: *mut Timespec) -> i32;
}

criterion_group!(benches, bench);
criterion_main!(benches);
