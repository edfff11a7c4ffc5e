//! `mckenney-choose` through the whole lifecycle in a fake environment, on a canned outcome of the
//! `--quick` structure: its tables with the published numbers exactly as printed, its document,
//! and `punctual advise` deciding with the slowdowns that document carries.

use punctual_advise::{self as advise, Facts, Needs, Verdict, WorkKind};
use punctual_experiments::mckenney_choose::{
    self, ChooseSettings, KernelWork, McKenneyChoose, Outcome, Preempt, Setup, StartCell, WorkRuns,
    KINDS,
};
use punctual_experiments::published::mckenney as paper;
use punctual_session::{execute, Canned, Env, Exit, Finished};
use punctual_stats::Recorder;

/// 2,000 samples from `base` ns over 8 us, and a tail: one sample in 500 is `tail` ns.
fn recorder(base: u64, tail: u64) -> Recorder {
    let mut r = Recorder::new();
    for i in 0..2_000u64 {
        r.record(if i % 500 == 499 {
            tail
        } else {
            base + (i * 37) % 8_000
        });
    }
    r
}

/// What `--quick` measures, with round numbers: real time starts within tens of microseconds,
/// real fast within milliseconds under load; real time runs the build 10 % and the I/O 50 %
/// slower, the arithmetic loop at the same speed.
fn outcome() -> Outcome {
    let mut starts = Vec::new();
    for (loaded, rt_tail, fast_tail) in [(false, 30_000, 900_000), (true, 40_000, 4_000_000)] {
        starts.push(StartCell {
            setup: Setup::RealTime,
            loaded,
            preempt: None,
            rec: recorder(2_000, rt_tail),
        });
        starts.push(StartCell {
            setup: Setup::RealFast,
            loaded,
            preempt: None,
            rec: recorder(60_000, fast_tail),
        });
    }
    let per_run = |k: WorkKind, s: Setup| -> Vec<u64> {
        let (base, slow) = match k {
            WorkKind::Compute => (100_000_000u64, 1.0),
            WorkKind::Kernel => (1_000_000_000, 1.1),
            WorkKind::Io => (200_000_000, 1.5),
        };
        let mean = if s == Setup::RealTime {
            (base as f64 * slow) as u64
        } else {
            base
        };
        vec![mean - 1_000_000, mean, mean + 1_000_000]
    };
    let mut work = Vec::new();
    for k in KINDS {
        for s in Setup::ALL {
            work.push(WorkRuns {
                kind: k,
                setup: s,
                runs_ns: per_run(k, s),
            });
        }
    }
    Outcome {
        cpu: 1,
        preempt: Preempt::NotSwitchable(
            "/sys/kernel/debug/sched/preempt is absent (debugfs is not mounted), and in a private \
             mount of debugfs: Operation not permitted (os error 1)"
                .into(),
        ),
        starts,
        work,
        kernel_work: KernelWork::Build {
            units: ChooseSettings::quick().build_units,
            linked: false,
        },
        io_dir: "/var/tmp".into(),
        fallbacks: Vec::new(),
        notes: Vec::new(),
    }
}

fn finished() -> (Finished, String) {
    let env = Env::fake(&[
        "punctual",
        "experiment",
        "run",
        "mckenney-choose",
        "--quick",
    ]);
    let m = McKenneyChoose::new(punctual_experiments::Options {
        quick: true,
        explain_trace: None,
    });
    let r = execute(&mut Canned::new(m, outcome()), None, &env).unwrap();
    let text = r.report.render();
    (r, text)
}

#[test]
fn quick_tables_hold_this_machine_beside_the_published_numbers() {
    let (r, text) = finished();
    assert_eq!(r.exit, Exit::Ok);
    let t = &r.report.tables;
    assert_eq!(t.len(), 3);
    // Start latency: four cells, a rule, the preemption row saying why the modes stayed.
    assert_eq!(t[0].rows.len(), 4 + 1 + 1);
    assert_eq!(t[0].rows[5][7], "not switchable here");
    assert!(
        punctual_testkit::has_text(&text, "Operation not permitted"),
        "{text}"
    );
    // Table 1: three kinds, a rule, the paper's three rows with its numbers as published.
    let t1 = &t[1];
    assert_eq!(t1.rows.len(), 3 + 1 + 3);
    assert_eq!(
        t1.rows[4][1..4],
        ["1332.6 s", "1556.2 s", "1.168x"].map(String::from)
    );
    assert_eq!(
        t1.rows[5][1..4],
        ["316.6 s", "657.0 s", "2.075x"].map(String::from)
    );
    assert_eq!(
        t1.rows[6][1..4],
        ["828.7 s", "904.1 s", "1.091x"].map(String::from)
    );
    assert_eq!(paper::TABLE1_REAL_S, (1332.6, 1556.2));
    assert_eq!(paper::TABLE1_SYS_S, (316.6, 657.0));
    assert_eq!(paper::SLIDES_REAL_S, (828.7, 904.1));
    assert_eq!(t1.rows[1][3], "1.100x", "the build's measured slowdown");
    // Figs. 5-7: compute never crosses; the build crosses where 40 us + 1.1 w = 4 ms + w.
    let t3 = &t[2];
    assert!(
        t3.rows[0][4].starts_with("none: real time always"),
        "{text}"
    );
    assert!(
        t3.rows[1][4].starts_with("39.6 ms: real time below"),
        "{text}"
    );
    assert!(
        t3.rows[2][4].starts_with("7.92 ms: real time below"),
        "{text}"
    );
    assert_eq!(
        [&t3.rows[0][5], &t3.rows[1][5], &t3.rows[2][5]],
        [
            paper::FIG5_CROSSOVER,
            paper::FIG6_CROSSOVER,
            paper::FIG7_CROSSOVER
        ]
    );
    // The start-latency figure and one per kind of work.
    let names: Vec<&str> = r.report.figures.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "mckenney-choose-start",
            "mckenney-choose-fig5-compute",
            "mckenney-choose-fig6-kernel",
            "mckenney-choose-fig7-io"
        ]
    );
    insta::assert_snapshot!("mckenney_choose_quick_tables", text);
}

