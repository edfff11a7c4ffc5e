//! One module per command.

pub mod bench;
mod check;
mod experiment;
pub mod install_lib;
pub mod kurt;
mod latency;
mod load_body;
pub mod run;
pub mod shield;
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
        Command::Run(a) => run::run(a),
        Command::Plan(a) => run::plan_cmd(a),
        Command::Shield(a) => shield::run(a),
        Command::InstallLib(a) => install_lib::run(a),
        Command::PeriodicBody(a) => kurt::body(a),
    }
}

/// The punctual executable, for child processes.
pub fn own_exe() -> anyhow::Result<std::path::PathBuf> {
    Ok(std::env::current_exe()?)
}
