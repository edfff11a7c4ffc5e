use crate::admission::{self, Config};
use crate::*;
use proptest::prelude::*;

const GOOD: &str = r#"
[plan]
name = "av-pipeline"
cpus = "1"
shield = false
spin_margin = "auto"

[[action]]
name = "ping"
kind = "udp"
to = "127.0.0.1:9000"
bytes = 64

[[task]]
name = "video"
period = "16667us"
offset = "0us"
wcet = "2ms"
action = { kind = "exec", argv = ["/usr/bin/true"] }

[[task]]
name = "audio"
period = "1ms"
offset = "auto"
miss = "catch_up"
action = { kind = "wake" }

[[event]]
at = "1500us"
action = { kind = "udp", to = "127.0.0.1:9000", bytes = 64 }

[[event]]
at = "500us"
use = "ping"
data = [1, 2, 3]
"#;

fn err(text: &str) -> String {
    parse_str(text, "p.toml", None).unwrap_err().to_string()
}

#[test]
fn parses_the_spec_example() {
    let p = parse_str(GOOD, "p.toml", None).unwrap();
    assert_eq!(p.name, "av-pipeline");
    assert_eq!(p.cpus, Some(vec![1]));
    assert_eq!(p.tasks.len(), 2);
    assert_eq!(p.tasks[0].period, 16_667_000);
    assert_eq!(p.tasks[0].wcet, Some(2_000_000));
    assert_eq!(p.tasks[1].offset, Offset::Auto);
    assert_eq!(p.tasks[1].miss, MissPolicy::CatchUp);
    // The wake channel defaults to the task's name.
    assert_eq!(
        p.action(p.tasks[1].action).action,
        Action::Wake {
            channel: "audio".into(),
            spawn: None,
            user: None,
        }
    );
    // Events sorted by time; the inline udp action is a table entry of its own.
    assert_eq!(
        p.events.iter().map(|e| e.at).collect::<Vec<_>>(),
        vec![500_000, 1_500_000]
    );
    assert_eq!(p.action(p.events[0].action).name, "ping");
    assert_eq!(p.events[0].data(), &[1, 2, 3]);
    assert_eq!(p.action(p.events[1].action).name, "udp 127.0.0.1:9000");
}

#[test]
fn errors_name_line_and_column() {
    let e = err("[[task]]\nname = \"a\"\nperiod = \"0ms\"\naction = { kind = \"mark\" }\n");
    assert!(e.starts_with("p.toml:3:10:"), "{e}");
    assert!(e.contains("period must be more than zero"), "{e}");

    let e = err("[[task]]\nname = \"a\"\nperiod = \"-1ms\"\naction = { kind = \"mark\" }\n");
    assert!(
        e.starts_with("p.toml:3:10:") && e.contains("negative"),
        "{e}"
    );

    let e = err("[[task]]\nname = \"a\"\nperiod = 10\naction = { kind = \"mark\" }\n");
    assert!(
        e.contains("p.toml:3:10") && e.contains("has no unit") && e.contains("\"10us\""),
        "{e}"
    );

    let e = err("[[task]]\nname = \"a\"\nperiod = \"1ms\"\noffset = \"1ms\"\naction = { kind = \"mark\" }\n");
    assert!(
        e.starts_with("p.toml:4:10:") && e.contains("not less than the period"),
        "{e}"
    );

    let e = err(
        "[[task]]\nname = \"a\"\nperiod = \"1ms\"\nwcet = \"2ms\"\naction = { kind = \"mark\" }\n",
    );
    assert!(
        e.starts_with("p.toml:4:8:") && e.contains("above the period"),
        "{e}"
    );

    let e = err("[[task]]\nname = \"a\"\nperiod = \"1ms\"\naction = { kind = \"teleport\" }\n");
    assert!(
        e.starts_with("p.toml:4:19:")
            && e.contains("unknown action kind 'teleport'")
            && e.contains("mark, exec"),
        "{e}"
    );

    let e = err("[[event]]\nat = \"1ms\"\naction = { kind = \"plugin\", path = \"libx.so\" }\n");
    assert!(
        e.contains("p.toml:3:") && e.contains("explicit path"),
        "{e}"
    );

    let e = err("[[event]]\nat = \"1ms\"\naction = { kind = \"udp\", to = \"localhost:9\" }\n");
    assert!(e.contains("not IP:PORT"), "{e}");

    let e = err("[[event]]\nat = \"1ms\"\naction = { kind = \"mark\", argv = [\"x\"] }\n");
    assert!(e.contains("'argv' does not apply to a mark action"), "{e}");

    // Syntax errors and unknown fields come from the TOML reader, located too.
    let e = err("[plan]\nname = \"x\"\nspeed = 3\n[[event]]\nat=\"1ms\"\naction={kind=\"mark\"}\n");
    assert!(e.starts_with("p.toml:3:1:") && e.contains("speed"), "{e}");
    let e = err("[plan\n");
    assert!(e.starts_with("p.toml:1:"), "{e}");

    let e = err("[plan]\nname = \"x\"\n");
    assert!(e.contains("nothing to run"), "{e}");

    let e = err("[[event]]\nat = \"1ms\"\nuse = \"nope\"\n");
    assert!(e.contains("no [[action]] named 'nope'"), "{e}");

    let e = err("[[event]]\nat = \"1ms\"\naction = { kind = \"mark\" }\ndata = [1,2,3,4,5,6,7,8,9,10,11,12,13]\n");
    assert!(e.contains("at most 12"), "{e}");

    let e = err("[[task]]\nname = \"a\"\nperiod = \"1ms\"\naction = { kind = \"mark\" }\n[[task]]\nname = \"a\"\nperiod = \"1ms\"\naction = { kind = \"mark\" }\n");
    assert!(
        e.starts_with("p.toml:6:8:") && e.contains("second task named 'a'"),
        "{e}"
    );

    let e = err("[[task]]\nname = \"a b\"\nperiod = \"1ms\"\naction = { kind = \"wake\" }\n");
    assert!(e.contains("wake channel 'a b'"), "{e}");
}

