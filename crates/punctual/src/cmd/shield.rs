//! `punctual shield`: real-time mode by hand (KURT's switch_to_rt / switch_to_normal).

use crate::args::run_duration;
use clap::Args;
use punctual_dispatch::measure::HoldShield;
use punctual_dispatch::shield;
use punctual_result::Failure;
use punctual_session::{drive, Env, Exit, Outputs};

#[derive(Args, Debug)]
pub struct ShieldArgs {
    /// CPUs to keep for real-time work (everything movable leaves them).
    #[arg(
        long,
        value_name = "CPUS",
        required_unless_present = "restore",
        conflicts_with = "restore"
    )]
    pub cpus: Option<String>,
    /// Print what would change, change nothing.
    #[arg(long, conflicts_with = "restore")]
    pub dry_run: bool,
    /// Undo what crashed or killed punctual runs left changed (their journals), then exit.
    #[arg(long)]
    pub restore: bool,
    /// Hold the shield this long (default: until the command ends, or until Ctrl-C).
    #[arg(short = 'D', long, allow_hyphen_values = true, value_parser = run_duration, value_name = "DURATION", conflicts_with = "restore")]
    pub duration: Option<u64>,
    /// A command to run on the shielded CPUs while the shield holds.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

pub fn run(a: ShieldArgs, env: &Env) -> anyhow::Result<Exit> {
    if a.restore {
        return Ok(punctual_session::restore_by_hand(env));
    }
    let list = a.cpus.as_deref().expect("required unless --restore");
    let cpus =
        punctual_rt::parse_cpu_list(list).map_err(|e| Failure::usage(format!("--cpus: {e}")))?;
    if !a.command.is_empty() {
        punctual_dispatch::preflight::resolve_command(&a.command)
            .map_err(|e| Failure::usage(format!("-- COMMAND: {e}")))?;
    }
    let plan = shield::plan(&cpus, &[std::process::id() as i32]).map_err(Failure::from)?;
    if a.dry_run {
        env.show(&punctual_result::table::wrap(&plan.dry_run()), false);
        return Ok(Exit::Ok);
    }
    let mut m = HoldShield {
        plan,
        cpus,
        duration: a.duration,
        command: a.command.clone(),
    };
    Ok(drive(&mut m, &Outputs::new(), env)?)
}
