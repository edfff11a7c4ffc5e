//! The simulated half of `etsion-overhead` (`--sim`) through the lifecycle: Figs. 2 and 3 as a
//! table and two figures, Section 3's direct/indirect split with the published numbers exactly as
//! printed, and the shapes the paper reports coming out of the simulation.

use punctual_experiments::etsion_overhead_sim::{
    sim_tables, EtsionOverheadSim, SimModel, Split, HZ, PROCESSES, RULES,
};
use punctual_experiments::published::etsion_overhead as paper;
use punctual_experiments::{sim_registry, Options};
use punctual_session::{execute, Env, Finished};
use std::sync::OnceLock;

fn run() -> &'static Finished {
    static RUN: OnceLock<Finished> = OnceLock::new();
    RUN.get_or_init(|| {
        let env = Env::fake(&[
            "punctual",
            "experiment",
            "run",
            "etsion-overhead",
            "--sim",
            "--quick",
        ]);
        let mut m = EtsionOverheadSim::new(Options {
            quick: true,
            explain_trace: None,
        });
        execute(&mut m, None, &env).unwrap()
    })
}

/// The added overhead of every configuration, from the document's points.
fn added(rule: usize, processes: usize, hz: u32) -> f64 {
    let points = run().doc.extra["points"].as_array().unwrap();
    points
        .iter()
        .find(|p| p["quanta"] == RULES[rule].0 && p["processes"] == processes && p["hz"] == hz)
        .and_then(|p| p["added_pct"].as_f64())
        .unwrap_or_else(|| panic!("no point {rule} {processes} {hz}"))
}

#[test]
fn the_published_split_is_exact_and_its_arithmetic_holds() {
    assert_eq!(paper::SPLIT_MS_100HZ, 12.675);
    assert_eq!(paper::SPLIT_MS_10000HZ, 13.397);
    assert_eq!(paper::SPLIT_EXTRA_PER_S, 9900);
    assert_eq!(paper::SPLIT_EXTRA_INTERRUPTS, 133);
    assert_eq!(paper::SPLIT_DIRECT_US_EACH, 0.49);
    assert_eq!(paper::SPLIT_DIRECT_US, 65);
    assert_eq!(paper::SPLIT_DIFFERENCE_US, 722);
    assert_eq!(paper::SPLIT_INDIRECT_US, 657);
    assert_eq!(
        (paper::SPLIT_INDIRECT_PCT, paper::SPLIT_DIRECT_PCT),
        (91, 9)
    );
    assert_eq!(paper::SPLIT_SHORT_QUANTA, "higher, up to 99 %");
    assert_eq!(
        (paper::FIG2_1000HZ, paper::FIG2_5000HZ),
        ("negligible", "quite low")
    );
    assert_eq!(paper::FIG3_20000HZ_PCT, 35.0);
    assert_eq!(paper::L2_KIB, 256);
    // The real half prints the same two times.
    assert_eq!(punctual_experiments::published::SORT_MS_100HZ, "12.675");
    assert_eq!(punctual_experiments::published::SORT_MS_10000HZ, "13.397");
    // The simulator's rows are derived the way the paper derived its own.
    let s = Split::derive("paper".into(), 12.675, 13.397, 10_000, 490);
    assert_eq!(s.extra_interrupts.round(), 133.0);
    assert_eq!(s.direct_us.round(), 65.0);
    assert_eq!(s.difference_us.round(), 722.0);
    assert_eq!(s.indirect_us().round(), 657.0);
    assert_eq!(s.indirect_pct().round(), 91.0);
}

#[test]
fn the_tables_show_the_paper_beside_the_simulation() {
    let tables = &run().report.tables;
    assert_eq!(tables.len(), 3);
    let figs = &tables[0];
    assert_eq!(figs.header.len(), 3 + HZ.len() - 1);
    assert_eq!(figs.header[3], "1,000 Hz");
    let lines: Vec<&Vec<String>> = figs.rows.iter().filter(|r| !r.is_empty()).collect();
    assert_eq!(lines.len(), 3 + RULES.len() * PROCESSES.len());
    assert_eq!(lines[0][6], "+5.70 %", "13.397 / 12.675 ms at 10,000 Hz");
    assert_eq!(
        (lines[1][3].as_str(), lines[1][5].as_str()),
        ("negligible", "quite low")
    );
    assert_eq!(lines[6][7], "up to 35 %");
    for (i, line) in lines.iter().filter(|l| l[2] == "simulator").enumerate() {
        assert_eq!(line[0], RULES[i / PROCESSES.len()].0);
        assert_eq!(line[1], PROCESSES[i % PROCESSES.len()].to_string());
        assert!(line[3..].iter().all(|c| c.ends_with(" %")), "{line:?}");
    }

    let split = &tables[1];
    let paper_row = &split.rows[0];
    assert_eq!(
        paper_row[1..],
        [
            "12.675",
            "13.397",
            "9900 x 0.013397 = 133",
            "133 x 0.49 = 65 us",
            "722 us",
            "657 us",
            "91 %",
            "9 %"
        ]
    );
    let sim = &split.rows[1];
    assert_eq!(sim[0], "simulator, 1 process, 50 ms quanta");
    assert_eq!(
        sim[1], "12.675",
        "the unit: one sort at 100 Hz is the paper's"
    );
    assert_ne!(sim[2], "13.397");
    assert_eq!(split.rows.last().unwrap()[7], "higher, up to 99 %");

    let breakdown = &tables[2];
    assert_eq!(breakdown.header[6], "refills");
    assert_eq!(
        breakdown.rows.iter().filter(|r| !r.is_empty()).count(),
        RULES.len() * PROCESSES.len()
    );
}