#[test]
fn relative_paths_are_taken_from_the_plan_directory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.toml");
    std::fs::write(
        &path,
        "[[event]]\nat = \"1ms\"\naction = { kind = \"plugin\", path = \"./libp.so\" }\n",
    )
    .unwrap();
    let p = parse_file(&path).unwrap();
    match &p.actions[0].action {
        Action::Plugin { path: pp, symbol } => {
            assert_eq!(pp, &dir.path().join("./libp.so"));
            assert_eq!(symbol, "punctual_event");
        }
        other => panic!("{other:?}"),
    }
    let e = parse_file(&dir.path().join("missing.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing.toml"), "{e}");
}

#[test]
fn toml_round_trips_through_the_canonical_form() {
    let p = parse_str(GOOD, "p.toml", None).unwrap();
    let again = parse_str(&emit::to_toml(&p), "p.toml", None).unwrap();
    assert_eq!(again.tasks, p.tasks);
    assert_eq!(again.events, p.events);
    assert_eq!(again.actions, p.actions);
}

#[test]
fn compiled_form_round_trips_and_is_24_bytes_per_event() {
    let mut p = parse_str(GOOD, "p.toml", None).unwrap();
    p.events = (0..10_000u64)
        .map(|i| {
            Event::new(
                i * 10_000,
                (i % 2) as u16,
                &[i as u8; 12][..(i % 13) as usize],
            )
        })
        .collect();
    let bytes = compiled::to_bytes(&p);
    let header = crate::emit::header_toml(&p).len();
    assert_eq!(
        bytes.len(),
        compiled::FIXED_HEADER + header + 24 * p.events.len()
    );
    let back = compiled::read(&bytes[..], "x.pplan").unwrap();
    assert_eq!(back.events, p.events);
    assert_eq!(back.tasks, p.tasks);
    assert_eq!(back.actions, p.actions);
}

/// Found by fuzzing (issue 18): an inline exec action with a long program path was named
/// "exec <path>" beyond the 64-byte limit, so `plan compile` wrote a header `run` refused. Every
/// generated name must read back: long, with control characters, with padding, and repeated.
#[test]
fn fuzz_generated_action_names_read_back_from_a_compiled_plan() {
    let long = "g".repeat(120);
    let text = format!(
        r#"
[[event]]
at = "1ms"
action = {{ kind = "exec", argv = ["/bin/{long}"] }}

[[event]]
at = "2ms"
action = {{ kind = "exec", argv = ["/bin/{long}"], wcet = "1us" }}

[[event]]
at = "3ms"
action = {{ kind = "exec", argv = ["/bin/é{long}"], wcet = "2us" }}

[[event]]
at = "4ms"
action = {{ kind = "exec", argv = ["  /bin/a\u0007b  "] }}

[[event]]
at = "5ms"
action = {{ kind = "exec", argv = ["\t%FFFL\uFFFB\u12FF\u202Eggg/true"] }}
"#
    );
    let p = parse_str(&text, "long.toml", None).unwrap();
    assert_eq!(p.actions.len(), 5);
    for a in &p.actions {
        assert!(a.name.len() <= 64, "{:?}", a.name);
        // Found by fuzzing again (2026-11-24): an interlinear annotation mark (U+FFFB) is not a
        // control character, yet names refuse it; generated names replace all of them.
        assert!(
            !a.name.chars().any(punctual_time::text::needs_escape),
            "{:?}",
            a.name
        );
    }
    let back = compiled::from_bytes(&compiled::to_bytes(&p), "long.pplan").unwrap();
    assert_eq!(back.actions, p.actions);
    assert_eq!(back.events, p.events);
    // An explicit inline name follows the same rules as an [[action]]'s.
    let bad =
        format!("[[event]]\nat = \"1ms\"\naction = {{ kind = \"mark\", name = \"{long}\" }}\n");
    let e = parse_str(&bad, "n.toml", None).unwrap_err().to_string();
    assert!(e.contains("must be at most 64 characters"), "{e}");
}

#[test]
fn damaged_compiled_plans_are_refused() {
    let p = parse_str(GOOD, "p.toml", None).unwrap();
    let bytes = compiled::to_bytes(&p);
    let e = compiled::read(&bytes[..bytes.len() - 5], "x")
        .unwrap_err()
        .to_string();
    assert!(e.contains("truncated"), "{e}");
    let mut b = bytes.clone();
    b[8] = 9;
    assert!(compiled::read(&b[..], "x")
        .unwrap_err()
        .to_string()
        .contains("version 9"));
    let mut b = bytes.clone();
    let n = b.len();
    b[n - 24 + 8] = 200; // action index of the last event
    assert!(compiled::read(&b[..], "x")
        .unwrap_err()
        .to_string()
        .contains("names action 200"));
    assert!(
        compiled::read(&b"hello world, not a plan at all.."[..], "x")
            .unwrap_err()
            .to_string()
            .contains("magic")
    );
}

