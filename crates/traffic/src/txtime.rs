//! `--txtime`: each packet handed to the kernel ahead of its instant, with that instant as its
//! transmit time (`SO_TXTIME` on the socket, an `SCM_TXTIME` control message per send), so that a
//! queueing discipline that honours transmit times (`etf`, or `fq`'s earliest departure time)
//! holds it and sends it from a kernel timer. Any other queueing discipline sends the packet at
//! once, early by the lead: so before anything is sent, the egress interface's root qdisc is read
//! over rtnetlink, and where it is not one of those two the replay says why and falls back to
//! sending each packet at its instant from the dispatcher.

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, Nla, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteHeader, RouteMessage};
use netlink_packet_route::tc::{TcAttribute, TcHandle, TcMessage, TcOption};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use std::io;
use std::net::IpAddr;
use std::os::fd::RawFd;

/// How long before its instant a packet is handed to the kernel by default: room for the send path
/// of this VM (p99 25 us) and an `etf` qdisc's usual `delta` (a few hundred us).
pub const DEFAULT_LEAD_NS: u64 = 1_000_000;

/// `TCA_ETF_PARMS` inside an `etf` qdisc's options: `struct tc_etf_qopt { s32 delta; s32 clockid;
/// u32 flags; }`.
const TCA_ETF_PARMS: u16 = 1;

/// An interface's root queueing discipline: its kind, and for `etf` the clock it was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Qdisc {
    pub kind: String,
    pub clockid: Option<i32>,
}

/// Why `--txtime` cannot be used, and what would let it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoTxTime {
    pub why: String,
    pub fix: String,
}

impl NoTxTime {
    pub fn new(why: impl Into<String>, fix: impl Into<String>) -> Self {
        NoTxTime {
            why: why.into(),
            fix: fix.into(),
        }
    }
}

/// What `--txtime` does on an interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Hand packets over early with transmit times on this clock.
    Kernel { clockid: i32, qdisc: String },
    /// Send from the dispatcher at each instant.
    Fallback(NoTxTime),
}

/// The decision for interface `ifname` whose root qdisc is `q` (`None`: no root qdisc).
pub fn decide(ifname: &str, q: Option<&Qdisc>) -> Decision {
    let fix = format!(
        "a queueing discipline that holds packets to their transmit times, where the kernel has \
         one: `tc qdisc replace dev {ifname} root etf clockid CLOCK_TAI delta 200000`, or `... root fq`"
    );
    match q {
        Some(q) if q.kind == "etf" => Decision::Kernel {
            clockid: q.clockid.unwrap_or(libc::CLOCK_TAI),
            qdisc: "etf".into(),
        },
        // fq takes the earliest departure time on the monotonic clock.
        Some(q) if q.kind == "fq" => Decision::Kernel {
            clockid: libc::CLOCK_MONOTONIC,
            qdisc: "fq".into(),
        },
        Some(q) => Decision::Fallback(NoTxTime::new(
            format!(
                "the queueing discipline of {ifname} is {}, which sends a packet at once whatever \
                 its transmit time",
                q.kind
            ),
            fix,
        )),
        None => Decision::Fallback(NoTxTime::new(
            format!("{ifname} has no queueing discipline to hold packets to their transmit times"),
            fix,
        )),
    }
}

/// Sends one rtnetlink request and collects every message of the answer (a dump, or one reply).
fn ask(req: RouteNetlinkMessage, dump: bool) -> io::Result<Vec<RouteNetlinkMessage>> {
    let mut sock = Socket::new(NETLINK_ROUTE)?;
    sock.bind_auto()?;
    sock.connect(&SocketAddr::new(0, 0))?;
    let mut hdr = NetlinkHeader::default();
    hdr.flags = NLM_F_REQUEST | if dump { NLM_F_DUMP } else { 0 };
    let mut msg = NetlinkMessage::new(hdr, NetlinkPayload::from(req));
    msg.finalize();
    let mut buf = vec![0u8; msg.buffer_len()];
    msg.serialize(&mut buf);
    sock.send(&buf, 0)?;
    let mut out = Vec::new();
    let mut rx = vec![0u8; 64 * 1024];
    loop {
        let n = sock.recv(&mut &mut rx[..], 0)?;
        let mut off = 0;
        while off < n {
            let m = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&rx[off..n])
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            let len = m.header.length as usize;
            match m.payload {
                NetlinkPayload::Done(_) => return Ok(out),
                NetlinkPayload::Error(e) => {
                    return match e.code {
                        Some(c) => Err(io::Error::from_raw_os_error(-c.get())),
                        None => Ok(out), // an acknowledgement
                    };
                }
                NetlinkPayload::InnerMessage(inner) => out.push(inner),
                _ => {}
            }
            if !dump {
                return Ok(out);
            }
            if len == 0 {
                break;
            }
            off += len;
        }
    }
}

