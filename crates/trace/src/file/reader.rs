//! Reading trace files. A file that is not punctual's, or whose header is unreadable, is refused. A
//! damaged or truncated file yields everything that could be read, plus where and why reading
//! stopped or skipped ([`Integrity`]); it never panics.

use super::*;
use crate::event::{Event, EventKind, Vector};
use std::collections::HashMap;
use std::path::Path;

/// The file cannot be read at all.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("not a punctual trace file: {seems}, where a punctual trace starts with \"PUNCTTRC\"; record one with `punctual trace record -o FILE`")]
    NotPunctual { seems: String },
    #[error("trace file version {0} is not supported by this punctual (it reads version {VERSION}); use the punctual that recorded it")]
    Version(u16),
    #[error("trace file header is damaged: {0}")]
    Header(String),
}

/// A place where the file could not be read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Damage {
    /// Byte offset in the file.
    pub offset: u64,
    pub reason: String,
}

/// How much of the file was read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Integrity {
    pub file_bytes: u64,
    /// Bytes of the file that were read as valid blocks (header included).
    pub bytes_read: u64,
    pub blocks: u64,
    pub events: u64,
    /// Places skipped or where reading stopped.
    pub damage: Vec<Damage>,
    /// The trailer was found: the recording finished and nothing is missing.
    pub has_trailer: bool,
    /// Events whose timestamp is before the previous one of the same CPU (a clock that stepped back,
    /// or a damaged delta): kept, and put in time order with the rest.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub backwards_timestamps: u64,
    /// Events more than `WINDOW_SLACK_NS` outside the recording's start and end (a damaged or
    /// crafted timestamp): dropped, so they cannot stretch the trace to centuries.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub out_of_window: u64,
    /// Switches out of a CPU's idle task the kernel did not record, put back from the wake-up
    /// that preceded them ([`crate::idle_exit`]), and those no evidence could place.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub idle_exits_inferred: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub idle_exits_unplaced: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// How far outside `[start_ns, end_ns]` an event may lie and still be believed (the recorder reads
/// the clock just before switching tracing on and just after switching it off).
pub const WINDOW_SLACK_NS: u64 = 1_000_000_000;

impl Integrity {
    pub fn complete(&self) -> bool {
        self.has_trailer && self.damage.is_empty()
    }

    /// One line: what was read and where it stopped.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "read {} events in {} blocks ({} of {} bytes)",
            self.events, self.blocks, self.bytes_read, self.file_bytes
        );
        for d in &self.damage {
            s.push_str(&format!("; at byte {}: {}", d.offset, d.reason));
        }
        if self.idle_exits_inferred + self.idle_exits_unplaced > 0 {
            s.push_str(&format!(
                "; {} switches out of idle the kernel did not record put back, {} without evidence",
                self.idle_exits_inferred, self.idle_exits_unplaced
            ));
        }
        if !self.has_trailer && self.damage.iter().all(|d| !d.reason.contains("ends")) {
            s.push_str("; no trailer: the recording did not finish");
        }
        s
    }
}

/// A whole trace in memory: events of every CPU in time order, and the labels.
#[derive(Clone, Debug)]
pub struct TraceData {
    pub header: Header,
    pub trailer: Option<Trailer>,
    pub events: Vec<Event>,
    pub comms: HashMap<i32, String>,
    pub irq_names: HashMap<i32, String>,
    pub integrity: Integrity,
}

impl TraceData {
    /// Events the kernel dropped, over every CPU (0 when the file has no trailer).
    pub fn lost_events(&self) -> u64 {
        self.trailer
            .as_ref()
            .map_or(0, |t| t.lost.values().map(|l| l.total()).sum())
    }

    /// The trace window: from tracing on to tracing off (or the last event, when the file ended early).
    pub fn window(&self) -> (u64, u64) {
        let first = self.events.first().map_or(self.header.start_ns, |e| e.ts);
        let last = self.events.last().map_or(first, |e| e.ts);
        let start = self.header.start_ns.min(first);
        let end = match &self.trailer {
            Some(t) if t.end_ns >= last => t.end_ns,
            _ => last,
        };
        (start, end.max(start))
    }

