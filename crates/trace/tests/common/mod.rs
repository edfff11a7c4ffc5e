//! Shared by the tests that need the kernel's tracing.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

pub use punctual_testkit::tracing as tracing_available;

/// A tracefs view of the test's own, to look at instances from outside; unmounted on drop.
pub struct View {
    dir: tempfile::TempDir,
}

impl View {
    pub fn mount() -> View {
        let dir = tempfile::tempdir().unwrap();
        nix::mount::mount(
            Some("nodev"),
            dir.path(),
            Some("tracefs"),
            nix::mount::MsFlags::empty(),
            None::<&str>,
        )
        .expect("mounting a tracefs view");
        View { dir }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn instances(&self) -> Vec<String> {
        std::fs::read_dir(self.root().join("instances"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    }

    pub fn instance(&self, name: &str) -> PathBuf {
        self.root().join("instances").join(name)
    }
}

impl Drop for View {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(self.dir.path(), nix::mount::MntFlags::MNT_DETACH);
    }
}

/// A thread sleeping 1 ms at a time until the flag is set; returns how many sleeps it did. It runs
/// SCHED_FIFO 50 (the live tests need root anyway), so its rate stays near 1000 a second however
/// busy the machine is with normal-class work.
pub fn sleeper(
    name: &str,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<u64> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let _rt = punctual_rt::SchedGuard::set(punctual_rt::SchedParams {
                policy: punctual_rt::Policy::Fifo,
                priority: 50,
            });
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(std::time::Duration::from_millis(1));
                n += 1;
            }
            n
        })
        .unwrap()
}
