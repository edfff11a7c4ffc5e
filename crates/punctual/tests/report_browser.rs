//! `punctual report` as a reader sees it, in headless Chromium: every report this test makes is
//! loaded unchanged in an iframe of a checking page (`browser/check.js`; the report has no script
//! of its own) and measured by Chromium's layout: no empty section, nothing wider than the window,
//! no text under 12 px, no figure text overlapping another or outside its figure, no axis whose
//! ticks all read alike, every embedded image showing. The findings come back through
//! `--dump-dom`. Screenshots of each report, in 1280x1300 slices (the report offset inside an
//! iframe, so no script is needed), are kept in `target/tmp/report-screenshots/` to look at.

mod common;

use common::punctual;
use punctual_result::{doc::kind, Fallback, ResultDoc, Series};
use punctual_stats::Recorder;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHECK_JS: &str = include_str!("browser/check.js");
const WIDTH: u32 = 1280;
const SLICE: u32 = 1300;

/// A latency-like series: a body around `base` ns and a tail of 1 in 50 scaled by `tail`.
fn series(name: &str, kind_: &str, cpu: Option<usize>, base: u64, tail: f64, n: u64) -> Series {
    let mut r = Recorder::new();
    for i in 0..n {
        r.record(if i % 50 == 0 {
            ((20_000 + (i * 104_729) % 30_000) as f64 * tail) as u64
        } else {
            base + (i * 7919) % 4_000
        });
    }
    if n > 0 {
        r.add_missed(cpu.unwrap_or(0) as u64);
    }
    Series::from_recorder(name, kind_, cpu, &r)
}

fn latency(tags: &[(&str, &str)], tail: f64, steal_ns: u64, started: &str) -> ResultDoc {
    let mut d = ResultDoc::new(
        [
            "/usr/bin/punctual",
            "latency",
            "-D",
            "10s",
            "--json",
            "x.json",
        ]
        .map(String::from)
        .to_vec(),
        punctual_session::Env::fake(&[]).host(),
        started.into(),
    );
    d.ended_at = started.replace(":00Z", ":10Z");
    d.settings.policy = Some("fifo".into());
    d.settings.priority = Some(99);
    d.settings.mlock = Some(true);
    d.settings.dma_latency_us = Some(0);
    let x = &mut d.settings.extra;
    x.insert("duration_ns".into(), json!(10_000_000_000u64));
    x.insert("interval_ns".into(), json!(1_000_000));
    x.insert("mode".into(), json!("abs"));
    x.insert("steal_ns".into(), json!({"0": 0, "1": steal_ns}));
    x.insert("steal_window_ns".into(), json!(10_000_000_000u64));
    x.insert("others_cpu_ns".into(), json!(1_500_000_000u64));
    for (k, v) in tags {
        d.tags.insert(k.to_string(), v.to_string());
    }
    d.run_id = Some(ResultDoc::new_run_id());
    for t in 0..2 {
        d.series.push(series(
            &format!("thread {t}"),
            kind::WAKEUP_LATENCY,
            Some(t),
            3_000 + 1_000 * t as u64,
            tail,
            20_000,
        ));
    }
    d
}

/// A `check` with its verdicts, four lateness phases, no steal at all, and a series without
/// samples.
fn check() -> ResultDoc {
    let mut d = ResultDoc::new(
        ["punctual", "check"].map(String::from).to_vec(),
        punctual_session::Env::fake(&[]).host(),
        "2026-11-02T09:00:00Z".into(),
    );
    d.ended_at = "2026-11-02T09:00:30Z".into();
    for (i, phase) in [
        "plain sleep idle",
        "punctual hybrid idle",
        "plain sleep loaded",
        "punctual hybrid loaded",
    ]
    .iter()
    .enumerate()
    {
        d.series.push(series(
            phase,
            kind::LATENESS,
            Some(1),
            if i % 2 == 0 { 21_000 } else { 1_000 },
            1.0 + i as f64,
            7_500,
        ));
    }
    d.series
        .push(series("idle extra", kind::LATENESS, Some(1), 0, 1.0, 0));
    d.settings
        .extra
        .insert("steal_ns".into(), json!({"0": 0, "1": 0}));
    d.settings
        .extra
        .insert("steal_window_ns".into(), json!(30_000_000_000u64));
    d.settings
        .extra
        .insert("load".into(), json!("cpu:2@0-1,io:1"));
    d.settings.extra.insert(
        "load_reports".into(),
        json!([{"kind": "cpu", "cpu": 0, "cpu_ns": 7_000_000_000u64, "ops": 5}]),
    );
    d.settings.fallbacks.push(Fallback {
        setting: "policy".into(),
        wanted: "fifo 99".into(),
        got: "other".into(),
        why: "no CAP_SYS_NICE <script>alert(1)</script>".into(),
        fix: "run as root".into(),
    });
    d.extra.insert(
        "verdict".into(),
        json!([{"class": "audio", "bound_ns": 100000,
                "plain_sleep": {"serves": "mostly", "fraction_within": 0.999},
                "hybrid": {"serves": "yes", "fraction_within": 1.0}}]),
    );
    d
}

