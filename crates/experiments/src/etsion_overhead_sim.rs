//! `etsion-overhead --sim`: Etsion et al. 2003, Figs. 2 and 3 and Section 3's split of the added
//! overhead into direct and indirect, on the simulator: 1, 2, 4 and 8 sorting processes under the
//! Linux 2.4 scheduler at 100 to 20,000 Hz, with 50 ms quanta (Fig. 2) and 5(+1)-tick quanta
//! (Fig. 3), and the added time per sort against 100 Hz.
//!
//! The costs are the paper's P-III 664 MHz, taken from its tables, not fitted to its figures:
//! an interrupt runs its handler for Table 1's 0.49 us (without the 8253) and costs the simulator's
//! default 4.5 us of cache refill besides; a context switch costs Table 2's 1.98 us directly, and
//! the incoming sort then refills what other sorts evicted of its 128 KiB array (half the 256 KiB
//! L2) at Table 2's cache bandwidth, 2512 MB/s (128 KiB in 52 us). Whatever Figs. 2 and 3 show
//! comes out of the simulated switches and interrupts.
//!
//! measure: [`EtsionOverheadSim::run`]; model: [`SimModel`]; tables: [`sim_tables`]; figures:
//! [`sim_figures`].

use crate::common::{group, simulated_clock};
use crate::etsion_overhead::NAME;
use crate::published::etsion_overhead as paper;
use crate::published::{TABLE1, TABLE2};
use punctual_plot::Line;
use punctual_result::{Failure, ResultDoc, Table};
use punctual_session::{Ctx, Figure, LiveSpec, Measurement, Report};
use punctual_sim::behaviour::defaults::SORT_FOOTPRINT_KIB;
use punctual_sim::config::NS_PER_S;
use punctual_sim::{
    simulate, Behaviour, Cache, Control, Costs, Policy, Quantum, RunConfig, RunResult, TaskSpec,
};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Fig. 2's quantum (50 ms, plus a tick) and Fig. 3's (5 ticks plus one), in table order.
pub const RULES: [(&str, Quantum); 2] = [
    ("50 ms", Quantum::Time(50_000_000)),
    ("5(+1) ticks", Quantum::Ticks(5)),
];
/// The multiprogramming levels of Figs. 2 and 3.
pub const PROCESSES: [usize; 4] = [1, 2, 4, 8];
/// The clock rates: the base first, 10,000 Hz for Section 3's split, 20,000 Hz for Fig. 3's peak.
pub const HZ: [u32; 6] = [100, 1000, 2000, 5000, 10000, 20000];
/// The worked example's rate.
const SPLIT_HZ: u32 = 10_000;

