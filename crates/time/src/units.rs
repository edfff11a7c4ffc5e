//! Durations always carry a unit (`250us`, `1.5ms`, `2m`). A bare number is refused with a hint,
//! because "1000" means microseconds to cyclictest, milliseconds to a sysctl and seconds to `sleep`.

use std::time::Duration;

/// Why a duration could not be read. Each variant's message says how to write it instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("empty duration; write a number with a unit, e.g. 250us")]
    Empty,
    #[error("'{input}' has no unit; did you mean {input}{hint}? (units: ns, us, ms, s, m, h)")]
    BareNumber { input: String, hint: &'static str },
    #[error("'{input}' has unknown unit '{unit}' (units: ns, us, ms, s, m, h)")]
    UnknownUnit { input: String, unit: String },
    #[error("'{input}' is negative; durations are zero or more")]
    Negative { input: String },
    #[error("'{input}' is not a number with a unit, e.g. 1.5ms")]
    Malformed { input: String },
    #[error("'{input}' is finer than 1 ns, the resolution punctual works in")]
    TooFine { input: String },
    #[error("'{input}' is too long to represent (the limit is about 584 years)")]
    Overflow { input: String },
}

/// Parse a duration with a unit into nanoseconds.
///
/// Accepts decimals (`1.5ms`), optional whitespace between number and unit, and `µs` for `us`.
/// A bare number is refused with `us` suggested (intervals, margins, costs).
pub fn parse_duration_ns(input: &str) -> Result<u64, DurationError> {
    parse_duration_hinting(input, "us")
}

/// As [`parse_duration_ns`], suggesting `hint` for a bare number: the unit that makes a bare
/// number plausible for the value asked (`s` for how long a run lasts: `-D 10`).
pub fn parse_duration_hinting(input: &str, hint: &'static str) -> Result<u64, DurationError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    if s.starts_with('-') {
        return Err(DurationError::Negative {
            input: s.to_string(),
        });
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_' || c == '+'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let num = num.trim_start_matches('+').replace('_', "");
    let unit = unit.trim();
    if num.is_empty() || num == "." || num.matches('.').count() > 1 {
        return Err(DurationError::Malformed {
            input: s.to_string(),
        });
    }
    if unit.is_empty() {
        return Err(DurationError::BareNumber { input: num, hint });
    }
    let scale: u64 = match unit {
        "ns" => 1,
        "us" | "µs" | "μs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        other => {
            return Err(DurationError::UnknownUnit {
                input: s.to_string(),
                unit: other.to_string(),
            })
        }
    };
    let (int_part, frac_part) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num.as_str(), ""),
    };
    let overflow = || DurationError::Overflow {
        input: s.to_string(),
    };
    let int: u64 = if int_part.is_empty() {
        0
    } else {
        int_part.parse().map_err(|_| overflow())?
    };
    let mut total = int.checked_mul(scale).ok_or_else(overflow)?;
    // Exact decimal fraction: each digit is worth scale / 10^k nanoseconds.
    let mut place = scale;
    for d in frac_part.chars() {
        let digit = d.to_digit(10).ok_or_else(|| DurationError::Malformed {
            input: s.to_string(),
        })? as u64;
        if digit == 0 {
            place /= 10;
            continue;
        }
        if place < 10 {
            return Err(DurationError::TooFine {
                input: s.to_string(),
            });
        }
        place /= 10;
        total = total.checked_add(digit * place).ok_or_else(overflow)?;
    }
    Ok(total)
}

/// Parse a duration with a unit into a [`Duration`].
pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    parse_duration_ns(input).map(Duration::from_nanos)
}

