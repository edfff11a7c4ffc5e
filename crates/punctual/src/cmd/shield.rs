//! `punctual shield`: real-time mode by hand (KURT's switch_to_rt / switch_to_normal).

use crate::args::run_duration;
use clap::Args;
use punctual_dispatch::measure::HoldShield;
use punctual_dispatch::shield::{self, Move};
use punctual_result::Failure;
use punctual_rt::format_cpu_list;
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
        return Ok(restore(env));
    }
    let list = a.cpus.as_deref().expect("required unless --restore");
    let cpus =
        punctual_rt::parse_cpu_list(list).map_err(|e| Failure::usage(format!("--cpus: {e}")))?;
    if !a.command.is_empty() {
        punctual_dispatch::preflight::resolve_command(&a.command)
            .map_err(|e| Failure::usage(format!("-- COMMAND: {e}")))?;
    }
    let plan = shield::plan(&cpus, &[std::process::id() as i32]).map_err(Failure::from)?;
    let tasks = plan
        .moves
        .iter()
        .filter(|m| matches!(m, Move::Task { .. }))
        .count();
    let irqs = plan
        .moves
        .iter()
        .filter(|m| matches!(m, Move::Irq { .. }))
        .count();
    if a.dry_run {
        let mut text = String::new();
        for m in &plan.moves {
            text.push_str(&format!("would move {m}\n"));
        }
        for (what, why) in &plan.skipped {
            text.push_str(&format!("cannot move {what}: {why}\n"));
        }
        text.push_str(&format!(
            "shielding CPU {} would move {tasks} task(s) and {irqs} IRQ(s) to CPU {}; {} task(s) cannot move\n",
            format_cpu_list(&cpus),
            format_cpu_list(&plan.others),
            plan.skipped.len()
        ));
        env.show(&punctual_result::table::wrap(&text), false);
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

/// `--restore`: what this start restored already (every command restores leftovers first, and
/// said so on stderr) and anything left since; exit 3 when a change could not be restored or a
/// journal was refused. Each restore is described once (issue 31: twice, and a shield's 70
/// settings counted as 1).
fn restore(env: &Env) -> Exit {
    let earlier = punctual_rt::journal::earlier_restores();
    let now = punctual_rt::journal::restore_stale();
    for line in punctual_session::describe_restore(&now) {
        env.show(&format!("{line}\n"), false);
    }
    let all: Vec<&punctual_rt::journal::RestoreReport> = earlier.iter().chain([&now]).collect();
    let troubled = all
        .iter()
        .any(|r| !r.refused.is_empty() || r.journals.iter().any(|j| !j.failed.is_empty()));
    let journals: usize = all.iter().map(|r| r.journals.len()).sum();
    let settings: usize = all
        .iter()
        .flat_map(|r| &r.journals)
        .map(|j| j.settings)
        .sum();
    let left: usize = all
        .iter()
        .flat_map(|r| &r.journals)
        .map(|j| j.left_changed)
        .sum();
    if all.iter().all(|r| r.is_empty()) {
        env.show(
            &format!(
                "nothing to restore: no journal of a dead punctual run in {}\n",
                punctual_rt::journal::state_dir().display()
            ),
            false,
        );
    } else {
        env.show(
            &format!(
                "restored {settings} setting(s) from {journals} journal(s) of earlier runs{}\n",
                if left > 0 {
                    format!("; {left} changed since by someone else, left as they are")
                } else {
                    String::new()
                }
            ),
            false,
        );
    }
    if troubled {
        Exit::System
    } else {
        Exit::Ok
    }
}
