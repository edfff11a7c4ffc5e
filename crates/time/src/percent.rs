//! Percentages as people write them on a command line: `90`, `90%`, `2.5 %`. One parser for every
//! flag that takes one, so they all read the same text the same way: blanks around the number, at
//! most one `%` after it (`50%%` is a typo, not 50 %), a finite number, in the flag's range.

use std::ops::{Bound, RangeBounds};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PercentError {
    #[error("'{input}' is not a percentage, e.g. 90% or 2.5")]
    NotANumber { input: String },
    #[error("'{input}' must be {}", describe(.min, .max))]
    OutOfRange {
        input: String,
        min: Bound<f64>,
        max: Bound<f64>,
    },
}

/// The percentage `input` says (`"90%"` -> 90.0), refused unless it lies in `range` (percent).
pub fn parse_percent_in(input: &str, range: impl RangeBounds<f64>) -> Result<f64, PercentError> {
    let text = input.trim();
    let number = text.strip_suffix('%').unwrap_or(text).trim_end();
    let v: f64 = number
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
        .ok_or_else(|| PercentError::NotANumber {
            input: input.into(),
        })?;
    if !range.contains(&v) {
        return Err(PercentError::OutOfRange {
            input: input.into(),
            min: range.start_bound().cloned(),
            max: range.end_bound().cloned(),
        });
    }
    Ok(v)
}

/// A range in words: "from 0% to 100%", "above 0% and at most 100%", "0% or more".
fn describe(min: &Bound<f64>, max: &Bound<f64>) -> String {
    let low = match min {
        Bound::Included(v) => Some(format!("from {v}%")),
        Bound::Excluded(v) => Some(format!("above {v}%")),
        Bound::Unbounded => None,
    };
    let high = match max {
        Bound::Included(v) => Some(format!("{v}%")),
        Bound::Excluded(v) => Some(format!("under {v}%")),
        Bound::Unbounded => None,
    };
    match (low, high, min) {
        (Some(l), Some(h), Bound::Excluded(_)) if matches!(max, Bound::Included(_)) => {
            format!("{l} and at most {h}")
        }
        (Some(l), Some(h), _) => format!("{l} to {h}"),
        (Some(_), None, Bound::Included(v)) => format!("{v}% or more"),
        (Some(l), None, _) => l,
        (None, Some(h), _) => format!("at most {h}"),
        (None, None, _) => "a percentage".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Bound::{Excluded, Included};

    #[test]
    fn numbers_with_and_without_a_sign_and_blanks() {
        for (s, v) in [("90", 90.0), ("90%", 90.0), (" 2.5 % ", 2.5), ("0", 0.0)] {
            assert_eq!(parse_percent_in(s, 0.0..=100.0), Ok(v), "{s}");
        }
    }

    #[test]
    fn doubled_signs_words_and_infinities_are_not_percentages() {
        for s in ["50%%", "%", "", "ten", "nan", "inf", "1e999", "5 0"] {
            assert_eq!(
                parse_percent_in(s, ..),
                Err(PercentError::NotANumber { input: s.into() }),
                "{s}"
            );
        }
    }

    #[test]
    fn out_of_range_says_the_range_in_words() {
        let said =
            |s: &str, r: (Bound<f64>, Bound<f64>)| parse_percent_in(s, r).unwrap_err().to_string();
        assert_eq!(
            said("0", (Excluded(0.0), Included(100.0))),
            "'0' must be above 0% and at most 100%"
        );
        assert_eq!(
            said("120%", (Included(0.0), Included(100.0))),
            "'120%' must be from 0% to 100%"
        );
        assert_eq!(
            said("-5", (Included(0.0), Bound::Unbounded)),
            "'-5' must be 0% or more"
        );
        assert_eq!(
            said("100", (Included(50.0), Excluded(100.0))),
            "'100' must be from 50% to under 100%"
        );
        assert_eq!(parse_percent_in("99.99", 50.0..100.0), Ok(99.99));
        assert_eq!(
            parse_percent_in("100%", (Excluded(0.0), Included(100.0))),
            Ok(100.0)
        );
    }
}
