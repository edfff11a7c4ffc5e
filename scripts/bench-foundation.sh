#!/usr/bin/env bash
# Issue 3 measurements (docs/benchmarks.md, "Foundation"):
#   agreement  punctual latency vs cyclictest, same settings: alternated runs, then both at once
#   hybrid     absolute sleep vs the hybrid wait at margins auto/50/100/200 us, interleaved slices: lateness, woke_late, CPU
#   cost       cost of recording a sample, memory over 10 million samples, percentile time
# Usage: scripts/bench-foundation.sh [agreement|together|hybrid|cost|all] [seconds per run]
# Environment: CPU (default: last online CPU), ROUNDS (agreement and hybrid, default 6), SLICE (hybrid, s, default 10).
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
secs=${2:-60}
cpu=${CPU:-$(( $(nproc) - 1 ))}
rounds=${ROUNDS:-6}
out=target/bench/foundation
mkdir -p "$out"
cargo build --release -q -p punctual
P=target/release/punctual

agreement() {
  command -v cyclictest >/dev/null || { apt-get update -qq && apt-get install -y -qq rt-tests; }
  echo "## punctual latency vs cyclictest: FIFO 99, 1 ms, one thread on CPU $cpu, mlockall, dma latency 0, ${secs} s per run"
  echo "### alternated: one tool after the other, $rounds rounds"
  for r in $(seq 1 "$rounds"); do
    # cyclictest: -m mlockall, -p 99 FIFO, -a pin, -i us, -h 1 us buckets (it also holds cpu_dma_latency at 0)
    cyclictest -q -m -p 99 -t 1 -a "$cpu" -i 1000 -D "$secs" -h 20000 > "$out/cyclictest-$r.txt"
    "$P" latency -t 1 -a "$cpu" -i 1ms -p 99 -D "${secs}s" --dma-latency 0 \
      --hist "$out/punctual-$r.txt" --hist-buckets 20000 --json "$out/punctual-$r.json" > /dev/null
  done
  compare alt "$rounds"
  echo
  together
}

together() {
  command -v cyclictest >/dev/null || { apt-get update -qq && apt-get install -y -qq rt-tests; }
  # The host's noise comes in bursts that outlast a run, so alternated runs see different noise. Run
  # together on the same CPU (each thread runs a few microseconds per millisecond, at phases set by
  # their start times), both tools see the same bursts; what differs is the instrument.
  echo "### together: both at once on CPU $cpu, $rounds rounds"
  for r in $(seq 1 "$rounds"); do
    cyclictest -q -m -p 99 -t 1 -a "$cpu" -i 1000 -D "$secs" -h 20000 > "$out/cyclictest-together-$r.txt" &
    c=$!
    "$P" latency -t 1 -a "$cpu" -i 1ms -p 99 -D "${secs}s" --dma-latency 0 \
      --hist "$out/punctual-together-$r.txt" --hist-buckets 20000 --json "$out/punctual-together-$r.json" > /dev/null
    wait "$c"
  done
  compare together "$rounds"
}

# compare alt|together ROUNDS: per-round and pooled percentiles of the two tools' histograms.
compare() {
  python3 - "$out" "$1" "$2" <<'PY'
import json, sys
out, kind, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
sfx = '-together' if kind == 'together' else ''
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
for r in range(1, rounds + 1):
    for tool in ('cyclictest', 'punctual'):
        c, o, mx = hist(f"{out}/{tool}{sfx}-{r}.txt")
        n = sum(c.values()) + o
        print(f"| {r} | {tool} | {n} | {pct(c, o, 50000)} | {pct(c, o, 99000)} | {pct(c, o, 99900)} | {mx} |")
    d = json.load(open(f"{out}/punctual{sfx}-{r}.json"))['series'][0]
    print(f"| {r} | punctual exact | {d['count']} | {d['median']/1000:.2f} | {d['percentiles']['99']/1000:.2f} | {d['percentiles']['99.9']/1000:.2f} | {d['max']/1000:.1f} |")
# One run's p99 says little when the noise comes in bursts: the pooled histograms (every run of a
# tool added up) are what is compared.
print()
print("| pooled over all rounds | samples | p50 (us) | p99 (us) | p99.9 (us) | max (us) |")
print("|---|---|---|---|---|---|")
pooled = {}
for tool in ('cyclictest', 'punctual'):
    counts, over, mx = {}, 0, 0
    for r in range(1, rounds + 1):
        c, o, m = hist(f"{out}/{tool}{sfx}-{r}.txt")
        for b, n in c.items(): counts[b] = counts.get(b, 0) + n
        over += o; mx = max(mx, m)
    pooled[tool] = (pct(counts, over, 50000), pct(counts, over, 99000), pct(counts, over, 99900), mx)
    n = sum(counts.values()) + over
    print(f"| {tool} | {n} | {pooled[tool][0]} | {pooled[tool][1]} | {pooled[tool][2]} | {mx} |")
print()
for i, name in ((0, 'p50'), (1, 'p99')):
    c, p = pooled['cyclictest'][i], pooled['punctual'][i]
    ok = abs(p - c) <= max(0.2 * c, 3)
    print(f"{kind}, pooled {name}: cyclictest {c} us, punctual {p} us, difference {p - c:+} us ({(p - c) / c * 100:+.0f} %): {'within' if ok else 'OUTSIDE'} 20 % or 3 us")
PY
}

