//! Real-time mode (KURT's `switch_to_rt` with SCHED_KURT_PROCS): move every movable task and IRQ off
//! the shielded CPUs, so only the dispatcher (and what it releases) runs there.
//!
//! Affinity-based, so it works with cgroup v1 and v2 alike: each task's CPU mask loses the shielded
//! CPUs (tasks pinned only to shielded CPUs, and per-CPU kernel threads, cannot move and are listed
//! as skipped); each IRQ's `smp_affinity_list` and the default IRQ affinity are set to the other
//! CPUs (those no live shield holds). Every change goes through the registry of stacked settings
//! (`punctual_rt::stacked`), which every punctual process shares: a second shield over CPUs a live
//! one holds is refused, shields over other CPUs stack, and each is undone in any order without
//! writing back a value another shield (or anyone else) changed since. Tasks forked during the
//! shield that inherited a reduced mask get their ancestor's mask back. The journal holds one entry
//! per shield, so it is undone when the [`Shield`] drops, on a second Ctrl-C, and by the next
//! punctual start (or `punctual shield --restore`) after a crash.
//! Real-time mode also lifts the kernel's real-time throttling (`sched_rt_runtime_us = -1`), which
//! otherwise takes the CPU from a dispatcher that spins through dense releases for 50 ms every
//! second; the watchdog (the loop's blocks, stuck actions, RLIMIT_RTTIME) is the safety net instead.

use punctual_rt::journal::{self, Change, ChangeGuard};
use punctual_rt::stacked::{Claim, Owner, Registry, Released, Target};
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

/// What the shield could not change, in words, naming each refused IRQ's device (from
/// `/proc/interrupts`): a managed IRQ stays on its CPU, and a busy device's interrupts and the
/// softirqs they raise (a disk's BLOCK) keep landing on the shielded CPU. `None` when nothing was
/// refused.
pub fn describe_refused(refused: &[(String, String)]) -> Option<String> {
    if refused.is_empty() {
        return None;
    }
    // Numbered IRQs are labelled "N device" there.
    let interrupts = punctual_bench::gaps::read_interrupts();
    let device = |irq: &str| -> Option<String> {
        interrupts
            .keys()
            .find_map(|l| Some(l.strip_prefix(irq)?.strip_prefix(' ')?.to_string()))
    };
    let parts: Vec<String> = refused
        .iter()
        .take(4)
        .map(|(label, why)| {
            let irq = label
                .strip_prefix("IRQ ")
                .and_then(|r| r.split(':').next())
                .map(str::to_string);
            match irq.as_deref().and_then(|i| device(i).map(|d| (i.to_string(), d))) {
                Some((i, d)) => format!(
                    "IRQ {i} ({}) stays ({why}: the kernel manages its affinity, so the shielded CPU still takes its interrupts; if that device is busy, run on another CPU)",
                    punctual_time::text::display_name(&d)
                ),
                None => format!("{label} ({why})"),
            }
        })
        .collect();
    let more = refused.len().saturating_sub(4);
    Some(format!(
        "not changed: {}{}",
        parts.join("; "),
        if more > 0 {
            format!("; and {more} more")
        } else {
            String::new()
        }
    ))
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
    /// Every CPU is already shielded by this process's ancestor (`punctual shield -- punctual run`
    /// with `shield = true`): nothing to do, the enclosing shield holds.
    pub nested_in: Option<i32>,
}

impl ShieldPlan {
    /// `shield --dry-run`: every move, what cannot move and why, and a summary line.
    pub fn dry_run(&self) -> String {
        let tasks = self.moves.iter().filter(|m| matches!(m, Move::Task { .. }));
        let irqs = self.moves.iter().filter(|m| matches!(m, Move::Irq { .. }));
        let mut text = String::new();
        for m in &self.moves {
            text.push_str(&format!("would move {m}\n"));
        }
        for (what, why) in &self.skipped {
            text.push_str(&format!("cannot move {what}: {why}\n"));
        }
        text.push_str(&format!(
            "shielding CPU {} would move {} task(s) and {} IRQ(s) to CPU {}; {} task(s) cannot move\n",
            format_cpu_list(&self.cpus),
            tasks.count(),
            irqs.count(),
            format_cpu_list(&self.others),
            self.skipped.len()
        ));
        text
    }
}

