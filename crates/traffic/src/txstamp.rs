//! Kernel transmit timestamps (SO_TIMESTAMPING, software): the instant the driver took each packet,
//! read from the socket's error queue without blocking the send loop, and matched to the send by
//! the kernel's per-socket counter (SOF_TIMESTAMPING_OPT_ID).
//!
//! The stamps are CLOCK_REALTIME; the schedule is CLOCK_MONOTONIC. The two tick at the same
//! (NTP-disciplined) rate and differ only when the realtime clock is stepped, so one offset,
//! sampled before the run (the closest of several bracketed reads), converts every stamp; it is
//! sampled again after the run and a step between the two is reported.

use std::collections::VecDeque;
use std::os::fd::RawFd;

/// `SO_TIMESTAMPING` (the 64-bit time_t value on every Linux architecture punctual builds for).
pub const SO_TIMESTAMPING: libc::c_int = 37;
pub const SCM_TIMESTAMPING: libc::c_int = SO_TIMESTAMPING;
/// `PACKET_TX_TIMESTAMP`: the error-queue message level/type of an AF_PACKET socket.
pub const PACKET_TX_TIMESTAMP: libc::c_int = 16;
/// `SCM_TSTAMP_SND`: the stamp taken when the driver sent the packet.
const SCM_TSTAMP_SND: u32 = 0;
/// `sock_extended_err.ee_origin` of a packet the qdisc dropped for its transmit time
/// (`include/uapi/linux/errqueue.h`; not in the libc crate).
const SO_EE_ORIGIN_TXTIME: u8 = 6;

/// Software transmit stamps, keyed by the send counter, without a copy of the packet.
pub const FLAGS: u32 = libc::SOF_TIMESTAMPING_TX_SOFTWARE
    | libc::SOF_TIMESTAMPING_SOFTWARE
    | libc::SOF_TIMESTAMPING_OPT_ID
    | libc::SOF_TIMESTAMPING_OPT_TSONLY;

/// Room on the error queue (it counts against the receive buffer): thousands of stamps, so a dense
/// replay can leave them for a few hundred sends.
const ERRQUEUE_BYTES: libc::c_int = 8 << 20;

/// Sends whose stamp is awaited, at most: beyond it the oldest take the instant before their send.
pub const PENDING_MAX: usize = 4096;

/// Sets socket option `name` at `level` on `fd` to `v`.
pub(crate) fn setsockopt<T>(fd: RawFd, level: i32, name: i32, v: &T) -> std::io::Result<()> {
    // SAFETY: `v` is a live T of the size passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as u32,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Turns software transmit stamps on for socket `fd` (the counter starts at 0 here).
pub fn enable(fd: RawFd) -> std::io::Result<()> {
    setsockopt(
        fd,
        libc::SOL_SOCKET,
        SO_TIMESTAMPING,
        &(FLAGS as libc::c_int),
    )?;
    // Past rmem_max when privileged; else as much as it allows. Only the queue's depth depends on it.
    if setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &ERRQUEUE_BYTES).is_err() {
        let _ = setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &ERRQUEUE_BYTES);
    }
    Ok(())
}

/// One message of the error queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrMsg {
    /// Send `key` left at `realtime_ns` (CLOCK_REALTIME).
    Sent { key: u32, realtime_ns: u64 },
    /// The queueing discipline dropped a packet whose transmit time it could not meet
    /// (`--txtime`, `SO_EE_ORIGIN_TXTIME`).
    TxTimeDropped,
    /// Anything else (another origin, or a message without a stamp).
    Other,
}

/// Reads the error queue of `fd` until it is empty, without blocking; returns the messages read.
pub fn drain(fd: RawFd, f: &mut dyn FnMut(ErrMsg)) -> usize {
    let mut n = 0;
    loop {
        let mut control = [0u64; 32];
        // SAFETY: a zeroed msghdr with no name and no data, and a control buffer that outlives it.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = std::mem::size_of_val(&control);
        // SAFETY: as above.
        let r = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
        if r < 0 {
            return n;
        }
        n += 1;
        f(parse(&msg));
    }
}

