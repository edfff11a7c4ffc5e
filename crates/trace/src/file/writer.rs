//! Writing trace files: events are appended to a per-CPU block buffer and each full block is written
//! with its checksum, so the file on disk is valid up to the last whole block at every moment.

use super::*;
use crate::event::EventKind;
use std::io::{self, Write};

const BLOCK_LIMIT: usize = 64 * 1024;

struct Block {
    last_ts: u64,
    count: u32,
    bytes: Vec<u8>,
}

pub struct TraceWriter<W: Write> {
    out: W,
    blocks: BTreeMap<u32, Block>,
    events: u64,
    written: u64,
}

pub(crate) fn encode_kind(out: &mut Vec<u8>, kind: &EventKind) {
    match *kind {
        EventKind::Switch {
            prev_pid,
            prev_prio,
            prev_state,
            next_pid,
            next_prio,
        } => {
            put_signed(out, prev_pid as i64);
            put_signed(out, prev_prio as i64);
            put_varint(out, prev_state);
            put_signed(out, next_pid as i64);
            put_signed(out, next_prio as i64);
        }
        EventKind::Waking {
            pid,
            prio,
            target_cpu,
        }
        | EventKind::Wakeup {
            pid,
            prio,
            target_cpu,
        }
        | EventKind::WakeupNew {
            pid,
            prio,
            target_cpu,
        } => {
            put_signed(out, pid as i64);
            put_signed(out, prio as i64);
            put_signed(out, target_cpu as i64);
        }
        EventKind::Fork { parent, child } => {
            put_signed(out, parent as i64);
            put_signed(out, child as i64);
        }
        EventKind::Exit { pid } => put_signed(out, pid as i64),
        EventKind::IrqEntry { irq } => put_signed(out, irq as i64),
        EventKind::IrqExit { irq, handled } => {
            put_signed(out, irq as i64);
            out.push(handled as u8);
        }
        EventKind::SoftirqEntry { vec } | EventKind::SoftirqExit { vec } => {
            put_varint(out, vec as u64)
        }
        EventKind::HrtimerEntry {
            timer,
            function,
            now,
        } => {
            put_varint(out, timer);
            put_varint(out, function);
            if let Some(now) = now {
                put_varint(out, now);
            }
        }
        EventKind::HrtimerStart {
            timer,
            function,
            expires,
        } => {
            put_varint(out, timer);
            put_varint(out, function);
            put_varint(out, expires);
        }
        EventKind::HrtimerExit { timer } => put_varint(out, timer),
        EventKind::VectorEntry { vector } | EventKind::VectorExit { vector } => {
            out.push(vector.code())
        }
        EventKind::Lost { count } => put_varint(out, count.map_or(0, |n| n.saturating_add(1))),
        EventKind::CpuIdle { state } => {
            put_varint(out, state.map_or(0, |s| s as u64 + 1));
        }
        EventKind::IpiSend { target_cpu } | EventKind::WakeIdleNoIpi { target_cpu } => {
            put_varint(out, target_cpu as u64)
        }
        EventKind::StatRuntime { pid, runtime } => {
            put_signed(out, pid as i64);
            put_varint(out, runtime);
        }
    }
}

impl<W: Write> TraceWriter<W> {
    /// Start a file: magic, version, and the header as JSON.
    pub fn new(mut out: W, header: &Header) -> io::Result<Self> {
        let json = serde_json::to_vec(header).map_err(io::Error::other)?;
        out.write_all(MAGIC)?;
        out.write_all(&VERSION.to_le_bytes())?;
        out.write_all(&(json.len() as u32).to_le_bytes())?;
        out.write_all(&json)?;
        let written = (MAGIC.len() + 6 + json.len()) as u64;
        Ok(TraceWriter {
            out,
            blocks: BTreeMap::new(),
            events: 0,
            written,
        })
    }

    fn block(&mut self, cpu: u32, ts: u64) -> &mut Block {
        self.blocks.entry(cpu).or_insert_with(|| {
            let mut bytes = Vec::with_capacity(BLOCK_LIMIT + 256);
            bytes.extend_from_slice(&ts.to_le_bytes());
            Block {
                last_ts: ts,
                count: 0,
                bytes,
            }
        })
    }

    /// Append one event. Timestamps are stored as signed deltas, so a CPU whose clock steps back
    /// (it should not) is still recorded faithfully.
    pub fn push(&mut self, cpu: u32, ts: u64, kind: &EventKind) -> io::Result<()> {
        let b = self.block(cpu, ts);
        b.bytes.push(kind.tag());
        put_signed(&mut b.bytes, ts.wrapping_sub(b.last_ts) as i64);
        b.last_ts = ts;
        encode_kind(&mut b.bytes, kind);
        b.count += 1;
        let full = b.bytes.len() >= BLOCK_LIMIT;
        self.events += 1;
        if full {
            self.flush_cpu(cpu)?;
        }
        Ok(())
    }

    fn label(&mut self, cpu: u32, ts: u64, tag: u8, id: i32, name: &[u8]) {
        let b = self.block(cpu, ts);
        b.bytes.push(tag);
        put_signed(&mut b.bytes, id as i64);
        let name = &name[..name.len().min(255)];
        put_varint(&mut b.bytes, name.len() as u64);
        b.bytes.extend_from_slice(name);
    }

    /// Name a task (written before the first event that needs it, and again when it changes).
    pub fn comm(&mut self, cpu: u32, ts: u64, pid: i32, name: &[u8]) {
        self.label(cpu, ts, TAG_COMM, pid, name)
    }

    pub fn irq_name(&mut self, cpu: u32, ts: u64, irq: i32, name: &[u8]) {
        self.label(cpu, ts, TAG_IRQ_NAME, irq, name)
    }

    fn write_block(&mut self, kind: u8, cpu: u32, count: u32, payload: &[u8]) -> io::Result<()> {
        let mut h = [0u8; BLOCK_HEADER];
        h[0..4].copy_from_slice(BLOCK_MAGIC);
        h[4] = kind;
        h[6..8].copy_from_slice(&(cpu.min(u16::MAX as u32) as u16).to_le_bytes());
        h[8..12].copy_from_slice(&count.to_le_bytes());
        h[12..16].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        h[16..20].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(payload)?;
        self.written += (BLOCK_HEADER + payload.len()) as u64;
        Ok(())
    }

    /// Write out one CPU's pending block.
    pub fn flush_cpu(&mut self, cpu: u32) -> io::Result<()> {
        if let Some(b) = self.blocks.remove(&cpu) {
            if b.bytes.len() > 8 {
                self.write_block(KIND_EVENTS, cpu, b.count, &b.bytes)?;
            }
        }
        Ok(())
    }

    /// Write out every pending block (the drain does this after each pass).
    pub fn flush(&mut self) -> io::Result<()> {
        let cpus: Vec<u32> = self.blocks.keys().copied().collect();
        for c in cpus {
            self.flush_cpu(c)?;
        }
        self.out.flush()
    }

    pub fn events(&self) -> u64 {
        self.events
    }

    /// Bytes written so far (pending blocks not included).
    pub fn bytes_written(&self) -> u64 {
        self.written
    }

    /// Flush, write the trailer, and hand back the output.
    pub fn finish(mut self, trailer: &Trailer) -> io::Result<W> {
        self.flush()?;
        let mut t = trailer.clone();
        t.events = self.events;
        let json = serde_json::to_vec(&t).map_err(io::Error::other)?;
        self.write_block(KIND_TRAILER, 0, 0, &json)?;
        self.out.flush()?;
        Ok(self.out)
    }
}