/// The pid of a live shield held by an ancestor of this process over all of `cpus`.
fn enclosing(cpus: &[usize], live: &[Claim]) -> Option<i32> {
    let mut ancestors = Vec::new();
    let mut p = std::process::id() as i32;
    for _ in 0..128 {
        let Some(pp) = punctual_rt::parent_pid(p) else {
            break;
        };
        if pp <= 0 {
            break;
        }
        ancestors.push(pp);
        p = pp;
    }
    live.iter()
        .find(|c| ancestors.contains(&c.owner.pid) && cpus.iter().all(|x| c.cpus.contains(x)))
        .map(|c| c.owner.pid)
}

/// A task's name and flags (field 9); `task` is its path below /proc (`PID` or `PID/task/TID`).
fn name_and_flags(task: &str) -> Option<(String, u64)> {
    let stat = punctual_rt::ProcStat::read(format!("/proc/{task}/stat"))?;
    let flags = stat.field(9)?;
    Some((stat.name, flags))
}

fn cpu_list_of(path: &str) -> Option<Vec<usize>> {
    punctual_rt::parse_cpu_list(std::fs::read_to_string(path).ok()?.trim()).ok()
}

/// Work out the moves. `keep` lists processes left alone (punctual itself).
/// What [`plan`] would refuse for `cpus` (offline CPUs, every online CPU, CPUs another live
/// shield holds), found without reading a task: for `plan check` and the preflight.
pub fn check(cpus: &[usize]) -> Result<(), ShieldError> {
    punctual_rt::affinity::check_online(cpus)
        .map_err(|e| ShieldError::Usage(format!("--cpus: {e}")))?;
    let live = Registry::system().live_claims();
    if enclosing(cpus, &live).is_some() {
        return Ok(());
    }
    others_than(cpus, &live).map(|_| ())
}

pub fn plan(cpus: &[usize], keep: &[i32]) -> Result<ShieldPlan, ShieldError> {
    punctual_rt::affinity::check_online(cpus)
        .map_err(|e| ShieldError::Usage(format!("--cpus: {e}")))?;
    let live = Registry::system().live_claims();
    if let Some(pid) = enclosing(cpus, &live) {
        return Ok(ShieldPlan {
            cpus: cpus.to_vec(),
            nested_in: Some(pid),
            ..Default::default()
        });
    }
    let others = others_than(cpus, &live)?;
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
            let Some((comm, flags)) = name_and_flags(&format!("{pid}/task/{tid}")) else {
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
                    format!(
                        "pinned to CPU {} only: when it runs it shares the shielded CPU (on kernels \
                         with the fair deadline server, up to 50 ms a second even against SCHED_FIFO)",
                        format_cpu_list(&mask)
                    ),
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
    // Also when another shield lifted it already: this shield then holds it too, so the first
    // one's restore does not bring the throttling back under this one's dispatcher.
    if let Ok(from) = std::fs::read_to_string(RT_RUNTIME) {
        p.moves.push(Move::RtThrottle { from });
    }
    Ok(p)
}

/// The CPUs everything moves to: online, not shielded here, not held by a live shield. A live
/// shield over any of `cpus` refuses this one.
fn others_than(cpus: &[usize], live: &[Claim]) -> Result<Vec<usize>, ShieldError> {
    // A request for every online CPU is wrong whatever else runs (exit 2), so it is said first.
    let online = online_cpus();
    if online.iter().all(|c| cpus.contains(c)) {
        return Err(ShieldError::Usage(format!(
            "--cpus {} would shield every online CPU ({}), leaving nowhere for the rest of the system; leave at least one out",
            format_cpu_list(cpus),
            format_cpu_list(&online)
        )));
    }
    for c in live {
        let common: Vec<usize> = c
            .cpus
            .iter()
            .copied()
            .filter(|x| cpus.contains(x))
            .collect();
        if !common.is_empty() {
            let whose = if c.owner.pid == std::process::id() as i32 {
                "this punctual".to_string()
            } else {
                format!("punctual pid {}", c.owner.pid)
            };
            // The machine's state refuses it, not the request: exit 3 (issue 31: it was 2).
            return Err(ShieldError::System(format!(
                "CPU {} is already shielded by {whose} (CPUs {}); a second shield over the same CPUs is refused: \
                 stop that one first (or `punctual shield --restore` if it is gone), or shield other CPUs",
                format_cpu_list(&common),
                format_cpu_list(&c.cpus)
            )));
        }
    }
    let held: Vec<usize> = live.iter().flat_map(|c| c.cpus.iter().copied()).collect();
    let others: Vec<usize> = online
        .iter()
        .copied()
        .filter(|c| !cpus.contains(c) && !held.contains(c))
        .collect();
    if others.is_empty() {
        return Err(ShieldError::System(format!(
            "--cpus {} with CPU {} already shielded would shield every online CPU ({}), leaving nowhere for the rest of the system",
            format_cpu_list(cpus),
            format_cpu_list(&held),
            format_cpu_list(&online)
        )));
    }
    Ok(others)
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
    owner: Owner,
    journal: Option<ChangeGuard>,
    pub applied: usize,
    /// Moves the kernel refused (a task exited, a managed IRQ), with the reason.
    pub refused: Vec<(String, String)>,
    /// What shields of punctual processes that died had left, restored while taking the registry.
    pub recovered: Vec<Released>,
    /// Held by an enclosing shield of this process's ancestor: this one changed nothing.
    pub nested_in: Option<i32>,
}

fn sys(what: &str) -> impl Fn(std::io::Error) -> ShieldError + '_ {
    move |e| ShieldError::System(format!("{what}: {e}"))
}

