//! What `punctual results` shows of stored results, pinned: the listing's table, a result's text
//! (with and without the command's own tables), and the files an export writes and an import
//! takes back. Ids depend on when a result was stored, so they are replaced by fixed names of the
//! same width before the text is compared.

mod common;

use common::doc;
use punctual_result::Status;
use punctual_store::{view, Filter, Resolver, SideSpec, Store};

/// `text` with each id replaced by `id-N` padded to the id's 12 characters.
fn named(text: &str, ids: &[&str]) -> String {
    let mut out = text.to_string();
    for (i, id) in ids.iter().enumerate() {
        out = out.replace(id, &format!("id-{i:0>9}"));
    }
    out
}

fn svg() -> Vec<u8> {
    b"<svg xmlns=\"http://www.w3.org/2000/svg\"/>".to_vec()
}

/// A latency run tagged by kernel, an interrupted experiment, and a check from another host.
fn three(store: &Store) -> Vec<String> {
    let lat = doc(
        &["punctual", "latency", "-D", "5s"],
        "box",
        "2026-11-01T10:00:00.123Z",
        &[3_000],
    );
    let mut exp = doc(
        &["punctual", "experiment", "run", "etsion-latency"],
        "box",
        "2026-11-02T11:30:00Z",
        &[5_000, 12_000],
    );
    exp.extra
        .insert("experiment".into(), "etsion-latency".into());
    exp.status = Status::Interrupted;
    let check = doc(&["punctual", "check"], "rack7", "2026-11-03T08:00:00Z", &[]);
    let tags = [("kernel".to_string(), "6.12-rt".to_string())];
    vec![
        store.put(&lat, &[], &tags).unwrap(),
        store.put(&exp, &[], &[]).unwrap(),
        store.put(&check, &[], &[]).unwrap(),
    ]
}

#[test]
fn the_listing_names_each_result_newest_first() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    let ids = three(&store);
    let entries = store.list(&Filter::default()).unwrap();
    let text = view::list_table(&entries, &store.location()).render();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    insta::assert_snapshot!("list", named(&text, &ids));
    let none = store
        .list(&Filter {
            host: Some("nowhere".into()),
            ..Default::default()
        })
        .unwrap();
    let empty = view::list_table(&none, "results.db").render();
    assert!(
        punctual_testkit::squash(&empty).contains("no stored results match (store: results.db)"),
        "{empty}"
    );
}

#[test]
fn a_simulation_is_listed_by_when_it_was_stored() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    let sim = doc(
        &["punctual", "simulate", "-w", "cont:1"],
        "box",
        "1970-01-01T00:00:00Z",
        &[1],
    );
    store.put(&sim, &[], &[]).unwrap();
    let entries = store.list(&Filter::default()).unwrap();
    let text = view::list_table(&entries, "s.db").render();
    assert!(!text.contains("1970"), "{text}");
    let stored: String = entries[0].stored_at.chars().take(10).collect();
    assert!(text.contains(&stored), "{text}");
}

#[test]
fn show_prints_the_commands_tables_again_or_each_series_summary() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    let d = doc(
        &["punctual", "latency", "-D", "5s"],
        "box",
        "2026-11-01T10:00:00Z",
        &[3_000],
    );
    let tables = "thread  p99\n0       4.9us\n\u{1b}[2Jnot a terminal command\n";
    let id = store
        .put_with_tables(
            &d,
            &[("lateness.svg".into(), svg())],
            &[("kernel".into(), "6.12-rt".into())],
            Some(tables),
        )
        .unwrap();
    let shown = store.show(&id).unwrap();
    assert!(
        !shown.contains('\u{1b}'),
        "nothing from a store steers the terminal"
    );
    insta::assert_snapshot!("show_stored", named(&shown, &[&id]));
    // A file has no id, no tables and no figures: the series' summaries, named by the file.
    let file = dir.path().join("r.json");
    std::fs::write(&file, d.to_json()).unwrap();
    let stored = store.resolve(file.to_str().unwrap()).unwrap();
    assert_eq!(stored.id, None);
    insta::assert_snapshot!("show_file", view::show_text(&stored, None, "r.json"));
}

