//! Phasing around interference: watch the CPUs for the gaps the host takes, give the plan's
//! automatic offsets phases that miss them, and start the plan on the grid they were chosen on.

use crate::config::DispatchError;
use punctual_plan::admission::Interference;
use punctual_plan::Plan;
use std::sync::atomic::{AtomicBool, Ordering};

/// The first instant of `grid` (`reference + k * step`, k >= 0) at or after `t`.
pub fn on_grid(t: u64, grid: Option<(u64, u64)>) -> u64 {
    match grid {
        Some((r, step)) if step > 0 && t > r => r + (t - r).div_ceil(step) * step,
        Some((r, _)) => r.max(t),
        None => t,
    }
}

/// How long [`phase_around_interference`] watches the CPUs.
pub const INTERFERENCE_WATCH_NS: u64 = 500_000_000;

/// Steps of the watching loop longer than this count as interference.
pub const INTERFERENCE_THRESHOLD_NS: u64 = 5_000;

/// The longest hyperperiod a plan may have for its start to be put on the measured grid.
pub const INTERFERENCE_MAX_HYPERPERIOD: u64 = 1_000_000_000;

/// What [`phase_around_interference`] measured and chose.
#[derive(Clone, Debug)]
pub struct Avoidance {
    pub interference: Interference,
    /// CPUs watched.
    pub cpus: Vec<usize>,
    /// Start the plan on this grid ([`RunConfig::start_grid`](crate::RunConfig::start_grid)).
    pub grid: (u64, u64),
    /// Share of the automatically phased releases that fell in a window during the watch, with
    /// the offsets chosen; and with the offsets plain phasing gives.
    pub hit_share: f64,
    pub plain_hit_share: f64,
    /// The offsets given (task, ns).
    pub given: Vec<(String, u64)>,
}

impl Avoidance {
    /// One line for stderr.
    pub fn summary(&self) -> String {
        format!(
            "{}; automatic offsets put {:.2} % of their releases in a gap (plain phasing: {:.2} %); \
             the plan starts on a {} grid",
            describe_watch(&self.cpus, &self.interference),
            self.hit_share * 100.0,
            self.plain_hit_share * 100.0,
            punctual_time::format_ns(self.grid.1),
        )
    }

    /// For the result document's settings.
    pub fn to_json(&self) -> serde_json::Value {
        let mut m = watch_json(&self.cpus, &self.interference);
        m.insert("hit_share".into(), self.hit_share.into());
        m.insert("plain_hit_share".into(), self.plain_hit_share.into());
        m.insert("grid_ns".into(), self.grid.1.into());
        serde_json::Value::Object(m)
    }
}

/// What a watch of `cpus` ([`watch_interference`]) saw, as the start of a line for stderr:
/// "interference: watched CPU 1 for 500 ms: 1.84 % of the time taken away (202 gaps over 5 us)".
pub fn describe_watch(cpus: &[usize], inf: &Interference) -> String {
    format!(
        "interference: watched CPU {} for {}: {:.2} % of the time taken away ({} gaps over {})",
        punctual_rt::format_cpu_list(cpus),
        punctual_time::format_ns(inf.to.saturating_sub(inf.from)),
        inf.lost_share() * 100.0,
        inf.windows().len(),
        punctual_time::format_ns(INTERFERENCE_THRESHOLD_NS),
    )
}

/// What a watch of `cpus` saw, for a result document's settings; what was chosen from it is added
/// by the caller.
pub fn watch_json(
    cpus: &[usize],
    inf: &Interference,
) -> serde_json::Map<String, serde_json::Value> {
    let mut m = serde_json::Map::new();
    m.insert("cpus".into(), cpus.into());
    m.insert("watched_ns".into(), inf.to.saturating_sub(inf.from).into());
    m.insert("threshold_ns".into(), INTERFERENCE_THRESHOLD_NS.into());
    m.insert("gaps".into(), inf.windows().len().into());
    m.insert("lost_share".into(), inf.lost_share().into());
    m
}

