#!/usr/bin/env bash
# The cost of each load and its effect on `punctual latency`: one instance of each kind pinned to
# the measuring CPU (the worst place for it), beside a 1 ms SCHED_FIFO 99 wake-up loop on that CPU.
# Cost: the load's work per second and the CPU it took; effect: the loop's p99 and maximum against
# the same loop with no load.
#   CPU=1 DUR=10 scripts/load-costs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
command -v gcc >/dev/null || need+=(gcc)
command -v python3 >/dev/null || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then apt-get update -qq && apt-get install -y -qq "${need[@]}"; fi
CPU=${CPU:-$(($(nproc) - 1))}
DUR=${DUR:-10}
cargo build --release -q
P=target/release/punctual
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for kind in none cpu sort io find build hackbench mem; do
  load=()
  [ "$kind" = none ] || load=(--load "$kind:1@$CPU")
  "$P" latency -t 1 -a "$CPU" -i 1ms -D "${DUR}s" "${load[@]}" --json "$out/$kind.json" >/dev/null 2>&1
done
python3 - "$out" "$CPU" "$DUR" <<'PY'
import json, sys
out, cpu, dur = sys.argv[1], sys.argv[2], sys.argv[3]
units = {"cpu": "loop iter/s", "sort": "numbers/s", "io": "MiB/s", "find": "entries/s", "build": "files/s",
         "hackbench": "messages/s", "mem": "pages/s"}
print(f"One load instance on CPU {cpu} beside punctual latency (1 ms, fifo 99) on CPU {cpu}, {dur} s each")
print(f"{'load':10} {'work':>22} {'load CPU':>9} {'p50 us':>8} {'p99 us':>8} {'p99.9 us':>9} {'max us':>8}")
for kind in ["none", "cpu", "sort", "io", "find", "build", "hackbench", "mem"]:
    d = json.load(open(f"{out}/{kind}.json"))
    s = d["series"][0]
    work, cpu_use = "", ""
    reps = d["settings"].get("load_reports", [])
    if reps:
        r = reps[0]
        rate = r["ops"] * 1e9 / r["elapsed_ns"]
        work = f"{rate:,.0f} {units[kind]}"
        if r.get("cpu_ns"):
            cpu_use = f"{100 * r['cpu_ns'] / r['elapsed_ns']:.0f} %"
    p = s["percentiles"]
    print(f"{kind:10} {work:>22} {cpu_use:>9} {p['50'] / 1e3:>8.1f} {p['99'] / 1e3:>8.1f} {p['99.9'] / 1e3:>9.1f} {s['max'] / 1e3:>8.1f}")
print("load CPU: the instance's own CPU time (with its children) over its run; above 100 % it used other CPUs too.")
PY
