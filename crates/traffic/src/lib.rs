//! ARTS reborn (KURT's flagship application, thesis 2.4 and 4.4.2): packet traffic read from pcap
//! and pcapng files, replayed at anchored instants by punctual's dispatcher with a per-packet timing
//! report, and recorded with kernel nanosecond receive timestamps.
//!
//! - [`store`]: every packet in one contiguous buffer plus a 16-byte index entry per packet.
//! - [`read`]: pcap (micro- and nanosecond) and pcapng into a store; where a damaged file stops.
//! - [`schedule`]: the instant of every send, pure (speed, fixed spacing, rate, loops, limit).
//! - [`replay`]: the dispatcher's `Actions` that send packet k, the senders (UDP, AF_PACKET), and
//!   the timing report (lateness, drift, share within 1 % of the spacing).
//! - [`record`]: AF_PACKET capture with SO_TIMESTAMPNS into pcapng (if_tsresol = 9).
//! - [`txstamp`]: kernel transmit timestamps (SO_TIMESTAMPING) from the error queue.
//! - [`measure`]: both as measurements of the lifecycle (`punctual_session::execute`).
//! - [`netns`]: a veth pair between two namespaces made for a measurement, removed on drop.
//! - [`against`]: a received stream against the original file's own inter-arrival times.
//! - [`arrivals`]: a received stream's inter-arrival errors against its spacing (ARTS's check).

pub mod against;
pub mod arrivals;
pub mod measure;
pub mod netns;
pub mod read;
pub mod record;
pub mod replay;
pub mod schedule;
pub mod store;
pub mod txstamp;
pub mod txtime;

/// Link types of capture files (from `pcap-file`), for callers that write captures.
pub use pcap_file::DataLink;

/// Why traffic could not be read, scheduled, sent or recorded.
#[derive(Debug, thiserror::Error)]
pub enum TrafficError {
    /// Bad input (unreadable or damaged file, unsupported link type, absurd rate): exit 2.
    #[error("{0}")]
    Usage(String),
    /// The system refused or failed (no CAP_NET_RAW, missing interface, socket errors): exit 3.
    #[error("{0}")]
    System(String),
}

impl From<TrafficError> for punctual_result::Failure {
    fn from(e: TrafficError) -> Self {
        match e {
            TrafficError::Usage(m) => punctual_result::Failure::usage(m),
            TrafficError::System(m) => punctual_result::Failure::system(m),
        }
    }
}
