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

use crate::state::check_state_dir;
pub use crate::state::{ensure_state_dir, machine_dir, state_dir};
use crate::task::move_pid;
pub use crate::task::task_start_time;

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
    /// A named network namespace punctual made (`/run/netns/NAME`, as `ip netns add` makes it),
    /// deleted on undo as `ip netns del` does: its bind mount detached and the file removed.
    RemoveNetns { name: String },
    /// Everything the process `pid` holds in the registry of settings several punctual processes
    /// change at once (shields: IRQ affinities, other tasks' masks; see [`crate::stacked`]).
    /// Undo releases it there: only the registry's own allow list of files is ever written.
    Stacked { pid: i32, start_time: u64 },
    /// Process `pid` (punctual itself) moved out of cpu cgroup `group` for a run
    /// (`--move-to-rt-cgroup`); undo moves it back while it lives.
    CgroupMove {
        pid: i32,
        start_time: u64,
        group: PathBuf,
    },
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // Journals are files: show what they hold escaped.
            Change::File { path, original } => write!(
                f,
                "{} (back to '{}')",
                crate::text::display_path(path),
                crate::text::display_name(original.trim())
            ),
            Change::TaskAffinity { pid, cpus, .. } => {
                write!(
                    f,
                    "affinity of pid {pid} (back to {})",
                    crate::format_cpu_list(cpus)
                )
            }
            Change::RemoveDir { path } => {
                write!(f, "directory {}", crate::text::display_path(path))
            }
            Change::Unmount { path } => write!(f, "mount {}", crate::text::display_path(path)),
            Change::RemoveNetns { name } => {
                write!(f, "network namespace {}", crate::text::display_name(name))
            }
            Change::Stacked { pid, .. } => write!(f, "shield settings held by pid {pid}"),
            Change::CgroupMove { pid, group, .. } => write!(
                f,
                "pid {pid} back into cgroup {}",
                crate::text::display_path(group)
            ),
        }
    }
}

impl Change {
    /// Undo the change. A task that has exited (or whose pid was reused) needs nothing.
    pub fn undo(&self) -> io::Result<()> {
        self.undo_counted().map(|_| ())
    }

    /// [`Change::undo`], saying how many settings it dealt with and how many it left because
    /// someone else changed them since: one and none, or for a shield's entry in the registry,
    /// every value it held (written back, gone, or handed on to a later shield).
    pub fn undo_counted(&self) -> io::Result<(usize, usize)> {
        if let Change::Stacked { pid, start_time } = self {
            let r = crate::stacked::release_in_system(crate::stacked::Owner {
                pid: *pid,
                start_time: *start_time,
            })?;
            return match r.failed.first() {
                Some((t, e)) => Err(io::Error::other(format!("{t}: {e}"))),
                None => Ok((r.restored + r.gone + r.handed_over, r.left_changed.len())),
            };
        }
        self.undo_one().map(|()| (1, 0))
    }

    fn undo_one(&self) -> io::Result<()> {
        match self {
            // A file that is gone (its IRQ, its tracefs instance) has nothing left to restore.
            Change::File { path, original } => match write_existing(path, original) {
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
            // rmdir never follows a symbolic link and removes only empty directories.
            Change::RemoveDir { path } => match std::fs::remove_dir(path) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                r => r,
            },
            Change::Unmount { path } => {
                nix::mount::umount2(path.as_path(), nix::mount::MntFlags::UMOUNT_NOFOLLOW)
                    .map_err(io::Error::from)
            }
            Change::RemoveNetns { name } => {
                let path = Path::new(NETNS_DIR).join(name);
                use nix::mount::MntFlags;
                match nix::mount::umount2(&path, MntFlags::MNT_DETACH | MntFlags::UMOUNT_NOFOLLOW) {
                    // Not mounted (already deleted, or never made) or gone: nothing to detach.
                    Ok(()) | Err(nix::errno::Errno::EINVAL) | Err(nix::errno::Errno::ENOENT) => {}
                    Err(e) => return Err(e.into()),
                }
                match std::fs::remove_file(&path) {
                    Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                    r => r,
                }
            }
            Change::CgroupMove {
                pid,
                start_time,
                group,
            } => {
                // A process that has ended is in no group.
                if task_start_time(*pid) != Some(*start_time) {
                    return Ok(());
                }
                match move_pid(group, *pid) {
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(()),
                    r => r,
                }
            }
            Change::Stacked { .. } => self.undo_counted().map(|_| ()),
        }
    }
}

/// A journal may delete only the namespaces its own process made (their names carry its pid),
/// and move only its own process between cgroups.
fn made_by(change: &Change, pid: i32) -> Result<(), String> {
    match change {
        Change::CgroupMove { pid: moved, .. } if *moved != pid => Err(format!(
            "moving pid {moved} between cgroups: not the process that wrote the journal"
        )),
        Change::RemoveNetns { name } => {
            let rest = name.strip_prefix(&format!("pt{pid}")).unwrap_or("");
            if rest.starts_with(|c: char| c.is_ascii_lowercase()) {
                Ok(())
            } else {
                Err(format!(
                    "deleting network namespace '{}': not one process {pid} made",
                    crate::text::display_name(name)
                ))
            }
        }
        _ => Ok(()),
    }
}

/// Where iproute2 keeps named network namespaces.
pub const NETNS_DIR: &str = "/run/netns";