    pub fn comm(&self, pid: i32) -> String {
        if pid == 0 {
            return "idle".into();
        }
        self.comms
            .get(&pid)
            .cloned()
            .or_else(|| {
                self.trailer
                    .as_ref()
                    .and_then(|t| t.tasks.get(&pid))
                    .map(|t| t.comm.clone())
            })
            .unwrap_or_else(|| format!("pid {pid}"))
    }

    pub fn tgid(&self, pid: i32) -> i32 {
        self.trailer
            .as_ref()
            .and_then(|t| t.tasks.get(&pid))
            .and_then(|t| t.tgid)
            .unwrap_or(pid)
    }
}

pub fn read_trace_file(path: &Path) -> Result<TraceData, ReadError> {
    let bytes = std::fs::read(path).map_err(|e| ReadError::Io {
        path: path.display().to_string(),
        source: e,
    })?;
    read_trace(&bytes)
}

fn decode_kind(tag: u8, c: &mut Cursor) -> Option<EventKind> {
    Some(match tag {
        1 => EventKind::Switch {
            prev_pid: c.i32()?,
            prev_prio: c.i32()?,
            prev_state: c.varint()?,
            next_pid: c.i32()?,
            next_prio: c.i32()?,
        },
        2 => EventKind::Waking {
            pid: c.i32()?,
            prio: c.i32()?,
            target_cpu: c.i32()?,
        },
        3 => EventKind::Wakeup {
            pid: c.i32()?,
            prio: c.i32()?,
            target_cpu: c.i32()?,
        },
        4 => EventKind::WakeupNew {
            pid: c.i32()?,
            prio: c.i32()?,
            target_cpu: c.i32()?,
        },
        5 => EventKind::Fork {
            parent: c.i32()?,
            child: c.i32()?,
        },
        6 => EventKind::Exit { pid: c.i32()? },
        7 => EventKind::IrqEntry { irq: c.i32()? },
        8 => EventKind::IrqExit {
            irq: c.i32()?,
            handled: c.u8()? != 0,
        },
        9 => EventKind::SoftirqEntry {
            vec: u32::try_from(c.varint()?).ok()?,
        },
        10 => EventKind::SoftirqExit {
            vec: u32::try_from(c.varint()?).ok()?,
        },
        11 => EventKind::HrtimerEntry {
            timer: c.varint()?,
            function: c.varint()?,
            now: None,
        },
        16 => EventKind::HrtimerEntry {
            timer: c.varint()?,
            function: c.varint()?,
            now: Some(c.varint()?),
        },
        17 => EventKind::HrtimerStart {
            timer: c.varint()?,
            function: c.varint()?,
            expires: c.varint()?,
        },
        12 => EventKind::HrtimerExit { timer: c.varint()? },
        13 => EventKind::VectorEntry {
            vector: Vector::from_code(c.u8()?)?,
        },
        14 => EventKind::VectorExit {
            vector: Vector::from_code(c.u8()?)?,
        },
        15 => EventKind::Lost {
            count: c.varint()?.checked_sub(1),
        },
        18 => EventKind::CpuIdle {
            state: match c.varint()? {
                0 => None,
                s => Some(u32::try_from(s - 1).ok()?),
            },
        },
        19 => EventKind::IpiSend {
            target_cpu: u32::try_from(c.varint()?).ok()?,
        },
        20 => EventKind::WakeIdleNoIpi {
            target_cpu: u32::try_from(c.varint()?).ok()?,
        },
        21 => EventKind::StatRuntime {
            pid: c.i32()?,
            runtime: c.varint()?,
        },
        _ => return None,
    })
}

struct BlockHeader {
    kind: u8,
    cpu: u32,
    count: u32,
    len: usize,
    crc: u32,
}

