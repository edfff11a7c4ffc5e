//! `punctual compare` and `punctual report` through the real binary: exit codes for CI gates, and
//! the HTML report rendered by headless Chromium (not blank, every figure there, no console errors).

mod common;

use common::punctual;
use punctual_result::{doc::kind, ResultDoc, Series};
use punctual_stats::Recorder;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn doc(threads: &[usize], tail: f64) -> ResultDoc {
    let mut d = ResultDoc::new(
        vec!["punctual".into(), "latency".into()],
        punctual_session::Env::fake(&[]).host(),
        "2026-01-01T00:00:00Z".into(),
    );
    for &t in threads {
        let mut r = Recorder::new();
        for i in 0..50_000u64 {
            r.record(if i % 50 == 0 {
                ((20_000 + (i * 104_729) % 30_000) as f64 * tail) as u64
            } else {
                3_000 + (i * 7919) % 4_000
            });
        }
        d.series.push(Series::from_recorder(
            format!("thread {t}"),
            kind::WAKEUP_LATENCY,
            Some(t),
            &r,
        ));
    }
    d
}

fn write(dir: &Path, name: &str, d: &ResultDoc) -> String {
    let p = dir.join(name);
    std::fs::write(&p, d.to_json()).unwrap();
    p.to_string_lossy().into_owned()
}

#[test]
fn compare_fail_on_regression_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.json", &doc(&[0, 1], 1.0));
    let b = write(dir.path(), "b.json", &doc(&[0, 1], 1.3));
    punctual()
        .args(["compare", &a, &b, "--fail-on-regression", "10"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("regression: thread 0"));
    punctual()
        .args(["compare", &a, &b, "--fail-on-regression", "50"])
        .assert()
        .code(0);
    punctual()
        .args(["compare", &a, &a, "--fail-on-regression"])
        .assert()
        .code(0)
        .stdout(predicates::str::contains("no significant change"));
    // Bad input is exit 2, with the reason.
    punctual()
        .args(["compare", &a, "latest~1"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("no stored result 'latest~1'"));
    punctual()
        .args(["compare", &a, &b, "--percentile", "101"])
        .assert()
        .code(2);
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

/// Run a child for at most `limit`, killing it (by its pid) past that; (status, stderr).
fn run_bounded(mut cmd: Command, limit: Duration) -> (Option<std::process::ExitStatus>, String) {
    let err = tempfile::NamedTempFile::new().unwrap();
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(err.reopen().unwrap())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (
        status,
        std::fs::read_to_string(err.path()).unwrap_or_default(),
    )
}

#[test]
fn report_renders_in_headless_chromium() {
    let name = "report_renders_in_headless_chromium";
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.json", &doc(&[0, 1], 1.0));
    let mut other = doc(&[0, 1, 2], 1.3);
    other.settings.fallbacks.push(punctual_result::Fallback {
        setting: "policy".into(),
        wanted: "fifo 99".into(),
        got: "other".into(),
        why: "no CAP_SYS_NICE <script>".into(),
        fix: "run as root".into(),
    });
    let b = write(dir.path(), "b.json", &other);
    let samples = dir.path().join("samples.csv");
    let mut csv = String::from("thread,release_ns,latency_ns\n");
    for k in 0..20_000u64 {
        csv.push_str(&format!(
            "{},{},{}\n",
            k % 2,
            k * 1_000_000,
            3_000 + (k * 31) % 5_000
        ));
    }
    std::fs::write(&samples, csv).unwrap();
    let html = dir.path().join("report.html");
    punctual()
        .args(["report", &a, &b, "-o"])
        .arg(&html)
        .arg("--samples")
        .arg(&samples)
        .assert()
        .code(0);
    let text = std::fs::read_to_string(&html).unwrap();
    // Every figure is there with its title: 2 overlays (thread 0, thread 1), per result one CDF
    // and one histogram per series (A: 1 + 2, B: 1 + 3), one timeline.
    let expected = [
        "CDF: thread 0 (wakeup_latency, cpu 0)",
        "CDF: thread 1 (wakeup_latency, cpu 1)",
        "A: CDF",
        "A: histogram of thread 0 (wakeup_latency, cpu 0)",
        "A: histogram of thread 1 (wakeup_latency, cpu 1)",
        "B: CDF",
        "B: histogram of thread 0 (wakeup_latency, cpu 0)",
        "B: histogram of thread 1 (wakeup_latency, cpu 1)",
        "B: histogram of thread 2 (wakeup_latency, cpu 2)",
    ];
    assert_eq!(text.matches("<svg").count(), expected.len() + 1, "figures");
    for t in expected {
        assert!(
            text.contains(&format!("<title>{t}</title>")),
            "missing figure '{t}'"
        );
    }
    assert!(text.contains("<title>Lateness over time: "));
    assert!(
        !text.contains("<script"),
        "no script, and names from documents are escaped"
    );
    assert!(text.contains("no CAP_SYS_NICE &lt;script&gt;"));
    for fetch in ["src=\"http", "href=\"http", "url(http", "@import"] {
        assert!(!text.contains(fetch), "nothing fetched: {fetch}");
    }

    let Some(chromium) = which("chromium").or_else(|| which("chromium-browser")) else {
        punctual_testkit::missing(name, "chromium missing (apt-get install -y chromium)");
        return;
    };
    let png = dir.path().join("report.png");
    let mut cmd = Command::new(chromium);
    cmd.arg("--headless")
        .arg("--no-sandbox")
        .arg("--disable-gpu")
        .arg(format!(
            "--user-data-dir={}",
            dir.path().join("profile").display()
        ))
        .arg(format!("--screenshot={}", png.display()))
        .arg("--window-size=1200,4000")
        .arg("--enable-logging=stderr")
        .arg("--v=0")
        .arg(format!("file://{}", html.display()));
    let (status, stderr) = run_bounded(cmd, Duration::from_secs(120));
    assert!(
        status.is_some_and(|s| s.success()),
        "chromium failed: {stderr}"
    );
    for bad in ["Uncaught", "ERROR:CONSOLE"] {
        assert!(
            !stderr.contains(bad),
            "console error in the report: {stderr}"
        );
    }
    let decoder = png::Decoder::new(std::fs::File::open(&png).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let bytes = &buf[..info.buffer_size()];
    let px = info.color_type.samples();
    assert!(px >= 3, "an RGB screenshot");
    let mut colours = std::collections::HashSet::new();
    let mut non_white = 0usize;
    for p in bytes.chunks_exact(px) {
        colours.insert((p[0], p[1], p[2]));
        if p[0] < 240 || p[1] < 240 || p[2] < 240 {
            non_white += 1;
        }
    }
    let pixels = bytes.len() / px;
    eprintln!(
        "{name}: {}x{} screenshot, {} colours, {:.1} % not white",
        info.width,
        info.height,
        colours.len(),
        100.0 * non_white as f64 / pixels as f64
    );
    assert!(
        colours.len() >= 20,
        "a blank page has one colour: {}",
        colours.len()
    );
    assert!(
        non_white * 100 >= pixels,
        "at least 1 % drawn: {non_white} of {pixels}"
    );
}
