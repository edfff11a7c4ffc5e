//! `etsion-frames`, `etsion-billing` (both halves) and `kurt-irq` driven through the lifecycle as
//! `punctual experiment run` drives them: the seed's tables with the published numbers exactly as
//! printed, a document that validates against the schema, and figures. (`kurt-irq` needs the
//! punctual executable for its io load: it runs through the binary, in crates/punctual/tests.)

use punctual_experiments::etsion_billing::{self, EtsionBilling, EtsionBillingSim};
use punctual_experiments::etsion_frames::EtsionFrames;
use punctual_experiments::published::etsion_billing::TABLE3;
use punctual_experiments::published::etsion_frames::{
    FIFTY_AT_50HZ, FIG1_60FPS, FIG1_OTHER, FIG5_WINDOWS,
};
use punctual_experiments::{registry, sim_registry, Options};
use punctual_result::{ResultDoc, Table};
use punctual_session::{execute, Env, Exit, Finished, Measurement};

const QUICK: Options = Options {
    quick: true,
    explain_trace: None,
};

fn run<M: Measurement>(mut m: M) -> Finished {
    let env = Env::real().capture();
    execute(&mut m, None, &env).expect("the experiment runs")
}

fn check_doc(doc: &ResultDoc, name: &str) {
    let schema: serde_json::Value = serde_json::from_str(punctual_result::SCHEMA_JSON).unwrap();
    let v = jsonschema::validator_for(&schema).unwrap();
    let json = serde_json::to_value(doc).unwrap();
    let errors: Vec<String> = v
        .iter_errors(&json)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    assert_eq!(doc.extra["experiment"], name);
    assert_eq!(doc.settings.extra["quick"], true);
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

use punctual_testkit::tracing as tracing_available;

#[test]
fn registries_hold_the_traced_and_simulated_experiments_as_before() {
    let find = |reg: &[Box<dyn punctual_experiments::Experiment>], name: &str| {
        reg.iter()
            .find(|e| e.name() == name)
            .map(|e| (e.reproduces(), e.duration()))
    };
    let reg = registry();
    let (r, d) = find(&reg, "etsion-frames").expect("etsion-frames");
    assert!(r.starts_with("Etsion 2003 Sec. 5, Figs. 1, 5"), "{r}");
    assert_eq!(d, "a few seconds; --quick about 1 s (simulation)");
    let (r, d) = find(&reg, "etsion-billing").expect("etsion-billing");
    assert!(r.contains("traced alone"), "{r}");
    assert_eq!(
        d,
        "about 45 s (5 runs of 8 s); --quick about 15 s (2 s each)"
    );
    let (r, d) = find(&reg, "kurt-irq").expect("kurt-irq");
    assert!(r.starts_with("KURT thesis Table 4.3"), "{r}");
    assert_eq!(d, "36 s (--quick: 12 s)");
    let sim = sim_registry();
    let (r, d) = find(&sim, "etsion-billing").expect("etsion-billing --sim");
    assert!(r.starts_with("Etsion 2003 Tables 3-4"), "{r}");
    assert_eq!(d, "under a second (simulation)");
    assert!(find(&sim, "etsion-frames").is_none() && find(&sim, "kurt-irq").is_none());
}

/// Etsion et al. 2003, Tables 3 and 4, as transcribed.
#[test]
fn etsion_table3_and_4_are_the_published_numbers() {
    let rows: Vec<_> = TABLE3
        .iter()
        .map(|r| (r.app, r.billing, r.missed_pct, r.quanta_per_s))
        .collect();
    assert_eq!(
        rows,
        vec![
            (
                "Emacs",
                [1.0746, 0.9468],
                [95.96, 73.42],
                Some([22.36, 34.60])
            ),
            (
                "Xine",
                [1.2750, 1.0249],
                [89.46, 74.81],
                Some([470.67, 695.94])
            ),
            (
                "Quake",
                [1.0310, 1.0337],
                [54.17, 23.23],
                Some([187.88, 273.85])
            ),
            (
                "X Server (w/ Xine)",
                [0.0202, 0.9319],
                [99.43, 64.05],
                Some([71.35, 148.21])
            ),
            (
                "CPU-bound",
                [1.0071, 1.0043],
                [7.86, 7.83],
                Some([28.81, 38.97])
            ),
            ("CPU+Quake", [1.0333, 1.0390], [26.71, 2.36], None),
        ]
    );
    let x = punctual_experiments::published::etsion_billing::row("X Server").unwrap();
    assert_eq!(x.app, "X Server (w/ Xine)");
    assert!(punctual_experiments::published::etsion_billing::row("Netscape").is_none());
}

/// The simulator's Table 3/4 figures as the traced `etsion-billing` shows them beside its own.
#[test]
fn simulated_billing_knows_the_papers_applications_and_only_those() {
    use etsion_billing::simulated_billing;
    let x100 = simulated_billing("X Server", 100, 20, None)
        .unwrap()
        .expect("X Server is one of the paper's");
    let x1000 = simulated_billing("X Server (w/ Xine)", 1000, 20, None)
        .unwrap()
        .unwrap();
    // The X server whose work falls between ticks is billed almost nothing at 100 Hz, most at 1000 Hz.
    assert!(x100.ratio < 0.1 && x1000.ratio > 0.8, "{x100:?} {x1000:?}");
    assert_eq!(
        simulated_billing("X Server", 100, 20, None).unwrap(),
        Some(x100),
        "deterministic"
    );
    assert_eq!(simulated_billing("Netscape", 100, 20, None).unwrap(), None);
}

#[test]
fn etsion_billing_sim_prints_tables_3_and_4_beside_the_paper() {
    let done = run(EtsionBillingSim::new(QUICK));
    assert_eq!(done.exit, Exit::Ok);
    let r = &done.report;
    assert_eq!(r.tables.len(), 3);
    let (t3, t4, t5) = (&r.tables[0], &r.tables[1], &r.tables[2]);
    assert_eq!(
        t3.header,
        strings(&[
            "application",
            "billing @100Hz",
            "Etsion",
            "@1000Hz",
            "Etsion",
            "missed @100Hz",
            "Etsion",
            "@1000Hz",
            "Etsion"
        ])
    );
    assert_eq!(t3.rows.len(), 6);
    for (row, p) in t3.rows.iter().zip(&TABLE3) {
        assert_eq!(row[0], p.app);
        assert_eq!(row[2], format!("{:.4}", p.billing[0]));
        assert_eq!(row[4], format!("{:.4}", p.billing[1]));
        assert_eq!(row[6], format!("{:.2} %", p.missed_pct[0]));
        assert_eq!(row[8], format!("{:.2} %", p.missed_pct[1]));
    }
    assert_eq!(t3.rows[3][2], "0.0202");
    assert_eq!(t3.rows[5][6], "26.71 %");
    // The simulated X server is billed almost nothing at 100 Hz and most at 1000 Hz.
    let x: f64 = t3.rows[3][1].parse().unwrap();
    let x1000: f64 = t3.rows[3][3].parse().unwrap();
    assert!(x < 0.1 && x1000 > 0.8, "{:?}", t3.rows[3]);
    // Table 4 has no CPU+Quake row.
    assert_eq!(t4.rows.len(), 5);
    assert_eq!(
        (t4.rows[1][2].as_str(), t4.rows[1][4].as_str()),
        ("470.67", "695.94")
    );
    assert!(t4.rows.iter().all(|row| row[0] != "CPU+Quake"));
    // Table 5: the published column exact, the simulated one a split of all the time.
    let published: Vec<[&str; 3]> = t5
        .rows
        .iter()
        .map(|row| [row[0].as_str(), row[2].as_str(), row[4].as_str()])
        .collect();
    assert_eq!(
        published,
        [
            ["Xine", "39.42 %", "40.42 %"],
            ["X Server", "20.10 %", "20.79 %"],
            ["idle loop", "31.46 %", "31.58 %"],
            ["other", "9.02 %", "7.21 %"],
        ]
    );
    for col in [1, 3] {
        let got: Vec<f64> = t5
            .rows
            .iter()
            .map(|row| row[col].trim_end_matches(" %").parse().unwrap())
            .collect();
        let sum: f64 = got.iter().sum();
        assert!((sum - 100.0).abs() < 0.05, "column {col} sums to {sum}");
        assert!(got[..3].iter().all(|&p| p > 1.0), "{got:?}");
    }
    check_doc(&done.doc, "etsion-billing");
    // Both rates of every application that ran quanta.
    assert_eq!(done.doc.series.len(), 12);
    assert_eq!(done.doc.settings.extra["clock"], "simulated");
    assert_eq!(done.doc.settings.extra["duration_ns"], 20_000_000_000u64);
    let names: Vec<&str> = r.figures.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["etsion-billing-fig4", "etsion-billing-fig6"]);
    assert!(r.figures.iter().all(|f| f.svg.starts_with("<svg")));
}

