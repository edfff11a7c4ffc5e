//! The kernel's self-description of its binary records: `events/<sys>/<event>/format` (field names,
//! offsets, sizes) and `events/header_page` (the sub-buffer page header). Reading offsets from these
//! files rather than hard-coding them keeps the decoder right across kernel versions.

pub use crate::error::FormatError;
use std::collections::HashMap;

/// One field of an event record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    /// The C declaration's type part (`pid_t`, `char[16]`, `__data_loc char[]`).
    pub ctype: String,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
}

impl Field {
    /// `__data_loc` fields hold (length << 16 | offset) of a variable part of the record.
    pub fn is_data_loc(&self) -> bool {
        self.ctype.starts_with("__data_loc")
    }

    /// Read an integer field from a record (None when the record is too short).
    pub fn read_int(&self, rec: &[u8]) -> Option<i64> {
        let b = rec.get(self.offset..self.offset + self.size)?;
        Some(match (self.size, self.signed) {
            (1, true) => b[0] as i8 as i64,
            (1, false) => b[0] as i64,
            (2, true) => i16::from_le_bytes([b[0], b[1]]) as i64,
            (2, false) => u16::from_le_bytes([b[0], b[1]]) as i64,
            (4, true) => i32::from_le_bytes(b.try_into().ok()?) as i64,
            (4, false) => u32::from_le_bytes(b.try_into().ok()?) as i64,
            (8, _) => i64::from_le_bytes(b.try_into().ok()?),
            _ => return None,
        })
    }

    pub fn read_u64(&self, rec: &[u8]) -> Option<u64> {
        self.read_int(rec).map(|v| v as u64)
    }

    /// Read a string field: a fixed `char[N]` or a `__data_loc char[]` (up to the first NUL).
    pub fn read_str<'a>(&self, rec: &'a [u8]) -> Option<&'a [u8]> {
        let raw = if self.is_data_loc() {
            let loc = u32::from_le_bytes(rec.get(self.offset..self.offset + 4)?.try_into().ok()?);
            let (off, len) = ((loc & 0xffff) as usize, (loc >> 16) as usize);
            rec.get(off..off + len)?
        } else {
            rec.get(self.offset..self.offset + self.size)?
        };
        Some(raw.split(|&c| c == 0).next().unwrap_or(raw))
    }
}

/// An event's format: its numeric id (the record's `common_type`) and fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventFormat {
    pub system: String,
    pub name: String,
    pub id: u16,
    pub fields: Vec<Field>,
}

impl EventFormat {
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

fn err(what: &str, why: impl Into<String>) -> FormatError {
    FormatError {
        what: what.to_string(),
        why: why.into(),
    }
}

/// Parse one `field:TYPE NAME; offset:N; size:N; signed:N;` line.
fn parse_field(line: &str) -> Option<Field> {
    let mut decl = None;
    let mut offset = None;
    let mut size = None;
    let mut signed = false;
    for part in line.trim().split(';') {
        let part = part.trim();
        if let Some(d) = part.strip_prefix("field:") {
            decl = Some(d.trim());
        } else if let Some(v) = part.strip_prefix("offset:") {
            offset = v.trim().parse().ok();
        } else if let Some(v) = part.strip_prefix("size:") {
            size = v.trim().parse().ok();
        } else if let Some(v) = part.strip_prefix("signed:") {
            signed = v.trim() == "1";
        }
    }
    let decl = decl?;
    // The name is the last identifier; an array suffix belongs to the type (`char prev_comm[16]`).
    let (head, array) = match decl.find('[') {
        Some(i) if decl.ends_with(']') && !decl.starts_with("__data_loc") => {
            (&decl[..i], &decl[i..])
        }
        _ => (decl, ""),
    };
    let head = head.trim_end();
    let split = head.rfind(|c: char| c.is_whitespace() || c == '*')?;
    let name = head[split + 1..].trim().to_string();
    let ctype = format!("{}{}", head[..=split].trim(), array);
    Some(Field {
        name,
        ctype,
        offset: offset?,
        size: size?,
        signed,
    })
}

/// Parse an event's `format` file.
pub fn parse_event_format(system: &str, text: &str) -> Result<EventFormat, FormatError> {
    let mut name = None;
    let mut id = None;
    let mut fields = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(v) = t.strip_prefix("name:") {
            name = Some(v.trim().to_string());
        } else if let Some(v) = t.strip_prefix("ID:") {
            id = v.trim().parse::<u16>().ok();
        } else if t.starts_with("field:") {
            let f = parse_field(t)
                .ok_or_else(|| err(system, format!("unreadable field line '{t}'")))?;
            fields.push(f);
        }
    }
    let name = name.ok_or_else(|| err(system, "no name: line"))?;
    let what = format!("{system}/{name}");
    let id = id.ok_or_else(|| err(&what, "no ID: line"))?;
    if fields.is_empty() {
        return Err(err(&what, "no fields"));
    }
    Ok(EventFormat {
        system: system.to_string(),
        name,
        id,
        fields,
    })
}

