//! `punctual run PLAN` (the dispatcher) and `punctual plan check|compile|decode`.

use crate::cli::{duration, OutputArgs, RtArgs};
use crate::session::{show, validate_rt, Exports, Live, Session};
use clap::{Args, Subcommand};
use punctual_dispatch::{Outcome, RunConfig};
use punctual_plan::admission::{self, Config as AdmitConfig, Report};
use punctual_plan::{Offset, Plan, PlanError};
use punctual_result::export::{Csv, Json};
use punctual_result::{doc::kind, Failure, Output, ResultDoc, Series, Table};
use punctual_time::{format_ns, MarginPolicy};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The plan: TOML, or compiled with `punctual plan compile`.
    pub plan: PathBuf,
    /// How long to run (default: the plan's duration, or until its last event, or until Ctrl-C).
    #[arg(short = 'D', long, value_parser = duration, value_name = "DURATION")]
    pub duration: Option<u64>,
    /// Spin margin: a duration, or auto (overrides the plan's spin_margin).
    #[arg(long, value_name = "DURATION|auto")]
    pub spin_margin: Option<MarginPolicy>,
    /// Run a plan that admission control refuses.
    #[arg(long)]
    pub force: bool,
    /// Largest work utilisation per CPU that admission control accepts.
    #[arg(long, default_value = "90%", value_parser = percent, value_name = "PERCENT")]
    pub bound: f64,
    /// Watchdog threshold (a CPU starved or an action stuck this long stops the run, exit 3), or off.
    #[arg(long, default_value = "2s", value_parser = watchdog, value_name = "DURATION|off")]
    pub watchdog: WatchdogArg,
    /// How long to wait for wake clients to attach before the first release.
    #[arg(long, default_value = "10s", value_parser = duration, value_name = "DURATION")]
    pub attach_timeout: u64,
    /// Background load while running: KIND[:N][@CPUS],... (kinds: cpu, io).
    #[arg(long, value_name = "SPEC")]
    pub load: Option<punctual_load::LoadSpec>,
    /// Watch the CPUs for 0.5 s first and give automatic offsets that keep releases out of the
    /// interruptions seen (the timer tick and other periodic ones); the plan starts on their grid.
    #[arg(long)]
    pub avoid_interference: bool,
    #[command(flatten)]
    pub rt: RtArgs,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Subcommand, Debug)]
pub enum PlanCmd {
    /// Admission control and phasing: per-CPU utilisation, collisions, automatic offsets.
    Check(PlanCheckArgs),
    /// Write a plan in the compact binary form (24 bytes per event).
    Compile(PlanCompileArgs),
    /// Print a plan (TOML or compiled) as canonical TOML.
    Decode(PlanDecodeArgs),
}

#[derive(Args, Debug)]
pub struct PlanCheckArgs {
    pub plan: PathBuf,
    /// Dispatcher CPUs (default: the plan's cpus, or the last online CPU).
    #[arg(short = 'a', long, value_name = "CPUS")]
    pub affinity: Option<String>,
    /// Largest work utilisation per CPU.
    #[arg(long, default_value = "90%", value_parser = percent, value_name = "PERCENT")]
    pub bound: f64,
    /// Spin margin assumed for the CPU cost (default: the plan's fixed margin, or 50us for auto).
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub spin_margin: Option<u64>,
}

#[derive(Args, Debug)]
pub struct PlanCompileArgs {
    pub plan: PathBuf,
    /// Extra events as CSV: a header `at_ns,action,data_hex`, then one event per line.
    #[arg(long, value_name = "CSV")]
    pub events: Option<PathBuf>,
    /// Where to write the compiled plan.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Output,
}

#[derive(Args, Debug)]
pub struct PlanDecodeArgs {
    pub plan: PathBuf,
    /// Where to write the TOML (default stdout).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<Output>,
}

fn percent(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("'{s}' is not a percentage like 90%"))?;
    if !(v > 0.0 && v <= 100.0) {
        return Err(format!("'{s}' must be above 0% and at most 100%"));
    }
    Ok(v / 100.0)
}

