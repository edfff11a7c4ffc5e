//! A plan denser than the kernel can wake the dispatcher (issue 16): refused on a CPU that is not
//! shielded, spun through on a shielded one. In a test binary of its own: the shielded run spins
//! the last CPU at FIFO for a second, which would starve the real-time runs of other tests there.

mod common;
use common::{is_root, last_cpu, punctual, stderr, write_file as write};

#[test]
fn a_plan_denser_than_the_kernel_wakes_is_refused_unshielded_and_spun_through_shielded() {
    let dir = tempfile::tempdir().unwrap();
    let cpu = last_cpu().to_string();
    let text = format!(
        "[plan]\nname = \"dense\"\ncpus = \"{cpu}\"\nduration = \"1s\"\n[[task]]\nname = \"fast\"\nperiod = \"10us\"\naction = {{ kind = \"mark\" }}\n"
    );
    let plan = write(dir.path(), "dense.toml", &text);
    let marker = dir.path().join("ran.json");
    // Unshielded: refused before anything runs, with the figures and the fix.
    let o = punctual()
        .args(["run", plan.to_str().unwrap(), "--json"])
        .arg(&marker)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    for needed in [
        "100000 releases/s",
        "100.0 %",
        "50.0 %",
        "shield = true",
        "--spin-budget 100%",
    ] {
        assert!(e.contains(needed), "{needed} missing: {e}");
    }
    assert!(!marker.exists(), "a refused plan ran");
    let o = punctual()
        .args([
            "plan",
            "check",
            plan.to_str().unwrap(),
            "--spin-budget",
            "100%",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("verdict: admitted"));

    if !is_root() || last_cpu() == 0 {
        punctual_testkit::skip(
            "a_plan_denser_than_the_kernel_wakes (shielded run)",
            "needs root and two CPUs",
        );
        return;
    }
    let _cpu = punctual_testkit::exclusive_cpu();
    // Shielded: it runs, and the dispatcher spins through the releases instead of sleeping 5 us
    // at a time; every release ran or was counted missed (host holds make some miss on a VM).
    let shielded = write(
        dir.path(),
        "shielded.toml",
        &text.replace("[plan]\n", "[plan]\nshield = true\n"),
    );
    let state = tempfile::tempdir().unwrap();
    let json = dir.path().join("shielded.json");
    let o = punctual()
        .args(["run", shielded.to_str().unwrap(), "--json"])
        .arg(&json)
        .env("PUNCTUAL_STATE_DIR", state.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let s = &doc["series"][0];
    let (n, missed) = (
        s["count"].as_u64().unwrap(),
        s["missed_periods"].as_u64().unwrap(),
    );
    assert!((99_000..=100_001).contains(&(n + missed)), "{n} + {missed}");
    let through = doc["dispatchers"][0]["spun_through"].as_u64().unwrap();
    assert!(through * 10 >= n * 9, "spun through {through} of {n}");
}