/// Whether `name` is one punctual gives the namespaces it makes: `pt<pid><tag>a|b`.
pub fn is_punctual_netns(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("pt") else {
        return false;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let tag = &rest[digits..];
    (1..=10).contains(&digits)
        && (2..=9).contains(&tag.len())
        && tag.bytes().all(|b| b.is_ascii_lowercase())
        && (tag.ends_with('a') || tag.ends_with('b'))
}

/// Write `value` into a file that must already exist (a kernel knob), never through a symbolic link:
/// the journal only ever puts back what was there, it never creates files.
fn write_existing(path: &Path, value: &str) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true) // as std::fs::write did: kernel knobs ignore it
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    f.write_all(value.as_bytes())
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

    /// Undo the change now and say whether it worked (dropping the guard undoes it silently).
    pub fn undo_now(self) -> io::Result<()> {
        let r = self.journal.undo(self.id);
        std::mem::forget(self);
        r
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
        use std::io::Write;
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let path = self.path();
        if state.changes.is_empty() {
            return match std::fs::remove_file(&path) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                r => r,
            };
        }
        ensure_state_dir(&self.dir)?;
        let pid = std::process::id() as i32;
        let file = StateFile {
            pid,
            start_time: task_start_time(pid).unwrap_or(0),
            changes: state.changes.clone(),
        };
        let tmp = path.with_extension("tmp");
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        // 0600 whatever the umask: only the owner may read or change what the next start replays.
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        f.write_all(&serde_json::to_vec_pretty(&file).map_err(io::Error::other)?)?;
        drop(f);
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
        self.write_file_back_to(path, value, original)
    }

    /// Write `value` to `path`, to be undone by writing `original`: for files whose contents are
    /// not what they take (debugfs `sched/preempt` lists every mode but takes one).
    pub fn write_file_back_to(
        &'static self,
        path: impl AsRef<Path>,
        value: &str,
        original: String,
    ) -> io::Result<ChangeGuard> {
        let path = path.as_ref();
        let guard = self.record(Change::File {
            path: path.to_path_buf(),
            original,
        })?;
        write_existing(path, value)?; // on error the guard drops and rewrites the original
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
#[derive(Clone, Debug)]
pub struct StaleReport {
    pub journal: PathBuf,
    pub owner_pid: i32,
    pub restored: Vec<Change>,
    /// Settings put back: one per change, a shield's as many as it held (IRQs, task masks; those
    /// that are gone or that a later shield holds on count as dealt with).
    pub settings: usize,
    /// A shield's settings someone else changed since: left as they are.
    pub left_changed: usize,
    /// Changes whose undo failed, with the error; the journal stays for the next start.
    pub failed: Vec<(Change, String)>,
}

/// What one [`restore_stale`] did with a state directory.
#[derive(Clone, Debug, Default)]
pub struct RestoreReport {
    /// The state directory looked at.
    pub dir: PathBuf,
    /// Journals of dead processes that were replayed.
    pub journals: Vec<StaleReport>,
    /// What was refused and not replayed at all (the directory, a journal, a change in one), with
    /// why. A refused journal is left in place for someone to look at.
    pub refused: Vec<(PathBuf, String)>,
}

impl RestoreReport {
    /// Nothing replayed and nothing refused.
    pub fn is_empty(&self) -> bool {
        self.journals.is_empty() && self.refused.is_empty()
    }

    /// Settings put back, over all journals.
    pub fn restored(&self) -> usize {
        self.journals.iter().map(|j| j.restored.len()).sum()
    }
}

impl IntoIterator for RestoreReport {
    type Item = StaleReport;
    type IntoIter = std::vec::IntoIter<StaleReport>;
    fn into_iter(self) -> Self::IntoIter {
        self.journals.into_iter()
    }
}

impl<'a> IntoIterator for &'a RestoreReport {
    type Item = &'a StaleReport;
    type IntoIter = std::slice::Iter<'a, StaleReport>;
    fn into_iter(self) -> Self::IntoIter {
        self.journals.iter()
    }
}

/// Every [`restore_stale`] of this process, in order, so a later command (`shield --restore` right
/// after the start-up restore) can say what was already put back.
static HISTORY: Mutex<Vec<RestoreReport>> = Mutex::new(Vec::new());

/// What the earlier [`restore_stale`] calls of this process did (oldest first).
pub fn earlier_restores() -> Vec<RestoreReport> {
    HISTORY.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Undo the journals of punctual processes that are gone (killed, crashed). Journals of live
/// processes are left alone; journals and changes that fail the checks of [`restore_stale_in`] are
/// refused and reported. Safe to call at every start. The report is also kept for
/// [`earlier_restores`].
pub fn restore_stale() -> RestoreReport {
    let report = restore_stale_in(&state_dir());
    if !report.is_empty() {
        HISTORY
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(report.clone());
    }
    report
}

/// Largest journal replayed (a shield of every task of a busy machine is well under 1 MiB).
const MAX_JOURNAL_BYTES: u64 = 16 << 20;

/// Replay the stale journals in `dir`, trusting nothing in it:
/// - the directory must pass [`ensure_state_dir`]'s checks (ours, not a symlink, writable by nobody
///   else), or nothing in it is read;
/// - a journal must be a regular file owned by the effective user, not writable by group or others,
///   opened without following a symbolic link;
/// - every change must be one punctual itself makes (see `Allowed`); one refused change refuses
///   the whole journal, and nothing of it is written.
pub fn restore_stale_in(dir: &Path) -> RestoreReport {
    restore_checked(dir, &Allowed::system(dir))
}

fn restore_checked(dir: &Path, allowed: &Allowed) -> RestoreReport {
    let mut report = RestoreReport {
        dir: dir.to_path_buf(),
        ..Default::default()
    };
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return report,
        _ => {}
    }
    if let Err(why) = check_state_dir(dir) {
        report.refused.push((dir.to_path_buf(), why));
        return report;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return report;
    };
    let me = std::process::id() as i32;
    let mut names: Vec<_> = entries.flatten().map(|e| e.file_name()).collect();
    names.sort();
    for name in names {
        let name = name.to_string_lossy().to_string();
        if !(name.starts_with("journal-") && name.ends_with(".json")) {
            continue;
        }
        let path = dir.join(&name);
        let file = match read_journal(&path) {
            Ok(f) => f,
            Err(why) => {
                report.refused.push((path, why));
                continue;
            }
        };
        let alive = file.pid == me || task_start_time(file.pid) == Some(file.start_time);
        if alive {
            continue;
        }
        let refusals: Vec<String> = file
            .changes
            .iter()
            .filter_map(|(_, c)| allowed.check(c).and_then(|()| made_by(c, file.pid)).err())
            .collect();
        if !refusals.is_empty() {
            for why in refusals {
                report.refused.push((
                    path.clone(),
                    format!("{why}; nothing of this journal was restored, it is left for you to inspect and remove"),
                ));
            }
            continue;
        }
        let mut stale = StaleReport {
            journal: path.clone(),
            owner_pid: file.pid,
            restored: vec![],
            settings: 0,
            left_changed: 0,
            failed: vec![],
        };
        for (_, change) in file.changes.into_iter().rev() {
            match change.undo_counted() {
                Ok((n, left)) => {
                    stale.settings += n;
                    stale.left_changed += left;
                    stale.restored.push(change);
                }
                Err(e) => stale.failed.push((change, e.to_string())),
            }
        }
        if stale.failed.is_empty() {
            let _ = std::fs::remove_file(&path);
        }
        report.journals.push(stale);
    }
    report
}

/// Open and parse one journal, refusing anything another user could have written.
fn read_journal(path: &Path) -> Result<StateFile, String> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new()
        .read(true)
        // O_NONBLOCK: a FIFO planted under a journal's name must not hang the start.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => "the journal is a symbolic link, not followed".to_string(),
            _ => format!("cannot open the journal: {e}"),
        })?;
    let m = f
        .metadata()
        .map_err(|e| format!("cannot stat the journal: {e}"))?;
    if !m.is_file() {
        return Err("the journal is not a regular file".into());
    }
    let euid = nix::unistd::geteuid().as_raw();
    if m.uid() != euid {
        return Err(format!(
            "the journal belongs to uid {}, not to uid {euid}",
            m.uid()
        ));
    }
    if m.mode() & 0o022 != 0 {
        return Err(format!(
            "the journal is writable by other users (mode {:o})",
            m.mode() & 0o7777
        ));
    }
    if m.len() > MAX_JOURNAL_BYTES {
        return Err(format!(
            "the journal is {} bytes, more than punctual ever writes",
            m.len()
        ));
    }
    let mut text = String::new();
    f.take(MAX_JOURNAL_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read the journal: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("not a punctual journal: {e}"))
}

