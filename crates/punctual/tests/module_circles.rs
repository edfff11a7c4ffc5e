//! No module circles inside the workspace's crates (issue 30): `scripts/module-circles.sh` lists
//! sibling modules of one crate that reach each other and exits 1 if there is any.

mod common;

use std::path::Path;
use std::process::Output;

/// Circles known and not yet broken, as the script prints them. A circle that is broken must
/// leave this list (the test fails until it does), and no other may join it.
const KNOWN: &[&str] = &[
    // The binary's `cmd::docs` builds the man pages from `cli`'s clap tree, and `cli` names the
    // commands' flags from their `cmd` modules; the binary is being reshaped elsewhere (issue 30).
    "crates/punctual/src: cli <-> cmd",
];

/// The script's output, or `None` (after saying why) when bash or python3 is missing.
fn circles(test: &str, args: &[&Path]) -> Option<Output> {
    common::repo_script(test, "module-circles.sh", args)
}

/// The circles named in the output (their header lines; edges are indented below them).
fn named(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn no_module_circle_inside_a_crate() {
    let Some(out) = circles("no_module_circle_inside_a_crate", &[]) else {
        return;
    };
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "the script failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let found = named(&out);
    let new: Vec<&String> = found
        .iter()
        .filter(|c| !KNOWN.contains(&c.as_str()))
        .collect();
    assert!(
        new.is_empty(),
        "module circles (move the shared piece into one module or a module below both):\n{listed}"
    );
    let gone: Vec<&&str> = KNOWN
        .iter()
        .filter(|k| !found.contains(&k.to_string()))
        .collect();
    assert!(
        gone.is_empty(),
        "circles broken since: take them out of KNOWN: {gone:?}"
    );
}

fn write(dir: &Path, file: &str, text: &str) {
    let path = dir.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The check is only as good as the script: it must find a circle through a `use` group, a path
/// in code and a root re-export, and must not count comments, strings, tests, or a module that
/// reaches its parent.
#[test]
fn the_script_finds_a_circle_and_only_a_circle() {
    let dir = tempfile::tempdir().unwrap();
    let circle = dir.path().join("circle/src");
    write(&circle, "lib.rs", "mod a;\nmod b;\nmod c;\npub use b::B;\n");
    write(&circle, "a.rs", "use crate::{c::C, B};\npub struct A;\n");
    write(
        &circle,
        "b.rs",
        "pub struct B;\nfn f() -> Option<crate::a::A> { None }\n",
    );
    write(&circle, "c.rs", "pub struct C;\n");
    let clean = dir.path().join("clean/src");
    write(&clean, "lib.rs", "mod a;\nmod b;\npub struct Root;\n");
    write(
        &clean,
        "a.rs",
        "use crate::b::B;\nuse super::Root;\npub mod inner;\npub struct A;\n",
    );
    write(&clean, "a/inner.rs", "use super::A;\n");
    write(
        &clean,
        "b.rs",
        "pub struct B;\n/// [`crate::a::A`]\nconst S: &str = \"crate::a::A\";\n\
         #[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n",
    );
    let Some(out) = circles(
        "the_script_finds_a_circle_and_only_a_circle",
        &[&circle, &clean],
    ) else {
        return;
    };
    let listed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "output: {listed}");
    let found = named(&out);
    assert_eq!(found.len(), 1, "output: {listed}");
    assert!(
        found[0].ends_with("circle/src: a <-> b"),
        "output: {listed}"
    );
    assert!(
        listed.contains("a -> b") && listed.contains("b -> a") && !listed.contains("-> c"),
        "output: {listed}"
    );
}
