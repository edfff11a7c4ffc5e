//! In-memory capture for explaining lateness (`--explain`): a private instance traces only the
//! events an attribution reads, on the CPUs involved, and a drain thread decodes the pages into
//! per-CPU memory, with the guest's steal counters sampled beside them. Nothing is written to disk.
//!
//! Memory is bounded: each CPU keeps at most `max_events / cpus` events; beyond, the oldest are
//! dropped and counted ([`Captured::evicted`]), and the time before a CPU's oldest kept event is
//! known to be uncovered ([`Captured::covered_from`]), so a release there is said to be
//! unexplained rather than guessed at. The drain sleeps in `poll` like [`crate::record`]'s, and
//! records its own CPU time, which is the user-space part of the capture's cost.

use crate::event::{Event, EventKind, Vector};
use crate::kernel::decode::Decoder;
use crate::kernel::format::PageLayout;
use crate::kernel::instance::{instance_name, orphan_instances, Instance};
use crate::kernel::page::{parse_page, Missed};
use crate::kernel::tracefs::Tracefs;
use crate::kernel::KernelEvent;
use crate::ring::{ChunkPool, ChunkRing};
use crate::TraceError;
use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What to capture.
#[derive(Clone, Debug)]
pub struct CaptureConfig {
    /// CPUs to trace (the instance's `tracing_cpumask`); empty: every online CPU.
    pub cpus: Vec<usize>,
    /// Kernel ring buffer per CPU, KiB.
    pub buffer_kb: u64,
    /// The most events kept in memory, over all CPUs (about 48 bytes each).
    pub max_events: usize,
    /// Room for events allocated (and, under `mlockall`, locked) when the capture starts, so the
    /// drain does not map memory while a run goes on; at most `max_events`.
    pub reserve_events: usize,
    /// Longest sleep of the drain between passes (also the steal sampling interval).
    pub drain_interval: Duration,
    /// CPUs the drain thread keeps off (a shielded CPU); empty: it runs anywhere.
    pub drain_off: Vec<usize>,
}

impl Default for CaptureConfig {
    fn default() -> Self {
        CaptureConfig {
            cpus: Vec::new(),
            buffer_kb: 2048,
            max_events: 4 << 20,
            // 48 MiB. A 10 s kurt-periodic row here takes 0.6-1.0 Mi events (50,000-83,000 a
            // second on 2 CPUs), a minute's 500 us replay 0.53 Mi; 256 Ki was outgrown mid-row.
            reserve_events: 1 << 20,
            drain_interval: Duration::from_millis(50),
            drain_off: Vec::new(),
        }
    }
}

/// The kernel events an attribution reads: the scheduler's switches, wake-ups and runtime charges,
/// hard and soft interrupt handlers, system vectors (timer, IPIs) and idle. Switches, wake-ups and
/// handlers are required; the rest are taken where the kernel has them.
pub fn explain_events() -> Vec<KernelEvent> {
    let req = |system: &'static str, name: &str| KernelEvent {
        system,
        name: name.into(),
        optional: false,
    };
    let opt = |system: &'static str, name: &str| KernelEvent {
        system,
        name: name.into(),
        optional: true,
    };
    let mut v = vec![
        req("sched", "sched_switch"),
        req("sched", "sched_waking"),
        req("irq", "irq_handler_entry"),
        req("irq", "irq_handler_exit"),
        req("irq", "softirq_entry"),
        req("irq", "softirq_exit"),
        // Not the timers' own expiries (11 % of the events at 3,000 releases a second): the
        // vector that delivers a victim's wake-up is found by the wake-up inside it. Not the IPIs
        // sent either: the vector that receives one is what takes the CPU.
        opt("power", "cpu_idle"),
        opt("sched", "sched_wake_idle_without_ipi"),
        // What the scheduler charged each task: with paravirtual steal accounting, time that
        // passed and was not charged was the hypervisor's.
        opt("sched", "sched_stat_runtime"),
    ];
    for vec in Vector::ALL {
        for end in ["entry", "exit"] {
            v.push(opt("irq_vectors", &format!("{}_{end}", vec.name())));
        }
    }
    v
}

