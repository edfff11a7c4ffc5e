//! The compact binary plan (KURT's schedule file, grown up): a fixed header, the plan's header,
//! action table and tasks as canonical TOML, then one 24-byte record per event, sorted by time.
//! A million events take 24 MB and load with one read; the format is documented in
//! `docs/plan-format.md`.
//!
//! ```text
//! offset size  field
//! 0      8     magic "PUNCPLAN"
//! 8      4     version (1), u32 little-endian
//! 12     4     header TOML length in bytes (u32 LE)
//! 16     8     event count (u64 LE)
//! 24     8     reserved, zero
//! 32     n     header TOML (UTF-8): [plan], [[action]] and [[task]] tables
//! 32+n   24*k  events: at_ns u64 LE, action u16 LE, len u8, flags u8 (0), data [u8; 12]
//! ```

use crate::model::*;
use crate::PlanError;
use std::io::{Read, Write};
use std::path::Path;

pub const MAGIC: &[u8; 8] = b"PUNCPLAN";
pub const VERSION: u32 = 1;
pub const FIXED_HEADER: usize = 32;
pub const RECORD: usize = 24;

/// Whether these bytes start a compiled plan.
pub fn is_compiled(prefix: &[u8]) -> bool {
    prefix.len() >= 8 && &prefix[..8] == MAGIC
}

fn encode_event(e: &Event, out: &mut [u8]) {
    out[0..8].copy_from_slice(&e.at.to_le_bytes());
    out[8..10].copy_from_slice(&e.action.to_le_bytes());
    out[10] = e.len;
    out[11] = 0;
    out[12..24].copy_from_slice(&e.data);
}

fn decode_event(b: &[u8]) -> Event {
    let mut data = [0u8; EVENT_DATA];
    data.copy_from_slice(&b[12..24]);
    Event {
        at: u64::from_le_bytes(b[0..8].try_into().expect("8 bytes")),
        action: u16::from_le_bytes(b[8..10].try_into().expect("2 bytes")),
        len: b[10],
        flags: b[11],
        data,
    }
}

/// Write a plan in the binary form.
pub fn write(plan: &Plan, mut out: impl Write) -> std::io::Result<()> {
    let header = crate::emit::header_toml(plan);
    let mut fixed = [0u8; FIXED_HEADER];
    fixed[..8].copy_from_slice(MAGIC);
    fixed[8..12].copy_from_slice(&VERSION.to_le_bytes());
    fixed[12..16].copy_from_slice(&(header.len() as u32).to_le_bytes());
    fixed[16..24].copy_from_slice(&(plan.events.len() as u64).to_le_bytes());
    out.write_all(&fixed)?;
    out.write_all(header.as_bytes())?;
    let mut buf = vec![0u8; RECORD * 4096];
    for chunk in plan.events.chunks(4096) {
        for (i, e) in chunk.iter().enumerate() {
            encode_event(e, &mut buf[i * RECORD..(i + 1) * RECORD]);
        }
        out.write_all(&buf[..chunk.len() * RECORD])?;
    }
    out.flush()
}

/// Compile to bytes.
pub fn to_bytes(plan: &Plan) -> Vec<u8> {
    let mut v = Vec::with_capacity(FIXED_HEADER + 4096 + plan.events.len() * RECORD);
    write(plan, &mut v).expect("writing to memory cannot fail");
    v
}

/// Most events a compiled plan may announce (96 GiB of records); a larger count is corrupt.
pub const MAX_EVENTS: u64 = 1 << 32;
/// Longest header text a compiled plan may announce.
pub const MAX_HEADER: usize = 64 << 20;

/// Read a compiled plan from a stream whose size is unknown; `file` names it in errors. Memory
/// grows with the records actually read, never with the counts the file announces.
pub fn read(input: impl Read, file: &str) -> Result<Plan, PlanError> {
    read_sized(input, file, None)
}

/// Read a compiled plan held in memory: every count is checked against the size first.
pub fn from_bytes(bytes: &[u8], file: &str) -> Result<Plan, PlanError> {
    read_sized(bytes, file, Some(bytes.len() as u64))
}

