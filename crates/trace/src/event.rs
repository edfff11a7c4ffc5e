//! The events punctual records, decoded: what the analyses read, whichever way they were obtained
//! (recorded from the kernel, read back from a trace file, or built by a test).

use serde::{Deserialize, Serialize};

/// One event: when (trace clock, ns), on which CPU, and what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub ts: u64,
    pub cpu: u32,
    pub kind: EventKind,
}

/// `prev_state` bit the kernel sets when the task was preempted (`R+`: TASK_REPORT_MAX).
pub const STATE_PREEMPTED: u64 = 0x100;
/// The task states below TASK_REPORT_MAX (`S`, `D`, `T`, `t`, `X`, `Z`, `P`, `I`).
pub const STATE_MASK: u64 = 0xff;
const STATE_DEAD: u64 = 0x10 | 0x20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// `sched_switch`: `prev` leaves the CPU in `prev_state`, `next` starts running.
    Switch {
        prev_pid: i32,
        prev_prio: i32,
        prev_state: u64,
        next_pid: i32,
        next_prio: i32,
    },
    /// `sched_waking`: a wake-up was issued (in the waker's context).
    Waking {
        pid: i32,
        prio: i32,
        target_cpu: i32,
    },
    /// `sched_wakeup`: the woken task was put on a run queue.
    Wakeup {
        pid: i32,
        prio: i32,
        target_cpu: i32,
    },
    /// `sched_wakeup_new`: a new task was put on a run queue for the first time.
    WakeupNew {
        pid: i32,
        prio: i32,
        target_cpu: i32,
    },
    /// `sched_process_fork`.
    Fork {
        parent: i32,
        child: i32,
    },
    /// `sched_process_exit`.
    Exit {
        pid: i32,
    },
    /// `irq_handler_entry` / `irq_handler_exit`: a device interrupt handler.
    IrqEntry {
        irq: i32,
    },
    IrqExit {
        irq: i32,
        handled: bool,
    },
    /// `softirq_entry` / `softirq_exit`: a bottom half (vector number, see [`softirq_name`]).
    SoftirqEntry {
        vec: u32,
    },
    SoftirqExit {
        vec: u32,
    },
    /// `hrtimer_expire_entry` / `hrtimer_expire_exit`: a high-resolution timer callback. `now` is
    /// the timer's own clock when its interrupt (or softirq) began expiring timers (absent in
    /// traces written before it was kept).
    HrtimerEntry {
        timer: u64,
        function: u64,
        now: Option<u64>,
    },
    /// `hrtimer_start`: a timer armed to expire at `expires` on its own clock (the hard expiry;
    /// the kernel programs the interrupt for it).
    HrtimerStart {
        timer: u64,
        function: u64,
        expires: u64,
    },
    HrtimerExit {
        timer: u64,
    },
    /// x86 `irq_vectors`: system interrupt vectors (local timer, IPIs) that bypass irq_handler_*.
    VectorEntry {
        vector: Vector,
    },
    VectorExit {
        vector: Vector,
    },
    /// The kernel lost events on this CPU just before this point (`count` when it knows how many).
    Lost {
        count: Option<u64>,
    },
    /// `power/cpu_idle`: the CPU enters idle state `state` (the cpuidle driver's index), or leaves
    /// idle (`None`).
    CpuIdle {
        state: Option<u32>,
    },
    /// `ipi/ipi_send_cpu`: this CPU sends an inter-processor interrupt to `target_cpu`.
    IpiSend {
        target_cpu: u32,
    },
    /// `sched/sched_wake_idle_without_ipi`: a wake-up reached idle CPU `target_cpu`, which was
    /// polling, without an interrupt.
    WakeIdleNoIpi {
        target_cpu: u32,
    },
    /// `sched/sched_stat_runtime`: the scheduler charged `pid` with `runtime` ns of CPU since it
    /// last did (at each tick and switch). With paravirtual steal accounting the time the
    /// hypervisor took is left out, so a charge shorter than the time that passed shows steal.
    StatRuntime {
        pid: i32,
        runtime: u64,
    },
}

impl EventKind {
    /// A stable one-byte tag (the file format uses it).
    pub fn tag(&self) -> u8 {
        match self {
            EventKind::Switch { .. } => 1,
            EventKind::Waking { .. } => 2,
            EventKind::Wakeup { .. } => 3,
            EventKind::WakeupNew { .. } => 4,
            EventKind::Fork { .. } => 5,
            EventKind::Exit { .. } => 6,
            EventKind::IrqEntry { .. } => 7,
            EventKind::IrqExit { .. } => 8,
            EventKind::SoftirqEntry { .. } => 9,
            EventKind::SoftirqExit { .. } => 10,
            EventKind::HrtimerEntry { now: None, .. } => 11,
            EventKind::HrtimerEntry { now: Some(_), .. } => 16,
            EventKind::HrtimerStart { .. } => 17,
            EventKind::HrtimerExit { .. } => 12,
            EventKind::VectorEntry { .. } => 13,
            EventKind::VectorExit { .. } => 14,
            EventKind::Lost { .. } => 15,
            EventKind::CpuIdle { .. } => 18,
            EventKind::IpiSend { .. } => 19,
            EventKind::WakeIdleNoIpi { .. } => 20,
            EventKind::StatRuntime { .. } => 21,
        }
    }
}

