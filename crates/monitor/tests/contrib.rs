//! What ships in contrib/ for the monitor: the Grafana dashboard parses and asks only for metrics
//! the monitor exports; the alert rules pass `promtool check rules` and do the same; the systemd
//! units keep their confinement.

use punctual_monitor::expose::{render, Format};
use punctual_monitor::http::ServerStats;
use punctual_monitor::metrics::{registry, Board, HostLabels, Ops};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

fn contrib(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../contrib")
        .join(rel)
}

/// Every series name the monitor exports (histograms with their _bucket, _sum and _count), with
/// every optional family present.
fn exported() -> BTreeSet<String> {
    let board = Arc::new(Board::new(10_000));
    board.measure(&[0], 1_000_000)[0].record(5_000);
    let ops = Arc::new(Ops::default());
    ops.floors.lock().unwrap().insert(0, (1.0, 0.0, 1));
    let reg = registry(
        board,
        ops,
        Arc::new(ServerStats::default()),
        HostLabels(vec![("kernel", "k".into())]),
    );
    let text = String::from_utf8(render(&reg, Format::Text).unwrap()).unwrap();
    let mut names: BTreeSet<String> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_string())
        .collect();
    // A native histogram is queried by its bare name.
    names.insert("punctual_wakeup_latency_seconds".into());
    // Steal comes from /proc/stat, which a test machine may lack.
    names.insert("punctual_steal_seconds_total".into());
    names
}

/// Metric names in a PromQL expression: identifiers that name punctual's or the process's series.
fn metrics_in(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = expr.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b':';
        if ident(b[i]) && (i == 0 || !ident(b[i - 1])) {
            let start = i;
            while i < b.len() && ident(b[i]) {
                i += 1;
            }
            let w = &expr[start..i];
            if (w.starts_with("punctual_") || w.starts_with("process_")) && !w.contains(':') {
                out.push(w.to_string());
            }
        } else {
            i += 1;
        }
    }
    out
}

fn strings_under(v: &serde_json::Value, key: &str, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                match x {
                    serde_json::Value::String(s) if k == key => out.push(s.clone()),
                    _ => strings_under(x, key, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| strings_under(x, key, out)),
        _ => {}
    }
}

#[test]
fn every_dashboard_query_names_an_exported_metric() {
    let text = std::fs::read_to_string(contrib("grafana/punctual.json")).unwrap();
    let dash: serde_json::Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let panels = dash["panels"].as_array().expect("panels");
    assert!(panels.len() >= 6);
    let mut exprs = Vec::new();
    strings_under(&dash, "expr", &mut exprs);
    strings_under(&dash["templating"], "definition", &mut exprs);
    assert!(exprs.len() >= panels.len(), "every panel queries something");
    let names = exported();
    let mut seen = BTreeSet::new();
    for e in &exprs {
        let used = metrics_in(e);
        assert!(!used.is_empty() || e.is_empty(), "no metric in {e}");
        for m in used {
            assert!(
                names.contains(&m),
                "{m} (in {e}) is not exported; exported: {names:?}"
            );
            seen.insert(m);
        }
    }
    // What the issue asks the dashboard to show.
    for needed in [
        "punctual_wakeup_latency_seconds",
        "punctual_wakeup_latency_max_seconds",
        "punctual_missed_periods_total",
        "punctual_steal_seconds_total",
    ] {
        assert!(seen.contains(needed), "the dashboard never shows {needed}");
    }
    let heat = panels
        .iter()
        .find(|p| p["type"] == "heatmap")
        .expect("a heatmap");
    assert!(heat["targets"][0]["expr"]
        .as_str()
        .unwrap()
        .contains("rate(punctual_wakeup_latency_seconds{"));
    for p in panels {
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{}", p["title"]);
    }
}

#[test]
fn the_alert_rules_pass_promtool_and_name_exported_metrics() {
    let path = contrib("prometheus/punctual.rules.yml");
    let text = std::fs::read_to_string(&path).unwrap();
    let names = exported();
    let mut alerts = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if let Some(a) = l.strip_prefix("- alert: ") {
            alerts.push(a.to_string());
        }
        if l.starts_with('#') {
            continue;
        }
        for m in metrics_in(l) {
            assert!(names.contains(&m), "{m} in the rules is not exported");
        }
    }
    for a in [
        "PunctualWakeupLatencyHigh",
        "PunctualMissedPeriods",
        "PunctualStealHigh",
    ] {
        assert!(alerts.iter().any(|x| x == a), "{a} missing: {alerts:?}");
    }
    assert!(text.contains("> 0.01"), "steal above 1 %");
    let Some(promtool) = punctual_testkit::tool(
        "the_alert_rules_pass_promtool_and_name_exported_metrics",
        "promtool",
        "prometheus",
    ) else {
        return;
    };
    let out = std::process::Command::new(promtool)
        .args(["check", "rules"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool check rules: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_units_hold_only_the_two_capabilities_and_the_confinement() {
    for unit in ["punctual-monitor.service", "punctual-check.service"] {
        let text = std::fs::read_to_string(contrib(&format!("systemd/{unit}"))).unwrap();
        let has = |l: &str| text.lines().any(|x| x.trim() == l);
        for l in [
            "CapabilityBoundingSet=CAP_SYS_NICE CAP_IPC_LOCK",
            "AmbientCapabilities=CAP_SYS_NICE CAP_IPC_LOCK",
            "NoNewPrivileges=yes",
            "ProtectSystem=strict",
        ] {
            assert!(has(l), "{unit} lacks {l}");
        }
        assert!(!text.contains("CAP_SYS_ADMIN"));
    }
    let timer = std::fs::read_to_string(contrib("systemd/punctual-check.timer")).unwrap();
    assert!(timer.lines().any(|l| l.trim() == "OnCalendar=daily"));
}
