//! `etsion-overhead`: Etsion et al. Tables 1 and 2 and Figs. 2, 3 and 8 on this machine. Table 1
//! (the cost of a clock interrupt) becomes the cost of one timer tick seen by a busy loop
//! ([`punctual_bench::gaps`]); Table 2 is the context switch through a pipe, the getpid trap and
//! memcpy bandwidth; Figs. 2, 3 and 8 are the sort workload's throughput with 1, 2, 4 and 8 copies
//! sharing one CPU in SCHED_RR at several RR timeslices (the paper varied HZ and the quantum; the
//! quantum is the knob a modern kernel still has). Figs. 2 and 3 on the paper's own axis (HZ) are
//! the simulated half, [`crate::etsion_overhead_sim`] (`--sim`).
//!
//! measure: [`EtsionOverhead::run`] (the costs, then the sort at each timeslice); model: [`Model`];
//! tables: [`tables`]; figures: [`figures`].

use crate::common::{group, us2};
use crate::published::{
    FIG8_PIII1133_EXTREME, FIG8_PIII664_BASE, SORT_MS_10000HZ, SORT_MS_100HZ, TABLE1, TABLE2,
};
use punctual_bench::{ctxsw, gaps, kind, memcpy, trap, tsc};
use punctual_load::{LoadKind, LoadSpec, StartOptions};
use punctual_result::{Failure, HostFacts, ResultDoc, Series, Table};
use punctual_rt::{Policy, RtWant, SchedParams};
use punctual_session::{Ctx, Figure, LiveSpec, Measurement, Report};
use punctual_time::format_ns;
use std::sync::atomic::Ordering;
use std::time::Duration;

pub const NAME: &str = "etsion-overhead";

/// The busy loop that finds the tick, and the sort copies, run in the real-time class at the
/// lowest priority: above ordinary tasks, under everything real-time.
const LOOP: SchedParams = SchedParams {
    policy: Policy::Fifo,
    priority: 1,
};
const OTHER: SchedParams = SchedParams {
    policy: Policy::Other,
    priority: 0,
};
/// Gaps shorter than this are the loop's own jitter.
const GAP_THRESHOLD_NS: u64 = 500;

// ---------------------------------------------------------------------------------------------
// measure

#[derive(Clone, Debug)]
pub struct OverheadSettings {
    pub gaps_ns: u64,
    pub ctxsw_ns: u64,
    pub trap_ns: u64,
    pub memcpy_per_size_ns: u64,
    /// How long each sort configuration runs.
    pub sort_ns: u64,
    pub copies: Vec<u32>,
    /// RR timeslices to sort under, in ms, longest first (the first is the baseline).
    pub timeslices_ms: Vec<u64>,
}

impl OverheadSettings {
    /// About 5 minutes.
    pub fn full() -> Self {
        OverheadSettings {
            gaps_ns: 30_000_000_000,
            ctxsw_ns: 10_000_000_000,
            trap_ns: 5_000_000_000,
            memcpy_per_size_ns: 2_000_000_000,
            sort_ns: 20_000_000_000,
            copies: vec![1, 2, 4, 8],
            timeslices_ms: vec![100, 10, 1],
        }
    }
    /// About 30 seconds.
    pub fn quick() -> Self {
        OverheadSettings {
            gaps_ns: 2_000_000_000,
            ctxsw_ns: 1_000_000_000,
            trap_ns: 500_000_000,
            memcpy_per_size_ns: 200_000_000,
            sort_ns: 1_500_000_000,
            ..Self::full()
        }
    }

    fn check(&self) -> Result<(), Failure> {
        if self.copies.is_empty()
            || self.copies.contains(&0)
            || self.timeslices_ms.is_empty()
            || self.timeslices_ms.contains(&0)
        {
            return Err(Failure::usage(
                "etsion-overhead: copies and timeslices must be non-empty and above zero",
            ));
        }
        Ok(())
    }
}

/// The experiment.
pub struct EtsionOverhead {
    pub quick: bool,
    pub settings: OverheadSettings,
    /// The CPU everything runs on.
    pub cpu: usize,
}

impl EtsionOverhead {
    pub fn new(opts: crate::Options) -> EtsionOverhead {
        EtsionOverhead {
            quick: opts.quick,
            settings: if opts.quick {
                OverheadSettings::quick()
            } else {
                OverheadSettings::full()
            },
            cpu: punctual_rt::affinity::last_online_cpu(),
        }
    }
}

