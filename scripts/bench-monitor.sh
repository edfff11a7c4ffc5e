#!/usr/bin/env bash
# punctual monitor's costs and isolation on this machine (issue 27), all side by side in one run:
#   1. the monitor's CPU use at 1 ms on one CPU (its measuring thread, and the whole process);
#   2. its effect on a `latency` run on another CPU (alternated: without, with, without, with);
#   3. scrape latency (sequential scrapes, text and protobuf);
#   4. the measuring thread's p99 with and without a storm of 1,000 concurrent scrapes
#      (alternated quiet/storm runs; the storm client is pinned to the other CPU).
# Needs root (FIFO 98, mlockall), python3. Prints the machine's load and steal beside the figures.
# Each run's line ends with the steal ticks (USER_HZ, 10 ms) during it and the load average at its
# end; real-time threads of other processes on the measured CPU are listed when seen.
# Usage: [ROUNDS=2] scripts/bench-monitor.sh [PUNCTUAL] [MONITOR_CPU] [OTHER_CPU] [SECONDS]
set -euo pipefail
P=$(realpath "${1:-target/release/punctual}")
MCPU=${2:-1}
OCPU=${3:-0}
SECS=${4:-30}
ROUNDS=${ROUNDS:-2}
D=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$D"; }
trap cleanup EXIT
export PUNCTUAL_DATA_DIR="$D/data"
PORT=$((20000 + RANDOM % 20000))
ADDR=127.0.0.1:$PORT

steal() { awk '/^cpu /{print $9}' /proc/stat; }
say() { printf '%s\n' "$*"; }
load() { cut -d' ' -f1 /proc/loadavg; }
# Real-time threads of other processes on CPU $1 (what else could delay the measured thread).
rt_others() {
  for s in /proc/[0-9]*/task/*/stat; do
    p=${s#/proc/}; p=${p%%/*}
    [ "$p" = "$MPID" ] && continue
    read -r l < "$s" 2>/dev/null || continue
    r=${l##*) }; set -- $r
    if [ "${37}" = "$MCPU" ] && [ "${39}" != 0 ]; then
      printf '%s ' "$(echo "$l" | sed 's/^[0-9]* (\(.*\)) .*/\1/')/${38}"
    fi
  done 2>/dev/null | head -c 200
}
p99() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); s=d["series"][0]; print(s["percentiles"]["99"], s["percentiles"]["99.9"], s["max"], s["count"])' "$1"; }
wait_up() { for _ in $(seq 200); do curl -sf "http://$ADDR/metrics" >/dev/null && return; sleep 0.1; done; echo "monitor did not come up" >&2; exit 1; }
proc_cpu() { curl -s "http://$ADDR/metrics" | awk '/^process_cpu_seconds_total/{print $2}'; }

say "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), kernel $(uname -r)"

# 1. CPU use.
st0=$(steal)
"$P" monitor -a "$MCPU" --listen "$ADDR" -D "${SECS}s" --history-every off --no-store --json "$D/cpu.json" >/dev/null 2>"$D/cpu.err" &
PIDS+=($!); MPID=$!
wait_up
c0=$(proc_cpu); t0=$(date +%s.%N)
sleep $((SECS - 5))
c1=$(proc_cpu); t1=$(date +%s.%N)
wait "$MPID"
python3 - "$D/cpu.json" "$c0" "$c1" "$t0" "$t1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
s = d["series"][0]
c0, c1, t0, t1 = map(float, sys.argv[2:6])
cpu = s.get("cpu_ns", 0) / max(s.get("duration_ns", 1), 1)
print(f"1. monitor at 1 ms on CPU {s['cpu']}: measuring thread {cpu*100:.2f} % of a CPU; "
      f"whole process {(c1-c0)/(t1-t0)*100:.2f} % of a CPU over {t1-t0:.0f} s (one scrape a second by curl); "
      f"{s['count']} wake-ups, p99 {s['percentiles']['99']/1000:.1f} us")
