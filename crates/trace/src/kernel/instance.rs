//! A private tracefs instance (`instances/punctual-<pid>`): its own per-CPU ring buffers, trace clock
//! and enabled events, so punctual never touches the top-level buffer other tools use, and several
//! punctual runs can trace at once.
//!
//! Journalled before each step: the directory (removed on undo), then `events/enable` and
//! `tracing_on` (written back to `0` on undo). Undo runs newest first, so even when the directory
//! cannot be removed yet (a reader still has a file open, as on a second Ctrl-C) tracing has stopped,
//! and the next punctual start removes it.

use super::format::{parse_event_format, parse_header_page, EventFormat, PageLayout};
use super::tracefs::Tracefs;
use super::KernelEvent;
use crate::file::LostStats;
use crate::TraceError;
use punctual_rt::journal::{self, Change, ChangeGuard};
use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

pub struct Instance {
    path: PathBuf,
    // Drop order is field order: stop events, stop tracing, then remove the directory.
    _events_off: Option<ChangeGuard>,
    _tracing_off: Option<ChangeGuard>,
    _dir: ChangeGuard,
}

static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// A fresh instance name for this process: `punctual-<pid>`, then `punctual-<pid>-<n>` for further
/// recordings running at the same time (experiments and tests record more than once).
pub fn instance_name(pid: u32) -> String {
    match NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) {
        0 => format!("punctual-{pid}"),
        n => format!("punctual-{pid}-{n}"),
    }
}

/// The pid in a punctual instance name.
pub fn instance_owner(name: &str) -> Option<i32> {
    let rest = name.strip_prefix("punctual-")?;
    rest.split('-').next()?.parse().ok()
}

impl Instance {
    /// Create `instances/<name>` with tracing off.
    pub fn create(fs: &Tracefs, name: &str) -> Result<Instance, TraceError> {
        let j = journal::global();
        let path = fs.root().join("instances").join(name);
        let dir = j
            .record(Change::RemoveDir { path: path.clone() })
            .map_err(|e| TraceError::io("writing the journal", e))?;
        if let Err(e) = std::fs::create_dir(&path) {
            if e.kind() != std::io::ErrorKind::AlreadyExists {
                return Err(TraceError::tracefs(
                    "creating the tracefs instance",
                    &path,
                    e,
                ));
            }
            // A leftover with our name (pid reuse after a crash the journal did not cover): start afresh.
            std::fs::remove_dir(&path)
                .map_err(|e| TraceError::tracefs("removing the stale instance", &path, e))?;
            std::fs::create_dir(&path)
                .map_err(|e| TraceError::tracefs("creating the tracefs instance", &path, e))?;
        }
        let mut inst = Instance {
            path,
            _events_off: None,
            _tracing_off: None,
            _dir: dir,
        };
        let off = |p: PathBuf| {
            j.record(Change::File {
                path: p,
                original: "0".into(),
            })
        };
        inst._tracing_off = Some(
            off(inst.path.join("tracing_on"))
                .map_err(|e| TraceError::io("writing the journal", e))?,
        );
        inst._events_off = Some(
            off(inst.path.join("events/enable"))
                .map_err(|e| TraceError::io("writing the journal", e))?,
        );
        inst.write("tracing_on", "0")?;
        Ok(inst)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn write(&self, file: &str, value: &str) -> Result<(), TraceError> {
        let p = self.path.join(file);
        std::fs::write(&p, value).map_err(|e| TraceError::tracefs("writing", p, e))
    }

    pub fn read(&self, file: &str) -> Result<String, TraceError> {
        let p = self.path.join(file);
        super::read_file(&p).map_err(|e| TraceError::tracefs("reading", p, e))
    }

    /// Per-CPU ring buffer size. The kernel refuses sizes it cannot allocate.
    pub fn set_buffer_kb(&self, kb: u64) -> Result<(), TraceError> {
        let p = self.path.join("buffer_size_kb");
        std::fs::write(&p, kb.to_string()).map_err(|e| match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => TraceError::tracefs("writing", p, e),
            _ => TraceError::BufferRefused { kb, source: e },
        })
    }