#[test]
fn csv_events_resolve_action_names() {
    let p = parse_str(GOOD, "p.toml", None).unwrap();
    let csv = "at_ns,action,data_hex\n2000,ping,0a0b\n1000,udp 127.0.0.1:9000,\n";
    let ev = compiled::events_from_csv(&p, csv.as_bytes(), "e.csv").unwrap();
    assert_eq!(
        ev.iter().map(|e| e.at).collect::<Vec<_>>(),
        vec![1000, 2000]
    );
    assert_eq!(ev[1].data(), &[10, 11]);
    let e = compiled::events_from_csv(&p, "at_ns,action,data_hex\n5,nope,\n".as_bytes(), "e.csv")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("e.csv:2:1:") && e.contains("nope"), "{e}");
    let e = compiled::events_from_csv(&p, "time,action\n".as_bytes(), "e.csv")
        .unwrap_err()
        .to_string();
    assert!(e.contains("header"), "{e}");
}

fn tasks_plan(tasks: &[(&str, &str, &str, Option<&str>)]) -> Plan {
    let mut s = String::new();
    for (name, period, offset, wcet) in tasks {
        s.push_str(&format!(
            "[[task]]\nname = \"{name}\"\nperiod = \"{period}\"\noffset = \"{offset}\"\n"
        ));
        if let Some(w) = wcet {
            s.push_str(&format!("wcet = \"{w}\"\n"));
        }
        s.push_str("action = { kind = \"mark\" }\n");
    }
    parse_str(&s, "t.toml", None).unwrap()
}

#[test]
fn admission_sums_utilisation_and_refuses_above_the_bound() {
    let p = tasks_plan(&[
        ("a", "10ms", "0us", Some("5ms")),
        ("b", "20ms", "6ms", Some("9ms")),
    ]);
    let r = admission::check(
        &p,
        &[1],
        &Config {
            bound: 0.9,
            margin: 50_000,
            spin_budget: None,
        },
    );
    assert!((r.cpus[0].utilisation - 0.95).abs() < 1e-9);
    assert!(!r.feasible());
    assert!(r.reasons()[0].contains("95.0 %"), "{:?}", r.reasons());
    let r = admission::check(
        &p,
        &[1],
        &Config {
            bound: 1.0,
            margin: 50_000,
            spin_budget: None,
        },
    );
    assert!(r.cpus[0].utilisation <= 1.0);
}

#[test]
fn admission_finds_collisions_within_the_hyperperiod() {
    let p = tasks_plan(&[
        ("a", "4ms", "0us", Some("3ms")),
        ("b", "10ms", "5ms", Some("1ms")),
    ]);
    let r = admission::check(&p, &[0], &Config::default());
    assert_eq!(r.horizon, 20_000_000);
    assert!(r.complete);
    // b at 5ms falls in a's window [4ms, 7ms); b at 15ms just misses [12ms, 15ms).
    assert_eq!(r.collision_count, 1, "{:?}", r.collisions);
    assert_eq!(
        (r.collisions[0].at, r.collisions[0].overlap),
        (5_000_000, 2_000_000)
    );
    assert!(r.reasons().iter().any(|m| m.contains("collision")));
}

#[test]
fn simultaneous_releases_collide_even_without_wcet() {
    let p = tasks_plan(&[("a", "1ms", "0us", None), ("b", "1ms", "0us", None)]);
    let r = admission::check(&p, &[0], &Config::default());
    assert_eq!(r.collision_count, 1);
    let p = tasks_plan(&[("a", "1ms", "0us", None), ("b", "1ms", "500us", None)]);
    assert!(admission::check(&p, &[0], &Config::default()).feasible());
}

#[test]
fn busy_share_is_the_union_of_spin_windows() {
    // 1 kHz with a 50 us margin: 5 % of the CPU spinning.
    let p = tasks_plan(&[("a", "1ms", "0us", None)]);
    let r = admission::check(
        &p,
        &[0],
        &Config {
            bound: 0.9,
            margin: 50_000,
            spin_budget: None,
        },
    );
    assert!((r.cpus[0].busy - 0.05).abs() < 1e-9, "{}", r.cpus[0].busy);
    // Dense events overlap their windows: the CPU is busy all the time, not 500 %.
    let mut p = tasks_plan(&[("a", "1s", "0us", None)]);
    p.tasks.clear();
    p.events = (0..1000u64)
        .map(|i| Event::new(i * 10_000, 0, &[]))
        .collect();
    let r = admission::check(
        &p,
        &[0],
        &Config {
            bound: 0.9,
            margin: 50_000,
            spin_budget: None,
        },
    );
    assert!(
        r.cpus[0].busy > 0.99 && r.cpus[0].busy <= 1.0,
        "{}",
        r.cpus[0].busy
    );
    assert_eq!(r.collision_count, 0);
}

