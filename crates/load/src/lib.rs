//! Background loads. Each load instance is a child process running one [`LoadKind`]'s body (the
//! punctual binary re-executed with a hidden `__load` subcommand), pinned where the spec asks, in a
//! process group of its own, with a parent-death signal so it cannot outlive punctual, and reaped
//! when [`Loads`] is stopped or dropped. A body counts its work and reports it on exit, so the cost
//! of a load can be put beside its effect.

mod body;
mod spec;
mod supervise;

// The build load's generated project, also timed as a work unit by `mckenney-choose`.
pub use body::build;
pub use body::sort::{array_len as sort_array_len, cache_bytes, introsort};
pub use body::{
    name_process, process_name, run_body, run_body_with_ready, BodyOptions, LoadReport, READY_LINE,
};
pub use spec::{LoadItem, LoadKind, LoadSpec};
pub use supervise::{LoadError, Loads, StartOptions, HIDDEN_SUBCOMMAND};