/// One reading of the guest's steal counters: when (CLOCK_MONOTONIC ns), and per CPU the stolen
/// time since boot (ns; `/proc/stat`'s resolution is USER_HZ, 10 ms).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StealSample {
    pub ts: u64,
    pub per_cpu: Vec<(usize, u64)>,
}

pub use crate::stall::{Stall, StallKind};

/// What a capture holds when it ends.
#[derive(Clone, Debug, Default)]
pub struct Captured {
    /// Tracing window (CLOCK_MONOTONIC ns).
    pub start_ns: u64,
    pub end_ns: u64,
    /// CPUs traced.
    pub cpus: Vec<usize>,
    /// Per traced CPU (same order as `cpus`), its events in time order.
    pub events: Vec<Vec<Event>>,
    /// Per traced CPU, the first instant its events cover (later than `start_ns` when older
    /// events were dropped to bound memory; a loss inside is an [`EventKind::Lost`] marker).
    pub covered_from: Vec<u64>,
    pub comms: HashMap<i32, String>,
    pub irq_names: HashMap<i32, String>,
    /// Kernel events enabled (`system/name`).
    pub enabled: Vec<String>,
    /// Events decoded over the whole capture, and dropped to bound memory.
    pub seen: u64,
    pub evicted: u64,
    /// Events the kernel lost (its buffer overran before the drain read it).
    pub lost: u64,
    /// Steal counter readings, in time order.
    pub steal: Vec<StealSample>,
    /// CPU time of the drain thread (user + system), ns.
    pub drain_cpu_ns: u64,
    /// The drain thread's id (0: none): a thread of the measuring process, whose time on a
    /// measured CPU is punctual's own.
    pub drain_tid: i32,
    /// Where the capture was kept as a trace file (`--explain-trace`), or why it could not be.
    pub kept_in: Option<Result<std::path::PathBuf, String>>,
    /// The most events held at once.
    pub peak_events: usize,
    /// Per traced CPU, the index of its cpuidle state that polls (`POLL`: the CPU keeps running
    /// the idle loop, so a wake-up reaches it at once), if it has one.
    pub poll_state: Vec<Option<u32>>,
    /// The kernel runs under a hypervisor (a CPU can stop without any guest event).
    pub virtualized: bool,
    /// Per traced CPU (same order as `cpus`), whether its idle entered no state but the polling
    /// one over the capture, as its cpuidle usage counters read when tracing started and when it
    /// stopped show: an idle stretch there polled even where the CPU logged no `cpu_idle` event
    /// (one CPU of this VM logs none at all).
    pub idle_polled: Vec<bool>,
    /// Events decoded, by kind (what the capture's cost is made of).
    pub by_kind: std::collections::BTreeMap<&'static str, u64>,
    /// Per traced CPU (same order as `cpus`), the events decoded over the whole capture (each
    /// CPU pays for its own).
    pub seen_by_cpu: Vec<u64>,
    /// Switches out of idle the kernel did not record, put back ([`crate::idle_exit`]).
    pub idle_exits: crate::idle_exit::Repair,
    /// The measuring threads' own stalls over the capture (given by the run, not the kernel),
    /// and those their logs had no room for.
    pub stalls: Vec<Stall>,
    pub stalls_dropped: u64,
}

impl Captured {
    /// Put back the switches out of idle the kernel did not record, on every CPU, from the
    /// wake-ups of every traced CPU ([`crate::idle_exit`]); counted in [`Captured::idle_exits`].
    pub fn put_back_idle_exits(&mut self) {
        let wakeups = crate::idle_exit::wakeups_by_cpu(self.events.iter().flatten());
        let mut r = crate::idle_exit::Repair::default();
        for (i, &cpu) in self.cpus.iter().enumerate() {
            let cpu = cpu as u32;
            let w = wakeups.get(&cpu).map_or(&[][..], |v| v.as_slice());
            let (add, rr) = crate::idle_exit::lost_idle_exits(cpu, &self.events[i], w);
            r.add(rr);
            if !add.is_empty() {
                let evs = std::mem::take(&mut self.events[i]);
                self.events[i] = crate::idle_exit::merge(evs, add);
            }
        }
        self.idle_exits = r;
    }

