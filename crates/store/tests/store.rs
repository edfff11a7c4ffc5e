//! The SQLite store: round trips, addressing, listing, concurrency, old files, bad databases.

mod common;

use common::{doc, COMMANDS};
use punctual_result::Class;
use punctual_store::{command_of, Access, Filter, Store, StoreError, SCHEMA_VERSION};
use std::path::Path;

fn svg(n: usize) -> Vec<u8> {
    format!("<svg xmlns=\"http://www.w3.org/2000/svg\"><text>{n}</text></svg>").into_bytes()
}

#[test]
fn every_commands_document_and_figures_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    let mut ids = Vec::new();
    for (i, (argv, command, experiment)) in COMMANDS.iter().enumerate() {
        let mut d = doc(
            argv,
            "box",
            &format!("2026-11-0{}T10:00:00Z", 1 + i % 9),
            &[3_000, 5_000],
        );
        d.extra.insert("events".into(), (i as u64).into());
        if let Some(e) = experiment {
            d.extra.insert("experiment".into(), (*e).into());
        }
        assert_eq!(command_of(&d).0, *command, "{argv:?}");
        let figures = vec![
            (format!("fig-{i}.svg"), svg(i)),
            ("raw.bin".into(), vec![0, 159, 255]),
        ];
        let tags = vec![
            ("kernel".into(), "rt".into()),
            ("run".into(), i.to_string()),
        ];
        let id = store.put(&d, &figures, &tags).unwrap();
        assert_eq!(id.len(), 12);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
        let back = store.resolve(&id).unwrap();
        assert_eq!(back.id.as_deref(), Some(id.as_str()));
        assert_eq!(back.doc, d, "{argv:?}: the document comes back as stored");
        let mut want = figures.clone();
        want.sort();
        assert_eq!(back.figures, want, "figures come back byte for byte");
        assert_eq!(back.tags, tags);
        ids.push(id);
    }
    // The same document stored twice is two results: figures are per result, never overwritten.
    let d = doc(COMMANDS[0].0, "box", "2026-11-20T10:00:00Z", &[1_000]);
    let a = store.put(&d, &[("fig.svg".into(), svg(1))], &[]).unwrap();
    let b = store.put(&d, &[("fig.svg".into(), svg(2))], &[]).unwrap();
    assert_ne!(a, b);
    assert_eq!(store.resolve(&a).unwrap().figures[0].1, svg(1));
    assert_eq!(store.resolve(&b).unwrap().figures[0].1, svg(2));
    let entries = store.list(&Filter::default()).unwrap();
    assert_eq!(entries.len(), COMMANDS.len() + 2);
    let exp = entries
        .iter()
        .find(|e| e.command == "experiment run")
        .unwrap();
    assert_eq!(exp.experiment.as_deref(), Some("etsion-latency"));
    assert_eq!(exp.hostname, "box");
    assert_eq!(exp.kernel, "6.12.0-test");
    assert_eq!(exp.preempt, "dynamic: full");
    assert_eq!(exp.cpu_model, "Test CPU @ 2.0GHz");
    assert!(exp.virtualized);
    let worst = exp.worst_p99.clone().unwrap();
    assert_eq!(worst.0, "thread 1", "the series with the highest p99");
    assert_eq!(
        worst.1,
        store.resolve(&exp.id).unwrap().doc.series[1]
            .summary
            .percentiles
            .p99
    );
}

