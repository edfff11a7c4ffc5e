//! The run-time preemption mode of a PREEMPT_DYNAMIC kernel (debugfs `sched/preempt`). It is
//! switched only through the journal, so a run killed while another mode is set has the original
//! put back by the next run or `punctual shield --restore`, as the other settings are.

use crate::journal::ChangeGuard;
pub use crate::knobs::{is_mode, MODES, PREEMPT_PATH, SCHED_DIR};
use std::path::Path;

/// Set `mode` in the `sched/preempt` file at `path`, journalled first with `original` (the
/// mode to put back: the file lists every mode, so its contents cannot be written back). The
/// original returns when the guard drops, on every path, or at the next start if this process
/// dies. A write the kernel refuses leaves nothing changed and nothing journalled.
pub fn set(path: &Path, original: &str, mode: &str) -> std::io::Result<ChangeGuard> {
    for m in [original, mode] {
        if !is_mode(m) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "'{}' is not a preemption mode ({})",
                    crate::text::display_name(m),
                    MODES.join(", ")
                ),
            ));
        }
    }
    crate::journal::global().write_file_back_to(path, mode, original.to_string())
}
