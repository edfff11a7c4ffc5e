//! The lines cyclictest prints while it runs and at its end: the policy header, one status line
//! per thread (`print_stat`), the `-v` value lines and the `--spike` list (`trigger_print`).

use punctual_latency::cyclic::{CyclicDoc, StatusFigures};

/// `T: 0 (12345) P:80 I:1000 C:   1000 Min:     12 Act:   15 Avg:   14 Max:      40`; with `-N`
/// (`nsecs`) Act and Avg are 8 wide, as cyclictest's nanosecond format has them.
pub fn status_line(
    index: usize,
    prio: u32,
    interval_us: u64,
    f: &StatusFigures,
    nsecs: bool,
) -> String {
    let (act, avg) = (f.act, f.avg());
    let mut s = format!(
        "T:{index:>2} ({:>5}) P:{prio:>2} I:{interval_us} C:{:>7} Min:{:>7} ",
        f.tid, f.cycles, f.min
    );
    if nsecs {
        s.push_str(&format!("Act:{act:>8} Avg:{avg:>8}"));
    } else {
        s.push_str(&format!("Act:{act:>5} Avg:{avg:>5}"));
    }
    s.push_str(&format!(" Max:{:>8}\n", f.max));
    s
}

/// The line above the status lines: `policy: fifo: loadavg: 0.52 0.41 0.30 2/117 4242`, with
/// `/other` after the policy when the threads run in the normal class (cyclictest's
/// `force_sched_other`), ten blanks, and an empty line.
pub fn header(policy: &str, normal_class: bool, loadavg: &str) -> String {
    let slash = if normal_class { "/other" } else { "" };
    format!(
        "policy: {policy}{slash}: loadavg: {}          \n\n",
        loadavg.trim_end_matches('\n')
    )
}

/// One redraw: after the first, cyclictest moves the cursor up over the previous one
/// (`ESC[<threads + 2>A`).
pub fn block(first: bool, header: &str, lines: &[String]) -> String {
    let mut s = String::new();
    if !first {
        s.push_str(&format!("\x1b[{}A", lines.len() + 2));
    }
    s.push_str(header);
    for l in lines {
        s.push_str(l);
    }
    s
}

/// `-v`: `  thread:   cycle:   value`.
pub fn value_line(index: usize, cycle: u64, value: u64) -> String {
    format!("{index:>8}:{cycle:>8}:{value:>8}\n")
}

/// `--spike`: the first recorded spikes of all threads in the order they happened, then their
/// count; nothing when there was none.
pub fn spikes(c: &CyclicDoc, nodes: usize) -> String {
    let total: u64 = c.threads.iter().map(|t| t.figures.spike_count).sum();
    let mut all: Vec<(u64, usize, u64)> = c
        .threads
        .iter()
        .flat_map(|t| {
            t.figures
                .spikes
                .iter()
                .map(move |&(ts, v)| (ts, t.index, v))
        })
        .collect();
    if all.is_empty() {
        return String::new();
    }
    all.sort_by_key(|&(ts, index, _)| (ts, index));
    all.truncate(nodes);
    let mut s = String::from("\n");
    for (ts, index, v) in all {
        s.push_str(&format!("T:{index:>2} Spike:{v:>8}: TS: {ts:>12}\n"));
    }
    s.push_str(&format!("spikes = {total}\n\n"));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(tid: i32, cycles: u64, min: u64, act: u64, sum: u64, max: u64) -> StatusFigures {
        StatusFigures {
            tid,
            cycles,
            min,
            act,
            sum,
            max,
        }
    }

    /// Lines copied from rt-tests 2.4's cyclictest on this machine.
    #[test]
    fn status_lines_are_cyclictests() {
        assert_eq!(
            status_line(0, 80, 1000, &fig(15272, 7, 37, 41, 343, 69), false),
            "T: 0 (15272) P:80 I:1000 C:      7 Min:     37 Act:   41 Avg:   49 Max:      69\n"
        );
        assert_eq!(
            status_line(1, 80, 1500, &fig(0, 0, 1_000_000, 0, 0, 0), false),
            "T: 1 (    0) P:80 I:1500 C:      0 Min:1000000 Act:    0 Avg:    0 Max:       0\n"
        );
        assert_eq!(
            status_line(0, 0, 1000, &fig(15284, 100, 35732, 73696, 7_991_000, 255338), true),
            "T: 0 (15284) P: 0 I:1000 C:    100 Min:  35732 Act:   73696 Avg:   79910 Max:  255338\n"
        );
    }

    #[test]
    fn headers_and_redraws_are_cyclictests() {
        let h = header("other", true, "4.43 2.64 1.90 6/139 19000\n");
        assert_eq!(
            h,
            "policy: other/other: loadavg: 4.43 2.64 1.90 6/139 19000          \n\n"
        );
        assert_eq!(
            header("fifo", false, "1 2 3 1/1 1"),
            "policy: fifo: loadavg: 1 2 3 1/1 1          \n\n"
        );
        let lines = vec!["a\n".to_string(), "b\n".to_string()];
        assert_eq!(block(true, "H\n\n", &lines), "H\n\na\nb\n");
        assert_eq!(block(false, "H\n\n", &lines), "\x1b[4AH\n\na\nb\n");
        assert_eq!(value_line(0, 2, 24), "       0:       2:      24\n");
    }

    #[test]
    fn spikes_print_in_time_order_up_to_the_nodes() {
        use punctual_latency::cyclic::{CyclicThread, CyclicThreadDoc};
        let t = |index, spikes: Vec<(u64, u64)>, count| CyclicThreadDoc {
            index,
            figures: CyclicThread {
                spikes,
                spike_count: count,
                ..CyclicThread::default()
            },
            ..CyclicThreadDoc::default()
        };
        let c = CyclicDoc {
            threads: vec![
                t(0, vec![(2062261977, 37), (2062262976, 36)], 50),
                t(1, vec![(2062261706, 30)], 45),
            ],
            ..CyclicDoc::default()
        };
        assert_eq!(
            spikes(&c, 2),
            "\nT: 1 Spike:      30: TS:   2062261706\nT: 0 Spike:      37: TS:   2062261977\nspikes = 95\n\n"
        );
        assert_eq!(spikes(&CyclicDoc::default(), 5), "");
    }
}
