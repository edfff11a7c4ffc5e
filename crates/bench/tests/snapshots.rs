//! What users read from `punctual bench`, pinned: each micro-measurement's whole lifecycle runs in a
//! fake environment (fixed host and clock, nothing changed on the machine) on a canned outcome.

use punctual_bench::measure::{AlarmBench, AlarmMeasured, Bench, Measured};
use punctual_bench::{ctxsw, dispatch, gaps, memcpy, trap, tsc};
use punctual_latency::alarms::{AlarmConfig, AlarmOutcome, AlarmProcess, Mechanism};
use punctual_result::Output;
use punctual_rt::{Policy, RtWant, SchedParams};
use punctual_session::{drive, Canned, Env, Exit, Measurement, Outputs};
use punctual_stats::Recorder;

const WANT: RtWant = RtWant {
    policy: Policy::Fifo,
    priority: 99,
    mlock: true,
    dma_latency_us: Some(0),
};

/// `n` samples from `base` ns spread over `spread` ns.
fn rec(n: u64, base: u64, spread: u64) -> Recorder {
    let mut r = Recorder::new();
    for i in 0..n {
        r.record(base + (i * 7919) % spread.max(1));
    }
    r
}

/// A 2.5 GHz cycle counter.
fn cal() -> tsc::Calibration {
    tsc::Calibration::between((0, 0), (1_000_000_000, 2_500_000_000))
}

/// Run `m` on `outcome`; (exit, stdout, stderr, the JSON document).
fn pipeline<M: Measurement>(
    m: M,
    outcome: M::Outcome,
    cmd: &[&str],
) -> (Exit, String, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let json = Output::File(dir.path().join("r.json"));
    let out = Outputs::new().json_csv(Some(&json), None).unwrap();
    let env = Env::fake(cmd);
    let exit = drive(&mut Canned::new(m, outcome), &out, &env).unwrap();
    let (stdout, stderr) = env.captured();
    let doc = std::fs::read_to_string(dir.path().join("r.json")).unwrap();
    (exit, stdout, stderr, doc)
}

fn bench<C>(cfg: C) -> Bench<C> {
    Bench {
        cfg,
        want: WANT,
        load: Default::default(),
    }
}

#[test]
fn ctxsw_table_and_document() {
    let out = ctxsw::CtxswOutcome {
        per_switch: rec(5000, 1_800, 900),
        round_trips: 1_250_000,
        total_ns: 5_000_000_000,
        fallback: None,
    };
    let cfg = ctxsw::CtxswConfig::new(ctxsw::Channel::Pipe, 1, 5_000_000_000);
    let (exit, stdout, stderr, doc) = pipeline(
        bench(cfg),
        Measured { out, cal: cal() },
        &["punctual", "bench", "ctxsw", "-a", "1"],
    );
    assert_eq!(exit, Exit::Ok);
    assert!(
        !stderr.contains("steal"),
        "a switch's cost is not about steal time"
    );
    insta::assert_snapshot!("ctxsw_table", stdout);
    insta::assert_snapshot!("ctxsw_json", doc);
}

#[test]
fn trap_table() {
    let out = trap::TrapOutcome {
        per_call: rec(2000, 90, 40),
        calls: 20_000_000,
        total_ns: 2_000_000_000,
        fallback: None,
    };
    let cfg = trap::TrapConfig {
        cpu: Some(1),
        ..trap::TrapConfig::new(2_000_000_000)
    };
    let (exit, stdout, _, _) = pipeline(
        bench(cfg),
        Measured { out, cal: cal() },
        &["punctual", "bench", "trap"],
    );
    assert_eq!(exit, Exit::Ok);
    insta::assert_snapshot!("trap_table", stdout);
}

#[test]
fn memcpy_table() {
    let sizes = [("L1", 8 << 10), ("memory", 64 << 20)];
    let results = sizes
        .iter()
        .flat_map(|&(label, bytes)| {
            [memcpy::Method::Memcpy, memcpy::Method::Loop].map(|method| memcpy::SizeResult {
                size: memcpy::CopySize {
                    label: label.into(),
                    bytes,
                },
                method,
                per_copy: rec(100, bytes as u64 / 20, 50),
                copies: 100,
                total_ns: bytes as u64 * 5,
                mb_per_s_mean: 200.0,
                mb_per_s_stddev: 12.0,
            })
        })
        .collect();
    let cfg = memcpy::MemcpyConfig {
        sizes: sizes
            .iter()
            .map(|&(label, bytes)| memcpy::CopySize {
                label: label.into(),
                bytes,
            })
            .collect(),
        methods: vec![memcpy::Method::Memcpy, memcpy::Method::Loop],
        per_size_ns: 1_000_000_000,
        cpu: Some(1),
        sched: SchedParams {
            policy: Policy::Fifo,
            priority: 99,
        },
    };
    let out = memcpy::MemcpyOutcome {
        sizes: results,
        fallback: None,
    };
    let (exit, stdout, _, _) = pipeline(bench(cfg), out, &["punctual", "bench", "memcpy"]);
    assert_eq!(exit, Exit::Ok);
    insta::assert_snapshot!("memcpy_table", stdout);
}

