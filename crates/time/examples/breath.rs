//! How long a dispatcher's breather takes: the timed sleep (`SystemClock::pause`) beside the
//! partner hand-back (`BreathingClock::pause`), alternating, on one CPU, at SCHED_FIFO 98 when
//! allowed. Prints each one's p50, p99 and max wall time, and the ratio.
//!
//!     cargo run --release -p punctual-time --example breath -- [CPU] [PAUSES]

use punctual_time::{BreathingClock, Clock, SystemClock};

fn main() {
    let mut args = std::env::args().skip(1);
    let cpu: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    // SAFETY: zeroed cpu_set_t and sched_param are valid; the calls read them.
    let fifo = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0,
            "pinning to CPU {cpu}"
        );
        let p = libc::sched_param { sched_priority: 98 };
        libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &p) == 0
    };
    let plain = SystemClock::monotonic();
    let breathing = BreathingClock::for_this_thread(plain).expect("pinned to one CPU");
    let (mut a, mut b) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..2 * n {
        let c: &dyn Clock = if i % 2 == 0 { &plain } else { &breathing };
        let t0 = plain.now();
        c.pause(20_000);
        let d = plain.now() - t0;
        if i % 2 == 0 {
            a.push(d)
        } else {
            b.push(d)
        }
        // Between pauses, as a dispatcher: spin a little.
        let until = plain.now() + 50_000;
        while plain.now() < until {}
    }
    let q = |v: &mut Vec<u64>, p: f64| {
        v.sort_unstable();
        v[((v.len() - 1) as f64 * p) as usize] as f64 / 1000.0
    };
    println!(
        "CPU {cpu}, {}, {n} pauses of 20 us each, alternating",
        if fifo {
            "SCHED_FIFO 98"
        } else {
            "normal class (FIFO refused)"
        }
    );
    println!("{:<22} {:>9} {:>9} {:>9}", "", "p50 us", "p99 us", "max us");
    let (a50, a99, amax) = (q(&mut a, 0.5), q(&mut a, 0.99), q(&mut a, 1.0));
    let (b50, b99, bmax) = (q(&mut b, 0.5), q(&mut b, 0.99), q(&mut b, 1.0));
    println!("{:<22} {a50:>9.1} {a99:>9.1} {amax:>9.1}", "timed sleep");
    println!(
        "{:<22} {b50:>9.1} {b99:>9.1} {bmax:>9.1}",
        "partner hand-back"
    );
    println!(
        "hand-back / sleep: p50 {:.2}, p99 {:.2}; {} of {n} handed back by the partner",
        b50 / a50,
        b99 / a99,
        breathing.handed_back()
    );
}
