//! The receiving side of a replay checked against the original capture (`traffic record
//! --against FILE`): every gap between two received packets against the gap between the same two
//! packets in the file, the file's own inter-arrival times, so whatever the file's timing (a fixed
//! spacing or a real trace) the error is the replay's and the path's.
//!
//! Matching is by order and content. Received frames are taken in capture order; each is the next
//! packet of the file it equals, looked for among the next [`WINDOW`] packets not yet matched:
//! whole frames (`-i` replays; a received frame may be longer, padded), or else UDP payloads
//! (`--udp-to` replays, whose headers are the receiving socket's). Which of the two is decided by
//! the first received frame that matches either. Packets of the file skipped over are lost;
//! received frames that match none are not part of the stream (ARP, IPv6 neighbour discovery) and
//! are counted. After the file's last packet matching goes on at its first (`--loop`); a gap is
//! compared only between packets adjacent in the file and in the same pass.

use crate::arrivals::GapErrors;
use crate::read::udp_payload;
use crate::replay::Slope;
use crate::store::PacketStore;
use pcap_file::DataLink;
use punctual_stats::Recorder;

/// How far ahead in the file a received frame is looked for (packets lost in a row before
/// matching gives up on a frame).
pub const WINDOW: usize = 64;

/// How received frames were matched to the file's packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchedBy {
    /// Whole frames (the received frame starts with the file's frame).
    Frame,
    /// UDP payloads (packets of the file without one are not expected).
    UdpPayload,
}

impl MatchedBy {
    pub fn name(self) -> &'static str {
        match self {
            MatchedBy::Frame => "whole frame, in order",
            MatchedBy::UdpPayload => "UDP payload, in order",
        }
    }
}

/// The original capture, as the receiver compares with it.
pub struct Original {
    pub link: DataLink,
    pub packets: PacketStore,
}

/// The received stream against the original's inter-arrival times.
#[derive(Clone, Debug)]
pub struct Against {
    /// Packets of the file a stream holds (with UDP payload matching: those with a UDP payload).
    pub file_packets: u64,
    /// Received frames looked at (all the capture kept).
    pub received: u64,
    pub matched: u64,
    /// Received frames that matched no packet of the file near where matching stood.
    pub unmatched: u64,
    /// Packets of the file skipped over by the matching (never received, or received out of order).
    pub lost: u64,
    /// Passes over the file the matched packets spanned (`--loop`).
    pub passes: u64,
    pub by: Option<MatchedBy>,
    /// |received gap - file gap| of every compared pair.
    pub error: Recorder,
    /// How much longer than the file's each received gap was (0 when shorter): the lateness of
    /// each packet after its predecessor's arrival plus the file's gap.
    pub late: Recorder,
    /// Gaps shorter than the file's, and the largest shortfall (ns).
    pub early: u64,
    pub early_max: u64,
    pub compared: u64,
    pub within_1pct: u64,
    pub within_7pct: u64,
    /// Mean and standard deviation of the signed error (received - file), ns.
    pub mean_ns: f64,
    pub sd_ns: f64,
    /// Slope of the accumulated error over the accumulated file time (ns per ns).
    pub drift: Option<f64>,
    /// (received span - file span) / file span over the compared gaps.
    pub stretch: Option<f64>,
}

impl Against {
    fn new(file_packets: u64) -> Against {
        Against {
            file_packets,
            received: 0,
            matched: 0,
            unmatched: 0,
            lost: 0,
            passes: 0,
            by: None,
            error: Recorder::new(),
            late: Recorder::new(),
            early: 0,
            early_max: 0,
            compared: 0,
            within_1pct: 0,
            within_7pct: 0,
            mean_ns: 0.0,
            sd_ns: 0.0,
            drift: None,
            stretch: None,
        }
    }

    pub fn share_within_1pct(&self) -> Option<f64> {
        (self.compared > 0).then(|| self.within_1pct as f64 / self.compared as f64)
    }

    pub fn share_within_7pct(&self) -> Option<f64> {
        (self.compared > 0).then(|| self.within_7pct as f64 / self.compared as f64)
    }
}

