//! Steal time: how much CPU time the hypervisor took from each CPU while a session ran.

use crate::Env;
use punctual_result::ResultDoc;
use punctual_rt::host::StealMeter;

/// Record the steal time since `meter` started (`settings.steal_ns`, ns per CPU; the CPU time
/// other processes used, `settings.others_cpu_ns`) and say so when
/// the hypervisor took any: releases that fall in stolen time are late by the rest of it, and no
/// setting inside the guest can prevent that.
pub fn record_steal(meter: &StealMeter, doc: &mut ResultDoc, env: &Env) {
    let Some((stolen, run)) = meter.taken() else {
        return;
    };
    let mut per_cpu = serde_json::Map::new();
    let mut taken = Vec::new();
    for (cpu, d) in stolen {
        per_cpu.insert(cpu.to_string(), d.into());
        if d > 0 {
            taken.push((cpu, d));
        }
    }
    doc.settings
        .extra
        .insert("steal_ns".into(), serde_json::Value::Object(per_cpu));
    // The window it was measured over, so a report can give it as a share of the run.
    doc.settings
        .extra
        .insert("steal_window_ns".into(), run.into());
    // What else the machine did meanwhile, so a comparison can say when the two sides ran on
    // differently busy machines.
    if let Some(others) = meter.others_cpu_ns() {
        doc.settings
            .extra
            .insert("others_cpu_ns".into(), others.into());
    }
    if taken.is_empty() {
        return;
    }
    taken.sort_by_key(|&(_, d)| std::cmp::Reverse(d));
    let list: Vec<String> = taken
        .iter()
        .take(4)
        .map(|&(cpu, d)| {
            format!(
                "CPU {cpu} {} ({:.2} %)",
                punctual_time::format_ns(d),
                d as f64 * 100.0 / run.max(1) as f64
            )
        })
        .collect();
    env.note(&format!(
        "steal time (the hypervisor running something else) during this {} run: {}{}; \
         releases that fall in it are late by the rest of it",
        punctual_time::format_ns(run),
        list.join(", "),
        if taken.len() > 4 { ", ..." } else { "" }
    ));
}
