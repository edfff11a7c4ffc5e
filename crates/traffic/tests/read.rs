//! Capture files in and out: pcap (micro- and nanosecond) and pcapng (micro- and nanosecond
//! interfaces) read back exactly, damaged files stopped at the right packet and byte, and files
//! tcpdump makes from ours (and reads from us) where tcpdump is installed.

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::{DataLink, TsResolution};
use punctual_traffic::read::{read_capture, Format};
use punctual_traffic::record::write_pcapng;
use punctual_traffic::store::PacketStore;
use std::borrow::Cow;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Five frames, 1.000000123 s apart plus a little, of growing length.
fn frames() -> Vec<(u64, Vec<u8>)> {
    (0..5u64)
        .map(|i| {
            let ts = 1_700_000_000_000_000_000 + i * 1_000_000_123 + i * i * 7;
            let mut f = vec![0xffu8; 12];
            f.extend_from_slice(&[0x88, 0xb5]);
            f.extend(std::iter::repeat_n(i as u8, 46 + i as usize * 10));
            (ts, f)
        })
        .collect()
}

fn write_pcap(path: &Path, nanos: bool) {
    let header = PcapHeader {
        ts_resolution: if nanos {
            TsResolution::NanoSecond
        } else {
            TsResolution::MicroSecond
        },
        datalink: DataLink::ETHERNET,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(std::fs::File::create(path).unwrap(), header).unwrap();
    for (ts, f) in frames() {
        w.write_packet(&PcapPacket::new(
            Duration::from_nanos(ts),
            f.len() as u32,
            &f,
        ))
        .unwrap();
    }
}

/// A pcapng file whose interface says nothing of its resolution: microseconds.
fn write_pcapng_us(path: &Path) {
    let mut w = PcapNgWriter::new(std::fs::File::create(path).unwrap()).unwrap();
    w.write_pcapng_block(InterfaceDescriptionBlock {
        linktype: DataLink::ETHERNET,
        snaplen: 65535,
        options: vec![],
    })
    .unwrap();
    for (ts, f) in frames() {
        w.write_pcapng_block(EnhancedPacketBlock {
            interface_id: 0,
            // Raw units of the interface: microseconds.
            timestamp: Duration::from_nanos(ts / 1_000),
            original_len: f.len() as u32,
            data: Cow::Borrowed(&f),
            options: vec![],
        })
        .unwrap();
    }
}

fn write_ours(path: &Path) {
    let mut s = PacketStore::new();
    for (ts, f) in frames() {
        s.push(ts, &f);
    }
    write_pcapng(std::fs::File::create(path).unwrap(), DataLink::ETHERNET, &s).unwrap();
}

fn check(path: &Path, format: Format, unit: u64) {
    let c = read_capture(path).unwrap();
    assert_eq!(c.format, format);
    assert_eq!(c.link, DataLink::ETHERNET);
    assert!(c.stopped.is_none(), "{:?}", c.stopped);
    let want = frames();
    assert_eq!(c.packets.len(), want.len());
    for (i, (ts, f)) in want.iter().enumerate() {
        assert_eq!(c.packets.get(i), &f[..], "packet {i}");
        assert_eq!(c.packets.timestamps()[i], ts / unit * unit, "packet {i}");
    }
}

#[test]
fn pcap_and_pcapng_at_both_resolutions_read_back_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    write_pcap(&p.join("us.pcap"), false);
    write_pcap(&p.join("ns.pcap"), true);
    write_pcapng_us(&p.join("us.pcapng"));
    write_ours(&p.join("ns.pcapng"));
    check(&p.join("us.pcap"), Format::Pcap { nanos: false }, 1_000);
    check(&p.join("ns.pcap"), Format::Pcap { nanos: true }, 1);
    check(&p.join("us.pcapng"), Format::PcapNg, 1_000);
    check(&p.join("ns.pcapng"), Format::PcapNg, 1);
}

