//! Real replays over a veth pair between two network namespaces the test creates (and removes on
//! every path): UDP payloads to a socket in the other namespace, and whole frames over AF_PACKET
//! captured there with kernel timestamps. A receiver counts every packet: nothing lost, order kept.

use punctual_dispatch::engine::SlotProgress;
use punctual_time::{clock::read_clock, MarginPolicy, SystemClock};
use punctual_traffic::netns::Pair;
use punctual_traffic::read::read_capture;
use punctual_traffic::record::{Capturer, NsPcapNg, Until};
use punctual_traffic::replay::{replay, LoopSettings, RawSender, UdpSender};
use punctual_traffic::schedule::{Schedule, ScheduleConfig, Timing};
use punctual_traffic::store::PacketStore;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// Root and `ip` are needed; otherwise the test says it was skipped.
fn pair_or_skip(test: &str, tag: &str, net: u8) -> Option<Pair> {
    if !nix::unistd::geteuid().is_root() {
        punctual_testkit::skip(test, "network namespaces need root");
        return None;
    }
    match Pair::new(tag, net) {
        Ok(p) => Some(p),
        Err(e) => {
            punctual_testkit::skip(
                test,
                &format!("cannot make a veth pair between namespaces: {e}"),
            );
            None
        }
    }
}

fn settings(start: u64) -> LoopSettings<'static> {
    LoopSettings {
        start,
        margin: MarginPolicy::Auto,
        shielded: false,
        breather_every: Some(500_000_000),
        partner: None,
        steal: None,
        txtime_lead: 0,
        explain_bound: None,
        avoid: None,
    }
}

const N: u64 = 2_000;

/// 0..N exactly; else where the first difference is.
fn assert_in_order(got: &[u64]) {
    if let Some(i) = (0..N as usize).find(|&i| got.get(i) != Some(&(i as u64))) {
        panic!(
            "{} of {N} received; the first wrong one at {i}: {:?}",
            got.len(),
            got.get(i)
        );
    }
    assert_eq!(got.len() as u64, N, "more than sent");
}

#[test]
fn udp_replay_over_veth_delivers_every_packet_in_order() {
    let Some(pair) = pair_or_skip(
        "udp_replay_over_veth_delivers_every_packet_in_order",
        "u",
        211,
    ) else {
        return;
    };
    let pair = Arc::new(pair);
    let (ready_tx, ready_rx) = mpsc::channel();
    let rx = {
        let pair = pair.clone();
        std::thread::spawn(move || {
            pair.enter(1).unwrap();
            let s = UdpSocket::bind(format!("{}:9000", pair.ip[1])).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            // Room for the whole run: a receiver thread starved by the test's neighbours must not
            // drop what the sender sent (a 64-byte datagram takes about 1 KiB of buffer).
            nix::sys::socket::setsockopt(&s, nix::sys::socket::sockopt::RcvBufForce, &(16 << 20))
                .unwrap();
            ready_tx.send(()).unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 2048];
            while let Ok(n) = s.recv(&mut buf) {
                got.push(u64::from_le_bytes(buf[..8].try_into().unwrap()));
                assert_eq!(n, 64);
                if got.len() as u64 == N + 1 {
                    break;
                }
            }
            got
        })
    };
    ready_rx.recv().unwrap();
    let tx = {
        let pair = pair.clone();
        std::thread::spawn(move || {
            pair.enter(0).unwrap();
            let mut store = PacketStore::new();
            for i in 0..N {
                let mut p = i.to_le_bytes().to_vec();
                p.resize(64, 0xab);
                store.push(i * 1_000, &p);
            }
            let to = format!("{}:9000", pair.ip[1]).parse().unwrap();
            let mut sender = UdpSender::new(to).unwrap();
            use punctual_traffic::replay::Sender;
            sender.enable_stamps().unwrap();
            // The first datagram waits for ARP; it goes before the timed run, marked u64::MAX
            // (its stamp, key 0, is not the replay's: the sender counts it).
            sender.send(&u64::MAX.to_le_bytes().repeat(8), 0).unwrap();
            std::thread::sleep(Duration::from_millis(100));
            let cfg = ScheduleConfig {
                timing: Timing::Interval(100_000),
                loops: 1,
                limit: None,
            };
            let sched = Schedule::new(&cfg, store.timestamps()).unwrap();
            let start = read_clock(libc::CLOCK_MONOTONIC) + 10_000_000;
            let progress = [SlotProgress::default()];
            replay(
                &SystemClock::monotonic(),
                &store,
                &sched,
                &mut sender,
                &settings(start),
                &AtomicBool::new(false),
                &progress,
            )
        })
    };
    let r = tx.join().unwrap();
    let got = rx.join().unwrap();
    assert_eq!(r.timing.sent, N);
    assert_eq!(r.timing.errors, 0, "{:?}", r.timing.first_error);
    assert_eq!(got.first(), Some(&u64::MAX));
    assert_in_order(&got[1..]);
    // Every send timed by the kernel's software transmit stamp (veth stamps in its xmit).
    assert_eq!(r.timing.stamped, N, "stale {}", r.timing.stale_stamps);
    let (before, after) = r.stamp_offset.unwrap();
    assert!((before - after).abs() < 1_000_000, "{before} vs {after}");
    eprintln!(
        "veth udp: {N} at 100 us: p50 {} p99 late {} ns, min {:?} within 1 %: {:?}, drift {:?}",
        r.timing.lateness.percentile(50_000),
        r.timing.lateness.percentile(99_000),
        r.timing.lateness.min(),
        r.timing.share_within_1pct(),
        r.timing.drift()
    );
}

