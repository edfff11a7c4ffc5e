//! Sending a capture at its scheduled instants with punctual's dispatch loop
//! ([`punctual_dispatch::engine::dispatch`]): the schedule becomes one-shot events of one action
//! whose `fire` sends packet k; the loop wakes early, spins to the instant and fires. The timing
//! report is kept online (no per-packet storage): lateness, the error of each gap between sends
//! against its intended gap (ARTS's metric), and the drift (slope of the error over the run).

use crate::schedule::Schedule;
use crate::store::PacketStore;
use crate::txstamp::{ErrMsg, Pending, Settled, Waiting};
use crate::txtime::NoTxTime;
use crate::TrafficError;
use punctual_dispatch::engine::{
    dispatch, Actions, Fired, Heartbeat, LoopConfig, LoopEnd, SlotProgress, SlotSpec, SlotStats,
    StolenTime,
};
use punctual_dispatch::rephase::{self, LateEvents};
use punctual_explain::{LateLog, LateRelease, OwnWork, Waiter, WorkKind};
use punctual_periodic::channel::Ack;
use punctual_plan::admission::PhaseCosts;
use punctual_plan::{Event, MissPolicy};
use punctual_stats::Recorder;
use punctual_time::{Clock, MarginPolicy};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::AtomicBool;

/// Events built at once: the schedule is handed to the dispatch loop in pieces of this many, so a
/// replay of millions of packets holds 384 KiB of events rather than 24 bytes per send.
pub const EVENT_CHUNK: usize = 16_384;

/// Where packets go.
pub trait Sender: Send {
    /// Sends `bytes`, meant for instant `at` (CLOCK_MONOTONIC, ns): with `--txtime` on, `at` goes
    /// to the kernel as the packet's transmit time; otherwise it is not used.
    fn send(&mut self, bytes: &[u8], at: u64) -> std::io::Result<()>;
    /// What it sends to, for the report (`udp 10.0.0.2:9000`, `af_packet veth0`).
    fn describe(&self) -> String;
    /// Turns kernel transmit timestamps on ([`crate::txstamp`]); refused by senders without a
    /// socket.
    fn enable_stamps(&mut self) -> std::io::Result<()> {
        Err(std::io::ErrorKind::Unsupported.into())
    }
    /// The key the kernel gives the next send's stamp, while stamps are on and the count is sure
    /// (a failed send may or may not have used a key: after one, `None`).
    fn stamp_key(&self) -> Option<u32> {
        None
    }
    /// Reads the socket's error queue without blocking.
    fn drain(&mut self, _f: &mut dyn FnMut(ErrMsg)) {}
    /// Turns `--txtime` on ([`crate::txtime`]) where the egress interface's queueing discipline
    /// holds packets to their transmit times: the qdisc and clock used, or why not.
    fn enable_txtime(&mut self) -> Result<(String, i32), NoTxTime> {
        Err(NoTxTime::new("this sender has no socket", "--udp-to or -i"))
    }
    /// Whether [`Sender::prime`] readies this sender's next send (`false`: it is never called).
    fn primes(&self) -> bool {
        false
    }
    /// Runs as much of the kernel's send path for `bytes` as it can without sending them, just
    /// before they are due ([`PRIME_LEAD_NS`]), leaving the rest to the next [`Sender::send`],
    /// which must carry the same `bytes`. Once readied, further primes do nothing until that send.
    fn prime(&self, _bytes: &[u8]) {}
}

/// How long before a send the replay primes its sender ([`Sender::prime`]). Measured on this
/// project's VM (2026-11-30, `scripts/bench-send-prime.sh`: a plain C sender with and without a
/// probe 20 us before each send, 20,000 UDP sends 500 us apart to loopback, three rounds): the
/// path from the call to the kernel's transmit stamp took p99 7.4-7.6 us against 9.3-10.6 us, and
/// more than 5 us over its median 0.19-0.26 % of the time against 0.63-1.33 %. A probe 200 us
/// before helped in one round of two (docs/benchmarks.md, "Priming the send"). The datagram
/// built and held there since (2026-12-01) did better again at the same lead (docs/benchmarks.md,
/// "The datagram built before its instant").
pub const PRIME_LEAD_NS: u64 = 20_000;

/// Transmit times on a sender's socket: the offset from CLOCK_MONOTONIC to the qdisc's clock.
#[derive(Clone, Copy, Debug, Default)]
struct TxTimeOn {
    offset: Option<i64>,
}

impl TxTimeOn {
    fn enable(&mut self, fd: std::os::fd::RawFd, ifindex: u32) -> Result<(String, i32), NoTxTime> {
        match crate::txtime::decide_for(ifindex) {
            crate::txtime::Decision::Kernel { clockid, qdisc } => {
                crate::txtime::enable(fd, clockid).map_err(|e| {
                    NoTxTime::new(
                        format!("the kernel refused SO_TXTIME: {e}"),
                        "a kernel with SO_TXTIME (4.19 or later)",
                    )
                })?;
                self.offset = Some(crate::txtime::offset_from_monotonic(clockid));
                Ok((qdisc, clockid))
            }
            crate::txtime::Decision::Fallback(no) => Err(no),
        }
    }

    /// `at` on the qdisc's clock, when transmit times are on.
    #[inline(always)]
    fn at(&self, at: u64) -> Option<u64> {
        self.offset.map(|o| (at as i64 + o) as u64)
    }
}

/// The kernel's transmit-stamp counter of one socket, as the sender keeps it.
#[derive(Clone, Copy, Debug, Default)]
struct StampCount {
    on: bool,
    next: u32,
    lost: bool,
}

impl StampCount {
    fn enable(&mut self, fd: std::os::fd::RawFd) -> std::io::Result<()> {
        crate::txstamp::enable(fd)?;
        *self = StampCount {
            on: true,
            next: 0,
            lost: false,
        };
        Ok(())
    }

    #[inline(always)]
    fn sent(&mut self, r: &std::io::Result<()>) {
        match r {
            Ok(()) => self.next = self.next.wrapping_add(1),
            Err(_) => self.lost = true,
        }
    }

    fn key(&self) -> Option<u32> {
        (self.on && !self.lost).then_some(self.next)
    }
}

/// UDP payloads over an unconnected UDP socket.
pub struct UdpSender {
    sock: UdpSocket,
    to: SocketAddr,
    /// `to` as the kernel takes it, for `sendmsg`.
    to_raw: nix::sys::socket::SockaddrStorage,
    stamps: StampCount,
    txtime: TxTimeOn,
    /// A datagram built by [`Sender::prime`] waits on the socket for its send to push it.
    held: std::cell::Cell<bool>,
}

impl UdpSender {
    pub fn new(to: SocketAddr) -> Result<Self, TrafficError> {
        let local: SocketAddr = if to.is_ipv4() {
            "0.0.0.0:0".parse().unwrap()
        } else {
            "[::]:0".parse().unwrap()
        };
        // Not connected: a connected socket reports the ICMP "port unreachable" of an earlier
        // datagram as the failure of a later send (and drops that send), which would make a
        // receiver that only captures (no socket bound) look like lost packets.
        let sock = UdpSocket::bind(local)
            .map_err(|e| TrafficError::System(format!("--udp-to {to}: {e}")))?;
        Ok(UdpSender {
            sock,
            to,
            to_raw: to.into(),
            stamps: StampCount::default(),
            txtime: TxTimeOn::default(),
            held: std::cell::Cell::new(false),
        })
    }

    /// Sends the datagram [`Sender::prime`] built: turning `UDP_CORK` off pushes what the socket
    /// holds (the kernel does not report a failure of that push; its stamp then never comes).
    fn push_held(&self) -> std::io::Result<()> {
        let off: libc::c_int = 0;
        crate::txstamp::setsockopt(self.sock.as_raw_fd(), libc::SOL_UDP, libc::UDP_CORK, &off)
    }
}

