//! Facts about the machine a result was measured on (SPEC section 3, `host`).

use punctual_result::HostFacts;
use std::io::Read;

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// The running kernel's build configuration (`/proc/config.gz`, else `/boot/config-RELEASE`).
pub fn kernel_config() -> Option<String> {
    if let Ok(f) = std::fs::File::open("/proc/config.gz") {
        let mut s = String::new();
        if flate2::read::GzDecoder::new(f)
            .read_to_string(&mut s)
            .is_ok()
        {
            return Some(s);
        }
    }
    let release = nix::sys::utsname::uname()
        .ok()?
        .release()
        .to_string_lossy()
        .to_string();
    std::fs::read_to_string(format!("/boot/config-{release}")).ok()
}

/// The running kernel's timer tick rate (CONFIG_HZ), when its configuration can be read.
pub fn config_hz() -> Option<u32> {
    config_value(&kernel_config()?, "CONFIG_HZ")?.parse().ok()
}

fn config_value<'a>(config: &'a str, key: &str) -> Option<&'a str> {
    config
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
}

/// Preemption model, from the most direct source available.
fn preempt_model(config: Option<&str>, version: &str, realtime: bool, cmdline: &str) -> String {
    if realtime || version.contains("PREEMPT_RT") {
        return "rt".into();
    }
    // debugfs shows the live choice as "none voluntary (full) lazy".
    if let Some(s) = read("/sys/kernel/debug/sched/preempt") {
        if let Some(live) = s.split_whitespace().find(|w| w.starts_with('(')) {
            return format!("dynamic: {}", live.trim_matches(|c| c == '(' || c == ')'));
        }
    }
    let dynamic = version.contains("PREEMPT_DYNAMIC")
        || config.is_some_and(|c| config_value(c, "CONFIG_PREEMPT_DYNAMIC") == Some("y"));
    if let Some(mode) = cmdline
        .split_whitespace()
        .find_map(|w| w.strip_prefix("preempt="))
    {
        return format!("dynamic: {mode} (from preempt= on the command line)");
    }
    let configured = config.and_then(|c| {
        [
            ("CONFIG_PREEMPT_NONE", "none"),
            ("CONFIG_PREEMPT_VOLUNTARY", "voluntary"),
            ("CONFIG_PREEMPT", "full"),
            ("CONFIG_PREEMPT_LAZY", "lazy"),
        ]
        .into_iter()
        .find(|(k, _)| config_value(c, k) == Some("y"))
        .map(|(_, m)| m)
    });
    match (dynamic, configured) {
        (true, Some(m)) => format!("dynamic: {m} (build default)"),
        (true, None) => "dynamic".into(),
        (false, Some(m)) => m.into(),
        (false, None) if version.contains("PREEMPT") => "full".into(),
        (false, None) => "unknown".into(),
    }
}

/// The facts of the machine this process runs on.
pub fn detect() -> HostFacts {
    let uts = nix::sys::utsname::uname().ok();
    let field = |f: fn(&nix::sys::utsname::UtsName) -> &std::ffi::OsStr| {
        uts.as_ref()
            .map(|u| f(u).to_string_lossy().to_string())
            .unwrap_or_default()
    };
    let kernel = field(|u| u.release());
    let version = field(|u| u.version());
    let hostname = field(|u| u.nodename());
    let config = kernel_config();
    let realtime = read("/sys/kernel/realtime").as_deref() == Some("1");
    let cpuinfo = read("/proc/cpuinfo").unwrap_or_default();
    let virtualized = cpuinfo
        .lines()
        .any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "hypervisor"))
        || std::path::Path::new("/sys/hypervisor/type").exists();
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|r| r.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_default();
    HostFacts {
        preempt: preempt_model(
            config.as_deref(),
            &version,
            realtime,
            &read("/proc/cmdline").unwrap_or_default(),
        ),
        kernel,
        realtime,
        cpus: crate::online_cpus().len(),
        clocksource: read("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .unwrap_or_else(|| "unknown".into()),
        virtualized,
        hz: config
            .as_deref()
            .and_then(|c| config_value(c, "CONFIG_HZ"))
            .and_then(|v| v.parse().ok()),
        hostname,
        cpu_model,
    }
}

