//! `punctual latency`: cyclictest-class timer wake-up latency. The measurement is
//! `punctual_latency::measure::Latency`; this file checks the flags.

use crate::args::{duration, load_spec, run_duration, ExplainArgs, OutputArgs, RtArgs};
use clap::Args;
use punctual_latency::measure::Latency;
use punctual_latency::{Config, Mode, Stop, MAX_THREADS};
use punctual_result::Failure;
use punctual_result::Output;
use punctual_session::{drive_repeated, Env, Exit, Outputs};
use punctual_time::{format_ns, MarginPolicy};

#[derive(Args, Debug)]
pub struct LatencyArgs {
    /// Measuring threads (default: one per CPU in --affinity, or per online CPU), each pinned.
    #[arg(short = 't', long, value_name = "N")]
    pub threads: Option<usize>,
    /// Period between releases.
    #[arg(short = 'i', long, default_value = "1ms", allow_hyphen_values = true, value_parser = duration, value_name = "DURATION")]
    pub interval: u64,
    /// How long to measure (default 10s).
    #[arg(short = 'D', long, allow_hyphen_values = true, value_parser = run_duration, value_name = "DURATION", conflicts_with = "loops")]
    pub duration: Option<u64>,
    /// Stop after N samples per thread instead of after a duration.
    #[arg(short = 'l', long, value_name = "N")]
    pub loops: Option<u64>,
    /// Clock the releases are on: monotonic or realtime.
    #[arg(long, default_value = "monotonic")]
    pub clock: punctual_time::ClockId,
    /// How to wait: abs (clock_nanosleep TIMER_ABSTIME), rel (relative sleep: shows drift), timerfd,
    /// signal (POSIX timer and signal), hybrid (sleep to a margin before, then spin).
    #[arg(long, default_value = "abs")]
    pub mode: punctual_latency::Mode,
    /// Hybrid mode: how early to stop sleeping and start spinning (a duration, or auto).
    #[arg(long, value_name = "DURATION|auto")]
    pub spin_margin: Option<punctual_time::MarginPolicy>,
    /// Background load while measuring: KIND[:N][@CPUS],... (kinds: cpu, sort, io, find, build, hackbench, mem).
    #[arg(long, value_name = "SPEC", value_parser = load_spec)]
    pub load: Option<punctual_load::LoadSpec>,
    /// Also write cyclictest's -h histogram (1 us buckets) to FILE.
    #[arg(long, value_name = "FILE")]
    pub hist: Option<Output>,
    /// Number of 1 us buckets in --hist (cyclictest's -h N).
    #[arg(long, default_value_t = 1000, value_name = "N", value_parser = crate::args::count::<1, 1_000_000>)]
    pub hist_buckets: u64,
    /// Write every sample (thread, release time, latency; ns) as CSV to FILE.
    #[arg(long, value_name = "FILE")]
    pub samples: Option<Output>,
    /// Allow intervals under 10 us (they mostly measure the measuring).
    #[arg(long)]
    pub force: bool,
    /// Make N runs one after the other, each a result of its own (files get -1, -2 ...), for
    /// `compare A1 A2 A3 -- B1 B2 B3`.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,
    #[command(flatten)]
    pub rt: RtArgs,
    #[command(flatten)]
    pub out: OutputArgs,
    #[command(flatten)]
    pub explain: ExplainArgs,
}

const DEFAULT_DURATION: u64 = 10_000_000_000;
const MIN_INTERVAL: u64 = 10_000;

