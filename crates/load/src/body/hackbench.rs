//! hackbench-style messaging (one group of hackbench's pipe mode, with threads): each sender writes
//! 100-byte messages to every receiver in turn through pipes; receivers read them. The CPU time goes
//! to pipe wake-ups and context switches, the scheduler's hot path.

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub const SENDERS: usize = 4;
pub const RECEIVERS: usize = 4;
pub const MESSAGE: usize = 100;

fn pipe() -> std::io::Result<(std::fs::File, std::fs::File)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two fds, which we own from here on.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both fds are fresh and owned.
    unsafe {
        Ok((
            OwnedFd::from_raw_fd(fds[0]).into(),
            OwnedFd::from_raw_fd(fds[1]).into(),
        ))
    }
}

/// Run until `stop`; returns messages received.
pub fn run(stop: &AtomicBool) -> std::io::Result<u64> {
    let mut readers = Vec::new();
    let mut writers = Vec::new();
    for _ in 0..RECEIVERS {
        let (r, w) = pipe()?;
        readers.push(r);
        writers.push(w);
    }
    let received = AtomicU64::new(0);
    std::thread::scope(|s| {
        for mut r in readers {
            let received = &received;
            s.spawn(move || {
                let mut buf = [0u8; MESSAGE];
                // Ends when every sender has dropped its write ends (read returns 0).
                while let Ok(()) = r.read_exact(&mut buf) {
                    received.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        for _ in 0..SENDERS {
            let mut mine: Vec<std::fs::File> =
                writers.iter().filter_map(|w| w.try_clone().ok()).collect();
            s.spawn(move || {
                let msg = [0x5au8; MESSAGE];
                'outer: while !stop.load(Ordering::Relaxed) {
                    for w in mine.iter_mut() {
                        if w.write_all(&msg).is_err() {
                            break 'outer;
                        }
                    }
                }
            });
        }
        drop(writers);
    });
    Ok(received.into_inner())
}
