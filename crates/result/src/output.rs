//! Where exports go: a file or stdout (`-`). Paths are checked before anything is measured, and files
//! are written atomically (temporary file in the same directory, then rename), so an interrupted run
//! never leaves half a document and a bad path never costs a measurement.
//!
//! Every file a user names goes through [`resolve`]: punctual often runs as root, in directories
//! other users can write, so symbolic links are followed only where nobody else could have made
//! them, a file being replaced keeps its owner, group and mode, and new files take the umask.

use std::ffi::{CStr, CString, OsString};
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    Stdout,
    File(PathBuf),
}

impl std::str::FromStr for Output {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "" => Err("empty path; give a file name or - for stdout".into()),
            "-" => Ok(Output::Stdout),
            p => Ok(Output::File(PathBuf::from(p))),
        }
    }
}

impl std::fmt::Display for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Output::Stdout => f.write_str("stdout"),
            Output::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// `out.json` as the K-th of several runs writes it: `out-K.json` (`out-K` without an extension).
pub fn numbered(path: &Path, k: u32) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match path.extension() {
        Some(ext) => format!("{stem}-{k}.{}", ext.to_string_lossy()),
        None => format!("{stem}-{k}"),
    };
    path.with_file_name(name)
}

impl Output {
    /// This output as run `k` (0-based) of `n` writes it: a file numbered when there are several
    /// ([`numbered`]), stdout as it is.
    pub fn of_run(&self, k: u32, n: u32) -> Output {
        match self {
            Output::File(p) if n > 1 => Output::File(numbered(p, k + 1)),
            o => o.clone(),
        }
    }

    pub fn is_stdout(&self) -> bool {
        matches!(self, Output::Stdout)
    }

    /// Check that the file can be written, without changing anything: the path names a file (no
    /// trailing `/`), its directory exists and accepts a new file, symbolic links on the way are
    /// ones punctual follows (see [`resolve`]), and an existing target is a writable regular file.
    pub fn check_writable(&self) -> Result<(), String> {
        let Output::File(path) = self else {
            return Ok(());
        };
        let r = resolve(path).map_err(|e| e.to_string())?;
        let probe = r
            .create_temp(0o600)
            .map_err(|e| format!("cannot write in {}: {e}", r.dir_shown()))?;
        r.unlink(&probe.1);
        if r.existing.is_some() {
            // SAFETY: faccessat on a directory fd we hold and a NUL-terminated name.
            let rc = unsafe {
                libc::faccessat(
                    r.dir.as_raw_fd(),
                    r.name.as_ptr(),
                    libc::W_OK,
                    libc::AT_EACCESS | libc::AT_SYMLINK_NOFOLLOW,
                )
            };
            if rc != 0 {
                return Err(format!(
                    "cannot write {}: {}",
                    path.display(),
                    std::io::Error::last_os_error()
                ));
            }
        }
        Ok(())
    }

    /// Write everything at once (atomically for files).
    pub fn write(&self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            // A reader that went away (`| head`) wanted no more: that is not a failure.
            Output::Stdout => {
                let mut out = std::io::stdout().lock();
                match out.write_all(bytes).and_then(|_| out.flush()) {
                    Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                    r => r,
                }
            }
            Output::File(path) => write_atomic(path, bytes),
        }
    }
}

/// Write `bytes` to `path` atomically: through a new temporary file in the same directory and a
/// rename, with the owner, group and mode of a file being replaced, a new file's mode from the umask,
/// and symbolic links handled as [`resolve`] says. The one way punctual writes a file someone named.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = AtomicFile::create(path)?;
    f.write_all(bytes)?;
    f.commit()
}

/// A file written in the background of a run and put in place at the end ([`AtomicFile::commit`]);
/// dropped without a commit, it leaves nothing behind.
pub struct AtomicFile {
    target: Resolved,
    tmp: CString,
    file: Option<File>,
}

