#!/usr/bin/env bash
# Issue 16: a release every 10 us for DURATION (default 10s) on a shielded CPU, side by side:
#   punctual run (the dispatcher, spinning through releases closer than the kernel wakes it), and
#   a plain absolute clock_nanosleep loop at the same rate (punctual latency --mode abs -i 10us),
#   both under the same shield, with the steal time of each run.
# Usage: scripts/bench-dense-10us.sh [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
dur=${1:-10s}
out=${OUT:-target/bench}
mkdir -p "$out"
cpu=$(tr ',' '\n' < /sys/devices/system/cpu/online | tail -1 | sed 's/.*-//')
cat > "$out/dense-10us.toml" <<TOML
[plan]
name = "dense-10us"
cpus = "$cpu"
shield = true

[[task]]
name = "fast"
period = "10us"
action = { kind = "mark" }
TOML
# The shell running this may be pinned to one CPU: let both runs reach every CPU.
all=$(cat /sys/devices/system/cpu/online)
taskset -c "$all" ./target/release/punctual run "$out/dense-10us.toml" -D "$dur" --no-store \
  --json "$out/dense-10us-run.json" > /dev/null 2> "$out/dense-10us-run.err"
taskset -c "$all" ./target/release/punctual shield --cpus "$cpu" -- \
  ./target/release/punctual latency --mode abs -i 10us --force -a "$cpu" -D "$dur" --no-store \
  --json "$out/dense-10us-abs.json" > /dev/null 2> "$out/dense-10us-abs.err"
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
def steal(d):
    st = d.get("settings", {}).get("steal_ns")
    if st is None:
        return "steal: not reported by this kernel"
    return "steal: " + ", ".join(f"CPU {c} {int(ns)/1e6:.1f} ms" for c, ns in sorted(st.items()))
print(f"{'method':<34} {'releases':>9} {'missed':>8} {'p50':>9} {'p99':>9} {'p99.9':>9} {'max':>10} {'<=10us':>8} {'cpu use':>8}")
for name, f in [("punctual run (spin through)", "run"), ("clock_nanosleep abs loop", "abs")]:
    d = json.load(open(f"{out}/dense-10us-{f}.json"))
    s = d["series"][0]
    n = s.get("count", 0)
    missed = s.get("missed_periods", 0)
    use = ""
    if d.get("dispatchers"):
        c = d["dispatchers"][0]
        use = f"{100 * c['cpu_ns'] / max(c['duration_ns'], 1):.1f} %"
    print(f"{name:<34} {n:>9} {missed:>8} {s['median']/1000:>7.2f}us {s['percentiles']['99']/1000:>7.2f}us "
          f"{s['percentiles']['99.9']/1000:>7.2f}us {s['max']/1000:>8.1f}us {100*s['within']['10us']:>7.2f}% {use:>8}")
    print(f"  {steal(d)}")
PY
