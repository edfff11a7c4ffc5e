//! The spread between runs: a confidence interval of the ratio of two sides' typical percentile,
//! from each run's own percentile.
//!
//! One run's histogram says how precisely that run's p99 is known, not how much the next run's p99
//! will differ: a neighbour's build, the host's steal or a cold cache move whole runs. So with
//! several runs per side the verdict rests on the runs' own percentiles: their logarithms (a
//! latency percentile is positive and its disturbances multiply), the difference of the two
//! sides' means and Welch's t interval around it, turned back into a ratio with `exp`. A ratio
//! interval never reaches below zero, so a change shown in percent never reaches below -100 %.
//! Each run's percentile carries its own sampling noise, so the spread between runs covers it.
//! With one run on a side the other side's spread stands for both (a pooled variance).

/// A ratio (other / base) and its interval.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct RatioInterval {
    pub ratio: f64,
    pub low: f64,
    pub high: f64,
    /// Degrees of freedom of the t interval (`None` for a bootstrap interval).
    pub df: Option<f64>,
}

/// Mean and sample variance (n - 1) of `x`.
fn mean_var(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let m = x.iter().sum::<f64>() / n;
    let v = if x.len() > 1 {
        x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    (m, v)
}

/// The geometric mean of positive values (zeros count as 1 ns).
pub fn geometric_mean(values: &[u64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let logs: Vec<f64> = values.iter().map(|&v| (v.max(1) as f64).ln()).collect();
    mean_var(&logs).0.exp()
}

/// The `confidence` interval of `mean(ln b) - mean(ln a)` as a ratio, from per-run values in ns.
/// `None` unless one side has at least two runs (with one run each, only the histograms can
/// speak: see `crate::bootstrap`).
pub fn ratio_interval(a: &[u64], b: &[u64], confidence: f64) -> Option<RatioInterval> {
    if a.is_empty() || b.is_empty() || (a.len() < 2 && b.len() < 2) {
        return None;
    }
    let ln = |v: &[u64]| -> Vec<f64> { v.iter().map(|&x| (x.max(1) as f64).ln()).collect() };
    let (la, lb) = (ln(a), ln(b));
    let (ma, va) = mean_var(&la);
    let (mb, vb) = mean_var(&lb);
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (se, df) = if a.len() >= 2 && b.len() >= 2 {
        let (qa, qb) = (va / na, vb / nb);
        let se2 = qa + qb;
        // Welch-Satterthwaite; equal spreads of zero leave the smaller of the two counts.
        let df = if se2 > 0.0 {
            se2 * se2 / (qa * qa / (na - 1.0) + qb * qb / (nb - 1.0))
        } else {
            na.min(nb) - 1.0
        };
        (se2.sqrt(), df)
    } else {
        // One run on a side: the other side's spread stands for both.
        let (v, n_many) = if a.len() >= 2 { (va, na) } else { (vb, nb) };
        ((v / na + v / nb).sqrt(), n_many - 1.0)
    };
    let d = mb - ma;
    let t = t_quantile(
        1.0 - (1.0 - confidence.clamp(0.5, 0.999_999)) / 2.0,
        df.max(1.0),
    );
    Some(RatioInterval {
        ratio: d.exp(),
        low: (d - t * se).exp(),
        high: (d + t * se).exp(),
        df: Some(df),
    })
}

/// ln Gamma(x), x > 0 (Lanczos, g = 7, 9 terms: about 15 significant digits).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let t = x + 7.5;
    let mut a = G[0];
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The continued fraction of the regularised incomplete beta function (modified Lentz).
fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    let tiny = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < tiny {
        d = tiny;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..300 {
        let m = m as f64;
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < tiny { tiny } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < tiny { tiny } else { c };
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < tiny { tiny } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < tiny { tiny } else { c };
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// The regularised incomplete beta function I_x(a, b).
fn inc_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    if x < (a + 1.0) / (a + b + 2.0) {
        ln_front.exp() * beta_cf(a, b, x) / a
    } else {
        1.0 - ln_front.exp() * beta_cf(b, a, 1.0 - x) / b
    }
}

/// P(T <= t) for Student's t with `df` degrees of freedom (any positive real df).
pub fn t_cdf(t: f64, df: f64) -> f64 {
    let tail = 0.5 * inc_beta(df / 2.0, 0.5, df / (df + t * t));
    if t >= 0.0 {
        1.0 - tail
    } else {
        tail
    }
}

/// The `p` quantile (0.5 < p < 1) of Student's t with `df` degrees of freedom, by bisection.
pub fn t_quantile(p: f64, df: f64) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    while t_cdf(hi, df) < p && hi < 1e9 {
        hi *= 2.0;
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if t_cdf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-10 * hi.max(1.0) {
            break;
        }
    }
    0.5 * (lo + hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_the_tables() {
        // (p, df, t) from any table of Student's t.
        for (p, df, t) in [
            (0.975, 1.0, 12.706),
            (0.975, 2.0, 4.303),
            (0.975, 4.0, 2.776),
            (0.995, 4.0, 4.604),
            (0.975, 30.0, 2.042),
            (0.95, 10.0, 1.812),
            (0.975, 1e6, 1.960),
        ] {
            let got = t_quantile(p, df);
            assert!(
                (got - t).abs() < 2e-3,
                "t({p}, {df}) = {got}, tables say {t}"
            );
        }
        assert!((t_cdf(0.0, 3.0) - 0.5).abs() < 1e-12);
        assert!((t_cdf(-2.776, 4.0) - 0.025).abs() < 1e-4);
    }

    #[test]
    fn the_interval_of_equal_sides_holds_one_and_a_shift_is_seen() {
        let a = [40_000u64, 44_000, 42_000];
        let same = ratio_interval(&a, &[43_000, 41_000, 42_500], 0.95).unwrap();
        assert!(same.low < 1.0 && same.high > 1.0, "{same:?}");
        let b = [60_000u64, 62_000, 61_000];
        let up = ratio_interval(&a, &b, 0.95).unwrap();
        assert!(
            up.low > 1.2 && (up.ratio - 61_000.0 / 42_000.0).abs() < 0.02,
            "{up:?}"
        );
        let down = ratio_interval(&b, &a, 0.95).unwrap();
        assert!(down.high < 1.0 && down.low > 0.0, "{down:?}");
    }

    #[test]
    fn one_disturbed_run_widens_the_interval_instead_of_flagging_a_change() {
        let a = [40_000u64, 42_000, 41_000];
        let b = [41_000u64, 40_500, 140_000];
        let iv = ratio_interval(&a, &b, 0.95).unwrap();
        assert!(iv.low < 1.0, "{iv:?}");
        assert!(
            iv.high > 3.0,
            "a run 3.4 times slower makes the interval wide: {iv:?}"
        );
    }

    #[test]
    fn a_ratio_interval_never_reaches_below_zero_and_one_run_each_gives_none() {
        let iv = ratio_interval(&[1_000, 900_000], &[1, 2], 0.99).unwrap();
        assert!(
            iv.low > 0.0 && iv.low < iv.ratio && iv.ratio < iv.high,
            "{iv:?}"
        );
        assert!(ratio_interval(&[5], &[6], 0.95).is_none());
        // One run against three: the three's spread stands for both.
        let one = ratio_interval(&[50_000], &[40_000, 41_000, 39_000], 0.95).unwrap();
        assert_eq!(one.df, Some(2.0));
        assert!(one.high < 1.0, "{one:?}");
        assert!((geometric_mean(&[10, 1000]) - 100.0).abs() < 1e-9);
    }
}
