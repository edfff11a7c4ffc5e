//! `punctual bench <ctxsw|trap|memcpy|dispatch|gaps|alarm>`: micro-measurements. The measurements
//! and their rendering are in `punctual_bench::measure` and `punctual_bench::report`, the checks of
//! what is asked in `punctual_bench::request`; this module reads the flags.

use crate::args::{duration, run_duration, wait_duration, OutputArgs, RtArgs};
use clap::{Args, Subcommand};
use punctual_bench::dispatch::DispatchConfig;
use punctual_bench::gaps::GapsConfig;
use punctual_bench::measure::{Bench, Micro};
use punctual_bench::memcpy::MemcpyConfig;
use punctual_bench::request::{alarm_priority, AlarmRequest};
use punctual_bench::{ctxsw, dispatch, memcpy, trap};
use punctual_latency::alarms::{AlarmWorkload, Mechanism};
use punctual_load::LoadSpec;
use punctual_result::Failure;
use punctual_rt::Policy;
use punctual_session::{drive, Env, Exit};

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
    #[arg(long, value_name = "SPEC", value_parser = LoadSpec::parse_flag)]
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
    #[arg(short = 'p', long, value_name = "N", value_parser = punctual_rt::sched::parse_priority)]
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
    #[arg(short = 'p', long, value_name = "N", value_parser = punctual_rt::sched::parse_priority)]
    pub priority: Option<u32>,
    #[command(flatten)]
    pub common: Common,
}

pub fn run(a: BenchArgs, env: &Env) -> anyhow::Result<Exit> {
    match a.which {
        BenchCmd::Ctxsw(a) => {
            a.rt.validate()?;
            let cfg = ctxsw::CtxswConfig::new(a.channel, a.rt.one_cpu()?, a.duration);
            go(cfg, &a.rt, &a.common, env)
        }
        BenchCmd::Trap(a) => {
            a.rt.validate()?;
            let cfg = trap::TrapConfig {
                cpu: Some(a.rt.one_cpu()?),
                ..trap::TrapConfig::new(a.duration)
            };
            go(cfg, &a.rt, &a.common, env)
        }
        BenchCmd::Memcpy(a) => {
            a.rt.validate()?;
            let (cpu, sizes) = (a.rt.one_cpu()?, a.sizes.as_deref());
            let cfg = MemcpyConfig::request(sizes, a.method.clone(), a.duration, cpu, a.rt.sched());
            go(cfg.map_err(Failure::from)?, &a.rt, &a.common, env)
        }
        BenchCmd::Dispatch(a) => {
            a.rt.validate()?;
            let (waiter, sched) = (a.rt.one_cpu()?, a.rt.sched());
            let cfg = DispatchConfig::request(
                a.event,
                a.interval,
                a.duration,
                a.raiser_cpu,
                waiter,
                sched,
            );
            go(cfg.map_err(Failure::from)?, &a.rt, &a.common, env)
        }
        BenchCmd::Gaps(a) => {
            let rt = RtArgs::of(a.policy, a.priority, a.affinity.clone());
            rt.validate()?;
            let cpus = rt.cpus().map_err(Failure::usage)?;
            let cfg = GapsConfig::request(cpus, a.duration, a.threshold, rt.sched());
            go(cfg.map_err(Failure::from)?, &rt, &a.common, env)
        }
        BenchCmd::Alarm(a) => {
            let priority = a.priority.unwrap_or(alarm_priority(a.policy));
            let rt = RtArgs::of(a.policy, Some(priority), a.affinity.map(|c| c.to_string()));
            rt.validate()?;
            let load = a.common.load.clone().unwrap_or_default();
            let request = AlarmRequest {
                workload: a.workload,
                mechanism: a.mechanism,
                alarms: a.alarms,
                min_delay: a.min_delay,
                max_delay: a.max_delay,
                rr_timeslice: a.rr_timeslice,
                cpu: a.affinity,
                policy: a.policy,
                priority,
            };
            let mut m = request.bench(rt.want(), load).map_err(Failure::from)?;
            let outputs = a.common.out.outputs()?;
            Ok(drive(&mut m, &outputs, env)?)
        }
    }
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
