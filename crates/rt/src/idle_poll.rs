//! Whether `/dev/cpu_dma_latency` can keep an idle CPU from halting: only where its cpuidle driver
//! has a polling state. On a kernel without a cpuidle driver (no `cpuidle/state*` for the CPU, as
//! in this project's Firecracker guest since 2026-12-01) every idle CPU runs `HLT` whatever latency
//! is requested, and under a hypervisor a halted virtual CPU waits for the host to run it again
//! when its timer fires or a wake-up reaches it.
//!
//! [`Pollers`] does in user space what the polling state does in the kernel: one `SCHED_IDLE`
//! thread per such CPU reads the clock in a loop, so the CPU never idles and a wake-up preempts a
//! running thread instead of waking a halted CPU. It spins only where punctual's real-time work
//! is woken ([`Claim`]), and steps aside when other work keeps its CPU ([`Rule`]): a first
//! version (2026-12-01, not kept) spun on every CPU without pause, and where a real-time loop kept
//! the CPU for seconds the fair server ran it for up to 50 ms in place of that loop
//! (docs/design.md, "Idle that halts").

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{JoinHandle, Thread};

/// A poller that went this long between two of its clock readings was kept off its CPU by other
/// work for longer than interrupts and kernel workers keep it (the longest `vmstat_update` seen
/// here took 0.5 ms): real-time work that does not sleep. The poller then retires until its CPU's
/// claims change ([`Rule`]). Below this it spins on without a system call: the kernel here is not
/// preemptible, and any time the poller spends in the kernel holds a real-time wake-up.
pub const STARVED_NS: u64 = 50_000_000;
/// The pollers' thread names start with this (`punctual-idle<cpu>`).
pub const THREAD_PREFIX: &str = "punctual-idle";

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

/// CPUs at or past this have no counts: their pollers never spin.
const MAX_CPUS: usize = 1024;
/// Per CPU, how many [`Claim::poll`] guards want it polled, and how many [`Claim::aside`] guards
/// veto that.
static WANTED: [AtomicU32; MAX_CPUS] = [const { AtomicU32::new(0) }; MAX_CPUS];
static ASIDE: [AtomicU32; MAX_CPUS] = [const { AtomicU32::new(0) }; MAX_CPUS];
/// Per CPU, how many times its claims changed: a retired poller spins again at the next change.
static GENERATION: [AtomicU32; MAX_CPUS] = [const { AtomicU32::new(0) }; MAX_CPUS];
/// The running pollers' threads, to wake when their CPU's claims change.
static POLLERS: Mutex<Vec<(usize, Thread)>> = Mutex::new(Vec::new());

/// A poller spins only while its CPU is claimed for polling and not set aside; otherwise it is
/// parked. A poller spinning where nothing waits to be woken only costs: on this project's VM a
/// spinning CPU 0 made the host stop CPU 1 for about 1.8 ms a second (docs/benchmarks.md, "Idle
/// that halts"). So punctual's real-time work claims the CPUs where it is woken (a dispatcher that
/// sleeps between releases and its clients' CPUs, a sender, a measuring thread), and its loops
/// that keep a CPU for seconds (a dense plan's dispatcher, a dense replay's sender, `bench gaps`'
/// watch) set theirs aside, so that no poller is left runnable under them for the fair server to
/// run in their place. Dropping the guard gives the claim back.
pub struct Claim {
    cpus: Vec<usize>,
    counts: &'static [AtomicU32; MAX_CPUS],
}

impl Claim {
    /// Poll `cpus` while this lives.
    pub fn poll(cpus: &[usize]) -> Claim {
        Claim::take(cpus, &WANTED)
    }

    /// Keep `cpus`' pollers parked while this lives, whoever claims them.
    pub fn aside(cpus: &[usize]) -> Claim {
        Claim::take(cpus, &ASIDE)
    }

    fn take(cpus: &[usize], counts: &'static [AtomicU32; MAX_CPUS]) -> Claim {
        let mut cpus: Vec<usize> = cpus.iter().copied().filter(|&c| c < MAX_CPUS).collect();
        cpus.sort_unstable();
        cpus.dedup();
        for &c in &cpus {
            counts[c].fetch_add(1, Ordering::SeqCst);
        }
        wake(&cpus);
        Claim { cpus, counts }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        for &c in &self.cpus {
            self.counts[c].fetch_sub(1, Ordering::SeqCst);
        }
        wake(&self.cpus);
    }
}

/// Unpark the pollers of `cpus`, to look at their claims again.
fn wake(cpus: &[usize]) {
    for &c in cpus {
        GENERATION[c].fetch_add(1, Ordering::SeqCst);
    }
    for (c, t) in POLLERS.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        if cpus.contains(c) {
            t.unpark();
        }
    }
}

