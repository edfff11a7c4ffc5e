//! Copy bandwidth (Etsion Table 2, "Cache BW", measured with memcpy) at sizes that fit each cache
//! level and one that does not: the same copy, timed per call, gives MB/s at L1, L2, L3 and memory.
//!
//! Two copies are measured: the C library's `memcpy` (the paper's), and a plain loop of 16-byte
//! vector loads and stores. They differ where the library picks a poor strategy for the machine:
//! glibc copies mid-sized blocks with `rep movsb`, which some virtual machines run at about one byte
//! per cycle, so `memcpy` of an L1-sized block can be slower than of one in memory. The loop shows
//! what the caches deliver.

use crate::shared::on_thread;
use crate::BenchError;
use punctual_result::Fallback;
use punctual_rt::SchedParams;
use punctual_stats::Recorder;
use punctual_time::clock::read_clock;
use std::sync::atomic::{AtomicBool, Ordering};

/// One size to copy and what it stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopySize {
    pub label: String,
    pub bytes: usize,
}

/// The smallest and largest copies accepted.
pub const MIN_BYTES: usize = 1 << 10;

/// Sizes inside L1, L2 and L3 (a quarter of each, so source and destination together fill half of
/// it) and in memory
/// (four times L3, at least 64 MiB), from the cache sizes of `cpu`.
pub fn default_sizes(cpu: usize) -> Vec<CopySize> {
    let l1 = punctual_load::cache_bytes(cpu, 1).unwrap_or(32 << 10);
    let l2 = punctual_load::cache_bytes(cpu, 2).unwrap_or(256 << 10);
    let l3 = punctual_load::cache_bytes(cpu, 3).unwrap_or(8 << 20);
    let mem = (4 * l3).max(64 << 20);
    vec![
        CopySize {
            label: "L1".into(),
            bytes: l1 / 4,
        },
        CopySize {
            label: "L2".into(),
            bytes: l2 / 4,
        },
        CopySize {
            label: "L3".into(),
            bytes: l3 / 4,
        },
        CopySize {
            label: "memory".into(),
            bytes: mem,
        },
    ]
}

/// Where a copy of `bytes` runs on `cpu`: the smallest cache whose half holds source and
/// destination (the rule of [`default_sizes`]), else memory.
pub fn level_of(bytes: usize, cpu: usize) -> String {
    for level in 1..=3u32 {
        if let Some(cache) = punctual_load::cache_bytes(cpu, level) {
            if bytes.saturating_mul(4) <= cache {
                return format!("L{level}");
            }
        }
    }
    "memory".into()
}

/// Memory the kernel says is available now (MemAvailable), in bytes.
pub fn mem_available() -> Option<usize> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: usize = s
        .lines()
        .find(|l| l.starts_with("MemAvailable:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// Refuse sizes that cannot be copied here: below [`MIN_BYTES`] (the clock read would dominate), or
/// so large that source and destination would not fit in half the available memory.
pub fn check_sizes(sizes: &[CopySize]) -> Result<(), BenchError> {
    if sizes.is_empty() {
        return Err(BenchError::Invalid("memcpy: give at least one size".into()));
    }
    let limit = mem_available().unwrap_or(usize::MAX) / 2;
    for s in sizes {
        if s.bytes < MIN_BYTES {
            return Err(BenchError::Invalid(format!(
                "memcpy: size {} B is below {MIN_BYTES} B, where reading the clock costs more than the copy; use 1KiB or more",
                s.bytes
            )));
        }
        if s.bytes.saturating_mul(2) > limit {
            return Err(BenchError::Invalid(format!(
                "memcpy: size {} needs {} for source and destination, more than half the available memory ({}); use a smaller size",
                format_bytes(s.bytes),
                format_bytes(s.bytes.saturating_mul(2)),
                format_bytes(limit * 2)
            )));
        }
    }
    Ok(())
}

/// `1.5 MiB`, `32 KiB`, `100 B`.
pub fn format_bytes(b: usize) -> String {
    const UNITS: [(&str, usize); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (u, m) in UNITS {
        if b >= m {
            let v = b as f64 / m as f64;
            return if v.fract() == 0.0 {
                format!("{v:.0} {u}")
            } else {
                format!("{v:.1} {u}")
            };
        }
    }
    format!("{b} B")
}

/// Parse `16KiB`, `1MiB`, `4M`, `512K`, `1G`, `100B`, `65536`.
pub fn parse_bytes(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: usize = num
        .parse()
        .map_err(|_| format!("size '{s}' must start with a whole number, e.g. 64KiB"))?;
    let mult: usize = match unit.trim() {
        "" | "B" => 1,
        "K" | "KiB" | "k" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        other => {
            return Err(format!(
                "size '{s}': unknown unit '{other}' (use B, KiB, MiB or GiB)"
            ))
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("size '{s}' is too large"))
}

/// How the bytes are copied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// The C library's memcpy.
    Memcpy,
    /// 16-byte vector loads and stores in a loop.
    Loop,
}

impl Method {
    pub const ALL: [Method; 2] = [Method::Memcpy, Method::Loop];
    pub fn name(self) -> &'static str {
        match self {
            Method::Memcpy => "memcpy",
            Method::Loop => "loop",
        }
    }
}

impl std::str::FromStr for Method {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Method::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("unknown copy method '{s}' (valid: memcpy, loop)"))
    }
}

