//! cyclictest's output formats, written from the figures a run keeps
//! ([`punctual_latency::cyclic::CyclicDoc`]), byte for byte as rt-tests 2.4 writes them
//! (`print_stat`, `print_hist`, `trigger_print`, `write_stats` with `rt_write_json`).

pub mod hist;
pub mod json;
pub mod status;

pub use hist::histogram;
pub use json::rt_tests_json;
pub use status::{block, header, spikes, status_line, value_line};
