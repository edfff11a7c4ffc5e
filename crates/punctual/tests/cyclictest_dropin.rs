//! Issue 28: `punctual cyclictest` against rt-tests' own cyclictest. Both run with the same flags on
//! the same CPU, and one parser reads both outputs: every line must have one of cyclictest's
//! shapes, both outputs the same shapes in the same order with the same field counts, the
//! histogram's `# Total` the sum of its rows (overflows apart), the overflow cycle numbers as many
//! as cyclictest keeps, the JSON the same keys. Latency values are never compared or bounded; the
//! settings that show in the output (threads, priorities, intervals, CPUs, loops) are.

mod common;
use common::{bin_path, last_cpu, punctual};
use punctual_testkit::{exclusive_cpu, need_root, tool};
use regex::Regex;
use std::path::Path;
use std::time::Duration;

const T: Duration = Duration::from_secs(120);

/// The kind of each line cyclictest writes, recognised by its exact shape.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Line {
    DmaLatency,
    /// `policy: ...` (after the cursor-up of a redraw when `redraw`).
    Policy {
        redraw: Option<usize>,
    },
    Blank,
    /// `T: n (tid) P:p I:i C:c ...`: thread, priority, interval, cycles.
    Status {
        t: usize,
        p: u32,
        i: u64,
        c: u64,
    },
    HistHeader,
    /// A bucket: its number and one count per column.
    Bucket(u64, Vec<u64>),
    /// `# Total:`, `# Min Latencies:` ...: the label and its values.
    Trailer(String, Vec<u64>),
    OverflowHeader,
    /// `# Thread n:` with its cycle numbers and the `others` count.
    Overflows(usize, Vec<u64>, u64),
    Spike,
    Spikes(u64),
}

struct Shapes {
    policy: Regex,
    status: Regex,
    bucket: Regex,
    trailer: Regex,
    thread: Regex,
    spike: Regex,
}

impl Shapes {
    fn new() -> Shapes {
        Shapes {
            policy: Regex::new(
                r"^(?:\x1b\[(\d+)A)?policy: (fifo|rr|other/other): loadavg: [\d.]+ [\d.]+ [\d.]+ \d+/\d+ \d+ {10}$",
            )
            .unwrap(),
            status: Regex::new(
                r"^T:([ \d]{2}) \(([ \d]{5}|\d{6,})\) P:([ \d]{2}) I:(\d+) C:([ \d]{7}|\d{8,}) Min:([ \d]{7}|\d{8,}) Act:([ \d]{5}|\d{6,}) Avg:([ \d]{5}|\d{6,}) Max:([ \d]{8}|\d{9,})$",
            )
            .unwrap(),
            bucket: Regex::new(r"^(\d{6,}) (\d{6,}(?:\t\d{6,})*)$").unwrap(),
            trailer: Regex::new(
                r"^# (Total|Min Latencies|Avg Latencies|Max Latencies|Histogram Overflows):((?: \d+)+)$",
            )
            .unwrap(),
            thread: Regex::new(r"^# Thread (\d+):((?: \d{5,})*)(?: # (\d{5,}) others)?$").unwrap(),
            spike: Regex::new(r"^T:[ \d]{2} Spike:[ \d]{8,}: TS: [ \d]{12,}$").unwrap(),
        }
    }