#[test]
fn latest_and_prefixes_address_results_and_bad_ones_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("s.db").to_str().unwrap()).unwrap();
    assert!(matches!(
        store.resolve("latest"),
        Err(StoreError::UnknownId { .. })
    ));
    let mut ids = Vec::new();
    for day in 1..=40 {
        let d = doc(
            &["punctual", "latency"],
            "box",
            &format!("2026-10-{:02}T00:00:00Z", day.min(28)),
            &[day * 100],
        );
        ids.push(store.put(&d, &[], &[]).unwrap());
    }
    // Started later is later, whatever the order of storing; equal start times: stored later.
    assert_eq!(store.resolve("latest").unwrap().id.unwrap(), ids[39]);
    assert_eq!(store.resolve("latest~1").unwrap().id.unwrap(), ids[38]);
    assert_eq!(store.resolve("latest~39").unwrap().id.unwrap(), ids[0]);
    assert!(matches!(
        store.resolve("latest~40"),
        Err(StoreError::UnknownId { .. })
    ));
    let e = store.resolve("latest~x").unwrap_err();
    assert_eq!(e.class(), Class::Usage);
    // A unique prefix resolves; an unknown one is a usage error naming the fix.
    let id = &ids[7];
    assert_eq!(
        store.resolve(&id[..8]).unwrap().id.as_deref(),
        Some(id.as_str())
    );
    assert_eq!(
        store.resolve(&id.to_uppercase()).unwrap().id.as_deref(),
        Some(id.as_str())
    );
    let unknown = (0..=0xfffu32)
        .map(|n| format!("{n:03x}"))
        .find(|p| !ids.iter().any(|i| i.starts_with(p.as_str())))
        .unwrap();
    let e = store.resolve(&unknown).unwrap_err();
    assert!(matches!(e, StoreError::UnknownId { .. }), "{e}");
    assert_eq!(e.class(), Class::Usage);
    assert!(e.to_string().contains("punctual results list"), "{e}");
    // 40 ids over 16 first digits: some digit starts two of them.
    let first = (0..16)
        .map(|d| format!("{d:x}"))
        .find(|p| ids.iter().filter(|i| i.starts_with(p.as_str())).count() >= 2)
        .unwrap();
    let e = store.resolve(&first).unwrap_err();
    let StoreError::Ambiguous { candidates, .. } = &e else {
        panic!("{e}")
    };
    let mut want: Vec<&String> = ids
        .iter()
        .filter(|i| i.starts_with(first.as_str()))
        .collect();
    want.sort();
    want.truncate(10);
    assert_eq!(candidates.iter().take(want.len()).collect::<Vec<_>>(), want);
    assert!(
        e.to_string().contains(want[0].as_str()),
        "the candidates are listed: {e}"
    );
    assert_eq!(e.class(), Class::Usage);
    // A file is read as a result; a missing one says so.
    let f = dir.path().join("r.json");
    std::fs::write(&f, store.resolve(&ids[3]).unwrap().doc.to_json()).unwrap();
    let from_file = store.resolve(f.to_str().unwrap()).unwrap();
    assert_eq!(from_file.id, None);
    assert_eq!(from_file.doc, store.resolve(&ids[3]).unwrap().doc);
    let e = store.resolve("/nonexistent/r.json").unwrap_err();
    assert!(matches!(e, StoreError::NotAResult { .. }), "{e}");
    // Removing takes figures and tags with it.
    assert_eq!(store.remove(&ids[5][..10]).unwrap(), ids[5]);
    assert!(matches!(
        store.resolve(&ids[5]),
        Err(StoreError::UnknownId { .. })
    ));
    assert_eq!(store.list(&Filter::default()).unwrap().len(), 39);
}

