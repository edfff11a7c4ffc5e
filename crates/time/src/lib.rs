//! Time for punctual: clocks you can pass in, durations that always carry a unit, and the two ways
//! punctual waits for an instant (a plain absolute sleep, and sleep-to-a-margin-then-spin).
//!
//! Every time value is an integer number of nanoseconds (`u64`), read from a [`Clock`]. Release times
//! are absolute points on that clock, never sums of measured deltas.

pub mod clock;
pub mod cpus;
pub mod margin;
pub mod percent;
pub mod sleep;
pub mod text;
pub mod units;

pub use clock::{Clock, ClockId, ManualClock, SystemClock};
pub use margin::{AutoMargin, MarginPolicy};
pub use percent::{parse_percent_in, PercentError};
pub use sleep::{hybrid_until, hybrid_until_primed, hybrid_until_then, Prime, Wake};
pub use units::{
    format_ns, parse_count, parse_duration, parse_duration_hinting, parse_duration_ns,
    DurationError,
};

/// Nanoseconds per unit, for readable arithmetic.
pub const NS_PER_US: u64 = 1_000;
pub const NS_PER_MS: u64 = 1_000_000;
pub const NS_PER_S: u64 = 1_000_000_000;
