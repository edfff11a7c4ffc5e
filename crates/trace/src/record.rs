//! Recording: set up a private instance, drain every CPU's binary pipe while the kernel traces,
//! decode pages into the compact file as they arrive, and finish with what only the end knows.
//!
//! The drain sleeps in `poll` on all CPU pipes (the kernel wakes it when a buffer is half full, the
//! instance's `buffer_percent`) with a timeout of `drain_interval`, like klogger's daemon that woke
//! every few seconds: a handful of wake-ups a second at ordinary event rates, so recording costs
//! little, and a full buffer is drained long before it overflows.

use crate::event::EventKind;
use crate::file::{Header, IrqInfo, LostStats, Target, TaskInfo, TraceWriter, Trailer};
use crate::kernel::decode::{Decoder, Labels};
use crate::kernel::format::PageLayout;
use crate::kernel::instance::{instance_name, orphan_instances, Instance};
use crate::kernel::page::{parse_page, Missed};
use crate::kernel::tracefs::Tracefs;
use crate::kernel::EventGroups;
use crate::TraceError;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// What to record.
#[derive(Clone, Debug)]
pub struct RecordConfig {
    pub groups: EventGroups,
    /// Ring buffer per CPU, KiB.
    pub buffer_kb: u64,
    /// Stop after this long (ns); `None` with a command = the command's lifetime.
    pub duration: Option<u64>,
    /// Trace this command's lifetime (started once tracing is on).
    pub command: Option<Vec<String>>,
    pub output: PathBuf,
    /// Longest sleep of the drain between passes.
    pub drain_interval: Duration,
    /// The command line, for the header.
    pub argv: Vec<String>,
    pub host: Option<punctual_result::HostFacts>,
}

pub const DEFAULT_BUFFER_KB: u64 = 4096;

impl RecordConfig {
    pub fn new(output: PathBuf) -> Self {
        RecordConfig {
            groups: EventGroups::default(),
            buffer_kb: DEFAULT_BUFFER_KB,
            duration: None,
            command: None,
            output,
            drain_interval: Duration::from_millis(100),
            argv: Vec::new(),
            host: None,
        }
    }
}

impl RecordConfig {
    /// A recording as `trace record` asks for it, checked: the event groups and buffer size as
    /// written, `duration` (default 10 s) or, with a command, that command's lifetime.
    pub fn request(
        output: PathBuf,
        events: &str,
        buffer_size: &str,
        duration: Option<u64>,
        command: Vec<String>,
        drain_interval: Duration,
    ) -> Result<RecordConfig, TraceError> {
        let groups: EventGroups = events.parse()?;
        let buffer_kb = crate::kernel::parse_size_kb(buffer_size)?;
        let command = (!command.is_empty()).then_some(command);
        if let Some(c) = &command {
            check_command(c)?;
        }
        Ok(RecordConfig {
            groups,
            buffer_kb,
            duration: match command {
                Some(_) => None,
                None => Some(duration.unwrap_or(10_000_000_000)),
            },
            command,
            drain_interval: drain_interval.max(Duration::from_millis(1)),
            ..RecordConfig::new(output)
        })
    }
}

/// Live figures for a progress line.
#[derive(Debug, Default)]
pub struct RecordProgress {
    pub events: AtomicU64,
    pub lost: AtomicU64,
    pub bytes: AtomicU64,
}

/// What a recording produced.
#[derive(Clone, Debug)]
pub struct RecordSummary {
    pub path: PathBuf,
    pub events: u64,
    pub bytes: u64,
    pub duration_ns: u64,
    pub lost: BTreeMap<u32, LostStats>,
    pub cpus: Vec<u32>,
    pub events_enabled: Vec<String>,
    pub target: Option<Target>,
    pub target_status: Option<i32>,
    pub interrupted: bool,
    pub mounted_tracefs: bool,
    pub tracefs: PathBuf,
    /// CPU time the recording process used (the drain, decoding and writing), user + system.
    pub recorder_cpu_ns: u64,
}