/// The changes punctual itself makes, and so the only ones a journal may ask to undo.
struct Allowed {
    /// Where procfs is (`/proc`; tests use a directory of their own).
    proc_root: PathBuf,
    /// The state directory being replayed: punctual's private tracefs mount points live in it.
    state_dir: PathBuf,
    /// Check that tracefs and debugfs paths are on those filesystems (off only in tests).
    fs_magic: bool,
}

/// Longest value a journal may write back (an IRQ mask of 8192 CPUs is 2 KiB).
const MAX_VALUE_BYTES: usize = 4096;

impl Allowed {
    fn system(state_dir: &Path) -> Allowed {
        Allowed {
            proc_root: PathBuf::from("/proc"),
            state_dir: state_dir.to_path_buf(),
            fs_magic: true,
        }
    }

    /// `Err` says why `change` is not something punctual would have made.
    fn check(&self, change: &Change) -> Result<(), String> {
        match change {
            Change::File { path, original } => self.check_file(path, original),
            Change::TaskAffinity {
                pid, cpus, set_to, ..
            } => {
                let max = nix::sched::CpuSet::count();
                let shown = format!("affinity of pid {pid}");
                if *pid <= 0 {
                    return Err(format!("{shown}: not a process id"));
                }
                let Some(set) = set_to else {
                    return Err(format!(
                        "{shown}: no record of what punctual set, so it cannot tell whether the task moved itself since"
                    ));
                };
                if cpus.is_empty() || set.is_empty() {
                    return Err(format!("{shown}: an empty CPU set"));
                }
                if cpus.iter().chain(set).any(|&c| c >= max) {
                    return Err(format!("{shown}: a CPU beyond {max}"));
                }
                Ok(())
            }
            Change::RemoveDir { path } => {
                if self.is_own_mount_point(path) || self.is_tracefs_instance(path)? {
                    Ok(())
                } else {
                    Err(format!(
                        "removing directory {}: not a punctual tracefs instance or mount point",
                        shown(path)
                    ))
                }
            }
            Change::Unmount { path } => {
                if self.is_own_mount_point(path) {
                    Ok(())
                } else {
                    Err(format!(
                        "unmounting {}: not a tracefs mount punctual made in its state directory",
                        shown(path)
                    ))
                }
            }
            Change::RemoveNetns { name } if is_punctual_netns(name) => Ok(()),
            Change::RemoveNetns { name } => Err(format!(
                "deleting network namespace '{}': not a name punctual gives its namespaces",
                crate::text::display_name(name)
            )),
            // Names no path: undoing it releases that shield's entries through the shield
            // registry, which writes only the /proc files a shield may change (`stacked`).
            Change::Stacked { pid, .. } if *pid > 0 => Ok(()),
            Change::Stacked { pid, .. } => Err(format!("shield of pid {pid}: not a process id")),
            Change::CgroupMove { pid, group, .. } => {
                if *pid <= 0 {
                    return Err(format!("cgroup move of pid {pid}: not a process id"));
                }
                self.on_cgroupfs(group)
                    .map_err(|e| format!("moving pid {pid} into {}: {e}", shown(group)))
            }
        }
    }

