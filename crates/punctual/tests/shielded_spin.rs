//! Issues 14 and 16: on a shielded CPU whose plan runs only in-loop actions, the dispatcher spins
//! between releases up to 1 ms apart. In a test binary of its own: it runs FIFO dispatchers on the
//! last CPU, which would starve another test's real-time run there.

mod common;
use common::{is_root, last_cpu, punctual, stderr, write_file as write};

/// A shielded CPU whose plan runs only in-loop actions (here `mark`) is spun on between releases
/// up to 1 ms apart (a sleep would halt the vCPU); the same plan unshielded sleeps between them.
#[test]
fn a_shielded_cpu_with_only_in_loop_actions_spins_between_releases_500us_apart() {
    if !is_root() || last_cpu() == 0 {
        punctual_testkit::skip(
            "a_shielded_cpu_with_only_in_loop_actions_spins",
            "needs root and two CPUs",
        );
        return;
    }
    let _cpu = punctual_testkit::exclusive_cpu();
    let dir = tempfile::tempdir().unwrap();
    let cpu = last_cpu().to_string();
    let text = format!(
        "[plan]\nname = \"half-ms\"\ncpus = \"{cpu}\"\nduration = \"1s\"\n[[task]]\nname = \"m\"\nperiod = \"500us\"\naction = {{ kind = \"mark\" }}\n"
    );
    let run = |name: &str, text: &str| {
        let plan = write(dir.path(), name, text);
        let json = dir.path().join(format!("{name}.json"));
        let state = tempfile::tempdir().unwrap();
        let o = punctual()
            .args(["run", plan.to_str().unwrap(), "--no-store", "--json"])
            .arg(&json)
            .env("PUNCTUAL_STATE_DIR", state.path())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let n = doc["series"][0]["count"].as_u64().unwrap();
        let missed = doc["series"][0]["missed_periods"].as_u64().unwrap();
        let through = doc["dispatchers"][0]["spun_through"].as_u64().unwrap();
        // Every one of the 2,000 periods is run or counted missed. How many a stall (another
        // test binary's exit, a stopped vCPU) skips is the machine's, not the dispatcher's; the
        // ratios below need only enough releases to mean something.
        assert_eq!(n + missed, 2_000, "{n} releases, {missed} missed");
        assert!(n >= 1_000, "{n} releases, {missed} missed");
        (n, through)
    };
    let (n, through) = run("plain.toml", &text);
    assert!(
        through * 10 < n,
        "unshielded: spun through {through} of {n}"
    );
    let (n, through) = run(
        "shielded.toml",
        &text.replace("[plan]\n", "[plan]\nshield = true\n"),
    );
    assert!(
        through * 10 >= n * 9,
        "shielded: spun through {through} of {n}"
    );
}
