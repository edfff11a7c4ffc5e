//! Kernel settings files more than one module names: the preemption mode file, switched by
//! [`crate::preempt`] and checked by the journal before a replay writes it.

/// The debugfs directory of the scheduler's knobs.
pub const SCHED_DIR: &str = "/sys/kernel/debug/sched";
/// The file a PREEMPT_DYNAMIC kernel switches its preemption mode through.
pub const PREEMPT_PATH: &str = "/sys/kernel/debug/sched/preempt";
/// The modes Linux 6.x knows (`lazy` since 6.13).
pub const MODES: [&str; 4] = ["none", "voluntary", "full", "lazy"];

/// Whether `s` names a preemption mode.
pub fn is_mode(s: &str) -> bool {
    MODES.contains(&s)
}
