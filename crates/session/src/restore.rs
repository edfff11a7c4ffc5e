//! Leftovers of killed runs: every start undoes the journals of dead punctual processes, and says
//! which `PUNCTUAL_*` directories a privileged process did not believe.

use crate::{Env, Exit};
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

/// `punctual shield --restore`: what this start restored already (every command restores leftovers
/// first, and said so on stderr) and anything left since; exit 3 when a change could not be
/// restored or a journal was refused. Each restore is described once (issue 31: twice, and a
/// shield's 70 settings counted as 1).
pub fn restore_by_hand(env: &Env) -> Exit {
    let earlier = punctual_rt::journal::earlier_restores();
    let now = punctual_rt::journal::restore_stale();
    for line in describe_restore(&now) {
        env.show(&format!("{line}\n"), false);
    }
    let all: Vec<&RestoreReport> = earlier.iter().chain([&now]).collect();
    let troubled = all
        .iter()
        .any(|r| !r.refused.is_empty() || r.journals.iter().any(|j| !j.failed.is_empty()));
    let journals = all.iter().flat_map(|r| &r.journals);
    let settings: usize = journals.clone().map(|j| j.settings).sum();
    let left: usize = journals.clone().map(|j| j.left_changed).sum();
    if all.iter().all(|r| r.is_empty()) {
        env.show(
            &format!(
                "nothing to restore: no journal of a dead punctual run in {}\n",
                punctual_rt::journal::state_dir().display()
            ),
            false,
        );
    } else {
        let since = match left {
            0 => String::new(),
            n => format!("; {n} changed since by someone else, left as they are"),
        };
        env.show(
            &format!(
                "restored {settings} setting(s) from {} journal(s) of earlier runs{since}\n",
                journals.count()
            ),
            false,
        );
    }
    match troubled {
        true => Exit::System,
        false => Exit::Ok,
    }
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
