//! `punctual check`: the main job.

use crate::cli::CheckArgs;
use crate::session::{samples_poll, show, validate_rt, Exports, Live, Session};
use punctual_latency::check::{default_load, run_check, CheckConfig, PHASES};
use punctual_latency::Progress;
use punctual_result::export::{Csv, Json};
use punctual_result::Failure;
use punctual_time::format_ns;
use std::sync::Arc;

/// The shortest check that still gives each phase a few hundred releases.
const MIN_DURATION: u64 = 1_000_000_000;

pub fn run(a: CheckArgs) -> anyhow::Result<i32> {
    validate_rt(&a.rt)?;
    let cpu = match a.rt.cpus().map_err(Failure::usage)? {
        Some(c) if c.len() == 1 => c[0],
        Some(c) => {
            return Err(Failure::usage(format!(
                "-a/--affinity: check measures on one CPU; give one CPU, not {}",
                punctual_rt::format_cpu_list(&c)
            ))
            .into())
        }
        // The last CPU: CPU 0 usually takes most device interrupts.
        None => *punctual_rt::online_cpus()
            .last()
            .expect("at least one CPU is online"),
    };
    if a.duration < MIN_DURATION {
        return Err(Failure::usage(format!(
            "-D/--duration {} is too short; use 1s or more",
            format_ns(a.duration)
        ))
        .into());
    }
    if a.interval < 10_000 || a.interval > a.duration / 40 {
        return Err(Failure::usage(
            "-i/--interval must be at least 10us and leave ten releases per phase",
        )
        .into());
    }
    let mut exports = Exports::default();
    exports.add("json", a.out.json.as_ref(), Json)?;
    exports.add("csv", a.out.csv.as_ref(), Csv)?;
    punctual_result::store::check_writable().map_err(Failure::system)?;

    let session = Session::begin(&a.rt)?;
    let cfg = CheckConfig {
        cpu,
        duration: a.duration,
        interval: a.interval,
        load: a.load.clone().unwrap_or_else(default_load),
        exe: super::own_exe()?,
        policy: session.plan.policy,
        priority: session.plan.priority,
        timer_slack_ns: session.plan.timer_slack_ns,
    };
    eprintln!(
        "punctual check: CPU {cpu}, {} in four phases (plain sleep and hybrid, idle then with load {})",
        format_ns(a.duration),
        cfg.load
    );
    let progress: Arc<[Progress]> = Arc::new([Progress::default()]);
    let live = Live::start(
        "check",
        Some(a.duration / 1_000_000),
        samples_poll(progress.clone()),
    );
    let slot: &[Progress; 1] = (&*progress).try_into().expect("one slot");
    let outcome = run_check(
        &cfg,
        &session.stop,
        |i, p| live.set_prefix(format!("{}/{} {}", i + 1, PHASES.len(), p.label())),
        slot,
    );
    live.finish();
    let outcome = outcome?;

    let mut doc = session.new_doc();
    session.add_runtime_fallbacks(
        &mut doc,
        outcome
            .phases
            .iter()
            .filter_map(|p| p.thread.fallback.as_ref()),
    );
    let s = &mut doc.settings.extra;
    s.insert("cpu".into(), cpu.into());
    s.insert("interval_ns".into(), cfg.interval.into());
    s.insert("duration_ns".into(), cfg.duration.into());
    crate::session::record_load_reports(&mut doc, &cfg.load, &outcome.loads)?;
    doc.series = outcome.series();
    doc.extra.insert("verdict".into(), outcome.verdict_json());
    let code = session.close(&mut doc, a.out.fail_above);
    let stored = punctual_result::store::save(&doc)
        .map_err(|e| Failure::system(format!("saving the result: {e}")))?;
    exports.write(&doc)?;

    let mut text = outcome.results_table().render();
    text.push('\n');
    text.push_str(&outcome.verdict_table().render());
    if doc.host.virtualized {
        text.push_str(
            "\nThis machine is virtualised: the hypervisor can stop a virtual CPU for milliseconds, \
             and no user-space code can remove those tails.\n",
        );
    }
    if !doc.settings.fallbacks.is_empty() {
        text.push_str("\nRan with fallbacks (see above): figures are worse than this machine can do when privileged.\n");
    }
    text.push_str(&format!("\nResult saved: {}\n", stored.display()));
    show(&exports, &text);
    if session.interrupted() {
        eprintln!("punctual: interrupted; partial results written");
    }
    Ok(code)
}
