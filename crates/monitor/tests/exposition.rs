//! The exposition as a scraper reads it: the three formats, decoded back (the protobuf one as
//! Prometheus decodes it, native buckets included), checked against what was recorded, and the
//! text format through `promtool check metrics`.

use prometheus_client::encoding::prometheus_protobuf::prometheus_data_model::{
    Histogram, MetricFamily, MetricType,
};
use prost::Message;
use punctual_monitor::expose::{render, Format};
use punctual_monitor::http::ServerStats;
use punctual_monitor::metrics::{
    registry, Board, HostLabels, Ops, CLASSIC_BOUNDS_NS, NATIVE_SCHEMA,
};
use std::sync::Arc;

/// A board measuring CPUs 0 and 1 with known values, and its registry.
fn fixture() -> (Arc<Board>, Vec<u64>, prometheus_client::registry::Registry) {
    let board = Arc::new(Board::new(10_000));
    let hists = board.measure(&[0, 1], 1_000_000);
    // A spread of latencies over four decades, one exact zero, and some late ones.
    let values: Vec<u64> = (0..20_000u64)
        .map(|i| match i % 1000 {
            0 => 0,
            1..=9 => 250_000 + i,
            _ => 1_500 + (i * 7919) % 30_000,
        })
        .collect();
    for &v in &values {
        hists[0].record(v);
    }
    hists[0].add_missed(3);
    hists[1].record(42_000);
    let ops = Arc::new(Ops::default());
    ops.floors.lock().unwrap().insert(0, (250.0, 0.001, 15_000));
    let reg = registry(
        board.clone(),
        ops,
        Arc::new(ServerStats::default()),
        HostLabels(vec![("kernel", "6.18.0 \"quoted\"".into())]),
    );
    (board, values, reg)
}

fn decode(bytes: &[u8]) -> Vec<MetricFamily> {
    let mut buf = bytes;
    let mut out = Vec::new();
    while !buf.is_empty() {
        out.push(
            MetricFamily::decode_length_delimited(&mut buf).expect("a delimited MetricFamily"),
        );
    }
    out
}

fn cpu_histogram<'a>(fams: &'a [MetricFamily], cpu: &str) -> &'a Histogram {
    let f = fams
        .iter()
        .find(|f| f.name == "punctual_wakeup_latency_seconds")
        .expect("the latency family");
    assert_eq!(f.r#type, MetricType::Histogram as i32);
    f.metric
        .iter()
        .find(|m| m.label.iter().any(|l| l.name == "cpu" && l.value == cpu))
        .and_then(|m| m.histogram.as_ref())
        .expect("a histogram for the CPU")
}

/// The native buckets back as (upper bound in seconds, count).
fn native_buckets(h: &Histogram) -> Vec<(f64, u64)> {
    let mut out = Vec::new();
    let mut idx = 0i32;
    let mut count = 0i64;
    let mut deltas = h.positive_delta.iter();
    for (n, span) in h.positive_span.iter().enumerate() {
        idx = if n == 0 {
            span.offset
        } else {
            idx + span.offset
        };
        for _ in 0..span.length {
            count += deltas.next().expect("a delta per bucket");
            let upper = 2f64.powf(idx as f64 / (1 << h.schema) as f64);
            out.push((upper, count as u64));
            idx += 1;
        }
    }
    assert!(deltas.next().is_none(), "as many deltas as buckets");
    out
}

#[test]
fn protobuf_carries_classic_and_native_buckets_that_match_the_values() {
    let (_board, values, reg) = fixture();
    let fams = decode(&render(&reg, Format::Protobuf).unwrap());
    let h = cpu_histogram(&fams, "0");
    assert_eq!(h.sample_count, values.len() as u64);
    let sum: u64 = values.iter().sum();
    assert!((h.sample_sum - sum as f64 * 1e-9).abs() < 1e-9);
    // Classic: cumulative, 1-2-5 from 1 us to 100 ms, then +Inf.
    assert_eq!(h.bucket.len(), CLASSIC_BOUNDS_NS.len() + 1);
    for (b, &bound) in h.bucket.iter().zip(CLASSIC_BOUNDS_NS.iter()) {
        assert!((b.upper_bound - bound as f64 * 1e-9).abs() < 1e-15);
        let exact = values.iter().filter(|&&v| v <= bound).count() as u64;
        // Whole live buckets: off by at most the values within 0.1 % above the bound.
        let slack = values
            .iter()
            .filter(|&&v| v > bound && (v as f64) < bound as f64 * 1.001)
            .count() as u64;
        assert!(
            b.cumulative_count >= exact && b.cumulative_count <= exact + slack,
            "le {bound}: {} against {exact}",
            b.cumulative_count
        );
    }
    assert!(h.bucket.last().unwrap().upper_bound.is_infinite());
    assert_eq!(
        h.bucket.last().unwrap().cumulative_count,
        values.len() as u64
    );
    // Native: schema 3, the zero in the zero bucket, every other value in the bucket its
    // value falls in (a value within 0.1 % of a bound may sit on either side).
    assert_eq!(h.schema, NATIVE_SCHEMA);
    assert_eq!(h.zero_count, 20);
    assert!(h.zero_threshold > 0.0 && h.zero_threshold < 1e-30);
    let native = native_buckets(h);
    assert_eq!(
        native.iter().map(|b| b.1).sum::<u64>() + h.zero_count,
        values.len() as u64
    );
    let factor = 2f64.powf(1.0 / 8.0);
    for &(upper, n) in &native {
        let lower = upper / factor;
        let inside = values
            .iter()
            .filter(|&&v| {
                let s = v as f64 * 1e-9;
                s > lower * 0.999 && s <= upper * 1.001
            })
            .count() as u64;
        assert!(
            n <= inside,
            "({lower}, {upper}]: {n} counted, {inside} near it"
        );
    }
    // The other families.
    let value_of = |name: &str| {
        let f = fams
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("{name}"));
        f.metric[0].clone()
    };
    assert_eq!(
        value_of("punctual_missed_periods_total")
            .counter
            .unwrap()
            .value,
        3.0
    );
    assert_eq!(
        value_of("punctual_late_releases_total")
            .counter
            .unwrap()
            .value,
        values.iter().filter(|&&v| v > 10_007).count() as f64
    );
    assert_eq!(value_of("punctual_build_info").gauge.unwrap().value, 1.0);
}

