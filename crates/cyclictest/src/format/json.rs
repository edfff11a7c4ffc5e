//! rt-tests' JSON summary (`rt_write_json` with cyclictest's `write_stats`), key for key and
//! space for space, its stray colons in `"cmdline:"` and `"rt_test_version:"` included: parsers
//! written for it look those keys up as they are.

use punctual_latency::cyclic::CyclicDoc;
use std::fmt::Write;

/// The rt-tests version whose format this is (`"%1.2f"` of its `VERSION`).
pub const RT_TESTS_VERSION: &str = "2.40";

/// What the JSON says about the run besides the figures.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunFacts {
    pub cmdline: String,
    /// RFC 2822 in local time, as rt-tests writes them.
    pub start_time: String,
    pub end_time: String,
    pub return_code: i32,
    pub sysname: String,
    pub nodename: String,
    pub release: String,
    pub version: String,
    pub machine: String,
    pub realtime: bool,
    /// Whether values are nanoseconds (`-N`).
    pub nsecs: bool,
    /// The NUMA node of each thread's CPU (-1: none).
    pub nodes: Vec<i64>,
}

/// JSON string contents, escaped (rt-tests escapes nothing; a quote in a path would break its file).
fn esc(s: &str) -> String {
    let v = serde_json::Value::from(s).to_string();
    v[1..v.len() - 1].to_string()
}

pub fn rt_tests_json(c: &CyclicDoc, f: &RunFacts) -> String {
    let mut o = String::new();
    o.push_str("{\n  \"file_version\": 1,\n");
    let _ = writeln!(o, "  \"cmdline:\": \"{}\",", esc(&f.cmdline));
    let _ = writeln!(o, "  \"rt_test_version:\": \"{RT_TESTS_VERSION}\",");
    let _ = writeln!(o, "  \"start_time\": \"{}\",", esc(&f.start_time));
    let _ = writeln!(o, "  \"end_time\": \"{}\",", esc(&f.end_time));
    let _ = writeln!(o, "  \"return_code\": {},", f.return_code);
    o.push_str("  \"sysinfo\": {\n");
    for (k, v) in [
        ("sysname", &f.sysname),
        ("nodename", &f.nodename),
        ("release", &f.release),
        ("version", &f.version),
        ("machine", &f.machine),
    ] {
        let _ = writeln!(o, "    \"{k}\": \"{}\",", esc(v));
    }
    let _ = writeln!(o, "    \"realtime\": {}", u8::from(f.realtime));
    o.push_str("  },\n");
    let _ = writeln!(o, "  \"num_threads\": {},", c.threads.len());
    let _ = writeln!(o, "  \"resolution_in_ns\": {},", u8::from(f.nsecs));
    o.push_str("  \"thread\": {\n");
    for (i, t) in c.threads.iter().enumerate() {
        let _ = writeln!(o, "    \"{i}\": {{");
        o.push_str("      \"histogram\": {");
        let mut first = true;
        for &(b, n) in t
            .figures
            .histogram
            .iter()
            .filter(|&&(b, _)| (b as usize) < c.buckets)
        {
            o.push_str(if first { "\n" } else { ",\n" });
            let _ = write!(o, "        \"{b}\": {n}");
            first = false;
        }
        if !first {
            o.push('\n');
        }
        o.push_str("      },\n");
        let s = &t.figures.status;
        let _ = writeln!(o, "      \"cycles\": {},", s.cycles);
        let _ = writeln!(o, "      \"min\": {},", s.min);
        let _ = writeln!(o, "      \"max\": {},", s.max);
        // rt-tests divides by zero here (and writes -nan); a run without samples says 0.00.
        let avg = if s.cycles == 0 {
            0.0
        } else {
            s.sum as f64 / s.cycles as f64
        };
        let _ = writeln!(o, "      \"avg\": {avg:.2},");
        let _ = writeln!(
            o,
            "      \"cpu\": {},",
            t.cpu.map(|c| c as i64).unwrap_or(-1)
        );
        let _ = writeln!(
            o,
            "      \"node\": {}",
            f.nodes.get(i).copied().unwrap_or(-1)
        );
        let _ = writeln!(
            o,
            "    }}{}",
            if i + 1 == c.threads.len() { "" } else { "," }
        );
    }
    o.push_str("  }\n}\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use punctual_latency::cyclic::{CyclicThread, CyclicThreadDoc, StatusFigures};

    /// rt-tests 2.4's output for one thread (its first lines copied from a run on this machine).
    #[test]
    fn the_layout_is_rt_tests() {
        let c = CyclicDoc {
            unit_ns: 1000,
            buckets: 20,
            threads: vec![CyclicThreadDoc {
                index: 0,
                cpu: Some(0),
                interval_ns: 1_000_000,
                priority: 80,
                figures: CyclicThread {
                    status: StatusFigures {
                        tid: 1,
                        cycles: 200,
                        min: 18,
                        act: 20,
                        sum: 6522,
                        max: 278,
                    },
                    histogram: vec![(18, 1), (19, 2)],
                    overflows: 197,
                    ..CyclicThread::default()
                },
            }],
            extra: Default::default(),
        };
        let f = RunFacts {
            cmdline: "cyclictest -m -q -l 200 --json=/tmp/ct.json".into(),
            start_time: "Fri, 27 Nov 2026 11:05:48 +0000".into(),
            end_time: "Fri, 27 Nov 2026 11:05:48 +0000".into(),
            return_code: 0,
            sysname: "Linux".into(),
            nodename: "vm".into(),
            release: "6.18.44-fc-v669".into(),
            version: "#1 SMP PREEMPT_DYNAMIC @0".into(),
            machine: "x86_64".into(),
            realtime: false,
            nsecs: false,
            nodes: vec![0],
        };
        let expected = r##"{
  "file_version": 1,
  "cmdline:": "cyclictest -m -q -l 200 --json=/tmp/ct.json",
  "rt_test_version:": "2.40",
  "start_time": "Fri, 27 Nov 2026 11:05:48 +0000",
  "end_time": "Fri, 27 Nov 2026 11:05:48 +0000",
  "return_code": 0,
  "sysinfo": {
    "sysname": "Linux",
    "nodename": "vm",
    "release": "6.18.44-fc-v669",
    "version": "#1 SMP PREEMPT_DYNAMIC @0",
    "machine": "x86_64",
    "realtime": 0
  },
  "num_threads": 1,
  "resolution_in_ns": 0,
  "thread": {
    "0": {
      "histogram": {
        "18": 1,
        "19": 2
      },
      "cycles": 200,
      "min": 18,
      "max": 278,
      "avg": 32.61,
      "cpu": 0,
      "node": 0
    }
  }
}
"##;
        assert_eq!(rt_tests_json(&c, &f), expected);
        serde_json::from_str::<serde_json::Value>(expected).unwrap();
    }

    #[test]
    fn an_empty_histogram_is_an_empty_object_and_quotes_are_escaped() {
        let c = CyclicDoc {
            threads: vec![CyclicThreadDoc::default(), CyclicThreadDoc::default()],
            ..CyclicDoc::default()
        };
        let f = RunFacts {
            cmdline: "a \"b\"".into(),
            ..RunFacts::default()
        };
        let text = rt_tests_json(&c, &f);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["cmdline:"], "a \"b\"");
        assert_eq!(v["thread"]["1"]["histogram"], serde_json::json!({}));
        assert!(text.contains("      \"histogram\": {      },\n"), "{text}");
        assert_eq!(v["thread"]["0"]["avg"], 0.0);
    }
}