impl Shield {
    /// Apply `plan`. Refused (usage) when a live shield holds any of its CPUs, or when with the
    /// live shields it would leave no CPU for the rest of the system.
    pub fn apply(plan: &ShieldPlan) -> Result<Shield, ShieldError> {
        let reg = Registry::system();
        let owner = Owner::current();
        let mut l = reg.lock().map_err(sys(
            "the shield registry (shields are for root: run as root)",
        ))?;
        if let Some(pid) = enclosing(&plan.cpus, l.claims()) {
            return Ok(Shield {
                owner,
                journal: None,
                applied: 0,
                refused: Vec::new(),
                recovered: std::mem::take(&mut l.pruned),
                nested_in: Some(pid),
            });
        }
        let others = others_than(&plan.cpus, l.claims())?;
        l.claim(owner, &plan.cpus).map_err(sys(
            "the shield registry (shields are for root: run as root)",
        ))?;
        // Journal before the first change: from here on a crash is undone by the next start.
        let guard = match journal::global().record(Change::Stacked {
            pid: owner.pid,
            start_time: owner.start_time,
        }) {
            Ok(g) => g,
            Err(e) => {
                l.release(owner);
                return Err(sys("writing the journal")(e));
            }
        };
        let mut s = Shield {
            owner,
            journal: Some(guard),
            applied: 0,
            refused: Vec::new(),
            recovered: std::mem::take(&mut l.pruned),
            nested_in: None,
        };
        // What each move sets, from the values now (a task may have moved since the plan).
        let mut items: Vec<(Target, String)> = Vec::new();
        let mut labels: Vec<(String, bool)> = Vec::new();
        for m in &plan.moves {
            let item = match m {
                Move::Task { pid, .. } => {
                    let Some(start_time) = punctual_rt::journal::task_start_time(*pid) else {
                        s.refused.push((m.to_string(), "the task exited".into()));
                        continue;
                    };
                    let t = Target::Task {
                        pid: *pid,
                        start_time,
                    };
                    let now = match l
                        .read(&t)
                        .map_err(|e| e.to_string())
                        .and_then(|c| punctual_rt::parse_cpu_list(c.trim()))
                    {
                        Ok(now) => now,
                        Err(e) => {
                            s.refused.push((m.to_string(), e));
                            continue;
                        }
                    };
                    let to: Vec<usize> = now
                        .iter()
                        .copied()
                        .filter(|c| !plan.cpus.contains(c))
                        .collect();
                    if to.len() == now.len() {
                        continue; // no longer on a shielded CPU
                    }
                    if to.is_empty() {
                        s.refused.push((
                            m.to_string(),
                            format!("pinned to CPU {} only", format_cpu_list(&now)),
                        ));
                        continue;
                    }
                    (t, format_cpu_list(&to))
                }
                Move::Irq { irq, .. } => (
                    Target::File {
                        path: format!("/proc/irq/{irq}/smp_affinity_list").into(),
                    },
                    format_cpu_list(&others),
                ),
                Move::DefaultIrq { .. } => (
                    Target::File {
                        path: "/proc/irq/default_smp_affinity".into(),
                    },
                    hex_mask(&others),
                ),
                Move::RtThrottle { .. } => (
                    Target::File {
                        path: RT_RUNTIME.into(),
                    },
                    "-1".to_string(),
                ),
            };
            items.push(item);
            labels.push((m.to_string(), matches!(m, Move::Task { .. })));
        }
        // A change refused for lack of privilege means the shield cannot hold (a task that exited
        // or a managed IRQ is the machine's business; a permission is ours).
        let mut denied = 0;
        let root = nix::unistd::geteuid().is_root();
        for (r, (label, task)) in l.write_many(owner, items).into_iter().zip(labels) {
            match r {
                Ok(()) => s.applied += 1,
                Err(e) => {
                    // EACCES: the file is not ours to write. EPERM: not ours to change, except that
                    // root gets it for a managed IRQ, whose affinity the kernel keeps.
                    let not_ours = match e.raw_os_error() {
                        Some(libc::EACCES) => true,
                        Some(libc::EPERM) => !root || task,
                        _ => false,
                    };
                    if not_ours {
                        denied += 1;
                    }
                    s.refused.push((label, e.to_string()));
                }
            }
        }
        drop(l);
        if denied > 0 {
            let total = s.applied + s.refused.len();
            drop(s);
            return Err(ShieldError::System(format!(
                "the system refused {denied} of {total} change(s) for lack of privilege, so the shield cannot hold (every change made was restored); run as root (CAP_SYS_NICE for affinities, write access to /proc/irq)"
            )));
        }
        if s.applied == 0 && !plan.moves.is_empty() {
            let why = s.refused.first().map(|r| r.1.clone()).unwrap_or_default();
            drop(s);
            return Err(ShieldError::System(format!(
                "the system refused every change ({why}); run as root (CAP_SYS_NICE for affinities, write access to /proc/irq)"
            )));
        }
        Ok(s)
    }

