#!/usr/bin/env bash
# `punctual bench gaps` against oslat (rt-tests): the same CPU, duration and class, run alternately.
# Both spin on one CPU reading the TSC and count the steps between two reads; oslat files each step
# under floor(us) + 1 in 32 buckets, punctual keeps every step above 1 us in an HDR histogram.
# Printed: the longest gap and how many steps exceeded 2, 5, 10, 31 and 100 us, per second.
#   CPU=1 DUR=30 PRIO=1 ROUNDS=2 scripts/bench-gaps-vs-oslat.sh
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
command -v oslat >/dev/null || need+=(rt-tests)
command -v python3 >/dev/null || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then apt-get update -qq && apt-get install -y -qq "${need[@]}"; fi
CPU=${CPU:-$(($(nproc) - 1))}
DUR=${DUR:-30}
PRIO=${PRIO:-1}
ROUNDS=${ROUNDS:-2}
cargo build --release -q
P=target/release/punctual
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq "$ROUNDS"); do
  oslat -c "$CPU" -D "$DUR" -f "$PRIO" -q --json="$out/oslat-$r.json" >/dev/null
  "$P" bench gaps -a "$CPU" -D "${DUR}s" --threshold 1us --policy fifo -p "$PRIO" --json "$out/punctual-$r.json" >/dev/null
done
python3 - "$out" "$ROUNDS" "$CPU" "$DUR" "$PRIO" <<'PY'
import json, sys
out, rounds, cpu, dur, prio = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
levels = [2, 5, 10, 31, 100]
print(f"CPU {cpu}, {dur} s per run, SCHED_FIFO {prio}; gaps per second above each level (us)")
print(f"{'tool':10} {'round':>5} {'max us':>9} " + " ".join(f"{'>'+str(l)+'us':>9}" for l in levels))
for r in range(1, rounds + 1):
    o = json.load(open(f"{out}/oslat-{r}.json"))["thread"]["0"]
    h = {int(k): v for k, v in o["histogram"].items()}
    # oslat's bucket k holds steps of [k-1, k) us; the last one (32) everything from 31 us up.
    above = [sum(v for k, v in h.items() if k > l) / o["duration"] for l in levels[:-1]] + [float("nan")]
    print(f"{'oslat':10} {r:>5} {o['max']:>9} " + " ".join(f"{a:>9.1f}" for a in above))
    p = json.load(open(f"{out}/punctual-{r}.json"))["series"][0]
    secs = p["duration_ns"] / 1e9
    above = [p["above_us"][str(l)] / secs for l in levels]
    print(f"{'punctual':10} {r:>5} {p['max'] / 1000:>9.1f} " + " ".join(f"{a:>9.1f}" for a in above))
    tick = p.get("tick")
    if tick:
        print(f"{'':10} {'':>5} punctual: timer tick {tick['median_ns'] / 1000:.2f} us median, {tick['gaps'] / secs:.0f} ticks/s (HZ {tick['hz']})")
print("oslat's last bucket holds every step above 31 us, so it has no column above 100 us.")
PY
