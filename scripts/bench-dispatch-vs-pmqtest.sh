#!/usr/bin/env bash
# `punctual bench dispatch` against pmqtest and ptsematest (rt-tests). rt-tests put sender and
# receiver threads on the same CPU, so this compares on one CPU: an event every 10 ms, SCHED_FIFO,
# same duration, run alternately. pmqtest passes a POSIX message queue message, ptsematest unlocks a
# mutex; punctual wakes a separate process through eventfd or a pipe. Then punctual alone across CPUs
# (the raiser on CPU 0), which rt-tests cannot do.
#   CPU=1 DUR=30 ROUNDS=2 scripts/bench-dispatch-vs-pmqtest.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v pmqtest >/dev/null || { apt-get update -qq && apt-get install -y -qq rt-tests; }
CPU=${CPU:-$(($(nproc) - 1))}
DUR=${DUR:-30}
ROUNDS=${ROUNDS:-2}
cargo build --release -q
P=target/release/punctual
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
row() { printf '%-34s %8s %8s %8s\n' "$@"; }
echo "CPU $CPU, an event every 10 ms for $DUR s, latency in us"
row tool min avg max
for r in $(seq "$ROUNDS"); do
  pmqtest -t 1 -a "$CPU" -p 99 -i 10000 -D "$DUR" -q --json="$out/pmq.json" >/dev/null
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["thread"]["0"]["receiver"]; print("%-34s %8s %8.1f %8s" % ("pmqtest (message queue)", d["min"], d["avg"], d["max"]))' "$out/pmq.json"
  ptsematest -t 1 -a "$CPU" -p 99 -i 10000 -D "$DUR" -q --json="$out/pts.json" >/dev/null
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["thread"]["0"]["receiver"]; print("%-34s %8s %8.1f %8s" % ("ptsematest (mutex)", d["min"], d["avg"], d["max"]))' "$out/pts.json"
  for ev in eventfd pipe; do
    "$P" bench dispatch --event "$ev" --raiser-cpu "$CPU" -a "$CPU" -p 99 -i 10ms -D "${DUR}s" --json "$out/p.json" >/dev/null
    python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["series"][0]; print("%-34s %8.1f %8.1f %8.1f" % ("punctual dispatch ("+sys.argv[2]+")", s["min"]/1e3, s["mean"]/1e3, s["max"]/1e3))' "$out/p.json" "$ev"
  done
done
echo "Across CPUs (raised on CPU 0, waiter on CPU $CPU), punctual only:"
for ev in eventfd pipe signal; do
  "$P" bench dispatch --event "$ev" --raiser-cpu 0 -a "$CPU" -p 99 -i 10ms -D "${DUR}s" --json "$out/p.json" >/dev/null
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["series"][0]; print("%-34s %8.1f %8.1f %8.1f" % ("punctual dispatch ("+sys.argv[2]+")", s["min"]/1e3, s["mean"]/1e3, s["max"]/1e3))' "$out/p.json" "$ev"
done
