//! cyclictest's `-h`/`-H` histogram (`print_hist`): one line per bucket with a column per thread
//! (tab-separated, and with `-H` and several threads a column over all of them), then the trailer.
//! `# Total` counts the samples inside the buckets (overflows are their own line), and the
//! overflows' cycle numbers are listed per thread, one per bucket at most, the rest counted.

use punctual_latency::cyclic::CyclicDoc;
use std::fmt::Write;

/// The histogram text of a run's figures; `all` is `-H`.
pub fn histogram(c: &CyclicDoc, all: bool) -> String {
    let n = c.threads.len();
    let all = all && n > 1;
    let columns: Vec<Vec<u64>> = c
        .threads
        .iter()
        .map(|t| {
            let mut v = vec![0u64; c.buckets];
            for &(b, k) in &t.figures.histogram {
                if let Some(slot) = v.get_mut(b as usize) {
                    *slot += k;
                }
            }
            v
        })
        .collect();
    let mut out = String::with_capacity(c.buckets * (8 + 7 * n) + 256);
    out.push_str("# Histogram\n");
    let mut totals = vec![0u64; n];
    for i in 0..c.buckets {
        let _ = write!(out, "{i:06} ");
        let mut every = 0u64;
        for (j, col) in columns.iter().enumerate() {
            let _ = write!(out, "{:06}", col[i]);
            if j + 1 < n {
                out.push('\t');
            }
            totals[j] += col[i];
            every += col[i];
        }
        if all {
            let _ = write!(out, "\t{every:06}");
        }
        out.push('\n');
    }
    let row = |out: &mut String, label: &str, cells: &[u64], width: usize, extra: Option<u64>| {
        out.push_str(label);
        for v in cells.iter().chain(extra.as_ref()) {
            let _ = write!(out, " {v:0width$}");
        }
        out.push('\n');
    };
    let pick = |f: &dyn Fn(&punctual_latency::cyclic::StatusFigures) -> u64| -> Vec<u64> {
        c.threads.iter().map(|t| f(&t.figures.status)).collect()
    };
    let sum: u64 = totals.iter().sum();
    row(&mut out, "# Total:", &totals, 9, all.then_some(sum));
    row(&mut out, "# Min Latencies:", &pick(&|s| s.min), 5, None);
    row(&mut out, "# Avg Latencies:", &pick(&|s| s.avg()), 5, None);
    let maxes = pick(&|s| s.max);
    let maxmax = maxes.iter().copied().max().unwrap_or(0);
    row(
        &mut out,
        "# Max Latencies:",
        &maxes,
        5,
        all.then_some(maxmax),
    );
    let overflows: Vec<u64> = c.threads.iter().map(|t| t.figures.overflows).collect();
    let every: u64 = overflows.iter().sum();
    row(
        &mut out,
        "# Histogram Overflows:",
        &overflows,
        5,
        all.then_some(every),
    );
    out.push_str("# Histogram Overflow at cycle number:\n");
    for (i, t) in c.threads.iter().enumerate() {
        let _ = write!(out, "# Thread {i}:");
        for cycle in &t.figures.overflow_cycles {
            let _ = write!(out, " {cycle:05}");
        }
        let kept = t.figures.overflow_cycles.len() as u64;
        if kept < t.figures.overflows {
            let _ = write!(out, " # {:05} others", t.figures.overflows - kept);
        }
        out.push('\n');
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use punctual_latency::cyclic::{CyclicConfig, CyclicStats, CyclicThreadDoc};

    fn doc(buckets: usize, threads: &[&[u64]]) -> CyclicDoc {
        CyclicDoc {
            unit_ns: 1000,
            buckets,
            threads: threads
                .iter()
                .enumerate()
                .map(|(i, us)| {
                    let s = CyclicStats::new(CyclicConfig {
                        buckets,
                        ..CyclicConfig::default()
                    });
                    for (k, v) in us.iter().enumerate() {
                        s.record(k as u64, v * 1000, 0);
                    }
                    CyclicThreadDoc {
                        index: i,
                        figures: s.snapshot(),
                        ..CyclicThreadDoc::default()
                    }
                })
                .collect(),
            extra: Default::default(),
        }
    }

    /// The shape of rt-tests 2.4's output for `-h 3 -t 2` (checked against it on this machine).
    #[test]
    fn two_threads_have_two_columns_and_the_total_counts_buckets_only() {
        let c = doc(3, &[&[1, 1, 2, 7], &[0, 9, 8, 2, 30]]);
        assert_eq!(
            histogram(&c, false),
            "# Histogram\n\
             000000 000000\t000001\n\
             000001 000002\t000000\n\
             000002 000001\t000001\n\
             # Total: 000000003 000000002\n\
             # Min Latencies: 00001 00000\n\
             # Avg Latencies: 00002 00009\n\
             # Max Latencies: 00007 00030\n\
             # Histogram Overflows: 00001 00003\n\
             # Histogram Overflow at cycle number:\n\
             # Thread 0: 00003\n\
             # Thread 1: 00001 00002 00004\n\n"
        );
    }

    #[test]
    fn histofall_adds_a_column_over_all_threads_but_not_to_min_and_avg() {
        let c = doc(2, &[&[0, 1, 5], &[1, 1]]);
        let text = histogram(&c, true);
        assert!(text.contains("000001 000001\t000002\t000003\n"), "{text}");
        assert!(
            text.contains("# Total: 000000002 000000002 000000004\n"),
            "{text}"
        );
        assert!(text.contains("# Min Latencies: 00000 00001\n"), "{text}");
        assert!(
            text.contains("# Max Latencies: 00005 00001 00005\n"),
            "{text}"
        );
        assert!(
            text.contains("# Histogram Overflows: 00001 00000 00001\n"),
            "{text}"
        );
        // One thread: -H is -h.
        let one = doc(2, &[&[0, 1, 5]]);
        assert_eq!(histogram(&one, true), histogram(&one, false));
    }

    #[test]
    fn more_overflows_than_buckets_are_counted_as_others() {
        let c = doc(2, &[&[9, 9, 9, 9, 1]]);
        assert!(histogram(&c, false).contains("# Thread 0: 00000 00001 # 00002 others\n"));
    }
}