    /// Undo now (also done on drop). Values a later shield changed on top are left to it; values
    /// someone else changed since are left as they are and listed in the report.
    pub fn restore(mut self) -> Released {
        self.release()
    }

    fn release(&mut self) -> Released {
        if self.nested_in.is_some() {
            return Released::default();
        }
        let reg = Registry::system();
        let r = match reg.lock() {
            Ok(mut l) => l.release(self.owner),
            Err(e) => Released {
                owner: Some(self.owner),
                failed: vec![(Target::File { path: reg.file() }, e.to_string())],
                ..Default::default()
            },
        };
        // Released above (or, if the registry could not be taken, retried by the journal now and
        // at the next start).
        self.journal.take();
        r
    }
}

/// One line on what a restore did, for the user.
pub fn describe_restore(r: &Released) -> String {
    let mut s = format!("{} change(s) restored", r.restored);
    if r.handed_over > 0 {
        s += &format!(
            ", {} left to a shield still in force (it restores them)",
            r.handed_over
        );
    }
    if !r.widened.is_empty() {
        s += &format!(
            ", {} task(s) started during the shield given their full CPU mask back",
            r.widened.len()
        );
    }
    if !r.left_changed.is_empty() {
        let what: Vec<String> = r
            .left_changed
            .iter()
            .take(5)
            .map(|(t, v)| format!("{t} (now {v})"))
            .collect();
        s += &format!(
            "; {} left as someone else changed them since: {}",
            r.left_changed.len(),
            what.join(", ")
        );
    }
    if !r.failed.is_empty() {
        let what: Vec<String> = r
            .failed
            .iter()
            .take(5)
            .map(|(t, e)| format!("{t}: {e}"))
            .collect();
        s += &format!(
            "; {} could not be restored: {}",
            r.failed.len(),
            what.join(", ")
        );
    }
    s
}

