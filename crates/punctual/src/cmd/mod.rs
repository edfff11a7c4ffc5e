//! One module per command.

pub mod advise;
pub mod bench;
pub mod check;
pub mod compare;
pub mod cyclictest;
pub mod docs;
pub mod experiment;
pub mod install_lib;
pub mod kurt;
pub mod latency;
pub mod load_body;
pub mod monitor;
pub mod report;
pub mod results;
pub mod rtapp;
pub mod run;
pub mod shield;
pub mod simulate;
pub mod trace;
pub mod traffic;