    fn check_file(&self, path: &Path, original: &str) -> Result<(), String> {
        let refuse = |why: &str| Err(format!("writing {}: {why}", shown(path)));
        if original.len() > MAX_VALUE_BYTES {
            return refuse("the value is longer than any setting punctual changes");
        }
        let value = original.trim();
        if path == Path::new(crate::knobs::PREEMPT_PATH) {
            if !crate::knobs::is_mode(value) {
                return refuse(&format!(
                    "'{}' is not a preemption mode",
                    crate::text::display_name(value)
                ));
            }
            return self
                .on_fs(
                    Path::new(crate::knobs::SCHED_DIR),
                    nix::sys::statfs::DEBUGFS_MAGIC,
                    "debugfs",
                )
                .map_err(|why| format!("writing {}: {why}", shown(path)));
        }
        if let Some(rel) = normal_relative(path, &self.proc_root) {
            let rel: Vec<&str> = rel.iter().map(String::as_str).collect();
            let ok = match rel.as_slice() {
                ["sys", "kernel", "sched_rt_runtime_us"] => value
                    .parse::<i64>()
                    .is_ok_and(|v| (-1..=i32::MAX as i64).contains(&v)),
                ["sys", "kernel", "sched_rr_timeslice_ms"] => value.parse::<i32>().is_ok(),
                ["irq", n, "smp_affinity_list"] if is_number(n) => {
                    crate::parse_cpu_list(value).is_ok()
                }
                ["irq", n, "smp_affinity"] if is_number(n) => is_hex_mask(value),
                ["irq", "default_smp_affinity"] => is_hex_mask(value),
                _ => return refuse("not a setting punctual changes"),
            };
            return if ok {
                Ok(())
            } else {
                refuse(&format!(
                    "'{}' is not a value that setting takes",
                    crate::text::display_name(value)
                ))
            };
        }
        // A tracefs instance's switches, which punctual only ever puts back to 0.
        let names: Vec<String> = path
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect();
        let n = names.len();
        let instance_dir = match names.as_slice() {
            [.., i, inst, f] if i == "instances" && f == "tracing_on" && is_instance(inst) => {
                path.parent()
            }
            [.., i, inst, e, f]
                if i == "instances" && e == "events" && f == "enable" && is_instance(inst) =>
            {
                path.parent().and_then(Path::parent)
            }
            _ => None,
        };
        let Some(instance_dir) = instance_dir.filter(|_| n > 3 && path.is_absolute()) else {
            return refuse("not a setting punctual changes");
        };
        if value != "0" {
            return refuse("punctual only ever turns tracing back off (0)");
        }
        self.on_tracefs(instance_dir)
            .map_err(|why| format!("writing {}: {why}", shown(path)))
    }

    /// `<state dir>/tracefs-<pid>-<n>`.
    fn is_own_mount_point(&self, path: &Path) -> bool {
        let Some(name) = path.file_name().map(|n| n.to_string_lossy()) else {
            return false;
        };
        let ok_name = name.strip_prefix("tracefs-").is_some_and(|rest| {
            let mut parts = rest.split('-');
            matches!((parts.next(), parts.next(), parts.next()), (Some(a), Some(b), None) if is_number(a) && is_number(b))
        });
        ok_name && path.parent() == Some(self.state_dir.as_path())
    }

    /// `.../instances/punctual-<pid>[-<n>]` on a tracefs.
    fn is_tracefs_instance(&self, path: &Path) -> Result<bool, String> {
        let (Some(name), Some(parent)) = (path.file_name(), path.parent()) else {
            return Ok(false);
        };
        if !path.is_absolute()
            || parent.file_name() != Some(std::ffi::OsStr::new("instances"))
            || !is_instance(&name.to_string_lossy())
        {
            return Ok(false);
        }
        self.on_tracefs(parent)
            .map(|()| true)
            .map_err(|why| format!("removing directory {}: {why}", shown(path)))
    }

    /// `dir` is on a tracefs and reached without symbolic links. A `dir` that is gone is accepted
    /// only below a place no other user can create a directory in (see [`Self::gone_below`]).
    fn on_tracefs(&self, dir: &Path) -> Result<(), String> {
        self.on_fs(dir, nix::sys::statfs::TRACEFS_MAGIC, "tracefs")
    }

    /// `dir` is a cgroup (v1 or v2) directory, reached without symbolic links.
    fn on_cgroupfs(&self, dir: &Path) -> Result<(), String> {
        use nix::sys::statfs::{CGROUP2_SUPER_MAGIC, CGROUP_SUPER_MAGIC};
        self.on_fs(dir, CGROUP_SUPER_MAGIC, "cgroup filesystem")
            .or_else(|_| self.on_fs(dir, CGROUP2_SUPER_MAGIC, "cgroup filesystem"))
    }

    /// `dir` is on a filesystem of type `magic` (`name` in messages) and reached without symbolic
    /// links; a `dir` that is gone is checked as in [`Self::on_tracefs`].
    fn on_fs(&self, dir: &Path, magic: nix::sys::statfs::FsType, name: &str) -> Result<(), String> {
        match std::fs::canonicalize(dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return self.gone_below(dir, magic, name)
            }
            Err(e) => return Err(e.to_string()),
            Ok(real) if real != dir => {
                return Err("the path goes through a symbolic link".into());
            }
            Ok(_) => {}
        }
        if !self.fs_magic {
            return Ok(());
        }
        match nix::sys::statfs::statfs(dir) {
            Ok(st) if st.filesystem_type() == magic => Ok(()),
            Ok(_) => Err(format!("not on a {name}")),
            Err(e) => Err(e.to_string()),
        }
    }
}

