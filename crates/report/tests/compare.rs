//! `compare` on synthetic runs: it must see an injected 20 % p99 regression, and must not see one
//! in pairs drawn from a single distribution (the false-positive rate is measured and printed).

use punctual_report::bootstrap::Rng;
use punctual_report::compare::{compare, Input, Options, Verdict};
use punctual_result::{doc::kind, HostFacts, ResultDoc, Series};
use punctual_stats::Recorder;

fn host() -> HostFacts {
    HostFacts {
        kernel: "6.12.0-test".into(),
        preempt: "dynamic: full".into(),
        realtime: false,
        cpus: 2,
        clocksource: "tsc".into(),
        virtualized: true,
        hz: Some(250),
        hostname: "testbox".into(),
        cpu_model: "Test CPU".into(),
    }
}

/// Wake-up latencies like this VM's: a log-normal body around 4 us and a tail from ticks.
fn run(seed: u64, n: usize, scale: f64) -> Recorder {
    let mut rng = Rng::seeded(seed);
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
    r
}

fn doc(series: Vec<(&str, Option<usize>, Recorder)>) -> ResultDoc {
    let mut d = ResultDoc::new(
        vec!["punctual".into(), "latency".into()],
        host(),
        "2026-01-01T00:00:00Z".into(),
    );
    for (name, cpu, r) in series {
        d.series
            .push(Series::from_recorder(name, kind::WAKEUP_LATENCY, cpu, &r));
    }
    d
}

fn verdict(a: &ResultDoc, b: &ResultDoc, opts: &Options) -> Verdict {
    let c = compare(
        &[
            Input {
                source: "a.json".into(),
                doc: a,
            },
            Input {
                source: "b.json".into(),
                doc: b,
            },
        ],
        opts,
    )
    .unwrap();
    c.series[0].against[0].verdict
}

#[test]
fn compare_flags_an_injected_20_percent_p99_regression() {
    let opts = Options::default();
    let pairs = 20;
    let mut detected = 0;
    let mut changes = Vec::new();
    for i in 0..pairs {
        let a = doc(vec![("thread 0", Some(0), run(1_000 + i, 20_000, 1.0))]);
        let b = doc(vec![("thread 0", Some(0), run(2_000 + i, 20_000, 1.2))]);
        let c = compare(
            &[
                Input {
                    source: "a".into(),
                    doc: &a,
                },
                Input {
                    source: "b".into(),
                    doc: &b,
                },
            ],
            &opts,
        )
        .unwrap();
        changes.push(c.series[0].against[0].change("99").unwrap().change_percent);
        if c.series[0].against[0].verdict == Verdict::Regression {
            detected += 1;
            assert!(
                !c.regressions_over(10.0).is_empty(),
                "a 20 % rise is over 10 %"
            );
            assert!(c.regressions_over(50.0).is_empty(), "but not over 50 %");
        }
        // The same runs the other way round are an improvement.
        assert_ne!(verdict(&b, &a, &opts), Verdict::Regression);
    }
    eprintln!(
        "detection rate of a 20 % p99 regression: {detected}/{pairs} ({:.0} %)",
        100.0 * detected as f64 / pairs as f64
    );
    assert!(
        detected * 100 >= pairs * 95,
        "detected {detected} of {pairs}"
    );
    let mean = changes.iter().sum::<f64>() / changes.len() as f64;
    assert!(
        (mean - 20.0).abs() < 4.0,
        "the p99 rose by {mean:.1} % on average: {changes:?}"
    );
}