/// A watchdog threshold, or off.
#[derive(Clone, Copy, Debug)]
pub struct WatchdogArg(pub Option<u64>);

fn watchdog(s: &str) -> Result<WatchdogArg, String> {
    if s == "off" {
        return Ok(WatchdogArg(None));
    }
    let ns = duration(s).map_err(|e| format!("{e}; or off"))?;
    if ns < 100_000_000 {
        return Err(format!(
            "'{s}' is too short for a watchdog; use 100ms or more, or off"
        ));
    }
    Ok(WatchdogArg(Some(ns)))
}

fn load(path: &Path) -> Result<Plan, Failure> {
    punctual_plan::load(path).map_err(|e| match e {
        PlanError::Io { .. } => Failure::usage(format!("plan {e}")),
        other => Failure::usage(other.to_string()),
    })
}

fn is_compiled(path: &Path) -> bool {
    use std::io::Read;
    let mut b = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut b))
        .is_ok()
        && punctual_plan::compiled::is_compiled(&b)
}

/// Dispatcher CPUs: the flag, the plan's, or the last online CPU (CPU 0 takes most interrupts).
fn run_cpus(flag: Option<&str>, plan: &Plan) -> Result<Vec<usize>, Failure> {
    let cpus = match flag {
        Some(a) => punctual_rt::parse_cpu_list(a)
            .map_err(|e| Failure::usage(format!("-a/--affinity: {e}")))?,
        None => plan
            .cpus
            .clone()
            .unwrap_or_else(|| vec![*punctual_rt::online_cpus().last().expect("a CPU is online")]),
    };
    let mut all = cpus.clone();
    all.extend(plan.named_cpus());
    punctual_rt::affinity::check_online(&all)
        .map_err(|e| Failure::usage(format!("dispatcher CPUs: {e}")))?;
    Ok(cpus)
}

fn admit(plan: &mut Plan, cpus: &[usize], bound: f64, margin: u64) -> Report {
    let phased = admission::phase(plan, cpus);
    let mut r = admission::check(plan, cpus, &AdmitConfig { bound, margin });
    r.phased = phased;
    r
}

fn admission_table(plan: &Plan, r: &Report) -> Table {
    let mut t = Table::new(&[
        "cpu",
        "tasks",
        "events",
        "utilisation",
        "bound",
        "spin+work",
        "releases walked",
    ])
    .titled(format!(
        "Admission control for plan '{}' ({})",
        plan.name, plan.source
    ));
    for c in &r.cpus {
        t.row([
            c.cpu.to_string(),
            c.tasks.len().to_string(),
            c.events.to_string(),
            format!("{:.1} %", c.utilisation * 100.0),
            format!("{:.1} %", r.bound * 100.0),
            format!("{:.1} %", c.busy * 100.0),
            c.releases.to_string(),
        ]);
    }
    t.note(format!(
        "horizon {}{}; collisions: {}",
        format_ns(r.horizon),
        if r.complete {
            " (the whole hyperperiod and every event)"
        } else {
            " (bounded: hyperperiod too long or too many releases)"
        },
        r.collision_count
    ));
    for c in r.collisions.iter().take(5) {
        t.note(format!(
            "  CPU {} at {}: '{}' is due {} before '{}' can finish",
            c.cpu,
            format_ns(c.at),
            c.second,
            format_ns(c.overlap),
            c.first
        ));
    }
    for (name, o) in &r.phased {
        t.note(format!(
            "offset of '{name}' set to {}",
            punctual_plan::exact_duration(*o)
        ));
    }
    t.note("utilisation: sum of wcet / period; spin+work: share of the CPU the dispatcher spends spinning (margin before each release) or executing.");
    let reasons = r.reasons();
    if reasons.is_empty() {
        t.note("verdict: admitted");
    } else {
        for m in reasons {
            t.note(format!("verdict: refused: {m}"));
        }
    }
    t
}

