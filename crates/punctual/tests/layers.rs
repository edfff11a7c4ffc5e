//! The crates' layer order, as docs/design.md writes it, holds in every `crates/*/Cargo.toml`
//! (issue 30): a crate's normal dependencies are all in earlier lines of the list. So an engine
//! never links the lifecycle's driver, store or live bar (they are `session`'s, below the
//! engines), and nobody imports upward.

use std::collections::BTreeMap;
use std::path::PathBuf;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The list in docs/design.md: the fenced block after the line `<!-- layers -->`, one layer per
/// line, crate directory names separated by blanks. Each crate's index is its line.
fn layers() -> BTreeMap<String, usize> {
    let doc = std::fs::read_to_string(workspace().join("docs/design.md")).unwrap();
    let (_, after) = doc
        .split_once("<!-- layers -->")
        .expect("docs/design.md has a `<!-- layers -->` block");
    let block = after
        .split("```")
        .nth(1)
        .expect("a fenced block after the marker");
    let mut at = BTreeMap::new();
    for (i, line) in block.lines().skip(1).enumerate() {
        for name in line.split_whitespace() {
            assert!(
                at.insert(name.to_string(), i).is_none(),
                "{name} is listed twice"
            );
        }
    }
    at
}

/// Each crate directory and its normal (not dev) dependencies on other workspace crates.
fn dependencies() -> BTreeMap<String, Vec<String>> {
    let mut all = BTreeMap::new();
    for e in std::fs::read_dir(workspace().join("crates")).unwrap() {
        let dir = e.unwrap().path();
        let Ok(text) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
            continue;
        };
        let manifest: toml::Table = text.parse().unwrap();
        let deps = manifest
            .get("dependencies")
            .and_then(|d| d.as_table())
            .map(|t| {
                t.keys()
                    .filter_map(|k| k.strip_prefix("punctual-"))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        all.insert(name, deps);
    }
    all
}

#[test]
fn every_crate_depends_only_on_earlier_layers() {
    let at = layers();
    let deps = dependencies();
    let mut wrong = Vec::new();
    for (name, on) in &deps {
        let Some(&mine) = at.get(name) else {
            wrong.push(format!("{name} is not in docs/design.md's layer list"));
            continue;
        };
        for d in on {
            // The binary's package is `punctual`; library crates are `punctual-<dir>`.
            match at.get(d) {
                Some(&theirs) if theirs < mine => {}
                Some(_) => wrong.push(format!(
                    "{name} (line {mine}) depends on {d}, which is not in an earlier line"
                )),
                None => wrong.push(format!("{name} depends on {d}, which the list lacks")),
            }
        }
    }
    for listed in at.keys() {
        if !deps.contains_key(listed) {
            wrong.push(format!("{listed} is listed but is no crate"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The point of the seam: the simulator and the trace parser link neither SQLite nor a
/// PostgreSQL client (they depend on `measure`, not on `session` and its store).
#[test]
fn the_simulator_and_the_trace_parser_link_no_store() {
    let deps = dependencies();
    let mut seen = std::collections::BTreeSet::new();
    let mut todo = vec!["sim".to_string(), "trace".to_string()];
    while let Some(c) = todo.pop() {
        if seen.insert(c.clone()) {
            todo.extend(deps.get(&c).cloned().unwrap_or_default());
        }
    }
    assert!(!seen.contains("store"), "{seen:?}");
    assert!(!seen.contains("session"), "{seen:?}");
    assert!(seen.contains("measure"), "{seen:?}");
}