fn block_header(b: &[u8]) -> Option<BlockHeader> {
    if b.len() < BLOCK_HEADER || &b[0..4] != BLOCK_MAGIC {
        return None;
    }
    Some(BlockHeader {
        kind: b[4],
        cpu: u16::from_le_bytes([b[6], b[7]]) as u32,
        count: u32::from_le_bytes(b[8..12].try_into().ok()?),
        len: u32::from_le_bytes(b[12..16].try_into().ok()?) as usize,
        crc: u32::from_le_bytes(b[16..20].try_into().ok()?),
    })
}

/// The next offset at or after `from` where a block with a valid checksum starts.
fn resync(bytes: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    while at + BLOCK_HEADER <= bytes.len() {
        let rel = bytes[at..].windows(4).position(|w| w == BLOCK_MAGIC)?;
        let pos = at + rel;
        if let Some(h) = block_header(&bytes[pos..]) {
            if let Some(p) = bytes.get(pos + BLOCK_HEADER..pos + BLOCK_HEADER + h.len) {
                if crc32fast::hash(p) == h.crc {
                    return Some(pos);
                }
            }
        }
        at = pos + 1;
    }
    None
}

/// What a file that is not a punctual trace looks like, for the message.
fn what_it_seems(bytes: &[u8]) -> String {
    let head = &bytes[..bytes.len().min(16)];
    if bytes.is_empty() {
        return "the file is empty".into();
    }
    if head.starts_with(b"\x17\x08\x44tracing") {
        return "it is a trace-cmd file (trace-cmd report reads it)".into();
    }
    if head.starts_with(b"PERFILE2") {
        return "it is a perf.data file (perf script reads it)".into();
    }
    if head.starts_with(&MAGIC[..head.len().min(MAGIC.len())]) {
        return format!(
            "it is {} bytes long, shorter than a trace's header",
            bytes.len()
        );
    }
    let text = head
        .iter()
        .all(|&b| b.is_ascii_graphic() || b.is_ascii_whitespace());
    if text {
        let shown: String = String::from_utf8_lossy(head)
            .chars()
            .map(|c| if c.is_ascii_whitespace() { ' ' } else { c })
            .collect();
        format!("it is text (it starts \"{}\")", shown.trim_end())
    } else {
        let hex: Vec<String> = head.iter().take(8).map(|b| format!("{b:02x}")).collect();
        format!("it starts with the bytes {}", hex.join(" "))
    }
}

/// The magic, the version and the JSON header. Returns the header, where it starts and its length.
fn read_header(bytes: &[u8]) -> Result<(Header, usize, usize), ReadError> {
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return Err(ReadError::NotPunctual {
            seems: what_it_seems(bytes),
        });
    }
    let rest = &bytes[MAGIC.len()..];
    if rest.len() < 6 {
        return Err(ReadError::Header("the file ends inside the header".into()));
    }
    let version = u16::from_le_bytes([rest[0], rest[1]]);
    if version != VERSION {
        return Err(ReadError::Version(version));
    }
    let hlen = u32::from_le_bytes(rest[2..6].try_into().expect("4 bytes")) as usize;
    let hstart = MAGIC.len() + 6;
    let hjson = bytes
        .get(hstart..hstart.saturating_add(hlen))
        .ok_or_else(|| {
            ReadError::Header(format!(
                "the file ends inside the header ({} of {hlen} bytes)",
                bytes.len() - hstart
            ))
        })?;
    let header: Header =
        serde_json::from_slice(hjson).map_err(|e| ReadError::Header(e.to_string()))?;
    Ok((header, hstart, hlen))
}

