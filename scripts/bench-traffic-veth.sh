#!/usr/bin/env bash
# ARTS's check on this machine (issue 14): N UDP packets (default 10,000) at a fixed spacing (default
# 500us) sent by `punctual traffic replay` over a veth pair between two network namespaces this script
# makes (and removes on exit), received by `punctual traffic record` in the other namespace with kernel
# timestamps; prints the sender's report and the receiver's inter-arrival errors (needs root, tcpdump).
# Usage: [SHIELD=1] [EXTRA="--spin-margin 100us"] scripts/bench-traffic-veth.sh [PUNCTUAL] [N] [SPACING_NS] [CPU]
# (SHIELD=1: --shield; EXTRA: more arguments for `traffic replay`; FRAMES=1: send the whole frames on
# the veth with `-i` instead of the payloads with `--udp-to`; SENDER=plain: instead of punctual, the
# plain spinning C sender in scripts/plain-udp-sender.c, built here with cc, on CPU CPU; with
# PLAIN_STAMPS=1 it turns on transmit stamps and reads them back, and with PLAIN_SENDTO=1 it sends
# on an unconnected socket, as punctual does)
set -euo pipefail
P=${1:-target/release/punctual}
N=${2:-10000}
SPACING=${3:-500000}
CPU=${4:-1}
P=$(realpath "$P")
D=$(mktemp -d)
A=ptb$$a; B=ptb$$b
cleanup() { ip netns del "$A" 2>/dev/null || true; ip netns del "$B" 2>/dev/null || true; rm -rf "$D"; }
trap cleanup EXIT
ip netns add "$A"; ip netns add "$B"
ip link add "va$$" netns "$A" type veth peer name "vb$$" netns "$B"
ip -n "$A" addr add 10.213.0.1/24 dev "va$$"; ip -n "$A" link set "va$$" up
ip -n "$B" addr add 10.213.0.2/24 dev "vb$$"; ip -n "$B" link set "vb$$" up
MAC=$(ip -n "$B" -o link show "vb$$" | grep -o 'link/ether [0-9a-f:]*' | cut -d' ' -f2)
# A static neighbour: the first packet does not wait for ARP.
ip -n "$A" neigh replace 10.213.0.2 lladdr "$MAC" dev "va$$"
python3 - "$D/udp.pcap" "$N" "$MAC" <<'PY'
import struct, sys
path, n, mac = sys.argv[1], int(sys.argv[2]), bytes.fromhex(sys.argv[3].replace(':', ''))
with open(path, 'wb') as out:
    out.write(struct.pack('<IHHiIII', 0xa1b23c4d, 2, 4, 0, 0, 65535, 1))
    for i in range(n):
        payload = struct.pack('<Q', i) + b'x' * 56
        udp = struct.pack('!HHHH', 40000, 9000, 8 + len(payload), 0) + payload
        ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0,
                         bytes([10, 213, 0, 1]), bytes([10, 213, 0, 2]))
        fr = mac + b'\x02' + b'\0' * 5 + b'\x08\x00' + ip + udp
        ts = 1_700_000_000_000_000_000 + i * 1_000
        out.write(struct.pack('<IIII', ts // 10**9, ts % 10**9, len(fr), len(fr)) + fr)
PY
SECS=$(( N * SPACING / 1000000000 + 3 ))
ip netns exec "$B" "$P" traffic record -i "vb$$" -o "$D/rx.pcapng" -D "${SECS}s" --no-store >"$D/rec.txt" 2>&1 &
REC=$!
sleep 1
if [ "${SENDER:-}" = plain ]; then
  cc -O2 -o "$D/plain" "$(dirname "$0")/plain-udp-sender.c"
  # Spinning the whole time at SCHED_FIFO needs the CPU to itself (RT throttling would stop it for
  # 50 ms a second): it always runs in real-time mode on CPU, through `punctual shield`.
  ip netns exec "$A" "$P" shield --cpus "$CPU" -- taskset -c "$CPU" "$D/plain" 10.213.0.2 9000 "$N" "$SPACING" ${PLAIN_STAMPS:+stamps} ${PLAIN_SENDTO:+sendto}
else
  if [ -n "${FRAMES:-}" ]; then TO=(-i "va$$"); else TO=(--udp-to 10.213.0.2:9000); fi
  ip netns exec "$A" "$P" traffic replay "$D/udp.pcap" "${TO[@]}" --interval "${SPACING}ns" \
    -a "$CPU" ${SHIELD:+--shield} ${EXTRA:-} --no-store
fi
wait "$REC"
cat "$D/rec.txt"
python3 - "$D/rx.pcapng" "$SPACING" <<'PY'
import subprocess, sys, statistics
f, spacing = sys.argv[1], float(sys.argv[2])
out = subprocess.run(["tcpdump", "-n", "-tt", "--time-stamp-precision", "nano", "-r", f, "udp port 9000"],
                     capture_output=True, text=True).stdout
ts = [int(l.split()[0].replace('.', '')) for l in out.splitlines() if l and l[0].isdigit()]
err = [b - a - spacing for a, b in zip(ts, ts[1:])]
n = len(err)
a = sorted(abs(e) for e in err)
w1 = sum(x <= 0.01 * spacing for x in a) / n
w7 = sum(x <= 0.07 * spacing for x in a) / n
span, want = ts[-1] - ts[0], (len(ts) - 1) * spacing
print(f"receiver: {len(ts)} datagrams; inter-arrival - spacing: sd {statistics.pstdev(err)/1000:.2f} us, "
      f"p50 |e| {a[n//2]/1000:.2f} us, p99 |e| {a[int(n*0.99)]/1000:.1f} us, max {a[-1]/1000:.1f} us; "
      f"within 1 %: {w1*100:.2f} %, within 7 %: {w7*100:.2f} %; span vs intended: {(span-want)/want*100:+.4f} %")
PY
