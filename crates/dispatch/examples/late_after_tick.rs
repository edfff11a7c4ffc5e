//! Where the loop's own late releases sit against the timer tick (issue 26): runs a mark plan with
//! `--explain`'s trace, and for every late release attributed to the dispatcher with nothing but
//! the loop on its CPU over the window, measures the time from the last local-timer vector's exit
//! on that CPU to the release's instant. The same for every instant of the run as the baseline
//! (ticks every 4 ms at HZ=250: a release at a random phase is 0-4 ms after one).
//!
//! `cargo run --release -p punctual-dispatch --example late_after_tick -- [PERIOD_US] [SECONDS] [CPU]`
//! (root: FIFO, the shield and tracefs; default 10 us, 5 s, the last CPU, shielded).
use punctual_dispatch::measure::run_plan_traced;
use punctual_dispatch::shield::{self, Shield};
use punctual_dispatch::RunConfig;
use punctual_explain::{Cause, ExplainConfig};
use punctual_trace::event::{EventKind, Vector};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let period_us: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10);
    let secs: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(5);
    let cpu: usize = args
        .get(3)
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(punctual_rt::affinity::last_online_cpu);
    let plan = punctual_plan::parse_str(
        &format!(
            "[plan]\nname = \"marks\"\ncpus = \"{cpu}\"\n[[task]]\nname = \"m\"\nperiod = \"{period_us}us\"\naction = {{ kind = \"mark\" }}\n"
        ),
        "marks.toml",
        None,
    )
    .expect("a plan");
    // The tests' CPU lock: a suite running beside must not find its CPU shielded by this.
    let _lock = punctual_testkit::exclusive_cpu();
    let sp = shield::plan(&[cpu], &[std::process::id() as i32]).expect("a shield plan");
    let _shield = Shield::apply(&sp).expect("the shield (root)");
    let _dma = punctual_rt::dma::DmaLatencyGuard::request(0).ok();
    let cfg = RunConfig {
        cpus: vec![cpu],
        duration: Some(secs * 1_000_000_000),
        shielded: true,
        ..RunConfig::default()
    };
    let explain = ExplainConfig {
        cpus: vec![cpu],
        quiet: vec![cpu],
        ..ExplainConfig::default()
    };
    let (out, trace, records, _) =
        run_plan_traced(plan, &cfg, Arc::new(AtomicBool::new(false)), None, &explain)
            .expect("the run");
    let releases: u64 = out.slots.iter().map(|s| s.stats.releases).sum();
    let events = trace.captured.cpu_events(cpu).expect("traced");
    let tick_exits: Vec<u64> = events
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::VectorExit {
                    vector: Vector::LocalTimer
                }
            )
        })
        .map(|e| e.ts)
        .collect();
    let since_tick = |t: u64| -> Option<u64> {
        let i = tick_exits.partition_point(|&x| x <= t);
        (i > 0).then(|| t - tick_exits[i - 1])
    };
    let x = trace.explain(&records, &[]);
    let mut own = Vec::new();
    let mut by_cause = std::collections::BTreeMap::new();
    // The loop's own late releases by what the loop was doing: (spun to it, behind, neither).
    let mut kinds = [0u64; 3];
    let mut shown = 0;
    for (r, a) in &x.details {
        *by_cause.entry(a.cause.name()).or_insert(0u64) += 1;
        if a.cause == Cause::Dispatcher {
            kinds[if r.behind {
                1
            } else if r.last_read.is_some() {
                0
            } else {
                2
            }] += 1;
            if shown < 6 {
                shown += 1;
                println!(
                    "  dispatcher: late {} ns, spun {}, behind {}: {}",
                    r.lateness(),
                    r.last_read.is_some(),
                    r.behind,
                    a.why
                );
            }
        }
        let only_loop = a.why.contains("VictimRan")
            && !a.why.contains("Vector")
            && !a.why.contains("Irq")
            && !a.why.contains("Softirq");
        if a.cause == Cause::Dispatcher && only_loop {
            if let Some(d) = since_tick(r.target) {
                own.push(d);
            }
        }
    }
    own.sort_unstable();
    let pct = |v: &[u64], q: f64| {
        v.get(((v.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or(0)
    };
    let share_within = |v: &[u64], x: u64| {
        v.iter().filter(|&&d| d <= x).count() as f64 * 100.0 / v.len().max(1) as f64
    };
    let tick = 1_000_000_000 / 250;
    println!(
        "{} releases every {period_us} us on CPU {cpu} for {secs} s; {} late (> 10 us): {:?}",
        releases,
        records.len(),
        by_cause
    );
    println!(
        "dispatcher's: {} after spinning to the instant, {} behind with its own work, {} neither (arrived late)",
        kinds[0], kinds[1], kinds[2]
    );
    println!(
        "ticks seen on CPU {cpu}: {} ({:.0} per s)",
        tick_exits.len(),
        tick_exits.len() as f64 / secs as f64
    );
    println!(
        "dispatcher-only late releases: {}; time from the last tick's exit to the instant: p10 {} us, p50 {} us, p90 {} us",
        own.len(),
        pct(&own, 0.1) / 1000,
        pct(&own, 0.5) / 1000,
        pct(&own, 0.9) / 1000
    );
    for x in [20_000u64, 50_000, 100_000, 200_000] {
        println!(
            "  within {:>3} us of a tick's exit: {:5.1} % of them (at a random phase: {:4.1} %)",
            x / 1000,
            share_within(&own, x),
            x as f64 * 100.0 / tick as f64
        );
    }
}