impl Sender for UdpSender {
    #[inline(always)]
    fn send(&mut self, bytes: &[u8], at: u64) -> std::io::Result<()> {
        let r = match self.txtime.at(at) {
            Some(t) => crate::txtime::send_at(self.sock.as_raw_fd(), bytes, Some(&self.to_raw), t),
            None if self.held.replace(false) => self.push_held(),
            None => self.sock.send_to(bytes, self.to).map(|_| ()),
        };
        self.stamps.sent(&r);
        r
    }
    fn describe(&self) -> String {
        format!("udp {}", self.to)
    }
    fn enable_stamps(&mut self) -> std::io::Result<()> {
        self.stamps.enable(self.sock.as_raw_fd())
    }
    fn stamp_key(&self) -> Option<u32> {
        self.stamps.key()
    }
    fn drain(&mut self, f: &mut dyn FnMut(ErrMsg)) {
        crate::txstamp::drain(self.sock.as_raw_fd(), f);
    }
    /// Not with `--txtime`: the kernel sends the packet at its time, long after the call.
    fn primes(&self) -> bool {
        self.txtime.offset.is_none()
    }
    /// Builds the datagram with `MSG_MORE`: the kernel routes it, allocates it, copies `bytes`
    /// in and gives it its stamp key, then holds it on the socket; the send only pushes it. A
    /// prime that fails leaves nothing held (the kernel drops what it began), and the send then
    /// sends whole.
    fn prime(&self, bytes: &[u8]) {
        if self.held.get() {
            return;
        }
        let to = &self.to_raw;
        // SAFETY: `bytes` is valid for its length and `to` for `len` bytes, both read only during
        // the call; the descriptor is open (owned by `self.sock`).
        let sent = unsafe {
            libc::sendto(
                self.sock.as_raw_fd(),
                bytes.as_ptr().cast(),
                bytes.len(),
                libc::MSG_MORE,
                nix::sys::socket::SockaddrLike::as_ptr(to).cast(),
                nix::sys::socket::SockaddrLike::len(to),
            )
        };
        self.held.set(sent >= 0);
    }
    fn enable_txtime(&mut self) -> Result<(String, i32), NoTxTime> {
        let i = crate::txtime::egress_ifindex(self.to.ip()).map_err(|e| {
            NoTxTime::new(
                format!("finding the interface to {}: {e}", self.to),
                "a route to the destination",
            )
        })?;
        self.txtime.enable(self.sock.as_raw_fd(), i)
    }
}

/// Whole frames over an AF_PACKET raw socket bound to one interface.
pub struct RawSender {
    fd: OwnedFd,
    iface: String,
    ifindex: u32,
    txtime: TxTimeOn,
    /// The kernel's queueing discipline is bypassed (PACKET_QDISC_BYPASS).
    pub qdisc_bypass: bool,
    stamps: StampCount,
}

/// An interface's index, MTU and whether it is up, or why it cannot be used.
pub fn interface(name: &str) -> Result<(u32, usize, bool), TrafficError> {
    let c = std::ffi::CString::new(name)
        .map_err(|_| TrafficError::Usage(format!("-i {name:?}: not an interface name")))?;
    // SAFETY: `c` is a NUL-terminated string that outlives the call, which only reads it.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 || name.len() >= libc::IFNAMSIZ {
        return Err(TrafficError::System(format!(
            "-i {name}: no such interface here (see `ip link`)"
        )));
    }
    // SAFETY: socket takes no pointers; a failure is a negative return, checked below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(TrafficError::System(format!(
            "-i {name}: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: `fd` was just opened by socket, is valid, and nothing else owns or closes it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain C data (bytes, integers and a union of them): all zeros is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    let ioctl = |req: &mut libc::ifreq, what: libc::c_ulong| {
        // SAFETY: SIOCGIFMTU and SIOCGIFFLAGS read the NUL-terminated name (the zeroed array
        // holds under IFNAMSIZ bytes of it, checked above) and write one field of the ifreq we
        // lend for the call; the descriptor is open.
        if unsafe { libc::ioctl(fd.as_raw_fd(), what as _, req as *mut libc::ifreq) } < 0 {
            Err(TrafficError::System(format!(
                "-i {name}: {}",
                std::io::Error::last_os_error()
            )))
        } else {
            Ok(())
        }
    };
    ioctl(&mut req, libc::SIOCGIFMTU)?;
    // SAFETY: SIOCGIFMTU succeeded, so the kernel wrote the union's MTU member; every member is
    // an integer, so any bytes are a valid value of it.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu } as usize;
    ioctl(&mut req, libc::SIOCGIFFLAGS)?;
    // SAFETY: as for the MTU: SIOCGIFFLAGS succeeded and wrote the flags member, an integer.
    let up = unsafe { req.ifr_ifru.ifru_flags } as i32 & libc::IFF_UP != 0;
    Ok((index, mtu, up))
}

/// An AF_PACKET socket (`protocol` in host order, 0: send only), or the fix when refused.
pub(crate) fn packet_socket(
    kind: libc::c_int,
    protocol: u16,
    iface: &str,
) -> Result<OwnedFd, TrafficError> {
    // SAFETY: socket takes no pointers; a failure is a negative return, checked below.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            kind | libc::SOCK_CLOEXEC,
            protocol.to_be() as libc::c_int,
        )
    };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return Err(TrafficError::System(
            if e.raw_os_error() == Some(libc::EPERM) {
                format!(
                    "-i {iface}: raw packet sockets need CAP_NET_RAW: run as root, or \
                     `sudo setcap cap_net_raw+ep $(which punctual)`"
                )
            } else {
                format!("-i {iface}: AF_PACKET socket: {e}")
            },
        ));
    }
    // SAFETY: `fd` was just opened by socket (non-negative, checked), and only this OwnedFd owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Binds an AF_PACKET socket to interface `index` for `protocol` (host order).
