//! A plan in TOML: parsed, and when valid, compiled to the binary form and read back (the same plan),
//! phased and admitted as `punctual run` and `plan check` do.
#![no_main]
use libfuzzer_sys::fuzz_target;
use punctual_plan::{admission, compiled, parse_str};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(mut plan) = parse_str(text, "fuzz.toml", None) else {
        return;
    };
    let bytes = compiled::to_bytes(&plan);
    let back = compiled::from_bytes(&bytes, "fuzz.pplan").expect("a compiled plan reads back");
    assert_eq!(back.events, plan.events);
    assert_eq!(back.tasks, plan.tasks);
    let _ = admission::phase(&mut plan, &[1]);
    let _ = admission::check(&plan, &[1], &admission::Config::default());
});
