//! The ring buffer's binary sub-buffer pages, as `per_cpu/cpuN/trace_pipe_raw` hands them out.
//!
//! A page is a header (base timestamp; commit word = bytes of data, with bit 31 set when events were
//! lost before this page and bit 30 when their count is stored after the data) followed by events.
//! Each event starts with a 32-bit word: `type_len` (5 bits) and `time_delta` (27 bits).
//! `type_len` 1..=28 is a data record of `type_len * 4` bytes; 0 is a data record whose length is in
//! the next word; 29 is padding (a discarded event, or with a zero delta the end of the page); 30
//! extends the next delta by `array[0] << 27`; 31 is an absolute timestamp.

use super::format::PageLayout;

const TYPE_PADDING: u32 = 29;
const TYPE_TIME_EXTEND: u32 = 30;
const TYPE_TIME_STAMP: u32 = 31;
const MISSED_EVENTS: u64 = 1 << 31;
const MISSED_STORED: u64 = 1 << 30;
const COMMIT_MASK: u64 = (1 << 27) - 1;
/// Absolute timestamps carry 59 bits; the top 5 come from the running timestamp.
const TS_MSB: u64 = 0xf8 << 56;

/// Events the kernel lost before a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missed {
    None,
    /// Lost, count unknown.
    Unknown,
    Count(u64),
}

/// Why a page could not be read (whatever came before the fault is still returned).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PageError {
    #[error("page of {got} bytes is shorter than its {need}-byte header")]
    Short { got: usize, need: usize },
    #[error("page commit says {commit} bytes of data, but a page holds at most {max}")]
    BadCommit { commit: usize, max: usize },
    #[error("event at page offset {offset} runs past the end of the data ({len} bytes)")]
    Overrun { offset: usize, len: usize },
}

/// One page, checked.
#[derive(Clone, Debug)]
pub struct Page<'a> {
    pub base_ts: u64,
    pub missed: Missed,
    /// The committed event bytes.
    pub data: &'a [u8],
}

/// A data record: its absolute timestamp and bytes (starting with `common_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawEvent<'a> {
    pub ts: u64,
    pub data: &'a [u8],
}

fn read_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn read_word(b: &[u8], at: usize, size: usize) -> Option<u64> {
    match size {
        4 => read_u32(b, at).map(u64::from),
        8 => Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?)),
        _ => None,
    }
}

/// Check a page's header and find its data.
pub fn parse_page<'a>(buf: &'a [u8], layout: &PageLayout) -> Result<Page<'a>, PageError> {
    let need = layout.data_offset;
    if buf.len() < need {
        return Err(PageError::Short {
            got: buf.len(),
            need,
        });
    }
    let base_ts = read_word(buf, layout.timestamp_offset, 8).ok_or(PageError::Short {
        got: buf.len(),
        need,
    })?;
    let commit =
        read_word(buf, layout.commit_offset, layout.commit_size).ok_or(PageError::Short {
            got: buf.len(),
            need,
        })?;
    let size = (commit & COMMIT_MASK) as usize;
    let max = buf.len() - layout.data_offset;
    if size > max {
        return Err(PageError::BadCommit { commit: size, max });
    }
    let data = &buf[layout.data_offset..layout.data_offset + size];
    let missed = if commit & MISSED_EVENTS == 0 {
        Missed::None
    } else if commit & MISSED_STORED != 0 {
        // The count sits right after the data, as a long.
        match read_word(buf, layout.data_offset + size, layout.commit_size) {
            Some(n) => Missed::Count(n),
            None => Missed::Unknown,
        }
    } else {
        Missed::Unknown
    };
    Ok(Page {
        base_ts,
        missed,
        data,
    })
}

impl<'a> Page<'a> {
    pub fn events(&self) -> PageEvents<'a> {
        PageEvents {
            data: self.data,
            pos: 0,
            ts: self.base_ts,
            failed: false,
        }
    }
}

/// The data records of a page, in order. Stops (after yielding the error once) at a malformed event.
pub struct PageEvents<'a> {
    data: &'a [u8],
    pos: usize,
    ts: u64,
    failed: bool,
}

