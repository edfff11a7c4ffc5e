//! The results store through the binary (issue 13): every command's document stored as the
//! lifecycle's last step, `punctual results list|show|export|rm|import`, and the bad cases.

mod common;

use common::is_root;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn punctual(data: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_punctual"));
    c.env("PUNCTUAL_DATA_DIR", data)
        .env_remove("PUNCTUAL_STORE");
    c
}

fn run(data: &Path, args: &[&str]) -> Output {
    punctual(data).args(args).output().unwrap()
}

fn ok(data: &Path, args: &[&str]) -> String {
    let out = run(data, args);
    assert!(
        out.status.success(),
        "{args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stored_id(stdout: &str) -> String {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("Result stored: "))
        .unwrap_or_else(|| panic!("no 'Result stored:' line in:\n{stdout}"))
        .to_string()
}

const SIM: [&str; 7] = [
    "simulate",
    "--hz",
    "100",
    "--workload",
    "cont:2,blk:1",
    "--duration",
    "1s",
];

#[test]
fn each_command_stores_its_result_and_show_prints_its_tables_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut runs: Vec<Vec<&str>> = vec![
        SIM.to_vec(),
        vec![
            "simulate", "frames", "--fps", "60", "--hz", "100", "--frames", "50",
        ],
        vec!["experiment", "run", "etsion-billing", "--sim", "--quick"],
    ];
    if is_root() {
        runs.push(vec!["latency", "-t", "1", "-l", "20"]);
        runs.push(vec!["bench", "trap", "-D", "200ms"]);
    } else {
        punctual_testkit::skip(
            "each_command_stores_its_result (latency, bench part)",
            "needs root",
        );
    }
    let mut ids = Vec::new();
    for args in &runs {
        let stdout = ok(&data, args);
        let id = stored_id(&stdout);
        // `show` prints the tables exactly as the command did.
        let tables = stdout.split("\nResult stored: ").next().unwrap();
        let tables = tables.trim_end_matches('\n');
        let shown = ok(&data, &["results", "show", &id]);
        assert!(
            shown.contains(tables),
            "{args:?}: show does not repeat the tables:\n{tables}\n---\n{shown}"
        );
        ids.push(id);
    }
    let listed = ok(&data, &["results", "list"]);
    for id in &ids {
        assert!(listed.contains(id.as_str()), "{id} not in\n{listed}");
    }
    assert!(listed.contains("experiment etsion-billing"), "{listed}");
    // The experiment's figures were stored with it (no --figures given: nowhere else).
    let exp = &ids[2];
    let out = dir.path().join("out");
    let wrote = ok(
        &data,
        &["results", "export", exp, "-o", out.to_str().unwrap()],
    );
    assert!(wrote.contains(&format!("{exp}.json")) && wrote.contains(&format!("{exp}.csv")));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join(format!("{exp}.json"))).unwrap())
            .unwrap();
    assert_eq!(doc["experiment"], "etsion-billing");
    for fig in ["etsion-billing-fig4.svg", "etsion-billing-fig6.svg"] {
        assert!(
            std::fs::read_to_string(out.join(format!("{exp}-{fig}")))
                .unwrap()
                .starts_with("<svg"),
            "{fig}"
        );
        assert!(
            !data.join("results").join(fig).exists(),
            "figures are not loose files any more"
        );
    }
    assert!(
        std::fs::read_to_string(out.join(format!("{exp}.csv")))
            .unwrap()
            .lines()
            .count()
            > 1
    );
    // latest is the last stored run; rm takes it away.
    assert!(ok(&data, &["results", "show", "latest"]).contains(ids.last().unwrap().as_str()));
    ok(&data, &["results", "rm", &ids[0], &ids[1]]);
    let listed = ok(&data, &["results", "list"]);
    assert!(!listed.contains(ids[0].as_str()) && !listed.contains(ids[1].as_str()));
    assert!(listed.contains(ids[2].as_str()));
}

