//! Whether `/dev/cpu_dma_latency` can keep an idle CPU from halting: only where its cpuidle driver
//! has a polling state. On a kernel without a cpuidle driver (no `cpuidle/state*` for the CPU, as
//! in this project's Firecracker guest since 2026-12-01) every idle CPU runs `HLT` whatever latency
//! is requested, and under a hypervisor a halted virtual CPU waits for the host to run it again
//! when its timer fires or a wake-up reaches it. A `SCHED_IDLE` thread spinning on each such CPU
//! was tried and not kept: the fair server runs it for up to 50 ms in place of real-time work
//! (docs/benchmarks.md, "CPUs that halt when idle").

/// Where this machine's CPUs are described.
const SYS_CPU: &str = "/sys/devices/system/cpu";

/// The index of `cpu`'s cpuidle state named `POLL` under `root` (`/sys/devices/system/cpu` on this
/// machine), if it has one.
pub fn poll_state_in(root: &std::path::Path, cpu: usize) -> Option<u32> {
    let dir = root.join(format!("cpu{cpu}/cpuidle"));
    (0..16u32).find(|k| {
        std::fs::read_to_string(dir.join(format!("state{k}/name")))
            .is_ok_and(|n| n.trim() == "POLL")
    })
}

/// [`poll_state_in`] on this machine.
pub fn poll_state(cpu: usize) -> Option<u32> {
    poll_state_in(std::path::Path::new(SYS_CPU), cpu)
}

/// Whether `cpu`'s idle halts whatever `/dev/cpu_dma_latency` asks: it has no polling idle state
/// ([`poll_state`]), including when it has no cpuidle states at all.
pub fn halts_when_idle_in(root: &std::path::Path, cpu: usize) -> bool {
    poll_state_in(root, cpu).is_none()
}

/// [`halts_when_idle_in`] on this machine.
pub fn halts_when_idle(cpu: usize) -> bool {
    halts_when_idle_in(std::path::Path::new(SYS_CPU), cpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_without_a_polling_state_halts_when_idle() {
        let root = tempfile::tempdir().unwrap();
        let state = |cpu: usize, k: u32, name: &str| {
            let d = root.path().join(format!("cpu{cpu}/cpuidle/state{k}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("name"), format!("{name}\n")).unwrap();
        };
        state(0, 0, "POLL");
        state(0, 1, "C1");
        state(1, 0, "C1");
        std::fs::create_dir_all(root.path().join("cpu2")).unwrap();
        assert_eq!(poll_state_in(root.path(), 0), Some(0));
        assert_eq!(poll_state_in(root.path(), 1), None);
        assert!(!halts_when_idle_in(root.path(), 0));
        assert!(halts_when_idle_in(root.path(), 1));
        assert!(halts_when_idle_in(root.path(), 2), "no cpuidle driver");
    }
}