impl<'a> Iterator for PageEvents<'a> {
    type Item = Result<RawEvent<'a>, PageError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let len = self.data.len();
        loop {
            let at = self.pos;
            if at + 4 > len {
                return None;
            }
            let overrun = PageError::Overrun { offset: at, len };
            let word = read_u32(self.data, at).expect("bounds checked");
            let type_len = word & 0x1f;
            let delta = (word >> 5) as u64;
            match type_len {
                TYPE_PADDING => {
                    if delta == 0 {
                        // The rest of the page is unused.
                        self.pos = len;
                        return None;
                    }
                    let Some(skip) = read_u32(self.data, at + 4) else {
                        self.failed = true;
                        return Some(Err(overrun));
                    };
                    self.ts = self.ts.wrapping_add(delta);
                    self.pos = at + 4 + skip as usize;
                    if self.pos > len {
                        self.failed = true;
                        return Some(Err(overrun));
                    }
                }
                TYPE_TIME_EXTEND | TYPE_TIME_STAMP => {
                    let Some(hi) = read_u32(self.data, at + 4) else {
                        self.failed = true;
                        return Some(Err(overrun));
                    };
                    let v = ((hi as u64) << 27) | delta;
                    if type_len == TYPE_TIME_EXTEND {
                        self.ts = self.ts.wrapping_add(v);
                    } else {
                        self.ts = v | (self.ts & TS_MSB);
                    }
                    self.pos = at + 8;
                }
                _ => {
                    let (start, size) = if type_len == 0 {
                        let Some(n) = read_u32(self.data, at + 4) else {
                            self.failed = true;
                            return Some(Err(overrun));
                        };
                        // The length word counts itself; records are 4-byte aligned.
                        let n = (n as usize).saturating_sub(4);
                        (at + 8, (n + 3) & !3)
                    } else {
                        (at + 4, type_len as usize * 4)
                    };
                    if start + size > len || size == 0 {
                        self.failed = true;
                        return Some(Err(overrun));
                    }
                    self.ts = self.ts.wrapping_add(delta);
                    self.pos = start + size;
                    return Some(Ok(RawEvent {
                        ts: self.ts,
                        data: &self.data[start..start + size],
                    }));
                }
            }
        }
    }
}

/// Build pages in the kernel's encoding (tests and the synthetic fixtures use it).
#[derive(Clone, Debug)]
pub struct PageBuilder {
    layout: PageLayout,
    base_ts: u64,
    last_ts: u64,
    data: Vec<u8>,
    missed: Missed,
}

impl PageBuilder {
    pub fn new(layout: PageLayout, base_ts: u64) -> Self {
        PageBuilder {
            layout,
            base_ts,
            last_ts: base_ts,
            data: Vec::new(),
            missed: Missed::None,
        }
    }

    pub fn missed(mut self, m: Missed) -> Self {
        self.missed = m;
        self
    }

    fn header(&mut self, type_len: u32, delta: u64) {
        self.data
            .extend_from_slice(&((type_len & 0x1f) | ((delta as u32) << 5)).to_le_bytes());
    }

    /// Append a data record at `ts` (adds a time extend when the delta needs more than 27 bits).
    pub fn event(&mut self, ts: u64, payload: &[u8]) -> &mut Self {
        let mut delta = ts - self.last_ts;
        if delta >= 1 << 27 {
            self.header(TYPE_TIME_EXTEND, delta & ((1 << 27) - 1));
            self.data
                .extend_from_slice(&((delta >> 27) as u32).to_le_bytes());
            delta = 0;
        }
        self.last_ts = ts;
        let padded = (payload.len() + 3) & !3;
        if padded <= 112 && !payload.is_empty() {
            self.header((padded / 4) as u32, delta);
        } else {
            self.header(0, delta);
            self.data
                .extend_from_slice(&((padded + 4) as u32).to_le_bytes());
        }
        self.data.extend_from_slice(payload);
        self.data
            .resize(self.data.len() + padded - payload.len(), 0);
        self
    }

    /// Append a discarded event of `len` payload bytes (its length word counts itself).
    pub fn padding(&mut self, len: u32) -> &mut Self {
        self.header(TYPE_PADDING, 1);
        self.data.extend_from_slice(&(len + 4).to_le_bytes());
        self.data.resize(self.data.len() + len as usize, 0);
        self.last_ts += 1;
        self
    }

