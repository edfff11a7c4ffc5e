//! `punctual bench <ctxsw|trap|memcpy|dispatch|gaps|alarm>`: micro-measurements. The work is in
//! `punctual-bench` (and the alarm workloads in `punctual-latency`); this module parses, wires the
//! session and the loads, and renders.

use crate::cli::{duration, DmaLatency, OutputArgs, RtArgs};
use crate::session::{show, validate_rt, Exports, Live, Session};
use clap::{Args, Subcommand};
use punctual_bench::{ctxsw, dispatch, gaps, kind, memcpy, trap, tsc};
use punctual_latency::alarms::{run_alarms_counted, AlarmConfig, AlarmWorkload, Mechanism};
use punctual_load::{LoadSpec, Loads};
use punctual_result::export::{Csv, Json};
use punctual_result::{Failure, ResultDoc, Series, Table};
use punctual_rt::{Policy, SchedParams};
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
    #[arg(long, value_name = "SPEC")]
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
    #[arg(short = 'D', long, default_value = "5s", value_parser = duration, value_name = "DURATION")]
    pub duration: u64,
    #[command(flatten)]
    pub rt: RtArgs,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Args, Debug)]
pub struct TrapArgs {
    #[arg(short = 'D', long, default_value = "2s", value_parser = duration, value_name = "DURATION")]
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
    #[arg(short = 'D', long, default_value = "1s", value_parser = duration, value_name = "DURATION")]
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
    #[arg(short = 'i', long, default_value = "10ms", value_parser = duration, value_name = "DURATION")]
    pub interval: u64,
    #[arg(short = 'D', long, default_value = "10s", value_parser = duration, value_name = "DURATION")]
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
    #[arg(short = 'D', long, default_value = "10s", value_parser = duration, value_name = "DURATION")]
    pub duration: u64,
    /// Steps between two clock reads longer than this are gaps.
    #[arg(long, default_value = "1us", value_parser = duration, value_name = "DURATION")]
    pub threshold: u64,
    /// CPUs to loop on (default: the last online CPU).
    #[arg(short = 'a', long, value_name = "CPUS")]
    pub affinity: Option<String>,
    /// Class of the loops: other (default, like oslat), fifo or rr. A real-time busy loop starves
    /// the CPU's kernel threads except for the real-time throttling window.
    #[arg(long, default_value = "other", value_name = "POLICY")]
    pub policy: Policy,
    #[arg(short = 'p', long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=99))]
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
    #[arg(long, default_value = "1ms", value_parser = duration, value_name = "DURATION")]
    pub min_delay: u64,
    /// Longest delay to an alarm.
    #[arg(long, default_value = "1000ms", value_parser = duration, value_name = "DURATION")]
    pub max_delay: u64,
    /// Set the SCHED_RR timeslice for the run (whole milliseconds; restored afterwards).
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub rr_timeslice: Option<u64>,
    /// The one CPU every process shares (default: the last online CPU).
    #[arg(short = 'a', long, value_name = "CPU")]
    pub affinity: Option<usize>,
    /// Class of the processes: rr (default, as the paper), fifo or other.
    #[arg(long, default_value = "rr", value_name = "POLICY")]
    pub policy: Policy,
    /// Priority of every process (default 10 for rr/fifo).
    #[arg(short = 'p', long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=99))]
    pub priority: Option<u32>,
    #[command(flatten)]
    pub common: Common,
}

/// The most alarms per process a run may ask for (a typo should not mean a week of waiting).
const MAX_ALARMS: u64 = 1_000_000;

pub fn run(a: BenchArgs) -> anyhow::Result<i32> {
    match a.which {
        BenchCmd::Ctxsw(a) => run_ctxsw(a),
        BenchCmd::Trap(a) => run_trap(a),
        BenchCmd::Memcpy(a) => run_memcpy(a),
        BenchCmd::Dispatch(a) => run_dispatch(a),
        BenchCmd::Gaps(a) => run_gaps(a),
        BenchCmd::Alarm(a) => run_alarm(a),
    }
}

fn exports(c: &Common) -> Result<Exports, Failure> {
    let mut e = Exports::default();
    e.add("json", c.out.json.as_ref(), Json)?;
    e.add("csv", c.out.csv.as_ref(), Csv)?;
    Ok(e)
}

fn nonzero(flag: &str, v: u64) -> Result<(), Failure> {
    if v == 0 {
        return Err(Failure::usage(format!("{flag} must be more than zero")));
    }
    Ok(())
}