#[test]
fn fig2_is_small_at_1000_hz_and_grows_linearly() {
    for n in PROCESSES {
        assert!(added(0, n, 1000) < 1.0, "{n}: {}", added(0, n, 1000));
        let (at10k, at20k) = (added(0, n, 10_000), added(0, n, 20_000));
        assert!((2.5..10.0).contains(&at10k), "{n}: {at10k}");
        assert!(
            (1.8..2.4).contains(&(at20k / at10k)),
            "{n}: {at10k} {at20k}"
        );
    }
    // Eight processes: essentially the same as one.
    assert!((added(0, 8, 20_000) - added(0, 1, 20_000)).abs() < 0.5);
}

#[test]
fn fig3_is_much_higher_with_several_sorts_because_of_the_refills() {
    let peak = added(1, 8, 20_000);
    assert!((25.0..45.0).contains(&peak), "{peak}");
    for n in PROCESSES {
        for (rule, _) in RULES.iter().enumerate() {
            let curve: Vec<f64> = HZ[1..].iter().map(|&hz| added(rule, n, hz)).collect();
            assert!(
                curve.windows(2).all(|w| w[0] < w[1]),
                "{rule} {n}: {curve:?}"
            );
        }
        for hz in [10_000, 20_000] {
            let (long, short) = (added(0, n, hz), added(1, n, hz));
            if n == 1 {
                // One process never switches: the rule makes no difference.
                assert!((long - short).abs() < 0.01, "{long} {short}");
            } else {
                assert!(short > long, "{n} @{hz}: {short} <= {long}");
            }
        }
    }
    // Two arrays fit in the L2 together: only the switches' direct cost is added.
    assert!(added(1, 2, 20_000) - added(0, 2, 20_000) < 2.0);
    assert!(added(1, 4, 20_000) - added(0, 4, 20_000) > 10.0);
    // The split of the short quanta is more indirect than the paper's one-process case.
    let m = SimModel::of(Vec::new(), 0);
    assert!(m.splits().is_empty());
    let split = &run().report.tables[1];
    let share = |row: &Vec<String>| row[7].trim_end_matches(" %").parse::<f64>().unwrap();
    assert!(share(&split.rows[3]) > share(&split.rows[1]));
    assert!((85.0..95.0).contains(&share(&split.rows[1])));
    assert!(sim_tables(&m).len() == 3);
}

#[test]
fn the_document_says_it_is_simulated_and_has_both_figures() {
    let r = run();
    let doc = &r.doc;
    assert_eq!(doc.extra["experiment"], "etsion-overhead");
    assert_eq!(doc.settings.extra["clock"], "simulated");
    assert_eq!(doc.settings.extra["quick"], true);
    assert_eq!(doc.settings.extra["footprint_kib"], 128);
    assert_eq!(doc.settings.extra["cache_kib"], 256);
    assert_eq!(doc.settings.extra["refill_mb_s"], 2512);
    assert_eq!(doc.settings.extra["irq_direct_ns"], 490);
    assert_eq!(doc.settings.extra["switch_ns"], 1980);
    let runs = (RULES.len() * PROCESSES.len() * HZ.len()) as u64;
    assert_eq!(doc.extra["simulated_ns"], runs * 5_000_000_000);
    assert_eq!(doc.extra["points"].as_array().unwrap().len() as u64, runs);
    let figs: Vec<&str> = r.report.figures.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(figs, ["etsion-overhead-fig2", "etsion-overhead-fig3"]);
    assert!(r.report.figures.iter().all(|f| f.svg.starts_with("<svg")));
    assert!(sim_registry().iter().any(|e| e.name() == "etsion-overhead"));
}