#[test]
fn the_worst_since_the_last_scrape_is_taken_by_each_scrape() {
    let (board, values, reg) = fixture();
    let worst = *values.iter().max().unwrap() as f64 / 1e9;
    let max = |bytes: Vec<u8>| -> f64 {
        let text = String::from_utf8(bytes).unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with("punctual_wakeup_latency_max_seconds{cpu=\"0\"}"))
            .unwrap()
            .to_string();
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert_eq!(max(render(&reg, Format::Text).unwrap()), worst);
    assert_eq!(
        max(render(&reg, Format::Text).unwrap()),
        0.0,
        "nothing since"
    );
    board.active()[0].1.record(7_000);
    assert_eq!(max(render(&reg, Format::OpenMetrics).unwrap()), 7e-6);
}

#[test]
fn text_formats_name_every_family_with_units_and_escape_labels() {
    let (_, _, reg) = fixture();
    let om = String::from_utf8(render(&reg, Format::OpenMetrics).unwrap()).unwrap();
    assert!(om.ends_with("# EOF\n"), "OpenMetrics ends with # EOF");
    assert!(om.contains("# UNIT punctual_wakeup_latency_seconds seconds"));
    assert!(om.contains("# TYPE punctual_wakeup_latency_seconds histogram"));
    assert!(
        om.contains("punctual_wakeup_latency_seconds_bucket{le=\"0.00001\",cpu=\"0\"}"),
        "{om}"
    );
    assert!(om.contains("punctual_wakeup_latency_seconds_bucket{le=\"0.000001\",cpu=\"0\"}"));
    assert!(
        om.contains("kernel=\"6.18.0 \\\"quoted\\\"\""),
        "label values escaped"
    );
    let text = String::from_utf8(render(&reg, Format::Text).unwrap()).unwrap();
    for family in [
        "punctual_wakeup_latency_seconds histogram",
        "punctual_wakeup_latency_max_seconds gauge",
        "punctual_missed_periods_total counter",
        "punctual_late_releases_total counter",
        "punctual_steal_seconds_total counter",
        "punctual_build_info gauge",
        "punctual_floor_lost_ratio gauge",
        "process_cpu_seconds_total counter",
    ] {
        let name = family.split(' ').next().unwrap();
        if name == "punctual_steal_seconds_total" && punctual_rt::host::steal_ns().is_none() {
            continue;
        }
        assert!(
            text.contains(&format!("# TYPE {family}\n")),
            "{family}\n{text}"
        );
        assert!(text.contains(&format!("# HELP {name} ")), "{name} has help");
    }
    assert!(!text.contains("# EOF"));
}

/// The fixture with its late releases attributed: CPU 0 offered five, three explained as `task`.
fn attributed() -> prometheus_client::registry::Registry {
    let (board, _, reg) = fixture();
    board.set_attributing(true);
    let late = board.late_counts(0);
    for k in 0..5 {
        late.feed.offer(1, 0, k, k + 50_000);
    }
    late.add(punctual_explain::Cause::Task, 3);
    reg
}

#[test]
fn attributed_late_releases_are_served_by_cause_with_the_pending_ones() {
    let text = String::from_utf8(render(&attributed(), Format::Text).unwrap()).unwrap();
    for cpu in ["0", "1"] {
        for cause in punctual_monitor::metrics::CAUSES {
            let want = if (cpu, cause) == ("0", "task") { 3 } else { 0 };
            let line =
                format!("punctual_late_releases_total{{cpu=\"{cpu}\",cause=\"{cause}\"}} {want}\n");
            assert!(text.contains(&line), "{line} in\n{text}");
        }
    }
    assert!(
        text.contains("punctual_late_releases_pending{cpu=\"0\"} 2.0\n"),
        "{text}"
    );
    assert!(
        text.contains("punctual_late_releases_pending{cpu=\"1\"} 0.0\n"),
        "{text}"
    );
    assert!(text.contains("punctual_late_attribution 1.0\n"), "{text}");
    // Without attribution: one series per CPU, every late release unexplained, from the histogram.
    let (_, _, reg) = fixture();
    let text = String::from_utf8(render(&reg, Format::Text).unwrap()).unwrap();
    assert_eq!(text.matches("punctual_late_releases_total{").count(), 2);
    assert!(text.contains("punctual_late_attribution 0.0\n"), "{text}");
    assert!(!text.contains("pending"));
}

#[test]
fn promtool_accepts_the_text_exposition() {
    let Some(promtool) = punctual_testkit::tool(
        "promtool_accepts_the_text_exposition",
        "promtool",
        "prometheus",
    ) else {
        return;
    };
    let (_, _, reg) = fixture();
    for reg in [reg, attributed()] {
        check_metrics(&promtool, &render(&reg, Format::Text).unwrap());
    }
}

fn check_metrics(promtool: &std::path::Path, text: &[u8]) {
    let mut child = std::process::Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(text).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics:\n{}{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(text)
    );
}
