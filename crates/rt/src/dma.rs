//! `/dev/cpu_dma_latency`: keep CPUs out of deep idle states for as long as the file stays open.
//! The kernel drops the request when the descriptor closes, so there is nothing to restore by hand
//! and nothing left behind if punctual is killed.

use crate::RtError;
use std::fs::OpenOptions;
use std::io::Write;

pub const PATH: &str = "/dev/cpu_dma_latency";

/// What to hold `/dev/cpu_dma_latency` at while measuring: off, or a latency in microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DmaLatency {
    Off,
    Us(u32),
}

impl DmaLatency {
    /// The request in microseconds (`None`: leave the file alone).
    pub fn microseconds(self) -> Option<u32> {
        match self {
            DmaLatency::Off => None,
            DmaLatency::Us(us) => Some(us),
        }
    }
}

/// `off`, `0`, or a duration (rounded down to whole microseconds).
impl std::str::FromStr for DmaLatency {
    type Err = String;
    fn from_str(s: &str) -> Result<DmaLatency, String> {
        match s {
            "off" => Ok(DmaLatency::Off),
            "0" => Ok(DmaLatency::Us(0)),
            other => {
                let ns = punctual_time::parse_duration_ns(other)
                    .map_err(|e| format!("{e}; or use off"))?;
                u32::try_from(ns / 1000)
                    .map(DmaLatency::Us)
                    .map_err(|_| format!("'{other}' is too large for a latency request"))
            }
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::DmaLatency;

    #[test]
    fn a_latency_request_is_off_zero_or_a_duration_in_whole_microseconds() {
        assert_eq!("off".parse(), Ok(DmaLatency::Off));
        assert_eq!("0".parse(), Ok(DmaLatency::Us(0)));
        assert_eq!("2500ns".parse(), Ok(DmaLatency::Us(2)));
        assert_eq!(DmaLatency::Us(2).microseconds(), Some(2));
        assert_eq!(DmaLatency::Off.microseconds(), None);
        let e = "5".parse::<DmaLatency>().unwrap_err();
        assert!(e.ends_with("; or use off"), "{e}");
        let e = "10000h".parse::<DmaLatency>().unwrap_err();
        assert!(e.contains("too large"), "{e}");
    }
}