/// Watch `cpus` with a busy loop at `sched` (`punctual bench gaps`' loop) for
/// [`INTERFERENCE_WATCH_NS`]: the gaps over [`INTERFERENCE_THRESHOLD_NS`] it saw, on
/// CLOCK_MONOTONIC, over the window every CPU watched. `stop` (SIGINT/SIGTERM) ends the watch at once
/// with [`DispatchError::Interrupted`].
pub fn watch_interference(
    cpus: &[usize],
    sched: punctual_rt::SchedParams,
    stop: &AtomicBool,
) -> Result<Interference, DispatchError> {
    let out = punctual_bench::gaps::run(
        &punctual_bench::gaps::GapsConfig {
            cpus: cpus.to_vec(),
            duration_ns: INTERFERENCE_WATCH_NS,
            threshold_ns: INTERFERENCE_THRESHOLD_NS,
            sched,
            hz: None,
        },
        stop,
    )
    .map_err(|e| DispatchError::System(format!("watching the CPUs for interference: {e}")))?;
    if stop.load(Ordering::Relaxed) {
        return Err(DispatchError::Interrupted);
    }
    let from = out.cpus.iter().map(|c| c.began_ns).max().unwrap_or(0);
    let to = out.cpus.iter().map(|c| c.ended_ns).min().unwrap_or(0);
    Ok(Interference::new(
        from,
        to,
        out.cpus.iter().flat_map(|c| c.starts.iter().copied()),
    ))
}

/// Watch every online CPU with a busy loop at `sched` (`punctual bench gaps`' loop) for
/// [`INTERFERENCE_WATCH_NS`], then give the plan's `offset = "auto"` tasks offsets that keep
/// their releases out of the gaps seen (the timer tick and other periodic interruptions come back
/// at the same phase), for a start on the returned grid. All CPUs count, since a `wake` client runs
/// wherever the kernel puts it. `None` (and plain phasing) when no task has an automatic offset or
/// the hyperperiod is longer than [`INTERFERENCE_MAX_HYPERPERIOD`]. `stop` (SIGINT/SIGTERM) ends
/// the watch at once with [`DispatchError::Interrupted`] (issue 32: the 500 ms watch, uninterruptible,
/// was what made a signal early in a run take more than a second).
pub fn phase_around_interference(
    plan: &mut Plan,
    run_cpus: &[usize],
    sched: punctual_rt::SchedParams,
    stop: &AtomicBool,
) -> Result<Option<Avoidance>, DispatchError> {
    let auto: Vec<usize> = (0..plan.tasks.len())
        .filter(|&i| plan.tasks[i].offset == punctual_plan::Offset::Auto)
        .collect();
    let h = punctual_plan::admission::hyperperiod(
        plan.tasks.iter().map(|t| t.period),
        INTERFERENCE_MAX_HYPERPERIOD,
    );
    let Some(h) = h.filter(|_| !auto.is_empty()) else {
        punctual_plan::admission::phase(plan, run_cpus);
        return Ok(None);
    };
    let cpus = punctual_rt::online_cpus();
    let interference = watch_interference(&cpus, sched, stop)?;
    let from = interference.from;
    let share = |p: &Plan| {
        let hits: f64 = auto
            .iter()
            .map(|&i| {
                let t = &p.tasks[i];
                interference.hit_share(from + t.offset.ns(), t.period) / t.period as f64
            })
            .sum();
        let all: f64 = auto.iter().map(|&i| 1.0 / p.tasks[i].period as f64).sum();
        hits / all
    };
    // Plain phasing first, for comparison; then the automatic offsets again, avoiding.
    punctual_plan::admission::phase(plan, run_cpus);
    let plain_hit_share = share(plan);
    for &i in &auto {
        plan.tasks[i].offset = punctual_plan::Offset::Auto;
    }
    let given =
        punctual_plan::admission::phase_avoiding(plan, run_cpus, Some((&interference, from)));
    Ok(Some(Avoidance {
        given,
        hit_share: share(plan),
        plain_hit_share,
        interference,
        cpus,
        grid: (from, h),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_on_a_grid_is_the_first_grid_instant_not_before_the_lead_in() {
        assert_eq!(on_grid(1_234, None), 1_234);
        assert_eq!(on_grid(1_234, Some((1_000, 100))), 1_300);
        assert_eq!(on_grid(1_300, Some((1_000, 100))), 1_300);
        assert_eq!(
            on_grid(900, Some((1_000, 100))),
            1_000,
            "never before the reference"
        );
        assert_eq!(on_grid(5, Some((0, 0))), 5);
    }
}
