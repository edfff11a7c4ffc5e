//! The result document, `punctual.result/1` (SPEC section 3). Every time value is integer ns.

use crate::{Fallback, HostFacts};
use punctual_stats::{
    decode_histogram, encode_histogram, HistogramError, Recorder, Summary, HISTOGRAM_ENCODING,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

pub const SCHEMA_ID: &str = "punctual.result/1";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

impl Default for Tool {
    fn default() -> Self {
        Tool {
            name: "punctual".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    LimitExceeded,
    Interrupted,
    /// The watchdog stopped the run (a starved CPU, a stuck action, a real-time process past
    /// RLIMIT_RTTIME): exit 3, partial figures.
    Watchdog,
}

/// How the run was set up. The real-time fields are absent for runs that have none (the simulator);
/// commands add their own keys in `extra` (interval, mode, load...).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub policy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub priority: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mlock: Option<bool>,
    /// `null` when /dev/cpu_dma_latency was left alone.
    #[serde(default)]
    pub dma_latency_us: Option<u32>,
    #[serde(default)]
    pub fallbacks: Vec<Fallback>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The histogram of a series, in a documented mergeable encoding.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EncodedHistogram {
    pub encoding: String,
    pub data: String,
}

/// One series of samples: its identity, its numbers, its histogram, and command-specific extras
/// (`cpu_ns`, `duration_ns`, `spin_margin_ns`...).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Series {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cpu: Option<usize>,
    pub kind: String,
    #[serde(flatten)]
    pub summary: Summary,
    pub histogram: EncodedHistogram,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Every series kind punctual writes: one vocabulary, also listed in the JSON schema (`kind`).
pub mod kind {
    /// From the intended release to the thread running again (`latency`, `check`, traces).
    pub const WAKEUP_LATENCY: &str = "wakeup_latency";
    /// From a release instant to its action or process starting (`run`, periodic processes).
    pub const LATENESS: &str = "lateness";
    /// From an event raised to the process woken for it, or to the dispatcher acting.
    pub const DISPATCH: &str = "dispatch";
    /// From an exec action's release to its child running.
    pub const EXEC_START: &str = "exec_start";
    /// |time since the previous iteration - period| (KURT's metric).
    pub const INTERVAL_DEVIATION: &str = "interval_deviation";
    pub const CONTEXT_SWITCH: &str = "context_switch";
    pub const TRAP: &str = "trap";
    /// Time per copy (`bench memcpy`).
    pub const COPY: &str = "copy";
    /// An interruption of a busy loop (`bench gaps`).
    pub const GAP: &str = "gap";
    /// From the interrupt that delivered an alarm to the task running (Etsion's Table 6).
    pub const ALARM_LATENCY: &str = "alarm_latency";
    /// From an alarm's asked-for time to the task running.
    pub const ALARM_LATENESS: &str = "alarm_lateness";
    pub const NANOSLEEP_JITTER: &str = "nanosleep_jitter";
    /// A task's time on the CPU from switch-in to switch-out (Etsion's quantum).
    pub const EFFECTIVE_QUANTUM: &str = "effective_quantum";
    pub const FRAME_LATENESS: &str = "frame_lateness";
    pub const IRQ_DURATION: &str = "irq_duration";
    pub const SOFTIRQ_DURATION: &str = "softirq_duration";
    pub const HRTIMER_DURATION: &str = "hrtimer_duration";
    /// From an hrtimer's programmed expiry to its handler starting (the timer interrupt's latency).
    pub const TIMER_EXPIRY_LATENCY: &str = "timer_expiry_latency";

    /// All of them, in the schema's order.
    pub const ALL: [&str; 18] = [
        WAKEUP_LATENCY,
        LATENESS,
        DISPATCH,
        EXEC_START,
        INTERVAL_DEVIATION,
        CONTEXT_SWITCH,
        TRAP,
        COPY,
        GAP,
        ALARM_LATENCY,
        ALARM_LATENESS,
        NANOSLEEP_JITTER,
        EFFECTIVE_QUANTUM,
        FRAME_LATENESS,
        IRQ_DURATION,
        SOFTIRQ_DURATION,
        HRTIMER_DURATION,
        TIMER_EXPIRY_LATENCY,
    ];
}

impl Series {
    pub fn from_recorder(
        name: impl Into<String>,
        kind: &str,
        cpu: Option<usize>,
        rec: &Recorder,
    ) -> Self {
        Series {
            name: name.into(),
            cpu,
            kind: kind.into(),
            summary: rec.summary(),
            histogram: EncodedHistogram {
                encoding: HISTOGRAM_ENCODING.into(),
                data: encode_histogram(rec.histogram()),
            },
            extra: Map::new(),
        }
    }

    /// Add a command-specific field.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.extra.insert(key.into(), value.into());
        self
    }

    /// Rebuild the recorder (to merge series across threads or stored runs).
    pub fn recorder(&self) -> Result<Recorder, HistogramError> {
        let h = decode_histogram(&self.histogram.encoding, &self.histogram.data)?;
        Ok(Recorder::from_summary(&self.summary, h))
    }
}

/// The whole document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResultDoc {
    pub schema: String,
    /// This run's own id (32 hex digits, random), given when its outputs are written; the results
    /// store files the run under its first 12 digits, so an export imported elsewhere keeps its id
    /// and importing it twice stores it once. Absent in documents from before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    pub tool: Tool,
    /// The user's labels (`--tag KEY=VALUE`), so they travel with the document.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    pub command: Vec<String>,
    pub started_at: String,
    pub ended_at: String,
    pub status: Status,
    pub host: HostFacts,
    pub settings: Settings,
    pub series: Vec<Series>,
    /// Command-specific top-level fields (the simulator's `events` and `simulated_ns`, verdicts...).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ResultDoc {
    pub fn new(command: Vec<String>, host: HostFacts, started_at: String) -> Self {
        ResultDoc {
            schema: SCHEMA_ID.into(),
            run_id: None,
            tool: Tool::default(),
            tags: BTreeMap::new(),
            command,
            ended_at: started_at.clone(),
            started_at,
            status: Status::Ok,
            host,
            settings: Settings::default(),
            series: Vec::new(),
            extra: Map::new(),
        }
    }

    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("result documents always serialise");
        s.push('\n');
        s
    }

    /// Read a document, refusing any schema but [`SCHEMA_ID`] before its fields are looked at: a
    /// `punctual.result/2` from a newer punctual may mean something else by the same names.
    pub fn from_json(text: &str) -> Result<Self, DocError> {
        let value: Value = serde_json::from_str(text)?;
        match value.get("schema").and_then(Value::as_str) {
            Some(SCHEMA_ID) => Ok(serde_json::from_value(value)?),
            Some(found) => Err(match found.strip_prefix("punctual.result/") {
                Some(_) => DocError::UnknownVersion {
                    found: shown(found),
                },
                None => DocError::NotAResult {
                    found: format!("a '{}' document", shown(found)),
                },
            }),
            None => Err(DocError::NotAResult {
                found: "no \"schema\" field".into(),
            }),
        }
    }

    /// A new random [`ResultDoc::run_id`].
    pub fn new_run_id() -> String {
        let mut bytes = [0u8; 16];
        let random = std::fs::File::open("/dev/urandom")
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes));
        if random.is_err() {
            // No /dev/urandom (a chroot): the process' own random hash keys, the time and the pid.
            use std::hash::{BuildHasher, Hasher};
            for half in bytes.chunks_mut(8) {
                let mut h = std::collections::hash_map::RandomState::new().build_hasher();
                h.write_u128(time::OffsetDateTime::now_utc().unix_timestamp_nanos() as u128);
                h.write_u32(std::process::id());
                half.copy_from_slice(&h.finish().to_le_bytes());
            }
        }
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}