impl Drop for Shield {
    fn drop(&mut self) {
        if self.journal.is_some() {
            self.release();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dry_run_lists_every_move_and_counts_tasks_and_irqs() {
        let p = ShieldPlan {
            cpus: vec![1],
            others: vec![0],
            moves: vec![
                Move::Task {
                    pid: 42,
                    comm: "hog".into(),
                    from: vec![0, 1],
                    to: vec![0],
                },
                Move::Irq {
                    irq: "9".into(),
                    from: "0-1\n".into(),
                    to: vec![0],
                },
                Move::RtThrottle {
                    from: "950000".into(),
                },
            ],
            skipped: vec![(
                "task 7 (kworker/1:0)".into(),
                "per-CPU kernel thread".into(),
            )],
            nested_in: None,
        };
        assert_eq!(
            p.dry_run(),
            "would move task 42 (hog): CPUs 0-1 -> 0\n\
             would move IRQ 9: CPUs 0-1 -> 0\n\
             would move /proc/sys/kernel/sched_rt_runtime_us: 950000 -> -1 (no real-time throttling)\n\
             cannot move task 7 (kworker/1:0): per-CPU kernel thread\n\
             shielding CPU 1 would move 1 task(s) and 1 IRQ(s) to CPU 0; 1 task(s) cannot move\n"
        );
    }

    #[test]
    fn shielding_every_cpu_is_refused() {
        let all = online_cpus();
        let e = plan(&all, &[]).unwrap_err().to_string();
        assert!(e.contains("every online CPU"), "{e}");
        let e = plan(&[4095], &[]).unwrap_err().to_string();
        assert!(e.contains("not online"), "{e}");
    }

    #[test]
    fn a_shield_inside_an_ancestors_shield_over_the_same_cpus_is_nested() {
        // SAFETY: getppid has no preconditions.
        let parent = unsafe { libc::getppid() };
        let claim = |pid: i32, cpus: Vec<usize>| Claim {
            owner: Owner { pid, start_time: 0 },
            cpus,
            since: 0,
        };
        assert_eq!(enclosing(&[1], &[claim(parent, vec![1])]), Some(parent));
        assert_eq!(
            enclosing(&[1, 2], &[claim(parent, vec![1])]),
            None,
            "CPU 2 is not held"
        );
        let stranger = i32::MAX - 11;
        assert_eq!(enclosing(&[1], &[claim(stranger, vec![1])]), None);
        // A stranger's shield over the same CPU is a conflict, not a nest.
        let e = others_than(&[1], &[claim(stranger, vec![1])])
            .unwrap_err()
            .to_string();
        assert!(e.contains("already shielded by punctual pid"), "{e}");
    }

    #[test]
    fn refused_irqs_are_named_with_their_device_and_what_it_means() {
        assert_eq!(describe_refused(&[]), None);
        // Any numbered IRQ of this machine, with its name as /proc/interrupts gives it.
        let Some((irq, name)) = punctual_bench::gaps::read_interrupts()
            .keys()
            .find_map(|l| {
                let (n, name) = l.split_once(' ')?;
                n.parse::<u32>().ok()?;
                Some((n.to_string(), name.to_string()))
            })
        else {
            punctual_testkit::skip(
                "refused_irqs_are_named_with_their_device_and_what_it_means",
                "no numbered IRQ in /proc/interrupts",
            );
            return;
        };
        let refused = vec![
            (
                format!("IRQ {irq}: CPUs 0-1 -> 0"),
                "Input/output error (os error 5)".to_string(),
            ),
            (
                "task 42 (x): CPUs 1 -> 0".to_string(),
                "the task exited".to_string(),
            ),
        ];
        let text = describe_refused(&refused).unwrap();
        assert!(
            text.contains(&format!("IRQ {irq} ({name}) stays")),
            "{text}"
        );
        assert!(text.contains("still takes its interrupts"), "{text}");
        assert!(
            text.contains("task 42 (x): CPUs 1 -> 0 (the task exited)"),
            "{text}"
        );
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
            punctual_testkit::skip(
                "the_plan_moves_a_task_of_ours_off_the_shielded_cpu",
                "needs two CPUs",
            );
            return;
        }
        // The plan reads the machine's live shields: another test's shield on the other CPU
        // (the hog tests shield CPU 0 under this lock) made it refuse in a loaded suite run.
        let _cpu = punctual_testkit::exclusive_cpu();
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        // The runner may pin its tests to one CPU (CI does): the child gets every online CPU, so
        // the shielded one is in its mask.
        punctual_rt::affinity::set(pid, &online).unwrap();
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