/// Everything checked before the system is touched.
fn validate(a: &LatencyArgs) -> Result<(Config, Outputs), Failure> {
    a.rt.validate()?;
    let cpus =
        a.rt.cpus()
            .map_err(Failure::usage)?
            .unwrap_or_else(punctual_rt::online_cpus);
    let threads = a.threads.unwrap_or(cpus.len());
    if threads == 0 || threads > MAX_THREADS {
        return Err(Failure::usage(format!(
            "-t/--threads {threads}: give 1 to {MAX_THREADS} threads"
        )));
    }
    if a.interval == 0 {
        return Err(Failure::usage(
            "-i/--interval must be more than zero, e.g. 1ms",
        ));
    }
    if a.interval < MIN_INTERVAL && !a.force {
        return Err(Failure::usage(format!(
            "-i/--interval {} is under 10us, where the wake-up itself takes most of the period; \
             use 10us or more, or pass --force",
            format_ns(a.interval)
        )));
    }
    let stop = match (a.duration, a.loops) {
        (_, Some(0)) => return Err(Failure::usage("-l/--loops must be at least 1")),
        (_, Some(l)) => Stop::Loops(l),
        (Some(0), _) => {
            return Err(Failure::usage(
                "-D/--duration must be more than zero, e.g. 10s",
            ))
        }
        (Some(d), None) => Stop::Duration(d),
        (None, None) => Stop::Duration(DEFAULT_DURATION),
    };
    let margin = match (a.mode, a.spin_margin) {
        (Mode::Hybrid, Some(MarginPolicy::Fixed(m))) if m >= a.interval => {
            return Err(Failure::usage(format!(
                "--spin-margin {} must be shorter than the interval {}",
                format_ns(m),
                format_ns(a.interval)
            )))
        }
        (Mode::Hybrid, m) => m.unwrap_or(MarginPolicy::Auto),
        (_, Some(_)) => {
            return Err(Failure::usage(
                "--spin-margin applies only to --mode hybrid; add --mode hybrid or drop it",
            ))
        }
        (_, None) => MarginPolicy::Auto,
    };
    let outputs = a
        .explain
        .outputs(a.out.outputs()?)?
        .export(
            "--hist",
            a.hist.as_ref(),
            punctual_cyclictest::export::Histogram { all: false },
        )?
        .repeated(a.repeat)?;
    if let Some(s) = &a.samples {
        for k in 0..a.repeat {
            samples_of(s, k, a.repeat)
                .check_writable()
                .map_err(|e| Failure::usage(format!("--samples: {e}")))?;
        }
        if s.is_stdout() && a.repeat > 1 {
            return Err(Failure::usage(
                "--samples -: with --repeat each run writes its own file; give a file name",
            ));
        }
        if s.is_stdout() && !outputs.stdout_free() {
            return Err(Failure::usage(
                "--samples -: only one output can go to stdout",
            ));
        }
    }
    let cfg = Config {
        threads: (0..threads).map(|i| Some(cpus[i % cpus.len()])).collect(),
        interval: a.interval,
        stop,
        clock: a.clock,
        mode: a.mode,
        margin,
        policy: a.rt.policy,
        priority: a.rt.priority(),
        timer_slack_ns: None,
    };
    // The engine's own checks, here, before the lifecycle locks memory and holds cpu_dma_latency
    // (`-i 18446744073709551615ns` was refused only after both; issue 32).
    cfg.validate().map_err(Failure::from)?;
    Ok((cfg, outputs))
}

/// The samples file of run `k` (0-based) of `n`.
fn samples_of(out: &Output, k: u32, n: u32) -> Output {
    match out {
        Output::File(p) if n > 1 => Output::File(punctual_session::numbered(p, k + 1)),
        o => o.clone(),
    }
}

pub fn run(a: LatencyArgs, env: &Env) -> anyhow::Result<Exit> {
    let (cfg, outputs) = validate(&a)?;
    let load = a.load.clone().unwrap_or_default();
    let explain = a.explain.config(punctual_explain::DEFAULT_BOUND_NS)?;
    Ok(drive_repeated(a.repeat, &outputs, env, |k| {
        let samples = a.samples.as_ref().map(|s| samples_of(s, k, a.repeat));
        let m =
            Latency::new(cfg.clone(), a.rt.want(), load.clone(), samples).explain(explain.clone());
        match &a.hist {
            Some(_) => m.with_cyclic(punctual_latency::cyclic::CyclicConfig {
                buckets: a.hist_buckets as usize,
                ..Default::default()
            }),
            None => m,
        }
    })?)
}
