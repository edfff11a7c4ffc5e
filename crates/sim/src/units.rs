//! The simulator's time unit.

/// Simulated nanoseconds.
pub type Ns = u64;

pub const NS_PER_S: u64 = 1_000_000_000;
