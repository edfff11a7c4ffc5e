//! The run-time preemption mode of a PREEMPT_DYNAMIC kernel (debugfs `sched/preempt`). It is
//! switched only through the journal, so a run killed while another mode is set has the original
//! put back by the next run or `punctual shield --restore`, as the other settings are.

use crate::journal::ChangeGuard;
pub use crate::knobs::{is_mode, MODES, PREEMPT_PATH, SCHED_DIR};
use std::path::Path;

/// Set `mode` in the `sched/preempt` file at `path`, journalled first with `original` (the
/// mode to put back: the file lists every mode, so its contents cannot be written back). The
/// original returns when the guard drops, on every path, or at the next start if this process
/// dies. A write the kernel refuses leaves nothing changed and nothing journalled.
pub fn set(path: &Path, original: &str, mode: &str) -> std::io::Result<ChangeGuard> {
    for m in [original, mode] {
        if !is_mode(m) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "'{}' is not a preemption mode ({})",
                    crate::text::display_name(m),
                    MODES.join(", ")
                ),
            ));
        }
    }
    crate::journal::global().write_file_back_to(path, mode, original.to_string())
}

/// Whether this kernel's preemption mode can be switched at run time, as [`probe`] found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Switching {
    /// The file is there and takes a write: the current mode and every mode it lists.
    Switchable {
        original: String,
        modes: Vec<String>,
    },
    /// Why not (the file absent, unreadable, refusing writes, or listing no current mode).
    NotSwitchable(String),
}

/// The modes a `sched/preempt` file lists and the current one (in parentheses):
/// `none voluntary (full) lazy` -> (`full`, [none, voluntary, full, lazy]).
pub fn parse(text: &str) -> Option<(String, Vec<String>)> {
    let mut current = None;
    let modes: Vec<String> = text
        .split_whitespace()
        .map(
            |w| match w.strip_prefix('(').and_then(|w| w.strip_suffix(')')) {
                Some(m) => {
                    current = Some(m.to_string());
                    m.to_string()
                }
                None => w.to_string(),
            },
        )
        .collect();
    Some((current?, modes))
}

fn write_mode(path: &Path, mode: &str) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)?
        .write_all(mode.as_bytes())
}

