//! What `punctual latency` asks for, checked into a [`Config`] before the system is touched. Every
//! refusal is a usage [`Failure`] (exit 2) naming the flag that fixes it.

use crate::{Config, Mode, Stop, MAX_THREADS};
use punctual_result::{Failure, Output};
use punctual_rt::Policy;
use punctual_time::{format_ns, ClockId, MarginPolicy};

/// How long a run lasts when neither a duration nor a sample count is given.
pub const DEFAULT_DURATION: u64 = 10_000_000_000;
/// Intervals under this mostly measure the measuring: refused without `force`.
pub const MIN_INTERVAL: u64 = 10_000;

/// The measurement as the command line gives it.
#[derive(Clone, Debug)]
pub struct Request {
    /// The CPUs threads are pinned to, in turn (`-a`, or every online CPU).
    pub cpus: Vec<usize>,
    /// Measuring threads (default: one per CPU of `cpus`).
    pub threads: Option<usize>,
    pub interval: u64,
    pub duration: Option<u64>,
    pub loops: Option<u64>,
    pub clock: ClockId,
    pub mode: Mode,
    pub spin_margin: Option<MarginPolicy>,
    /// Allow intervals under [`MIN_INTERVAL`].
    pub force: bool,
    pub policy: Policy,
    pub priority: u32,
}

impl Request {
    /// The engine's configuration, every value checked (the engine's own checks too).
    pub fn config(&self) -> Result<Config, Failure> {
        let threads = self.threads.unwrap_or(self.cpus.len());
        if threads == 0 || threads > MAX_THREADS {
            return Err(Failure::usage(format!(
                "-t/--threads {threads}: give 1 to {MAX_THREADS} threads"
            )));
        }
        if self.interval == 0 {
            return Err(Failure::usage(
                "-i/--interval must be more than zero, e.g. 1ms",
            ));
        }
        if self.interval < MIN_INTERVAL && !self.force {
            return Err(Failure::usage(format!(
                "-i/--interval {} is under 10us, where the wake-up itself takes most of the period; \
                 use 10us or more, or pass --force",
                format_ns(self.interval)
            )));
        }
        let cfg = Config {
            threads: (0..threads)
                .map(|i| Some(self.cpus[i % self.cpus.len()]))
                .collect(),
            interval: self.interval,
            stop: self.stop()?,
            clock: self.clock,
            mode: self.mode,
            margin: self.margin()?,
            policy: self.policy,
            priority: self.priority,
            timer_slack_ns: None,
        };
        // The engine's own checks, before the lifecycle locks memory and holds cpu_dma_latency
        // (`-i 18446744073709551615ns` was refused only after both; issue 32).
        cfg.validate().map_err(Failure::from)?;
        Ok(cfg)
    }

    fn stop(&self) -> Result<Stop, Failure> {
        Ok(match (self.duration, self.loops) {
            (_, Some(0)) => return Err(Failure::usage("-l/--loops must be at least 1")),
            (_, Some(l)) => Stop::Loops(l),
            (Some(0), _) => {
                return Err(Failure::usage(
                    "-D/--duration must be more than zero, e.g. 10s",
                ))
            }
            (Some(d), None) => Stop::Duration(d),
            (None, None) => Stop::Duration(DEFAULT_DURATION),
        })
    }

    fn margin(&self) -> Result<MarginPolicy, Failure> {
        Ok(match (self.mode, self.spin_margin) {
            (Mode::Hybrid, Some(MarginPolicy::Fixed(m))) if m >= self.interval => {
                return Err(Failure::usage(format!(
                    "--spin-margin {} must be shorter than the interval {}",
                    format_ns(m),
                    format_ns(self.interval)
                )))
            }
            (Mode::Hybrid, m) => m.unwrap_or(MarginPolicy::Auto),
            (_, Some(_)) => {
                return Err(Failure::usage(
                    "--spin-margin applies only to --mode hybrid; add --mode hybrid or drop it",
                ))
            }
            (_, None) => MarginPolicy::Auto,
        })
    }
}

