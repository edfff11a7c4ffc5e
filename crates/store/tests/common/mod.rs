//! Documents like every command's, for the store's tests.
#![allow(dead_code)]

use punctual_result::doc::kind;
use punctual_result::{HostFacts, ResultDoc, Series};
use punctual_stats::Recorder;

pub fn host(name: &str) -> HostFacts {
    HostFacts {
        kernel: "6.12.0-test".into(),
        preempt: "dynamic: full".into(),
        realtime: false,
        cpus: 2,
        clocksource: "tsc".into(),
        virtualized: true,
        hz: Some(250),
        hostname: name.into(),
        cpu_model: "Test CPU @ 2.0GHz".into(),
    }
}

/// A document as `argv` would write it, started at `started`, with one series per `bases` entry.
pub fn doc(argv: &[&str], hostname: &str, started: &str, bases: &[u64]) -> ResultDoc {
    let mut d = ResultDoc::new(
        argv.iter().map(|s| s.to_string()).collect(),
        host(hostname),
        started.into(),
    );
    for (i, base) in bases.iter().enumerate() {
        let mut r = Recorder::new();
        for k in 0..500u64 {
            r.record(base + (k * 37) % 2_000);
        }
        d.series.push(Series::from_recorder(
            format!("thread {i}"),
            kind::WAKEUP_LATENCY,
            Some(i),
            &r,
        ));
    }
    d
}

/// Every command that writes a result document, as its command line.
pub const COMMANDS: [(&[&str], &str, Option<&str>); 9] = [
    (&["punctual", "latency", "-D", "5s"], "latency", None),
    (&["punctual", "check"], "check", None),
    (
        &["punctual", "bench", "ctxsw", "-n", "1000"],
        "bench ctxsw",
        None,
    ),
    (&["punctual", "run", "plan.toml"], "run", None),
    (&["punctual", "simulate", "--hz", "100"], "simulate", None),
    (
        &["punctual", "simulate", "frames", "--fps", "60"],
        "simulate frames",
        None,
    ),
    (
        &["punctual", "trace", "analyze", "t.ptf"],
        "trace analyze",
        None,
    ),
    (
        &["punctual", "experiment", "run", "etsion-latency", "--quick"],
        "experiment run",
        Some("etsion-latency"),
    ),
    (
        &["punctual", "shield", "--cpus", "1", "--", "true"],
        "shield",
        None,
    ),
];