/// The stamp or launch-time report in one error-queue message.
fn parse(msg: &libc::msghdr) -> ErrMsg {
    let (mut ts, mut ee): (Option<u64>, Option<libc::sock_extended_err>) = (None, None);
    // SAFETY: walking the control messages the kernel wrote into `msg`'s buffer.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            let (level, kind) = ((*c).cmsg_level, (*c).cmsg_type);
            let data = libc::CMSG_DATA(c);
            if level == libc::SOL_SOCKET && kind == SCM_TIMESTAMPING {
                // struct scm_timestamping: ts[0] is the software stamp.
                let t = std::ptr::read_unaligned(data as *const libc::timespec);
                ts = Some(t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64);
            } else if (level == libc::SOL_IP && kind == libc::IP_RECVERR)
                || (level == libc::SOL_IPV6 && kind == libc::IPV6_RECVERR)
                || (level == libc::SOL_PACKET && kind == PACKET_TX_TIMESTAMP)
            {
                ee = Some(std::ptr::read_unaligned(
                    data as *const libc::sock_extended_err,
                ));
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    match (ee, ts) {
        (Some(e), Some(t))
            if e.ee_errno == libc::ENOMSG as u32
                && e.ee_origin == libc::SO_EE_ORIGIN_TIMESTAMPING
                && e.ee_info == SCM_TSTAMP_SND
                && t > 0 =>
        {
            ErrMsg::Sent {
                key: e.ee_data,
                realtime_ns: t,
            }
        }
        (Some(e), _) if e.ee_origin == SO_EE_ORIGIN_TXTIME => ErrMsg::TxTimeDropped,
        _ => ErrMsg::Other,
    }
}

/// CLOCK_REALTIME - CLOCK_MONOTONIC (ns): the realtime read bracketed by two monotonic reads,
/// the narrowest bracket of 16 tries.
pub fn realtime_offset() -> i64 {
    use punctual_time::clock::read_clock;
    let mut best = (u64::MAX, 0i64);
    for _ in 0..16 {
        let a = read_clock(libc::CLOCK_MONOTONIC);
        let r = read_clock(libc::CLOCK_REALTIME);
        let b = read_clock(libc::CLOCK_MONOTONIC);
        if b - a < best.0 {
            best = (b - a, r as i64 - (a + (b - a) / 2) as i64);
        }
    }
    best.1
}

/// A send waiting for its stamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waiting {
    pub key: u32,
    /// The send's number.
    pub seq: u64,
    /// Its instant on the schedule's clock (absolute).
    pub target: u64,
    /// How far the sends had moved from their schedule when it went (`--avoid-interference`):
    /// `target - shift` is the schedule's instant.
    pub shift: u64,
    /// The clock read just before its send call.
    pub before: u64,
    /// The dispatch loop's clock read before the one that found the instant passed, when it spun
    /// to it (`--explain`: a stop of the virtual CPU during the spin shows between the two).
    pub last_read: Option<u64>,
}

/// Sends awaiting their stamps, oldest first. A stamp for key k settles every older send: those
/// before it got none (they take `before`).
pub struct Pending {
    q: VecDeque<Waiting>,
    /// CLOCK_REALTIME - CLOCK_MONOTONIC, ns.
    pub offset: i64,
    /// Stamps for no send awaited (before the replay, or after their send took its `before`).
    pub stale: u64,
}

/// How one send is settled: with the kernel's stamp (on the schedule's clock) or without.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settled {
    pub w: Waiting,
    pub stamp: Option<u64>,
}