/// An experiment with published numbers, IRQ durations and quanta (axes that are not latency).
fn experiment() -> ResultDoc {
    let mut d = ResultDoc::new(
        ["punctual", "experiment", "run", "etsion-latency"]
            .map(String::from)
            .to_vec(),
        punctual_session::Env::fake(&[]).host(),
        "2026-11-03T09:00:00Z".into(),
    );
    d.extra.insert("experiment".into(), json!("etsion-latency"));
    d.series.push(
        series("alarm 1", kind::ALARM_LATENCY, None, 2_000, 1.0, 20_000)
            .with("published_us", json!({"0.9": 7, "0.99": 8, "max": 900})),
    );
    d.series.push(series(
        "timer irq",
        kind::IRQ_DURATION,
        Some(0),
        800,
        0.2,
        5_000,
    ));
    d.series.push(series(
        "make",
        kind::EFFECTIVE_QUANTUM,
        Some(1),
        3_900_000,
        100.0,
        5_000,
    ));
    d
}

fn write(dir: &Path, name: &str, d: &ResultDoc) -> String {
    let p = dir.join(name);
    std::fs::write(&p, d.to_json()).unwrap();
    p.to_string_lossy().into_owned()
}

/// Run a child for at most `limit`, killing it (by its pid) past that; (status, stdout, stderr).
fn run_bounded(
    mut cmd: Command,
    limit: Duration,
) -> (Option<std::process::ExitStatus>, String, String) {
    let out = tempfile::NamedTempFile::new().unwrap();
    let err = tempfile::NamedTempFile::new().unwrap();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out.reopen().unwrap())
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
    let read = |f: &tempfile::NamedTempFile| std::fs::read_to_string(f.path()).unwrap_or_default();
    (status, read(&out), read(&err))
}

fn chromium(profile: &Path) -> Option<Command> {
    let exe = punctual_testkit::tool("report_browser", "chromium", "chromium")?;
    let mut c = Command::new(exe);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--allow-file-access-from-files",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    Some(c)
}

/// Chromium's findings on `html` (see `browser/check.js`).
fn layout(html: &Path, profile: &Path) -> Option<Value> {
    let page = html.with_extension("check.html");
    std::fs::write(
        &page,
        format!(
            "<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head><body style=\"margin:0\">\
             <pre id=\"out\">pending</pre><iframe id=\"report\" src=\"{}\" \
             style=\"width:{WIDTH}px;height:1000px;border:0\"></iframe><script>{CHECK_JS}</script>\
             </body></html>",
            html.file_name().unwrap().to_string_lossy()
        ),
    )
    .unwrap();
    let mut c = chromium(profile)?;
    c.args(["--virtual-time-budget=20000", "--dump-dom"])
        .arg(format!("file://{}", page.display()));
    let (status, out, err) = run_bounded(c, Duration::from_secs(180));
    assert!(
        status.is_some_and(|s| s.success()),
        "chromium failed: {err}"
    );
    let json = out
        .split("<pre id=\"out\">")
        .nth(1)
        .and_then(|s| s.split("</pre>").next())
        .unwrap_or_else(|| panic!("no findings in the dumped page: {out}"))
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    Some(serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}")))
}

/// Screenshots of `html` in slices of the page, named `<name>-<k>.png` in `dir`; their paths.
fn screenshots(html: &Path, height: u64, name: &str, dir: &Path, profile: &Path) -> Vec<PathBuf> {
    let mut shots = Vec::new();
    let slices = height.div_ceil(u64::from(SLICE)).clamp(1, 8);
    for k in 0..slices {
        let page = html.with_extension(format!("slice{k}.html"));
        std::fs::write(
            &page,
            format!(
                "<!DOCTYPE html><html><body style=\"margin:0;overflow:hidden\"><div \
                 style=\"position:relative;width:{WIDTH}px;height:{SLICE}px;overflow:hidden\">\
                 <iframe src=\"{}\" scrolling=\"no\" style=\"position:absolute;left:0;top:-{}px;\
                 width:{WIDTH}px;height:{}px;border:0\"></iframe></div></body></html>",
                html.file_name().unwrap().to_string_lossy(),
                k * u64::from(SLICE),
                height + 100
            ),
        )
        .unwrap();
        let png = dir.join(format!("{name}-{k}.png"));
        let Some(mut c) = chromium(profile) else {
            return shots;
        };
        c.arg(format!("--screenshot={}", png.display()))
            .arg(format!("--window-size={WIDTH},{SLICE}"))
            .arg("--virtual-time-budget=10000")
            .arg(format!("file://{}", page.display()));
        let (status, _, err) = run_bounded(c, Duration::from_secs(180));
        assert!(
            status.is_some_and(|s| s.success()),
            "chromium failed: {err}"
        );
        let decoder = png::Decoder::new(std::fs::File::open(&png).unwrap());
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (WIDTH, SLICE));
        let px = info.color_type.samples();
        let drawn = buf[..info.buffer_size()]
            .chunks_exact(px)
            .filter(|p| p[0] < 240 || p[1] < 240 || p[2] < 240)
            .count();
        // The top slice is mostly text and tables; a later one may hold only the page's last lines.
        let content = height.saturating_sub(k * u64::from(SLICE));
        if k == 0 {
            assert!(
                drawn * 100 >= (WIDTH * SLICE) as usize,
                "{}: a blank page",
                png.display()
            );
        } else if content > 100 {
            assert!(
                drawn > 0,
                "{}: a blank slice ({content} px of the page below its top)",
                png.display()
            );
        }
        shots.push(png);
    }
    shots
}