/// Copy with 16-byte loads and stores. The stores are volatile, which keeps the compiler from turning
/// the loop back into a call to memcpy (each is still one plain vector store).
#[inline(never)]
fn copy_loop(dst: &mut [u8], src: &[u8]) {
    let n = dst.len().min(src.len());
    let blocks = n / 64;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: every access is inside the first `blocks * 64` bytes of both slices; SSE2 is baseline.
    unsafe {
        use core::arch::x86_64::{__m128i, _mm_loadu_si128};
        let (mut d, mut s) = (
            dst.as_mut_ptr() as *mut __m128i,
            src.as_ptr() as *const __m128i,
        );
        for _ in 0..blocks {
            let (a, b, c, e) = (
                _mm_loadu_si128(s),
                _mm_loadu_si128(s.add(1)),
                _mm_loadu_si128(s.add(2)),
                _mm_loadu_si128(s.add(3)),
            );
            d.write_volatile(a);
            d.add(1).write_volatile(b);
            d.add(2).write_volatile(c);
            d.add(3).write_volatile(e);
            d = d.add(4);
            s = s.add(4);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    for (d, s) in dst[..blocks * 64]
        .chunks_exact_mut(64)
        .zip(src.chunks_exact(64))
    {
        let block: [u8; 64] = s.try_into().expect("64-byte chunk");
        std::hint::black_box(d).copy_from_slice(&block);
    }
    dst[blocks * 64..n].copy_from_slice(&src[blocks * 64..n]);
}

#[derive(Clone, Debug)]
pub struct MemcpyConfig {
    pub sizes: Vec<CopySize>,
    pub methods: Vec<Method>,
    /// Time spent copying at each size.
    pub per_size_ns: u64,
    pub cpu: Option<usize>,
    pub sched: SchedParams,
}

pub struct SizeResult {
    pub size: CopySize,
    pub method: Method,
    /// Time per copy, ns.
    pub per_copy: Recorder,
    pub copies: u64,
    pub total_ns: u64,
    /// Bandwidth of each copy in MB/s (10^6 bytes), mean and population standard deviation.
    pub mb_per_s_mean: f64,
    pub mb_per_s_stddev: f64,
}

impl SizeResult {
    /// Overall bandwidth: bytes copied over time spent, MB/s.
    pub fn mb_per_s(&self) -> f64 {
        if self.total_ns == 0 {
            0.0
        } else {
            self.size.bytes as f64 * self.copies as f64 * 1e3 / self.total_ns as f64
        }
    }
}

pub struct MemcpyOutcome {
    pub sizes: Vec<SizeResult>,
    pub fallback: Option<Fallback>,
}

fn copy_size(size: &CopySize, method: Method, per_size_ns: u64, stop: &AtomicBool) -> SizeResult {
    let mono = libc::CLOCK_MONOTONIC;
    let src: Vec<u8> = (0..size.bytes).map(|i| (i * 131 % 251) as u8).collect();
    let mut dst = vec![1u8; size.bytes];
    let mut rec = Recorder::new();
    let (mut copies, mut total) = (0u64, 0u64);
    let (mut sum, mut sum2) = (0f64, 0f64);
    let copy = |dst: &mut Vec<u8>| match method {
        Method::Memcpy => dst.copy_from_slice(std::hint::black_box(&src)),
        Method::Loop => copy_loop(dst, std::hint::black_box(&src)),
    };
    copy(&mut dst); // warm the caches (and the pages)
    let end = read_clock(mono) + per_size_ns;
    loop {
        let t0 = read_clock(mono);
        copy(&mut dst);
        std::hint::black_box(&mut dst);
        let t1 = read_clock(mono);
        let ns = (t1 - t0).max(1);
        rec.record(ns);
        copies += 1;
        total += ns;
        let bw = size.bytes as f64 * 1e3 / ns as f64;
        sum += bw;
        sum2 += bw * bw;
        if t1 >= end || stop.load(Ordering::Relaxed) {
            break;
        }
    }
    let mean = sum / copies as f64;
    let var = (sum2 / copies as f64 - mean * mean).max(0.0);
    assert_eq!(dst, src, "the copy must copy");
    SizeResult {
        size: size.clone(),
        method,
        per_copy: rec,
        copies,
        total_ns: total,
        mb_per_s_mean: mean,
        mb_per_s_stddev: var.sqrt(),
    }
}

pub fn run(cfg: &MemcpyConfig, stop: &AtomicBool) -> Result<MemcpyOutcome, BenchError> {
    check_sizes(&cfg.sizes)?;
    if cfg.per_size_ns == 0 || cfg.methods.is_empty() {
        return Err(BenchError::Invalid(
            "memcpy: the time per size must be more than zero, with at least one method".into(),
        ));
    }
    let (sizes, fallback) = on_thread(cfg.cpu, cfg.sched, || {
        let mut out = Vec::new();
        for s in &cfg.sizes {
            for &m in &cfg.methods {
                if stop.load(Ordering::Relaxed) {
                    return out;
                }
                out.push(copy_size(s, m, cfg.per_size_ns, stop));
            }
        }
        out
    })?;
    Ok(MemcpyOutcome { sizes, fallback })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_format() {
        assert_eq!(parse_bytes("16KiB").unwrap(), 16 << 10);
        assert_eq!(parse_bytes("4M").unwrap(), 4 << 20);
        assert_eq!(parse_bytes("100").unwrap(), 100);
        assert!(parse_bytes("KiB").is_err());
        assert!(parse_bytes("3 parsecs")
            .unwrap_err()
            .contains("unknown unit"));
        assert!(parse_bytes("99999999999999G")
            .unwrap_err()
            .contains("too large"));
        assert_eq!(format_bytes(32 << 10), "32 KiB");
        assert_eq!(format_bytes(1536 << 10), "1.5 MiB");
        assert_eq!(format_bytes(12), "12 B");
    }

    #[test]
    fn impossible_sizes_are_refused() {
        let one = |b| {
            vec![CopySize {
                label: "x".into(),
                bytes: b,
            }]
        };
        assert!(check_sizes(&one(100)).is_err());
        assert!(check_sizes(&one(usize::MAX / 2))
            .unwrap_err()
            .to_string()
            .contains("available memory"));
        assert!(check_sizes(&[]).is_err());
        assert!(check_sizes(&one(64 << 10)).is_ok());
    }

    #[test]
    fn the_loop_copies_every_byte() {
        for n in [0usize, 1, 63, 64, 65, 1000, 4096 + 17] {
            let src: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
            let mut dst = vec![0u8; n];
            copy_loop(&mut dst, &src);
            assert_eq!(dst, src, "size {n}");
        }
    }

    #[test]
    fn default_sizes_grow_from_l1_to_memory() {
        let s = default_sizes(0);
        assert_eq!(
            s.iter().map(|s| s.label.as_str()).collect::<Vec<_>>(),
            ["L1", "L2", "L3", "memory"]
        );
        assert!(s.windows(2).all(|w| w[0].bytes < w[1].bytes));
    }
}