/// Human form of a nanosecond value, with its unit and three significant digits
/// (`850 ns`, `12.3 us`, `1.50 ms`, `2.00 s`).
pub fn format_ns(ns: u64) -> String {
    let v = ns as f64;
    let (value, unit) = if ns < 1_000 {
        return format!("{ns} ns");
    } else if ns < 1_000_000 {
        (v / 1e3, "us")
    } else if ns < 1_000_000_000 {
        (v / 1e6, "ms")
    } else {
        (v / 1e9, "s")
    };
    if value >= 100.0 {
        format!("{value:.0} {unit}")
    } else if value >= 10.0 {
        format!("{value:.1} {unit}")
    } else {
        format!("{value:.2} {unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn units() {
        assert_eq!(parse_duration_ns("250us"), Ok(250_000));
        assert_eq!(parse_duration_ns("1.5ms"), Ok(1_500_000));
        assert_eq!(parse_duration_ns("0.001us"), Ok(1));
        assert_eq!(parse_duration_ns("2m"), Ok(120_000_000_000));
        assert_eq!(parse_duration_ns("1h"), Ok(3_600_000_000_000));
        assert_eq!(parse_duration_ns("30 s"), Ok(30_000_000_000));
        assert_eq!(parse_duration_ns("10µs"), Ok(10_000));
        assert_eq!(parse_duration_ns("16667us"), Ok(16_667_000));
        assert_eq!(parse_duration_ns("0us"), Ok(0));
        assert_eq!(parse_duration_ns(".5s"), Ok(500_000_000));
    }

    #[test]
    fn bare_number_is_refused_with_a_hint() {
        let e = parse_duration_ns("1000").unwrap_err();
        assert_eq!(
            e,
            DurationError::BareNumber {
                input: "1000".into(),
                hint: "us"
            }
        );
        assert!(e.to_string().contains("did you mean 1000us?"), "{e}");
        let e = parse_duration_hinting("10", "s").unwrap_err();
        assert!(e.to_string().contains("did you mean 10s?"), "{e}");
    }

    #[test]
    fn bad_forms() {
        assert!(matches!(parse_duration_ns(""), Err(DurationError::Empty)));
        assert!(matches!(
            parse_duration_ns("-5ms"),
            Err(DurationError::Negative { .. })
        ));
        assert!(matches!(
            parse_duration_ns("5 parsecs"),
            Err(DurationError::UnknownUnit { .. })
        ));
        assert!(matches!(
            parse_duration_ns("ms"),
            Err(DurationError::Malformed { .. })
        ));
        assert!(matches!(
            parse_duration_ns("1.2.3ms"),
            Err(DurationError::Malformed { .. })
        ));
        assert!(matches!(
            parse_duration_ns("0.5ns"),
            Err(DurationError::TooFine { .. })
        ));
        assert!(matches!(
            parse_duration_ns("99999999999999999999s"),
            Err(DurationError::Overflow { .. })
        ));
        assert!(matches!(
            parse_duration_ns("6000000000h"),
            Err(DurationError::Overflow { .. })
        ));
        assert_eq!(
            parse_duration_ns("18446744073709551615ns"),
            Ok(u64::MAX),
            "the limit itself"
        );
        let e = parse_duration_ns("18446744073709551616ns").unwrap_err();
        assert!(e.to_string().contains("too long"), "{e}");
        assert_eq!(parse_duration_ns("18446744073.709551615s"), Ok(u64::MAX));
        assert!(matches!(
            parse_duration_ns("18446744073.709551616s"),
            Err(DurationError::Overflow { .. })
        ));
    }

    #[test]
    fn formats_with_units() {
        assert_eq!(format_ns(850), "850 ns");
        assert_eq!(format_ns(12_345), "12.3 us");
        assert_eq!(format_ns(1_500_000), "1.50 ms");
        assert_eq!(format_ns(250_000), "250 us");
        assert_eq!(format_ns(2_000_000_000), "2.00 s");
    }

    proptest! {
        #[test]
        fn integer_values_round_trip_in_every_unit(n in 0u64..1_000_000, unit in 0usize..4) {
            let (suffix, scale) = [("ns", 1u64), ("us", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000)][unit];
            prop_assert_eq!(parse_duration_ns(&format!("{n}{suffix}")), Ok(n * scale));
        }

        #[test]
        fn decimal_microseconds_are_exact(whole in 0u64..100_000, milli in 0u64..1000) {
            let s = format!("{whole}.{milli:03}us");
            prop_assert_eq!(parse_duration_ns(&s), Ok(whole * 1000 + milli));
        }

        #[test]
        fn never_panics(s in "\\PC{0,12}") {
            let _ = parse_duration_ns(&s);
        }

        #[test]
        fn values_at_the_u64_limit_parse_or_are_refused_as_overflow(n in (u64::MAX / 4)..=u64::MAX, unit in 0usize..6) {
            let (suffix, scale) = [("ns", 1u64), ("us", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000), ("m", 60_000_000_000), ("h", 3_600_000_000_000)][unit];
            let got = parse_duration_ns(&format!("{n}{suffix}"));
            match n.checked_mul(scale) {
                Some(v) => prop_assert_eq!(got, Ok(v)),
                None => prop_assert!(matches!(got, Err(DurationError::Overflow { .. })), "{:?}", got),
            }
        }

        #[test]
        fn decimal_seconds_near_the_limit_are_exact_or_overflow(whole in 18_446_744_000u64..18_446_744_100, frac in 0u64..1_000_000_000) {
            let got = parse_duration_ns(&format!("{whole}.{frac:09}s"));
            let exact = (whole as u128) * 1_000_000_000 + frac as u128;
            if exact <= u64::MAX as u128 {
                prop_assert_eq!(got, Ok(exact as u64));
            } else {
                prop_assert!(matches!(got, Err(DurationError::Overflow { .. })), "{:?}", got);
            }
        }

        #[test]
        fn huge_digit_strings_are_refused_not_wrapped(digits in "[1-9][0-9]{20,40}", unit in prop::sample::select(vec!["ns", "us", "ms", "s", "m", "h"])) {
            let got = parse_duration_ns(&format!("{digits}{unit}"));
            prop_assert!(matches!(got, Err(DurationError::Overflow { .. })), "{:?}", got);
        }
    }
}

/// A count from `MIN` to `MAX` as a command line gives it, said in words when out of range.
pub fn parse_count<const MIN: u64, const MAX: u64>(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(n) if (MIN..=MAX).contains(&n) => Ok(n),
        _ if MAX == u64::MAX => Err(format!("'{s}' is not a count of at least {MIN}")),
        _ => Err(format!("'{s}' is not a count from {MIN} to {MAX}")),
    }
}

#[cfg(test)]
mod count_tests {
    use super::parse_count;

    #[test]
    fn counts_are_refused_in_words() {
        assert_eq!(parse_count::<1, 10>("10"), Ok(10));
        assert_eq!(
            parse_count::<1, 10>("11"),
            Err("'11' is not a count from 1 to 10".into())
        );
        assert_eq!(
            parse_count::<1, { u64::MAX }>("0"),
            Err("'0' is not a count of at least 1".into())
        );
    }
}