/// The sort's throughput at one RR timeslice and number of copies.
#[derive(Clone, Debug, PartialEq)]
pub struct SortPoint {
    pub timeslice_ms: u64,
    pub effective_ns: Option<u64>,
    pub copies: u32,
    /// Numbers sorted per second of CPU time, all copies together.
    pub per_second: f64,
    /// CPU time one sort takes, ms.
    pub ms_per_sort: f64,
}

/// What `run` measured.
pub struct Outcome {
    pub cal: tsc::Calibration,
    pub host: HostFacts,
    pub gaps: gaps::CpuGaps,
    pub ctxsw: ctxsw::CtxswOutcome,
    pub trap: trap::TrapOutcome,
    pub memcpy: memcpy::MemcpyOutcome,
    pub sort: Vec<SortPoint>,
    /// Each sort configuration with the copies' own reports, for the document.
    pub sort_json: Vec<serde_json::Value>,
    /// Numbers in one sort's array.
    pub sort_len: usize,
    /// What else ran on the CPU while Table 2's costs were timed there.
    pub costs_sharing: Option<crate::alone::Sharing>,
}

/// Wait `ns`, or less if the user interrupts.
fn pause(ctx: &Ctx, ns: u64) {
    let end = std::time::Instant::now() + Duration::from_nanos(ns);
    while std::time::Instant::now() < end && !ctx.stop().load(Ordering::Relaxed) {
        std::thread::sleep(
            Duration::from_millis(20).min(end.saturating_duration_since(std::time::Instant::now())),
        );
    }
}

impl EtsionOverhead {
    /// Table 1's tick (the busy loop's gaps on the CPU).
    fn tick(&self, ctx: &Ctx, host: &HostFacts) -> Result<gaps::CpuGaps, Failure> {
        ctx.step("Table 1: the timer tick");
        let g = gaps::run(
            &gaps::GapsConfig {
                cpus: vec![self.cpu],
                duration_ns: self.settings.gaps_ns,
                threshold_ns: GAP_THRESHOLD_NS,
                sched: LOOP,
                hz: host.hz,
            },
            ctx.stop(),
        )?;
        g.cpus
            .into_iter()
            .next()
            .ok_or_else(|| Failure::system("the gaps loop reported no CPU"))
    }

    /// Table 2: context switch, trap, copy bandwidth.
    fn costs(
        &self,
        ctx: &Ctx,
    ) -> Result<
        (
            ctxsw::CtxswOutcome,
            trap::TrapOutcome,
            memcpy::MemcpyOutcome,
        ),
        Failure,
    > {
        let (s, cpu) = (&self.settings, self.cpu);
        ctx.step("Table 2: context switch");
        let c = ctxsw::run(
            &ctxsw::CtxswConfig::new(ctxsw::Channel::Pipe, cpu, s.ctxsw_ns),
            ctx.stop(),
        )?;
        ctx.step("Table 2: trap");
        let t = trap::run(
            &trap::TrapConfig {
                cpu: Some(cpu),
                ..trap::TrapConfig::new(s.trap_ns)
            },
            ctx.stop(),
        )?;
        ctx.step("Table 2: copy bandwidth");
        let m = memcpy::run(
            &memcpy::MemcpyConfig {
                sizes: memcpy::default_sizes(cpu),
                methods: memcpy::Method::ALL.to_vec(),
                per_size_ns: s.memcpy_per_size_ns,
                cpu: Some(cpu),
                sched: OTHER,
            },
            ctx.stop(),
        )?;
        Ok((c, t, m))
    }

