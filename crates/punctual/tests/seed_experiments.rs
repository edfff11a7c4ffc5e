//! The seeds' measurement experiments produce their tables in the seed's layout with the published
//! numbers exactly as printed, a result document that validates against the schema, and a figure;
//! system settings they change (the RR timeslice) are back afterwards. The runs here go through the
//! lifecycle (`punctual_session::execute`) with smaller settings than --quick (the structure is the
//! same); `zeadally-dispatch --quick` runs through the binary.

use punctual_experiments::etsion_latency::{EtsionLatency, LatencySettings};
use punctual_experiments::etsion_overhead::{EtsionOverhead, OverheadSettings};
use punctual_experiments::mckenney_choose::{ChooseSettings, McKenneyChoose};
use punctual_experiments::mckenney_nanosleep::{McKenneyNanosleep, NanosleepSettings};
use punctual_experiments::published::{self, TABLE6};
use punctual_experiments::zeadally_dispatch::{DispatchSettings, ZeadallyDispatch};
use punctual_latency::alarms::Mechanism;
use punctual_result::Table;
use punctual_session::{execute, Env, Finished, Measurement};
use std::sync::Mutex;

/// The experiments pin busy real-time processes and change the RR timeslice: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// This machine, with this build's binary for the loads and the experiment's command line.
fn env(name: &str) -> Env {
    let mut env = Env::real().capture();
    env.exe = env!("CARGO_BIN_EXE_punctual").into();
    env.command = ["punctual", "experiment", "run", name, "--quick"]
        .map(String::from)
        .to_vec();
    env
}

fn run<M: Measurement>(mut m: M, name: &str) -> Finished {
    execute(&mut m, None, &env(name)).unwrap()
}

fn root(test: &str) -> bool {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        punctual_testkit::skip(
            test,
            "needs root to set /proc/sys/kernel/sched_rr_timeslice_ms",
        );
        return false;
    }
    true
}

fn timeslice() -> String {
    std::fs::read_to_string("/proc/sys/kernel/sched_rr_timeslice_ms").unwrap()
}

fn check_doc(r: &Finished, series: usize) {
    assert_eq!(r.doc.series.len(), series);
    let schema: serde_json::Value = serde_json::from_str(punctual_result::SCHEMA_JSON).unwrap();
    let v = jsonschema::validator_for(&schema).unwrap();
    let doc = serde_json::to_value(&r.doc).unwrap();
    let errors: Vec<String> = v
        .iter_errors(&doc)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    assert!(!r.report.figures.is_empty());
    for f in &r.report.figures {
        assert!(f.svg.starts_with("<svg"), "{} is not SVG", f.name);
    }
}

/// The rows before the first rule (the published block).
fn published_rows(t: &Table) -> Vec<Vec<String>> {
    t.rows
        .iter()
        .take_while(|r| !r.is_empty())
        .cloned()
        .collect()
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn etsion_latency_prints_table6_beside_this_machine() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !root("etsion_latency_prints_table6_beside_this_machine") {
        return;
    }
    let before = timeslice();
    let e = EtsionLatency {
        quick: true,
        settings: LatencySettings {
            alarms: 2,
            delay_min: 200_000,
            delay_max: 2_000_000,
            long_ms: Some(20),
            short_ms: 1,
            mechanisms: vec![Mechanism::Signal, Mechanism::Nanosleep],
        },
        cpu: punctual_rt::affinity::last_online_cpu(),
    };
    let r = run(e, "etsion-latency");
    assert_eq!(timeslice(), before, "the RR timeslice is restored");
    let tables = &r.report.tables;
    assert_eq!(tables.len(), 3);
    for (ti, t) in tables.iter().enumerate() {
        assert_eq!(
            t.header,
            strings(&[
                "Type", "Number", "0.9", "0.95", "0.99", "max", "0.9", "0.95", "0.99", "max"
            ])
        );
        assert_eq!(t.rows.len(), 10);
        for (row, p) in t.rows.iter().zip(&TABLE6) {
            assert_eq!((row[0].as_str(), row[1].as_str()), (p.ty, p.number));
            match ti {
                0 => assert_eq!(row[2..6], p.hz100.map(String::from)),
                1 => assert_eq!(row[2..6], p.hz20000.map(String::from)),
                _ => {}
            }
            // Ours: measured, so numbers (not "-").
            assert!(
                row[6..]
                    .iter()
                    .all(|c| c.chars().all(|ch| ch.is_ascii_digit() || ch == ',')),
                "{row:?}"
            );
        }
    }
    assert!(tables[0].title.as_deref().unwrap().contains("@100Hz"));
    assert!(tables[1].title.as_deref().unwrap().contains("@20,000Hz"));
    // 10 rows x 2 quanta x 2 mechanisms, and Fig. 7's CONT 1 and 4 at each quantum (signals).
    check_doc(&r, 44);
    let fig7: Vec<&str> = r.doc.series[40..].iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        fig7,
        [
            "CONT 1 signal long quantum",
            "CONT 4 signal long quantum",
            "CONT 1 signal short quantum",
            "CONT 4 signal short quantum"
        ]
    );
    assert_eq!(
        r.doc.series[41].summary.count, 8,
        "CONT 4: 4 processes x 2 alarms"
    );
    assert_eq!(r.doc.settings.extra["policy_cpu_bound"], "other");
    assert_eq!(r.doc.extra["experiment"], "etsion-latency");
    assert_eq!(
        r.doc.settings.extra["rr_timeslice_long"]["setting_ms"], 20,
        "the long quantum as set"
    );
    // Every alarm-setting process took its alarms: BLK 2 has 2 processes of 2 alarms.
    assert_eq!(r.doc.series[0].summary.count, 4);
    assert_eq!(r.doc.series[9].summary.count, 2); // 4% 1+8CPU: one process sets alarms
}

