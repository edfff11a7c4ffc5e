//! `punctual compare` through the real binary: exit codes for CI gates, bad input. The report in
//! a browser is `report_browser.rs`.

mod common;

use common::punctual;
use punctual_result::{doc::kind, ResultDoc, Series};
use punctual_stats::Recorder;
use std::path::Path;

fn doc(threads: &[usize], tail: f64) -> ResultDoc {
    let mut d = ResultDoc::new(
        vec!["punctual".into(), "latency".into()],
        punctual_session::Env::fake(&[]).host(),
        "2026-01-01T00:00:00Z".into(),
    );
    for &t in threads {
        let mut r = Recorder::new();
        for i in 0..50_000u64 {
            r.record(if i % 50 == 0 {
                ((20_000 + (i * 104_729) % 30_000) as f64 * tail) as u64
            } else {
                3_000 + (i * 7919) % 4_000
            });
        }
        d.series.push(Series::from_recorder(
            format!("thread {t}"),
            kind::WAKEUP_LATENCY,
            Some(t),
            &r,
        ));
    }
    d
}

fn write(dir: &Path, name: &str, d: &ResultDoc) -> String {
    let p = dir.join(name);
    std::fs::write(&p, d.to_json()).unwrap();
    p.to_string_lossy().into_owned()
}

#[test]
fn compare_fail_on_regression_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.json", &doc(&[0, 1], 1.0));
    let b = write(dir.path(), "b.json", &doc(&[0, 1], 1.3));
    punctual()
        .args(["compare", &a, &b, "--fail-on-regression", "10"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("regression: thread 0"));
    punctual()
        .args(["compare", &a, &b, "--fail-on-regression", "50"])
        .assert()
        .code(0);
    punctual()
        .args(["compare", &a, &a, "--fail-on-regression"])
        .assert()
        .code(0)
        .stdout(predicates::str::contains("no significant change"));
    // Bad input is exit 2, with the reason.
    // A stored id with no store: exit 2, saying there is none (and creating none).
    punctual()
        .args(["compare", &a, "latest~1"])
        .env("PUNCTUAL_STORE", dir.path().join("none.db"))
        .assert()
        .code(2)
        .stderr(predicates::str::contains("there is no results store at"));
    assert!(!dir.path().join("none.db").exists());
    punctual()
        .args(["compare", &a, &b, "--percentile", "101"])
        .assert()
        .code(2);
}