/// The sub-buffer page layout from `events/header_page`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageLayout {
    /// Offset and size of the page's base timestamp.
    pub timestamp_offset: usize,
    /// Offset and size of the commit word (data length and the missed-events flags).
    pub commit_offset: usize,
    pub commit_size: usize,
    /// Where event data starts, and how much a page can hold.
    pub data_offset: usize,
    pub data_size: usize,
}

impl PageLayout {
    /// A 64-bit kernel with 4 KiB sub-buffers (what `header_page` says on x86_64).
    pub const DEFAULT_64: PageLayout = PageLayout {
        timestamp_offset: 0,
        commit_offset: 8,
        commit_size: 8,
        data_offset: 16,
        data_size: 4080,
    };

    pub fn page_size(&self) -> usize {
        self.data_offset + self.data_size
    }

    /// The same layout for sub-buffers of `page_size` bytes (`buffer_subbuf_size_kb`).
    pub fn with_page_size(mut self, page_size: usize) -> PageLayout {
        self.data_size = page_size.saturating_sub(self.data_offset);
        self
    }
}

pub fn parse_header_page(text: &str) -> Result<PageLayout, FormatError> {
    let fields: HashMap<String, Field> = text
        .lines()
        .filter_map(parse_field)
        .map(|f| (f.name.clone(), f))
        .collect();
    let get = |n: &str| {
        fields
            .get(n)
            .ok_or_else(|| err("header_page", format!("no '{n}' field")))
    };
    let ts = get("timestamp")?;
    let commit = get("commit")?;
    let data = get("data")?;
    if ts.size != 8 || !(commit.size == 4 || commit.size == 8) {
        return Err(err(
            "header_page",
            format!(
                "unexpected sizes: timestamp {}, commit {}",
                ts.size, commit.size
            ),
        ));
    }
    Ok(PageLayout {
        timestamp_offset: ts.offset,
        commit_offset: commit.offset,
        commit_size: commit.size,
        data_offset: data.offset,
        data_size: data.size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    pub const SWITCH: &str = "name: sched_switch
ID: 372
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;
\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;
\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;
\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;
\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;

print fmt: \"prev_comm=%s\", REC->prev_comm
";

    #[test]
    fn parses_sched_switch() {
        let f = parse_event_format("sched", SWITCH).unwrap();
        assert_eq!(f.id, 372);
        assert_eq!(f.name, "sched_switch");
        let pc = f.field("prev_comm").unwrap();
        assert_eq!((pc.offset, pc.size, pc.ctype.as_str()), (8, 16, "char[16]"));
        let st = f.field("prev_state").unwrap();
        assert_eq!(
            (st.offset, st.size, st.signed, st.ctype.as_str()),
            (32, 8, true, "long")
        );
        assert_eq!(f.field("next_prio").unwrap().offset, 60);
    }

    #[test]
    fn reads_fields_and_data_loc_strings() {
        let text = "name: irq_handler_entry\nID: 225\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int irq;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:__data_loc char[] name;\toffset:12;\tsize:4;\tsigned:0;\n";
        let f = parse_event_format("irq", text).unwrap();
        let name = f.field("name").unwrap();
        assert!(name.is_data_loc());
        let mut rec = vec![0u8; 16];
        rec[0..2].copy_from_slice(&225u16.to_le_bytes());
        rec[8..12].copy_from_slice(&(-3i32).to_le_bytes());
        rec[12..16].copy_from_slice(&((6u32 << 16) | 16).to_le_bytes());
        rec.extend_from_slice(b"ttyS0\0");
        assert_eq!(f.field("irq").unwrap().read_int(&rec), Some(-3));
        assert_eq!(name.read_str(&rec), Some(&b"ttyS0"[..]));
        // A location pointing past the record is refused, not a panic.
        rec[12..16].copy_from_slice(&((60u32 << 16) | 16).to_le_bytes());
        assert_eq!(name.read_str(&rec), None);
    }

    #[test]
    fn header_page_layout() {
        let text = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";
        assert_eq!(parse_header_page(text).unwrap(), PageLayout::DEFAULT_64);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(parse_event_format("x", "hello\nworld").is_err());
        assert!(parse_event_format("x", "name: a\nID: zz\n").is_err());
        assert!(parse_header_page("nothing").is_err());
    }
}
