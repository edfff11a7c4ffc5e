//! One module per command.

mod check;
mod experiment;
pub mod install_lib;
pub mod kurt;
pub mod run;
pub mod shield;
mod latency;
mod load_body;

use crate::cli::{Cli, Command};

/// Run the command; the returned value is the exit code.
pub fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Check(a) => check::run(a),
        Command::Latency(a) => latency::run(a),
        Command::Experiment(a) => experiment::run(a),
        Command::Load(a) => load_body::run(a),
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
