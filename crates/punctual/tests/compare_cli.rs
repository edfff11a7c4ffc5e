//! `punctual compare` through the binary: the text and Markdown tables (snapshots), the CI gate's
//! exit codes, JSON on stdout, and bad input. Documents are built here, so every number is known.

mod common;
use common::punctual;
use punctual_result::{doc::kind, ResultDoc, Series};
use punctual_stats::Recorder;

fn fake_host() -> punctual_result::HostFacts {
    punctual_session::Env::fake(&[]).host()
}

/// A latency document whose thread `t` wakes `base + spread` ns late, p99 scaled by `tail`.
fn doc(threads: &[(usize, u64)], tail: f64) -> ResultDoc {
    let mut d = ResultDoc::new(
        vec![
            "punctual".into(),
            "latency".into(),
            "-D".into(),
            "2s".into(),
        ],
        fake_host(),
        "2026-01-01T00:00:00Z".into(),
    );
    d.settings.policy = Some("fifo".into());
    d.settings.priority = Some(99);
    for &(t, base) in threads {
        let mut r = Recorder::new();
        for i in 0..20_000u64 {
            let body = base + (i * 7919) % 4_000;
            let v = if i % 50 == 0 {
                ((20_000 + (i * 104_729) % 30_000) as f64 * tail) as u64
            } else {
                body
            };
            r.record(v);
        }
        r.add_missed(t as u64);
        d.series.push(Series::from_recorder(
            format!("thread {t}"),
            kind::WAKEUP_LATENCY,
            Some(t),
            &r,
        ));
    }
    d
}