/// One CPU from -a (default: the last online CPU).
fn one_cpu(rt: &RtArgs) -> Result<usize, Failure> {
    match rt.cpus().map_err(Failure::usage)? {
        Some(c) if c.len() == 1 => Ok(c[0]),
        Some(c) => Err(Failure::usage(format!(
            "-a/--affinity: this measurement runs on one CPU; give one, not {}",
            punctual_rt::format_cpu_list(&c)
        ))),
        None => Ok(last_cpu()),
    }
}

fn last_cpu() -> usize {
    *punctual_rt::online_cpus().last().expect("a CPU is online")
}

fn sched(session: &Session) -> SchedParams {
    SchedParams {
        policy: session.plan.policy,
        priority: session.plan.priority,
    }
}

/// Loads start on the main thread (the parent-death signal follows the thread that forked).
fn start_loads(c: &Common) -> anyhow::Result<(LoadSpec, Loads)> {
    let spec = c.load.clone().unwrap_or_default();
    let mut loads =
        Loads::start(&spec, &super::own_exe()?).map_err(|e| Failure::system(e.to_string()))?;
    // Measure under the load, not while it is still starting.
    loads.wait_ready(std::time::Duration::from_secs(10));
    Ok((spec, loads))
}

/// Put the loads and their work into the document.
fn record_loads(doc: &mut ResultDoc, spec: &LoadSpec, loads: Loads) -> anyhow::Result<()> {
    crate::session::record_load_reports(doc, spec, &loads.stop())
}

/// Close, export, show. Returns the exit code.
fn finish(
    session: &Session,
    mut doc: ResultDoc,
    exports: &Exports,
    fail_above: Option<u64>,
    tables: &[Table],
) -> anyhow::Result<i32> {
    let code = session.close(&mut doc, fail_above);
    exports.write(&doc)?;
    let text: String = tables.iter().map(|t| format!("{}\n", t.render())).collect();
    show(exports, text.trim_end_matches('\n'));
    show(exports, "\n");
    if session.interrupted() {
        eprintln!("punctual: interrupted; partial results written");
    }
    Ok(code)
}

fn cycles_note(cal: &tsc::Calibration) -> String {
    if tsc::HARDWARE {
        format!(
            "cycles are time-stamp-counter cycles at {:.3} GHz",
            cal.hz() / 1e9
        )
    } else {
        "no cycle counter here: cycles are not shown".into()
    }
}

fn run_ctxsw(a: CtxswArgs) -> anyhow::Result<i32> {
    validate_rt(&a.rt)?;
    nonzero("-D/--duration", a.duration)?;
    let cpu = one_cpu(&a.rt)?;
    let exports = exports(&a.common)?;
    let session = Session::begin(&a.rt)?;
    let (spec, loads) = start_loads(&a.common)?;
    let cal = tsc::Calibration::measure(20_000_000);
    let out = ctxsw::run(
        &ctxsw::CtxswConfig {
            sched: sched(&session),
            ..ctxsw::CtxswConfig::new(a.channel, cpu, a.duration)
        },
        &session.stop,
    );
    let mut doc = session.new_doc();
    record_loads(&mut doc, &spec, loads)?;
    let out = out?;
    session.add_runtime_fallbacks(&mut doc, out.fallback.iter());
    doc.settings
        .extra
        .insert("channel".into(), a.channel.name().into());
    doc.settings.extra.insert("cpu".into(), cpu.into());
    doc.settings
        .extra
        .insert("duration_ns".into(), a.duration.into());
    doc.series.push(
        Series::from_recorder(
            format!("context switch ({})", a.channel.name()),
            kind::CONTEXT_SWITCH,
            Some(cpu),
            &out.per_switch,
        )
        .with("round_trips", out.round_trips)
        .with("mean_ps", (out.mean_switch_ns() * 1000.0).round() as u64),
    );
    let sm = out.per_switch.summary();
    let mut t = Table::new(&["channel", "round trips", "per switch", "p50", "p99", "max", "round trip", "cycles"]).titled(format!(
        "Context switch: two processes on CPU {cpu} ({} {}), time per switch over batches of {} round trips",
        doc.settings.policy.clone().unwrap_or_default(),
        doc.settings.priority.unwrap_or(0),
        ctxsw::CtxswConfig::new(a.channel, cpu, 1).per_batch
    ));
    t.row([
        a.channel.name().to_string(),
        out.round_trips.to_string(),
        format!("{:.0} ns", out.mean_switch_ns()),
        format_ns(sm.percentiles.p50),
        format_ns(sm.percentiles.p99),
        format_ns(sm.max),
        format!("{:.2} us", 2.0 * out.mean_switch_ns() / 1000.0),
        if tsc::HARDWARE {
            format!("{:.0}", out.mean_switch_ns() / cal.ns_per_tick)
        } else {
            "-".into()
        },
    ]);
    t.note(format!(
        "A round trip is two switches (perf bench sched pipe reports it as usecs/op); {}.",
        cycles_note(&cal)
    ));
    finish(&session, doc, &exports, a.common.out.fail_above, &[t])
}

