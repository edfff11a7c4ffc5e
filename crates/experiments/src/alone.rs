//! Did the work have its CPU alone? Experiments that time something "alone" on one CPU (the
//! seeds' uniprocessors: `etsion-billing`'s stand-ins, `etsion-overhead`'s costs) check what else
//! ran there meanwhile, and how long the hypervisor took it, instead of trusting the pinning.
//!
//! Issue 31: `etsion-billing` reported 18,751 quanta a second for a CPU-bound task the paper
//! saw run 2 a second, without a word, because a build shared its CPU: every quantum the build
//! took cut the task's into pieces. Pinning keeps the work on a CPU, not others off it (only
//! `punctual shield` does that).
//!
//! Two ways to know: a kernel trace of the run names every task that ran on the CPU
//! ([`Sharing::from_trace`]); without one, `/proc/stat` gives the CPU's busy and stolen time,
//! from which the work's own CPU time is taken away ([`CpuWatch`], to its 10 ms tick).

use punctual_time::format_ns;
use punctual_trace::analyze::Analysis;

/// Share of the window others (and the hypervisor) may take before the figures are not the
/// work's alone: kernel threads and daemons take a little of any CPU.
pub const LIMIT: f64 = 0.05;

/// What else a CPU did while an experiment's work was meant to have it alone.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Sharing {
    pub cpu: usize,
    pub window_ns: u64,
    /// CPU time of tasks that are not the work's, on that CPU.
    pub others_ns: u64,
    /// The hypervisor's steal on that CPU over the window, when the kernel reports it.
    pub steal_ns: Option<u64>,
    /// The busiest of the others (name, ns on the CPU), busiest first, when known.
    pub busiest: Vec<(String, u64)>,
}

impl Sharing {
    /// From a trace of the window: every run on `cpu` of a thread whose name does not start with
    /// `own` (the idle task left out), clipped to the trace's window.
    pub fn from_trace(a: &Analysis, cpu: usize, own: &str, steal_ns: Option<u64>) -> Sharing {
        let (lo, hi) = a.window;
        let mut by_thread: Vec<(String, u64)> = a
            .threads
            .values()
            .filter(|t| t.tid != 0 && !t.comm.starts_with(own))
            .map(|t| {
                let ns: u64 = t
                    .runs
                    .iter()
                    .filter(|r| r.cpu as usize == cpu)
                    .map(|r| r.end.min(hi).saturating_sub(r.start.max(lo)))
                    .sum();
                (format!("{} [{}]", t.comm, t.tid), ns)
            })
            .filter(|(_, ns)| *ns > 0)
            .collect();
        by_thread.sort_by_key(|b| std::cmp::Reverse(b.1));
        Sharing {
            cpu,
            window_ns: a.window_ns(),
            others_ns: by_thread.iter().map(|(_, ns)| ns).sum(),
            steal_ns,
            busiest: by_thread.into_iter().take(3).collect(),
        }
    }

    /// Others' and the hypervisor's share of the window.
    pub fn share(&self) -> f64 {
        (self.others_ns + self.steal_ns.unwrap_or(0)) as f64 / self.window_ns.max(1) as f64
    }

    /// Whether the work did not have the CPU to itself (more than [`LIMIT`] taken).
    pub fn shared(&self) -> bool {
        self.share() > LIMIT
    }

    /// One sentence: how much of the CPU others and the host took `during` something (`while the
    /// editor ran`), and who.
    pub fn describe(&self, during: &str) -> String {
        let pct = |ns: u64| 100.0 * ns as f64 / self.window_ns.max(1) as f64;
        let busiest = if self.busiest.is_empty() {
            String::new()
        } else {
            let names: Vec<String> = self
                .busiest
                .iter()
                .map(|(n, ns)| format!("{n} {:.1} %", pct(*ns)))
                .collect();
            format!(" (busiest: {})", names.join(", "))
        };
        format!(
            "CPU {} was shared {during}: other tasks ran {:.1} % of its {} there{busiest}, \
             and the host took {}",
            self.cpu,
            pct(self.others_ns),
            format_ns(self.window_ns),
            self.steal_ns
                .map(|s| format!("{:.1} %", pct(s)))
                .unwrap_or_else(|| "an unknown share (no steal counter)".into()),
        )
    }
}

