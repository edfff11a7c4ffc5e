//! The HTML report from documents alone: what it shows, that it is self-contained, and that its
//! size does not grow with the samples.

use punctual_report::html::{report, ReportInput};
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

#[test]
fn shows_verdicts_published_numbers_and_escapes_names() {
    let d = doc(100_000);
    let r = report(
        &[ReportInput {
            source: "a.json".into(),
            doc: &d,
        }],
        &[],
    )
    .unwrap();
    let h = &r.html;
    assert!(
        h.contains("Check verdicts") && h.contains("mostly (99.900 %)"),
        "verdicts"
    );
    assert!(h.contains("Experiment: ours and the published numbers"));
    assert!(h.contains("<td>billing_ratio</td><td class=\"n\">1.02</td><td class=\"n\">1.1</td>"));
    assert!(
        h.contains("box&lt;1&gt;") && !h.contains("box<1>"),
        "names are escaped"
    );
    assert_eq!(
        r.figures,
        ["A: CDF", "A: histogram of alarm 1 (alarm_latency)"]
    );
    assert_eq!(h.matches("<svg").count(), r.figures.len());
    assert!(!h.contains("<script"));
    // The far outliers (0.1 % at about 900 us) are drawn: 5 us buckets up to the maximum.
    assert!(
        h.contains("Counts per 5.00 us bucket up to the maximum (907 us)"),
        "{h}"
    );
}

#[test]
fn report_size_does_not_grow_with_the_samples() {
    let small = doc(10_000);
    let big = doc(2_000_000);
    let size = |d: &ResultDoc| {
        report(
            &[ReportInput {
                source: "a.json".into(),
                doc: d,
            }],
            &[],
        )
        .unwrap()
        .html
        .len()
    };
    let (s, b) = (size(&small), size(&big));
    eprintln!("report of 10,000 samples: {s} bytes; of 2,000,000: {b} bytes");
    assert!(b < 2 * s, "{b} bytes against {s}");
}

#[test]
fn steal_and_gaps_get_a_table_and_a_figure_per_cpu() {
    let mut d = doc(1_000);
    assert!(
        !report(
            &[ReportInput {
                doc: &d,
                source: "plain".into()
            }],
            &[]
        )
        .unwrap()
        .html
        .contains("Time taken from the CPUs"),
        "nothing to show without steal or gaps"
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
    let r = report(
        &[ReportInput {
            doc: &d,
            source: "taken".into(),
        }],
        &[],
    )
    .unwrap();
    assert!(r.html.contains("Time taken from the CPUs"));
    assert!(
        r.html.contains("1.50 %") && r.html.contains("0.50 %"),
        "the shares"
    );
    assert!(
        r.figures
            .iter()
            .any(|t| t.ends_with("time taken from each CPU")),
        "{:?}",
        r.figures
    );
}
