#!/usr/bin/env bash
# rt-tests' cyclictest beside `punctual cyclictest`, same flags, same CPU, taking turns (issue 28).
# Both write cyclictest's histogram (-h, 1 us buckets); p50/p99 come from it by the same code for
# both, max from the tool's own `# Max Latencies`. Steal time of the CPU (/proc/stat) and the load
# average are read around every run, since the machine is a shared VM.
#
#   scripts/bench-cyclictest-dropin.sh [ROUNDS] [LOOPS]    (default 3 rounds of 20000 loops at 1 ms)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
loops=${2:-20000}
cpu=$(( $(nproc) - 1 ))
punctual=${PUNCTUAL:-target/release/punctual}
[ -x "$punctual" ] || cargo build --release -p punctual
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
flags=(-m -q -p 95 -a "$cpu" -i 1000 -l "$loops" -h 10000)

steal() { awk -v c="cpu$cpu" '$1 == c { print $9 }' /proc/stat; }  # USER_HZ ticks
echo "# cyclictest vs punctual cyclictest: ${flags[*]} (CPU $cpu), $rounds rounds taking turns"
echo "# $(uname -r), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
for r in $(seq 1 "$rounds"); do
  for tool in cyclictest punctual; do
    s0=$(steal); l0=$(cut -d' ' -f1 /proc/loadavg)
    if [ "$tool" = cyclictest ]; then
      cyclictest "${flags[@]}" > "$out/$tool-$r.txt"
    else
      "$punctual" cyclictest "${flags[@]}" > "$out/$tool-$r.txt"
    fi
    s1=$(steal); l1=$(cut -d' ' -f1 /proc/loadavg)
    echo "$tool $r $(( (s1 - s0) * 10 )) $l0 $l1" >> "$out/meta"
  done
done
python3 - "$out" <<'PY'
import sys, os
d = sys.argv[1]
def stats(path):
    buckets, over, mx = [], 0, None
    for l in open(path):
        if l.startswith("# Max Latencies:"): mx = int(l.split()[-1])
        elif l.startswith("# Histogram Overflows:"): over = int(l.split()[-1])
        elif l[:1].isdigit():
            b, n = l.split()[:2]; buckets.append((int(b), int(n)))
    total = sum(n for _, n in buckets) + over
    def pct(p):
        rank, seen = -(-total * p // 100), 0
        for b, n in buckets:
            seen += n
            if seen >= rank: return str(b)
        return ">10000"
    return pct(50), pct(99), mx, total
print(f"{'tool':<20} {'round':>5} {'samples':>8} {'p50 us':>7} {'p99 us':>7} {'max us':>7} {'steal ms':>9} {'load':>11}")
for line in open(os.path.join(d, "meta")):
    tool, r, steal, l0, l1 = line.split()
    p50, p99, mx, n = stats(os.path.join(d, f"{tool}-{r}.txt"))
    name = "cyclictest" if tool == "cyclictest" else "punctual cyclictest"
    print(f"{name:<20} {r:>5} {n:>8} {p50:>7} {p99:>7} {mx:>7} {steal:>9} {l0+'->'+l1:>11}")
PY
