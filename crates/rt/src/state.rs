//! Where punctual keeps its state: the journals of this process ([`state_dir`]) and the registry
//! of machine-wide settings several runs stack on ([`machine_dir`]), and the checks a state
//! directory passes before anything in it is trusted.

use std::io;
use std::path::{Path, PathBuf};

/// Where journals live: `$PUNCTUAL_STATE_DIR` (when [`crate::env::trusted_dir`] believes it), else
/// `/run/punctual` when writable (cleared at boot, as the settings themselves are), else the user's
/// runtime or state directory.
pub fn state_dir() -> PathBuf {
    if let Some(d) = crate::env::trusted_dir(crate::env::STATE_DIR).path() {
        return d;
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

/// Where the registry of machine-wide settings lives (shields: IRQ and task affinities, real-time
/// throttling): `/run/punctual` when writable, whatever `$PUNCTUAL_STATE_DIR` says, else
/// [`state_dir`]. Journals may be private to a run; what several runs stack on may not: two
/// registries do not see each other's shields, and restoring in the wrong order left a machine
/// with every IRQ and task on one CPU and throttling off.
pub fn machine_dir() -> PathBuf {
    let run = Path::new("/run");
    if nix::unistd::access(run, nix::unistd::AccessFlags::W_OK).is_ok() {
        return run.join("punctual");
    }
    state_dir()
}

/// Create the state directory if needed (mode 0700 whatever the umask) and check it is ours:
/// a real directory, not a symbolic link, owned by the effective user and writable by nobody else.
/// A directory of ours that others may only read is tightened to 0700; anything else is refused
/// (its journals could have been planted or removed by someone else).
pub fn ensure_state_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        // Missing parents get 0755, not 0777 less the umask: under umask 000 they were writable by
        // everyone, and `env::trusted_dir` then ignored the directory (and its journals) for good.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(parent)?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    check_state_dir(dir).map_err(|why| io::Error::new(io::ErrorKind::PermissionDenied, why))
}

/// The checks of [`ensure_state_dir`] on an existing directory; `Err` says why it is refused.
pub(crate) fn check_state_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let shown = dir.display();
    let m = std::fs::symlink_metadata(dir).map_err(|e| format!("state directory {shown}: {e}"))?;
    let fix = "remove it; punctual recreates it owned by root, mode 0700";
    if m.file_type().is_symlink() {
        return Err(format!(
            "state directory {shown} is a symbolic link, not used ({fix})"
        ));
    }
    if !m.is_dir() {
        return Err(format!(
            "state directory {shown} is not a directory ({fix})"
        ));
    }
    let euid = nix::unistd::geteuid().as_raw();
    if m.uid() != euid {
        return Err(format!(
            "state directory {shown} belongs to uid {}, not to uid {euid}, not used ({fix})",
            m.uid()
        ));
    }
    if m.mode() & 0o022 != 0 {
        return Err(format!(
            "state directory {shown} is writable by other users (mode {:o}), not used ({fix})",
            m.mode() & 0o7777
        ));
    }
    if m.mode() & 0o7777 != 0o700 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("state directory {shown}: setting mode 0700: {e}"))?;
    }
    Ok(())
}