impl Pending {
    pub fn new(offset: i64) -> Pending {
        Pending {
            q: VecDeque::with_capacity(PENDING_MAX),
            offset,
            stale: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.q.len()
    }

    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    /// Adds a send; when full, the oldest is settled without a stamp (through `out`).
    #[inline(always)]
    pub fn push(&mut self, w: Waiting, out: &mut impl FnMut(Settled)) {
        if self.q.len() == PENDING_MAX {
            let old = self.q.pop_front().expect("full");
            out(Settled {
                w: old,
                stamp: None,
            });
        }
        self.q.push_back(w);
    }

    /// Stamp of send `key` at `realtime_ns`: settles it and every older send.
    pub fn stamp(&mut self, key: u32, realtime_ns: u64, out: &mut impl FnMut(Settled)) {
        let Some(front) = self.q.front() else {
            self.stale += 1;
            return;
        };
        // Keys wrap at 2^32: how far past the oldest awaited send this one is.
        let ahead = key.wrapping_sub(front.key) as usize;
        if ahead >= self.q.len() {
            self.stale += 1;
            return;
        }
        for _ in 0..ahead {
            let w = self.q.pop_front().expect("counted");
            out(Settled { w, stamp: None });
        }
        let w = self.q.pop_front().expect("counted");
        let mono = (realtime_ns as i64 - self.offset).max(0) as u64;
        out(Settled {
            w,
            stamp: Some(mono),
        });
    }

    /// Settles every send still waiting, without a stamp.
    pub fn flush(&mut self, out: &mut impl FnMut(Settled)) {
        while let Some(w) = self.q.pop_front() {
            out(Settled { w, stamp: None });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(key: u32) -> Waiting {
        Waiting {
            key,
            seq: key as u64,
            target: key as u64 * 1_000,
            shift: 0,
            before: key as u64 * 1_000 + 5,
            last_read: None,
        }
    }

    /// Stamps settle their send and every older one; stale stamps are counted; the offset converts
    /// realtime to the schedule's clock; a full queue settles its oldest without a stamp.
    #[test]
    fn stamps_are_matched_to_sends_by_key_in_order() {
        let mut p = Pending::new(1_000_000);
        let mut got = Vec::new();
        let mut out = |s: Settled| got.push((s.w.key, s.stamp));
        for k in 0..5 {
            p.push(w(k), &mut out);
        }
        p.stamp(0, 1_000_020, &mut out);
        p.stamp(1, 1_001_030, &mut out);
        p.stamp(3, 1_003_040, &mut out); // 2 got none
        p.stamp(1, 1_001_030, &mut out); // stale: already settled
        p.stamp(9, 1_009_000, &mut out); // stale: never sent
        p.flush(&mut out);
        assert_eq!(
            got,
            [
                (0, Some(20)),
                (1, Some(1_030)),
                (2, None),
                (3, Some(3_040)),
                (4, None)
            ]
        );
        assert_eq!(p.stale, 2);
        assert!(p.is_empty());
    }

    #[test]
    fn keys_wrap_and_a_full_queue_gives_up_on_its_oldest() {
        let mut p = Pending::new(0);
        let mut got = Vec::new();
        let first = u32::MAX - 1;
        for i in 0..PENDING_MAX as u32 + 2 {
            p.push(w(first.wrapping_add(i)), &mut |s: Settled| {
                got.push((s.w.key, s.stamp.is_some()))
            });
        }
        // The two oldest (MAX-1, MAX) were settled without stamps to make room.
        assert_eq!(got, [(u32::MAX - 1, false), (u32::MAX, false)]);
        // Keys 0 and 1, past the wrap.
        p.stamp(1, 5, &mut |s: Settled| {
            got.push((s.w.key, s.stamp.is_some()))
        });
        assert_eq!(&got[2..], [(0, false), (1, true)]);
    }

    #[test]
    fn the_offset_is_realtime_less_monotonic() {
        use punctual_time::clock::read_clock;
        let off = realtime_offset();
        let direct =
            read_clock(libc::CLOCK_REALTIME) as i64 - read_clock(libc::CLOCK_MONOTONIC) as i64;
        assert!((off - direct).abs() < 1_000_000, "{off} vs {direct}");
    }
}
