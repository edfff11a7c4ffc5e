#!/usr/bin/env bash
# The replay's send prime (docs/benchmarks.md, "Priming the send"), side by side in one script:
#  1. a plain C sender (scripts/send-prime.c), ROUNDS rounds of N sends 500 us apart on CPU 1,
#     each round unprimed, then primed with MSG_PROBE PRIME_US before each send, then primed with
#     a whole loopback send WARM_US before (tried in punctual 2026-12-01, not kept), then with the
#     datagram itself built PRIME_US before (MSG_MORE) and pushed at the instant (UDP_CORK off:
#     punctual's prime since 2026-12-01): the path from the send call to the kernel's transmit
#     stamp (p50 / p90 / p99, the share over its median + 5 us, the gaps between consecutive
#     sends' stamps more than 5 us off);
#  2. with OLD=/path/to/punctual (a build without the prime), `punctual traffic replay` of N
#     packets 500 us apart, shielded on CPU 1 and explained, OLD then this build, ROUNDS rounds:
#     the sends' lateness and the late gaps by cause.
# Each sends to a python receiver on CPU 0 over loopback. Needs root (SCHED_FIFO, the shield), cc,
# and a release build (PUNCTUAL=/path/to/punctual measures that binary instead of building one).
# Usage: [N=20000] [ROUNDS=3] [PRIME_US=20] [WARM_US=30] [SENDTO=1] [OLD=...] scripts/bench-send-prime.sh
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-20000}; ROUNDS=${ROUNDS:-3}; PRIME_US=${PRIME_US:-20}; WARM_US=${WARM_US:-30}
[ -n "${PUNCTUAL:-}" ] || cargo build --release -q -p punctual
NEW=$(realpath "${PUNCTUAL:-target/release/punctual}")
D=$(mktemp -d); trap 'rm -rf "$D"' EXIT
cc -O2 -o "$D/send-prime" scripts/send-prime.c
PORT=42990
receive() {
  taskset -c 0 python3 -c "
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('127.0.0.1', $PORT)); s.settimeout(3)
try:
    while True: s.recv(4096)
except OSError: pass" & RX=$!
  sleep 0.5
}
echo "# $(date -Is) $(uname -r), $(nproc) CPUs, $(git rev-parse --short HEAD); N=$N, probe ${PRIME_US} us, warm ${WARM_US} us"
echo "== 1. plain C sender: send call to kernel stamp${SENDTO:+ (unconnected)}"
for r in $(seq "$ROUNDS"); do
  for prime in 0 "$PRIME_US" "warm $WARM_US" "cork $PRIME_US"; do
    receive
    set -- $prime
    "$D/send-prime" "$PORT" "$N" "${2:-$1}" ${SENDTO:+sendto} ${2:+$1} > "$D/c.txt"
    wait "$RX"
    python3 - "$D/c.txt" "$r" "$prime" <<'PY'
import sys
v = [int(l) for l in open(sys.argv[1]).read().split()[10:]]
p = sorted(v)
q = lambda f: p[int(len(p) * f)] / 1e3
med = p[len(p) // 2]
slow = 100 * sum(x > med + 5000 for x in p) / len(p)
# Each send is called at its instant (spun to), so a gap's error is the change in path.
gaps = sum(abs(b - a) > 5000 for a, b in zip(v, v[1:]))
kind = sys.argv[3].split()[0] if " " in sys.argv[3] else "probe"
what = {"0": "unprimed"}.get(sys.argv[3], f"{kind} {sys.argv[3].split()[-1]} us before")
print(f"   round {sys.argv[2]} {what:>20}: p50 {q(.5):.2f} p90 {q(.9):.2f} p99 {q(.99):.2f} us; over p50 + 5 us {slow:.2f} %; gaps over 5 us {gaps}")
PY
  done
done
[ -n "${OLD:-}" ] || { echo "(OLD not set: no punctual A/B)"; exit 0; }
echo "== 2. punctual traffic replay, $N packets 500 us apart, shielded, explained: $OLD against $NEW"
python3 - "$D/udp.pcap" <<'PY'
import struct, sys
with open(sys.argv[1], 'wb') as out:
    out.write(struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
    for i in range(1000):
        payload = struct.pack('<Q', i) + b'x' * 56
        udp = struct.pack('!HHHH', 40000, 9000, 8 + len(payload), 0) + payload
        ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0, bytes(4), bytes(4))
        fr = b'\0' * 12 + b'\x08\x00' + ip + udp
        out.write(struct.pack('<IIII', 1_700_000_000 + i, 0, len(fr), len(fr)) + fr)
PY
for r in $(seq "$ROUNDS"); do
  for side in old new; do
    if [ "$side" = old ]; then P=$OLD; else P=$NEW; fi
    receive
    "$P" traffic replay "$D/udp.pcap" --udp-to "127.0.0.1:$PORT" --interval 500us --loop $(( N / 1000 + 1 )) \
      --limit "$N" -a 1 --shield --explain --explain-bound 5us --no-store --json "$D/r.json" >/dev/null 2>&1
    wait "$RX"
    python3 - "$D/r.json" "$r" "$side" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
s = {x['name']: x for x in d['series']}
late = s['send lateness']['percentiles']
c = {k: v for k, v in s['gap error'].get('lateness_causes', {}).items() if v}
causes = ", ".join(f"{k} {v}" for k, v in sorted(c.items(), key=lambda x: -x[1])) or "none"
steal = ", ".join(f"CPU {k} {int(v) / 1e6:.0f} ms" for k, v in sorted(d['settings'].get('steal_ns', {}).items()))
# Sends 5-30 us late beyond the median (a slow send path, not a stop), where the hdrhistogram
# package (pip install hdrhistogram) can read the run's histogram.
try:
    from hdrh.histogram import HdrHistogram
    h = HdrHistogram.decode(s['send lateness']['histogram']['data'])
    m = h.get_value_at_percentile(50)
    slow = sum(i.count_at_value_iterated_to for i in h.get_recorded_iterator()
               if m + 5000 < i.value_iterated_to < 30000)
    slow = f"; slow {slow}"
except ImportError:
    slow = ""
print(f"   round {sys.argv[2]} {sys.argv[3]}: late p50 {late['50'] / 1e3:.2f} p90 {late['90'] / 1e3:.2f} p99 {late['99'] / 1e3:.2f} us{slow}; "
      f"gaps over 5 us {sum(c.values())}: {causes}; steal {steal}")
PY
  done
done
