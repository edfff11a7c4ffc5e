//! `punctual advise`: real time or real fast (McKenney 2009, Fig. 9), decided with this machine's
//! facts and measured start latency. The flow is `punctual_experiments::advise`; this gathers the
//! facts and the results it reads.

use crate::args::duration;
use clap::Args;
use punctual_experiments::advise::{self, Facts, Measured, Needs, Verdict, WorkKind};
use punctual_result::{Failure, Output, ResultDoc};
use punctual_session::{Env, Exit};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct AdviseArgs {
    /// When each work item must be complete, counted from the event that releases it.
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub deadline: Option<u64>,
    /// How long one work item runs.
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub work: Option<u64>,
    /// What the work does: compute (user mode), kernel (system calls, like a build) or io.
    #[arg(long, value_name = "KIND", default_value = "compute")]
    pub work_kind: WorkKind,
    /// Peak CPU utilization the machine must run at (e.g. 40%).
    #[arg(long, value_name = "PERCENT", value_parser = percent)]
    pub utilization: Option<f64>,
    /// Memory the workload needs resident (e.g. 4GiB): more than is available rules out mlockall.
    #[arg(long, value_name = "SIZE", value_parser = size)]
    pub memory: Option<u64>,
    /// Only the amount of work per second matters, no deadline.
    #[arg(long, conflicts_with_all = ["deadline", "jitter"])]
    pub throughput_only: bool,
    /// Largest lateness (and earliness) tolerated, e.g. 111us for a fuel injector's window.
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub jitter: Option<u64>,
    /// CPU-bound processes that share the work's CPU under time sharing (Etsion section 8: the
    /// work may wait a quantum for each of the others).
    #[arg(long, value_name = "N")]
    pub competing: Option<u32>,
    /// The time-sharing quantum for --competing (default: the kernel's base slice).
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub quantum: Option<u64>,
    /// Result files of `check` or `latency` to decide with (repeatable; default: the latest
    /// stored `check`). A `latency --policy other` result stands for real fast.
    #[arg(long, value_name = "FILE")]
    pub from: Vec<PathBuf>,
    /// Write the advice (steps, verdict, figures) as JSON to FILE (`-` for stdout).
    #[arg(long, value_name = "FILE")]
    pub json: Option<Output>,
}

fn percent(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim_end_matches('%')
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a percentage like 40%"))?;
    if !(0.0..=100.0).contains(&v) {
        return Err(format!("'{s}' must be from 0% to 100%"));
    }
    Ok(v / 100.0)
}

fn size(s: &str) -> Result<u64, String> {
    punctual_bench::memcpy::parse_bytes(s).map(|b| b as u64)
}

/// Available memory (`MemAvailable`), bytes.
fn mem_available() -> Option<u64> {
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
fn base_slice(cpus: usize) -> (u64, String) {
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
enum Reading {
    RealTime(Measured),
    RealFast(Measured),
}

fn read(doc: &ResultDoc, source: &str) -> Result<Reading, Failure> {
    let cmd = doc.command.get(1).map(String::as_str).unwrap_or("");
    let series: Vec<_> = match cmd {
        "check" => {
            // The hybrid phase under load: what real time buys on a busy machine.
            let s = ["punctual hybrid loaded", "punctual hybrid idle"]
                .iter()
                .find_map(|n| doc.series.iter().find(|s| s.name == *n))
                .ok_or_else(|| {
                    Failure::usage(format!(
                        "{source}: a check result without its hybrid phases"
                    ))
                })?;
            vec![s]
        }
        "latency" => doc.series.iter().collect(),
        other => {
            return Err(Failure::usage(format!(
                "{source} is a `{other}` result; advise reads `check` and `latency` results"
            )))
        }
    };
    let worst = series
        .iter()
        .max_by_key(|s| s.summary.percentiles.p99_9)
        .ok_or_else(|| Failure::usage(format!("{source}: the result has no series")))?;
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
        source: format!("{source}: {} on CPU {}", worst.name, fmt_cpu(cpu)),
        p99_9_ns: worst.summary.percentiles.p99_9,
        max_ns: max,
        cpu,
        steal,
    };
    Ok(if doc.settings.policy.as_deref() == Some("other") {
        Reading::RealFast(m)
    } else {
        Reading::RealTime(m)
    })
}

fn fmt_cpu(c: Option<usize>) -> String {
    c.map(|c| c.to_string()).unwrap_or_else(|| "-".into())
}

fn load(path: &Path) -> Result<ResultDoc, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::usage(format!("--from {}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| {
        Failure::usage(format!(
            "--from {}: not a punctual result document ({e})",
            path.display()
        ))
    })
}

/// The newest `check` of this host in the results store, if any.
fn latest_check(host: &str) -> Result<Option<(String, ResultDoc)>, Failure> {
    let store = punctual_session::store::open(None)?;
    let filter = punctual_store::Filter {
        command: Some("check".into()),
        host: Some(host.into()),
        last: Some(1),
        ..Default::default()
    };
    let Some(entry) = store
        .list(&filter)
        .map_err(Failure::from)?
        .into_iter()
        .next()
    else {
        return Ok(None);
    };
    let doc = store.resolve(&entry.id).map_err(Failure::from)?.doc;
    Ok(Some((format!("stored check {}", entry.id), doc)))
}

pub fn run(a: AdviseArgs, env: &Env) -> anyhow::Result<Exit> {
    let needs = Needs {
        deadline_ns: a.deadline,
        work_ns: a.work,
        kind: Some(a.work_kind),
        utilization: a.utilization,
        memory_bytes: a.memory,
        throughput_only: a.throughput_only,
        jitter_ns: a.jitter,
        competing: a.competing,
    };
    advise::check_needs(&needs).map_err(Failure::usage)?;
    if let Some(o) = &a.json {
        o.check_writable().map_err(Failure::usage)?;
    }
    let host = env.host();
    let quantum = Some(match a.quantum {
        Some(q) => (q, "--quantum".to_string()),
        None => base_slice(host.cpus),
    });
    let mut facts = Facts {
        host,
        mem_available_bytes: mem_available(),
        real_time: None,
        real_fast: None,
        quantum,
    };
    let docs: Vec<(String, ResultDoc)> = if a.from.is_empty() {
        latest_check(&facts.host.hostname)?.into_iter().collect()
    } else {
        a.from
            .iter()
            .map(|p| Ok((p.display().to_string(), load(p)?)))
            .collect::<Result<_, Failure>>()?
    };
    for (source, doc) in &docs {
        // With several of a kind, the worst p99.9 decides: a deadline must hold in all of them.
        match read(doc, source)? {
            Reading::RealTime(m) => keep_worst(&mut facts.real_time, m),
            Reading::RealFast(m) => keep_worst(&mut facts.real_fast, m),
        }
    }
    let advice = advise::advise(&needs, &facts);
    env.show(
        &advise::table(&advice).render(),
        a.json.as_ref().is_some_and(Output::is_stdout),
    );
    if let Some(o) = &a.json {
        let doc = serde_json::json!({ "needs": needs, "facts": facts, "advice": advice });
        let mut text = serde_json::to_string_pretty(&doc).expect("advice serialises");
        text.push('\n');
        o.write(text.as_bytes())
            .map_err(|e| Failure::system(format!("--json: {e}")))?;
    }
    Ok(match advice.verdict {
        Verdict::Cannot => Exit::LimitExceeded,
        _ => Exit::Ok,
    })
}

fn keep_worst(slot: &mut Option<Measured>, m: Measured) {
    if slot.as_ref().is_none_or(|old| m.p99_9_ns > old.p99_9_ns) {
        *slot = Some(m);
    }
}