#[test]
fn simulated_halves_give_the_same_numbers_twice_with_real_timestamps() {
    let a = run(EtsionBillingSim::new(QUICK));
    let b = run(EtsionBillingSim::new(QUICK));
    assert_eq!(
        serde_json::to_value(&a.doc.series).unwrap(),
        serde_json::to_value(&b.doc.series).unwrap()
    );
    assert_eq!(a.doc.extra["simulated_ns"], b.doc.extra["simulated_ns"]);
    assert_eq!(a.doc.extra["simulated_ns"], 12 * 20_000_000_000u64);
    // The results store sorts experiments by when they ran.
    assert!(
        !a.doc.started_at.starts_with("1970"),
        "{}",
        a.doc.started_at
    );
    assert!(a.doc.ended_at >= a.doc.started_at);
}

#[test]
fn etsion_frames_prints_figs_5_and_1_beside_etsion() {
    let done = run(EtsionFrames::new(QUICK));
    assert_eq!(done.exit, Exit::Ok);
    let r = &done.report;
    assert_eq!(r.tables.len(), 3);
    let (t5, t50, t1) = (&r.tables[0], &r.tables[1], &r.tables[2]);
    // Etsion Section 5: three windows skip a frame, three between them skip none.
    assert_eq!(t5.rows.len(), 6);
    let skipping: Vec<(&str, &str)> = t5
        .rows
        .iter()
        .filter(|row| row[2] != "none")
        .map(|row| (row[2].as_str(), row[4].as_str()))
        .collect();
    assert_eq!(
        skipping,
        [
            ("frame 3 of 3", "frame 3 (1.67-3.33 ms)"),
            ("frame 2 of 3", "frame 2 (5.00-6.67 ms)"),
            ("frame 1 of 3", "frame 1 (8.33-10.00 ms)"),
        ]
    );
    assert!(t5
        .rows
        .iter()
        .all(|row| row[3] == if row[2] == "none" { "60.0" } else { "40.0" }));
    assert!(t5.notes[0].starts_with("50 % of start shifts"));
    assert_eq!(
        t50.rows,
        vec![strings(&["30", "15", "15", "0", FIFTY_AT_50HZ])]
    );
    let desired: Vec<&str> = t1.rows.iter().map(|row| row[0].as_str()).collect();
    assert_eq!(desired, ["20", "30", "50", "60", "80"]);
    assert_eq!(
        t1.rows[3],
        strings(&["60", "50.0", "40.0", "60.0", "60.0", FIG1_60FPS])
    );
    assert_eq!(t1.rows[0][5], FIG1_OTHER);
    check_doc(&done.doc, "etsion-frames");
    // Every start shift of the two Fig. 5 studies.
    assert_eq!(done.doc.series.len(), 60);
    assert_eq!(done.doc.extra["fig1"].as_array().unwrap().len(), 5);
    assert_eq!(done.doc.settings.extra["frames"], 120);
    let names: Vec<&str> = r.figures.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["etsion-frames-fig1", "etsion-frames-fig5"]);
}