pub(crate) fn bind_packet(
    fd: &OwnedFd,
    index: u32,
    protocol: u16,
    iface: &str,
) -> Result<(), TrafficError> {
    // SAFETY: sockaddr_ll is plain C data (integers and a byte array): all zeros is valid.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = index as i32;
    // SAFETY: bind reads `size_of::<sockaddr_ll>()` bytes from `sll`, which is that long and
    // lives across the call; the descriptor is open (borrowed from `fd`).
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    if r < 0 {
        return Err(TrafficError::System(format!(
            "-i {iface}: binding the packet socket: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

impl RawSender {
    /// Opens the socket for frames of at most `max_frame` bytes (the largest in the capture): a
    /// missing or down interface, frames over its MTU, or no CAP_NET_RAW fail here, before
    /// anything is sent.
    pub fn open(iface: &str, max_frame: usize, qdisc_bypass: bool) -> Result<Self, TrafficError> {
        let (index, mtu, up) = interface(iface)?;
        if !up {
            return Err(TrafficError::System(format!(
                "-i {iface}: the interface is down (`ip link set {iface} up`)"
            )));
        }
        // An Ethernet frame carries the MTU plus its 14-byte header (18 with a VLAN tag).
        if max_frame > mtu + 18 {
            return Err(TrafficError::Usage(format!(
                "-i {iface}: the capture holds a frame of {max_frame} bytes, more than the \
                 interface's MTU {mtu} plus the Ethernet header allows"
            )));
        }
        let fd = packet_socket(libc::SOCK_RAW, 0, iface)?;
        bind_packet(&fd, index, 0, iface)?;
        let mut bypass = false;
        if qdisc_bypass {
            let one: libc::c_int = 1;
            // SAFETY: the option's value is the 4-byte c_int `one`, alive across the call, which
            // only reads it; the descriptor is open.
            bypass = unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_PACKET,
                    libc::PACKET_QDISC_BYPASS,
                    &one as *const libc::c_int as *const libc::c_void,
                    4,
                )
            } == 0;
        }
        Ok(RawSender {
            fd,
            iface: iface.into(),
            ifindex: index,
            txtime: TxTimeOn::default(),
            qdisc_bypass: bypass,
            stamps: StampCount::default(),
        })
    }
}

impl Sender for RawSender {
    #[inline(always)]
    fn send(&mut self, bytes: &[u8], at: u64) -> std::io::Result<()> {
        let r = match self.txtime.at(at) {
            Some(t) => crate::txtime::send_at(self.fd.as_raw_fd(), bytes, None, t),
            None => {
                // SAFETY: send reads `bytes.len()` bytes from the borrowed slice, which outlives
                // the call; the descriptor is owned by `self` and open.
                let n = unsafe {
                    libc::send(
                        self.fd.as_raw_fd(),
                        bytes.as_ptr() as *const libc::c_void,
                        bytes.len(),
                        0,
                    )
                };
                if n < 0 {
                    Err(std::io::Error::last_os_error())
                } else {
                    Ok(())
                }
            }
        };
        self.stamps.sent(&r);
        r
    }
    fn describe(&self) -> String {
        format!("af_packet {}", self.iface)
    }
    fn enable_stamps(&mut self) -> std::io::Result<()> {
        self.stamps.enable(self.fd.as_raw_fd())
    }
    fn stamp_key(&self) -> Option<u32> {
        self.stamps.key()
    }
    fn drain(&mut self, f: &mut dyn FnMut(ErrMsg)) {
        crate::txstamp::drain(self.fd.as_raw_fd(), f);
    }
    fn enable_txtime(&mut self) -> Result<(String, i32), NoTxTime> {
        if self.qdisc_bypass {
            return Err(NoTxTime::new(
                "--qdisc-bypass skips the queueing discipline that would hold packets to their \
                 transmit times",
                "leave out --qdisc-bypass",
            ));
        }
        self.txtime.enable(self.fd.as_raw_fd(), self.ifindex)
    }
}

/// Drain the error queue after a send when the next one is at least this far off...
pub const DRAIN_ROOM_NS: u64 = 20_000;
/// ... or when this many sends await their stamps.
pub const DRAIN_BATCH: usize = 256;
/// After the last send, how long stamps still on their way are waited for.
pub const STAMP_WAIT_NS: u64 = 20_000_000;

/// The timing of every send, kept online.
#[derive(Clone, Debug)]
pub struct Timing {
    /// From each send's instant to its actual send: the kernel's transmit stamp where it gave one
    /// (`stamped` of them), else the clock read just before the send call.
    pub lateness: Recorder,
    /// Sends timed by the kernel's transmit stamp.
    pub stamped: u64,
    /// From the clock read before each stamped send's call to its stamp: the send path alone.
    pub call: Recorder,
    /// Stamps that matched no send awaiting one.
    pub stale_stamps: u64,
    /// Packets the queueing discipline dropped for a transmit time it could not meet (`--txtime`).
    pub txtime_dropped: u64,
    /// |actual gap - intended gap| between consecutive sends.
    pub gap_error: Recorder,
    pub sent: u64,
    pub errors: u64,
    /// The first send error's message.
    pub first_error: Option<String>,
    /// Gaps within 1 % and 7 % of the nominal spacing (ARTS's metric).
    pub gaps_within_1pct: u64,
    pub gaps_within_7pct: u64,
    pub gaps: u64,
    /// Online regression of the error (actual - intended) on the intended instant.
    slope: Slope,
    /// The previous send: its schedule's instant (from the start), its instant, when it went.
    prev: Option<(u64, u64, u64, BeforeSend)>,
    /// `--avoid-interference`: the late sends (over [`rephase::LATE_NS`]) from `watch_from` on,
    /// kept to see whether they line up ([`LateEvents`]), and the spacing (in sends) they lined
    /// up at, for the loop to take and move the rest of the sends.
    lined: Option<(LateEvents, u64)>,
    pub lined_up: Option<u64>,
    /// `--explain`: every gap off by more than the log's bound, as the later of its two sends
    /// (series 0, the gap error). Keeps nothing unless given a bound.
    pub late: LateLog,
}

/// What the loop saw of one send before its call, for `--explain`: the clock read just before the
/// call, and the spin's read before the one that found the instant passed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BeforeSend {
    pub at: u64,
    pub last_read: Option<u64>,
}

/// An online least-squares slope of y on x (Welford's updates): no per-point storage.
#[derive(Clone, Copy, Debug, Default)]
pub struct Slope {
    n: f64,
    mean_x: f64,
    mean_y: f64,
    c_xy: f64,
    m2_x: f64,
}

impl Slope {
    #[inline(always)]
    pub fn add(&mut self, x: f64, y: f64) {
        self.n += 1.0;
        let dx = x - self.mean_x;
        self.mean_x += dx / self.n;
        self.mean_y += (y - self.mean_y) / self.n;
        self.m2_x += dx * (x - self.mean_x);
        self.c_xy += dx * (y - self.mean_y);
    }

    /// `None` under two points or when x never moved.
    pub fn slope(&self) -> Option<f64> {
        (self.n >= 2.0 && self.m2_x > 0.0).then(|| self.c_xy / self.m2_x)
    }
}

impl Timing {
    fn new() -> Self {
        Timing {
            lateness: Recorder::new(),
            stamped: 0,
            call: Recorder::new(),
            stale_stamps: 0,
            txtime_dropped: 0,
            gap_error: Recorder::new(),
            sent: 0,
            errors: 0,
            first_error: None,
            gaps_within_1pct: 0,
            gaps_within_7pct: 0,
            gaps: 0,
            slope: Slope::default(),
            prev: None,
            lined: None,
            lined_up: None,
            late: LateLog::off(),
        }
    }

    /// One send meant for `target` (relative to the start: `intended`) that began at `actual`.
    #[inline(always)]
    fn add(&mut self, intended: u64, target: u64, actual: u64, spacing: f64, before: BeforeSend) {
        self.sent += 1;
        self.lateness.record(actual.saturating_sub(target));
        self.slope
            .add(intended as f64, actual as f64 - target as f64);
        if let Some((pi, pt, pa, pb)) = self.prev {
            // The schedule's gap, not the instants': a move of the sends costs its one gap.
            let want = intended.saturating_sub(pi);
            let got = actual.saturating_sub(pa);
            let e = got.abs_diff(want);
            self.gap_error.record(e);
            self.gaps += 1;
            let e = e as f64;
            if e <= 0.01 * spacing {
                self.gaps_within_1pct += 1;
            }
            if e <= 0.07 * spacing {
                self.gaps_within_7pct += 1;
            }
            // The sends moved between the two (`--avoid-interference`): the loop held this one
            // back from its schedule's instant on purpose, which is its own doing.
            let moved = (target - pt).saturating_sub(want);
            if moved > 0 && self.late.is_late(e as u64) {
                log_move(&mut self.late, target - moved, actual);
            } else if self.late.is_late(e as u64) {
                // The gap is off because one of its sends was later than the other: that one.
                let (t, a, b) = if actual.saturating_sub(target) >= pa.saturating_sub(pt) {
                    (target, actual, before)
                } else {
                    (pt, pa, pb)
                };
                log_gap(&mut self.late, t, a, b);
            }
        }
        self.prev = Some((intended, target, actual, before));
    }

    /// A send settled with its kernel stamp or without (then its instant before the send call).
    #[inline(always)]
    fn settle(&mut self, s: Settled, start: u64, spacing: f64) {
        let actual = match s.stamp {
            Some(t) => {
                self.stamped += 1;
                self.call.record(t.saturating_sub(s.w.before));
                t
            }
            None => s.w.before,
        };
        let before = BeforeSend {
            at: s.w.before,
            last_read: s.w.last_read,
        };
        let intended = s.w.target - s.w.shift - start;
        self.add(intended, s.w.target, actual, spacing, before);
        if let Some((late, from)) = self.lined.as_mut() {
            if s.w.seq >= *from && actual.saturating_sub(s.w.target) > rephase::LATE_NS {
                if let Some(d) = late.late(s.w.seq) {
                    self.lined_up = Some(d);
                }
            }
        }
    }

    /// The sends move from send `from` on: the late ones before say nothing of the new phase.
    fn watch_from(&mut self, from: u64) {
        if let Some((late, f)) = self.lined.as_mut() {
            late.clear();
            *f = from;
        }
        self.lined_up = None;
    }

    /// One message of the error queue.
    fn errqueue(&mut self, m: ErrMsg, pending: &mut Pending, start: u64, spacing: f64) {
        match m {
            ErrMsg::Sent { key, realtime_ns } => {
                pending.stamp(key, realtime_ns, &mut |s| self.settle(s, start, spacing))
            }
            ErrMsg::TxTimeDropped => self.txtime_dropped += 1,
            ErrMsg::Other => {}
        }
    }

    /// The late gaps' records for `--explain`, taken out of the log, with the usual time of a
    /// send call filled in: the 99th percentile of the run's stamped calls (from the clock read
    /// before the call to the kernel's stamp), else of its lateness (from the instant to the
    /// stamp, which also holds the little before the call). Measured 2026-12-01: calls p99
    /// 2.2-3.0 us, the lateness p99 3.5-6 us, and sends held 5-6.5 us inside a 1 us path with no
    /// guest event read `dispatcher` against the lateness's (docs/benchmarks.md, "The datagram
    /// built before its instant").
    pub fn late_records(&mut self) -> (Vec<LateRelease>, u64) {
        let mut log = std::mem::take(&mut self.late);
        let usual = if self.call.count() > 0 {
            &self.call
        } else {
            &self.lateness
        };
        log.set_own_work_usual(WorkKind::Send, usual.percentile(99_000));
        log.into_records()
    }

    /// Slope of the error over the run (ns of error per ns of run), `None` under two sends.
    pub fn drift(&self) -> Option<f64> {
        self.slope.slope()
    }

    pub fn share_within_1pct(&self) -> Option<f64> {
        (self.gaps > 0).then(|| self.gaps_within_1pct as f64 / self.gaps as f64)
    }

    pub fn share_within_7pct(&self) -> Option<f64> {
        (self.gaps > 0).then(|| self.gaps_within_7pct as f64 / self.gaps as f64)
    }
}

/// `--explain`: a send that made a gap late, kept with the sending thread (the dispatch loop).
/// When most of its lateness came before the send call, the window ends at the call and keeps
/// the spin's last read: a stop of the virtual CPU during the spin is then seen as one (a gap
/// with no guest event), which the send path's own events after the call would hide. Otherwise
/// it keeps the call (its usual time is filled in after the run: [`Timing::late_records`]) and
/// the spin's last read too, for a stop split between the two.
#[cold]
fn log_gap(log: &mut LateLog, target: u64, actual: u64, before: BeforeSend) {
    let (tid, cpu) = punctual_explain::here();
    let (actual, last_read, call) =
        if before.at.saturating_sub(target).saturating_mul(2) >= actual.saturating_sub(target) {
            (before.at, before.last_read.filter(|&r| r <= target), None)
        } else {
            let call = OwnWork {
                kind: WorkKind::Send,
                at: before.at,
                usual: u64::MAX,
            };
            (
                actual,
                before.last_read.filter(|&r| r <= target),
                Some(call),
            )
        };
    log.push(LateRelease {
        series: 0,
        tid,
        cpu,
        waiter: Waiter::Loop,
        target,
        actual: actual.max(target + 1),
        handover: None,
        behind: false,
        last_read,
        own_work: call,
    });
}

/// `--explain`: the gap the sends' move made, as a release held from its schedule's instant
/// `scheduled` to `actual` by the loop itself (`behind`: what ran meanwhile was its choice).
#[cold]
fn log_move(log: &mut LateLog, scheduled: u64, actual: u64) {
    let (tid, cpu) = punctual_explain::here();
    log.push(LateRelease {
        series: 0,
        tid,
        cpu,
        waiter: Waiter::Loop,
        target: scheduled,
        actual: actual.max(scheduled + 1),
        handover: None,
        behind: true,
        last_read: None,
        own_work: None,
    });
}

/// The send number an event of the replay carries (its first 8 bytes, little-endian).
#[inline(always)]
fn send_number(data: &[u8]) -> u64 {
    u64::from_le_bytes(data[..8].try_into().expect("8 bytes of send number"))
}

/// The replay as the dispatch loop's one action: `fire` sends packet `schedule.packet(k)` for the
/// send number k carried in the event.
pub struct ReplayActions<'a, C: Clock + ?Sized, S: Sender + ?Sized> {
    clock: &'a C,
    store: &'a PacketStore,
    schedule: &'a Schedule,
    start: u64,
    sender: &'a mut S,
    pub timing: Timing,
    /// Sends awaiting their kernel stamps (`None`: the sender gives none).
    pending: Option<Pending>,
    /// How long before its instant each packet is handed over (`--txtime`; else 0).
    lead: u64,
    /// The loop's spin read before the next send ([`Actions::spin_read`]).
    last_read: Option<u64>,
    /// How far the sends moved from their schedule (`--avoid-interference`), and what it keeps
    /// clear of when they move: the interference watched before the run.
    shift: u64,
    avoid: Option<&'a PhaseCosts>,
    pub moves: Vec<SendsMoved>,
}

/// The sends moved during the run: their late ones had lined up (`--avoid-interference`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendsMoved {
    /// The first send at the new phase.
    pub from: u64,
    /// The late sends lined up one in this many.
    pub every: u64,
    /// How far the sends are now from their schedule, ns (the move: this less the previous).
    pub shift_ns: u64,
}