/// Whether the modes at `path` can be switched: the file read, and the current mode written back
/// (which changes nothing) to see whether the kernel takes a write at all. When the real file
/// ([`PREEMPT_PATH`]) is absent, says whether mounting debugfs would help, found out in a private
/// mount ([`debugfs_privately`]) the machine never sees.
pub fn probe(path: &Path) -> Switching {
    match std::fs::read_to_string(path) {
        Ok(text) => match parse(&text) {
            Some((original, modes)) => match write_mode(path, &original) {
                Ok(()) => Switching::Switchable { original, modes },
                Err(e) => Switching::NotSwitchable(format!("writing {}: {e}", path.display())),
            },
            None => Switching::NotSwitchable(format!(
                "{} lists no current mode: {:?}",
                path.display(),
                text.trim()
            )),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && path == Path::new(PREEMPT_PATH) => {
            Switching::NotSwitchable(match debugfs_privately(path) {
                Ok(()) => format!(
                    "{PREEMPT_PATH} is absent (debugfs is not mounted; in a private mount it is \
                     writable: mount -t debugfs none /sys/kernel/debug, then run again)"
                ),
                Err(e) => format!(
                    "{PREEMPT_PATH} is absent (debugfs is not mounted), and in a private mount of \
                     debugfs: {e}"
                ),
            })
        }
        Err(e) => Switching::NotSwitchable(format!("reading {}: {e}", path.display())),
    }
}

/// Mount debugfs in a mount namespace of a thread of its own and try to open `path` for writing,
/// so a caller can say whether mounting debugfs would help, without mounting anything the machine
/// sees: the namespace (and the mount) goes when the thread ends. The error names the step that
/// failed (no privilege: "a private mount namespace").
pub fn debugfs_privately(path: &Path) -> Result<(), String> {
    use nix::mount::{mount, MsFlags};
    let path = path.to_owned();
    std::thread::spawn(move || -> Result<(), String> {
        let os = |what: &str, e: nix::Error| format!("{what}: {}", std::io::Error::from(e));
        // Only this thread leaves the machine's mount namespace (it shares no fs state with
        // the process's other threads once unshared).
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)
            .map_err(|e| os("a private mount namespace", e))?;
        // Nothing mounted here may propagate back to the machine's namespace.
        mount(
            None::<&str>,
            "/",
            None::<&str>,
            MsFlags::MS_REC | MsFlags::MS_PRIVATE,
            None::<&str>,
        )
        .map_err(|e| os("making the namespace private", e))?;
        mount(
            Some("debugfs"),
            "/sys/kernel/debug",
            Some("debugfs"),
            MsFlags::empty(),
            None::<&str>,
        )
        .map_err(|e| os("mounting debugfs", e))?;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .map(drop)
            .map_err(|e| e.to_string())
    })
    .join()
    .unwrap_or_else(|_| Err("the probe thread panicked".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preempt_file_contents_are_parsed() {
        assert_eq!(
            parse("none voluntary (full) lazy\n"),
            Some((
                "full".into(),
                vec![
                    "none".into(),
                    "voluntary".into(),
                    "full".into(),
                    "lazy".into()
                ]
            ))
        );
        assert_eq!(parse("none voluntary full"), None);
    }

    /// The guard puts the original mode back when it drops, on an early return as on success;
    /// while it is held the change is in the journal (so a killed run is undone by the next).
    #[test]
    fn preemption_mode_is_journalled_and_restored_on_every_path() {
        use crate::journal::{global, Change};
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("preempt");
        std::fs::write(&f, "none voluntary (full) lazy\n").unwrap();
        let journalled = || {
            global()
                .pending()
                .iter()
                .any(|c| matches!(c, Change::File { path, original } if *path == f && original == "full"))
        };
        let failing = || -> Result<(), String> {
            let _g = set(&f, "full", "none").map_err(|e| e.to_string())?;
            assert_eq!(std::fs::read_to_string(&f).unwrap(), "none");
            assert!(journalled(), "the switch is journalled while it holds");
            Err("a measurement failed".into())
        };
        assert!(failing().is_err());
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "full");
        assert!(!journalled(), "restored, so no longer in the journal");
        let missing = dir.path().join("absent");
        assert!(set(&missing, "full", "none").is_err());
        assert!(!missing.exists(), "a refused set leaves nothing to restore");
        assert!(set(&f, "full", "fast").is_err(), "only modes are written");
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "full");
    }

    #[test]
    fn a_file_that_refuses_writes_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("preempt");
        std::fs::write(&file, "none (voluntary) full\n").unwrap();
        // A directory cannot be opened for writing, whoever we are.
        match probe(dir.path()) {
            Switching::NotSwitchable(why) => assert!(why.contains("reading"), "{why}"),
            other => panic!("{other:?}"),
        }
        let listless = dir.path().join("listless");
        std::fs::write(&listless, "none voluntary full\n").unwrap();
        match probe(&listless) {
            Switching::NotSwitchable(why) => assert!(why.contains("no current mode"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            probe(&file),
            Switching::Switchable {
                original: "voluntary".into(),
                modes: vec!["none".into(), "voluntary".into(), "full".into()]
            }
        );
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "voluntary",
            "the probe writes back only the current mode"
        );
    }

    /// The private mount happens in a namespace of the probe's thread alone: the process's own
    /// namespace is the same one afterwards, whatever the probe found.
    #[test]
    fn a_private_debugfs_mount_leaves_the_process_namespace_alone() {
        let ns = || {
            ["/proc/self/ns/mnt", "/proc/thread-self/ns/mnt"]
                .map(|p| std::fs::read_link(p).unwrap())
        };
        // Mounts of debugfs where the probe mounts it, as this process sees them.
        let debugfs = || {
            std::fs::read_to_string("/proc/self/mountinfo")
                .unwrap()
                .lines()
                .filter(|l| l.split(' ').nth(4) == Some("/sys/kernel/debug"))
                .count()
        };
        let mounted = debugfs();
        let before = ns();
        let got = debugfs_privately(Path::new("/sys/kernel/debug/sched/preempt"));
        assert_eq!(ns(), before, "the process changed mount namespace");
        assert_eq!(
            debugfs(),
            mounted,
            "the private mount is seen outside its thread"
        );
        // Whatever it found (no privilege for a namespace, no debugfs, a file that refuses
        // writes), it says what.
        if let Err(why) = got {
            assert!(!why.trim().is_empty());
        }
    }
}
