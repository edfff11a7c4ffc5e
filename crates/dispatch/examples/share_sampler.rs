//! What the watchdog's share sampler costs a real-time thread on its CPU (issue 26): a FIFO 80
//! thread wakes every millisecond on the last CPU and records how late it ran, while a
//! normal-class thread on the same CPU samples the run's tasks (30 child processes and this
//! one's threads) every 10 ms, the way the sampler did (`run_tasks`: the task list walked and
//! every file opened at each sample) and the way it does now (one [`TaskReader`]: the files kept
//! open and read in place, the list walked every tenth sample). The two alternate in
//! phases of `SECONDS`, `ROUNDS` times, and each phase prints the sleeper's lateness and the
//! sampler's time per sample.
//!
//! `cargo run --release -p punctual-dispatch --example share_sampler -- [SECONDS] [ROUNDS]`
//! (root: FIFO; default 5 s, 3 rounds).
use punctual_dispatch::share::{run_tasks, TaskReader};
use punctual_stats::Recorder;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;

const NAMES: [&str; 2] = ["opened each time", "kept open"];

fn now() -> u64 {
    punctual_time::clock::read_clock(libc::CLOCK_MONOTONIC)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let secs: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(5);
    let rounds: u32 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(3);
    let cpu = punctual_rt::affinity::last_online_cpu();
    let mut children: Vec<_> = (0..30)
        .map(|_| {
            std::process::Command::new("sleep")
                .arg("3600")
                .spawn()
                .expect("starting sleep")
        })
        .collect();
    // 0: sample as before, 1: as now, 2: stop.
    let phase = Arc::new(AtomicU8::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let phase = phase.clone();
        std::thread::spawn(move || {
            let _ = punctual_rt::affinity::set(0, &[cpu]);
            let mut reader = TaskReader::default();
            let mut took = [Recorder::new(), Recorder::new()];
            let mut last = 0;
            loop {
                let p = phase.load(Ordering::Relaxed);
                if p != last {
                    // The phase that ended, printed as it ends.
                    println!(
                        "  sampler {} per sample: {}",
                        NAMES[last as usize],
                        summary(&took[last as usize])
                    );
                    took[last as usize] = Recorder::new();
                    last = p;
                }
                if p == 2 {
                    return;
                }
                let t = now();
                let n = if p == 0 {
                    run_tasks(0).len()
                } else {
                    reader.sample(0).len()
                };
                took[p as usize].record(now() - t);
                assert!(n >= 30, "the 30 children are read ({n})");
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        })
    };
    let sleeper = {
        let (phase, stop) = (phase.clone(), stop.clone());
        std::thread::spawn(move || {
            let _ = punctual_rt::affinity::set(0, &[cpu]);
            let p = libc::sched_param { sched_priority: 80 };
            // SAFETY: sets the calling thread's own policy.
            let set = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) };
            assert_eq!(set, 0, "SCHED_FIFO needs root");
            let mut late = [Recorder::new(), Recorder::new()];
            let mut next = now() + 1_000_000;
            while !stop.load(Ordering::Relaxed) {
                punctual_time::clock::sleep_abs(libc::CLOCK_MONOTONIC, next);
                let t = now();
                late[phase.load(Ordering::Relaxed).min(1) as usize].record(t - next);
                next += 1_000_000;
                while next <= t {
                    next += 1_000_000;
                }
            }
            late
        })
    };
    for r in 0..rounds {
        for p in [0u8, 1] {
            phase.store(p, Ordering::Relaxed);
            println!("round {}, sampler {}:", r + 1, NAMES[p as usize]);
            std::thread::sleep(std::time::Duration::from_secs(secs));
        }
    }
    phase.store(2, Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    let late = sleeper.join().expect("the sleeper");
    for c in &mut children {
        let _ = c.kill();
        let _ = c.wait();
    }
    for (name, l) in NAMES.iter().zip(late.iter()) {
        println!(
            "FIFO 80 sleeper, all phases {name}: lateness {}",
            summary(l)
        );
    }
    let ratio = |i: usize| late[i].percentile(99_900) as f64;
    println!(
        "p99.9 lateness kept open / opened each time: {:.2}",
        ratio(1) / ratio(0).max(1.0)
    );
}

fn summary(r: &Recorder) -> String {
    let f = |p: u64| punctual_time::format_ns(r.percentile(p));
    format!(
        "n {}, p50 {}, p99 {}, p99.9 {}, max {}",
        r.count(),
        f(50_000),
        f(99_000),
        f(99_900),
        punctual_time::format_ns(r.max().unwrap_or(0))
    )
}
