//! `punctual cyclictest`: rt-tests' cyclictest (2.4) on punctual's latency engine, for the scripts,
//! plots and CI jobs that already parse cyclictest's output.
//!
//! - [`args`] reads cyclictest's command line with cyclictest's rules (defaults, `-p` implying
//!   FIFO, `-h` zeroing the distance) and refuses, by name and with what to use instead, the flags
//!   punctual does not honour.
//! - [`measure`] runs punctual's engine (`punctual_latency::run_with`) with cyclictest's thread
//!   layout, printing its status lines while it runs, and keeps cyclictest's exact figures in the
//!   result document (`extra.cyclictest`).
//! - [`format`](mod@format) writes cyclictest's formats from those figures: status lines and the `-q` summary,
//!   the `-h`/`-H` histogram with its trailer, `--spike` lines, rt-tests' JSON; [`export`] puts the
//!   file formats behind the result crate's `Exporter`.
//!
//! Nothing here prints: status lines go to the writer the binary hands in, the rest to the lifecycle.

pub mod args;
pub mod export;
pub mod format;
pub mod measure;
mod verbose;

pub use args::{parse, Parsed, Settings};

/// Why a command line was refused (exit 2, nothing run).
#[derive(Debug, thiserror::Error)]
pub enum DropinError {
    /// A flag or value cyclictest would also refuse, or one that makes no sense.
    #[error("{flag}: {why}")]
    Usage { flag: String, why: String },
    /// A cyclictest flag punctual does not honour.
    #[error("{flag} is not supported by punctual cyclictest: {instead}")]
    Unsupported { flag: String, instead: String },
}

impl From<DropinError> for punctual_result::Failure {
    fn from(e: DropinError) -> Self {
        punctual_result::Failure::usage(e.to_string())
    }
}

/// [`HELP`] as the OPTIONS section of a man page: laid out as written (roff would fill the columns
/// into a paragraph), with what roff would read escaped (backslashes, a dot or quote opening a
/// line).
pub fn help_roff() -> String {
    let mut out = String::from(".SH OPTIONS\n.nf\n");
    for line in HELP.lines() {
        let line = line.replace('\\', "\\e");
        if line.starts_with(['.', '\'']) {
            out.push_str("\\&");
        }
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str(".fi\n");
    out
}

/// `punctual cyclictest --help`.
pub const HELP: &str = "\
punctual cyclictest: rt-tests' cyclictest (2.4) on punctual's latency engine.
Same flags, same meaning, same output formats; values in microseconds as in
cyclictest (nanoseconds with -N).

Usage: punctual cyclictest [cyclictest's options]

-a [CPUSET] --affinity     pin thread N to the Nth CPU of CPUSET (round robin);
                           without CPUSET, or without -a: every online CPU
-A [USEC]  --aligned=USEC  thread N's first release N*USEC after thread 0's
-c CLOCK   --clock=CLOCK   0 = CLOCK_MONOTONIC (default), 1 = CLOCK_REALTIME
-d DIST    --distance=DIST add DIST us to each next thread's interval (500)
-D TIME    --duration=TIME run for TIME seconds (or with m, h, d: 5m, 2h)
           --default-system, --laptop
                           leave /dev/cpu_dma_latency alone
-h US      --histogram=US  histogram of US buckets of 1 us after the run
-H US      --histofall=US  the same, with a column over all threads
           --histfile=PATH the histogram to PATH instead of standard output
-i INTV    --interval=INTV interval of thread 0 in us (1000)
           --json=FILE     rt-tests' JSON summary to FILE (- for stdout)
           --latency=PM_QOS  hold /dev/cpu_dma_latency at PM_QOS us (0)
-l LOOPS   --loops=LOOPS   samples per thread (0: until interrupted)
           --mainaffinity=CPUSET  run the main thread on CPUSET
-m         --mlockall      lock memory
-M         --refresh_on_max  redraw the status lines on a new maximum only
-n         --nanosleep     clock_nanosleep (the default; gone from cyclictest
                           2.4, accepted for old scripts)
-N         --nsecs         values in nanoseconds
-o RED     --oscope=RED    with -v: the largest of every RED samples
-p PRIO    --priority=PRIO SCHED_FIFO priority of the threads
           --policy=NAME   other, normal, fifo or rr
-q         --quiet         print a summary only on exit
-r         --relative      relative sleeps instead of absolute
-s         --system        nanosleep(2): relative sleeps, as -r
           --secaligned [USEC]  first release on the next full second + USEC
-S         --smp           one thread per CPU, each pinned (-a -t)
           --spike=TRIGGER record samples above TRIGGER
           --spike-nodes=N keep the first N of them (1024)
-t [NUM]   --threads=NUM   NUM threads (without NUM: one per CPU; default 1)
-u         --unbuffered    (standard output is flushed anyway)
-v         --verbose       every sample: thread:cycle:value
-x         --posix_timers  POSIX timers and a signal instead of clock_nanosleep

punctual's own:
           --punctual-json FILE  punctual's result document: exact percentiles,
                           missed periods, steal time (import it into the
                           results store with `punctual results import`)

Refused, with the equivalent named: -b/--breaktrace, --tracemark, -F/--fifo,
-R/--resolution, --smi, --priospread, --dbg_cyclictest, --policy batch|idle.

Differences from cyclictest: -l runs LOOPS samples in every thread (cyclictest
stops all threads when the first has); status lines are redrawn 4 times a
second (cyclictest: 100); an interrupted run exits 130 after writing its
output. See docs/dropin.md.
";

#[cfg(test)]
mod roff_tests {
    #[test]
    fn the_help_as_roff_is_one_unfilled_block_with_nothing_roff_would_read() {
        let roff = super::help_roff();
        let body = roff
            .strip_prefix(".SH OPTIONS\n.nf\n")
            .and_then(|b| b.strip_suffix(".fi\n"))
            .expect("one .nf/.fi block");
        assert_eq!(body.lines().count(), super::HELP.lines().count());
        for line in body.lines() {
            assert!(!line.starts_with(['.', '\'']), "{line}");
            assert!(
                !line.replace("\\e", "").replace("\\&", "").contains('\\'),
                "{line}"
            );
        }
    }
}
