#!/usr/bin/env bash
# Issue 16 item 4: where do kurt-periodic's (c) releases go late under disk load? 30 wake clients
# (`punctual __periodic --mode wake`, each a 10 ms periodic process) released by a `punctual run` on
# the last CPU with an io load, once as (c) (clients anywhere) and once as (d) (shield = true, the
# clients pinned to the dispatcher's CPU), each traced with `punctual trace record`; then the
# per-CPU interrupt and wake-up tables of `punctual trace analyze`.
# Usage: scripts/kurt-disk-trace.sh [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
dur=${1:-5s}
out=${OUT:-target/bench}
mkdir -p "$out"
exe=$PWD/target/release/punctual
cpu=${CPU:-$(tr ',' '\n' < /sys/devices/system/cpu/online | tail -1 | sed 's/.*-//')}
all=$(cat /sys/devices/system/cpu/online)
plan() { # $1 name, $2 shield (true|false), $3 taskset prefix for the clients
  {
    printf '[plan]\nname = "%s"\ncpus = "%s"\nshield = %s\n' "$1" "$cpu" "$2"
    for i in $(seq 0 29); do
      local argv="\"$exe\", \"__periodic\", \"--mode\", \"wake\", \"--period-ns\", \"10000000\", \"--channel\", \"kt-$$-$1-$i\""
      if [ -n "$3" ]; then argv="\"taskset\", \"-c\", \"$3\", $argv"; fi
      printf '[[action]]\nname = "c%d"\nkind = "wake"\nchannel = "kt-%s-%s-%d"\nspawn = [%s]\n' "$i" "$$" "$1" "$i" "$argv"
      printf '[[task]]\nname = "p%d"\nperiod = "10ms"\noffset = "auto"\nuse = "c%d"\n' "$i" "$i"
    done
  } > "$out/$1.toml"
}
plan disk-c false ""
plan disk-d true "$cpu"
# Per-CPU counts of the disk's interrupt and the block softirq around a run (before, after).
counts() {
  awk '/virtio_blk|nvme|ahci|ata_piix/ { for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) d[i-2] += $i }
       END { for (c in d) printf "disk-irq cpu%d %d\n", c, d[c] }' /proc/interrupts
  awk '$1 == "BLOCK:" { for (i = 2; i <= NF; i++) printf "BLOCK cpu%d %d\n", i-2, $i }' /proc/softirqs
}
for row in disk-c disk-d; do
  counts > "$out/$row.before"
  taskset -c "$all" "$exe" trace record -o "$out/$row.ptf" --events sched,irq -- \
    "$exe" run "$out/$row.toml" -D "$dur" --load io:1 --no-store --json "$out/$row.json" \
    > "$out/$row.table" 2> "$out/$row.err" || { cat "$out/$row.err"; exit 1; }
  counts > "$out/$row.after"
  echo "== $row: punctual run"
  echo "   on the dispatcher's CPU $cpu and the others, during the run (delta):"
  join <(sed 's/ /_/' "$out/$row.before" | sort) <(sed 's/ /_/' "$out/$row.after" | sort) |
    awk '{ printf "     %-16s %8d\n", $1, $3 - $2 }' 
  grep -E "^p0 |^task|dispatcher CPU|steal" "$out/$row.table" "$out/$row.err" || true
  python3 - "$out/$row.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
n = late = missed = 0
for s in d["series"]:
    if s.get("kind") != "lateness" or "(dispatcher)" in s["name"]:
        continue
    n += s["count"]; missed += s.get("missed_periods", 0)
    late += s["count"] * (1 - s["within"]["10us"])
print(f"   all 30 clients: {n} releases, {100*(1-late/max(n,1)):.2f} % within 10 us, {missed} missed")
PY
  echo "== $row: trace"
  "$exe" trace analyze "$out/$row.ptf" --no-store --top 8 > "$out/$row.analysis" 2>&1 || true
  sed -n '1,200p' "$out/$row.analysis" | grep -iE "irq|softirq|cpu $cpu|wake" | head -40
done