#[test]
fn auto_offsets_spread_equal_periods_evenly() {
    let names: Vec<String> = (0..30).map(|i| format!("p{i}")).collect();
    let spec: Vec<(&str, &str, &str, Option<&str>)> = names
        .iter()
        .map(|n| (n.as_str(), "10ms", "auto", None))
        .collect();
    let mut p = tasks_plan(&spec);
    let given = admission::phase(&mut p, &[1]);
    assert_eq!(given.len(), 30);
    let mut offs: Vec<u64> = p.tasks.iter().map(|t| t.offset.ns()).collect();
    offs.sort_unstable();
    for w in offs.windows(2) {
        assert!(w[1] - w[0] >= 333_000, "{offs:?}");
    }
    assert!(admission::check(&p, &[1], &Config::default()).feasible());
}

/// Found by fuzzing (issue 18): a 1 ns period beside a 200 ms one made automatic phasing insert
/// 2e8 releases one by one into a sorted list (hours). The work is bounded now; a thread that has
/// not finished after two minutes is a hang, not slowness.
#[test]
fn fuzz_auto_phasing_of_a_1ns_period_finishes() {
    let mut p = tasks_plan(&[
        ("tick", "1ns", "auto", None),
        ("slow", "200ms", "auto", Some("2ms")),
        ("mid", "3us", "auto", None),
    ]);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let given = admission::phase(&mut p, &[1]);
        let _ = tx.send((given, p));
    });
    let (given, p) = rx
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("phasing a 1 ns period hung");
    assert_eq!(given.len(), 3);
    for t in &p.tasks {
        assert!(t.offset.ns() < t.period, "{t:?}");
    }
}

#[test]
fn auto_offsets_avoid_fixed_tasks() {
    let mut p = tasks_plan(&[
        ("a", "1ms", "0us", None),
        ("b", "2ms", "auto", None),
        ("c", "2ms", "auto", None),
    ]);
    let before = admission::check(&p, &[0], &Config::default());
    assert!(before.collision_count > 0);
    admission::phase(&mut p, &[0]);
    let r = admission::check(&p, &[0], &Config::default());
    assert_eq!(r.collision_count, 0, "{:?}", p.tasks);
    for t in &p.tasks[1..] {
        assert_ne!(t.offset.ns() % 1_000_000, 0, "{t:?} lands on a's releases");
    }
}

/// A tick-like interference over 1 s from t0: 60 us every 4 ms, plus a host's 50 us every 10 ms
/// at 750 us.
fn tick_and_host(t0: u64) -> admission::Interference {
    let ticks = (0..250).map(|k| (t0 + k * 4_000_000, 60_000));
    let host = (0..100).map(|k| (t0 + 750_000 + k * 10_000_000, 50_000));
    admission::Interference::new(t0, t0 + 1_000_000_000, ticks.chain(host))
}

/// Found by fuzzing (issue 18): a period of 1033333333127 ms (33 years) made automatic phasing
/// multiply past u64 ("attempt to multiply with overflow"); times near u64::MAX did the same in
/// the admission walk.
#[test]
fn fuzz_admission_of_periods_and_times_near_u64_max_does_not_overflow() {
    // The parser now refuses times beyond a year; admission must still hold for plans built in
    // code (and compiled plans' events), so the period is set past the parser.
    let mut p = tasks_plan(&[
        ("long", "1h", "auto", None),
        ("short", "70ms", "auto", Some("2ms")),
    ]);
    p.tasks[0].period = 1_033_333_333_127_000_000;
    let huge = Event::new(u64::MAX - 1, 0, &[]);
    p.events.push(huge);
    let mut avoided = p.clone();
    let given = admission::phase(&mut p, &[1]);
    assert_eq!(given.len(), 2);
    let r = admission::check(&p, &[1], &Config::default());
    assert!(r.horizon > 0);
    let t0 = 5_000_000_000;
    let inf = tick_and_host(t0);
    assert_eq!(
        admission::phase_avoiding(&mut avoided, &[1], Some((&inf, t0))).len(),
        2
    );
    assert_eq!(inf.hit_share(0, u64::MAX), 0.0);
    assert!(inf.near_share(u64::MAX - 5, 3, u64::MAX) <= 1.0);
}

#[test]
fn interference_counts_the_releases_that_fall_in_a_window() {
    let t0 = 5_000_000_000;
    let inf = tick_and_host(t0);
    assert_eq!(inf.windows().len(), 350);
    assert!(
        (inf.lost_share() - 0.02).abs() < 1e-9,
        "{}",
        inf.lost_share()
    );
    // A 10 ms task at a tick: every other release (10 ms is two and a half ticks).
    assert_eq!(inf.hit_share(t0 + 10_000, 10_000_000), 0.5);
    // The same phase given a few periods earlier or later: the same progression.
    assert_eq!(inf.hit_share(t0 + 10_000 - 30_000_000, 10_000_000), 0.5);
    assert_eq!(inf.hit_share(t0 + 10_000 + 70_000_000, 10_000_000), 0.5);
    assert_eq!(
        inf.hit_share(t0 + 760_000, 10_000_000),
        1.0,
        "the host's window, each time"
    );
    assert_eq!(inf.hit_share(t0 + 1_000_000, 10_000_000), 0.0);
    // Windows are [start, end): the end itself is free.
    assert_eq!(inf.hit_share(t0 + 60_000, 4_000_000), 0.0);
    // Near a window: within the guard before its start or after its end.
    assert_eq!(inf.near_share(t0 + 60_000, 4_000_000, 0), 0.0);
    assert_eq!(inf.near_share(t0 + 60_000 + 24_000, 4_000_000, 25_000), 1.0);
    assert_eq!(inf.near_share(t0 + 60_000 + 25_000, 4_000_000, 25_000), 0.0);
    assert_eq!(inf.near_share(t0 + 725_000, 10_000_000, 25_000), 1.0);
    assert_eq!(inf.near_share(t0 + 724_000, 10_000_000, 25_000), 0.0);
    // Overlapping windows merge.
    let m = admission::Interference::new(0, 100, [(10, 20), (5, 10), (40, 5)]);
    assert_eq!(m.windows(), &[(5, 30), (40, 45)]);
}