impl AtomicFile {
    /// Start writing `path` (see [`write_atomic`]).
    pub fn create(path: &Path) -> std::io::Result<AtomicFile> {
        Self::create_mode(path, 0o666)
    }

    /// As [`AtomicFile::create`], a new file getting `mode` less the umask (0o755 for a library).
    pub fn create_mode(path: &Path, mode: u32) -> std::io::Result<AtomicFile> {
        let target = resolve(path)?;
        let (file, tmp) = target.create_temp(mode as libc::mode_t)?;
        target.take_over_ownership(&file)?;
        Ok(AtomicFile {
            target,
            tmp,
            file: Some(file),
        })
    }

    /// The open temporary file (e.g. to hand a clone to a writer thread).
    pub fn file(&self) -> &File {
        self.file.as_ref().expect("present until commit")
    }

    /// Flush to disk and rename over the target.
    pub fn commit(mut self) -> std::io::Result<()> {
        let file = self.file.take().expect("present until commit");
        file.sync_all()?;
        drop(file);
        self.target.rename_from(&self.tmp)?;
        self.tmp = CString::default();
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file.as_mut().expect("present until commit").write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.as_mut().expect("present until commit").flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.tmp.as_bytes().is_empty() {
            self.target.unlink(&self.tmp);
        }
    }
}

/// Open `path` for a long stream of writes that must survive a crash up to the last byte written
/// (a trace recording): a new file, created next to the target and renamed over it at once, so the
/// name never leads the writes through a symbolic link or into another file's inode (hard link),
/// with the owner, group and mode of a file it replaces and a new file's mode from the umask.
pub fn open_stream(path: &Path) -> std::io::Result<File> {
    let target = resolve(path)?;
    let (file, tmp) = target.create_temp(0o666)?;
    if let Err(e) = target
        .take_over_ownership(&file)
        .and_then(|()| target.rename_from(&tmp))
    {
        target.unlink(&tmp);
        return Err(e);
    }
    Ok(file)
}

/// Most symbolic links followed on the way to one output (the kernel's own limit).
const MAX_LINKS: u32 = 40;

/// Where an output goes: its directory (held open, so nothing can move it under us), the file's
/// name in it, and what is there now.
#[derive(Debug)]
pub struct Resolved {
    dir: OwnedFd,
    dir_path: PathBuf,
    name: CString,
    /// The regular file being replaced: uid, gid, mode.
    existing: Option<(u32, u32, u32)>,
}