/// Parse a whole file held in memory.
pub fn read_trace(bytes: &[u8]) -> Result<TraceData, ReadError> {
    let (header, hstart, hlen) = read_header(bytes)?;

    let mut integrity = Integrity {
        file_bytes: bytes.len() as u64,
        bytes_read: (hstart + hlen) as u64,
        ..Default::default()
    };
    let mut events = Vec::new();
    let mut comms = HashMap::new();
    let mut irq_names = HashMap::new();
    let mut trailer = None;
    let mut trailer_at = 0u64;
    let mut at = hstart + hlen;
    while at < bytes.len() {
        let Some(h) = block_header(&bytes[at..]) else {
            let reason = if bytes.len() - at < BLOCK_HEADER {
                format!(
                    "the file ends inside a block header ({} bytes left)",
                    bytes.len() - at
                )
            } else {
                "no block starts here".to_string()
            };
            let ends = reason.contains("ends");
            integrity.damage.push(Damage {
                offset: at as u64,
                reason,
            });
            if ends {
                break;
            }
            match resync(bytes, at + 1) {
                Some(next) => {
                    at = next;
                    continue;
                }
                None => break,
            }
        };
        let pstart = at + BLOCK_HEADER;
        let Some(payload) = bytes.get(pstart..pstart + h.len) else {
            integrity.damage.push(Damage {
                offset: at as u64,
                reason: format!(
                    "the file ends inside a block ({} of {} bytes)",
                    bytes.len() - pstart,
                    h.len
                ),
            });
            break;
        };
        if crc32fast::hash(payload) != h.crc {
            integrity.damage.push(Damage {
                offset: at as u64,
                reason: "block fails its checksum; skipped".into(),
            });
            match resync(bytes, at + 1) {
                Some(next) => {
                    at = next;
                    continue;
                }
                None => break,
            }
        }
        match h.kind {
            KIND_EVENTS => {
                let before = events.len();
                if let Err(reason) = decode_block(
                    payload,
                    h.cpu,
                    &mut events,
                    &mut comms,
                    &mut irq_names,
                    &mut integrity.backwards_timestamps,
                ) {
                    integrity.damage.push(Damage {
                        offset: at as u64,
                        reason,
                    });
                } else if events.len() - before != h.count as usize {
                    integrity.damage.push(Damage {
                        offset: at as u64,
                        reason: format!(
                            "block says {} events, holds {}",
                            h.count,
                            events.len() - before
                        ),
                    });
                }
            }
            KIND_TRAILER => match serde_json::from_slice::<Trailer>(payload) {
                Ok(t) => {
                    trailer_at = at as u64;
                    trailer = Some(t);
                    integrity.has_trailer = true;
                }
                Err(e) => integrity.damage.push(Damage {
                    offset: at as u64,
                    reason: format!("trailer unreadable: {e}"),
                }),
            },
            other => integrity.damage.push(Damage {
                offset: at as u64,
                reason: format!("unknown block kind {other}; skipped"),
            }),
        }
        integrity.blocks += 1;
        integrity.bytes_read += (BLOCK_HEADER + h.len) as u64;
        at = pstart + h.len;
    }
    if let Some(t) = &trailer {
        // Whole blocks cut out leave every remaining block intact: only the recorder's count in the
        // trailer tells (found by scripts/bad-input.sh, issue 19; it was read as complete).
        let decoded = events.len() as u64;
        if t.events != decoded && integrity.damage.is_empty() {
            integrity.damage.push(Damage {
                offset: trailer_at,
                reason: format!(
                    "the trailer counts {} events, the blocks hold {decoded}: blocks are missing",
                    t.events
                ),
            });
        }
        let lo = header.start_ns.saturating_sub(WINDOW_SLACK_NS);
        let hi = t.end_ns.saturating_add(WINDOW_SLACK_NS);
        let before = events.len();
        events.retain(|e| (lo..=hi).contains(&e.ts));
        integrity.out_of_window = (before - events.len()) as u64;
    }
    integrity.events = events.len() as u64;
    // Per-CPU streams are in order; a stable sort merges them and keeps each CPU's order on ties.
    events.sort_by_key(|e: &Event| e.ts);
    let (events, repair) = crate::idle_exit::repair_merged(events);
    integrity.idle_exits_inferred = repair.inferred;
    integrity.idle_exits_unplaced = repair.unplaced;
    Ok(TraceData {
        header,
        trailer,
        events,
        comms,
        irq_names,
        integrity,
    })
}

