//! Issue 28: rt-app task files given to `punctual run`, `plan check` and `plan convert`. rt-app's
//! own examples (Debian's rt-app ships them) each convert or are refused naming a key of the file;
//! and rt-app and punctual run one file side by side for the same number of periods.

mod common;
use common::{punctual, write_file};
use punctual_testkit::{exclusive_cpu, missing, need_root, tool};
use std::path::{Path, PathBuf};
use std::time::Duration;

const T: Duration = Duration::from_secs(120);
const EXAMPLES: &str = "/usr/share/doc/rt-app/examples";

fn examples(test: &str) -> Option<Vec<PathBuf>> {
    tool(test, "rt-app", "rt-app")?;
    let mut files = Vec::new();
    let mut dirs = vec![PathBuf::from(EXAMPLES)];
    while let Some(d) = dirs.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            missing(
                test,
                &format!("{} is missing (apt-get install -y rt-app)", d.display()),
            );
            return None;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "json") {
                files.push(p);
            }
        }
    }
    files.sort();
    Some(files)
}

#[test]
fn every_shipped_example_converts_or_is_refused_naming_a_key_of_the_file() {
    let test = "every_shipped_example_converts_or_is_refused_naming_a_key_of_the_file";
    let Some(files) = examples(test) else {
        return;
    };
    assert!(files.len() >= 10, "{files:?}");
    let located = regex::Regex::new(r"^punctual: error: .+\.json:(\d+):(\d+): (.+)$").unwrap();
    let mut converted = Vec::new();
    for f in &files {
        let out = punctual()
            .args(["plan", "convert"])
            .arg(f)
            .timeout(T)
            .output()
            .unwrap();
        let text = std::fs::read_to_string(f).unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        match out.status.code() {
            Some(0) => {
                // The TOML is a plan punctual reads back.
                let toml = String::from_utf8(out.stdout).unwrap();
                let plan = punctual_plan::parse_str(&toml, "converted.toml", None)
                    .unwrap_or_else(|e| panic!("{}: {e}\n{toml}", f.display()));
                assert!(!plan.tasks.is_empty());
                converted.push(f.file_name().unwrap().to_string_lossy().into_owned());
            }
            Some(2) => {
                let line = stderr
                    .lines()
                    .find(|l| l.starts_with("punctual: error:"))
                    .unwrap();
                let c = located
                    .captures(line)
                    .unwrap_or_else(|| panic!("{}: no place in {line:?}", f.display()));
                let (row, what) = (c[1].parse::<usize>().unwrap(), &c[3]);
                // The refusal names a key, and that key is in the file at the line it names.
                let key = match what.split_once(": ") {
                    Some((path, _)) if !path.contains(' ') => {
                        path.rsplit('.').next().unwrap().to_string()
                    }
                    _ => what
                        .split('"')
                        .nth(1)
                        .unwrap_or_else(|| panic!("{line}"))
                        .to_string(),
                };
                let at = text.lines().nth(row - 1).unwrap_or_default();
                assert!(
                    at.contains(&format!("\"{key}\"")),
                    "{}: `{key}` is not on line {row}: {at:?} ({line})",
                    f.display()
                );
                assert!(out.stdout.is_empty());
            }
            other => panic!("{}: exit {other:?}: {stderr}", f.display()),
        }
    }
    // The tutorial's periodic examples are within the subset.
    for name in ["example2.json", "example3.json", "template.json"] {
        assert!(
            converted.iter().any(|c| c == name),
            "{name} did not convert: {converted:?}"
        );
    }
}

/// One task: `loops` periods of 10 ms, each running 1 ms, pinned to `cpu`, SCHED_FIFO 50.
fn side_by_side_file(dir: &Path, loops: u64, cpu: usize) -> PathBuf {
    let text = format!(
        r#"{{
    "tasks" : {{
        "t0" : {{
            "loop" : 1, "policy" : "SCHED_FIFO", "priority" : 50, "cpus" : [{cpu}],
            "phases" : {{
                "p0" : {{ "loop" : {loops}, "run" : 1000,
                          "timer" : {{ "ref" : "unique", "period" : 10000 }} }}
            }}
        }}
    }},
    "global" : {{
        "duration" : -1, "calibration" : "CPU{cpu}", "default_policy" : "SCHED_OTHER",
        "lock_pages" : true, "logdir" : "{}", "log_basename" : "side"
    }}
}}"#,
        dir.display()
    );
    write_file(dir, "side.json", &text)
}

#[test]
fn rt_app_and_punctual_run_one_file_for_the_same_number_of_periods() {
    let test = "rt_app_and_punctual_run_one_file_for_the_same_number_of_periods";
    let Some(rtapp) = tool(test, "rt-app", "rt-app") else {
        return;
    };
    if !need_root(test, "SCHED_FIFO tasks") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let _cpu = exclusive_cpu();
    let cpu = common::last_cpu();
    let file = side_by_side_file(dir.path(), 60, cpu);
    // rt-app: one log line per period.
    let out = std::process::Command::new(rtapp)
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "rt-app: {out:?}");
    let log = std::fs::read_to_string(dir.path().join("side-t0-0.log")).unwrap();
    let rows: Vec<Vec<i64>> = log
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().map(|x| x.parse().unwrap()).collect())
        .collect();
    assert_eq!(rows.len(), 60, "rt-app's periods:\n{log}");
    // punctual: the same file, the same periods, lateness per task in its document.
    let json = dir.path().join("p.json");
    let run = punctual()
        .args(["run", "--no-store", "--json"])
        .arg(&json)
        .arg(&file)
        .timeout(T)
        .output()
        .unwrap();
    assert!(run.status.success(), "{run:?}");
    let doc = common::valid_doc(&json);
    let task = doc["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "t0")
        .expect("the task's series");
    assert_eq!(task["kind"], "lateness");
    assert_eq!(
        task["count"].as_u64().unwrap() + task["missed_periods"].as_u64().unwrap(),
        60,
        "punctual's periods: {task}"
    );
    // Beside each other with --nocapture (never asserted: they are measurements).
    let wu: Vec<i64> = rows.iter().map(|r| r[10]).collect();
    eprintln!(
        "rt-app wu_lat max {} us; punctual lateness p99 {} ns, max {} ns",
        wu.iter().max().unwrap(),
        task["percentiles"]["99"],
        task["max"]
    );
}

#[test]
fn run_and_check_refuse_an_unsupported_file_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_file(
        dir.path(),
        "locks.json",
        r#"{ "tasks" : { "a" : { "lock" : "m", "run" : 10, "unlock" : "m",
            "timer" : { "ref" : "unique", "period" : 1000 } } } }"#,
    );
    let json = dir.path().join("out.json");
    for args in [&["run", "--no-store", "--json"][..], &["plan", "check"]] {
        let mut c = punctual();
        c.args(args);
        if args[0] == "run" {
            c.arg(&json);
        }
        c.arg(&file)
            .timeout(T)
            .assert()
            .code(2)
            .stderr(predicates::str::contains(
                "locks.json:1:23: tasks.a.lock: \"lock\" is not supported",
            ));
    }
    assert!(!json.exists(), "nothing ran, nothing was written");
    // A file in the subset is admitted by `plan check`.
    let ok = write_file(
        dir.path(),
        "ok.json",
        r#"{ "tasks" : { "a" : { "run" : 100, "timer" : { "ref" : "unique", "period" : 10000 } } } }"#,
    );
    punctual()
        .args(["plan", "check"])
        .arg(&ok)
        .timeout(T)
        .assert()
        .success()
        .stdout(predicates::str::contains("verdict: admitted"));
}
