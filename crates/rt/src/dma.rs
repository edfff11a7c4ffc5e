//! `/dev/cpu_dma_latency`: keep CPUs out of deep idle states for as long as the file stays open.
//! The kernel drops the request when the descriptor closes, so there is nothing to restore by hand
//! and nothing left behind if punctual is killed.

use crate::RtError;
use std::fs::OpenOptions;
use std::io::Write;

pub const PATH: &str = "/dev/cpu_dma_latency";

/// Holds a PM QoS CPU latency request open.
pub struct DmaLatencyGuard {
    // Declared first so it drops (unregisters) before the file closes.
    _no_child_inherits: crate::child::CloseInChildren,
    _file: std::fs::File,
    pub microseconds: u32,
}

impl DmaLatencyGuard {
    pub fn request(microseconds: u32) -> Result<Self, RtError> {
        let mut file = OpenOptions::new().write(true).open(PATH).map_err(|e| {
            RtError::from_os(
                format!("opening {PATH}"),
                e,
                "run as root, or pass --dma-latency off",
            )
        })?;
        file.write_all(&(microseconds as i32).to_ne_bytes())
            .map_err(|e| RtError::io(format!("writing {PATH}"), e))?;
        use std::os::fd::AsRawFd;
        Ok(DmaLatencyGuard {
            // A child forked while the request is held (a pre-forked exec child waiting for its
            // release) must not hold it too: it would outlive punctual's own.
            _no_child_inherits: crate::child::close_in_children(file.as_raw_fd()),
            _file: file,
            microseconds,
        })
    }
}

/// True when this process could open the file for writing.
pub fn writable() -> bool {
    nix::unistd::access(PATH, nix::unistd::AccessFlags::W_OK).is_ok()
}