fn shown(s: &str) -> String {
    punctual_time::text::display_text(s, 80).into_owned()
}

/// Why a text is not a result document this punctual reads.
#[derive(Debug, thiserror::Error)]
pub enum DocError {
    /// Not JSON, or a field of the wrong type.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// `punctual.result/2` or later: written by a newer punctual.
    #[error(
        "its schema is {found}, which this punctual does not read (it reads {SCHEMA_ID}); \
         read it with the punctual that wrote it, or a newer one"
    )]
    UnknownVersion { found: String },
    /// Another kind of JSON (a comparison, an advice, anything else).
    #[error("it is not a punctual result document ({found}; result documents say \"schema\": \"{SCHEMA_ID}\")")]
    NotAResult { found: String },
}

/// An instant `unix_ns` after the Unix epoch, as RFC 3339 in UTC (the epoch when out of range).
pub fn rfc3339_at(unix_ns: i128) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(unix_ns)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| "1970-01-01T00:00:00Z".into())
}

/// Now, as RFC 3339 in UTC.
pub fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .expect("formatting the current time cannot fail")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn sample_doc() -> ResultDoc {
        let host = HostFacts {
            kernel: "6.1.0-test".into(),
            preempt: "dynamic: full".into(),
            realtime: false,
            cpus: 2,
            clocksource: "tsc".into(),
            virtualized: true,
            hz: Some(250),
            hostname: "box".into(),
            cpu_model: "Test CPU".into(),
        };
        let mut doc = ResultDoc::new(
            vec!["punctual".into(), "latency".into()],
            host,
            "2026-11-22T10:00:00Z".into(),
        );
        doc.ended_at = "2026-11-22T10:00:10Z".into();
        doc.settings.policy = Some("fifo".into());
        doc.settings.priority = Some(99);
        doc.settings.mlock = Some(true);
        doc.settings.dma_latency_us = Some(0);
        doc.settings
            .extra
            .insert("interval_ns".into(), 1_000_000.into());
        for (t, base) in [(0usize, 3_000u64), (1, 5_000)] {
            let mut r = Recorder::new();
            for i in 0..1000u64 {
                r.record(base + (i * 37) % 4_000 + if i == 999 { 60_000 } else { 0 });
            }
            r.add_missed(1);
            doc.series.push(
                Series::from_recorder(format!("thread {t}"), kind::WAKEUP_LATENCY, Some(t), &r)
                    .with("cpu_ns", 1234),
            );
        }
        doc
    }

    #[test]
    fn round_trips_through_json_with_extras() {
        let mut doc = sample_doc();
        doc.extra.insert("events".into(), 42.into());
        let back = ResultDoc::from_json(&doc.to_json()).unwrap();
        assert_eq!(back, doc);
        assert_eq!(back.series[0].extra["cpu_ns"], 1234);
    }

    #[test]
    fn run_id_and_tags_travel_with_the_document_and_are_left_out_when_absent() {
        let mut doc = sample_doc();
        assert!(!doc.to_json().contains("run_id") && !doc.to_json().contains("\"tags\""));
        doc.run_id = Some(ResultDoc::new_run_id());
        doc.tags.insert("kernel".into(), "6.12-rt".into());
        let back = ResultDoc::from_json(&doc.to_json()).unwrap();
        assert_eq!(back, doc);
        assert!(
            back.extra.is_empty(),
            "not taken for extras: {:?}",
            back.extra
        );
        let id = back.run_id.unwrap();
        assert!(
            id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()),
            "{id}"
        );
        assert_ne!(ResultDoc::new_run_id(), ResultDoc::new_run_id());
    }

    #[test]
    fn other_schemas_are_refused_before_their_fields_are_read() {
        let mut v: Value = serde_json::to_value(sample_doc()).unwrap();
        v["schema"] = "punctual.result/2".into();
        let e = ResultDoc::from_json(&v.to_string()).unwrap_err();
        assert!(matches!(e, DocError::UnknownVersion { .. }), "{e:?}");
        assert!(e.to_string().contains("punctual.result/2"), "{e}");
        assert!(e.to_string().contains("reads punctual.result/1"), "{e}");
        v["schema"] = "punctual.compare/1".into();
        let e = ResultDoc::from_json(&v.to_string()).unwrap_err();
        assert!(matches!(e, DocError::NotAResult { .. }), "{e:?}");
        v.as_object_mut().unwrap().remove("schema");
        let e = ResultDoc::from_json(&v.to_string()).unwrap_err();
        assert!(e.to_string().contains("no \"schema\""), "{e}");
        assert!(matches!(
            ResultDoc::from_json("{").unwrap_err(),
            DocError::Json(_)
        ));
    }

    #[test]
    fn series_recorders_merge() {
        let doc = sample_doc();
        let mut a = doc.series[0].recorder().unwrap();
        a.merge(&doc.series[1].recorder().unwrap()).unwrap();
        let s = a.summary();
        assert_eq!(s.count, 2000);
        assert_eq!(s.max, doc.series[1].summary.max);
        assert_eq!(s.missed_periods, 2);
    }

    #[test]
    fn validates_against_the_schema() {
        let schema: Value = serde_json::from_str(crate::SCHEMA_JSON).unwrap();
        let v = jsonschema::validator_for(&schema).unwrap();
        let doc = serde_json::to_value(sample_doc()).unwrap();
        let errors: Vec<String> = v
            .iter_errors(&doc)
            .map(|e| format!("{e} at {}", e.instance_path))
            .collect();
        assert!(errors.is_empty(), "{errors:#?}");
        // And the schema is not a rubber stamp: a missing field and a float time are refused.
        let mut bad = doc.clone();
        bad["series"][0]
            .as_object_mut()
            .unwrap()
            .remove("woke_late");
        bad["series"][1]["max"] = serde_json::json!(1.5);
        assert_eq!(v.iter_errors(&bad).count(), 2);
    }

    #[test]
    fn the_schema_lists_every_series_kind_and_no_other() {
        let schema: Value = serde_json::from_str(crate::SCHEMA_JSON).unwrap();
        let listed: Vec<&str> = schema["$defs"]["series"]["properties"]["kind"]["enum"]
            .as_array()
            .expect("kind is an enum in the schema")
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(listed, kind::ALL);
        let v = jsonschema::validator_for(&schema).unwrap();
        let mut doc = serde_json::to_value(sample_doc()).unwrap();
        doc["series"][0]["kind"] = "latency-ish".into();
        assert_eq!(v.iter_errors(&doc).count(), 1, "an unknown kind is refused");
    }

    #[test]
    fn a_watchdog_stopped_run_says_watchdog() {
        let schema: Value = serde_json::from_str(crate::SCHEMA_JSON).unwrap();
        let v = jsonschema::validator_for(&schema).unwrap();
        let mut doc = sample_doc();
        doc.status = Status::Watchdog;
        let json = serde_json::to_value(&doc).unwrap();
        assert_eq!(json["status"], "watchdog");
        assert_eq!(v.iter_errors(&json).count(), 0);
        assert_eq!(
            ResultDoc::from_json(&doc.to_json()).unwrap().status,
            Status::Watchdog
        );
        let mut bad = json.clone();
        bad["status"] = serde_json::json!("tripped");
        assert_eq!(v.iter_errors(&bad).count(), 1);
    }
}
