//! Values as a reader wants them: durations with their unit (`3 s`, not `duration_ns
//! 3000000000`), yes/no, lists joined, never raw JSON; names of settings without their unit
//! suffix; what each series kind measures, for axes and headings.

use punctual_result::doc::kind;
use punctual_time::format_ns;
use serde_json::Value;

/// A setting's name without its unit suffix, words apart: `duration_ns` -> `duration`,
/// `dma_latency_us` -> `dma latency`.
pub fn key(k: &str) -> String {
    k.strip_suffix("_ns")
        .or_else(|| k.strip_suffix("_us"))
        .unwrap_or(k)
        .replace('_', " ")
}

/// The unit a key's numbers are in: ns (`_ns`), us (`_us`) or none.
fn scale(k: &str) -> Option<u64> {
    if k.ends_with("_ns") {
        Some(1)
    } else if k.ends_with("_us") {
        Some(1_000)
    } else {
        None
    }
}

/// `v` (found under `k`) in words and units.
pub fn value(k: &str, v: &Value) -> String {
    match (v, scale(k)) {
        (Value::Null, _) => "-".into(),
        (Value::Bool(b), _) => if *b { "yes" } else { "no" }.into(),
        (Value::Number(n), Some(unit)) => match n.as_u64() {
            Some(x) => format_ns(x.saturating_mul(unit)),
            None => n.to_string(),
        },
        (Value::Number(n), None) => n.to_string(),
        (Value::String(s), _) => s.clone(),
        (Value::Array(items), _) if items.is_empty() => "none".into(),
        (Value::Array(items), _) => {
            let parts: Vec<String> = items.iter().take(8).map(|i| value(k, i)).collect();
            let more = items.len().saturating_sub(8);
            let mut s = parts.join("; ");
            if more > 0 {
                s.push_str(&format!("; {more} more"));
            }
            s
        }
        (Value::Object(o), _) if o.is_empty() => "none".into(),
        (Value::Object(o), unit) => {
            // Per-CPU maps (`steal_ns`: {"0": ns, "1": ns}) read as "CPU 0 12 ms, CPU 1 0 ns".
            let per_cpu = o.keys().all(|c| c.parse::<usize>().is_ok());
            o.iter()
                .take(12)
                .map(|(field, v)| {
                    let shown = if per_cpu && unit.is_some() {
                        value(k, v)
                    } else {
                        value(field, v)
                    };
                    if per_cpu {
                        format!("CPU {field} {shown}")
                    } else {
                        format!("{} {shown}", key(field))
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        }
    }
}

/// A share (0-1) in percent, to `digits` decimals.
pub fn percent(share: f64, digits: usize) -> String {
    format!("{:.digits$} %", 100.0 * share)
}

/// What a series of this kind measures, for an axis or a heading ("wake-up latency").
pub fn quantity(k: &str) -> &'static str {
    match k {
        kind::WAKEUP_LATENCY => "wake-up latency",
        kind::LATENESS => "lateness",
        kind::DISPATCH => "dispatch latency",
        kind::EXEC_START => "exec start latency",
        kind::INTERVAL_DEVIATION => "interval deviation",
        kind::CONTEXT_SWITCH => "context switch time",
        kind::TRAP => "trap time",
        kind::COPY => "copy time",
        kind::GAP => "gap length",
        kind::ALARM_LATENCY => "alarm latency",
        kind::ALARM_LATENESS => "alarm lateness",
        kind::NANOSLEEP_JITTER => "nanosleep jitter",
        kind::EFFECTIVE_QUANTUM => "quantum length",
        kind::FRAME_LATENESS => "frame lateness",
        kind::IRQ_DURATION => "IRQ handler duration",
        kind::SOFTIRQ_DURATION => "softirq duration",
        kind::HRTIMER_DURATION => "hrtimer handler duration",
        kind::TIMER_EXPIRY_LATENCY => "timer expiry latency",
        _ => "value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_carry_units_and_never_read_as_json() {
        assert_eq!(key("duration_ns"), "duration");
        assert_eq!(value("duration_ns", &json!(3_000_000_000u64)), "3.00 s");
        assert_eq!(value("interval_ns", &json!(1_000_000)), "1.00 ms");
        assert_eq!(value("dma_latency_us", &json!(0)), "0 ns");
        assert_eq!(value("mlock", &json!(true)), "yes");
        assert_eq!(
            value("steal_ns", &json!({"0": 10_000_000, "1": 0})),
            "CPU 0 10.0 ms, CPU 1 0 ns"
        );
        assert_eq!(value("fallbacks", &json!([])), "none");
        let reports = value(
            "load_reports",
            &json!([{"kind": "cpu", "cpu_ns": 2_000_000_000u64, "ok": true}]),
        );
        assert_eq!(reports, "cpu 2.00 s, kind cpu, ok yes");
        for s in [reports.as_str(), &value("x", &json!({"a": [1, 2]}))] {
            assert!(!s.contains('{') && !s.contains('['), "{s}");
        }
        assert_eq!(quantity(kind::EFFECTIVE_QUANTUM), "quantum length");
    }
}