#[test]
fn list_filters_by_command_experiment_host_tag_since_and_last() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("s.db").to_str().unwrap()).unwrap();
    let put = |argv: &[&str], host: &str, day: u32, tags: &[(&str, &str)]| {
        let mut d = doc(argv, host, &format!("2026-11-{day:02}T12:00:00Z"), &[1_000]);
        if argv.get(1) == Some(&"experiment") {
            d.extra.insert("experiment".into(), argv[3].into());
        }
        let tags: Vec<(String, String)> = tags
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        store.put(&d, &[], &tags).unwrap()
    };
    let a = put(&["punctual", "latency"], "alpha", 1, &[("kernel", "rt")]);
    let b = put(&["punctual", "trace", "analyze", "x.ptf"], "beta", 2, &[]);
    let c = put(
        &["punctual", "experiment", "run", "kurt-irq"],
        "alpha",
        3,
        &[("kernel", "rt"), ("board", "x")],
    );
    let d = put(
        &["punctual", "latency"],
        "beta",
        4,
        &[("kernel", "generic")],
    );
    let ids =
        |f: Filter| -> Vec<String> { store.list(&f).unwrap().into_iter().map(|e| e.id).collect() };
    assert_eq!(
        ids(Filter::default()),
        vec![d.clone(), c.clone(), b.clone(), a.clone()],
        "newest first"
    );
    assert_eq!(
        ids(Filter {
            command: Some("latency".into()),
            ..Default::default()
        }),
        vec![d.clone(), a.clone()]
    );
    assert_eq!(
        ids(Filter {
            command: Some("trace".into()),
            ..Default::default()
        }),
        vec![b.clone()]
    );
    assert_eq!(
        ids(Filter {
            command: Some("trace analyze".into()),
            ..Default::default()
        }),
        vec![b.clone()]
    );
    assert_eq!(
        ids(Filter {
            experiment: Some("kurt-irq".into()),
            ..Default::default()
        }),
        vec![c.clone()]
    );
    assert_eq!(
        ids(Filter {
            host: Some("alpha".into()),
            ..Default::default()
        }),
        vec![c.clone(), a.clone()]
    );
    assert_eq!(
        ids(Filter {
            tags: vec![("kernel".into(), "rt".into())],
            ..Default::default()
        }),
        vec![c.clone(), a.clone()]
    );
    assert_eq!(
        ids(Filter {
            tags: vec![("kernel".into(), "rt".into()), ("board".into(), "x".into())],
            ..Default::default()
        }),
        vec![c.clone()]
    );
    assert_eq!(
        ids(Filter {
            since: Some("2026-11-03".into()),
            ..Default::default()
        }),
        vec![d.clone(), c.clone()]
    );
    assert_eq!(
        ids(Filter {
            since: Some("2026-11-02T12:00:00Z".into()),
            ..Default::default()
        }),
        vec![d.clone(), c.clone(), b.clone()]
    );
    assert_eq!(
        ids(Filter {
            last: Some(2),
            ..Default::default()
        }),
        vec![d.clone(), c.clone()]
    );
    assert_eq!(
        ids(Filter {
            host: Some("alpha".into()),
            last: Some(1),
            ..Default::default()
        }),
        vec![c.clone()]
    );
    let listed = store
        .list(&Filter {
            experiment: Some("kurt-irq".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        listed[0].tags,
        vec![("board".into(), "x".into()), ("kernel".into(), "rt".into())]
    );
    let e = store
        .list(&Filter {
            since: Some("yesterday".into()),
            ..Default::default()
        })
        .unwrap_err();
    assert_eq!(e.class(), Class::Usage);
    // Bad tags are refused before anything is stored.
    let d0 = doc(
        &["punctual", "latency"],
        "alpha",
        "2026-11-05T00:00:00Z",
        &[1],
    );
    for bad in [("", "x"), ("a=b", "c")] {
        let e = store
            .put(&d0, &[], &[(bad.0.into(), bad.1.into())])
            .unwrap_err();
        assert_eq!(e.class(), Class::Usage, "{e}");
    }
    assert_eq!(store.list(&Filter::default()).unwrap().len(), 4);
}

#[test]
fn two_writers_with_their_own_connections_both_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results.db");
    // Both open a fresh file at once: creating the schema is serialised too.
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let path = path.clone();
            std::thread::spawn(move || {
                let store = Store::open(path.to_str().unwrap()).unwrap();
                (0..40)
                    .map(|i| {
                        let d = doc(
                            &["punctual", "latency"],
                            &format!("w{w}"),
                            "2026-11-01T00:00:00Z",
                            &[i],
                        );
                        store
                            .put(&d, &[("f.svg".into(), svg(i as usize))], &[])
                            .unwrap()
                    })
                    .collect::<Vec<String>>()
            })
        })
        .collect();
    let ids: Vec<Vec<String>> = writers.into_iter().map(|t| t.join().unwrap()).collect();
    let store = Store::open(path.to_str().unwrap()).unwrap();
    for (w, ids) in ids.iter().enumerate() {
        let f = Filter {
            host: Some(format!("w{w}")),
            ..Default::default()
        };
        assert_eq!(store.list(&f).unwrap().len(), 40);
        for id in ids {
            assert!(store.resolve(id).is_ok());
        }
    }
    // WAL: readers do not wait for writers.
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn old_json_files_are_imported_once_and_bad_ones_reported_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results");
    std::fs::create_dir_all(&results).unwrap();
    let a = doc(
        &["punctual", "check"],
        "old",
        "2026-01-01T00:00:00Z",
        &[2_000],
    );
    let mut b = doc(
        &["punctual", "experiment", "run", "kurt-irq"],
        "old",
        "2026-01-02T00:00:00Z",
        &[],
    );
    b.extra.insert("experiment".into(), "kurt-irq".into());
    std::fs::write(
        results.join("2026-01-01T00-00-00Z-check-1.json"),
        a.to_json(),
    )
    .unwrap();
    std::fs::write(
        results.join("2026-01-02T00-00-00Z-experiment-2.json"),
        b.to_json(),
    )
    .unwrap();
    std::fs::write(results.join("broken.json"), "{ not json").unwrap();
    std::fs::write(results.join("fig.svg"), svg(0)).unwrap();
    let store = Store::open_in(dir.path()).unwrap();
    let notes = store.take_notes();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("broken.json") && n.contains("left in place")),
        "{notes:?}"
    );
    assert!(
        notes.iter().any(|n| n.contains("imported 2 result file")),
        "{notes:?}"
    );
    let all = store.list(&Filter::default()).unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(store.resolve("latest").unwrap().doc, b);
    assert_eq!(store.resolve("latest~1").unwrap().doc, a);
    assert_eq!(all[0].experiment.as_deref(), Some("kurt-irq"));
    assert!(
        results.join("broken.json").exists(),
        "a bad file is not deleted"
    );
    assert!(results.join("2026-01-01T00-00-00Z-check-1.json").exists());
    drop(store);
    // Once: a new file appearing later is not picked up, and nothing is imported twice.
    std::fs::write(results.join("later.json"), a.to_json()).unwrap();
    let again = Store::open_in(dir.path()).unwrap();
    assert!(again.take_notes().is_empty());
    assert_eq!(again.list(&Filter::default()).unwrap().len(), 2);
    // `import` of a document already stored returns its id rather than a copy.
    let imported = again.import(&results.join("later.json")).unwrap();
    assert_eq!(imported.id, all[1].id);
    assert!(!imported.new);
    assert_eq!(again.list(&Filter::default()).unwrap().len(), 2);
    let e = again.import(&results.join("broken.json")).unwrap_err();
    assert!(matches!(e, StoreError::NotAResult { .. }), "{e}");
    assert_eq!(e.class(), Class::Usage);
}

