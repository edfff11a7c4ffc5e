//! punctual's trace file: a self-describing header, blocks of compactly encoded events (one CPU per
//! block, each with its own checksum so damage is found and skipped), and a trailer with what is only
//! known at the end (losses, task and IRQ names, timer symbols). The layout is documented in
//! `docs/trace-format.md`.

mod reader;
mod writer;

pub use reader::{read_trace, read_trace_file, Damage, Integrity, ReadError, TraceData};
pub use writer::TraceWriter;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// First bytes of every punctual trace file.
pub const MAGIC: &[u8; 8] = b"PUNCTTRC";
pub const VERSION: u16 = 1;
pub(crate) const BLOCK_MAGIC: &[u8; 4] = b"PTBK";
pub(crate) const BLOCK_HEADER: usize = 20;
pub(crate) const KIND_EVENTS: u8 = 1;
pub(crate) const KIND_TRAILER: u8 = 2;
pub(crate) const TAG_COMM: u8 = 100;
pub(crate) const TAG_IRQ_NAME: u8 = 101;

/// The command punctual traced (`punctual trace record -- COMMAND`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    pub pid: i32,
    pub argv: Vec<String>,
}

/// What is known when recording starts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// The kernel trace clock the timestamps are on (`mono` = CLOCK_MONOTONIC).
    pub clock: String,
    pub started_at: String,
    /// Trace-clock time when tracing was switched on.
    pub start_ns: u64,
    #[serde(default)]
    pub host: Option<punctual_result::HostFacts>,
    pub cpus: Vec<u32>,
    /// Kernel events enabled, as `system/event`.
    pub events: Vec<String>,
    /// Ring buffer per CPU, in KiB.
    pub buffer_kb: u64,
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default)]
    pub target: Option<Target>,
}

/// Events the kernel could not deliver on one CPU.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LostStats {
    /// Sum of the counts pages reported in-band.
    pub in_band: u64,
    /// Pages that said events were lost without saying how many.
    pub unknown_pages: u64,
    /// The buffer's own counters at the end (`per_cpu/cpuN/stats`).
    pub overrun: u64,
    pub commit_overrun: u64,
    pub dropped: u64,
}

impl LostStats {
    /// The best count of lost events: the kernel's counters, or what the pages said if more.
    pub fn total(&self) -> u64 {
        (self.overrun + self.commit_overrun + self.dropped).max(self.in_band)
    }

    pub fn any(&self) -> bool {
        self.total() > 0 || self.unknown_pages > 0
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskInfo {
    /// Thread group (process) id, when it could be found.
    pub tgid: Option<i32>,
    pub comm: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IrqInfo {
    pub name: String,
    /// The driver bound to the device raising it (`virtio_blk`, `nvme`...), when found.
    pub driver: Option<String>,
}

/// What is known when recording ends.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Trailer {
    pub ended_at: String,
    pub end_ns: u64,
    pub interrupted: bool,
    pub events: u64,
    pub lost: BTreeMap<u32, LostStats>,
    pub tasks: BTreeMap<i32, TaskInfo>,
    pub irqs: BTreeMap<i32, IrqInfo>,
    /// hrtimer callback addresses (hex) to kernel symbol names.
    pub symbols: BTreeMap<String, String>,
    /// Exit status of the traced command.
    #[serde(default)]
    pub target_status: Option<i32>,
    /// Per CPU, the one task that was runnable there just before tracing stopped, where there was
    /// exactly one: on a CPU with no `sched_switch` in the trace, it held the CPU all along.
    #[serde(default)]
    pub sole_runners: BTreeMap<u32, i32>,
    /// The measuring threads' stalls (`--explain`'s captures): with them a kept trace explains
    /// again as it did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stalls: Vec<crate::stall::Stall>,
    /// Stalls the threads' logs had no room for: their stretches were not read as the threads'.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stalls_dropped: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub(crate) fn put_signed(out: &mut Vec<u8>, v: i64) {
    put_varint(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// A cursor over a block payload; every read is checked.
pub(crate) struct Cursor<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub fn u8(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    pub fn u64_le(&mut self) -> Option<u64> {
        let b = self.buf.get(self.pos..self.pos + 8)?;
        self.pos += 8;
        Some(u64::from_le_bytes(b.try_into().ok()?))
    }

    pub fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    pub fn signed(&mut self) -> Option<i64> {
        let v = self.varint()?;
        Some(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    pub fn i32(&mut self) -> Option<i32> {
        i32::try_from(self.signed()?).ok()
    }

    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let b = self.buf.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn varints_round_trip(a in any::<u64>(), b in any::<i64>()) {
            let mut out = Vec::new();
            put_varint(&mut out, a);
            put_signed(&mut out, b);
            let mut c = Cursor { buf: &out, pos: 0 };
            prop_assert_eq!(c.varint(), Some(a));
            prop_assert_eq!(c.signed(), Some(b));
            prop_assert!(c.at_end());
        }
    }

    #[test]
    fn truncated_varint_is_none() {
        let mut c = Cursor {
            buf: &[0x80, 0x80],
            pos: 0,
        };
        assert_eq!(c.varint(), None);
        let eleven = [0xffu8; 11];
        let mut c = Cursor {
            buf: &eleven,
            pos: 0,
        };
        assert_eq!(c.varint(), None);
    }
}
