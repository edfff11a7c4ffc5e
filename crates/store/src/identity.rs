//! Which stored result a document is: its run id when it has one, else a hash of its content.
//!
//! A run written by this punctual carries `run_id` (32 random hex digits) and is filed under its
//! first 12, so the same run has the same id in every store it is exported to. Documents from
//! before run ids, and copies edited by other tools, are recognised by a SHA-256 of their content
//! with the two fields that travel beside the measurement (`run_id`, `tags`) left out and the keys
//! in a fixed order: re-indenting a file, reordering its keys or adding tags does not make it
//! another run. SHA-256 rather than std's hasher: the digests are kept in the database, and std
//! does not promise its hash stays the same from one Rust release to the next.

use crate::StoreError;
use punctual_result::ResultDoc;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Length of a store id.
pub(crate) const ID_LEN: usize = 12;

/// The content digest of a document (see the module's description).
pub(crate) fn digest(doc: &ResultDoc) -> Result<String, StoreError> {
    let value = serde_json::to_value(doc).map_err(|e| StoreError::Invalid(e.to_string()))?;
    Ok(digest_value(value))
}

/// [`digest`] of a document as JSON (a stored one being re-filed by a migration).
pub(crate) fn digest_value(mut value: Value) -> String {
    if let Some(o) = value.as_object_mut() {
        o.remove("run_id");
        o.remove("tags");
    }
    // serde_json's maps are ordered by key (no `preserve_order`), so this text is canonical.
    let text = value.to_string();
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A document's run id, checked: 32 hex digits as punctual writes them, or 12 (an id an older
/// result was given by a store, written into its export). Anything else was not written by punctual.
pub(crate) fn run_id(doc: &ResultDoc) -> Result<Option<String>, StoreError> {
    match &doc.run_id {
        None => Ok(None),
        Some(r)
            if (r.len() == 32 || r.len() == ID_LEN) && r.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            Ok(Some(r.to_ascii_lowercase()))
        }
        Some(r) => Err(StoreError::Invalid(format!(
            "run_id '{}' is not 32 (or 12) hex digits",
            punctual_time::text::display_text(r, 40)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> ResultDoc {
        let host = punctual_result::HostFacts {
            kernel: "6.1".into(),
            preempt: "full".into(),
            realtime: false,
            cpus: 2,
            clocksource: "tsc".into(),
            virtualized: true,
            hz: Some(250),
            hostname: "box".into(),
            cpu_model: "cpu".into(),
        };
        let mut d = ResultDoc::new(vec!["punctual".into()], host, "2026-11-01T00:00:00Z".into());
        d.settings.extra.insert("b".into(), 1.into());
        d.settings.extra.insert("a".into(), 2.into());
        d
    }

    #[test]
    fn the_digest_ignores_layout_key_order_tags_and_run_id_but_not_content() {
        let d = doc();
        let base = digest(&d).unwrap();
        assert_eq!(base.len(), 64);
        let mut tagged = d.clone();
        tagged.tags.insert("kernel".into(), "rt".into());
        tagged.run_id = Some("ab".repeat(16));
        assert_eq!(digest(&tagged).unwrap(), base);
        // The same document laid out by another tool: indented, keys reversed.
        let mut v = serde_json::to_value(&d).unwrap();
        let reordered: serde_json::Map<String, Value> = v
            .as_object()
            .unwrap()
            .iter()
            .rev()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let text = serde_json::to_string_pretty(&Value::Object(reordered)).unwrap();
        let back = ResultDoc::from_json(&text).unwrap();
        assert_eq!(digest(&back).unwrap(), base);
        v["settings"]["a"] = 3.into();
        assert_ne!(digest_value(v), base);
        // Known value: the digest must never change between punctual versions.
        assert_eq!(
            digest_value(serde_json::json!({"schema": "x"})),
            "baaadc98adc0eb80921693b0ffd31ed284571d6e24da4eceb14b6f465b0ffc74"
        );
    }

    #[test]
    fn run_ids_are_checked() {
        let mut d = doc();
        assert_eq!(run_id(&d).unwrap(), None);
        d.run_id = Some("AB".repeat(16));
        assert_eq!(run_id(&d).unwrap(), Some("ab".repeat(16)));
        d.run_id = Some("0123456789ab".into());
        assert!(run_id(&d).unwrap().is_some());
        d.run_id = Some("../../etc".into());
        assert!(run_id(&d).is_err());
    }
}