fn bytes_of(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

#[test]
fn a_database_from_a_newer_schema_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results.db");
    let store = Store::open(path.to_str().unwrap()).unwrap();
    store
        .put(
            &doc(&["punctual", "check"], "b", "2026-01-01T00:00:00Z", &[1]),
            &[],
            &[],
        )
        .unwrap();
    drop(store);
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute(
            "UPDATE schema_version SET version = ?1",
            [SCHEMA_VERSION + 7],
        )
        .unwrap();
        // Fold the WAL into the file, so the bytes compared below are the whole database.
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
    }
    let before = bytes_of(&path);
    let e = Store::open(path.to_str().unwrap()).unwrap_err();
    let StoreError::NewerSchema {
        found, supported, ..
    } = &e
    else {
        panic!("{e}")
    };
    assert_eq!((*found, *supported), (SCHEMA_VERSION + 7, SCHEMA_VERSION));
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("schema version {}", SCHEMA_VERSION + 7)),
        "{msg}"
    );
    assert!(
        msg.contains("untouched") && msg.contains("--no-store"),
        "{msg}"
    );
    assert_eq!(e.class(), Class::System);
    assert_eq!(bytes_of(&path), before, "never written");
}

#[test]
fn a_corrupt_database_is_refused_with_the_fix_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results.db");
    let junk: Vec<u8> = (0..8192u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&path, &junk).unwrap();
    let e = Store::open_in(dir.path()).unwrap_err();
    assert!(matches!(e, StoreError::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains("mv "), "{e}");
    assert_eq!(e.class(), Class::System);
    assert_eq!(bytes_of(&path), junk);
}