impl Allowed {
    /// A path that does not exist (issue 32, Low: it was accepted wherever it pointed, so a directory
    /// created after the check, in `/tmp` say, would have been written into). There is nothing to
    /// undo there, but it is accepted only when its deepest existing directory is reached without a
    /// link and is one no other user can create a directory in: on the expected filesystem, on
    /// sysfs or debugfs (a tracefs mount point that was unmounted), or punctual's state directory
    /// and its private mount points (root's, 0700). Anywhere else the journal is refused.
    fn gone_below(
        &self,
        dir: &Path,
        magic: nix::sys::statfs::FsType,
        name: &str,
    ) -> Result<(), String> {
        let not_there = || format!("does not exist, and is not below a {name}");
        if !dir.is_absolute()
            || dir.components().any(|c| {
                !matches!(
                    c,
                    std::path::Component::Normal(_) | std::path::Component::RootDir
                )
            })
        {
            return Err(not_there());
        }
        let mut up = dir.parent();
        while let Some(d) = up {
            match std::fs::symlink_metadata(d) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    up = d.parent();
                    continue;
                }
                Err(e) => return Err(e.to_string()),
                Ok(_) => {}
            }
            if std::fs::canonicalize(d).map_err(|e| e.to_string())? != d {
                return Err("the path goes through a symbolic link".into());
            }
            if d == self.state_dir || self.is_own_mount_point(d) {
                return Ok(());
            }
            if !self.fs_magic {
                return Ok(());
            }
            use nix::sys::statfs::{DEBUGFS_MAGIC, SYSFS_MAGIC};
            return match nix::sys::statfs::statfs(d) {
                Ok(st) if [magic, SYSFS_MAGIC, DEBUGFS_MAGIC].contains(&st.filesystem_type()) => {
                    Ok(())
                }
                Ok(_) => Err(not_there()),
                Err(e) => Err(e.to_string()),
            };
        }
        Err(not_there())
    }
}

/// The components of `path` below `root` when every one is a plain name (no `..`, no `.`).
fn normal_relative(path: &Path, root: &Path) -> Option<Vec<String>> {
    let rel = path.strip_prefix(root).ok()?;
    rel.components()
        .map(|c| match c {
            std::path::Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect()
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.len() <= 10 && s.bytes().all(|b| b.is_ascii_digit())
}

fn is_hex_mask(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit() || b == b',')
}

/// `punctual-<pid>` or `punctual-<pid>-<n>` (see punctual-trace's instance names).
fn is_instance(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("punctual-") else {
        return false;
    };
    let mut parts = rest.split('-');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(p), None, None) => is_number(p),
        (Some(p), Some(n), None) => is_number(p) && is_number(n),
        _ => false,
    }
}

