//! Settings that several live punctual processes may change on top of each other: what shields
//! change (IRQ affinities, the default IRQ affinity, `sched_rt_runtime_us`, other tasks' CPU masks).
//!
//! A private journal cannot undo these correctly: a second shield changes values the first one set,
//! and whichever is restored first would write back a value the other still relies on (or every
//! IRQ ends pinned to one CPU). So they are kept in one registry shared by every punctual process
//! on the machine (`shields.json` in [`crate::journal::machine_dir`], whatever the journals' state
//! directory; root-owned 0600, changed only under an exclusive lock on `shields.lock`): per
//! setting, the value before the first change (the baseline) and a stack of holders, each with
//! the value it set, read back from the kernel.
//!
//! Releasing a holder:
//! - on top of its stack, and the current value is still what it set: the value below it (the
//!   previous holder's, or the baseline) is written back;
//! - on top, but the value changed since (another program changed it): it is left as it is, and
//!   reported;
//! - not on top: nothing is written; the holder above will restore the value below instead.
//!
//! Tasks forked while a holder's CPU mask was in force inherited it: at release, a task started
//! after the holder's claim whose mask is exactly the one set on its nearest moved ancestor (the
//! same process, else the closest process up its parent chain) gets that ancestor's restored mask
//! too; a task that chose another mask keeps it.
//!
//! The registry also lists live shields ([`Claim`]: owner and CPUs), so a second shield over the
//! same CPUs can be refused atomically. Owners are processes (pid and start time); a dead owner's
//! holdings are released by the next process that takes the lock, and by the journal's
//! [`crate::journal::Change::Stacked`] entry at the next start.

use crate::affinity::{format_cpu_list, parse_cpu_list};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A process that holds settings (pid reuse is caught by the start time).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Owner {
    pub pid: i32,
    pub start_time: u64,
}

impl Owner {
    /// This process.
    pub fn current() -> Owner {
        let pid = std::process::id() as i32;
        Owner {
            pid,
            start_time: crate::task::task_start_time(pid).unwrap_or(0),
        }
    }

    pub fn alive(&self) -> bool {
        crate::task::task_start_time(self.pid) == Some(self.start_time)
    }
}

/// Something a holder changed.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Target {
    /// A kernel file (only those [`Registry`]'s allow list admits).
    File { path: PathBuf },
    /// Another task's CPU mask.
    Task { pid: i32, start_time: u64 },
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::File { path } => write!(f, "{}", path.display()),
            Target::Task { pid, .. } => write!(f, "CPU mask of task {pid}"),
        }
    }
}

