//! pcap (micro- and nanosecond) and pcapng files into a [`PacketStore`], parsed with `pcap-file`
//! in chunks read from the file, so the offset where a damaged file stops is known to the byte.

use crate::store::PacketStore;
use crate::TrafficError;
use etherparse::{SlicedPacket, TransportSlice};
use pcap_file::pcap::PcapParser;
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::{Block, PcapNgParser};
use pcap_file::{DataLink, PcapError, TsResolution};
use std::io::Read;
use std::path::Path;

/// How much more of the file is read when a record does not fit in what was read.
const CHUNK: usize = 1 << 20;

/// The file's format as found from its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Classic pcap; `nanos`: nanosecond timestamps (magic a1b23c4d).
    Pcap {
        nanos: bool,
    },
    PcapNg,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Pcap { nanos: false } => "pcap (us)",
            Format::Pcap { nanos: true } => "pcap (ns)",
            Format::PcapNg => "pcapng",
        }
    }
}

/// Where reading a damaged file stopped: the packets before it were read whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stopped {
    /// 0-based index of the packet that could not be read (= packets read).
    pub packet: u64,
    /// Byte offset in the file of the record that could not be read.
    pub offset: u64,
    pub why: String,
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "reading stopped at packet {} (byte offset {}): {}",
            self.packet + 1,
            self.offset,
            self.why
        )
    }
}

/// A capture file read into memory.
#[derive(Debug)]
pub struct Capture {
    pub format: Format,
    /// The link type of every packet (one per file: files mixing link types are refused).
    pub link: DataLink,
    pub packets: PacketStore,
    /// `Some` when the file is truncated or corrupt after the packets in `packets`.
    pub stopped: Option<Stopped>,
    /// pcapng blocks that carry packets without a usable timestamp (simple packet blocks): they
    /// take the previous packet's instant.
    pub untimed: u64,
    /// Packets the `keep` function of [`read_capture_keeping`] left out.
    pub left_out: u64,
}

/// What of each packet to keep (its UDP payload, say), given the file's link type; `None`: none.
pub type Keep = fn(DataLink, &[u8]) -> Option<&[u8]>;

/// Where read packets go: the store, through `keep` when given.
struct Sink {
    packets: PacketStore,
    keep: Option<Keep>,
    left_out: u64,
}

impl Sink {
    /// Packets read so far, kept or not.
    fn read(&self) -> u64 {
        self.packets.len() as u64 + self.left_out
    }

    fn push(&mut self, link: DataLink, ts: u64, data: &[u8]) {
        match self.keep {
            None => self.packets.push(ts, data),
            Some(k) => match k(link, data) {
                Some(d) => self.packets.push(ts, d),
                None => self.left_out += 1,
            },
        }
    }
}

/// The file, read in chunks: `buf[pos..]` is what is read and not yet parsed, `base` the file offset of
/// `buf[0]`.
struct Chunks<R> {
    src: R,
    buf: Vec<u8>,
    pos: usize,
    base: u64,
    eof: bool,
}

impl<R: Read> Chunks<R> {
    fn new(src: R) -> Self {
        Chunks {
            src,
            buf: Vec::with_capacity(CHUNK),
            pos: 0,
            base: 0,
            eof: false,
        }
    }

    fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Reads more; `false` at the end of the file.
    fn fill(&mut self) -> Result<bool, TrafficError> {
        if self.eof {
            return Ok(false);
        }
        self.buf.drain(..self.pos);
        self.base += self.pos as u64;
        self.pos = 0;
        let have = self.buf.len();
        self.buf.resize(have + CHUNK, 0);
        let mut got = 0;
        while got < CHUNK {
            match self.src.read(&mut self.buf[have + got..]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(TrafficError::Usage(format!("reading the capture: {e}"))),
            }
        }
        self.buf.truncate(have + got);
        Ok(got > 0)
    }
}

/// Reads a pcap or pcapng file. A damaged file is not an error: the packets before the damage
/// come back with [`Capture::stopped`] saying where and why reading stopped.
pub fn read_capture(path: &Path) -> Result<Capture, TrafficError> {
    read_capture_keeping(path, None)
}

