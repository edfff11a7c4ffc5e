//! The `punctual` command: parses, validates into the libraries' configurations, and hands them to
//! the lifecycle (`punctual_session::drive`). The work and the rendering are in the library crates.

mod args;
mod cli;
mod cmd;

use clap::Parser;
use cli::{Cli, Command};
use punctual_result::table;
use punctual_session::{Env, Exit};
use std::process::ExitCode;

fn main() -> ExitCode {
    // SIGINT/SIGTERM handled from the first instruction of our own (issue 32: a signal during the
    // parse ended the process with 143); punctual's own children keep the default until they
    // install their own.
    if !cli::child_argv() {
        punctual_rt::Interrupts::install();
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // Help and version as clap prints them; a refusal with the values it quotes escaped and
        // bounded (`-w $'\e[2J'` reached the terminal raw; issue 32).
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            let text = e.render().to_string();
            eprint!(
                "{}",
                punctual_time::text::display_message(&text, punctual_time::text::MAX_MESSAGE_CHARS)
            );
            return ExitCode::from(Exit::Usage.code());
        }
    };
    table::set_width(table::Width::detect(cli.wide));
    let env = Env::real();
    // Load bodies and periodic processes are punctual's own children: the parent has already done this.
    if !cli.command.is_child() {
        env.catch_interrupts();
        punctual_session::restore_leftovers(&env);
    }
    let moved = match cli.move_to_rt_cgroup && !cli.command.is_child() {
        true => match punctual_rt::rtgroup::enter_for_run() {
            Ok((m, said)) => {
                env.note(&said);
                m
            }
            Err(e) => {
                eprintln!("punctual: error: {e}");
                return ExitCode::from(Exit::of(&e).code());
            }
        },
        false => None,
    };
    let exit = match dispatch(cli, &env) {
        Ok(exit) => exit,
        Err(e) => {
            let msg = format!("{e:#}");
            let msg =
                punctual_time::text::display_message(&msg, punctual_time::text::MAX_MESSAGE_CHARS);
            eprintln!("{}", table::wrap(&format!("punctual: error: {msg}")));
            Exit::of_error(e.as_ref())
        }
    };
    // Every thread is back in the normal class by now: the group without a budget takes us back.
    if let Some(refused) = moved.and_then(punctual_rt::rtgroup::MoveGuard::leave) {
        env.note(&refused);
    }
    ExitCode::from(exit.code())
}

/// Run the command.
fn dispatch(cli: Cli, env: &Env) -> anyhow::Result<Exit> {
    match cli.command {
        Command::Check(a) => cmd::check::run(a, env),
        Command::Latency(a) => cmd::latency::run(a, env),
        Command::Cyclictest(a) => cmd::cyclictest::run(a, env),
        Command::Experiment(a) => cmd::experiment::run(a, env),
        Command::Bench(a) => cmd::bench::run(a, env),
        Command::Load(a) => cmd::load_body::run(a),
        Command::Trace(a) => cmd::trace::run(a, env),
        Command::Traffic(a) => cmd::traffic::run(a, env),
        Command::Simulate(a) => cmd::simulate::run(*a, env),
        Command::Monitor(a) => cmd::monitor::run(a, env),
        Command::Run(a) => cmd::run::run(a, env),
        Command::Plan(a) => cmd::run::plan_cmd(a, env),
        Command::Shield(a) => cmd::shield::run(a, env),
        Command::Compare(a) => cmd::compare::run(a, env),
        Command::Report(a) => cmd::report::run(a, env),
        Command::Results(a) => cmd::results::run(a, env),
        Command::InstallLib(a) => cmd::install_lib::run(a, env),
        Command::Advise(a) => cmd::advise::run(a, env),
        Command::PeriodicBody(a) => cmd::kurt::body(a),
        Command::RtAppTask(a) => cmd::rtapp::task(a),
        Command::Man(a) => cmd::docs::man(a, env),
        Command::Completions(a) => cmd::docs::completions(a),
    }
}