#[test]
fn compare_flags_fewer_than_5_percent_of_pairs_from_one_distribution() {
    let pairs = 100u64;
    let default = Options::default();
    // Without the 5 % practical threshold: the interval alone decides.
    let bare = Options {
        min_change_percent: 0.0,
        ..Options::default()
    };
    let (mut flagged, mut flagged_bare) = (0, 0);
    for i in 0..pairs {
        let a = doc(vec![(
            "thread 0",
            Some(0),
            run(10_000 + 2 * i, 20_000, 1.0),
        )]);
        let b = doc(vec![(
            "thread 0",
            Some(0),
            run(10_001 + 2 * i, 20_000, 1.0),
        )]);
        if verdict(&a, &b, &default) != Verdict::NoSignificantChange {
            flagged += 1;
        }
        if verdict(&a, &b, &bare) != Verdict::NoSignificantChange {
            flagged_bare += 1;
        }
    }
    eprintln!(
        "false-positive rate over {pairs} same-distribution pairs: {flagged} % with the defaults, \
         {flagged_bare} % on the 99 % interval alone"
    );
    assert!(flagged < 5, "{flagged} of {pairs} pairs flagged");
    assert!(
        flagged_bare < 5,
        "{flagged_bare} of {pairs} pairs flagged by the interval alone"
    );
}

#[test]
fn mismatched_series_are_named_with_the_reason() {
    let a = doc(vec![
        ("thread 0", Some(0), run(1, 1_000, 1.0)),
        ("thread 1", Some(1), run(2, 1_000, 1.0)),
    ]);
    let b = doc(vec![
        ("thread 0", Some(0), run(3, 1_000, 1.0)),
        ("thread 1", Some(0), run(4, 1_000, 1.0)),
        ("thread 2", Some(1), run(5, 1_000, 1.0)),
    ]);
    let c = compare(
        &[
            Input {
                source: "a".into(),
                doc: &a,
            },
            Input {
                source: "b".into(),
                doc: &b,
            },
        ],
        &Options::default(),
    )
    .unwrap();
    assert_eq!(c.series.len(), 1);
    assert_eq!(c.series[0].name, "thread 0");
    let whys: Vec<(String, Option<usize>, String)> = c
        .unmatched
        .iter()
        .map(|u| (u.name.clone(), u.cpu, u.why.clone()))
        .collect();
    assert_eq!(
        whys,
        vec![
            (
                "thread 1".to_string(),
                Some(1),
                "in B it is wakeup_latency on cpu 0".to_string()
            ),
            (
                "thread 1".to_string(),
                Some(0),
                "in A it is wakeup_latency on cpu 1".to_string()
            ),
            ("thread 2".to_string(), Some(1), "absent from A".to_string()),
        ]
    );
    let text = punctual_report::render::text(&c);
    assert!(text.contains("absent from A"), "{text}");
}

#[test]
fn host_and_settings_differences_are_listed() {
    let a = doc(vec![("thread 0", Some(0), run(1, 1_000, 1.0))]);
    let mut b = a.clone();
    b.host.kernel = "6.13.0-rt".into();
    b.settings.policy = Some("other".into());
    b.settings.fallbacks.push(punctual_result::Fallback {
        setting: "policy".into(),
        wanted: "fifo".into(),
        got: "other".into(),
        why: "no CAP_SYS_NICE".into(),
        fix: "run as root".into(),
    });
    let c = compare(
        &[
            Input {
                source: "a".into(),
                doc: &a,
            },
            Input {
                source: "b".into(),
                doc: &b,
            },
        ],
        &Options::default(),
    )
    .unwrap();
    let host: Vec<&str> = c
        .host_differences
        .iter()
        .map(|d| d.field.as_str())
        .collect();
    assert_eq!(host, ["kernel"]);
    assert_eq!(c.host_differences[0].values, ["6.12.0-test", "6.13.0-rt"]);
    let settings: Vec<&str> = c
        .settings_differences
        .iter()
        .map(|d| d.field.as_str())
        .collect();
    assert_eq!(settings, ["policy", "fallbacks"]);
    // Identical runs: the verdict is no change, exactly.
    assert_eq!(c.series[0].against[0].verdict, Verdict::NoSignificantChange);
}

#[test]
fn one_result_is_refused() {
    let a = doc(vec![("thread 0", Some(0), run(1, 100, 1.0))]);
    let e = compare(
        &[Input {
            source: "a".into(),
            doc: &a,
        }],
        &Options::default(),
    );
    assert!(e.is_err());
}