    /// The events of `cpu`, if it was traced.
    pub fn cpu_events(&self, cpu: usize) -> Option<&[Event]> {
        self.cpus
            .iter()
            .position(|&c| c == cpu)
            .map(|i| self.events[i].as_slice())
    }

    /// The first instant `cpu`'s events cover (`None`: not traced).
    pub fn covered(&self, cpu: usize) -> Option<u64> {
        self.cpus
            .iter()
            .position(|&c| c == cpu)
            .map(|i| self.covered_from[i])
    }

    /// The index of `cpu`'s polling idle state, if it has one.
    pub fn poll_state(&self, cpu: usize) -> Option<u32> {
        self.cpus
            .iter()
            .position(|&c| c == cpu)
            .and_then(|i| self.poll_state.get(i).copied().flatten())
    }

    /// The idle state `cpu` was in whenever its trace does not say: its polling state, when its
    /// idle entered no other over the capture ([`Captured::idle_polled`]).
    pub fn idle_unsaid(&self, cpu: usize) -> Option<u32> {
        let i = self.cpus.iter().position(|&c| c == cpu)?;
        if self.idle_polled.get(i).copied().unwrap_or(false) {
            self.poll_state(cpu)
        } else {
            None
        }
    }

    /// Bytes the events take in memory (what `max_events` bounds).
    pub fn memory_bytes(&self) -> usize {
        self.peak_events * std::mem::size_of::<Event>()
    }

    /// Build one from events in any order (tests, synthetic traces): every CPU named in the
    /// events is traced, the window is the events' span unless given.
    pub fn from_events(events: &[Event], window: Option<(u64, u64)>) -> Captured {
        let mut cpus: Vec<usize> = events.iter().map(|e| e.cpu as usize).collect();
        cpus.sort_unstable();
        cpus.dedup();
        let mut per: Vec<Vec<Event>> = vec![Vec::new(); cpus.len()];
        for e in events {
            let i = cpus.binary_search(&(e.cpu as usize)).expect("listed");
            per[i].push(*e);
        }
        for v in &mut per {
            v.sort_by_key(|e| e.ts);
        }
        let (start_ns, end_ns) = window.unwrap_or_else(|| {
            (
                events.iter().map(|e| e.ts).min().unwrap_or(0),
                events.iter().map(|e| e.ts).max().unwrap_or(0),
            )
        });
        Captured {
            start_ns,
            end_ns,
            covered_from: vec![start_ns; cpus.len()],
            seen_by_cpu: per.iter().map(|v| v.len() as u64).collect(),
            poll_state: vec![None; cpus.len()],
            idle_polled: vec![false; cpus.len()],
            cpus,
            seen: events.len() as u64,
            peak_events: events.len(),
            events: per,
            ..Captured::default()
        }
    }
}

impl Captured {
    /// [`Captured::kept_in`] as text: the file's path as it is shown, or why it was not written.
    pub fn kept_in_text(&self) -> Option<Result<String, String>> {
        self.kept_in.as_ref().map(|k| {
            k.as_ref()
                .map(|p| p.display().to_string())
                .map_err(String::clone)
        })
    }

    /// Write the capture as a punctual trace file (docs/trace-format.md), to be read back by
    /// `punctual trace analyze`: every CPU's events in time order, the tasks and IRQs named.
    /// `command` is the command line that made it. Returns the events written.
    pub fn write_file(&self, out: impl std::io::Write, command: &[String]) -> std::io::Result<u64> {
        use crate::file::{Header, IrqInfo, TaskInfo, Trailer};
        let header = Header {
            clock: "mono".into(),
            started_at: punctual_result::now_rfc3339(),
            start_ns: self.start_ns,
            host: None,
            cpus: self.cpus.iter().map(|&c| c as u32).collect(),
            events: self.enabled.clone(),
            buffer_kb: 0,
            command: command.to_vec(),
            target: None,
        };
        let mut w = crate::file::TraceWriter::new(out, &header)?;
        for (i, &cpu) in self.cpus.iter().enumerate() {
            for e in &self.events[i] {
                w.push(cpu as u32, e.ts, &e.kind)?;
            }
            w.flush_cpu(cpu as u32)?;
        }
        let trailer = Trailer {
            ended_at: punctual_result::now_rfc3339(),
            end_ns: self.end_ns,
            tasks: self
                .comms
                .iter()
                .map(|(&pid, comm)| {
                    (
                        pid,
                        TaskInfo {
                            tgid: None,
                            comm: comm.clone(),
                        },
                    )
                })
                .collect(),
            irqs: self
                .irq_names
                .iter()
                .map(|(&irq, name)| {
                    (
                        irq,
                        IrqInfo {
                            name: name.clone(),
                            driver: None,
                        },
                    )
                })
                .collect(),
            stalls: self.stalls.clone(),
            stalls_dropped: self.stalls_dropped,
            ..Trailer::default()
        };
        let events = w.events();
        w.finish(&trailer)?;
        Ok(events)
    }
}

