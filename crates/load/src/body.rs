//! The work each load does inside its child process. Bodies run until SIGTERM (or the parent's
//! death, delivered as SIGTERM), then clean up and report how much work they did.

use crate::LoadKind;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// What a load instance did, printed as one JSON line on its stdout when it stops.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    pub kind: String,
    pub pid: u32,
    pub cpu: Option<usize>,
    /// Units of work done (see [`LoadKind::unit`]).
    pub ops: u64,
    pub elapsed_ns: u64,
}

impl LoadReport {
    pub fn ops_per_second(&self) -> f64 {
        if self.elapsed_ns == 0 {
            0.0
        } else {
            self.ops as f64 * 1e9 / self.elapsed_ns as f64
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct BodyOptions {
    pub cpu: Option<usize>,
    /// Scratch directory for loads that write files (removed by the parent; our files by us).
    pub dir: Option<PathBuf>,
}

/// Run a load body until SIGTERM/SIGINT, then return its report.
pub fn run_body(kind: LoadKind, opts: &BodyOptions) -> std::io::Result<LoadReport> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [libc::SIGTERM, libc::SIGINT] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let start = Instant::now();
    let ops = match kind {
        LoadKind::Cpu => cpu(&stop),
        LoadKind::Io => io(&stop, opts)?,
    };
    Ok(LoadReport {
        kind: kind.name().into(),
        pid: std::process::id(),
        cpu: opts.cpu,
        ops,
        elapsed_ns: start.elapsed().as_nanos() as u64,
    })
}

fn cpu(stop: &AtomicBool) -> u64 {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut ops = 0u64;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..1024 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        std::hint::black_box(x);
        ops += 1024;
    }
    ops
}

fn io(stop: &AtomicBool, opts: &BodyOptions) -> std::io::Result<u64> {
    const BLOCK: usize = 1 << 20;
    const FILE_LIMIT: u64 = 64; // MiB; then start over, so the disk does not fill
    let dir = opts.dir.clone().unwrap_or_else(std::env::temp_dir);
    let path = dir.join(format!("punctual-io-{}.dat", std::process::id()));
    let block: Vec<u8> = (0..BLOCK).map(|i| (i * 31 % 251) as u8).collect();
    let mut ops = 0u64;
    let result = (|| {
        let mut f = std::fs::File::create(&path)?;
        let mut in_file = 0u64;
        while !stop.load(Ordering::Relaxed) {
            if in_file == FILE_LIMIT {
                f = std::fs::File::create(&path)?;
                in_file = 0;
            }
            f.write_all(&block)?;
            f.sync_data()?;
            in_file += 1;
            ops += 1;
        }
        Ok(())
    })();
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir(&dir); // only succeeds when empty: the last instance tidies up
    result.map(|()| ops)
}
