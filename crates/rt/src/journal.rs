//! The journal of system changes that outlive punctual's process: files written (sysctls, IRQ
//! affinities, tracefs knobs), other tasks' CPU affinities, directories created (tracefs instances),
//! filesystems mounted. Each change is recorded with what restores it before it is made, and the
//! journal is kept in a state file (`/run/punctual/journal-<pid>.json` for root, the user's runtime
//! or state directory otherwise), so a run killed with SIGKILL is undone by the next run
//! ([`restore_stale`]) or `punctual shield --restore`. Guards undo their change on drop.

use serde::{Deserialize, Serialize};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// One change and how to undo it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Change {
    /// A file whose original contents are written back.
    File { path: PathBuf, original: String },
    /// Another task's CPU affinity. `start_time` (from /proc/PID/stat) guards against pid reuse;
    /// `set_to`, when known, is what punctual set: a task whose affinity changed since (it pinned
    /// itself elsewhere) is left as it is now.
    TaskAffinity {
        pid: i32,
        start_time: u64,
        cpus: Vec<usize>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        set_to: Option<Vec<usize>>,
    },
    /// A directory punctual created, removed on undo (tracefs instances: rmdir only).
    RemoveDir { path: PathBuf },
    /// A filesystem punctual mounted, unmounted on undo.
    Unmount { path: PathBuf },
    /// Everything the process `pid` holds in the registry of settings several punctual processes
    /// change at once (shields: IRQ affinities, other tasks' masks; see [`crate::stacked`]).
    /// Undo releases it there: only the registry's own allow list of files is ever written.
    Stacked { pid: i32, start_time: u64 },
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::File { path, original } => {
                write!(f, "{} (back to '{}')", path.display(), original.trim())
            }
            Change::TaskAffinity { pid, cpus, .. } => {
                write!(
                    f,
                    "affinity of pid {pid} (back to {})",
                    crate::format_cpu_list(cpus)
                )
            }
            Change::RemoveDir { path } => write!(f, "directory {}", path.display()),
            Change::Unmount { path } => write!(f, "mount {}", path.display()),
            Change::Stacked { pid, .. } => write!(f, "shield settings held by pid {pid}"),
        }
    }
}

impl Change {
    /// Undo the change. A task that has exited (or whose pid was reused) needs nothing.
    pub fn undo(&self) -> io::Result<()> {
        match self {
            // A file that is gone (its IRQ, its tracefs instance) has nothing left to restore.
            Change::File { path, original } => match std::fs::write(path, original.as_bytes()) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                r => r,
            },
            Change::TaskAffinity {
                pid,
                start_time,
                cpus,
                set_to,
            } => {
                if task_start_time(*pid) != Some(*start_time) {
                    return Ok(());
                }
                if let Some(set) = set_to {
                    if crate::affinity::get(*pid).ok().as_ref() != Some(set) {
                        return Ok(());
                    }
                }
                match crate::affinity::set(*pid, cpus) {
                    Ok(()) => Ok(()),
                    Err(crate::RtError::Io { source, .. })
                    | Err(crate::RtError::Refused { source, .. })
                        if source.raw_os_error() == Some(libc::ESRCH) =>
                    {
                        Ok(())
                    }
                    Err(e) => Err(io::Error::other(e.to_string())),
                }
            }
            Change::RemoveDir { path } => match std::fs::remove_dir(path) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                r => r,
            },
            Change::Unmount { path } => nix::mount::umount(path.as_path()).map_err(io::Error::from),
            Change::Stacked { pid, start_time } => {
                let r = crate::stacked::release_in_system(crate::stacked::Owner {
                    pid: *pid,
                    start_time: *start_time,
                })?;
                match r.failed.first() {
                    Some((t, e)) => Err(io::Error::other(format!("{t}: {e}"))),
                    None => Ok(()),
                }
            }
        }
    }
}

/// Start time of a task in clock ticks since boot (field 22 of /proc/PID/stat).
pub fn task_start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

#[derive(Serialize, Deserialize, Default)]
struct StateFile {
    pid: i32,
    start_time: u64,
    changes: Vec<(u64, Change)>,
}

