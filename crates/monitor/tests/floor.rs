//! Floors: a short `bench gaps` per measured CPU, published for `/metrics`.

use punctual_monitor::config::Settings;
use punctual_monitor::expose::{render, Format};
use punctual_monitor::floor::measure_floors;
use punctual_monitor::http::ServerStats;
use punctual_monitor::metrics::{registry, Board, HostLabels, Ops};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[test]
fn a_floor_measures_each_cpu_and_shows_in_the_exposition() {
    let cpu = *punctual_testkit::online_cpus().last().unwrap();
    let mut settings = Settings::new(vec![cpu]);
    settings.floor_for = 100_000_000;
    let ops = Arc::new(Ops::default());
    measure_floors(&settings, 10_000, &ops, &AtomicBool::new(false));
    let (per_second, lost, worst) = *ops.floors.lock().unwrap().get(&cpu).expect("measured");
    assert!(
        per_second >= 0.0 && (0.0..=1.0).contains(&lost),
        "{per_second} {lost}"
    );
    assert!(
        worst == 0 || worst > 10_000,
        "only gaps above the bound count: {worst}"
    );
    let reg = registry(
        Arc::new(Board::new(10_000)),
        ops,
        Arc::new(ServerStats::default()),
        HostLabels(vec![]),
    );
    let text = String::from_utf8(render(&reg, Format::Text).unwrap()).unwrap();
    assert!(
        text.contains(&format!("punctual_floor_lost_ratio{{cpu=\"{cpu}\"}}")),
        "{text}"
    );
}
