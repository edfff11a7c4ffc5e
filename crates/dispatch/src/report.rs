//! What `punctual run` and `punctual plan check` show and put in their documents: admission
//! control's table, one lateness series per task (KURT's rtstats), the dispatchers' own figures.

use crate::Outcome;
use punctual_plan::admission::{self, Config as AdmitConfig, Report as Admission};
use punctual_plan::Plan;
use punctual_result::{doc::kind, ResultDoc, Series, Table};
use punctual_time::format_ns;

/// Phase the automatic offsets on `cpus`, then check the plan against the bound, assuming `margin`
/// of spinning before each release, and against the spin budget (`None`: shielded CPUs, no limit).
pub fn admit(
    plan: &mut Plan,
    cpus: &[usize],
    bound: f64,
    margin: u64,
    spin_budget: Option<f64>,
) -> Admission {
    let phased = admission::phase(plan, cpus);
    let cfg = AdmitConfig {
        bound,
        margin,
        spin_budget,
    };
    let mut r = admission::check(plan, cpus, &cfg);
    r.phased = phased;
    r
}

/// Admission control's verdict, per CPU, with the collisions and offsets it chose.
/// What the plan runs ([`crate::preflight::runs`]), for `plan check`: one row per program or plugin.
pub fn runs_table(runs: &[crate::preflight::Runs]) -> Table {
    let mut t = Table::new(&["action", "runs", "as", "scheduling"])
        .titled("What the plan runs (nothing was started or loaded to check it)");
    for r in runs {
        t.row([
            r.action.clone(),
            format!("{} {}", r.kind, r.what),
            format!("{}, capabilities: {}", r.user, r.capabilities),
            r.sched.clone(),
        ]);
    }
    if runs.is_empty() {
        t.notes
            .push("no programs and no plugins: only marks, datagrams and wakes".into());
    }
    t
}

pub fn admission_table(plan: &Plan, r: &Admission) -> Table {
    let mut t = Table::new(&[
        "cpu",
        "tasks",
        "events",
        "utilisation",
        "bound",
        "spin+work",
        "spin budget",
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
            r.spin_budget
                .map_or("shielded".to_string(), |b| format!("{:.1} %", b * 100.0)),
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
    t.note(format!("utilisation: sum of wcet / period; spin+work: share of the CPU the dispatcher spends spinning (a {} margin before each release) or executing; spin budget: the most of it a CPU that is not shielded gives the dispatcher (--spin-budget).", format_ns(r.margin)));
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

/// The process's peak resident memory (VmHWM), in bytes.
pub fn peak_rss() -> Option<u64> {
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
            if let Some(o) = st.offset_ns {
                s = s.with("offset_ns", o);
            }
            if i.movable {
                s = s.with("rephased", st.rephased);
                if st.rephase_gave_up {
                    s = s.with("rephase_gave_up", true);
                }
            }
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
                    kind::EXEC_START,
                    Some(i.cpu),
                    r,
                )
                .with("action", punctual_plan::ActionKind::Exec.name()),
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
                    "spin_margin_cap_ns": (c.margin_cap_ns != u64::MAX).then_some(c.margin_cap_ns), "breathers": c.breathers, "breathers_partnered": c.breathers_partnered, "relayed": c.relayed, "woke_late": c.woke_late,
                    "woke_late_stolen": c.woke_late_stolen, "spun_through": c.spun_through,
                    "yields": c.yields, "cpu_ns": c.cpu_ns, "duration_ns": c.wall_ns, "policy": c.policy.name(), "priority": c.priority})
                })
                .collect(),
        ),
    );
    if !o.held_by_others.is_empty() {
        doc.extra.insert(
            "cpu_held_by_others".into(),
            serde_json::to_value(&o.held_by_others).unwrap_or_default(),
        );
    }
    if let Some(t) = &o.trip {
        doc.extra.insert(
            "watchdog".into(),
            serde_json::to_value(t).unwrap_or_default(),
        );
    }
}