/// A capture in progress. [`Capture::finish`] stops it and hands over what it holds; dropping it
/// stops tracing and removes the instance (its journal does so after a crash too).
pub struct Capture {
    inst: Option<Instance>,
    _fs: Tracefs,
    stop: Arc<AtomicBool>,
    /// Asks the drain for what it holds so far ([`Capture::snapshot`]).
    asks: std::sync::mpsc::Sender<Ask>,
    drain: Option<std::thread::JoinHandle<Result<Captured, TraceError>>>,
    /// Per traced CPU, its cpuidle usage counters when tracing started.
    idle_usage: Vec<(usize, Vec<IdleUsage>)>,
}

impl Capture {
    /// Set up a private instance (mono clock, only [`explain_events`], only `cfg.cpus`), switch
    /// tracing on and start draining.
    pub fn start(cfg: &CaptureConfig) -> Result<Capture, TraceError> {
        let fs = Tracefs::open()?;
        for orphan in orphan_instances(&fs) {
            let _ = std::fs::remove_dir(&orphan);
        }
        let inst = Instance::create(&fs, &instance_name(std::process::id()))?;
        inst.set_clock("mono")?;
        inst.set_buffer_kb(cfg.buffer_kb)?;
        let online = punctual_rt::online_cpus();
        let cpus: Vec<usize> = if cfg.cpus.is_empty() {
            online
        } else {
            cfg.cpus
                .iter()
                .copied()
                .filter(|c| online.contains(c))
                .collect()
        };
        if cpus.is_empty() {
            return Err(TraceError::Usage(
                "--explain: none of the CPUs to trace is online".into(),
            ));
        }
        inst.write("tracing_cpumask", &cpu_mask_hex(&cpus))?;
        let mut decoder = Decoder::default();
        let mut enabled = Vec::new();
        for ev in explain_events() {
            if let Some(f) = inst.enable(&ev)? {
                decoder.add(&f)?;
                enabled.push(ev.path());
            }
        }
        let layout = inst.page_layout(fs.root())?;
        let mut pipes = Vec::new();
        for &c in &cpus {
            pipes.push((c, inst.open_pipe(c as u32)?));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let idle_usage = cpus.iter().map(|&c| (c, idle_usage_of(c))).collect();
        let start_ns = now_mono();
        inst.write("tracing_on", "1")?;
        let state = DrainState::new(cfg, cpus, enabled, start_ns, decoder, layout);
        let s2 = stop.clone();
        let (asks, asked) = std::sync::mpsc::channel::<Ask>();
        let interval = cfg.drain_interval;
        let elsewhere = punctual_rt::housekeeping_cpus(&[&cfg.drain_off]);
        let drain = std::thread::Builder::new()
            .name("punctual-trace".into())
            .spawn(move || {
                if let Some(cpus) = elsewhere {
                    let _ = punctual_rt::affinity::set(0, &cpus);
                }
                state.run(pipes, &s2, &asked, interval)
            })
            .map_err(|e| TraceError::io("starting the trace drain thread", e))?;
        Ok(Capture {
            inst: Some(inst),
            _fs: fs,
            stop,
            asks,
            drain: Some(drain),
            idle_usage,
        })
    }

    /// Per traced CPU, whether its idle entered only the polling state since tracing started.
    fn idle_polled(&self) -> Vec<bool> {
        self.idle_usage
            .iter()
            .map(|(cpu, before)| only_polled(before, &idle_usage_of(*cpu)))
            .collect()
    }

    /// What the capture holds now, with the kernel's buffers drained up to the snapshot's
    /// `end_ns` (a capture that runs for days: `punctual monitor`); then events and steal readings
    /// before `keep_from` are forgotten, so memory follows what is still to be explained, not the
    /// uptime. Waits for the drain's next pass (at most its interval).
    pub fn snapshot(&self, keep_from: u64) -> Result<Captured, TraceError> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let gone = || {
            TraceError::io(
                "the trace drain thread",
                std::io::Error::other("it has stopped"),
            )
        };
        self.asks.send(Ask { keep_from, tx }).map_err(|_| gone())?;
        let mut c = rx.recv().map_err(|_| gone())?;
        c.idle_polled = self.idle_polled();
        Ok(c)
    }