#[test]
fn an_unwritable_data_dir_is_a_system_error_naming_no_store() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let e = Store::open_in(&file.join("punctual")).unwrap_err();
    assert!(matches!(e, StoreError::Unwritable { .. }), "{e}");
    assert_eq!(e.class(), Class::System);
    assert!(e.to_string().contains("--no-store"), "{e}");
}

#[test]
fn import_is_idempotent_by_run_id_and_by_content_and_tags_travel_through_export() {
    let dir = tempfile::tempdir().unwrap();
    let here = Store::open(dir.path().join("here.db").to_str().unwrap()).unwrap();
    let there = Store::open(dir.path().join("there.db").to_str().unwrap()).unwrap();
    // A run as this punctual writes it: its own run id, tags given with --tag.
    let mut d = doc(
        &["punctual", "latency"],
        "a",
        "2026-03-01T00:00:00Z",
        &[3_000],
    );
    d.run_id = Some(punctual_result::ResultDoc::new_run_id());
    let tags = vec![("kernel".to_string(), "6.12-rt".to_string())];
    d.tags = tags.iter().cloned().collect();
    let id = here.put(&d, &[], &tags).unwrap();
    assert_eq!(
        Some(&id[..]),
        d.run_id.as_deref().map(|r| &r[..12]),
        "filed under its run id"
    );
    let exported = here.resolve(&id).unwrap().exported();
    let file = dir.path().join("export.json");
    std::fs::write(&file, exported.to_json()).unwrap();
    // Into the same store: nothing new. Into another: the same id, the same tags; then again:
    // nothing new.
    let again = here.import(&file).unwrap();
    assert_eq!((again.id.as_str(), again.new), (id.as_str(), false));
    let first = there.import(&file).unwrap();
    assert_eq!((first.id.as_str(), first.new), (id.as_str(), true));
    assert_eq!(there.resolve(&id).unwrap().tags, tags, "tags survive");
    assert!(!there.import(&file).unwrap().new);
    assert_eq!(there.list(&Filter::default()).unwrap().len(), 1);
    let tagged = Filter {
        tags: tags.clone(),
        ..Default::default()
    };
    assert_eq!(there.list(&tagged).unwrap().len(), 1, "listed by its tag");
    // Laid out by another tool (indented differently, keys reordered): still the same run.
    let value: serde_json::Value = serde_json::from_str(&exported.to_json()).unwrap();
    let reordered: serde_json::Map<String, serde_json::Value> = value
        .as_object()
        .unwrap()
        .iter()
        .rev()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    std::fs::write(&file, serde_json::to_string(&reordered).unwrap()).unwrap();
    assert!(!there.import(&file).unwrap().new);
    // A document from before run ids, stored, exported and imported back: recognised by content
    // (and its export carries the id it was filed under).
    let old = doc(
        &["punctual", "check"],
        "a",
        "2026-03-02T00:00:00Z",
        &[4_000],
    );
    let old_id = here
        .put(&old, &[], &[("box".into(), "lab".into())])
        .unwrap();
    let out = here.resolve(&old_id).unwrap().exported();
    assert_eq!(out.run_id.as_deref(), Some(old_id.as_str()));
    assert_eq!(out.tags.get("box").map(String::as_str), Some("lab"));
    std::fs::write(&file, out.to_json()).unwrap();
    assert_eq!(here.import(&file).unwrap().id, old_id);
    let mut bare = old.clone();
    bare.tags.insert("added".into(), "later".into());
    std::fs::write(&file, bare.to_json()).unwrap();
    let same = here.import(&file).unwrap();
    assert_eq!((same.id.as_str(), same.new), (old_id.as_str(), false));
    let moved = there.import(&file).unwrap();
    assert!(moved.new);
    assert_eq!(
        there.resolve(&moved.id).unwrap().tags,
        vec![("added".to_string(), "later".to_string())]
    );
    // A run id that is not one is refused.
    let mut forged = old.clone();
    forged.run_id = Some("../../x".into());
    std::fs::write(&file, forged.to_json()).unwrap();
    assert_eq!(here.import(&file).unwrap_err().class(), Class::Usage);
}