/// Steal time per CPU (`/proc/stat`): how long the hypervisor ran something else while the CPU had
/// work, in ns since boot, as `(cpu, ns)`. Zero on bare metal; `None` when it cannot be read.
/// A release that falls inside stolen time is late by the rest of it, whatever the waiting method.
pub fn steal_ns() -> Option<Vec<(usize, u64)>> {
    // SAFETY: plain sysconf query.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    parse_steal(
        &std::fs::read_to_string("/proc/stat").ok()?,
        hz.max(1) as u64,
    )
}

/// Steal time over an interval: [`steal_ns`] when it starts, the difference per CPU when asked.
pub struct StealMeter {
    t0: std::time::Instant,
    before: Vec<(usize, u64)>,
    /// All CPUs' busy time and this process's (with its waited-for children's) CPU time at the
    /// start, for [`StealMeter::others_cpu_ns`].
    busy_before: Option<u64>,
    own_before: u64,
}

impl StealMeter {
    /// `None` when the kernel does not report steal time.
    pub fn start() -> Option<StealMeter> {
        steal_ns().map(|before| StealMeter {
            t0: std::time::Instant::now(),
            before,
            busy_before: busy_ns(),
            own_before: own_cpu_ns(),
        })
    }

    /// Per CPU, the ns the hypervisor took since `start`, and the ns elapsed.
    pub fn taken(&self) -> Option<(Vec<(usize, u64)>, u64)> {
        let after = steal_ns()?;
        let per_cpu = after
            .into_iter()
            .map(|(cpu, ns)| {
                let b = self
                    .before
                    .iter()
                    .find(|(c, _)| *c == cpu)
                    .map_or(ns, |(_, b)| *b);
                (cpu, ns.saturating_sub(b))
            })
            .collect();
        Some((per_cpu, self.t0.elapsed().as_nanos().max(1) as u64))
    }

    /// The share of the CPUs' time taken since `start` (mean over the CPUs).
    pub fn share(&self) -> Option<f64> {
        let (per_cpu, elapsed) = self.taken()?;
        let total: u64 = per_cpu.iter().map(|(_, d)| d).sum();
        Some(total as f64 / elapsed as f64 / per_cpu.len().max(1) as f64)
    }

    /// CPU time everything else on the machine used since `start`, summed over the CPUs: the
    /// CPUs' busy time (`/proc/stat`: user, nice, system, irq, softirq) less this process's and
    /// its waited-for children's (loads included). Call it after the loads were reaped. The
    /// kernel counts busy time in ticks (10 ms), so a short run reads to about that.
    pub fn others_cpu_ns(&self) -> Option<u64> {
        let busy = busy_ns()?.saturating_sub(self.busy_before?);
        Some(busy.saturating_sub(own_cpu_ns().saturating_sub(self.own_before)))
    }
}

/// Busy time of all CPUs since boot, ns (`/proc/stat`'s per-CPU user, nice, system, irq, softirq).
fn busy_ns() -> Option<u64> {
    // SAFETY: plain sysconf query.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    parse_busy(&std::fs::read_to_string("/proc/stat").ok()?, hz)
}

fn parse_busy(stat: &str, user_hz: u64) -> Option<u64> {
    let mut total: Option<u64> = None;
    for l in stat.lines() {
        let mut f = l.split_whitespace();
        let Some(name) = f.next() else { continue };
        if name
            .strip_prefix("cpu")
            .is_none_or(|n| n.parse::<usize>().is_err())
        {
            continue;
        }
        let v: Vec<u64> = f.take(7).filter_map(|x| x.parse().ok()).collect();
        if v.len() < 7 {
            continue;
        }
        let ticks = v[0] + v[1] + v[2] + v[5] + v[6];
        *total.get_or_insert(0) += ticks.saturating_mul(1_000_000_000) / user_hz;
    }
    total
}

/// This process's CPU time and that of its children it waited for, ns (`getrusage`).
pub fn own_cpu_ns() -> u64 {
    let of = |who| {
        // SAFETY: rusage is plain C data (integers and timevals): all zeros is valid.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: getrusage writes one rusage into `u`, a live local of that type.
        if unsafe { libc::getrusage(who, &mut u) } != 0 {
            return 0;
        }
        let t = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1_000;
        t(u.ru_utime) + t(u.ru_stime)
    };
    of(libc::RUSAGE_SELF) + of(libc::RUSAGE_CHILDREN)
}

