//! Histogram encoding for the result document: the HdrHistogram V2 format with DEFLATE compression
//! (what every HdrHistogram implementation reads: Java's `HistogramLogProcessor`, Go, Python's
//! `hdrh`), base64-encoded. Documented in `docs/result-format.md`.

use crate::Histogram;
use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};

/// The `histogram.encoding` value punctual writes.
pub const HISTOGRAM_ENCODING: &str = "hdrhistogram-v2-deflate-base64";

#[derive(Debug, thiserror::Error)]
pub enum HistogramError {
    #[error("unknown histogram encoding '{0}' (punctual reads {HISTOGRAM_ENCODING})")]
    UnknownEncoding(String),
    #[error("histogram data is not valid base64: {0}")]
    Base64(#[from] base64::DecodeError),
    #[error("histogram data is not a valid HdrHistogram V2 payload: {0}")]
    Payload(String),
}

pub fn encode_histogram(h: &Histogram) -> String {
    let mut buf = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut buf)
        .expect("serialising into a Vec cannot fail");
    base64::engine::general_purpose::STANDARD.encode(buf)
}

pub fn decode_histogram(encoding: &str, data: &str) -> Result<Histogram, HistogramError> {
    if encoding != HISTOGRAM_ENCODING {
        return Err(HistogramError::UnknownEncoding(encoding.to_string()));
    }
    let bytes = base64::engine::general_purpose::STANDARD.decode(data)?;
    let h: Histogram = Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| HistogramError::Payload(format!("{e:?}")))?;
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Recorder;

    #[test]
    fn round_trip() {
        let mut r = Recorder::new();
        for v in [0u64, 1, 999, 12_345, 1_000_000, 77_777_777] {
            r.record(v);
        }
        let s = encode_histogram(r.histogram());
        let h = decode_histogram(HISTOGRAM_ENCODING, &s).unwrap();
        assert_eq!(&h, r.histogram());
    }

    #[test]
    fn refuses_other_encodings_and_garbage() {
        assert!(matches!(
            decode_histogram("csv", ""),
            Err(HistogramError::UnknownEncoding(_))
        ));
        assert!(matches!(
            decode_histogram(HISTOGRAM_ENCODING, "!!"),
            Err(HistogramError::Base64(_))
        ));
        assert!(matches!(
            decode_histogram(HISTOGRAM_ENCODING, "AAAA"),
            Err(HistogramError::Payload(_))
        ));
    }
}