/// Find where `path` leads, one component at a time from a held directory. Symbolic links are
/// followed only where no other user could have made them: the directory holding the link belongs
/// to the effective user or root and is writable by no one else. A link in a directory others can
/// write (`/tmp`, a shared or another user's directory) is refused, so nobody can send punctual's
/// writes somewhere else, whatever `fs.protected_symlinks` says. The target must be a regular file
/// or not exist yet; a path ending in `/` names no file and is refused.
pub fn resolve(path: &Path) -> std::io::Result<Resolved> {
    use std::collections::VecDeque;
    use std::io::{Error, ErrorKind};
    let bytes = path.as_os_str().as_bytes();
    if bytes.is_empty()
        || bytes.ends_with(b"/")
        || bytes.ends_with(b"/.")
        || bytes.ends_with(b"/..")
        || bytes == b"."
        || bytes == b".."
    {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!("{} names a directory; give a file name", path.display()),
        ));
    }
    let mut pending: VecDeque<OsString> = VecDeque::new();
    push_components(&mut pending, path, false);
    let (mut dir, mut dir_path) = if path.is_absolute() {
        (open_dir_at(None, c"/")?, PathBuf::from("/"))
    } else {
        (open_dir_at(None, c".")?, PathBuf::from("."))
    };
    let mut links = 0;
    while let Some(comp) = pending.pop_front() {
        let last = pending.is_empty();
        let name = CString::new(comp.as_bytes())
            .map_err(|_| Error::new(ErrorKind::InvalidInput, "a path with a NUL byte"))?;
        if comp == ".." {
            dir = open_dir_at(Some(&dir), &name)?;
            dir_path = dir_path.join("..");
            continue;
        }
        let here = dir_path.join(&comp);
        let st = match stat_at(&dir, &name) {
            Err(e) if e.kind() == ErrorKind::NotFound && last => {
                return Ok(Resolved {
                    dir,
                    dir_path,
                    name,
                    existing: None,
                });
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(Error::new(
                    ErrorKind::NotFound,
                    format!(
                        "directory {} does not exist; create it or choose another path",
                        here.display()
                    ),
                ));
            }
            Err(e) => return Err(Error::new(e.kind(), format!("{}: {e}", here.display()))),
            Ok(st) => st,
        };
        match st.st_mode & libc::S_IFMT {
            libc::S_IFLNK => {
                links += 1;
                if links > MAX_LINKS {
                    return Err(Error::new(
                        ErrorKind::InvalidInput,
                        format!("{}: too many symbolic links", path.display()),
                    ));
                }
                if on_procfs(&dir) {
                    // /dev/stdout, /dev/fd/N, /proc/self/fd/N: an open file of this process (a
                    // shell's redirection), which an atomic replace would swap for a new file
                    // behind the shell's back.
                    return Err(Error::new(
                        ErrorKind::InvalidInput,
                        format!(
                            "{} names a file descriptor (/dev/stdout, /dev/fd/N); give - for stdout, or a file name",
                            path.display()
                        ),
                    ));
                }
                if let Err(why) = link_dir_trusted(&dir) {
                    return Err(Error::new(
                        ErrorKind::PermissionDenied,
                        format!(
                            "{} is a symbolic link in {}, which {why}; punctual does not follow it (remove the link or write elsewhere)",
                            here.display(),
                            dir_path.display()
                        ),
                    ));
                }
                let target = read_link_at(&dir, &name)?;
                if target.is_absolute() {
                    dir = open_dir_at(None, c"/")?;
                    dir_path = PathBuf::from("/");
                }
                push_components(&mut pending, &target, true);
                if pending.is_empty() {
                    return Err(Error::new(
                        ErrorKind::InvalidInput,
                        format!("{} leads to a directory; give a file name", path.display()),
                    ));
                }
            }
            libc::S_IFDIR if !last => {
                dir = open_dir_at(Some(&dir), &name)?;
                dir_path = here;
            }
            libc::S_IFDIR => {
                return Err(Error::new(
                    ErrorKind::InvalidInput,
                    format!("{} is a directory; give a file name", here.display()),
                ))
            }
            libc::S_IFREG if last => {
                return Ok(Resolved {
                    dir,
                    dir_path,
                    name,
                    existing: Some((st.st_uid, st.st_gid, st.st_mode & 0o777)),
                })
            }
            _ if last => {
                return Err(Error::new(
                    ErrorKind::InvalidInput,
                    format!(
                        "{} is not a regular file; give a file name (or - for stdout)",
                        here.display()
                    ),
                ))
            }
            _ => {
                return Err(Error::new(
                    ErrorKind::NotFound,
                    format!("{} is not a directory", here.display()),
                ))
            }
        }
    }
    Err(Error::new(
        ErrorKind::InvalidInput,
        format!("{} names no file", path.display()),
    ))
}

/// Queue the components of `p` (at the front when they replace a link, at the back otherwise).
fn push_components(q: &mut std::collections::VecDeque<OsString>, p: &Path, front: bool) {
    use std::path::Component;
    let comps: Vec<OsString> = p
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            _ => None,
        })
        .collect();
    if front {
        for c in comps.into_iter().rev() {
            q.push_front(c);
        }
    } else {
        q.extend(comps);
    }
}