/// [`read_capture`], storing only what `keep` keeps of each packet: a capture held for its UDP
/// payloads never holds its whole frames.
pub fn read_capture_keeping(path: &Path, keep: Option<Keep>) -> Result<Capture, TrafficError> {
    let file = std::fs::File::open(path)
        .map_err(|e| TrafficError::Usage(format!("{}: {e}", path.display())))?;
    let size = file.metadata().map(|m| m.len() as usize).unwrap_or(0);
    let mut c = Chunks::new(std::io::BufReader::with_capacity(CHUNK, file));
    while c.buf.len() < 4 && c.fill()? {}
    let magic = c.buf.get(..4).ok_or_else(|| {
        TrafficError::Usage(format!(
            "{}: not a capture file (fewer than 4 bytes)",
            path.display()
        ))
    })?;
    let format = match magic {
        [0x0a, 0x0d, 0x0d, 0x0a] => Format::PcapNg,
        [0xd4, 0xc3, 0xb2, 0xa1] | [0xa1, 0xb2, 0xc3, 0xd4] => Format::Pcap { nanos: false },
        [0x4d, 0x3c, 0xb2, 0xa1] | [0xa1, 0xb2, 0x3c, 0x4d] => Format::Pcap { nanos: true },
        _ => {
            return Err(TrafficError::Usage(format!(
                "{}: not a pcap or pcapng file (magic {:02x?})",
                path.display(),
                magic
            )))
        }
    };
    // The file's size bounds the payload: reserving it spares copies of a growing buffer (and
    // giving back the rest is a remap, not a copy). Kept parts are smaller: they grow as needed.
    let packets = match keep {
        None => PacketStore::with_capacity(size / 80, size),
        Some(_) => PacketStore::new(),
    };
    let mut sink = Sink {
        packets,
        keep,
        left_out: 0,
    };
    let mut cap = match format {
        Format::PcapNg => read_pcapng(&mut c, &mut sink, path)?,
        Format::Pcap { .. } => read_pcap(&mut c, &mut sink, format, path)?,
    };
    cap.packets = sink.packets;
    cap.left_out = sink.left_out;
    cap.packets.shrink_to_fit();
    Ok(cap)
}

fn header_error(path: &Path, e: PcapError) -> TrafficError {
    TrafficError::Usage(format!("{}: unreadable file header: {e}", path.display()))
}

fn read_pcap<R: Read>(
    c: &mut Chunks<R>,
    sink: &mut Sink,
    format: Format,
    path: &Path,
) -> Result<Capture, TrafficError> {
    let parser = loop {
        let parsed = PcapParser::new(&c.buf[c.pos..]).map(|(rem, p)| (rem.len(), p));
        match parsed {
            Ok((left, p)) => {
                c.pos = c.buf.len() - left;
                break p;
            }
            Err(PcapError::IncompleteBuffer) if c.fill()? => {}
            Err(e) => return Err(header_error(path, e)),
        }
    };
    let nanos = parser.header().ts_resolution == TsResolution::NanoSecond;
    let link = parser.header().datalink;
    debug_assert_eq!(format, Format::Pcap { nanos });
    let mut stopped = None;
    loop {
        let avail = &c.buf[c.pos..];
        match parser.next_packet(avail) {
            Ok((rem, p)) => {
                sink.push(link, p.timestamp.as_nanos() as u64, &p.data);
                c.pos = c.buf.len() - rem.len();
            }
            Err(PcapError::IncompleteBuffer) => {
                if c.fill()? {
                    continue;
                }
                if c.pos < c.buf.len() {
                    stopped = Some(Stopped {
                        packet: sink.read(),
                        offset: c.offset(),
                        why: format!(
                            "truncated: the file ends {} bytes into a packet record",
                            c.buf.len() - c.pos
                        ),
                    });
                }
                break;
            }
            Err(e) => {
                stopped = Some(Stopped {
                    packet: sink.read(),
                    offset: c.offset(),
                    why: format!("corrupt packet record: {e}"),
                });
                break;
            }
        }
    }
    Ok(Capture {
        format,
        link,
        packets: PacketStore::new(),
        stopped,
        untimed: 0,
        left_out: 0,
    })
}

/// ns per timestamp unit of an interface, from its if_tsresol option (default: microseconds).
/// pcap-file 2.0 hands enhanced packet timestamps over in the file's raw units, whatever the
/// interface's resolution, so the conversion is done here.
fn ts_unit(idb: &InterfaceDescriptionBlock) -> Result<(u64, u64), String> {
    let resol = idb
        .options
        .iter()
        .find_map(|o| match o {
            InterfaceDescriptionOption::IfTsResol(r) => Some(*r),
            _ => None,
        })
        .unwrap_or(6);
    // (numerator, denominator) of ns per unit.
    if resol & 0x80 == 0 {
        match resol {
            0..=9 => Ok((10u64.pow(9 - resol as u32), 1)),
            10..=19 => Ok((1, 10u64.pow(resol as u32 - 9))),
            _ => Err(format!("if_tsresol 10^-{resol} is finer than supported")),
        }
    } else {
        let p = (resol & 0x7f) as u32;
        if p > 63 {
            return Err(format!("if_tsresol 2^-{p} is not supported"));
        }
        Ok((1_000_000_000, 1u64 << p))
    }
}