pub fn plan_cmd(cmd: PlanCmd) -> anyhow::Result<i32> {
    match cmd {
        PlanCmd::Check(a) => {
            let mut plan = load(&a.plan)?;
            let cpus = run_cpus(a.affinity.as_deref(), &plan)?;
            let margin = a.spin_margin.unwrap_or(match plan.spin_margin {
                MarginPolicy::Fixed(m) => m,
                MarginPolicy::Auto => 50_000,
            });
            let r = admit(&mut plan, &cpus, a.bound, margin);
            print!("{}", admission_table(&plan, &r).render());
            Ok(if r.feasible() { 0 } else { 1 })
        }
        PlanCmd::Compile(a) => {
            a.output
                .check_writable()
                .map_err(|e| Failure::usage(format!("-o/--output: {e}")))?;
            if a.output.is_stdout() {
                return Err(Failure::usage(
                    "-o/--output: a compiled plan is binary; give a file, not -",
                )
                .into());
            }
            let mut plan = match &a.events {
                // The events come from the CSV: the TOML may hold only the header and actions.
                Some(_) if !is_compiled(&a.plan) => {
                    punctual_plan::parse::parse_file_without_events(&a.plan)
                        .map_err(|e| Failure::usage(e.to_string()))?
                }
                _ => load(&a.plan)?,
            };
            if let Some(csv) = &a.events {
                let f = std::fs::File::open(csv)
                    .map_err(|e| Failure::usage(format!("--events {}: {e}", csv.display())))?;
                let extra = punctual_plan::compiled::events_from_csv(
                    &plan,
                    std::io::BufReader::new(f),
                    &csv.display().to_string(),
                )
                .map_err(|e| Failure::usage(e.to_string()))?;
                plan.events.extend(extra);
                plan.events.sort_by_key(|e| e.at);
            }
            punctual_plan::parse::validate_plan(&plan)
                .map_err(|m| Failure::usage(format!("{}: {m}", a.plan.display())))?;
            let bytes = punctual_plan::compiled::to_bytes(&plan);
            a.output
                .write(&bytes)
                .map_err(|e| Failure::system(format!("writing {}: {e}", a.output)))?;
            eprintln!(
                "compiled {} task(s), {} action(s), {} event(s) into {} ({} bytes)",
                plan.tasks.len(),
                plan.actions.len(),
                plan.events.len(),
                a.output,
                bytes.len()
            );
            Ok(0)
        }
        PlanCmd::Decode(a) => {
            let out = a.output.unwrap_or(Output::Stdout);
            out.check_writable()
                .map_err(|e| Failure::usage(format!("-o/--output: {e}")))?;
            let plan = load(&a.plan)?;
            let text = punctual_plan::emit::to_toml(&plan);
            out.write(text.as_bytes())
                .map_err(|e| Failure::system(format!("writing {out}: {e}")))?;
            Ok(0)
        }
    }
}