/// A 500 us stream against the tick (60 us at 4 ms boundaries) and a host's 50 us at 750 us every
/// 10 ms: the quietest phase keeps every send out of both and a guard away, where a start at any
/// instant would lose some.
#[test]
fn the_quietest_phase_of_a_stream_misses_the_tick_and_the_host() {
    let t0 = 5_000_000_000;
    let inf = tick_and_host(t0);
    let (phase, hit, mean) = inf.quietest_phase(500_000, admission::AVOID_GUARD);
    assert_eq!(hit, 0.0);
    assert_eq!(
        inf.near_share(t0 + phase, 500_000, admission::AVOID_GUARD),
        0.0
    );
    assert!(phase < 500_000);
    // The tick covers 60 of every 500 us of phase, the host 50: about a fifth of the phases lose
    // a send in 8 or in 20 to them.
    assert!(mean > 0.01 && mean < 0.05, "{mean}");
    // Phase 0 sits on the tick: 1 send in 8.
    assert_eq!(inf.hit_share(t0, 500_000), 0.125);
    // A period with no room at all: the least bad phase, and nothing panics.
    let full = admission::Interference::new(0, 1_000_000, [(0, 1_000_000)]);
    assert_eq!(full.quietest_phase(500_000, 0).1, 1.0);
}

#[test]
fn auto_offsets_keep_evenly_spread_releases_out_of_measured_interference() {
    let names: Vec<String> = (0..30).map(|i| format!("p{i}")).collect();
    let spec: Vec<(&str, &str, &str, Option<&str>)> = names
        .iter()
        .map(|n| (n.as_str(), "10ms", "auto", None))
        .collect();
    let t0 = 5_000_000_000;
    let inf = tick_and_host(t0);
    let hits = |p: &Plan| -> f64 {
        p.tasks
            .iter()
            .map(|t| inf.hit_share(t0 + t.offset.ns(), t.period))
            .sum()
    };
    let mut plain = tasks_plan(&spec);
    admission::phase(&mut plain, &[1]);
    assert!(hits(&plain) >= 0.5, "the plain spread puts p0 on the tick");
    let mut p = tasks_plan(&spec);
    admission::phase_avoiding(&mut p, &[1], Some((&inf, t0)));
    assert_eq!(
        hits(&p),
        0.0,
        "{:?}",
        p.tasks.iter().map(|t| t.offset.ns()).collect::<Vec<_>>()
    );
    // Not at the edge of a window either: every release keeps the guard's distance from all of them.
    for t in &p.tasks {
        assert_eq!(
            inf.near_share(t0 + t.offset.ns(), t.period, admission::AVOID_GUARD),
            0.0,
            "{} at {} ns",
            t.name,
            t.offset.ns()
        );
    }
    let mut offs: Vec<u64> = p.tasks.iter().map(|t| t.offset.ns()).collect();
    offs.sort_unstable();
    for w in offs.windows(2) {
        assert!(w[1] - w[0] >= 333_000, "still evenly spread: {offs:?}");
    }
    // Without interference the spread starts at 0, as before.
    let mut q = tasks_plan(&spec);
    admission::phase_avoiding(
        &mut q,
        &[1],
        Some((&admission::Interference::default(), t0)),
    );
    assert_eq!(q.tasks[0].offset.ns(), 0);
}

#[test]
fn greedily_placed_offsets_also_avoid_measured_interference() {
    let spec = [
        ("a", "1ms", "0us", None),
        ("b", "2ms", "auto", None),
        ("c", "20ms", "auto", None),
    ];
    let t0 = 1_000_000_000;
    // A window 100 us wide every 2 ms at 0.5 ms: exactly where b's greedy choice (farthest from a's
    // releases at whole milliseconds) would put it.
    let inf = admission::Interference::new(
        t0,
        t0 + 1_000_000_000,
        (0..500).map(|k| (t0 + 450_000 + k * 2_000_000, 100_000)),
    );
    let mut plain = tasks_plan(&spec);
    admission::phase(&mut plain, &[0]);
    assert_eq!(
        inf.hit_share(t0 + plain.tasks[1].offset.ns(), 2_000_000),
        1.0
    );
    let mut p = tasks_plan(&spec);
    admission::phase_avoiding(&mut p, &[0], Some((&inf, t0)));
    for t in &p.tasks[1..] {
        assert_eq!(inf.hit_share(t0 + t.offset.ns(), t.period), 0.0, "{t:?}");
    }
    let r = admission::check(&p, &[0], &Config::default());
    assert_eq!(r.collision_count, 0, "{:?}", p.tasks);
}