/// Issue 31 item 8: `results export` of two runs of one experiment into one directory wrote both
/// runs' figures under the same names, the second over the first; and an imported experiment lost
/// its own tables (show fell back to the series summary).
#[test]
fn results_export_of_two_runs_of_one_experiment_keeps_both_and_import_keeps_their_tables() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let runs: Vec<String> = (0..2)
        .map(|_| {
            stored_id(&ok(
                &data,
                &["experiment", "run", "etsion-frames", "--quick"],
            ))
        })
        .collect();
    let out = dir.path().join("out");
    for id in &runs {
        ok(
            &data,
            &["results", "export", id, "-o", out.to_str().unwrap()],
        );
    }
    for id in &runs {
        let fig = out.join(format!("{id}-etsion-frames-fig5.svg"));
        assert!(
            std::fs::read_to_string(&fig).is_ok_and(|f| f.starts_with("<svg")),
            "{} is missing",
            fig.display()
        );
        assert!(out.join(format!("{id}.txt")).exists(), "{id}'s tables");
    }
    // Into another store: the tables and figures travel with the document.
    let elsewhere = dir.path().join("elsewhere");
    let json = out.join(format!("{}.json", runs[0]));
    let imported = ok(&elsewhere, &["results", "import", json.to_str().unwrap()]);
    let id = imported.trim().rsplit(' ').next().unwrap().to_string();
    let shown = ok(&elsewhere, &["results", "show", &id]);
    let original = ok(&data, &["results", "show", &runs[0]]);
    assert!(!shown.contains("imported from a file"), "{shown}");
    let tables = |s: &str| {
        s.split_once("\n\n")
            .map(|(_, t)| t.to_string())
            .unwrap_or_default()
    };
    assert_eq!(
        tables(&shown).split("\nFigures:").next(),
        tables(&original).split("\nFigures:").next(),
        "the imported tables differ"
    );
    assert!(shown.contains("Figures: etsion-frames-fig"), "{shown}");
}

#[test]
fn no_store_skips_it_and_tags_filter_the_listing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut args = SIM.to_vec();
    args.push("--no-store");
    let stdout = ok(&data, &args);
    assert!(!stdout.contains("Result stored"), "{stdout}");
    assert!(
        !data.join("results.db").exists(),
        "--no-store opens no store"
    );
    let mut args = SIM.to_vec();
    args.extend(["--tag", "kernel=6.12-rt", "--tag", "board=a"]);
    let tagged = stored_id(&ok(&data, &args));
    let plain = stored_id(&ok(&data, &SIM));
    let listed = ok(&data, &["results", "list", "--tag", "kernel=6.12-rt"]);
    assert!(
        listed.contains(&tagged) && !listed.contains(&plain),
        "{listed}"
    );
    assert!(listed.contains("board=a,kernel=6.12-rt"), "{listed}");
    let listed = ok(&data, &["results", "list", "--last", "1"]);
    assert!(
        listed.contains(&plain) && !listed.contains(&tagged),
        "{listed}"
    );
    let listed = ok(&data, &["results", "list", "--command", "latency"]);
    assert!(!listed.contains(&plain), "{listed}");
    // A tag without '=' is bad input, before anything runs.
    let mut args = SIM.to_vec();
    args.extend(["--tag", "kernel"]);
    assert_eq!(run(&data, &args).status.code(), Some(2));
    let mut args = SIM.to_vec();
    args.extend(["--no-store", "--tag", "a=b"]);
    assert_eq!(
        run(&data, &args).status.code(),
        Some(2),
        "--no-store with --tag"
    );
}

/// A result file like another machine's, started on `day`.
fn result_file(dir: &Path, source: &serde_json::Value, day: u32) -> PathBuf {
    let mut doc = source.clone();
    doc["started_at"] = format!("2026-10-{:02}T00:00:00Z", day).into();
    doc["host"]["hostname"] = "elsewhere".into();
    // Another run has its own run id (the same day's file is the same run).
    doc["run_id"] = format!("{:032x}", 0xabc0_0000 + day).into();
    let path = dir.join(format!("r{day}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    path
}

#[test]
fn unknown_and_ambiguous_ids_are_usage_errors_listing_the_candidates() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let json = dir.path().join("sim.json");
    let mut args = SIM.to_vec();
    args.extend(["--no-store", "--json", json.to_str().unwrap()]);
    ok(&data, &args);
    let source: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let files: Vec<PathBuf> = (1..=24)
        .map(|d| result_file(dir.path(), &source, d))
        .collect();
    let mut import = vec!["results", "import"];
    import.extend(files.iter().map(|f| f.to_str().unwrap()));
    let imported = ok(&data, &import);
    let ids: Vec<String> = imported
        .lines()
        .map(|l| l.rsplit(' ').next().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 24);
    let listed = ok(&data, &["results", "list", "--host", "elsewhere"]);
    assert_eq!(listed.lines().count(), 2 + 24, "{listed}");
    // Importing the same file again stores nothing new.
    ok(&data, &["results", "import", files[0].to_str().unwrap()]);
    assert_eq!(ok(&data, &["results", "list"]).lines().count(), 2 + 24);

    let first = (0..16)
        .map(|d| format!("{d:x}"))
        .find(|p| ids.iter().filter(|i| i.starts_with(p.as_str())).count() >= 2)
        .unwrap();
    let out = run(&data, &["results", "show", &first]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ambiguous"), "{err}");
    for id in ids.iter().filter(|i| i.starts_with(first.as_str())) {
        assert!(
            err.contains(id.as_str()),
            "candidate {id} not listed: {err}"
        );
    }
    let out = run(&data, &["results", "show", "zzz-not-an-id"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("punctual results list"));
    let out = run(&data, &["results", "rm", &ids[0], "0123456789ab"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        ok(&data, &["results", "list"]).contains(&ids[0]),
        "one bad id removes nothing"
    );
    // An imported result has no tables of its command: show says so and gives the series.
    let shown = ok(&data, &["results", "show", &ids[3]]);
    assert!(
        shown.contains("imported from a file") && shown.contains("p99"),
        "{shown}"
    );
    // A file is shown without storing it.
    let shown = ok(&data, &["results", "show", files[5].to_str().unwrap()]);
    assert!(shown.contains("2026-10-06"), "{shown}");
}

/// Makes a directory unwritable even for root (`chattr +i`), and writable again on every path.
struct Immutable(PathBuf);

impl Immutable {
    fn set(dir: &Path) -> Option<Immutable> {
        let ok = if is_root() {
            Command::new("chattr")
                .arg("+i")
                .arg(dir)
                .status()
                .is_ok_and(|s| s.success())
        } else {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555)).is_ok()
        };
        ok.then(|| Immutable(dir.to_path_buf()))
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        if is_root() {
            let _ = Command::new("chattr").arg("-i").arg(&self.0).status();
        } else {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o755));
        }
    }
}

