//! What a receiver saw of a stream sent at a fixed spacing: the error of every inter-arrival time
//! against the spacing (ARTS's check with a cell analyzer, thesis Fig. 4.7).

use punctual_stats::Recorder;

/// Inter-arrival errors of one received stream.
#[derive(Clone, Debug)]
pub struct Arrivals {
    /// |inter-arrival - spacing| of every consecutive pair.
    pub error: Recorder,
    /// Standard deviation of the signed error (ns): the thesis' "variance" figure.
    pub sd_ns: f64,
    pub within_1pct: f64,
    pub within_7pct: f64,
    /// (last - first) against (n - 1) x spacing, as a fraction: how far the stream stretched.
    pub stretch: f64,
    pub received: u64,
}

impl Arrivals {
    /// `ts`: receive timestamps in order; `None` under two arrivals.
    pub fn of(ts: &[u64], spacing_ns: u64) -> Option<Arrivals> {
        if ts.len() < 2 || spacing_ns == 0 {
            return None;
        }
        let s = spacing_ns as f64;
        let mut error = Recorder::new();
        let (mut w1, mut w7) = (0u64, 0u64);
        let (mut mean, mut m2, mut n) = (0.0f64, 0.0f64, 0.0f64);
        for w in ts.windows(2) {
            let gap = w[1].saturating_sub(w[0]);
            let e = gap.abs_diff(spacing_ns);
            error.record(e);
            let ef = e as f64;
            w1 += (ef <= 0.01 * s) as u64;
            w7 += (ef <= 0.07 * s) as u64;
            let signed = gap as f64 - s;
            n += 1.0;
            let d = signed - mean;
            mean += d / n;
            m2 += d * (signed - mean);
        }
        let gaps = (ts.len() - 1) as f64;
        let span = (ts[ts.len() - 1] - ts[0]) as f64;
        Some(Arrivals {
            error,
            sd_ns: (m2 / n).sqrt(),
            within_1pct: w1 as f64 / gaps,
            within_7pct: w7 as f64 / gaps,
            stretch: span / (gaps * s) - 1.0,
            received: ts.len() as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_shares_and_stretch_of_a_known_stream() {
        // 500 us spacing: gaps of 500, 503 (0.6 %), 520 (4 %), 600 (20 %) us.
        let ts = [0, 500_000, 1_003_000, 1_523_000, 2_123_000];
        let a = Arrivals::of(&ts, 500_000).unwrap();
        assert_eq!(a.received, 5);
        assert_eq!(a.error.count(), 4);
        assert_eq!(a.error.max(), Some(100_000));
        assert_eq!(a.within_1pct, 0.5);
        assert_eq!(a.within_7pct, 0.75);
        assert!((a.stretch - 123_000.0 / 2_000_000.0).abs() < 1e-12);
        // Signed errors 0, 3, 20, 100 us: mean 30.75 us.
        let mean = 30_750.0;
        let sd = ([0.0f64, 3e3, 20e3, 100e3]
            .iter()
            .map(|e| (e - mean).powi(2))
            .sum::<f64>()
            / 4.0)
            .sqrt();
        assert!((a.sd_ns - sd).abs() < 1e-6, "{} vs {sd}", a.sd_ns);
        assert!(Arrivals::of(&[5], 500_000).is_none());
    }
}