/// Whether received frame `rx` is the file's packet `orig` under `by`.
fn same(link: DataLink, by: MatchedBy, rx: &[u8], rx_link: DataLink, orig: &[u8]) -> bool {
    match by {
        MatchedBy::Frame => rx_link == link && rx.len() >= orig.len() && rx[..orig.len()] == *orig,
        MatchedBy::UdpPayload => match (udp_payload(rx_link, rx), udp_payload(link, orig)) {
            (Some(a), Some(b)) => a == b,
            _ => false,
        },
    }
}

/// The gaps of a stream compared online.
struct Gaps {
    a: Against,
    g: GapErrors,
    slope: Slope,
}

impl Gaps {
    fn add(&mut self, rx_gap: u64, file_gap: u64) {
        let e = self.g.add(rx_gap, file_gap);
        let (a, abs) = (&mut self.a, e.unsigned_abs() as u64);
        if e >= 0 {
            a.late.record(abs);
        } else {
            a.late.record(0);
            a.early += 1;
            a.early_max = a.early_max.max(abs);
        }
        let g = &self.g;
        self.slope
            .add(g.sum_want as f64, g.sum_got as f64 - g.sum_want as f64);
    }

    fn finish(self) -> Against {
        let (mut a, g) = (self.a, self.g);
        a.compared = g.compared;
        a.within_1pct = g.within_1pct;
        a.within_7pct = g.within_7pct;
        a.mean_ns = g.mean_ns();
        a.sd_ns = g.sd_ns();
        a.stretch = g.stretch();
        a.drift = self.slope.slope();
        a.error = g.error;
        a
    }
}

impl Original {
    /// The indices of the packets a stream matched `by` holds.
    fn expected(&self, by: MatchedBy) -> Vec<usize> {
        (0..self.packets.len())
            .filter(|&i| {
                by == MatchedBy::Frame || udp_payload(self.link, self.packets.get(i)).is_some()
            })
            .collect()
    }

    /// Where in the first [`WINDOW`] packets of `seq` frame `rx` is, under `by`.
    fn find(
        &self,
        seq: &[usize],
        from: u64,
        by: MatchedBy,
        rx: &[u8],
        link: DataLink,
    ) -> Option<u64> {
        let n = seq.len() as u64;
        (0..WINDOW as u64).map(|d| from + d).find(|abs| {
            let i = seq[(abs % n) as usize];
            same(self.link, by, rx, link, self.packets.get(i))
        })
    }

