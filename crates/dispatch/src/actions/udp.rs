//! `udp`: one datagram per release from a socket opened and connected before the run. The payload
//! starts with the release's sequence number and instant (u64 little-endian each), then the event's
//! data bytes, then zeros, so a receiver can measure arrival against the plan.
//!
//! A connected socket learns from the ICMP "port unreachable" of a datagram that nobody listens,
//! and fails the *next* send with ECONNREFUSED without sending it: half the traffic would be lost
//! to an absent receiver. That send is retried once at once (the error is consumed by then) and
//! counted as `refused`, not as an error: the dispatcher's job is to send on time.

use super::{ActionImpl, ActionReport};
use crate::engine::Fired;
use std::net::{SocketAddr, UdpSocket};

#[derive(Debug)]
pub struct Udp {
    sock: UdpSocket,
    buf: Vec<u8>,
    sent: u64,
    errors: u64,
    refused: u64,
    last_error: Option<String>,
}

impl Udp {
    /// Open and connect the socket. Errors name the target (an unroutable address fails here).
    pub fn prepare(to: &str, bytes: usize) -> Result<Udp, String> {
        let addr: SocketAddr = to
            .parse()
            .map_err(|_| format!("udp to '{to}' is not IP:PORT"))?;
        let local: SocketAddr = if addr.is_ipv4() {
            "0.0.0.0:0".parse().unwrap()
        } else {
            "[::]:0".parse().unwrap()
        };
        let sock = UdpSocket::bind(local).map_err(|e| format!("udp: opening a socket: {e}"))?;
        sock.connect(addr)
            .map_err(|e| format!("udp target {to} is unreachable: {e}"))?;
        sock.set_nonblocking(true)
            .map_err(|e| format!("udp: {e}"))?;
        Ok(Udp {
            sock,
            buf: vec![0; bytes.max(16)],
            sent: 0,
            errors: 0,
            refused: 0,
            last_error: None,
        })
    }
}

impl ActionImpl for Udp {
    fn short(&self) -> bool {
        true
    }
    /// A connected socket sends from any thread, and its counts are the action's own.
    fn relayable(&self) -> bool {
        true
    }
    #[inline]
    fn fire(&mut self, target: u64, seq: u64, data: &[u8]) -> Fired {
        self.buf[0..8].copy_from_slice(&seq.to_le_bytes());
        self.buf[8..16].copy_from_slice(&target.to_le_bytes());
        let n = data.len().min(self.buf.len() - 16);
        self.buf[16..16 + n].copy_from_slice(&data[..n]);
        let mut sent = self.sock.send(&self.buf);
        if matches!(&sent, Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused) {
            self.refused += 1;
            sent = self.sock.send(&self.buf);
        }
        match sent {
            Ok(_) => {
                self.sent += 1;
                Fired {
                    error: false,
                    previous: None,
                }
            }
            Err(e) => {
                self.errors += 1;
                if self.last_error.is_none() {
                    self.last_error = Some(e.to_string());
                }
                Fired {
                    error: true,
                    previous: None,
                }
            }
        }
    }

    fn report(self: Box<Self>) -> ActionReport {
        let mut extra = vec![
            ("sent".to_string(), self.sent.into()),
            ("send_errors".to_string(), self.errors.into()),
            ("refused".to_string(), self.refused.into()),
        ];
        if let Some(e) = self.last_error {
            extra.push(("first_send_error".into(), e.into()));
        }
        ActionReport {
            start_latency: None,
            extra,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_header_and_data_over_loopback() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = rx.local_addr().unwrap().to_string();
        let mut u = Udp::prepare(&to, 32).unwrap();
        assert!(!u.fire(123_456, 7, &[9, 8]).error);
        let mut b = [0u8; 64];
        let n = rx.recv(&mut b).unwrap();
        assert_eq!(n, 32);
        assert_eq!(u64::from_le_bytes(b[0..8].try_into().unwrap()), 7);
        assert_eq!(u64::from_le_bytes(b[8..16].try_into().unwrap()), 123_456);
        assert_eq!(&b[16..18], &[9, 8]);
        let r = Box::new(u).report();
        assert_eq!(r.extra[0].1, 1);
    }

    #[test]
    fn an_absent_receiver_loses_no_datagram() {
        // A port nobody listens on: bound to find a free one, then closed.
        let to = UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .to_string();
        let mut u = Udp::prepare(&to, 32).unwrap();
        for seq in 0..10 {
            assert!(!u.fire(seq, seq, &[]).error, "send {seq} failed");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let r = Box::new(u).report();
        let get = |k: &str| r.extra.iter().find(|(n, _)| n == k).unwrap().1.clone();
        assert_eq!(get("sent"), 10);
        assert_eq!(get("send_errors"), 0);
        // Loopback's ICMP is not rate-limited: every send after the first learns of the refusal.
        assert!(get("refused").as_u64().unwrap() >= 1, "{:?}", r.extra);
    }

    #[test]
    fn bad_targets_are_refused_before_the_run() {
        assert!(Udp::prepare("nonsense", 64)
            .unwrap_err()
            .contains("IP:PORT"));
    }
}
