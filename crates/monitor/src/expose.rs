//! The exposition formats and how a request chooses one (its `Accept` header), as client_golang
//! does: the Prometheus protobuf format (the only one carrying native histograms), OpenMetrics
//! text 1.0.0, and the Prometheus text format 0.0.4 for everything else (curl, browsers, a missing
//! or unknown `Accept`). The encoders are prometheus-client's.

use prometheus_client::registry::Registry;

/// An exposition format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited`
    Protobuf,
    /// `application/openmetrics-text; version=1.0.0`
    OpenMetrics,
    /// `text/plain; version=0.0.4`
    Text,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Protobuf => {
                "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"
            }
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// The format an `Accept` header prefers (highest `q`, then the order given; ties between our
/// formats go to the richer one). Anything unrecognised falls back to the text format, as
/// client_golang does, rather than a 406: a scraper that can read nothing else reads text.
pub fn negotiate(accept: Option<&str>) -> Format {
    let Some(accept) = accept else {
        return Format::Text;
    };
    let mut best: Option<(f64, u8, Format)> = None;
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        let mut q: f64 = 1.0;
        let (mut proto, mut encoding, mut version) = (None, None, None);
        for p in parts {
            let Some((k, v)) = p.split_once('=') else {
                continue;
            };
            let v = v.trim().trim_matches('"');
            match k.trim().to_ascii_lowercase().as_str() {
                "q" => q = v.parse().unwrap_or(0.0),
                "proto" => proto = Some(v.to_string()),
                "encoding" => encoding = Some(v.to_string()),
                "version" => version = Some(v.to_string()),
                _ => {}
            }
        }
        let format = match media.as_str() {
            "application/vnd.google.protobuf"
                if proto.as_deref() == Some("io.prometheus.client.MetricFamily")
                    && encoding.as_deref() == Some("delimited") =>
            {
                Some((3, Format::Protobuf))
            }
            "application/openmetrics-text"
                if matches!(version.as_deref(), None | Some("1.0.0") | Some("0.0.1")) =>
            {
                Some((2, Format::OpenMetrics))
            }
            "text/plain" if matches!(version.as_deref(), None | Some("0.0.4")) => {
                Some((1, Format::Text))
            }
            _ => None,
        };
        if let Some((rank, f)) = format {
            // q=0 refuses; a NaN q is no preference at all.
            if q.is_nan() || q <= 0.0 {
                continue;
            }
            if best.is_none_or(|(bq, br, _)| q > bq || (q == bq && rank > br)) {
                best = Some((q, rank, f));
            }
        }
    }
    best.map_or(Format::Text, |(_, _, f)| f)
}

/// The registry in `format`.
pub fn render(registry: &Registry, format: Format) -> Result<Vec<u8>, String> {
    match format {
        Format::Protobuf => {
            prometheus_client::encoding::prometheus_protobuf::encode_to_vec(registry)
                .map_err(|e| format!("encoding protobuf: {e}"))
        }
        Format::OpenMetrics => {
            let mut s = String::with_capacity(16 << 10);
            prometheus_client::encoding::text::encode(&mut s, registry)
                .map_err(|_| "encoding OpenMetrics text".to_string())?;
            Ok(s.into_bytes())
        }
        Format::Text => {
            let mut s = String::with_capacity(16 << 10);
            prometheus_client::encoding::prometheus_text::encode(&mut s, registry)
                .map_err(|_| "encoding text".to_string())?;
            Ok(s.into_bytes())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_headers_choose_the_format_prometheus_expects() {
        // Prometheus 2.42 with --enable-feature=native-histograms.
        let with_proto = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(negotiate(Some(with_proto)), Format::Protobuf);
        // Prometheus without it.
        let plain = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(negotiate(Some(plain)), Format::OpenMetrics);
        assert_eq!(negotiate(Some("text/plain")), Format::Text);
        assert_eq!(negotiate(Some("*/*")), Format::Text);
        assert_eq!(negotiate(None), Format::Text);
        assert_eq!(negotiate(Some("application/json")), Format::Text);
        // A protobuf of another message, or not delimited, is not ours.
        assert_eq!(
            negotiate(Some(
                "application/vnd.google.protobuf;proto=other;encoding=delimited"
            )),
            Format::Text
        );
        // q decides; q=0 refuses.
        assert_eq!(
            negotiate(Some("text/plain;q=0.9, application/openmetrics-text;q=0.2")),
            Format::Text
        );
        assert_eq!(
            negotiate(Some("application/openmetrics-text;q=0, text/plain;q=0.1")),
            Format::Text
        );
        assert_eq!(
            negotiate(Some("application/openmetrics-text; version=2.0.0")),
            Format::Text
        );
        // Garbage is never fatal.
        for junk in ["", ";;;", "q=1", ",,,", "text/plain;q=abc", "\u{7f}"] {
            let _ = negotiate(Some(junk));
        }
    }
}