proptest! {
    #[test]
    fn any_text_gives_a_plan_or_a_located_error(text in "[\\[\\]a-z=\" 0-9\\n{},.]{0,200}") {
        match parse_str(&text, "f.toml", None) {
            Ok(_) => {}
            Err(PlanError::At { line, column, .. }) => {
                prop_assert!(line >= 1 && column >= 1);
                prop_assert!(line <= text.lines().count().max(1) + 1);
            }
            Err(PlanError::Invalid { .. }) => {}
            Err(e) => prop_assert!(false, "unexpected error kind {e}"),
        }
    }

    #[test]
    fn generated_plans_round_trip(
        tasks in proptest::collection::vec((1u64..1_000_000, 0u64..100, proptest::option::of(1u64..100), 0usize..3, any::<bool>()), 1..8),
        events in proptest::collection::vec((0u64..10_000_000_000, proptest::collection::vec(any::<u8>(), 0..12)), 0..50),
    ) {
        let mut s = String::from("[plan]\nname = \"gen\"\nspin_margin = \"20us\"\n");
        for (i, (period_us, off_pct, wcet_pct, kind, catch)) in tasks.iter().enumerate() {
            let period = period_us * 1000;
            let offset = period * off_pct / 100;
            s.push_str(&format!("[[task]]\nname = \"t{i}\"\nperiod = \"{period}ns\"\noffset = \"{offset}ns\"\n"));
            if let Some(w) = wcet_pct {
                s.push_str(&format!("wcet = \"{}ns\"\n", (period * w / 100).max(1)));
            }
            if *catch {
                s.push_str("miss = \"catch_up\"\n");
            }
            s.push_str(match kind {
                0 => "action = { kind = \"mark\" }\n",
                1 => "action = { kind = \"udp\", to = \"127.0.0.1:9\", bytes = 32 }\n",
                _ => "action = { kind = \"wake\" }\n",
            });
        }
        for (at, data) in &events {
            let d: Vec<String> = data.iter().map(|b| b.to_string()).collect();
            s.push_str(&format!("[[event]]\nat = \"{at}ns\"\naction = {{ kind = \"mark\" }}\ndata = [{}]\n", d.join(",")));
        }
        let p = parse_str(&s, "g.toml", None).unwrap();
        prop_assert_eq!(p.tasks.len(), tasks.len());
        prop_assert_eq!(p.events.len(), events.len());
        let back = compiled::read(&compiled::to_bytes(&p)[..], "g.pplan").unwrap();
        prop_assert_eq!(&back.tasks, &p.tasks);
        prop_assert_eq!(&back.events, &p.events);
        prop_assert_eq!(&back.actions, &p.actions);
        let again = parse_str(&emit::to_toml(&p), "g2.toml", None).unwrap();
        prop_assert_eq!(&again.tasks, &p.tasks);
        prop_assert_eq!(&again.events, &p.events);
    }
}

const EXEC_AS_USER: &str = r#"
[[task]]
name = "job"
period = "10ms"
action = { kind = "exec", argv = ["/usr/bin/id"], user = "nobody", drop_caps = true }

[[task]]
name = "by-uid"
period = "10ms"
action = { kind = "exec", argv = ["/usr/bin/id"], user = 65534 }
"#;

#[test]
fn exec_user_and_drop_caps_parse_and_round_trip() {
    let p = parse_str(EXEC_AS_USER, "p.toml", None).unwrap();
    assert_eq!(
        p.action(p.tasks[0].action).action,
        Action::Exec {
            argv: vec!["/usr/bin/id".into()],
            priority: None,
            user: Some("nobody".into()),
            drop_caps: true,
        }
    );
    assert!(matches!(
        &p.action(p.tasks[1].action).action,
        Action::Exec { user: Some(u), drop_caps: false, .. } if u == "65534"
    ));
    let again = parse_str(&emit::to_toml(&p), "p2.toml", None).unwrap();
    assert_eq!(again.actions, p.actions);
    let back = compiled::read(&compiled::to_bytes(&p)[..], "p.pplan").unwrap();
    assert_eq!(back.actions, p.actions);
    // A plan without the options emits neither, so older readers still take it.
    let plain = parse_str(GOOD, "p.toml", None).unwrap();
    let text = emit::to_toml(&plain);
    assert!(
        !text.contains("drop_caps") && !text.contains("user ="),
        "{text}"
    );
}

#[test]
fn exec_user_errors_name_line_and_column() {
    let e = err("[[task]]\nname = \"a\"\nperiod = \"1ms\"\naction = { kind = \"exec\", argv = [\"/bin/true\"], user = \"bad user\" }\n");
    assert!(e.starts_with("p.toml:4:"), "{e}");
    assert!(e.contains("is not a user name"), "{e}");
    let e = err("[[task]]\nname = \"a\"\nperiod = \"1ms\"\naction = { kind = \"exec\", argv = [\"/bin/true\"], user = -1 }\n");
    assert!(e.contains("is not a uid"), "{e}");
    let e = err("[[task]]\nname = \"a\"\nperiod = \"1ms\"\naction = { kind = \"exec\", argv = [\"/bin/true\"], user = true }\n");
    assert!(e.contains("expected a user name or uid"), "{e}");
    let e = err("[[task]]\nname = \"a\"\nperiod = \"1ms\"\naction = { kind = \"udp\", to = \"127.0.0.1:9\", drop_caps = true }\n");
    assert!(
        e.contains("'drop_caps' does not apply to a udp action"),
        "{e}"
    );
    let e = err("[[task]]\nname = \"a\"\nperiod = \"1ms\"\naction = { kind = \"exec\", argv = [\"/bin/true\"], drop_caps = \"yes\" }\n");
    assert!(e.starts_with("p.toml:4:"), "{e}");
}

