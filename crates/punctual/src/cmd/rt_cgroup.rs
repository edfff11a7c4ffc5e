//! `--move-to-rt-cgroup`: run in a cpu cgroup that has a real-time budget when punctual's own has
//! none (real-time group scheduling), and go back after. The diagnosis and the move are
//! `punctual_rt::rtgroup`'s.

use punctual_result::Failure;
use punctual_rt::rtgroup::{self, GroupFacts, MoveGuard};
use punctual_rt::text::display_path;
use punctual_session::Env;

/// Move this process where real-time scheduling is allowed, if its group refuses it. `None`:
/// nothing needed moving (said why).
pub fn enter(env: &Env) -> Result<Option<MoveGuard>, Failure> {
    let Some(facts) = GroupFacts::read() else {
        env.note("--move-to-rt-cgroup: no cpu cgroup hierarchy found; nothing moved");
        return Ok(None);
    };
    let Some(blocked) = rtgroup::diagnose(&facts) else {
        env.note(&format!(
            "--move-to-rt-cgroup: cgroup {} allows real-time scheduling; nothing moved",
            display_path(&facts.dir())
        ));
        return Ok(None);
    };
    let Some(target) = blocked.target else {
        return Err(Failure::system(format!(
            "--move-to-rt-cgroup: {}; no group to move to. Fix: {}",
            blocked.why, blocked.fix
        )));
    };
    let g = MoveGuard::to(&facts, &target).map_err(Failure::from)?;
    env.note(&format!(
        "moved to cgroup {} for this run (from {}, which has no real-time budget); moved back at the end",
        display_path(g.to_dir()),
        display_path(g.from())
    ));
    Ok(Some(g))
}

/// Back to the group the process came from; says so when the kernel refuses.
pub fn leave(g: MoveGuard, env: &Env) {
    let from = g.from().to_path_buf();
    if let Err(e) = g.back() {
        env.note(&format!(
            "could not move back to cgroup {}: {e}",
            display_path(&from)
        ));
    }
}