fn read_pcapng<R: Read>(
    c: &mut Chunks<R>,
    sink: &mut Sink,
    path: &Path,
) -> Result<Capture, TrafficError> {
    let mut parser = loop {
        let parsed = PcapNgParser::new(&c.buf[c.pos..]).map(|(rem, p)| (rem.len(), p));
        match parsed {
            Ok((left, p)) => {
                c.pos = c.buf.len() - left;
                break p;
            }
            Err(PcapError::IncompleteBuffer) if c.fill()? => {}
            Err(e) => return Err(header_error(path, e)),
        }
    };
    let mut link: Option<DataLink> = None;
    let mut units: Vec<(u64, u64)> = Vec::new();
    let mut untimed = 0;
    let mut stopped = None;
    let stop = |sink: &Sink, offset: u64, why: String| Stopped {
        packet: sink.read(),
        offset,
        why,
    };
    loop {
        let avail = &c.buf[c.pos..];
        let offset = c.offset();
        match parser.next_block(avail) {
            Ok((rem, block)) => {
                let used = avail.len() - rem.len();
                match block {
                    Block::InterfaceDescription(idb) => {
                        if link.is_some_and(|l| l != idb.linktype) {
                            return Err(TrafficError::Usage(format!(
                                "{}: interfaces of different link types ({:?} and {:?}) in one file are not supported",
                                path.display(),
                                link.unwrap(),
                                idb.linktype
                            )));
                        }
                        link = Some(idb.linktype);
                        match ts_unit(&idb) {
                            Ok(u) => units.push(u),
                            Err(e) => {
                                return Err(TrafficError::Usage(format!("{}: {e}", path.display())))
                            }
                        }
                    }
                    Block::SectionHeader(_) => units.clear(),
                    Block::EnhancedPacket(epb) => {
                        let Some(&(num, den)) = units.get(epb.interface_id as usize) else {
                            stopped = Some(stop(
                                sink,
                                offset,
                                format!(
                                    "packet of interface {} which no block describes",
                                    epb.interface_id
                                ),
                            ));
                            break;
                        };
                        let raw = epb.timestamp.as_nanos();
                        let ns = (raw * num as u128 / den as u128) as u64;
                        sink.push(link.unwrap_or(DataLink::ETHERNET), ns, &epb.data);
                    }
                    Block::SimplePacket(spb) => {
                        untimed += 1;
                        let prev = sink.packets.timestamps().last().copied().unwrap_or(0);
                        sink.push(link.unwrap_or(DataLink::ETHERNET), prev, &spb.data);
                    }
                    _ => {}
                }
                c.pos += used;
            }
            Err(PcapError::IncompleteBuffer) => {
                if c.fill()? {
                    continue;
                }
                if c.pos < c.buf.len() {
                    let left = c.buf.len() - c.pos;
                    stopped = Some(stop(
                        sink,
                        offset,
                        format!("truncated: the file ends {left} bytes into a block"),
                    ));
                }
                break;
            }
            Err(e) => {
                stopped = Some(stop(sink, offset, format!("corrupt block: {e}")));
                break;
            }
        }
    }
    Ok(Capture {
        format: Format::PcapNg,
        link: link.unwrap_or(DataLink::ETHERNET),
        packets: PacketStore::new(),
        stopped,
        untimed,
        left_out: 0,
    })
}
/// A frame of `link` sliced into its headers (etherparse), if it parses.
pub fn sliced(link: DataLink, frame: &[u8]) -> Option<SlicedPacket<'_>> {
    match link {
        DataLink::ETHERNET => SlicedPacket::from_ethernet(frame),
        DataLink::LINUX_SLL => SlicedPacket::from_linux_sll(frame),
        DataLink::RAW | DataLink::IPV4 | DataLink::IPV6 => SlicedPacket::from_ip(frame),
        _ => return None,
    }
    .ok()
}

/// The UDP payload of a frame of `link`, if it is a UDP datagram.
pub fn udp_payload(link: DataLink, frame: &[u8]) -> Option<&[u8]> {
    match sliced(link, frame)?.transport? {
        TransportSlice::Udp(u) => Some(u.payload()),
        _ => None,
    }
}