fn run_trap(a: TrapArgs) -> anyhow::Result<i32> {
    validate_rt(&a.rt)?;
    nonzero("-D/--duration", a.duration)?;
    let cpu = one_cpu(&a.rt)?;
    let exports = exports(&a.common)?;
    let session = Session::begin(&a.rt)?;
    let (spec, loads) = start_loads(&a.common)?;
    let cal = tsc::Calibration::measure(20_000_000);
    let out = trap::run(
        &trap::TrapConfig {
            cpu: Some(cpu),
            sched: sched(&session),
            ..trap::TrapConfig::new(a.duration)
        },
        &session.stop,
    );
    let mut doc = session.new_doc();
    record_loads(&mut doc, &spec, loads)?;
    let out = out?;
    session.add_runtime_fallbacks(&mut doc, out.fallback.iter());
    doc.settings.extra.insert("cpu".into(), cpu.into());
    doc.series.push(
        Series::from_recorder("trap (getpid)", kind::TRAP, Some(cpu), &out.per_call)
            .with("calls", out.calls)
            .with("mean_ps", (out.mean_ns() * 1000.0).round() as u64),
    );
    let sm = out.per_call.summary();
    let mut t = Table::new(&["call", "calls", "mean", "p50", "p99", "max", "cycles"]).titled(
        format!("System-call trap on CPU {cpu}: time per call over batches of 1000"),
    );
    t.row([
        "syscall(SYS_getpid)".to_string(),
        out.calls.to_string(),
        format!("{:.1} ns", out.mean_ns()),
        format_ns(sm.percentiles.p50),
        format_ns(sm.percentiles.p99),
        format_ns(sm.max),
        if tsc::HARDWARE {
            format!("{:.0}", out.mean_ns() / cal.ns_per_tick)
        } else {
            "-".into()
        },
    ]);
    t.note(format!("{}.", cycles_note(&cal)));
    finish(&session, doc, &exports, a.common.out.fail_above, &[t])
}

fn run_memcpy(a: MemcpyArgs) -> anyhow::Result<i32> {
    validate_rt(&a.rt)?;
    nonzero("-D/--duration", a.duration)?;
    let cpu = one_cpu(&a.rt)?;
    let sizes = match &a.sizes {
        Some(v) => v
            .iter()
            .map(|&b| memcpy::CopySize {
                label: memcpy::format_bytes(b),
                bytes: b,
            })
            .collect(),
        None => memcpy::default_sizes(cpu),
    };
    memcpy::check_sizes(&sizes).map_err(|e| Failure::usage(format!("--sizes: {e}")))?;
    let exports = exports(&a.common)?;
    let session = Session::begin(&a.rt)?;
    let (spec, loads) = start_loads(&a.common)?;
    let out = memcpy::run(
        &memcpy::MemcpyConfig {
            sizes,
            methods: a.method.clone(),
            per_size_ns: a.duration,
            cpu: Some(cpu),
            sched: sched(&session),
        },
        &session.stop,
    );
    let mut doc = session.new_doc();
    record_loads(&mut doc, &spec, loads)?;
    let out = out?;
    session.add_runtime_fallbacks(&mut doc, out.fallback.iter());
    doc.settings.extra.insert("cpu".into(), cpu.into());
    let mut t = Table::new(&[
        "size",
        "level",
        "method",
        "copies",
        "MB/s",
        "± sd",
        "per copy p50",
        "max",
    ])
    .titled(format!(
        "Copy bandwidth (memcpy) on CPU {cpu}, {} per size",
        format_ns(a.duration)
    ));
    for r in &out.sizes {
        doc.series.push(
            Series::from_recorder(
                format!("{} {}", r.method.name(), memcpy::format_bytes(r.size.bytes)),
                kind::COPY,
                Some(cpu),
                &r.per_copy,
            )
            .with("bytes", r.size.bytes as u64)
            .with("method", r.method.name())
            .with("level", r.size.label.clone())
            .with("mb_per_s", r.mb_per_s().round() as u64)
            .with("mb_per_s_mean", r.mb_per_s_mean.round() as u64)
            .with("mb_per_s_stddev", r.mb_per_s_stddev.round() as u64),
        );
        let sm = r.per_copy.summary();
        t.row([
            memcpy::format_bytes(r.size.bytes),
            r.size.label.clone(),
            r.method.name().to_string(),
            r.copies.to_string(),
            format!("{:.0}", r.mb_per_s()),
            format!("{:.0}", r.mb_per_s_stddev),
            format_ns(sm.percentiles.p50),
            format_ns(sm.max),
        ]);
    }
    t.note("MB/s: bytes copied over time copying (1 MB = 10^6 bytes); ± sd between single copies. Default sizes fill half of each cache with source and destination.");
    t.note("memcpy: the C library's; loop: 16-byte vector loads and stores (what the caches deliver when the library's choice is poor).");
    finish(&session, doc, &exports, a.common.out.fail_above, &[t])
}

