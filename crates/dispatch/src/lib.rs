//! punctual's dispatcher: KURT's explicit plan scheduler, in user space.
//!
//! [`prepare`] turns a validated plan into per-CPU work: slots (one per periodic task, one per action
//! that events use), prepared actions (sockets opened, plugins loaded, exec children forked, wake
//! channels created and their clients attached). [`execute`] runs one pinned real-time thread per
//! dispatcher CPU through [`engine::dispatch`], with the [`watchdog`] beside them, and returns per-slot
//! statistics (KURT's rtstats). [`shield`] is real-time mode: other tasks and IRQs moved off the
//! dispatcher CPUs, through the journal so it is always undone. [`preflight`] finds what `run`
//! would refuse before anything on the system changes.
//!
//! Each phase is a module of its own, re-exported here: `config` (what a run is asked), `budget`
//! (spin caps, client placement), `interference` (phasing around gaps), `setup` ([`prepare`]),
//! `run` ([`execute`], one thread per CPU) and `teardown` (joining, the [`Outcome`]).

pub mod actions;
mod budget;
mod config;
pub mod engine;
mod interference;
pub mod measure;
pub mod partner;
pub mod preflight;
mod procs;
pub mod rephase;
pub mod report;
pub mod request;
pub mod rtapp_client;
mod run;
mod setup;
pub mod share;
pub mod shield;
mod slot;
mod teardown;
pub mod watchdog;

pub use budget::{
    busiest_irq_cpu, cpu_spin, dispatch_margin_cap, place_clients, quiet_cpu, releases_per_second,
    spin_cap, wake_lead_cap, wake_lead_caps,
};
pub use config::{DispatchError, RunConfig, DISPATCH_SPIN_BUDGET, WAKE_SPIN_BUDGET};
pub use interference::{
    describe_watch, on_grid, phase_around_interference, watch_interference, watch_json, Avoidance,
    INTERFERENCE_MAX_HYPERPERIOD, INTERFERENCE_THRESHOLD_NS, INTERFERENCE_WATCH_NS,
};
pub use run::{execute, execute_with, heartbeats_for, live_progress_for, progress_for};
pub use setup::{prepare, Prepared, SlotInfo};
pub use teardown::{CpuResult, Outcome, SlotResult, OVERRUN_GRACE_NS};