impl<C: Clock + ?Sized, S: Sender + ?Sized> ReplayActions<'_, C, S> {
    /// The late sends lined up one in `every`: sends from `from` on move forward by a part of the
    /// spacing that keeps them off the watched interference (`None` there: they stay), and the
    /// watch starts afresh. Costs one gap (longer by the move).
    #[cold]
    fn move_sends(&mut self, from: u64, every: u64) {
        let spacing = self.schedule.spacing() as u64;
        let avoid = self.avoid.map(|costs| (costs, self.start));
        if let Some(shift) = rephase::stream_shift(self.shift, spacing, avoid) {
            self.shift = shift;
            self.moves.push(SendsMoved {
                from,
                every,
                shift_ns: shift,
            });
        }
        self.timing.watch_from(from);
    }

    /// Reads the stamps that have come, settling their sends (and older ones that got none).
    fn drain(&mut self) {
        let Some(p) = self.pending.as_mut() else {
            return;
        };
        let (t, start, spacing) = (&mut self.timing, self.start, self.schedule.spacing());
        self.sender.drain(&mut |m| t.errqueue(m, p, start, spacing));
    }

    /// Settles every awaited send; those without a stamp by now take their instant before the send.
    fn flush(&mut self) {
        let (t, start, spacing) = (&mut self.timing, self.start, self.schedule.spacing());
        if let Some(p) = self.pending.as_mut() {
            p.flush(&mut |s| t.settle(s, start, spacing));
            t.stale_stamps = p.stale;
        }
    }

    /// After the last send: waits a little for stamps still on their way, then settles the rest.
    fn finish_stamps(&mut self) {
        let until = self.clock.now() + STAMP_WAIT_NS;
        while self.pending.as_ref().is_some_and(|p| !p.is_empty()) && self.clock.now() < until {
            self.drain();
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        self.drain();
        self.flush();
    }

    /// The send at `target` that began at `before` (its stamp key `key`, result `ok`), settled now
    /// or left to await its stamp.
    #[inline(always)]
    fn sent(&mut self, k: u64, target: u64, before: u64, key: Option<u32>, ok: bool) {
        let (start, spacing, shift) = (self.start, self.schedule.spacing(), self.shift);
        let next = (k + 1 < self.schedule.total())
            .then(|| start + self.schedule.at(k + 1, self.store.timestamps()) + shift);
        match (self.pending.as_mut(), key) {
            (Some(p), Some(key)) if ok => {
                let t = &mut self.timing;
                let w = Waiting {
                    key,
                    seq: k,
                    target,
                    shift,
                    before,
                    last_read: self.last_read,
                };
                p.push(w, &mut |s| t.settle(s, start, spacing));
                let room = next.map_or(0, |n| n.saturating_sub(self.clock.now()));
                if p.len() >= DRAIN_BATCH || room >= DRAIN_ROOM_NS {
                    self.drain();
                }
            }
            _ => {
                // Sends settle in order: the awaited ones first.
                self.drain();
                self.flush();
                let w = Waiting {
                    key: 0,
                    seq: k,
                    target,
                    shift,
                    before,
                    last_read: self.last_read,
                };
                self.timing
                    .settle(Settled { w, stamp: None }, start, spacing);
            }
        }
    }
}