/// `--samples` for `repeat` runs: each run's file writable (numbered when there are several), and
/// stdout only for one run and when nothing else goes there (`stdout_free`).
pub fn check_samples(out: &Output, repeat: u32, stdout_free: bool) -> Result<(), Failure> {
    for k in 0..repeat {
        out.of_run(k, repeat)
            .check_writable()
            .map_err(|e| Failure::usage(format!("--samples: {e}")))?;
    }
    if out.is_stdout() && repeat > 1 {
        return Err(Failure::usage(
            "--samples -: with --repeat each run writes its own file; give a file name",
        ));
    }
    if out.is_stdout() && !stdout_free {
        return Err(Failure::usage(
            "--samples -: only one output can go to stdout",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> Request {
        Request {
            cpus: vec![0, 1],
            threads: None,
            interval: 1_000_000,
            duration: None,
            loops: None,
            clock: ClockId::Monotonic,
            mode: Mode::Abs,
            spin_margin: None,
            force: false,
            policy: Policy::Fifo,
            priority: 99,
        }
    }

    fn refusal(r: Request) -> String {
        let e = r.config().expect_err("refused");
        assert_eq!(e.class, punctual_result::Class::Usage);
        e.message
    }

    #[test]
    fn defaults_give_one_thread_per_cpu_for_ten_seconds() {
        let c = request().config().unwrap();
        assert_eq!(c.threads, vec![Some(0), Some(1)]);
        assert_eq!(c.stop, Stop::Duration(DEFAULT_DURATION));
        assert_eq!(c.margin, MarginPolicy::Auto);
        let three = Request {
            threads: Some(3),
            loops: Some(5),
            ..request()
        };
        let c = three.config().unwrap();
        assert_eq!(c.threads, vec![Some(0), Some(1), Some(0)]);
        assert_eq!(c.stop, Stop::Loops(5));
    }

    #[test]
    fn values_out_of_range_are_refused_naming_the_flag() {
        let m = refusal(Request {
            threads: Some(0),
            ..request()
        });
        assert!(m.starts_with("-t/--threads 0: give 1 to"), "{m}");
        let m = refusal(Request {
            interval: 0,
            ..request()
        });
        assert_eq!(m, "-i/--interval must be more than zero, e.g. 1ms");
        let m = refusal(Request {
            interval: 5_000,
            ..request()
        });
        assert!(m.contains("pass --force"), "{m}");
        let forced = Request {
            interval: 5_000,
            force: true,
            ..request()
        };
        assert!(forced.config().is_ok());
        let m = refusal(Request {
            loops: Some(0),
            ..request()
        });
        assert_eq!(m, "-l/--loops must be at least 1");
        let m = refusal(Request {
            duration: Some(0),
            ..request()
        });
        assert!(m.starts_with("-D/--duration must be more"), "{m}");
    }

    #[test]
    fn samples_go_to_one_writable_place_per_run() {
        let dir = tempfile::tempdir().unwrap();
        let file = Output::File(dir.path().join("s.csv"));
        assert!(check_samples(&file, 3, false).is_ok());
        let e = check_samples(&Output::Stdout, 2, true).unwrap_err();
        assert!(e.message.contains("with --repeat"), "{}", e.message);
        let e = check_samples(&Output::Stdout, 1, false).unwrap_err();
        assert_eq!(e.message, "--samples -: only one output can go to stdout");
        assert!(check_samples(&Output::Stdout, 1, true).is_ok());
        let missing = Output::File(dir.path().join("no/such/dir/s.csv"));
        let e = check_samples(&missing, 1, true).unwrap_err();
        assert!(e.message.starts_with("--samples: "), "{}", e.message);
    }

    #[test]
    fn a_spin_margin_belongs_to_hybrid_mode_and_fits_the_interval() {
        let m = refusal(Request {
            spin_margin: Some(MarginPolicy::Fixed(10_000)),
            ..request()
        });
        assert!(m.contains("only to --mode hybrid"), "{m}");
        let m = refusal(Request {
            mode: Mode::Hybrid,
            spin_margin: Some(MarginPolicy::Fixed(1_000_000)),
            ..request()
        });
        assert!(m.contains("must be shorter than the interval"), "{m}");
        let ok = Request {
            mode: Mode::Hybrid,
            spin_margin: Some(MarginPolicy::Fixed(50_000)),
            ..request()
        };
        assert_eq!(ok.config().unwrap().margin, MarginPolicy::Fixed(50_000));
    }
}