/// Make the report, check it in Chromium, take its screenshots; the page and the findings.
fn report_and_check(name: &str, args: &[&str], dir: &Path) -> Option<(String, Value)> {
    let html = dir.join(format!("{name}.html"));
    let mut cmd = punctual();
    cmd.arg("report").arg("-o").arg(&html).args(args);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(
        !text.contains("<script"),
        "{name}: no script, names escaped"
    );
    for fetch in ["src=\"http", "href=\"http", "url(http", "@import"] {
        assert!(!text.contains(fetch), "{name}: nothing fetched ({fetch})");
    }
    let profile = dir.join("profile");
    let findings = layout(&html, &profile)?;
    let problems: Vec<&Value> = findings["problems"].as_array().unwrap().iter().collect();
    assert!(
        problems.is_empty(),
        "{name}: a reader would see {problems:#?}"
    );
    let shots_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report-screenshots");
    std::fs::create_dir_all(&shots_dir).unwrap();
    let height = findings["height"].as_u64().unwrap();
    let shots = screenshots(&html, height, name, &shots_dir, &profile);
    eprintln!(
        "{name}: {} screenshots in {} ({} figures, smallest text {} px: {})",
        shots.len(),
        shots_dir.display(),
        findings["figures"],
        findings["smallest_text_px"],
        findings["smallest_text"]
    );
    Some((text, findings))
}

#[test]
fn three_results_open_with_which_is_the_regression_and_read_well() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(
        dir.path(),
        "a.json",
        &latency(&[("kernel", "6.1")], 1.0, 0, "2026-11-01T10:00:00Z"),
    );
    let b = write(
        dir.path(),
        "b.json",
        &latency(
            &[("kernel", "6.12")],
            1.6,
            150_000_000,
            "2026-11-01T10:01:00Z",
        ),
    );
    let c = write(
        dir.path(),
        "c.json",
        &latency(&[("kernel", "6.13")], 1.0, 0, "2026-11-01T10:02:00Z"),
    );
    let Some((html, found)) = report_and_check("three", &[&a, &b, &c], dir.path()) else {
        return;
    };
    assert!(html.contains("<h1>punctual report: B and C each against A</h1>"));
    let summary = html.split("<section id=\"runs\">").next().unwrap();
    assert!(
        summary.contains("B against A: <span class=\"bad\">"),
        "B is the regression"
    );
    assert!(summary.contains("C against A: no regression"));
    assert!(summary.contains("<tr class=\"regression\"><td>thread 0 (wakeup_latency, cpu 0)"));
    assert!(summary.contains("Worst figures") && summary.contains("Host <b>testbox</b>"));
    assert!(summary.contains("steal differed"), "B ran under steal");
    // Legends name runs by their tags; settings in units; the host once.
    assert!(html.contains("A kernel=6.1") && html.contains("B kernel=6.12"));
    assert!(
        html.contains("<td>duration</td><td>10.0 s</td>"),
        "units, not ns"
    );
    assert!(!html.contains("10000000000") && !html.contains("duration_ns"));
    assert_eq!(html.matches("<td>kernel</td>").count(), 1, "the host once");
    assert!(
        html.contains("wake-up latency (us)"),
        "the axis names the quantity"
    );
    // 2 series x (percentiles + histogram), and the steal bars.
    assert_eq!(found["figures"], 5);
    assert!(html.contains("<title>Time taken from each CPU</title>"));
}

