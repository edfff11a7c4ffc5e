//! The work each load does inside its child process. Bodies run until SIGTERM (or the parent's
//! death, delivered as SIGTERM), then clean up and report how much work they did.

pub mod build;
pub mod find;
pub mod hackbench;
pub mod mem;
pub mod sort;

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
    /// CPU time the instance spent on its work (user + system, its children included, from the start
    /// of the body: the process's own start-up is left out), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ns: Option<u64>,
}

impl LoadReport {
    pub fn ops_per_second(&self) -> f64 {
        if self.elapsed_ns == 0 {
            0.0
        } else {
            self.ops as f64 * 1e9 / self.elapsed_ns as f64
        }
    }

    /// Work per second of the instance's own CPU time (independent of how long it waited for the CPU).
    pub fn ops_per_cpu_second(&self) -> Option<f64> {
        self.cpu_ns
            .filter(|&c| c > 0)
            .map(|c| self.ops as f64 * 1e9 / c as f64)
    }
}

#[derive(Clone, Debug, Default)]
pub struct BodyOptions {
    pub cpu: Option<usize>,
    /// Scratch directory for loads that write files (removed by the parent; our files by us).
    pub dir: Option<PathBuf>,
}

/// The name a load process gives itself (`load-io`, ...): what `ps`, `top` and `--explain`'s
/// offenders show. Without it a load is one more `punctual`, which reads like punctual's own
/// threads (kurt-periodic's disk load was the top `task` offender of its (c) disk rows as
/// `punctual`).
pub fn process_name(kind: LoadKind) -> String {
    let mut n = format!("load-{}", kind.name());
    n.truncate(15);
    n
}

/// Give the calling thread (a load process's main thread: the process) its load's name, which the
/// threads it starts inherit.
pub fn name_process(kind: LoadKind) {
    if let Ok(c) = std::ffi::CString::new(process_name(kind)) {
        // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes, which `c` is.
        unsafe { libc::prctl(libc::PR_SET_NAME, c.as_ptr()) };
    }
}

/// Run a load body until SIGTERM/SIGINT, then return its report.
pub fn run_body(kind: LoadKind, opts: &BodyOptions) -> std::io::Result<LoadReport> {
    run_body_with_ready(kind, opts, || ())
}

/// The line a load writes on its stdout once it handles SIGTERM and starts working
/// (see [`crate::Loads::wait_ready`]).
pub const READY_LINE: &str = "{\"ready\":true}";

/// [`run_body`], calling `ready` once the stop signals are handled and the work is about to start.
pub fn run_body_with_ready(
    kind: LoadKind,
    opts: &BodyOptions,
    ready: impl FnOnce(),
) -> std::io::Result<LoadReport> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [libc::SIGTERM, libc::SIGINT] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    ready();
    let start = Instant::now();
    let cpu0 = cpu_time_with_children();
    let ops = match kind {
        LoadKind::Cpu => cpu(&stop),
        LoadKind::Io => io(&stop, opts)?,
        LoadKind::Sort => sort::run(&stop, opts.cpu),
        LoadKind::Find => find::run(&stop, &find::default_root()),
        LoadKind::Build => {
            let r = build::run(&stop, &opts.dir.clone().unwrap_or_else(std::env::temp_dir));
            tidy_scratch(opts);
            r?
        }
        LoadKind::Hackbench => hackbench::run(&stop)?,
        LoadKind::Mem => mem::run(&stop)?,
    };
    Ok(LoadReport {
        kind: kind.name().into(),
        pid: std::process::id(),
        cpu: opts.cpu,
        ops,
        elapsed_ns: start.elapsed().as_nanos() as u64,
        cpu_ns: cpu_time_with_children()
            .zip(cpu0)
            .map(|(end, start)| end.saturating_sub(start)),
    })
}

/// Remove the scratch directory the supervisor gave us once it is empty (the last instance to stop
/// tidies up, which matters when punctual itself was killed). Never the system's temporary directory.
fn tidy_scratch(opts: &BodyOptions) {
    if let Some(d) = &opts.dir {
        let _ = std::fs::remove_dir(d);
    }
}

/// User + system time of this process and its reaped children.
fn cpu_time_with_children() -> Option<u64> {
    let mut total = 0u64;
    for who in [libc::RUSAGE_SELF, libc::RUSAGE_CHILDREN] {
        // SAFETY: rusage is plain C data (integers and timevals): all zeros is valid.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: getrusage writes one rusage into `ru`, a live local of that type.
        if unsafe { libc::getrusage(who, &mut ru) } != 0 {
            return None;
        }
        for tv in [ru.ru_utime, ru.ru_stime] {
            total += tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1000;
        }
    }
    Some(total)
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
    tidy_scratch(opts);
    result.map(|()| ops)
}
