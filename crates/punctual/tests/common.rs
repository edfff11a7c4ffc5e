//! Shared helpers for the binary's tests.
#![allow(dead_code)]

use assert_cmd::Command;
use std::path::Path;

pub fn punctual() -> Command {
    let mut c = Command::cargo_bin("punctual").unwrap();
    // Keep stored results and journals out of the user's directories.
    c.env("PUNCTUAL_DATA_DIR", punctual_testkit::data_dir());
    c
}

pub fn bin_path() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("punctual")
}

pub fn is_root() -> bool {
    // SAFETY: plain syscall.
    unsafe { libc::geteuid() == 0 }
}

/// Validate a document against the published schema; return it parsed.
pub fn valid_doc(path: &Path) -> serde_json::Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let schema: serde_json::Value = serde_json::from_str(punctual_result::SCHEMA_JSON).unwrap();
    let v = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = v
        .iter_errors(&doc)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "{} does not match the schema: {errors:#?}",
        path.display()
    );
    doc
}

pub fn pid_alive(pid: i64) -> bool {
    // A zombie is gone for our purposes only once reaped; /proc/PID exists until then.
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// The highest-numbered online CPU (where plans and shields in these tests run).
pub fn last_cpu() -> usize {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    s.trim().rsplit([',', '-']).next().unwrap().parse().unwrap()
}

/// Writes `text` to `dir/name` and returns the path.
pub fn write_file(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// A finished command's standard error, as text.
pub fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The output of `scripts/<script>` (a bash script running python3) with `args`, or `None`
/// (after saying why) when bash or python3 is missing.
pub fn repo_script<S: AsRef<std::ffi::OsStr>>(
    test: &str,
    script: &str,
    args: &[S],
) -> Option<std::process::Output> {
    for tool in ["bash", "python3"] {
        let found = std::process::Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            punctual_testkit::missing(test, &format!("{tool} is not installed"));
            return None;
        }
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scripts")
        .join(script);
    let out = std::process::Command::new("bash")
        .arg(&path)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", path.display()));
    Some(out)
}
