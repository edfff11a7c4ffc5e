#!/usr/bin/env bash
# punctual monitor's attribution of late releases (--explain) on this machine (issue 27), side by
# side in one run:
#   1. what attribution costs at 1 ms on one CPU: alternated runs with --explain off and on; the
#      measuring thread's CPU, the whole process's (process_cpu_seconds_total: with --explain it
#      holds the trace's drain thread and the attribution thread), its resident memory, the
#      measuring thread's p99 / p99.9 / max, and the late releases by cause;
#   2. the measuring thread's p99 quiet and under storms of 1,000 concurrent scrapes (alternated,
#      --explain on, the storm client pinned to the other CPU), with the late releases of each run
#      by cause and the offenders the document names: which events made the storm's samples late.
# Needs root (FIFO 98, mlockall, tracefs), python3, curl. Each run's line ends with the steal
# ticks (USER_HZ, 10 ms) during it and the load average at its end.
# PARTS=2 runs part 2 only; TOP=N shows N offenders a run (4).
# Usage: [ROUNDS=2] [PARTS=12] [TOP=4] scripts/bench-monitor-explain.sh [PUNCTUAL] [MONITOR_CPU] [OTHER_CPU] [SECONDS]
set -euo pipefail
P=$(realpath "${1:-target/release/punctual}")
MCPU=${2:-1}
OCPU=${3:-0}
SECS=${4:-30}
ROUNDS=${ROUNDS:-2}
PARTS=${PARTS:-12}
export TOP=${TOP:-4}
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
wait_up() { for _ in $(seq 200); do curl -sf "http://$ADDR/metrics" >/dev/null && return; sleep 0.1; done; echo "monitor did not come up" >&2; exit 1; }

# The figures of one run: its document, and two scrapes (early and late) for the process's CPU,
# memory and the late releases by cause.
figures() {
  python3 - "$1" "$2" "$3" "$4" "$5" <<'PY'
import json, re, sys
doc, early, late, t0, t1 = sys.argv[1:6]
d = json.load(open(doc)); s = d["series"][0]
def metrics(path):
    m = {}
    for l in open(path):
        if l.startswith("#"): continue
        k, _, v = l.rpartition(" ")
        try: m[k] = float(v)
        except ValueError: pass
    return m
a, b = metrics(early), metrics(late)
cpu = (b["process_cpu_seconds_total"] - a["process_cpu_seconds_total"]) / (float(t1) - float(t0))
causes = {re.search(r'cause="(\w+)"', k).group(1): int(v) for k, v in b.items()
          if k.startswith("punctual_late_releases_total")}
pending = sum(int(v) for k, v in b.items() if k.startswith("punctual_late_releases_pending"))
shown = ", ".join(f"{c} {n}" for c, n in causes.items() if n) or "none"
p = s["percentiles"]
print(f"thread {s.get('cpu_ns', 0) / max(s.get('duration_ns', 1), 1) * 100:.2f} %, process {cpu * 100:.2f} %, "
      f"rss {b['process_resident_memory_bytes'] / 2**20:.0f} MiB; p99 {p['99'] / 1e3:.1f} us, p99.9 {p['99.9'] / 1e3:.1f} us, "
      f"max {s['max'] / 1e3:.0f} us, {s['count']} samples; late (>10 us) by cause: {shown}"
      + (f" (+{pending} pending)" if pending else ""))
import os
top = d["settings"].get("monitor", {}).get("late_offenders", [])[:int(os.environ["TOP"])]
if top:
    print("        most often: " + "; ".join(f"{o['name']} ({o['cause']} {o['count']})" for o in top))
PY
}

# One monitor run of SECS seconds with `--explain $1`; `$2` = storm to storm it meanwhile.
run() {
  local explain=$1 storm=$2 st0 c0 t0 t1 said=""
  st0=$(steal)
  "$P" monitor -a "$MCPU" --listen "$ADDR" -D "${SECS}s" --explain "$explain" --history-every off \
    --no-store --json "$D/run.json" >/dev/null 2>"$D/run.err" &
  PIDS+=($!); MPID=$!
  wait_up
  sleep 2
  curl -s "http://$ADDR/metrics" > "$D/early"; t0=$(date +%s.%N)
  if [ "$storm" = storm ]; then
    said=" [$(taskset -c "$OCPU" python3 "$D/storm.py" "$ADDR" $((SECS - 8)))]"
    sleep 1
  else
    sleep $((SECS - 7))
  fi
  curl -s "http://$ADDR/metrics" > "$D/late"; t1=$(date +%s.%N)
  wait "$MPID" || true
  echo "$(figures "$D/run.json" "$D/early" "$D/late" "$t0" "$t1")  (steal $(( $(steal) - st0 )) ticks, load $(load))$said"
}

cat > "$D/storm.py" <<'PY'
import socket, sys, time
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

say "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), kernel $(uname -r); monitor on CPU $MCPU every 1 ms, ${SECS} s runs"
case $PARTS in *1*)
say "1. --explain off and on (alternated; CPU shares of one CPU over the run less its first 2 and last 5 s):"
for round in $(seq "$ROUNDS"); do
  for e in off on; do
    say "   round $round, --explain $e: $(run "$e" quiet)"
  done
done
esac
case $PARTS in *2*)
say "2. quiet and under storms of 1,000 concurrent scrapes (client on CPU $OCPU; --explain on):"
for round in $(seq "$ROUNDS"); do
  for s in quiet storm; do
    say "   round $round, $s: $(run on "$s")"
  done
done
esac
