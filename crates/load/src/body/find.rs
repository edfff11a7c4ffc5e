//! Zeadally's `find`: a recursive directory walk, over and over. Almost all of its time is spent in
//! system calls (getdents, fstatat), which is what made it the background that exposes kernel
//! preemption latency. The walk stays on local filesystems and skips /proc, /sys and /dev.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

const SKIP: &[&str] = &["/proc", "/sys", "/dev", "/run"];

/// The directory walked: /usr when it exists (large, stable, readable by anyone), else /.
pub fn default_root() -> PathBuf {
    let usr = Path::new("/usr");
    if usr.is_dir() {
        usr.into()
    } else {
        "/".into()
    }
}

/// Walk `root` again and again until `stop`; returns entries visited.
pub fn run(stop: &AtomicBool, root: &Path) -> u64 {
    let mut visited = 0u64;
    let mut stack: Vec<PathBuf> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let before = visited;
        stack.push(root.to_path_buf());
        while let Some(dir) = stack.pop() {
            if stop.load(Ordering::Relaxed) {
                stack.clear();
                break;
            }
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                visited += 1;
                // lstat, as find does: symlinks are not followed.
                let Ok(meta) = std::fs::symlink_metadata(e.path()) else {
                    continue;
                };
                if meta.is_dir() {
                    let p = e.path();
                    if !SKIP.iter().any(|s| p == Path::new(s)) {
                        stack.push(p);
                    }
                }
            }
        }
        if visited == before {
            // Nothing readable: do not spin on an empty walk.
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
    visited
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn walks_every_entry_of_a_tree() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("a/b/c")).unwrap();
        for f in ["a/1", "a/b/2", "a/b/c/3", "4"] {
            std::fs::write(tmp.path().join(f), "x").unwrap();
        }
        // 8 entries per pass: a, 4, a/1, a/b, a/b/2, a/b/c, a/b/c/3 ... and the walk repeats until stopped.
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let root = tmp.path().to_path_buf();
        let h = std::thread::spawn(move || run(&s2, &root));
        std::thread::sleep(std::time::Duration::from_millis(50));
        stop.store(true, Ordering::Relaxed);
        let n = h.join().unwrap();
        assert!(n >= 7, "one full pass visits 7 entries, got {n}");
    }
}
