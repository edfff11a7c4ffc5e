//! Rendered tables (snapshots) and determinism (property tests).

use proptest::prelude::*;
use punctual_sim::frames::{study, FramesConfig};
use punctual_sim::{
    parse_workload, report, simulate, sweep, Control, Mechanism, Policy, Quantum, RunConfig,
};

const S: u64 = 1_000_000_000;

fn small(hz: u32) -> RunConfig {
    RunConfig {
        hz,
        quantum: Quantum::Ticks(6),
        duration: 20 * S,
        tasks: parse_workload("cont:2,blk:1,cpu:1").unwrap(),
        ..RunConfig::default()
    }
}

#[test]
fn sweep_tables_snapshot() {
    let runs = sweep(&[small(100), small(1000)], 1, &Control::default()).unwrap();
    insta::assert_snapshot!("sweep_table", report::table(&runs).render());
    insta::assert_snapshot!("overhead_table", report::overhead_table(&runs).render());
}

#[test]
fn frames_tables_snapshot() {
    let cfg = FramesConfig {
        frames: 60,
        shifts: 12,
        ..FramesConfig::default()
    };
    let f = study(&cfg, &Control::default()).unwrap();
    let text: String = report::frames_tables(&[f])
        .iter()
        .map(|t| t.render() + "\n")
        .collect();
    insta::assert_snapshot!("frames_tables", text);
}

fn fingerprint(cfg: &RunConfig) -> String {
    let r = simulate(cfg, &Control::default()).unwrap();
    let series = report::series(std::slice::from_ref(&r));
    format!("{}|{}", serde_json::to_string(&series).unwrap(), r.events)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, .. ProptestConfig::default() })]

    #[test]
    fn same_seed_same_run(
        seed in any::<u64>(),
        hz in prop::sample::select(vec![100u32, 250, 1000, 4000]),
        policy in prop::sample::select(vec![Policy::Rr, Policy::Fifo, Policy::Linux24, Policy::Fair, Policy::Plan]),
        timer in prop::sample::select(Mechanism::ALL.to_vec()),
        workload in prop::sample::select(vec!["cont:3,blk:2", "pct8:3,cpu:1", "xine,typist", "periodic:2:7ms:1ms,game:1,cpu:1"]),
        cpus in 1usize..3,
    ) {
        let cfg = RunConfig { hz, policy, timer, cpus, seed, duration: 3 * S, tasks: parse_workload(workload).unwrap(), ..RunConfig::default() };
        let a = fingerprint(&cfg);
        prop_assert_eq!(&a, &fingerprint(&cfg));
        // Work is conserved whatever the configuration.
        let r = simulate(&cfg, &Control::default()).unwrap();
        let consumed: u64 = r.tasks.iter().map(|t| t.stats.consumed_ns).sum();
        prop_assert_eq!(r.busy_ns(), consumed + r.overhead_ns());
        for c in &r.cpus {
            prop_assert_eq!(c.work_ns + c.overhead_ns + c.idle_ns, r.simulated_ns);
            prop_assert_eq!(c.idle_with_waiting, 0);
        }
    }
}

#[test]
fn a_different_seed_changes_the_run() {
    let a = small(1000);
    let b = RunConfig {
        seed: 2,
        ..small(1000)
    };
    assert_ne!(fingerprint(&a), fingerprint(&b));
}