/// Read a compiled plan of `size` bytes (when known): the header length and the event count must
/// account for exactly the file's bytes before anything is allocated.
pub fn read_sized(mut input: impl Read, file: &str, size: Option<u64>) -> Result<Plan, PlanError> {
    let (hlen, count) = read_fixed(&mut input, file)?;
    if let Some(size) = size {
        check_size(file, hlen, count, size)?;
    }
    // Read through `take` so a stream shorter than announced costs only what it holds.
    let mut header = Vec::new();
    let got = input
        .by_ref()
        .take(hlen as u64)
        .read_to_end(&mut header)
        .map_err(|e| corrupt(file, "header", format!("reading the plan header: {e}")))?;
    if got != hlen {
        return Err(corrupt(
            file,
            "header length",
            format!("{hlen} bytes announced, the file ends after {got} (file truncated?)"),
        ));
    }
    let header =
        String::from_utf8(header).map_err(|_| corrupt(file, "header", "not UTF-8".into()))?;
    // The header is canonical TOML; parse it with the same validation as a hand-written plan.
    let mut plan = match crate::parse::parse_str_allow_empty(&header, &format!("{file} (header)")) {
        Ok(p) => p,
        Err(e) => return Err(bad(file, e.to_string())),
    };
    let events = read_events(&mut input, file, count as usize, size.is_some(), &plan)?;
    let mut extra = [0u8; 1];
    if input
        .read(&mut extra)
        .map_err(|e| bad(file, e.to_string()))?
        != 0
    {
        return Err(corrupt(
            file,
            "event count",
            format!("bytes after the {count} events the header announces"),
        ));
    }
    plan.events = events;
    plan.source = file.to_string();
    crate::parse::validate_plan(&plan).map_err(|m| bad(file, m))?;
    Ok(plan)
}

/// A compiled plan that is not one this punctual reads (no magic, another version, a bad header).
fn bad(file: &str, message: String) -> PlanError {
    PlanError::Compiled {
        file: file.to_string(),
        message,
    }
}

/// A compiled plan whose `field` contradicts the file.
fn corrupt(file: &str, field: &'static str, message: String) -> PlanError {
    PlanError::Corrupt {
        file: file.to_string(),
        field,
        message,
    }
}

/// The fixed header: magic, version, and the header length and event count it announces, each
/// within its plausible limit. Returns (header length, event count).
fn read_fixed(input: &mut impl Read, file: &str) -> Result<(usize, u64), PlanError> {
    let mut fixed = [0u8; FIXED_HEADER];
    input.read_exact(&mut fixed).map_err(|e| {
        corrupt(
            file,
            "fixed header",
            format!("reading the {FIXED_HEADER}-byte header: {e} (file truncated?)"),
        )
    })?;
    if !is_compiled(&fixed) {
        return Err(bad(
            file,
            "not a compiled plan (no PUNCPLAN magic); compile one with `punctual plan compile`"
                .into(),
        ));
    }
    let version = u32::from_le_bytes(fixed[8..12].try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(bad(
            file,
            format!("format version {version}; this punctual reads version {VERSION}"),
        ));
    }
    let hlen = u32::from_le_bytes(fixed[12..16].try_into().expect("4 bytes")) as usize;
    let count = u64::from_le_bytes(fixed[16..24].try_into().expect("8 bytes"));
    let reserved = u64::from_le_bytes(fixed[24..32].try_into().expect("8 bytes"));
    if reserved != 0 {
        return Err(corrupt(
            file,
            "reserved",
            format!("{reserved:#x} where version {VERSION} writes zero"),
        ));
    }
    if hlen > MAX_HEADER {
        return Err(corrupt(
            file,
            "header length",
            format!("{hlen} bytes is implausible (at most {MAX_HEADER})"),
        ));
    }
    if count > MAX_EVENTS {
        return Err(corrupt(
            file,
            "event count",
            format!("{count} events is implausible (at most {MAX_EVENTS})"),
        ));
    }
    Ok((hlen, count))
}

/// The header length and the event count must account for exactly the file's `size` bytes.
fn check_size(file: &str, hlen: usize, count: u64, size: u64) -> Result<(), PlanError> {
    let after_fixed = size.saturating_sub(FIXED_HEADER as u64);
    if hlen as u64 > after_fixed {
        return Err(corrupt(
            file,
            "header length",
            format!("{hlen} bytes, but the file has {after_fixed} after the fixed header"),
        ));
    }
    let rest = after_fixed - hlen as u64;
    // count <= 2^32, so count * 24 fits a u64.
    let need = count * RECORD as u64;
    if need != rest {
        return Err(corrupt(
            file,
            "event count",
            format!(
                "{count} events need {need} bytes, but {rest} follow the header ({})",
                if need > rest {
                    "file truncated, or the count is damaged"
                } else {
                    "bytes after the events"
                }
            ),
        ));
    }
    Ok(())
}

/// The `count` event records, each checked against `plan` and in time order. With a known size
/// (`sized`) the count was checked against it; without, memory grows as records arrive.
fn read_events(
    input: &mut impl Read,
    file: &str,
    count: usize,
    sized: bool,
    plan: &Plan,
) -> Result<Vec<Event>, PlanError> {
    let mut events = Vec::new();
    let first = if sized { count } else { count.min(4096) };
    events
        .try_reserve_exact(first)
        .map_err(|_| corrupt(file, "event count", format!("no memory for {count} events")))?;
    let mut buf = vec![0u8; RECORD * 4096];
    let mut left = count;
    let mut last = 0u64;
    while left > 0 {
        let n = left.min(4096);
        input.read_exact(&mut buf[..n * RECORD]).map_err(|e| {
            corrupt(
                file,
                "event count",
                format!("event {} of {count}: {e} (file truncated?)", count - left),
            )
        })?;
        for i in 0..n {
            let e = decode_event(&buf[i * RECORD..(i + 1) * RECORD]);
            check_event(file, count - left + i, &e, plan, last)?;
            last = e.at;
            events.push(e);
        }
        left -= n;
    }
    Ok(events)
}

