//! The seeds' experiments (SPEC section 5): each runs this machine (or the simulator) through a
//! seed's experiment and prints the seed's table with the published numbers beside ours, with a
//! result document and SVG figures.
//!
//! One file per seed experiment, each split the same way: **measure** (the runs, a
//! [`punctual_session::Measurement`] driven by the lifecycle like every command), **model** (the
//! numbers the seed reports, computed from what was measured), **tables** (the seed's layout, the
//! published numbers from [`published`] beside ours) and **figures**. The registry is
//! [`registry`] (measured on this machine) and [`sim_registry`] (simulated halves, `--sim`).

pub mod alone;
pub mod common;
pub mod kurt_periodic;
pub mod published;

// The measured experiments built on punctual-bench and punctual-latency (and etsion-latency's
// simulated half).
pub mod etsion_latency;
pub mod etsion_overhead;
pub mod etsion_overhead_sim;
pub mod mckenney_choose;
pub mod mckenney_nanosleep;
pub mod zeadally_dispatch;
// Traced and simulated experiments.
pub mod etsion_billing;
pub mod etsion_frames;
pub mod kurt_arts;
pub mod kurt_irq;
pub mod kurt_utime;
pub mod traced;
pub mod workload;

use punctual_result::Failure;
use punctual_session::{drive, Env, Exit, Measurement, Outputs};

/// What an experiment takes from the command line.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The reduced version, under a minute.
    pub quick: bool,
    /// `--explain-trace FILE`: keep the kernel trace each row's causes were read from, FILE for
    /// the first row and FILE-2, FILE-3... for the next (experiments in [`EXPLAINED`]).
    pub explain_trace: Option<std::path::PathBuf>,
}

/// Experiments that trace their rows and explain their late releases: the ones that take
/// `--explain-trace`.
pub const EXPLAINED: [&str; 1] = [kurt_periodic::NAME];

/// An experiment as `punctual experiment list|run` sees it.
pub trait Experiment: Send + Sync {
    /// The name on the command line (`etsion-latency`).
    fn name(&self) -> &'static str;
    /// Which seed, table or figure it reproduces, in one line.
    fn reproduces(&self) -> &'static str;
    /// How long the full and quick versions take, in one line.
    fn duration(&self) -> &'static str;
    /// Run it through the lifecycle, writing where `out` says.
    fn run(&self, opts: Options, out: &Outputs, env: &Env) -> Result<Exit, Failure>;
}

/// An experiment from its metadata and the measurement that runs it.
pub struct Entry<M> {
    pub name: &'static str,
    pub reproduces: &'static str,
    pub duration: &'static str,
    pub make: fn(Options) -> M,
}

impl<M: Measurement + 'static> Experiment for Entry<M> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn reproduces(&self) -> &'static str {
        self.reproduces
    }
    fn duration(&self) -> &'static str {
        self.duration
    }
    fn run(&self, opts: Options, out: &Outputs, env: &Env) -> Result<Exit, Failure> {
        drive(&mut (self.make)(opts), out, env)
    }
}

/// Every experiment measured on this machine.
pub fn registry() -> Vec<Box<dyn Experiment>> {
    let mut all: Vec<Box<dyn Experiment>> = vec![Box::new(Entry {
        name: kurt_periodic::NAME,
        reproduces: "KURT Tables 4.1 and 4.2: 1-30 periodic 10 ms processes, FIFO sleep vs punctual wake, idle and disk load",
        duration: "about 5 minutes; --quick under a minute",
        make: kurt_periodic::KurtPeriodic::new,
    })];
    all.extend(bench_registry());
    all.extend(traced_and_simulated());
    all
}

/// Experiments that are simulations through and through (in [`registry`]): `--sim` runs them
/// as they are.
pub const SIMULATED: [&str; 1] = [etsion_frames::NAME];

/// Simulated halves of experiments (`--sim`), under the same names.
pub fn sim_registry() -> Vec<Box<dyn Experiment>> {
    let mut all: Vec<Box<dyn Experiment>> = vec![Box::new(Entry {
        name: etsion_latency::NAME,
        reproduces: "Etsion 2003 Table 6, Fig. 7: alarm latency, BLK/N%/CONT, 100 Hz/60 ms and 20 kHz/100 us",
        duration: "about 10 s; --quick about 2 s (simulation)",
        make: etsion_latency::EtsionLatencySim::new,
    })];
    all.extend(simulated_halves());
    all
}

