#!/usr/bin/env bash
# kurt-periodic's hardest row as a plain plan: 30 wake tasks at 10 ms, automatic offsets, one
# dispatcher CPU (the last), each client a spawned `punctual __periodic --mode wake`. Runs each
# binary given in turn, ROUNDS times (alternated, so the host's bursts fall on both alike), and
# prints per run: client lateness within 10 us (all tasks, and the worst task), missed releases, wake-ups after the instant,
# dispatcher margin and CPU use, and the host's steal time.
# Each VARIANT is a binary with optional extra `run` arguments, quoted as one word, e.g.
#   scripts/bench-wake-30.sh 10s 4 ./target/release/punctual "./target/release/punctual --avoid-interference"
# Usage: scripts/bench-wake-30.sh [DURATION [ROUNDS [VARIANT...]]]   (default 10s, 1, ./target/release/punctual)
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-10s}
rounds=${2:-1}
shift $(( $# > 2 ? 2 : $# ))
bins=("$@")
if [ ${#bins[@]} -eq 0 ]; then
  cargo build --release -q
  bins=(./target/release/punctual)
fi
out=${OUT:-target/bench}
mkdir -p "$out"
cpu=$(tr ',' '\n' < /sys/devices/system/cpu/online | tail -1 | sed 's/.*-//')
printf "%-44s %6s %9s %8s %7s %10s %16s %8s %s\n" binary round "<=10us" "worst" missed "woke late" "margin (cap)" "d. CPU" "steal (per CPU)"
for r in $(seq 1 "$rounds"); do
  for variant in "${bins[@]}"; do
    read -ra parts <<< "$variant"
    b=${parts[0]}
    plan="$out/wake-30.toml"
    {
      printf '[plan]\nname = "wake-30"\nspin_margin = "auto"\ncpus = "%s"\n\n' "$cpu"
      for i in $(seq 0 29); do
        printf '[[task]]\nname = "p%d"\nperiod = "10ms"\noffset = "auto"\n' "$i"
        printf 'action = { kind = "wake", channel = "w30-%d-%d", spawn = ["%s", "__periodic", "--mode", "wake", "--period-ns", "10000000", "--first-ns", "0", "--until-ns", "0", "--channel", "w30-%d-%d"] }\n\n' \
          $$ "$i" "$(realpath "$b")" $$ "$i"
      done
    } > "$plan"
    rm -f "$out/wake-30.json"
    rc=0
    "$b" run "$plan" -D "$dur" "${parts[@]:1}" --json "$out/wake-30.json" > /dev/null || rc=$?
    if [ "$rc" -ne 0 ]; then
      printf "%-44s %6s exit %d (3: the watchdog stopped the run)\n" "$variant" "$r" "$rc"
      continue
    fi
    python3 - "$out/wake-30.json" "$variant" "$r" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
n = w = missed = late = 0
worst = 1.0
for s in d["series"]:
    if s["kind"] != "lateness" or "(dispatcher)" in s["name"] or "(exec" in s["name"]:
        continue
    worst = min(worst, s["within"]["10us"])
    n += s["count"]; w += s["within"]["10us"] * s["count"]
    missed += s.get("missed_periods", 0); late += s.get("woke_late", 0)
c = d["dispatchers"][0]
cap = c.get("spin_margin_cap_ns")
margin = f"{c['spin_margin_ns']/1000:.0f} us" + (f" ({cap/1000:.0f})" if cap else " (-)")
use = 100 * c["cpu_ns"] / max(c["duration_ns"], 1)
steal = d["settings"].get("steal_ns", {})
wall = c["duration_ns"]
st = " ".join(f"{100*v/wall:.1f}%" for v in steal.values())
print(f"{sys.argv[2][-44:]:<44} {sys.argv[3]:>6} {100*w/max(n,1):8.2f}% {100*worst:7.1f}% {missed:7d} {late:10d} {margin:>16} {use:7.1f}% {st}")
PY
  done
done