    /// Every line of an output, classified; a line of no known shape fails the test.
    fn parse(&self, who: &str, text: &str) -> Vec<Line> {
        let num = |s: &str| s.trim().parse::<u64>().unwrap();
        let nums = |s: &str| s.split_whitespace().map(num).collect::<Vec<_>>();
        text.lines()
            .map(|l| {
                if l.is_empty() {
                    Line::Blank
                } else if Regex::new(r"^# /dev/cpu_dma_latency set to \d+us$")
                    .unwrap()
                    .is_match(l)
                {
                    Line::DmaLatency
                } else if let Some(c) = self.policy.captures(l) {
                    Line::Policy {
                        redraw: c.get(1).map(|m| num(m.as_str()) as usize),
                    }
                } else if let Some(c) = self.status.captures(l) {
                    Line::Status {
                        t: num(&c[1]) as usize,
                        p: num(&c[3]) as u32,
                        i: num(&c[4]),
                        c: num(&c[5]),
                    }
                } else if l == "# Histogram" {
                    Line::HistHeader
                } else if let Some(c) = self.bucket.captures(l) {
                    Line::Bucket(num(&c[1]), c[2].split('\t').map(num).collect())
                } else if let Some(c) = self.trailer.captures(l) {
                    Line::Trailer(c[1].to_string(), nums(&c[2]))
                } else if l == "# Histogram Overflow at cycle number:" {
                    Line::OverflowHeader
                } else if let Some(c) = self.thread.captures(l) {
                    Line::Overflows(
                        num(&c[1]) as usize,
                        nums(&c[2]),
                        c.get(3).map(|m| num(m.as_str())).unwrap_or(0),
                    )
                } else if self.spike.is_match(l) {
                    Line::Spike
                } else if let Some(n) = l.strip_prefix("spikes = ") {
                    Line::Spikes(num(n))
                } else {
                    panic!("{who}: a line cyclictest never writes: {l:?}\n{text}")
                }
            })
            .collect()
    }
}

/// What a line is, without its measured values: both tools must write the same sequence.
fn shape(l: &Line) -> String {
    match l {
        Line::Status { t, p, i, .. } => format!("T:{t} P:{p} I:{i}"),
        Line::Bucket(b, cols) => format!("bucket {b} x{}", cols.len()),
        Line::Trailer(label, v) => format!("{label} x{}", v.len()),
        Line::Overflows(t, ..) => format!("thread {t} overflows"),
        Line::Spike => "spike".into(),
        Line::Spikes(_) => "spikes".into(),
        other => format!("{other:?}"),
    }
}