/// The experiments measured with punctual-bench and punctual-latency.
fn bench_registry() -> Vec<Box<dyn Experiment>> {
    vec![
        Box::new(Entry {
            name: etsion_latency::NAME,
            reproduces: "Etsion et al. 2003, Table 6 and Fig. 7: alarm latency of BLK, N% and CONT workloads at a long and a short RR quantum",
            duration: "full about 3.7 h (500 alarms of 1-1000 ms per process, 44 runs); --quick under a minute",
            make: etsion_latency::EtsionLatency::new,
        }),
        Box::new(Entry {
            name: etsion_overhead::NAME,
            reproduces: "Etsion et al. 2003, Tables 1-2 and Figs. 2, 3, 8: tick, context switch, trap and copy costs; sort throughput against the RR quantum",
            duration: "full about 6 min (sort: 20 s per configuration, 12 configurations); --quick about 30 s",
            make: etsion_overhead::EtsionOverhead::new,
        }),
        Box::new(Entry {
            name: mckenney_nanosleep::NAME,
            reproduces: "McKenney 2008/2009, Figs. 1-3 and 8: the nanosleep validation loop, pitfall by pitfall, in parallel and beside a build",
            duration: "full about 45 min (10,000,000 trials with all precautions); --quick about 25 s",
            make: mckenney_nanosleep::McKenneyNanosleep::new,
        }),
        Box::new(Entry {
            name: mckenney_choose::NAME,
            reproduces: "McKenney 2008/2009, Table 1 and Figs. 5-7: start latency and work slowdown of real time vs real fast, and where total delay crosses over",
            duration: "full about 5 min (45 s per start-latency cell, 5 runs of each work unit); --quick about 30 s",
            make: mckenney_choose::McKenneyChoose::new,
        }),
        Box::new(Entry {
            name: kurt_arts::NAME,
            reproduces: "KURT thesis Fig. 4.7 (ARTS): inter-arrival errors of streams at 100 us-10 ms over a veth pair, punctual's replay beside tcpreplay's",
            duration: "full about 4 min (10,000 frames per stream, 4 spacings, 2 senders); --quick about 10 s",
            make: kurt_arts::KurtArts::new,
        }),
        Box::new(Entry {
            name: zeadally_dispatch::NAME,
            reproduces: "Zeadally, SVR4.0 vs SVR4.2, Tables 1-4 and Figs. 2-3: process dispatch latency, real-time vs time-sharing, with soak and find",
            duration: "full about 2 min (10 s per case, 4 cases, eventfd, pipe and signal); --quick about 15 s",
            make: zeadally_dispatch::ZeadallyDispatch::new,
        }),
    ]
}

/// `etsion-frames` (simulated through and through, so it needs no `--sim`), and the experiments
/// that answer from a kernel trace.
fn traced_and_simulated() -> Vec<Box<dyn Experiment>> {
    vec![
        Box::new(Entry {
            name: etsion_frames::NAME,
            reproduces: "Etsion 2003 Sec. 5, Figs. 1, 5: frames skipped by start shift, desired vs achieved rate (simulated)",
            duration: "a few seconds; --quick about 1 s (simulation)",
            make: etsion_frames::EtsionFrames::new,
        }),
        Box::new(Entry {
            name: etsion_billing::NAME,
            reproduces: "Etsion et al. 2003, Tables 3-4, Figs. 4 and 6: billing accuracy and quanta of each application's stand-in, traced alone",
            duration: "about 45 s (5 runs of 8 s); --quick about 15 s (2 s each)",
            make: etsion_billing::EtsionBilling::new,
        }),
        Box::new(Entry {
            name: kurt_irq::NAME,
            reproduces: "KURT thesis Table 4.3, Figs. 4.8-4.9: how long each kernel subsystem holds interrupts off",
            duration: "36 s (--quick: 12 s)",
            make: kurt_irq::KurtIrq::new,
        }),
        Box::new(Entry {
            name: kurt_utime::NAME,
            reproduces: "KURT thesis Figs. 3.1 and 3.3: the timer interrupt's processing time, and scheduled time to timer dispatch",
            duration: "33 s (--quick: 5 s)",
            make: kurt_utime::KurtUtime::new,
        }),
    ]
}

fn simulated_halves() -> Vec<Box<dyn Experiment>> {
    vec![
        Box::new(Entry {
            name: etsion_billing::NAME,
            reproduces: "Etsion 2003 Tables 3-4, Figs. 4, 6: billing, missed quanta, quanta/s at 100 and 1000 Hz",
            duration: "under a second (simulation)",
            make: etsion_billing::EtsionBillingSim::new,
        }),
        Box::new(Entry {
            name: etsion_overhead::NAME,
            reproduces: "Etsion 2003 Figs. 2-3, Sec. 3: added overhead of 100-20,000 Hz at 50 ms and 5(+1)-tick quanta, 1-8 sorts with a cache-refill term; the direct/indirect split",
            duration: "about 1 s; --quick under a second (simulation)",
            make: etsion_overhead_sim::EtsionOverheadSim::new,
        }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_in_each_registry() {
        for reg in [registry(), sim_registry()] {
            let mut names: Vec<&str> = reg.iter().map(|e| e.name()).collect();
            let n = names.len();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), n);
        }
    }
}