/// Issue 14: a truncated file says at which packet and byte offset reading stopped, and the
/// packets before it are whole.
#[test]
fn truncated_capture_says_where_reading_stopped() {
    let dir = tempfile::tempdir().unwrap();
    for (name, format) in [("t.pcap", "pcap"), ("t.pcapng", "pcapng")] {
        let path = dir.path().join(name);
        if format == "pcap" {
            write_pcap(&path, true);
        } else {
            write_ours(&path);
        }
        let bytes = std::fs::read(&path).unwrap();
        // Where packet 4 (index 3) starts: parse the whole file's record boundaries by size.
        let whole = read_capture(&path).unwrap();
        let sizes: Vec<usize> = (0..5).map(|i| whole.packets.get(i).len()).collect();
        let (head, rec) = if format == "pcap" {
            (24, 16)
        } else {
            (
                bytes.len() - sizes.iter().map(|s| 32 + s.div_ceil(4) * 4).sum::<usize>(),
                32,
            )
        };
        let start4: usize = head
            + sizes[..3]
                .iter()
                .map(|s| {
                    rec + if format == "pcap" {
                        *s
                    } else {
                        s.div_ceil(4) * 4
                    }
                })
                .sum::<usize>();
        std::fs::write(&path, &bytes[..start4 + 10]).unwrap();
        let c = read_capture(&path).unwrap();
        let st = c.stopped.expect("a truncated file is noticed");
        assert_eq!(st.packet, 3, "{format}: {st}");
        assert_eq!(st.offset, start4 as u64, "{format}: {st}");
        assert!(st.to_string().contains("packet 4 (byte offset"), "{st}");
        assert_eq!(c.packets.len(), 3);
        assert_eq!(c.packets.get(2), whole.packets.get(2));
    }
}

#[test]
fn corrupt_record_stops_reading_with_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.pcap");
    write_pcap(&path, false);
    let mut bytes = std::fs::read(&path).unwrap();
    // Packet 2's captured length (at 24 + 16 + 60 + 8): far beyond the snap length.
    let at = 24 + 16 + 60 + 8;
    bytes[at..at + 4].copy_from_slice(&0x7fff_0000u32.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let c = read_capture(&path).unwrap();
    let st = c.stopped.expect("corruption is noticed");
    assert_eq!((st.packet, st.offset), (1, 100), "{st}");
    assert_eq!(c.packets.len(), 1);
}

#[test]
fn not_a_capture_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.pcap");
    std::fs::write(&path, b"hello, this is text").unwrap();
    let e = read_capture(&path).unwrap_err();
    assert!(e.to_string().contains("not a pcap or pcapng file"), "{e}");
    assert!(read_capture(&dir.path().join("missing")).is_err());
}

fn tcpdump() -> Option<&'static str> {
    let ok = Command::new("tcpdump")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some("tcpdump")
}

/// tcpdump re-writes our nanosecond pcapng as pcap at both resolutions; we read its files back to
/// the same packets and instants (to the microsecond in the microsecond file).
#[test]
fn files_made_by_tcpdump_read_back_to_the_same_packets() {
    let Some(td) = tcpdump() else {
        punctual_testkit::missing(
            "files_made_by_tcpdump_read_back_to_the_same_packets",
            "tcpdump is not installed (apt-get install -y tcpdump)",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ours = dir.path().join("ours.pcapng");
    write_ours(&ours);
    for (name, precision, format, unit) in [
        ("td-us.pcap", "micro", Format::Pcap { nanos: false }, 1_000),
        ("td-ns.pcap", "nano", Format::Pcap { nanos: true }, 1),
    ] {
        let out = dir.path().join(name);
        let st = Command::new(td)
            .args(["-q", "-r"])
            .arg(&ours)
            .args(["--time-stamp-precision", precision, "-w"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            st.status.success(),
            "tcpdump: {}",
            String::from_utf8_lossy(&st.stderr)
        );
        check(&out, format, unit);
    }
    // And tcpdump reads our nanosecond timestamps as we wrote them.
    let o = Command::new(td)
        .args(["-n", "-tt", "--time-stamp-precision", "nano", "-r"])
        .arg(&ours)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let stamps: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with(char::is_whitespace))
        .filter_map(|l| l.split(' ').next())
        .collect();
    let want: Vec<String> = frames()
        .iter()
        .map(|(ts, _)| format!("{}.{:09}", ts / 1_000_000_000, ts % 1_000_000_000))
        .collect();
    assert_eq!(stamps, want);
}