/// A CPU watched through `/proc/stat` while work of this process (and its children) runs there.
pub struct CpuWatch {
    cpu: usize,
    t0: std::time::Instant,
    busy0: u64,
    steal0: Option<u64>,
    own0: u64,
}

impl CpuWatch {
    /// Start watching `cpu`; `None` when `/proc/stat` has no line for it.
    pub fn start(cpu: usize) -> Option<CpuWatch> {
        let (busy0, steal0) = cpu_times(cpu)?;
        Some(CpuWatch {
            cpu,
            t0: std::time::Instant::now(),
            busy0,
            steal0,
            own0: own_cpu_ns(),
        })
    }

    /// What else ran on the CPU since [`CpuWatch::start`]: its busy time less this process's and
    /// its reaped children's CPU time (which may have run elsewhere too, so others are never
    /// over-counted), and its steal.
    pub fn finish(self) -> Option<Sharing> {
        let (busy, steal) = cpu_times(self.cpu)?;
        let own = own_cpu_ns().saturating_sub(self.own0);
        Some(Sharing {
            cpu: self.cpu,
            window_ns: self.t0.elapsed().as_nanos() as u64,
            others_ns: busy.saturating_sub(self.busy0).saturating_sub(own),
            steal_ns: match (steal, self.steal0) {
                (Some(a), Some(b)) => Some(a.saturating_sub(b)),
                _ => None,
            },
            busiest: Vec::new(),
        })
    }
}

/// `cpu`'s busy time (user, nice, system, irq, softirq) and steal since boot, ns, from
/// `/proc/stat` (USER_HZ ticks).
fn cpu_times(cpu: usize) -> Option<(u64, Option<u64>)> {
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

/// CPU time of this process and of its reaped children, ns.
fn own_cpu_ns() -> u64 {
    let of = |who| {
        // SAFETY: rusage is plain C data (integers and timevals): all zeros is valid.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: getrusage writes one rusage into `u`, a live local of that type.
        unsafe { libc::getrusage(who, &mut u) };
        let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
        tv(u.ru_utime) + tv(u.ru_stime)
    };
    of(libc::RUSAGE_SELF) + of(libc::RUSAGE_CHILDREN)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(parse_cpu_line(text, 2, 100), None);
    }

    #[test]
    fn sharing_beyond_five_percent_is_named_with_the_busiest() {
        let s = Sharing {
            cpu: 1,
            window_ns: 2_000_000_000,
            others_ns: 700_000_000,
            steal_ns: Some(20_000_000),
            busiest: vec![("cc1 [4242]".into(), 600_000_000)],
        };
        assert!(s.shared());
        let d = s.describe("while the CPU-bound stand-in ran");
        assert!(
            d.starts_with("CPU 1 was shared while the CPU-bound stand-in ran"),
            "{d}"
        );
        assert!(
            d.contains("35.0 %") && d.contains("cc1 [4242] 30.0 %"),
            "{d}"
        );
        assert!(d.contains("host took 1.0 %"), "{d}");
        let quiet = Sharing {
            others_ns: 20_000_000,
            busiest: Vec::new(),
            ..s
        };
        assert!(!quiet.shared(), "{}", quiet.share());
    }

    /// This process burning its own CPU is not someone else's: its CPU time is taken away.
    #[test]
    fn a_watch_does_not_count_the_process_itself() {
        let _cpu = punctual_testkit::exclusive_cpu();
        let cpu = punctual_rt::affinity::last_online_cpu();
        let (s, own) = std::thread::spawn(move || {
            punctual_rt::affinity::set(0, &[cpu]).unwrap();
            let thread_ns = || {
                let mut ts = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                // SAFETY: the calling thread's CPU clock.
                unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
                ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
            };
            let w = CpuWatch::start(cpu).unwrap();
            let (t0, c0) = (std::time::Instant::now(), thread_ns());
            let mut x = 0u64;
            // 200 ms of this thread's own CPU time, however busy the machine is (5 s at most).
            while thread_ns() - c0 < 200_000_000 && t0.elapsed().as_secs() < 5 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            (w.finish().unwrap(), thread_ns() - c0)
        })
        .join()
        .unwrap();
        // Counted as others, its own time would make them the whole window. Taken away, others
        // are at most what is left (plus /proc/stat's 10 ms ticks at each end).
        assert!(
            s.others_ns <= s.window_ns.saturating_sub(own) + 20_000_000,
            "own {own} ns counted as others: {s:?}"
        );
    }
}
