//! Real-time mode (KURT's `switch_to_rt` with SCHED_KURT_PROCS): move every movable task and IRQ off
//! the shielded CPUs, so only the dispatcher (and what it releases) runs there.
//!
//! Affinity-based, so it works with cgroup v1 and v2 alike: each task's CPU mask loses the shielded
//! CPUs (tasks pinned only to shielded CPUs, and per-CPU kernel threads, cannot move and are listed
//! as skipped); each IRQ's `smp_affinity_list` and the default IRQ affinity are set to the other
//! CPUs. Every change goes through the journal first, so it is undone when the [`Shield`] drops, on a
//! second Ctrl-C, and by the next punctual start (or `punctual shield --restore`) after a crash.
//! Real-time mode also lifts the kernel's real-time throttling (`sched_rt_runtime_us = -1`), which
//! otherwise takes the CPU from a dispatcher that spins through dense releases for 50 ms every
//! second; the watchdog (canary, stuck actions, RLIMIT_RTTIME) is the safety net instead.

use punctual_rt::journal::{self, ChangeGuard};
use punctual_rt::{format_cpu_list, online_cpus};

const RT_RUNTIME: &str = "/proc/sys/kernel/sched_rt_runtime_us";

/// PF_NO_SETAFFINITY in /proc/PID/stat's flags: per-CPU kernel threads.
const PF_NO_SETAFFINITY: u64 = 0x0400_0000;

#[derive(Debug, thiserror::Error)]
pub enum ShieldError {
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    System(String),
}

impl From<ShieldError> for punctual_result::Failure {
    fn from(e: ShieldError) -> Self {
        match e {
            ShieldError::Usage(m) => punctual_result::Failure::usage(m),
            ShieldError::System(m) => punctual_result::Failure::system(m),
        }
    }
}

/// One change the shield makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Move {
    Task {
        pid: i32,
        comm: String,
        from: Vec<usize>,
        to: Vec<usize>,
    },
    Irq {
        irq: String,
        from: String,
        to: Vec<usize>,
    },
    DefaultIrq {
        from: String,
        to: Vec<usize>,
    },
    /// The kernel's real-time throttling (`sched_rt_runtime_us`), lifted so a dispatcher may hold its
    /// shielded CPU for more than 95 % of a second (the watchdog guards the machine instead).
    RtThrottle {
        from: String,
    },
}

impl std::fmt::Display for Move {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Move::Task {
                pid,
                comm,
                from,
                to,
            } => {
                write!(
                    f,
                    "task {pid} ({comm}): CPUs {} -> {}",
                    format_cpu_list(from),
                    format_cpu_list(to)
                )
            }
            Move::Irq { irq, from, to } => write!(
                f,
                "IRQ {irq}: CPUs {} -> {}",
                from.trim(),
                format_cpu_list(to)
            ),
            Move::DefaultIrq { from, to } => {
                write!(
                    f,
                    "default IRQ affinity: {} -> {}",
                    from.trim(),
                    format_cpu_list(to)
                )
            }
            Move::RtThrottle { from } => {
                write!(
                    f,
                    "{RT_RUNTIME}: {} -> -1 (no real-time throttling)",
                    from.trim()
                )
            }
        }
    }
}

/// Set by `punctual shield --cpus LIST -- COMMAND` for the command: the CPU list it shields.
pub const SHIELDED_ENV: &str = "PUNCTUAL_SHIELDED_CPUS";

/// Whether every CPU of `cpus` is shielded by an enclosing `punctual shield` ([`SHIELDED_ENV`]).
pub fn shielded_by_parent(cpus: &[usize]) -> bool {
    std::env::var(SHIELDED_ENV)
        .ok()
        .and_then(|s| punctual_rt::parse_cpu_list(&s).ok())
        .is_some_and(|held| !cpus.is_empty() && cpus.iter().all(|c| held.contains(c)))
}

