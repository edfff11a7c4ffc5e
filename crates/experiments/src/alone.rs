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
//! from which the work's own CPU time is taken away ([`CpuWatch`], to its 10 ms tick; both read
//! by `punctual-rt`'s host facts).

use punctual_rt::host::{cpu_busy_and_steal_ns as cpu_times, own_cpu_ns};
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

#[cfg(test)]
mod tests {
    use super::*;

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
            let thread_ns = || punctual_time::clock::read_clock(libc::CLOCK_THREAD_CPUTIME_ID);
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