#[test]
fn names_with_escape_sequences_or_bidi_overrides_are_refused_and_shown_escaped() {
    for bad in ["evil\u{1b}[2J", "abc\u{202e}fed", "x\u{2066}y"] {
        let e = err(&format!(
            "[[task]]\nname = \"{}\"\nperiod = \"1ms\"\naction = {{ kind = \"mark\" }}\n",
            bad.chars()
                .map(|c| if c.is_ascii_graphic() {
                    c.to_string()
                } else {
                    format!("\\u{:04X}", c as u32)
                })
                .collect::<String>()
        ));
        assert!(
            e.contains("without control, invisible or text-direction characters"),
            "{e}"
        );
        assert!(!e.chars().any(punctual_time::text::needs_escape), "{e:?}");
    }
    // A 1 MB name is refused with a bounded message.
    let e = err(&format!(
        "[[task]]\nname = \"{}\"\nperiod = \"1ms\"\naction = {{ kind = \"mark\" }}\n",
        "n".repeat(1 << 20)
    ));
    assert!(e.len() < 1000, "{} bytes", e.len());
}

/// Found by scripts/bad-input.sh (issue 19 item 11): a `use` naming no action, and an events CSV
/// naming no action, echoed the name raw (escape sequences, bidi overrides, 1 MB of it).
#[test]
fn unknown_action_names_are_shown_escaped_and_cut() {
    let e = err(&format!(
        "[[task]]\nname = \"t\"\nperiod = \"1ms\"\nuse = \"\\u001B[31mred\\n\\u202Eevil{}\"\n",
        "x".repeat(1 << 20)
    ));
    assert!(
        e.contains("no [[action]] named"),
        "{}",
        &e[..e.len().min(300)]
    );
    assert!(!e.chars().any(punctual_time::text::needs_escape), "{e:?}");
    assert!(e.len() < 1000, "{} bytes", e.len());

    let p = parse_str(GOOD, "p.toml", None).unwrap();
    let csv = format!(
        "at_ns,action,data_hex\n5,\u{1b}]0;x\u{7}{},\n",
        "y".repeat(100_000)
    );
    let e = compiled::events_from_csv(&p, csv.as_bytes(), "e.csv")
        .unwrap_err()
        .to_string();
    assert!(!e.chars().any(punctual_time::text::needs_escape), "{e:?}");
    assert!(e.len() < 1000, "{} bytes", e.len());
}

/// Found by scripts/bad-input.sh (issue 19 item 9): a period of 18446744073709551615ns was
/// admitted, and `run -D 1s` of it ran on past 20 s; 584-year durations and periods were admitted.
#[test]
fn times_beyond_a_year_are_refused() {
    for (field, body) in [
        ("period", "[[task]]\nname = \"t\"\nperiod = \"18446744073709551615ns\"\naction = { kind = \"mark\" }\n"),
        ("period", "[[task]]\nname = \"t\"\nperiod = \"18446744073s\"\naction = { kind = \"mark\" }\n"),
        ("duration", "[plan]\nduration = \"18446744073s\"\n[[task]]\nname = \"t\"\nperiod = \"1ms\"\naction = { kind = \"mark\" }\n"),
        ("at", "[[event]]\nat = \"8785h\"\naction = { kind = \"mark\" }\n"),
    ] {
        let e = err(body);
        assert!(e.contains(field) && e.contains("limit of 365 days"), "{e}");
    }
    // A year itself is accepted.
    parse_str(
        "[plan]\nduration = \"8760h\"\n[[task]]\nname = \"t\"\nperiod = \"8760h\"\naction = { kind = \"mark\" }\n",
        "p.toml",
        None,
    )
    .unwrap();
}

#[test]
fn a_plan_denser_than_the_kernel_can_wake_is_refused_on_an_unshielded_cpu_with_the_figures() {
    // 100 k releases/s with the kernel needing 50 us to wake the dispatcher: it would never sleep.
    let p = tasks_plan(&[("fast", "10us", "0us", None)]);
    let cfg = |budget| Config {
        bound: 0.9,
        margin: 50_000,
        spin_budget: budget,
    };
    let r = admission::check(&p, &[1], &cfg(Some(0.5)));
    assert!(!r.feasible());
    let why = r.reasons().join("; ");
    for figure in [
        "CPU 1",
        "100000 releases/s",
        "50us",
        "100.0 %",
        "50.0 %",
        "shield = true",
        "--spin-budget 100%",
    ] {
        assert!(why.contains(figure), "{figure} missing from: {why}");
    }
    // Shielded (no budget), or a budget that covers it: admitted.
    assert!(admission::check(&p, &[1], &cfg(None)).feasible());
    assert!(admission::check(&p, &[1], &cfg(Some(1.0))).feasible());
    // 1 kHz spins 5 % of the CPU: well within the default budget.
    let slow = tasks_plan(&[("slow", "1ms", "0us", None)]);
    assert!(admission::check(&slow, &[1], &cfg(Some(0.5))).feasible());
}

