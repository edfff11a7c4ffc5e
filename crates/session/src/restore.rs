//! Leftovers of killed runs: every start undoes the journals of dead punctual processes.

use crate::Env;

/// Undo what earlier punctual runs left changed when they were killed or crashed (their journals
/// in the state directory), and say so. Returns how many settings were restored. Called once at
/// every start, whatever the command.
pub fn restore_leftovers(env: &Env) -> usize {
    let mut restored = 0;
    for r in punctual_rt::journal::restore_stale() {
        env.note(&format!(
            "restored {} setting(s) left by an earlier run (pid {}) from {}",
            r.restored.len(),
            r.owner_pid,
            r.journal.display()
        ));
        restored += r.restored.len();
        for (change, err) in &r.failed {
            env.note(&format!("could not restore {change}: {err}"));
        }
    }
    restored
}
