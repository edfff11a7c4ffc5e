//! Lateness over time from a `--samples` file (`thread,release_ns,latency_ns`), in constant
//! memory: the worst sample per time bin and thread. Bins double in width (merging pairs) when
//! the run outgrows them, so a 10-million-sample file gives the same few hundred points as a short
//! one and is read once, as a stream.

use std::io::BufRead;

/// Time bins a timeline keeps at most.
pub const BINS: usize = 512;

/// The worst latency per bin of time, per thread.
#[derive(Clone, Debug, PartialEq)]
pub struct Timeline {
    /// Where the samples came from (shown in the figure's title).
    pub source: String,
    pub bin_ns: u64,
    /// Per thread: (thread number, worst latency in ns per bin; 0 = no sample in the bin).
    pub threads: Vec<(u64, Vec<u64>)>,
    pub samples: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum TimelineError {
    #[error("reading {source_name}: {error}")]
    Io {
        source_name: String,
        error: std::io::Error,
    },
    /// Not what `punctual latency --samples` writes.
    #[error("{source_name} line {line}: expected `thread,release_ns,latency_ns` (integers), as `punctual latency --samples FILE` writes")]
    Format { source_name: String, line: u64 },
}

struct Builder {
    start: Option<u64>,
    bin_ns: u64,
    threads: Vec<(u64, Vec<u64>)>,
    samples: u64,
}

impl Builder {
    fn push(&mut self, thread: u64, release: u64, latency: u64) {
        self.samples += 1;
        let start = *self.start.get_or_insert(release);
        // Threads are drained in chunks, so releases arrive nearly but not exactly in order.
        let mut i = (release.saturating_sub(start) / self.bin_ns) as usize;
        while i >= BINS {
            self.bin_ns = self.bin_ns.saturating_mul(2);
            for (_, bins) in &mut self.threads {
                for j in 0..BINS / 2 {
                    bins[j] = bins[2 * j].max(bins[2 * j + 1]);
                }
                bins[BINS / 2..].fill(0);
            }
            i = (release.saturating_sub(start) / self.bin_ns) as usize;
        }
        let t = match self.threads.iter().position(|t| t.0 == thread) {
            Some(t) => t,
            None => {
                self.threads.push((thread, vec![0; BINS]));
                self.threads.len() - 1
            }
        };
        let b = &mut self.threads[t].1[i];
        *b = (*b).max(latency);
    }
}

/// Read a samples file as a stream.
pub fn read(source: &str, input: impl BufRead) -> Result<Timeline, TimelineError> {
    let mut b = Builder {
        start: None,
        bin_ns: 1_000_000,
        threads: Vec::new(),
        samples: 0,
    };
    for (n, line) in input.lines().enumerate() {
        let line = line.map_err(|error| TimelineError::Io {
            source_name: source.into(),
            error,
        })?;
        if n == 0 && line.starts_with("thread") {
            continue;
        }
        if line.is_empty() {
            continue;
        }
        let bad = || TimelineError::Format {
            source_name: source.into(),
            line: n as u64 + 1,
        };
        let mut f = line.split(',').map(|x| x.trim().parse::<u64>());
        let (Some(Ok(t)), Some(Ok(r)), Some(Ok(l)), None) =
            (f.next(), f.next(), f.next(), f.next())
        else {
            return Err(bad());
        };
        b.push(t, r, l);
    }
    b.threads.sort_by_key(|t| t.0);
    Ok(Timeline {
        source: source.into(),
        bin_ns: b.bin_ns,
        threads: b.threads,
        samples: b.samples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_worst_per_bin_and_stays_bounded() {
        let mut csv = String::from("thread,release_ns,latency_ns\n");
        for k in 0..100_000u64 {
            let lat = if k == 77_777 { 900_000 } else { 3_000 + k % 5 };
            csv.push_str(&format!(
                "{},{},{}\n",
                k % 2,
                1_000_000_000 + k * 1_000_000,
                lat
            ));
        }
        let t = read("s.csv", csv.as_bytes()).unwrap();
        assert_eq!(t.samples, 100_000);
        assert_eq!(t.threads.len(), 2);
        assert!(t.threads.iter().all(|(_, b)| b.len() == BINS));
        // 100 s in at most 512 bins.
        assert!(t.bin_ns * BINS as u64 >= 100_000_000_000 && t.bin_ns < 1_000_000_000);
        let worst = t.threads[1].1.iter().max().unwrap();
        assert_eq!(
            *worst, 900_000,
            "the outlier (thread 1) survives the merges"
        );
        assert_eq!(*t.threads[0].1.iter().max().unwrap(), 3_004);
    }

    #[test]
    fn refuses_other_files_with_the_line() {
        let e = read(
            "x.csv",
            "thread,release_ns,latency_ns\n0,1,2\n0,abc,3\n".as_bytes(),
        );
        assert!(
            matches!(e, Err(TimelineError::Format { line: 3, .. })),
            "{e:?}"
        );
    }
}