fn own_cpu_ns() -> u64 {
    let ru = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF);
    ru.map(|r| {
        let t = |tv: nix::sys::time::TimeVal| {
            tv.tv_sec() as u64 * 1_000_000_000 + tv.tv_usec() as u64 * 1_000
        };
        t(r.user_time()) + t(r.system_time())
    })
    .unwrap_or(0)
}

impl RecordSummary {
    pub fn lost_total(&self) -> u64 {
        self.lost.values().map(LostStats::total).sum()
    }
}

fn now_mono() -> u64 {
    punctual_time::clock::read_clock(libc::CLOCK_MONOTONIC)
}

/// Decodes pages and writes events, tracking labels so each name is written once.
struct Sink<W: Write> {
    writer: TraceWriter<W>,
    decoder: Decoder,
    layout: PageLayout,
    comms: HashMap<i32, Vec<u8>>,
    irq_names: HashMap<i32, Vec<u8>>,
    functions: HashSet<u64>,
    lost: BTreeMap<u32, LostStats>,
    undecodable: u64,
}

impl<W: Write> Sink<W> {
    fn labels(&mut self, cpu: u32, ts: u64, l: &Labels) {
        for (pid, name) in l.comms.iter().flatten() {
            if self.comms.get(pid).map(Vec::as_slice) != Some(*name) {
                self.comms.insert(*pid, name.to_vec());
                self.writer.comm(cpu, ts, *pid, name);
            }
        }
        if let Some((irq, name)) = l.irq_name {
            if let std::collections::hash_map::Entry::Vacant(e) = self.irq_names.entry(irq) {
                e.insert(name.to_vec());
                self.writer.irq_name(cpu, ts, irq, name);
            }
        }
    }

    fn page(&mut self, cpu: u32, buf: &[u8]) -> Result<(), TraceError> {
        let w = |e| TraceError::io("writing the trace file", e);
        let page = match parse_page(buf, &self.layout) {
            Ok(p) => p,
            Err(_) => {
                self.undecodable += 1;
                return Ok(());
            }
        };
        if page.missed != Missed::None {
            let s = self.lost.entry(cpu).or_default();
            let count = match page.missed {
                Missed::Count(n) => {
                    s.in_band += n;
                    Some(n)
                }
                _ => {
                    s.unknown_pages += 1;
                    None
                }
            };
            self.writer
                .push(cpu, page.base_ts, &EventKind::Lost { count })
                .map_err(w)?;
        }
        for raw in page.events() {
            let Ok(raw) = raw else {
                self.undecodable += 1;
                break;
            };
            let Some(d) = self.decoder.decode(raw.data) else {
                continue;
            };
            self.labels(cpu, raw.ts, &d.labels);
            if let EventKind::HrtimerEntry { function, .. } = d.kind {
                self.functions.insert(function);
            }
            self.writer.push(cpu, raw.ts, &d.kind).map_err(w)?;
        }
        Ok(())
    }
}

/// Check that a command can be started (found, executable) before anything changes on the system.
pub fn check_command(argv: &[String]) -> Result<(), TraceError> {
    let Some(prog) = argv.first() else {
        return Err(TraceError::Usage(
            "-- COMMAND: no command given after --".into(),
        ));
    };
    let candidates: Vec<PathBuf> = if prog.contains('/') {
        vec![PathBuf::from(prog)]
    } else {
        std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).map(|d| d.join(prog)).collect())
            .unwrap_or_default()
    };
    let runnable = candidates.iter().any(|c| {
        std::fs::metadata(c)
            .map(|m| {
                use std::os::unix::fs::PermissionsExt;
                m.is_file() && m.permissions().mode() & 0o111 != 0
            })
            .unwrap_or(false)
    });
    if runnable {
        Ok(())
    } else {
        Err(TraceError::Usage(format!(
            "-- {prog}: command not found or not executable"
        )))
    }
}