    /// Stop tracing, drain what is left, remove the instance and return the events.
    pub fn finish(mut self) -> Result<Captured, TraceError> {
        if let Some(inst) = &self.inst {
            let _ = inst.write("tracing_on", "0");
        }
        let idle_polled = self.idle_polled();
        self.stop.store(true, Ordering::Release);
        let out = match self.drain.take().map(|h| h.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(TraceError::io(
                "the trace drain thread",
                std::io::Error::other("panicked"),
            )),
            None => Err(TraceError::io(
                "the trace drain thread",
                std::io::Error::other("already finished"),
            )),
        };
        let lost_kernel: u64 = match (&self.inst, &out) {
            (Some(inst), Ok(c)) => c
                .cpus
                .iter()
                .map(|&cpu| inst.cpu_stats(cpu as u32).total())
                .sum(),
            _ => 0,
        };
        self.inst.take();
        out.map(|mut c| {
            c.lost = c.lost.max(lost_kernel);
            c.idle_polled = idle_polled;
            c
        })
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if let Some(inst) = &self.inst {
            let _ = inst.write("tracing_on", "0");
        }
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.drain.take() {
            let _ = h.join();
        }
    }
}

/// The kernel event an event kind comes from, for counting.
pub fn kind_name(k: &EventKind) -> &'static str {
    match k {
        EventKind::Switch { .. } => "sched_switch",
        EventKind::Waking { .. } => "sched_waking",
        EventKind::Wakeup { .. } | EventKind::WakeupNew { .. } => "sched_wakeup",
        EventKind::Fork { .. } | EventKind::Exit { .. } => "sched_process",
        EventKind::IrqEntry { .. } | EventKind::IrqExit { .. } => "irq_handler",
        EventKind::SoftirqEntry { .. } | EventKind::SoftirqExit { .. } => "softirq",
        EventKind::HrtimerEntry { .. }
        | EventKind::HrtimerExit { .. }
        | EventKind::HrtimerStart { .. } => "hrtimer",
        EventKind::VectorEntry { .. } | EventKind::VectorExit { .. } => "irq_vectors",
        EventKind::Lost { .. } => "lost",
        EventKind::CpuIdle { .. } => "cpu_idle",
        EventKind::IpiSend { .. } => "ipi_send_cpu",
        EventKind::WakeIdleNoIpi { .. } => "sched_wake_idle_without_ipi",
        EventKind::StatRuntime { .. } => "sched_stat_runtime",
    }
}

/// The index of `cpu`'s cpuidle state named `POLL` (sysfs), if any.
pub fn poll_state_of(cpu: usize) -> Option<u32> {
    punctual_rt::idle_poll::poll_state(cpu)
}

/// One cpuidle state's entries so far (sysfs `usage`), and whether it is the polling one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdleUsage {
    pub state: u32,
    pub polls: bool,
    pub usage: u64,
}

/// `cpu`'s cpuidle states with their entries so far (empty: no cpuidle driver).
pub fn idle_usage_of(cpu: usize) -> Vec<IdleUsage> {
    let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cpuidle");
    let read = |k: u32, f: &str| std::fs::read_to_string(format!("{dir}/state{k}/{f}"));
    (0..16u32)
        .map_while(|k| {
            let name = read(k, "name").ok()?;
            let usage = read(k, "usage").ok()?.trim().parse().ok()?;
            Some(IdleUsage {
                state: k,
                polls: name.trim() == "POLL",
                usage,
            })
        })
        .collect()
}