pub fn run(a: RunArgs) -> anyhow::Result<i32> {
    // Validate everything before touching the system.
    validate_rt(&a.rt)?;
    let mut plan = load(&a.plan)?;
    let cpus = run_cpus(a.rt.affinity.as_deref(), &plan)?;
    let margin = a.spin_margin.unwrap_or(plan.spin_margin);
    if let MarginPolicy::Fixed(m) = margin {
        if let Some(p) = plan
            .tasks
            .iter()
            .map(|t| t.period)
            .min()
            .filter(|&p| m >= p)
        {
            return Err(Failure::usage(format!(
                "--spin-margin {} must be shorter than the shortest period {}",
                format_ns(m),
                format_ns(p)
            ))
            .into());
        }
    }
    // Tasks whose offsets admission control chooses (again, avoiding, with --avoid-interference).
    let auto_tasks: Vec<usize> = (0..plan.tasks.len())
        .filter(|&i| a.avoid_interference && plan.tasks[i].offset == Offset::Auto)
        .collect();
    let assumed_margin = if let MarginPolicy::Fixed(m) = margin {
        m
    } else {
        50_000
    };
    let mut report = admit(&mut plan, &cpus, a.bound, assumed_margin);
    if !report.feasible() {
        let reasons = report.reasons().join("; ");
        if !a.force {
            return Err(Failure::usage(format!("plan refused by admission control: {reasons}. See `punctual plan check`, or pass --force to run it anyway")).into());
        }
        eprintln!("punctual: running despite admission control (--force): {reasons}");
    }
    let shield_plan = if plan.shield {
        Some(punctual_dispatch::shield::plan(
            &cpus,
            &[std::process::id() as i32],
        )?)
    } else {
        None
    };
    let mut exports = Exports::default();
    exports.add("json", a.out.json.as_ref(), Json)?;
    exports.add("csv", a.out.csv.as_ref(), Csv)?;
    // Admitted with plain phasing; now the offsets that also avoid measured interference, kept if
    // admission control still agrees.
    let mut avoidance = None;
    if a.avoid_interference {
        let sched = punctual_rt::SchedParams {
            policy: a.rt.policy,
            priority: a.rt.priority().min(98),
        };
        let plain: Vec<Offset> = auto_tasks.iter().map(|&i| plan.tasks[i].offset).collect();
        for &i in &auto_tasks {
            plan.tasks[i].offset = Offset::Auto;
        }
        match punctual_dispatch::phase_around_interference(&mut plan, &cpus, sched)? {
            Some(av) => {
                let mut r = admit(&mut plan, &cpus, a.bound, assumed_margin);
                if r.feasible() || !report.feasible() {
                    eprintln!("punctual: {}", av.summary());
                    r.phased = av.given.clone();
                    report = r;
                    avoidance = Some(av);
                } else {
                    for (&i, o) in auto_tasks.iter().zip(plain) {
                        plan.tasks[i].offset = o;
                    }
                    eprintln!("punctual: --avoid-interference: the offsets it found fail admission control; plain phasing");
                }
            }
            None => eprintln!("punctual: --avoid-interference: no task has an automatic offset, or the hyperperiod is over 1 s; plain phasing"),
        }
    }
    let duration = a.duration.or(plan.duration);
    if duration.is_none() && !plan.tasks.is_empty() {
        eprintln!("punctual: the plan has periodic tasks and no duration: running until Ctrl-C (or pass -D)");
    }

    let session = Session::begin(&a.rt)?;
    let priority = if a.watchdog.0.is_some() && session.plan.policy.is_realtime() {
        session.plan.priority.min(98)
    } else {
        session.plan.priority
    };
    let cfg = RunConfig {
        cpus: cpus.clone(),
        policy: session.plan.policy,
        priority,
        timer_slack_ns: session.plan.timer_slack_ns,
        margin,
        duration,
        watchdog: a.watchdog.0,
        attach_timeout: a.attach_timeout,
        lead_in: 50_000_000,
        shielded: plan.shield || punctual_dispatch::shield::shielded_by_parent(&cpus),
        start_grid: avoidance.as_ref().map(|av| av.grid),
    };
    let _shield = match &shield_plan {
        Some(sp) => {
            let s = punctual_dispatch::shield::Shield::apply(sp).map_err(Failure::from)?;
            eprintln!(
                "punctual: real-time mode on CPU {}: {} change(s) applied, {} refused, {} task(s) cannot move",
                punctual_rt::format_cpu_list(&cpus),
                s.applied,
                s.refused.len(),
                sp.skipped.len()
            );
            Some(s)
        }
        None => None,
    };
    let plan_name = plan.name.clone();
    let source = plan.source.clone();
    let prepared = punctual_dispatch::prepare(plan, &cfg).map_err(Failure::from)?;
    let progress = punctual_dispatch::progress_for(&prepared);
    let names: Vec<String> = prepared.slots.iter().map(|s| s.name.clone()).collect();
    let load = a.load.clone().unwrap_or_default();
    let loads = punctual_load::Loads::start(&load, &super::own_exe()?)
        .map_err(|e| Failure::system(e.to_string()))?;
    let live = {
        let (progress, t0) = (progress.clone(), std::time::Instant::now());
        Live::start("run", duration.map(|d| d / 1_000_000), move || {
            let parts: Vec<String> = names
                .iter()
                .zip(progress.iter())
                .take(6)
                .map(|(n, p)| {
                    format!(
                        "{n}: {} rel, max {}, missed {}",
                        p.releases.load(Ordering::Relaxed),
                        format_ns(p.max_ns.load(Ordering::Relaxed)),
                        p.missed.load(Ordering::Relaxed)
                    )
                })
                .collect();
            (Live::elapsed_ms(t0), parts.join(" | "))
        })
    };
    let outcome = punctual_dispatch::execute(prepared, &cfg, session.stop.clone(), progress);
    drop(live);
    let load_reports = loads.stop();
    let outcome = outcome.map_err(Failure::from)?;

    let mut doc = session.new_doc();
    session.add_runtime_fallbacks(
        &mut doc,
        outcome.cpus.iter().filter_map(|c| c.fallback.as_ref()),
    );
    doc.settings.priority = Some(outcome.cpus.first().map(|c| c.priority).unwrap_or(priority));
    let s = &mut doc.settings.extra;
    s.insert("plan".into(), plan_name.clone().into());
    s.insert("plan_file".into(), source.into());
    s.insert("cpus".into(), punctual_rt::format_cpu_list(&cpus).into());
    s.insert(
        "spin_margin".into(),
        match margin {
            MarginPolicy::Auto => "auto".into(),
            MarginPolicy::Fixed(m) => m.into(),
        },
    );
    if let Some(d) = duration {
        s.insert("duration_ns".into(), d.into());
    }
    s.insert(
        "watchdog_ns".into(),
        a.watchdog
            .0
            .map(serde_json::Value::from)
            .unwrap_or(serde_json::Value::Null),
    );
    s.insert("shield".into(), shield_plan.is_some().into());
    if let Some(av) = &avoidance {
        s.insert("interference".into(), av.to_json());
    }
    s.insert("admission".into(), serde_json::json!({"feasible": report.feasible(), "reasons": report.reasons(), "collisions": report.collision_count,
        "phased": report.phased.iter().map(|(n, o)| serde_json::json!({"task": n, "offset_ns": o})).collect::<Vec<_>>()}));
    crate::session::record_load_reports(&mut doc, &load, &load_reports)?;
    fill_doc(&mut doc, &outcome);
    if let Some(hwm) = peak_rss() {
        doc.extra.insert("peak_rss_bytes".into(), hwm.into());
    }
    let code = session.close(&mut doc, a.out.fail_above);
    exports.write(&doc)?;
    show(&exports, &render(&doc, &outcome, &plan_name).render());
    if let Some(t) = &outcome.trip {
        eprintln!(
            "punctual: watchdog: {}. Demoted {} real-time thread(s) of punctual and {} of its children to SCHED_OTHER and stopped the run.",
            t.reason, t.demoted_threads, t.demoted_children
        );
        if !outcome.stuck.is_empty() {
            eprintln!(
                "punctual: the dispatcher on CPU {} never returned; its figures are missing",
                punctual_rt::format_cpu_list(&outcome.stuck)
            );
        }
        // The stuck thread cannot be joined; leave now (guards restore on the way out where they can,
        // the journal covers the rest at the next start).
        drop(_shield);
        return Ok(3);
    }
    if session.interrupted() {
        eprintln!("punctual: interrupted; partial results written");
    }
    Ok(code)
}

