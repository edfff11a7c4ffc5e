//! Packets held for replay: one contiguous byte buffer and, per packet, where it starts and when it
//! was captured (16 bytes of index a packet), so millions of packets cost their payload plus 16 bytes
//! each rather than an allocation each.

/// Every packet of a capture, in capture order.
#[derive(Clone, Debug, Default)]
pub struct PacketStore {
    data: Vec<u8>,
    /// Where packet i starts in `data`; it ends where packet i + 1 starts (or at `data.len()`).
    starts: Vec<u64>,
    /// Capture instant of packet i, ns since the epoch, never decreasing (see [`PacketStore::push`]).
    ts: Vec<u64>,
    /// Packets whose capture instant was earlier than the previous packet's (clamped to it).
    reordered: u64,
}

impl PacketStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Room for `packets` packets and `bytes` bytes of payload, so loading does not copy the buffer
    /// as it grows.
    pub fn with_capacity(packets: usize, bytes: usize) -> Self {
        PacketStore {
            data: Vec::with_capacity(bytes),
            starts: Vec::with_capacity(packets),
            ts: Vec::with_capacity(packets),
            reordered: 0,
        }
    }

    /// Appends a packet. A capture instant earlier than the previous packet's (captures merged
    /// from several interfaces, a clock stepped back) is clamped to it and counted, so the replay
    /// schedule is never asked to go back in time.
    pub fn push(&mut self, ts_ns: u64, bytes: &[u8]) {
        let ts_ns = match self.ts.last() {
            Some(&prev) if ts_ns < prev => {
                self.reordered += 1;
                prev
            }
            _ => ts_ns,
        };
        self.starts.push(self.data.len() as u64);
        self.ts.push(ts_ns);
        self.data.extend_from_slice(bytes);
    }

    pub fn len(&self) -> usize {
        self.starts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// The bytes of packet `i`.
    #[inline(always)]
    pub fn get(&self, i: usize) -> &[u8] {
        let start = self.starts[i] as usize;
        let end = self
            .starts
            .get(i + 1)
            .map_or(self.data.len(), |&e| e as usize);
        &self.data[start..end]
    }

    /// Capture instants (ns since the epoch), never decreasing.
    pub fn timestamps(&self) -> &[u64] {
        &self.ts
    }

    pub fn reordered(&self) -> u64 {
        self.reordered
    }

    /// Bytes of payload held.
    pub fn payload_bytes(&self) -> usize {
        self.data.len()
    }

    /// The largest packet.
    pub fn max_len(&self) -> usize {
        (0..self.len())
            .map(|i| self.get(i).len())
            .max()
            .unwrap_or(0)
    }

    /// Heap bytes the store holds (capacities, not lengths).
    pub fn heap_bytes(&self) -> usize {
        self.data.capacity() + self.starts.capacity() * 8 + self.ts.capacity() * 8
    }

    /// Gives back the room reserved and not used.
    pub fn shrink_to_fit(&mut self) {
        self.data.shrink_to_fit();
        self.starts.shrink_to_fit();
        self.ts.shrink_to_fit();
    }

    /// A store of `f(packet)` for every packet where `f` gives bytes, with the capture instants
    /// kept; returns it and how many packets `f` left out.
    pub fn filter_map<'s>(
        &'s self,
        mut f: impl FnMut(&'s [u8]) -> Option<&'s [u8]>,
    ) -> (Self, u64) {
        let mut out = PacketStore::with_capacity(self.len(), self.data.len());
        let mut left_out = 0;
        for i in 0..self.len() {
            match f(self.get(i)) {
                Some(b) => {
                    out.starts.push(out.data.len() as u64);
                    out.ts.push(self.ts[i]);
                    out.data.extend_from_slice(b);
                }
                None => left_out += 1,
            }
        }
        out.reordered = self.reordered;
        out.shrink_to_fit();
        (out, left_out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_come_back_as_pushed_with_their_instants() {
        let mut s = PacketStore::new();
        s.push(10, b"abc");
        s.push(20, b"");
        s.push(30, b"defgh");
        assert_eq!(s.len(), 3);
        assert_eq!(s.get(0), b"abc");
        assert_eq!(s.get(1), b"");
        assert_eq!(s.get(2), b"defgh");
        assert_eq!(s.timestamps(), &[10, 20, 30]);
        assert_eq!(s.max_len(), 5);
    }

    #[test]
    fn an_instant_before_the_previous_packet_is_clamped_and_counted() {
        let mut s = PacketStore::new();
        s.push(100, b"a");
        s.push(50, b"b");
        s.push(120, b"c");
        assert_eq!(s.timestamps(), &[100, 100, 120]);
        assert_eq!(s.reordered(), 1);
    }

    #[test]
    fn filter_map_keeps_the_instants_of_the_packets_it_keeps() {
        let mut s = PacketStore::new();
        s.push(1, b"xx1");
        s.push(2, b"y");
        s.push(3, b"xx3");
        let (t, left) = s.filter_map(|p| p.strip_prefix(b"xx"));
        assert_eq!(left, 1);
        assert_eq!(t.len(), 2);
        assert_eq!((t.get(0), t.get(1)), (&b"1"[..], &b"3"[..]));
        assert_eq!(t.timestamps(), &[1, 3]);
    }

    /// Issue 14's memory target: 3,000,000 packets of 64 bytes within 64 MiB plus their payload.
    #[test]
    fn three_million_small_packets_cost_sixteen_bytes_each_beyond_their_payload() {
        const N: usize = 3_000_000;
        let mut s = PacketStore::new();
        let pkt = [0x5au8; 64];
        for i in 0..N {
            s.push(i as u64 * 500_000, &pkt);
        }
        s.shrink_to_fit();
        let overhead = s.heap_bytes() - s.payload_bytes();
        let per_packet = overhead as f64 / N as f64;
        eprintln!(
            "store: {N} packets of 64 bytes: {} bytes held, {per_packet:.1} bytes a packet beyond the payload",
            s.heap_bytes()
        );
        assert!(per_packet <= 16.5, "{per_packet} bytes a packet");
        assert!(overhead <= 64 << 20);
        assert_eq!(s.get(N - 1), &pkt[..]);
    }
}
