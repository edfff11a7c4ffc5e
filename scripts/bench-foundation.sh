#!/usr/bin/env bash
# Issue 3 measurements (docs/benchmarks.md, "Foundation"):
#   agreement  punctual latency vs cyclictest, same settings, alternated runs
#   hybrid     absolute sleep vs the hybrid wait at margins auto/50/100/200 us: lateness, woke_late, CPU
#   cost       cost of recording a sample, memory over 10 million samples, percentile time
# Usage: scripts/bench-foundation.sh [agreement|hybrid|cost|all] [seconds per run]
# Environment: CPU (default: last online CPU), ROUNDS (agreement, default 3).
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
secs=${2:-60}
cpu=${CPU:-$(( $(nproc) - 1 ))}
rounds=${ROUNDS:-3}
out=target/bench/foundation
mkdir -p "$out"
cargo build --release -q -p punctual
P=target/release/punctual

agreement() {
  command -v cyclictest >/dev/null || { apt-get update -qq && apt-get install -y -qq rt-tests; }
  echo "## punctual latency vs cyclictest: FIFO 99, 1 ms, one thread on CPU $cpu, mlockall, dma latency 0, ${secs} s per run"
  for r in $(seq 1 "$rounds"); do
    # cyclictest: -m mlockall, -p 99 FIFO, -a pin, -i us, -h 1 us buckets (it also holds cpu_dma_latency at 0)
    cyclictest -q -m -p 99 -t 1 -a "$cpu" -i 1000 -D "$secs" -h 20000 > "$out/cyclictest-$r.txt"
    "$P" latency -t 1 -a "$cpu" -i 1ms -p 99 -D "${secs}s" --dma-latency 0 \
      --hist "$out/punctual-$r.txt" --hist-buckets 20000 --json "$out/punctual-$r.json" > /dev/null
  done
  python3 - "$out" "$rounds" <<'PY'
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def hist(path):
    counts, over, mx = {}, 0, None
    for line in open(path):
        if line.startswith('# Max Latencies:'): mx = int(line.split()[3])
        if line.startswith('# Histogram Overflows:'): over = int(line.split()[3])
        if line.startswith('#') or not line.strip(): continue
        f = line.split()
        counts[int(f[0])] = int(f[1])
    return counts, over, mx
def pct(counts, over, p):
    n = sum(counts.values()) + over
    rank = -(-n * p // 100000)
    seen = 0
    for b in sorted(counts):
        seen += counts[b]
        if seen >= rank: return b
    return float('inf')
print("| round | tool | samples | p50 (us) | p99 (us) | p99.9 (us) | max (us) |")
print("|---|---|---|---|---|---|---|")
agg = {'cyclictest': [], 'punctual': []}
for r in range(1, rounds + 1):
    for tool in ('cyclictest', 'punctual'):
        c, o, mx = hist(f"{out}/{tool}-{r}.txt")
        n = sum(c.values()) + o
        row = (pct(c, o, 50000), pct(c, o, 99000), pct(c, o, 99900), mx)
        agg[tool].append(row)
        print(f"| {r} | {tool} | {n} | {row[0]} | {row[1]} | {row[2]} | {row[3]} |")
    d = json.load(open(f"{out}/punctual-{r}.json"))['series'][0]
    print(f"| {r} | punctual exact | {d['count']} | {d['median']/1000:.2f} | {d['percentiles']['99']/1000:.2f} | {d['percentiles']['99.9']/1000:.2f} | {d['max']/1000:.1f} |")
import statistics as st
print()
for i, name in ((0, 'p50'), (1, 'p99')):
    c = st.mean(x[i] for x in agg['cyclictest']); p = st.mean(x[i] for x in agg['punctual'])
    ok = abs(p - c) <= max(0.2 * c, 3)
    print(f"mean {name}: cyclictest {c:.1f} us, punctual {p:.1f} us, difference {p - c:+.1f} us ({(p - c) / c * 100:+.0f} %): {'within' if ok else 'OUTSIDE'} 20 % or 3 us")
PY
}

hybrid() {
  echo "## absolute sleep vs hybrid wait: FIFO 99, 1 ms, one thread on CPU $cpu, ${secs} s per run"
  "$P" latency -t 1 -a "$cpu" -i 1ms -D "${secs}s" --mode abs --json "$out/abs.json" > /dev/null
  for m in auto 50us 100us 200us; do
    "$P" latency -t 1 -a "$cpu" -i 1ms -D "${secs}s" --mode hybrid --spin-margin "$m" --json "$out/hybrid-$m.json" > /dev/null
  done
  python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
rows = [('abs', f"{out}/abs.json")] + [(f"hybrid {m}", f"{out}/hybrid-{m}.json") for m in ('auto', '50us', '100us', '200us')]
base = json.load(open(rows[0][1]))['series'][0]
print("| mode | p50 | p99 | p99.9 | max | p50 / abs | p99 / abs | woke late | CPU (% of a core) | final margin |")
print("|---|---|---|---|---|---|---|---|---|---|")
def us(ns): return f"{ns/1000:.3f} us" if ns < 10000 else f"{ns/1000:.1f} us"
for name, path in rows:
    s = json.load(open(path))['series'][0]
    p = s['percentiles']
    cpu = 100 * s['cpu_ns'] / s['duration_ns']
    m = s.get('spin_margin_ns')
    print(f"| {name} | {us(p['50'])} | {us(p['99'])} | {us(p['99.9'])} | {us(s['max'])} | {p['50']/base['percentiles']['50']:.4f} | {p['99']/base['percentiles']['99']:.4f} | {100*s['woke_late']/s['count']:.2f} % | {cpu:.1f} % | {us(m) if m else '-'} |")
PY
}

cost() {
  echo "## cost of measuring"
  cargo run --release -q -p punctual-stats --example cost
  echo
  echo "## punctual latency over 10 million samples (2 threads, 20 us, 100 s): RSS every 10 s"
  "$P" latency -t 2 -i 20us --force -D 100s --json "$out/ten-million.json" > /dev/null &
  pid=$!
  for i in $(seq 1 10); do
    sleep 10
    kill -0 "$pid" 2>/dev/null && echo "t=$((i * 10)) s RSS $(awk '/VmRSS/ {print $2, $3}' /proc/$pid/status 2>/dev/null)"
  done
  wait "$pid" || true
  python3 -c "import json; d=json.load(open('$out/ten-million.json')); print('samples:', sum(s['count'] for s in d['series'] if s['name']!='total'))"
}

case "$what" in
  agreement) agreement ;;
  hybrid) hybrid ;;
  cost) cost ;;
  all) agreement; echo; hybrid; echo; cost ;;
  *) echo "usage: $0 [agreement|hybrid|cost|all] [seconds]" >&2; exit 2 ;;
esac