/// The root queueing discipline of interface `ifindex` (`None`: it has none).
pub fn root_qdisc(ifindex: u32) -> io::Result<Option<Qdisc>> {
    let all = ask(
        RouteNetlinkMessage::GetQueueDiscipline(TcMessage::default()),
        true,
    )?;
    Ok(all.into_iter().find_map(|m| match m {
        RouteNetlinkMessage::NewQueueDiscipline(t)
            if t.header.index == ifindex as i32 && t.header.parent == TcHandle::ROOT =>
        {
            Some(qdisc_of(&t))
        }
        _ => None,
    }))
}

fn qdisc_of(t: &TcMessage) -> Qdisc {
    let mut q = Qdisc {
        kind: String::new(),
        clockid: None,
    };
    for a in &t.attributes {
        match a {
            TcAttribute::Kind(k) => q.kind = k.clone(),
            TcAttribute::Options(opts) => {
                for o in opts {
                    if let TcOption::Other(nla) = o {
                        if nla.kind() == TCA_ETF_PARMS && nla.value_len() >= 12 {
                            let mut v = vec![0u8; nla.value_len()];
                            nla.emit_value(&mut v);
                            q.clockid = Some(i32::from_ne_bytes(v[4..8].try_into().unwrap()));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    q
}

/// The interface a packet to `to` leaves by (the kernel's route lookup).
pub fn egress_ifindex(to: IpAddr) -> io::Result<u32> {
    let mut m = RouteMessage::default();
    let (family, len, addr) = match to {
        IpAddr::V4(a) => (AddressFamily::Inet, 32, RouteAddress::Inet(a)),
        IpAddr::V6(a) => (AddressFamily::Inet6, 128, RouteAddress::Inet6(a)),
    };
    m.header = RouteHeader {
        address_family: family,
        destination_prefix_length: len,
        ..Default::default()
    };
    m.attributes.push(RouteAttribute::Destination(addr));
    let answer = ask(RouteNetlinkMessage::GetRoute(m), false)?;
    answer
        .iter()
        .find_map(|m| match m {
            RouteNetlinkMessage::NewRoute(r) => r.attributes.iter().find_map(|a| match a {
                RouteAttribute::Oif(i) => Some(*i),
                _ => None,
            }),
            _ => None,
        })
        .ok_or_else(|| io::Error::other(format!("no route to {to}")))
}

/// The name of interface `ifindex`.
pub fn ifname(ifindex: u32) -> String {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: `buf` has the IF_NAMESIZE bytes if_indextoname may write (the name and its NUL).
    let p = unsafe { libc::if_indextoname(ifindex, buf.as_mut_ptr()) };
    if p.is_null() {
        return format!("interface {ifindex}");
    }
    // SAFETY: `p` is non-null, so it points into `buf`, which holds a NUL-terminated name
    // (if_indextoname wrote one) and outlives the borrow.
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned()
}

/// The decision for interface `ifindex`, reading its root qdisc.
pub fn decide_for(ifindex: u32) -> Decision {
    let name = ifname(ifindex);
    match root_qdisc(ifindex) {
        Ok(q) => decide(&name, q.as_ref()),
        Err(e) => Decision::Fallback(NoTxTime::new(
            format!("reading the queueing discipline of {name} over rtnetlink: {e}"),
            "run where rtnetlink answers (CAP_NET_ADMIN is not needed to read)",
        )),
    }
}

/// Turns `SO_TXTIME` on for socket `fd`, transmit times on `clockid`, the kernel reporting packets
/// it dropped for a missed transmit time on the error queue.
pub fn enable(fd: RawFd, clockid: i32) -> io::Result<()> {
    let v = libc::sock_txtime {
        clockid,
        flags: libc::SOF_TXTIME_REPORT_ERRORS,
    };
    // SAFETY: setsockopt reads `size_of::<sock_txtime>()` bytes from `v`, which is that type and
    // lives across the call; a bad descriptor is an error return, not undefined behaviour.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TXTIME,
            &v as *const libc::sock_txtime as *const libc::c_void,
            std::mem::size_of::<libc::sock_txtime>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `clockid`'s reading minus CLOCK_MONOTONIC's, in ns: added to a monotonic instant it gives the
/// transmit time on `clockid`.
pub fn offset_from_monotonic(clockid: i32) -> i64 {
    let read = |c| punctual_time::clock::read_clock(c) as i64;
    let a = read(libc::CLOCK_MONOTONIC);
    let t = read(clockid);
    let b = read(libc::CLOCK_MONOTONIC);
    t - (a + (b - a) / 2)
}

/// Room for one control message carrying a u64, aligned as `cmsghdr` needs.
#[repr(C, align(8))]
struct CmsgBuf([u8; 32]);

/// Sends `bytes` on `fd` (to `to`, for an unconnected socket) with transmit time `txtime` on the
/// socket's `SO_TXTIME` clock: one `sendmsg` with one `SCM_TXTIME` control message, nothing
/// allocated.
pub fn send_at(
    fd: RawFd,
    bytes: &[u8],
    to: Option<&nix::sys::socket::SockaddrStorage>,
    txtime: u64,
) -> io::Result<()> {
    use nix::sys::socket::SockaddrLike;
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    let mut cbuf = CmsgBuf([0; 32]);
    // SAFETY: CMSG_SPACE is arithmetic on its argument; it touches no memory.
    let space = unsafe { libc::CMSG_SPACE(8) } as usize;
    debug_assert!(space <= cbuf.0.len());
    // SAFETY: msghdr is plain C data (pointers and integers): all zeros is valid (null, 0).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    if let Some(a) = to {
        msg.msg_name = a.as_ptr() as *mut libc::c_void;
        msg.msg_namelen = a.len();
    }
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.0.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = space as _;
    // SAFETY: msg_control is `cbuf`, 8-byte aligned as cmsghdr needs and `space` (24) of its 32
    // bytes long, so CMSG_FIRSTHDR returns a non-null header inside it, and the header plus its
    // 8 data bytes (CMSG_LEN(8) <= space) are within `cbuf`; the u64 is written unaligned.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_TXTIME;
        (*c).cmsg_len = libc::CMSG_LEN(8) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut u64, txtime);
    }
    // SAFETY: every pointer in `msg` (the address, the one iovec over `bytes`, the control
    // buffer) points at memory of the stated length that lives until sendmsg returns; sendmsg
    // only reads them.
    let r = unsafe { libc::sendmsg(fd, &msg, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(kind: &str, clockid: Option<i32>) -> Qdisc {
        Qdisc {
            kind: kind.into(),
            clockid,
        }
    }

    #[test]
    fn etf_uses_its_own_clock_and_fq_the_monotonic_one() {
        assert_eq!(
            decide("eth0", Some(&q("etf", Some(libc::CLOCK_REALTIME)))),
            Decision::Kernel {
                clockid: libc::CLOCK_REALTIME,
                qdisc: "etf".into()
            }
        );
        assert_eq!(
            decide("eth0", Some(&q("etf", None))),
            Decision::Kernel {
                clockid: libc::CLOCK_TAI,
                qdisc: "etf".into()
            }
        );
        assert_eq!(
            decide("eth0", Some(&q("fq", None))),
            Decision::Kernel {
                clockid: libc::CLOCK_MONOTONIC,
                qdisc: "fq".into()
            }
        );
    }

    #[test]
    fn any_other_qdisc_falls_back_naming_it_and_the_fix() {
        for kind in ["pfifo_fast", "noqueue", "fq_codel", "mq"] {
            let Decision::Fallback(no) = decide("veth7", Some(&q(kind, None))) else {
                panic!("{kind} must fall back");
            };
            assert!(no.why.contains(kind) && no.why.contains("veth7"), "{no:?}");
            assert!(
                no.fix.contains("tc qdisc replace dev veth7 root etf"),
                "{no:?}"
            );
        }
        let Decision::Fallback(no) = decide("veth7", None) else {
            panic!("no qdisc must fall back");
        };
        assert!(
            no.why.contains("veth7 has no queueing discipline"),
            "{no:?}"
        );
    }

    #[test]
    fn the_offset_turns_a_monotonic_instant_into_the_other_clock() {
        let off = offset_from_monotonic(libc::CLOCK_REALTIME);
        let mono = punctual_time::clock::read_clock(libc::CLOCK_MONOTONIC) as i64;
        let real = punctual_time::clock::read_clock(libc::CLOCK_REALTIME) as i64;
        // Read one after the other: within a millisecond even on a busy machine.
        assert!(
            (mono + off - real).abs() < 1_000_000,
            "{}",
            mono + off - real
        );
        assert!(offset_from_monotonic(libc::CLOCK_MONOTONIC).abs() < 1_000_000);
    }
}
