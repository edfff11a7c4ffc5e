//! The parts of the machine a measurement changes or reads, behind a trait: [`RealSystem`] is
//! this machine, [`FakeSystem`] grants everything, changes nothing and reports fixed figures, so
//! a whole pipeline runs in a snapshot test.

use punctual_load::{LoadKind, LoadReport, LoadSpec, Loads, StartOptions};
use punctual_result::{Failure, HostFacts};
use punctual_rt::host::StealMeter;
use punctual_rt::Privileges;
use std::any::Any;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// What a load supervisor returns when it stops: per instance, its kind, CPU and report.
pub type LoadReports = Vec<(LoadKind, Option<usize>, Option<LoadReport>)>;

/// Loads running for a measurement.
pub trait RunningLoads {
    /// Wait until every instance runs its body (or the timeout); how many did.
    fn wait_ready(&mut self, timeout: Duration, stop: &AtomicBool) -> usize;
    /// Stop and reap every instance; what each reported.
    fn stop(self: Box<Self>) -> LoadReports;
}

impl RunningLoads for Loads {
    fn wait_ready(&mut self, timeout: Duration, stop: &AtomicBool) -> usize {
        Loads::wait_ready(self, timeout, stop)
    }
    fn stop(self: Box<Self>) -> LoadReports {
        Loads::stop(*self)
    }
}

/// The parts of the machine a session changes or reads while it runs.
pub trait System: Send + Sync {
    fn privileges(&self) -> Privileges;
    /// `mlockall`, held until the returned guard drops.
    fn lock_memory(&self) -> Result<Box<dyn Any>, String>;
    /// Hold `/dev/cpu_dma_latency` at `us` until the returned guard drops.
    fn hold_dma_latency(&self, us: u32) -> Result<Box<dyn Any>, String>;
    /// The CPUs this process may run on whose idle halts whatever `/dev/cpu_dma_latency` asks
    /// (no polling idle state: [`punctual_rt::idle_poll`]).
    fn idle_halts(&self) -> Vec<usize>;
    /// Keep `cpus` from halting when idle until the returned guard drops: an idle-class thread
    /// spinning on each ([`punctual_rt::idle_poll::Pollers`]).
    fn poll_when_idle(&self, cpus: &[usize]) -> Result<Box<dyn Any>, String>;
    /// Steal time per CPU from now on (`None`: the kernel does not report it).
    fn steal(&self) -> Option<StealMeter>;
    /// Start `spec`'s load processes (`opts`: their scheduling class, when not inherited).
    fn start_loads(
        &self,
        spec: &LoadSpec,
        exe: &Path,
        opts: &StartOptions,
    ) -> Result<Box<dyn RunningLoads>, Failure>;
}

/// This machine.
pub struct RealSystem;

impl System for RealSystem {
    fn privileges(&self) -> Privileges {
        Privileges::detect()
    }
    fn lock_memory(&self) -> Result<Box<dyn Any>, String> {
        punctual_rt::memlock::MlockGuard::lock_all()
            .map(|g| Box::new(g) as Box<dyn Any>)
            .map_err(|e| e.to_string())
    }
    fn hold_dma_latency(&self, us: u32) -> Result<Box<dyn Any>, String> {
        punctual_rt::dma::DmaLatencyGuard::request(us)
            .map(|g| Box::new(g) as Box<dyn Any>)
            .map_err(|e| e.to_string())
    }
    fn idle_halts(&self) -> Vec<usize> {
        punctual_rt::affinity::get(0)
            .unwrap_or_default()
            .into_iter()
            .filter(|&c| punctual_rt::idle_poll::halts_when_idle(c))
            .collect()
    }
    fn poll_when_idle(&self, cpus: &[usize]) -> Result<Box<dyn Any>, String> {
        punctual_rt::idle_poll::Pollers::start(cpus).map(|p| Box::new(p) as Box<dyn Any>)
    }
    fn steal(&self) -> Option<StealMeter> {
        StealMeter::start()
    }
    fn start_loads(
        &self,
        spec: &LoadSpec,
        exe: &Path,
        opts: &StartOptions,
    ) -> Result<Box<dyn RunningLoads>, Failure> {
        // Loads start on the calling (main) thread: the parent-death signal follows the thread
        // that forked.
        Loads::start_with(spec, exe, opts)
            .map(|l| Box::new(l) as Box<dyn RunningLoads>)
            .map_err(|e| Failure::system(e.to_string()))
    }
}

/// A machine that grants every privilege, changes nothing, reports no steal time, and whose loads
/// report fixed work (one unit in 1 ms of CPU per instance, pid 0).
pub struct FakeSystem;

/// The loads of [`FakeSystem`]: nothing runs; each instance reports fixed figures.
pub struct FakeLoads(Vec<(LoadKind, Option<usize>)>);

impl RunningLoads for FakeLoads {
    fn wait_ready(&mut self, _timeout: Duration, _stop: &AtomicBool) -> usize {
        self.0.len()
    }
    fn stop(self: Box<Self>) -> LoadReports {
        self.0
            .into_iter()
            .map(|(kind, cpu)| {
                let report = LoadReport {
                    kind: kind.name().into(),
                    pid: 0,
                    cpu,
                    ops: 1,
                    elapsed_ns: 1_000_000,
                    cpu_ns: Some(1_000_000),
                };
                (kind, cpu, Some(report))
            })
            .collect()
    }
}

impl System for FakeSystem {
    fn privileges(&self) -> Privileges {
        Privileges {
            euid: 0,
            cap_sys_nice: true,
            cap_ipc_lock: true,
            rlimit_rtprio: 99,
            rlimit_memlock: None,
            dma_latency_writable: true,
            realtime_refused: None,
        }
    }
    fn lock_memory(&self) -> Result<Box<dyn Any>, String> {
        Ok(Box::new(()))
    }
    fn hold_dma_latency(&self, _us: u32) -> Result<Box<dyn Any>, String> {
        Ok(Box::new(()))
    }
    fn idle_halts(&self) -> Vec<usize> {
        Vec::new()
    }
    fn poll_when_idle(&self, _cpus: &[usize]) -> Result<Box<dyn Any>, String> {
        Ok(Box::new(()))
    }
    fn steal(&self) -> Option<StealMeter> {
        None
    }
    fn start_loads(
        &self,
        spec: &LoadSpec,
        _exe: &Path,
        _opts: &StartOptions,
    ) -> Result<Box<dyn RunningLoads>, Failure> {
        let mut instances = Vec::new();
        for item in &spec.items {
            for i in 0..item.count {
                instances.push((item.kind, item.cpu_for(i)));
            }
        }
        Ok(Box::new(FakeLoads(instances)))
    }
}

/// The host of a fake environment: fixed facts for snapshot tests.
pub fn fake_host() -> HostFacts {
    HostFacts {
        kernel: "6.12.0-test".into(),
        preempt: "dynamic: full".into(),
        realtime: false,
        cpus: 2,
        clocksource: "tsc".into(),
        virtualized: true,
        hz: Some(250),
        hostname: "testbox".into(),
        cpu_model: "Test CPU @ 2.0GHz".into(),
    }
}
