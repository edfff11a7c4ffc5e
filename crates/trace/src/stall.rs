//! A measuring thread's own account of where it stalled, kept beside the trace it is read against
//! (in a capture, and in a trace file's trailer).

/// A stretch a measuring thread (punctual's loop) spent where it should have been quick, as its
/// own clock reads bound it: its CPU's trace then says whether the guest did anything there.
/// Logged by the thread when longer than its log's threshold; a kernel trace cannot tell a busy
/// thread from a stopped virtual CPU, but the thread knows what it was doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Stall {
    pub tid: i32,
    pub cpu: u32,
    pub kind: StallKind,
    /// Its clock reads around it (CLOCK_MONOTONIC ns).
    pub from: u64,
    pub to: u64,
}

/// What the thread was doing in a [`Stall`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StallKind {
    /// Work of its own known to be short (bookkeeping between releases, a hand-over's system
    /// call, one step of a spin), on the CPU throughout unless a switch says otherwise.
    Busy,
    /// Waiting for its timer, due at `from`; `to` is its first clock read after it ran again.
    /// Until its wake-up the timer's interrupt was due; once switched in, the way back to its
    /// clock read is the kernel's return path.
    Timer,
}
