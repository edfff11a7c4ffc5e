//! The `punctual` command: parses, validates into the libraries' configurations, and hands them to
//! the lifecycle (`punctual_session::drive`). The work and the rendering are in the library crates.

mod cli;
mod cmd;

use clap::Parser;
use punctual_result::Failure;
use punctual_session::{Env, Exit};
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let env = Env::real();
    // Load bodies and periodic processes are punctual's own children: the parent has already done this.
    if !cli.command.is_child() {
        punctual_session::restore_leftovers(&env);
    }
    let exit = match cmd::dispatch(cli, &env) {
        Ok(exit) => exit,
        Err(e) => {
            eprintln!("punctual: error: {e:#}");
            exit_of(&e)
        }
    };
    ExitCode::from(exit.code())
}

/// SPEC section 2: 2 bad input, 3 the system refused, 130 interrupted.
fn exit_of(e: &anyhow::Error) -> Exit {
    for cause in e.chain() {
        if let Some(f) = cause.downcast_ref::<Failure>() {
            return Exit::of(f);
        }
        if let Some(r) = cause.downcast_ref::<punctual_rt::RtError>() {
            return match r {
                punctual_rt::RtError::Invalid(_) => Exit::Usage,
                _ => Exit::System,
            };
        }
    }
    Exit::System
}