    /// `n` sort copies in SCHED_RR 1 on the CPU for the configured time.
    fn sort_once(
        &self,
        ctx: &Ctx,
        n: u32,
        ms: u64,
        effective_ns: Option<u64>,
        out: &mut Outcome,
    ) -> Result<(), Failure> {
        let cpu = self.cpu;
        let spec: LoadSpec = format!("sort:{n}@{cpu}").parse().map_err(Failure::usage)?;
        debug_assert_eq!(spec.items[0].kind, LoadKind::Sort);
        let opts = StartOptions {
            sched: Some(SchedParams {
                policy: Policy::Rr,
                priority: 1,
            }),
        };
        let mut loads = ctx.start_load_with(&spec, &opts)?;
        // The window starts when every copy sorts (starting copies queue behind running ones).
        let ready = loads.wait_ready(Duration::from_secs(30), ctx.stop());
        if ready != n as usize {
            return Err(Failure::system(format!(
                "only {ready} of {n} sort copies started within 30 s"
            )));
        }
        pause(ctx, self.settings.sort_ns);
        let reports = loads.stop();
        let got: Vec<_> = reports.iter().filter_map(|r| r.2.as_ref()).collect();
        if got.len() != n as usize {
            return Err(Failure::system(format!(
                "only {} of {n} sort copies reported their work",
                got.len()
            )));
        }
        // Per second of the copies' own CPU time: copies start and stop a little apart, and this
        // machine's CPU is shared, so wall time would count waiting; CPU time counts what the
        // switches and cache refills cost each copy.
        let ops: u64 = got.iter().map(|r| r.ops).sum();
        let cpu_ns: u64 = got.iter().filter_map(|r| r.cpu_ns).sum();
        let per_second = if cpu_ns > 0 {
            ops as f64 * 1e9 / cpu_ns as f64
        } else {
            0.0
        };
        let ms_per_sort = if per_second > 0.0 {
            out.sort_len as f64 / per_second * 1e3
        } else {
            0.0
        };
        out.sort_json.push(serde_json::json!({
            "copies": n,
            "rr_timeslice_ms": ms,
            "rr_timeslice_effective_ns": effective_ns,
            "numbers_per_cpu_second": per_second.round() as u64,
            "ns_per_sort": (ms_per_sort * 1e6).round() as u64,
            "array_numbers": out.sort_len as u64,
            "reports": got,
        }));
        out.sort.push(SortPoint {
            timeslice_ms: ms,
            effective_ns,
            copies: n,
            per_second,
            ms_per_sort,
        });
        Ok(())
    }

    /// Figs. 2, 3, 8: every number of copies at every timeslice.
    fn sort(&self, ctx: &Ctx, out: &mut Outcome) -> Result<(), Failure> {
        for &ms in &self.settings.timeslices_ms {
            // Held for this timeslice's configurations only: the guard puts it back.
            let _guard = punctual_rt::rr::set_ms(ms)?;
            let effective_ns = punctual_rt::rr::effective_ns();
            for &n in &self.settings.copies {
                if ctx.stop().load(Ordering::Relaxed) {
                    return Ok(());
                }
                ctx.step(format!(
                    "sort: {n} cop{}, RR timeslice {ms} ms",
                    if n == 1 { "y" } else { "ies" }
                ));
                self.sort_once(ctx, n, ms, effective_ns, out)?;
            }
        }
        Ok(())
    }
}

impl Measurement for EtsionOverhead {
    type Outcome = Outcome;

    fn label(&self) -> String {
        NAME.into()
    }
    /// The busy loop's class. Nothing locked and no cpu_dma_latency request: these are costs of
    /// an ordinary system, as the paper measured them (and the old experiment asked for neither).
    fn wants(&self) -> Option<RtWant> {
        Some(RtWant {
            policy: LOOP.policy,
            priority: LOOP.priority,
            mlock: false,
            dma_latency_us: None,
        })
    }
    fn live(&self) -> Option<LiveSpec> {
        let s = &self.settings;
        let copies = (memcpy::default_sizes(self.cpu).len() * memcpy::Method::ALL.len()) as u64;
        let sorts = (s.timeslices_ms.len() * s.copies.len()) as u64;
        let total = s.gaps_ns
            + s.ctxsw_ns
            + s.trap_ns
            + s.memcpy_per_size_ns.saturating_mul(copies)
            + s.sort_ns.saturating_mul(sorts);
        Some(LiveSpec::timed(total, String::new))
    }
    fn run(&mut self, ctx: &Ctx) -> Result<Outcome, Failure> {
        self.settings.check()?;
        let host = ctx.host();
        let cal = tsc::Calibration::measure(50_000_000);
        let gaps = self.tick(ctx, &host)?;
        // The costs are timed on one CPU as on the paper's uniprocessor: check it was theirs.
        let watch = crate::alone::CpuWatch::start(self.cpu);
        let (ctxsw, trap, memcpy) = self.costs(ctx)?;
        let costs_sharing = watch.and_then(|w| w.finish());
        let mut out = Outcome {
            cal,
            host,
            gaps,
            ctxsw,
            trap,
            memcpy,
            sort: Vec::new(),
            sort_json: Vec::new(),
            sort_len: punctual_load::sort_array_len(Some(self.cpu)),
            costs_sharing,
        };
        self.sort(ctx, &mut out)?;
        Ok(out)
    }
    fn report(&self, out: Outcome, ctx: &Ctx, doc: &mut ResultDoc) -> Result<Report, Failure> {
        crate::common::mark(doc, NAME, self.quick);
        ctx.runtime_fallbacks(
            doc,
            out.gaps
                .fallback
                .iter()
                .chain(&out.ctxsw.fallback)
                .chain(&out.trap.fallback),
        );
        doc.settings.extra.insert("cpu".into(), self.cpu.into());
        doc.settings
            .extra
            .insert("tsc_hz".into(), (out.cal.hz().round() as u64).into());
        series(doc, &out, self.cpu);
        doc.extra
            .insert("sort_throughput".into(), out.sort_json.clone().into());
        if let Some(sh) = &out.costs_sharing {
            doc.extra.insert(
                "costs_cpu_sharing".into(),
                serde_json::json!({"share": (sh.share() * 10_000.0).round() / 10_000.0,
                    "shared": sh.shared(), "detail": sh}),
            );
        }
        let model = Model::of(&out, &self.settings, self.cpu);
        Ok(Report {
            tables: tables(&model),
            figures: figures(&model)?,
            ..Report::default()
        })
    }
}

