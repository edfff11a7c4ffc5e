//! Leftovers of killed runs: every start undoes the journals of dead punctual processes, and says
//! which `PUNCTUAL_*` directories a privileged process did not believe.

use crate::Env;
use punctual_rt::journal::RestoreReport;

/// What a restore did, one line each: journals replayed, changes that failed, what was refused.
pub fn describe_restore(r: &RestoreReport) -> Vec<String> {
    let mut lines = Vec::new();
    for j in &r.journals {
        lines.push(format!(
            "restored {} setting(s) left by an earlier run (pid {}) from {}{}",
            j.settings,
            j.owner_pid,
            j.journal.display(),
            if j.left_changed > 0 {
                format!(
                    "; {} changed since by someone else, left as they are",
                    j.left_changed
                )
            } else {
                String::new()
            }
        ));
        for (change, err) in &j.failed {
            lines.push(format!("could not restore {change}: {err}"));
        }
    }
    for (path, why) in &r.refused {
        lines.push(format!(
            "refused to replay {}: {why}",
            punctual_rt::text::display_path(path)
        ));
    }
    lines
}

/// Undo what earlier punctual runs left changed when they were killed or crashed (their journals
/// in the state directory), and say so; say which `PUNCTUAL_*` directories were ignored. Called
/// once at every start, whatever the command. Returns the report.
pub fn restore_leftovers(env: &Env) -> RestoreReport {
    for (var, value, why) in punctual_rt::env::ignored() {
        env.note(&format!(
            "ignoring {var}={}: {why}",
            punctual_rt::text::display_path(&value)
        ));
    }
    let report = punctual_rt::journal::restore_stale();
    for line in describe_restore(&report) {
        env.note(&line);
    }
    // A dispatcher killed before its clients attached leaves its channel's socket behind.
    let dir = punctual_periodic::channel::shm_dir();
    for name in punctual_periodic::channel::remove_stale(&dir) {
        env.note(&format!(
            "removed the socket of wake channel '{name}' left by a killed run"
        ));
    }
    report
}
