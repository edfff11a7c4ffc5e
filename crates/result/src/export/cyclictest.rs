//! cyclictest's `-h` histogram text, so scripts written for cyclictest keep working: one line per
//! microsecond bucket with a column per series, then the Total/Min/Avg/Max/Overflow trailer.
//!
//! Buckets are rebuilt from each series' HDR histogram: every HDR bin is counted in the microsecond
//! bucket of its lowest value. Below 2 us HDR bins are 1 ns wide, at 1 ms 512 ns wide, so a sample can
//! move at most to the neighbouring bucket, never further (within the histogram's 0.1 %).

use super::Exporter;
use crate::ResultDoc;
use std::fmt::Write;

/// `buckets` microsecond buckets (cyclictest's `-h N`); larger values count as overflows.
pub struct CyclictestHistogram {
    pub buckets: usize,
}

impl Default for CyclictestHistogram {
    fn default() -> Self {
        CyclictestHistogram { buckets: 1000 }
    }
}

impl Exporter for CyclictestHistogram {
    fn export(&self, doc: &ResultDoc) -> Vec<u8> {
        let n = self.buckets.max(1);
        let mut columns = Vec::new();
        let mut overflows = Vec::new();
        for s in &doc.series {
            let mut counts = vec![0u64; n];
            let mut over = 0u64;
            if let Ok(rec) = s.recorder() {
                let h = rec.histogram();
                for v in h.iter_recorded() {
                    let us = (h.lowest_equivalent(v.value_iterated_to()) / 1000) as usize;
                    match counts.get_mut(us) {
                        Some(c) => *c += v.count_at_value(),
                        None => over += v.count_at_value(),
                    }
                }
            }
            columns.push(counts);
            overflows.push(over);
        }
        let mut out = String::from("# Histogram\n");
        for i in 0..n {
            let _ = write!(out, "{i:06} ");
            let cells: Vec<String> = columns.iter().map(|c| format!("{:06}", c[i])).collect();
            out.push_str(&cells.join("\t"));
            out.push('\n');
        }
        let row = |label: &str, f: &dyn Fn(usize) -> String| {
            let mut line = format!("# {label}:");
            for i in 0..doc.series.len() {
                line.push(' ');
                line.push_str(&f(i));
            }
            line.push('\n');
            line
        };
        let s = &doc.series;
        out.push_str(&row("Total", &|i| format!("{:09}", s[i].summary.count)));
        out.push_str(&row("Min Latencies", &|i| {
            format!("{:05}", s[i].summary.min / 1000)
        }));
        out.push_str(&row("Avg Latencies", &|i| {
            format!("{:05}", s[i].summary.mean / 1000)
        }));
        out.push_str(&row("Max Latencies", &|i| {
            format!("{:05}", s[i].summary.max / 1000)
        }));
        out.push_str(&row("Histogram Overflows", &|i| {
            format!("{:05}", overflows[i])
        }));
        out.push_str("# Histogram Overflow at cycle number:\n");
        for i in 0..s.len() {
            let _ = writeln!(out, "# Thread {i}:");
        }
        out.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::tests::sample_doc;

    #[test]
    fn buckets_sum_to_the_counts_and_overflows_are_counted() {
        let doc = sample_doc();
        let text = String::from_utf8(CyclictestHistogram { buckets: 50 }.export(&doc)).unwrap();
        let mut sums = [0u64; 2];
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let f: Vec<u64> = line
                .split_whitespace()
                .map(|x| x.parse().unwrap())
                .collect();
            assert_eq!(f.len(), 3, "{line}");
            sums[0] += f[1];
            sums[1] += f[2];
        }
        // The one 60+ us sample per series is beyond 50 buckets.
        assert_eq!(sums, [999, 999]);
        assert!(
            text.contains("# Histogram Overflows: 00001 00001"),
            "{text}"
        );
        assert!(text.contains("# Total: 000001000 000001000"));
        assert!(text.lines().filter(|l| !l.starts_with('#')).count() == 50);
    }

    #[test]
    fn small_values_land_in_their_exact_microsecond() {
        let doc = sample_doc();
        let text = String::from_utf8(CyclictestHistogram::default().export(&doc)).unwrap();
        // Series 0 values are 3000..6999 ns plus one at 63+ us: buckets 3..=6 and 63..=66.
        let nonzero: Vec<usize> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let f: Vec<u64> = l.split_whitespace().map(|x| x.parse().unwrap()).collect();
                (f[1] > 0).then_some(f[0] as usize)
            })
            .collect();
        assert_eq!(&nonzero[..4], &[3, 4, 5, 6]);
        assert_eq!(nonzero.len(), 5);
        assert!((63..=66).contains(&nonzero[4]));
    }
}
