//! One module per command.

pub mod bench;
pub mod check;
pub mod experiment;
pub mod install_lib;
pub mod kurt;
pub mod latency;
pub mod load_body;
pub mod results;
pub mod run;
pub mod shield;
pub mod simulate;
pub mod trace;
