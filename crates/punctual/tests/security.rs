//! What a local user, a typo or a hostile file can do to a root punctual (issue 32, items 3 to 5
//! and the "Low" list): every test is named after the item it guards.

mod common;

use common::{punctual, stderr, write_file};
use std::time::Duration;

/// Issue 32, item 3: a live socket under a wake channel's name (another user's, in the shared
/// directory channels used to live in) made a shielded `run` refuse only after its 75 changes,
/// naming a pid the squatter chose. The preflight finds it first, with the kernel's pid and uid,
/// and `plan check` says the same.
#[test]
fn wake_channel_squatted_refuses_a_shielded_plan_before_any_change() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("sq{}", std::process::id());
    let sock = dir.path().join(format!("punctual-wake-{name}"));
    let _squatter = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let plan = write_file(
        dir.path(),
        "p.toml",
        &format!(
            "[plan]\nshield = true\ncpus = \"{}\"\nduration = \"1s\"\n\
             [[task]]\nname = \"w\"\nperiod = \"10ms\"\n\
             action = {{ kind = \"wake\", channel = \"{name}\" }}\n",
            common::last_cpu()
        ),
    );
    let state = tempfile::tempdir().unwrap();
    let me = format!(
        "in use: pid {} (uid {})",
        std::process::id(),
        // SAFETY: plain syscall.
        unsafe { libc::geteuid() }
    );
    for args in [&["plan", "check"][..], &["run", "--no-store"][..]] {
        let o = punctual()
            .args(args)
            .arg(&plan)
            .env("PUNCTUAL_SHM_DIR", dir.path())
            .env("PUNCTUAL_STATE_DIR", state.path())
            .timeout(Duration::from_secs(30))
            .output()
            .unwrap();
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(&me), "{args:?}: {e}");
        assert!(!e.to_lowercase().contains("shielded"), "{args:?}: {e}");
    }
    // No change was ever journalled (a shield writes its journal before its first change).
    let left: Vec<_> = std::fs::read_dir(state.path()).unwrap().flatten().collect();
    assert!(
        left.iter()
            .all(|e| !e.file_name().to_string_lossy().starts_with("journal")),
        "{left:?}"
    );
    assert!(sock.exists(), "the squatter's socket was not touched");
}
