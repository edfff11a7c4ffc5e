//! What one slot of a dispatcher CPU is: the loop ([`crate::engine`]) releases it and
//! [`crate::rephase`] moves its phase.

use punctual_plan::MissPolicy;

/// One periodic task or one group of events (all events of one action), as the loop sees it.
#[derive(Clone, Debug, Default)]
pub struct SlotSpec {
    pub name: String,
    pub action: u16,
    /// `Some` for a periodic task.
    pub period: Option<u64>,
    pub offset: u64,
    pub wcet: Option<u64>,
    pub miss: MissPolicy,
    /// A periodic task whose plan offset was `auto`: its phase may move during the run when its
    /// late releases line up ([`crate::rephase`]). Never an explicit offset, never events.
    pub movable: bool,
    /// A `wake` release keeps its client's CPU busy before its instant: that CPU, and for how
    /// long at most. The client spins its lead there (up to the lead's cap), and when that is the
    /// loop's own CPU the loop spins its margin before the hand-over there too (up to the margin's
    /// cap). A move keeps such spans on one CPU apart ([`crate::rephase::next_shift`]); `None`
    /// (not placed, or not a `wake`): only the action's own time counts.
    pub lead_in: Option<(usize, u64)>,
    /// A `wake` release handed to a client on another CPU keeps the loop's own CPU busy before
    /// its instant too: the loop spins its margin there before the hand-over, which comes up to
    /// the lead's cap before the instant. That CPU, and the two caps together. (A move that left
    /// it out put a group of clients on the loop's CPU inside those spins: 127 releases of one
    /// (c) row late by the loop's hold, sixteenth session.)
    pub loop_in: Option<(usize, u64)>,
}
