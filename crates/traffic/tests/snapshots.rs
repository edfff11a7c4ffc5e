//! `punctual traffic replay`'s table and document from a deterministic replay: five frames sent
//! 500 us apart through the dispatch loop on an injected clock, reported through the lifecycle with
//! the fake environment (what a user reads, snapshot-tested like every other command's).

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, TsResolution};
use punctual_dispatch::engine::SlotProgress;
use punctual_result::output::Output;
use punctual_rt::{Policy, RtWant};
use punctual_session::{drive, Canned, Env, Outputs};
use punctual_time::{ManualClock, MarginPolicy};
use punctual_traffic::measure::{load, Replay, ReplayConfig, ReplayOutcome, Target};
use punctual_traffic::replay::{replay, LoopSettings, Sender};
use punctual_traffic::schedule::{ScheduleConfig, Timing};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

struct Counted(u64);
impl Sender for Counted {
    fn send(&mut self, _: &[u8], _: u64) -> std::io::Result<()> {
        self.0 += 1;
        Ok(())
    }
    fn describe(&self) -> String {
        "af_packet veth-test".into()
    }
}

#[test]
fn replay_table_and_document() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("five.pcap");
    let header = PcapHeader {
        ts_resolution: TsResolution::NanoSecond,
        datalink: DataLink::ETHERNET,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(std::fs::File::create(&file).unwrap(), header).unwrap();
    for i in 0..5u64 {
        let f = vec![i as u8; 60];
        w.write_packet(&PcapPacket::new(
            Duration::from_nanos(1_000 + i * 1_000_000),
            60,
            &f,
        ))
        .unwrap();
    }
    drop(w);
    let cfg = ReplayConfig {
        file: file.clone(),
        target: Target::Iface {
            name: "veth-test".into(),
            qdisc_bypass: false,
        },
        schedule: ScheduleConfig {
            timing: Timing::Interval(500_000),
            loops: 1,
            limit: None,
        },
        partial: false,
        cpu: Some(1),
        margin: MarginPolicy::Auto,
        want: RtWant {
            policy: Policy::Fifo,
            priority: 98,
            mlock: true,
            dma_latency_us: Some(0),
        },
        shielded: false,
        txtime: None,
    };
    let loaded = load(&cfg).unwrap();
    // The replay itself, on an injected clock: every send exactly at its instant.
    let clock = ManualClock::new(0, 10);
    let mut sent = Counted(0);
    let settings = LoopSettings {
        start: 1_000_000,
        margin: MarginPolicy::Auto,
        shielded: false,
        breather_every: None,
        partner: None,
        steal: None,
        txtime_lead: 0,
        explain_bound: None,
        avoid: None,
    };
    let replayed = replay(
        &clock,
        &loaded.store,
        &loaded.schedule,
        &mut sent,
        &settings,
        &AtomicBool::new(false),
        &[SlotProgress::default()],
    );
    assert_eq!(sent.0, 5);
    let outcome = ReplayOutcome {
        replayed,
        fallback: None,
        expected_ns: 2_000_000,
    };
    let m = Replay::new(cfg, loaded, Box::new(Counted(0)));
    let json = Output::File(dir.path().join("r.json"));
    let out = Outputs::new().json_csv(Some(&json), None).unwrap();
    let env = Env::fake(&[
        "punctual",
        "traffic",
        "replay",
        "five.pcap",
        "-i",
        "veth-test",
    ]);
    drive(&mut Canned::new(m, outcome), &out, &env).unwrap();
    let table = env
        .captured()
        .0
        .replace(&file.display().to_string(), "five.pcap");
    insta::assert_snapshot!("replay_table", table);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(doc["traffic"]["sent"], 5);
    assert_eq!(doc["traffic"]["gaps_within_1pct"], 1.0);
    insta::assert_json_snapshot!("replay_traffic", doc["traffic"]);
}
