//! The simulator's time unit, and the longest time it simulates.

/// Simulated nanoseconds.
pub type Ns = u64;

pub const NS_PER_S: u64 = 1_000_000_000;
/// The longest simulated duration: keeps every tick index and timestamp far from u64 overflow.
pub const MAX_DURATION: Ns = 100_000 * NS_PER_S;
