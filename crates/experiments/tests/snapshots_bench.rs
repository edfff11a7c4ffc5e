//! The tables of etsion-latency (both halves), etsion-overhead, mckenney-nanosleep and
//! zeadally-dispatch from canned models: the seed's layout with the published numbers beside
//! deterministic ones.

use punctual_bench::dispatch::Event;
use punctual_experiments::etsion_latency::{
    self, LatencySettings, Model as LatencyModel, SimModel,
};
use punctual_experiments::etsion_overhead::{self, Bandwidth, SortPoint, Tick};
use punctual_experiments::mckenney_nanosleep::{self, Jitter};
use punctual_experiments::zeadally_dispatch::{self, Five, CASES};
use punctual_latency::alarms::Mechanism;
use punctual_result::Table;

fn render(tables: &[Table]) -> String {
    tables
        .iter()
        .map(Table::render)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Percentiles that grow with the row and the quantum, in ns.
fn latency(row: usize, quantum: usize, base: u64) -> [u64; 4] {
    let b = base * (row as u64 + 1) * if quantum == 0 { 1_000 } else { 1 };
    [b, b * 2, b * 3, b * 10]
}

#[test]
fn etsion_latency_tables() {
    let s = LatencySettings::quick();
    let mut cells = Vec::new();
    for q in 0..2 {
        for (mech, base) in [(Mechanism::Signal, 10_000), (Mechanism::Nanosleep, 7_000)] {
            for row in 0..10 {
                // The last row at the short quantum took no alarm.
                let p = (q, row) != (1, 9);
                cells.push((row, q, mech, p.then(|| latency(row, q, base))));
            }
        }
    }
    let m = LatencyModel {
        cpu: 1,
        alarms: s.alarms,
        delay_min: s.delay_min,
        delay_max: s.delay_max,
        nanosleep: true,
        quantum_ns: [Some(100_000_000), Some(4_000_000)],
        cells,
    };
    insta::assert_snapshot!(render(&etsion_latency::tables(&m)));
}

#[test]
fn etsion_latency_sim_tables() {
    let mut cells = Vec::new();
    for row in 0..10 {
        cells.push((row, 0, 100, 60_000_000, Some(latency(row, 0, 5_000))));
        cells.push((row, 1, 20_000, 100_000, Some(latency(row, 1, 7_000))));
    }
    insta::assert_snapshot!(render(&etsion_latency::sim_tables(&SimModel {
        cells,
        within_tick: vec![(2, 0.51), (4, 0.27), (8, 0.125)],
    })));
}

#[test]
fn etsion_overhead_tables() {
    let sort = [(100u64, 1.0), (10, 1.02), (1, 1.25)]
        .into_iter()
        .flat_map(|(ms, slower)| {
            [1u32, 2, 4, 8].map(|n| SortPoint {
                timeslice_ms: ms,
                effective_ns: Some(ms.max(4) * 1_000_000),
                copies: n,
                per_second: 40_000_000.0 / slower / (1.0 + n as f64 / 100.0),
                ms_per_sort: 13.107 * slower,
            })
        })
        .collect();
    let m = etsion_overhead::Model {
        cpu: 1,
        cpu_model: "Test CPU @ 2.00GHz".into(),
        clocksource: "tsc".into(),
        tsc_hz: 2_000_000_000.0,
        ns_per_cycle: 0.5,
        tick: Some(Tick {
            mean_ns: 1_500,
            stddev_ns: 300,
            median_ns: 1_400,
            gaps: 500,
            trimmed: 3,
            hz: 250,
        }),
        gaps_wall_ns: 2_000_000_000,
        gaps_per_second: 260.0,
        lost_fraction: 0.0004,
        ctxsw: (1_180.0, 150.0),
        trap: (95.5, 4.0),
        bandwidth: [
            (32_768, "L1"),
            (524_288, "L2"),
            (8_388_608, "L3"),
            (268_435_456, "memory"),
        ]
        .into_iter()
        .enumerate()
        .map(|(i, (bytes, level))| Bandwidth {
            bytes,
            level: level.into(),
            memcpy: (40_000.0 / (i + 1) as f64, 900.0),
            memcpy_mean: 39_500.0 / (i + 1) as f64,
            copy_loop: (i != 3).then(|| (30_000.0 / (i + 1) as f64, 700.0)),
        })
        .collect(),
        copies: vec![1, 2, 4, 8],
        timeslices_ms: vec![100, 10, 1],
        sort,
        sort_len: 131_072,
        costs_shared: Some(
            "CPU 1 was shared while Table 2's costs were timed: other tasks ran 12.5 % of its 4.00 s there, and the host took 0.3 %"
                .into(),
        ),
    };
    insta::assert_snapshot!(render(&etsion_overhead::tables(&m)));
}

#[test]
fn mckenney_nanosleep_tables() {
    let j = |mean: u64, p: u64, max: u64| Jitter {
        trials: 20_000,
        mean,
        p99999: p,
        max,
    };
    let m = mckenney_nanosleep::Model {
        sleep_ns: 100_000,
        ladder: vec![
            j(58_000, 95_000, 120_000),
            j(57_500, 94_000, 118_000),
            j(6_000, 40_000, 61_000),
            j(5_900, 21_000, 33_000),
        ],
        calls_per_task: 5_000,
        parallel: [1usize, 2, 4, 8, 12]
            .into_iter()
            .map(|n| {
                (
                    n,
                    j(6_000 + 100 * n as u64, 20_000 * n as u64, 30_000 * n as u64),
                )
            })
            .collect(),
        build: Some((2, 57, j(7_000, 80_000, 90_000))),
        build_instances: 2,
        cpus: 2,
    };
    insta::assert_snapshot!(render(&mckenney_nanosleep::tables(&m)));
}

#[test]
fn zeadally_dispatch_tables() {
    let f = |base: u64| Five {
        count: 300,
        min: base,
        median: base + 2_000,
        max: base * 40,
        mean: base + 3_000,
        stddev: 4_560,
    };
    let mut results = Vec::new();
    for (i, e) in [Event::Eventfd, Event::Pipe].into_iter().enumerate() {
        for (k, c) in CASES.into_iter().enumerate() {
            results.push((e, c, f(10_000 * (k as u64 + 1) + 1_000 * i as u64)));
        }
    }
    let m = zeadally_dispatch::Model {
        main: Event::Eventfd,
        results,
        by_event: true,
        raiser_cpu: 0,
        waiter_cpu: 1,
        interval_ns: 10_000_000,
        duration_ns: 3_000_000_000,
        interrupt: Ok(f(2_000)),
        machine: zeadally_dispatch::Machine {
            virtualized: true,
            nfs: false,
        },
    };
    insta::assert_snapshot!(render(&zeadally_dispatch::tables(&m)));
}

/// Without a trace the interrupt latency row stays empty and the note says why.
#[test]
fn zeadally_interrupt_latency_without_a_trace_says_why() {
    let m = zeadally_dispatch::Model {
        main: Event::Eventfd,
        results: Vec::new(),
        by_event: false,
        raiser_cpu: 0,
        waiter_cpu: 1,
        interval_ns: 10_000_000,
        duration_ns: 3_000_000_000,
        interrupt: Err("tracing the timer events: tracefs is not available".into()),
        machine: zeadally_dispatch::Machine::default(),
    };
    let t = &zeadally_dispatch::tables(&m)[0];
    let row = t
        .rows
        .iter()
        .find(|r| {
            r.first()
                .is_some_and(|c| c.starts_with("Interrupt latency, timer (here)"))
        })
        .unwrap();
    assert!(row[1..].iter().all(|c| c == "-"), "{row:?}");
    assert!(
        t.notes.iter().any(
            |n| n.contains("not measured (tracing the timer events: tracefs is not available)")
        ),
        "{:?}",
        t.notes
    );
}

/// The notes say what this machine is: no "emulated local APIC" on bare metal, no "no NFS" where
/// the kernel has it (issue 30: both were printed on every machine).
#[test]
fn zeadally_notes_follow_the_machine() {
    let notes = |machine| {
        let m = zeadally_dispatch::Model {
            main: Event::Eventfd,
            results: Vec::new(),
            by_event: false,
            raiser_cpu: 0,
            waiter_cpu: 1,
            interval_ns: 10_000_000,
            duration_ns: 3_000_000_000,
            interrupt: Ok(zeadally_dispatch::Five::of(&{
                let mut r = punctual_stats::Recorder::new();
                r.record(2_000);
                r
            })),
            machine,
        };
        zeadally_dispatch::tables(&m)
            .iter()
            .flat_map(|t| t.notes.clone())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let vm = notes(zeadally_dispatch::Machine {
        virtualized: true,
        nfs: false,
    });
    assert!(
        vm.contains("emulated local APIC") && vm.contains("this kernel has no NFS"),
        "{vm}"
    );
    let metal = notes(zeadally_dispatch::Machine {
        virtualized: false,
        nfs: true,
    });
    assert!(
        !metal.contains("emulated") && !metal.contains("has no NFS"),
        "{metal}"
    );
    assert!(metal.contains("this kernel has NFS"), "{metal}");
}