fn run_dispatch(a: DispatchArgs) -> anyhow::Result<i32> {
    validate_rt(&a.rt)?;
    nonzero("-i/--interval", a.interval)?;
    if a.duration < a.interval {
        return Err(Failure::usage("-D/--duration must be at least one -i/--interval").into());
    }
    let waiter_cpu = one_cpu(&a.rt)?;
    let raiser_cpu = a.raiser_cpu.unwrap_or(punctual_rt::online_cpus()[0]);
    punctual_rt::affinity::check_online(&[raiser_cpu])
        .map_err(|e| Failure::usage(format!("--raiser-cpu: {e}")))?;
    let exports = exports(&a.common)?;
    let session = Session::begin(&a.rt)?;
    let (spec, loads) = start_loads(&a.common)?;
    let cfg = dispatch::DispatchConfig {
        event: a.event,
        raiser_cpu,
        waiter_cpu,
        waiter: sched(&session),
        raiser: if session.plan.policy.is_realtime() {
            SchedParams {
                policy: Policy::Fifo,
                priority: 98,
            }
        } else {
            sched(&session)
        },
        interval_ns: a.interval,
        duration_ns: a.duration,
    };
    let out = dispatch::run(&cfg, &session.stop);
    let mut doc = session.new_doc();
    record_loads(&mut doc, &spec, loads)?;
    let out = out?;
    session.add_runtime_fallbacks(&mut doc, out.raiser_fallback.iter());
    let s = &mut doc.settings.extra;
    s.insert("event".into(), a.event.name().into());
    s.insert("raiser_cpu".into(), raiser_cpu.into());
    s.insert("waiter_cpu".into(), waiter_cpu.into());
    s.insert("interval_ns".into(), a.interval.into());
    s.insert("duration_ns".into(), a.duration.into());
    doc.series.push(
        Series::from_recorder(
            format!("dispatch ({})", a.event.name()),
            kind::DISPATCH,
            Some(waiter_cpu),
            &out.latency,
        )
        .with("events", out.events),
    );
    let sm = out.latency.summary();
    let mut t = Table::new(&["event", "waiter class", "events", "min", "median", "p99", "max", "mean", "stddev", "missed"]).titled(format!(
        "Process dispatch latency: raised on CPU {raiser_cpu}, waiter on CPU {waiter_cpu}, every {}",
        format_ns(a.interval)
    ));
    t.row([
        a.event.name().to_string(),
        format!("{} {}", cfg.waiter.policy, cfg.waiter.priority),
        out.events.to_string(),
        format_ns(sm.min),
        format_ns(sm.median),
        format_ns(sm.percentiles.p99),
        format_ns(sm.max),
        format_ns(sm.mean),
        format_ns(sm.stddev),
        sm.missed_periods.to_string(),
    ]);
    t.note("From just before the event is raised to the waiting process's first instruction after its wait returns.");
    finish(&session, doc, &exports, a.common.out.fail_above, &[t])
}