impl<C: Clock + ?Sized, S: Sender + ?Sized> Actions for ReplayActions<'_, C, S> {
    fn lead(&self, _: u16) -> u64 {
        self.lead
    }
    fn prime_lead(&self, _: u16) -> Option<u64> {
        self.sender.primes().then_some(PRIME_LEAD_NS)
    }
    fn prime(&self, _: u16, data: &[u8]) {
        self.sender
            .prime(self.store.get(self.schedule.packet(send_number(data))));
    }
    #[inline(always)]
    fn event_shift(&self, _: u16) -> u64 {
        self.shift
    }
    fn delegated(&self, _: u16) -> bool {
        false
    }
    /// A send call (its path up to the kernel's stamp takes a few microseconds).
    #[inline(always)]
    fn short(&self, _: u16) -> bool {
        true
    }
    #[inline(always)]
    fn fire(&mut self, _: u16, target: u64, _seq: u64, data: &[u8]) -> Fired {
        let k = send_number(data);
        let bytes = self.store.get(self.schedule.packet(k));
        let key = self.sender.stamp_key();
        let actual = self.clock.now();
        let r = self.sender.send(bytes, target);
        self.sent(k, target, actual, key, r.is_ok());
        if let Some(d) = self.timing.lined_up.take() {
            self.move_sends(k + 1, d);
        }
        let error = match r {
            Ok(()) => false,
            Err(e) => {
                self.timing.errors += 1;
                if self.timing.first_error.is_none() {
                    // Once, after the send: the message costs an allocation.
                    self.timing.first_error = Some(format!("send {k}: {e}"));
                }
                true
            }
        };
        Fired {
            error,
            previous: None,
        }
    }
    fn finish(&mut self, _: u16) -> Option<Ack> {
        None
    }
    #[inline(always)]
    fn spin_read(&mut self, _: u16, last_read: Option<u64>) {
        self.last_read = last_read;
    }
}

/// How the loop runs (the dispatcher's knobs that apply to a replay).
pub struct LoopSettings<'a> {
    /// Absolute instant of send 0 on `clock`.
    pub start: u64,
    pub margin: MarginPolicy,
    pub shielded: bool,
    pub breather_every: Option<u64>,
    /// Who wakes the loop from a breather that has no room between sends
    /// ([`punctual_dispatch::partner`]; `None`: a timed sleep).
    pub partner: Option<&'a dyn punctual_dispatch::partner::Breath>,
    pub steal: Option<&'a dyn StolenTime>,
    /// `--txtime` on the sender: packets are handed to the kernel this long before their instants.
    pub txtime_lead: u64,
    /// `--explain`: keep every gap off by more than this (ns) for attribution.
    pub explain_bound: Option<u64>,
    /// `--avoid-interference` (sends at a fixed spacing): move the rest of the sends when their
    /// late ones line up, keeping clear of the interference watched before the run (its costs by
    /// phase of the spacing, [`Interference::phase_costs`]).
    ///
    /// [`Interference::phase_costs`]: punctual_plan::admission::Interference::phase_costs
    pub avoid: Option<&'a PhaseCosts>,
}

/// What a replay did.
#[derive(Clone, Debug)]
pub struct Replayed {
    pub timing: Timing,
    /// Of the dispatch loop's own figures: the final margin, and the wake-ups that came late.
    pub margin_ns: u64,
    pub woke_late: u64,
    pub spun_through: u64,
    pub breathers: u64,
    /// Of those, the ones a partner thread woke the loop from.
    pub breathers_partnered: u64,
    /// The loop was stopped before the last send.
    pub stopped: bool,
    /// `--explain`: where the loop stalled ([`punctual_explain::Stall`]), and the stalls its log
    /// had no room for.
    pub stalls: Vec<punctual_explain::Stall>,
    pub stalls_dropped: u64,
    /// With kernel stamps: CLOCK_REALTIME - CLOCK_MONOTONIC (ns) before and after the run; the
    /// first converts the stamps, a difference means the realtime clock was stepped.
    pub stamp_offset: Option<(i64, i64)>,
    /// `--avoid-interference`: each time the sends moved.
    pub moves: Vec<SendsMoved>,
}