#[test]
fn the_document_carries_table_1_slowdowns_and_crossovers() {
    let (r, _) = finished();
    let d = &r.doc;
    assert_eq!(d.series.len(), 4);
    assert_eq!(d.extra["experiment"], mckenney_choose::NAME);
    assert_eq!(d.series[3].extra["configuration"], "real_fast");
    assert_eq!(d.series[3].extra["load"], "cpu");
    let sl = &d.extra["slowdowns"];
    assert_eq!(sl["compute"], 1.0);
    assert!((sl["kernel"].as_f64().unwrap() - 1.1).abs() < 1e-9);
    assert!((sl["io"].as_f64().unwrap() - 1.5).abs() < 1e-9);
    assert_eq!(d.extra["table1"]["io"]["real_fast"]["mean_ns"], 200_000_000);
    assert_eq!(d.extra["table1"]["io"]["real_fast"]["stddev_ns"], 1_000_000);
    assert_eq!(d.extra["crossovers_ns"]["compute"], serde_json::Value::Null);
    assert_eq!(d.extra["preempt"]["switchable"], false);
    // Locked memory and cpu_dma_latency are the real-time rows' own, not the session's.
    assert_eq!(d.settings.mlock, Some(false));
    assert_eq!(d.settings.dma_latency_us, None);
}

fn facts() -> Facts {
    Facts {
        host: punctual_session::Env::fake(&["punctual"]).host(),
        mem_available_bytes: Some(8 << 30),
        real_time: None,
        real_fast: None,
        quantum: None,
        slowdowns: None,
    }
}

#[test]
fn advise_picks_the_measured_slowdowns_of_a_choose_result() {
    let (r, _) = finished();
    let (readings, slowdowns) = advise::choose_reading(&r.doc, "choose.json").unwrap();
    assert!(advise::is_choose(&r.doc));
    assert_eq!(readings.len(), 4);
    assert_eq!(slowdowns.of(WorkKind::Io), Some(1.5));
    let mut f = facts();
    readings.into_iter().for_each(|x| f.add(x));
    f.slowdowns = Some(slowdowns);
    // The loaded cells decide: their p99.9 is the tail.
    assert_eq!(f.real_time.as_ref().unwrap().p99_9_ns, 40_000);
    assert_eq!(f.real_fast.as_ref().unwrap().p99_9_ns, 4_000_000);
    let needs = Needs {
        deadline_ns: Some(20_000_000),
        work_ns: Some(10_000_000),
        kind: Some(WorkKind::Io),
        ..Needs::default()
    };
    let a = advise::advise(&needs, &f);
    let step = a
        .steps
        .iter()
        .find(|s| s.question == "Does real time slow this work down?")
        .unwrap();
    assert!(
        step.fact
            .contains("io work x1.500, measured here by mckenney-choose (choose.json)"),
        "{}",
        step.fact
    );
    let rt = a
        .steps
        .iter()
        .find(|s| s.question == "Does real time meet the deadline here?")
        .unwrap();
    assert!(rt.fact.contains("work 15.0 ms"), "{}", rt.fact);
    // Both meet 20 ms (15.04 ms and 14 ms at p99.9): real fast, which keeps the throughput; the
    // curves cross where 40 us + 1.5 w = 4 ms + w, as the experiment's table says.
    assert_eq!(a.verdict, Verdict::RealFast, "{a:#?}");
    assert_eq!(a.crossover_ns, Some(7_920_000));
    assert_eq!(r.doc.extra["crossovers_ns"]["io"], 7_920_000);

    // Without the result: this kernel is not PREEMPT_RT, so no slowdown, and the step says so.
    let mut f = facts();
    f.real_time = Some(advise::Measured {
        source: "check".into(),
        p99_9_ns: 40_000,
        max_ns: 50_000,
        cpu: Some(1),
        steal: None,
        partial: None,
    });
    let a = advise::advise(&needs, &f);
    let step = a
        .steps
        .iter()
        .find(|s| s.question == "Does real time slow this work down?")
        .unwrap();
    assert!(step.fact.starts_with("not measured"), "{}", step.fact);
    // On a PREEMPT_RT kernel the paper's Table 1 stands in, and says so.
    f.host.realtime = true;
    let a = advise::advise(&needs, &f);
    let step = a
        .steps
        .iter()
        .find(|s| s.question == "Does real time slow this work down?")
        .unwrap();
    assert!(step.fact.contains("x2.075, published"), "{}", step.fact);
}

#[test]
fn a_result_without_slowdowns_is_refused_by_name() {
    let (mut r, _) = finished();
    r.doc.extra.remove("slowdowns");
    let e = advise::choose_reading(&r.doc, "old.json").err().unwrap();
    assert!(
        e.contains("old.json: a mckenney-choose result without"),
        "{e}"
    );
}