#[test]
fn repeat_copies_the_event_table_like_rt_schedule_events() {
    let ev = |s: &str| {
        parse_str(s, "r.toml", None)
            .map(|p| p.events.iter().map(|e| e.at).collect::<Vec<u64>>())
            .map_err(|e| e.to_string())
    };
    let table = "[[event]]\nat = \"0ms\"\naction = { kind = \"mark\" }\n[[event]]\nat = \"1ms\"\naction = { kind = \"mark\" }\n";
    // Default spacing: the last instant plus the mean spacing (1 ms): copies at 2 and 4 ms.
    assert_eq!(
        ev(&format!("[plan]\nrepeat = 3\n{table}")).unwrap(),
        [0, 1, 2, 3, 4, 5].map(|m| m * 1_000_000)
    );
    assert_eq!(
        ev(&format!(
            "[plan]\nrepeat = 2\nrepeat_every = \"10ms\"\n{table}"
        ))
        .unwrap(),
        [0, 1_000_000, 10_000_000, 11_000_000]
    );
    assert_eq!(
        ev(&format!("[plan]\nrepeat = 1\n{table}")).unwrap(),
        [0, 1_000_000]
    );
    for (bad, says) in [
        (format!("[plan]\nrepeat = 0\n{table}"), "at least 1"),
        (format!("[plan]\nrepeat = 2\nrepeat_every = \"1ms\"\n{table}"), "must be longer"),
        (format!("[plan]\nrepeat_every = \"5ms\"\n{table}"), "needs repeat"),
        ("[plan]\nrepeat = 2\n[[event]]\nat = \"1ms\"\naction = { kind = \"mark\" }\n".to_string(), "single event"),
        ("[plan]\nrepeat = 2\n[[task]]\nname = \"t\"\nperiod = \"1ms\"\naction = { kind = \"mark\" }\n".to_string(), "no event"),
        (format!("[plan]\nrepeat = 100000000\n{table}"), "more than"),
    ] {
        let e = ev(&bad).unwrap_err();
        assert!(e.contains(says) && e.contains("r.toml:"), "{says}: {e}");
    }
}

/// Issue 32, Low (wraps): a CSV event at u64::MAX compiled, was admitted and fired at once (the
/// start plus it wrapped). Refused in the CSV, and in any plan (a compiled one) by validation.
#[test]
fn wraps_an_event_past_a_year_is_refused_from_csv_and_compiled_plans() {
    let p = parse_str(GOOD, "p.toml", None).unwrap();
    let csv = format!("at_ns,action,data_hex\n{},ping,\n", u64::MAX);
    let e = compiled::events_from_csv(&p, csv.as_bytes(), "e.csv")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("e.csv:2:") && e.contains("later than a year"),
        "{e}"
    );
    let mut q = p.clone();
    let mut late = q.events[0];
    late.at = u64::MAX;
    q.events.push(late);
    let bytes = compiled::to_bytes(&q);
    let e = match compiled::read(&bytes[..], "q.plan") {
        Err(e) => e.to_string(),
        Ok(plan) => parse::validate_plan(&plan).unwrap_err(),
    };
    assert!(e.contains("later than a year"), "{e}");
}

/// Issue 32, Low (memory amplification): a 100-byte plan whose `repeat` made 50 million events
/// took 1.6 GB. `repeat` stops at a million events (24 MB).
#[test]
fn memory_amplification_a_small_plan_cannot_repeat_past_a_million_events() {
    let text = "[plan]\nrepeat = 2000000\nrepeat_every = \"1ms\"\n[[event]]\nat = \"0us\"\naction = { kind = \"mark\" }\n";
    assert!(text.len() < 120);
    let e = parse_str(text, "p.toml", None).unwrap_err().to_string();
    assert!(e.contains("more than 1000000"), "{e}");
    let ok = text.replace("2000000", "1000000");
    assert_eq!(
        parse_str(&ok, "p.toml", None).unwrap().events.len(),
        1_000_000
    );
}

/// A lone `wake` task of 10 ms against the tick (60 us at 4 ms boundaries): the first phase clear
/// of the tick and its guard sits 85 us after it, where the hand-over, one lead earlier, falls on
/// the tick again (kurt-periodic (d) 1 process, b51). Its releases keep the lead span clear, and
/// so does a stream's quietest phase.
#[test]
fn auto_offsets_keep_the_stretch_before_each_release_clear_of_the_tick() {
    let t0 = 5_000_000_000;
    let inf = tick_and_host(t0);
    let mut p = tasks_plan(&[("p0", "10ms", "auto", None)]);
    admission::phase_avoiding(&mut p, &[1], Some((&inf, t0)));
    let o = p.tasks[0].offset.ns();
    let span = admission::AVOID_LEAD_SPAN;
    assert_eq!(
        inf.lead_share(t0 + o, 10_000_000, span),
        0.0,
        "offset {o} ns"
    );
    assert_eq!(inf.hit_share(t0 + o, 10_000_000), 0.0);
    // A 500 us stream: its quietest phase has no send within the span after a window when one
    // exists (the tick every 4 ms and the host every 10 ms leave room).
    let (phase, hit, _) = inf.quietest_phase(500_000, admission::AVOID_GUARD);
    assert_eq!(hit, 0.0);
    let lead = inf.lead_share(t0 + phase, 500_000, admission::AVOID_LEAD_SPAN);
    assert!(lead < 0.2, "{lead}");
}
