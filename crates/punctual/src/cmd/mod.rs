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
use punctual_session::{Env, Exit};

/// Run the command.
pub fn dispatch(cli: Cli, env: &Env) -> anyhow::Result<Exit> {
    match cli.command {
        Command::Check(a) => check::run(a, env),
        Command::Latency(a) => latency::run(a, env),
        Command::Experiment(a) => experiment::run(a, env),
        Command::Bench(a) => bench::run(a, env),
        Command::Load(a) => load_body::run(a),
        Command::Trace(a) => trace::run(a, env),
        Command::Simulate(a) => simulate::run(*a, env),
        Command::Run(a) => run::run(a, env),
        Command::Plan(a) => run::plan_cmd(a),
        Command::Shield(a) => shield::run(a, env),
        Command::InstallLib(a) => install_lib::run(a),
        Command::PeriodicBody(a) => kurt::body(a),
    }
}
