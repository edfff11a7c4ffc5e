//! `punctual advise`: McKenney's decision flow (OLS 2008, Fig. 9 and the six principles of section 5)
//! as a function of what the user needs and what this machine is and measured. Pure: the facts are
//! gathered by the caller, so every branch is tested with fake ones.
//!
//! Total delay of a work item = start latency (a measured percentile) + work x slowdown (Figs.
//! 5-7). The real-time configuration's slowdown is McKenney's Table 1 on a PREEMPT_RT kernel and
//! none on this kernel (punctual's real time is a policy, memory locking and spinning: the work runs
//! at the same speed); the slowdowns a `mckenney-choose` result measured replace both when given.

pub mod mckenney;

use mckenney::published as pb;
pub use mckenney::{crossover, kind_key, WorkKind};
use punctual_result::{HostFacts, ResultDoc, Table};
use punctual_time::format_ns;
use serde::Serialize;

/// What the workload needs (the command's flags).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Needs {
    pub deadline_ns: Option<u64>,
    pub work_ns: Option<u64>,
    pub kind: Option<WorkKind>,
    /// Peak CPU utilization, 0 to 1.
    pub utilization: Option<f64>,
    pub memory_bytes: Option<u64>,
    pub throughput_only: bool,
    /// Too early is as bad as too late: the largest lateness (and earliness) tolerated.
    pub jitter_ns: Option<u64>,
    /// CPU-bound processes sharing the work's CPU (Etsion section 8: under time sharing the work
    /// may wait a quantum for each of the others).
    pub competing: Option<u32>,
}

/// A start-latency distribution measured on this machine.
#[derive(Clone, Debug, Serialize)]
pub struct Measured {
    /// Where it came from (a result file or stored id) and which series.
    pub source: String,
    pub p99_9_ns: u64,
    pub max_ns: u64,
    /// The CPU it was measured on, recommended for the real-time work.
    pub cpu: Option<usize>,
    /// Share of the run the hypervisor took (steal), when recorded.
    pub steal: Option<f64>,
    /// Why the figure is not the whole measurement, when it is not: an interrupted run, or a
    /// `check` whose loaded phase is missing (its idle phase stands in). Such a figure can say a
    /// deadline is missed, never that it is met.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial: Option<String>,
}

/// What punctual found out about this machine.
#[derive(Clone, Debug, Serialize)]
pub struct Facts {
    pub host: HostFacts,
    pub mem_available_bytes: Option<u64>,
    /// Real time: SCHED_FIFO, mlockall, cpu_dma_latency, sleep-then-spin (`check`'s hybrid phase
    /// under load, or `latency` under fifo/rr).
    pub real_time: Option<Measured>,
    /// Real fast: SCHED_OTHER, defaults (`latency --policy other`).
    pub real_fast: Option<Measured>,
    /// The time-sharing quantum (the kernel's base slice, or `--quantum`), and where it came from.
    pub quantum: Option<(u64, String)>,
    /// Real time's slowdown of each kind of work as `mckenney-choose` measured it here.
    pub slowdowns: Option<Slowdowns>,
}

/// Real time's time per work unit over real fast's, per kind of work, from a `mckenney-choose`
/// result (a kind it did not finish is `None`).
#[derive(Clone, Debug, Serialize)]
pub struct Slowdowns {
    pub source: String,
    pub compute: Option<f64>,
    pub kernel: Option<f64>,
    pub io: Option<f64>,
}

impl Slowdowns {
    pub fn of(&self, k: WorkKind) -> Option<f64> {
        match k {
            WorkKind::Compute => self.compute,
            WorkKind::Kernel => self.kernel,
            WorkKind::Io => self.io,
        }
    }
}

/// Whether a document is a `mckenney-choose` result.
pub fn is_choose(doc: &ResultDoc) -> bool {
    doc.extra.get("experiment").and_then(|v| v.as_str()) == Some(mckenney::CHOOSE)
}

/// What a `mckenney-choose` result measured: each configuration's start latency (idle and under
/// load; [`Facts::add`] keeps the worse) and real time's slowdown of each kind of work.
pub fn choose_reading(doc: &ResultDoc, source: &str) -> Result<(Vec<Reading>, Slowdowns), String> {
    let sl = doc
        .extra
        .get("slowdowns")
        .and_then(|v| v.as_object())
        .ok_or_else(|| format!("{source}: a mckenney-choose result without measured slowdowns"))?;
    let get = |k: &str| sl.get(k).and_then(|v| v.as_f64()).filter(|x| *x > 0.0);
    let slowdowns = Slowdowns {
        // A stored result is already named by the experiment ("stored mckenney-choose ID").
        source: if source.contains(mckenney::CHOOSE) {
            source.to_string()
        } else {
            format!("mckenney-choose ({source})")
        },
        compute: get("compute"),
        kernel: get("kernel"),
        io: get("io"),
    };
    let readings = doc
        .series
        .iter()
        // The kernel's own preemption mode only: the others are not what runs by default.
        .filter(|s| !s.extra.contains_key("preempt"))
        .filter_map(|s| {
            let m = Measured {
                source: format!("{source}: {} on CPU {}", s.name, fmt_cpu(s.cpu)),
                p99_9_ns: s.summary.percentiles.p99_9,
                max_ns: s.summary.max,
                cpu: s.cpu,
                steal: None,
                partial: interrupted(doc),
            };
            match s.extra.get("configuration").and_then(|v| v.as_str()) {
                Some("real_time") => Some(Reading::RealTime(m)),
                Some("real_fast") => Some(Reading::RealFast(m)),
                _ => None,
            }
        })
        .collect();
    Ok((readings, slowdowns))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    RealFast,
    RealTime,
    /// The real-time bubble of Fig. 9 without the measurements to settle it.
    BenchmarkBoth,
    /// The deadline cannot be met on this machine.
    Cannot,
}

