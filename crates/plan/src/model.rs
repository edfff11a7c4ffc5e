//! The plan as the dispatcher sees it: validated, with every action in one table (KURT's module ids),
//! tasks referring to actions by index, and one-shot events as fixed-size records sorted by time.

use punctual_time::MarginPolicy;
use std::path::PathBuf;

/// Bytes of action data an event can carry (KURT's schedule file carried 12 as well).
pub const EVENT_DATA: usize = 12;
/// Smallest UDP payload: the dispatcher writes a 16-byte header (sequence, release time).
pub const UDP_HEADER: usize = 16;
/// Largest UDP payload over IPv4.
pub const UDP_MAX: usize = 65_507;
/// The most actions a plan may name (event records hold a 16-bit index).
pub const MAX_ACTIONS: usize = u16::MAX as usize;

/// What happens at a release.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Record the instant only.
    Mark,
    /// Start a program (argv, never a shell). The child is forked ahead and released at the instant.
    Exec {
        argv: Vec<String>,
        priority: Option<u32>,
        /// Run the program as this user (a name or a uid, as written; looked up when the plan is
        /// checked and again before the run).
        user: Option<String>,
        /// Leave the program no capability (bounding set and every set cleared, `no_new_privs`).
        drop_caps: bool,
    },
    /// Send one datagram from a socket opened ahead.
    Udp { to: String, bytes: usize },
    /// Release a process waiting in `punctual::Periodic` / `punctual_wait_next_period` on `channel`.
    Wake {
        channel: String,
        spawn: Option<Vec<String>>,
        /// The client's user (a name or a uid, as written): admitted to the channel besides root
        /// and the dispatcher's own user, and the user a spawned client runs as (no capabilities).
        user: Option<String>,
    },
    /// Call `symbol` in the shared library at `path` (loaded only from that explicit path).
    Plugin { path: PathBuf, symbol: String },
}

/// What kind of action, as a type (its name is what plan files say).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ActionKind {
    Mark,
    Exec,
    Udp,
    Wake,
    Plugin,
}

impl ActionKind {
    pub fn name(self) -> &'static str {
        match self {
            ActionKind::Mark => "mark",
            ActionKind::Exec => "exec",
            ActionKind::Udp => "udp",
            ActionKind::Wake => "wake",
            ActionKind::Plugin => "plugin",
        }
    }
}

impl Action {
    pub fn kind(&self) -> ActionKind {
        match self {
            Action::Mark => ActionKind::Mark,
            Action::Exec { .. } => ActionKind::Exec,
            Action::Udp { .. } => ActionKind::Udp,
            Action::Wake { .. } => ActionKind::Wake,
            Action::Plugin { .. } => ActionKind::Plugin,
        }
    }

    /// The kinds a plan may name, for error messages.
    pub const KINDS: &'static str = "mark, exec, udp, wake, plugin";

    /// The default symbol a plugin exports.
    pub const PLUGIN_SYMBOL: &'static str = "punctual_event";
}

/// An entry of the action table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedAction {
    pub name: String,
    pub action: Action,
    /// Dispatcher CPU for events using this action (`None`: the plan's first CPU).
    pub cpu: Option<usize>,
    /// Worst-case execution time of one event of this action, for admission control.
    pub wcet: Option<u64>,
}

/// What to do with releases whose time passed while the task's previous release was still running.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MissPolicy {
    /// Count them as missed and resume at the first future release (no burst).
    #[default]
    Skip,
    /// Run each of them at once, late (their lateness is recorded), until the schedule is caught up.
    CatchUp,
}

impl MissPolicy {
    pub fn name(self) -> &'static str {
        match self {
            MissPolicy::Skip => "skip",
            MissPolicy::CatchUp => "catch_up",
        }
    }
}

/// A task's offset: fixed, or chosen by [`crate::admission::phase`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offset {
    Fixed(u64),
    Auto,
}

impl Offset {
    /// The offset in ns (an unassigned `auto` counts as 0).
    pub fn ns(self) -> u64 {
        match self {
            Offset::Fixed(o) => o,
            Offset::Auto => 0,
        }
    }
}