/// What shielding would do.
#[derive(Clone, Debug, Default)]
pub struct ShieldPlan {
    pub cpus: Vec<usize>,
    /// The CPUs everything else moves to.
    pub others: Vec<usize>,
    pub moves: Vec<Move>,
    /// What cannot move, and why.
    pub skipped: Vec<(String, String)>,
}

fn stat_fields(pid: &str) -> Option<(String, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat[open + 1..close].to_string();
    let flags = stat[close + 2..].split_whitespace().nth(6)?.parse().ok()?;
    Some((comm, flags))
}

fn cpu_list_of(path: &str) -> Option<Vec<usize>> {
    punctual_rt::parse_cpu_list(std::fs::read_to_string(path).ok()?.trim()).ok()
}

/// Work out the moves. `keep` lists processes left alone (punctual itself).
pub fn plan(cpus: &[usize], keep: &[i32]) -> Result<ShieldPlan, ShieldError> {
    let online = online_cpus();
    punctual_rt::affinity::check_online(cpus)
        .map_err(|e| ShieldError::Usage(format!("--cpus: {e}")))?;
    let others: Vec<usize> = online
        .iter()
        .copied()
        .filter(|c| !cpus.contains(c))
        .collect();
    if others.is_empty() {
        return Err(ShieldError::Usage(format!(
            "--cpus {} would shield every online CPU ({}), leaving nowhere for the rest of the system; leave at least one out",
            format_cpu_list(cpus),
            format_cpu_list(&online)
        )));
    }
    let mut p = ShieldPlan {
        cpus: cpus.to_vec(),
        others: others.clone(),
        ..Default::default()
    };
    let procs = std::fs::read_dir("/proc")
        .map_err(|e| ShieldError::System(format!("reading /proc: {e}")))?;
    for e in procs.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if keep.contains(&pid) {
            continue;
        }
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let Some((comm, flags)) = stat_fields(&format!("{pid}/task/{tid}")) else {
                continue;
            };
            let Ok(mask) = punctual_rt::affinity::get(tid) else {
                continue;
            };
            if !mask.iter().any(|c| cpus.contains(c)) {
                continue;
            }
            if flags & PF_NO_SETAFFINITY != 0 {
                p.skipped.push((
                    format!("task {tid} ({comm})"),
                    "per-CPU kernel thread".into(),
                ));
                continue;
            }
            let to: Vec<usize> = mask.iter().copied().filter(|c| !cpus.contains(c)).collect();
            if to.is_empty() {
                p.skipped.push((
                    format!("task {tid} ({comm})"),
                    format!("pinned to CPU {} only", format_cpu_list(&mask)),
                ));
                continue;
            }
            p.moves.push(Move::Task {
                pid: tid,
                comm,
                from: mask,
                to,
            });
        }
    }
    if let Ok(irqs) = std::fs::read_dir("/proc/irq") {
        let mut names: Vec<String> = irqs
            .flatten()
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .filter(|n| n.parse::<u32>().is_ok())
            .collect();
        names.sort_by_key(|n| n.parse::<u32>().unwrap_or(0));
        for irq in names {
            let path = format!("/proc/irq/{irq}/smp_affinity_list");
            let Ok(from) = std::fs::read_to_string(&path) else {
                continue;
            };
            let Some(mask) = cpu_list_of(&path) else {
                continue;
            };
            if mask.iter().any(|c| cpus.contains(c)) {
                p.moves.push(Move::Irq {
                    irq,
                    from,
                    to: others.clone(),
                });
            }
        }
    }
    if let Ok(from) = std::fs::read_to_string("/proc/irq/default_smp_affinity") {
        p.moves.push(Move::DefaultIrq {
            from,
            to: others.clone(),
        });
    }
    if let Ok(from) = std::fs::read_to_string(RT_RUNTIME) {
        if from.trim() != "-1" {
            p.moves.push(Move::RtThrottle { from });
        }
    }
    Ok(p)
}

