//! The `punctual` command: parses, wires and renders. The work is in the library crates.

mod cli;
mod cmd;
mod session;

use clap::Parser;
use punctual_result::Failure;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    // Load bodies are punctual's own children: the parent has already done this.
    if !matches!(cli.command, cli::Command::Load(_)) {
        session::restore_leftovers();
    }
    let code = match cmd::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("punctual: error: {e:#}");
            exit_code(&e)
        }
    };
    ExitCode::from(code as u8)
}

/// SPEC section 2: 2 bad input, 3 the system refused, 130 interrupted.
fn exit_code(e: &anyhow::Error) -> i32 {
    for cause in e.chain() {
        if let Some(f) = cause.downcast_ref::<Failure>() {
            return f.class.exit_code();
        }
        if let Some(r) = cause.downcast_ref::<punctual_rt::RtError>() {
            return match r {
                punctual_rt::RtError::Invalid(_) => 2,
                _ => 3,
            };
        }
    }
    3
}
