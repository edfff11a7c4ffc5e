//! Capture with kernel receive timestamps: an AF_PACKET socket on one interface, SO_TIMESTAMPNS
//! (the kernel's nanosecond receive instant of each frame), written as pcapng with
//! if_tsresol = 9 so no resolution is lost; the kernel's drop count from PACKET_STATISTICS.

use crate::replay::{bind_packet, interface, packet_socket};
use crate::store::PacketStore;
use crate::TrafficError;
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::DataLink;
use std::borrow::Cow;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

const ETH_P_ALL: u16 = 0x0003;
/// Largest frame kept (a jumbo frame; GRO can hand up more, which is cut to this).
pub const SNAPLEN: usize = 65_535;
/// How often a blocked receive looks at the stop flag and the deadline.
const POLL_NS: i64 = 50_000_000;

/// A pcapng writer of nanosecond timestamps for one interface of `link`.
pub struct NsPcapNg<W: Write> {
    w: PcapNgWriter<W>,
}

impl<W: Write> NsPcapNg<W> {
    pub fn new(out: W, link: DataLink, iface: Option<&str>) -> Result<Self, TrafficError> {
        let io = |e: pcap_file::PcapError| TrafficError::System(format!("writing pcapng: {e}"));
        let mut w = PcapNgWriter::new(out).map_err(io)?;
        let mut options = vec![InterfaceDescriptionOption::IfTsResol(9)];
        if let Some(name) = iface {
            options.push(InterfaceDescriptionOption::IfName(Cow::Owned(name.into())));
        }
        w.write_pcapng_block(InterfaceDescriptionBlock {
            linktype: link,
            snaplen: SNAPLEN as u32,
            options,
        })
        .map_err(io)?;
        Ok(NsPcapNg { w })
    }

    /// One packet captured at `ts_ns` (ns since the epoch) of `orig_len` bytes on the wire.
    pub fn packet(&mut self, ts_ns: u64, data: &[u8], orig_len: u32) -> Result<(), TrafficError> {
        // pcap-file writes the timestamp's ns as the raw count, which if_tsresol = 9 makes ns.
        self.w
            .write_pcapng_block(EnhancedPacketBlock {
                interface_id: 0,
                timestamp: Duration::from_nanos(ts_ns),
                original_len: orig_len,
                data: Cow::Borrowed(data),
                options: vec![],
            })
            .map(|_| ())
            .map_err(|e| TrafficError::System(format!("writing pcapng: {e}")))
    }

    pub fn into_inner(self) -> W {
        self.w.into_inner()
    }
}

/// Writes a whole store as nanosecond pcapng.
pub fn write_pcapng<W: Write>(out: W, link: DataLink, s: &PacketStore) -> Result<W, TrafficError> {
    let mut w = NsPcapNg::new(out, link, None)?;
    for i in 0..s.len() {
        let p = s.get(i);
        w.packet(s.timestamps()[i], p, p.len() as u32)?;
    }
    Ok(w.into_inner())
}

/// When a capture ends.
#[derive(Clone, Copy, Debug, Default)]
pub struct Until {
    /// After this long (ns).
    pub duration: Option<u64>,
    /// After this many packets.
    pub count: Option<u64>,
}

impl Until {
    pub fn of(duration: Option<u64>, count: Option<u64>) -> Until {
        Until { duration, count }
    }
}

/// What a capture did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recorded {
    pub packets: u64,
    pub bytes: u64,
    /// Frames longer than [`SNAPLEN`], cut.
    pub truncated: u64,
    /// Frames without a kernel timestamp (then the instant after recvmsg returned).
    pub untimestamped: u64,
    /// The kernel's count of frames this socket saw and dropped (PACKET_STATISTICS).
    pub kernel_packets: u64,
    pub kernel_drops: u64,
    /// Frames the filter left out.
    pub filtered_out: u64,
}

/// Which frames `record` keeps (`--filter`): `udp`, `port N` (UDP or TCP, either end), or both
/// (`udp port N`). Applied to each frame as it arrives, with etherparse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Filter {
    pub udp_only: bool,
    pub port: Option<u16>,
}

impl Filter {
    /// Whether a frame of `link` passes.
    pub fn keeps(&self, link: DataLink, frame: &[u8]) -> bool {
        use etherparse::TransportSlice;
        let Some(t) = crate::read::sliced(link, frame).and_then(|p| p.transport) else {
            return false;
        };
        let ports = match &t {
            TransportSlice::Udp(u) => (u.source_port(), u.destination_port()),
            TransportSlice::Tcp(t) if !self.udp_only => (t.source_port(), t.destination_port()),
            _ => return false,
        };
        self.port.is_none_or(|p| ports.0 == p || ports.1 == p)
    }
}

