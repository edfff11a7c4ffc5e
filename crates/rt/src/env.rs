//! Which `PUNCTUAL_*` environment variables a privileged punctual believes.
//!
//! punctual reads these variables:
//!
//! | variable | what it changes | privileged process |
//! |---|---|---|
//! | `PUNCTUAL_STATE_DIR` | where journals are written and replayed, where tracefs is mounted | [`trusted_dir`] |
//! | `PUNCTUAL_SHM_DIR` | where wake channels are created and looked for | [`trusted_dir`] |
//! | `PUNCTUAL_DATA_DIR` | where the results store writes | [`trusted_dir`] |
//! | `PUNCTUAL_STORE` | the results store: a SQLite file or a `postgres://` URL | a file only where [`check_private_path`] allows its directory (checked by `punctual-store`) |
//! | `PUNCTUAL_TRACEFS` | which tracefs tree to use | honoured only if it is a tracefs mount (checked by `punctual-trace`) |
//! | `PUNCTUAL_WAKE_CHANNEL` | the channel a client attaches to | honoured (a name, checked like plan names) |
//! | `PUNCTUAL_SHIELDED_CPUS` | tells `run` its CPUs are shielded (spin budget) | honoured (a hint, no file is touched) |
//!
//! The directories decide where root writes and what it replays, so a privileged process (euid 0
//! or any effective capability) honours them only when nobody but root (or the process's own user)
//! could have prepared or could still change the place: every existing component of the path is a
//! real directory (no symlink), owned by root or by the effective user, and not writable by group or
//! others unless it is sticky (`/tmp`). The directory itself, when it exists, must not be writable by
//! others at all. A setuid/setgid run (`AT_SECURE`) honours none of them. An unprivileged process
//! honours them as given: it can only redirect its own writes.

use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

/// Journals and tracefs mount points.
pub const STATE_DIR: &str = "PUNCTUAL_STATE_DIR";
/// Wake channels.
pub const SHM_DIR: &str = "PUNCTUAL_SHM_DIR";
/// The results store.
pub const DATA_DIR: &str = "PUNCTUAL_DATA_DIR";
/// The variables that name directories punctual writes into.
pub const DIRECTORIES: [&str; 3] = [STATE_DIR, SHM_DIR, DATA_DIR];

/// What became of a directory variable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DirChoice {
    /// Not set (or empty): the default place.
    Unset,
    /// Set and believed.
    Honoured(PathBuf),
    /// Set but not believed; the default place is used.
    Ignored { value: PathBuf, why: String },
}

impl DirChoice {
    /// The directory to use instead of the default, if any.
    pub fn path(self) -> Option<PathBuf> {
        match self {
            DirChoice::Honoured(p) => Some(p),
            _ => None,
        }
    }
}

/// The kernel marked this exec as crossing a privilege boundary (setuid, setgid, file capabilities).
pub fn secure_exec() -> bool {
    // SAFETY: getauxval reads the auxiliary vector; AT_SECURE is always present on Linux.
    unsafe { libc::getauxval(libc::AT_SECURE) != 0 }
}

/// Running as root or with any effective capability.
pub fn privileged() -> bool {
    // SAFETY: plain syscall.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps != 0)
}

/// Decide whether the directory named by `var` is believed (see the module documentation).
pub fn trusted_dir(var: &str) -> DirChoice {
    let Some(value) = std::env::var_os(var).filter(|v| !v.is_empty()) else {
        return DirChoice::Unset;
    };
    let value = PathBuf::from(value);
    let ignored = |why: String| DirChoice::Ignored {
        value: value.clone(),
        why,
    };
    if secure_exec() {
        return ignored("punctual runs setuid, setgid or with file capabilities".into());
    }
    if !privileged() {
        return DirChoice::Honoured(value);
    }
    match check_private_path(&value) {
        Ok(()) => DirChoice::Honoured(value),
        Err(why) => ignored(why),
    }
}

/// Every directory variable that is set but ignored, with why (for the binary to say so once).
pub fn ignored() -> Vec<(&'static str, PathBuf, String)> {
    DIRECTORIES
        .iter()
        .filter_map(|var| match trusted_dir(var) {
            DirChoice::Ignored { value, why } => Some((*var, value, why)),
            _ => None,
        })
        .collect()
}