    /// The page bytes, zero-filled to the page size like `trace_pipe_raw` returns them.
    pub fn build(&self) -> Vec<u8> {
        let l = &self.layout;
        let mut page = vec![0u8; l.page_size().max(l.data_offset + self.data.len() + 8)];
        page[l.timestamp_offset..l.timestamp_offset + 8]
            .copy_from_slice(&self.base_ts.to_le_bytes());
        let mut commit = self.data.len() as u64;
        match self.missed {
            Missed::None => {}
            Missed::Unknown => commit |= MISSED_EVENTS,
            Missed::Count(n) => {
                commit |= MISSED_EVENTS | MISSED_STORED;
                let at = l.data_offset + self.data.len();
                page[at..at + 8].copy_from_slice(&n.to_le_bytes());
            }
        }
        page[l.commit_offset..l.commit_offset + l.commit_size]
            .copy_from_slice(&commit.to_le_bytes()[..l.commit_size]);
        page[l.data_offset..l.data_offset + self.data.len()].copy_from_slice(&self.data);
        page
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const L: PageLayout = PageLayout::DEFAULT_64;

    #[test]
    fn reads_small_large_extended_and_padded_events() {
        let mut b = PageBuilder::new(L, 1_000);
        b.event(1_010, &[1, 2, 3, 4, 5, 6, 7, 8]);
        b.padding(12);
        b.event(1_000 + (1 << 30), &[9; 8]); // needs a time extend
        let big = vec![7u8; 200];
        b.event(2_000 + (1 << 30), &big); // length in array[0]
        let page = b.build();
        let p = parse_page(&page, &L).unwrap();
        assert_eq!(p.missed, Missed::None);
        let ev: Vec<_> = p.events().collect::<Result<_, _>>().unwrap();
        assert_eq!(ev.len(), 3);
        assert_eq!(
            ev[0],
            RawEvent {
                ts: 1_010,
                data: &[1, 2, 3, 4, 5, 6, 7, 8]
            }
        );
        // The padding's delta (1 ns) moved the clock; the next delta is relative to it.
        assert_eq!(ev[1].ts, 1_000 + (1 << 30));
        assert_eq!(ev[2].ts, 2_000 + (1 << 30));
        assert_eq!(ev[2].data, &big[..]);
    }

    #[test]
    fn absolute_timestamp_keeps_the_top_bits() {
        let mut data = Vec::new();
        let ts: u64 = (5 << 40) + 12345;
        data.extend_from_slice(
            &(TYPE_TIME_STAMP | (((ts & ((1 << 27) - 1)) as u32) << 5)).to_le_bytes(),
        );
        data.extend_from_slice(&((ts >> 27) as u32).to_le_bytes());
        data.extend_from_slice(&(2u32 | (7 << 5)).to_le_bytes());
        data.extend_from_slice(&[1; 8]);
        let mut page = vec![0u8; 4096];
        page[0..8].copy_from_slice(&((0xf8u64 << 56) | 1).to_le_bytes());
        page[8..16].copy_from_slice(&(data.len() as u64).to_le_bytes());
        page[16..16 + data.len()].copy_from_slice(&data);
        let p = parse_page(&page, &L).unwrap();
        let ev: Vec<_> = p.events().map(Result::unwrap).collect();
        assert_eq!(ev[0].ts, (0xf8u64 << 56) | (ts + 7));
    }

    #[test]
    fn missed_events_are_reported() {
        let page = PageBuilder::new(L, 0).missed(Missed::Count(42)).build();
        assert_eq!(parse_page(&page, &L).unwrap().missed, Missed::Count(42));
        let page = PageBuilder::new(L, 0).missed(Missed::Unknown).build();
        assert_eq!(parse_page(&page, &L).unwrap().missed, Missed::Unknown);
    }

    #[test]
    fn bad_commit_and_overrun_are_errors() {
        let mut page = PageBuilder::new(L, 0).build();
        page[8..16].copy_from_slice(&5000u64.to_le_bytes());
        assert!(matches!(
            parse_page(&page, &L),
            Err(PageError::BadCommit { .. })
        ));
        assert!(matches!(
            parse_page(&page[..10], &L),
            Err(PageError::Short { .. })
        ));
        // An event claiming 28 words in a 12-byte commit.
        let mut page = vec![0u8; 4096];
        page[8..16].copy_from_slice(&12u64.to_le_bytes());
        page[16..20].copy_from_slice(&28u32.to_le_bytes());
        let p = parse_page(&page, &L).unwrap();
        let v: Vec<_> = p.events().collect();
        assert_eq!(v.len(), 1);
        assert!(matches!(v[0], Err(PageError::Overrun { offset: 0, .. })));
    }

    proptest! {
        #[test]
        fn never_panics_on_random_pages(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            if let Ok(p) = parse_page(&bytes, &L.with_page_size(600)) {
                let mut n = 0;
                for e in p.events() {
                    n += 1;
                    if let Ok(e) = e { prop_assert!(!e.data.is_empty()); }
                    prop_assert!(n <= 600);
                }
            }
        }

        #[test]
        fn built_pages_read_back(events in proptest::collection::vec((0u64..(1 << 29), proptest::collection::vec(any::<u8>(), 1..150)), 0..20)) {
            let mut ts = 10_000u64;
            let mut b = PageBuilder::new(L, ts);
            let mut want = Vec::new();
            for (d, payload) in &events {
                ts += d;
                b.event(ts, payload);
                want.push((ts, payload.clone()));
            }
            let page = b.build();
            let page = if page.len() > L.page_size() { return Ok(()) } else { page };
            let p = parse_page(&page, &L).unwrap();
            let got: Vec<_> = p.events().map(Result::unwrap).collect();
            prop_assert_eq!(got.len(), want.len());
            for (g, (t, payload)) in got.iter().zip(&want) {
                prop_assert_eq!(g.ts, *t);
                prop_assert_eq!(&g.data[..payload.len()], &payload[..]);
            }
        }
    }
}