/// How a task left the CPU, from `prev_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Leave {
    /// Still runnable: preempted (or yielded).
    Preempted,
    /// Went to sleep (S, D, I...): blocked.
    Blocked,
    /// Exited.
    Exited,
}

pub fn leave_reason(prev_state: u64) -> Leave {
    let s = prev_state & STATE_MASK;
    if prev_state & STATE_PREEMPTED != 0 || s == 0 {
        Leave::Preempted
    } else if s & STATE_DEAD != 0 {
        Leave::Exited
    } else {
        Leave::Blocked
    }
}

/// The kernel's one-letter task state, as `trace` prints it.
pub fn state_letters(prev_state: u64) -> String {
    const LETTERS: [(u64, char); 8] = [
        (0x1, 'S'),
        (0x2, 'D'),
        (0x4, 'T'),
        (0x8, 't'),
        (0x10, 'X'),
        (0x20, 'Z'),
        (0x40, 'P'),
        (0x80, 'I'),
    ];
    let mut s: String = LETTERS
        .iter()
        .filter(|(b, _)| prev_state & b != 0)
        .map(|(_, c)| *c)
        .collect();
    if s.is_empty() {
        s.push('R');
    }
    if prev_state & STATE_PREEMPTED != 0 {
        s.push('+');
    }
    s
}

/// The x86 system vectors punctual records (each has `<name>_entry` and `<name>_exit` events).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Vector {
    LocalTimer,
    Reschedule,
    CallFunction,
    CallFunctionSingle,
    IrqWork,
    X86PlatformIpi,
    ThermalApic,
    ErrorApic,
    SpuriousApic,
}

impl Vector {
    pub const ALL: [Vector; 9] = [
        Vector::LocalTimer,
        Vector::Reschedule,
        Vector::CallFunction,
        Vector::CallFunctionSingle,
        Vector::IrqWork,
        Vector::X86PlatformIpi,
        Vector::ThermalApic,
        Vector::ErrorApic,
        Vector::SpuriousApic,
    ];

    /// The event name stem in `events/irq_vectors/`.
    pub fn name(self) -> &'static str {
        match self {
            Vector::LocalTimer => "local_timer",
            Vector::Reschedule => "reschedule",
            Vector::CallFunction => "call_function",
            Vector::CallFunctionSingle => "call_function_single",
            Vector::IrqWork => "irq_work",
            Vector::X86PlatformIpi => "x86_platform_ipi",
            Vector::ThermalApic => "thermal_apic",
            Vector::ErrorApic => "error_apic",
            Vector::SpuriousApic => "spurious_apic",
        }
    }

    pub fn code(self) -> u8 {
        Vector::ALL.iter().position(|v| *v == self).expect("listed") as u8
    }

    pub fn from_code(c: u8) -> Option<Vector> {
        Vector::ALL.get(c as usize).copied()
    }
}

/// The softirq vectors' names (the kernel's `softirq_to_name`).
pub const SOFTIRQ_NAMES: [&str; 10] = [
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];

pub fn softirq_name(vec: u32) -> String {
    SOFTIRQ_NAMES
        .get(vec as usize)
        .map(|s| s.to_string())
        .unwrap_or_else(|| format!("softirq {vec}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leave_reasons_follow_the_kernel_encoding() {
        assert_eq!(leave_reason(0), Leave::Preempted);
        assert_eq!(leave_reason(STATE_PREEMPTED), Leave::Preempted);
        assert_eq!(leave_reason(0x1), Leave::Blocked);
        assert_eq!(leave_reason(0x2), Leave::Blocked);
        assert_eq!(leave_reason(0x80), Leave::Blocked);
        assert_eq!(leave_reason(0x10), Leave::Exited);
        assert_eq!(leave_reason(0x20), Leave::Exited);
        assert_eq!(state_letters(0), "R");
        assert_eq!(state_letters(STATE_PREEMPTED), "R+");
        assert_eq!(state_letters(0x2), "D");
    }

    #[test]
    fn vector_codes_round_trip() {
        for v in Vector::ALL {
            assert_eq!(Vector::from_code(v.code()), Some(v));
        }
        assert_eq!(Vector::from_code(200), None);
    }
}
