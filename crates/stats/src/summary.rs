use serde::{Deserialize, Serialize};

/// The percentiles every series reports, as (JSON key, milli-percent). Milli-percent keeps rank
/// arithmetic in integers: 99.999 % of 10 million is exactly 9_999_900.
pub const PERCENTILES: [(&str, u64); 7] = [
    ("50", 50_000),
    ("90", 90_000),
    ("95", 95_000),
    ("99", 99_000),
    ("99.9", 99_900),
    ("99.99", 99_990),
    ("99.999", 99_999),
];

/// KURT's table thresholds (Tables 4.1, 4.2): share of samples within 10, 50, 100, 500, 1000 us.
pub const WITHIN_NS: [u64; 5] = [10_000, 50_000, 100_000, 500_000, 1_000_000];

/// 1-based nearest rank for `milli_percent` of `n` samples: ceil(n * p / 100000), at least 1.
pub(crate) fn nearest_rank_index(n: u64, milli_percent: u64) -> u64 {
    let r = (n as u128 * milli_percent as u128).div_ceil(100_000) as u64;
    r.clamp(1, n.max(1))
}

/// Exact nearest-rank percentile of sorted values (reference for tests and small samples).
pub fn exact_nearest_rank(sorted: &[u64], milli_percent: u64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[nearest_rank_index(sorted.len() as u64, milli_percent) as usize - 1]
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Percentiles {
    #[serde(rename = "50")]
    pub p50: u64,
    #[serde(rename = "90")]
    pub p90: u64,
    #[serde(rename = "95")]
    pub p95: u64,
    #[serde(rename = "99")]
    pub p99: u64,
    #[serde(rename = "99.9")]
    pub p99_9: u64,
    #[serde(rename = "99.99")]
    pub p99_99: u64,
    #[serde(rename = "99.999")]
    pub p99_999: u64,
}

/// Fractions of samples at or below each KURT threshold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Within {
    #[serde(rename = "10us")]
    pub us10: f64,
    #[serde(rename = "50us")]
    pub us50: f64,
    #[serde(rename = "100us")]
    pub us100: f64,
    #[serde(rename = "500us")]
    pub us500: f64,
    #[serde(rename = "1000us")]
    pub us1000: f64,
}

/// The numbers of one series (SPEC section 3), all times in ns.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub count: u64,
    pub min: u64,
    pub max: u64,
    pub mean: u64,
    pub stddev: u64,
    pub median: u64,
    pub percentiles: Percentiles,
    pub within: Within,
    pub missed_periods: u64,
    pub woke_late: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks() {
        assert_eq!(nearest_rank_index(10, 50_000), 5);
        assert_eq!(nearest_rank_index(10, 99_999), 10);
        assert_eq!(nearest_rank_index(1, 50_000), 1);
        assert_eq!(nearest_rank_index(10_000_000, 99_999), 9_999_900);
        assert_eq!(nearest_rank_index(0, 50_000), 1);
    }

    #[test]
    fn serialises_with_the_spec_keys() {
        let s = Summary::default();
        let j = serde_json::to_value(&s).unwrap();
        let keys: Vec<_> = j["percentiles"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert!(keys.contains(&"99.999".to_string()) && keys.contains(&"50".to_string()));
        assert!(j["within"].get("1000us").is_some());
    }
}