/// A link may be followed when only the effective user or root could have put it there.
fn link_dir_trusted(dir: &OwnedFd) -> Result<(), String> {
    let st = fstat(dir).map_err(|e| format!("cannot be checked ({e})"))?;
    // SAFETY: plain syscall.
    let euid = unsafe { libc::geteuid() };
    if st.st_uid != euid && st.st_uid != 0 {
        return Err(format!("belongs to uid {}", st.st_uid));
    }
    if st.st_mode & 0o022 != 0 {
        return Err(format!(
            "other users can write (mode {:o})",
            st.st_mode & 0o7777
        ));
    }
    Ok(())
}

impl Resolved {
    /// The directory the file is in, for messages.
    pub fn dir_shown(&self) -> String {
        self.dir_path.display().to_string()
    }

    /// Whether the directory the file is in belongs to the effective user or root and nobody else
    /// can write it (the rule for following a link, applied to the file's own directory). `Err`
    /// says why not.
    pub fn dir_private(&self) -> Result<(), String> {
        link_dir_trusted(&self.dir)
    }

    /// Whether a file is there now (it will be replaced, keeping its owner, group and mode).
    pub fn replaces(&self) -> bool {
        self.existing.is_some()
    }

    /// A new file next to the target, never an existing one (`O_EXCL`, no link followed).
    fn create_temp(&self, mode: libc::mode_t) -> std::io::Result<(File, CString)> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        for _ in 0..100 {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let name = CString::new(format!(
                ".punctual-{}-{n}-{nanos:x}.tmp",
                std::process::id()
            ))
            .expect("no NUL");
            // SAFETY: openat on a directory fd we hold with a NUL-terminated name.
            let fd = unsafe {
                libc::openat(
                    self.dir.as_raw_fd(),
                    name.as_ptr(),
                    libc::O_WRONLY
                        | libc::O_CREAT
                        | libc::O_EXCL
                        | libc::O_NOFOLLOW
                        | libc::O_CLOEXEC,
                    mode as libc::c_uint,
                )
            };
            if fd >= 0 {
                // SAFETY: a fresh fd we own.
                return Ok((unsafe { File::from_raw_fd(fd) }, name));
            }
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EEXIST) {
                return Err(e);
            }
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            "no free temporary name",
        ))
    }

    /// Give the new file the owner, group and mode of the file it replaces. Changing the owner
    /// needs privilege; without it the new file is the writer's (as any editor's save would be).
    fn take_over_ownership(&self, file: &File) -> std::io::Result<()> {
        let Some((uid, gid, mode)) = self.existing else {
            return Ok(());
        };
        let fd = file.as_raw_fd();
        // SAFETY: fchown/fchmod on an fd we own.
        unsafe {
            let st = fstat_raw(fd)?;
            if (st.st_uid, st.st_gid) != (uid, gid) && libc::fchown(fd, uid, gid) != 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EPERM) {
                    return Err(e);
                }
            }
            // After fchown, which clears set-id bits; set-id bits are never carried over.
            if libc::fchmod(fd, mode as libc::mode_t) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }

    fn rename_from(&self, tmp: &CStr) -> std::io::Result<()> {
        let d = self.dir.as_raw_fd();
        // SAFETY: renameat within one directory fd we hold; renameat replaces the entry, never
        // following a link that may have appeared at the target name.
        if unsafe { libc::renameat(d, tmp.as_ptr(), d, self.name.as_ptr()) } != 0 {
            let e = std::io::Error::last_os_error();
            self.unlink(tmp);
            return Err(e);
        }
        Ok(())
    }

    fn unlink(&self, name: &CStr) {
        // SAFETY: unlinkat of a name in a directory fd we hold.
        unsafe { libc::unlinkat(self.dir.as_raw_fd(), name.as_ptr(), 0) };
    }
}