    /// The received capture (`rx`, of `link`) against this file.
    pub fn compare(&self, rx: &PacketStore, link: DataLink) -> Against {
        let mut g = Gaps {
            a: Against::new(self.packets.len() as u64),
            g: GapErrors::default(),
            slope: Slope::default(),
        };
        g.a.received = rx.len() as u64;
        let mut seq: Vec<usize> = Vec::new();
        let mut next = 0u64;
        let mut prev: Option<(u64, u64)> = None;
        let file_ts = self.packets.timestamps();
        for r in 0..rx.len() {
            let frame = rx.get(r);
            if g.a.by.is_none() {
                for by in [MatchedBy::Frame, MatchedBy::UdpPayload] {
                    let s = self.expected(by);
                    if !s.is_empty() && self.find(&s, 0, by, frame, link).is_some() {
                        g.a.file_packets = s.len() as u64;
                        (g.a.by, seq) = (Some(by), s);
                        break;
                    }
                }
            }
            let Some(by) = g.a.by else {
                g.a.unmatched += 1;
                continue;
            };
            let Some(abs) = self.find(&seq, next, by, frame, link) else {
                g.a.unmatched += 1;
                continue;
            };
            let n = seq.len() as u64;
            g.a.lost += abs - next;
            g.a.matched += 1;
            let ts = rx.timestamps()[r];
            if let Some((pabs, pts)) = prev {
                if pabs + 1 == abs && abs % n != 0 {
                    let i = (abs % n) as usize;
                    g.add(ts - pts, file_ts[seq[i]] - file_ts[seq[i - 1]]);
                }
            }
            prev = Some((abs, ts));
            next = abs + 1;
            g.a.passes = abs / n + 1;
        }
        g.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    fn udp(port: u16, payload: &[u8]) -> Vec<u8> {
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .udp(40000, port);
        let mut out = Vec::new();
        b.write(&mut out, payload).unwrap();
        out
    }

    fn file(gaps: &[u64]) -> Original {
        let mut s = PacketStore::new();
        let mut t = 1_000_000;
        s.push(t, &udp(9000, &0u64.to_le_bytes()));
        for (i, g) in gaps.iter().enumerate() {
            t += g;
            s.push(t, &udp(9000, &(i as u64 + 1).to_le_bytes()));
        }
        Original {
            link: DataLink::ETHERNET,
            packets: s,
        }
    }

    /// A stream with the file's gaps, each off by a known error: the errors, the shares and the
    /// early/late split are exact.
    #[test]
    fn gaps_are_compared_with_the_files_own_gaps() {
        let o = file(&[1_000, 2_000, 10_000, 500]);
        let mut rx = PacketStore::new();
        // Received gaps: 1_005 (+0.5 %), 1_900 (-5 %), 10_000 (0), 600 (+20 %).
        for (i, t) in [0u64, 1_005, 2_905, 12_905, 13_505].iter().enumerate() {
            rx.push(5_000_000 + t, o.packets.get(i));
        }
        let a = o.compare(&rx, DataLink::ETHERNET);
        assert_eq!(a.by, Some(MatchedBy::Frame));
        assert_eq!((a.matched, a.lost, a.unmatched, a.passes), (5, 0, 0, 1));
        assert_eq!(a.compared, 4);
        assert_eq!(a.error.max(), Some(100));
        assert_eq!((a.within_1pct, a.within_7pct), (2, 3));
        assert_eq!((a.early, a.early_max), (1, 100));
        assert_eq!(a.late.max(), Some(100));
        assert!((a.mean_ns - (5.0 - 100.0 + 0.0 + 100.0) / 4.0).abs() < 1e-9);
        let stretch = (13_505.0 - 13_500.0) / 13_500.0;
        assert!((a.stretch.unwrap() - stretch).abs() < 1e-12);
    }

    /// UDP payloads match when the headers differ; noise is unmatched, a lost packet is counted and
    /// the gap across it is not compared; a second pass wraps without comparing the wrap.
    #[test]
    fn udp_payloads_noise_losses_and_loops() {
        let o = file(&[1_000, 1_000, 1_000]);
        let mut rx = PacketStore::new();
        let payload = |i: usize| {
            u64::from_le_bytes(
                udp_payload(o.link, o.packets.get(i)).unwrap()[..8]
                    .try_into()
                    .unwrap(),
            )
        };
        let resent = |i: usize| udp(5555, &payload(i).to_le_bytes());
        let arp = vec![0xffu8; 42];
        let mut t = 0;
        for (i, noise) in [
            (0, false),
            (1, true),
            (3, false),
            (0, false),
            (1, false),
            (2, false),
            (3, false),
        ] {
            rx.push(t, &resent(i));
            if noise {
                rx.push(t + 10, &arp);
            }
            t += 1_010;
        }
        let a = o.compare(&rx, DataLink::ETHERNET);
        assert_eq!(a.by, Some(MatchedBy::UdpPayload));
        assert_eq!((a.matched, a.lost, a.unmatched, a.passes), (7, 1, 1, 2));
        // Compared: 0-1 of pass 1, then 0-1, 1-2, 2-3 of pass 2 (2-3 of pass 1 lost, 3-0 wraps).
        assert_eq!(a.compared, 4);
        assert_eq!(a.error.max(), Some(10));
        assert_eq!(a.within_1pct, 4);
    }

    #[test]
    fn a_capture_of_something_else_matches_nothing() {
        let o = file(&[1_000]);
        let mut rx = PacketStore::new();
        rx.push(0, &udp(9000, b"other"));
        let a = o.compare(&rx, DataLink::ETHERNET);
        assert_eq!((a.by, a.matched, a.unmatched, a.compared), (None, 0, 1, 0));
        assert_eq!(a.share_within_1pct(), None);
    }
}