/// The P-III 664's row of a published table, by processor name.
fn piii664<const N: usize>(table: &[[&'static str; N]]) -> [&'static str; N] {
    table
        .iter()
        .find(|r| r[0] == "PIII-664")
        .copied()
        .expect("the P-III 664 is in Tables 1 and 2")
}

/// A published `us` cell (`0.49`) in ns.
fn us_cell(s: &str) -> u64 {
    let us: f64 = s.parse().expect("published microseconds");
    (us * 1000.0).round() as u64
}

/// The simulated P-III 664's costs: Table 1's interrupt handler without the 8253 (0.49 us),
/// Table 2's context switch (1.98 us), and the simulator's default cache cost of an interrupt
/// (4.5 us: the handler's own footprint, which is not the sort's working set).
pub fn costs() -> Costs {
    Costs {
        irq_direct: us_cell(piii664(&TABLE1)[4]),
        switch: us_cell(piii664(&TABLE2)[2]),
        ..Costs::default()
    }
}

/// The P-III 664's L2 (256 KiB) refilled at Table 2's cache bandwidth (2512 MB/s).
pub fn cache() -> Cache {
    let bw = piii664(&TABLE2)[3]
        .split(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .expect("Table 2's bandwidth cell is `MB/s ± sd`");
    Cache {
        size_kib: paper::L2_KIB,
        refill_mb_s: bw,
    }
}

/// `n` sorting processes (CPU-bound, 128 KiB working set each) at `hz` under Linux 2.4.
pub fn sort_run(n: usize, hz: u32, quantum: Quantum, secs: u64) -> RunConfig {
    RunConfig {
        hz,
        quantum,
        policy: Policy::Linux24,
        duration: secs * NS_PER_S,
        costs: costs(),
        cache: cache(),
        tasks: (0..n)
            .map(|i| {
                TaskSpec::new(format!("sort {i}"), "sort", Behaviour::Cpu)
                    .with_footprint(SORT_FOOTPRINT_KIB)
            })
            .collect(),
        ..RunConfig::default()
    }
}

// ---------------------------------------------------------------------------------------------
// measure

/// `etsion-overhead --sim`.
pub struct EtsionOverheadSim {
    pub quick: bool,
    /// Simulated seconds per configuration.
    pub secs: u64,
    done: Arc<AtomicU64>,
}

impl EtsionOverheadSim {
    pub fn new(opts: crate::Options) -> EtsionOverheadSim {
        EtsionOverheadSim {
            quick: opts.quick,
            secs: if opts.quick { 5 } else { 60 },
            done: Arc::default(),
        }
    }

    fn runs() -> u64 {
        (RULES.len() * PROCESSES.len() * HZ.len()) as u64
    }
}

/// One simulated configuration, reduced to what the tables need.
#[derive(Clone, Debug, PartialEq)]
pub struct SimPoint {
    /// Index into [`RULES`].
    pub rule: usize,
    pub processes: usize,
    pub hz: u32,
    /// CPU time the sorts computed, and the simulated time.
    pub work_ns: u64,
    pub simulated_ns: u64,
    pub interrupts: u64,
    pub switches: u64,
    /// Of the overhead: interrupt handlers, the interrupts' cache cost, switches, refills.
    pub irq_direct_ns: u64,
    pub irq_indirect_ns: u64,
    pub switch_ns: u64,
    pub refill_ns: u64,
}

impl SimPoint {
    fn of(rule: usize, r: &RunResult) -> SimPoint {
        let c = &r.config.costs;
        let sum = |f: fn(&punctual_sim::CpuAccount) -> u64| r.cpus.iter().map(f).sum::<u64>();
        let interrupts = sum(|a| a.interrupts);
        let switches = sum(|a| a.context_switches);
        SimPoint {
            rule,
            processes: r.tasks.len(),
            hz: r.config.hz,
            work_ns: sum(|a| a.work_ns),
            simulated_ns: r.simulated_ns,
            interrupts,
            switches,
            irq_direct_ns: interrupts * c.irq_direct,
            irq_indirect_ns: interrupts * c.irq_indirect,
            switch_ns: switches * c.switch,
            refill_ns: sum(|a| a.refill_ns),
        }
    }

    /// The share of the CPU's time the sorts computed.
    pub fn work_fraction(&self) -> f64 {
        self.work_ns as f64 / self.simulated_ns.max(1) as f64
    }
}

/// What the simulated half computed.
pub struct SimOutcome {
    pub points: Vec<SimPoint>,
    pub events: u64,
    pub simulated_ns: u64,
}

impl Measurement for EtsionOverheadSim {
    type Outcome = SimOutcome;

    fn label(&self) -> String {
        format!("{NAME} --sim")
    }
    fn live(&self) -> Option<LiveSpec> {
        let (done, total) = (self.done.clone(), Self::runs());
        Some(LiveSpec::counted(total, move || {
            let n = done.load(Ordering::Relaxed);
            (n, format!("{n} of {total} simulations"))
        }))
    }
    fn run(&mut self, ctx: &Ctx) -> Result<SimOutcome, Failure> {
        let control = Control {
            stop: Some(ctx.stop()),
            progress: None,
        };
        let mut out = SimOutcome {
            points: Vec::new(),
            events: 0,
            simulated_ns: 0,
        };
        for (rule, (label, quantum)) in RULES.iter().enumerate() {
            for n in PROCESSES {
                for hz in HZ {
                    if ctx.stop().load(Ordering::Relaxed) {
                        return Err(Failure::interrupted());
                    }
                    ctx.step(format!("{label} quanta, {n} sort(s) @{hz}Hz"));
                    let r = simulate(&sort_run(n, hz, *quantum, self.secs), &control)?;
                    out.events += r.events;
                    out.simulated_ns += r.simulated_ns;
                    out.points.push(SimPoint::of(rule, &r));
                    self.done.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        Ok(out)
    }
    fn report(&self, out: SimOutcome, _ctx: &Ctx, doc: &mut ResultDoc) -> Result<Report, Failure> {
        simulated_clock(doc);
        crate::common::mark(doc, NAME, self.quick);
        doc.extra.insert("events".into(), out.events.into());
        doc.extra
            .insert("simulated_ns".into(), out.simulated_ns.into());
        let s = &mut doc.settings.extra;
        s.insert("duration_ns".into(), (self.secs * NS_PER_S).into());
        s.insert("scheduler".into(), Policy::Linux24.name().into());
        let (c, k) = (costs(), cache());
        s.insert("irq_direct_ns".into(), c.irq_direct.into());
        s.insert("irq_indirect_ns".into(), c.irq_indirect.into());
        s.insert("switch_ns".into(), c.switch.into());
        s.insert("cache_kib".into(), k.size_kib.into());
        s.insert("refill_mb_s".into(), k.refill_mb_s.into());
        s.insert("footprint_kib".into(), SORT_FOOTPRINT_KIB.into());
        let model = SimModel::of(out.points, self.secs);
        doc.extra
            .insert("points".into(), model.points_json().into());
        Ok(Report {
            tables: sim_tables(&model),
            figures: sim_figures(&model)?,
            ..Report::default()
        })
    }
}

// ---------------------------------------------------------------------------------------------
// model

/// Section 3's derivation for one configuration: the time per sort at 100 Hz and at a higher
/// rate, the interrupts the higher rate added during one sort, their direct cost (Table 1), and
/// the rest of the difference, the indirect overhead.
#[derive(Clone, Debug, PartialEq)]
pub struct Split {
    pub label: String,
    pub ms_base: f64,
    pub ms_high: f64,
    pub hz: u32,
    pub extra_interrupts: f64,
    pub direct_us: f64,
    pub difference_us: f64,
}

impl Split {
    /// Split the difference as the paper does: `(hz - 100) x time per sort` more interrupts, each
    /// costing `direct_ns`; the rest is indirect.
    pub fn derive(label: String, ms_base: f64, ms_high: f64, hz: u32, direct_ns: u64) -> Split {
        let extra_interrupts = (hz - HZ[0]) as f64 * ms_high / 1000.0;
        Split {
            label,
            ms_base,
            ms_high,
            hz,
            extra_interrupts,
            direct_us: extra_interrupts * direct_ns as f64 / 1000.0,
            difference_us: (ms_high - ms_base) * 1000.0,
        }
    }
    pub fn indirect_us(&self) -> f64 {
        self.difference_us - self.direct_us
    }
    /// The indirect share of the difference, in per cent.
    pub fn indirect_pct(&self) -> f64 {
        100.0 * self.indirect_us() / self.difference_us
    }
}

/// The numbers of the tables and figures.
pub struct SimModel {
    pub points: Vec<SimPoint>,
    pub secs: u64,
    /// One sort's pure computation: the paper's 12.675 ms at 100 Hz less the simulated 100 Hz
    /// overhead of one process with 50 ms quanta (the unit that turns throughput into ms per sort).
    pub sort_work_ms: f64,
}

impl SimModel {
    pub fn of(points: Vec<SimPoint>, secs: u64) -> SimModel {
        let mut m = SimModel {
            points,
            secs,
            sort_work_ms: 0.0,
        };
        m.sort_work_ms = m
            .point(0, 1, HZ[0])
            .map_or(0.0, |p| paper::SPLIT_MS_100HZ * p.work_fraction());
        m
    }

    pub fn point(&self, rule: usize, processes: usize, hz: u32) -> Option<&SimPoint> {
        self.points
            .iter()
            .find(|p| p.rule == rule && p.processes == processes && p.hz == hz)
    }

    /// The added time per sort at `hz` against 100 Hz, in per cent (Figs. 2 and 3).
    pub fn added_pct(&self, rule: usize, processes: usize, hz: u32) -> Option<f64> {
        let base = self.point(rule, processes, HZ[0])?.work_fraction();
        let at = self.point(rule, processes, hz)?.work_fraction();
        (at > 0.0).then(|| (base / at - 1.0) * 100.0)
    }

    /// The time one sort takes with its share of the overheads, ms.
    pub fn ms_per_sort(&self, rule: usize, processes: usize, hz: u32) -> Option<f64> {
        let wf = self.point(rule, processes, hz)?.work_fraction();
        (wf > 0.0).then(|| self.sort_work_ms / wf)
    }

    /// Section 3's split, simulated, at 10,000 Hz: the paper's case, and 8 processes at each quantum.
    pub fn splits(&self) -> Vec<Split> {
        let direct = costs().irq_direct;
        [(0, 1), (0, 8), (1, 8)]
            .iter()
            .filter_map(|&(rule, n)| {
                let base = self.ms_per_sort(rule, n, HZ[0])?;
                let high = self.ms_per_sort(rule, n, SPLIT_HZ)?;
                let label = format!(
                    "simulator, {n} process{}, {} quanta",
                    plural(n),
                    RULES[rule].0
                );
                Some(Split::derive(label, base, high, SPLIT_HZ, direct))
            })
            .collect()
    }

    fn points_json(&self) -> Vec<serde_json::Value> {
        self.points
            .iter()
            .map(|p| {
                json!({
                    "quanta": RULES[p.rule].0, "processes": p.processes, "hz": p.hz,
                    "work_ns": p.work_ns, "simulated_ns": p.simulated_ns,
                    "interrupts": p.interrupts, "context_switches": p.switches,
                    "irq_direct_ns": p.irq_direct_ns, "irq_indirect_ns": p.irq_indirect_ns,
                    "switch_ns": p.switch_ns, "refill_ns": p.refill_ns,
                    "added_pct": self.added_pct(p.rule, p.processes, p.hz).map(|v| (v * 1000.0).round() / 1000.0),
                })
            })
            .collect()
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "es"
    }
}

// ---------------------------------------------------------------------------------------------
// tables and figures

/// Figs. 2 and 3 as a table, Section 3's split, and where the overhead goes at 20,000 Hz.
pub fn sim_tables(m: &SimModel) -> Vec<Table> {
    vec![figs_table(m), split_table(m), breakdown_table(m)]
}

/// A paper row of the figures' table: text at some rates.
fn paper_row(quanta: &str, processes: &str, source: &str, at: &[(u32, String)]) -> Vec<String> {
    let mut r = vec![
        quanta.to_string(),
        processes.to_string(),
        source.to_string(),
    ];
    r.extend(HZ[1..].iter().map(|hz| {
        at.iter()
            .find(|(h, _)| h == hz)
            .map_or(String::new(), |(_, v)| v.clone())
    }));
    r
}

fn figs_table(m: &SimModel) -> Table {
    let mut header = vec!["quanta".to_string(), "processes".into(), "source".into()];
    header.extend(HZ[1..].iter().map(|hz| format!("{} Hz", group(*hz as u64))));
    let refs: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut t = Table::new(&refs)
        .titled("Etsion Figs. 2 and 3 (simulated): added time per sort against 100 Hz");
    let sec3 = (paper::SPLIT_MS_10000HZ / paper::SPLIT_MS_100HZ - 1.0) * 100.0;
    for (rule, (label, _)) in RULES.iter().enumerate() {
        if rule == 0 {
            t.row(paper_row(
                label,
                "1",
                "paper, P-III 664 (Sec. 3)",
                &[(SPLIT_HZ, format!("{sec3:+.2} %"))],
            ));
            t.row(paper_row(
                label,
                "1-8",
                "paper (Fig. 2)",
                &[
                    (1000, paper::FIG2_1000HZ.into()),
                    (5000, paper::FIG2_5000HZ.into()),
                ],
            ));
        } else {
            t.rule();
            t.row(paper_row(
                label,
                "1-8",
                "paper (Fig. 3, Sec. 7)",
                &[(20_000, format!("up to {:.0} %", paper::FIG3_20000HZ_PCT))],
            ));
        }
        for n in PROCESSES {
            let mut r = vec![label.to_string(), n.to_string(), "simulator".into()];
            r.extend(HZ[1..].iter().map(|&hz| {
                m.added_pct(rule, n, hz)
                    .map_or("-".into(), |v| format!("{v:+.2} %"))
            }));
            t.row(r);
        }
    }
    let (c, k) = (costs(), cache());
    t.note(format!(
        "Simulated: Linux 2.4 epochs, N CPU-bound sorts of {SORT_FOOTPRINT_KIB} KiB each ({} s per configuration). Costs are the \
         paper's P-III 664: interrupt handler {} (Table 1, no 8253) plus {} cache cost, switch {} (Table 2), then the incoming \
         sort refills what the others evicted of its array from a {} KiB cache at {} MB/s (Table 2's cache bandwidth).",
        m.secs,
        crate::common::us2(c.irq_direct as f64) + " us",
        crate::common::us2(c.irq_indirect as f64) + " us",
        crate::common::us2(c.switch as f64) + " us",
        k.size_kib,
        k.refill_mb_s
    ));
    t.note("Nothing is fitted to Figs. 2 and 3: 5(+1)-tick quanta are 300 us at 20,000 Hz, and with 4 or more sorts sharing the \
            256 KiB L2 each switch refills most of an array (52 us for 128 KiB), which is Fig. 3's much higher overhead.");
    t.note("Paper: Fig. 2's 1000 Hz and 5000 Hz cells are the text's words; Sec. 3's cell is 13.397 / 12.675 ms; Fig. 3's is Section 7's.");
    t
}

fn split_table(m: &SimModel) -> Table {
    let mut t = Table::new(&[
        "source",
        "ms/sort @100Hz",
        "@10,000Hz",
        "extra interrupts",
        "direct",
        "difference",
        "indirect",
        "indirect share",
        "direct share",
    ])
    .titled("Etsion Section 3: direct and indirect overhead, 100 Hz to 10,000 Hz");
    t.row([
        "paper, P-III 664, 1 process, 50 ms quanta".to_string(),
        format!("{:.3}", paper::SPLIT_MS_100HZ),
        format!("{:.3}", paper::SPLIT_MS_10000HZ),
        format!(
            "{} x {:.6} = {}",
            paper::SPLIT_EXTRA_PER_S,
            paper::SPLIT_MS_10000HZ / 1000.0,
            paper::SPLIT_EXTRA_INTERRUPTS
        ),
        format!(
            "{} x {:.2} = {} us",
            paper::SPLIT_EXTRA_INTERRUPTS,
            paper::SPLIT_DIRECT_US_EACH,
            paper::SPLIT_DIRECT_US
        ),
        format!("{} us", paper::SPLIT_DIFFERENCE_US),
        format!("{} us", paper::SPLIT_INDIRECT_US),
        format!("{} %", paper::SPLIT_INDIRECT_PCT),
        format!("{} %", paper::SPLIT_DIRECT_PCT),
    ]);
    for s in m.splits() {
        t.row([
            s.label.clone(),
            format!("{:.3}", s.ms_base),
            format!("{:.3}", s.ms_high),
            format!("{:.0}", s.extra_interrupts),
            format!("{:.0} us", s.direct_us),
            format!("{:.0} us", s.difference_us),
            format!("{:.0} us", s.indirect_us()),
            format!("{:.1} %", s.indirect_pct()),
            format!("{:.1} %", 100.0 - s.indirect_pct()),
        ]);
    }
    t.row([
        "paper, shorter quanta (and P-IV, Athlon)",
        "",
        "",
        "",
        "",
        "",
        "",
        paper::SPLIT_SHORT_QUANTA,
        "",
    ]);
    t.note(format!(
        "Simulator: ms per sort is one sort's computation ({:.3} ms: the paper's 12.675 ms at 100 Hz less the simulated 100 Hz \
         overhead) over the share of CPU time the sorts got, so its 100 Hz cell for one process is the paper's by construction \
         and the 10,000 Hz cell comes from the simulation; direct = extra interrupts x {} us, as the paper does with Table 1.",
        m.sort_work_ms,
        crate::common::us2(costs().irq_direct as f64)
    ));
    t.note("One process never switches, so its indirect share is the interrupts' cache cost (4.5 us each: the simulator's default, \
            about what the paper's example implies, 657 us / 133 = 4.94 us); the switches' refills raise it with shorter quanta.");
    t
}

fn breakdown_table(m: &SimModel) -> Table {
    let top = HZ[HZ.len() - 1];
    let mut t = Table::new(&[
        "quanta",
        "processes",
        "switches/s",
        "interrupt handlers",
        "interrupts' cache cost",
        "switches",
        "refills",
        "added vs 100 Hz",
    ])
    .titled(format!(
        "Where the time goes at {} Hz (share of CPU time, simulated)",
        group(top as u64)
    ));
    for (rule, (label, _)) in RULES.iter().enumerate() {
        if rule > 0 {
            t.rule();
        }
        for n in PROCESSES {
            let Some(p) = m.point(rule, n, top) else {
                continue;
            };
            let sim = p.simulated_ns.max(1) as f64;
            let pct = |ns: u64| format!("{:.2} %", 100.0 * ns as f64 / sim);
            t.row([
                label.to_string(),
                n.to_string(),
                format!("{:.0}", p.switches as f64 * 1e9 / sim),
                pct(p.irq_direct_ns),
                pct(p.irq_indirect_ns),
                pct(p.switch_ns),
                pct(p.refill_ns),
                m.added_pct(rule, n, top)
                    .map_or("-".into(), |v| format!("{v:+.2} %")),
            ]);
        }
    }
    t.note("Two sorts' arrays fit in the L2 together, so they refill nothing; from four on, the others evict most of an array between two quanta.");
    t
}

/// Figs. 2 and 3: added overhead against HZ, a line per number of processes.
pub fn sim_figures(m: &SimModel) -> Result<Vec<Figure>, Failure> {
    let mut out = Vec::new();
    for (rule, (label, _)) in RULES.iter().enumerate() {
        let lines: Vec<Line> = PROCESSES
            .iter()
            .map(|&n| Line {
                label: format!("{n} process{}", plural(n)),
                points: HZ
                    .iter()
                    .filter_map(|&hz| m.added_pct(rule, n, hz).map(|v| (hz as f64, v)))
                    .collect(),
            })
            .collect();
        let (fig, name) = if rule == 0 {
            ("Fig. 2", "etsion-overhead-fig2")
        } else {
            ("Fig. 3", "etsion-overhead-fig3")
        };
        let svg = punctual_plot::line_plot(
            &format!("Etsion {fig} (simulated): added overhead against 100 Hz, {label} quanta"),
            "clock interrupt rate (Hz)",
            "added time per sort (%)",
            &lines,
            false,
            false,
        );
        out.push(crate::common::figure(name, svg)?);
    }
    Ok(out)
}