PY
say "   steal during it: $(( $(steal) - st0 )) ticks"

# 2. latency on the other CPU, without and with the monitor (alternated).
say "2. latency -a $OCPU -D ${SECS}s, without and with the monitor on CPU $MCPU (p99 / p99.9 / max ns, samples):"
for round in $(seq "$ROUNDS"); do
  for with in no yes; do
    if [ "$with" = yes ]; then
      "$P" monitor -a "$MCPU" --listen "$ADDR" --history-every off --no-store >/dev/null 2>&1 &
      PIDS+=($!); MPID=$!; wait_up
    fi
    st0=$(steal)
    "$P" latency -a "$OCPU" -D "${SECS}s" --no-store --json "$D/lat.json" >/dev/null 2>&1
    say "   round $round, monitor $with: $(p99 "$D/lat.json")  (steal $(( $(steal) - st0 )) ticks, load $(load))"
    if [ "$with" = yes ]; then kill -TERM "$MPID"; wait "$MPID" || true; fi
  done
done

# 3. scrape latency.
"$P" monitor -a "$MCPU" --listen "$ADDR" --history-every off --no-store >/dev/null 2>&1 &
PIDS+=($!); MPID=$!; wait_up
for fmt in text protobuf; do
  hdr="Accept: text/plain"
  [ "$fmt" = protobuf ] && hdr="Accept: application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"
  for _ in $(seq 200); do curl -s -o /dev/null -w '%{time_total}\n' -H "$hdr" "http://$ADDR/metrics"; done > "$D/scrape.$fmt"
  python3 - "$D/scrape.$fmt" "$fmt" "$(curl -s -H "$hdr" "http://$ADDR/metrics" | wc -c)" <<'PY'
import sys
v = sorted(float(x) * 1e3 for x in open(sys.argv[1]))
print(f"3. scrape ({sys.argv[2]}, {sys.argv[3]} bytes), 200 sequential by curl: "
      f"median {v[len(v)//2]:.2f} ms, p90 {v[int(len(v)*0.9)]:.2f} ms, max {v[-1]:.2f} ms")
PY
done
kill -TERM "$MPID"; wait "$MPID" || true

# 4. p99 with and without a storm of 1,000 concurrent scrapes, alternated.
cat > "$D/storm.py" <<'PY'
import socket, sys, time, selectors
addr, secs = sys.argv[1], float(sys.argv[2])
host, port = addr.split(":"); port = int(port)
end = time.time() + secs
rounds = ok = other = 0
while time.time() < end:
    socks = []
    for _ in range(1000):
        s = socket.create_connection((host, port))
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        socks.append(s)
    for s in socks:
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
        s.close()
        if data.startswith(b"HTTP/1.1 200"):
            ok += 1
        else:
            other += 1
    rounds += 1
print(f"{rounds} storms, {ok} answered 200, {other} otherwise")
PY
ulimit -n 4096
say "4. the measuring thread on CPU $MCPU, ${SECS}s runs, quiet and under storms of 1,000 concurrent scrapes (client on CPU $OCPU) (p99 / p99.9 / max ns, samples):"
for round in $(seq "$ROUNDS"); do
  for storm in no yes; do
    st0=$(steal)
    "$P" monitor -a "$MCPU" --listen "$ADDR" -D "${SECS}s" --history-every off --no-store --json "$D/storm.json" >/dev/null 2>&1 &
    PIDS+=($!); MPID=$!; wait_up
    said=""
    if [ "$storm" = yes ]; then
      said=$(taskset -c "$OCPU" python3 "$D/storm.py" "$ADDR" $((SECS - 5)))
    else
      sleep $((SECS / 2))
    fi
    others=$(rt_others)
    wait "$MPID"
    say "   round $round, storm $storm: $(p99 "$D/storm.json")  (steal $(( $(steal) - st0 )) ticks, load $(load)) $said${others:+ [other real-time threads on CPU $MCPU: $others]}"
  done
done