/// Frames of an unassigned EtherType, so the receiving stack ignores them.
fn frame(src: [u8; 6], i: u64) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x88, 0xb5]);
    f.extend_from_slice(&i.to_le_bytes());
    f.resize(60, 0);
    f
}

#[test]
fn frame_replay_over_veth_is_recorded_whole_and_in_order_with_kernel_timestamps() {
    let test = "frame_replay_over_veth_is_recorded_whole_and_in_order_with_kernel_timestamps";
    let Some(pair) = pair_or_skip(test, "f", 212) else {
        return;
    };
    let pair = Arc::new(pair);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rx.pcapng");
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();
    let rx = {
        let (pair, file, stop) = (pair.clone(), file.clone(), stop.clone());
        std::thread::spawn(move || {
            pair.enter(1).unwrap();
            let cap = Capturer::open(&pair.dev[1]).unwrap();
            let mut out = NsPcapNg::new(
                std::fs::File::create(&file).unwrap(),
                cap.link,
                Some(&pair.dev[1]),
            )
            .unwrap();
            ready_tx.send(()).unwrap();
            let until = Until {
                duration: Some(10_000_000_000),
                count: None,
            };
            cap.run(&mut out, until, &stop, &AtomicU64::new(0)).unwrap()
        })
    };
    ready_rx.recv().unwrap();
    let src = [0x02, 0, 0, 0, 0, 0x42];
    let r = {
        let pair = pair.clone();
        std::thread::spawn(move || {
            pair.enter(0).unwrap();
            let mut store = PacketStore::new();
            for i in 0..N {
                store.push(i * 1_000, &frame(src, i));
            }
            let mut sender = RawSender::open(&pair.dev[0], store.max_len(), false).unwrap();
            use punctual_traffic::replay::Sender;
            sender.enable_stamps().unwrap();
            let cfg = ScheduleConfig {
                timing: Timing::Interval(200_000),
                loops: 1,
                limit: None,
            };
            let sched = Schedule::new(&cfg, store.timestamps()).unwrap();
            let start = read_clock(libc::CLOCK_MONOTONIC) + 10_000_000;
            let progress = [SlotProgress::default()];
            replay(
                &SystemClock::monotonic(),
                &store,
                &sched,
                &mut sender,
                &settings(start),
                &AtomicBool::new(false),
                &progress,
            )
        })
        .join()
        .unwrap()
    };
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let rec = rx.join().unwrap();
    assert_eq!(r.timing.sent, N);
    assert_eq!(r.timing.errors, 0, "{:?}", r.timing.first_error);
    assert_eq!(r.timing.stamped, N, "stale {}", r.timing.stale_stamps);
    eprintln!(
        "veth frames: p50 {} p99 {} max {:?} late, within 1 %: {:?}, drift {:?}",
        r.timing.lateness.percentile(50_000),
        r.timing.lateness.percentile(99_000),
        r.timing.lateness.max(),
        r.timing.share_within_1pct(),
        r.timing.drift()
    );
    assert_eq!(rec.kernel_drops, 0);
    let c = read_capture(&file).unwrap();
    assert!(c.stopped.is_none());
    let ours: Vec<usize> = (0..c.packets.len())
        .filter(|&i| c.packets.get(i)[6..12] == src)
        .collect();
    let seqs: Vec<u64> = ours
        .iter()
        .map(|&i| u64::from_le_bytes(c.packets.get(i)[14..22].try_into().unwrap()))
        .collect();
    assert_in_order(&seqs);
    for &i in &ours {
        assert_eq!(
            c.packets.get(i),
            &frame(src, seqs[ours.iter().position(|&j| j == i).unwrap()])[..]
        );
    }
    // Kernel receive timestamps, ns since the epoch: about now, and spread over the replay.
    let ts: Vec<u64> = ours.iter().map(|&i| c.packets.timestamps()[i]).collect();
    let now = read_clock(libc::CLOCK_REALTIME);
    assert!(
        ts[0] > now - 60_000_000_000 && ts[0] < now,
        "{} vs {now}",
        ts[0]
    );
    let span = ts[ts.len() - 1] - ts[0];
    let want = (N - 1) * 200_000;
    assert!(span > want / 2 && span < want * 3, "span {span} for {want}");
    assert_eq!(c.packets.reordered(), 0);
}

