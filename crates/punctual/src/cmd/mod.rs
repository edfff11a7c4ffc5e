//! One module per command.

pub mod bench;
mod check;
mod experiment;
mod latency;
mod load_body;
pub mod simulate;
pub mod trace;

use crate::cli::{Cli, Command};

/// Run the command; the returned value is the exit code.
pub fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Check(a) => check::run(a),
        Command::Latency(a) => latency::run(a),
        Command::Experiment(a) => experiment::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Load(a) => load_body::run(a),
        Command::Trace(a) => trace::run(a),
        Command::Simulate(a) => simulate::run(*a),
    }
}

/// The punctual executable, for child processes.
pub fn own_exe() -> anyhow::Result<std::path::PathBuf> {
    Ok(std::env::current_exe()?)
}