#[test]
fn etsion_overhead_prints_tables_1_and_2_and_the_sort() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !root("etsion_overhead_prints_tables_1_and_2_and_the_sort") {
        return;
    }
    let before = timeslice();
    let e = EtsionOverhead {
        quick: true,
        settings: OverheadSettings {
            gaps_ns: 300_000_000,
            ctxsw_ns: 100_000_000,
            trap_ns: 50_000_000,
            memcpy_per_size_ns: 20_000_000,
            sort_ns: 300_000_000,
            copies: vec![1, 8],
            timeslices_ms: vec![100, 1],
        },
        cpu: punctual_rt::affinity::last_online_cpu(),
    };
    let r = run(e, "etsion-overhead");
    assert_eq!(timeslice(), before, "the RR timeslice is restored");
    let tables = &r.report.tables;
    assert_eq!(tables.len(), 4);
    let (t1, t2, tb, ts) = (&tables[0], &tables[1], &tables[2], &tables[3]);
    assert_eq!(
        t1.header,
        strings(&[
            "Processor",
            "Default cycles",
            "us",
            "Without 8253 cycles",
            "us"
        ])
    );
    assert_eq!(
        published_rows(t1),
        published::TABLE1
            .iter()
            .map(|r| strings(r))
            .collect::<Vec<_>>()
    );
    assert_eq!(t1.rows.len(), 9, "7 published, a rule, this machine");
    assert_eq!(
        t2.header,
        strings(&[
            "Processor",
            "Context switch cycles",
            "us",
            "Cache BW MB/s",
            "Trap cycles",
            "us"
        ])
    );
    assert_eq!(
        published_rows(t2),
        published::TABLE2
            .iter()
            .map(|r| strings(r))
            .collect::<Vec<_>>()
    );
    assert!(t2.rows[8][0].starts_with("here"));
    assert_eq!(tb.rows.len(), 4, "L1, L2, L3, memory");
    let text = ts.render();
    for p in [
        published::SORT_MS_100HZ,
        published::SORT_MS_10000HZ,
        published::FIG8_PIII664_BASE,
        published::FIG8_PIII1133_EXTREME,
    ] {
        assert!(text.contains(p), "{p} missing from\n{text}");
    }
    assert_eq!(
        ts.rows.len(),
        4 + 1 + 2,
        "4 published rows, a rule, one row per timeslice"
    );
    // gaps, context switch, trap, 4 sizes x 2 methods.
    check_doc(&r, 3 + 8);
    assert_eq!(r.doc.extra["sort_throughput"].as_array().unwrap().len(), 4);
}

