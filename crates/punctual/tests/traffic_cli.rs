//! `punctual traffic replay`: bad input exits 2 or 3 before anything is sent; `--partial` replays
//! the valid part of a truncated file; a replay over loopback delivers every datagram and writes a
//! valid result document.

mod common;

use common::{punctual, valid_doc};
use punctual_traffic::record::write_pcapng;
use punctual_traffic::store::PacketStore;
use punctual_traffic::DataLink;
use std::net::UdpSocket;
use std::path::Path;
use std::time::Duration;

/// An Ethernet/IPv4/UDP frame to 127.0.0.1:9 carrying `payload` (checksums are not checked).
fn udp_frame(payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 12];
    f.extend_from_slice(&[0x08, 0x00]);
    let total = (20 + 8 + payload.len()) as u16;
    f.extend_from_slice(&[
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0,
        0,
        0,
        0,
        64,
        17,
        0,
        0,
    ]);
    f.extend_from_slice(&[127, 0, 0, 1, 127, 0, 0, 1]);
    let ulen = (8 + payload.len()) as u16;
    f.extend_from_slice(&[0x9c, 0x40, 0, 9, (ulen >> 8) as u8, ulen as u8, 0, 0]);
    f.extend_from_slice(payload);
    f
}

/// `n` UDP frames 1 ms apart, payload = the index, as nanosecond pcapng.
fn capture(path: &Path, n: u64) {
    let mut s = PacketStore::new();
    for i in 0..n {
        s.push(
            1_700_000_000_000_000_000 + i * 1_000_000,
            &udp_frame(&i.to_le_bytes()),
        );
    }
    write_pcapng(std::fs::File::create(path).unwrap(), DataLink::ETHERNET, &s).unwrap();
}

fn receiver() -> UdpSocket {
    let r = UdpSocket::bind("127.0.0.1:0").unwrap();
    r.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    r
}

fn drain(r: &UdpSocket) -> Vec<u64> {
    let mut got = Vec::new();
    let mut buf = [0u8; 64];
    while let Ok(n) = r.recv(&mut buf) {
        assert_eq!(n, 8);
        got.push(u64::from_le_bytes(buf[..8].try_into().unwrap()));
    }
    got
}

fn replay(file: &Path, to: &str) -> assert_cmd::Command {
    let mut c = punctual();
    c.args(["traffic", "replay"]).arg(file).args([
        "--udp-to",
        to,
        "--policy",
        "other",
        "--dma-latency",
        "off",
        "--no-store",
    ]);
    c
}