impl std::str::FromStr for Filter {
    type Err = String;
    fn from_str(s: &str) -> Result<Filter, String> {
        let words: Vec<&str> = s.split_whitespace().collect();
        let port = |w: &str| {
            w.parse::<u16>()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| format!("'{w}' is not a port (1-65535)"))
        };
        match words.as_slice() {
            ["udp"] => Ok(Filter {
                udp_only: true,
                port: None,
            }),
            ["port", p] => Ok(Filter {
                udp_only: false,
                port: Some(port(p)?),
            }),
            ["udp", "port", p] => Ok(Filter {
                udp_only: true,
                port: Some(port(p)?),
            }),
            _ => Err(format!(
                "'{s}': give udp, port N or udp port N (N: 1-65535)"
            )),
        }
    }
}

/// An AF_PACKET socket bound to an interface, receiving every frame with its kernel timestamp.
pub struct Capturer {
    fd: OwnedFd,
    pub iface: String,
    pub link: DataLink,
    loopback: bool,
    /// Frames not kept are counted in [`Recorded::filtered_out`].
    pub filter: Option<Filter>,
}

fn setsockopt<T>(
    fd: &OwnedFd,
    level: i32,
    name: i32,
    v: &T,
    what: &str,
) -> Result<(), TrafficError> {
    // SAFETY: setsockopt reads `size_of::<T>()` bytes from `v`, a live reference to a T for the
    // whole call; the descriptor is open (borrowed from `fd`).
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as u32,
        )
    };
    if r < 0 {
        return Err(TrafficError::System(format!(
            "{what}: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

impl Capturer {
    /// Opens and binds the socket: frames are queued from here on, so a sender may start as soon as
    /// this returns.
    pub fn open(iface: &str) -> Result<Self, TrafficError> {
        let (index, _, up) = interface(iface)?;
        if !up {
            return Err(TrafficError::System(format!(
                "-i {iface}: the interface is down (`ip link set {iface} up`)"
            )));
        }
        let kind = std::fs::read_to_string(format!("/sys/class/net/{iface}/type"))
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok());
        // ARPHRD_ETHER and ARPHRD_LOOPBACK both hand up Ethernet headers.
        let link = match kind {
            Some(1) | Some(772) | None => DataLink::ETHERNET,
            Some(k) => {
                return Err(TrafficError::Usage(format!(
                    "-i {iface}: link type ARPHRD {k} is not supported (Ethernet and loopback are)"
                )))
            }
        };
        let fd = packet_socket(libc::SOCK_RAW, ETH_P_ALL, iface)?;
        bind_packet(&fd, index, ETH_P_ALL, iface)?;
        let one: libc::c_int = 1;
        setsockopt(
            &fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            &one,
            "SO_TIMESTAMPNS",
        )?;
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: (POLL_NS / 1_000) as libc::suseconds_t,
        };
        setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv, "SO_RCVTIMEO")?;
        // A larger receive buffer rides out bursts while the file is written.
        // Past net.core.rmem_max where privileged (SO_RCVBUFFORCE), else up to it.
        let buf: libc::c_int = 32 << 20;
        if setsockopt(
            &fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            &buf,
            "SO_RCVBUFFORCE",
        )
        .is_err()
        {
            let _ = setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &buf, "SO_RCVBUF");
        }
        Ok(Capturer {
            fd,
            iface: iface.into(),
            link,
            loopback: kind == Some(772),
            filter: None,
        })
    }

    /// Receives frames into `out` until `until`, or `stop`; `seen` counts them for a live line.
    pub fn run<W: Write>(
        &self,
        out: &mut NsPcapNg<W>,
        until: Until,
        stop: &AtomicBool,
        seen: &AtomicU64,
    ) -> Result<Recorded, TrafficError> {
        // Zero the kernel's counters: PACKET_STATISTICS resets them when read.
        let _ = self.stats();
        let mut rec = Recorded::default();
        let mut buf = vec![0u8; SNAPLEN];
        let deadline = until
            .duration
            .map(|d| punctual_time::clock::read_clock(libc::CLOCK_MONOTONIC) + d);
        loop {
            if stop.load(Ordering::Relaxed)
                || until.count.is_some_and(|c| rec.packets >= c)
                || deadline
                    .is_some_and(|d| punctual_time::clock::read_clock(libc::CLOCK_MONOTONIC) >= d)
            {
                break;
            }
            let Some((len, wire, ts)) = self.recv(&mut buf)? else {
                continue;
            };
            let ts = match ts {
                Some(t) => t,
                None => {
                    rec.untimestamped += 1;
                    punctual_time::clock::read_clock(libc::CLOCK_REALTIME)
                }
            };
            if self
                .filter
                .is_some_and(|f| !f.keeps(self.link, &buf[..len]))
            {
                rec.filtered_out += 1;
                continue;
            }
            if wire > len {
                rec.truncated += 1;
            }
            out.packet(ts, &buf[..len], wire as u32)?;
            rec.packets += 1;
            rec.bytes += wire as u64;
            seen.store(rec.packets, Ordering::Relaxed);
        }
        let (p, d) = self.stats()?;
        rec.kernel_packets = p;
        rec.kernel_drops = d;
        Ok(rec)
    }

    /// One frame: (bytes kept, length on the wire, kernel timestamp); `None` on timeout or signal.
    fn recv(&self, buf: &mut [u8]) -> Result<Option<(usize, usize, Option<u64>)>, TrafficError> {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        let mut control = [0u64; 16];
        // SAFETY: sockaddr_ll and msghdr are plain C data (integers, byte arrays, pointers):
        // all zeros is a valid value of each.
        let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = &mut from as *mut libc::sockaddr_ll as *mut libc::c_void;
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as u32;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = std::mem::size_of_val(&control);
        // SAFETY: every pointer in `msg` points at a live local of the length given beside it
        // (`from`, the iovec over `buf`, `control`); recvmsg writes at most those lengths.
        let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, libc::MSG_TRUNC) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
                _ => Err(TrafficError::System(format!(
                    "-i {}: receiving: {e}",
                    self.iface
                ))),
            };
        }
        // On loopback every frame passes twice, going out and coming in: keep it once (as
        // libpcap does).
        if self.loopback && from.sll_pkttype == libc::PACKET_OUTGOING {
            return Ok(None);
        }
        let wire = n as usize;
        let mut ts = None;
        // SAFETY: recvmsg set msg_controllen to the bytes it wrote into `control` (8-byte
        // aligned); CMSG_FIRSTHDR and CMSG_NXTHDR return headers wholly inside that length or
        // null, so each header read is initialised; an SCM_TIMESTAMPNS message carries a
        // timespec, read unaligned.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                    let t = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                    ts = Some(t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64);
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        Ok(Some((wire.min(buf.len()), wire, ts)))
    }

    /// (frames seen, frames dropped) since the last call, from PACKET_STATISTICS.
    pub fn stats(&self) -> Result<(u64, u64), TrafficError> {
        // SAFETY: tpacket_stats is two u32 counters: all zeros is valid.
        let mut st: libc::tpacket_stats = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes (the size of `st`) into `st`, a live
        // local, and updates `len`; the descriptor is owned by `self` and open.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                &mut st as *mut libc::tpacket_stats as *mut libc::c_void,
                &mut len,
            )
        };
        if r < 0 {
            return Err(TrafficError::System(format!(
                "-i {}: PACKET_STATISTICS: {}",
                self.iface,
                std::io::Error::last_os_error()
            )));
        }
        Ok((st.tp_packets as u64, st.tp_drops as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    fn udp(src: u16, dst: u16) -> Vec<u8> {
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .udp(src, dst);
        let mut out = Vec::new();
        b.write(&mut out, b"hello").unwrap();
        out
    }

    fn tcp(src: u16, dst: u16) -> Vec<u8> {
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(src, dst, 1, 1024);
        let mut out = Vec::new();
        b.write(&mut out, b"hello").unwrap();
        out
    }

    #[test]
    fn filters_parse_and_keep_what_they_name() {
        let f = |s: &str| s.parse::<Filter>().unwrap();
        let e = DataLink::ETHERNET;
        let arp_like = {
            let mut v = vec![0xffu8; 6];
            v.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
            v.resize(60, 0);
            v
        };
        assert!(f("udp").keeps(e, &udp(1, 2)));
        assert!(!f("udp").keeps(e, &tcp(1, 2)));
        assert!(!f("udp").keeps(e, &arp_like));
        assert!(f("port 9000").keeps(e, &udp(9000, 5)));
        assert!(f("port 9000").keeps(e, &tcp(5, 9000)));
        assert!(!f("port 9000").keeps(e, &udp(5, 6)));
        assert!(f("udp port 53").keeps(e, &udp(40000, 53)));
        assert!(!f("udp port 53").keeps(e, &tcp(40000, 53)));
        for bad in [
            "",
            "tcp",
            "port",
            "port 0",
            "port 70000",
            "udp port x",
            "port 1 2",
        ] {
            assert!(bad.parse::<Filter>().is_err(), "{bad:?}");
        }
    }
}