/// (exit code, stdout, stderr) of the real binary.
fn run_cli(args: &[&str]) -> (i32, String, String) {
    let o = punctual().args(&args[1..]).output().unwrap();
    (
        o.status.code().unwrap(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new(docs: &[(&str, ResultDoc)]) -> Files {
        let dir = tempfile::tempdir().unwrap();
        for (name, d) in docs {
            std::fs::write(dir.path().join(name), d.to_json()).unwrap();
        }
        Files { dir }
    }
    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_string_lossy().into_owned()
    }
    /// Output without the temporary directory's name.
    fn clean(&self, s: &str) -> String {
        s.replace(&format!("{}/", self.dir.path().display()), "")
    }
}

#[test]
fn compare_text_and_markdown_snapshots() {
    let f = Files::new(&[
        ("a.json", doc(&[(0, 3_000), (1, 5_000)], 1.0)),
        ("b.json", {
            let mut b = doc(&[(0, 3_000), (1, 5_000), (2, 4_000)], 1.25);
            b.host.kernel = "6.13.0-rt".into();
            b.settings.policy = Some("other".into());
            b
        }),
    ]);
    let (code, out, err) = run_cli(&["punctual", "compare", &f.path("a.json"), &f.path("b.json")]);
    assert_eq!(
        code, 0,
        "no --fail-on-regression: a regression is reported, not an exit"
    );
    assert!(err.is_empty(), "{err}");
    insta::assert_snapshot!("compare_text", f.clean(&out));
    let (_, out, _) = run_cli(&[
        "punctual",
        "compare",
        "--markdown",
        &f.path("a.json"),
        &f.path("b.json"),
    ]);
    insta::assert_snapshot!("compare_markdown", f.clean(&out));
}

#[test]
fn compare_fail_on_regression_exits_1_past_the_limit_and_0_below() {
    let f = Files::new(&[
        ("a.json", doc(&[(0, 3_000)], 1.0)),
        ("b.json", doc(&[(0, 3_000)], 1.25)),
    ]);
    let (a, b) = (f.path("a.json"), f.path("b.json"));
    let (code, _, err) = run_cli(&["punctual", "compare", &a, &b, "--fail-on-regression", "10"]);
    assert_eq!(code, 1);
    assert!(err.contains("regression: thread 0"), "{err}");
    let (code, _, _) = run_cli(&["punctual", "compare", &a, &b, "--fail-on-regression=40"]);
    assert_eq!(code, 0, "a 25 % rise is under a 40 % limit");
    // Improvements never fail the gate.
    let (code, _, _) = run_cli(&["punctual", "compare", &b, &a, "--fail-on-regression", "0"]);
    assert_eq!(code, 0);
}

#[test]
fn compare_json_to_stdout_moves_the_tables_to_stderr() {
    let f = Files::new(&[
        ("a.json", doc(&[(0, 3_000)], 1.0)),
        ("b.json", doc(&[(0, 3_000)], 1.0)),
    ]);
    let (code, out, err) = run_cli(&[
        "punctual",
        "compare",
        &f.path("a.json"),
        &f.path("b.json"),
        "--json",
        "-",
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).expect("clean JSON on stdout");
    assert_eq!(v["schema"], "punctual.compare/2");
    assert_eq!(
        v["series"][0]["against"][0]["verdict"],
        "no_significant_change"
    );
    assert!(err.contains("verdicts"));
}

#[test]
fn compare_bad_input_names_the_problem() {
    let f = Files::new(&[
        ("a.json", doc(&[(0, 3_000)], 1.0)),
        ("c.json", doc(&[(1, 3_000)], 1.0)),
    ]);
    std::fs::write(f.path("junk.json"), "{\"not\": 1}").unwrap();
    let refused = |args: &[&str]| {
        let (code, _, err) = run_cli(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        err
    };
    // Nothing stored yet (the tests' own data directory): no store, and none is created.
    let m = refused(&["punctual", "compare", &f.path("a.json"), "latest"]);
    assert!(m.contains("there is no results store"), "{m}");
    // A document from a newer punctual is refused by its schema.
    let mut newer: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(f.path("a.json")).unwrap()).unwrap();
    newer["schema"] = "punctual.result/2".into();
    std::fs::write(f.path("newer.json"), newer.to_string()).unwrap();
    let m = refused(&[
        "punctual",
        "compare",
        &f.path("a.json"),
        &f.path("newer.json"),
    ]);
    assert!(
        m.contains("punctual.result/2") && m.contains("does not read"),
        "{m}"
    );
    // Sides: nothing before `--`, tags mixed with results, --command without a tag.
    let m = refused(&["punctual", "compare", "--", &f.path("a.json")]);
    assert!(m.contains("nothing before `--`"), "{m}");
    let m = refused(&[
        "punctual",
        "compare",
        &f.path("a.json"),
        "--",
        &f.path("a.json"),
        "--json",
        "-",
    ]);
    assert!(m.contains("give options before `--`"), "{m}");
    let m = refused(&["punctual", "compare", "--tag", "k=v", &f.path("a.json")]);
    assert!(m.contains("not both"), "{m}");
    let m = refused(&[
        "punctual",
        "compare",
        "--command",
        "latency",
        &f.path("a.json"),
        &f.path("a.json"),
    ]);
    assert!(m.contains("--command selects tagged results"), "{m}");
    let m = refused(&["punctual", "compare", &f.path("a.json")]);
    assert!(m.contains("at least 2 results"), "{m}");
    let m = refused(&[
        "punctual",
        "compare",
        &f.path("a.json"),
        &f.path("junk.json"),
    ]);
    assert!(m.contains("not a punctual result document"), "{m}");
    let m = refused(&["punctual", "compare", &f.path("a.json"), &f.path("c.json")]);
    assert!(
        m.contains("thread 1 (wakeup_latency, cpu 1): absent from A"),
        "mismatched series are named: {m}"
    );
    let m = refused(&[
        "punctual",
        "compare",
        "--fail-on-regression",
        &f.path("a.json"),
        &f.path("a.json"),
        &f.path("a.json"),
    ]);
    assert!(m.contains("give the results first"), "{m}");
}

/// `latency --repeat 3` twice, then `compare A1 A2 A3 -- B1 B2 B3` and `--tag` sides: the
/// between-run method, numbered files, one stored result per run.
#[test]
fn repeated_runs_make_sides_compared_across_runs() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s.db");
    let store = store.to_str().unwrap();
    let mut files = Vec::new();
    for side in ["a", "b"] {
        let json = dir.path().join(format!("{side}.json"));
        let (code, out, err) = run_cli(&[
            "punctual",
            "latency",
            "-D",
            "300ms",
            "-i",
            "1ms",
            "--policy",
            "other",
            "--repeat",
            "3",
            "--store",
            store,
            "--tag",
            &format!("side={side}"),
            "--json",
            json.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("3 runs stored:"), "{out}");
        for k in 1..=3 {
            let f = dir.path().join(format!("{side}-{k}.json"));
            let doc = ResultDoc::from_json(&std::fs::read_to_string(&f).unwrap()).unwrap();
            assert_eq!(doc.tags.get("side").map(String::as_str), Some(side));
            files.push(f.to_string_lossy().into_owned());
        }
        assert!(!json.exists(), "each run writes its own file");
    }
    let mut args = vec!["punctual", "compare"];
    args.extend(files[..3].iter().map(String::as_str));
    args.push("--");
    args.extend(files[3..].iter().map(String::as_str));
    let (code, out, err) = run_cli(&args);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("compare: B (3 runs) against A (3 runs)"),
        "{out}"
    );
    assert!(out.contains("across runs (Welch's t"), "{out}");
    let (code, out, err) = run_cli(&[
        "punctual", "compare", "--store", store, "--tag", "side=a", "--tag", "side=b", "--last",
        "3",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("compare: B (3 runs) against A (3 runs)"),
        "{out}"
    );
    // Stdout cannot take three documents.
    let (code, _, err) = run_cli(&[
        "punctual",
        "latency",
        "-D",
        "100ms",
        "--repeat",
        "2",
        "--no-store",
        "--json",
        "-",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("--repeat"), "{err}");
}
