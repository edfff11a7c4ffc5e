//! The parsers on small recordings from a real kernel, committed under `tests/fixtures/`:
//!
//! - `raw/`: ring-buffer pages exactly as `per_cpu/cpuN/trace_pipe_raw` returned them, the format files
//!   of their events, and the kernel's own text rendering (`trace`) of the same events, so the page
//!   decoder is checked against the kernel's decoder;
//! - `sleep-1ms.ptf`: a punctual trace file of 300 ms with a thread sleeping 1 ms at a time.
//!
//! `cargo test -p punctual-trace --test fixtures -- --ignored` records them again (root needed).

mod common;

use punctual_trace::event::EventKind;
use punctual_trace::kernel::decode::Decoder;
use punctual_trace::kernel::format::{parse_event_format, parse_header_page};
use punctual_trace::kernel::page::parse_page;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

const RAW_EVENTS: [(&str, &str); 8] = [
    ("sched", "sched_switch"),
    ("sched", "sched_waking"),
    ("irq", "irq_handler_entry"),
    ("irq", "irq_handler_exit"),
    ("irq", "softirq_entry"),
    ("irq", "softirq_exit"),
    ("irq_vectors", "local_timer_entry"),
    ("irq_vectors", "local_timer_exit"),
];

/// One line of the kernel's text trace: cpu, timestamp (us), event name, fields.
#[derive(Debug, PartialEq)]
struct TextEvent {
    cpu: u32,
    ts_us: u64,
    name: String,
    fields: Vec<(String, String)>,
}

fn parse_text(line: &str) -> Option<TextEvent> {
    let open = line.find(" [")?;
    let close = open + line[open..].find(']')?;
    let cpu = line[open + 2..close].trim().parse().ok()?;
    let rest = &line[close + 1..];
    let colon = rest.find(": ")?;
    let ts_text = rest[..colon].split_whitespace().last()?;
    let (s, us) = ts_text.split_once('.')?;
    let ts_us = s.parse::<u64>().ok()? * 1_000_000 + us.parse::<u64>().ok()?;
    let rest = &rest[colon + 2..];
    let (name, body) = rest.split_once(": ")?;
    let fields = body
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Some(TextEvent {
        cpu,
        ts_us,
        name: name.to_string(),
        fields,
    })
}

fn field<'a>(e: &'a TextEvent, k: &str) -> &'a str {
    e.fields
        .iter()
        .find(|(n, _)| n == k)
        .map(|(_, v)| v.as_str())
        .unwrap_or("")
}

#[test]
fn raw_pages_decode_as_the_kernel_prints_them() {
    let raw = fixtures().join("raw");
    let layout =
        parse_header_page(&std::fs::read_to_string(raw.join("header_page")).unwrap()).unwrap();
    let mut dec = Decoder::default();
    for (sys, ev) in RAW_EVENTS {
        let text = std::fs::read_to_string(raw.join(format!("{sys}__{ev}.format"))).unwrap();
        dec.add(&parse_event_format(sys, &text).unwrap()).unwrap();
    }
    let text = std::fs::read_to_string(raw.join("trace.txt")).unwrap();
    let expected: Vec<TextEvent> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(parse_text)
        .collect();
    assert!(
        expected.len() > 100,
        "fixture too small: {}",
        expected.len()
    );
    let mut checked = 0;
    for cpu in 0..2u32 {
        let pages = std::fs::read(raw.join(format!("cpu{cpu}.pages"))).unwrap();
        let mut got = Vec::new();
        for page in pages.chunks(layout.page_size()) {
            let p = parse_page(page, &layout).unwrap();
            for e in p.events() {
                let e = e.unwrap();
                got.push((
                    e.ts,
                    dec.decode(e.data).expect("every recorded event decodes"),
                ));
            }
        }
        let want: Vec<&TextEvent> = expected.iter().filter(|e| e.cpu == cpu).collect();
        assert_eq!(
            got.len(),
            want.len(),
            "cpu{cpu}: events in pages vs in the kernel's text"
        );
        for ((ts, d), w) in got.iter().zip(&want) {
            // The kernel prints microseconds rounded to nearest.
            assert_eq!((ts + 500) / 1000, w.ts_us, "cpu{cpu} timestamp of {w:?}");
            match d.kind {
                EventKind::Switch {
                    prev_pid,
                    next_pid,
                    prev_prio,
                    ..
                } => {
                    assert_eq!(w.name, "sched_switch");
                    assert_eq!(field(w, "prev_pid"), prev_pid.to_string());
                    assert_eq!(field(w, "next_pid"), next_pid.to_string());
                    assert_eq!(field(w, "prev_prio"), prev_prio.to_string());
                    for (i, key) in [(0, "prev_comm"), (1, "next_comm")] {
                        let name = std::str::from_utf8(d.labels.comms[i].unwrap().1).unwrap();
                        if !name.contains(' ') {
                            assert_eq!(field(w, key), name, "{key} of {w:?}");
                        }
                    }
                }
                EventKind::Waking {
                    pid, target_cpu, ..
                } => {
                    assert_eq!(w.name, "sched_waking");
                    assert_eq!(field(w, "pid"), pid.to_string());
                    assert_eq!(field(w, "target_cpu").parse::<i32>().unwrap(), target_cpu);
                }
                EventKind::IrqEntry { irq } => {
                    assert_eq!(w.name, "irq_handler_entry");
                    assert_eq!(field(w, "irq"), irq.to_string());
                    assert_eq!(field(w, "name").as_bytes(), d.labels.irq_name.unwrap().1);
                }
                EventKind::IrqExit { irq, .. } => {
                    assert_eq!(
                        (w.name.as_str(), field(w, "irq")),
                        ("irq_handler_exit", irq.to_string().as_str())
                    );
                }
                EventKind::SoftirqEntry { vec } | EventKind::SoftirqExit { vec } => {
                    assert!(w.name.starts_with("softirq_"), "{w:?}");
                    assert_eq!(field(w, "vec"), vec.to_string());
                }
                EventKind::VectorEntry { .. } | EventKind::VectorExit { .. } => {
                    assert!(w.name.starts_with("local_timer_"), "{w:?}");
                }
                other => panic!("unexpected {other:?}"),
            }
            checked += 1;
        }
    }
    assert_eq!(checked, expected.len());
}

