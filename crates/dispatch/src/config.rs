//! What a run is asked to do ([`RunConfig`]) and why it could not be done ([`DispatchError`]).

use punctual_rt::Policy;
use punctual_time::MarginPolicy;

/// Why a plan could not be run.
#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    /// Bad input found while preparing (missing plugin, unknown program, unreachable target): exit 2.
    #[error("{0}")]
    Usage(String),
    /// The system refused or failed: exit 3.
    #[error("{0}")]
    System(String),
    /// Stopped by a signal before the run began: exit 130.
    #[error("interrupted before the run began")]
    Interrupted,
}

impl From<DispatchError> for punctual_result::Failure {
    fn from(e: DispatchError) -> Self {
        match e {
            DispatchError::Usage(m) => punctual_result::Failure::usage(m),
            DispatchError::System(m) => punctual_result::Failure::system(m),
            DispatchError::Interrupted => punctual_result::Failure::interrupted(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Dispatcher CPUs (tasks and actions without a `cpu` go on the first).
    pub cpus: Vec<usize>,
    pub policy: Policy,
    pub priority: u32,
    pub timer_slack_ns: Option<u64>,
    pub margin: MarginPolicy,
    /// How long to run, resolved once by the caller (the flag, else the plan's `duration`);
    /// `None`: the plan's `duration`; without one, until the plan's last event or until stopped.
    pub duration: Option<u64>,
    /// Watchdog threshold (`None`: no watchdog, no breathers, no RLIMIT_RTTIME).
    pub watchdog: Option<u64>,
    /// How long to wait for wake clients to attach.
    pub attach_timeout: u64,
    /// From every thread being ready to the plan's start (offset 0).
    pub lead_in: u64,
    /// The dispatcher CPUs are shielded (no normal tasks to starve): the margin is not capped by
    /// the spin budget, nor bounded by half the interval, and admission control does not check it.
    pub shielded: bool,
    /// Share of a CPU that is not shielded the dispatcher may spin or work on it (--spin-budget;
    /// default [`DISPATCH_SPIN_BUDGET`]): caps the automatic margin and bounds admission.
    pub spin_budget: f64,
    /// `Some((reference, step))`: the plan starts at the first `reference + k * step` after the
    /// lead-in (the grid the offsets were chosen on, see
    /// [`phase_around_interference`](crate::phase_around_interference)).
    pub start_grid: Option<(u64, u64)>,
    /// The interference watched before the run, measured on that grid: tasks that move during
    /// the run keep clear of it ([`rephase`](crate::rephase)).
    pub avoid: Option<std::sync::Arc<punctual_plan::admission::Interference>>,
    /// Indices into the plan's tasks whose offsets were automatic and may move during the run when
    /// their late releases line up ([`rephase`](crate::rephase)); empty: every task keeps its
    /// phase.
    pub movable: Vec<usize>,
    /// `--explain`: keep every release later than this (ns) for attribution (`None`: keep none).
    pub explain_bound: Option<u64>,
    /// How early `wake` clients are released (`None`: as `margin`, automatic by default).
    pub wake_lead: Option<MarginPolicy>,
    /// Where each `wake` action's client runs, when the caller placed it (action, CPU): its lead
    /// is capped by what is released on that CPU ([`wake_lead_caps`](crate::wake_lead_caps)); an
    /// action not listed is capped as if every client shared one CPU.
    pub client_cpus: Vec<(u16, usize)>,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            cpus: vec![0],
            policy: Policy::Fifo,
            priority: 90,
            timer_slack_ns: None,
            margin: MarginPolicy::Auto,
            duration: None,
            watchdog: Some(2_000_000_000),
            attach_timeout: 10_000_000_000,
            lead_in: 50_000_000,
            shielded: false,
            spin_budget: DISPATCH_SPIN_BUDGET,
            start_grid: None,
            avoid: None,
            movable: Vec::new(),
            explain_bound: None,
            wake_lead: None,
            client_cpus: Vec::new(),
        }
    }
}

impl RunConfig {
    /// The spin budget admission control holds the plan to (`None` on shielded CPUs).
    pub fn admitted_spin(&self) -> Option<f64> {
        (!self.shielded).then_some(self.spin_budget)
    }
}

/// Share of one CPU that all `wake` clients together may spend spinning towards their instants.
pub const WAKE_SPIN_BUDGET: f64 = 0.5;

/// Share of its CPU a dispatcher thread may spend spinning when the CPU is not shielded.
pub const DISPATCH_SPIN_BUDGET: f64 = 0.5;