/// Event `index` must name an action of `plan`, fit its data, have no flags, and come no earlier
/// than the previous event (at `last`).
fn check_event(
    file: &str,
    index: usize,
    e: &Event,
    plan: &Plan,
    last: u64,
) -> Result<(), PlanError> {
    if e.action as usize >= plan.actions.len() {
        return Err(corrupt(
            file,
            "event action",
            format!(
                "event {index} names action {} but the plan has {}",
                e.action,
                plan.actions.len()
            ),
        ));
    }
    if e.len as usize > EVENT_DATA {
        return Err(corrupt(
            file,
            "event length",
            format!(
                "event {index} uses {} data bytes (at most {EVENT_DATA})",
                e.len
            ),
        ));
    }
    if e.flags != 0 {
        return Err(corrupt(
            file,
            "event flags",
            format!("event {index} has flags {:#x} (must be zero)", e.flags),
        ));
    }
    if e.at < last {
        return Err(corrupt(
            file,
            "event time",
            format!(
                "event {index} at {} ns comes before the previous one at {last} ns",
                e.at
            ),
        ));
    }
    Ok(())
}

/// Read a plan file of either form (TOML or compiled), by its first bytes.
pub fn load(path: &Path) -> Result<Plan, PlanError> {
    let mut f = std::fs::File::open(path).map_err(|source| PlanError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut magic = [0u8; 8];
    let n = f.read(&mut magic).map_err(|source| PlanError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if is_compiled(&magic[..n]) {
        use std::io::Seek;
        f.seek(std::io::SeekFrom::Start(0))
            .map_err(|source| PlanError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        // A pipe or a device has no size to check against: read it as a stream.
        let size = f.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
        read_sized(
            std::io::BufReader::with_capacity(1 << 20, f),
            &path.display().to_string(),
            size,
        )
    } else {
        crate::parse::parse_file(path)
    }
}

/// Events from CSV text: a header line `at_ns,action,data_hex`, then one event per line with the
/// time in integer nanoseconds from the plan's start, the name of an `[[action]]`, and up to 12
/// data bytes in hex (may be empty). Events may come in any order; they are sorted.
pub fn events_from_csv(
    plan: &Plan,
    text: impl std::io::BufRead,
    file: &str,
) -> Result<Vec<Event>, PlanError> {
    let at = |line: usize, m: String| PlanError::At {
        file: file.to_string(),
        line,
        column: 1,
        message: m,
    };
    let names: std::collections::HashMap<&str, u16> = plan
        .actions
        .iter()
        .enumerate()
        .map(|(i, a)| (a.name.as_str(), i as u16))
        .collect();
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let line = line.map_err(|e| at(n, e.to_string()))?;
        let line = line.trim();
        if n == 1 {
            if line != "at_ns,action,data_hex" {
                return Err(at(
                    n,
                    format!(
                        "the first line must be the header at_ns,action,data_hex (found '{line}')"
                    ),
                ));
            }
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut cols = line.splitn(3, ',');
        let t = cols.next().unwrap_or("");
        let a = cols
            .next()
            .ok_or_else(|| at(n, "expected at_ns,action,data_hex".into()))?;
        let d = cols.next().unwrap_or("").trim();
        let t: u64 = t.trim().parse().map_err(|_| {
            at(
                n,
                format!(
                    "at_ns '{}' is not a whole number of nanoseconds",
                    punctual_time::text::display_name(t.trim())
                ),
            )
        })?;
        if t > crate::parse::MAX_TIME_NS {
            // u64::MAX compiled, was admitted and fired at once (the start plus it wrapped).
            return Err(at(
                n,
                format!(
                    "at_ns {t} is later than a year after the start (the limit of a plan's times)"
                ),
            ));
        }
        let &action = names.get(a.trim()).ok_or_else(|| {
            let mut v: Vec<&str> = names.keys().copied().collect();
            v.sort_unstable();
            at(
                n,
                format!(
                    "no [[action]] named '{}' (defined: {})",
                    punctual_time::text::display_name(a.trim()),
                    v.join(", ")
                ),
            )
        })?;
        if d.len() % 2 != 0 || d.len() > 2 * EVENT_DATA {
            return Err(at(
                n,
                format!(
                    "data_hex '{d}' must be an even number of hex digits, at most {}",
                    2 * EVENT_DATA
                ),
            ));
        }
        let mut data = [0u8; EVENT_DATA];
        for k in 0..d.len() / 2 {
            data[k] = u8::from_str_radix(&d[2 * k..2 * k + 2], 16)
                .map_err(|_| at(n, format!("data_hex '{d}' is not hex")))?;
        }
        out.push(Event::new(t, action, &data[..d.len() / 2]));
    }
    out.sort_by_key(|e| e.at);
    Ok(out)
}
