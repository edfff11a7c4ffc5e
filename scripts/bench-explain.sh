#!/usr/bin/env bash
# Issue 26: every late release explained. Runs, one after the other, on this machine:
#  1. cost: kurt-periodic's hardest row as a plan (30 wake clients at 10 ms: 3,000 releases a
#     second), ROUNDS times alternating without and with --explain (so the host's bursts fall on
#     both alike): the clients' lateness within 10 us, the dispatcher's CPU, the trace's events
#     and its drain's CPU; the kernel's own share is events/s times the cost per traced event
#     (COST_NS, 618 ns measured by scripts/bench-trace-overhead.sh on the quiet machine);
#  2. kurt-periodic (--quick; FULL=1 for the full 344 s), explained by default: Tables 4.1/4.2
#     and the late releases by cause with the floor, per row;
#  3. the 10 us plan (a mark every 10 us) in real-time mode for DURATION, explained;
#  4. a one-minute replay of 120,000 UDP packets 500 us apart to a loopback port, shielded,
#     explained (gaps off by more than 1 % of the spacing).
# Each run's document lands in $OUT (default target/bench/explain); the steal time of each is in
# it (settings.steal_ns) and printed. Needs root (tracefs, shields).
# Usage: [FULL=1] [ROUNDS=3] [COST_NS=618] scripts/bench-explain.sh [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p punctual
P=$PWD/target/release/punctual
dur=${1:-10s}
rounds=${ROUNDS:-3}
out=${OUT:-target/bench/explain}
mkdir -p "$out"
cpu=$(tr ',' '\n' < /sys/devices/system/cpu/online | tail -1 | sed 's/.*-//')
all=$(cat /sys/devices/system/cpu/online)
echo "# $(date -Is) $(uname -r), $(nproc) CPUs; load average: $(cut -d' ' -f1-3 /proc/loadavg)"

echo "== 1. cost at 3,000 releases/s: 30 wake clients at 10 ms, without and with --explain"
plan="$out/wake-30.toml"
{
  printf '[plan]\nname = "wake-30"\nspin_margin = "auto"\ncpus = "%s"\n\n' "$cpu"
  for i in $(seq 0 29); do
    printf '[[task]]\nname = "p%d"\nperiod = "10ms"\noffset = "auto"\n' "$i"
    printf 'action = { kind = "wake", channel = "bx-%d-%d", spawn = ["%s", "__periodic", "--mode", "wake", "--period-ns", "10000000", "--first-ns", "0", "--until-ns", "0", "--channel", "bx-%d-%d"] }\n\n' \
      $$ "$i" "$P" $$ "$i"
  done
} > "$plan"
for r in $(seq 1 "$rounds"); do
  for mode in plain explain; do
    extra=()
    [ "$mode" = explain ] && extra=(--explain)
    taskset -c "$all" "$P" run "$plan" -D "$dur" --no-store "${extra[@]}" \
      --json "$out/cost-$mode-$r.json" > "$out/cost-$mode-$r.txt" 2> "$out/cost-$mode-$r.err" || true
  done
done
python3 - "$out" "$rounds" "${COST_NS:-618}" <<'PY'
import json, sys, statistics as st
out, rounds, cost = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
def load(m, r):
    try:
        return json.load(open(f"{out}/cost-{m}-{r}.json"))
    except Exception:
        return None
