//! Inputs the scenario fuzzer (fuzz/fuzz_targets/sim_scenario.rs, issue 18) found, each refused with
//! a message instead of a panic.

use punctual_sim::{scenario, simulate, Control, SimError};

/// Parse `text`, take its first run with 20 ms simulated, as the fuzz target does.
fn first_run(text: &str) -> Result<punctual_sim::RunResult, SimError> {
    let s = scenario::parse("fuzz.toml", text)?;
    let mut cfg = s.runs().into_iter().next().expect("a run");
    cfg.duration = cfg.duration.min(20_000_000);
    simulate(&cfg, &Control::default())
}

#[test]
fn fuzz_a_switch_cost_of_centuries_is_refused_not_overflowed() {
    // Was "attempt to add with overflow" in the engine's charge().
    for (key, flag) in [
        ("switch_cost", "--switch-cost"),
        ("irq_cost", "--irq-cost"),
        ("irq_indirect", "--irq-indirect"),
    ] {
        let text = format!(
            "[sim]\nhz = 10000\nquantum = \"405.5us\"\n{key} = \"5555555555555552us\"\nworkload = \"cpu:2\"\n"
        );
        match first_run(&text) {
            Err(SimError::Invalid { field, message }) => {
                assert_eq!(field, flag, "{message}");
                assert!(message.contains("limit"), "{message}");
            }
            other => panic!("{key}: expected a refusal, got {other:?}"),
        }
    }
    // An everyday cost still runs.
    let ok = "[sim]\nhz = 100\nswitch_cost = \"2us\"\nworkload = \"cpu:2\"\n";
    assert!(first_run(ok).is_ok());
}
