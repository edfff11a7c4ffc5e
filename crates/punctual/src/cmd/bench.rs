//! `punctual bench <ctxsw|trap|memcpy|dispatch|gaps|alarm>`: micro-measurements. The measurements
//! and their rendering are in `punctual_bench::measure` and `punctual_bench::report`; this module
//! checks the flags.

use crate::args::{
    duration, load_spec, run_duration, wait_duration, DmaLatency, OutputArgs, RtArgs,
};
use clap::{Args, Subcommand};
use punctual_bench::measure::{AlarmBench, Bench, Micro};
use punctual_bench::{ctxsw, dispatch, gaps, memcpy, trap};
use punctual_latency::alarms::{AlarmConfig, AlarmWorkload, Mechanism};
use punctual_load::LoadSpec;
use punctual_result::Failure;
use punctual_rt::Policy;
use punctual_session::{drive, Env, Exit};
use punctual_time::format_ns;

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub which: BenchCmd,
}

#[derive(Subcommand, Debug)]
pub enum BenchCmd {
    /// Context switch: two processes on one CPU hand a byte back and forth (pipe or futex).
    Ctxsw(CtxswArgs),
    /// System-call trap: getpid through the raw system call.
    Trap(TrapArgs),
    /// Copy bandwidth at sizes inside L1, L2, L3 and memory.
    Memcpy(MemcpyArgs),
    /// Process dispatch latency: an event raised on one CPU to the first instruction of the process
    /// woken on another (eventfd, pipe or signal).
    Dispatch(DispatchArgs),
    /// Timeline gaps: a tight loop per CPU, every interruption above a threshold, attributed to
    /// interrupt sources; the timer tick's cost.
    Gaps(GapsArgs),
    /// Etsion's alarm workloads: processes that set alarms and compute (blk, pctK, cont, cpu).
    Alarm(AlarmArgs),
}

/// Flags every bench takes.
#[derive(Args, Debug, Clone)]
pub struct Common {
    /// Background load while measuring: KIND[:N][@CPUS],... (cpu, sort, io, find, build, hackbench, mem).
    #[arg(long, value_name = "SPEC", value_parser = load_spec)]
    pub load: Option<LoadSpec>,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Args, Debug)]
pub struct CtxswArgs {
    /// How the two processes hand over: pipe or futex.
    #[arg(long, default_value = "pipe")]
    pub channel: ctxsw::Channel,
    /// How long to measure.
    #[arg(short = 'D', long, default_value = "5s", allow_hyphen_values = true, value_parser = run_duration, value_name = "DURATION")]
    pub duration: u64,
    #[command(flatten)]
    pub rt: RtArgs,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Args, Debug)]
pub struct TrapArgs {
    #[arg(short = 'D', long, default_value = "2s", allow_hyphen_values = true, value_parser = run_duration, value_name = "DURATION")]
    pub duration: u64,
    #[command(flatten)]
    pub rt: RtArgs,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Args, Debug)]
pub struct MemcpyArgs {
    /// Sizes to copy (default: inside L1, L2, L3 and memory), e.g. 16KiB,1MiB,256MiB.
    #[arg(long, value_name = "SIZES", value_delimiter = ',', value_parser = memcpy::parse_bytes)]
    pub sizes: Option<Vec<usize>>,
    /// How to copy: memcpy (the C library's, as the paper), loop (16-byte vector loads and stores),
    /// or both.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "memcpy,loop",
        value_name = "METHODS"
    )]
    pub method: Vec<memcpy::Method>,
    /// Time spent copying at each size.
    #[arg(short = 'D', long, default_value = "1s", allow_hyphen_values = true, value_parser = run_duration, value_name = "DURATION")]
    pub duration: u64,
    #[command(flatten)]
    pub rt: RtArgs,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Args, Debug)]
pub struct DispatchArgs {
    /// How the event reaches the waiting process: eventfd, pipe or signal.
    #[arg(long, default_value = "eventfd")]
    pub event: dispatch::Event,
    /// Time between events.
    #[arg(short = 'i', long, default_value = "10ms", allow_hyphen_values = true, value_parser = duration, value_name = "DURATION")]
    pub interval: u64,
    #[arg(short = 'D', long, default_value = "10s", allow_hyphen_values = true, value_parser = run_duration, value_name = "DURATION")]
    pub duration: u64,
    /// CPU that raises the events (default: the first online CPU). The waiter runs on -a (default:
    /// the last online CPU) in the class of --policy/-p.
    #[arg(long, value_name = "CPU")]
    pub raiser_cpu: Option<usize>,
    #[command(flatten)]
    pub rt: RtArgs,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Args, Debug)]