/// CPU list as the hex mask /proc/irq/default_smp_affinity takes.
fn hex_mask(cpus: &[usize]) -> String {
    let max = cpus.iter().copied().max().unwrap_or(0);
    let mut words = vec![0u32; max / 32 + 1];
    for &c in cpus {
        words[c / 32] |= 1 << (c % 32);
    }
    words
        .iter()
        .rev()
        .map(|w| format!("{w:08x}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// An applied shield; dropping it restores everything it changed.
pub struct Shield {
    guards: Vec<ChangeGuard>,
    pub applied: usize,
    /// Moves the kernel refused (a task exited, a managed IRQ), with the reason.
    pub refused: Vec<(String, String)>,
}

impl Shield {
    pub fn apply(plan: &ShieldPlan) -> Result<Shield, ShieldError> {
        let j = journal::global();
        let mut s = Shield {
            guards: Vec::new(),
            applied: 0,
            refused: Vec::new(),
        };
        for m in &plan.moves {
            let r = match m {
                Move::Task { pid, to, .. } => {
                    j.set_task_affinity(*pid, to).map_err(|e| e.to_string())
                }
                Move::Irq { irq, to, .. } => j
                    .write_file(
                        format!("/proc/irq/{irq}/smp_affinity_list"),
                        &format_cpu_list(to),
                    )
                    .map_err(|e| e.to_string()),
                Move::DefaultIrq { to, .. } => j
                    .write_file("/proc/irq/default_smp_affinity", &hex_mask(to))
                    .map_err(|e| e.to_string()),
                Move::RtThrottle { .. } => {
                    j.write_file(RT_RUNTIME, "-1").map_err(|e| e.to_string())
                }
            };
            match r {
                Ok(g) => {
                    s.guards.push(g);
                    s.applied += 1;
                }
                Err(e) => s.refused.push((m.to_string(), e)),
            }
        }
        if s.applied == 0 && !plan.moves.is_empty() {
            let why = s.refused.first().map(|r| r.1.clone()).unwrap_or_default();
            return Err(ShieldError::System(format!(
                "the system refused every change ({why}); run as root (CAP_SYS_NICE for affinities, write access to /proc/irq)"
            )));
        }
        Ok(s)
    }

    /// Undo now (also done on drop), newest change first.
    pub fn restore(mut self) {
        while let Some(g) = self.guards.pop() {
            drop(g);
        }
    }
}

impl Drop for Shield {
    fn drop(&mut self) {
        while let Some(g) = self.guards.pop() {
            drop(g);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shielding_every_cpu_is_refused() {
        let all = online_cpus();
        let e = plan(&all, &[]).unwrap_err().to_string();
        assert!(e.contains("every online CPU"), "{e}");
        let e = plan(&[4095], &[]).unwrap_err().to_string();
        assert!(e.contains("not online"), "{e}");
    }

    #[test]
    fn hex_masks_follow_the_kernel_format() {
        assert_eq!(hex_mask(&[0]), "00000001");
        assert_eq!(hex_mask(&[0, 1, 3]), "0000000b");
        assert_eq!(hex_mask(&[33]), "00000002,00000000");
    }

    #[test]
    fn the_plan_moves_a_task_of_ours_off_the_shielded_cpu() {
        let online = online_cpus();
        if online.len() < 2 {
            punctual_rt::privilege::report_skip(
                "the_plan_moves_a_task_of_ours_off_the_shielded_cpu",
                "needs two CPUs",
            );
            return;
        }
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let target = *online.last().unwrap();
        let p = plan(&[target], &[]).unwrap();
        let m = p
            .moves
            .iter()
            .find(|m| matches!(m, Move::Task { pid: q, .. } if *q == pid));
        match m {
            Some(Move::Task { to, .. }) => assert!(!to.contains(&target)),
            other => panic!("sleep not planned to move: {other:?}"),
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}