hybrid() {
  local slice=${SLICE:-10}
  echo "## absolute sleep vs hybrid wait: FIFO 99, 1 ms, one thread on CPU $cpu; $rounds rounds of ${slice} s per mode, interleaved"
  # Modes take turns in short slices, so host bursts (which outlast a run) fall on all of them alike;
  # every sample is kept (--samples) and the slices of a mode are pooled for exact percentiles.
  local modes="abs auto 50us 100us 200us"
  for r in $(seq 1 "$rounds"); do
    for m in $modes; do
      if [ "$m" = abs ]; then args=(--mode abs); else args=(--mode hybrid --spin-margin "$m"); fi
      "$P" latency -t 1 -a "$cpu" -i 1ms -D "${slice}s" "${args[@]}" \
        --samples "$out/hybrid-$m-$r.csv" --json "$out/hybrid-$m-$r.json" > /dev/null
    done
  done
  python3 - "$out" "$rounds" "$cpu" $modes <<'PY'
import csv, json, sys
out, rounds, cpu_no, modes = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
def pct(v, p): return v[min(len(v) - 1, int(len(v) * p / 100))]
def us(ns): return f"{ns/1000:.3f} us" if ns < 10000 else f"{ns/1000:.1f} us"
rows = {}
for m in modes:
    lat, late, n, cpu, dur, margins, steal = [], 0, 0, 0, 0, [], 0
    for r in range(1, rounds + 1):
        with open(f"{out}/hybrid-{m}-{r}.csv") as f:
            lat += [int(x['latency_ns']) for x in csv.DictReader(f)]
        d = json.load(open(f"{out}/hybrid-{m}-{r}.json"))
        s = d['series'][0]
        steal += d['settings'].get('steal_ns', {}).get(str(s.get('cpu', cpu_no)), 0)
        late += s['woke_late']; n += s['count']; cpu += s['cpu_ns']; dur += s['duration_ns']
        if s.get('spin_margin_ns'): margins.append(s['spin_margin_ns'])
    lat.sort()
    rows[m] = (lat, late / n, cpu / dur, margins, steal / dur)
base = rows['abs'][0]
print("| mode | samples | p50 | p99 | p99.9 | max | p50 / abs | p99 / abs | within 10 us | woke late | CPU (% of a core) | steal | final margin |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for m in modes:
    lat, wl, cpu, margins, st = rows[m]
    within = sum(1 for x in lat if x <= 10000) / len(lat)
    mg = '-' if not margins else (us(margins[0]) if min(margins) == max(margins) else f"{us(min(margins))} to {us(max(margins))}")
    name = 'abs' if m == 'abs' else f"hybrid {m}"
    print(f"| {name} | {len(lat)} | {us(pct(lat, 50))} | {us(pct(lat, 99))} | {us(pct(lat, 99.9))} | {us(lat[-1])} | {pct(lat, 50)/pct(base, 50):.4f} | {pct(lat, 99)/pct(base, 99):.4f} | {100*within:.2f} % | {100*wl:.2f} % | {100*cpu:.1f} % | {100*st:.2f} % | {mg} |")
PY
}

cost() {
  echo "## cost of measuring"
  cargo run --release -q -p punctual-stats --example cost
  echo
  echo "## punctual latency over 10 million samples (2 threads x 5,000,000 loops at 20 us): RSS every 20 s"
  "$P" latency -t 2 -i 20us --force -l 5000000 --json "$out/ten-million.json" > /dev/null &
  pid=$!
  t=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 20; t=$((t + 20))
    rss=$(awk '/VmRSS/ {print $2, $3}' /proc/$pid/status 2>/dev/null) && [ -n "$rss" ] && echo "t=$t s RSS $rss"
  done
  wait "$pid" || true
  python3 -c "import json; d=json.load(open('$out/ten-million.json')); print('samples:', sum(s['count'] for s in d['series'] if s['name']!='total'))"
}

case "$what" in
  agreement) agreement ;;
  together) together ;;
  hybrid) hybrid ;;
  cost) cost ;;
  all) agreement; echo; hybrid; echo; cost ;;
  *) echo "usage: $0 [agreement|together|hybrid|cost|all] [seconds]" >&2; exit 2 ;;
esac