#[test]
fn an_unwritable_data_dir_exits_3_before_measuring_and_no_store_avoids_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let Some(_guard) = Immutable::set(&data) else {
        punctual_testkit::skip(
            "an_unwritable_data_dir_exits_3_before_measuring",
            &format!("cannot make {} unwritable (chattr)", data.display()),
        );
        return;
    };
    let out = run(&data, &SIM);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--no-store"), "{err}");
    assert!(
        out.stdout.is_empty(),
        "nothing was measured: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let mut args = SIM.to_vec();
    args.push("--no-store");
    ok(&data, &args);
}

#[test]
fn a_newer_schema_is_refused_with_exit_3_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    ok(&data, &SIM);
    let db = data.join("results.db");
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute("UPDATE schema_version SET version = version + 5", [])
            .unwrap();
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
    }
    let before = std::fs::read(&db).unwrap();
    for args in [&["results", "list"][..], &SIM[..]] {
        let out = run(&data, args);
        assert_eq!(out.status.code(), Some(3), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("schema version") && err.contains("untouched"),
            "{err}"
        );
        assert!(out.stdout.is_empty());
    }
    assert_eq!(std::fs::read(&db).unwrap(), before);
}

#[test]
fn two_processes_storing_at_once_both_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let json = dir.path().join("sim.json");
    let mut args = SIM.to_vec();
    args.extend(["--no-store", "--json", json.to_str().unwrap()]);
    ok(&data, &args);
    let source: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // Two importers of 20 files each and two measuring commands, all on a fresh data directory.
    let mut children = Vec::new();
    for half in 0..2u32 {
        let sub = dir.path().join(format!("files{half}"));
        std::fs::create_dir(&sub).unwrap();
        let files: Vec<PathBuf> = (1..=20)
            .map(|d| result_file(&sub, &source, d + half * 20 - half * 12))
            .collect();
        let mut c = punctual(&data);
        c.args(["results", "import"])
            .args(&files)
            .stdout(std::process::Stdio::null());
        children.push(c.spawn().unwrap());
        children.push(
            punctual(&data)
                .args(SIM)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        );
    }
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let listed = ok(&data, &["results", "list"]);
    // Days 1-20 and 9-28: the 12 days both halves have are the same document, stored once; + 2 runs.
    assert_eq!(listed.lines().count(), 2 + 28 + 2, "{listed}");
}

