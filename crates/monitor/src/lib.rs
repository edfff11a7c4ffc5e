//! `punctual monitor`: a long-running, low-duty timeliness measurement served as Prometheus
//! metrics, with history in the results store.
//!
//! ```text
//!   measuring threads (FIFO 98, pinned, mlocked; punctual_latency's engine)
//!        | relaxed atomic increments, nothing else
//!        v
//!   LiveHistogram per CPU  <-- scrapes copy it (HTTP threads, SCHED_OTHER, other CPUs)
//!                          <-- windows subtract two copies -> a result document -> the store
//! ```
//!
//! The measuring loop allocates, locks and prints nothing (the engine's rule); the only thing it
//! shares with the rest is a set of atomic counters, so no scrape, slow client or store write can
//! delay it. Memory is fixed once the measured CPUs are known: per CPU one live histogram and
//! two copies, whatever the uptime.

pub mod attribution;
pub mod config;
pub mod expose;
pub mod floor;
pub mod history;
pub mod http;
pub mod measure;
pub mod metrics;
pub mod slots;

use std::path::PathBuf;

/// Why the monitor could not start or go on.
#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    /// A setting out of range (exit 2), naming the flag or key that fixes it.
    #[error("{what}: {why}")]
    Invalid { what: &'static str, why: String },
    /// The configuration file could not be read or holds a mistake (exit 2).
    #[error("{}: {why}", path.display())]
    Config { path: PathBuf, why: String },
    /// `--listen` is not an address (exit 2).
    #[error("--listen {addr}: {why}")]
    Address { addr: String, why: String },
    /// The address could not be bound: in use, or not ours (exit 3).
    #[error("--listen {addr}: {source}; choose another address or port")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("starting the metrics server: {0}")]
    Server(std::io::Error),
    #[error(transparent)]
    Latency(#[from] punctual_latency::LatencyError),
}

impl From<MonitorError> for punctual_result::Failure {
    fn from(e: MonitorError) -> Self {
        match e {
            MonitorError::Invalid { .. }
            | MonitorError::Config { .. }
            | MonitorError::Address { .. } => punctual_result::Failure::usage(e.to_string()),
            MonitorError::Latency(l) => l.into(),
            _ => punctual_result::Failure::system(e.to_string()),
        }
    }
}

/// The default `--listen`: loopback only (a fleet's Prometheus reaches it through whatever the
/// site uses for node_exporter, or `--listen 0.0.0.0:9934` where the network is trusted).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9934";

/// Bind `addr` for the metrics server (before anything is measured, so a taken port costs
/// nothing). A name is resolved; the first address that binds wins.
pub fn bind(addr: &str) -> Result<std::net::TcpListener, MonitorError> {
    use std::net::ToSocketAddrs;
    let addrs: Vec<_> = addr
        .to_socket_addrs()
        .map_err(|e| MonitorError::Address {
            addr: addr.into(),
            why: format!("{e} (give HOST:PORT, e.g. {DEFAULT_LISTEN})"),
        })?
        .collect();
    let mut last = None;
    for a in addrs {
        match std::net::TcpListener::bind(a) {
            Ok(l) => {
                http::widen_backlog(&l);
                return Ok(l);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(MonitorError::Bind {
        addr: addr.into(),
        source: last.unwrap_or_else(|| std::io::Error::other("the name resolves to no address")),
    })
}

/// Serves `/metrics` from a registry, and a short index at `/`.
pub struct MetricsHandler {
    pub registry: prometheus_client::registry::Registry,
}

impl http::Handler for MetricsHandler {
    fn handle(&self, req: &http::Request) -> http::Response {
        use http::{Method, Response};
        match req.path.as_str() {
            "/metrics" if req.method == Method::Head => {
                // HEAD must not consume the "worst since the last scrape" gauges.
                Response::new(
                    200,
                    expose::negotiate(req.accept.as_deref()).content_type(),
                    "",
                )
            }
            "/metrics" => {
                let format = expose::negotiate(req.accept.as_deref());
                match expose::render(&self.registry, format) {
                    Ok(body) => Response::new(200, format.content_type(), body),
                    Err(why) => Response::error(500, &why),
                }
            }
            "/" => Response::new(
                200,
                "text/html; charset=utf-8",
                "<html><head><title>punctual</title></head><body><h1>punctual</h1>\
                 <p><a href=\"/metrics\">/metrics</a></p></body></html>\n",
            ),
            _ => Response::error(404, "only /metrics is served here"),
        }
    }
}