/// Whether `cpu`'s poller may spin: claimed for polling and not set aside.
pub fn wanted(cpu: usize) -> bool {
    cpu < MAX_CPUS
        && WANTED[cpu].load(Ordering::Relaxed) > 0
        && ASIDE[cpu].load(Ordering::Relaxed) == 0
}

/// One idle-class thread per CPU that keeps it from halting, stopped and joined on drop.
pub struct Pollers {
    cpus: Vec<usize>,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Pollers {
    /// A poller on each of `cpus`, each pinned there in `SCHED_IDLE` before it starts to spin.
    pub fn start(cpus: &[usize]) -> Result<Pollers, String> {
        crate::affinity::check_online(cpus).map_err(|e| e.to_string())?;
        let mut p = Pollers {
            cpus: cpus.to_vec(),
            shared: Arc::default(),
            threads: Vec::new(),
        };
        for &cpu in cpus {
            let shared = p.shared.clone();
            let (tx, rx) = std::sync::mpsc::channel();
            let t = std::thread::Builder::new()
                .name(format!("{THREAD_PREFIX}{cpu}"))
                .stack_size(64 << 10)
                .spawn(move || {
                    let ready = settle(cpu);
                    let ok = ready.is_ok();
                    let _ = tx.send(ready);
                    if ok {
                        poll(&shared, cpu);
                    }
                })
                .map_err(|e| format!("starting the idle poller for CPU {cpu}: {e}"))?;
            POLLERS
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((cpu, t.thread().clone()));
            p.threads.push(t);
            // Dropping `p` on an error stops and joins the pollers already started.
            rx.recv()
                .map_err(|_| format!("the idle poller for CPU {cpu} ended before it started"))??;
        }
        Ok(p)
    }

    /// The CPUs polled.
    pub fn cpus(&self) -> &[usize] {
        &self.cpus
    }

    /// How many times a poller parked because its CPU was not claimed ([`Claim`]).
    pub fn parked(&self) -> u64 {
        self.shared.parked.load(Ordering::Relaxed)
    }

    /// How many times a poller began to spin, its CPU claimed.
    pub fn spun(&self) -> u64 {
        self.shared.spun.load(Ordering::Relaxed)
    }
}

/// What a set of pollers shares with its threads.
#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    parked: AtomicU64,
    spun: AtomicU64,
}

