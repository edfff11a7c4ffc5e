#!/usr/bin/env bash
# Simulator performance (docs/benchmarks.md, issue 6):
#   1. simulated events per second on one core, for four workloads at 20,000 Hz;
#   2. memory against simulated duration (60 s and 600 s of the same workload: the same peak RSS);
#   3. a sweep of 9 HZ values x 5 workloads x 60 simulated seconds, timed end to end.
# Self-contained: builds the release binary, needs only bash, python3, GNU time and taskset.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v /usr/bin/time >/dev/null || apt-get install -y time >/dev/null
command -v taskset >/dev/null || apt-get install -y util-linux >/dev/null
cargo build --release -p punctual >/dev/null 2>&1
P=target/release/punctual
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
CPU=$(( $(nproc) - 1 ))

events() { python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['events'])" "$1"; }

echo "## 1. events per second, one core (taskset -c $CPU), 20000 Hz, 2-tick quanta, 600 s simulated"
printf '%-16s %12s %9s %14s\n' workload events seconds "events/s"
for w in cont:8 blk:8 pct8:8,cpu:2 xine; do
    /usr/bin/time -f "%e" -o "$TMP/t" taskset -c "$CPU" "$P" simulate --hz 20000 -q 2ticks -w "$w" -D 600s --json "$TMP/r.json" >/dev/null
    e=$(events "$TMP/r.json"); s=$(cat "$TMP/t")
    printf '%-16s %12s %9s %14.0f\n' "$w" "$e" "$s" "$(python3 -c "print($e/$s)")"
done

echo
echo "## 2. peak memory against simulated duration (cont:8,blk:2 at 20000 Hz)"
printf '%-10s %12s %12s\n' duration events "max RSS KB"
for d in 60s 600s 3000s; do
    /usr/bin/time -f "%M" -o "$TMP/m" "$P" simulate --hz 20000 -q 2ticks -w cont:8,blk:2 -D "$d" --json "$TMP/r.json" >/dev/null
    printf '%-10s %12s %12s\n' "$d" "$(events "$TMP/r.json")" "$(cat "$TMP/m")"
done

echo
echo "## 3. sweep: 9 HZ values x 5 workloads x 60 simulated seconds (one core, -j 1)"
HZ=100,250,300,500,1000,2000,5000,10000,20000
start=$(date +%s.%N)
total=0
for w in cont:8 blk:8 pct8:8 xine typist,cpu:2; do
    taskset -c "$CPU" "$P" simulate --hz "$HZ" -q 6ticks -w "$w" -D 60s --json "$TMP/r.json" >/dev/null
    total=$(( total + $(events "$TMP/r.json") ))
done
end=$(date +%s.%N)
python3 -c "d=$end-$start; print(f'45 runs, {$total} events in {d:.2f} s wall ({$total/d:.0f} events/s)')"
