//! The cache-footprint term of a context switch (Etsion Section 3 and Fig. 3): a task with a
//! working set refills what other tasks evicted when it gets the CPU back. It costs nothing
//! without a footprint, nothing without switches, and nothing while the working sets fit in the
//! cache together.

use punctual_sim::config::NS_PER_S;
use punctual_sim::{
    parse_workload, simulate, Behaviour, Cache, Control, Policy, Quantum, RunConfig, RunResult,
    SimError, TaskSpec,
};

const KIB: u64 = 1024;

fn sorts(n: usize, footprint_kib: u64) -> Vec<TaskSpec> {
    (0..n)
        .map(|i| {
            TaskSpec::new(format!("sort {i}"), "sort", Behaviour::Cpu).with_footprint(footprint_kib)
        })
        .collect()
}

fn run(tasks: Vec<TaskSpec>, hz: u32, quantum: Quantum, cache: Cache) -> RunResult {
    let cfg = RunConfig {
        hz,
        quantum,
        policy: Policy::Linux24,
        duration: NS_PER_S,
        cache,
        tasks,
        ..RunConfig::default()
    };
    simulate(&cfg, &Control::default()).unwrap()
}

fn work(r: &RunResult) -> u64 {
    r.cpus.iter().map(|c| c.work_ns).sum()
}
fn refill(r: &RunResult) -> u64 {
    r.cpus.iter().map(|c| c.refill_ns).sum()
}
fn refills(r: &RunResult) -> u64 {
    r.cpus.iter().map(|c| c.refills).sum()
}
fn switches(r: &RunResult) -> u64 {
    r.cpus.iter().map(|c| c.context_switches).sum()
}

#[test]
fn refill_time_is_bytes_over_bandwidth() {
    let c = Cache::default();
    assert_eq!((c.size_kib, c.refill_mb_s), (256, 2512));
    // 128 KiB at 2512 MB/s (a byte every 1/2512 us): 52.18 us.
    assert_eq!(c.refill_ns(128), 128 * KIB * 1000 / 2512);
    assert_eq!(c.refill_ns(128), 52_178);
    assert_eq!(c.refill_ns(0), 0);
    assert_eq!(c.refill_ns(u64::MAX), c.refill_bytes_ns(u64::MAX));
}

#[test]
fn without_a_footprint_the_cache_changes_nothing() {
    let six = Quantum::Ticks(5);
    let plain = run(sorts(8, 0), 20_000, six, Cache::default());
    let small = Cache {
        size_kib: 1,
        refill_mb_s: 1,
    };
    let other = run(sorts(8, 0), 20_000, six, small);
    assert_eq!(plain.cpus, other.cpus);
    assert_eq!(refills(&plain), 0);
    assert_eq!(refill(&plain), 0);
    assert!(switches(&plain) > 1000);
}

#[test]
fn a_lone_task_pays_its_cold_refill_once_however_fast_the_clock() {
    for hz in [100, 20_000] {
        let bare = run(sorts(1, 0), hz, Quantum::Ticks(5), Cache::default());
        let with = run(sorts(1, 128), hz, Quantum::Ticks(5), Cache::default());
        // Its first dispatch fills the cache; nobody evicts it afterwards.
        assert_eq!(refills(&with), 1, "{hz} Hz");
        assert_eq!(refill(&with), Cache::default().refill_ns(128));
        assert_eq!(work(&bare) - work(&with), refill(&with), "{hz} Hz");
    }
}

#[test]
fn working_sets_that_fit_together_refill_nothing_after_the_first_round() {
    // Two 128 KiB arrays in a 256 KiB cache: each is filled once, then both stay.
    let r = run(sorts(2, 128), 20_000, Quantum::Ticks(5), Cache::default());
    assert!(switches(&r) > 1000);
    assert_eq!(refills(&r), 2);
    // Three of them do not fit: every switch refills part of an array.
    let r3 = run(sorts(3, 128), 20_000, Quantum::Ticks(5), Cache::default());
    assert!(
        refills(&r3) + 3 >= switches(&r3),
        "{} of {}",
        refills(&r3),
        switches(&r3)
    );
    assert!(refill(&r3) > 100 * refill(&r));
}

#[test]
fn more_competitors_evict_more_of_each_working_set() {
    let per_switch = |n| {
        let r = run(sorts(n, 128), 20_000, Quantum::Ticks(5), Cache::default());
        refill(&r) as f64 / switches(&r) as f64
    };
    let (three, four, eight) = (per_switch(3), per_switch(4), per_switch(8));
    let whole = Cache::default().refill_ns(128) as f64;
    assert!(three < four && four < eight, "{three} {four} {eight}");
    assert!(eight <= whole && eight > 0.8 * whole, "{eight} of {whole}");
}

#[test]
fn the_refill_adds_overhead_in_proportion_to_switches() {
    let cost = |q, fp| {
        let r = run(sorts(8, fp), 20_000, q, Cache::default());
        NS_PER_S - work(&r)
    };
    let long = Quantum::Time(50_000_000);
    let short = Quantum::Ticks(5);
    // With 50 ms quanta a second has 20 switches: the refill barely shows.
    let long_extra = cost(long, 128) - cost(long, 0);
    assert!(long_extra < 2_000_000, "{long_extra}");
    // With 300 us quanta it has about 3,000: a sixth of the CPU goes to refills.
    let short_extra = cost(short, 128) - cost(short, 0);
    assert!(short_extra > 100_000_000, "{short_extra}");
}

#[test]
fn footprints_and_the_cache_are_checked_and_parsed() {
    let cfg = |cache: Cache, fp: u64| RunConfig {
        cache,
        tasks: sorts(1, fp),
        duration: NS_PER_S,
        ..RunConfig::default()
    };
    let zero = Cache {
        size_kib: 0,
        refill_mb_s: 2512,
    };
    // Without a footprint the cache is never used, so its settings are not checked.
    cfg(zero, 0).validate().unwrap();
    let field = |c: RunConfig| match c.validate() {
        Err(SimError::Invalid { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    assert_eq!(field(cfg(zero, 128)), "cache_kib");
    let slow = Cache {
        size_kib: 1 << 30,
        refill_mb_s: 1,
    };
    assert_eq!(field(cfg(slow, 1 << 30)), "footprint_kib");

    let t = parse_workload("sort:3,cpu").unwrap();
    assert_eq!(t[0].name, "sort 0");
    assert_eq!(t[0].behaviour, Behaviour::Cpu);
    assert_eq!(t[0].footprint_kib, 128);
    assert_eq!(t[3].footprint_kib, 0);

    let s = punctual_sim::scenario::parse(
        "s.toml",
        "[sim]\ncache_kib = 512\nrefill_mb_s = 4286\n[[task]]\nbehaviour = \"cpu\"\ncount = 2\nfootprint_kib = 64\n",
    )
    .unwrap();
    assert_eq!(
        s.base.cache,
        Cache {
            size_kib: 512,
            refill_mb_s: 4286
        }
    );
    assert_eq!(s.base.tasks[1].footprint_kib, 64);
    let e = punctual_sim::scenario::parse("s.toml", "[sim]\nworkload = \"cpu\"\ncache_kib = 0\n")
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("s.toml:3:13: cache_kib = 0 is out of range"),
        "{e}"
    );
}