#[test]
fn sides_of_three_runs_weigh_the_spread_between_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = Vec::new();
    for (side, tail) in [("a", 1.0), ("b", 1.02)] {
        for k in 0..3 {
            let d = latency(
                &[("set", side)],
                tail * (1.0 + 0.04 * k as f64),
                0,
                &format!("2026-11-01T1{k}:00:00Z"),
            );
            args.push(write(dir.path(), &format!("{side}{k}.json"), &d));
        }
        if side == "a" {
            args.push("--".into());
        }
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let Some((html, _)) = report_and_check("sides", &args, dir.path()) else {
        return;
    };
    assert!(html.contains("<h1>punctual report: B (3 runs) against A (3 runs)</h1>"));
    assert!(html.contains("across runs (Welch"), "the method says so");
    assert!(html.contains("B against A: no regression"));
    assert!(html.contains("A1 set=a") && html.contains("B3 set=b"));
}

#[test]
fn a_check_with_nothing_taken_says_so_in_a_line_and_draws_no_empty_chart() {
    let dir = tempfile::tempdir().unwrap();
    let c = write(dir.path(), "check.json", &check());
    let Some((html, found)) = report_and_check("check", &[&c], dir.path()) else {
        return;
    };
    assert!(html.contains("One side only: no verdict"));
    assert!(
        html.contains("No figure: the host took no time"),
        "no all-zero chart"
    );
    assert!(!html.contains("<title>Time taken from each CPU</title>"));
    assert!(html.contains("Without samples, so not drawn: idle extra"));
    assert!(html.contains("lateness (us)") || html.contains("lateness (ms)"));
    assert!(html.contains("mostly (99.900 %)"), "check verdicts");
    assert!(html.contains("no CAP_SYS_NICE &lt;script&gt;"));
    assert!(html.contains("<td>load</td><td>cpu:2@0-1,io:1</td>"));
    assert!(
        !html.contains("cpu_ns") && !html.contains("[{"),
        "no JSON in the tables"
    );
    // 4 phases with samples: a percentile figure and a histogram each.
    assert_eq!(found["figures"], 8);
}

#[test]
fn a_stored_experiment_brings_its_figures_and_tables() {
    let dir = tempfile::tempdir().unwrap();
    let store_path = dir.path().join("store.db");
    let store = punctual_store::Store::open(store_path.to_str().unwrap()).unwrap();
    let figure = punctual_plot::bar_plot(
        "Etsion Table 6, here",
        "us",
        &["p90".to_string(), "p99".to_string()],
        &[
            ("here".to_string(), vec![7.0, 9.0]),
            ("paper".to_string(), vec![7.0, 8.0]),
        ],
    )
    .unwrap();
    let tables =
        "etsion-latency: ours and the paper's\nrow    here    paper\np99    9 us    8 us\n";
    let id = store
        .put_with_tables(
            &experiment(),
            &[("etsion-latency-table6.svg".into(), figure.into_bytes())],
            &[],
            Some(tables),
        )
        .unwrap();
    drop(store);
    let Some((html, found)) = report_and_check(
        "experiment",
        &["--store", store_path.to_str().unwrap(), &id],
        dir.path(),
    ) else {
        return;
    };
    assert!(html.contains("experiment etsion-latency"));
    assert!(html.contains("Ours beside the published numbers"));
    assert!(html.contains("p99    9 us    8 us"), "the stored tables");
    assert!(
        html.contains("<img alt=\"etsion-latency-table6.svg\" src=\"data:image/svg+xml;base64,")
    );
    assert_eq!(found["images"], 1);
    assert!(html.contains("IRQ handler duration (") && html.contains("quantum length ("));
    assert!(!html.contains("latency (us)</text>") || html.contains("alarm latency ("));
}

#[test]
fn ten_results_keep_legends_and_verdicts_readable() {
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<String> = (0..10)
        .map(|i| {
            let d = latency(
                &[("run", &i.to_string())],
                1.0 + 0.05 * i as f64,
                1_000_000 * i,
                &format!("2026-11-01T10:{i:02}:00Z"),
            );
            write(dir.path(), &format!("r{i}.json"), &d)
        })
        .collect();
    let args: Vec<&str> = files.iter().map(String::as_str).collect();
    let Some((html, found)) = report_and_check("ten", &args, dir.path()) else {
        return;
    };
    assert!(html.contains("<h1>punctual report: B, C, D, E, F, G, H, I and J each against A</h1>"));
    assert_eq!(
        html.matches("against A: ").count(),
        9,
        "a verdict table per side"
    );
    assert_eq!(
        html.matches("bootstrap interval from the two histograms")
            .count(),
        1,
        "how the verdicts were reached, said once"
    );
    // Ten runs on one figure per series and kind of figure, and the steal bars.
    assert_eq!(found["figures"], 5);
    assert!(html.contains("J run=9"));
    // The runs are named under each figure (a legend inside would cover ten runs' data).
    assert!(html.contains("&#9632;</span> J run=9</span>"));
}
