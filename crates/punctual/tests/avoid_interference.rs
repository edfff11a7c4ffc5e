//! `punctual run --avoid-interference` and `traffic replay --avoid-interference`, in a test binary
//! of its own: the watch spins the CPUs at the run's priority for half a second, which would starve
//! the real-time runs of other tests if it ran beside them (cargo runs test binaries one after
//! another). The two tests here take turns.

mod common;
use common::{punctual, valid_doc};
use std::sync::Mutex;

static WATCH: Mutex<()> = Mutex::new(());

#[test]
fn avoid_interference_watches_the_cpus_and_records_what_it_chose() {
    let _turn = WATCH.lock().unwrap_or_else(|e| e.into_inner());
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
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{err}\n{out}");
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

/// A fixed-spacing replay watches its sending CPU and starts at the phase of its spacing where the
/// fewest sends fell in a gap; one paced by the capture's own timing says it cannot.
#[test]
fn a_replay_avoiding_interference_starts_at_its_quietest_phase() {
    let _turn = WATCH.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.pcap");
    // 20 UDP datagrams (to 127.0.0.1:9, payload = the index) 1 ms apart, microsecond pcap.
    let mut pcap = Vec::new();
    for v in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65_535, 1] {
        pcap.extend_from_slice(&v.to_le_bytes());
    }
    for i in 0..20u64 {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 36, 0, 0, 0, 0, 64, 17, 0, 0]);
        f.extend_from_slice(&[127, 0, 0, 1, 127, 0, 0, 1, 0x9c, 0x40, 0, 9, 0, 16, 0, 0]);
        f.extend_from_slice(&i.to_le_bytes());
        for v in [
            1_700_000_000u32,
            (i * 1_000) as u32,
            f.len() as u32,
            f.len() as u32,
        ] {
            pcap.extend_from_slice(&v.to_le_bytes());
        }
        pcap.extend_from_slice(&f);
    }
    std::fs::write(&file, pcap).unwrap();
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = rx.local_addr().unwrap().to_string();
    let cpu = common::last_cpu().to_string();
    let replay = |extra: &[&str], json: &std::path::Path| {
        punctual()
            .args(["traffic", "replay"])
            .arg(&file)
            .args(["--udp-to", &to, "-a", &cpu, "--policy", "other"])
            .args(["--dma-latency", "off", "--no-store", "--avoid-interference"])
            .args(extra)
            .arg("--json")
            .arg(json)
            .output()
            .unwrap()
    };
    let json = dir.path().join("fixed.json");
    let o = replay(
        &["--interval", "1ms", "--loop", "3", "--limit", "50"],
        &json,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!("interference: watched CPU {cpu} for")),
        "{err}"
    );
    let doc = valid_doc(&json);
    assert_eq!(doc["traffic"]["sent"], 50);
    let inf = &doc["settings"]["interference"];
    let watched = inf["watched_ns"].as_u64().unwrap();
    assert!((400_000_000..700_000_000).contains(&watched), "{inf}");
    assert_eq!(inf["grid_ns"], 1_000_000, "{inf}");
    assert!(inf["phase_ns"].as_u64().unwrap() < 1_000_000, "{inf}");
    let (hit, mean) = (
        inf["hit_share"].as_f64().unwrap(),
        inf["mean_hit_share"].as_f64().unwrap(),
    );
    // The phase chosen is the quietest one tried: never worse than the mean over all of them.
    assert!((0.0..=1.0).contains(&hit) && hit <= mean + 1e-9, "{inf}");
    // The moves during the run are listed (50 sends are too few to line eight late ones up at
    // a spacing, so none is expected, but the list is there either way), and said.
    let moved = doc["traffic"]["sends_moved"].as_array().expect("a list");
    for m in moved {
        assert!(m["late_every"].as_u64().unwrap() >= 2, "{m}");
        assert!(m["shift_ns"].as_u64().unwrap() > 0, "{m}");
    }
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("--avoid-interference: the sends "), "{out}");
    // The capture's own timing (1 ms, but not fixed) has no phase to choose: said, not watched.
    let json = dir.path().join("own.json");
    let o = replay(&["--limit", "5"], &json);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("--avoid-interference: not applied"), "{err}");
    let doc = valid_doc(&json);
    assert!(doc["settings"].get("interference").is_none());
    assert!(doc["traffic"]["sends_moved"].is_null());
}
