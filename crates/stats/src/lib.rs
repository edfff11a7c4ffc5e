//! Recording and summarising timing samples.
//!
//! A [`Recorder`] lives in one measuring thread. It is built before the loop starts and
//! [`Recorder::record`] neither allocates, locks nor prints: it updates an HDR histogram (3
//! significant digits, 1 ns to 1 h, so every percentile is within 0.1 % of the exact nearest-rank
//! value), exact count/min/max/sum/sum-of-squares, and exact counts within KURT's thresholds.
//! Recorders merge across threads and runs; a [`Summary`] is what the result document shows.

mod encode;
pub mod live;
mod passed;
mod recorder;
mod summary;

pub use encode::{decode_histogram, encode_histogram, HistogramError, HISTOGRAM_ENCODING};
pub use live::{LiveCounts, LiveHistogram};
pub use passed::Passed;
pub use recorder::{MergeError, Recorder, HIGHEST_NS, LOWEST_NS, SIGNIFICANT_DIGITS};
pub use summary::{exact_nearest_rank, Percentiles, Summary, Within, PERCENTILES, WITHIN_NS};

/// The histogram type every series uses.
pub type Histogram = hdrhistogram::Histogram<u64>;
