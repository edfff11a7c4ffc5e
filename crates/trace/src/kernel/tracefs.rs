//! Finding tracefs, or mounting a private one.
//!
//! An existing tracefs mount in a standard place (`/sys/kernel/tracing`, `/sys/kernel/debug/tracing`)
//! is used as it is (`$PUNCTUAL_TRACEFS` names another). When there is none, punctual mounts tracefs on a
//! directory of its own (`<state dir>/tracefs-<pid>`) rather than on `/sys/kernel/tracing`: every
//! tracefs mount shows the same tree, and a private mount point can be unmounted at the end without
//! pulling the floor from under another tool that found the standard one mounted in the meantime.
//! The directory and the mount are journalled first, so they go away on every exit path, and after
//! a SIGKILL at the next start.

use crate::TraceError;
use punctual_rt::journal::{self, Change, ChangeGuard};
use std::path::{Path, PathBuf};

/// A tracefs tree punctual may use.
pub struct Tracefs {
    root: PathBuf,
    // Field order is drop order: unmount before removing the mount point.
    _unmount: Option<ChangeGuard>,
    _mount_dir: Option<ChangeGuard>,
}

impl std::fmt::Debug for Tracefs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracefs")
            .field("root", &self.root)
            .field("mounted_here", &self.mounted_by_us())
            .finish()
    }
}

/// Where tracefs is mounted, from a mounts table (`/proc/self/mounts` format).
pub fn find_in_mounts(mounts: &str) -> Vec<PathBuf> {
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_src, target, fstype) = (f.next()?, f.next()?, f.next()?);
            (fstype == "tracefs").then(|| PathBuf::from(unescape_mount_path(target)))
        })
        .collect()
}

/// `/proc/mounts` writes spaces and tabs in paths as octal escapes.
fn unescape_mount_path(s: &str) -> String {
    let mut out = String::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v as char);
            i += 4;
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

/// The variable naming another tracefs tree.
pub const TRACEFS_ENV: &str = "PUNCTUAL_TRACEFS";

/// `dir` resolved to its real path, which must be the root of a tracefs (statfs says so).
fn real_tracefs(dir: &Path) -> Result<PathBuf, TraceError> {
    let not = |why: String| TraceError::NoTracefs {
        why,
        fix: "point PUNCTUAL_TRACEFS at a tracefs mount, or unset it".into(),
    };
    let real = std::fs::canonicalize(dir).map_err(|e| not(format!("{}: {e}", dir.display())))?;
    match nix::sys::statfs::statfs(&real) {
        Ok(st) if st.filesystem_type() == nix::sys::statfs::TRACEFS_MAGIC => Ok(real),
        Ok(_) => Err(not(format!(
            "PUNCTUAL_TRACEFS={} is not a tracefs mount (a privileged punctual writes only into a real tracefs)",
            dir.display()
        ))),
        Err(e) => Err(not(format!("{}: {e}", dir.display()))),
    }
}

fn kernel_has_tracefs() -> bool {
    std::fs::read_to_string("/proc/filesystems")
        .map(|s| s.lines().any(|l| l.trim_end().ends_with("tracefs")))
        .unwrap_or(false)
}

impl Tracefs {
    /// Use `$PUNCTUAL_TRACEFS` if set, else an existing tracefs mount, else mount a private one.
    /// A privileged process takes `$PUNCTUAL_TRACEFS` only when it is a tracefs mount (reached by
    /// its real path), so the variable can never make root write into ordinary files; a setuid run
    /// ignores it.
    pub fn open() -> Result<Tracefs, TraceError> {
        if let Some(dir) = std::env::var_os(TRACEFS_ENV).filter(|d| !d.is_empty()) {
            if !punctual_rt::env::secure_exec() {
                let dir = PathBuf::from(dir);
                if punctual_rt::env::privileged() {
                    return Tracefs::at(&real_tracefs(&dir)?);
                }
                return Tracefs::at(&dir);
            }
        }
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        // Only the standard places: another tool's mount elsewhere may be unmounted under our feet,
        // and removing an instance through a path that no longer exists would leave it tracing.
        let standard = |r: &PathBuf| {
            r == Path::new("/sys/kernel/tracing") || r == Path::new("/sys/kernel/debug/tracing")
        };
        for root in find_in_mounts(&mounts).into_iter().filter(standard) {
            if root.join("instances").is_dir() {
                return Ok(Tracefs {
                    root,
                    _unmount: None,
                    _mount_dir: None,
                });
            }
        }
        if !kernel_has_tracefs() {
            return Err(TraceError::NoTracefs {
                why: "this kernel does not offer the tracefs filesystem (/proc/filesystems has no tracefs)".into(),
                fix: "use a kernel built with CONFIG_FTRACE and CONFIG_EVENT_TRACING (every distribution kernel is)".into(),
            });
        }
        Tracefs::mount_private()
    }

