#!/usr/bin/env bash
# Recording overhead of `punctual trace record` on a CPU-bound workload, side by side with and without
# tracing, at a desktop-like event rate. Prints each run, the event rate recorded, and the slowdown.
#
# usage: scripts/bench-trace-overhead.sh [ROUNDS] [SECONDS]   (root; installs stress-ng if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-4}
SECS=${2:-10}
command -v stress-ng >/dev/null || { apt-get update -qq && apt-get install -y -qq stress-ng; }
cargo build --release -q -p punctual
P=target/release/punctual
TMP=$(mktemp -d)
BG=()
cleanup() { for p in "${BG[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT

# Desktop-like background activity: a 1 kHz timer (a media player's clock), pipe ping-pong at
# 2000 round trips a second (a compositor and its clients), light disk writes.
stress-ng --timer 1 --timer-freq 1000 --quiet & BG+=($!)
stress-ng --switch 1 --switch-freq 2000 --quiet & BG+=($!)
stress-ng --hdd 1 --hdd-bytes 4M --hdd-write-size 64K --io-ops 0 --quiet & BG+=($!)
sleep 2

work() { # bogo operations per second of a CPU-bound job on every CPU
  stress-ng --cpu "$(nproc)" --cpu-method int64 --timeout "${SECS}s" --metrics-brief 2>&1 \
    | awk '/ cpu /{print $(NF-1)}' | tail -1
}

printf '%-6s %-8s %16s %14s %8s\n' round mode "bogo ops/s" "events/s" lost
base=(); traced=()
for r in $(seq 1 "$ROUNDS"); do
  b=$(work); base+=("$b")
  printf '%-6s %-8s %16s %14s %8s\n' "$r" plain "$b" - -
  "$P" trace record -D "$((SECS + 2))s" -o "$TMP/t.ptf" > "$TMP/rec.txt" &
  rec=$!
  sleep 1
  t=$(work); traced+=("$t")
  wait "$rec"
  ev=$(awk '$1=="events"{gsub(/[()\/s]/,"",$3); print $3}' "$TMP/rec.txt")
  lost=$(awk '$1=="lost"{print $3}' "$TMP/rec.txt")
  printf '%-6s %-8s %16s %14s %8s\n' "$r" traced "$t" "$ev" "$lost"
done
python3 - "${base[@]}" -- "${traced[@]}" <<'PY'
import sys, statistics as st
a = sys.argv[1:]; i = a.index('--'); base = list(map(float, a[:i])); tr = list(map(float, a[i+1:]))
mb, mt = st.mean(base), st.mean(tr)
print(f"plain mean {mb:.2f} bogo ops/s, traced mean {mt:.2f} bogo ops/s, slowdown {100*(mb-mt)/mb:.2f} % "
      f"(spread of plain runs {100*(max(base)-min(base))/mb:.2f} %)")
PY