/// Sends every scheduled packet at `settings.start + schedule.at(k)` on `clock`, through the
/// dispatch loop, until done or `stop`. `progress[0]` carries the live figures.
pub fn replay<C: Clock + ?Sized, S: Sender + ?Sized>(
    clock: &C,
    store: &PacketStore,
    schedule: &Schedule,
    sender: &mut S,
    settings: &LoopSettings,
    stop: &AtomicBool,
    progress: &[SlotProgress; 1],
) -> Replayed {
    let ts = store.timestamps();
    let slots = [SlotSpec {
        name: "replay".into(),
        miss: MissPolicy::CatchUp,
        ..SlotSpec::default()
    }];
    let event_slot = [Some(0usize)];
    let mut stats = [SlotStats::new(false)];
    let heartbeat = Heartbeat::default();
    let spacing = (schedule.spacing() as u64).max(1);
    let margin_cap = if settings.shielded {
        u64::MAX
    } else {
        punctual_dispatch::spin_cap(
            1e9 / schedule.spacing().max(1.0),
            punctual_dispatch::DISPATCH_SPIN_BUDGET,
        )
    };
    let mut actions = ReplayActions {
        clock,
        store,
        schedule,
        start: settings.start,
        pending: sender
            .stamp_key()
            .map(|_| Pending::new(crate::txstamp::realtime_offset())),
        sender,
        timing: Timing::new(),
        lead: settings.txtime_lead,
        last_read: None,
        shift: 0,
        avoid: settings.avoid,
        // Room for the moves of a long run, so a move does not allocate in the loop.
        moves: Vec::with_capacity(64),
    };
    // Only a stream at a fixed spacing has a phase to move.
    if settings.avoid.is_some() && schedule.spacing() >= 1.0 {
        actions.timing.lined = Some((LateEvents::default(), 0));
    }
    if let Some(b) = settings.explain_bound {
        actions.timing.late = LateLog::new(b, punctual_explain::LOG_CAPACITY);
    }
    let mut events: Vec<Event> = Vec::with_capacity(EVENT_CHUNK);
    let mut out = LoopEnd {
        // One log for every chunk (made here, in the sending thread, before the first send),
        // with room for two stalls a send (the send, its prime).
        stalls: settings
            .explain_bound
            .map_or_else(punctual_explain::StallLog::off, |b| {
                let sends = usize::try_from(schedule.total()).unwrap_or(usize::MAX);
                punctual_explain::StallLog::with_capacity(b, sends.saturating_mul(2))
            }),
        ..LoopEnd::default()
    };
    let total = schedule.total();
    let mut k0 = 0u64;
    while k0 < total && !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let k1 = (k0 + EVENT_CHUNK as u64).min(total);
        events.clear();
        events.extend((k0..k1).map(|k| Event::new(schedule.at(k, ts), 0, &k.to_le_bytes())));
        let lc = LoopConfig {
            start: settings.start,
            end: u64::MAX,
            margin: settings.margin,
            interval: spacing,
            margin_cap,
            breather_every: settings.breather_every,
            partner: settings.partner,
            shielded: settings.shielded,
            spin_below: if settings.shielded {
                punctual_dispatch::engine::SHIELDED_SPIN_BELOW_NS
            } else {
                0
            },
            steal: settings.steal,
            // The replay's sends have no automatic phase to move.
            avoid: None,
            events: &events,
            event_slot: &event_slot,
        };
        let le = dispatch(
            clock,
            &lc,
            &slots,
            &mut stats,
            &mut actions,
            stop,
            progress,
            &heartbeat,
            std::mem::take(&mut out.stalls),
        );
        out.stalls = le.stalls;
        out.margin_ns = le.margin_ns;
        out.breathers += le.breathers;
        out.breathers_partnered += le.breathers_partnered;
        out.woke_late += le.woke_late;
        out.spun_through += le.spun_through;
        k0 = k1;
    }
    actions.finish_stamps();
    let stamp_offset = actions
        .pending
        .as_ref()
        .map(|p| (p.offset, crate::txstamp::realtime_offset()));
    let moves = std::mem::take(&mut actions.moves);
    let timing = actions.timing;
    let (stalls, stalls_dropped) = out.stalls.into_stalls();
    Replayed {
        moves,
        stamp_offset,
        stopped: timing.sent < total,
        timing,
        margin_ns: out.margin_ns,
        woke_late: out.woke_late,
        spun_through: out.spun_through,
        breathers: out.breathers,
        breathers_partnered: out.breathers_partnered,
        stalls,
        stalls_dropped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::{ScheduleConfig, Timing as T};
    use punctual_time::ManualClock;

    /// Records the clock at every send.
    struct Logged {
        clock: ManualClock,
        sent: Vec<(u64, Vec<u8>)>,
        /// The instant each send was meant for, as the sender was told.
        meant: Vec<u64>,
        fail_every: Option<u64>,
        /// The send (by its index) whose call takes this long (ns).
        stall: Option<(usize, u64)>,
        /// Whether it primes ([`Sender::prime`]), and the clock at each prime (each takes 6 us).
        primes: bool,
        primed: std::sync::Mutex<Vec<u64>>,
        /// A stop of the CPU (`width` ns every `period` from `phase`, absolute): a send whose
        /// successor (`spacing` later) falls in one holds the clock to its end.
        stops: Option<Stops>,
    }

    #[derive(Clone, Copy)]
    struct Stops {
        period: u64,
        phase: u64,
        width: u64,
        spacing: u64,
    }

    impl Sender for Logged {
        fn send(&mut self, bytes: &[u8], at: u64) -> std::io::Result<()> {
            self.sent.push((self.clock.now(), bytes.to_vec()));
            if let Some((_, ns)) = self.stall.filter(|s| s.0 + 1 == self.sent.len()) {
                self.clock.advance(ns);
            }
            self.meant.push(at);
            if let Some(st) = self.stops {
                let next = at + st.spacing;
                let into = (next + st.period - st.phase % st.period) % st.period;
                if into < st.width {
                    let end = next - into + st.width;
                    let now = self.clock.peek();
                    self.clock.advance(end.saturating_sub(now));
                }
            }
            if self
                .fail_every
                .is_some_and(|n| (self.sent.len() as u64).is_multiple_of(n))
            {
                return Err(std::io::Error::from_raw_os_error(libc::ENOBUFS));
            }
            Ok(())
        }
        fn describe(&self) -> String {
            "log".into()
        }
        fn primes(&self) -> bool {
            self.primes
        }
        fn prime(&self, _: &[u8]) {
            self.primed.lock().unwrap().push(self.clock.now());
            self.clock.advance(6_000);
        }
    }

    fn store(n: u64, gap: u64) -> PacketStore {
        let mut s = PacketStore::new();
        for i in 0..n {
            s.push(1_000_000 + i * gap, &i.to_le_bytes());
        }
        s
    }

    fn run(
        s: &PacketStore,
        cfg: ScheduleConfig,
        fail_every: Option<u64>,
    ) -> (Schedule, Logged, Replayed) {
        run_lead(s, cfg, fail_every, 0)
    }

    fn run_lead(
        s: &PacketStore,
        cfg: ScheduleConfig,
        fail_every: Option<u64>,
        lead: u64,
    ) -> (Schedule, Logged, Replayed) {
        let o = Opts {
            fail_every,
            lead,
            ..Opts::default()
        };
        run_with(s, cfg, o)
    }

    /// How a test replay runs: `explain` its bound, `stall` a send that stalls, `primes`
    /// whether the sender primes its sends, `stops` the CPU's, `avoid` as `--avoid-interference`.
    #[derive(Default)]
    struct Opts<'a> {
        fail_every: Option<u64>,
        lead: u64,
        explain: Option<u64>,
        stall: Option<(usize, u64)>,
        primes: bool,
        stops: Option<Stops>,
        avoid: Option<&'a PhaseCosts>,
    }

    /// A replay on a manual clock, from 1 ms.
    fn run_with(s: &PacketStore, cfg: ScheduleConfig, o: Opts) -> (Schedule, Logged, Replayed) {
        let clock = ManualClock::new(0, 10);
        let sched = Schedule::new(&cfg, s.timestamps()).unwrap();
        let mut log = Logged {
            clock: clock.clone(),
            sent: vec![],
            meant: vec![],
            fail_every: o.fail_every,
            stall: o.stall,
            primes: o.primes,
            primed: Default::default(),
            stops: o.stops,
        };
        let settings = LoopSettings {
            start: 1_000_000,
            margin: MarginPolicy::Auto,
            shielded: false,
            breather_every: None,
            partner: None,
            steal: None,
            txtime_lead: o.lead,
            explain_bound: o.explain,
            avoid: o.avoid,
        };
        let progress = [SlotProgress::default()];
        let r = replay(
            &clock,
            s,
            &sched,
            &mut log,
            &settings,
            &AtomicBool::new(false),
            &progress,
        );
        (sched, log, r)
    }

    /// Every send goes at its anchored instant, across event chunks and loops, in order.
    #[test]
    fn every_packet_is_sent_in_order_at_its_instant_on_an_injected_clock() {
        let s = store(10_000, 1_000);
        let cfg = ScheduleConfig {
            timing: T::Interval(50_000),
            loops: 3,
            limit: Some(25_000),
        };
        let (sched, log, r) = run(&s, cfg, None);
        assert_eq!(log.sent.len(), 25_000);
        assert_eq!(r.timing.sent, 25_000);
        assert!(!r.stopped);
        for (k, (at, bytes)) in log.sent.iter().enumerate() {
            let target = 1_000_000 + sched.at(k as u64, s.timestamps());
            assert_eq!(target, 1_000_000 + k as u64 * 50_000);
            // The manual clock advances 10 ns a read: the send follows the instant by a few reads.
            assert!(
                *at >= target && *at - target < 100,
                "send {k}: {at} vs {target}"
            );
            assert_eq!(bytes, &((k % 10_000) as u64).to_le_bytes());
        }
        // The loop sends a few reads late, always the same few: no drift, every gap within 1 %.
        assert!(
            r.timing.drift().unwrap().abs() < 1e-9,
            "{:?}",
            r.timing.drift()
        );
        assert_eq!(r.timing.share_within_1pct(), Some(1.0));
        assert!(r.timing.lateness.max().unwrap() < 100);
    }

    /// Each send is primed once, 10-20 us before its instant, and still goes at its instant; a
    /// sender that does not prime is never asked to.
    #[test]
    fn a_priming_sender_is_primed_once_before_each_send_which_stays_on_time() {
        let s = store(100, 1_000);
        let cfg = ScheduleConfig {
            timing: T::Interval(500_000),
            loops: 1,
            limit: Some(100),
        };
        let o = Opts {
            explain: Some(5_000),
            primes: true,
            ..Opts::default()
        };
        let (sched, log, r) = run_with(&s, cfg, o);
        let primed = log.primed.lock().unwrap().clone();
        assert_eq!((log.sent.len(), primed.len()), (100, 100));
        for (k, ((at, _), p)) in log.sent.iter().zip(&primed).enumerate() {
            let target = 1_000_000 + sched.at(k as u64, s.timestamps());
            assert!(
                *p + PRIME_LEAD_NS >= target && *p + PRIME_LEAD_NS / 2 <= target,
                "prime {k} at {p}, send due {target}"
            );
            assert!(
                *at >= target && *at - target < 100,
                "send {k}: {at} vs {target}"
            );
        }
        // The 6 us prime calls are logged as the loop's own short work (over the 5 us bound),
        // nothing else is.
        assert_eq!(r.stalls.len(), 100, "{:?}", &r.stalls[..3]);
        for (st, p) in r.stalls.iter().zip(&primed) {
            assert!(
                st.from <= *p && *p - st.from < 100,
                "{st:?} vs prime at {p}"
            );
            assert!(st.to - st.from >= 6_000, "{st:?}");
        }
        let (_, log, _) = run_with(&s, cfg, Opts::default());
        assert!(log.primed.lock().unwrap().is_empty());
    }

    /// A UDP sender's prime builds the datagram and holds it: the receiver gets nothing until the
    /// send, which pushes exactly that datagram (a second prime before it adds nothing). A send
    /// without a prime goes whole. Each datagram takes one stamp key, primed or not.
    #[test]
    fn a_udp_prime_holds_the_datagram_until_its_send() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_millis(200)))
            .unwrap();
        let mut tx = UdpSender::new(rx.local_addr().unwrap()).unwrap();
        tx.enable_stamps().unwrap();
        assert!(tx.primes());
        let mut buf = [0u8; 16];
        tx.prime(b"one");
        tx.prime(b"one");
        assert!(rx.recv(&mut buf).is_err(), "the prime sent its datagram");
        tx.send(b"one", 0).unwrap();
        assert_eq!(rx.recv(&mut buf).unwrap(), 3);
        assert_eq!(&buf[..3], b"one");
        tx.send(b"two!", 0).unwrap();
        assert_eq!(rx.recv(&mut buf).unwrap(), 4);
        assert_eq!(&buf[..4], b"two!");
        tx.prime(b"three");
        tx.send(b"three", 0).unwrap();
        assert_eq!(rx.recv(&mut buf).unwrap(), 5);
        assert_eq!(&buf[..5], b"three");
        assert!(rx.recv(&mut buf).is_err(), "a fourth datagram arrived");
        let mut keys = Vec::new();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while keys.len() < 3 && std::time::Instant::now() < until {
            tx.drain(&mut |m| {
                if let ErrMsg::Sent { key, .. } = m {
                    keys.push(key)
                }
            });
        }
        assert_eq!(keys, [0, 1, 2]);
        assert_eq!(tx.stamp_key(), Some(3));
    }

    /// Issue 26: with `--explain` one stall log runs across the loop's chunks of events: a send
    /// call that took 50 us in the second chunk is logged where it began, and nothing else is.
    #[test]
    fn a_send_that_stalls_is_logged_across_the_loops_chunks() {
        let s = store(1_000, 1_000);
        let cfg = ScheduleConfig {
            timing: T::Interval(50_000),
            loops: 20,
            limit: Some(EVENT_CHUNK as u64 + 1_000),
        };
        let k = EVENT_CHUNK + 500;
        let o = Opts {
            explain: Some(5_000),
            stall: Some((k, 50_000)),
            ..Opts::default()
        };
        let (_, log, r) = run_with(&s, cfg, o);
        assert_eq!(r.stalls.len(), 1, "{:?}", r.stalls);
        let st = r.stalls[0];
        assert_eq!(st.kind, punctual_explain::StallKind::Busy);
        assert!(st.to - st.from >= 50_000, "{st:?}");
        assert!(
            st.from <= log.sent[k].0 && log.sent[k].0 - st.from < 1_000,
            "{st:?} began before send {k} at {}",
            log.sent[k].0
        );
        // Without --explain nothing is kept.
        let o = Opts {
            stall: Some((k, 50_000)),
            ..Opts::default()
        };
        let (_, _, r) = run_with(&s, cfg, o);
        assert!(r.stalls.is_empty());
    }

    #[test]
    fn with_txtime_each_packet_is_handed_over_a_lead_early_carrying_its_instant() {
        let s = store(1_000, 1_000);
        let cfg = ScheduleConfig {
            timing: T::Interval(50_000),
            loops: 1,
            limit: None,
        };
        let lead = 200_000;
        let (sched, log, r) = run_lead(&s, cfg, None, lead);
        assert_eq!(log.sent.len(), 1_000);
        for (k, ((at, _), meant)) in log.sent.iter().zip(&log.meant).enumerate() {
            let target = 1_000_000 + sched.at(k as u64, s.timestamps());
            // The kernel is told the instant itself; the hand-over comes `lead` before it.
            assert_eq!(*meant, target, "send {k}");
            assert!(
                *at + lead >= target && *at + lead - target < 100,
                "send {k}: handed over at {at}, instant {target}"
            );
        }
        assert_eq!(r.timing.sent, 1_000);
    }

    #[test]
    fn a_late_start_shows_as_lateness_and_a_growing_error_as_drift() {
        let mut t = Timing::new();
        // The error grows by 1 ns per 1,000 ns of run: drift 0.001.
        for k in 0..1_000u64 {
            let intended = k * 1_000;
            t.add(
                intended,
                5_000 + intended,
                5_000 + intended + k,
                1_000.0,
                BeforeSend::default(),
            );
        }
        assert!((t.drift().unwrap() - 0.001).abs() < 1e-9, "{:?}", t.drift());
        // Each gap is 1 ns long of 1,000: 0.1 %, within 1 %.
        assert_eq!(t.share_within_1pct(), Some(1.0));
        assert_eq!(t.lateness.max(), Some(999));
    }

    #[test]
    fn gaps_off_by_more_than_one_percent_are_not_within() {
        let mut t = Timing::new();
        let actual = [0u64, 1_000, 2_020, 3_000, 4_005];
        for (k, a) in actual.iter().enumerate() {
            let k = k as u64;
            t.add(k * 1_000, k * 1_000, *a, 1_000.0, BeforeSend::default());
        }
        // Gap errors: 0, 20, 20, 5 -> two of four within 1 % (10 ns), all within 7 %.
        assert_eq!(t.gaps, 4);
        assert_eq!(t.share_within_1pct(), Some(0.5));
        assert_eq!(t.share_within_7pct(), Some(1.0));
    }

    /// Issue 26: a gap made late before the send call (the spin, the loop's wake-up) is explained
    /// over the loop's window up to the call, with the spin's last read as the evidence of a
    /// stopped virtual CPU; one made late in the send path, over the whole send to its stamp.
    #[test]
    fn a_late_gap_keeps_the_spins_evidence_when_the_lateness_came_before_the_send() {
        let mut t = Timing::new();
        t.late = LateLog::new(10, 16);
        let on_time = |at: u64| BeforeSend {
            at,
            last_read: Some(at - 1),
        };
        t.add(0, 1_000, 1_002, 1_000.0, on_time(1_001));
        // 40 ns late, 38 of them before the call: the spin read at 990 then 1,038.
        let spun = BeforeSend {
            at: 2_038,
            last_read: Some(1_990),
        };
        t.add(1_000, 2_000, 2_040, 1_000.0, spun);
        // 80 ns late (a gap 40 ns long), all in the send path: the call on time.
        t.add(2_000, 3_000, 3_080, 1_000.0, on_time(3_001));
        let r = t.late.records();
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!(
            (r[0].target, r[0].actual, r[0].last_read),
            (2_000, 2_038, Some(1_990))
        );
        // The send path's record keeps the spin's last read as well, for a stop split between
        // the spin and the call.
        assert_eq!(
            (r[1].target, r[1].actual, r[1].last_read),
            (3_000, 3_080, Some(3_000))
        );
        // The send path's record keeps its call, judged only once the run's usual time is in.
        assert_eq!(r[0].own_work, None);
        assert_eq!(
            r[1].own_work,
            Some(OwnWork {
                kind: WorkKind::Send,
                at: 3_001,
                usual: u64::MAX
            })
        );
        let p99 = t.lateness.percentile(99_000);
        let (r, dropped) = t.late_records();
        assert_eq!((r.len(), dropped), (2, 0));
        assert_eq!(r[1].own_work.map(|c| c.usual), Some(p99));
        assert!(t.late.records().is_empty(), "the log was taken");
    }

    /// Issue 26: a send call's usual time is that of the run's stamped calls alone, not of the
    /// lateness, which also holds the spin and the wake-up before the call: 100 sends whose calls
    /// each take 1 us to their stamps, 99 of them called 4 us after their instants. One call held
    /// 8 us is then 7 us over its usual time, where against the lateness's 99th percentile (5 us)
    /// it would be under the half of its lateness that makes a held call the host's.
    #[test]
    fn a_send_calls_usual_time_is_the_calls_own_not_the_lateness() {
        let mut t = Timing::new();
        t.late = LateLog::new(2_000, 16);
        let settle = |t: &mut Timing, k: u64, before: u64, stamp: Option<u64>| {
            let w = Waiting {
                key: k as u32,
                seq: k,
                target: 1_000_000 + k * 500_000,
                shift: 0,
                before: 1_000_000 + k * 500_000 + before,
                last_read: None,
            };
            let stamp = stamp.map(|d| w.before + d);
            t.settle(Settled { w, stamp }, 1_000_000, 500_000.0);
        };
        for k in 0..100 {
            settle(&mut t, k, if k == 50 { 0 } else { 4_000 }, Some(1_000));
        }
        // Sent unstamped: timed at the call, which says nothing of the call's own time.
        settle(&mut t, 100, 4_000, None);
        // Held 8 us in the call, called on time: 8 us late, the gap before it 4 us off the rest.
        settle(&mut t, 101, 0, Some(8_000));
        assert_eq!(t.call.count(), 101);
        assert!(t.lateness.percentile(99_000) >= 5_000);
        let (r, _) = t.late_records();
        let held = r
            .iter()
            .find(|r| r.target == 1_000_000 + 101 * 500_000)
            .expect("the held call's gap is late");
        let w = held.own_work.expect("judged on its call");
        assert_eq!(w.at, 1_000_000 + 101 * 500_000);
        assert_eq!(w.usual, t.call.percentile(99_000));
        assert!((1_000..1_100).contains(&w.usual), "{w:?}");
    }

    #[test]
    fn send_errors_are_counted_and_the_first_is_kept() {
        let s = store(100, 1_000);
        let cfg = ScheduleConfig {
            timing: T::Pps(10_000),
            loops: 1,
            limit: None,
        };
        let (_, log, r) = run(&s, cfg, Some(10));
        assert_eq!(log.sent.len(), 100);
        assert_eq!(r.timing.errors, 10);
        assert!(r
            .timing
            .first_error
            .as_deref()
            .unwrap()
            .starts_with("send 9:"));
    }

    #[test]
    fn a_stop_request_ends_the_replay_early_and_says_so() {
        let s = store(100, 1_000);
        let clock = ManualClock::new(0, 10);
        let sched = Schedule::new(&ScheduleConfig::default(), s.timestamps()).unwrap();
        let mut log = Logged {
            clock: clock.clone(),
            sent: vec![],
            meant: vec![],
            fail_every: None,
            stall: None,
            primes: false,
            primed: Default::default(),
            stops: None,
        };
        let settings = LoopSettings {
            start: 0,
            margin: MarginPolicy::Auto,
            shielded: false,
            breather_every: None,
            partner: None,
            steal: None,
            txtime_lead: 0,
            explain_bound: None,
            avoid: None,
        };
        let progress = [SlotProgress::default()];
        let r = replay(
            &clock,
            &s,
            &sched,
            &mut log,
            &settings,
            &AtomicBool::new(true),
            &progress,
        );
        assert!(r.stopped);
        assert_eq!(r.timing.sent, 0);
    }

    /// `--avoid-interference`: a 60 us stop every 10 ms sits on one send in twenty of a 500 us
    /// stream. The sends move once, by a part of the spacing, when eight late ones have lined
    /// up; after it none is late, and the move costs its one gap. Without the option they stay
    /// and one send in twenty stays late.
    #[test]
    fn sends_whose_late_ones_line_up_move_once_and_are_on_time_after() {
        let s = store(1_000, 1_000);
        let cfg = ScheduleConfig {
            timing: T::Interval(500_000),
            loops: 1,
            limit: Some(1_000),
        };
        // Send 3 (and every 20th after it) is due at 2.5 ms + k * 10 ms: the stop begins 20 us
        // before it.
        let stops = Stops {
            period: 10_000_000,
            phase: 2_480_000,
            width: 60_000,
            spacing: 500_000,
        };
        let late = |log: &Logged, sched: &Schedule, shift: &dyn Fn(usize) -> u64| -> Vec<usize> {
            (0..log.sent.len())
                .filter(|&k| {
                    let target = 1_000_000 + sched.at(k as u64, s.timestamps()) + shift(k);
                    log.sent[k].0 > target + rephase::LATE_NS
                })
                .collect()
        };
        let quiet = punctual_plan::admission::Interference::new(0, 1_000_000, [])
            .phase_costs(500_000, punctual_plan::admission::AVOID_GUARD);
        let o = Opts {
            stops: Some(stops),
            avoid: Some(&quiet),
            explain: Some(5_000),
            ..Opts::default()
        };
        let (sched, log, mut r) = run_with(&s, cfg, o);
        assert_eq!(log.sent.len(), 1_000);
        assert_eq!(r.moves.len(), 1, "{:?}", r.moves);
        let m = r.moves[0];
        assert_eq!(m.every, 20);
        assert!(m.shift_ns > 0 && m.shift_ns < 500_000, "{m:?}");
        let shift = |k: usize| if k as u64 >= m.from { m.shift_ns } else { 0 };
        let lates = late(&log, &sched, &shift);
        assert_eq!(lates.len(), 8, "{lates:?}");
        assert!(lates.iter().all(|&k| k % 20 == 3 && (k as u64) < m.from));
        // Each late send makes two gaps late. The move comes right after the eighth (its
        // stamp is the clock before the call here, known at once), so its gap is that send's
        // second, longer by the move less the 40 us it was late: counted against the schedule.
        assert_eq!(r.timing.gaps - r.timing.gaps_within_1pct, 8 * 2);
        let moved_gap = r.timing.gap_error.max().unwrap();
        let less = m.shift_ns - moved_gap;
        assert!(
            (39_000..41_000).contains(&less),
            "{moved_gap} for a move of {}",
            m.shift_ns
        );
        // --explain: the moved gap is the loop's own doing (held from its schedule's instant).
        let (records, _) = r.timing.late_records();
        assert_eq!(records.len(), 16);
        let held: Vec<_> = records.iter().filter(|l| l.behind).collect();
        assert_eq!(held.len(), 1, "{records:?}");
        let scheduled = 1_000_000 + sched.at(m.from, s.timestamps());
        assert_eq!(held[0].target, scheduled);
        assert!(held[0].actual >= scheduled + m.shift_ns);
        // Without the option: no move, and every twentieth send late to the end.
        let o = Opts {
            stops: Some(stops),
            ..Opts::default()
        };
        let (sched, log, r) = run_with(&s, cfg, o);
        assert!(r.moves.is_empty());
        assert_eq!(late(&log, &sched, &|_| 0).len(), 50);
    }
}
