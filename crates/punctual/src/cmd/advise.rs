//! `punctual advise`: real time or real fast (McKenney, OLS 2008, Fig. 9), decided with this machine's
//! facts and measured start latency. The flow is `punctual_advise`; this gathers the
//! facts and the results it reads.

use crate::args::{duration, share};
use clap::Args;
use punctual_advise::{self as advise, Facts, Needs, Verdict, WorkKind};
use punctual_result::{Failure, Output, ResultDoc};
use punctual_session::{Env, Exit};
use punctual_store::Resolver;

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
    #[arg(long, value_name = "PERCENT", value_parser = |s: &str| share(s, 0.0..=100.0))]
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
    /// `check`, `latency` or `mckenney-choose` results to decide with: files, stored ids or
    /// `latest~N` (repeatable; default: this host's latest stored `check` and `mckenney-choose`).
    /// A `latency --policy other` result stands for real fast; `mckenney-choose` gives both
    /// configurations and real time's measured slowdown of each kind of work.
    #[arg(long, value_name = "RESULT")]
    pub from: Vec<String>,
    /// Write the advice (steps, verdict, figures) as JSON to FILE (`-` for stdout).
    #[arg(long, value_name = "FILE")]
    pub json: Option<Output>,
    /// The results store to read from: a SQLite file or postgres://USER@HOST/DB (default:
    /// PUNCTUAL_STORE, or results.db in the data directory). Never created by reading.
    #[arg(long, value_name = "PATH|URL")]
    pub store: Option<String>,
}

fn size(s: &str) -> Result<u64, String> {
    punctual_bench::memcpy::parse_bytes(s).map(|b| b as u64)
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
        None => advise::base_slice(host.cpus),
    });
    let mut facts = Facts {
        host,
        mem_available_bytes: advise::mem_available(),
        real_time: None,
        real_fast: None,
        quantum,
        slowdowns: None,
    };
    let mut results = Resolver::new(a.store.as_deref());
    let docs: Vec<(String, ResultDoc)> = if a.from.is_empty() {
        let choose = Some(punctual_experiments::mckenney_choose::NAME);
        let host = &facts.host.hostname;
        let check = results.latest_of(host, None)?;
        let chosen = results.latest_of(host, choose)?;
        let found = check.into_iter().chain(chosen);
        found
            .map(|l| {
                l.skipped
                    .iter()
                    .for_each(|n| env.note(&format!("advise: {n}")));
                (l.source, l.doc)
            })
            .collect()
    } else {
        // Files, stored ids, `latest`: named as compare and report name them.
        a.from
            .iter()
            .map(|spec| Ok((spec.clone(), results.resolve(spec)?.stored.doc)))
            .collect::<Result<_, Failure>>()?
    };
    for (source, doc) in &docs {
        facts.read(doc, source).map_err(Failure::usage)?;
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