pub struct GapsArgs {
    #[arg(short = 'D', long, default_value = "10s", allow_hyphen_values = true, value_parser = run_duration, value_name = "DURATION")]
    pub duration: u64,
    /// Steps between two clock reads longer than this are gaps.
    #[arg(long, default_value = "1us", allow_hyphen_values = true, value_parser = duration, value_name = "DURATION")]
    pub threshold: u64,
    /// CPUs to loop on (default: the last online CPU).
    #[arg(short = 'a', long, value_name = "CPUS")]
    pub affinity: Option<String>,
    /// Class of the loops: other (default, like oslat), fifo or rr. A real-time busy loop starves
    /// the CPU's kernel threads except for the real-time throttling window.
    #[arg(long, default_value = "other", value_name = "POLICY")]
    pub policy: Policy,
    /// Priority of the loops under fifo/rr (default 99).
    #[arg(short = 'p', long, value_name = "N", value_parser = crate::args::priority)]
    pub priority: Option<u32>,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Args, Debug)]
pub struct AlarmArgs {
    /// The processes: TYPE[:N],... with types blk, pctK (K = 1-99), cont, cpu; e.g. cont:8 or pct4:1,cpu:2.
    #[arg(long, value_name = "SPEC")]
    pub workload: AlarmWorkload,
    /// How alarms arrive: signal (a POSIX timer, as the paper) or nanosleep.
    #[arg(long, default_value = "signal")]
    pub mechanism: Mechanism,
    /// Alarms per alarm-setting process.
    #[arg(long, default_value_t = 500, value_name = "N")]
    pub alarms: u64,
    /// Shortest delay to an alarm.
    #[arg(long, default_value = "1ms", allow_hyphen_values = true, value_parser = wait_duration, value_name = "DURATION")]
    pub min_delay: u64,
    /// Longest delay to an alarm.
    #[arg(long, default_value = "1000ms", allow_hyphen_values = true, value_parser = wait_duration, value_name = "DURATION")]
    pub max_delay: u64,
    /// Set the SCHED_RR timeslice for the run (whole milliseconds; restored afterwards).
    #[arg(long, allow_hyphen_values = true, value_parser = duration, value_name = "DURATION")]
    pub rr_timeslice: Option<u64>,
    /// The one CPU every process shares (default: the last online CPU).
    #[arg(short = 'a', long, value_name = "CPU")]
    pub affinity: Option<usize>,
    /// Class of the processes: rr (default, as the paper), fifo or other.
    #[arg(long, default_value = "rr", value_name = "POLICY")]
    pub policy: Policy,
    /// Priority of every process (default 10 for rr/fifo).
    #[arg(short = 'p', long, value_name = "N", value_parser = crate::args::priority)]
    pub priority: Option<u32>,
    #[command(flatten)]
    pub common: Common,
}

/// The most alarms per process a run may ask for (a typo should not mean a week of waiting).
const MAX_ALARMS: u64 = 1_000_000;