/// `cpu`'s busy time (user, nice, system, irq, softirq) and steal since boot, ns, from
/// `/proc/stat` (USER_HZ ticks); `None` when it has no line for `cpu`.
pub fn cpu_busy_and_steal_ns(cpu: usize) -> Option<(u64, Option<u64>)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    // SAFETY: plain sysconf query.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    parse_cpu_line(&text, cpu, hz)
}

fn parse_cpu_line(text: &str, cpu: usize, hz: u64) -> Option<(u64, Option<u64>)> {
    let name = format!("cpu{cpu}");
    let line = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name.as_str()))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let ns = |ticks: u64| ticks.saturating_mul(1_000_000_000) / hz;
    // user nice system idle iowait irq softirq steal ...
    let busy = [0, 1, 2, 5, 6].iter().filter_map(|&i| f.get(i)).sum();
    Some((ns(busy), f.get(7).map(|&s| ns(s))))
}

/// One CPU's steal time, from `/proc/stat` kept open and read into a buffer allocated once. Its
/// resolution is the kernel's USER_HZ tick (10 ms). A read takes tens of microseconds, more with
/// more CPUs: a timing loop reads a [`StealSampler`]'s [`SampledSteal`] instead.
pub struct CpuSteal {
    file: std::fs::File,
    cpu: usize,
    user_hz: u64,
    buf: std::cell::RefCell<Vec<u8>>,
}

impl CpuSteal {
    /// `None` when `/proc/stat` cannot be read or has no steal column for `cpu`.
    pub fn open(cpu: usize) -> Option<CpuSteal> {
        // SAFETY: plain sysconf query.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        let s = CpuSteal {
            file: std::fs::File::open("/proc/stat").ok()?,
            cpu,
            user_hz: hz.max(1) as u64,
            // The per-CPU lines come first; a longer file is cut after them.
            buf: std::cell::RefCell::new(vec![0; 64 << 10]),
        };
        s.total_ns().map(|_| s)
    }

    /// The CPU's stolen time since boot, in ns.
    pub fn total_ns(&self) -> Option<u64> {
        self.all_ns()?
            .into_iter()
            .find_map(|(cpu, ns)| (cpu == self.cpu).then_some(ns))
    }

    /// Every CPU's stolen time since boot, as `(cpu, ns)`, from one read ([`parse_steal`]).
    fn all_ns(&self) -> Option<Vec<(usize, u64)>> {
        use std::os::unix::fs::FileExt;
        let mut buf = self.buf.borrow_mut();
        let n = self.file.read_at(&mut buf, 0).ok()?;
        let text = match std::str::from_utf8(&buf[..n]) {
            Ok(t) => t,
            Err(e) => std::str::from_utf8(&buf[..e.valid_up_to()]).ok()?,
        };
        parse_steal(text, self.user_hz)
    }
}

/// One `cpuN user nice system idle iowait irq softirq steal ...` line (in `user_hz` ticks) as
/// `(N, steal ns)`; `None` for other lines (the `cpu` total among them).
fn steal_of_line(l: &str, user_hz: u64) -> Option<(usize, u64)> {
    let mut f = l.split_whitespace();
    let cpu = f.next()?.strip_prefix("cpu")?.parse().ok()?;
    let ticks: u64 = f.nth(7)?.parse().ok()?;
    Some((cpu, ticks.saturating_mul(1_000_000_000) / user_hz))
}

/// How often a [`StealSampler`] reads `/proc/stat`: half the resolution of its counters (USER_HZ,
/// 10 ms), which the kernel moves on at its own tick.
pub const STEAL_SAMPLE_NS: u64 = 5_000_000;