impl Drop for Pollers {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        let ids: Vec<_> = self.threads.iter().map(|t| t.thread().id()).collect();
        POLLERS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(_, t)| !ids.contains(&t.id()));
        for t in &self.threads {
            t.thread().unpark();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Pin the calling thread to `cpu` and put it in the idle class.
fn settle(cpu: usize) -> Result<(), String> {
    crate::affinity::set(0, &[cpu]).map_err(|e| e.to_string())?;
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; p is valid.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &p) } != 0 {
        return Err(format!(
            "sched_setscheduler(idle) for the idle poller on CPU {cpu}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// Read the clock until told to stop, parking whenever [`Rule`] says. No `PAUSE` in the loop:
/// under a hypervisor a loop of them may make the host deschedule the virtual CPU.
fn poll(shared: &Shared, cpu: usize) {
    let mut rule = Rule::default();
    let mut spinning = false;
    while !shared.stop.load(Ordering::Relaxed) {
        let gen = GENERATION[cpu].load(Ordering::SeqCst);
        match rule.next(now(), wanted(cpu), gen) {
            Step::Spin if !spinning => {
                spinning = true;
                shared.spun.fetch_add(1, Ordering::Relaxed);
            }
            Step::Spin => {}
            Step::Park => {
                spinning = false;
                shared.parked.fetch_add(1, Ordering::Relaxed);
                // Until a claim on this CPU changes (it unparks this thread), or a spurious
                // wake-up (the rule parks again).
                std::thread::park();
            }
        }
    }
}

/// What a poller does next ([`Rule::next`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Spin,
    Park,
}

/// When a poller spins. Only while its CPU is claimed and not set aside ([`wanted`]). And not
/// after a gap longer than [`STARVED_NS`] between two of its readings: real-time work kept the
/// CPU, which then is not idling. It retires until the CPU's claims change (the next run, row or
/// thread). It does not wake itself to look again: the fair server runs an idle-class thread that
/// wakes on a CPU that real-time work keeps at once, over that work. A version that looked every
/// 10-160 ms, reading `/proc/stat` for the CPU's idle time, held a 500 us replay's loop for
/// 11-90 us at each look (14-28 sends a 20 s run, 2026-12-01); one before it that went back to
/// spinning whenever it was run on time was run by the server for 50 ms a second over a 10 us
/// plan's loop.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rule {
    /// The last reading while spinning (`None` after a park: the time parked is no gap).
    last: Option<u64>,
    /// The claims' generation when the poller retired.
    retired: Option<u32>,
}

impl Rule {
    /// After a reading at `t` (ns), with the CPU `wanted` and its claims at generation `gen`.
    pub fn next(&mut self, t: u64, wanted: bool, gen: u32) -> Step {
        if !wanted || self.retired == Some(gen) {
            self.last = None;
            return Step::Park;
        }
        self.retired = None;
        if self.last.is_some_and(|l| t.saturating_sub(l) > STARVED_NS) {
            self.retired = Some(gen);
            self.last = None;
            return Step::Park;
        }
        self.last = Some(t);
        Step::Spin
    }
}

fn now() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
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

    /// A poller spins while its CPU is wanted and its readings come close together; kept off its
    /// CPU longer than [`STARVED_NS`], it parks and stays parked, however often it is run, until
    /// its CPU's claims change; a park in between is no gap.
    #[test]
    fn a_poller_kept_off_its_cpu_retires_until_its_claims_change() {
        let ms = 1_000_000;
        let mut r = Rule::default();
        assert_eq!(r.next(0, false, 1), Step::Park, "not wanted");
        assert_eq!(
            r.next(100 * ms, true, 2),
            Step::Spin,
            "wanted: the park was no gap"
        );
        assert_eq!(
            r.next(100 * ms + 50_000, true, 2),
            Step::Spin,
            "50 us preempted"
        );
        assert_eq!(
            r.next(103 * ms, true, 2),
            Step::Spin,
            "a kernel worker's 3 ms"
        );
        assert_eq!(r.next(103 * ms + STARVED_NS, true, 2), Step::Spin);
        let t = 103 * ms + STARVED_NS;
        assert_eq!(r.next(t + 200 * ms, true, 2), Step::Park, "kept off 200 ms");
        for k in 1..5 {
            assert_eq!(
                r.next(t + 200 * ms + k * ms, true, 2),
                Step::Park,
                "retired"
            );
        }
        assert_eq!(
            r.next(t + 900 * ms, true, 3),
            Step::Spin,
            "the claims changed"
        );
        assert_eq!(r.next(t + 901 * ms, true, 3), Step::Spin);
        assert_eq!(r.next(t + 902 * ms, false, 4), Step::Park);
        assert_eq!(
            r.next(t + 1900 * ms, true, 5),
            Step::Spin,
            "a park is no gap"
        );
    }

    /// The pollers run in the idle class, one on each CPU asked, named for the trace, and stop
    /// when dropped.
    #[test]
    fn pollers_spin_in_the_idle_class_on_their_cpus_and_stop_on_drop() {
        let cpus = crate::affinity::get(0).unwrap();
        let cpu = *cpus.last().unwrap();
        let tids = |name: &str| -> Vec<i32> {
            std::fs::read_dir("/proc/self/task")
                .unwrap()
                .filter_map(|e| {
                    let e = e.ok()?;
                    let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
                    (comm.trim() == name).then(|| e.file_name().to_str()?.parse().ok())?
                })
                .collect()
        };
        let name = format!("{THREAD_PREFIX}{cpu}");
        let p = Pollers::start(&[cpu]).unwrap();
        assert_eq!(p.cpus(), [cpu]);
        let found = tids(&name);
        assert_eq!(found.len(), 1, "{name}: {found:?}");
        // SAFETY: a thread id of this process.
        let policy = unsafe { libc::sched_getscheduler(found[0]) };
        assert_eq!(policy, libc::SCHED_IDLE);
        assert_eq!(crate::affinity::get(found[0]).unwrap(), [cpu]);
        // An idle-class thread on a loaded machine may wait a while for its turn.
        let wait_for = |what: &str, done: &dyn Fn() -> bool| {
            let t0 = std::time::Instant::now();
            while !done() {
                assert!(t0.elapsed().as_secs() < 20, "{what}");
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        };
        // Unclaimed, it parks at once; claimed, it spins; set aside, it parks again whoever
        // claims the CPU; the claim dropped, it stays parked.
        let state = |tid: i32| -> char {
            let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
            stat[stat.rfind(')').unwrap() + 2..].chars().next().unwrap()
        };
        wait_for("parked while unclaimed", &|| p.parked() >= 1);
        let parked = p.parked();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(p.parked(), parked, "parked until claimed");
        assert_eq!(state(found[0]), 'S');
        assert_eq!(p.spun(), 0);
        let claim = Claim::poll(&[cpu]);
        assert!(wanted(cpu));
        wait_for("spinning, claimed", &|| p.spun() == 1);
        let aside = Claim::aside(&[cpu]);
        assert!(!wanted(cpu));
        wait_for("parked again, set aside", &|| p.parked() > parked);
        drop(aside);
        wait_for("spinning again", &|| p.spun() == 2);
        drop(claim);
        assert!(!wanted(cpu));
        wait_for("parked, unclaimed", &|| {
            state(found[0]) == 'S' && p.parked() > parked + 1
        });
        drop(p);
        assert!(tids(&name).is_empty(), "the poller ended");
        assert!(Pollers::start(&[usize::MAX >> 1]).is_err(), "no such CPU");
    }
}
