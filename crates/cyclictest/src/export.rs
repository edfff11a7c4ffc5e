//! cyclictest's file formats as exports of the result document (`--histfile`, `--json=`, and
//! `latency --hist`): each reads the figures the run kept in `extra.cyclictest`.

use crate::format::json::RunFacts;
use crate::format::{histogram, rt_tests_json};
use punctual_latency::cyclic::CyclicDoc;
use punctual_result::export::Exporter;
use punctual_result::{ResultDoc, Status};

/// The `-h`/`-H` histogram (`all`: `-H`).
pub struct Histogram {
    pub all: bool,
}

impl Exporter for Histogram {
    fn export(&self, doc: &ResultDoc) -> Vec<u8> {
        match CyclicDoc::from_doc(doc) {
            Some(c) => histogram(&c, self.all).into_bytes(),
            None => b"# Histogram\n# (this run kept no cyclictest figures)\n".to_vec(),
        }
    }
}

/// rt-tests' JSON summary.
pub struct RtTestsJson;

/// The exit code a document's status ends in (SPEC section 2), as rt-tests' `return_code`.
pub fn return_code(status: Status) -> i32 {
    match status {
        Status::Ok => 0,
        Status::LimitExceeded => 1,
        Status::Watchdog => 3,
        Status::Interrupted => 130,
    }
}

/// The run's facts as the drop-in keeps them in `extra.cyclictest.run`.
pub fn facts_to_json(f: &RunFacts) -> serde_json::Value {
    serde_json::json!({
        "cmdline": f.cmdline,
        "start_time": f.start_time,
        "end_time": f.end_time,
        "sysname": f.sysname,
        "nodename": f.nodename,
        "release": f.release,
        "version": f.version,
        "machine": f.machine,
        "realtime": f.realtime,
        "nsecs": f.nsecs,
        "nodes": f.nodes,
    })
}

/// Read [`facts_to_json`] back; what is missing is taken from the document itself.
pub fn facts_of(doc: &ResultDoc, c: &CyclicDoc) -> RunFacts {
    let run = c.extra.get("run").cloned().unwrap_or_default();
    let text = |k: &str, or: &str| run[k].as_str().unwrap_or(or).to_string();
    RunFacts {
        cmdline: text("cmdline", &doc.command.join(" ")),
        start_time: text("start_time", &doc.started_at),
        end_time: text("end_time", &doc.ended_at),
        return_code: return_code(doc.status),
        sysname: text("sysname", "Linux"),
        nodename: text("nodename", &doc.host.hostname),
        release: text("release", &doc.host.kernel),
        version: text("version", ""),
        machine: text("machine", ""),
        realtime: run["realtime"].as_bool().unwrap_or(doc.host.realtime),
        nsecs: run["nsecs"].as_bool().unwrap_or(c.unit_ns == 1),
        nodes: run["nodes"]
            .as_array()
            .map(|a| a.iter().map(|n| n.as_i64().unwrap_or(-1)).collect())
            .unwrap_or_default(),
    }
}

impl Exporter for RtTestsJson {
    fn export(&self, doc: &ResultDoc) -> Vec<u8> {
        let c = CyclicDoc::from_doc(doc).unwrap_or_default();
        rt_tests_json(&c, &facts_of(doc, &c)).into_bytes()
    }
}