#[test]
fn the_recorded_trace_file_reads_back_whole() {
    let t = punctual_trace::file::read_trace_file(&fixtures().join("sleep-1ms.ptf")).unwrap();
    assert!(t.integrity.complete(), "{}", t.integrity.describe());
    let trailer = t.trailer.as_ref().unwrap();
    assert_eq!(trailer.events as usize, t.events.len());
    assert_eq!(t.header.clock, "mono");
    assert!(t.events.windows(2).all(|w| w[0].ts <= w[1].ts));
    assert!(t
        .events
        .iter()
        .all(|e| e.ts >= t.header.start_ns && e.ts <= trailer.end_ns));
    let a = punctual_trace::analyze::analyze(&t);
    let tids = a.select("pt-sleep1ms");
    assert_eq!(tids.len(), 1);
    let wakeups = a.threads[&tids[0]].wakeup.count() as f64 * 1e9 / a.window_ns() as f64;
    assert!((500.0..=1100.0).contains(&wakeups), "{wakeups:.0}/s");
}

#[test]
fn truncating_the_recorded_file_anywhere_never_panics() {
    let bytes = std::fs::read(fixtures().join("sleep-1ms.ptf")).unwrap();
    let full = punctual_trace::file::read_trace(&bytes)
        .unwrap()
        .events
        .len();
    let header_end = 14 + u32::from_le_bytes(bytes[10..14].try_into().unwrap()) as usize;
    let mut last = 0;
    for cut in (0..bytes.len()).step_by(97).chain([bytes.len() - 1]) {
        match punctual_trace::file::read_trace(&bytes[..cut]) {
            Ok(t) => {
                assert!(!t.integrity.complete());
                assert!(
                    t.events.len() >= last,
                    "a longer prefix never reads fewer events"
                );
                assert!(t.events.len() <= full);
                last = t.events.len();
            }
            Err(e) => assert!(
                cut < header_end,
                "a cut at {cut}, after the header, refused the whole file: {e}"
            ),
        }
    }
}

#[test]
#[ignore = "records the fixtures again (root): cargo test -p punctual-trace --test fixtures -- --ignored"]
fn capture_fixtures() {
    use punctual_trace::kernel::instance::{instance_name, Instance};
    use punctual_trace::kernel::tracefs::Tracefs;
    use punctual_trace::kernel::{read_file, KernelEvent};
    use std::io::Read;
    if !common::tracing_available("capture_fixtures") {
        return;
    }
    let raw = fixtures().join("raw");
    std::fs::create_dir_all(&raw).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sleeper = common::sleeper("pt-sleep1ms", stop.clone());
    {
        let fs = Tracefs::open().unwrap();
        let inst = Instance::create(&fs, &instance_name(std::process::id())).unwrap();
        inst.set_clock("mono").unwrap();
        inst.set_buffer_kb(512).unwrap();
        std::fs::write(
            raw.join("header_page"),
            read_file(&inst.path().join("events/header_page")).unwrap(),
        )
        .unwrap();
        for (sys, ev) in RAW_EVENTS {
            let k = KernelEvent {
                system: sys,
                name: ev.into(),
                optional: false,
            };
            inst.enable(&k).unwrap();
            let text = read_file(&inst.path().join(format!("events/{sys}/{ev}/format"))).unwrap();
            std::fs::write(raw.join(format!("{sys}__{ev}.format")), text).unwrap();
        }
        inst.write("tracing_on", "1").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(60));
        inst.write("tracing_on", "0").unwrap();
        // The text first (reading `trace` does not consume), then the same events as pages.
        std::fs::write(
            raw.join("trace.txt"),
            read_file(&inst.path().join("trace")).unwrap(),
        )
        .unwrap();
        for cpu in 0..2u32 {
            let mut f = inst.open_pipe(cpu).unwrap();
            let mut out = Vec::new();
            let mut page = vec![0u8; 4096];
            while let Ok(n) = f.read(&mut page) {
                if n == 0 {
                    break;
                }
                page[n..].fill(0);
                out.extend_from_slice(&page);
            }
            std::fs::write(raw.join(format!("cpu{cpu}.pages")), out).unwrap();
        }
    }
    let mut cfg = punctual_trace::record::RecordConfig::new(fixtures().join("sleep-1ms.ptf"));
    cfg.groups = punctual_trace::kernel::EventGroups {
        sched: true,
        irq: false,
        timer: false,
    };
    cfg.duration = Some(300_000_000);
    punctual_trace::record::record(
        &cfg,
        &std::sync::atomic::AtomicBool::new(false),
        &Default::default(),
    )
    .unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    sleeper.join().unwrap();
}