#[test]
fn mckenney_nanosleep_prints_the_ladder_parallel_tasks_and_build() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let e = McKenneyNanosleep {
        quick: true,
        settings: NanosleepSettings {
            sleep_ns: 100_000,
            ladder_trials: 300,
            final_trials: 300,
            parallel_tasks: vec![1, 3],
            calls_per_task: 200,
            build_trials: 300,
            build_instances: 1,
        },
    };
    let r = run(e, "mckenney-nanosleep");
    let tables = &r.report.tables;
    assert_eq!(tables.len(), 3);
    let (t, t8, tb) = (&tables[0], &tables[1], &tables[2]);
    // The four loops, a rule, the paper's four rows (2008 rt and non-rt, 2009 non-rt and rt).
    assert_eq!(t.rows.len(), 4 + 1 + 4);
    assert_eq!(
        t.rows[0][1..5],
        strings(&["realtime", "other", "no", "300"])
    );
    assert_eq!(
        t.rows[3][1..5],
        strings(&["monotonic", "fifo 99", "yes", "300"])
    );
    let p = published::mckenney::RT_P99999_US;
    assert_eq!(
        t.rows[5][4..8],
        strings(&["10,000,000", "-", p, published::mckenney::RT_MAX_US])
    );
    assert_eq!(t.rows[6][7], published::mckenney::NONRT_MAX);
    assert_eq!(t.rows[7][7], published::mckenney::NONRT2009_MAX);
    assert_eq!(
        t.rows[8][6..8],
        strings(&[
            published::mckenney::RT2009_P99999_US,
            published::mckenney::RT2009_MAX_US
        ])
    );
    assert_eq!(t8.rows.len(), 2 + 1 + 2);
    assert_eq!(
        t8.rows[4],
        strings(&[
            "growth 1 -> 12 (paper)",
            "100,000",
            "little",
            "> 3x",
            "> 3x"
        ])
    );
    assert_eq!(tb.rows.last().unwrap()[3..5], strings(&["59", "146"]));
    check_doc(&r, 4 + 2 + 1);
    assert_eq!(r.doc.series[4].summary.count, 200, "one task's calls");
    assert_eq!(
        r.doc.series[5].summary.count, 600,
        "three tasks' calls together"
    );
    // The rows lock memory themselves; the session holds no lock that would falsify the "no" rows.
    assert_eq!(r.doc.settings.mlock, Some(false));
    assert_eq!(r.doc.series[0].extra["mlock"], false);
    assert_eq!(r.doc.series[3].extra["mlock"], true);
}

/// A short real run: both configurations measured idle and under the cpu load, every kind of work
/// timed three times in each, the published rows intact, and the preemption mode as it was.
#[test]
fn mckenney_choose_measures_both_configurations() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        punctual_testkit::skip(
            "mckenney_choose_measures_both_configurations",
            "needs root for SCHED_FIFO, mlockall and cpu_dma_latency",
        );
        return;
    }
    let preempt =
        || std::fs::read_to_string(punctual_experiments::mckenney_choose::PREEMPT_PATH).ok();
    let before = preempt();
    let e = McKenneyChoose {
        quick: true,
        settings: ChooseSettings {
            latency_ns: 300_000_000,
            runs: 3,
            compute_iterations: 1_000_000,
            build_units: 1,
            syscalls: 100,
            io_writes: 2,
            io_bytes: 4096,
            ..ChooseSettings::quick()
        },
    };
    let (e_latency_ns, e_interval_ns) = (e.settings.latency_ns, e.settings.interval_ns);
    let r = run(e, "mckenney-choose");
    assert_eq!(preempt(), before, "the preemption mode is back");
    let t = &r.report.tables;
    assert_eq!(t.len(), 3);
    let table1 = &t[1];
    for row in &table1.rows[..3] {
        assert_eq!(row[4], "3", "three runs in each configuration: {row:?}");
        assert!(row[3].ends_with('x'), "a measured slowdown: {row:?}");
    }
    assert_eq!(table1.rows[4][1..3], strings(&["1332.6 s", "1556.2 s"]));
    check_doc(&r, 4);
    // Behaviour, not speed: every cell measured something, and no more releases than its
    // 300 ms at the 1 ms interval hold (a loaded machine may take fewer; the count is not asserted).
    let most = e_latency_ns / e_interval_ns + 1;
    for s in &r.doc.series {
        assert!(
            (1..=most).contains(&s.summary.count),
            "{}: {} samples, at most {most} releases",
            s.name,
            s.summary.count
        );
    }
    let sl = r.doc.extra["slowdowns"].as_object().unwrap();
    assert_eq!(sl.len(), 3, "{sl:?}");
}