#[test]
fn truncated_capture_without_partial_exits_2_naming_the_offset_and_sends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.pcapng");
    capture(&file, 10);
    let len = std::fs::metadata(&file).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    f.set_len(len - 10).unwrap();
    let r = receiver();
    let to = r.local_addr().unwrap().to_string();
    let out = replay(&file, &to).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("packet 10 (byte offset"), "{err}");
    assert!(err.contains("--partial"), "{err}");
    assert!(drain(&r).is_empty(), "nothing is sent");

    // With --partial the nine whole packets go, in order, and the document says where it stopped.
    let json = dir.path().join("r.json");
    let out = replay(&file, &to)
        .args(["--partial", "--speed", "10", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(drain(&r), (0..9).collect::<Vec<u64>>());
    let doc = valid_doc(&json);
    assert_eq!(doc["traffic"]["sent"], 9);
    assert_eq!(doc["traffic"]["stopped"]["packet"], 9);
    assert_eq!(doc["series"][0]["kind"], "lateness");
}

#[test]
fn replay_over_loopback_loops_and_limits_and_reports_the_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.pcapng");
    capture(&file, 20);
    let r = receiver();
    let to = r.local_addr().unwrap().to_string();
    let json = dir.path().join("r.json");
    let out = replay(&file, &to)
        .args([
            "--interval",
            "1ms",
            "--loop",
            "3",
            "--limit",
            "50",
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want: Vec<u64> = (0..50).map(|k| k % 20).collect();
    assert_eq!(drain(&r), want);
    let doc = valid_doc(&json);
    assert_eq!(doc["traffic"]["sent"], 50);
    assert_eq!(doc["traffic"]["spacing_ns"], 1_000_000.0);
    assert!(doc["traffic"]["gaps_within_1pct"].as_f64().is_some());
    assert!(doc["traffic"]["drift"].as_f64().is_some());
    // Loopback stamps every datagram in its xmit: each send is timed by the kernel's stamp, and
    // the document says so.
    let si = &doc["traffic"]["send_instant"];
    assert_eq!(si["tx_timestamps"], "on", "{si}");
    assert_eq!(si["kernel_stamped"], 50, "{si}");
    assert_eq!(si["before_send_call"], 0, "{si}");
    assert!(doc["series"][0]["measured_at"]
        .as_str()
        .unwrap()
        .contains("transmit timestamp"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("within 1%"), "{stdout}");
}

/// Issue 14: `--txtime` where the egress interface (loopback, `noqueue`) has no queueing
/// discipline that holds packets to their transmit times: the replay says so before sending, falls
/// back to the dispatcher's sends, and records why; every packet still arrives, in order.
#[test]
fn txtime_without_an_etf_or_fq_qdisc_falls_back_and_records_why() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.pcapng");
    capture(&file, 20);
    let r = receiver();
    let to = r.local_addr().unwrap().to_string();
    let json = dir.path().join("r.json");
    let out = replay(&file, &to)
        .args(["--interval", "1ms", "--txtime", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(drain(&r), (0..20).collect::<Vec<u64>>());
    assert!(
        stderr.contains("fallback: txtime") && stderr.contains("the queueing discipline of lo"),
        "{stderr}"
    );
    let doc = valid_doc(&json);
    let tx = &doc["settings"]["txtime"];
    assert_eq!(tx["used"], false, "{tx}");
    assert_eq!(tx["lead_ns"], 1_000_000, "the default lead");
    assert!(tx["why"].as_str().unwrap().contains("noqueue"), "{tx}");
    let fb = doc["settings"]["fallbacks"].as_array().unwrap();
    assert_eq!(
        fb.iter().filter(|f| f["setting"] == "txtime").count(),
        1,
        "{fb:?}"
    );
    // Said once (before the first send), listed once.
    assert_eq!(stderr.matches("fallback: txtime").count(), 1, "{stderr}");
    // Not asked for: nothing recorded.
    let plain = dir.path().join("p.json");
    replay(&file, &to)
        .args(["--interval", "1ms", "--json"])
        .arg(&plain)
        .assert()
        .success();
    assert!(valid_doc(&plain)["settings"]["txtime"].is_null());
    drain(&r);
    // A socket's fallback is not a scheduling one: at SCHED_FIFO the document still says fifo.
    if !common::is_root() {
        punctual_testkit::skip("txtime fallback at SCHED_FIFO", "needs root");
        return;
    }
    let fifo = dir.path().join("f.json");
    punctual()
        .args(["traffic", "replay"])
        .arg(&file)
        .args(["--udp-to", &to, "--interval", "1ms", "--txtime"])
        .args(["--dma-latency", "off", "--no-store", "--json"])
        .arg(&fifo)
        .assert()
        .success();
    let doc = valid_doc(&fifo);
    assert_eq!(doc["settings"]["policy"], "fifo", "{}", doc["settings"]);
    assert_eq!(doc["settings"]["txtime"]["used"], false);
    drain(&r);
}

#[test]
fn zero_and_absurd_rates_exit_2_before_sending() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.pcapng");
    capture(&file, 3);
    let r = receiver();
    let to = r.local_addr().unwrap().to_string();
    for bad in [
        &["--pps", "0"][..],
        &["--pps", "999999999"],
        &["--interval", "0ns"],
        &["--speed", "0"],
        &["--speed", "-2"],
        &["--loop", "0"],
        &["--limit", "0"],
    ] {
        let out = replay(&file, &to).args(bad).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{bad:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(drain(&r).is_empty());
}

#[test]
fn bad_files_and_missing_interfaces_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("x.pcap");
    std::fs::write(&text, "not a capture").unwrap();
    let out = replay(&text, "127.0.0.1:9").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a pcap or pcapng file"));

    let file = dir.path().join("c.pcapng");
    capture(&file, 3);
    let out = punctual()
        .args(["traffic", "replay"])
        .arg(&file)
        .args(["-i", "punctual-nope0", "--no-store"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such interface"));

    // --shield without the CPU to shield.
    let out = replay(&file, "127.0.0.1:9")
        .arg("--shield")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("-a CPU"));

    // Neither a target nor two timings: clap refuses (2).
    let out = punctual()
        .args(["traffic", "replay"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = replay(&file, "127.0.0.1:9")
        .args(["--pps", "10", "--interval", "1ms"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// Issue 14: an interrupted replay exits 130 with the report of what was sent.
#[test]
fn interrupted_replay_exits_130_with_the_report_of_what_was_sent() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.pcapng");
    capture(&file, 10);
    let r = receiver();
    let to = r.local_addr().unwrap().to_string();
    let json = dir.path().join("r.json");
    let child = std::process::Command::new(common::bin_path())
        .env("PUNCTUAL_DATA_DIR", punctual_testkit::data_dir())
        .args(["traffic", "replay"])
        .arg(&file)
        .args([
            "--udp-to",
            &to,
            "--policy",
            "other",
            "--dma-latency",
            "off",
            "--no-store",
        ])
        .args(["--interval", "10ms", "--loop", "100", "--json"])
        .arg(&json)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the first datagrams, then interrupt.
    let mut buf = [0u8; 64];
    for _ in 0..20 {
        if r.recv(&mut buf).is_ok() {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    // SAFETY: plain syscall on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = valid_doc(&json);
    assert_eq!(doc["status"], "interrupted");
    let sent = doc["traffic"]["sent"].as_u64().unwrap();
    assert!(sent > 0 && sent < 1_000, "sent {sent}");
    assert_eq!(doc["series"][0]["count"].as_u64(), Some(sent));
}

#[test]
fn record_on_a_missing_interface_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let out = punctual()
        .args(["traffic", "record", "-i", "punctual-nope0", "-o"])
        .arg(dir.path().join("x.pcapng"))
        .args(["-D", "1s", "--no-store"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such interface"));
    assert!(!dir.path().join("x.pcapng").exists(), "nothing written");
}

/// `record --filter udp port N` keeps that port's datagrams and counts what it left out; a filter
/// it cannot read exits 2 before capturing.
#[test]
fn record_filter_keeps_only_the_named_port() {
    let dir = tempfile::tempdir().unwrap();
    let out = punctual()
        .args([
            "traffic",
            "record",
            "-i",
            "lo",
            "--filter",
            "port http",
            "-o",
        ])
        .arg(dir.path().join("bad.pcapng"))
        .args(["-D", "1s", "--no-store"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("udp, port N or udp port N")
            || String::from_utf8_lossy(&out.stderr).contains("not a port")
    );
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        punctual_testkit::skip(
            "record_filter_keeps_only_the_named_port (capture)",
            "AF_PACKET needs root",
        );
        return;
    }
    let (kept, other) = (receiver(), receiver());
    let port = kept.local_addr().unwrap().port();
    let file = dir.path().join("f.pcapng");
    let json = dir.path().join("f.json");
    let mut rec = std::process::Command::new(env!("CARGO_BIN_EXE_punctual"))
        .args([
            "traffic",
            "record",
            "-i",
            "lo",
            "--filter",
            &format!("udp port {port}"),
            "-o",
        ])
        .arg(&file)
        .args(["-D", "2s", "--no-store", "--json"])
        .arg(&json)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    for i in 0..5u64 {
        s.send_to(&i.to_le_bytes(), kept.local_addr().unwrap())
            .unwrap();
        s.send_to(&i.to_le_bytes(), other.local_addr().unwrap())
            .unwrap();
    }
    assert!(rec.wait().unwrap().success());
    let cap = punctual_traffic::read::read_capture(&file).unwrap();
    let ports: Vec<u16> = (0..cap.packets.len())
        .map(|i| {
            // Ethernet, IPv4 (its header length from IHL), UDP: the destination port.
            let f = cap.packets.get(i);
            assert_eq!((&f[12..14], f[23]), (&[8u8, 0][..], 17), "IPv4 UDP");
            let udp = 14 + (f[14] & 0x0f) as usize * 4;
            u16::from_be_bytes([f[udp + 2], f[udp + 3]])
        })
        .collect();
    assert_eq!(ports, [port; 5]);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(
        doc["traffic"]["filtered_out"].as_u64().unwrap() >= 5,
        "{}",
        doc["traffic"]
    );
}

/// `record --against` naming a file that cannot be read exits 2 before capturing, writing nothing.
#[test]
fn record_against_a_missing_or_damaged_original_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.pcap");
    std::fs::write(&bad, "not a capture").unwrap();
    for orig in [dir.path().join("missing.pcapng"), bad] {
        let out = punctual()
            .args([
                "traffic",
                "record",
                "-i",
                "lo",
                "-D",
                "1s",
                "--no-store",
                "-o",
            ])
            .arg(dir.path().join("x.pcapng"))
            .arg("--against")
            .arg(&orig)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(&*orig.to_string_lossy()), "{err}");
        assert!(!dir.path().join("x.pcapng").exists(), "nothing written");
    }
}

/// Issue 14: `record --against ORIGINAL` on the receiving side of a real replay over a veth pair
/// (namespaces the test makes): every datagram matched to the file's packet by its UDP payload, in
/// order, and every received gap compared with the file's own gap between the same two packets
/// (the file's gaps alternate 1 ms and 3 ms, so a comparison with a mean spacing would be off by
/// a millisecond).
#[test]
fn record_against_the_original_over_veth_compares_every_gap_with_the_files() {
    let test = "record_against_the_original_over_veth_compares_every_gap_with_the_files";
    if !common::is_root() {
        punctual_testkit::skip(test, "network namespaces and AF_PACKET need root");
        return;
    }
    let pair = match punctual_traffic::netns::Pair::new("av", 215) {
        Ok(p) => p,
        Err(e) => {
            punctual_testkit::skip(
                test,
                &format!("cannot make a veth pair between namespaces: {e}"),
            );
            return;
        }
    };
    // A static neighbour: the first datagram does not wait for ARP.
    let mac: Vec<String> = pair
        .mac(1)
        .unwrap()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let ok = std::process::Command::new("ip")
        .args(["-n", &pair.ns[0], "neigh", "replace", &pair.ip[1], "lladdr"])
        .arg(mac.join(":"))
        .args(["dev", &pair.dev[0]])
        .status()
        .unwrap();
    assert!(ok.success());
    let dir = tempfile::tempdir().unwrap();
    let orig = dir.path().join("orig.pcapng");
    let n = 200u64;
    let mut s = PacketStore::new();
    let mut t = 1_700_000_000_000_000_000u64;
    for i in 0..n {
        s.push(t, &udp_frame(&i.to_le_bytes()));
        t += if i % 2 == 0 { 1_000_000 } else { 3_000_000 };
    }
    write_pcapng(
        std::fs::File::create(&orig).unwrap(),
        DataLink::ETHERNET,
        &s,
    )
    .unwrap();
    let (rx, json) = (dir.path().join("rx.pcapng"), dir.path().join("rx.json"));
    let mut rec = std::process::Command::new("ip")
        .args(["netns", "exec", &pair.ns[1]])
        .arg(common::bin_path())
        .args([
            "traffic",
            "record",
            "-i",
            &pair.dev[1],
            "--filter",
            "udp port 9000",
        ])
        .arg("-o")
        .arg(&rx)
        .arg("--against")
        .arg(&orig)
        .args(["-D", "3s", "--no-store", "--json"])
        .arg(&json)
        .env("PUNCTUAL_DATA_DIR", dir.path().join("data"))
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", &pair.ns[0]])
        .arg(common::bin_path())
        .args(["traffic", "replay"])
        .arg(&orig)
        .args(["--udp-to", &format!("{}:9000", pair.ip[1])])
        .args(["--policy", "other", "--dma-latency", "off", "--no-store"])
        .env("PUNCTUAL_DATA_DIR", dir.path().join("data"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(rec.wait().unwrap().success());
    let doc = valid_doc(&json);
    let a = &doc["traffic"]["against"];
    assert_eq!(a["matched_by"], "UDP payload, in order", "{a}");
    assert_eq!(a["file_packets"], n);
    assert_eq!(a["matched"], n, "{a}");
    assert_eq!(
        (a["lost"].as_u64(), a["passes"].as_u64()),
        (Some(0), Some(1)),
        "{a}"
    );
    assert_eq!(a["compared_gaps"], n - 1);
    assert!(a["within_1pct"].as_f64().is_some() && a["drift"].as_f64().is_some());
    let s = &doc["series"];
    assert_eq!(
        (&s[0]["kind"], &s[1]["kind"]),
        (&"interval_deviation".into(), &"lateness".into())
    );
    assert_eq!(s[0]["count"], n - 1);
    assert_eq!(s[0]["unit"], "ns");
    // Each received gap is compared with the file's gap at the same place, not with the mean
    // spacing. Behaviour, not speed (a loaded machine's jitter can reach a millisecond): the
    // median |e| reported is the one computed here from the capture against the file's own gaps.
    let rx_ts = punctual_traffic::read::read_capture(&rx)
        .unwrap()
        .packets
        .timestamps()
        .to_vec();
    assert_eq!(rx_ts.len() as u64, n, "the capture holds every datagram");
    let median = |mut v: Vec<u64>| {
        v.sort_unstable();
        v[(v.len() - 1) / 2]
    };
    let file_gap = |i: usize| if i & 1 == 0 { 1_000_000u64 } else { 3_000_000 };
    let errors = |want: &dyn Fn(usize) -> u64| {
        median(
            rx_ts
                .windows(2)
                .enumerate()
                .map(|(i, w)| (w[1] - w[0]).abs_diff(want(i)))
                .collect(),
        )
    };
    let (own_gaps, mean_gap) = (errors(&file_gap), errors(&|_| 2_000_000));
    let p50 = s[0]["percentiles"]["50"].as_u64().unwrap();
    // The histogram keeps three significant digits.
    assert!(
        p50.abs_diff(own_gaps) <= own_gaps / 100 + 1_000,
        "median |e| {p50} ns reported, {own_gaps} ns against the file's gaps, {mean_gap} ns \
         against their mean: compared with the wrong gaps?"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("sent"), "{stdout}");
}

/// Issue 32, Low: a replay whose sends all failed (here: to the broadcast address without
/// SO_BROADCAST, EACCES every time) exited 0 as if it had replayed. It is exit 3 now, and says so.
#[test]
fn replay_whose_sends_all_failed_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.pcapng");
    capture(&file, 20);
    let out = replay(&file, "255.255.255.255:9").output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(
        text.contains("20 sends failed") && text.contains("every send failed"),
        "{text}"
    );
}