/// Record until `stop` is set, the duration passes, or the command exits.
pub fn record(
    cfg: &RecordConfig,
    stop: &AtomicBool,
    progress: &RecordProgress,
) -> Result<RecordSummary, TraceError> {
    if let Some(argv) = &cfg.command {
        check_command(argv)?;
    }
    let fs = Tracefs::open()?;
    for orphan in orphan_instances(&fs) {
        let _ = std::fs::remove_dir(&orphan);
    }
    let inst = Instance::create(&fs, &instance_name(std::process::id()))?;
    let (decoder, enabled) = configure_instance(&inst, cfg)?;
    let layout = inst.page_layout(fs.root())?;
    let cpus: Vec<u32> = punctual_rt::online_cpus()
        .into_iter()
        .map(|c| c as u32)
        .collect();
    let mut pipes = Vec::new();
    for &c in &cpus {
        pipes.push((c, inst.open_pipe(c)?));
    }
    let (mut sink, start_ns) = open_sink(cfg, decoder, layout, &cpus, &enabled)?;

    // The kernel's symbol table is read while the recording runs, not after the stop: formatting
    // its ~120,000 lines took 0.1-0.2 s of a 0.3-0.45 s stop on this loaded VM (issue 32).
    let kallsyms = std::thread::Builder::new()
        .name("punctual-kallsyms".into())
        .spawn(|| std::fs::read_to_string("/proc/kallsyms").ok())
        .ok();
    let cpu_at_start = own_cpu_ns();
    inst.write("tracing_on", "1")?;
    let (mut child, target) = match &cfg.command {
        Some(argv) => {
            let (c, t) = spawn_command(argv)?;
            (Some(c), Some(t))
        }
        None => (None, None),
    };
    let ends = Ends {
        stop,
        deadline: cfg.duration.map(|d| start_ns + d),
        interval: cfg.drain_interval,
        child_fd: child
            .as_ref()
            .and_then(|c| punctual_rt::pidfd_open(c.id() as i32)),
    };
    let mut drain = Drain {
        pipes: &pipes,
        page: vec![0u8; layout.page_size()],
        progress,
    };
    let mut target_status = None;
    let result = drain_until_end(
        &mut drain,
        &mut sink,
        &ends,
        child.as_mut(),
        &mut target_status,
    );
    // Who held each CPU, read while the trace still runs (a switch during the read is in it).
    let sole = sole_runners(&cpus);
    // Stop tracing first, then take what is left in the buffers.
    let _ = inst.write("tracing_on", "0");
    let end_ns = now_mono();
    let final_drain = drain.pass(&mut sink);
    let recorder_cpu_ns = own_cpu_ns().saturating_sub(cpu_at_start);
    if let Some(c) = child.take() {
        if target_status.is_none() {
            target_status = end_command(c);
        }
    }
    result?;
    final_drain?;
    add_kernel_lost(&mut sink.lost, &inst, &cpus);
    let interrupted = stop.load(Ordering::Relaxed)
        && target_status.is_none()
        && ends.deadline.is_none_or(|d| end_ns < d);
    let trailer = Trailer {
        ended_at: punctual_result::now_rfc3339(),
        end_ns,
        interrupted,
        events: 0,
        lost: sink.lost.clone(),
        tasks: task_infos(&sink.comms, fs.root(), sole.values()),
        irqs: irq_infos(&sink.irq_names),
        symbols: resolve_symbols(
            &sink.functions,
            kallsyms.and_then(|k| k.join().ok()).flatten().as_deref(),
        ),
        target_status,
        sole_runners: sole.iter().map(|(cpu, r)| (*cpu, r.tid)).collect(),
        stalls: Vec::new(),
        stalls_dropped: 0,
    };
    let events = sink.writer.events();
    let bytes = sink.writer.bytes_written();
    let mut out = sink
        .writer
        .finish(&trailer)
        .map_err(|e| TraceError::io("writing the trace file", e))?;
    out.flush()
        .map_err(|e| TraceError::io("writing the trace file", e))?;
    drop(out);
    drop(pipes);
    let mounted_tracefs = fs.mounted_by_us();
    let tracefs = fs.root().to_path_buf();
    drop(inst);
    drop(fs);
    Ok(RecordSummary {
        path: cfg.output.clone(),
        events,
        bytes,
        duration_ns: end_ns - start_ns,
        lost: trailer.lost,
        cpus,
        events_enabled: enabled,
        target,
        target_status,
        interrupted,
        mounted_tracefs,
        tracefs,
        recorder_cpu_ns,
    })
}