#[test]
fn a_schema_1_database_is_migrated_with_run_ids_and_stable_digests() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results.db");
    let d = doc(
        &["punctual", "latency"],
        "old",
        "2026-01-05T00:00:00Z",
        &[2_000],
    );
    {
        // The first schema, as punctual 0.1 created it, with a row it wrote (its digest made by
        // std's hasher, which the migration replaces).
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE schema_version (version BIGINT NOT NULL);
             INSERT INTO schema_version VALUES (1);
             CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE results (id TEXT PRIMARY KEY, digest TEXT NOT NULL, stored_at TEXT NOT NULL,
               stored_ns BIGINT NOT NULL, started_at TEXT NOT NULL, started_ns BIGINT NOT NULL,
               command TEXT NOT NULL, experiment TEXT, status TEXT NOT NULL, hostname TEXT NOT NULL,
               kernel TEXT NOT NULL, preempt TEXT NOT NULL, cpu_model TEXT NOT NULL,
               virtualized BIGINT NOT NULL, worst_series TEXT, worst_p99_ns BIGINT);
             CREATE INDEX results_order ON results (started_ns, stored_ns, id);
             CREATE TABLE documents (result_id TEXT PRIMARY KEY REFERENCES results (id) ON DELETE CASCADE,
               doc TEXT NOT NULL, tables TEXT);
             CREATE INDEX results_command ON results (command);
             CREATE INDEX results_host ON results (hostname);
             CREATE INDEX results_digest ON results (digest);
             CREATE TABLE figures (result_id TEXT NOT NULL REFERENCES results (id) ON DELETE CASCADE,
               name TEXT NOT NULL, media_type TEXT NOT NULL, bytes BLOB NOT NULL,
               PRIMARY KEY (result_id, name));
             CREATE TABLE tags (result_id TEXT NOT NULL REFERENCES results (id) ON DELETE CASCADE,
               key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (result_id, key));
             CREATE INDEX tags_key_value ON tags (key, value);",
        )
        .unwrap();
        conn.execute(
            "INSERT INTO results VALUES ('0123456789ab', 'f00d', '2026-01-05T00:00:01Z', 1, \
             '2026-01-05T00:00:00Z', 0, 'latency', NULL, 'ok', 'old', 'k', 'p', 'c', 1, NULL, NULL)",
            [],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO documents VALUES ('0123456789ab', ?1, NULL)",
            [serde_json::to_string(&d).unwrap()],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO tags VALUES ('0123456789ab', 'kernel', 'old')",
            [],
        )
        .unwrap();
    }
    let store = Store::open(path.to_str().unwrap()).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let (version, run_id): (i64, String) = conn
        .query_row(
            "SELECT (SELECT version FROM schema_version), run_id FROM results",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((version, run_id.as_str()), (SCHEMA_VERSION, "0123456789ab"));
    // The same document from a file is the stored run, by its new digest.
    let file = dir.path().join("d.json");
    std::fs::write(&file, d.to_json()).unwrap();
    let again = store.import(&file).unwrap();
    assert_eq!((again.id.as_str(), again.new), ("0123456789ab", false));
    assert_eq!(store.resolve("0123").unwrap().tags[0].1, "old");
}