    /// Use `clock` for timestamps (`mono` = CLOCK_MONOTONIC). Must precede enabling tracing.
    pub fn set_clock(&self, clock: &str) -> Result<(), TraceError> {
        self.write("trace_clock", clock)
    }

    /// Enable one event and return its format; `Ok(None)` when an optional event is absent.
    pub fn enable(&self, ev: &KernelEvent) -> Result<Option<EventFormat>, TraceError> {
        let dir = self.path.join("events").join(ev.system).join(&ev.name);
        let text = match super::read_file(&dir.join("format")) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if ev.optional {
                    return Ok(None);
                }
                return Err(TraceError::EventMissing {
                    event: ev.path(),
                    why: format!("{} does not exist", dir.display()),
                });
            }
            Err(e) => return Err(TraceError::tracefs("reading", dir.join("format"), e)),
        };
        let format = parse_event_format(ev.system, &text)?;
        let p = dir.join("enable");
        std::fs::write(&p, "1").map_err(|e| TraceError::tracefs("enabling", p, e))?;
        Ok(Some(format))
    }

    /// The page layout: `events/header_page`, with the sub-buffer size the instance uses.
    pub fn page_layout(&self, root: &Path) -> Result<PageLayout, TraceError> {
        let text = super::read_file(&self.path.join("events/header_page"))
            .or_else(|_| super::read_file(&root.join("events/header_page")))
            .map_err(|e| TraceError::tracefs("reading", root.join("events/header_page"), e))?;
        let layout = parse_header_page(&text)?;
        Ok(
            match self
                .read("buffer_subbuf_size_kb")
                .ok()
                .and_then(|s| s.trim().parse::<usize>().ok())
            {
                Some(kb) if kb * 1024 > layout.data_offset => layout.with_page_size(kb * 1024),
                _ => layout,
            },
        )
    }

    /// Open a CPU's binary pipe, non-blocking (the drain polls).
    pub fn open_pipe(&self, cpu: u32) -> Result<File, TraceError> {
        let p = self.path.join(format!("per_cpu/cpu{cpu}/trace_pipe_raw"));
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&p)
            .map_err(|e| TraceError::tracefs("opening", p, e))
    }

    /// The buffer's loss counters for a CPU.
    pub fn cpu_stats(&self, cpu: u32) -> LostStats {
        let text = self
            .read(&format!("per_cpu/cpu{cpu}/stats"))
            .unwrap_or_default();
        parse_stats(&text)
    }
}

/// Parse `per_cpu/cpuN/stats` (`overrun: 0`, `commit overrun: 0`, `dropped events: 0`...).
pub fn parse_stats(text: &str) -> LostStats {
    let mut s = LostStats::default();
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let Ok(v) = v.trim().parse::<u64>() else {
            continue;
        };
        match k.trim() {
            "overrun" => s.overrun = v,
            "commit overrun" => s.commit_overrun = v,
            "dropped events" => s.dropped = v,
            _ => {}
        }
    }
    s
}

/// Names of instances that look like punctual's and whose process is gone (reported, and removed by
/// the journal of that process; this finds the ones no journal covers).
pub fn orphan_instances(fs: &Tracefs) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(fs.root().join("instances")) else {
        return vec![];
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let pid = instance_owner(&name)?;
            (journal::task_start_time(pid).is_none()).then(|| e.path())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_names_carry_the_pid() {
        let a = instance_name(42);
        let b = instance_name(42);
        assert_ne!(a, b);
        assert_eq!(instance_owner(&a), Some(42));
        assert_eq!(instance_owner(&b), Some(42));
        assert_eq!(instance_owner("punctual-x"), None);
        assert_eq!(instance_owner("other-42"), None);
    }

    #[test]
    fn stats_parse() {
        let text = "entries: 10\noverrun: 3\ncommit overrun: 1\nbytes: 4000\noldest event ts: 12.5\nnow ts: 13.0\ndropped events: 2\nread events: 5\n";
        let s = parse_stats(text);
        assert_eq!((s.overrun, s.commit_overrun, s.dropped), (3, 1, 2));
        assert_eq!(s.total(), 6);
    }
}