/// A live shield: who, which CPUs, since when (clock ticks since boot, as task start times).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    pub owner: Owner,
    pub cpus: Vec<usize>,
    pub since: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Holding {
    owner: Owner,
    set: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Entry {
    target: Target,
    baseline: String,
    holders: Vec<Holding>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct State {
    claims: Vec<Claim>,
    entries: Vec<Entry>,
}

/// What releasing one owner did.
#[derive(Debug, Default)]
pub struct Released {
    pub owner: Option<Owner>,
    /// Values written back.
    pub restored: usize,
    /// Values a later holder changed on top: it restores them when it goes.
    pub handed_over: usize,
    /// Values someone else changed since: left as they are (with the value found).
    pub left_changed: Vec<(Target, String)>,
    /// Targets that no longer exist (the task exited, the IRQ went away).
    pub gone: usize,
    /// Tasks started during the hold that inherited a reduced mask and got their ancestor's back.
    pub widened: Vec<i32>,
    pub failed: Vec<(Target, String)>,
}

impl Released {
    /// Everything this owner changed is back, or in the hands of a later holder.
    pub fn clean(&self) -> bool {
        self.left_changed.is_empty() && self.failed.is_empty()
    }

    /// Add what another release of the same owner did.
    fn absorb(&mut self, o: Released) {
        self.restored += o.restored;
        self.handed_over += o.handed_over;
        self.left_changed.extend(o.left_changed);
        self.gone += o.gone;
        self.widened.extend(o.widened);
        self.failed.extend(o.failed);
    }
}

/// The registry in a directory. `allow` decides which files it may ever write.
#[derive(Clone, Debug)]
pub struct Registry {
    dir: PathBuf,
    allow: fn(&Path) -> bool,
}

/// The files shields change, and nothing else.
pub fn shield_file(path: &Path) -> bool {
    let Some(s) = path.to_str() else { return false };
    if s == "/proc/irq/default_smp_affinity" || s == "/proc/sys/kernel/sched_rt_runtime_us" {
        return true;
    }
    s.strip_prefix("/proc/irq/")
        .and_then(|r| r.strip_suffix("/smp_affinity_list"))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// How a value is compared and checked.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    CpuList,
    HexMask,
    Integer,
}

fn kind_of(t: &Target) -> Kind {
    match t {
        Target::Task { .. } => Kind::CpuList,
        Target::File { path } => {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name == "default_smp_affinity" {
                Kind::HexMask
            } else if name.ends_with("smp_affinity_list") {
                Kind::CpuList
            } else {
                Kind::Integer
            }
        }
    }
}

/// The value in one canonical spelling, or `None` when it is not a value of its kind.
fn canonical(kind: Kind, v: &str) -> Option<String> {
    let v = v.trim();
    match kind {
        Kind::CpuList => parse_cpu_list(v).ok().map(|c| format_cpu_list(&c)),
        Kind::HexMask => {
            let mut cpus = Vec::new();
            for (i, word) in v.rsplit(',').enumerate() {
                let w = u32::from_str_radix(word, 16).ok()?;
                cpus.extend((0..32).filter(|b| w & (1 << b) != 0).map(|b| i * 32 + b));
            }
            Some(format_cpu_list(&cpus))
        }
        Kind::Integer => v.parse::<i64>().ok().map(|n| n.to_string()),
    }
}

fn same(kind: Kind, a: &str, b: &str) -> bool {
    match (canonical(kind, a), canonical(kind, b)) {
        (Some(x), Some(y)) => x == y,
        _ => a.trim() == b.trim(),
    }
}

/// Clock ticks since boot now (the unit of task start times).
pub fn boot_ticks_now() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer; sysconf has no preconditions.
    let hz = unsafe {
        libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts);
        libc::sysconf(libc::_SC_CLK_TCK)
    }
    .max(1) as u64;
    ts.tv_sec as u64 * hz + ts.tv_nsec as u64 * hz / 1_000_000_000
}

fn not_found(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH)
}

/// Refuse a file or directory not owned by us, writable by others, or reached through a link.
fn check_owned(meta: &std::fs::Metadata, what: &Path, dir: bool) -> io::Result<()> {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let kind_ok = if dir {
        meta.file_type().is_dir()
    } else {
        meta.file_type().is_file()
    };
    if !kind_ok || meta.uid() != me || meta.mode() & 0o022 != 0 {
        return Err(io::Error::other(format!(
            "{} is not a {} owned by uid {me} and writable only by it (uid {}, mode {:o}); \
             it is not trusted: remove it",
            what.display(),
            if dir { "directory" } else { "regular file" },
            meta.uid(),
            meta.mode() & 0o7777
        )));
    }
    Ok(())
}

impl Registry {
    /// The registry every punctual process on this machine shares (in
    /// [`crate::journal::machine_dir`], not a private state directory), admitting only
    /// [`shield_file`]s.
    pub fn system() -> Registry {
        Registry {
            dir: crate::state::machine_dir(),
            allow: shield_file,
        }
    }

    /// A registry elsewhere (tests: a temporary directory and files in it).
    pub fn in_dir(dir: impl Into<PathBuf>, allow: fn(&Path) -> bool) -> Registry {
        Registry {
            dir: dir.into(),
            allow,
        }
    }

    /// The registry's file (`shields.json`).
    pub fn file(&self) -> PathBuf {
        self.dir.join("shields.json")
    }

    fn prepare_dir(&self) -> io::Result<()> {
        match std::fs::symlink_metadata(&self.dir) {
            Ok(m) => check_owned(&m, &self.dir, true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&self.dir),
            Err(e) => Err(e),
        }
    }

    /// Live shields, without taking the lock or changing anything (for planning and dry runs).
    pub fn live_claims(&self) -> Vec<Claim> {
        self.read_state()
            .map(|s| s.claims.into_iter().filter(|c| c.owner.alive()).collect())
            .unwrap_or_default()
    }