#[test]
fn dispatch_table() {
    let sched = SchedParams {
        policy: Policy::Fifo,
        priority: 99,
    };
    let cfg = dispatch::DispatchConfig {
        event: dispatch::Event::Eventfd,
        raiser_cpu: 0,
        waiter_cpu: 1,
        waiter: sched,
        raiser: sched,
        interval_ns: 10_000_000,
        duration_ns: 10_000_000_000,
    };
    let out = dispatch::DispatchOutcome {
        latency: rec(1000, 6_000, 9_000),
        events: 1000,
        raiser_fallback: None,
    };
    let (exit, stdout, _, _) = pipeline(bench(cfg), out, &["punctual", "bench", "dispatch"]);
    assert_eq!(exit, Exit::Ok);
    insta::assert_snapshot!("dispatch_table", stdout);
}

#[test]
fn gaps_tables() {
    let cpu = |c: usize| gaps::CpuGaps {
        cpu: c,
        gaps: rec(2500, 1_500, 60_000),
        reads: 400_000_000,
        min_step_ns: 22,
        wall_ns: 10_000_000_000,
        began_ns: 0,
        ended_ns: 10_000_000_000,
        starts: Vec::new(),
        lost_ns: 14_000_000,
        interrupts: [("LOC".to_string(), 2500u64), ("RES".to_string(), 12)]
            .into_iter()
            .collect(),
        tick: Some(gaps::TickEstimate {
            hz: 250,
            gaps: 2490,
            per_second: 249.0,
            share: 0.996,
            median_ns: 52_000,
            mean_ns: 53_100,
            stddev_ns: 4_200,
            trimmed: 3,
        }),
        // A host's 100 Hz stop on CPU 1 only.
        periodic: if c == 1 {
            vec![gaps::TickEstimate {
                hz: 100,
                gaps: 994,
                per_second: 99.4,
                share: 0.994,
                median_ns: 29_600,
                mean_ns: 31_200,
                stddev_ns: 6_000,
                trimmed: 1,
            }]
        } else {
            Vec::new()
        },
        fallback: None,
    };
    let cfg = gaps::GapsConfig {
        cpus: vec![0, 1],
        duration_ns: 10_000_000_000,
        threshold_ns: 1_000,
        sched: SchedParams {
            policy: Policy::Other,
            priority: 0,
        },
        hz: Some(250),
    };
    let out = gaps::GapsOutcome {
        cpus: vec![cpu(0), cpu(1)],
        calibration: cal(),
    };
    let (exit, stdout, _, doc) = pipeline(bench(cfg), out, &["punctual", "bench", "gaps"]);
    assert_eq!(exit, Exit::Ok);
    assert!(
        doc.contains("\"above_us\""),
        "oslat-comparable counts are in the document"
    );
    let v: serde_json::Value = serde_json::from_str(&doc).expect("the document is JSON");
    assert_eq!(v["series"][0]["periodic"], serde_json::json!([]));
    assert_eq!(
        (
            v["series"][1]["periodic"][0]["period_ns"].as_u64(),
            v["series"][1]["periodic"][0]["median_ns"].as_u64()
        ),
        (Some(10_000_000), Some(29_600)),
        "the host's stop is in CPU 1's series"
    );
    insta::assert_snapshot!("gaps_tables", stdout);
}

#[test]
fn alarm_table() {
    let cfg = AlarmConfig {
        cpu: Some(1),
        alarms: 500,
        ..AlarmConfig::paper("cont:2,cpu:1".parse().unwrap(), Mechanism::Signal)
    };
    let kinds: Vec<_> = cfg
        .workload
        .groups
        .iter()
        .flat_map(|g| std::iter::repeat_n(g.kind, g.count as usize))
        .collect();
    let processes = kinds
        .into_iter()
        .enumerate()
        .map(|(index, kind)| AlarmProcess {
            kind,
            index,
            recorder: if kind.sets_alarms() {
                rec(500, 4_000_000, 60_000_000)
            } else {
                Recorder::new()
            },
            cpu_ns: 1_000_000_000,
            wall_ns: 3_000_000_000,
            policy: Policy::Rr,
            priority: 10,
            fallback: None,
        })
        .collect();
    let m = AlarmBench::new(cfg, WANT, Default::default(), None);
    let measured = AlarmMeasured {
        out: AlarmOutcome { processes },
        effective_rr_ns: Some(100_000_000),
    };
    let (exit, stdout, _, _) = pipeline(m, measured, &["punctual", "bench", "alarm"]);
    assert_eq!(exit, Exit::Ok);
    insta::assert_snapshot!("alarm_table", stdout);
}
