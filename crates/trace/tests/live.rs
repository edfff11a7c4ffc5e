//! Recording from the running kernel (root and tracefs needed; skipped visibly otherwise).

mod common;

use common::{sleeper, tracing_available, View};
use punctual_trace::analyze::analyze;
use punctual_trace::file::read_trace_file;
use punctual_trace::kernel::EventGroups;
use punctual_trace::record::{record, RecordConfig, RecordProgress};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

/// The live tests record one at a time, so each can check that it left nothing behind.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn a_thread_sleeping_1ms_is_seen_waking_about_1000_times_a_second() {
    if !tracing_available("a_thread_sleeping_1ms_is_seen_waking_about_1000_times_a_second") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let t = sleeper("pt-sleep1ms", stop.clone());
    let mut cfg = RecordConfig::new(dir.path().join("t.ptf"));
    cfg.groups = EventGroups {
        sched: true,
        irq: false,
        timer: false,
    };
    cfg.duration = Some(1_000_000_000);
    let s = record(&cfg, &AtomicBool::new(false), &RecordProgress::default()).unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let sleeps = t.join().unwrap();
    assert!(s.events > 1_000, "{s:?}");
    assert!(!s.interrupted);

    let trace = read_trace_file(&s.path).unwrap();
    assert!(trace.integrity.complete(), "{}", trace.integrity.describe());
    let a = analyze(&trace);
    let tids = a.select("pt-sleep1ms");
    assert_eq!(tids.len(), 1, "the sleeper is found by name");
    let th = &a.threads[&tids[0]];
    let secs = a.window_ns() as f64 / 1e9;
    let wakeups = th.wakeups as f64 / secs;
    // The trace cannot find more wake-ups than the sleeps the thread made (it ran before and after).
    assert!(
        th.wakeups <= sleeps,
        "{} wake-ups traced, {sleeps} sleeps made",
        th.wakeups
    );
    let quanta = th.runs.iter().filter(|r| r.whole).count() as f64 / secs;
    // 1 ms of sleep plus the wake-up and the loop: a little under 1000 a second.
    assert!(
        (500.0..=1100.0).contains(&wakeups),
        "{wakeups:.0} wake-ups/s"
    );
    // Quanta include runs that started from idle (whose switch-in some kernels do not record).
    assert!((500.0..=1100.0).contains(&quanta), "{quanta:.0} quanta/s");
    // Each run is short: the thread only goes back to sleep.
    assert!(th
        .runs
        .iter()
        .filter(|r| r.whole)
        .all(|r| r.len() < 50_000_000));
    assert_eq!(tids[0] as u32 as i32, th.tid);
    assert_eq!(
        th.tgid,
        std::process::id() as i32,
        "threads are attributed to their process"
    );
}

#[test]
fn the_instance_exists_while_recording_and_is_gone_after() {
    if !tracing_available("the_instance_exists_while_recording_and_is_gone_after") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let view = View::mount();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = RecordConfig::new(dir.path().join("t.ptf"));
    cfg.duration = Some(700_000_000);
    cfg.groups = EventGroups {
        sched: false,
        irq: true,
        timer: true,
    };
    let mine = |v: &View| -> Vec<String> {
        let me = format!("punctual-{}", std::process::id());
        v.instances()
            .into_iter()
            .filter(|n| n == &me || n.starts_with(&format!("{me}-")))
            .collect()
    };
    let before = mine(&view);
    let h = std::thread::spawn(move || {
        record(&cfg, &AtomicBool::new(false), &RecordProgress::default())
    });
    let mut seen = Vec::new();
    for _ in 0..60 {
        seen = mine(&view)
            .into_iter()
            .filter(|n| !before.contains(n))
            .collect();
        if !seen.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // Join before asserting, so a failure never leaves a recording running past the test.
    let s = h.join().unwrap().unwrap();
    assert!(
        !seen.is_empty(),
        "the recording's instance appears: {:?}",
        view.instances()
    );
    let after = mine(&view);
    assert!(
        !seen.iter().any(|n| after.contains(n)),
        "instance left behind: {:?}",
        view.instances()
    );
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    assert!(
        !mounts.contains(&format!("tracefs-{}-", std::process::id())),
        "private mount left behind"
    );
    assert!(s.events > 0);
    assert_eq!(read_trace_file(&s.path).unwrap().header.clock, "mono");
    assert!(
        punctual_rt::journal::global().pending().is_empty(),
        "journal not empty after a clean stop"
    );
}

/// A busy thread alone on a CPU may not switch once in a short trace: the recorder reads which
/// task was runnable there, and the analysis gives it its CPU time either way.
#[test]
fn a_busy_thread_is_known_on_its_cpu_whether_or_not_it_switched() {
    if !tracing_available("a_busy_thread_is_known_on_its_cpu_whether_or_not_it_switched") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let _cpu = punctual_testkit::exclusive_cpu();
    let cpu = *punctual_rt::online_cpus().last().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let busy = {
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("pt-busy".into())
            .spawn(move || {
                let _pin = punctual_rt::AffinityGuard::pin(&[cpu]).unwrap();
                // SAFETY: gettid has no preconditions.
                tx.send(unsafe { libc::gettid() }).unwrap();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
            .unwrap()
    };
    let tid = rx.recv().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = RecordConfig::new(dir.path().join("t.ptf"));
    cfg.groups = EventGroups {
        sched: true,
        irq: false,
        timer: false,
    };
    cfg.duration = Some(300_000_000);
    let s = record(&cfg, &AtomicBool::new(false), &RecordProgress::default());
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    busy.join().unwrap();
    let trace = read_trace_file(&s.unwrap().path).unwrap();
    let trailer = trace.trailer.as_ref().unwrap();
    // Runnable on its CPU, the busy thread is the sole runner there or one of several; never is
    // another task named sole while it runs there.
    if let Some(&sole) = trailer.sole_runners.get(&(cpu as u32)) {
        assert_eq!(sole, tid, "{:?}", trailer.sole_runners);
    }
    let a = analyze(&trace);
    let th = a
        .threads
        .get(&tid)
        .expect("the busy thread is in the analysis");
    assert!(th.runs.iter().all(|r| r.cpu as usize == cpu), "pinned");
    assert!(th.runs.iter().map(|r| r.len()).sum::<u64>() > 0);
    assert_eq!(th.comm, "pt-busy");
}