/// The process-wide journal.
pub struct Journal {
    dir: PathBuf,
    inner: Mutex<State>,
}

struct State {
    next_id: u64,
    changes: Vec<(u64, Change)>,
}

static GLOBAL: OnceLock<Journal> = OnceLock::new();

/// The journal of this process (created on first use, in [`state_dir`]).
pub fn global() -> &'static Journal {
    GLOBAL.get_or_init(|| Journal::new(state_dir()))
}

/// Where journals live: `$PUNCTUAL_STATE_DIR`, else `/run/punctual` when writable (cleared at boot, as
/// the settings themselves are), else the user's runtime or state directory.
pub fn state_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("PUNCTUAL_STATE_DIR") {
        return PathBuf::from(d);
    }
    let run = Path::new("/run");
    if nix::unistd::access(run, nix::unistd::AccessFlags::W_OK).is_ok() {
        return run.join("punctual");
    }
    dirs::runtime_dir()
        .or_else(dirs::state_dir)
        .unwrap_or_else(std::env::temp_dir)
        .join("punctual")
}

/// Undoes one journalled change when dropped.
#[must_use = "dropping the guard undoes the change at once"]
pub struct ChangeGuard {
    id: u64,
    journal: &'static Journal,
}

impl ChangeGuard {
    /// Keep the change for the rest of the process (it is still undone at exit by [`Journal::undo_all`]
    /// if the caller asks, or by the next run if the process dies).
    pub fn forget(self) {
        std::mem::forget(self)
    }
}

impl Drop for ChangeGuard {
    fn drop(&mut self) {
        let _ = self.journal.undo(self.id);
    }
}

impl Journal {
    fn new(dir: PathBuf) -> Self {
        Journal {
            dir,
            inner: Mutex::new(State {
                next_id: 1,
                changes: Vec::new(),
            }),
        }
    }

    fn path(&self) -> PathBuf {
        self.dir
            .join(format!("journal-{}.json", std::process::id()))
    }

    fn persist(&self, state: &State) -> io::Result<()> {
        let path = self.path();
        if state.changes.is_empty() {
            return match std::fs::remove_file(&path) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                r => r,
            };
        }
        std::fs::create_dir_all(&self.dir)?;
        let pid = std::process::id() as i32;
        let file = StateFile {
            pid,
            start_time: task_start_time(pid).unwrap_or(0),
            changes: state.changes.clone(),
        };
        let tmp = path.with_extension("tmp");
        std::fs::write(
            &tmp,
            serde_json::to_vec_pretty(&file).map_err(io::Error::other)?,
        )?;
        std::fs::rename(tmp, path)
    }

    /// Record a change the caller is about to make (journal first, so a crash in between is covered).
    pub fn record(&'static self, change: Change) -> io::Result<ChangeGuard> {
        let mut st = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let id = st.next_id;
        st.next_id += 1;
        st.changes.push((id, change));
        if let Err(e) = self.persist(&st) {
            st.changes.pop();
            return Err(e);
        }
        Ok(ChangeGuard { id, journal: self })
    }

    /// Write `value` to `path`, remembering the original contents. Undone when the guard drops.
    pub fn write_file(
        &'static self,
        path: impl AsRef<Path>,
        value: &str,
    ) -> io::Result<ChangeGuard> {
        let path = path.as_ref();
        let original = std::fs::read_to_string(path)?;
        let guard = self.record(Change::File {
            path: path.to_path_buf(),
            original,
        })?;
        std::fs::write(path, value.as_bytes())?; // on error the guard drops and rewrites the original
        Ok(guard)
    }

    /// Set another task's affinity, remembering the previous one.
    pub fn set_task_affinity(
        &'static self,
        pid: i32,
        cpus: &[usize],
    ) -> Result<ChangeGuard, crate::RtError> {
        let previous = crate::affinity::get(pid)?;
        let start_time = task_start_time(pid).ok_or_else(|| {
            crate::RtError::io(
                format!("reading /proc/{pid}/stat"),
                io::ErrorKind::NotFound.into(),
            )
        })?;
        let guard = self
            .record(Change::TaskAffinity {
                pid,
                start_time,
                cpus: previous,
                set_to: Some(normalised(cpus)),
            })
            .map_err(|e| crate::RtError::io("writing the journal", e))?;
        crate::affinity::set(pid, cpus)?;
        Ok(guard)
    }

    fn undo(&self, id: u64) -> io::Result<()> {
        let mut st = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let Some(pos) = st.changes.iter().position(|(i, _)| *i == id) else {
            return Ok(());
        };
        let (_, change) = st.changes[pos].clone();
        let result = change.undo();
        st.changes.remove(pos);
        self.persist(&st)?;
        result
    }

    /// Undo everything still recorded, newest first. Returns what could not be undone; those changes
    /// stay in the journal, so the next run retries them (a tracefs instance cannot be removed while
    /// this process still has its files open, as on a second Ctrl-C; once the process is gone it can).
    pub fn undo_all(&self) -> Vec<(Change, io::Error)> {
        let mut st = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut failed = Vec::new();
        let mut kept = Vec::new();
        while let Some((id, change)) = st.changes.pop() {
            if let Err(e) = change.undo() {
                kept.push((id, change.clone()));
                failed.push((change, e));
            }
        }
        kept.reverse();
        st.changes = kept;
        let _ = self.persist(&st);
        failed
    }

    /// Changes currently recorded (oldest first).
    pub fn pending(&self) -> Vec<Change> {
        let st = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        st.changes.iter().map(|(_, c)| c.clone()).collect()
    }
}

