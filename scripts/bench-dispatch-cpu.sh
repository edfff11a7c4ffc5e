#!/usr/bin/env bash
# The dispatcher's CPU cost at 1 kHz against the lateness it buys: one mark task every 1 ms for
# DURATION (default 10s), with the spin margin at 0 (plain absolute sleep), 5us, 20us, 50us, 200us and auto.
# Usage: scripts/bench-dispatch-cpu.sh [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
dur=${1:-10s}
out=${OUT:-target/bench}
mkdir -p "$out"
cpu=$(tr ',' '\n' < /sys/devices/system/cpu/online | tail -1 | sed 's/.*-//')
cat > "$out/1khz.toml" <<TOML
[plan]
name = "1khz"
cpus = "$cpu"

[[task]]
name = "tick"
period = "1ms"
action = { kind = "mark" }
TOML
printf "%-8s %10s %10s %10s %10s %10s %12s\n" margin "cpu use" p50 p99 p99.9 max "<=10us"
for m in 0us 5us 20us 50us 200us auto; do
  ./target/release/punctual run "$out/1khz.toml" -D "$dur" --spin-margin "$m" --json "$out/1khz-$m.json" > /dev/null
  python3 - "$out/1khz-$m.json" "$m" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); s = d["series"][0]; c = d["dispatchers"][0]
use = 100 * c["cpu_ns"] / max(c["duration_ns"], 1)
margin = sys.argv[2] if sys.argv[2] != "auto" else f"auto({c['spin_margin_ns']/1000:.0f}us)"
print(f"{margin:<8} {use:9.2f}% {s['median']/1000:9.2f}us {s['percentiles']['99']/1000:9.2f}us {s['percentiles']['99.9']/1000:9.2f}us {s['max']/1000:9.1f}us {100*s['within']['10us']:11.2f}%")
PY
done
