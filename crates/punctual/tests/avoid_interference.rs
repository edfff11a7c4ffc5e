//! `punctual run --avoid-interference`, in a test binary of its own: the watch spins every CPU at
//! the run's priority for half a second, which would starve the real-time runs of other tests if it
//! ran beside them (cargo runs test binaries one after another).

mod common;
use common::{punctual, valid_doc};

#[test]
fn avoid_interference_watches_the_cpus_and_records_what_it_chose() {
    let dir = tempfile::tempdir().unwrap();
    // Three 5 ms tasks and one 10 ms task: hyperperiod 10 ms.
    let plan = dir.path().join("p.toml");
    std::fs::write(
        &plan,
        "[plan]\nname = \"avoid\"\nduration = \"200ms\"\n\
         [[task]]\nname = \"a\"\nperiod = \"5ms\"\noffset = \"auto\"\naction = { kind = \"mark\" }\n\
         [[task]]\nname = \"b\"\nperiod = \"5ms\"\noffset = \"auto\"\naction = { kind = \"mark\" }\n\
         [[task]]\nname = \"c\"\nperiod = \"10ms\"\noffset = \"auto\"\naction = { kind = \"mark\" }\n\
         [[task]]\nname = \"fixed\"\nperiod = \"5ms\"\noffset = \"1ms\"\naction = { kind = \"mark\" }\n",
    )
    .unwrap();
    let json = dir.path().join("o.json");
    let o = punctual()
        .args([
            "run",
            plan.to_str().unwrap(),
            "--avoid-interference",
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("interference: watched CPU"), "{err}");
    let doc = valid_doc(&json);
    let inf = &doc["settings"]["interference"];
    let watched = inf["watched_ns"].as_u64().unwrap();
    assert!((400_000_000..700_000_000).contains(&watched), "{inf}");
    assert_eq!(inf["grid_ns"], 10_000_000);
    let (hit, plain) = (
        inf["hit_share"].as_f64().unwrap(),
        inf["plain_hit_share"].as_f64().unwrap(),
    );
    // Never worse than plain phasing (up to the per-mille rounding of the greedy choice).
    assert!((0.0..=1.0).contains(&hit) && hit <= plain + 1e-3, "{inf}");
    // The three automatic tasks got offsets; the fixed one kept its own.
    let phased = doc["settings"]["admission"]["phased"].as_array().unwrap();
    assert_eq!(phased.len(), 3, "{phased:?}");
    assert!(phased.iter().all(|p| p["task"] != "fixed"));
    assert_eq!(doc["settings"]["admission"]["collisions"], 0);
    for s in doc["series"].as_array().unwrap() {
        assert!(s["count"].as_u64().unwrap() >= 19, "{}", s["name"]);
    }
}