/// Clock, buffer size and events of the private instance; the decoder learns each enabled event's
/// format. Returns the decoder and the paths of the events enabled.
fn configure_instance(
    inst: &Instance,
    cfg: &RecordConfig,
) -> Result<(Decoder, Vec<String>), TraceError> {
    inst.set_clock("mono")?;
    inst.set_buffer_kb(cfg.buffer_kb)?;
    let _ = inst.write("options/record-tgid", "1");
    let mut decoder = Decoder::default();
    let mut enabled = Vec::new();
    for ev in cfg.groups.kernel_events() {
        if let Some(f) = inst.enable(&ev)? {
            decoder.add(&f)?;
            enabled.push(ev.path());
        }
    }
    Ok((decoder, enabled))
}

/// The output file with its header written, and the monotonic time the recording starts at.
fn open_sink(
    cfg: &RecordConfig,
    decoder: Decoder,
    layout: PageLayout,
    cpus: &[u32],
    enabled: &[String],
) -> Result<(Sink<BufWriter<File>>, u64), TraceError> {
    // A new file renamed into place at once: never written through a link someone else planted,
    // and a crash still leaves the recording valid to its last whole block.
    let file = punctual_result::output::open_stream(&cfg.output)
        .map_err(|e| TraceError::io(format!("creating {}", cfg.output.display()), e))?;
    let started_at = punctual_result::now_rfc3339();
    let start_ns = now_mono();
    let header = Header {
        clock: "mono".into(),
        started_at,
        start_ns,
        host: cfg.host.clone(),
        cpus: cpus.to_vec(),
        events: enabled.to_vec(),
        buffer_kb: cfg.buffer_kb,
        command: cfg.argv.clone(),
        target: None,
    };
    let writer = TraceWriter::new(BufWriter::with_capacity(1 << 20, file), &header)
        .map_err(|e| TraceError::io("writing the trace file", e))?;
    let sink = Sink {
        writer,
        decoder,
        layout,
        comms: HashMap::new(),
        irq_names: HashMap::new(),
        functions: HashSet::new(),
        lost: BTreeMap::new(),
        undecodable: 0,
    };
    Ok((sink, start_ns))
}

fn spawn_command(argv: &[String]) -> Result<(std::process::Child, Target), TraceError> {
    let c = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .spawn()
        .map_err(|e| TraceError::Usage(format!("-- {}: {e}", argv[0])))?;
    let target = Target {
        pid: c.id() as i32,
        argv: argv.to_vec(),
    };
    Ok((c, target))
}