fn shown(path: &Path) -> String {
    crate::text::display_path(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaked_journal(dir: &Path) -> &'static Journal {
        Box::leak(Box::new(Journal::new(dir.to_path_buf())))
    }

    /// Issue 32, Low: PUNCTUAL_STATE_DIR's missing parents were made with the umask (0777 under
    /// umask 000), after which the directory was not believed and its journals were lost.
    #[test]
    fn state_dir_parents_are_not_writable_by_others_whatever_the_umask() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b/state");
        // SAFETY: umask is process-wide; it is put back at once (the window is this one call).
        let old = unsafe { libc::umask(0) };
        let r = ensure_state_dir(&dir);
        // SAFETY: as above.
        unsafe { libc::umask(old) };
        r.unwrap();
        for p in [tmp.path().join("a"), tmp.path().join("a/b")] {
            let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode & 0o022, 0, "{} is {mode:o}", p.display());
        }
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
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

    /// A state directory with a procfs stand-in: `<dir>/proc/sys/kernel/sched_rt_runtime_us` holds
    /// "changed", and the replay accepts what it would accept under /proc.
    struct Fixture {
        tmp: tempfile::TempDir,
        state: PathBuf,
        knob: PathBuf,
        allowed: Allowed,
    }

    impl Fixture {
        fn new() -> Fixture {
            let tmp = tempfile::tempdir().unwrap();
            let state = tmp.path().join("state");
            ensure_state_dir(&state).unwrap();
            let kernel = tmp.path().join("proc/sys/kernel");
            std::fs::create_dir_all(&kernel).unwrap();
            let knob = kernel.join("sched_rt_runtime_us");
            std::fs::write(&knob, "changed").unwrap();
            let allowed = Allowed {
                proc_root: tmp.path().join("proc"),
                state_dir: state.clone(),
                fs_magic: false,
            };
            Fixture {
                tmp,
                state,
                knob,
                allowed,
            }
        }

        /// A dead process's journal in the state directory, putting the knob back to 950000.
        fn dead_journal(&self, more: Vec<Change>) -> PathBuf {
            let mut changes = vec![(
                1,
                Change::File {
                    path: self.knob.clone(),
                    original: "950000\n".into(),
                },
            )];
            changes.extend(more.into_iter().enumerate().map(|(i, c)| (i as u64 + 2, c)));
            let file = StateFile {
                pid: i32::MAX - 7,
                start_time: 1,
                changes,
            };
            let path = self.state.join("journal-2147483640.json");
            std::fs::write(&path, serde_json::to_vec(&file).unwrap()).unwrap();
            path
        }

        fn restore(&self) -> RestoreReport {
            restore_checked(&self.state, &self.allowed)
        }

        fn knob(&self) -> String {
            std::fs::read_to_string(&self.knob).unwrap()
        }
    }

    fn is_root() -> bool {
        nix::unistd::geteuid().is_root()
    }

    #[test]
    fn stale_journal_of_a_dead_process_is_restored_and_removed() {
        let fx = Fixture::new();
        let mount_point = fx.state.join("tracefs-2147483640-0");
        std::fs::create_dir(&mount_point).unwrap();
        let jpath = fx.dead_journal(vec![Change::RemoveDir {
            path: mount_point.clone(),
        }]);
        // A live process's journal is left alone.
        let live = StateFile {
            pid: 1,
            start_time: task_start_time(1).unwrap_or(0),
            changes: vec![],
        };
        let live_path = fx.state.join("journal-1.json");
        std::fs::write(&live_path, serde_json::to_vec(&live).unwrap()).unwrap();

        let report = fx.restore();
        assert!(report.refused.is_empty(), "{report:?}");
        assert_eq!(report.journals.len(), 1, "{report:?}");
        assert_eq!(report.restored(), 2);
        assert_eq!(fx.knob(), "950000\n");
        assert!(!mount_point.exists());
        assert!(!jpath.exists());
        assert!(live_path.exists() || std::process::id() == 1);
    }

    #[test]
    fn journal_owned_by_other_uid_is_refused() {
        if !is_root() {
            punctual_testkit::skip("journal_owned_by_other_uid_is_refused", "chown needs root");
            return;
        }
        let fx = Fixture::new();
        let j = fx.dead_journal(vec![]);
        std::os::unix::fs::chown(&j, Some(65534), Some(65534)).unwrap();
        let report = fx.restore();
        assert_eq!(fx.knob(), "changed", "nothing written");
        assert!(report.journals.is_empty());
        assert_eq!(report.refused.len(), 1, "{report:?}");
        assert_eq!(report.refused[0].0, j);
        assert!(report.refused[0].1.contains("uid 65534"), "{report:?}");
        assert!(j.exists(), "left for inspection");
    }

    #[test]
    fn journal_that_is_a_symlink_is_refused() {
        let fx = Fixture::new();
        let real = fx.dead_journal(vec![]);
        let elsewhere = fx.tmp.path().join("elsewhere.json");
        std::fs::rename(&real, &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &real).unwrap();
        let report = fx.restore();
        assert_eq!(fx.knob(), "changed", "nothing written");
        assert_eq!(report.refused.len(), 1, "{report:?}");
        assert!(report.refused[0].1.contains("symbolic link"), "{report:?}");
    }

    #[test]
    fn journal_writable_by_others_or_not_a_file_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let fx = Fixture::new();
        let j = fx.dead_journal(vec![]);
        std::fs::set_permissions(&j, std::fs::Permissions::from_mode(0o666)).unwrap();
        let report = fx.restore();
        assert_eq!(fx.knob(), "changed");
        assert!(
            report.refused[0].1.contains("writable by other users"),
            "{report:?}"
        );
        std::fs::remove_file(&j).unwrap();
        nix::unistd::mkfifo(&j, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let report = fx.restore();
        assert!(
            report.refused[0].1.contains("not a regular file"),
            "{report:?}"
        );
    }

    #[test]
    fn journal_naming_a_path_outside_the_allowed_set_is_refused() {
        let fx = Fixture::new();
        let victim = fx.tmp.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let victim_dir = fx.tmp.path().join("victim-dir");
        std::fs::create_dir(&victim_dir).unwrap();
        let outside = [
            Change::File {
                path: victim.clone(),
                original: "overwritten".into(),
            },
            Change::File {
                path: fx.tmp.path().join("proc/sys/kernel/../../../victim"),
                original: "1".into(),
            },
            Change::File {
                path: fx.tmp.path().join("proc/sys/kernel/core_pattern"),
                original: "|/bin/sh".into(),
            },
            Change::File {
                path: fx.knob.clone(),
                original: "not a number".into(),
            },
            Change::File {
                path: fx.tmp.path().join("instances/punctual-1/tracing_on"),
                original: "1".into(),
            },
            Change::RemoveDir {
                path: victim_dir.clone(),
            },
            Change::Unmount {
                path: victim_dir.clone(),
            },
            Change::TaskAffinity {
                pid: 1,
                start_time: task_start_time(1).unwrap_or(0),
                cpus: vec![0],
                set_to: None,
            },
        ];
        for change in outside {
            // The good change first: one refused change refuses the whole journal.
            let j = fx.dead_journal(vec![change.clone()]);
            let report = fx.restore();
            assert_eq!(fx.knob(), "changed", "nothing written for {change:?}");
            assert!(report.journals.is_empty(), "{change:?}: {report:?}");
            assert_eq!(report.refused.len(), 1, "{change:?}: {report:?}");
            assert_eq!(report.refused[0].0, j);
            assert!(
                report.refused[0]
                    .1
                    .contains("nothing of this journal was restored"),
                "{report:?}"
            );
            assert!(j.exists());
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(victim_dir.exists());
    }

    #[test]
    fn world_writable_state_dir_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let fx = Fixture::new();
        fx.dead_journal(vec![]);
        std::fs::set_permissions(&fx.state, std::fs::Permissions::from_mode(0o777)).unwrap();
        let report = fx.restore();
        assert_eq!(fx.knob(), "changed", "nothing written");
        assert_eq!(report.refused.len(), 1, "{report:?}");
        assert_eq!(report.refused[0].0, fx.state);
        assert!(
            report.refused[0].1.contains("writable by other users"),
            "{report:?}"
        );
        // Nor is the directory used for new journals.
        let j = leaked_journal(&fx.state);
        let e = j
            .record(Change::RemoveDir {
                path: fx.state.join("x"),
            })
            .err()
            .unwrap();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
    }

    #[test]
    fn state_dir_that_is_a_symlink_is_refused() {
        let fx = Fixture::new();
        fx.dead_journal(vec![]);
        let link = fx.tmp.path().join("link");
        std::os::unix::fs::symlink(&fx.state, &link).unwrap();
        let report = restore_stale_in(&link);
        assert_eq!(fx.knob(), "changed");
        assert!(report.refused[0].1.contains("symbolic link"), "{report:?}");
        assert!(ensure_state_dir(&link).is_err());
    }

    #[test]
    fn state_dir_owned_by_another_user_is_refused() {
        if !is_root() {
            punctual_testkit::skip(
                "state_dir_owned_by_another_user_is_refused",
                "chown needs root",
            );
            return;
        }
        let fx = Fixture::new();
        fx.dead_journal(vec![]);
        std::os::unix::fs::chown(&fx.state, Some(65534), Some(65534)).unwrap();
        let report = fx.restore();
        assert_eq!(fx.knob(), "changed");
        assert!(
            report.refused[0].1.contains("belongs to uid 65534"),
            "{report:?}"
        );
    }

    /// Run the calling test again in a child process with umask 000 (umask is per process, and the
    /// other tests of this binary run in parallel). Returns true in the child.
    fn with_umask_000(test: &str) -> bool {
        const CHILD: &str = "PUNCTUAL_JOURNAL_TEST_UMASK_CHILD";
        if std::env::var_os(CHILD).is_some() {
            nix::sys::stat::umask(nix::sys::stat::Mode::empty());
            return true;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", test, "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        assert!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains("1 passed"),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        false
    }

    #[test]
    fn state_dir_and_journals_are_private_whatever_the_umask() {
        use std::os::unix::fs::MetadataExt;
        if !with_umask_000("journal::tests::state_dir_and_journals_are_private_whatever_the_umask")
        {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("made/state");
        let j = leaked_journal(&state);
        let knob = tmp.path().join("knob");
        std::fs::write(&knob, "1").unwrap();
        let g = j.write_file(&knob, "2").unwrap();
        assert_eq!(std::fs::metadata(&state).unwrap().mode() & 0o7777, 0o700);
        assert_eq!(std::fs::metadata(j.path()).unwrap().mode() & 0o7777, 0o600);
        drop(g);
        // An existing directory of ours that others may read is tightened.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).unwrap();
        ensure_state_dir(&state).unwrap();
        assert_eq!(std::fs::metadata(&state).unwrap().mode() & 0o7777, 0o700);
    }

    #[test]
    fn undo_never_creates_a_file() {
        let tmp = tempfile::tempdir().unwrap();
        let link = tmp.path().join("knob");
        let target = tmp.path().join("target");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let c = Change::File {
            path: link,
            original: "x".into(),
        };
        assert!(c.undo().is_err(), "a symbolic link is not followed");
        assert!(!target.exists());
    }

    #[test]
    fn earlier_restores_are_kept_for_later_commands() {
        let fx = Fixture::new();
        fx.dead_journal(vec![]);
        let report = fx.restore();
        HISTORY.lock().unwrap().push(report);
        assert!(earlier_restores()
            .iter()
            .any(|r| r.dir == fx.state && r.restored() == 1));
    }

    #[test]
    fn allowed_accepts_what_punctual_writes() {
        let a = Allowed::system(Path::new("/run/punctual"));
        let ok = |path: &str, original: &str| {
            a.check(&Change::File {
                path: path.into(),
                original: original.into(),
            })
        };
        ok("/proc/sys/kernel/sched_rt_runtime_us", "950000\n").unwrap();
        ok("/proc/sys/kernel/sched_rt_runtime_us", "-1\n").unwrap();
        ok("/proc/sys/kernel/sched_rr_timeslice_ms", "100\n").unwrap();
        ok("/proc/irq/24/smp_affinity_list", "0-1\n").unwrap();
        ok("/proc/irq/24/smp_affinity", "3\n").unwrap();
        ok("/proc/irq/default_smp_affinity", "ffffffff,ffffffff\n").unwrap();
        assert!(ok("/proc/irq/x/smp_affinity", "3").is_err());
        assert!(ok("/proc/self/smp_affinity", "3").is_err());
        assert!(
            ok("/proc/sys/kernel/sched_rt_runtime_us/", "1").is_ok(),
            "same path"
        );
        assert!(ok("/etc/passwd", "root::0:0::/:/bin/sh").is_err());
        // The preemption mode: that one file, one of the modes.
        ok(crate::knobs::PREEMPT_PATH, "full").unwrap();
        ok(crate::knobs::PREEMPT_PATH, "lazy\n").unwrap();
        assert!(ok(crate::knobs::PREEMPT_PATH, "none voluntary (full)").is_err());
        assert!(ok(crate::knobs::PREEMPT_PATH, "fast").is_err());
        assert!(ok("/sys/kernel/debug/sched/../sched/preempt", "full").is_err());
        assert!(ok("/sys/kernel/debug/sched/verbose", "full").is_err());
        a.check(&Change::Unmount {
            path: "/run/punctual/tracefs-12-0".into(),
        })
        .unwrap();
        a.check(&Change::RemoveDir {
            path: "/run/punctual/tracefs-12-0".into(),
        })
        .unwrap();
        assert!(a
            .check(&Change::Unmount {
                path: "/run/punctual/sub/tracefs-12-0".into(),
            })
            .is_err());
        assert!(a
            .check(&Change::Unmount {
                path: "/sys/kernel/tracing".into(),
            })
            .is_err());
        // A gone instance needs nothing; a non-tracefs one is refused.
        a.check(&Change::RemoveDir {
            path: "/sys/kernel/tracing/instances/punctual-12-1".into(),
        })
        .unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let inst = tmp.path().join("instances/punctual-12");
        std::fs::create_dir_all(&inst).unwrap();
        assert!(a
            .check(&Change::RemoveDir { path: inst.clone() })
            .unwrap_err()
            .contains("not on a tracefs"));
        assert!(ok(inst.join("tracing_on").to_str().unwrap(), "0").is_err());
        assert!(a
            .check(&Change::RemoveDir {
                path: tmp.path().join("instances/other-12"),
            })
            .is_err());
    }

    /// Issue 32, Low: the allow list accepted tracefs paths that do not exist, wherever they
    /// pointed; a directory made there between the check and the undo would have been written.
    #[test]
    fn journal_allow_list_accepts_a_missing_tracefs_path_only_below_a_tracefs_or_its_own_places() {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        std::fs::create_dir(&state).unwrap();
        let a = Allowed::system(&state);
        let write = |path: &Path| {
            a.check(&Change::File {
                path: path.join("tracing_on"),
                original: "0".into(),
            })
        };
        let rmdir = |path: &Path| a.check(&Change::RemoveDir { path: path.into() });
        // Missing, below an ordinary directory anyone may have made: refused.
        for base in [
            PathBuf::from("/nonexistent"),
            tmp.path().to_path_buf(),
            tmp.path().join("a/b"),
        ] {
            let inst = base.join("instances/punctual-12-1");
            let e = rmdir(&inst).unwrap_err();
            assert!(e.contains("does not exist"), "{e}");
            assert!(write(&inst).is_err(), "{}", inst.display());
        }
        // Missing, with `..` in the missing part: refused whatever is above.
        assert!(rmdir(&state.join("tracefs-12-0/x/../instances/punctual-12")).is_err());
        // Missing below the state directory or one of its mount points: nothing to undo, accepted.
        rmdir(&state.join("tracefs-12-0/instances/punctual-12-1")).unwrap();
        std::fs::create_dir(state.join("tracefs-12-0")).unwrap();
        write(&state.join("tracefs-12-0/instances/punctual-12")).unwrap();
        // Missing below a link into the state directory: refused.
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&state, &link).unwrap();
        let e = rmdir(&link.join("tracefs-12-0/instances/punctual-12")).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        // Missing below sysfs (an unmounted /sys/kernel/tracing): accepted.
        if Path::new("/sys/kernel").is_dir() {
            rmdir(Path::new("/sys/kernel/no-such-dir/instances/punctual-12")).unwrap();
        }
    }

    #[test]
    fn only_punctual_network_namespaces_may_be_deleted() {
        for ok in ["pt123arta", "pt1ub", "pt4294967295fb"] {
            assert!(is_punctual_netns(ok), "{ok}");
            Allowed::system(Path::new("/run/punctual"))
                .check(&Change::RemoveNetns { name: ok.into() })
                .unwrap();
        }
        for bad in [
            "",
            "pt",
            "ptab",
            "pt12",
            "pt12a",
            "pt12ARTa",
            "pt12artc",
            "netns1",
            "pt12/../x",
            "pt12..a",
            "cni-1234a",
        ] {
            assert!(!is_punctual_netns(bad), "{bad}");
            assert!(Allowed::system(Path::new("/run/punctual"))
                .check(&Change::RemoveNetns { name: bad.into() })
                .is_err());
        }
    }

    /// `--move-to-rt-cgroup` journals the group to go back to: only into a cgroup directory, only
    /// for the process that wrote the journal, and nothing to do once that process has ended.
    #[test]
    fn a_cgroup_move_goes_back_only_for_its_own_live_process_into_a_cgroup() {
        let here = Change::CgroupMove {
            pid: 4242,
            start_time: 1,
            group: "/tmp".into(),
        };
        assert!(made_by(&here, 4242).is_ok());
        assert!(made_by(&here, 4243).unwrap_err().contains("pid 4242"));
        let e = Allowed::system(Path::new("/run/punctual"))
            .check(&here)
            .unwrap_err();
        assert!(e.contains("/tmp") && e.contains("cgroup"), "{e}");
        // The process is gone (a start time no process has): undo does nothing, and succeeds.
        let gone = Change::CgroupMove {
            pid: std::process::id() as i32,
            start_time: u64::MAX,
            group: "/nonexistent".into(),
        };
        assert!(gone.undo().is_ok());
    }

    /// A killed run's namespace is deleted by the next run's replay of its journal.
    #[test]
    fn a_dead_runs_network_namespace_is_deleted() {
        let test = "a_dead_runs_network_namespace_is_deleted";
        if !is_root() {
            punctual_testkit::skip(test, "network namespaces need root");
            return;
        }
        // Named as the dead process that journals it would have named it.
        let name = format!("pt{}jnla", i32::MAX - 7);
        let made = std::process::Command::new("ip")
            .args(["netns", "add", &name])
            .status();
        if !made.is_ok_and(|s| s.success()) {
            punctual_testkit::skip(test, "`ip netns add` is not available here");
            return;
        }
        let file = Path::new(NETNS_DIR).join(&name);
        assert!(file.exists());
        let fx = Fixture::new();
        fx.dead_journal(vec![Change::RemoveNetns { name: name.clone() }]);
        let report = fx.restore();
        let gone = !file.exists();
        // Whatever the assertion says, leave no namespace behind.
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &name])
            .status();
        assert!(report.refused.is_empty(), "{:?}", report.refused);
        assert_eq!(report.restored(), 2);
        assert!(gone, "the namespace is deleted");
        // Undoing it again (already gone) is not an error.
        assert!(Change::RemoveNetns { name }.undo().is_ok());
        // Another process's namespace is refused, and nothing of that journal is replayed.
        assert!(made_by(
            &Change::RemoveNetns {
                name: "pt12arta".into()
            },
            12
        )
        .is_ok());
        assert!(made_by(
            &Change::RemoveNetns {
                name: "pt123arta".into()
            },
            12
        )
        .is_err());
        assert!(made_by(
            &Change::RemoveNetns {
                name: "pt12arta".into()
            },
            1
        )
        .is_err());
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