fn run_gaps(a: GapsArgs) -> anyhow::Result<i32> {
    let rt = RtArgs {
        policy: a.policy,
        priority: a.priority,
        affinity: a.affinity.clone(),
        dma_latency: DmaLatency::Us(0),
        no_mlock: false,
    };
    validate_rt(&rt)?;
    nonzero("-D/--duration", a.duration)?;
    nonzero("--threshold", a.threshold)?;
    let cpus = rt
        .cpus()
        .map_err(Failure::usage)?
        .unwrap_or_else(|| vec![last_cpu()]);
    let exports = exports(&a.common)?;
    let session = Session::begin(&rt)?;
    let (spec, loads) = start_loads(&a.common)?;
    let cfg = gaps::GapsConfig {
        cpus,
        duration_ns: a.duration,
        threshold_ns: a.threshold,
        sched: sched(&session),
        hz: session.host.hz,
    };
    let out = gaps::run(&cfg, &session.stop);
    let mut doc = session.new_doc();
    record_loads(&mut doc, &spec, loads)?;
    let out = out?;
    session.add_runtime_fallbacks(
        &mut doc,
        out.cpus.iter().filter_map(|c| c.fallback.as_ref()),
    );
    doc.settings
        .extra
        .insert("threshold_ns".into(), a.threshold.into());
    doc.settings
        .extra
        .insert("duration_ns".into(), a.duration.into());
    let mut t = Table::new(&[
        "cpu",
        "reads",
        "loop step",
        "gaps",
        "gaps/s",
        "lost",
        "p50",
        "p99",
        "max",
        "tick cost",
        "ticks/s",
    ])
    .titled(format!(
        "Timeline gaps above {} ({} per CPU)",
        format_ns(a.threshold),
        format_ns(a.duration)
    ));
    let mut attribution = Table::new(&["cpu", "interrupt source", "count", "per second"])
        .titled("Interrupts taken during the run (/proc/interrupts)");
    for c in &out.cpus {
        let mut series =
            Series::from_recorder(format!("cpu {}", c.cpu), kind::GAP, Some(c.cpu), &c.gaps)
                .with("reads", c.reads)
                .with("min_step_ns", c.min_step_ns)
                .with("duration_ns", c.wall_ns)
                .with("lost_ns", c.lost_ns)
                .with("interrupts", serde_json::to_value(&c.interrupts)?)
                .with(
                    "above_us",
                    // Counts above whole microseconds, comparable with oslat's histogram buckets.
                    serde_json::Value::Object(
                        [1u64, 2, 5, 10, 20, 31, 100, 1000]
                            .iter()
                            .map(|&us| (us.to_string(), c.count_above(us * 1000).into()))
                            .collect(),
                    ),
                );
        if let Some(tk) = &c.tick {
            series = series.with("tick", serde_json::json!({"hz": tk.hz, "gaps": tk.gaps, "median_ns": tk.median_ns, "mean_ns": tk.mean_ns, "stddev_ns": tk.stddev_ns, "trimmed": tk.trimmed}));
        }
        doc.series.push(series);
        let sm = c.gaps.summary();
        t.row([
            c.cpu.to_string(),
            c.reads.to_string(),
            format_ns(c.min_step_ns),
            sm.count.to_string(),
            format!("{:.0}", c.gaps_per_second()),
            format!("{:.3} %", c.lost_fraction() * 100.0),
            format_ns(sm.percentiles.p50),
            format_ns(sm.percentiles.p99),
            format_ns(sm.max),
            c.tick
                .as_ref()
                .map(|k| format_ns(k.median_ns))
                .unwrap_or_else(|| "-".into()),
            c.tick
                .as_ref()
                .map(|k| format!("{:.0}", k.per_second))
                .unwrap_or_else(|| "-".into()),
        ]);
        let mut by: Vec<(&String, &u64)> = c.interrupts.iter().collect();
        by.sort_by(|x, y| y.1.cmp(x.1));
        for (src, n) in by {
            attribution.row([
                c.cpu.to_string(),
                src.clone(),
                n.to_string(),
                format!("{:.1}", *n as f64 * 1e9 / c.wall_ns.max(1) as f64),
            ]);
        }
    }
    t.note(
        "loop step: the shortest step between two counter reads. tick cost: median of the gaps that fall at one phase of the \
         timer tick period (1/HZ); ticks/s: how many did (about HZ when every tick interrupts the loop).",
    );
    finish(
        &session,
        doc,
        &exports,
        a.common.out.fail_above,
        &[t, attribution],
    )
}

