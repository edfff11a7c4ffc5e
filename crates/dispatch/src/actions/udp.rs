//! `udp`: one datagram per release from a socket opened and connected before the run. The payload
//! starts with the release's sequence number and instant (u64 little-endian each), then the event's
//! data bytes, then zeros, so a receiver can measure arrival against the plan.

use super::{ActionImpl, ActionReport};
use crate::engine::Fired;
use std::net::{SocketAddr, UdpSocket};

#[derive(Debug)]
pub struct Udp {
    sock: UdpSocket,
    buf: Vec<u8>,
    sent: u64,
    errors: u64,
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
            last_error: None,
        })
    }
}

impl ActionImpl for Udp {
    #[inline]
    fn fire(&mut self, target: u64, seq: u64, data: &[u8]) -> Fired {
        self.buf[0..8].copy_from_slice(&seq.to_le_bytes());
        self.buf[8..16].copy_from_slice(&target.to_le_bytes());
        let n = data.len().min(self.buf.len() - 16);
        self.buf[16..16 + n].copy_from_slice(&data[..n]);
        match self.sock.send(&self.buf) {
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
    fn bad_targets_are_refused_before_the_run() {
        assert!(Udp::prepare("nonsense", 64)
            .unwrap_err()
            .contains("IP:PORT"));
    }
}
