//! What users read from `punctual run`, `plan check` and `shield`, pinned: the lifecycle runs in a
//! fake environment (fixed host and clock, nothing changed on the machine) on canned outcomes.

use punctual_dispatch::engine::SlotStats;
use punctual_dispatch::measure::{HoldShield, RunPlan, ShieldEnd};
use punctual_dispatch::report::{admission_table, admit};
use punctual_dispatch::shield::ShieldPlan;
use punctual_dispatch::watchdog::Trip;
use punctual_dispatch::{CpuResult, Outcome, RunConfig, SlotInfo, SlotResult};
use punctual_result::Output;
use punctual_rt::{Policy, RtWant};
use punctual_session::{drive, Canned, Env, Exit, Outputs};
use punctual_stats::Recorder;

const PLAN: &str = r#"
[plan]
name = "two"
duration = "2s"

[[task]]
name = "tick"
period = "1ms"
offset = "auto"
action = { kind = "mark" }

[[task]]
name = "frame"
period = "10ms"
offset = "auto"
wcet = "200us"
action = { kind = "mark" }
"#;

/// What `punctual run` asks for by default: FIFO one below the watchdog's 99.
const WANT: RtWant = RtWant {
    policy: Policy::Fifo,
    priority: 98,
    mlock: true,
    dma_latency_us: Some(0),
};

fn plan() -> punctual_plan::Plan {
    punctual_plan::parse_str(PLAN, "two.toml", None).unwrap()
}

fn slot(name: &str, period: u64, base: u64) -> SlotResult {
    let mut lateness = Recorder::new();
    for i in 0..(2_000_000_000 / period) {
        lateness.record(base + (i * 7919) % 3_000);
    }
    SlotResult {
        info: SlotInfo {
            name: name.into(),
            cpu: 1,
            action: 0,
            action_name: name.into(),
            action_kind: "mark",
            period: Some(period),
            delegated: false,
            movable: false,
        },
        stats: SlotStats {
            releases: lateness.count(),
            lateness,
            ..SlotStats::new(false)
        },
        report: None,
    }
}

fn outcome(trip: Option<Trip>) -> Outcome {
    Outcome {
        held_by_others: Vec::new(),
        slots: vec![slot("tick", 1_000_000, 200), slot("frame", 10_000_000, 400)],
        cpus: vec![CpuResult {
            cpu: 1,
            margin_ns: 12_000,
            margin_cap_ns: 454_545,
            breathers: 3,
            breathers_partnered: 0,
            relayed: 0,
            woke_late: 7,
            woke_late_stolen: 2,
            spun_through: 0,
            yields: 0,
            cpu_ns: 60_000_000,
            wall_ns: 2_000_000_000,
            stalls: Vec::new(),
            stalls_dropped: 0,
            policy: Policy::Fifo,
            priority: 98,
            fallback: None,
        }],
        start: 0,
        trip,
        stuck: Vec::new(),
    }
}

fn run_plan_measurement() -> RunPlan {
    let cfg = RunConfig {
        cpus: vec![1],
        duration: Some(2_000_000_000),
        ..RunConfig::default()
    };
    RunPlan::new(plan(), cfg, WANT, Default::default(), 0.9)
}

#[test]
fn run_table_and_document() {
    let dir = tempfile::tempdir().unwrap();
    let json = Output::File(dir.path().join("r.json"));
    let out = Outputs::new().json_csv(Some(&json), None).unwrap();
    let env = Env::fake(&["punctual", "run", "two.toml"]);
    let m = run_plan_measurement();
    assert!(m.admission().feasible());
    let exit = drive(&mut Canned::new(m, outcome(None)), &out, &env).unwrap();
    assert_eq!(exit, Exit::Ok);
    insta::assert_snapshot!("run_table", env.captured().0);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    insta::assert_json_snapshot!("run_settings", doc["settings"]);
}

#[test]
fn a_watchdog_trip_is_status_watchdog_and_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    let json = Output::File(dir.path().join("r.json"));
    let out = Outputs::new().json_csv(Some(&json), None).unwrap();
    let env = Env::fake(&["punctual", "run", "two.toml"]);
    let trip = Trip {
        reason: "CPU 1 starved for 2.00 s".into(),
        demoted_threads: 1,
        demoted_children: 0,
    };
    let exit = drive(
        &mut Canned::new(run_plan_measurement(), outcome(Some(trip))),
        &out,
        &env,
    )
    .unwrap();
    assert_eq!(exit, Exit::System);
    assert_eq!(exit.code(), 3);
    let (_, stderr) = env.captured();
    assert!(stderr.contains("watchdog: CPU 1 starved"), "{stderr}");
    let doc = std::fs::read_to_string(dir.path().join("r.json")).unwrap();
    assert!(doc.contains("\"status\": \"watchdog\""), "{doc}");
}

#[test]
fn plan_check_table() {
    let mut p = plan();
    let r = admit(&mut p, &[1], 0.9, 50_000, Some(0.5));
    insta::assert_snapshot!("plan_check_table", admission_table(&p, &r).render());
}

#[test]
fn shield_passes_the_commands_exit_status_through() {
    let m = HoldShield {
        plan: ShieldPlan {
            cpus: vec![1],
            ..Default::default()
        },
        cpus: vec![1],
        duration: None,
        command: vec!["/bin/false".into()],
    };
    let env = Env::fake(&["punctual", "shield", "--cpus", "1", "--", "/bin/false"]);
    let exit = drive(
        &mut Canned::new(m, ShieldEnd { status: Some(7) }),
        &Outputs::new(),
        &env,
    )
    .unwrap();
    assert_eq!(exit, Exit::Child(7));
    assert_eq!(exit.code(), 7);
}

#[test]
fn a_rephased_task_is_noted_under_the_table_and_in_its_series() {
    let dir = tempfile::tempdir().unwrap();
    let json = Output::File(dir.path().join("r.json"));
    let out = Outputs::new().json_csv(Some(&json), None).unwrap();
    let env = Env::fake(&["punctual", "run", "two.toml"]);
    let mut o = outcome(None);
    o.slots[0].info.movable = true;
    o.slots[0].stats.rephased = 2;
    o.slots[0].stats.offset_ns = Some(763_932);
    o.slots[1].stats.offset_ns = Some(2_500_000);
    let exit = drive(&mut Canned::new(run_plan_measurement(), o), &out, &env).unwrap();
    assert_eq!(exit, Exit::Ok);
    let (table, _) = env.captured();
    assert!(
        punctual_testkit::has_text(
            &table,
            "task 'tick' re-phased 2 time(s) (its late releases lined up), now at offset 763932ns"
        ),
        "{table}"
    );
    assert!(!table.contains("'frame' re-phased"), "{table}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let series = doc["series"].as_array().unwrap();
    assert_eq!(series[0]["rephased"], 2);
    assert_eq!(series[0]["offset_ns"], 763_932);
    // A task that may not move carries its offset, and no re-phasing count.
    assert_eq!(series[1]["offset_ns"], 2_500_000);
    assert!(series[1].get("rephased").is_none(), "{}", series[1]);
}
