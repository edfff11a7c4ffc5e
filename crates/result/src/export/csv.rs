use super::Exporter;
use crate::ResultDoc;
use std::fmt::Write;

/// One row per series, each naming its run (id, start, host) so rows from many runs can be
/// concatenated; times in ns, `within` as fractions.
pub struct Csv;

const HEADER: &str =
    "run_id,started_at,host,name,cpu,kind,count,min_ns,max_ns,mean_ns,stddev_ns,median_ns,\
p50_ns,p90_ns,p95_ns,p99_ns,p99.9_ns,p99.99_ns,p99.999_ns,\
within_10us,within_50us,within_100us,within_500us,within_1000us,missed_periods,woke_late";

fn quote(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

impl Exporter for Csv {
    fn export(&self, doc: &ResultDoc) -> Vec<u8> {
        let mut out = String::from(HEADER);
        out.push('\n');
        let run = format!(
            "{},{},{}",
            quote(doc.run_id.as_deref().unwrap_or("")),
            quote(&doc.started_at),
            quote(&doc.host.hostname)
        );
        for s in &doc.series {
            let m = &s.summary;
            let p = &m.percentiles;
            let w = &m.within;
            let _ = writeln!(
                out,
                "{run},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                quote(&s.name),
                s.cpu.map(|c| c.to_string()).unwrap_or_default(),
                quote(&s.kind),
                m.count,
                m.min,
                m.max,
                m.mean,
                m.stddev,
                m.median,
                p.p50,
                p.p90,
                p.p95,
                p.p99,
                p.p99_9,
                p.p99_99,
                p.p99_999,
                w.us10,
                w.us50,
                w.us100,
                w.us500,
                w.us1000,
                m.missed_periods,
                m.woke_late
            );
        }
        out.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::tests::sample_doc;

    #[test]
    fn one_row_per_series_with_matching_columns() {
        let mut doc = sample_doc();
        doc.run_id = Some("0123456789abcdef0123456789abcdef".into());
        let text = String::from_utf8(Csv.export(&doc)).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        let cols = lines[0].split(',').count();
        assert!(lines.iter().all(|l| l.split(',').count() == cols));
        assert!(
            lines[1]
                .starts_with("0123456789abcdef0123456789abcdef,2026-11-22T10:00:00Z,box,thread 0,"),
            "{}",
            lines[1]
        );
        insta::assert_snapshot!(text);
    }

    #[test]
    fn quotes_names_with_commas() {
        assert_eq!(quote("a,b"), "\"a,b\"");
        assert_eq!(quote("say \"x\""), "\"say \"\"x\"\"\"");
        assert_eq!(quote("x,\"y\""), "\"x,\"\"y\"\"\"");
    }
}
