//! A simulator scenario: parsed, expanded into its runs, validated, and small runs simulated for a
//! few simulated milliseconds (what `punctual simulate --scenario` does, shortened).
#![no_main]
use libfuzzer_sys::fuzz_target;
use punctual_sim::{scenario, simulate, Control};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(s) = scenario::parse("fuzz.toml", text) else {
        return;
    };
    for mut cfg in s.runs().into_iter().take(4) {
        if cfg.validate().is_err() || cfg.tasks.len() > 16 {
            continue;
        }
        cfg.duration = cfg.duration.min(20_000_000);
        cfg.max_events = cfg.max_events.min(20_000);
        let _ = simulate(&cfg, &Control::default());
    }
});