/// Ends the traced command if it still runs (interrupted or out of time): it was ours to start, so
/// it is ours to end. Returns its exit status, if it could be had.
fn end_command(mut c: std::process::Child) -> Option<i32> {
    let pid = nix::unistd::Pid::from_raw(c.id() as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    let t0 = std::time::Instant::now();
    let status = loop {
        if let Ok(Some(s)) = c.try_wait() {
            break Some(s);
        }
        if t0.elapsed() > Duration::from_secs(2) {
            let _ = c.kill();
            break c.wait().ok();
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    status.map(|s| s.code().unwrap_or(-1))
}

/// Reading every CPU's pipe into the sink.
struct Drain<'a> {
    pipes: &'a [(u32, File)],
    page: Vec<u8>,
    progress: &'a RecordProgress,
}

impl Drain<'_> {
    /// Reads each pipe until it would block, flushes, and updates the live figures.
    fn pass<W: Write>(&mut self, sink: &mut Sink<W>) -> Result<(), TraceError> {
        for (cpu, f) in self.pipes {
            let mut f = f;
            loop {
                match f.read(&mut self.page) {
                    Ok(0) => break,
                    Ok(n) => sink.page(*cpu, &self.page[..n])?,
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
        sink.writer
            .flush()
            .map_err(|e| TraceError::io("writing the trace file", e))?;
        let progress = self.progress;
        progress
            .events
            .store(sink.writer.events(), Ordering::Relaxed);
        progress
            .bytes
            .store(sink.writer.bytes_written(), Ordering::Relaxed);
        progress.lost.store(
            sink.lost.values().map(|l| l.in_band).sum(),
            Ordering::Relaxed,
        );
        Ok(())
    }
}

/// What ends the drain: the stop flag, the deadline (monotonic ns), or the command's exit (its
/// pidfd wakes the poll).
struct Ends<'a> {
    stop: &'a AtomicBool,
    deadline: Option<u64>,
    interval: Duration,
    child_fd: Option<std::os::fd::OwnedFd>,
}

/// Sleeps in `poll` on the pipes and drains them until one of `ends` comes; the command's exit
/// status goes to `target_status`.
fn drain_until_end<W: Write>(
    drain: &mut Drain,
    sink: &mut Sink<W>,
    ends: &Ends,
    mut child: Option<&mut std::process::Child>,
    target_status: &mut Option<i32>,
) -> Result<(), TraceError> {
    loop {
        let now = now_mono();
        if ends.stop.load(Ordering::Relaxed) || ends.deadline.is_some_and(|d| now >= d) {
            return Ok(());
        }
        if let Some(c) = child.as_mut() {
            if let Ok(Some(status)) = c.try_wait() {
                *target_status = Some(status.code().unwrap_or(
                    128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0),
                ));
                return Ok(());
            }
        }
        let mut timeout = ends.interval.as_millis() as u64;
        if let Some(d) = ends.deadline {
            timeout = timeout.min((d - now).div_ceil(1_000_000));
        }
        let mut fds: Vec<libc::pollfd> = drain
            .pipes
            .iter()
            .map(|(_, f)| libc::pollfd {
                fd: f.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        if let Some(fd) = &ends.child_fd {
            fds.push(libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        // SAFETY: fds is a valid array of pollfd for the duration of the call.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout as i32) };
        drain.pass(sink)?;
    }
}

/// Adds what the kernel counted as lost on each CPU to what the pages reported, and keeps only the
/// CPUs that lost something.
fn add_kernel_lost(lost: &mut BTreeMap<u32, LostStats>, inst: &Instance, cpus: &[u32]) {
    for &c in cpus {
        let st = inst.cpu_stats(c);
        let e = lost.entry(c).or_default();
        e.overrun = st.overrun;
        e.commit_overrun = st.commit_overrun;
        e.dropped = st.dropped;
    }
    lost.retain(|_, l| l.any());
}

/// The tasks seen, with their thread group where the kernel or /proc still knows it: those the
/// trace names, and those read as a CPU's sole runner (which may never switch in it).
fn task_infos<'a>(
    comms: &HashMap<i32, Vec<u8>>,
    root: &std::path::Path,
    sole: impl Iterator<Item = &'a punctual_rt::Runnable>,
) -> BTreeMap<i32, TaskInfo> {
    let tgids = saved_tgids(root);
    let tgid = |pid: i32| tgids.get(&pid).copied().or_else(|| proc_tgid(pid));
    let mut tasks: BTreeMap<i32, TaskInfo> = comms
        .iter()
        .map(|(pid, name)| {
            let comm = String::from_utf8_lossy(name).into_owned();
            (
                *pid,
                TaskInfo {
                    tgid: tgid(*pid),
                    comm,
                },
            )
        })
        .collect();
    for r in sole {
        tasks.entry(r.tid).or_insert_with(|| TaskInfo {
            tgid: tgid(r.tid),
            comm: r.comm.clone(),
        });
    }
    tasks
}

fn irq_infos(irq_names: &HashMap<i32, Vec<u8>>) -> BTreeMap<i32, IrqInfo> {
    irq_names
        .iter()
        .map(|(irq, name)| {
            let name = String::from_utf8_lossy(name).into_owned();
            let driver = irq_driver(*irq, &name);
            (*irq, IrqInfo { name, driver })
        })
        .collect()
}

/// `saved_tgids` of the top level (filled because the instance sets `record-tgid`).
fn saved_tgids(root: &std::path::Path) -> HashMap<i32, i32> {
    crate::kernel::read_file(&root.join("saved_tgids"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
        })
        .filter(|(_, tgid): &(i32, i32)| *tgid > 0)
        .collect()
}

/// Per traced CPU, the one runnable task there, where there is exactly one (see
/// [`Trailer::sole_runners`]).
fn sole_runners(cpus: &[u32]) -> BTreeMap<u32, punctual_rt::Runnable> {
    let mut by_cpu: BTreeMap<u32, Vec<punctual_rt::Runnable>> = BTreeMap::new();
    for r in punctual_rt::runnable_tasks() {
        if cpus.contains(&r.cpu) {
            by_cpu.entry(r.cpu).or_default().push(r);
        }
    }
    by_cpu
        .into_iter()
        .filter_map(|(cpu, mut rs)| (rs.len() == 1).then(|| (cpu, rs.remove(0))))
        .collect()
}

fn proc_tgid(pid: i32) -> Option<i32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The driver behind an IRQ: virtio devices by their name prefix, PCI devices by their MSI vectors.
pub fn irq_driver(irq: i32, name: &str) -> Option<String> {
    let link = |p: PathBuf| {
        std::fs::read_link(p)
            .ok()
            .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()))
    };
    if let Some(dev) = name
        .split(['-', ' '])
        .next()
        .filter(|d| d.starts_with("virtio"))
    {
        if let Some(d) = link(PathBuf::from(format!(
            "/sys/bus/virtio/devices/{dev}/driver"
        ))) {
            return Some(d);
        }
    }
    let pci = std::fs::read_dir("/sys/bus/pci/devices").ok()?;
    for dev in pci.flatten() {
        let p = dev.path();
        let msi = p.join("msi_irqs").join(irq.to_string()).exists();
        let legacy = std::fs::read_to_string(p.join("irq"))
            .map(|s| s.trim() == irq.to_string())
            .unwrap_or(false);
        if msi || legacy {
            if let Some(d) = link(p.join("driver")) {
                return Some(d);
            }
        }
    }
    None
}

/// Names of hrtimer callbacks, from /proc/kallsyms (root sees the addresses).
fn resolve_symbols(addrs: &HashSet<u64>, kallsyms: Option<&str>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(text) = kallsyms.filter(|_| !addrs.is_empty()) else {
        return out;
    };
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let (Some(a), Some(_), Some(name)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(a, 16) else {
            continue;
        };
        if addr != 0 && addrs.contains(&addr) {
            out.entry(format!("{addr:x}"))
                .or_insert_with(|| name.to_string());
        }
    }
    out
}

#[cfg(test)]
mod request_tests {
    use super::*;

    fn request(events: &str, size: &str, command: &[&str]) -> Result<RecordConfig, TraceError> {
        let command = command.iter().map(|s| s.to_string()).collect();
        let drain = Duration::from_micros(10);
        RecordConfig::request("t.trace".into(), events, size, None, command, drain)
    }

    #[test]
    fn a_request_is_checked_and_takes_the_defaults() {
        let c = request("sched", "1M", &[]).unwrap();
        assert_eq!((c.buffer_kb, c.duration), (1024, Some(10_000_000_000)));
        assert_eq!(c.drain_interval, Duration::from_millis(1));
        let c = request("all", "4M", &["true"]).unwrap();
        assert_eq!(
            (c.duration, c.command.as_ref().map(Vec::len)),
            (None, Some(1))
        );
        assert!(matches!(
            request("nosuch", "4M", &[]),
            Err(TraceError::Usage(_))
        ));
        assert!(request("sched", "4Q", &[]).is_err());
        let e = request("sched", "4M", &["/nonexistent/prog"]).unwrap_err();
        assert!(matches!(e, TraceError::Usage(_)), "{e}");
    }
}