#[test]
fn export_writes_the_document_csv_tables_and_figures_and_import_takes_them_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(&dir.path().join("a")).unwrap();
    let d = doc(
        &["punctual", "latency"],
        "box",
        "2026-11-01T10:00:00Z",
        &[3_000],
    );
    let figures = vec![
        ("../evil\u{7}.svg".to_string(), svg()),
        ("lateness.svg".to_string(), svg()),
    ];
    let tags = [("board".to_string(), "a".to_string())];
    let id = store
        .put_with_tables(&d, &figures, &tags, Some("the tables\n"))
        .unwrap();
    let out = dir.path().join("out");
    let written = store.export(&id, &out).unwrap();
    let mut names: Vec<String> = written
        .iter()
        .map(|p| p.strip_prefix(&out).unwrap().display().to_string())
        .collect();
    names.sort();
    let want =
        ["-_evil_.svg", "-lateness.svg", ".csv", ".json", ".txt"].map(|s| format!("{id}{s}"));
    assert_eq!(names, want, "a figure's name never leaves DIR");
    let json = std::fs::read_to_string(out.join(format!("{id}.json"))).unwrap();
    assert!(
        json.contains("\"board\": \"a\""),
        "the tags travel in the document: {json}"
    );
    // Another store takes the document back with its tables and figures, under the same id.
    let other = Store::open_in(&dir.path().join("b")).unwrap();
    let back = other
        .import_exported(&out.join(format!("{id}.json")))
        .unwrap();
    assert!(back.new);
    assert_eq!(back.id, id);
    let stored = other.resolve(&id).unwrap();
    assert_eq!(stored.figures.len(), 2);
    assert_eq!(stored.tags, tags);
    assert_eq!(other.tables(&id).unwrap().as_deref(), Some("the tables\n"));
    assert!(
        !other
            .import_exported(&out.join(format!("{id}.json")))
            .unwrap()
            .new
    );
}

#[test]
fn sides_are_files_ids_or_tags_and_readers_create_no_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let store = Store::open_with(path.to_str().unwrap(), punctual_store::Access::Create).unwrap();
    let ids = three(&store);
    let mut r = Resolver::new(path.to_str());
    let spec = |results: &[&str], against: &[&str]| SideSpec {
        results: results.iter().map(|s| s.to_string()).collect(),
        against: against.iter().map(|s| s.to_string()).collect(),
        last: 3,
        ..Default::default()
    };
    let sides = r.sides(&spec(&[&ids[0], "latest"], &[]), 2).unwrap();
    assert_eq!(sides.len(), 2);
    assert_eq!(sides[1][0].stored.id.as_deref(), Some(ids[2].as_str()));
    let sides = r.sides(&spec(&[&ids[0], &ids[1]], &["latest"]), 2).unwrap();
    assert_eq!((sides[0].len(), sides[1].len()), (2, 1));
    let tagged = SideSpec {
        tags: vec![("kernel".into(), "6.12-rt".into())],
        last: 3,
        ..Default::default()
    };
    let sides = r.sides(&tagged, 1).unwrap();
    assert_eq!(sides[0][0].source, ids[0]);
    for (bad, says) in [
        (spec(&[&ids[0]], &[]), "give at least 2"),
        (spec(&[], &["latest"]), "nothing before `--`"),
        (spec(&["a"], &["--json"]), "--json after `--`"),
    ] {
        let e = r.sides(&bad, 2).unwrap_err();
        assert!(e.message.contains(says), "{}", e.message);
    }
    // The newest whole check of a host, and what was newer but not whole.
    let check = Filter {
        host: Some("box".into()),
        ..Default::default()
    };
    let (stored, skipped) = r.newest_whole(&check).unwrap().unwrap();
    assert_eq!(stored.id.as_deref(), Some(ids[0].as_str()));
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].id, ids[1]);
    // The newest whole check and experiment run of a host, named for advise.
    let l = r.latest_of("rack7", None).unwrap().unwrap();
    assert_eq!(l.source, format!("stored check {}", ids[2]));
    assert!(l.skipped.is_empty());
    assert!(r.latest_of("box", None).unwrap().is_none());
    assert!(r
        .latest_of("box", Some("etsion-latency"))
        .unwrap()
        .is_none());
    // No store there: nothing to read, and nothing created by looking.
    let absent = dir.path().join("none.db");
    let mut r = Resolver::new(absent.to_str());
    assert!(r.newest_whole(&check).unwrap().is_none());
    assert!(r.resolve("latest").is_err());
    assert!(!absent.exists());
}
