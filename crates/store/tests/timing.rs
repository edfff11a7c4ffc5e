//! How long the store takes (docs/benchmarks.md, "Results store"): run with
//! `cargo test -p punctual-store --test timing -- --ignored --nocapture`. Prints figures; asserts
//! only what the store must do (every result listed), never a speed.

mod common;

use punctual_store::{Filter, Store};
use std::time::{Duration, Instant};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[test]
#[ignore = "a measurement: run with --ignored --nocapture"]
fn time_to_store_one_document_and_list_ten_thousand() {
    let dir = tempfile::tempdir().unwrap();
    // PUNCTUAL_STORE_TIMING_DIR keeps the database, to time `punctual results list` on it.
    let kept = std::env::var_os("PUNCTUAL_STORE_TIMING_DIR").map(std::path::PathBuf::from);
    let dir_path = kept.clone().unwrap_or_else(|| dir.path().to_path_buf());
    let store = Store::open_in(&dir_path).unwrap();
    // A latency run's document: four threads and their total, each with its histogram.
    let doc = common::doc(
        &["punctual", "latency", "-t", "4", "-D", "60s"],
        "box",
        "2026-11-01T00:00:00Z",
        &[3_000, 4_000, 5_000, 6_000, 3_000],
    );
    let json_len = doc.to_json().len();
    let figure = vec![("fig.svg".to_string(), vec![b'x'; 20_000])];
    let tags = vec![("kernel".to_string(), "rt".to_string())];
    let n = 10_000;
    let mut puts = Vec::with_capacity(n);
    for i in 0..n {
        let mut d = doc.clone();
        d.started_at = format!(
            "2026-11-01T{:02}:{:02}:{:02}Z",
            i / 3600 % 24,
            i / 60 % 60,
            i % 60
        );
        let figs: &[(String, Vec<u8>)] = if i % 10 == 0 { &figure } else { &[] };
        let t = Instant::now();
        store.put(&d, figs, &tags).unwrap();
        puts.push(t.elapsed());
    }
    let mut lists = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let all = store.list(&Filter::default()).unwrap();
        lists.push(t.elapsed());
        assert_eq!(all.len(), n);
    }
    let mut filtered = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let some = store
            .list(&Filter {
                tags: vec![("kernel".into(), "rt".into())],
                last: Some(20),
                ..Default::default()
            })
            .unwrap();
        filtered.push(t.elapsed());
        assert_eq!(some.len(), 20);
    }
    let t = Instant::now();
    let latest = store.resolve("latest").unwrap();
    let resolve = t.elapsed();
    assert!(latest.id.is_some());
    let size = std::fs::metadata(dir.path().join("results.db"))
        .unwrap()
        .len()
        + std::fs::metadata(dir.path().join("results.db-wal")).map_or(0, |m| m.len());
    println!("document: {json_len} bytes of JSON (5 series with histograms); every 10th with a 20 kB figure");
    println!("store one document: median {:?}, p99 {:?} (each put is one transaction, WAL, synchronous=NORMAL)",
        median(puts.clone()), { let mut p = puts.clone(); p.sort(); p[p.len() * 99 / 100] });
    println!("list {n} results: median {:?} over 5", median(lists));
    println!(
        "list --tag kernel=rt --last 20 of {n}: median {:?} over 5",
        median(filtered)
    );
    println!("resolve latest (document, figures, tags): {resolve:?}");
    println!("database: {:.1} MB for {n} results", size as f64 / 1e6);
}