/// What one histogram says, checked for consistency on its own: `# Total` is the sum of each
/// column's buckets, cycle numbers are as many as kept (at most one per bucket), increasing and
/// inside the run, and buckets plus overflows are the thread's samples (returned per thread).
fn check_histogram(who: &str, lines: &[Line], threads: usize, all: bool) -> Vec<u64> {
    let buckets: Vec<&Vec<u64>> = lines
        .iter()
        .filter_map(|l| match l {
            Line::Bucket(_, c) => Some(c),
            _ => None,
        })
        .collect();
    let columns = threads + usize::from(all && threads > 1);
    assert!(buckets.iter().all(|c| c.len() == columns), "{who}: columns");
    let trailer = |label: &str| -> Vec<u64> {
        lines
            .iter()
            .find_map(|l| match l {
                Line::Trailer(n, v) if n == label => Some(v.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{who}: no # {label}"))
    };
    let total = trailer("Total");
    assert_eq!(
        total.len(),
        columns,
        "{who}: # Total has a value per column"
    );
    for (c, t) in total.iter().enumerate() {
        let sum: u64 = buckets.iter().map(|b| b[c]).sum();
        assert_eq!(
            *t, sum,
            "{who}: # Total of column {c} is the sum of its buckets"
        );
    }
    assert_eq!(trailer("Min Latencies").len(), threads, "{who}");
    assert_eq!(trailer("Avg Latencies").len(), threads, "{who}");
    assert_eq!(trailer("Max Latencies").len(), columns, "{who}");
    let overflows = trailer("Histogram Overflows");
    assert_eq!(overflows.len(), columns, "{who}");
    let per_thread: Vec<(usize, Vec<u64>, u64)> = lines
        .iter()
        .filter_map(|l| match l {
            Line::Overflows(t, c, o) => Some((*t, c.clone(), *o)),
            _ => None,
        })
        .collect();
    assert_eq!(
        per_thread.iter().map(|p| p.0).collect::<Vec<_>>(),
        (0..threads).collect::<Vec<_>>(),
        "{who}: one `# Thread n:` line per thread, no more"
    );
    let mut samples = Vec::new();
    for (t, cycles, others) in per_thread {
        let n = total[t] + overflows[t];
        assert_eq!(
            cycles.len() as u64 + others,
            overflows[t],
            "{who}: thread {t}: cycle numbers and others make the overflows"
        );
        assert!(
            cycles.len() <= buckets.len(),
            "{who}: at most one cycle number per bucket"
        );
        assert!(
            cycles.windows(2).all(|w| w[0] < w[1]),
            "{who}: cycles increase"
        );
        assert!(
            cycles.iter().all(|&c| c < n),
            "{who}: cycle numbers inside the run"
        );
        samples.push(n);
    }
    samples
}

struct Run {
    stdout: String,
    json: serde_json::Value,
}

fn run_both(test: &str, args: &[&str], dir: &Path) -> Option<(Run, Run)> {
    let cyclictest = tool(test, "cyclictest", "rt-tests")?;
    if !need_root(test, "cyclictest needs real-time priority") {
        return None;
    }
    let go = |name: &str, cmd: &mut std::process::Command| {
        let json = dir.join(format!("{name}.json"));
        let out = cmd
            .args(args)
            .arg(format!("--json={}", json.display()))
            .output()
            .unwrap();
        assert!(out.status.success(), "{name} {args:?}: {out:?}");
        Run {
            stdout: String::from_utf8(out.stdout).unwrap(),
            json: serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap(),
        }
    };
    let theirs = go("cyclictest", &mut std::process::Command::new(cyclictest));
    let mut p = std::process::Command::new(bin_path());
    p.env("PUNCTUAL_DATA_DIR", dir.join("data"))
        .arg("cyclictest");
    let ours = go("punctual", &mut p);
    Some((theirs, ours))
}

/// The same keys at every level (histogram buckets apart: which are filled is measured).
fn same_keys(a: &serde_json::Value, b: &serde_json::Value, at: &str) {
    use serde_json::Value::Object;
    if let (Object(x), Object(y)) = (a, b) {
        if at.ends_with("histogram") {
            return;
        }
        let kx: Vec<_> = x.keys().collect();
        let ky: Vec<_> = y.keys().collect();
        assert_eq!(kx, ky, "JSON keys at {at}");
        for k in x.keys() {
            same_keys(&x[k], &y[k], &format!("{at}.{k}"));
        }
    } else {
        assert_eq!(
            std::mem::discriminant(a),
            std::mem::discriminant(b),
            "JSON type at {at}: {a} vs {b}"
        );
    }
}

/// Both outputs line by line: the same shapes, and the histogram consistent in each.
fn compare(
    theirs: &Run,
    ours: &Run,
    threads: usize,
    hist_all: Option<bool>,
) -> (Vec<Line>, Vec<Line>) {
    let shapes = Shapes::new();
    let a = shapes.parse("cyclictest", &theirs.stdout);
    let b = shapes.parse("punctual cyclictest", &ours.stdout);
    let sa: Vec<String> = a.iter().map(shape).collect();
    let sb: Vec<String> = b.iter().map(shape).collect();
    assert_eq!(
        sa, sb,
        "line shapes differ:\n{}\n---\n{}",
        theirs.stdout, ours.stdout
    );
    if let Some(all) = hist_all {
        check_histogram("cyclictest", &a, threads, all);
        check_histogram("punctual cyclictest", &b, threads, all);
    }
    same_keys(&theirs.json, &ours.json, "");
    for k in ["num_threads", "resolution_in_ns", "file_version", "sysinfo"] {
        assert_eq!(theirs.json[k], ours.json[k], "JSON {k}");
    }
    for t in 0..threads {
        let t = t.to_string();
        for k in ["cpu", "node"] {
            assert_eq!(
                theirs.json["thread"][&t][k], ours.json["thread"][&t][k],
                "thread {t} {k}"
            );
        }
    }
    (a, b)
}

#[test]
fn one_thread_histogram_with_overflows_matches_cyclictest() {
    let test = "one_thread_histogram_with_overflows_matches_cyclictest";
    let dir = tempfile::tempdir().unwrap();
    let _cpu = exclusive_cpu();
    let cpu = last_cpu().to_string();
    // 5 buckets of 1 us: wake-ups through the kernel land past them, so the overflow lines fill.
    let args = [
        "-m", "-q", "-l", "300", "-i", "500", "-h", "5", "-p", "80", "-a", &cpu,
    ];
    let Some((theirs, ours)) = run_both(test, &args, dir.path()) else {
        return;
    };
    let (a, b) = compare(&theirs, &ours, 1, Some(false));
    // One thread: every sample is in a bucket or an overflow, in both.
    assert_eq!(check_histogram("cyclictest", &a, 1, false), vec![300]);
    assert_eq!(check_histogram("punctual", &b, 1, false), vec![300]);
    assert_eq!(ours.json["thread"]["0"]["cycles"], 300);
    assert_eq!(theirs.json["thread"]["0"]["cycles"], 300);
}

#[test]
fn several_threads_histogram_matches_cyclictest_with_and_without_the_all_column() {
    let test = "several_threads_histogram_matches_cyclictest_with_and_without_the_all_column";
    let dir = tempfile::tempdir().unwrap();
    let _cpu = exclusive_cpu();
    let cpu = last_cpu().to_string();
    for (flag, buckets, all) in [
        ("-h", "2000", false),
        ("-H", "5", true),
        ("-H", "300", true),
    ] {
        let args = [
            "-m", "-q", "-l", "200", "-i", "500", flag, buckets, "-t", "3", "-a", &cpu, "-p", "80",
        ];
        let Some((theirs, ours)) = run_both(test, &args, dir.path()) else {
            return;
        };
        let (a, b) = compare(&theirs, &ours, 3, Some(all));
        let rows = a.iter().filter(|l| matches!(l, Line::Bucket(..))).count();
        assert_eq!(rows, buckets.parse::<usize>().unwrap());
        // cyclictest stops every thread when the first has its loops; punctual runs them all.
        let theirs_n = check_histogram("cyclictest", &a, 3, all);
        assert_eq!(theirs_n.iter().max(), Some(&200), "{theirs_n:?}");
        assert_eq!(check_histogram("punctual", &b, 3, all), vec![200, 200, 200]);
        // The thread columns of -H's trailer beside the column over all of them.
        if all {
            let total = b.iter().find_map(|l| match l {
                Line::Trailer(n, v) if n == "Total" => Some(v.clone()),
                _ => None,
            });
            let v = total.unwrap();
            assert_eq!(v[3], v[0] + v[1] + v[2]);
        }
    }
}

#[test]
fn quiet_summary_and_status_lines_match_cyclictest() {
    let test = "quiet_summary_and_status_lines_match_cyclictest";
    let dir = tempfile::tempdir().unwrap();
    let _cpu = exclusive_cpu();
    let cpu = last_cpu().to_string();
    // -q without -h: one status line per thread at the end. The default distance (500 us) gives
    // thread 1 an interval of 1500 us in both.
    let args = ["-m", "-q", "-l", "100", "-t", "2", "-a", &cpu, "-p", "70"];
    let Some((theirs, ours)) = run_both(test, &args, dir.path()) else {
        return;
    };
    let (_, b) = compare(&theirs, &ours, 2, None);
    let status: Vec<&Line> = b
        .iter()
        .filter(|l| matches!(l, Line::Status { .. }))
        .collect();
    assert_eq!(
        status,
        vec![
            &Line::Status {
                t: 0,
                p: 70,
                i: 1000,
                c: 100
            },
            &Line::Status {
                t: 1,
                p: 70,
                i: 1500,
                c: 100
            }
        ]
    );
    // Without -q: redrawn blocks, each after the cursor moves up over the previous one. Their
    // number follows the run's length and the redraw rate, so only their shape is compared.
    let args = ["-m", "-l", "400", "-t", "2", "-a", &cpu, "-p", "70"];
    let Some((theirs, ours)) = run_both(test, &args, dir.path()) else {
        return;
    };
    let shapes = Shapes::new();
    for (who, run) in [("cyclictest", &theirs), ("punctual", &ours)] {
        let lines = shapes.parse(who, &run.stdout);
        let blocks: Vec<&[Line]> = lines
            .split(|l| matches!(l, Line::Policy { .. }))
            .skip(1)
            .collect();
        assert!(blocks.len() >= 2, "{who}: {}", run.stdout);
        for (k, l) in lines
            .iter()
            .filter(|l| matches!(l, Line::Policy { .. }))
            .enumerate()
        {
            let want = if k == 0 { None } else { Some(4) };
            assert_eq!(l, &Line::Policy { redraw: want }, "{who}: block {k}");
        }
        for b in &blocks {
            let shape: Vec<String> = b.iter().map(shape).collect();
            assert_eq!(
                shape,
                vec!["Blank", "T:0 P:70 I:1000", "T:1 P:70 I:1500"],
                "{who}"
            );
        }
        // The last block is the end of the run: thread 0 has all its loops.
        match blocks.last().unwrap()[1] {
            Line::Status { c, .. } => assert_eq!(c, 400, "{who}"),
            _ => unreachable!(),
        }
    }
}

#[test]
fn latency_hist_writes_cyclictests_histogram_for_several_threads() {
    let dir = tempfile::tempdir().unwrap();
    let hist = dir.path().join("h.txt");
    punctual()
        .args([
            "latency",
            "-t",
            "2",
            "-a",
            "0",
            "-l",
            "150",
            "-i",
            "500us",
            "--no-store",
        ])
        .args(["--hist-buckets", "40", "--hist"])
        .arg(&hist)
        .timeout(T)
        .assert()
        .success();
    let text = std::fs::read_to_string(&hist).unwrap();
    let lines = Shapes::new().parse("latency --hist", &text);
    // Two columns (no total column), two `# Thread` lines, buckets plus overflows = samples.
    assert_eq!(
        check_histogram("latency --hist", &lines, 2, false),
        vec![150, 150]
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| matches!(l, Line::Bucket(..)))
            .count(),
        40
    );
}

#[test]
fn punctuals_own_document_keeps_the_extras_and_cyclictests_figures() {
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("p.json");
    let out = punctual()
        .args([
            "cyclictest",
            "-q",
            "-l",
            "80",
            "-t",
            "2",
            "-a",
            "0",
            "-h",
            "50",
        ])
        .arg(format!("--punctual-json={}", doc.display()))
        .timeout(T)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let doc = common::valid_doc(&doc);
    let series = doc["series"].as_array().unwrap();
    assert_eq!(series.len(), 3, "two threads and the total");
    assert_eq!(series[0]["count"], 80);
    assert!(series[0]["percentiles"]["99.9"].is_u64());
    let cyc = &doc["cyclictest"];
    assert_eq!(cyc["buckets"], 50);
    assert_eq!(cyc["threads"].as_array().unwrap().len(), 2);
    assert_eq!(cyc["threads"][1]["cycles"], 80);
    // The histogram on stdout is the document's.
    let text = String::from_utf8(out.stdout).unwrap();
    let lines = Shapes::new().parse("punctual cyclictest", &text);
    assert_eq!(check_histogram("punctual", &lines, 2, false), vec![80, 80]);
}

#[test]
fn bad_and_unsupported_flags_exit_2_naming_the_flag_and_nothing_runs() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("j.json");
    for (args, said) in [
        (
            &["-b", "100"][..],
            "-b/--breaktrace is not supported by punctual cyclictest",
        ),
        (&["--smi"], "--smi is not supported"),
        (&["-z"], "-z: unknown option"),
        (&["-h"], "-h/--histogram: needs a value"),
        (&["-p", "120"], "-p/--priority: 120: give 0 to 99"),
        (&["-D", "3x"], "-D/--duration"),
    ] {
        punctual()
            .arg("cyclictest")
            .arg(format!("--json={}", json.display()))
            .args(args)
            .timeout(T)
            .assert()
            .code(2)
            .stdout("")
            .stderr(predicates::str::contains(said));
    }
    assert!(!json.exists());
    punctual()
        .args(["cyclictest", "--help"])
        .assert()
        .success()
        .stdout(predicates::str::contains("--histofall=US"));
}

#[test]
fn an_interrupted_run_writes_its_histogram_and_json_and_exits_130() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("j.json");
    let child = std::process::Command::new(bin_path())
        .env("PUNCTUAL_DATA_DIR", dir.path().join("data"))
        .args(["cyclictest", "-q", "-h", "20", "-i", "500"])
        .arg(format!("--json={}", json.display()))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Until interrupted, as cyclictest: wait for the first samples, then Ctrl-C.
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let lines = Shapes::new().parse("interrupted", &text);
    let n = check_histogram("interrupted", &lines, 1, false);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["return_code"], 130);
    assert_eq!(doc["thread"]["0"]["cycles"], n[0]);
}
