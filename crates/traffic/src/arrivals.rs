//! What a receiver saw of a stream sent at a fixed spacing: the error of every inter-arrival time
//! against the spacing (ARTS's check with a cell analyzer, thesis Fig. 4.7). [`GapErrors`] is the
//! accumulator it shares with `record --against` ([`crate::against`]), where the wanted gap is the
//! file's own.

use punctual_stats::Recorder;

/// Received gaps against the gaps wanted, accumulated online: |error|, the shares within 1 % and
/// 7 % of the wanted gap (ARTS's metric), and the signed error's mean and deviation (Welford).
#[derive(Clone, Debug)]
pub struct GapErrors {
    /// |got - want| of every gap.
    pub error: Recorder,
    pub compared: u64,
    pub within_1pct: u64,
    pub within_7pct: u64,
    mean: f64,
    m2: f64,
    /// Sums of the wanted and received gaps (ns).
    pub sum_want: u64,
    pub sum_got: u64,
}

impl Default for GapErrors {
    fn default() -> Self {
        GapErrors {
            error: Recorder::new(),
            compared: 0,
            within_1pct: 0,
            within_7pct: 0,
            mean: 0.0,
            m2: 0.0,
            sum_want: 0,
            sum_got: 0,
        }
    }
}

impl GapErrors {
    /// One gap: `got` received where `want` was wanted. Returns the signed error (ns).
    #[inline]
    pub fn add(&mut self, got: u64, want: u64) -> i128 {
        let e = got as i128 - want as i128;
        let abs = e.unsigned_abs() as u64;
        self.error.record(abs);
        self.compared += 1;
        self.within_1pct += (abs as f64 <= 0.01 * want as f64) as u64;
        self.within_7pct += (abs as f64 <= 0.07 * want as f64) as u64;
        let d = e as f64 - self.mean;
        self.mean += d / self.compared as f64;
        self.m2 += d * (e as f64 - self.mean);
        self.sum_want += want;
        self.sum_got += got;
        e
    }

    /// Mean of the signed error (ns), 0 before any gap.
    pub fn mean_ns(&self) -> f64 {
        self.mean
    }

    /// Standard deviation of the signed error (ns), 0 before any gap.
    pub fn sd_ns(&self) -> f64 {
        if self.compared == 0 {
            return 0.0;
        }
        (self.m2 / self.compared as f64).sqrt()
    }

    /// (received - wanted) / wanted over every gap, `None` before any.
    pub fn stretch(&self) -> Option<f64> {
        (self.sum_want > 0)
            .then(|| (self.sum_got as f64 - self.sum_want as f64) / self.sum_want as f64)
    }
}

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
        let mut g = GapErrors::default();
        for w in ts.windows(2) {
            g.add(w[1].saturating_sub(w[0]), spacing_ns);
        }
        let gaps = g.compared as f64;
        let span = (ts[ts.len() - 1] - ts[0]) as f64;
        Some(Arrivals {
            sd_ns: g.sd_ns(),
            within_1pct: g.within_1pct as f64 / gaps,
            within_7pct: g.within_7pct as f64 / gaps,
            stretch: span / (gaps * spacing_ns as f64) - 1.0,
            received: ts.len() as u64,
            error: g.error,
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
