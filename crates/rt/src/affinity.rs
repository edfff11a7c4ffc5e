//! CPU lists (`0-3,5`), the online CPUs, and the calling thread's affinity.

pub use punctual_time::cpus::{format_cpu_list, parse_cpu_list};

use crate::RtError;
use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// The CPUs the kernel reports online.
pub fn online_cpus() -> Vec<usize> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| parse_cpu_list(&s).ok())
        .unwrap_or_else(|| {
            (0..std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1))
                .collect()
        })
}

/// The default CPU of measurements that run on one: the last online one, since CPU 0 usually
/// takes most device interrupts.
pub fn last_online_cpu() -> usize {
    *online_cpus().last().expect("a CPU is online")
}

/// Where punctual's own housekeeping threads (the watchdog, its share sampler, the trace drain)
/// run: the online CPUs in none of `tiers`, else in none of the tiers but the last, and so on.
/// `None` when that leaves every online CPU (nothing to avoid, or the first tier covers them
/// all): the thread keeps the affinity it has. Tiers go from what to avoid most: a run's periodic
/// clients (a delay at a client's instant is a late release) before its dispatchers (a delay
/// before a hand-over is taken from the lead).
pub fn housekeeping_cpus(tiers: &[&[usize]]) -> Option<Vec<usize>> {
    let online = online_cpus();
    let cpus = housekeeping_among(&online, tiers);
    (cpus.len() < online.len()).then_some(cpus)
}

fn housekeeping_among(online: &[usize], tiers: &[&[usize]]) -> Vec<usize> {
    (0..=tiers.len())
        .rev()
        .map(|n| {
            online
                .iter()
                .copied()
                .filter(|c| !tiers[..n].iter().any(|t| t.contains(c)))
                .collect::<Vec<usize>>()
        })
        .find(|free| !free.is_empty())
        .unwrap_or_else(|| online.to_vec())
}

/// Refuse CPUs that are not online, naming them and the ones that are.
pub fn check_online(cpus: &[usize]) -> Result<(), RtError> {
    let online = online_cpus();
    let missing: Vec<usize> = cpus
        .iter()
        .copied()
        .filter(|c| !online.contains(c))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(RtError::Invalid(format!(
            "CPU {} not online (online: {})",
            format_cpu_list(&missing),
            format_cpu_list(&online)
        )))
    }
}

fn to_set(cpus: &[usize]) -> Result<CpuSet, RtError> {
    let mut set = CpuSet::new();
    for &c in cpus {
        set.set(c)
            .map_err(|e| RtError::Invalid(format!("CPU {c}: {e}")))?;
    }
    Ok(set)
}

fn from_set(set: &CpuSet) -> Vec<usize> {
    (0..CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect()
}

/// Affinity of a task (0 = the calling thread).
pub fn get(pid: i32) -> Result<Vec<usize>, RtError> {
    sched_getaffinity(Pid::from_raw(pid))
        .map(|s| from_set(&s))
        .map_err(|e| RtError::io(format!("sched_getaffinity({pid})"), e.into()))
}

/// Set the affinity of a task (0 = the calling thread).
pub fn set(pid: i32, cpus: &[usize]) -> Result<(), RtError> {
    let set = to_set(cpus)?;
    sched_setaffinity(Pid::from_raw(pid), &set).map_err(|e| {
        RtError::from_os(
            format!("sched_setaffinity({pid}, {})", format_cpu_list(cpus)),
            e.into(),
            "run as root or as the task's owner; the CPUs must be in the task's cpuset",
        )
    })
}

/// Pins the calling thread; restores its previous affinity on drop.
pub struct AffinityGuard {
    previous: Vec<usize>,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl AffinityGuard {
    pub fn pin(cpus: &[usize]) -> Result<Self, RtError> {
        check_online(cpus)?;
        let previous = get(0)?;
        set(0, cpus)?;
        Ok(AffinityGuard {
            previous,
            _not_send: std::marker::PhantomData,
        })
    }
}

impl Drop for AffinityGuard {
    fn drop(&mut self) {
        let _ = set(0, &self.previous);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn housekeeping_avoids_clients_first_then_dispatchers() {
        let (clients, dispatchers): (&[usize], &[usize]) = (&[0, 1], &[3]);
        let tiers = [clients, dispatchers];
        // Four CPUs: the one with neither.
        assert_eq!(housekeeping_among(&[0, 1, 2, 3], &tiers), [2]);
        // Two, (c) here: clients on 0, the dispatcher on 1: the dispatcher's CPU.
        assert_eq!(housekeeping_among(&[0, 1], &[&[0], &[1]]), [1]);
        // (d): the clients on the dispatcher's CPU: the other.
        assert_eq!(housekeeping_among(&[0, 1], &[&[1], &[1]]), [0]);
        // No clients: off the dispatcher, as before.
        assert_eq!(housekeeping_among(&[0, 1], &[&[], &[1]]), [0]);
        // Clients everywhere: anywhere.
        assert_eq!(housekeeping_among(&[0, 1], &[&[0, 1], &[1]]), [0, 1]);
        assert_eq!(housekeeping_among(&[0, 1], &[]), [0, 1]);
    }

    #[test]
    fn lists() {
        assert_eq!(parse_cpu_list("0-3,5").unwrap(), vec![0, 1, 2, 3, 5]);
        assert_eq!(parse_cpu_list(" 1 , 1,0 ").unwrap(), vec![0, 1]);
        assert!(parse_cpu_list("3-1").unwrap_err().contains("backwards"));
        assert!(parse_cpu_list("a").is_err());
        assert!(parse_cpu_list("").is_err());
        assert!(parse_cpu_list("99999").is_err());
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 5, 7, 8]), "0-3,5,7-8");
    }

    #[test]
    fn offline_cpu_is_named() {
        let e = check_online(&[4000]).unwrap_err().to_string();
        assert!(e.contains("CPU 4000 not online"), "{e}");
    }

    #[test]
    fn guard_pins_and_restores() {
        std::thread::spawn(|| {
            let before = get(0).unwrap();
            let cpu = last_online_cpu();
            let g = AffinityGuard::pin(&[cpu]).unwrap();
            assert_eq!(get(0).unwrap(), vec![cpu]);
            drop(g);
            assert_eq!(get(0).unwrap(), before);
        })
        .join()
        .unwrap();
    }

    proptest! {
        #[test]
        fn format_then_parse_round_trips(cpus in proptest::collection::btree_set(0usize..256, 1..40)) {
            let v: Vec<usize> = cpus.into_iter().collect();
            prop_assert_eq!(parse_cpu_list(&format_cpu_list(&v)).unwrap(), v);
        }
    }
}