    fn read_state(&self) -> io::Result<State> {
        let path = self.file();
        let mut f = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(State::default()),
            Err(e) => return Err(e),
        };
        check_owned(&f.metadata()?, &path, false)?;
        let mut text = String::new();
        f.read_to_string(&mut text)?;
        serde_json::from_str(&text).map_err(|e| {
            io::Error::other(format!(
                "{} is damaged ({e}); remove it after checking IRQ and task affinities",
                path.display()
            ))
        })
    }

    /// Take the lock (waiting up to 10 s for another punctual), read the registry and release
    /// the holdings of owners that died (reported in [`Locked::pruned`]).
    pub fn lock(&self) -> io::Result<Locked<'_>> {
        self.prepare_dir()?;
        let lock_path = self.dir.join("shields.lock");
        let lock = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&lock_path)?;
        check_owned(&lock.metadata()?, &lock_path, false)?;
        let t0 = std::time::Instant::now();
        loop {
            // SAFETY: flock on our own descriptor.
            if unsafe {
                libc::flock(
                    std::os::fd::AsRawFd::as_raw_fd(&lock),
                    libc::LOCK_EX | libc::LOCK_NB,
                )
            } == 0
            {
                break;
            }
            if t0.elapsed() > std::time::Duration::from_secs(10) {
                return Err(io::Error::other(format!(
                    "another punctual has held {} for 10 s; try again",
                    lock_path.display()
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let mut state = self.read_state()?;
        let mut pruned = Vec::new();
        // Targets outside the allow list are never written: drop them.
        let mut refused = Vec::new();
        state.entries.retain(|e| match &e.target {
            Target::File { path } if !(self.allow)(path) => {
                refused.push((
                    e.target.clone(),
                    "not a file shields change; ignored".to_string(),
                ));
                false
            }
            _ => true,
        });
        let mut l = Locked {
            reg: self,
            _lock: lock,
            state,
            pruned: Vec::new(),
        };
        let mut dead: Vec<Owner> = l
            .state
            .claims
            .iter()
            .map(|c| c.owner)
            .chain(
                l.state
                    .entries
                    .iter()
                    .flat_map(|e| e.holders.iter().map(|h| h.owner)),
            )
            .filter(|o| !o.alive())
            .collect();
        dead.sort_by_key(|o| (o.pid, o.start_time));
        dead.dedup();
        for o in dead {
            pruned.push(l.release(o));
        }
        if let Some(first) = pruned.first_mut() {
            first.failed.extend(refused);
        } else if !refused.is_empty() {
            pruned.push(Released {
                failed: refused,
                ..Default::default()
            });
        }
        l.pruned = pruned;
        l.save()?;
        Ok(l)
    }
}

/// The registry, locked. Dropping it writes it and releases the lock.
pub struct Locked<'a> {
    reg: &'a Registry,
    _lock: std::fs::File,
    state: State,
    /// What was released for dead owners when the lock was taken.
    pub pruned: Vec<Released>,
}

impl Locked<'_> {
    /// Live shields (dead ones were pruned when the lock was taken).
    pub fn claims(&self) -> &[Claim] {
        &self.state.claims
    }

    /// Register a shield over `cpus`. The caller checked [`Locked::claims`] for overlaps first.
    pub fn claim(&mut self, owner: Owner, cpus: &[usize]) -> io::Result<()> {
        self.state.claims.retain(|c| c.owner != owner);
        self.state.claims.push(Claim {
            owner,
            cpus: cpus.to_vec(),
            since: boot_ticks_now(),
        });
        self.save()
    }

    fn save(&self) -> io::Result<()> {
        let path = self.reg.file();
        if self.state.claims.is_empty() && self.state.entries.is_empty() {
            return match std::fs::remove_file(&path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            };
        }
        let tmp = self.reg.dir.join("shields.json.tmp");
        let _ = std::fs::remove_file(&tmp);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        // No fsync: the directory is /run (or the user's runtime directory), gone at a power loss
        // together with the settings it describes; a crash of punctual keeps the renamed file.
        f.write_all(&serde_json::to_vec(&self.state).map_err(io::Error::other)?)?;
        std::fs::rename(&tmp, &path)
    }

    /// The value of a target now.
    pub fn read(&self, t: &Target) -> io::Result<String> {
        match t {
            Target::File { path } => {
                let mut s = String::new();
                std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(path)?
                    .read_to_string(&mut s)?;
                Ok(s)
            }
            Target::Task { pid, start_time } => {
                if crate::task::task_start_time(*pid) != Some(*start_time) {
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
                crate::affinity::get(*pid)
                    .map(|c| format_cpu_list(&c))
                    .map_err(|e| match e {
                        crate::RtError::Io { source, .. }
                        | crate::RtError::Refused { source, .. } => source,
                        other => io::Error::other(other.to_string()),
                    })
            }
        }
    }

    fn put(&self, t: &Target, value: &str) -> io::Result<()> {
        if canonical(kind_of(t), value).is_none() {
            return Err(io::Error::other(format!(
                "'{}' is not a value for {t}; not written",
                value.trim().escape_debug()
            )));
        }
        match t {
            Target::File { path } => {
                if !(self.reg.allow)(path) {
                    return Err(io::Error::other(format!(
                        "{} is not a file shields change; not written",
                        path.display()
                    )));
                }
                std::fs::OpenOptions::new()
                    .write(true)
                    .truncate(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(path)?
                    .write_all(value.as_bytes())
            }
            Target::Task { pid, start_time } => {
                if crate::task::task_start_time(*pid) != Some(*start_time) {
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
                let cpus = parse_cpu_list(value.trim()).map_err(io::Error::other)?;
                crate::affinity::set(*pid, &cpus).map_err(|e| match e {
                    crate::RtError::Io { source, .. } | crate::RtError::Refused { source, .. } => {
                        source
                    }
                    other => io::Error::other(other.to_string()),
                })
            }
        }
    }

    /// Set `t` to `value` for `owner`, on top of whatever holders it has. Recorded before the
    /// change (a crash in between is released like any other holding: the value found then is
    /// not the one recorded, so it is left alone).
    pub fn write(&mut self, owner: Owner, t: Target, value: &str) -> io::Result<()> {
        self.write_many(owner, vec![(t, value.to_string())])
            .pop()
            .expect("one result per item")
    }

    /// [`Locked::write`] for many targets: every holding is recorded (one registry write), then
    /// the values are written. One result per item, in order.
    pub fn write_many(
        &mut self,
        owner: Owner,
        items: Vec<(Target, String)>,
    ) -> Vec<io::Result<()>> {
        let mut results: Vec<io::Result<()>> = Vec::with_capacity(items.len());
        let mut recorded: Vec<Option<usize>> = Vec::with_capacity(items.len());
        for (t, value) in &items {
            match self.read(t) {
                Err(e) => {
                    results.push(Err(e));
                    recorded.push(None);
                }
                Ok(current) => {
                    let i = match self.state.entries.iter().position(|e| &e.target == t) {
                        Some(i) => i,
                        None => {
                            self.state.entries.push(Entry {
                                target: t.clone(),
                                baseline: current,
                                holders: Vec::new(),
                            });
                            self.state.entries.len() - 1
                        }
                    };
                    self.state.entries[i].holders.push(Holding {
                        owner,
                        set: value.clone(),
                    });
                    results.push(Ok(()));
                    recorded.push(Some(i));
                }
            }
        }
        let saved = self.save();
        let mut undo: Vec<usize> = Vec::new();
        for (k, (t, value)) in items.iter().enumerate() {
            let Some(i) = recorded[k] else { continue };
            let done = match &saved {
                Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
                Ok(()) => self.put(t, value),
            };
            match done {
                Err(e) => {
                    results[k] = Err(e);
                    undo.push(i);
                }
                // What the kernel made of it, so the release compares like with like.
                Ok(()) => {
                    if let Ok(back) = self.read(t) {
                        if let Some(h) = self.state.entries[i].holders.last_mut() {
                            h.set = back;
                        }
                    }
                }
            }
        }
        for &i in &undo {
            let hs = &mut self.state.entries[i].holders;
            if let Some(p) = hs.iter().rposition(|h| h.owner == owner) {
                hs.remove(p);
            }
        }
        self.state.entries.retain(|e| !e.holders.is_empty());
        let _ = self.save();
        results
    }

    /// Write the registry now (also done by every change and release).
    pub fn flush(&self) -> io::Result<()> {
        self.save()
    }

    /// Release everything `owner` holds, and its claim (see the module documentation).
    pub fn release(&mut self, owner: Owner) -> Released {
        let mut r = Released {
            owner: Some(owner),
            ..Default::default()
        };
        let since = self
            .state
            .claims
            .iter()
            .find(|c| c.owner == owner)
            .map(|c| c.since);
        // Task pid -> (mask the owner set, mask that replaces it).
        let mut inherited: HashMap<i32, (String, String)> = HashMap::new();
        let mut entries = std::mem::take(&mut self.state.entries);
        for e in &mut entries {
            let Some(k) = e.holders.iter().position(|h| h.owner == owner) else {
                continue;
            };
            let kind = kind_of(&e.target);
            let set = e.holders[k].set.clone();
            let below = if k == 0 {
                e.baseline.clone()
            } else {
                e.holders[k - 1].set.clone()
            };
            if k + 1 < e.holders.len() {
                r.handed_over += 1;
            } else {
                match self.read(&e.target) {
                    Err(err) if not_found(&err) => r.gone += 1,
                    Err(err) => r.failed.push((e.target.clone(), err.to_string())),
                    Ok(cur) if !same(kind, &cur, &set) => r
                        .left_changed
                        .push((e.target.clone(), cur.trim().to_string())),
                    Ok(_) => match self.put(&e.target, &below) {
                        Ok(()) => r.restored += 1,
                        Err(err) if not_found(&err) => r.gone += 1,
                        Err(err) => r.failed.push((e.target.clone(), err.to_string())),
                    },
                }
            }
            e.holders.remove(k);
            if let Target::Task { pid, .. } = e.target {
                inherited.insert(pid, (set, below));
            }
        }
        entries.retain(|e| !e.holders.is_empty());
        self.state.entries = entries;
        if let Some(since) = since {
            if !inherited.is_empty() {
                self.widen_descendants(since, &inherited, &mut r);
            }
        }
        self.state.claims.retain(|c| c.owner != owner);
        if let Err(e) = self.save() {
            r.failed.push((
                Target::File {
                    path: self.reg.file(),
                },
                e.to_string(),
            ));
        }
        r
    }

    /// Tasks started since `since` that inherited a mask the owner set on an ancestor get the
    /// ancestor's replacement mask; those other shields still hold get it as their baseline.
    fn widen_descendants(
        &mut self,
        since: u64,
        inherited: &HashMap<i32, (String, String)>,
        r: &mut Released,
    ) {
        let tasks = all_tasks();
        let parent: HashMap<i32, i32> = tasks
            .iter()
            .filter(|t| t.tid == t.tgid)
            .map(|t| (t.tgid, t.ppid))
            .collect();
        let registered: HashMap<i32, usize> = self
            .state
            .entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| match e.target {
                Target::Task { pid, .. } => Some((pid, i)),
                _ => None,
            })
            .collect();
        for t in tasks.iter().filter(|t| t.start_time >= since) {
            if inherited.contains_key(&t.tid) {
                continue;
            }
            // The nearest ancestor: the thread's own process, then up the parent chain, stopping
            // at a task someone else moved (its mask came from there, not from this owner).
            let mut found = None;
            let mut p = if t.tid != t.tgid {
                t.tgid
            } else {
                parent.get(&t.tgid).copied().unwrap_or(0)
            };
            for _ in 0..128 {
                if p <= 0 {
                    break;
                }
                if let Some(v) = inherited.get(&p) {
                    found = Some(v);
                    break;
                }
                if registered.contains_key(&p) {
                    break;
                }
                p = parent.get(&p).copied().unwrap_or(0);
            }
            let Some((set, below)) = found else { continue };
            if let Some(&i) = registered.get(&t.tid) {
                let e = &mut self.state.entries[i];
                if e.target
                    == (Target::Task {
                        pid: t.tid,
                        start_time: t.start_time,
                    })
                    && same(Kind::CpuList, &e.baseline, set)
                {
                    e.baseline = below.clone();
                    r.widened.push(t.tid);
                }
                continue;
            }
            let target = Target::Task {
                pid: t.tid,
                start_time: t.start_time,
            };
            if let Ok(cur) = self.read(&target) {
                if same(Kind::CpuList, &cur, set) && self.put(&target, below).is_ok() {
                    r.widened.push(t.tid);
                }
            }
        }
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        let _ = self.save();
    }
}

struct TaskInfo {
    tid: i32,
    tgid: i32,
    ppid: i32,
    start_time: u64,
}

/// Every task: id, process, the process's parent, start time.
fn all_tasks() -> Vec<TaskInfo> {
    // A process's threads come together: its parent is read once.
    let mut parent: Option<(i32, Option<u64>)> = None;
    let mut out = Vec::new();
    for (tgid, tid) in crate::task::threads() {
        if parent.is_none_or(|(p, _)| p != tgid) {
            parent = Some((tgid, stat_field(&format!("/proc/{tgid}/stat"), 1)));
        }
        let Some((_, Some(ppid))) = parent else {
            continue;
        };
        if let Some(st) = stat_field(&format!("/proc/{tgid}/task/{tid}/stat"), 19) {
            out.push(TaskInfo {
                tid,
                tgid,
                ppid: ppid as i32,
                start_time: st,
            });
        }
    }
    out
}

/// Field `n` (0 = state) after the command name of a stat file.
fn stat_field(path: &str, n: usize) -> Option<u64> {
    let s = std::fs::read_to_string(path).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    rest.split_whitespace().nth(n)?.parse().ok()
}

/// Release an owner in the system registry (the journal's undo of [`crate::journal::Change::Stacked`]).
/// A dead owner is released as the lock is taken (every lock prunes dead owners): what that did
/// counts as this release's (issue 31: `shield --restore` said "restored 0 setting(s)").
pub fn release_in_system(owner: Owner) -> io::Result<Released> {
    let reg = Registry::system();
    let mut l = reg.lock()?;
    let mut r = l.release(owner);
    if let Some(i) = l.pruned.iter().position(|p| p.owner == Some(owner)) {
        r.absorb(l.pruned.swap_remove(i));
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Child, Command, Stdio};

    fn allow_all(_: &Path) -> bool {
        true
    }

    /// A live process to stand for another punctual.
    struct FakeOwner(Child);

    impl FakeOwner {
        fn new() -> FakeOwner {
            FakeOwner(
                Command::new("sleep")
                    .arg("60")
                    .stdin(Stdio::null())
                    .spawn()
                    .unwrap(),
            )
        }
        fn owner(&self) -> Owner {
            let pid = self.0.id() as i32;
            Owner {
                pid,
                start_time: crate::task::task_start_time(pid).unwrap(),
            }
        }
    }

    impl Drop for FakeOwner {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// Fake /proc/irq files for a machine with CPUs 0-3.
    fn irq_files(dir: &Path) -> Vec<Target> {
        let mut v = Vec::new();
        for (irq, mask) in [("5", "0-3"), ("7", "3"), ("9", "0")] {
            std::fs::create_dir_all(dir.join(irq)).unwrap();
            let p = dir.join(irq).join("smp_affinity_list");
            std::fs::write(&p, format!("{mask}\n")).unwrap();
            v.push(Target::File { path: p });
        }
        let d = dir.join("default_smp_affinity");
        std::fs::write(&d, "f\n").unwrap();
        v.push(Target::File { path: d });
        v
    }

    fn snapshot(targets: &[Target]) -> Vec<String> {
        targets
            .iter()
            .map(|t| match t {
                Target::File { path } => std::fs::read_to_string(path).unwrap().trim().to_string(),
                Target::Task { .. } => unreachable!(),
            })
            .collect()
    }

    /// A shield's IRQ changes on the fake machine, as `punctual_dispatch::shield` makes them:
    /// IRQs touching `cpus` go to the CPUs no live shield holds.
    fn shield(l: &mut Locked, who: Owner, cpus: &[usize], targets: &[Target]) {
        let held: Vec<usize> = l
            .claims()
            .iter()
            .flat_map(|c| c.cpus.clone())
            .chain(cpus.iter().copied())
            .collect();
        let others: Vec<usize> = (0..4).filter(|c| !held.contains(c)).collect();
        l.claim(who, cpus).unwrap();
        for t in targets {
            let cur = l.read(t).unwrap();
            let kind = kind_of(t);
            let mask = parse_cpu_list(&canonical(kind, &cur).unwrap()).unwrap();
            if kind == Kind::HexMask {
                let bits: u32 = others.iter().map(|c| 1u32 << c).sum();
                l.write(who, t.clone(), &format!("{bits:x}")).unwrap();
            } else if mask.iter().any(|c| cpus.contains(c)) {
                l.write(who, t.clone(), &format_cpu_list(&others)).unwrap();
            }
        }
    }

    #[test]
    fn disjoint_shields_restored_in_either_order_leave_irqs_as_they_were() {
        for first_out in [0, 1] {
            let tmp = tempfile::tempdir().unwrap();
            let targets = irq_files(&tmp.path().join("irq"));
            let before = snapshot(&targets);
            let reg = Registry::in_dir(tmp.path().join("state"), allow_all);
            let (a, b) = (FakeOwner::new(), FakeOwner::new());
            shield(&mut reg.lock().unwrap(), a.owner(), &[3], &targets);
            shield(&mut reg.lock().unwrap(), b.owner(), &[2], &targets);
            // Both in force: IRQs 5 and 7 on CPUs 0-1, the default mask 0-1.
            assert_eq!(snapshot(&targets), ["0-1", "0-1", "0", "3"], "both shields");
            let order = if first_out == 0 {
                [a.owner(), b.owner()]
            } else {
                [b.owner(), a.owner()]
            };
            let r1 = reg.lock().unwrap().release(order[0]);
            assert!(r1.clean(), "{r1:?}");
            // The shield still in force keeps its own CPUs free of IRQs.
            let mid = snapshot(&targets);
            let kept_cpu = if first_out == 0 { "2" } else { "3" };
            for v in &mid[..2] {
                assert!(
                    !parse_cpu_list(v)
                        .unwrap()
                        .contains(&kept_cpu.parse().unwrap()),
                    "{mid:?}"
                );
            }
            let r2 = reg.lock().unwrap().release(order[1]);
            assert!(r2.clean(), "{r2:?}");
            assert_eq!(snapshot(&targets), before, "order {first_out}");
            assert!(!reg.file().exists(), "nothing left in the registry");
        }
    }

    #[test]
    fn a_value_someone_else_changed_since_is_left_and_reported() {
        let tmp = tempfile::tempdir().unwrap();
        let targets = irq_files(&tmp.path().join("irq"));
        let reg = Registry::in_dir(tmp.path().join("state"), allow_all);
        let a = FakeOwner::new();
        shield(&mut reg.lock().unwrap(), a.owner(), &[3], &targets);
        let Target::File { path } = &targets[0] else {
            unreachable!()
        };
        std::fs::write(path, "1\n").unwrap(); // an administrator's choice, made meanwhile
        let r = reg.lock().unwrap().release(a.owner());
        assert_eq!(r.left_changed, vec![(targets[0].clone(), "1".to_string())]);
        assert_eq!(std::fs::read_to_string(path).unwrap().trim(), "1");
        assert_eq!(r.restored, 2, "IRQ 7 and the default mask");
    }

    #[test]
    fn a_dead_owners_settings_are_restored_by_the_next_lock() {
        let tmp = tempfile::tempdir().unwrap();
        let targets = irq_files(&tmp.path().join("irq"));
        let before = snapshot(&targets);
        let reg = Registry::in_dir(tmp.path().join("state"), allow_all);
        let a = FakeOwner::new();
        let who = a.owner();
        shield(&mut reg.lock().unwrap(), who, &[3], &targets);
        assert_ne!(snapshot(&targets), before);
        drop(a); // killed
        let l = reg.lock().unwrap();
        assert_eq!(l.pruned.len(), 1);
        assert_eq!(l.pruned[0].owner, Some(who));
        assert!(l.claims().is_empty());
        drop(l);
        assert_eq!(snapshot(&targets), before);
    }

    #[test]
    fn files_outside_the_allow_list_are_never_written() {
        assert!(shield_file(Path::new("/proc/irq/12/smp_affinity_list")));
        assert!(shield_file(Path::new("/proc/irq/default_smp_affinity")));
        assert!(shield_file(Path::new(
            "/proc/sys/kernel/sched_rt_runtime_us"
        )));
        assert!(!shield_file(Path::new(
            "/proc/irq/../../etc/passwd/smp_affinity_list"
        )));
        assert!(!shield_file(Path::new("/etc/shadow")));
        let tmp = tempfile::tempdir().unwrap();
        let victim = tmp.path().join("victim");
        std::fs::write(&victim, "keep\n").unwrap();
        let reg = Registry::in_dir(tmp.path().join("state"), shield_file);
        let mut l = reg.lock().unwrap();
        let e = l
            .write(
                Owner::current(),
                Target::File {
                    path: victim.clone(),
                },
                "1",
            )
            .unwrap_err();
        assert!(e.to_string().contains("not a file shields change"), "{e}");
        drop(l);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep\n");
        // A forged registry naming it is ignored too.
        let forged = State {
            claims: vec![],
            entries: vec![Entry {
                target: Target::File {
                    path: victim.clone(),
                },
                baseline: "0".into(),
                holders: vec![Holding {
                    owner: Owner {
                        pid: i32::MAX - 3,
                        start_time: 1,
                    },
                    set: "keep".into(),
                }],
            }],
        };
        std::fs::write(reg.file(), serde_json::to_vec(&forged).unwrap()).unwrap();
        let l = reg.lock().unwrap();
        assert!(!l.pruned.is_empty() && !l.pruned[0].failed.is_empty());
        drop(l);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep\n");
    }

    #[test]
    fn a_registry_writable_by_others_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let reg = Registry::in_dir(tmp.path().join("state"), allow_all);
        drop(reg.lock().unwrap());
        std::fs::write(reg.file(), b"{\"claims\":[],\"entries\":[]}").unwrap();
        std::fs::set_permissions(reg.file(), std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = reg.lock().err().expect("refused");
        assert!(e.to_string().contains("not trusted"), "{e}");
    }

    #[test]
    fn a_task_forked_under_a_reduced_mask_gets_its_ancestors_mask_back() {
        let online = crate::online_cpus();
        if online.len() < 2 {
            punctual_testkit::skip(
                "a_task_forked_under_a_reduced_mask_gets_its_ancestors_mask_back",
                "needs two CPUs",
            );
            return;
        }
        let first = online[0];
        let last = *online.last().unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let go = tmp.path().join("go");
        // A moved process that forks two children once told to: one inherits the reduced mask,
        // one pins itself elsewhere.
        let script = format!(
            "while [ ! -e {go} ]; do sleep 0.01; done; sleep 30 & taskset -c {last} sleep 30 & wait",
            go = go.display()
        );
        let mut parent = Command::new("/bin/sh")
            .arg("-c")
            .arg(&script)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let ppid = parent.id() as i32;
        let before = crate::affinity::get(ppid).unwrap();
        let reg = Registry::in_dir(tmp.path().join("state"), allow_all);
        let who = Owner::current();
        {
            let mut l = reg.lock().unwrap();
            l.claim(who, &[last]).unwrap();
            let t = Target::Task {
                pid: ppid,
                start_time: crate::task::task_start_time(ppid).unwrap(),
            };
            l.write(who, t, &format_cpu_list(&[first])).unwrap();
        }
        std::fs::write(&go, "").unwrap();
        // Wait for both children.
        let kids = || -> Vec<i32> {
            all_tasks()
                .into_iter()
                .filter(|t| t.ppid == ppid && t.tid == t.tgid)
                .map(|t| t.tid)
                .collect()
        };
        let t0 = std::time::Instant::now();
        let mut children = kids();
        while (children.len() < 2
            || children.iter().any(|&c| {
                std::fs::read_to_string(format!("/proc/{c}/comm"))
                    .map(|s| s.trim() != "sleep")
                    .unwrap_or(true)
            }))
            && t0.elapsed().as_secs() < 5
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
            children = kids();
        }
        let r = reg.lock().unwrap().release(who);
        let masks: Vec<Vec<usize>> = children
            .iter()
            .map(|&c| crate::affinity::get(c).unwrap_or_default())
            .collect();
        for &c in &children {
            // SAFETY: children of our child, found by their parent pid just above.
            unsafe { libc::kill(c, libc::SIGKILL) };
        }
        let _ = parent.kill();
        let _ = parent.wait();
        assert_eq!(children.len(), 2, "{children:?}");
        assert_eq!(r.restored, 1, "{r:?}");
        assert_eq!(r.widened.len(), 1, "{r:?}");
        assert!(
            masks.contains(&before),
            "the inheriting child is back on {before:?}: {masks:?}"
        );
        assert!(
            masks.contains(&vec![last]),
            "the child that pinned itself keeps CPU {last}: {masks:?}"
        );
    }
}