/// Every CPU's stolen time, read from `/proc/stat` by a thread of its own every
/// [`STEAL_SAMPLE_NS`] (normal class, kept off `away_from` where it may run elsewhere), for timing
/// loops to read from memory ([`SampledSteal`]). A read of `/proc/stat` on a dispatch loop's own
/// thread took 31 us at the median, 74 us at p99 and 341 us at most on a 2-CPU VM (kurt-periodic
/// --quick, nineteenth session), which a kernel trace shows as the loop running, and the file's cost
/// grows with the CPUs and interrupts it lists. Dropping it stops the thread.
pub struct StealSampler {
    shared: std::sync::Arc<Sampled>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Sampled {
    /// Per CPU (index), its stolen time since boot (ns) as last read.
    totals: Box<[std::sync::atomic::AtomicU64]>,
    stop: std::sync::atomic::AtomicBool,
}

/// One CPU's stolen time as its [`StealSampler`] last read it (ns since boot, at most
/// [`STEAL_SAMPLE_NS`] old while the sampler gets its turns): a load from memory.
#[derive(Clone)]
pub struct SampledSteal {
    shared: std::sync::Arc<Sampled>,
    cpu: usize,
}

impl SampledSteal {
    pub fn total_ns(&self) -> u64 {
        self.shared.totals[self.cpu].load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl StealSampler {
    /// `None` when `/proc/stat` has no steal column, or the thread cannot be started.
    pub fn start(away_from: &[usize]) -> Option<StealSampler> {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        let online = crate::affinity::online_cpus();
        let reader = CpuSteal::open(*online.first()?)?;
        let first = reader.all_ns()?;
        let n = first.iter().map(|&(c, _)| c + 1).max()?;
        let totals: Box<[AtomicU64]> = (0..n).map(|_| AtomicU64::new(0)).collect();
        for (c, ns) in first {
            totals[c].store(ns, Ordering::Relaxed);
        }
        let shared = std::sync::Arc::new(Sampled {
            totals,
            stop: AtomicBool::new(false),
        });
        // Where this thread may run (a cpuset's CPUs), else every online CPU, less `away_from`.
        let away = |cpus: Vec<usize>| -> Vec<usize> {
            cpus.into_iter()
                .filter(|c| !away_from.contains(c))
                .collect()
        };
        let cpus = [
            away(crate::affinity::get(0).unwrap_or_default()),
            away(online.clone()),
            online,
        ]
        .into_iter()
        .find(|c| !c.is_empty())
        .unwrap_or_default();
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("punctual-steal".into())
            .spawn(move || {
                // A thread started by a real-time one inherits its class and CPU: neither is ours.
                let _ = crate::sched::set_current(crate::SchedParams {
                    policy: crate::Policy::Other,
                    priority: 0,
                });
                let _ = crate::affinity::set(0, &cpus);
                while !s.stop.load(Ordering::Relaxed) {
                    for (c, ns) in reader.all_ns().unwrap_or_default() {
                        if let Some(t) = s.totals.get(c) {
                            t.store(ns, Ordering::Relaxed);
                        }
                    }
                    std::thread::park_timeout(std::time::Duration::from_nanos(STEAL_SAMPLE_NS));
                }
            })
            .ok()?;
        Some(StealSampler {
            shared,
            thread: Some(thread),
        })
    }

    /// `cpu`'s stolen time as this sampler reads it; `None` for a CPU `/proc/stat` did not list.
    pub fn cpu(&self, cpu: usize) -> Option<SampledSteal> {
        (cpu < self.shared.totals.len()).then(|| SampledSteal {
            shared: self.shared.clone(),
            cpu,
        })
    }
}

impl Drop for StealSampler {
    fn drop(&mut self) {
        self.shared
            .stop
            .store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// `cpuN user nice system idle iowait irq softirq steal ...` in `user_hz` ticks.
fn parse_steal(stat: &str, user_hz: u64) -> Option<Vec<(usize, u64)>> {
    let v: Vec<(usize, u64)> = stat
        .lines()
        .filter_map(|l| steal_of_line(l, user_hz))
        .collect();
    (!v.is_empty()).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steal_meter_reports_every_cpu_over_the_time_it_ran() {
        let Some(m) = StealMeter::start() else {
            punctual_testkit::skip(
                "a_steal_meter_reports_every_cpu_over_the_time_it_ran",
                "no /proc/stat steal",
            );
            return;
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (per_cpu, elapsed) = m.taken().unwrap();
        assert_eq!(per_cpu.len(), steal_ns().unwrap().len());
        assert!(elapsed >= 20_000_000, "{elapsed}");
        let share = m.share().unwrap();
        assert!((0.0..=1.0).contains(&share), "{share}");
    }

    /// The sampler's thread, by its name among this process's threads.
    fn sampler_threads() -> Vec<i32> {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|t| {
                read(&format!("/proc/self/task/{t}/comm")).as_deref() == Some("punctual-steal")
            })
            .collect()
    }

    /// A loop reads the sampler from memory: what `/proc/stat` said between the sampler's start
    /// and a sample after, for every CPU. Its thread is in the normal class and off the CPU it is
    /// kept away from, even when a real-time thread pinned to that CPU started it, and it is gone
    /// once the sampler is dropped.
    #[test]
    fn a_steal_sampler_publishes_proc_stat_from_a_normal_thread_off_the_loops_cpu() {
        const NAME: &str =
            "a_steal_sampler_publishes_proc_stat_from_a_normal_thread_off_the_loops_cpu";
        let Some(before) = steal_ns() else {
            punctual_testkit::skip(NAME, "/proc/stat has no steal column here");
            return;
        };
        let loop_cpu = crate::affinity::last_online_cpu();
        let (sampler, rt) = std::thread::scope(|s| {
            s.spawn(|| {
                let _pin = crate::affinity::AffinityGuard::pin(&[loop_cpu]).unwrap();
                // Without SCHED_RESET_ON_FORK (which `sched::set_current` adds): the class would
                // pass on to the sampler's thread.
                let p = libc::sched_param { sched_priority: 1 };
                // SAFETY: the calling thread, a valid sched_param.
                let rt = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } == 0;
                let sampler = StealSampler::start(&[loop_cpu]).expect("steal is readable");
                let _ = crate::sched::set_current(crate::SchedParams {
                    policy: crate::Policy::Other,
                    priority: 0,
                });
                (sampler, rt)
            })
            .join()
            .unwrap()
        });
        if !rt {
            punctual_testkit::skip(
                NAME,
                "SCHED_FIFO refused: only the normal-class start is tested",
            );
        }
        let threads = sampler_threads();
        assert_eq!(threads.len(), 1, "{threads:?}");
        let after = steal_ns().unwrap();
        for (cpu, b) in &before {
            let v = sampler.cpu(*cpu).expect("listed").total_ns();
            let a = after.iter().find(|(c, _)| c == cpu).unwrap().1;
            assert!(*b <= v && v <= a, "CPU {cpu}: {b} <= {v} <= {a}");
        }
        assert!(sampler.cpu(100_000).is_none(), "no such CPU");
        // Its first turn sets its class and CPUs (waited for, however loaded the machine).
        let elsewhere = crate::affinity::online_cpus().len() > 1;
        let settled = || {
            // SAFETY: a plain query of a thread of this process.
            let class = unsafe { libc::sched_getscheduler(threads[0]) };
            let cpus = crate::affinity::get(threads[0]).unwrap();
            (class, cpus)
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let (class, cpus) = loop {
            let (class, cpus) = settled();
            let done = class == libc::SCHED_OTHER && !(elsewhere && cpus.contains(&loop_cpu));
            if done || std::time::Instant::now() > deadline {
                break (class, cpus);
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        assert_eq!(class, libc::SCHED_OTHER);
        assert!(!(elsewhere && cpus.contains(&loop_cpu)), "{cpus:?}");
        drop(sampler);
        assert!(sampler_threads().is_empty(), "{:?}", sampler_threads());
    }

    #[test]
    fn one_cpus_steal_reads_again_and_again_from_the_open_file_and_agrees_with_the_meter() {
        let Some(s) = CpuSteal::open(0) else {
            punctual_testkit::skip(
                "one_cpus_steal_reads_again_and_again_from_the_open_file_and_agrees_with_the_meter",
                "/proc/stat has no steal column here",
            );
            return;
        };
        let a = s.total_ns().unwrap();
        let all = steal_ns().unwrap();
        let b = s.total_ns().unwrap();
        let from_meter = all.iter().find(|(c, _)| *c == 0).unwrap().1;
        // Steal only grows; the meter's reading lies between two of ours.
        assert!(a <= from_meter && from_meter <= b, "{a} {from_meter} {b}");
        assert!(CpuSteal::open(100_000).is_none(), "no such CPU");
    }

    #[test]
    fn busy_time_is_user_nice_system_irq_softirq_of_the_cpu_lines() {
        let stat = "cpu  1521805 0 247290 938352 16271 0 4647 44916 0 0\n\
                    cpu0 100 1 10 5000 20 2 3 7 0 0\n\
                    cpu1 200 0 20 5000 20 0 7 9 0 0\n\
                    intr 123 4 5\n";
        // (100+1+10+2+3) + (200+20+7) ticks of 10 ms.
        assert_eq!(parse_busy(stat, 100), Some(343 * 10_000_000));
        assert_eq!(parse_busy("intr 1 2\n", 100), None);
        // Our own busy loop is ours, not the others'.
        let m = StealMeter::start();
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_millis(30) {
            std::hint::black_box(0u64);
        }
        if let Some(m) = m {
            assert!(m.others_cpu_ns().is_some());
        }
        assert!(own_cpu_ns() >= 20_000_000, "{}", own_cpu_ns());
    }

    #[test]
    fn a_cpu_line_gives_busy_and_steal_time() {
        let text =
            "cpu  10 0 0 0 0 0 0 0 0 0\ncpu0 1 2 3 400 5 6 7 8 0 0\ncpu1 100 0 50 1 0 0 0 25 0 0\n";
        // cpu1: user 100 + system 50 = 150 ticks of 10 ms; steal 25 ticks.
        assert_eq!(
            parse_cpu_line(text, 1, 100),
            Some((1_500_000_000, Some(250_000_000)))
        );
        assert_eq!(parse_cpu_line(text, 0, 100).unwrap().0, 190_000_000);
        assert_eq!(
            parse_cpu_line("cpu2 1 2 3\n", 2, 100),
            Some((60_000_000, None))
        );
        assert_eq!(parse_cpu_line(text, 2, 100), None);
    }

    /// The running process's own CPU time grows by at least what it burned.
    #[test]
    fn own_cpu_time_counts_this_process() {
        let before = own_cpu_ns();
        let t0 = std::time::Instant::now();
        let (mut x, mut spent) = (0u64, 0);
        // 50 ms of CPU time for this thread (5 s at most, however busy the machine is).
        let thread_ns = || punctual_time::clock::read_clock(libc::CLOCK_THREAD_CPUTIME_ID);
        let c0 = thread_ns();
        while spent < 50_000_000 && t0.elapsed().as_secs() < 5 {
            x = std::hint::black_box(x.wrapping_add(1));
            spent = thread_ns() - c0;
        }
        // getrusage's split into user and system time is sampled, their sum is not: half is a wide
        // margin that still tells this process's time from none.
        assert!(own_cpu_ns() - before >= spent / 2, "{spent} ns burned");
        let here = cpu_busy_and_steal_ns(crate::online_cpus()[0]);
        assert!(here.is_some_and(|(busy, _)| busy > 0), "{here:?}");
    }

    #[test]
    fn steal_is_the_eighth_value_of_each_cpu_line() {
        let stat = "cpu  1521805 0 247290 938352 16271 0 4647 44916 0 0\n\
                    cpu0 732672 0 111275 518981 5822 0 283 21885 0 0\n\
                    cpu1 789133 0 136014 419371 10449 0 4363 23030 0 0\n\
                    intr 123 4 5\n";
        assert_eq!(
            parse_steal(stat, 100),
            Some(vec![(0, 218_850_000_000), (1, 230_300_000_000)])
        );
        assert_eq!(parse_steal("cpu0 1 2 3\n", 100), None, "no steal column");
        assert!(steal_ns().is_some_and(|v| v.len() == crate::online_cpus().len()));
    }

    #[test]
    fn preempt_from_config_and_cmdline() {
        let cfg = "CONFIG_PREEMPT_DYNAMIC=y\nCONFIG_PREEMPT_NONE=y\n";
        assert_eq!(
            preempt_model(Some(cfg), "#1 SMP", false, ""),
            "dynamic: none (build default)"
        );
        assert_eq!(
            preempt_model(
                Some(cfg),
                "#1 SMP PREEMPT_DYNAMIC",
                false,
                "quiet preempt=full"
            ),
            "dynamic: full (from preempt= on the command line)"
        );
        assert_eq!(preempt_model(None, "#1 SMP PREEMPT_RT", false, ""), "rt");
        assert_eq!(
            preempt_model(Some("CONFIG_PREEMPT_VOLUNTARY=y\n"), "#1 SMP", false, ""),
            "voluntary"
        );
        assert_eq!(preempt_model(None, "#1 SMP", false, ""), "unknown");
    }

    #[test]
    fn config_values_do_not_match_prefixes() {
        let cfg = "CONFIG_HZ_250=y\nCONFIG_HZ=250\n";
        assert_eq!(config_value(cfg, "CONFIG_HZ"), Some("250"));
        assert_eq!(
            config_value("CONFIG_PREEMPT_RCU=y\n", "CONFIG_PREEMPT"),
            None
        );
    }

    #[test]
    fn detects_something_plausible() {
        let h = detect();
        assert!(!h.kernel.is_empty());
        assert!(h.cpus >= 1);
        assert!(!h.clocksource.is_empty());
    }
}