/// The tick gaps, the context switch, the trap and every copy size and method.
fn series(doc: &mut ResultDoc, out: &Outcome, cpu: usize) {
    let gc = &out.gaps;
    let mut gs = Series::from_recorder(format!("gaps cpu {cpu}"), kind::GAP, Some(cpu), &gc.gaps)
        .with("threshold_ns", GAP_THRESHOLD_NS)
        .with("duration_ns", gc.wall_ns);
    if let Some(t) = &gc.tick {
        gs = gs
            .with("tick_median_ns", t.median_ns)
            .with("tick_mean_ns", t.mean_ns)
            .with("tick_stddev_ns", t.stddev_ns)
            .with("tick_gaps", t.gaps)
            .with("tick_gaps_trimmed", t.trimmed)
            .with("hz", t.hz);
    }
    doc.series.push(gs);
    let c = &out.ctxsw;
    doc.series.push(
        Series::from_recorder(
            "context switch (pipe)",
            kind::CONTEXT_SWITCH,
            Some(cpu),
            &c.per_switch,
        )
        .with("round_trips", c.round_trips)
        .with("mean_ps", (c.mean_switch_ns() * 1000.0).round() as u64),
    );
    let t = &out.trap;
    doc.series.push(
        Series::from_recorder("trap (getpid)", kind::TRAP, Some(cpu), &t.per_call)
            .with("calls", t.calls)
            .with("mean_ps", (t.mean_ns() * 1000.0).round() as u64),
    );
    for r in &out.memcpy.sizes {
        doc.series.push(
            Series::from_recorder(
                format!(
                    "{} {} ({})",
                    r.method.name(),
                    memcpy::format_bytes(r.size.bytes),
                    r.size.label
                ),
                kind::COPY,
                Some(cpu),
                &r.per_copy,
            )
            .with("bytes", r.size.bytes as u64)
            .with("method", r.method.name())
            .with("mb_per_s_mean", r.mb_per_s_mean.round() as u64)
            .with("mb_per_s_stddev", r.mb_per_s_stddev.round() as u64),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// model

/// The tick's cost, from the gaps at the tick's phase.
#[derive(Clone, Debug, PartialEq)]
pub struct Tick {
    pub mean_ns: u64,
    pub stddev_ns: u64,
    pub median_ns: u64,
    pub gaps: u64,
    pub trimmed: u64,
    pub hz: u32,
}

/// Copy bandwidth at one size, MB/s: memcpy's and the plain loop's, each overall (bytes over time)
/// and the deviation between copies; memcpy's mean over copies too (Table 2's cell).
#[derive(Clone, Debug, PartialEq)]
pub struct Bandwidth {
    pub bytes: usize,
    pub level: String,
    pub memcpy: (f64, f64),
    pub memcpy_mean: f64,
    pub copy_loop: Option<(f64, f64)>,
}

/// The numbers of the tables.
pub struct Model {
    pub cpu: usize,
    /// The processor's model name, empty when unknown.
    pub cpu_model: String,
    pub clocksource: String,
    /// The cycle counter: its rate, and ns per cycle.
    pub tsc_hz: f64,
    pub ns_per_cycle: f64,
    pub tick: Option<Tick>,
    /// How long the gaps loop ran, its gaps per second above the threshold, the share of time lost.
    pub gaps_wall_ns: u64,
    pub gaps_per_second: f64,
    pub lost_fraction: f64,
    /// Mean and deviation (between batches), ns.
    pub ctxsw: (f64, f64),
    pub trap: (f64, f64),
    pub bandwidth: Vec<Bandwidth>,
    pub copies: Vec<u32>,
    pub timeslices_ms: Vec<u64>,
    pub sort: Vec<SortPoint>,
    pub sort_len: usize,
    /// Why Table 2's figures are not the CPU's alone, when others shared it (beyond
    /// [`crate::alone::LIMIT`]).
    pub costs_shared: Option<String>,
}

impl Model {
    pub fn of(out: &Outcome, s: &OverheadSettings, cpu: usize) -> Model {
        let gc = &out.gaps;
        let sd_ns = |rec: &punctual_stats::Recorder| rec.summary().stddev as f64;
        let sizes = &out.memcpy.sizes;
        let bandwidth = sizes
            .iter()
            .filter(|r| r.method == memcpy::Method::Memcpy)
            .map(|r| Bandwidth {
                bytes: r.size.bytes,
                level: r.size.label.clone(),
                memcpy: (r.mb_per_s(), r.mb_per_s_stddev),
                memcpy_mean: r.mb_per_s_mean,
                copy_loop: sizes
                    .iter()
                    .find(|l| l.method == memcpy::Method::Loop && l.size == r.size)
                    .map(|l| (l.mb_per_s(), l.mb_per_s_stddev)),
            })
            .collect();
        Model {
            cpu,
            cpu_model: out.host.cpu_model.clone(),
            clocksource: out.host.clocksource.clone(),
            tsc_hz: out.cal.hz(),
            ns_per_cycle: out.cal.ns_per_tick,
            tick: gc.tick.as_ref().map(|t| Tick {
                mean_ns: t.mean_ns,
                stddev_ns: t.stddev_ns,
                median_ns: t.median_ns,
                gaps: t.gaps,
                trimmed: t.trimmed,
                hz: t.hz,
            }),
            gaps_wall_ns: gc.wall_ns,
            gaps_per_second: gc.gaps_per_second(),
            lost_fraction: gc.lost_fraction(),
            ctxsw: (out.ctxsw.mean_switch_ns(), sd_ns(&out.ctxsw.per_switch)),
            trap: (out.trap.mean_ns(), sd_ns(&out.trap.per_call)),
            bandwidth,
            copies: s.copies.clone(),
            timeslices_ms: s.timeslices_ms.clone(),
            sort: out.sort.clone(),
            sort_len: out.sort_len,
            costs_shared: out
                .costs_sharing
                .as_ref()
                .filter(|sh| sh.shared())
                .map(|sh| sh.describe("while Table 2's costs were timed")),
        }
    }

    fn machine(&self) -> String {
        if self.cpu_model.is_empty() {
            "this machine".to_string()
        } else {
            format!("here: {}", self.cpu_model)
        }
    }

    /// `mean ± sd` in cycles.
    fn cycles(&self, (mean, sd): (f64, f64)) -> String {
        format!(
            "{:.0} ± {:.0}",
            mean / self.ns_per_cycle,
            sd / self.ns_per_cycle
        )
    }

    /// The memcpy bandwidth of a size inside L2 (Table 2's cache bandwidth).
    fn l2(&self) -> Option<&Bandwidth> {
        self.bandwidth.iter().find(|b| b.level == "L2")
    }
}

// ---------------------------------------------------------------------------------------------
// tables and figures

/// Tables 1 and 2, copy bandwidth by level, and the sort against the quantum.
pub fn tables(m: &Model) -> Vec<Table> {
    vec![table1(m), table2(m), bandwidth(m), sort(m)]
}

fn table1(m: &Model) -> Table {
    let mut t = Table::new(&[
        "Processor",
        "Default cycles",
        "us",
        "Without 8253 cycles",
        "us",
    ])
    .titled("Etsion Table 1: clock interrupt processing overhead (average ± standard deviation)");
    for r in &TABLE1 {
        t.row(r.iter().map(|s| s.to_string()));
    }
    t.rule();
    match &m.tick {
        Some(tk) => t.row([
            m.machine(),
            "-".into(),
            "-".into(),
            m.cycles((tk.mean_ns as f64, tk.stddev_ns as f64)),
            us2(tk.mean_ns as f64),
        ]),
        None => t.row([
            m.machine(),
            "-".into(),
            "-".into(),
            "no tick found".into(),
            "-".into(),
        ]),
    };
    t.note(format!(
        "Here: the gap one timer tick leaves in a busy loop (SCHED_FIFO 1) on CPU {}, found at one phase of the tick period \
         over {} ({:.0} gaps/s above 500 ns in all, {:.3} % of the time lost; HZ {}).",
        m.cpu,
        format_ns(m.gaps_wall_ns),
        m.gaps_per_second,
        m.lost_fraction * 100.0,
        m.tick.as_ref().map(|t| t.hz.to_string()).unwrap_or_else(|| "unknown".into()),
    ));
    if let Some(tk) = &m.tick {
        t.note(format!(
            "{} tick gaps, median {}; {} longer than {}x the median (a tick that met something longer) left out of the mean.",
            tk.gaps,
            format_ns(tk.median_ns),
            tk.trimmed,
            gaps::TICK_TRIM
        ));
    }
    t.note(format!(
        "Cycles are TSC cycles ({:.2} GHz). No 8253 is read on a tick today (the clocksource is {}).",
        m.tsc_hz / 1e9,
        m.clocksource
    ));
    t
}

fn table2(m: &Model) -> Table {
    let mut t = Table::new(&[
        "Processor",
        "Context switch cycles",
        "us",
        "Cache BW MB/s",
        "Trap cycles",
        "us",
    ])
    .titled("Etsion Table 2: other overheads (average ± standard deviation)");
    for r in &TABLE2 {
        t.row(r.iter().map(|s| s.to_string()));
    }
    t.rule();
    t.row([
        m.machine(),
        m.cycles(m.ctxsw),
        us2(m.ctxsw.0),
        m.l2()
            .map(|b| format!("{:.0} ± {:.0}", b.memcpy_mean, b.memcpy.1))
            .unwrap_or_else(|| "-".into()),
        m.cycles(m.trap),
        us2(m.trap.0),
    ]);
    t.note("Here: two processes pinned to one CPU passing a byte through pipes (half a round trip); getpid through syscall(2); memcpy of a size inside L2. Deviations are between batches.");
    if let Some(why) = &m.costs_shared {
        t.note(format!(
            "Warning: {why}: these costs include waiting for it (shield the CPU, or run on a quiet machine)."
        ));
    }
    t
}

fn bandwidth(m: &Model) -> Table {
    let mut t = Table::new(&[
        "Copy size",
        "level",
        "memcpy MB/s",
        "± sd",
        "loop MB/s",
        "± sd",
    ])
    .titled("Copy bandwidth at each level");
    for b in &m.bandwidth {
        let lp = |f: fn((f64, f64)) -> f64| {
            b.copy_loop
                .map(|l| format!("{:.0}", f(l)))
                .unwrap_or_else(|| "-".into())
        };
        t.row([
            memcpy::format_bytes(b.bytes),
            b.level.clone(),
            format!("{:.0}", b.memcpy.0),
            format!("{:.0}", b.memcpy.1),
            lp(|l| l.0),
            lp(|l| l.1),
        ]);
    }
    t.note("memcpy: the C library's (the paper's); loop: 16-byte vector loads and stores. Where memcpy is slower in cache than in memory, the library chose rep movsb, which this machine runs slowly.");
    t
}

/// A published row of the sort table: the value at 8 copies (when 8 is a column) and ms per sort.
fn published_row(m: &Model, label: &str, at8: Option<&str>, ms: &str) -> Vec<String> {
    let mut r = vec![label.to_string()];
    let mut cells = vec!["-".to_string(); m.copies.len()];
    if let (Some(i), Some(v)) = (m.copies.iter().position(|&n| n == 8), at8) {
        cells[i] = v.to_string();
    }
    r.extend(cells);
    r.push(ms.to_string());
    r
}

/// One measured row of the sort table: throughput per number of copies (with the overhead against
/// the baseline timeslice), and ms per sort of one copy.
fn sort_row(m: &Model, ms: u64, base: &[f64]) -> Option<Vec<String>> {
    let points: Vec<&SortPoint> = m.sort.iter().filter(|p| p.timeslice_ms == ms).collect();
    let first = points.first()?;
    let eff = first
        .effective_ns
        .map(format_ns)
        .unwrap_or_else(|| "?".into());
    let mut r = vec![format!("here, RR timeslice {ms} ms (effective {eff})")];
    for (i, &n) in m.copies.iter().enumerate() {
        r.push(match points.iter().find(|p| p.copies == n) {
            Some(p) if ms != m.timeslices_ms[0] && base[i] > 0.0 => {
                format!(
                    "{} ({:+.1} %)",
                    group(p.per_second.round() as u64),
                    (base[i] / p.per_second - 1.0) * 100.0
                )
            }
            Some(p) => group(p.per_second.round() as u64),
            None => "-".into(),
        });
    }
    r.push(
        points
            .iter()
            .find(|p| p.copies == 1)
            .map(|p| format!("{:.3}", p.ms_per_sort))
            .unwrap_or_else(|| "-".into()),
    );
    Some(r)
}

fn sort(m: &Model) -> Table {
    let mut header = vec!["Configuration".to_string()];
    header.extend(
        m.copies
            .iter()
            .map(|n| format!("{n} cop{}", if *n == 1 { "y" } else { "ies" })),
    );
    header.push("ms per sort".into());
    let header_refs: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut t = Table::new(&header_refs).titled("Etsion Figs. 2, 3, 8: sort throughput (numbers sorted per CPU-second, all copies) against the quantum");
    t.row(published_row(
        m,
        "paper PIII-664, 100 Hz, 50 ms quanta",
        None,
        SORT_MS_100HZ,
    ));
    t.row(published_row(
        m,
        "paper PIII-664, 10,000 Hz, 50 ms quanta",
        None,
        SORT_MS_10000HZ,
    ));
    t.row(published_row(
        m,
        "paper PIII-664, 100 Hz, 60 ms quanta (Fig. 8)",
        Some(FIG8_PIII664_BASE),
        "-",
    ));
    t.row(published_row(
        m,
        "paper PIII-1.133, 20,000 Hz, 100 us quanta (Fig. 8)",
        Some(FIG8_PIII1133_EXTREME),
        "-",
    ));
    t.rule();
    let base: Vec<f64> = m
        .copies
        .iter()
        .map(|&n| {
            m.sort
                .iter()
                .find(|p| p.timeslice_ms == m.timeslices_ms[0] && p.copies == n)
                .map(|p| p.per_second)
                .unwrap_or(0.0)
        })
        .collect();
    for &ms in &m.timeslices_ms {
        if let Some(r) = sort_row(m, ms, &base) {
            t.row(r);
        }
    }
    t.note(format!(
        "Here: {} numbers ({} KiB, half the L2 cache) per sort, introsort; copies SCHED_RR 1 on CPU {}; per second of the copies' \
         own CPU time (this machine's CPU is shared). In parentheses: added overhead against the {} ms row, as in Figs. 2 and 3.",
        group(m.sort_len as u64),
        m.sort_len * 4 / 1024,
        m.cpu,
        m.timeslices_ms[0]
    ));
    t
}

/// Figs. 2, 3, 8: throughput against copies, a line per timeslice.
pub fn figures(m: &Model) -> Result<Vec<Figure>, Failure> {
    let lines: Vec<punctual_plot::Line> = m
        .timeslices_ms
        .iter()
        .map(|&ms| punctual_plot::Line {
            label: format!("RR timeslice {ms} ms"),
            points: m
                .sort
                .iter()
                .filter(|p| p.timeslice_ms == ms)
                .map(|p| (p.copies as f64, p.per_second / 1e6))
                .collect(),
        })
        .collect();
    let svg = punctual_plot::line_plot(
        "Etsion Figs. 2, 3, 8: sort throughput against copies and quantum",
        "copies",
        "million numbers sorted per CPU-second",
        &lines,
        false,
        false,
    );
    Ok(vec![crate::common::figure("etsion-overhead-sort", svg)?])
}
