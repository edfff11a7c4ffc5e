//! Builds `examples/c/periodic.c` against `punctual.h` and the freshly built `libpunctual.so` with gcc,
//! and runs it: the C ABI works end to end from a C program.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The directory cargo puts `libpunctual.so` in (target/<profile>), found from this test's path.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap().to_path_buf(); // target/<profile>/deps/x -> target/<profile>
    for d in [profile_dir.clone(), profile_dir.join("deps")] {
        if d.join("libpunctual.so").exists() {
            return d;
        }
    }
    panic!("libpunctual.so not found under {}", profile_dir.display());
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

pub fn build_example(out: &Path) -> Option<PathBuf> {
    if Command::new("gcc").arg("--version").output().is_err() {
        punctual_testkit::missing("c_example", "gcc is not installed (apt-get install -y gcc)");
        return None;
    }
    let lib = lib_dir();
    let bin = out.join("periodic");
    let st = Command::new("gcc")
        .args(["-O2", "-Wall", "-Werror", "-I"])
        .arg(repo().join("crates/libpunctual/include"))
        .arg(repo().join("examples/c/periodic.c"))
        .arg("-L")
        .arg(&lib)
        .args(["-lpunctual", "-o"])
        .arg(&bin)
        .status()
        .unwrap();
    assert!(st.success(), "gcc failed");
    Some(bin)
}

#[test]
fn the_c_example_keeps_its_period_and_reports_json_stats() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(bin) = build_example(tmp.path()) else {
        return;
    };
    let out = Command::new(&bin)
        .args(["--period-us", "2000", "--loops", "150"])
        .env("LD_LIBRARY_PATH", lib_dir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    let first = lines.next().unwrap();
    assert!(first.starts_with("releases 150 missed "), "{first}");
    let v: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(v["count"], 150);
    assert_eq!(v["period_ns"], 2_000_000);
    assert_eq!(v["mode"], "standalone");
    assert!(v["percentiles"]["99"].as_u64().is_some());
}

#[test]
fn the_c_example_reports_bad_arguments_through_errno() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(bin) = build_example(tmp.path()) else {
        return;
    };
    let out = Command::new(&bin)
        .args(["--period-us", "0"])
        .env("LD_LIBRARY_PATH", lib_dir())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Invalid argument"));
}