fn open_dir_at(at: Option<&OwnedFd>, name: &CStr) -> std::io::Result<OwnedFd> {
    let base = at.map(|d| d.as_raw_fd()).unwrap_or(libc::AT_FDCWD);
    // SAFETY: openat with a NUL-terminated name; O_NOFOLLOW so a directory cannot be swapped for a
    // link between the check and the open.
    let fd = unsafe {
        libc::openat(
            base,
            name.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn stat_at(dir: &OwnedFd, name: &CStr) -> std::io::Result<libc::stat> {
    // SAFETY: fstatat into a zeroed stat buffer.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        Ok(st)
    }
}

/// Whether `dir` is on procfs (where links name open files, not paths).
fn on_procfs(dir: &OwnedFd) -> bool {
    // SAFETY: fstatfs into a zeroed struct on a descriptor we hold.
    unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        libc::fstatfs(dir.as_raw_fd(), &mut st) == 0 && st.f_type == libc::PROC_SUPER_MAGIC
    }
}

fn fstat(fd: &OwnedFd) -> std::io::Result<libc::stat> {
    // SAFETY: fstat of an fd we hold.
    unsafe { fstat_raw(fd.as_raw_fd()) }
}

/// # Safety
/// `fd` must be open.
unsafe fn fstat_raw(fd: libc::c_int) -> std::io::Result<libc::stat> {
    let mut st: libc::stat = std::mem::zeroed();
    if libc::fstat(fd, &mut st) != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st)
}

