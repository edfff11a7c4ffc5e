//! A compiled plan (`.pplan`): read from memory (size known) and as a stream (size unknown); both
//! must agree, and a plan read is phased and admitted as `punctual run` does.
#![no_main]
use libfuzzer_sys::fuzz_target;
use punctual_plan::{admission, compiled};

fuzz_target!(|data: &[u8]| {
    let sized = compiled::from_bytes(data, "fuzz.pplan");
    let streamed = compiled::read(data, "fuzz.pplan");
    assert_eq!(sized.is_ok(), streamed.is_ok(), "{sized:?} / {streamed:?}");
    let Ok(mut plan) = sized else {
        return;
    };
    let _ = admission::phase(&mut plan, &[1]);
    let _ = admission::check(&plan, &[1], &admission::Config::default());
});
