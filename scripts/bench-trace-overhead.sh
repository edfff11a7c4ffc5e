#!/usr/bin/env bash
# Recording overhead of `punctual trace record`, side by side with and without tracing:
#  1. throughput of a CPU-bound job (stress-ng --cpu on every CPU) under desktop-like background
#     activity, alternating plain and traced runs; the recorder's own CPU use and the event rate;
#  2. the cost per traced event: a fixed amount of context-switch work (stress-ng --switch, pinned to
#     one CPU) timed plain and traced, the extra time divided by the events recorded.
#
# usage: scripts/bench-trace-overhead.sh [ROUNDS] [SECONDS]   (root; installs stress-ng if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
SECS=${2:-8}
command -v stress-ng >/dev/null || { apt-get update -qq && apt-get install -y -qq stress-ng; }
cargo build --release -q -p punctual
P=$PWD/target/release/punctual
TMP=$(mktemp -d)
BG=()
cleanup() { for p in "${BG[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT
LAST=$(( $(nproc) - 1 ))

echo "== 1. CPU-bound throughput, plain and traced, with desktop-like background activity"
# A 1 kHz timer (a media player's clock), 1000 context switches a second (a compositor and its
# clients), a light disk writer.
stress-ng --timer 1 --timer-freq 1000 --quiet & BG+=($!)
stress-ng --switch 1 --switch-freq 1000 --quiet & BG+=($!)
stress-ng --hdd 1 --hdd-bytes 4M --hdd-write-size 64K --quiet & BG+=($!)
sleep 2
work() { # bogo operations per second of a CPU-bound job on every CPU
  stress-ng --cpu "$(nproc)" --cpu-method int64 --timeout "${SECS}s" --metrics-brief 2>&1 \
    | awk '/ cpu /{print $(NF-1)}' | tail -1
}
printf '%-6s %-8s %14s %12s %8s %14s\n' round mode "bogo ops/s" "events/s" lost "recorder CPU"
base=(); traced=()
for r in $(seq 1 "$ROUNDS"); do
  b=$(work); base+=("$b")
  printf '%-6s %-8s %14s %12s %8s %14s\n' "$r" plain "$b" - - -
  "$P" trace record -D "$((SECS + 2))s" -o "$TMP/t.ptf" > "$TMP/rec.txt" &
  rec=$!
  sleep 1
  t=$(work); traced+=("$t")
  wait "$rec"
  ev=$(awk '$1=="events"{gsub(/[()\/s]/,"",$3); print $3}' "$TMP/rec.txt")
  lost=$(awk '$1=="lost"{print $3}' "$TMP/rec.txt")
  cpu=$(awk '$1=="recorder"{gsub(/\(/,"",$5); print $5" %"}' "$TMP/rec.txt")
  printf '%-6s %-8s %14s %12s %8s %14s\n' "$r" traced "$t" "$ev" "$lost" "$cpu"
done
for p in "${BG[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; BG=()
python3 - "${base[@]}" -- "${traced[@]}" <<'PY'
import sys, statistics as st
a = sys.argv[1:]; i = a.index('--'); base = list(map(float, a[:i])); tr = list(map(float, a[i+1:]))
mb, mt = st.median(base), st.median(tr)
print(f"median plain {mb:.1f}, median traced {mt:.1f} bogo ops/s: slowdown {100*(mb-mt)/mb:.2f} % "
      f"(plain runs vary by {100*(max(base)-min(base))/mb:.1f} % among themselves)")
PY

echo "== 2. cost per traced event: fixed context-switch work on CPU $LAST, plain and traced"
OPS=200000
timed() { # seconds for OPS switch operations pinned to the last CPU
  python3 - "$@" <<'PY'
import subprocess, sys, time
t = time.monotonic()
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(f"{time.monotonic() - t:.4f}")
PY
}
plain=(); trc=(); evs=()
for r in $(seq 1 "$ROUNDS"); do
  plain+=("$(timed taskset -c "$LAST" stress-ng --switch 1 --switch-ops "$OPS" --quiet)")
  "$P" trace record -o "$TMP/s.ptf" --events sched -- taskset -c "$LAST" stress-ng --switch 1 --switch-ops "$OPS" --quiet > "$TMP/rec.txt"
  trc+=("$(awk '$1=="duration"{v=$2; u=$3; if(u=="ms")v/=1000; print v}' "$TMP/rec.txt")")
  evs+=("$(awk '$1=="events"{print $2}' "$TMP/rec.txt")")
  printf 'round %s: plain %ss, traced %ss, %s events\n' "$r" "${plain[-1]}" "${trc[-1]}" "${evs[-1]}"
done
python3 - "${plain[@]}" -- "${trc[@]}" -- "${evs[@]}" <<'PY'
import sys, statistics as st
a = sys.argv[1:]; i = a.index('--'); j = a.index('--', i + 1)
p = st.median(map(float, a[:i])); t = st.median(map(float, a[i+1:j])); e = st.median(map(float, a[j+1:]))
print(f"median plain {p:.3f} s, traced {t:.3f} s for the same work, {e:.0f} events: "
      f"{(t - p) * 1e9 / e:.0f} ns per event")
PY