/// Whether only root or this process's user can have prepared `path` or change it from now on:
/// absolute, no `..`, every existing component a directory (not a symlink) owned by root or the
/// effective user and not group/world-writable unless sticky; the path itself (if it exists) not
/// group/world-writable at all.
pub fn check_private_path(path: &Path) -> Result<(), String> {
    if !path.is_absolute() {
        return Err(format!(
            "{} is not an absolute path (a privileged punctual takes only absolute directories)",
            path.display()
        ));
    }
    if path.components().any(|c| c == Component::ParentDir) {
        return Err(format!("{} contains '..'", path.display()));
    }
    // SAFETY: plain syscall.
    let euid = unsafe { libc::geteuid() };
    let mut at = PathBuf::from("/");
    let mut components: Vec<Component> = path.components().skip(1).collect();
    components.retain(|c| *c != Component::CurDir);
    let last = components.len();
    for i in 0..=last {
        if i > 0 {
            at.push(components[i - 1]);
        }
        let m = match std::fs::symlink_metadata(&at) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(format!("{}: {e}", at.display())),
        };
        if m.file_type().is_symlink() {
            return Err(format!(
                "{} is a symbolic link (give the real path)",
                at.display()
            ));
        }
        if !m.is_dir() {
            return Err(format!("{} is not a directory", at.display()));
        }
        if m.uid() != 0 && m.uid() != euid {
            return Err(format!(
                "{} belongs to uid {}, not to root",
                at.display(),
                m.uid()
            ));
        }
        let open = m.mode() & 0o022 != 0;
        let sticky = m.mode() & 0o1000 != 0;
        if open && (i == last || !sticky) {
            return Err(format!(
                "{} is writable by other users (mode {:o})",
                at.display(),
                m.mode() & 0o7777
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn is_root() -> bool {
        // SAFETY: plain syscall.
        unsafe { libc::geteuid() == 0 }
    }

    #[test]
    fn a_private_directory_under_tmp_is_accepted() {
        let d = tempfile::tempdir().unwrap();
        check_private_path(d.path()).unwrap();
        check_private_path(&d.path().join("not/yet/made")).unwrap();
    }

    #[test]
    fn env_dir_in_a_world_writable_directory_is_ignored_when_privileged() {
        let d = tempfile::tempdir().unwrap();
        let open = d.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = check_private_path(&open.join("state")).unwrap_err();
        assert!(e.contains("writable by other users"), "{e}");
        assert!(check_private_path(&open).is_err());
        // Sticky like /tmp: others cannot replace what is inside.
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        check_private_path(&open.join("state")).unwrap();
        assert!(check_private_path(&open).is_err(), "the directory itself");
    }

    #[test]
    fn env_dir_through_a_symlink_or_relative_is_ignored() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(check_private_path(&link.join("state"))
            .unwrap_err()
            .contains("symbolic link"));
        assert!(check_private_path(Path::new("rel/state")).is_err());
        assert!(check_private_path(&real.join("../real")).is_err());
    }

    #[test]
    fn trusted_dir_decides_from_the_variable() {
        // A variable of this test's own, so no other test sees it change.
        const VAR: &str = "PUNCTUAL_TEST_TRUSTED_DIR_ONLY_HERE";
        assert_eq!(trusted_dir(VAR), DirChoice::Unset);
        let d = tempfile::tempdir().unwrap();
        std::env::set_var(VAR, d.path());
        assert_eq!(
            trusted_dir(VAR),
            DirChoice::Honoured(d.path().to_path_buf())
        );
        let open = d.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::env::set_var(VAR, &open);
        let got = trusted_dir(VAR);
        if privileged() {
            assert!(matches!(got, DirChoice::Ignored { .. }), "{got:?}");
            assert_eq!(got.path(), None);
        } else {
            assert_eq!(
                got,
                DirChoice::Honoured(open.clone()),
                "unprivileged: own choice"
            );
        }
        std::env::remove_var(VAR);
    }

    #[test]
    fn env_dir_owned_by_another_user_is_ignored() {
        if !is_root() {
            punctual_testkit::skip(
                "env_dir_owned_by_another_user_is_ignored",
                "chown needs root",
            );
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let theirs = d.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        let e = check_private_path(&theirs.join("state")).unwrap_err();
        assert!(e.contains("uid 65534"), "{e}");
    }
}