    /// Use the tracefs tree at `dir` (it must have an `instances` directory).
    pub fn at(dir: &Path) -> Result<Tracefs, TraceError> {
        match std::fs::metadata(dir.join("instances")) {
            Ok(m) if m.is_dir() => Ok(Tracefs {
                root: dir.to_path_buf(),
                _unmount: None,
                _mount_dir: None,
            }),
            Ok(_) => Err(TraceError::NoTracefs {
                why: format!(
                    "{} is not a tracefs tree (no instances directory)",
                    dir.display()
                ),
                fix: "point PUNCTUAL_TRACEFS at a tracefs mount, or unset it".into(),
            }),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM)) => {
                Err(TraceError::tracefs("reading tracefs at", dir, e))
            }
            Err(e) => Err(TraceError::NoTracefs {
                why: format!("{}: {e}", dir.display()),
                fix: "point PUNCTUAL_TRACEFS at a tracefs mount, or unset it".into(),
            }),
        }
    }

    fn mount_private() -> Result<Tracefs, TraceError> {
        let j = journal::global();
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = journal::state_dir().join(format!("tracefs-{}-{n}", std::process::id()));
        let refused =
            |what: &str, path: &Path, e: std::io::Error| TraceError::tracefs(what, path, e);
        journal::ensure_state_dir(&journal::state_dir())
            .map_err(|e| refused("preparing the state directory", &journal::state_dir(), e))?;
        let dir_guard = j
            .record(Change::RemoveDir { path: dir.clone() })
            .map_err(|e| TraceError::io("writing the journal", e))?;
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(refused("creating the mount point", &dir, e)),
        }
        let umount_guard = j
            .record(Change::Unmount { path: dir.clone() })
            .map_err(|e| TraceError::io("writing the journal", e))?;
        if let Err(e) = nix::mount::mount(
            Some("nodev"),
            &dir,
            Some("tracefs"),
            nix::mount::MsFlags::empty(),
            None::<&str>,
        ) {
            // Nothing was mounted: the unmount's undo fails harmlessly and leaves the journal.
            drop(umount_guard);
            drop(dir_guard);
            return Err(TraceError::Refused {
                what: "mounting tracefs on".into(),
                path: dir,
                source: std::io::Error::from(e),
                fix: crate::error::ROOT_FIX.into(),
            });
        }
        Ok(Tracefs {
            root: dir,
            _unmount: Some(umount_guard),
            _mount_dir: Some(dir_guard),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether this process mounted it (and will unmount it).
    pub fn mounted_by_us(&self) -> bool {
        self._unmount.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_tracefs_in_a_mount_table() {
        let table = "proc /proc proc rw 0 0\nnodev /sys/kernel/tracing tracefs rw,relatime 0 0\n\
                     debugfs /sys/kernel/debug debugfs rw 0 0\nnodev /run/my\\040dir tracefs rw 0 0\n";
        assert_eq!(
            find_in_mounts(table),
            vec![
                PathBuf::from("/sys/kernel/tracing"),
                PathBuf::from("/run/my dir")
            ]
        );
        assert!(find_in_mounts("proc /proc proc rw 0 0\n").is_empty());
    }

    #[test]
    fn a_directory_without_instances_is_not_tracefs() {
        let tmp = tempfile::tempdir().unwrap();
        let e = Tracefs::at(tmp.path()).unwrap_err();
        assert!(matches!(e, TraceError::NoTracefs { .. }), "{e}");
        std::fs::create_dir(tmp.path().join("instances")).unwrap();
        assert_eq!(Tracefs::at(tmp.path()).unwrap().root(), tmp.path());
        let missing = Tracefs::at(&tmp.path().join("nope"))
            .unwrap_err()
            .to_string();
        assert!(missing.contains("PUNCTUAL_TRACEFS"), "{missing}");
    }
}