impl Verdict {
    pub fn words(self) -> &'static str {
        match self {
            Verdict::RealFast => "real fast",
            Verdict::RealTime => "real time",
            Verdict::BenchmarkBoth => "benchmark both",
            Verdict::Cannot => "cannot meet the deadline",
        }
    }
}

/// One question of the flow, the fact that answered it, and the answer.
#[derive(Clone, Debug, Serialize)]
pub struct Step {
    pub question: String,
    pub fact: String,
    pub answer: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Advice {
    pub steps: Vec<Step>,
    pub verdict: Verdict,
    /// Why, in one sentence with the deciding figures.
    pub reason: String,
    /// For real time: the settings that meet the deadline here. For the others: what to run or
    /// change next.
    pub next: Vec<String>,
    /// Work duration above which real fast completes sooner (Figs. 5-7), when both were measured
    /// and real time slows the work.
    pub crossover_ns: Option<u64>,
    /// The measurements the figures come from.
    pub measured_by: Vec<String>,
}

// Facts this machine and its results give.

/// Available memory (`MemAvailable`), bytes.
pub fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: u64 = text
        .lines()
        .find(|l| l.starts_with("MemAvailable:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// EEVDF's base slice: debugfs when mounted, else the kernel's default for this many CPUs
/// (0.75 ms x (1 + log2 of the CPUs, at most 8)).
pub fn base_slice(cpus: usize) -> (u64, String) {
    if let Some(ns) = std::fs::read_to_string("/sys/kernel/debug/sched/base_slice_ns")
        .ok()
        .and_then(|s| s.trim().parse().ok())
    {
        return (ns, "the kernel's base slice".into());
    }
    let factor = 1 + cpus.clamp(1, 8).ilog2() as u64;
    (
        750_000 * factor,
        format!("the default base slice for {cpus} CPUs"),
    )
}

/// Which configuration a document measured, and its start latency.
pub enum Reading {
    RealTime(Measured),
    RealFast(Measured),
}

/// The start latency a `check` or `latency` document measured, and which configuration it was
/// (a `--policy other` latency stands for real fast).
pub fn reading(doc: &ResultDoc, source: &str) -> Result<Reading, String> {
    let cmd = doc.command.get(1).map(String::as_str).unwrap_or("");
    let mut partial = interrupted(doc);
    let series: Vec<_> = match cmd {
        "check" => {
            // The hybrid phase under load: what real time buys on a busy machine. The idle phase
            // stands in only when the check ended before its loaded phase, and says so.
            let find = |n: &str| doc.series.iter().find(|s| s.name == n);
            let s = match (find("punctual hybrid loaded"), find("punctual hybrid idle")) {
                (Some(s), _) => s,
                (None, Some(s)) => {
                    partial = Some(format!(
                        "idle phase only: the check {} before its loaded phase, and a loaded \
                         machine's tail is longer (run `punctual check` to the end)",
                        if partial.is_some() {
                            "was interrupted"
                        } else {
                            "ended"
                        }
                    ));
                    s
                }
                _ => return Err(format!("{source}: a check result without its hybrid phases")),
            };
            vec![s]
        }
        "latency" => doc.series.iter().collect(),
        other => {
            return Err(format!(
                "{source} is a `{other}` result; advise reads `check`, `latency` and `mckenney-choose` results"
            ))
        }
    };
    let worst = series
        .iter()
        .max_by_key(|s| s.summary.percentiles.p99_9)
        .ok_or_else(|| format!("{source}: the result has no series"))?;
    let max = series.iter().map(|s| s.summary.max).max().unwrap_or(0);
    let cpu = worst.cpu;
    // check runs four phases of duration_ns each; latency one.
    let phases = if cmd == "check" { 4 } else { 1 };
    let wall = doc
        .settings
        .extra
        .get("duration_ns")
        .and_then(|v| v.as_u64())
        .map(|d| d * phases);
    let steal = doc.settings.extra.get("steal_ns").and_then(|m| {
        let stolen = m.get(cpu?.to_string())?.as_u64()?;
        Some(stolen as f64 / wall.filter(|&w| w > 0)? as f64)
    });
    let m = Measured {
        source: format!(
            "{source}: {} on CPU {}{}",
            worst.name,
            fmt_cpu(cpu),
            if partial.is_some() { " (partial)" } else { "" }
        ),
        p99_9_ns: worst.summary.percentiles.p99_9,
        max_ns: max,
        cpu,
        steal,
        partial,
    };
    Ok(if doc.settings.policy.as_deref() == Some("other") {
        Reading::RealFast(m)
    } else {
        Reading::RealTime(m)
    })
}

/// Why a document's figures are not a whole run's, when it was interrupted.
fn interrupted(doc: &ResultDoc) -> Option<String> {
    (doc.status == punctual_result::Status::Interrupted)
        .then(|| "from an interrupted run (cut short by Ctrl-C)".to_string())
}

fn fmt_cpu(c: Option<usize>) -> String {
    c.map(|c| c.to_string()).unwrap_or_else(|| "-".into())
}

impl Facts {
    /// Take what a result measured: both configurations and the slowdowns from a
    /// `mckenney-choose` result, one reading from any other.
    pub fn read(&mut self, doc: &ResultDoc, source: &str) -> Result<(), String> {
        if is_choose(doc) {
            let (readings, slowdowns) = choose_reading(doc, source)?;
            readings.into_iter().for_each(|r| self.add(r));
            self.slowdowns = Some(slowdowns);
        } else {
            self.add(reading(doc, source)?);
        }
        Ok(())
    }

    /// Take a reading; with several of a kind, a whole measurement beats a partial one, then the
    /// worst p99.9 decides (a deadline must hold in all of them).
    pub fn add(&mut self, r: Reading) {
        let (slot, m) = match r {
            Reading::RealTime(m) => (&mut self.real_time, m),
            Reading::RealFast(m) => (&mut self.real_fast, m),
        };
        let rank = |m: &Measured| (m.partial.is_none(), m.p99_9_ns);
        if slot.as_ref().is_none_or(|old| rank(&m) > rank(old)) {
            *slot = Some(m);
        }
    }
}

/// The flow needs a deadline unless only throughput matters.
pub fn check_needs(n: &Needs) -> Result<(), String> {
    if !n.throughput_only && n.deadline_ns.is_none() {
        return Err(
            "advise needs --deadline DURATION (when the work must be done), or \
                    --throughput-only when only the amount of work per second matters"
                .into(),
        );
    }
    if let Some(u) = n.utilization {
        if !(0.0..=1.0).contains(&u) {
            return Err("--utilization: give a percentage from 0 to 100".into());
        }
    }
    Ok(())
}

fn step(steps: &mut Vec<Step>, q: &str, fact: String, answer: &str) {
    steps.push(Step {
        question: q.into(),
        fact,
        answer: answer.into(),
    });
}

fn done(steps: &mut Vec<Step>, verdict: Verdict, reason: String, next: Vec<String>) -> Advice {
    Advice {
        steps: std::mem::take(steps),
        verdict,
        reason,
        next,
        crossover_ns: None,
        measured_by: Vec::new(),
    }
}

fn decided(
    steps: &mut Vec<Step>,
    verdict: Verdict,
    reason: String,
    next: Vec<String>,
) -> Option<Advice> {
    Some(done(steps, verdict, reason, next))
}

const MEASURE_RT: &str = "punctual check   (30 s: real-time start latency, idle and under load)";
const MEASURE_FAST: &str =
    "punctual latency --policy other -D 60s --json fast.json   (real fast's start latency)";

/// Fig. 9, step by step.
pub fn advise(n: &Needs, f: &Facts) -> Advice {
    let mut steps = Vec::new();
    if let Some(a) = principles(n, f, &mut steps) {
        return a;
    }
    let w = match work_fits(n, f, &mut steps) {
        Ok(w) => w,
        Err(a) => return a,
    };
    let Work {
        deadline,
        work,
        rt_slowdown,
        rt_work,
        ..
    } = w;
    let virt = virtualised(f, &mut steps);
    // 6. The real-time bubble: settle it with this machine's start latency.
    let Some(rt) = &f.real_time else {
        return unmeasured(f, &mut steps);
    };
    if let Some(a) = real_time_misses(n, f, rt, &w, virt, &mut steps) {
        return a;
    }
    if let Some(why) = &rt.partial {
        return partial_meets(rt, why, &mut steps);
    }
    let rt_total = rt.p99_9_ns.saturating_add(rt_work);
    // Both meet it? Then real fast keeps the throughput (Figs. 5-7: total delay decides).
    let settings = format!(
        "--policy fifo -p 98 (punctual's sleep-then-spin, mlockall, cpu_dma_latency 0){}: \
         p99.9 {} measured",
        rt.cpu
            .map(|c| format!(", CPU {c} kept for it (punctual shield --cpus {c})"))
            .unwrap_or_default(),
        format_ns(rt.p99_9_ns),
    );
    let queue_wait = neighbours(n, f, &w, &mut steps);
    let queue_ok = queue_wait.is_none_or(|(_, fits, _)| fits);
    let mut a = if let Some(fast) = &f.real_fast {
        let fast_total = fast.p99_9_ns.saturating_add(work);
        let fast_ok =
            fast_total <= deadline && n.jitter_ns.is_none_or(|j| fast.p99_9_ns <= j) && queue_ok;
        step(
            &mut steps,
            "Does real fast meet it too?",
            format!(
                "p99.9 start {} + work {} = {}",
                format_ns(fast.p99_9_ns),
                format_ns(work),
                format_ns(fast_total),
            ),
            if fast_ok { "yes: real fast" } else { "no" },
        );
        if fast_ok {
            done(
                &mut steps,
                Verdict::RealFast,
                format!(
                    "both meet the {} deadline ({} real fast, {} real time at p99.9); real fast \
                     keeps the throughput",
                    format_ns(deadline),
                    format_ns(fast_total),
                    format_ns(rt_total)
                ),
                vec![],
            )
        } else {
            done(
                &mut steps,
                Verdict::RealTime,
                format!(
                    "real time completes by {} at p99.9, real fast by {}{}; the deadline is {}",
                    format_ns(rt_total),
                    format_ns(fast_total),
                    match queue_wait {
                        Some((wait, false, _)) => format!(
                            " measured, but by {} behind its CPU-bound neighbours",
                            format_ns(wait.saturating_add(work))
                        ),
                        _ => String::new(),
                    },
                    format_ns(deadline)
                ),
                vec![settings],
            )
        }
    } else {
        let mut a = done(
            &mut steps,
            Verdict::RealTime,
            format!(
                "real time completes by {} at p99.9 against the {} deadline; real fast was not \
                 measured",
                format_ns(rt_total),
                format_ns(deadline)
            ),
            vec![settings],
        );
        a.next
            .push(format!("to see whether real fast would do: {MEASURE_FAST}"));
        a
    };
    if let Some((wait, false, q_max)) = queue_wait {
        a.next.push(format!(
            "under time sharing the neighbours alone can hold the work back {}: a quantum under {} \
             would bound it (Etsion section 8), at the price of more switches",
            format_ns(wait),
            format_ns(q_max)
        ));
    }
    a.measured_by = [Some(rt), f.real_fast.as_ref()]
        .into_iter()
        .flatten()
        .map(|m| m.source.clone())
        .collect();
    if let (Some(fast), true) = (&f.real_fast, rt_slowdown > 1.0) {
        a.crossover_ns = crossover(rt.p99_9_ns, rt_slowdown, fast.p99_9_ns, 1.0);
    }
    a
}

/// Steps 1-4: throughput, utilization, memory, long work items (principles 1, 2, 3, 6).
fn principles(n: &Needs, f: &Facts, steps: &mut Vec<Step>) -> Option<Advice> {
    // 1. Throughput or latency (principle 1).
    if n.throughput_only {
        step(
            steps,
            "Does only throughput matter?",
            "--throughput-only".into(),
            "yes: real fast",
        );
        return decided(
            steps,
            Verdict::RealFast,
            "only the amount of work done per second matters: a real-time configuration buys \
             deadlines with throughput (McKenney, principle 1)"
                .into(),
            vec![],
        );
    }
    step(
        steps,
        "Does only throughput matter?",
        format!(
            "a deadline of {}",
            format_ns(n.deadline_ns.unwrap_or_default())
        ),
        "no",
    );
    // 2. Utilization (principle 2).
    match n.utilization {
        Some(u) if u > pb::UTILIZATION_LIMIT => {
            step(
                steps,
                "Must the CPUs run above 50 % at peak?",
                format!("--utilization {:.0} %", u * 100.0),
                "yes: real fast",
            );
            return decided(
                steps,
                Verdict::RealFast,
                format!(
                    "at {:.0} % peak utilization, peak loads stretch every latency tail; real-time \
                     practice keeps CPUs at about 50 % (principle 2)",
                    u * 100.0
                ),
                vec!["to keep the deadline, lower the peak utilization to 50 % or less and ask again"
                    .into()],
            );
        }
        Some(u) => step(
            steps,
            "Must the CPUs run above 50 % at peak?",
            format!("--utilization {:.0} %", u * 100.0),
            "no",
        ),
        None => step(
            steps,
            "Must the CPUs run above 50 % at peak?",
            "not given (--utilization): assumed no".into(),
            "no",
        ),
    }
    // 3. Memory (principle 3): mlockall needs the whole working set resident.
    match (n.memory_bytes, f.mem_available_bytes) {
        (Some(m), Some(avail)) if m > avail => {
            step(
                steps,
                "Does the workload fill memory?",
                format!("needs {}, {} available", bytes(m), bytes(avail)),
                "yes: real fast",
            );
            return decided(
                steps,
                Verdict::RealFast,
                format!(
                    "{} do not fit in the {} available: mlockall cannot hold it, and page faults \
                     take milliseconds (principle 3)",
                    bytes(m),
                    bytes(avail)
                ),
                vec!["add memory or shrink the working set, then ask again".into()],
            );
        }
        (Some(m), avail) => step(
            steps,
            "Does the workload fill memory?",
            format!(
                "needs {}, {} available",
                bytes(m),
                avail.map(bytes).unwrap_or_else(|| "unknown".into())
            ),
            "no",
        ),
        (None, _) => step(
            steps,
            "Does the workload fill memory?",
            "not given (--memory): assumed no".into(),
            "no",
        ),
    }
    // 4. Long work items (principle 6): the start latency is lost in the noise.
    if let Some(w) = n.work_ns.filter(|&w| w >= pb::LONG_WORK_NS) {
        step(
            steps,
            "Does each work item take hundreds of milliseconds?",
            format!("--work {}", format_ns(w)),
            "yes: real fast",
        );
        return decided(
            steps,
            Verdict::RealFast,
            format!(
                "a {} work item dwarfs any start latency; what decides completion is how fast the \
                 work runs (principle 6)",
                format_ns(w)
            ),
            vec![],
        );
    }
    step(
        steps,
        "Does each work item take hundreds of milliseconds?",
        n.work_ns
            .map(|w| format!("--work {}", format_ns(w)))
            .unwrap_or_else(|| "not given (--work): assumed short".into()),
        "no",
    );
    None
}

/// The deadline, the work and what the real-time configuration makes of it.
struct Work {
    deadline: u64,
    work: u64,
    rt_slowdown: f64,
    rt_work: u64,
    /// Where the slowdown comes from, for the step texts.
    slow_from: String,
}

fn work_fits(n: &Needs, f: &Facts, steps: &mut Vec<Step>) -> Result<Work, Advice> {
    let deadline = n.deadline_ns.unwrap_or_default();
    let kind = n.kind.unwrap_or(WorkKind::Compute);
    let (rt_slowdown, slow_from) = slowdown(f, kind, steps);
    let work = n.work_ns.unwrap_or(0);
    let rt_work = (work as f64 * rt_slowdown) as u64;
    if rt_work > deadline {
        step(
            steps,
            "Does the work itself fit the deadline?",
            format!(
                "{} of work{} against {}",
                format_ns(rt_work),
                slowed(rt_slowdown, &slow_from),
                format_ns(deadline)
            ),
            "no",
        );
        return Err(done(
            steps,
            Verdict::Cannot,
            format!(
                "the work alone takes {}, longer than the {} deadline",
                format_ns(rt_work),
                format_ns(deadline)
            ),
            vec!["a faster CPU, or work split into smaller items".into()],
        ));
    }
    Ok(Work {
        deadline,
        work,
        rt_slowdown,
        rt_work,
        slow_from,
    })
}

/// How much slower real time runs this kind of work, and from where: measured here by
/// `mckenney-choose`, else McKenney's Table 1 on a PREEMPT_RT kernel, else none (on this kernel
/// real time is a policy, memory locking and spinning, which leave the work's speed alone).
fn slowdown(f: &Facts, kind: WorkKind, steps: &mut Vec<Step>) -> (f64, String) {
    let name = kind_key(kind);
    let (s, from, fact) = match f.slowdowns.as_ref().and_then(|m| Some((m.of(kind)?, m))) {
        Some((s, m)) => (
            s,
            format!("measured by {}", m.source),
            format!("{name} work x{s:.3}, measured here by {}", m.source),
        ),
        None if f.host.realtime => {
            let s = kind.rt_kernel_slowdown();
            (
                s,
                "McKenney Table 1".to_string(),
                format!(
                    "{name} work x{s:.3}, published (McKenney Table 1, a PREEMPT_RT kernel); \
                     measure it here: punctual experiment run mckenney-choose"
                ),
            )
        }
        None => (
            1.0,
            String::new(),
            "not measured (punctual experiment run mckenney-choose); this kernel is not \
             PREEMPT_RT, so none assumed"
                .to_string(),
        ),
    };
    step(
        steps,
        "Does real time slow this work down?",
        fact,
        &if s > 1.0 {
            format!("yes: x{s:.3}")
        } else {
            format!("no: x{s:.3}")
        },
    );
    (s, from)
}

/// Step 5, principle 4: the host can stop this machine's CPUs.
fn virtualised(f: &Facts, steps: &mut Vec<Step>) -> bool {
    let virt = if f.host.virtualized {
        let steal = f
            .real_time
            .as_ref()
            .and_then(|m| m.steal)
            .map(|s| {
                format!(
                    ", {:.2} % of the measured run stolen by the host",
                    s * 100.0
                )
            })
            .unwrap_or_default();
        step(
            steps,
            "Does it run virtualised?",
            format!("this machine is a virtual machine{steal}"),
            "yes: real fast, unless this machine's figures below meet the deadline",
        );
        true
    } else {
        step(
            steps,
            "Does it run virtualised?",
            "no hypervisor found".into(),
            "no",
        );
        false
    };
    virt
}

/// No start latency measured: say what to run.
fn unmeasured(f: &Facts, steps: &mut Vec<Step>) -> Advice {
    step(
        steps,
        "Does real time meet the deadline here?",
        "no start-latency measurement found".into(),
        "unknown: measure",
    );
    let mut next = vec![MEASURE_RT.to_string()];
    if f.real_fast.is_none() {
        next.push(MEASURE_FAST.into());
    }
    next.push("then ask again (or pass result files with --from)".into());
    done(
        steps,
        Verdict::BenchmarkBoth,
        "the flow leads to the real-time bubble; only this machine's start latency can \
             settle it"
            .into(),
        next,
    )
}

/// Real time met the deadline, but only in part of a measurement (an interrupted run, a check's
/// idle phase): a deadline missed there is missed, one met there is not settled.
fn partial_meets(rt: &Measured, why: &str, steps: &mut Vec<Step>) -> Advice {
    step(
        steps,
        "Is that figure the whole measurement?",
        why.to_string(),
        "no: not settled",
    );
    let mut a = done(
        steps,
        Verdict::BenchmarkBoth,
        format!(
            "real time met it in part of a measurement only (p99.9 {}, {why})",
            format_ns(rt.p99_9_ns)
        ),
        vec![MEASURE_RT.to_string()],
    );
    a.measured_by.push(rt.source.clone());
    a
}

/// Does the real-time configuration meet the deadline (and the jitter) here? If not, the verdict.
fn real_time_misses(
    n: &Needs,
    f: &Facts,
    rt: &Measured,
    w: &Work,
    virt: bool,
    steps: &mut Vec<Step>,
) -> Option<Advice> {
    let Work {
        deadline,
        rt_slowdown,
        rt_work,
        ..
    } = *w;
    let slow_from = &w.slow_from;
    let rt_total = rt.p99_9_ns.saturating_add(rt_work);
    let jitter_ok = n.jitter_ns.is_none_or(|j| rt.p99_9_ns <= j);
    step(
        steps,
        "Does real time meet the deadline here?",
        format!(
            "p99.9 start {} + work {}{} = {} against {}{}",
            format_ns(rt.p99_9_ns),
            format_ns(rt_work),
            slowed(rt_slowdown, slow_from),
            format_ns(rt_total),
            format_ns(deadline),
            n.jitter_ns
                .map(|j| format!(
                    ", jitter {} within {}",
                    format_ns(rt.p99_9_ns),
                    format_ns(j)
                ))
                .unwrap_or_default(),
        ),
        if rt_total <= deadline && jitter_ok {
            "yes"
        } else {
            "no"
        },
    );
    if rt_total > deadline || !jitter_ok {
        let what = if !jitter_ok && rt_total <= deadline {
            format!(
                "this machine's p99.9 start latency is {}, more than the {} jitter allowed",
                format_ns(rt.p99_9_ns),
                format_ns(n.jitter_ns.unwrap_or_default())
            )
        } else {
            format!(
                "this machine cannot: its p99.9 start latency is {} (max {}), so work completes \
                 by {} at p99.9; the deadline is {}",
                format_ns(rt.p99_9_ns),
                format_ns(rt.max_ns),
                format_ns(rt_total),
                format_ns(deadline)
            )
        };
        let cpu = rt.cpu.map(|c| c.to_string()).unwrap_or_else(|| "N".into());
        let mut next = vec![format!(
            "a CPU kept for the work: punctual shield --cpus {cpu} -- COMMAND, then measure again"
        )];
        if !f.host.realtime {
            next.push(
                "a PREEMPT_RT kernel (shorter kernel sections that cannot be preempted)".into(),
            );
        }
        if virt {
            next.push(
                "bare metal, or a host that dedicates CPUs to this guest: the host's stalls are \
                 in these figures and no guest setting removes them"
                    .into(),
            );
        }
        let mut a = done(steps, Verdict::Cannot, what, next);
        a.measured_by.push(rt.source.clone());
        return Some(a);
    }
    None
}

/// Etsion section 8: behind N-1 CPU-bound neighbours, time sharing may start the work a quantum
/// for each of them late, whatever a quiet measurement showed: (wait, fits, the largest quantum
/// that would fit).
fn neighbours(n: &Needs, f: &Facts, w: &Work, steps: &mut Vec<Step>) -> Option<(u64, bool, u64)> {
    let Work { deadline, work, .. } = *w;
    match (n.competing, &f.quantum) {
        (Some(c), Some((q, from))) if c > 1 => {
            let wait = q.saturating_mul(u64::from(c - 1));
            let fits = wait.saturating_add(work) <= deadline;
            step(
                steps,
                "Can the CPU-bound neighbours delay real fast past it?",
                format!(
                    "{} others x {} quantum ({from}) = {} + work {} against {}",
                    c - 1,
                    format_ns(*q),
                    format_ns(wait),
                    format_ns(work),
                    format_ns(deadline)
                ),
                if fits {
                    "no"
                } else {
                    "yes: real fast cannot promise it"
                },
            );
            Some((wait, fits, deadline.saturating_sub(work) / u64::from(c - 1)))
        }
        _ => None,
    }
}

fn slowed(s: f64, from: &str) -> String {
    if s > 1.0 {
        format!(" (slowed {:.0} % in real time, {from})", (s - 1.0) * 100.0)
    } else {
        String::new()
    }
}

fn bytes(b: u64) -> String {
    const GIB: f64 = (1u64 << 30) as f64;
    const MIB: f64 = (1u64 << 20) as f64;
    if b as f64 >= GIB {
        format!("{:.1} GiB", b as f64 / GIB)
    } else {
        format!("{:.0} MiB", b as f64 / MIB)
    }
}

/// The flow as a table, the verdict and what to do under it.
pub fn table(a: &Advice) -> Table {
    let mut t = Table::new(&["question (McKenney Fig. 9)", "fact", "answer"])
        .titled("Real time or real fast?");
    for s in &a.steps {
        t.row([s.question.clone(), s.fact.clone(), s.answer.clone()]);
    }
    t.note(format!("Verdict: {}: {}.", a.verdict.words(), a.reason));
    if let Some(c) = a.crossover_ns {
        t.note(format!(
            "Work items longer than {} complete sooner real fast (Figs. 5-7: start latency + work x slowdown).",
            format_ns(c)
        ));
    }
    for n in &a.next {
        t.note(format!("  {n}"));
    }
    for m in &a.measured_by {
        t.note(format!("measured: {m}"));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(virtualized: bool, realtime: bool) -> HostFacts {
        HostFacts {
            kernel: "6.8.0".into(),
            preempt: "dynamic: voluntary".into(),
            realtime,
            cpus: 2,
            clocksource: "tsc".into(),
            virtualized,
            hz: Some(250),
            hostname: "test".into(),
            cpu_model: "test".into(),
        }
    }

    fn measured(p999_us: u64) -> Measured {
        Measured {
            source: "check.json: punctual hybrid loaded".into(),
            p99_9_ns: p999_us * 1_000,
            max_ns: p999_us * 3_000,
            cpu: Some(1),
            steal: Some(0.01),
            partial: None,
        }
    }

    fn facts(rt: Option<u64>, fast: Option<u64>) -> Facts {
        Facts {
            host: host(false, false),
            mem_available_bytes: Some(8 << 30),
            real_time: rt.map(measured),
            real_fast: fast.map(measured),
            quantum: Some((1_500_000, "test".into())),
            slowdowns: None,
        }
    }

    fn needs(deadline_us: u64, work_us: u64) -> Needs {
        Needs {
            deadline_ns: Some(deadline_us * 1_000),
            work_ns: Some(work_us * 1_000),
            ..Needs::default()
        }
    }

    /// Every exit of Fig. 9, each from the inputs that lead there, with the step that decided it.
    #[test]
    fn every_branch_of_the_decision_flow() {
        let cases: Vec<(&str, Needs, Facts, Verdict, &str)> = vec![
            (
                "throughput only",
                Needs {
                    throughput_only: true,
                    ..Needs::default()
                },
                facts(Some(20), None),
                Verdict::RealFast,
                "Does only throughput matter?",
            ),
            (
                "high utilization",
                Needs {
                    utilization: Some(0.8),
                    ..needs(250, 100)
                },
                facts(Some(20), None),
                Verdict::RealFast,
                "Must the CPUs run above 50 % at peak?",
            ),
            (
                "memory full",
                Needs {
                    memory_bytes: Some(16 << 30),
                    ..needs(250, 100)
                },
                facts(Some(20), None),
                Verdict::RealFast,
                "Does the workload fill memory?",
            ),
            (
                "long work",
                needs(1_000_000, 300_000),
                facts(Some(20), None),
                Verdict::RealFast,
                "Does each work item take hundreds of milliseconds?",
            ),
            (
                "work longer than the deadline",
                needs(250, 300),
                facts(Some(20), None),
                Verdict::Cannot,
                "Does the work itself fit the deadline?",
            ),
            (
                "nothing measured",
                needs(250, 100),
                facts(None, None),
                Verdict::BenchmarkBoth,
                "Does real time meet the deadline here?",
            ),
            (
                "real time meets it, real fast not measured",
                needs(250, 100),
                facts(Some(20), None),
                Verdict::RealTime,
                "Does real time meet the deadline here?",
            ),
            (
                "real time meets it, real fast does not",
                needs(250, 100),
                facts(Some(20), Some(3_000)),
                Verdict::RealTime,
                "Does real fast meet it too?",
            ),
            (
                "both meet it",
                needs(10_000, 100),
                facts(Some(20), Some(3_000)),
                Verdict::RealFast,
                "Does real fast meet it too?",
            ),
            (
                "real fast measured in time, but 8 CPU-bound neighbours queue it (Etsion)",
                Needs {
                    competing: Some(8),
                    ..needs(10_000, 100)
                },
                facts(Some(20), Some(3_000)),
                Verdict::RealTime,
                "Does real fast meet it too?",
            ),
            (
                "the machine is too slow",
                needs(250, 100),
                facts(Some(4_000), None),
                Verdict::Cannot,
                "Does real time meet the deadline here?",
            ),
            (
                "the jitter is too wide",
                Needs {
                    jitter_ns: Some(111_000),
                    ..needs(10_000, 100)
                },
                facts(Some(500), None),
                Verdict::Cannot,
                "Does real time meet the deadline here?",
            ),
        ];
        for (what, n, f, verdict, last) in cases {
            check_needs(&n).unwrap();
            let a = advise(&n, &f);
            assert_eq!(a.verdict, verdict, "{what}: {a:#?}");
            assert_eq!(a.steps.last().unwrap().question, last, "{what}: {a:#?}");
            assert!(!a.reason.is_empty(), "{what}");
        }
    }

    #[test]
    fn real_time_gives_settings_and_the_measurement_they_buy() {
        let a = advise(&needs(250, 100), &facts(Some(20), Some(3_000)));
        assert_eq!(a.verdict, Verdict::RealTime);
        assert!(a.next[0].contains("--policy fifo -p 98"), "{:?}", a.next);
        assert!(
            a.next[0].contains("punctual shield --cpus 1"),
            "{:?}",
            a.next
        );
        assert!(a.next[0].contains("p99.9 20.0 us"), "{:?}", a.next);
    }

    #[test]
    fn a_machine_that_cannot_says_its_figures_and_what_would_change_it() {
        let mut f = facts(Some(4_000), None);
        f.host.virtualized = true;
        let a = advise(&needs(250, 100), &f);
        assert_eq!(a.verdict, Verdict::Cannot);
        assert!(
            a.reason.contains("p99.9 start latency is 4.00 ms"),
            "{}",
            a.reason
        );
        assert!(a.reason.contains("the deadline is 250 us"), "{}", a.reason);
        assert!(a.next.iter().any(|n| n.contains("PREEMPT_RT")));
        assert!(a.next.iter().any(|n| n.contains("bare metal")));
    }

    #[test]
    fn without_measurements_it_says_what_to_run_first() {
        let a = advise(&needs(250, 100), &facts(None, None));
        assert!(a.next[0].starts_with("punctual check"), "{:?}", a.next);
        assert!(
            a.next[1].starts_with("punctual latency --policy other"),
            "{:?}",
            a.next
        );
    }

    #[test]
    fn a_missing_deadline_is_named() {
        let e = check_needs(&Needs::default()).unwrap_err();
        assert!(e.contains("--deadline"), "{e}");
        assert!(check_needs(&Needs {
            throughput_only: true,
            ..Needs::default()
        })
        .is_ok());
    }

    /// Figs. 5-7 with the paper's own slowdowns: a real-time kernel that starts in 20 us but runs
    /// kernel work 16.78 % slower loses to one that starts in 3 ms once the work passes
    /// (3000 - 20) / 0.1678 us, about 17.8 ms; for user-mode compute there is no crossover.
    #[test]
    fn crossover_on_curves_with_a_known_answer() {
        let c = crossover(20_000, pb::SLOWDOWN_KERNEL, 3_000_000, 1.0).unwrap();
        let expected = (3_000_000.0 - 20_000.0) / (pb::SLOWDOWN_KERNEL - 1.0);
        assert!((c as f64 - expected).abs() < 2.0, "{c} vs {expected}");
        assert!((17_700_000..17_900_000).contains(&c), "{c}");
        assert_eq!(crossover(20_000, 1.0, 3_000_000, 1.0), None);
        // Heavy I/O's 2-to-1 slowdown moves it to about 2.8 ms (the paper: about a millisecond).
        let io = crossover(20_000, pb::SLOWDOWN_IO, 3_000_000, 1.0).unwrap();
        assert!((2_700_000..2_900_000).contains(&io), "{io}");
        let mut f = facts(Some(20), Some(3_000));
        f.host.realtime = true;
        let a = advise(
            &Needs {
                kind: Some(WorkKind::Kernel),
                ..needs(10_000, 100)
            },
            &f,
        );
        assert_eq!(a.crossover_ns, Some(c));
    }

    /// Etsion's own example: 8 CONT processes with a 60 ms quantum wait up to 7 x 60 = 420 ms.
    #[test]
    fn neighbours_times_the_quantum_bound_real_fast() {
        let mut f = facts(Some(20), Some(3_000));
        f.quantum = Some((60_000_000, "Linux 2.4".into()));
        let a = advise(
            &Needs {
                competing: Some(8),
                ..needs(500_000, 100)
            },
            &f,
        );
        let step = a
            .steps
            .iter()
            .find(|s| s.question.starts_with("Can the CPU-bound neighbours"))
            .unwrap();
        assert!(step.fact.contains("= 420 ms"), "{}", step.fact);
        assert_eq!(a.verdict, Verdict::RealFast, "{a:#?}");
        let a = advise(
            &Needs {
                competing: Some(8),
                ..needs(100_000, 100)
            },
            &f,
        );
        assert_eq!(a.verdict, Verdict::RealTime, "{a:#?}");
        assert!(
            a.next.iter().any(|n| n.contains("a quantum under 14.3 ms")),
            "{:?}",
            a.next
        );
    }

    #[test]
    fn published_table_1_slowdowns() {
        assert!((pb::SLOWDOWN_KERNEL - 1.1678).abs() < 1e-4);
        assert!((pb::SLOWDOWN_IO - 2.0752).abs() < 1e-4);
    }

    /// A `check` document with the given hybrid phases (p99.9 in us) and status.
    fn check_doc(phases: &[(&str, u64)], status: punctual_result::Status) -> ResultDoc {
        let mut d = ResultDoc::new(
            vec!["punctual".into(), "check".into()],
            host(false, false),
            "2026-11-27T10:00:00Z".into(),
        );
        d.status = status;
        d.settings.policy = Some("fifo".into());
        for (name, p999_us) in phases {
            let mut r = punctual_stats::Recorder::new();
            for _ in 0..1000 {
                r.record(p999_us * 1_000);
            }
            d.series.push(punctual_result::Series::from_recorder(
                *name,
                "lateness",
                Some(1),
                &r,
            ));
        }
        d
    }

    /// Issue 31 item 3: after Ctrl-C in a check's loaded phase, advise took the idle phase's
    /// 176 us and said "real time completes", where the complete check said "cannot" (1.86 ms).
    #[test]
    fn an_interrupted_check_without_its_loaded_phase_never_settles_a_deadline_as_met() {
        use punctual_result::Status;
        let idle_only = check_doc(&[("punctual hybrid idle", 176)], Status::Interrupted);
        let Reading::RealTime(m) = reading(&idle_only, "check.json").unwrap() else {
            panic!("a fifo check is real time");
        };
        let why = m.partial.clone().expect("an idle-only check is partial");
        assert!(
            why.contains("idle phase only") && why.contains("interrupted"),
            "{why}"
        );
        assert!(m.source.contains("punctual hybrid idle"), "{}", m.source);
        let mut f = facts(None, None);
        f.add(Reading::RealTime(m.clone()));
        let a = advise(&needs(1_000, 100), &f);
        assert_eq!(a.verdict, Verdict::BenchmarkBoth, "{a:#?}");
        assert!(a.reason.contains("idle phase only"), "{}", a.reason);
        assert!(a.next[0].starts_with("punctual check"), "{:?}", a.next);
        // What the idle phase alone misses is missed under load too.
        let a = advise(&needs(150, 100), &f);
        assert_eq!(a.verdict, Verdict::Cannot, "{a:#?}");
        // A complete check's loaded phase beats the partial figure, even a better one.
        let whole = check_doc(
            &[
                ("punctual hybrid idle", 150),
                ("punctual hybrid loaded", 1_860),
            ],
            Status::Ok,
        );
        let Reading::RealTime(w) = reading(&whole, "old.json").unwrap() else {
            panic!("a fifo check is real time");
        };
        assert!(w.partial.is_none() && w.source.contains("loaded"), "{w:?}");
        f.add(Reading::RealTime(w));
        assert_eq!(f.real_time.as_ref().unwrap().p99_9_ns, 1_860_000);
        let mut g = facts(None, None);
        g.add(Reading::RealTime(
            reading(&whole, "old.json")
                .map(|r| match r {
                    Reading::RealTime(m) | Reading::RealFast(m) => m,
                })
                .unwrap(),
        ));
        g.add(Reading::RealTime(m));
        assert_eq!(g.real_time.as_ref().unwrap().p99_9_ns, 1_860_000);
        assert_eq!(advise(&needs(1_000, 100), &g).verdict, Verdict::Cannot);
    }

    #[test]
    fn an_interrupted_check_with_its_loaded_phase_is_still_named_partial() {
        use punctual_result::Status;
        let d = check_doc(
            &[("punctual hybrid idle", 20), ("punctual hybrid loaded", 40)],
            Status::Interrupted,
        );
        let Reading::RealTime(m) = reading(&d, "check.json").unwrap() else {
            panic!("a fifo check is real time");
        };
        assert_eq!(m.p99_9_ns, 40_000);
        assert!(
            m.partial.as_deref().unwrap().contains("interrupted"),
            "{m:?}"
        );
    }
}
