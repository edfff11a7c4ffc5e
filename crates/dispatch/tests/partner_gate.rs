//! The breath partner goes only where it is needed (dae464c, `DENSE_BELOW_NS`): a dispatcher CPU
//! whose shortest period is under 100 us has no room for a timed breather and gets a partner; a
//! plan dense only through the phases of longer periods keeps the timed breather (a partner's own
//! wake-ups fell on clients when every dispatcher had one: b59). Not real-time (no privileges):
//! the gate and the breathers do not depend on the class.

use punctual_dispatch::{execute, prepare, progress_for, RunConfig};
use punctual_rt::Policy;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Run `tasks` (period, offset) of `mark` for 1.2 s on the last CPU, watched at 400 ms (a breather
/// due every 100 ms): (breathers, breathers the partner woke the loop from). Every release of the
/// plan is fired once or counted missed, whoever fired it (the partner fires those that fall due
/// in its breathers).
fn breathers(tasks: &[(&str, &str)]) -> (u64, u64) {
    let mut text = String::from("[plan]\nduration = \"1200ms\"\n");
    for (i, (period, offset)) in tasks.iter().enumerate() {
        text += &format!(
            "[[task]]\nname = \"t{i}\"\nperiod = \"{period}\"\noffset = \"{offset}\"\naction = {{ kind = \"mark\" }}\n"
        );
    }
    let cfg = RunConfig {
        cpus: vec![punctual_rt::affinity::last_online_cpu()],
        policy: Policy::Other,
        priority: 0,
        watchdog: Some(400_000_000),
        duration: Some(1_200_000_000),
        // As on a shielded CPU, the loop may spin through its releases (it would block between
        // them otherwise, and need no breather).
        shielded: true,
        ..RunConfig::default()
    };
    let plan = punctual_plan::parse_str(&text, "t.toml", None).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let p = prepare(plan, &cfg, &stop).unwrap();
    let progress = progress_for(&p);
    let o = execute(p, &cfg, stop, progress).unwrap();
    assert_eq!(o.cpus.len(), 1);
    let c = &o.cpus[0];
    for (s, (period, _)) in o.slots.iter().zip(tasks) {
        let period = punctual_time::parse_duration_ns(period).unwrap();
        let planned = 1_200_000_000 / period;
        let (fired, missed) = (s.stats.releases, s.stats.lateness.missed_periods());
        assert_eq!(
            fired + missed,
            planned,
            "{} fired (the partner {} of them) and {missed} missed",
            fired,
            c.relayed
        );
    }
    assert!(c.relayed <= c.breathers_partnered * punctual_dispatch::engine::RELAY_MAX as u64);
    (c.breathers, c.breathers_partnered)
}

#[test]
fn only_a_cpu_whose_shortest_period_is_under_100_us_breathes_through_a_partner() {
    if punctual_testkit::online_cpus().len() < 2 {
        punctual_testkit::skip(
            "only_a_cpu_whose_shortest_period_is_under_100_us_breathes_through_a_partner",
            "a partner needs a second CPU",
        );
        return;
    }
    // The loop spins through its releases: the CPU to itself.
    let _cpu = punctual_testkit::exclusive_cpu();
    // A 10 us task: the partner wakes the loop from (some of) its breathers.
    let (taken, partnered) = breathers(&[("10us", "0us")]);
    assert!(taken >= 3, "{taken} breathers in 1.2 s");
    assert!(
        partnered >= 1,
        "none of {taken} breathers was the partner's"
    );
    // Twenty 200 us tasks 10 us apart: releases as dense, but no partner.
    let phased: Vec<(String, String)> = (0..20)
        .map(|k| ("200us".to_string(), format!("{}us", k * 10)))
        .collect();
    let refs: Vec<(&str, &str)> = phased
        .iter()
        .map(|(p, o)| (p.as_str(), o.as_str()))
        .collect();
    let (taken, partnered) = breathers(&refs);
    assert!(taken >= 3, "{taken} breathers in 1.2 s");
    assert_eq!(
        partnered, 0,
        "{partnered} of {taken} breathers the partner's"
    );
}
