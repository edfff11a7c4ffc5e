#!/usr/bin/env bash
# Issue 14: the highest send rate punctual's replay holds with p99 send lateness <= 10 us on a
# shielded CPU, and one minute at 500 us. Whole 60-byte frames over AF_PACKET on loopback (nothing
# leaves the machine), `--shield` on the sending CPU; each rate for DURATION (default 2 s).
# Usage: scripts/bench-traffic-rate.sh [DURATION_S] [CPU]      (needs root; release build)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
P=$(realpath target/release/punctual)
DUR=${1:-2}
CPU=${2:-$(tr ',' '\n' < /sys/devices/system/cpu/online | tail -1 | sed 's/.*-//')}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
python3 - "$D/one.pcap" <<'PY'
import struct, sys
with open(sys.argv[1], 'wb') as out:
    out.write(struct.pack('<IHHiIII', 0xa1b23c4d, 2, 4, 0, 0, 65535, 1))
    fr = b'\xff' * 6 + b'\x02\0\0\0\0\x01' + b'\x88\xb5' + b'\0' * 46
    out.write(struct.pack('<IIII', 0, 0, len(fr), len(fr)) + fr)
PY
all=$(cat /sys/devices/system/cpu/online)
run() { # interval_ns count
  taskset -c "$all" "$P" traffic replay "$D/one.pcap" -i lo --interval "$1ns" --loop "$2" --limit "$2" \
    -a "$CPU" --shield --no-store --json "$D/r.json" > /dev/null 2> "$D/err" || { cat "$D/err" >&2; return 1; }
  python3 - "$D/r.json" "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); t = d["traffic"]
late = next(s for s in d["series"] if s["kind"] == "lateness")
pc = late["percentiles"]
print(f'{int(sys.argv[2])/1000:8.1f} us  {t["sent"]:>9}/{t["scheduled"]:<9} p50 {pc["50"]/1000:7.2f} us  '
      f'p99 {pc["99"]/1000:8.2f} us  max {late["max"]/1000:9.1f} us  '
      f'gaps within 1 % {100*(t["gaps_within_1pct"] or 0):6.2f} %  drift {100*(t["drift"] or 0):+.5f} %')
PY
}
echo "spacing     sent/scheduled       send lateness (instant to just before the send call)"
for iv in 100000 50000 20000 10000 5000 2000; do
  run "$iv" $(( DUR * 1000000000 / iv ))
done
echo "one minute at 500 us:"
run 500000 120000
