//! Getting a thread ready for real-time work, and putting everything back afterwards.
//!
//! Every setting is held by a guard that restores the previous value on drop: scheduling policy and
//! priority ([`sched`]), CPU affinity ([`affinity`]), `mlockall` ([`memlock`]), `/dev/cpu_dma_latency`
//! ([`dma`]), timer slack ([`slack`]). Settings that outlive the process (sysctls, IRQ affinities,
//! other tasks' affinities, tracefs instances) go through the [`journal`], which also writes them to a
//! state file so a crashed run is undone by the next one. [`privilege`] decides, before anything starts,
//! what is allowed and what falls back. [`signals`] turns SIGINT/SIGTERM into a stop flag. [`child`]
//! prepares every child process punctual starts (dies with punctual, inherits nothing it should not).

pub mod affinity;
pub mod child;
pub mod dma;
pub mod env;
pub mod error;
pub mod futex;
pub mod held;
pub mod host;
pub mod idle_poll;
pub mod journal;
mod knobs;
pub mod memlock;
mod policy;
pub mod preempt;
pub mod privilege;
pub mod pty;
pub mod rr;
pub mod rtgroup;
pub mod sched;
pub mod signals;
pub mod slack;
pub mod stacked;
mod state;
mod task;
pub use task::{
    is_realtime, parent_pid, pidfd_exited, pidfd_open, runnable_tasks, stat_fields, threads,
    ProcStat, Runnable,
};
pub mod thread;

pub use affinity::{
    format_cpu_list, housekeeping_cpus, online_cpus, parse_cpu_list, AffinityGuard,
};
pub use error::RtError;
pub use policy::{Policy, SchedParams};
pub use privilege::{Privileges, RtPlan, RtWant};
/// Names from files made safe to show (lives in punctual-time, the lowest crate, so every crate can use it).
pub use punctual_time::text;
pub use sched::SchedGuard;
pub use signals::Interrupts;
pub use thread::{setup_current_thread, ThreadGuards, ThreadRequest};
