#!/usr/bin/env bash
# `punctual bench ctxsw` against `perf bench sched pipe`: two processes on one CPU passing a byte
# through a pair of pipes. perf reports usecs/op for one round trip (two switches); punctual
# reports time per switch and per round trip. Both pinned to the same CPU, same class, same
# number of round trips' worth of time, run alternately.
#   CPU=1 LOOPS=200000 ROUNDS=3 scripts/bench-ctxsw-vs-perf.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if ! perf bench sched pipe -l 10 >/dev/null 2>&1; then apt-get update -qq && apt-get install -y -qq linux-perf; fi
CPU=${CPU:-$(($(nproc) - 1))}
LOOPS=${LOOPS:-200000}
ROUNDS=${ROUNDS:-3}
cargo build --release -q
P=target/release/punctual
perf_rt() { # class args...
  local t
  t=$("$@" taskset -c "$CPU" perf bench sched pipe -l "$LOOPS" 2>/dev/null | awk '/usecs\/op/ {print $1}')
  echo "$t"
}
ours() { # policy
  local pol=$1 extra=()
  [ "$pol" = other ] || extra=(-p 99)
  "$P" bench ctxsw -a "$CPU" --policy "$pol" "${extra[@]}" -D "$DUR" --json - 2>/dev/null |
    python3 -c 'import json,sys; s=json.load(sys.stdin)["series"][0]; print("%.2f" % (2*s["mean_ps"]/1e6))'
}
echo "CPU $CPU; round trip (two switches) in us; perf: $LOOPS round trips per run"
printf '%-22s %-6s %10s\n' tool class round-trip-us
for r in $(seq "$ROUNDS"); do
  pt=$(perf_rt env)
  # Give punctual the time perf took, so both measure over the same length.
  DUR=$(python3 -c "print(f'{max(1, round($pt * $LOOPS / 1e6, 1))}s')")
  printf '%-22s %-6s %10s\n' "perf bench sched pipe" other "$pt"
  printf '%-22s %-6s %10s\n' "punctual bench ctxsw" other "$(ours other)"
  ptf=$(perf_rt chrt -f 99)
  printf '%-22s %-6s %10s\n' "perf bench sched pipe" fifo99 "$ptf"
  printf '%-22s %-6s %10s\n' "punctual bench ctxsw" fifo99 "$(ours fifo)"
done
echo "futex hand-over (no pipe buffers), punctual only:"

"$P" bench ctxsw -a "$CPU" --policy other --channel futex -D 5s | sed -n '2,4p'
