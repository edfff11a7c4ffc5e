//! Floors: now and then, a short `bench gaps` on each measured CPU, in the normal class (a
//! spinning real-time thread would starve the CPU's other work for its whole length). It counts
//! the interruptions longer than the late bound that an ordinary thread on that CPU meets: the
//! part of the lateness no scheduling setting can remove. The monitor's own wake-ups are shorter
//! than the bound on any machine worth monitoring, so they do not count.

use crate::config::Settings;
use crate::metrics::Ops;
use punctual_bench::gaps::{run, GapsConfig};
use punctual_rt::{Policy, SchedParams};
use std::sync::atomic::AtomicBool;

/// Measure the floor of every measured CPU for `settings.floor_for` and publish it in `ops`.
/// Errors (a CPU gone offline) leave the previous figures.
pub fn measure_floors(settings: &Settings, bound_ns: u64, ops: &Ops, stop: &AtomicBool) {
    let cfg = GapsConfig {
        cpus: settings.cpus.clone(),
        duration_ns: settings.floor_for,
        threshold_ns: bound_ns.max(1),
        sched: SchedParams {
            policy: Policy::Other,
            priority: 0,
        },
        hz: None,
    };
    let Ok(out) = run(&cfg, stop) else {
        return;
    };
    let mut floors = ops.floors.lock().unwrap_or_else(|p| p.into_inner());
    for c in out.cpus {
        floors.insert(
            c.cpu,
            (
                c.gaps_per_second(),
                c.lost_fraction(),
                c.gaps.max().unwrap_or(0),
            ),
        );
    }
}
