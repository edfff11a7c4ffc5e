//! The simulated half of `etsion-latency` (`--sim`) through the lifecycle: Table 6 with the
//! published numbers exactly as printed, a document that says its clock is simulated, Fig. 7, and
//! the same tables and series on every run.

use punctual_experiments::etsion_latency::{EtsionLatencySim, LATENCY_CONFIGS};
use punctual_experiments::published::TABLE6;
use punctual_experiments::Options;
use punctual_session::{execute, Env, Finished};

fn run() -> Finished {
    let env = Env::fake(&[
        "punctual",
        "experiment",
        "run",
        "etsion-latency",
        "--sim",
        "--quick",
    ]);
    let mut m = EtsionLatencySim::new(Options {
        quick: true,
        explain_trace: None,
    });
    execute(&mut m, None, &env).unwrap()
}

/// Microseconds as printed (`50,003`) back to a number.
fn number(cell: &str) -> u64 {
    cell.replace(',', "").parse().unwrap()
}

#[test]
fn simulated_table6_shows_the_published_numbers_beside_the_simulation() {
    let r = run();
    assert_eq!(r.report.tables.len(), 2);
    let t = &r.report.tables[0];
    assert_eq!(t.header.len(), 11);
    // A line per configuration, a rule between Table 6 rows.
    let lines: Vec<&Vec<String>> = t.rows.iter().filter(|r| !r.is_empty()).collect();
    assert_eq!(lines.len(), TABLE6.len() * LATENCY_CONFIGS.len());
    assert_eq!(t.rows.len(), lines.len() + TABLE6.len() - 1);
    for (i, p) in TABLE6.iter().enumerate() {
        let (a, b) = (lines[2 * i], lines[2 * i + 1]);
        assert_eq!((a[0].as_str(), a[1].as_str()), (p.ty, p.number));
        assert_eq!(a[2], "100 Hz, 60.0ms");
        assert_eq!(b[2], "20000 Hz, 100us");
        assert_eq!(a[7..11], p.hz100.map(String::from));
        assert_eq!(b[7..11], p.hz20000.map(String::from));
    }
    // CONT 8 at 100 Hz waits for up to 7 quanta of 60 ms; at 20,000 Hz for 7 quanta of 100 us.
    let cont8 = TABLE6
        .iter()
        .position(|p| (p.ty, p.number) == ("CONT", "8"))
        .unwrap();
    let (slow, fast) = (lines[2 * cont8], lines[2 * cont8 + 1]);
    assert!(number(&slow[6]) > 100_000, "{slow:?}");
    assert!(number(&slow[6]) <= 7 * 60_000 + 1_000, "{slow:?}");
    assert!(number(&fast[6]) < 1_000, "{fast:?}");
    // Fig. 7's reading: the published shares within a tick beside the simulated ones, which
    // fall as the processes grow (each waits behind more quanta).
    let f7 = &r.report.tables[1];
    let shares: Vec<f64> = f7.rows.iter().map(|r| r[1].parse().unwrap()).collect();
    assert_eq!(
        f7.rows.iter().map(|r| r[2].as_str()).collect::<Vec<_>>(),
        ["0.53", "0.30", "0.16"]
    );
    assert!(shares.windows(2).all(|w| w[0] > w[1]), "{shares:?}");
}

#[test]
fn simulated_document_says_so_and_repeats_exactly() {
    let r = run();
    let doc = &r.doc;
    assert_eq!(doc.extra["experiment"], "etsion-latency");
    assert_eq!(doc.settings.extra["clock"], "simulated");
    assert_eq!(doc.settings.extra["quick"], true);
    assert_eq!(doc.settings.extra["duration_ns"], 50_000_000_000u64);
    // The environment's clock: experiments keep real timestamps (the store sorts by them).
    assert_eq!(doc.started_at, "2026-01-01T00:00:00Z");
    let simulated = doc.extra["simulated_ns"].as_u64().unwrap();
    // 20 Table 6 runs and 8 Fig. 7 runs of 50 s each.
    assert_eq!(simulated, 28 * 50_000_000_000);
    assert!(doc.extra["events"].as_u64().unwrap() > 0);
    assert_eq!(doc.series.len(), 20);
    let cont2 = &doc.series[4];
    assert_eq!(cont2.name, "CONT 2 @100Hz");
    assert_eq!(cont2.extra["quantum_ns"], 60_000_000u64);
    assert_eq!(cont2.extra["published_us"]["max"], 160_006);
    assert_eq!(doc.series[5].extra["quantum_ns"], 100_000u64);
    assert_eq!(doc.series[5].extra["published_us"]["0.99"], 18_468);
    let figs: Vec<&str> = r.report.figures.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(figs, ["etsion-latency-fig7"]);
    assert!(r.report.figures[0].svg.starts_with("<svg"));
    // Deterministic: the same tables and series again.
    let again = run();
    assert_eq!(again.report.render(), r.report.render());
    assert_eq!(
        serde_json::to_string(&again.doc.series).unwrap(),
        serde_json::to_string(&doc.series).unwrap()
    );
}
