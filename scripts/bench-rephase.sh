#!/usr/bin/env bash
# Issue 16, item 6: re-phasing during a run. A 4 ms task on the last CPU sends one UDP datagram per
# release (its instant in bytes 8-15); an interferer (python, SCHED_FIFO 99, pinned to the same CPU)
# learns the task's phase from them 1 s after the run began, well after --avoid-interference's 0.5 s
# watch, and from then on takes the CPU from 150 us before to 100 us after each of the task's
# instants on that first phase (a periodic interruption the watch never saw). Side by side:
#   auto:  offset = "auto"  (movable: re-phased when its late releases line up)
#   fixed: offset = "0ms"   (an explicit offset never moves: the late releases go on)
# Usage: scripts/bench-rephase.sh [SECONDS]   (root; release build)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p punctual
secs=${1:-10}
out=${OUT:-target/bench}
mkdir -p "$out"
cpu=$(tr ',' '\n' < /sys/devices/system/cpu/online | tail -1 | sed 's/.*-//')
all=$(cat /sys/devices/system/cpu/online)
port=${PORT:-47811}

cat > "$out/rephase-interferer.py" <<'PY'
import ctypes, os, socket, struct, sys, time
cpu, port, secs, log = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
PERIOD, BEFORE, AFTER = 4_000_000, 150_000, 100_000
libc = ctypes.CDLL("libc.so.6", use_errno=True)
class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]
def sleep_abs(t):
    ts = Timespec(t // 1_000_000_000, t % 1_000_000_000)
    libc.clock_nanosleep(1, 1, ctypes.byref(ts), None)  # CLOCK_MONOTONIC, TIMER_ABSTIME
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", port))
s.settimeout(30)
first = None
while True:
    data, _ = s.recvfrom(2048)
    instant = struct.unpack_from("<Q", data, 8)[0]
    first = first or time.monotonic_ns()
    if time.monotonic_ns() - first > 1_000_000_000:
        break
phase = instant
os.sched_setaffinity(0, {cpu})
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(99))
now = time.monotonic_ns()
k = (now - phase) // PERIOD + 1
end = now + int(secs * 1e9)
windows, late_starts = 0, 0
while True:
    t = phase + k * PERIOD
    if t > end:
        break
    sleep_abs(t - BEFORE)
    if time.monotonic_ns() > t:
        late_starts += 1
    while time.monotonic_ns() < t + AFTER:
        pass
    windows += 1
    k += 1
# The socket stays open (unread): datagrams beyond its buffer are dropped, the sends never fail.
open(log, "w").write(f"interfered from {phase + ((now - phase) // PERIOD + 1) * PERIOD} on a {PERIOD} ns grid: "
                     f"{windows} windows of {BEFORE + AFTER} ns, {late_starts} began after the instant\n")
PY

run() {
  local name=$1 offset=$2
  cat > "$out/rephase-$name.toml" <<TOML
[plan]
name = "rephase-$name"
cpus = "$cpu"

[[task]]
name = "hit"
period = "4ms"
offset = $offset
action = { kind = "udp", to = "127.0.0.1:$port", bytes = 16 }
TOML
  taskset -c "$all" python3 "$out/rephase-interferer.py" "$cpu" "$port" "$((secs - 3))" \
    "$out/rephase-$name-interferer.txt" &
  local ipid=$!
  sleep 0.3
  taskset -c "$all" ./target/release/punctual run "$out/rephase-$name.toml" -D "${secs}s" \
    --avoid-interference --no-store --json "$out/rephase-$name.json" \
    > "$out/rephase-$name.txt" 2> "$out/rephase-$name.err"
  wait "$ipid" || true
}
run auto '"auto"'
run fixed '"0ms"'

python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
print(f"{'offset':<7} {'releases':>8} {'late':>5} {'p50':>8} {'p99':>9} {'max':>9} {'<=10us':>8} {'missed':>6} {'rephased':>8} {'final offset':>13} {'margin':>9} {'cpu':>6}")
for name in ["auto", "fixed"]:
    d = json.load(open(f"{out}/rephase-{name}.json"))
    s = d["series"][0]
    c = d["dispatchers"][0]
    late = round((1 - s["within"]["10us"]) * s["count"])
    print(f"{name:<7} {s['count']:>8} {late:>5} {s['median']/1000:>6.1f}us {s['percentiles']['99']/1000:>7.1f}us "
          f"{s['max']/1000:>7.1f}us {100*s['within']['10us']:>7.2f}% {s.get('missed_periods', 0):>6} "
          f"{str(s.get('rephased', '-')):>8} {s.get('offset_ns', 0)/1e6:>10.3f} ms "
          f"{c['spin_margin_ns']/1000:>7.0f}us {100*c['cpu_ns']/max(c['duration_ns'], 1):>5.1f}%")
    print("  " + open(f"{out}/rephase-{name}-interferer.txt").read().strip())
    for line in open(f"{out}/rephase-{name}.txt"):
        if "re-phased" in line or "stays at offset" in line:
            print("  " + line.strip())
PY