#[test]
fn etsion_frames_windows_are_fig5s() {
    assert_eq!(
        FIG5_WINDOWS,
        [
            (25.0 / 3.0, 10.0, 1),
            (5.0, 20.0 / 3.0, 2),
            (5.0 / 3.0, 10.0 / 3.0, 3)
        ]
    );
}

/// The rows of a table between rules: one block per application.
fn blocks(t: &Table) -> Vec<&[Vec<String>]> {
    t.rows.split(|r| r.is_empty()).collect()
}

#[test]
fn etsion_billing_traces_the_mix_and_prints_paper_simulator_and_trace() {
    if !tracing_available("etsion_billing_traces_the_mix_and_prints_paper_simulator_and_trace") {
        return;
    }
    // Timing of real threads on the last CPU: no other test's shield or spinner there.
    let _cpu = punctual_testkit::exclusive_cpu();
    let mut m = EtsionBilling::new(QUICK);
    m.secs = 1;
    let done = run(m);
    assert_eq!(done.exit, Exit::Ok);
    let r = &done.report;
    assert_eq!(r.tables.len(), 3);
    let (t3, phases, t4) = (&r.tables[0], &r.tables[1], &r.tables[2]);
    // The paper's rows in the paper's order; Table 4 has no CPU+Quake row.
    let apps: Vec<&str> = etsion_billing::traced_apps()
        .iter()
        .map(|(_, a)| a.app)
        .collect();
    let order: Vec<&str> = apps.iter().map(|a| etsion_billing_row(a).app).collect();
    assert_eq!(order, TABLE3.iter().map(|r| r.app).collect::<Vec<_>>());
    assert_eq!(blocks(t3).len(), 6);
    assert_eq!(blocks(t4).len(), 5);
    for (block, app) in blocks(t3).iter().zip(&apps) {
        assert!(block[0][0].ends_with(&format!("({app})")), "{:?}", block[0]);
    }
    let sim = run(EtsionBillingSim::new(QUICK)).report;
    for ((block, app), table4) in blocks(t3).iter().zip(apps).zip(blocks(t4)) {
        let p = etsion_billing_row(app);
        assert!(block[0][0].ends_with(&format!("({app})")), "{:?}", block[0]);
        assert_eq!(
            block[0][1..],
            strings(&[
                "paper",
                &format!("{:.4}", p.billing[0]),
                &format!("{:.4}", p.billing[1]),
                &format!("{:.2}%", p.missed_pct[0]),
                &format!("{:.2}%", p.missed_pct[1]),
            ])
        );
        // The simulator's row is exactly what `--sim` prints for the application.
        let srow = sim.tables[0].rows.iter().find(|r| r[0] == p.app).unwrap();
        assert_eq!(block[1][1], "simulator");
        assert_eq!((&block[1][2], &block[1][3]), (&srow[1], &srow[3]));
        assert_eq!(block[1][4], srow[5].replace(' ', ""));
        assert_eq!(block[2][1], "traced here");
        let q = p.quanta_per_s.unwrap();
        assert_eq!(
            table4[0][1..4],
            strings(&["paper", &format!("{:.2}", q[0]), &format!("{:.2}", q[1])])
        );
        // One tickless kernel: one figure for both rates.
        assert_eq!(table4[2][2], table4[2][3]);
    }
    assert_eq!(phases.rows.len(), 6);
    check_doc(&done.doc, "etsion-billing");
    assert_eq!(done.doc.series.len(), 6);
    // Each application ran alone: the editor's run holds no CPU-bound thread, and the CPU-bound
    // task beside the game loop got less of its CPU than alone.
    let cpu_of = |label: &str| {
        let s = done.doc.series.iter().find(|s| s.name == label).unwrap();
        s.extra["cpu_ns"].as_u64().unwrap()
    };
    // Only when neither run shared its CPU with other work (the experiment says so in
    // `cpu_sharing`): a build on the same CPU decides both figures (a loaded suite run once gave
    // the task beside the game loop more CPU than the one alone).
    let shared = |run: &str| {
        let all = done.doc.extra["cpu_sharing"].as_array().unwrap();
        let s = all.iter().find(|s| s["run"] == run).unwrap();
        s["shared"].as_bool().unwrap()
    };
    if !shared("a CPU-bound task") && !shared("a CPU-bound task beside a game loop") {
        assert!(cpu_of("CPU-bound (w/ game loop)") < cpu_of("CPU-bound"));
    }
    assert!(done.doc.extra["events"].as_u64().unwrap() > 0);
    // A measurement of this machine records the hypervisor's share of every CPU, holding
    // nothing real-time.
    assert_eq!(
        done.doc.settings.extra.contains_key("steal_ns"),
        punctual_rt::host::StealMeter::start().is_some()
    );
    assert_eq!(done.doc.settings.policy.as_deref(), Some("other"));
    // No thread of it takes the plan's timer slack, so the document does not claim it.
    assert!(!done.doc.settings.extra.contains_key("timer_slack_ns"));
}

