//! Crafted compact plans (issue 18): every count, length and record is checked against the file
//! before anything is allocated on its word. A global allocator counts the bytes this test binary
//! holds at its peak (the tests run one at a time behind a lock, so the peak is theirs).

use punctual_plan::compiled::{self, FIXED_HEADER, RECORD};
use punctual_plan::{parse_str, PlanError};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

struct Counting;

static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

// SAFETY: every call is forwarded to the system allocator unchanged; the counters only observe.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = System.alloc(l);
        if !p.is_null() {
            PEAK.fetch_max(NOW.fetch_add(l.size(), Relaxed) + l.size(), Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        NOW.fetch_sub(l.size(), Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(l);
        if !p.is_null() {
            PEAK.fetch_max(NOW.fetch_add(l.size(), Relaxed) + l.size(), Relaxed);
        }
        p
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = System.realloc(p, l, new);
        if !q.is_null() {
            NOW.fetch_sub(l.size(), Relaxed);
            PEAK.fetch_max(NOW.fetch_add(new, Relaxed) + new, Relaxed);
        }
        q
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const PLAN: &str = r#"
[plan]
name = "crafted"

[[action]]
name = "m"
kind = "mark"

[[event]]
at = "1ms"
use = "m"

[[event]]
at = "2ms"
use = "m"
data = [1, 2]
"#;

fn good() -> Vec<u8> {
    compiled::to_bytes(&parse_str(PLAN, "p.toml", None).unwrap())
}

fn header_len(b: &[u8]) -> usize {
    u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize
}

/// Run `f` and return its result with the most bytes it held at once beyond what was held before.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = NOW.load(Relaxed);
    PEAK.store(base, Relaxed);
    let out = f();
    (out, PEAK.load(Relaxed).saturating_sub(base))
}

/// The error must be `Corrupt` naming `field`, and reading must not have held more than 1 MiB.
fn refused(bytes: &[u8], field: &str) -> String {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for (how, (r, peak)) in [
        (
            "from_bytes",
            peak_of(|| compiled::from_bytes(bytes, "x.pplan")),
        ),
        (
            "read (stream)",
            peak_of(|| compiled::read(bytes, "x.pplan")),
        ),
    ] {
        match r {
            Err(PlanError::Corrupt { field: f, .. }) if f == field || how != "from_bytes" => {}
            other => panic!("{how}: expected a corrupt {field}, got {other:?}"),
        }
        assert!(
            peak < 1 << 20,
            "{how}: held {peak} bytes reading a corrupt {field}"
        );
    }
    compiled::from_bytes(bytes, "x.pplan")
        .unwrap_err()
        .to_string()
}

#[test]
fn the_good_plan_reads_back() {
    let b = good();
    let p = compiled::from_bytes(&b, "x.pplan").unwrap();
    assert_eq!(p.events.len(), 2);
    assert_eq!(compiled::read(&b[..], "x.pplan").unwrap().events, p.events);
}

#[test]
fn crafted_plan_event_count_beyond_the_file_is_refused_before_allocating() {
    let mut b = good();
    // The fuzzer's count: 109,951,162,777,640 events, 2.6 PB of records in a file of 200 bytes.
    b[16..24].copy_from_slice(&109_951_162_777_640u64.to_le_bytes());
    let e = refused(&b, "event count");
    assert!(e.contains("corrupt compiled plan: event count"), "{e}");
    // Under the sane maximum but still far beyond the file: refused by size; a stream without a
    // size fails at the first missing record, having held only what it read.
    b[16..24].copy_from_slice(&(u32::MAX as u64).to_le_bytes());
    let e = refused(&b, "event count");
    assert!(e.contains("4294967295 events need"), "{e}");
    // One event too few announced: bytes after the events.
    b[16..24].copy_from_slice(&1u64.to_le_bytes());
    assert!(refused(&b, "event count").contains("bytes after the events"));
}

#[test]
fn crafted_plan_header_length_beyond_the_file_is_refused() {
    let mut b = good();
    b[12..16].copy_from_slice(&(60u32 << 20).to_le_bytes());
    let e = refused(&b, "header length");
    assert!(e.contains("after the fixed header"), "{e}");
    b[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(refused(&b, "header length").contains("implausible"));
}

#[test]
fn crafted_plan_truncated_records_are_refused() {
    let b = good();
    for cut in [1, RECORD - 1, RECORD, RECORD + 5] {
        let e = refused(&b[..b.len() - cut], "event count");
        assert!(e.contains("truncated"), "{e}");
    }
    // Cut inside the header text and inside the fixed header.
    let h = header_len(&b);
    refused(&b[..FIXED_HEADER + h / 2], "header length");
    refused(&b[..FIXED_HEADER - 3], "fixed header");
}

#[test]
fn crafted_plan_bad_record_fields_are_named() {
    let b = good();
    let last = b.len() - RECORD;
    let cases: [(usize, u8, &str); 4] = [
        (last + 8, 7, "event action"),
        (last + 10, 13, "event length"),
        (last + 11, 1, "event flags"),
        (last + 7, 0, "event time"), // the last event's time falls below the first's
    ];
    for (at, v, field) in cases {
        let mut c = b.clone();
        c[at] = v;
        if field == "event time" {
            c[last..last + 8].copy_from_slice(&5u64.to_le_bytes());
        }
        let e = refused(&c, field);
        assert!(e.contains(field), "{e}");
    }
    let mut c = b.clone();
    c[24] = 1;
    assert!(refused(&c, "reserved").contains("reserved"));
}

#[test]
fn crafted_plan_loaded_from_a_file_is_checked_against_its_size() {
    let mut b = good();
    b[16..24].copy_from_slice(&109_951_162_777_640u64.to_le_bytes());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crafted.pplan");
    std::fs::write(&path, &b).unwrap();
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (r, peak) = peak_of(|| punctual_plan::load(&path));
    match r {
        Err(PlanError::Corrupt { field, .. }) => assert_eq!(field, "event count"),
        other => panic!("expected a corrupt event count, got {other:?}"),
    }
    // The 1 MiB read buffer is the only large allocation.
    assert!(peak < 2 << 20, "held {peak} bytes");
}