print(f"{'round':>5} {'mode':<8} {'<=10us':>8} {'late':>6} {'disp. CPU':>9} {'events/s':>9} {'drain':>7} {'kernel':>7} {'total':>7} {'steal':>12}")
for r in range(1, rounds + 1):
    for m in ("plain", "explain"):
        d = load(m, r)
        if d is None:
            print(f"{r:>5} {m:<8} (no document: see {out}/cost-{m}-{r}.err)")
            continue
        n = w = 0
        for s in d["series"]:
            if s["kind"] == "lateness" and "(dispatcher)" not in s["name"]:
                n += s["count"]; w += s["within"]["10us"] * s["count"]
        c = d["dispatchers"][0]
        use = 100 * c["cpu_ns"] / max(c["duration_ns"], 1)
        steal = ", ".join(f"{int(v)/1e6:.0f} ms" for v in d["settings"].get("steal_ns", {}).values())
        x = d["settings"].get("explain")
        if x:
            secs = x["window_ns"] / 1e9
            ev = x["events"] / secs
            drain = 100 * x["drain_cpu_ns"] / x["window_ns"]
            kern = 100 * ev * cost / 1e9
            print(f"{r:>5} {m:<8} {100*w/max(n,1):7.2f}% {n-round(w):>6} {use:8.1f}% {ev:9.0f} {drain:6.2f}% {kern:6.2f}% {drain+kern:6.2f}% {steal:>12}")
        else:
            print(f"{r:>5} {m:<8} {100*w/max(n,1):7.2f}% {n-round(w):>6} {use:8.1f}% {'':>9} {'':>7} {'':>7} {'':>7} {steal:>12}")
d = load("explain", 1)
if d and d["settings"].get("explain"):
    k = d["settings"]["explain"]["events_by_kind"]
    tot = sum(k.values())
    print("events by kind (round 1): " + ", ".join(f"{n} {100*v/tot:.0f} %" for n, v in sorted(k.items(), key=lambda x: -x[1])))
print("drain: the trace thread's CPU; kernel: events/s x the cost per traced event; % of one CPU.")
PY

echo "== 2. kurt-periodic ${FULL:+(full)}${FULL:---quick}, explained"
quick=(--quick)
[ -n "${FULL:-}" ] && quick=()
taskset -c "$all" "$P" experiment run kurt-periodic "${quick[@]}" --no-store \
  --json "$out/kurt.json" --figures "$out/kurt-figures" > "$out/kurt.txt" 2> "$out/kurt.err" || true
sed -n '/^Table 4.1/,/^Late releases by cause/p' "$out/kurt.txt" | grep -v '^thesis' | head -80
sed -n '/^Late releases by cause/,/^$/p' "$out/kurt.txt"
grep -h 'steal time' "$out/kurt.err" || true

echo "== 3. the 10 us plan in real-time mode, $dur, explained"
cat > "$out/dense-10us.toml" <<TOML
[plan]
name = "dense-10us"
cpus = "$cpu"
shield = true

[[task]]
name = "fast"
period = "10us"
action = { kind = "mark" }
TOML
taskset -c "$all" "$P" run "$out/dense-10us.toml" -D "$dur" --no-store --explain \
  --json "$out/dense-10us.json" > "$out/dense-10us.txt" 2> "$out/dense-10us.err" || true
cat "$out/dense-10us.txt"; grep -h 'steal time' "$out/dense-10us.err" || true

echo "== 4. one minute of UDP packets 500 us apart to a loopback port, shielded, explained"
python3 - "$out/udp.pcap" 120000 <<'PY'
import struct, sys
path, n = sys.argv[1], int(sys.argv[2])
with open(path, 'wb') as out:
    out.write(struct.pack('<IHHiIII', 0xa1b23c4d, 2, 4, 0, 0, 65535, 1))
    for i in range(n):
        payload = struct.pack('<Q', i) + b'x' * 56
        udp = struct.pack('!HHHH', 40000, 9, 8 + len(payload), 0) + payload
        ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0,
                         bytes([127, 0, 0, 1]), bytes([127, 0, 0, 1]))
        fr = b'\0' * 12 + b'\x08\x00' + ip + udp
        ts = 1_700_000_000_000_000_000 + i * 500_000
        out.write(struct.pack('<IIII', ts // 10**9, ts % 10**9, len(fr), len(fr)) + fr)
PY
taskset -c "$all" "$P" traffic replay "$out/udp.pcap" --udp-to 127.0.0.1:9 --interval 500us \
  -a "$cpu" --shield --explain --no-store --json "$out/replay.json" > "$out/replay.txt" 2> "$out/replay.err" || true
cat "$out/replay.txt"; grep -h 'steal time' "$out/replay.err" || true
