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

# Rates are per CPU-second (user + system time of the process), so other work sharing the machine
# does not lower them; the wall time is shown beside.
echo "## 1. events per CPU-second, one core (taskset -c $CPU), 20000 Hz, 2-tick quanta, 600 s simulated"
printf '%-16s %12s %9s %9s %14s\n' workload events "cpu s" "wall s" "events/s"
for w in cont:8 blk:8 pct8:8,cpu:2 xine; do
    /usr/bin/time -f "%U %S %e" -o "$TMP/t" taskset -c "$CPU" "$P" simulate --hz 20000 -q 2ticks -w "$w" -D 600s --json "$TMP/r.json" >/dev/null
    e=$(events "$TMP/r.json"); read -r u s wall < "$TMP/t"; c=$(python3 -c "print(round($u+$s,2))")
    printf '%-16s %12s %9s %9s %14.0f\n' "$w" "$e" "$c" "$wall" "$(python3 -c "print($e/max($c,0.01))")"
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
cpu=0
for w in cont:8 blk:8 pct8:8 xine typist,cpu:2; do
    /usr/bin/time -f "%U %S" -o "$TMP/t" taskset -c "$CPU" "$P" simulate --hz "$HZ" -q 6ticks -w "$w" -D 60s --json "$TMP/r.json" >/dev/null
    total=$(( total + $(events "$TMP/r.json") ))
    read -r u s < "$TMP/t"; cpu=$(python3 -c "print($cpu+$u+$s)")
done
end=$(date +%s.%N)
python3 -c "d=$end-$start; print(f'45 runs, {$total} events in {d:.2f} s wall, {$cpu:.2f} CPU-seconds ({$total/max($cpu,0.01):.0f} events per CPU-second)')"
