//! Where exports go: a file or stdout (`-`). Paths are checked before anything is measured, and files
//! are written atomically (temporary file in the same directory, then rename), so an interrupted run
//! never leaves half a document and a bad path never costs a measurement.

use std::io::Write;
use std::path::{Path, PathBuf};

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

fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

impl Output {
    pub fn is_stdout(&self) -> bool {
        matches!(self, Output::Stdout)
    }

    /// Check that the file can be written, without changing anything: the directory must exist and
    /// accept a new file, and an existing target must be a writable regular file.
    pub fn check_writable(&self) -> Result<(), String> {
        let Output::File(path) = self else {
            return Ok(());
        };
        if path.is_dir() {
            return Err(format!(
                "{} is a directory; give a file name",
                path.display()
            ));
        }
        let dir = parent_of(path);
        if !dir.is_dir() {
            return Err(format!(
                "directory {} does not exist; create it or choose another path",
                dir.display()
            ));
        }
        tempfile::Builder::new()
            .prefix(".punctual-probe-")
            .tempfile_in(&dir)
            .map_err(|e| format!("cannot write in {}: {e}", dir.display()))?;
        if path.exists() {
            std::fs::OpenOptions::new()
                .append(true)
                .open(path)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
        Ok(())
    }

    /// Write everything at once (atomically for files).
    pub fn write(&self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Output::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(bytes)?;
                out.flush()
            }
            Output::File(path) => write_atomic(path, bytes),
        }
    }
}

/// Write `bytes` to `path` through a temporary file in the same directory and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = tempfile::Builder::new()
        .prefix(".punctual-")
        .tempfile_in(parent_of(path))?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
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
