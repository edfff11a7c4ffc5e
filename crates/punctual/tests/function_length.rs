//! No function over 150 lines in the workspace's sources (issue 12): `scripts/long-functions.sh`
//! lists the long ones and exits 1 if there is any.

mod common;

use std::process::Output;

/// The script's output, or `None` (after saying why) when bash or python3 is missing.
fn long_functions(test: &str, args: &[&str]) -> Option<Output> {
    common::repo_script(test, "long-functions.sh", args)
}

#[test]
fn no_function_over_150_lines() {
    let Some(out) = long_functions("no_function_over_150_lines", &[]) else {
        return;
    };
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && listed.trim().is_empty(),
        "functions over 150 lines (split them, issue 12):\n{listed}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The check above is only as good as the script: at a low limit it must find this very file's
/// functions and fail.
#[test]
fn long_functions_script_reports_a_long_function() {
    let Some(out) = long_functions(
        "long_functions_script_reports_a_long_function",
        &["5", "crates/punctual/tests/function_length.rs"],
    ) else {
        return;
    };
    let listed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "output: {listed}");
    assert!(
        listed.contains("function_length.rs:") && listed.contains(" no_function_over_150_lines"),
        "output: {listed}"
    );
}
