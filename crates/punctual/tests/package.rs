//! Issue 28: the Debian package. `scripts/package-deb.sh` packages the binaries this test run built
//! (a release build would take minutes here), the package is unpacked into a scratch root, and
//! from there `punctual --version` names the version and commit, the man pages and completions are
//! where man and the shells look, and `examples/c/periodic.c` links with pkg-config against the
//! installed header and library and runs.

mod common;
use common::bin_path;
use punctual_testkit::{missing, tool};
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_package_installs_into_a_scratch_root_and_works_from_there() {
    let test = "the_package_installs_into_a_scratch_root_and_works_from_there";
    for (name, package) in [
        ("dpkg-deb", "dpkg"),
        ("gcc", "gcc"),
        ("pkg-config", "pkg-config"),
    ] {
        if tool(test, name, package).is_none() {
            return;
        }
    }
    let bin_dir = bin_path().parent().unwrap().to_path_buf();
    if !bin_dir.join("deps/libpunctual.so").exists() && !bin_dir.join("libpunctual.so").exists() {
        missing(
            test,
            "libpunctual.so is not built in this target directory (cargo test --workspace builds it)",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let deb = run(Command::new(repo().join("scripts/package-deb.sh"))
        .arg("--bin-dir")
        .arg(&bin_dir)
        .arg("--out")
        .arg(&out)
        .arg("--fast"));
    let deb = PathBuf::from(deb.trim());
    assert!(deb.is_file(), "{}", deb.display());
    let field = |f: &str| run(Command::new("dpkg-deb").arg("-f").arg(&deb).arg(f));
    assert_eq!(field("Package").trim(), "punctual");
    assert_eq!(field("Version").trim(), env!("CARGO_PKG_VERSION"));

    // Installed into a scratch root (what dpkg --root would write, without its database).
    let root = dir.path().join("root");
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root));
    let installed = root.join("usr/bin/punctual");
    let version = run(Command::new(&installed).arg("--version"));
    let re = regex::Regex::new(r"^punctual (\d+\.\d+\.\d+) \(commit ([0-9a-f]{12}|unknown)\)\n$")
        .unwrap();
    let c = re
        .captures(&version)
        .unwrap_or_else(|| panic!("{version:?}"));
    assert_eq!(&c[1], env!("CARGO_PKG_VERSION"));
    // In a git checkout the commit is HEAD's as it was when the binary was built: a hash.
    if Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(repo())
        .output()
        .is_ok_and(|o| o.status.success())
    {
        assert_ne!(&c[2], "unknown", "{version}");
    }

    // man finds the pages; each command has one, the cyclictest page lists cyclictest's flags.
    let man = root.join("usr/share/man/man1");
    for page in [
        "punctual.1.gz",
        "punctual-latency.1.gz",
        "punctual-cyclictest.1.gz",
        "punctual-plan-convert.1.gz",
    ] {
        assert!(man.join(page).is_file(), "{page}");
    }
    let page = run(Command::new("zcat").arg(man.join("punctual-cyclictest.1.gz")));
    assert!(page.contains(".TH punctual-cyclictest 1"), "{page}");
    assert!(page.contains("--histofall=US"), "{page}");
    assert!(
        !man.join("punctual-__man.1.gz").exists(),
        "hidden commands have no page"
    );
    for (file, needle) in [
        (
            "usr/share/bash-completion/completions/punctual",
            "cyclictest",
        ),
        (
            "usr/share/zsh/vendor-completions/_punctual",
            "#compdef punctual",
        ),
        (
            "usr/share/fish/vendor_completions.d/punctual.fish",
            "complete -c punctual",
        ),
    ] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        assert!(text.contains(needle), "{file}");
    }
    let schema =
        std::fs::read_to_string(root.join("usr/share/punctual/punctual.result-1.schema.json"))
            .unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&schema).unwrap(),
        serde_json::from_str::<serde_json::Value>(punctual_result::SCHEMA_JSON).unwrap()
    );
    assert!(root.join("usr/share/doc/punctual/copyright").is_file());

    // The C example, compiled and linked with pkg-config against the scratch root only.
    let flags = run(Command::new("pkg-config")
        .args(["--cflags", "--libs", "punctual"])
        .env("PKG_CONFIG_LIBDIR", root.join("usr/lib/pkgconfig"))
        .env("PKG_CONFIG_SYSROOT_DIR", &root));
    assert!(
        flags.contains(&root.join("usr/include").display().to_string()),
        "{flags}"
    );
    let periodic = dir.path().join("periodic");
    run(Command::new("gcc")
        .arg(root.join("usr/share/punctual/examples/c/periodic.c"))
        .args(flags.split_whitespace())
        .arg("-o")
        .arg(&periodic));
    let out = run(Command::new(&periodic)
        .args(["--period-us", "1000", "--loops", "50"])
        .env("LD_LIBRARY_PATH", root.join("usr/lib")));
    assert!(
        out.contains("\"count\":50") || out.contains("\"count\": 50"),
        "{out}"
    );
}