/// The process's peak resident memory (VmHWM), in bytes.
fn peak_rss() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: u64 = s
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// Series per slot, plus the action's own measurements.
pub fn fill_doc(doc: &mut ResultDoc, o: &Outcome) {
    for sl in &o.slots {
        let i = &sl.info;
        let st = &sl.stats;
        let mut s =
            Series::from_recorder(i.name.clone(), kind::LATENESS, Some(i.cpu), &st.lateness)
                .with("action", i.action_kind)
                .with("action_name", i.action_name.clone())
                .with("releases", st.releases)
                .with("overruns", st.overruns)
                .with("errors", st.errors);
        if let Some(p) = i.period {
            s = s.with("period_ns", p);
        } else {
            s = s.with("events", true);
        }
        if i.delegated {
            s = s.with("measured_by", "wake client");
        }
        if let Some(r) = &sl.report {
            for (k, v) in &r.extra {
                s = s.with(k, v.clone());
            }
        }
        doc.series.push(s);
        if let Some(d) = &st.dispatch {
            doc.series.push(
                Series::from_recorder(
                    format!("{} (dispatcher)", i.name),
                    kind::DISPATCH,
                    Some(i.cpu),
                    d,
                )
                .with("action", i.action_kind),
            );
        }
        if let Some(Some(r)) = sl.report.as_ref().map(|r| r.start_latency.as_ref()) {
            doc.series.push(
                Series::from_recorder(
                    format!("{} (exec start)", i.name),
                    "exec_start",
                    Some(i.cpu),
                    r,
                )
                .with("action", "exec"),
            );
        }
    }
    doc.extra.insert(
        "dispatchers".into(),
        serde_json::Value::Array(
            o.cpus
                .iter()
                .map(|c| {
                    serde_json::json!({"cpu": c.cpu, "spin_margin_ns": c.margin_ns,
                    "spin_margin_cap_ns": (c.margin_cap_ns != u64::MAX).then_some(c.margin_cap_ns), "breathers": c.breathers, "woke_late": c.woke_late,
                    "cpu_ns": c.cpu_ns, "duration_ns": c.wall_ns, "policy": c.policy.name(), "priority": c.priority})
                })
                .collect(),
        ),
    );
    if let Some(t) = &o.trip {
        doc.extra.insert(
            "watchdog".into(),
            serde_json::to_value(t).unwrap_or_default(),
        );
    }
}

