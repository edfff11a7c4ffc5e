//! The HTML report from documents alone: what it shows, that it is self-contained, and that its
//! size does not grow with the samples.

use punctual_report::compare::Options;
use punctual_report::html::{report, Report, ReportInput};
use punctual_result::{doc::kind, HostFacts, ResultDoc, Series};
use punctual_stats::Recorder;
use serde_json::json;

fn doc(n: u64) -> ResultDoc {
    let host = HostFacts {
        kernel: "6.12.0-test".into(),
        preempt: "dynamic: full".into(),
        realtime: false,
        cpus: 2,
        clocksource: "tsc".into(),
        virtualized: true,
        hz: Some(250),
        hostname: "box<1>".into(),
        cpu_model: "Test CPU".into(),
    };
    let mut d = ResultDoc::new(
        vec!["punctual".into(), "check".into()],
        host,
        "2026-01-01T00:00:00Z".into(),
    );
    let mut r = Recorder::new();
    for i in 0..n {
        r.record(2_000 + (i * 7919) % 6_000 + if i % 1000 == 0 { 900_000 } else { 0 });
    }
    d.series.push(
        Series::from_recorder("alarm 1", kind::ALARM_LATENCY, None, &r)
            .with("published_us", json!({"0.9": 7, "0.99": 8, "max": 900}))
            .with("billing_ratio", 1.02)
            .with("published_billing_ratio", 1.1),
    );
    d.extra.insert(
        "verdict".into(),
        json!([{"class": "audio", "bound_ns": 100000,
                "plain_sleep": {"serves": "mostly", "fraction_within": 0.999},
                "hybrid": {"serves": "yes", "fraction_within": 1.0}}]),
    );
    d
}

fn one(d: &ResultDoc, source: &str) -> Report {
    report(
        &[vec![ReportInput::doc(source, d)]],
        &[],
        &Options::default(),
    )
    .unwrap()
}

#[test]
fn shows_verdicts_published_numbers_and_escapes_names() {
    let d = doc(100_000);
    let r = one(&d, "a.json");
    let h = &r.html;
    assert!(
        h.contains("Check verdicts") && h.contains("mostly (99.900 %)"),
        "verdicts"
    );
    assert!(h.contains("Ours beside the published numbers"));
    assert!(h.contains("<td>billing ratio</td><td class=\"n\">1.02</td><td class=\"n\">1.1</td>"));
    assert!(h.contains("<td>p99</td><td class=\"n\">"), "{h}");
    assert!(
        h.contains("box&lt;1&gt;") && !h.contains("box<1>"),
        "names are escaped"
    );
    assert_eq!(
        r.figures,
        [
            "alarm 1 (alarm_latency): percentiles",
            "alarm 1 (alarm_latency): histogram"
        ]
    );
    assert_eq!(h.matches("<svg").count(), r.figures.len());
    assert!(!h.contains("<script"));
    // The far outliers (0.1 % at about 900 us) are drawn: logarithmic buckets up to the maximum.
    assert!(
        h.contains("60 buckets from 2.00 us to 907 us, spaced logarithmically"),
        "{h}"
    );
    assert!(
        h.contains("alarm latency (us)"),
        "the axis names the quantity"
    );
}

#[test]
fn report_size_does_not_grow_with_the_samples() {
    let small = doc(10_000);
    let big = doc(2_000_000);
    let size = |d: &ResultDoc| one(d, "a.json").html.len();
    let (s, b) = (size(&small), size(&big));
    eprintln!("report of 10,000 samples: {s} bytes; of 2,000,000: {b} bytes");
    assert!(b < 2 * s, "{b} bytes against {s}");
}

#[test]
fn steal_and_gaps_get_a_table_and_a_figure_per_cpu() {
    let mut d = doc(1_000);
    let plain = one(&d, "plain").html;
    assert!(
        plain.contains("Not recorded: none of these runs measured steal time or gaps"),
        "says why there is nothing to show"
    );
    // 2 s run: CPU 0 lost 30 ms to the host (1.50 %), CPU 1 none; a gap series for CPU 1 lost
    // 50 ms of 10 s (0.50 %).
    d.settings
        .extra
        .insert("steal_ns".into(), json!({"0": 30_000_000u64, "1": 0}));
    d.settings
        .extra
        .insert("steal_window_ns".into(), json!(2_000_000_000u64));
    let mut g = Recorder::new();
    g.record(12_000);
    d.series.push(
        Series::from_recorder("cpu 1", kind::GAP, Some(1), &g)
            .with("lost_ns", 50_000_000u64)
            .with("duration_ns", 10_000_000_000u64),
    );
    let r = one(&d, "taken");
    assert!(r.html.contains("Time taken from the CPUs"));
    assert!(
        r.html.contains("1.50 %") && r.html.contains("0.50 %"),
        "the shares"
    );
    assert!(
        r.figures.iter().any(|t| t == "Time taken from each CPU"),
        "{:?}",
        r.figures
    );
    // All zero: the table, one line why, and no chart.
    d.settings
        .extra
        .insert("steal_ns".into(), json!({"0": 0, "1": 0}));
    d.series.pop();
    let zero = one(&d, "zero");
    assert!(zero
        .html
        .contains("No figure: the host took no time from any CPU"));
    assert!(!zero.figures.iter().any(|t| t == "Time taken from each CPU"));
}

#[test]
fn several_results_open_with_the_verdicts_and_share_one_scale() {
    let a = doc(50_000);
    let mut b = doc(50_000);
    // B's tail is three times A's, on the same host and settings.
    let mut r = Recorder::new();
    for i in 0..50_000u64 {
        r.record(2_000 + (i * 7919) % 6_000 + if i % 50 == 0 { 30_000 } else { 0 });
    }
    b.series[0] = Series::from_recorder("alarm 1", kind::ALARM_LATENCY, None, &r);
    b.tags.insert("kernel".into(), "new".into());
    let page = report(
        &[
            vec![ReportInput::doc("a.json", &a)],
            vec![ReportInput::doc("b.json", &b)],
        ],
        &[],
        &Options::default(),
    )
    .unwrap();
    let h = &page.html;
    let summary = h.split("<section id=\"runs\">").next().unwrap();
    assert!(
        summary.contains("B against A: <span class=\"bad\">1 regression(s)</span>"),
        "{summary}"
    );
    assert!(
        summary.contains("B kernel=new") || h.contains("B kernel=new"),
        "named by its tags"
    );
    assert_eq!(h.matches("<td>kernel</td>").count(), 1, "host facts once");
    assert!(h.contains("Nothing: every result ran on the same host with the same settings."));
    // One percentile figure and one histogram for the series, both runs on each.
    assert_eq!(page.figures.len(), 2, "{:?}", page.figures);
}