#[test]
fn reading_never_creates_a_store_and_unknown_urls_and_shared_links_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub").join("results.db");
    let e = Store::open_with(path.to_str().unwrap(), Access::Existing).unwrap_err();
    assert!(matches!(e, StoreError::Absent { .. }), "{e}");
    assert_eq!(e.class(), Class::Usage);
    assert!(e.to_string().contains("--store"), "{e}");
    assert!(!dir.path().join("sub").exists(), "nothing created");
    // A writer does not make the directory either: `--store typo/results.db` is refused.
    let e = Store::open_with(path.to_str().unwrap(), Access::Create).unwrap_err();
    assert_eq!(e.class(), Class::Usage);
    assert!(!dir.path().join("sub").exists(), "nothing created");
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    Store::open_with(path.to_str().unwrap(), Access::Create).unwrap();
    Store::open_with(path.to_str().unwrap(), Access::Existing).unwrap();
    for url in [
        "mysql://u@h/db",
        "sqlite://x.db",
        "https://example.invalid/db",
    ] {
        let e = Store::open_with(url, Access::Create).unwrap_err();
        assert!(
            e.to_string().contains("not a store this punctual knows"),
            "{e}"
        );
        assert_eq!(e.class(), Class::Usage);
    }
    assert!(!Path::new("mysql:").exists() && !Path::new("sqlite:").exists());
    // A link to the store in a directory anyone can write is not followed (someone else could
    // have planted it); one in a private directory is.
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::os::unix::fs::symlink(&path, shared.join("link.db")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = Store::open(shared.join("link.db").to_str().unwrap()).unwrap_err();
    assert!(matches!(e, StoreError::Invalid(_)), "{e}");
    assert!(e.to_string().contains("symbolic link"), "{e}");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o700)).unwrap();
    Store::open(shared.join("link.db").to_str().unwrap()).unwrap();
}

/// Issue 32: a writer's store was opened (so created) when its outputs were checked, and a run
/// refused after that left an empty `results.db`. `Planned::check` opens a store that exists,
/// only checks one that does not, and the first `get` creates it.
#[test]
fn a_planned_store_is_created_by_its_first_result_only() {
    use punctual_store::Planned;
    let dir = tempfile::tempdir().unwrap();
    let d = doc(
        &["punctual", "latency"],
        "a",
        "2026-03-01T00:00:00Z",
        &[3_000],
    );
    // Named and missing: nothing until the first result.
    let path = dir.path().join("named.db");
    let named = path.to_str().unwrap();
    let p = Planned::check(Some(named)).unwrap();
    assert!(!p.exists() && !path.exists());
    assert_eq!(p.location(), named);
    let id = p.get().unwrap().put(&d, &[], &[]).unwrap();
    assert!(p.exists() && path.is_file());
    assert_eq!(p.get().unwrap().resolve(&id).unwrap().doc, d);
    // Named and there: opened at the check.
    let again = Planned::check(Some(named)).unwrap();
    assert!(again.exists());
    assert_eq!(
        again.get().unwrap().list(&Filter::default()).unwrap().len(),
        1
    );
    // The default store: neither the data directory nor its parents are made by the check.
    let data = dir.path().join("a").join("punctual");
    let p = Planned::check_in(&data).unwrap();
    assert!(!p.exists() && !dir.path().join("a").exists());
    p.get().unwrap().put(&d, &[], &[]).unwrap();
    assert!(data.join("results.db").is_file());
    // Refusals make nothing either: a missing directory, a URL of another scheme, a directory at
    // the name, a data directory under a file.
    let typo = dir.path().join("typo").join("results.db");
    let e = Planned::check(Some(typo.to_str().unwrap())).unwrap_err();
    assert_eq!(e.class(), Class::Usage, "{e}");
    assert!(!dir.path().join("typo").exists());
    let e = Planned::check(Some("mysql://u@h/db")).unwrap_err();
    assert!(
        e.to_string().contains("not a store this punctual knows"),
        "{e}"
    );
    assert!(!Path::new("mysql:").exists());
    let e = Planned::check(Some(dir.path().join("a").to_str().unwrap())).unwrap_err();
    assert!(e.to_string().contains("directory"), "{e}");
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let e = Planned::check_in(&file.join("punctual")).unwrap_err();
    assert!(matches!(e, StoreError::Unwritable { .. }), "{e}");
    assert_eq!(e.class(), Class::System);
    assert!(e.to_string().contains("--no-store"), "{e}");
    // Tried, not read from the permissions: root may write /proc by its mode, yet can make nothing
    // there.
    let e = Planned::check_in(Path::new("/proc/nope")).unwrap_err();
    assert!(matches!(e, StoreError::Unwritable { .. }), "{e}");
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with("named.db") && n != "a" && n != "a-file")
        .collect();
    assert!(left.is_empty(), "made by a refusal: {left:?}");
}