#[test]
fn zeadally_dispatch_prints_tables_1_to_4() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cpus = punctual_rt::online_cpus();
    let e = ZeadallyDispatch {
        quick: true,
        settings: DispatchSettings {
            duration_ns: 300_000_000,
            interval_ns: 10_000_000,
            events: vec![punctual_bench::dispatch::Event::Eventfd],
        },
        raiser_cpu: cpus[0],
        waiter_cpu: *cpus.last().unwrap(),
    };
    let r = run(e, "zeadally-dispatch");
    let tables = &r.report.tables;
    assert_eq!(tables.len(), 4);
    let header = strings(&[
        "",
        "Minimum",
        "Median",
        "Maximum",
        "Mean",
        "Standard Deviation",
    ]);
    for (t, published) in tables.iter().zip([
        &published::ZEADALLY_T1[..],
        &published::ZEADALLY_T2[..],
        &published::ZEADALLY_T3[..],
        &published::ZEADALLY_T4[..],
    ]) {
        assert_eq!(t.header, header);
        let want: Vec<Vec<String>> = published
            .iter()
            .map(|p| {
                std::iter::once(format!("{} (us)", p.label))
                    .chain(p.values.iter().map(|v| v.to_string()))
                    .collect()
            })
            .collect();
        assert_eq!(published_rows(t), want);
    }
    assert_eq!(
        tables[0].rows.last().unwrap()[0],
        "Process dispatch, eventfd, real-time, soak (here) (us)"
    );
    assert_eq!(tables[3].rows.len(), 2 + 1 + 2);
    let dispatches: Vec<_> = r
        .doc
        .series
        .iter()
        .filter(|s| s.kind == "dispatch")
        .collect();
    assert_eq!(dispatches.len(), 4);
    for s in dispatches {
        assert_eq!(s.summary.count + s.summary.missed_periods, 30, "{}", s.name);
    }
    // Table 1's interrupt latency comes from a trace of the timer events: root and tracefs.
    let timer = r
        .doc
        .series
        .iter()
        .filter(|s| s.kind == "timer_expiry_latency")
        .count();
    let irq_row = tables[0]
        .rows
        .iter()
        .find(|row| {
            row.first()
                .is_some_and(|c| c.starts_with("Interrupt latency, timer (here)"))
        })
        .expect("the interrupt latency row");
    // SAFETY: geteuid takes no arguments, touches no memory and cannot fail.
    let traceable = unsafe { libc::geteuid() } == 0
        && std::fs::read_to_string("/proc/filesystems").is_ok_and(|f| f.contains("tracefs"));
    if traceable {
        assert_eq!(timer, 1);
        assert_ne!(irq_row[1], "-", "{irq_row:?}");
    } else {
        punctual_testkit::skip(
            "zeadally_dispatch_prints_tables_1_to_4 (interrupt latency)",
            "tracing needs root and tracefs",
        );
        assert_eq!((timer, irq_row[1].as_str()), (0, "-"));
    }
    check_doc(&r, 4 + timer);
}

#[test]
fn zeadally_dispatch_quick_runs_through_the_binary() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("z.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_punctual"))
        .args([
            "experiment",
            "run",
            "zeadally-dispatch",
            "--quick",
            "--figures",
        ])
        .arg(dir.path())
        .arg("--json")
        .arg(&json)
        .env("PUNCTUAL_DATA_DIR", dir.path().join("store"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "Zeadally Table 1",
        "Zeadally Table 4",
        "Context switch time (SVR4.2) (us)",
        "7424",
        "298.72",
        "Figure:",
    ] {
        assert!(text.contains(needle), "{needle} missing:\n{text}");
    }
    assert!(dir.path().join("zeadally-dispatch.svg").exists());
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["schema"], "punctual.result/1");
    // Four cases of dispatch (one mechanism in --quick), and the traced interrupt latency.
    let kinds: Vec<&str> = doc["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.iter().filter(|k| **k == "dispatch").count(), 4);
    // SAFETY: geteuid takes no arguments, touches no memory and cannot fail.
    let traceable = unsafe { libc::geteuid() } == 0
        && std::fs::read_to_string("/proc/filesystems").is_ok_and(|f| f.contains("tracefs"));
    if traceable {
        assert_eq!(kinds[4..], ["timer_expiry_latency"], "{kinds:?}");
    } else {
        assert_eq!(kinds.len(), 4, "{kinds:?}");
    }
    // A measured experiment records the hypervisor's share of every CPU during it.
    let steal = doc["settings"]["steal_ns"].as_object().unwrap();
    assert_eq!(steal.len() as u64, doc["host"]["cpus"].as_u64().unwrap());
}

#[test]
fn experiment_list_names_the_seeds_experiments() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_punctual"))
        .args(["experiment", "list"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for name in [
        "etsion-latency",
        "etsion-overhead",
        "mckenney-nanosleep",
        "mckenney-choose",
        "zeadally-dispatch",
        "kurt-utime",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(name)),
            "{name} missing:\n{text}"
        );
    }
}

#[test]
fn etsion_latency_sim_quick_runs_through_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("s.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_punctual"))
        .args([
            "experiment",
            "run",
            "etsion-latency",
            "--sim",
            "--quick",
            "--figures",
        ])
        .arg(dir.path())
        .arg("--json")
        .arg(&json)
        .env("PUNCTUAL_DATA_DIR", dir.path().join("store"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "Etsion Table 6 (simulated)",
        "20000 Hz, 100us",
        "740,025",
        "37,328",
        "Figure:",
    ] {
        assert!(text.contains(needle), "{needle} missing:\n{text}");
    }
    assert!(dir.path().join("etsion-latency-fig7.svg").exists());
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["series"].as_array().unwrap().len(), 20);
    // Pure computation: no real-time settings held, no steal time.
    assert!(doc["settings"].get("steal_ns").is_none());
    assert_eq!(doc["settings"]["clock"], "simulated");
}