fn render(doc: &ResultDoc, o: &Outcome, plan: &str) -> Table {
    let mut t = Table::new(&[
        "task",
        "cpu",
        "action",
        "releases",
        "p50",
        "p99",
        "p99.9",
        "max",
        "<=10us",
        "missed",
        "overruns",
        "errors",
        "woke late",
    ])
    .titled(format!(
        "Plan '{plan}': lateness of each release ({} {}, mlock {})",
        doc.settings.policy.clone().unwrap_or_default(),
        doc.settings.priority.unwrap_or(0),
        if doc.settings.mlock == Some(true) {
            "on"
        } else {
            "off"
        }
    ));
    for s in &doc.series {
        let m = &s.summary;
        let get = |k: &str| s.extra.get(k).map(|v| v.to_string()).unwrap_or_default();
        t.row([
            s.name.clone(),
            s.cpu.map(|c| c.to_string()).unwrap_or_default(),
            s.extra
                .get("action")
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_string(),
            if s.kind == kind::LATENESS {
                get("releases")
            } else {
                m.count.to_string()
            },
            format_ns(m.percentiles.p50),
            format_ns(m.percentiles.p99),
            format_ns(m.percentiles.p99_9),
            format_ns(m.max),
            format!("{:.2} %", m.within.us10 * 100.0),
            m.missed_periods.to_string(),
            get("overruns"),
            get("errors"),
            m.woke_late.to_string(),
        ]);
    }
    for c in &o.cpus {
        let use_ = if c.wall_ns > 0 {
            c.cpu_ns as f64 * 100.0 / c.wall_ns as f64
        } else {
            0.0
        };
        let cap = if c.margin_cap_ns == u64::MAX {
            String::new()
        } else {
            format!(" (cap {})", format_ns(c.margin_cap_ns))
        };
        t.note(format!(
            "dispatcher CPU {}: spin margin {}{cap}, CPU use {use_:.1} %, breathers {}, kernel woke late {}",
            c.cpu,
            format_ns(c.margin_ns),
            c.breathers,
            c.woke_late
        ));
    }
    t.note("lateness: from the release instant to the action starting (wake: to the client running, as it measured).");
    t.note("(dispatcher) rows: how late the dispatcher acted for wake releases; (exec start): release instant to the child running.");
    t
}