fn etsion_billing_row(
    app: &str,
) -> &'static punctual_experiments::published::etsion_billing::Table3Row {
    punctual_experiments::published::etsion_billing::row(app).unwrap()
}

/// KURT Figs. 3.1 and 3.3 from two short traces: the timer interrupt's time and the expiries'
/// lateness, the thesis' readings beside.
#[test]
fn kurt_utime_traces_the_timer_interrupt_and_its_expiries() {
    if !tracing_available("kurt_utime_traces_the_timer_interrupt_and_its_expiries") {
        return;
    }
    // Timing of real threads on the last CPU: no other test's shield or spinner there.
    let _cpu = punctual_testkit::exclusive_cpu();
    let mut m = punctual_experiments::kurt_utime::KurtUtime::new(QUICK);
    m.secs = 1;
    let done = run(m);
    assert_eq!(done.exit, Exit::Ok);
    let t = &done.report.tables;
    assert_eq!(t.len(), 3);
    assert_eq!(t[0].rows[0][0], "thesis: standard Linux (no UTIME)");
    // Fig. 3.2's loop ran for real: its row has loops counted.
    let here = t[1].rows.last().unwrap();
    assert_eq!(here[0], "here: this kernel (hrtimers)");
    assert!(
        here[1].replace(',', "").parse::<u64>().unwrap() > 10,
        "{here:?}"
    );
    // Both cases traced; the one with 100 us sleeps measured their expiries.
    let here: Vec<&Vec<String>> = t[2]
        .rows
        .iter()
        .filter(|r| r.first().is_some_and(|c| c.starts_with("here:")))
        .collect();
    assert_eq!(here.len(), 2);
    assert_eq!(here[1][0], "here: events every 100 us");
    let n: u64 = here[1][1]
        .replace(',', "")
        .parse()
        .expect("expiries measured");
    assert!(n > 1_000, "a 100 us sleeper for 1 s: {n} expiries");
    check_doc(&done.doc, "kurt-utime");
    assert_eq!(done.doc.series.len(), 5);
}
