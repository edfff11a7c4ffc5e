//! `compare` on synthetic runs: it must see an injected 20 % p99 regression, and must not see one
//! in pairs drawn from a single distribution (the false-positive rate is measured and printed).

use punctual_report::bootstrap::Rng;
use punctual_report::compare::{compare, compare_sides, Input, Method, Options, Verdict};
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
    let text = punctual_report::render::text(&c, false);
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

/// `n` runs of one machine: each run's tail scaled by its own disturbance (a run-to-run spread of
/// about `spread` in log scale, as neighbours and steal give a VM), times `scale`.
fn runs_of(seed: u64, n: usize, scale: f64, spread: f64) -> Vec<ResultDoc> {
    let mut rng = Rng::seeded(seed);
    (0..n)
        .map(|k| {
            let disturbance = (spread * rng.normal()).exp();
            doc(vec![(
                "thread 0",
                Some(0),
                run(seed * 100 + k as u64, 20_000, scale * disturbance),
            )])
        })
        .collect()
}

fn side(docs: &[ResultDoc]) -> Vec<Input<'_>> {
    docs.iter()
        .enumerate()
        .map(|(i, d)| Input {
            source: format!("run{i}.json"),
            doc: d,
        })
        .collect()
}

fn sides_verdict(a: &[ResultDoc], b: &[ResultDoc], opts: &Options) -> (Verdict, f64, f64) {
    let c = compare_sides(&[side(a), side(b)], opts).unwrap();
    let ag = &c.series[0].against[0];
    assert_eq!(ag.method, Method::BetweenRuns);
    let ch = ag.change("99").unwrap();
    assert!(ch.low_percent > -100.0, "{ch:?}");
    (ag.verdict, ch.low_percent, ch.high_percent)
}

/// The case: single runs on a disturbed machine flag changes that are not there; three
/// runs per side weigh the spread between runs and do not, yet still see a real regression.
#[test]
fn three_runs_per_side_tolerate_disturbed_runs_and_still_see_a_tripled_tail() {
    let opts = Options::default();
    let sets = 40u64;
    let (mut single, mut three, mut detected) = (0, 0, 0);
    for i in 0..sets {
        let a = runs_of(1_000 + 3 * i, 3, 1.0, 0.3);
        let b = runs_of(2_000 + 3 * i, 3, 1.0, 0.3);
        if verdict(&a[0], &b[0], &opts) != Verdict::NoSignificantChange {
            single += 1;
        }
        if sides_verdict(&a, &b, &opts).0 != Verdict::NoSignificantChange {
            three += 1;
        }
        let worse = runs_of(3_000 + 3 * i, 3, 3.0, 0.3);
        if sides_verdict(&a, &worse, &opts).0 == Verdict::Regression {
            detected += 1;
        }
    }
    eprintln!(
        "disturbed runs (30 % between-run spread), {sets} pairs: single runs flag {single}, \
         3-run sets flag {three}; a tripled tail is seen in {detected}"
    );
    assert!(
        single * 4 >= sets,
        "single runs mistake disturbances for changes: {single}"
    );
    assert!(three * 10 <= sets, "3-run sets flagged {three} of {sets}");
    assert!(detected * 10 >= sets * 9, "detected {detected} of {sets}");
}

#[test]
fn quiet_run_sets_are_no_change_and_a_shift_in_every_run_is_a_regression() {
    let opts = Options::default();
    let a = runs_of(7, 3, 1.0, 0.03);
    let b = runs_of(8, 3, 1.0, 0.03);
    assert_eq!(sides_verdict(&a, &b, &opts).0, Verdict::NoSignificantChange);
    let c = runs_of(9, 3, 1.3, 0.03);
    let (v, low, high) = sides_verdict(&a, &c, &opts);
    assert_eq!(v, Verdict::Regression, "[{low}, {high}]");
    assert!(low > 0.0 && low < 30.0 && high > 30.0, "[{low}, {high}]");
}

#[test]
fn a_side_that_ran_under_steal_or_load_is_named_in_the_comparison() {
    let mut a = runs_of(11, 2, 1.0, 0.05);
    let mut b = runs_of(12, 2, 1.0, 0.05);
    let taken = |d: &mut ResultDoc, steal: u64, others: u64| {
        let x = &mut d.settings.extra;
        x.insert("steal_window_ns".into(), 10_000_000_000u64.into());
        x.insert(
            "steal_ns".into(),
            serde_json::json!({"0": steal, "1": steal}),
        );
        x.insert("others_cpu_ns".into(), others.into());
    };
    for d in &mut a {
        taken(d, 10_000_000, 1_000_000_000);
    }
    for d in &mut b {
        taken(d, 300_000_000, 12_000_000_000);
    }
    let c = compare_sides(&[side(&a), side(&b)], &Options::default()).unwrap();
    assert_eq!(c.disturbances.len(), 2, "{:?}", c.disturbances);
    assert!(
        c.disturbances[0].starts_with("steal differed"),
        "{:?}",
        c.disturbances
    );
    assert!(c.disturbances[0].contains("0.10 %") && c.disturbances[0].contains("3.00 %"));
    assert!(c.disturbances[1].contains("5 %") && c.disturbances[1].contains("60 %"));
    assert!(
        c.settings_differences.is_empty(),
        "steal is measured, not set: {:?}",
        c.settings_differences
    );
    let text = punctual_report::render::text(&c, false);
    assert!(text.contains("steal differed"), "{text}");
    // Alike machines say nothing.
    let same = compare_sides(&[side(&a), side(&a)], &Options::default()).unwrap();
    assert!(same.disturbances.is_empty());
}

#[test]
fn the_settings_table_shows_where_long_commands_differ() {
    let mut a = doc(vec![("thread 0", Some(0), run(1, 1_000, 1.0))]);
    let long: Vec<String> = (0..40).map(|i| format!("--opt{i}=value-{i}")).collect();
    a.command = ["/usr/local/bin/punctual", "latency"]
        .iter()
        .map(|s| s.to_string())
        .chain(long.iter().cloned())
        .chain(["--json".to_string(), "a.json".to_string()])
        .collect();
    let mut b = a.clone();
    b.command[30] = "--load=cpu:1".into();
    b.command.pop();
    b.command.push("b.json".into());
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
    let cmd = c
        .settings_differences
        .iter()
        .find(|d| d.field == "command")
        .expect("the command differs");
    assert_eq!(cmd.values, ["… --opt28=value-28 …", "… --load=cpu:1 …"]);
    // The output file alone is no difference.
    b.command[30] = a.command[30].clone();
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
    assert!(
        c.settings_differences.is_empty(),
        "{:?}",
        c.settings_differences
    );
}