/// Processes that open a fresh store at the same instant meet in SQLite's lock upgrade (the
/// switch to WAL, the first migration), which answers "database is locked" without waiting: all
/// of them must still store their result.
#[test]
fn processes_creating_the_store_at_once_all_succeed() {
    for round in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let children: Vec<_> = (0..4)
            .map(|_| {
                punctual(&data)
                    .args(["latency", "-D", "200ms", "--policy", "other"])
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for c in children {
            let out = c.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let listed = ok(&data, &["results", "list"]);
        assert_eq!(listed.lines().count(), 2 + 4, "{listed}");
    }
}

#[test]
fn an_unreachable_postgres_exits_3_and_never_shows_the_password() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let url = format!(
        "postgresql://u:hunter2@/db?host={}&connect_timeout=2",
        dir.path().join("nosock").display()
    );
    let mut args = SIM.to_vec();
    args.extend(["--store", &url]);
    let out = run(&data, &args);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("PostgreSQL") && err.contains("u:***@"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");
    assert!(out.stdout.is_empty());
}

/// Issue 29: tags survive export and import into another store, importing twice stores once,
/// `--store` reaches every command that reads results, and reading creates no store.
#[test]
fn tags_travel_through_export_and_import_and_every_reader_takes_store() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let here = dir.path().join("here.db");
    let there = dir.path().join("there.db");
    // Reading a named store that is not there (a typo?): exit 2, no file.
    // The default store of a new machine lists nothing, exit 0.
    let listed = run(
        &data,
        &["results", "--store", here.to_str().unwrap(), "list"],
    );
    assert_eq!(listed.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&listed.stderr).contains("there is no results store at"),
        "{listed:?}"
    );
    let fresh = ok(&data, &["results", "list"]);
    assert!(
        fresh.contains("No stored results: there is no results store at"),
        "{fresh}"
    );
    let out = run(
        &data,
        &[
            "results",
            "--store",
            here.to_str().unwrap(),
            "show",
            "latest",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        !here.exists() && !data.exists(),
        "nothing created by reading"
    );

    let mut args = SIM.to_vec();
    args.extend([
        "--store",
        here.to_str().unwrap(),
        "--tag",
        "kernel=6.12",
        "--tag",
        "run=1",
    ]);
    let id = stored_id(&ok(&data, &args));
    let exported = dir.path().join("out");
    ok(
        &data,
        &[
            "results",
            "--store",
            here.to_str().unwrap(),
            "export",
            &id,
            "-o",
            exported.to_str().unwrap(),
        ],
    );
    let file = exported.join(format!("{id}.json"));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(doc["tags"]["kernel"], "6.12", "the export carries the tags");
    assert_eq!(doc["run_id"].as_str().map(|r| &r[..12]), Some(id.as_str()));
    let csv = std::fs::read_to_string(exported.join(format!("{id}.csv"))).unwrap();
    assert!(csv.starts_with("run_id,started_at,host,name,"), "{csv}");
    assert!(csv.lines().nth(1).unwrap().starts_with(&id), "{csv}");

    let again = ok(
        &data,
        &[
            "results",
            "--store",
            here.to_str().unwrap(),
            "import",
            file.to_str().unwrap(),
        ],
    );
    assert!(
        again.contains(&format!("already stored as {id}")),
        "{again}"
    );
    let first = ok(
        &data,
        &[
            "results",
            "--store",
            there.to_str().unwrap(),
            "import",
            file.to_str().unwrap(),
        ],
    );
    assert!(
        first.contains(&format!("stored as {id}")) && !first.contains("already"),
        "{first}"
    );
    let second = ok(
        &data,
        &[
            "results",
            "--store",
            there.to_str().unwrap(),
            "import",
            file.to_str().unwrap(),
        ],
    );
    assert!(second.contains("already stored as"), "{second}");
    let listed = ok(
        &data,
        &[
            "results",
            "--store",
            there.to_str().unwrap(),
            "list",
            "--tag",
            "kernel=6.12",
        ],
    );
    assert_eq!(
        listed.lines().count(),
        3,
        "one result, with its tags: {listed}"
    );
    assert!(listed.contains("kernel=6.12,run=1"), "{listed}");

    // compare, report and advise read the store --store names (the default one stays absent).
    let cmp = ok(
        &data,
        &["compare", "--store", there.to_str().unwrap(), &id, &id],
    );
    assert!(cmp.contains("no significant change"), "{cmp}");
    let html = dir.path().join("r.html");
    ok(
        &data,
        &[
            "report",
            "--store",
            there.to_str().unwrap(),
            "-o",
            html.to_str().unwrap(),
            &id,
        ],
    );
    assert!(std::fs::read_to_string(&html)
        .unwrap()
        .contains("kernel=6.12"));
    // advise found the stored result (and refused it for what it is, a simulation).
    let out = run(
        &data,
        &[
            "advise",
            "--store",
            there.to_str().unwrap(),
            "--deadline",
            "10ms",
            "--from",
            &id,
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{id} is a `simulate` result")),
        "{err}"
    );
    let out = run(&data, &["compare", &id, &id]);
    assert_eq!(out.status.code(), Some(2), "the default store has nothing");
    assert!(
        !data.join("results.db").exists(),
        "and reading did not create it"
    );
    // Sides from tags: --tag per side, the newest --last N of each.
    let tagged = ok(
        &data,
        &[
            "compare",
            "--store",
            there.to_str().unwrap(),
            "--tag",
            "kernel=6.12",
            "--tag",
            "run=1",
            "--last",
            "2",
        ],
    );
    assert!(tagged.contains("compare: B against A"), "{tagged}");
}
