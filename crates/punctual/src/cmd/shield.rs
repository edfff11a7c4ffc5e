//! `punctual shield`: real-time mode by hand (KURT's switch_to_rt / switch_to_normal).

use crate::cli::duration;
use clap::Args;
use punctual_dispatch::shield::{self, Move, Shield};
use punctual_result::Failure;
use punctual_rt::format_cpu_list;
use std::sync::atomic::Ordering;

#[derive(Args, Debug)]
pub struct ShieldArgs {
    /// CPUs to keep for real-time work (everything movable leaves them).
    #[arg(long, value_name = "CPUS", required_unless_present = "restore")]
    pub cpus: Option<String>,
    /// Print what would change, change nothing.
    #[arg(long, conflicts_with = "restore")]
    pub dry_run: bool,
    /// Undo what crashed or killed punctual runs left changed (their journals), then exit.
    #[arg(long)]
    pub restore: bool,
    /// Hold the shield this long (default: until the command ends, or until Ctrl-C).
    #[arg(short = 'D', long, value_parser = duration, value_name = "DURATION")]
    pub duration: Option<u64>,
    /// A command to run on the shielded CPUs while the shield holds.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

pub fn run(a: ShieldArgs) -> anyhow::Result<i32> {
    if a.restore {
        let reports = punctual_rt::journal::restore_stale();
        let mut failed = 0;
        for r in &reports {
            println!(
                "restored {} change(s) left by pid {} ({})",
                r.restored.len(),
                r.owner_pid,
                r.journal.display()
            );
            for (c, e) in &r.failed {
                eprintln!("punctual: could not restore {c}: {e}");
                failed += 1;
            }
        }
        if reports.is_empty() {
            println!(
                "nothing to restore: no journal of a dead punctual run in {}",
                punctual_rt::journal::state_dir().display()
            );
        }
        return Ok(if failed > 0 { 3 } else { 0 });
    }
    let list = a.cpus.as_deref().expect("required unless --restore");
    let cpus =
        punctual_rt::parse_cpu_list(list).map_err(|e| Failure::usage(format!("--cpus: {e}")))?;
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
        for m in &plan.moves {
            println!("would move {m}");
        }
        for (what, why) in &plan.skipped {
            println!("cannot move {what}: {why}");
        }
        println!(
            "shielding CPU {} would move {tasks} task(s) and {irqs} IRQ(s) to CPU {}; {} task(s) cannot move",
            format_cpu_list(&cpus),
            format_cpu_list(&plan.others),
            plan.skipped.len()
        );
        return Ok(0);
    }
    let interrupts = punctual_rt::Interrupts::install();
    for r in punctual_rt::journal::restore_stale() {
        eprintln!(
            "punctual: restored {} setting(s) left by an earlier run (pid {})",
            r.restored.len(),
            r.owner_pid
        );
    }
    let held = Shield::apply(&plan).map_err(Failure::from)?;
    eprintln!(
        "punctual: shielded CPU {}: {} change(s) applied ({tasks} task(s), {irqs} IRQ(s) planned), {} refused, {} task(s) cannot move; Ctrl-C restores",
        format_cpu_list(&cpus),
        held.applied,
        held.refused.len(),
        plan.skipped.len()
    );
    let stop = interrupts.stop_flag();
    let t0 = std::time::Instant::now();
    let mut code = 0;
    if !a.command.is_empty() {
        use std::os::unix::process::CommandExt;
        let pin = cpus.clone();
        let mut cmd = std::process::Command::new(&a.command[0]);
        cmd.args(&a.command[1..]);
        // Tells a `punctual run` inside that its CPUs hold no normal tasks (no spin budget needed).
        cmd.env(
            punctual_dispatch::shield::SHIELDED_ENV,
            format_cpu_list(&cpus),
        );
        // SAFETY: sched_setaffinity is async-signal-safe; the set is built before the fork.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &c in &pin {
            // SAFETY: c is below CPU_SETSIZE (checked online).
            unsafe { libc::CPU_SET(c, &mut set) };
        }
        unsafe {
            cmd.pre_exec(move || {
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| Failure::usage(format!("starting {}: {e}", a.command[0])))?;
        loop {
            if let Some(st) = child.try_wait()? {
                code = st.code().unwrap_or(1);
                break;
            }
            if stop.load(Ordering::Relaxed)
                || a.duration
                    .is_some_and(|d| t0.elapsed().as_nanos() as u64 >= d)
            {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    } else {
        let expired = || {
            a.duration
                .is_some_and(|d| t0.elapsed().as_nanos() as u64 >= d)
        };
        while !stop.load(Ordering::Relaxed) && !expired() {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    held.restore();
    eprintln!("punctual: shield lifted, every change restored");
    Ok(if interrupts.requested() { 130 } else { code })
}