fn run_alarm(a: AlarmArgs) -> anyhow::Result<i32> {
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
    validate_rt(&rt)?;
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
        Some(ns) if ns == 0 || ns % 1_000_000 != 0 => {
            return Err(Failure::usage(format!(
                "--rr-timeslice {}: the kernel takes whole milliseconds, 1ms or more (it then rounds up to whole ticks)",
                format_ns(ns)
            ))
            .into())
        }
        Some(ns) => Some(ns / 1_000_000),
        None => None,
    };
    let cpu = a.affinity.unwrap_or_else(last_cpu);
    let exports = exports(&a.common)?;
    let session = Session::begin(&rt)?;
    let guard = match timeslice_ms {
        Some(ms) => Some(punctual_bench::experiments::set_rr_timeslice(ms).map_err(Failure::from)?),
        None => None,
    };
    let effective = punctual_bench::experiments::effective_rr_timeslice_ns();
    let (spec, loads) = start_loads(&a.common)?;
    let cfg = AlarmConfig {
        cpu: Some(cpu),
        policy: session.plan.policy,
        priority: session.plan.priority,
        alarms: a.alarms,
        delay_min: a.min_delay,
        delay_max: a.max_delay,
        ..AlarmConfig::paper(a.workload.clone(), a.mechanism)
    };
    // A live line: alarms taken of all asked (Etsion's 500 per process take minutes).
    let taken = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let total = a.alarms.saturating_mul(a.workload.alarm_processes() as u64);
    let live = Live::start("alarms", Some(total), {
        let taken = taken.clone();
        move || {
            let n = taken.load(std::sync::atomic::Ordering::Relaxed);
            (n, format!("{n} of {total} alarms taken"))
        }
    });
    let out = run_alarms_counted(&cfg, &session.stop, &taken);
    live.finish();
    drop(guard);
    let mut doc = session.new_doc();
    record_loads(&mut doc, &spec, loads)?;
    let out = out?;
    session.add_runtime_fallbacks(
        &mut doc,
        out.processes.iter().filter_map(|p| p.fallback.as_ref()),
    );
    let s = &mut doc.settings.extra;
    s.insert("workload".into(), a.workload.to_string().into());
    s.insert("mechanism".into(), a.mechanism.name().into());
    s.insert("cpu".into(), cpu.into());
    s.insert("alarms_per_process".into(), a.alarms.into());
    s.insert("delay_min_ns".into(), a.min_delay.into());
    s.insert("delay_max_ns".into(), a.max_delay.into());
    s.insert(
        "rr_timeslice_ms".into(),
        timeslice_ms
            .or_else(punctual_bench::experiments::read_rr_timeslice_ms)
            .into(),
    );
    s.insert("rr_timeslice_effective_ns".into(), effective.into());
    let mut t = Table::new(&[
        "process", "type", "alarms", "p90", "p95", "p99", "max", "cpu use",
    ])
    .titled(format!(
        "Alarm latency: workload {} with {}, CPU {cpu}, {} {}, RR timeslice {}",
        a.workload,
        a.mechanism.name(),
        doc.settings.policy.clone().unwrap_or_default(),
        doc.settings.priority.unwrap_or(0),
        effective.map(format_ns).unwrap_or_else(|| "?".into())
    ));
    for p in &out.processes {
        doc.series.push(
            Series::from_recorder(
                format!("process {} ({})", p.index, p.kind.label()),
                kind::ALARM_LATENCY,
                Some(cpu),
                &p.recorder,
            )
            .with("type", p.kind.label())
            .with("cpu_ns", p.cpu_ns)
            .with("duration_ns", p.wall_ns),
        );
        let sm = p.recorder.summary();
        let pct = |v: u64| {
            if sm.count > 0 {
                format_ns(v)
            } else {
                "-".into()
            }
        };
        t.row([
            p.index.to_string(),
            p.kind.label(),
            sm.count.to_string(),
            pct(sm.percentiles.p90),
            pct(sm.percentiles.p95),
            pct(sm.percentiles.p99),
            pct(sm.max),
            format!("{:.1} %", p.cpu_ns as f64 * 100.0 / p.wall_ns.max(1) as f64),
        ]);
    }
    let all = out.merged();
    doc.series.push(
        Series::from_recorder("all alarm processes", kind::ALARM_LATENCY, Some(cpu), &all)
            .with("workload", a.workload.to_string()),
    );
    t.rule();
    let sm = all.summary();
    t.row([
        "all".to_string(),
        String::new(),
        sm.count.to_string(),
        format_ns(sm.percentiles.p90),
        format_ns(sm.percentiles.p95),
        format_ns(sm.percentiles.p99),
        format_ns(sm.max),
        String::new(),
    ]);
    t.note(
        "Alarm latency: from the alarm's due time to the process running again (Etsion section 7).",
    );
    finish(&session, doc, &exports, a.common.out.fail_above, &[t])
}
