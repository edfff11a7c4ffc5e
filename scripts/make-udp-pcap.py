#!/usr/bin/env python3
"""Writes a nanosecond pcap of N UDP datagrams from 127.0.0.1:40000 to 127.0.0.1:PORT, 500 us
apart, each 64 bytes of payload starting with its number (little-endian u64), as whole Ethernet
frames with a valid IPv4 header checksum (so `traffic replay -i lo` delivers them too).
Usage: make-udp-pcap.py PATH N PORT (used by bench-explain.sh and trace-send-path.sh)."""
import struct
import sys


def checksum(b):
    s = sum(struct.unpack('!%dH' % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


path, n, port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path, 'wb') as out:
    out.write(struct.pack('<IHHiIII', 0xa1b23c4d, 2, 4, 0, 0, 65535, 1))
    for i in range(n):
        payload = struct.pack('<Q', i) + b'x' * 56
        udp = struct.pack('!HHHH', 40000, port, 8 + len(payload), 0) + payload
        ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0,
                         bytes([127, 0, 0, 1]), bytes([127, 0, 0, 1]))
        ip = ip[:10] + struct.pack('!H', checksum(ip)) + ip[12:]
        fr = b'\0' * 12 + b'\x08\x00' + ip + udp
        ts = 1_700_000_000_000_000_000 + i * 500_000
        out.write(struct.pack('<IIII', ts // 10**9, ts % 10**9, len(fr), len(fr)) + fr)