/// The namespaces are in the journal while the pair lives (a SIGKILL leaves them to the next run's
/// restore) and gone once it drops.
#[test]
fn namespaces_are_journalled_and_deleted_with_the_pair() {
    let test = "namespaces_are_journalled_and_deleted_with_the_pair";
    let Some(pair) = pair_or_skip(test, "j", 213) else {
        return;
    };
    use punctual_rt::journal::{global, Change};
    let names = pair.ns.clone();
    for n in &names {
        assert!(std::path::Path::new("/run/netns").join(n).exists());
        assert!(global()
            .pending()
            .iter()
            .any(|c| matches!(c, Change::RemoveNetns { name } if name == n)));
    }
    drop(pair);
    for n in &names {
        assert!(
            !std::path::Path::new("/run/netns").join(n).exists(),
            "{n} left"
        );
        assert!(!global()
            .pending()
            .iter()
            .any(|c| matches!(c, Change::RemoveNetns { name } if name == n)));
    }
}

/// `tc` in namespace `ns`.
fn tc(ns: &str, args: &[&str]) {
    let st = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "tc"])
        .args(args)
        .status()
        .expect("running tc");
    assert!(st.success(), "tc {args:?} failed in {ns}");
}

#[test]
fn txtime_reads_the_egress_qdisc_and_falls_back_where_it_ignores_transmit_times() {
    use punctual_traffic::replay::Sender;
    use punctual_traffic::txtime::{self, Decision};
    let test = "txtime_reads_the_egress_qdisc_and_falls_back_where_it_ignores_transmit_times";
    let Some(pair) = pair_or_skip(test, "t", 216) else {
        return;
    };
    let pair = Arc::new(pair);
    let p = pair.clone();
    let (index, before, after, egress, refused) = std::thread::spawn(move || {
        p.enter(0).unwrap();
        let name = std::ffi::CString::new(p.dev[0].clone()).unwrap();
        // SAFETY: `name` is a NUL-terminated string alive across the call, which only reads it.
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        let before = txtime::root_qdisc(index).unwrap();
        tc(
            &p.ns[0],
            &["qdisc", "add", "dev", &p.dev[0], "root", "pfifo"],
        );
        let after = txtime::root_qdisc(index).unwrap();
        let egress = txtime::egress_ifindex(p.ip[1].parse().unwrap()).unwrap();
        let mut sender = UdpSender::new(format!("{}:9000", p.ip[1]).parse().unwrap()).unwrap();
        sender.enable_stamps().unwrap();
        (
            index,
            before,
            after,
            egress,
            sender.enable_txtime().unwrap_err(),
        )
    })
    .join()
    .unwrap();
    assert!(index > 0);
    // A veth starts without a queue; the pfifo the test added is read back as the root qdisc.
    assert_eq!(before.map(|q| q.kind).as_deref(), Some("noqueue"));
    assert_eq!(after.as_ref().map(|q| q.kind.as_str()), Some("pfifo"));
    assert_eq!(egress, index, "the route to the peer leaves by the veth");
    let Decision::Fallback(no) = txtime::decide(&pair.dev[0], after.as_ref()) else {
        panic!("pfifo ignores transmit times");
    };
    assert_eq!(
        no, refused,
        "the sender's refusal is the decision for its egress qdisc"
    );
    assert!(
        refused.why.contains("pfifo") && refused.why.contains(&pair.dev[0]),
        "{refused:?}"
    );
}

#[test]
fn scm_txtime_is_refused_without_so_txtime_and_taken_with_it() {
    use punctual_traffic::txtime;
    use std::os::fd::AsRawFd;
    let test = "scm_txtime_is_refused_without_so_txtime_and_taken_with_it";
    let Some(pair) = pair_or_skip(test, "s", 217) else {
        return;
    };
    let pair = Arc::new(pair);
    let p = pair.clone();
    let (ready_tx, ready_rx) = mpsc::channel();
    let rx = std::thread::spawn(move || {
        p.enter(1).unwrap();
        let s = UdpSocket::bind(format!("{}:9000", p.ip[1])).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        ready_tx.send(()).unwrap();
        let mut buf = [0u8; 64];
        let n = s.recv(&mut buf).unwrap();
        buf[..n].to_vec()
    });
    ready_rx.recv().unwrap();
    let p = pair.clone();
    let (without, with) = std::thread::spawn(move || {
        p.enter(0).unwrap();
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        let to: std::net::SocketAddr = format!("{}:9000", p.ip[1]).parse().unwrap();
        let to = nix::sys::socket::SockaddrStorage::from(to);
        let now = read_clock(libc::CLOCK_MONOTONIC);
        // The kernel knows the control message as SCM_TXTIME: without SO_TXTIME it refuses it.
        let without = txtime::send_at(s.as_raw_fd(), b"early", Some(&to), now);
        txtime::enable(s.as_raw_fd(), libc::CLOCK_MONOTONIC).unwrap();
        // The veth has no qdisc to hold it: it goes at once, transmit time or not.
        let with = txtime::send_at(s.as_raw_fd(), b"txtime", Some(&to), now + 1_000_000);
        (without, with)
    })
    .join()
    .unwrap();
    assert_eq!(
        without.unwrap_err().raw_os_error(),
        Some(libc::EINVAL),
        "SCM_TXTIME on a socket without SO_TXTIME"
    );
    with.unwrap();
    assert_eq!(
        rx.join().unwrap(),
        b"txtime",
        "the datagram sent with its transmit time"
    );
}