fn decode_block(
    payload: &[u8],
    cpu: u32,
    events: &mut Vec<Event>,
    comms: &mut HashMap<i32, String>,
    irq_names: &mut HashMap<i32, String>,
    backwards: &mut u64,
) -> Result<(), String> {
    let mut c = Cursor {
        buf: payload,
        pos: 0,
    };
    let mut ts = c.u64_le().ok_or("block shorter than its base timestamp")?;
    while !c.at_end() {
        let start = c.pos;
        let tag = c.u8().expect("not at end");
        let bad = |what: &str| format!("undecodable {what} at payload offset {start}");
        match tag {
            TAG_COMM | TAG_IRQ_NAME => {
                let id = c.i32().ok_or_else(|| bad("label"))?;
                let n = c.varint().ok_or_else(|| bad("label"))? as usize;
                let name =
                    String::from_utf8_lossy(c.bytes(n).ok_or_else(|| bad("label"))?).into_owned();
                if tag == TAG_COMM {
                    comms.insert(id, name);
                } else {
                    irq_names.insert(id, name);
                }
            }
            _ => {
                let delta = c.signed().ok_or_else(|| bad("timestamp"))?;
                // A step past either end of the clock is damage, never a wrap to 584 years.
                ts = ts
                    .checked_add_signed(delta)
                    .ok_or_else(|| bad("timestamp (out of range)"))?;
                *backwards += (delta < 0) as u64;
                let kind =
                    decode_kind(tag, &mut c).ok_or_else(|| bad(&format!("event (tag {tag})")))?;
                events.push(Event { ts, cpu, kind });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::TraceWriter;
    use proptest::prelude::*;

    fn header() -> Header {
        Header {
            clock: "mono".into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            start_ns: 1_000,
            host: None,
            cpus: vec![0, 1],
            events: vec!["sched/sched_switch".into()],
            buffer_kb: 1024,
            command: vec![],
            target: None,
        }
    }

    fn sample_file(n: u64) -> Vec<u8> {
        let mut w = TraceWriter::new(Vec::new(), &header()).unwrap();
        w.comm(0, 1_000, 42, b"worker");
        for i in 0..n {
            let cpu = (i % 2) as u32;
            let ts = 1_000 + i * 1_000;
            let kind = if i % 3 == 0 {
                EventKind::Switch {
                    prev_pid: 0,
                    prev_prio: 120,
                    prev_state: 0,
                    next_pid: 42,
                    next_prio: 120,
                }
            } else if i % 3 == 1 {
                EventKind::IrqEntry { irq: 36 }
            } else {
                EventKind::Lost {
                    count: if i % 2 == 0 { Some(0) } else { None },
                }
            };
            w.push(cpu, ts, &kind).unwrap();
            if i % 500 == 0 {
                w.flush().unwrap();
            }
        }
        w.finish(&Trailer {
            end_ns: 1_000 + n * 1_000,
            ..Default::default()
        })
        .unwrap()
    }

    #[test]
    fn a_trace_missing_whole_blocks_is_not_complete() {
        let bytes = sample_file(2_000);
        let th = u32::from_le_bytes(bytes[10..14].try_into().unwrap()) as usize;
        // Walk the blocks; cut out the second event block whole (its neighbours stay intact).
        let mut blocks = Vec::new();
        let mut off = 14 + th;
        while off + 20 <= bytes.len() && &bytes[off..off + 4] == b"PTBK" {
            let len = u32::from_le_bytes(bytes[off + 12..off + 16].try_into().unwrap()) as usize;
            blocks.push((off, bytes[off + 4], 20 + len));
            off += 20 + len;
        }
        let events: Vec<_> = blocks.iter().filter(|b| b.1 == KIND_EVENTS).collect();
        assert!(events.len() >= 2, "{blocks:?}");
        let (at, _, len) = *events[1];
        let cut = [&bytes[..at], &bytes[at + len..]].concat();
        let t = read_trace(&cut).unwrap();
        assert!(t.events.len() < 2_000);
        assert!(!t.integrity.complete(), "{}", t.integrity.describe());
        assert!(
            t.integrity.describe().contains("blocks are missing"),
            "{}",
            t.integrity.describe()
        );
        // The whole file is still complete.
        assert!(read_trace(&bytes).unwrap().integrity.complete());
    }

    #[test]
    fn round_trip_in_time_order() {
        let bytes = sample_file(2_000);
        let t = read_trace(&bytes).unwrap();
        assert!(t.integrity.complete(), "{}", t.integrity.describe());
        assert_eq!(t.events.len(), 2_000);
        assert!(t.events.windows(2).all(|w| w[0].ts <= w[1].ts));
        assert_eq!(
            t.events[1],
            Event {
                ts: 2_000,
                cpu: 1,
                kind: EventKind::IrqEntry { irq: 36 }
            }
        );
        assert_eq!(t.events[2].kind, EventKind::Lost { count: Some(0) });
        assert_eq!(t.comm(42), "worker");
        assert_eq!(t.trailer.as_ref().unwrap().events, 2_000);
        assert_eq!(t.window(), (1_000, 2_001_000));
    }

    #[test]
    fn foreign_and_bad_headers_are_refused() {
        assert!(matches!(
            read_trace(b"\x7fELF\x02\x01\x01\0\0\0"),
            Err(ReadError::NotPunctual { .. })
        ));
        assert!(matches!(
            read_trace(b""),
            Err(ReadError::NotPunctual { .. })
        ));
        let mut bytes = sample_file(10);
        bytes[8] = 9;
        assert!(matches!(read_trace(&bytes), Err(ReadError::Version(9))));
        let bytes = sample_file(10);
        assert!(matches!(
            read_trace(&bytes[..20]),
            Err(ReadError::Header(_))
        ));
    }

    #[test]
    fn a_file_that_is_not_a_trace_is_described_not_quoted_back() {
        let msg = |b: &[u8]| read_trace(b).unwrap_err().to_string();
        let text = msg(b"garbage garbage\n");
        assert!(
            text.contains("it is text (it starts \"garbage garbage\")"),
            "{text}"
        );
        assert!(text.contains("starts with \"PUNCTTRC\""), "{text}");
        assert!(msg(b"").contains("the file is empty"));
        assert!(msg(b"\x7fELF\x02\x01\x01\0\0").contains("the bytes 7f 45 4c 46"));
        assert!(msg(b"PERFILE2\0\0").contains("perf.data"));
        assert!(msg(b"\x17\x08\x44tracing6\0").contains("trace-cmd"));
        assert!(msg(b"PUNCT").contains("shorter than a trace's header"));
    }

    #[test]
    fn truncation_keeps_whole_blocks_and_says_where() {
        let bytes = sample_file(3_000);
        let cut = bytes.len() * 2 / 3;
        let t = read_trace(&bytes[..cut]).unwrap();
        assert!(!t.integrity.complete());
        assert!(t.trailer.is_none());
        assert!(
            t.events.len() > 1_000 && t.events.len() < 3_000,
            "{}",
            t.events.len()
        );
        let d = &t.integrity.damage[0];
        assert!(d.reason.contains("ends inside a block"), "{d:?}");
        assert!(d.offset < cut as u64);
        assert!(t
            .integrity
            .describe()
            .contains(&format!("at byte {}", d.offset)));
    }

    #[test]
    fn a_corrupt_block_is_skipped_and_reading_goes_on() {
        let bytes = sample_file(3_000);
        let full = read_trace(&bytes).unwrap();
        let mut bad = bytes.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 0x55;
        let t = read_trace(&bad).unwrap();
        assert!(t.trailer.is_some(), "reading resumed after the damage");
        assert_eq!(t.integrity.damage.len(), 1, "{:?}", t.integrity.damage);
        assert!(t.events.len() < full.events.len());
        assert!(t.events.len() > full.events.len() / 2);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn damaged_files_never_panic(cut in 0usize..20_000, flips in proptest::collection::vec((0usize..20_000, any::<u8>()), 0..8)) {
            let mut bytes = sample_file(1_500);
            for (at, v) in flips {
                let n = bytes.len();
                bytes[at % n] ^= v;
            }
            let cut = cut.min(bytes.len());
            if let Ok(t) = read_trace(&bytes[..cut]) {
                prop_assert!(t.integrity.bytes_read <= cut as u64);
                prop_assert!(t.events.windows(2).all(|w| w[0].ts <= w[1].ts));
            }
        }
    }
}