pub fn run(a: BenchArgs, env: &Env) -> anyhow::Result<Exit> {
    match a.which {
        BenchCmd::Ctxsw(a) => {
            a.rt.validate()?;
            nonzero("-D/--duration", a.duration)?;
            let cfg = ctxsw::CtxswConfig::new(a.channel, a.rt.one_cpu()?, a.duration);
            go(cfg, &a.rt, &a.common, env)
        }
        BenchCmd::Trap(a) => {
            a.rt.validate()?;
            nonzero("-D/--duration", a.duration)?;
            let cfg = trap::TrapConfig {
                cpu: Some(a.rt.one_cpu()?),
                ..trap::TrapConfig::new(a.duration)
            };
            go(cfg, &a.rt, &a.common, env)
        }
        BenchCmd::Memcpy(a) => {
            a.rt.validate()?;
            nonzero("-D/--duration", a.duration)?;
            let cpu = a.rt.one_cpu()?;
            let sizes = match &a.sizes {
                Some(v) => v
                    .iter()
                    .map(|&b| memcpy::CopySize {
                        label: memcpy::level_of(b, cpu),
                        bytes: b,
                    })
                    .collect(),
                None => memcpy::default_sizes(cpu),
            };
            memcpy::check_sizes(&sizes).map_err(|e| Failure::usage(format!("--sizes: {e}")))?;
            let cfg = memcpy::MemcpyConfig {
                sizes,
                methods: a.method.clone(),
                per_size_ns: a.duration,
                cpu: Some(cpu),
                sched: a.rt.sched(),
            };
            go(cfg, &a.rt, &a.common, env)
        }
        BenchCmd::Dispatch(a) => {
            a.rt.validate()?;
            nonzero("-i/--interval", a.interval)?;
            if a.duration < a.interval {
                return Err(
                    Failure::usage("-D/--duration must be at least one -i/--interval").into(),
                );
            }
            let waiter_cpu = a.rt.one_cpu()?;
            let raiser_cpu = a.raiser_cpu.unwrap_or(punctual_rt::online_cpus()[0]);
            punctual_rt::affinity::check_online(&[raiser_cpu])
                .map_err(|e| Failure::usage(format!("--raiser-cpu: {e}")))?;
            let cfg = dispatch::DispatchConfig {
                event: a.event,
                raiser_cpu,
                waiter_cpu,
                waiter: a.rt.sched(),
                raiser: a.rt.sched(),
                interval_ns: a.interval,
                duration_ns: a.duration,
            };
            go(cfg, &a.rt, &a.common, env)
        }
        BenchCmd::Gaps(a) => {
            let rt = RtArgs {
                policy: a.policy,
                priority: a.priority,
                affinity: a.affinity.clone(),
                dma_latency: DmaLatency::Us(0),
                no_mlock: false,
            };
            rt.validate()?;
            nonzero("-D/--duration", a.duration)?;
            nonzero("--threshold", a.threshold)?;
            let cpus = rt
                .cpus()
                .map_err(Failure::usage)?
                .unwrap_or_else(|| vec![punctual_rt::affinity::last_online_cpu()]);
            let cfg = gaps::GapsConfig {
                cpus,
                duration_ns: a.duration,
                threshold_ns: a.threshold,
                sched: rt.sched(),
                hz: None,
            };
            go(cfg, &rt, &a.common, env)
        }
        BenchCmd::Alarm(a) => alarm(a, env),
    }
}

fn nonzero(flag: &str, v: u64) -> Result<(), Failure> {
    if v == 0 {
        return Err(Failure::usage(format!("{flag} must be more than zero")));
    }
    Ok(())
}

/// Drive one micro-measurement with the session `rt` asks for.
fn go<C: Micro>(cfg: C, rt: &RtArgs, c: &Common, env: &Env) -> anyhow::Result<Exit> {
    let outputs = c.out.outputs()?;
    let mut m = Bench {
        cfg,
        want: rt.want(),
        load: c.load.clone().unwrap_or_default(),
    };
    Ok(drive(&mut m, &outputs, env)?)
}

fn alarm(a: AlarmArgs, env: &Env) -> anyhow::Result<Exit> {
    let priority = a.priority.unwrap_or(if a.policy.is_realtime() {
        punctual_latency::alarms::DEFAULT_PRIORITY
    } else {
        0
    });
    let rt = RtArgs {
        policy: a.policy,
        priority: Some(priority),
        affinity: a.affinity.map(|c| c.to_string()),
        dma_latency: DmaLatency::Us(0),
        no_mlock: false,
    };
    rt.validate()?;
    if a.alarms == 0 || a.alarms > MAX_ALARMS {
        return Err(
            Failure::usage(format!("--alarms {}: give 1 to {MAX_ALARMS}", a.alarms)).into(),
        );
    }
    nonzero("--min-delay", a.min_delay)?;
    if a.min_delay > a.max_delay {
        return Err(Failure::usage("--min-delay must not be longer than --max-delay").into());
    }
    let timeslice_ms = match a.rr_timeslice {
        // The sysctl takes 1 to i32::MAX ms; above that the kernel's refusal came after the
        // measurement had started, as exit 3.
        Some(ns) if ns == 0 || ns % 1_000_000 != 0 || ns / 1_000_000 > i32::MAX as u64 => {
            return Err(Failure::usage(format!(
                "--rr-timeslice {}: the kernel takes whole milliseconds, 1ms to 2147483647ms (it then rounds up to whole ticks)",
                format_ns(ns)
            ))
            .into())
        }
        Some(ns) => Some(ns / 1_000_000),
        None => None,
    };
    let cfg = AlarmConfig {
        cpu: Some(
            a.affinity
                .unwrap_or_else(punctual_rt::affinity::last_online_cpu),
        ),
        policy: rt.policy,
        priority,
        alarms: a.alarms,
        delay_min: a.min_delay,
        delay_max: a.max_delay,
        ..AlarmConfig::paper(a.workload.clone(), a.mechanism)
    };
    let outputs = a.common.out.outputs()?;
    let load = a.common.load.clone().unwrap_or_default();
    let mut m = AlarmBench::new(cfg, rt.want(), load, timeslice_ms);
    Ok(drive(&mut m, &outputs, env)?)
}
