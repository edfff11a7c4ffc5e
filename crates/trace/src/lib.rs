//! Kernel scheduling traces, klogger's successor: punctual records the scheduler's and the
//! interrupt handlers' events through a private tracefs instance, keeps them in a compact file of its
//! own, and turns them into the seeds' answers: effective quanta, billing at any HZ, wake-up latency,
//! interrupt and softirq durations per source and subsystem.
//!
//! - [`kernel`]: tracefs, the private instance, format files, the binary page format, decoding;
//! - [`record`]: the drain that turns per-CPU pages into a trace file while the kernel traces;
//! - [`capture`]: the same drain into memory, only the events `--explain` reads, with steal samples;
//! - [`idle_exit`]: switches out of idle the kernel did not record, put back from the evidence;
//! - [`file`](mod@file): the trace file (writer, and a reader that reports damage instead of panicking);
//! - [`analyze`]: analyses over [`event::Event`]s, whatever their origin ([`synth`] builds them in tests);
//! - [`render`]: tables, result documents and figures from an analysis;
//! - [`measure`]: `trace record` and `trace analyze` as measurements of the lifecycle.

pub mod analyze;
pub mod capture;
pub mod error;
pub mod event;
pub mod file;
pub mod idle_exit;
pub mod kernel;
pub mod measure;
pub mod record;
pub mod render;
pub mod ring;
pub mod stall;
pub mod synth;

pub use error::TraceError;
