#!/usr/bin/env bash
# The highest event rate `punctual trace record` captures without loss on this machine: context
# switches generated at rising rates (stress-ng's switch stressor, one pinned to each CPU: a pair on
# one CPU switches without cross-CPU wake-ups, which a VM makes slow), recorded with the sched events
# and the default 4M buffer per CPU, lost events counted by the kernel.
#
# usage: scripts/bench-trace-max-rate.sh [SECONDS] [BUFFER]   (root; installs stress-ng if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-5}
BUF=${2:-4M}
command -v stress-ng >/dev/null || { apt-get update -qq && apt-get install -y -qq stress-ng; }
cargo build --release -q -p punctual
P=target/release/punctual
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
printf '%-14s %14s %10s %10s\n' "asked sw/s/CPU" "events/s" lost "file KiB"
best=0
for f in 5000 20000 50000 100000 200000 0; do
  gens=()
  for c in $(seq 0 $(($(nproc) - 1))); do
    taskset -c "$c" stress-ng --switch 1 --switch-freq "$f" --timeout "$((SECS + 3))s" --quiet &
    gens+=($!)
  done
  sleep 1
  "$P" trace record -D "${SECS}s" --buffer-size "$BUF" --events sched -o "$TMP/t.ptf" > "$TMP/rec.txt"
  for g in "${gens[@]}"; do wait "$g" || true; done
  ev=$(awk '$1=="events"{gsub(/[()\/s]/,"",$3); print $3}' "$TMP/rec.txt")
  lost=$(awk '$1=="lost"{print $3}' "$TMP/rec.txt")
  kib=$(awk '$1=="size"{print $2}' "$TMP/rec.txt")
  printf '%-14s %14s %10s %10s\n' "$([ "$f" = 0 ] && echo unlimited || echo "$f")" "$ev" "$lost" "$kib"
  if [ "$lost" = 0 ] && [ "${ev%.*}" -gt "$best" ]; then best=${ev%.*}; fi
done
echo "highest rate captured without loss: $best events/s (buffer $BUF per CPU, $(nproc) CPUs)"