fn read_link_at(dir: &OwnedFd, name: &CStr) -> std::io::Result<PathBuf> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: readlinkat into a buffer of the given length.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr() as *mut libc::c_char,
            buf.len(),
        )
    };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(PathBuf::from(OsString::from_vec(buf)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_check() {
        assert_eq!("-".parse::<Output>().unwrap(), Output::Stdout);
        assert!("".parse::<Output>().is_err());
        let dir = tempfile::tempdir().unwrap();
        let ok = Output::File(dir.path().join("a.json"));
        ok.check_writable().unwrap();
        assert!(
            !dir.path().join("a.json").exists(),
            "checking must not create the file"
        );
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "no probe left behind"
        );
        let missing = Output::File(dir.path().join("nope/a.json"));
        assert!(missing
            .check_writable()
            .unwrap_err()
            .contains("does not exist"));
        let isdir = Output::File(dir.path().to_path_buf());
        assert!(isdir
            .check_writable()
            .unwrap_err()
            .contains("is a directory"));
        assert!(Output::File("/proc/version".into())
            .check_writable()
            .is_err());
    }

    fn is_root() -> bool {
        // SAFETY: plain syscall.
        unsafe { libc::geteuid() == 0 }
    }

    fn mode_of(p: &Path) -> u32 {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }

    #[test]
    fn trailing_slash_is_refused_by_check_writable() {
        let dir = tempfile::tempdir().unwrap();
        for p in ["out/", "out/.", "."] {
            let o = Output::File(dir.path().join(p));
            let e = o.check_writable().unwrap_err();
            assert!(e.contains("give a file name"), "{p}: {e}");
        }
        std::fs::create_dir(dir.path().join("out")).unwrap();
        let e = Output::File(dir.path().join("out/"))
            .check_writable()
            .unwrap_err();
        assert!(e.contains("give a file name"), "{e}");
        assert!(Output::File(dir.path().join("out/")).write(b"x").is_err());
    }

    #[test]
    fn symlink_in_a_world_writable_directory_is_not_followed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let link = open.join("out.json");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let o = Output::File(link.clone());
        let e = o.check_writable().unwrap_err();
        assert!(e.contains("does not follow"), "{e}");
        let e = o.write(b"{}").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}");
        assert!(open_stream(&link).is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        // A link to a directory others can write, from a private one, is followed: the link is
        // ours; the write lands in the open directory as a new file, never through its entries.
        let via = dir.path().join("via");
        std::os::unix::fs::symlink(&open, &via).unwrap();
        write_atomic(&via.join("new.json"), b"ok").unwrap();
        assert_eq!(
            std::fs::read_to_string(open.join("new.json")).unwrap(),
            "ok"
        );
        // ... but a link met inside it is not.
        assert!(write_atomic(&via.join("out.json"), b"x").is_err());
    }

    #[test]
    fn symlink_in_a_private_directory_is_followed_to_its_target() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("results")).unwrap();
        let real = dir.path().join("results/run-1.json");
        std::fs::write(&real, "old").unwrap();
        let link = dir.path().join("latest.json");
        std::os::unix::fs::symlink("results/run-1.json", &link).unwrap();
        Output::File(link.clone()).check_writable().unwrap();
        write_atomic(&link, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        // A dangling link in a private directory creates its target.
        let dangling = dir.path().join("next.json");
        std::os::unix::fs::symlink("results/run-2.json", &dangling).unwrap();
        write_atomic(&dangling, b"2").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("results/run-2.json")).unwrap(),
            "2"
        );
        // Not a regular file: refused, with the way to stdout.
        let e = write_atomic(Path::new("/dev/null"), b"x").unwrap_err();
        assert!(e.to_string().contains("or - for stdout"), "{e}");
    }

    #[test]
    fn owner_and_mode_are_kept_on_replace() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("kept.json");
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        if is_root() {
            std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
        } else {
            skip_note(
                "owner_and_mode_are_kept_on_replace",
                "chown needs root; checking the mode only",
            );
        }
        write_atomic(&p, b"new").unwrap();
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        assert_eq!(m.mode() & 0o7777, 0o640);
        if is_root() {
            assert_eq!((m.uid(), m.gid()), (65534, 65534));
        }
        // The stream writer too.
        let mut f = open_stream(&p).unwrap();
        f.write_all(b"stream").unwrap();
        drop(f);
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!(m.mode() & 0o7777, 0o640);
        if is_root() {
            assert_eq!((m.uid(), m.gid()), (65534, 65534));
        }
    }

    fn skip_note(test: &str, why: &str) {
        punctual_testkit::skip(&format!("{test} (owner part)"), why);
    }

    /// Run the calling test again in a child process with umask 022 (the umask is per process and
    /// the tests of this binary run in parallel). Returns true in the child.
    fn with_umask_022(test: &str) -> bool {
        const CHILD: &str = "PUNCTUAL_OUTPUT_TEST_UMASK_CHILD";
        if std::env::var_os(CHILD).is_some() {
            // SAFETY: plain syscall, in a child running this one test.
            unsafe { libc::umask(0o022) };
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
    fn new_file_mode_follows_the_umask() {
        if !with_umask_022("output::tests::new_file_mode_follows_the_umask") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("new.json");
        write_atomic(&p, b"{}").unwrap();
        assert_eq!(mode_of(&p), 0o644);
        let s = dir.path().join("stream.ptf");
        drop(open_stream(&s).unwrap());
        assert_eq!(mode_of(&s), 0o644);
    }

    #[test]
    fn a_stream_replaces_the_name_not_the_inode() {
        let dir = tempfile::tempdir().unwrap();
        let other = dir.path().join("other");
        std::fs::write(&other, "keep me").unwrap();
        let p = dir.path().join("t.ptf");
        std::fs::hard_link(&other, &p).unwrap();
        let mut f = open_stream(&p).unwrap();
        f.write_all(b"trace").unwrap();
        drop(f);
        assert_eq!(std::fs::read_to_string(&other).unwrap(), "keep me");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "trace");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            2,
            "no temporary left"
        );
    }

    #[test]
    fn an_atomic_file_dropped_uncommitted_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("samples.csv");
        let mut f = AtomicFile::create(&p).unwrap();
        f.write_all(b"1,2\n").unwrap();
        drop(f);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let mut f = AtomicFile::create(&p).unwrap();
        f.write_all(b"1,2\n").unwrap();
        f.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "1,2\n");
    }

    #[test]
    fn atomic_write_replaces_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.json");
        std::fs::write(&p, "old contents that are longer").unwrap();
        Output::File(p.clone()).write(b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