/// The table: one row per task (and per dispatcher row of wake tasks), notes per dispatcher CPU.
pub fn table(doc: &ResultDoc, o: &Outcome, plan: &str) -> Table {
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
    for n in error_notes(doc) {
        t.note(n);
    }
    for n in rephase_notes(o) {
        t.note(n);
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
        let stolen = if c.woke_late_stolen > 0 {
            format!(" ({} of them in stolen time)", c.woke_late_stolen)
        } else {
            String::new()
        };
        let through = if c.spun_through > 0 {
            format!(
                ", spun through {} release(s) closer than the kernel wakes",
                c.spun_through
            )
        } else {
            String::new()
        };
        let partnered = if c.breathers_partnered > 0 {
            let relayed = if c.relayed > 0 {
                format!(", which fired {} release(s) meanwhile", c.relayed)
            } else {
                String::new()
            };
            format!(
                " ({} woken by its partner thread{relayed})",
                c.breathers_partnered
            )
        } else {
            String::new()
        };
        let yields = if c.yields > 0 {
            format!(
                ", waited {} time(s) for a client on its CPU to finish first",
                c.yields
            )
        } else {
            String::new()
        };
        t.note(format!(
            "dispatcher CPU {}: spin margin {}{cap}, CPU use {use_:.1} %, breathers {}{partnered}, kernel woke late {}{stolen}{through}{yields}",
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

/// Tasks whose phase moved during the run, and where they ended.
fn rephase_notes(o: &Outcome) -> Vec<String> {
    let mut notes = Vec::new();
    for sl in &o.slots {
        let (st, name) = (&sl.stats, &sl.info.name);
        let at = st
            .offset_ns
            .map_or(String::new(), punctual_plan::exact_duration);
        if st.rephased > 0 {
            notes.push(format!(
                "task '{name}' re-phased {} time(s) (its late releases lined up), now at offset {at}",
                st.rephased
            ));
        }
        if st.rephase_gave_up {
            notes.push(format!(
                "task '{name}': its releases stayed late after the move, so it stays at offset {at} (the lateness does not follow the phase)"
            ));
        }
    }
    notes
}

/// What went wrong, under the table: each task's error count with the first message its action
/// kept (`first_*_error`), and receivers that were absent (`refused`, not an error).
fn error_notes(doc: &ResultDoc) -> Vec<String> {
    let mut notes = Vec::new();
    for s in &doc.series {
        let count = |k: &str| s.extra.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
        let errors = count("errors");
        if errors > 0 {
            let first = s
                .extra
                .iter()
                .find(|(k, _)| k.starts_with("first_") && k.ends_with("_error"))
                .and_then(|(_, v)| v.as_str());
            notes.push(match first {
                Some(m) => format!(
                    "errors of '{}': {errors}, the first: {}",
                    s.name,
                    punctual_time::text::display_name(m)
                ),
                None => format!(
                    "errors of '{}': {errors} (its action kept no message)",
                    s.name
                ),
            });
        }
        let refused = count("refused");
        if refused > 0 {
            notes.push(format!(
                "'{}': nothing listened at the target {refused} time(s) (ICMP port unreachable); \
                 every datagram was still sent",
                s.name
            ));
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use punctual_stats::Recorder;

    #[test]
    fn action_errors_are_explained_under_the_table() {
        let mut doc = ResultDoc::new(vec![], punctual_measure::fake_host(), String::new());
        let rec = Recorder::new();
        doc.series.push(
            Series::from_recorder("ping", kind::LATENESS, Some(1), &rec)
                .with("errors", 3u64)
                .with(
                    "first_send_error",
                    "No buffer space available (os error 105)",
                )
                .with("refused", 0u64),
        );
        doc.series.push(
            Series::from_recorder("quiet", kind::LATENESS, Some(1), &rec)
                .with("errors", 0u64)
                .with("refused", 7u64),
        );
        doc.series
            .push(Series::from_recorder("plugin", kind::LATENESS, None, &rec).with("errors", 1u64));
        let notes = error_notes(&doc);
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert_eq!(
            notes[0],
            "errors of 'ping': 3, the first: No buffer space available (os error 105)"
        );
        assert!(notes[1].starts_with("'quiet': nothing listened at the target 7 time(s)"));
        assert!(notes[2].contains("'plugin': 1 (its action kept no message)"));
    }
}