fn normalised(cpus: &[usize]) -> Vec<usize> {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    v
}

/// What [`restore_stale`] did with one leftover journal.
#[derive(Debug)]
pub struct StaleReport {
    pub journal: PathBuf,
    pub owner_pid: i32,
    pub restored: Vec<Change>,
    pub failed: Vec<(Change, io::Error)>,
}

/// Undo the journals of punctual processes that are gone (killed, crashed). Journals of live
/// processes are left alone. Safe to call at every start.
pub fn restore_stale() -> Vec<StaleReport> {
    restore_stale_in(&state_dir())
}

pub fn restore_stale_in(dir: &Path) -> Vec<StaleReport> {
    let mut reports = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return reports;
    };
    let me = std::process::id() as i32;
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().to_string();
        if !(name.starts_with("journal-") && name.ends_with(".json")) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(file) = serde_json::from_str::<StateFile>(&text) else {
            continue;
        };
        let alive = file.pid == me || task_start_time(file.pid) == Some(file.start_time);
        if alive {
            continue;
        }
        let mut report = StaleReport {
            journal: path.clone(),
            owner_pid: file.pid,
            restored: vec![],
            failed: vec![],
        };
        for (_, change) in file.changes.into_iter().rev() {
            match change.undo() {
                Ok(()) => report.restored.push(change),
                Err(e) => report.failed.push((change, e)),
            }
        }
        if report.failed.is_empty() {
            let _ = std::fs::remove_file(&path);
        }
        reports.push(report);
    }
    reports
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaked_journal(dir: &Path) -> &'static Journal {
        Box::leak(Box::new(Journal::new(dir.to_path_buf())))
    }

    #[test]
    fn file_change_is_undone_on_drop_and_the_state_file_follows() {
        let tmp = tempfile::tempdir().unwrap();
        let j = leaked_journal(tmp.path());
        let knob = tmp.path().join("knob");
        std::fs::write(&knob, "100\n").unwrap();
        let g = j.write_file(&knob, "1").unwrap();
        assert_eq!(std::fs::read_to_string(&knob).unwrap(), "1");
        assert!(j.path().exists());
        assert_eq!(j.pending().len(), 1);
        drop(g);
        assert_eq!(std::fs::read_to_string(&knob).unwrap(), "100\n");
        assert!(!j.path().exists());
    }

    #[test]
    fn undo_all_runs_newest_first() {
        let tmp = tempfile::tempdir().unwrap();
        let j = leaked_journal(tmp.path());
        let knob = tmp.path().join("knob");
        std::fs::write(&knob, "a").unwrap();
        let g1 = j.write_file(&knob, "b").unwrap();
        let g2 = j.write_file(&knob, "c").unwrap();
        assert!(j.undo_all().is_empty());
        assert_eq!(std::fs::read_to_string(&knob).unwrap(), "a");
        // The guards find nothing left to undo.
        drop(g2);
        drop(g1);
        assert_eq!(std::fs::read_to_string(&knob).unwrap(), "a");
    }

    #[test]
    fn undo_all_keeps_what_it_could_not_undo() {
        let tmp = tempfile::tempdir().unwrap();
        let j = leaked_journal(tmp.path());
        let busy = tmp.path().join("busy");
        std::fs::create_dir(&busy).unwrap();
        std::fs::write(busy.join("file"), "x").unwrap(); // rmdir fails: not empty
        let g = j.record(Change::RemoveDir { path: busy.clone() }).unwrap();
        let failed = j.undo_all();
        assert_eq!(failed.len(), 1);
        assert_eq!(j.pending(), vec![Change::RemoveDir { path: busy.clone() }]);
        assert!(j.path().exists(), "kept in the state file for the next run");
        std::fs::remove_file(busy.join("file")).unwrap();
        drop(g); // the guard retries, now successfully
        assert!(!busy.exists());
        assert!(j.pending().is_empty());
    }

    #[test]
    fn stale_journal_of_a_dead_process_is_restored_and_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let knob = tmp.path().join("knob");
        std::fs::write(&knob, "changed").unwrap();
        let made = tmp.path().join("instance");
        std::fs::create_dir(&made).unwrap();
        // A pid that cannot be alive with this start time.
        let file = StateFile {
            pid: i32::MAX - 7,
            start_time: 1,
            changes: vec![
                (
                    1,
                    Change::File {
                        path: knob.clone(),
                        original: "orig".into(),
                    },
                ),
                (2, Change::RemoveDir { path: made.clone() }),
            ],
        };
        let jpath = tmp.path().join("journal-2147483640.json");
        std::fs::write(&jpath, serde_json::to_vec(&file).unwrap()).unwrap();
        // A live process's journal is left alone.
        let me = std::process::id() as i32;
        let live = StateFile {
            pid: 1,
            start_time: task_start_time(1).unwrap_or(0),
            changes: vec![],
        };
        let live_path = tmp.path().join("journal-1.json");
        std::fs::write(&live_path, serde_json::to_vec(&live).unwrap()).unwrap();

        let reports = restore_stale_in(tmp.path());
        assert_eq!(reports.len(), 1, "{reports:?}");
        assert_eq!(reports[0].restored.len(), 2);
        assert_eq!(std::fs::read_to_string(&knob).unwrap(), "orig");
        assert!(!made.exists());
        assert!(!jpath.exists());
        assert!(live_path.exists() || me == 1);
    }

    #[test]
    fn a_file_that_is_gone_needs_no_restoring() {
        let tmp = tempfile::tempdir().unwrap();
        let c = Change::File {
            path: tmp.path().join("gone/knob"),
            original: "0".into(),
        };
        assert!(c.undo().is_ok());
    }

    #[test]
    fn task_affinity_of_a_reused_pid_is_left_alone() {
        let c = Change::TaskAffinity {
            pid: std::process::id() as i32,
            start_time: 0,
            cpus: vec![0],
            set_to: None,
        };
        let before = crate::affinity::get(0).unwrap();
        c.undo().unwrap();
        assert_eq!(crate::affinity::get(0).unwrap(), before);
    }

    #[test]
    fn task_affinity_changed_by_someone_else_since_is_left_alone() {
        std::thread::spawn(|| {
            let online = crate::online_cpus();
            let me = nix::unistd::gettid().as_raw();
            let before = crate::affinity::get(0).unwrap();
            let st = task_start_time(me).unwrap_or(0);
            // What punctual set was [last CPU]; the task has since moved itself to `before`.
            let c = Change::TaskAffinity {
                pid: me,
                start_time: st,
                cpus: vec![online[0]],
                set_to: Some(vec![*online.last().unwrap()]),
            };
            if online.len() > 1 {
                c.undo().unwrap();
                assert_eq!(crate::affinity::get(0).unwrap(), before);
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn start_time_parses_names_with_spaces() {
        assert!(task_start_time(std::process::id() as i32).is_some());
        assert_eq!(task_start_time(i32::MAX), None);
    }
}
