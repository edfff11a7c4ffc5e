#!/usr/bin/env bash
# rt-app and `punctual run` on one rt-app task file (issue 28): one SCHED_FIFO task on the last CPU,
# PERIODS periods of 10 ms each running 1 ms, taking turns ROUNDS times. rt-app's log gives each
# period's wake-up latency after its timer (wu_lat, us); punctual's result document gives the task's
# lateness (the client's own, ns). Steal time of the CPU and the load average are read around runs.
#
#   scripts/bench-rtapp-side.sh [ROUNDS] [PERIODS]    (default 3 rounds of 1000 periods)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
periods=${2:-1000}
cpu=$(( $(nproc) - 1 ))
punctual=${PUNCTUAL:-target/release/punctual}
[ -x "$punctual" ] || cargo build --release -p punctual
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cat > "$out/side.json" <<EOF
{
  "tasks" : {
    "t0" : {
      "loop" : 1, "policy" : "SCHED_FIFO", "priority" : 50, "cpus" : [$cpu],
      "phases" : {
        "p0" : { "loop" : $periods, "run" : 1000,
                 "timer" : { "ref" : "unique", "period" : 10000 } }
      }
    }
  },
  "global" : {
    "duration" : -1, "calibration" : "CPU$cpu", "default_policy" : "SCHED_OTHER",
    "lock_pages" : true, "logdir" : "$out", "log_basename" : "side"
  }
}
EOF
steal() { awk -v c="cpu$cpu" '$1 == c { print $9 }' /proc/stat; }
echo "# rt-app vs punctual run on one rt-app file: $periods periods of 10 ms, run 1 ms, FIFO 50, CPU $cpu"
for r in $(seq 1 "$rounds"); do
  s0=$(steal); l0=$(cut -d' ' -f1 /proc/loadavg)
  rt-app "$out/side.json" > /dev/null 2>&1
  mv "$out/side-t0-0.log" "$out/rtapp-$r.log"
  s1=$(steal)
  "$punctual" run --no-store --json "$out/punctual-$r.json" "$out/side.json" > /dev/null 2>&1
  s2=$(steal); l2=$(cut -d' ' -f1 /proc/loadavg)
  echo "$r $(( (s1 - s0) * 10 )) $(( (s2 - s1) * 10 )) $l0 $l2" >> "$out/meta"
done
python3 - "$out" <<'PY'
import json, os, sys
d = sys.argv[1]
def rank(v, p):
    v = sorted(v); return v[max(0, -(-len(v) * p // 100) - 1)]
print(f"{'round':>5} {'tool':<9} {'periods':>7} {'p50':>9} {'p99':>9} {'max':>9} {'steal ms':>8} {'load':>11}")
for line in open(os.path.join(d, "meta")):
    r, st_a, st_p, l0, l1 = line.split()
    wu = [int(l.split()[10]) for l in open(os.path.join(d, f"rtapp-{r}.log")) if not l.startswith("#")]
    print(f"{r:>5} {'rt-app':<9} {len(wu):>7} {rank(wu,50):>7}us {rank(wu,99):>7}us {max(wu):>7}us {st_a:>8} {l0:>11}")
    doc = json.load(open(os.path.join(d, f"punctual-{r}.json")))
    s = next(s for s in doc["series"] if s["name"] == "t0")
    n = s["count"] + s.get("missed_periods", 0)
    ns = lambda x: f"{x/1000:.2f}us" if x >= 1000 else f"{x}ns"
    print(f"{r:>5} {'punctual':<9} {n:>7} {ns(s['percentiles']['50']):>9} {ns(s['percentiles']['99']):>9} {ns(s['max']):>9} {st_p:>8} {l1:>11}")
PY
