//! Facts about the machine a result was measured on (SPEC section 3, `host`), and the settings a
//! run could not have. Plain data: `punctual-rt` detects and decides them.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostFacts {
    pub kernel: String,
    /// Preemption model: `none`, `voluntary`, `full`, `lazy` or `rt`, prefixed `dynamic: ` on
    /// PREEMPT_DYNAMIC kernels, suffixed with where it was read when not from the running kernel.
    pub preempt: String,
    /// `/sys/kernel/realtime` (PREEMPT_RT kernels).
    pub realtime: bool,
    pub cpus: usize,
    pub clocksource: String,
    pub virtualized: bool,
    /// CONFIG_HZ, from the kernel configuration, when it can be read.
    pub hz: Option<u32>,
    #[serde(default)]
    pub hostname: String,
    #[serde(default)]
    pub cpu_model: String,
}

/// A setting that could not be had, why, and how to get it. Recorded in the result document.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fallback {
    pub setting: String,
    pub wanted: String,
    pub got: String,
    pub why: String,
    pub fix: String,
}

impl std::fmt::Display for Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: wanted {}, running with {} ({}). Fix: {}",
            self.setting, self.wanted, self.got, self.why, self.fix
        )
    }
}