/// A periodic task: release `k` is due at `start + offset + k * period`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Task {
    pub name: String,
    pub period: u64,
    pub offset: Offset,
    pub wcet: Option<u64>,
    /// Index into [`Plan::actions`].
    pub action: u16,
    /// Dispatcher CPU (`None`: the plan's first CPU).
    pub cpu: Option<usize>,
    pub miss: MissPolicy,
}

/// One one-shot event in its compiled form: 24 bytes, little-endian on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(C)]
pub struct Event {
    /// Offset from the plan's start, ns.
    pub at: u64,
    /// Index into [`Plan::actions`].
    pub action: u16,
    /// Bytes of `data` in use.
    pub len: u8,
    /// Reserved, zero.
    pub flags: u8,
    pub data: [u8; EVENT_DATA],
}

const _: () = assert!(std::mem::size_of::<Event>() == 24);

impl Event {
    pub fn new(at: u64, action: u16, data: &[u8]) -> Self {
        let mut d = [0u8; EVENT_DATA];
        let n = data.len().min(EVENT_DATA);
        d[..n].copy_from_slice(&data[..n]);
        Event {
            at,
            action,
            len: n as u8,
            flags: 0,
            data: d,
        }
    }

    pub fn data(&self) -> &[u8] {
        &self.data[..(self.len as usize).min(EVENT_DATA)]
    }
}

/// A validated plan.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub name: String,
    /// Dispatcher CPUs (`None`: let the runner choose, usually the last online CPU).
    pub cpus: Option<Vec<usize>>,
    /// Real-time mode: move other tasks and IRQs off the dispatcher CPUs while running.
    pub shield: bool,
    pub spin_margin: MarginPolicy,
    /// How long the plan runs (`None`: until its last event, or until stopped if it has tasks).
    pub duration: Option<u64>,
    pub actions: Vec<NamedAction>,
    pub tasks: Vec<Task>,
    /// Sorted by `at`.
    pub events: Vec<Event>,
    /// Where the plan was read from, for messages.
    pub source: String,
}

impl Plan {
    pub fn action(&self, index: u16) -> &NamedAction {
        &self.actions[index as usize]
    }

    /// The offset of the last one-shot event, if any.
    pub fn last_event(&self) -> Option<u64> {
        self.events.last().map(|e| e.at)
    }

    /// The dispatcher CPU of a task or action, given the CPUs the run uses (first one by default).
    pub fn cpu_of(explicit: Option<usize>, run_cpus: &[usize]) -> usize {
        explicit.unwrap_or(run_cpus[0])
    }

    /// Every CPU a task or action names explicitly.
    pub fn named_cpus(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self
            .tasks
            .iter()
            .filter_map(|t| t.cpu)
            .chain(self.actions.iter().filter_map(|a| a.cpu))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Whether any action is of this kind.
    pub fn uses(&self, kind: ActionKind) -> bool {
        self.actions.iter().any(|a| a.action.kind() == kind)
    }
}

/// Format ns with the largest unit that represents it exactly (round-trips through the parser).
pub fn exact_duration(ns: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
        (1, "ns"),
    ];
    if ns == 0 {
        return "0us".into();
    }
    for (scale, unit) in UNITS {
        if ns.is_multiple_of(scale) {
            return format!("{}{unit}", ns / scale);
        }
    }
    unreachable!("1 divides everything")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_durations_round_trip() {
        for ns in [
            0u64,
            1,
            999,
            1_000,
            1_500_000,
            16_667_000,
            2_000_000_000,
            1_000_000_001,
        ] {
            assert_eq!(
                punctual_time::parse_duration_ns(&exact_duration(ns)).unwrap(),
                ns
            );
        }
        assert_eq!(exact_duration(1_500_000), "1500us");
        assert_eq!(exact_duration(2_000_000), "2ms");
    }

    #[test]
    fn event_data_is_capped() {
        let e = Event::new(5, 1, &[1; 20]);
        assert_eq!(e.data().len(), EVENT_DATA);
        assert_eq!(Event::new(5, 1, &[7, 8]).data(), &[7, 8]);
    }
}