/// Whether, between two readings of a CPU's cpuidle counters, its idle entered no state but the
/// polling one (false without a polling state, or when the states differ).
pub fn only_polled(before: &[IdleUsage], after: &[IdleUsage]) -> bool {
    before.len() == after.len()
        && before.iter().any(|s| s.polls)
        && before
            .iter()
            .zip(after)
            .all(|(b, a)| a.state == b.state && (a.polls || a.usage == b.usage))
}

/// A CPU list as the hexadecimal mask `tracing_cpumask` takes (comma-separated 32-bit words, the
/// most significant first).
pub fn cpu_mask_hex(cpus: &[usize]) -> String {
    let top = cpus.iter().copied().max().unwrap_or(0);
    let mut words = vec![0u32; top / 32 + 1];
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

fn now_mono() -> u64 {
    punctual_time::clock::read_clock(libc::CLOCK_MONOTONIC)
}

fn thread_cpu_ns() -> u64 {
    punctual_time::clock::thread_cpu_time()
}

/// A request for a snapshot: forget what is before `keep_from` once it is sent.
struct Ask {
    keep_from: u64,
    tx: std::sync::mpsc::SyncSender<Captured>,
}

/// Task names kept at most between snapshots (a monitor's host starts processes for days);
/// beyond, the oldest names are forgotten and relearnt from the next switch.
const MAX_COMMS: usize = 8192;

/// The drain thread's state: decoder, per-CPU event rings, names, steal samples.
struct DrainState {
    decoder: Decoder,
    layout: PageLayout,
    per_cpu_cap: usize,
    out: Captured,
    rings: Vec<ChunkRing>,
    pool: ChunkPool,
    held: usize,
}

impl DrainState {
    fn new(
        cfg: &CaptureConfig,
        cpus: Vec<usize>,
        enabled: Vec<String>,
        start_ns: u64,
        decoder: Decoder,
        layout: PageLayout,
    ) -> DrainState {
        let n = cpus.len();
        DrainState {
            decoder,
            layout,
            per_cpu_cap: (cfg.max_events / n.max(1)).max(1024),
            rings: (0..n).map(|_| ChunkRing::default()).collect(),
            pool: ChunkPool::reserve(cfg.reserve_events.min(cfg.max_events)),
            held: 0,
            out: Captured {
                start_ns,
                covered_from: vec![start_ns; n],
                seen_by_cpu: vec![0; n],
                poll_state: cpus.iter().map(|&c| poll_state_of(c)).collect(),
                virtualized: punctual_rt::host::detect().virtualized,
                cpus,
                enabled,
                ..Captured::default()
            },
        }
    }

    fn run(
        mut self,
        pipes: Vec<(usize, File)>,
        stop: &AtomicBool,
        asked: &std::sync::mpsc::Receiver<Ask>,
        interval: Duration,
    ) -> Result<Captured, TraceError> {
        let cpu0 = thread_cpu_ns();
        // SAFETY: gettid takes no arguments and cannot fail.
        self.out.drain_tid = unsafe { libc::gettid() };
        let mut page = vec![0u8; self.layout.page_size()];
        self.sample_steal();
        loop {
            let stopping = stop.load(Ordering::Acquire);
            let passed = now_mono();
            self.pass(&pipes, &mut page)?;
            self.sample_steal();
            while let Ok(ask) = asked.try_recv() {
                self.out.drain_cpu_ns = thread_cpu_ns().saturating_sub(cpu0);
                let _ = ask.tx.send(self.snapshot(passed));
                self.forget_before(ask.keep_from);
            }
            if stopping {
                break;
            }
            let mut fds: Vec<libc::pollfd> = pipes
                .iter()
                .map(|(_, f)| libc::pollfd {
                    fd: f.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect();
            // SAFETY: fds is a valid array of pollfd for the duration of the call.
            unsafe {
                libc::poll(
                    fds.as_mut_ptr(),
                    fds.len() as libc::nfds_t,
                    interval.as_millis() as i32,
                )
            };
            // The kernel wakes poll at `buffer_percent`; a steady trickle would wake it at once
            // again, so the drain never passes more often than every tenth of the interval.
            std::thread::sleep(interval / 10);
        }
        self.out.end_ns = now_mono();
        let pool = &mut self.pool;
        self.out.events = self.rings.iter_mut().map(|r| r.take_all(pool)).collect();
        self.out.drain_cpu_ns = thread_cpu_ns().saturating_sub(cpu0);
        self.out.put_back_idle_exits();
        Ok(self.out)
    }

    /// A copy of what is held, covering up to `end_ns` (the start of the last pass: every event
    /// before it has been read).
    fn snapshot(&self, end_ns: u64) -> Captured {
        let mut c = Captured {
            end_ns,
            events: self
                .rings
                .iter()
                .map(|r| r.iter().copied().collect())
                .collect(),
            ..self.out.clone()
        };
        c.put_back_idle_exits();
        c
    }

    /// Forget events and steal readings before `at` (keeping the last reading before it), and
    /// names beyond [`MAX_COMMS`]: a later snapshot covers `at` on.
    fn forget_before(&mut self, at: u64) {
        for (i, ring) in self.rings.iter_mut().enumerate() {
            self.held -= ring.forget_before(at, &mut self.pool);
            self.out.covered_from[i] = self.out.covered_from[i].max(at);
        }
        let s = &mut self.out.steal;
        let keep = s.partition_point(|x| x.ts < at).saturating_sub(1);
        s.drain(..keep);
        if self.out.comms.len() > MAX_COMMS {
            self.out.comms.clear();
        }
    }

    fn sample_steal(&mut self) {
        if let Some(per_cpu) = punctual_rt::host::steal_ns() {
            self.out.steal.push(StealSample {
                ts: now_mono(),
                per_cpu,
            });
        }
    }

    fn pass(&mut self, pipes: &[(usize, File)], page: &mut [u8]) -> Result<(), TraceError> {
        for (i, (cpu, f)) in pipes.iter().enumerate() {
            let mut f = f;
            loop {
                match f.read(page) {
                    Ok(0) => break,
                    Ok(n) => self.page(i, &page[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        return Err(TraceError::io(
                            format!("reading cpu{cpu}/trace_pipe_raw"),
                            e,
                        ))
                    }
                }
            }
        }
        Ok(())
    }

    fn page(&mut self, i: usize, buf: &[u8]) {
        let Ok(page) = parse_page(buf, &self.layout) else {
            return;
        };
        let cpu = self.out.cpus[i] as u32;
        if page.missed != Missed::None {
            // Events just before this page are missing: the marker makes any window across it
            // unexplained (the CPU's state is unknown until its next switch).
            self.out.lost += match page.missed {
                Missed::Count(n) => n,
                _ => 1,
            };
            self.push(
                i,
                Event {
                    ts: page.base_ts,
                    cpu,
                    kind: EventKind::Lost { count: None },
                },
            );
        }
        for raw in page.events() {
            let Ok(raw) = raw else { break };
            let Some(d) = self.decoder.decode(raw.data) else {
                continue;
            };
            for (pid, name) in d.labels.comms.iter().flatten() {
                if self.out.comms.get(pid).map(|s| s.as_bytes()) != Some(*name) {
                    self.out
                        .comms
                        .insert(*pid, String::from_utf8_lossy(name).into_owned());
                }
            }
            if let Some((irq, name)) = d.labels.irq_name {
                self.out
                    .irq_names
                    .entry(irq)
                    .or_insert_with(|| String::from_utf8_lossy(name).into_owned());
            }
            self.push(
                i,
                Event {
                    ts: raw.ts,
                    cpu,
                    kind: d.kind,
                },
            );
        }
    }

    fn push(&mut self, i: usize, e: Event) {
        self.out.seen += 1;
        *self.out.by_kind.entry(kind_name(&e.kind)).or_default() += 1;
        self.out.seen_by_cpu[i] += 1;
        let ring = &mut self.rings[i];
        if ring.len() >= self.per_cpu_cap {
            if let Some(old) = ring.pop_front(&mut self.pool) {
                self.out.evicted += 1;
                self.held -= 1;
                self.out.covered_from[i] = self.out.covered_from[i].max(old.ts + 1);
            }
        }
        ring.push(e, &mut self.pool);
        self.held += 1;
        self.out.peak_events = self.out.peak_events.max(self.held);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_written_as_a_trace_file_reads_back_whole() {
        let mut s = crate::synth::Synth::new(2, 1_000, 9_000_000)
            .task(7, 7, "client")
            .task(9, 9, "hog");
        s.switch(2_000, 0, 0, 0, 7);
        s.switch(5_000, 1, 0, 0, 9);
        s.event(6_000, 1, EventKind::IrqEntry { irq: 24 });
        s.event(
            7_000,
            1,
            EventKind::IrqExit {
                irq: 24,
                handled: true,
            },
        );
        let mut c = s.captured();
        let stall = Stall {
            tid: 7,
            cpu: 0,
            kind: StallKind::Timer,
            from: 3_000,
            to: 4_500,
        };
        c.stalls.push(stall);
        let mut bytes = Vec::new();
        let n = c
            .write_file(&mut bytes, &["punctual".into(), "run".into()])
            .unwrap();
        assert_eq!(n, 4);
        let t = crate::file::read_trace(&bytes).unwrap();
        assert!(t.integrity.complete(), "{}", t.integrity.describe());
        assert_eq!(t.events.len(), 4);
        assert_eq!(t.window(), (1_000, 9_000_000));
        assert_eq!(
            (t.comm(7), t.comm(9)),
            ("client".to_string(), "hog".to_string())
        );
        assert_eq!(t.header.command, vec!["punctual", "run"]);
        assert_eq!(t.header.cpus, vec![0, 1]);
        // With the measuring threads' stalls, from which the attribution read it.
        assert_eq!(t.trailer.map(|t| t.stalls), Some(vec![stall]));
    }

    #[test]
    fn only_entries_of_the_polling_state_say_the_idle_polled() {
        let u = |state, polls, usage| IdleUsage {
            state,
            polls,
            usage,
        };
        let before = [u(0, true, 10), u(1, false, 5)];
        assert!(only_polled(&before, &[u(0, true, 900), u(1, false, 5)]));
        assert!(!only_polled(&before, &[u(0, true, 900), u(1, false, 6)]));
        // No polling state, or no cpuidle driver: the counters say nothing.
        let halt = [u(0, false, 1), u(1, false, 5)];
        assert!(!only_polled(&halt, &halt));
        assert!(!only_polled(&[], &[]));
        assert!(!only_polled(&before, &before[..1]));
    }

    #[test]
    fn cpu_masks_are_hex_words_most_significant_first() {
        assert_eq!(cpu_mask_hex(&[0]), "00000001");
        assert_eq!(cpu_mask_hex(&[0, 1]), "00000003");
        assert_eq!(cpu_mask_hex(&[1, 33]), "00000002,00000002");
    }

    #[test]
    fn the_explain_events_require_only_the_scheduler_and_interrupts() {
        let evs = explain_events();
        let required: Vec<String> = evs
            .iter()
            .filter(|e| !e.optional)
            .map(|e| e.path())
            .collect();
        assert!(required.contains(&"sched/sched_switch".to_string()));
        assert!(required.contains(&"irq/softirq_exit".to_string()));
        assert!(evs
            .iter()
            .any(|e| e.path() == "power/cpu_idle" && e.optional));
        assert!(evs
            .iter()
            .any(|e| e.path() == "irq_vectors/reschedule_entry" && e.optional));
        assert!(!evs.iter().any(|e| e.path() == "sched/sched_wakeup"));
    }

    #[test]
    fn captured_from_events_splits_by_cpu_in_time_order() {
        let ev = |ts, cpu| Event {
            ts,
            cpu,
            kind: EventKind::IrqEntry { irq: 1 },
        };
        let c = Captured::from_events(&[ev(30, 1), ev(10, 0), ev(20, 1), ev(5, 0)], None);
        assert_eq!(c.cpus, vec![0, 1]);
        assert_eq!(
            c.cpu_events(1)
                .unwrap()
                .iter()
                .map(|e| e.ts)
                .collect::<Vec<_>>(),
            vec![20, 30]
        );
        assert_eq!((c.start_ns, c.end_ns), (5, 30));
        assert_eq!(c.covered(0), Some(5));
        assert!(c.cpu_events(2).is_none());
    }
}
