//! A result document with every sample of every series multiplied by FACTOR, read from the
//! histograms (each recorded value, as many times as it was seen): an exact regression of that
//! size injected into real runs, for measuring what compare detects against real run-to-run noise
//! (scripts/bench-compare.sh). Usage: scale_result FACTOR < in.json > out.json

use punctual_result::{ResultDoc, Series};
use punctual_stats::Recorder;
use std::io::Read;

fn main() {
    let factor: f64 = std::env::args()
        .nth(1)
        .and_then(|f| f.parse().ok())
        .expect("usage: scale_result FACTOR < in.json > out.json");
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .expect("reading stdin");
    let mut doc = ResultDoc::from_json(&text).expect("a result document");
    doc.run_id = None;
    for s in &mut doc.series {
        let old = s.recorder().expect("a readable histogram");
        let mut r = Recorder::new();
        let h = old.histogram();
        for v in h.iter_recorded() {
            let value = (h.median_equivalent(v.value_iterated_to()) as f64 * factor) as u64;
            for _ in 0..v.count_at_value() {
                r.record(value);
            }
        }
        r.add_missed(old.missed_periods());
        let mut scaled = Series::from_recorder(s.name.clone(), &s.kind, s.cpu, &r);
        scaled.extra = s.extra.clone();
        *s = scaled;
    }
    print!("{}", doc.to_json());
}
