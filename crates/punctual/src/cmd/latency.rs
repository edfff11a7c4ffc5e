//! `punctual latency`: cyclictest-class timer wake-up latency. The measurement is
//! `punctual_latency::measure::Latency`, its checks `punctual_latency::request`; this file reads
//! the flags.

use crate::args::{duration, run_duration, ExplainArgs, OutputArgs, RtArgs};
use clap::Args;
use punctual_latency::measure::Latency;
use punctual_latency::request::{check_samples, Request};
use punctual_latency::Config;
use punctual_result::{Failure, Output};
use punctual_session::{drive_repeated, Env, Exit, Outputs};

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
    #[arg(long, value_name = "SPEC", value_parser = punctual_load::LoadSpec::parse_flag)]
    pub load: Option<punctual_load::LoadSpec>,
    /// Also write cyclictest's -h histogram (1 us buckets) to FILE.
    #[arg(long, value_name = "FILE")]
    pub hist: Option<Output>,
    /// Number of 1 us buckets in --hist (cyclictest's -h N).
    #[arg(long, default_value_t = 1000, value_name = "N", value_parser = punctual_time::parse_count::<1, 1_000_000>)]
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

/// Everything checked before the system is touched.
fn validate(a: &LatencyArgs) -> Result<(Config, Outputs), Failure> {
    a.rt.validate()?;
    let cfg = Request {
        cpus: a
            .rt
            .cpus()
            .map_err(Failure::usage)?
            .unwrap_or_else(punctual_rt::online_cpus),
        threads: a.threads,
        interval: a.interval,
        duration: a.duration,
        loops: a.loops,
        clock: a.clock,
        mode: a.mode,
        spin_margin: a.spin_margin,
        force: a.force,
        policy: a.rt.policy,
        priority: a.rt.priority(),
    }
    .config()?;
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
        check_samples(s, a.repeat, outputs.stdout_free())?;
    }
    Ok((cfg, outputs))
}

pub fn run(a: LatencyArgs, env: &Env) -> anyhow::Result<Exit> {
    let (cfg, outputs) = validate(&a)?;
    let load = a.load.clone().unwrap_or_default();
    let explain = a.explain.config(punctual_explain::DEFAULT_BOUND_NS)?;
    Ok(drive_repeated(a.repeat, &outputs, env, |k| {
        let samples = a.samples.as_ref().map(|s| s.of_run(k, a.repeat));
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
