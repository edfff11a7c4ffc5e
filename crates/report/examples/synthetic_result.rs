//! A synthetic result document of N samples per thread (log-normal body near 4 us, a 2 % tail of
//! 20-60 us), for measuring `punctual report` and `punctual compare` on large results:
//!
//! `cargo run --release -p punctual-report --example synthetic_result -- 10000000 1.0 1 > big.json`
//! (arguments: samples per thread, scale of every sample, seed; two threads).

use punctual_report::bootstrap::Rng;
use punctual_result::{doc::kind, HostFacts, ResultDoc, Series};
use punctual_stats::Recorder;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: u64 = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let scale: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1.0);
    let seed: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1);
    let host = HostFacts {
        kernel: "6.12.0-synthetic".into(),
        preempt: "dynamic: full".into(),
        realtime: false,
        cpus: 2,
        clocksource: "tsc".into(),
        virtualized: true,
        hz: Some(250),
        hostname: "synthetic".into(),
        cpu_model: "none".into(),
    };
    let mut doc = ResultDoc::new(
        vec!["punctual".into(), "synthetic".into(), n.to_string()],
        host,
        punctual_result::now_rfc3339(),
    );
    let mut rng = Rng::seeded(seed);
    for t in 0..2usize {
        let mut r = Recorder::new();
        for _ in 0..n {
            let body = (8.0f64.ln() + 0.35 * rng.normal()).exp() * 500.0;
            let tail = if rng.uniform() < 0.02 {
                20_000.0 + 40_000.0 * rng.uniform()
            } else {
                0.0
            };
            r.record(((body + tail) * scale) as u64);
        }
        doc.series.push(Series::from_recorder(
            format!("thread {t}"),
            kind::WAKEUP_LATENCY,
            Some(t),
            &r,
        ));
    }
    print!("{}", doc.to_json());
}
