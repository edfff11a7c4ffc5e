#!/usr/bin/env bash
# Inside the replay's UDP sends (docs/benchmarks.md, "The datagram built before its instant"): a
# shielded, explained `punctual traffic replay` of N datagrams 500 us apart to a loopback receiver,
# with a tracefs instance of its own on the sending CPU holding the send path's tracepoints
# (sys_enter_sendto/setsockopt, fib_table_lookup, net_dev_queue, net_dev_start_xmit,
# netif_rx_entry) beside the irq, vector, softirq, sched, timer and ipi events, on the x86-tsc
# clock (set against CLOCK_MONOTONIC by the `now` of the trace's own hrtimer_expire_entry events).
# Prints each segment's p50/p99/p99.9, how often the send after the tick was slow, and the events
# around each `dispatcher` example of the run's document. Leaves tracefs as it found it (the
# instance is removed; a tracefs it had to mount is unmounted). Root, x86.
# Usage: [PUNCTUAL=target/release/punctual] [N=40000] [CPU=1] scripts/trace-send-path.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
P=$(realpath "${PUNCTUAL:-target/release/punctual}")
N=${N:-40000}; CPU=${CPU:-1}; PORT=$(( 43000 + $$ % 1000 ))
OUT=${1:-$(mktemp -d)}; mkdir -p "$OUT"
T=/sys/kernel/tracing; MOUNTED=""
if [ ! -e "$T/instances" ]; then mount -t tracefs nodev "$T"; MOUNTED=1; fi
I=$T/instances/punctual-send-path-$$
mkdir "$I"
cleanup() { echo 0 > "$I/tracing_on" 2>/dev/null || true; rmdir "$I" 2>/dev/null || true; [ -z "$MOUNTED" ] || umount "$T"; }
trap cleanup EXIT
python3 scripts/make-udp-pcap.py "$OUT/udp.pcap" "$N" "$PORT"
printf '%x' $(( 1 << CPU )) > "$I/tracing_cpumask"
echo x86-tsc > "$I/trace_clock"
echo 131072 > "$I/buffer_size_kb"
for e in syscalls/sys_enter_sendto syscalls/sys_exit_sendto syscalls/sys_enter_setsockopt \
  syscalls/sys_exit_setsockopt net/net_dev_queue net/net_dev_start_xmit net/netif_rx_entry \
  fib/fib_table_lookup irq irq_vectors sched/sched_switch sched/sched_wakeup \
  timer/hrtimer_expire_entry timer/hrtimer_expire_exit ipi; do
  echo 1 > "$I/events/$e/enable"
done
python3 -c "
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('127.0.0.1', $PORT)); s.settimeout(5)
try:
    while True: s.recv(4096)
except OSError: pass" & RX=$!
sleep 0.3
echo 1 > "$I/tracing_on"
"$P" traffic replay "$OUT/udp.pcap" --udp-to "127.0.0.1:$PORT" --interval 500us -a "$CPU" --shield \
  --avoid-interference --explain --no-store --json "$OUT/replay.json" > "$OUT/replay.txt"
echo 0 > "$I/tracing_on"
wait "$RX" || true
cat "$I/trace" > "$OUT/send-path.trace"
sed -n 4p "$OUT/replay.txt"; grep '^gap error' "$OUT/replay.txt" | head -1
python3 - "$OUT/send-path.trace" "$OUT/replay.json" <<'PY'
import bisect, json, re, sys
evs, cal, ticks, rows, cur = [], [], [], [], None
for line in open(sys.argv[1]):
    m = re.match(r'\s*(\S+)-(\d+)\s+\[(\d+)\]\s+(\S+)\s+(\d+): (\S+?):? (.*)', line)
    if not m:
        continue
    t, ev, rest = int(m.group(5)), m.group(6), m.group(7)
    evs.append((t, m.group(1), ev, rest[:70]))
    if ev == 'hrtimer_expire_entry' and 'now=' in rest:
        cal.append((t, int(rest.split('now=')[1].split()[0])))
    if ev == 'local_timer_entry':
        ticks.append(t)
    # A send: a whole sendto (no MSG_MORE), or the setsockopt that pushes a built datagram.
    if (ev == 'sys_sendto(fd' and 'flags: 0x8000' not in rest and 'flags: 0x10' not in rest) or \
            (ev == 'sys_setsockopt(fd' and 'level: 0x11' in rest):
        cur = {'enter': t}
        rows.append(cur)
    elif cur is not None and ev in ('net_dev_queue', 'net_dev_start_xmit', 'netif_rx_entry'):
        cur.setdefault(ev, t)
(t0, m0), (t1, m1) = cal[0], cal[-1]
ns_per = (m1 - m0) / (t1 - t0)
us = lambda d: d * ns_per / 1000
rows = [r for r in rows if 'netif_rx_entry' in r]
q = lambda v, p: sorted(v)[int(p * (len(v) - 1))]
print(f"{len(rows)} sends traced on the x86-tsc clock ({1 / ns_per:.3f} GHz)")
segs = [('enter', 'net_dev_queue'), ('net_dev_queue', 'net_dev_start_xmit'),
        ('net_dev_start_xmit', 'netif_rx_entry'), ('enter', 'net_dev_start_xmit')]
for a, b in segs:
    v = [us(r[b] - r[a]) for r in rows]
    print(f"  {a} to {b}: p50 {q(v, .5):.2f} us, p99 {q(v, .99):.2f} us, p99.9 {q(v, .999):.2f} us")
whole = [us(r['net_dev_start_xmit'] - r['enter']) for r in rows]
med = q(whole, .5)
first, other = [0, 0], [0, 0]
for r, w in zip(rows, whole):
    i = bisect.bisect_left(ticks, r['enter']) - 1
    if i < 0:
        continue
    after = us(r['enter'] - ticks[i])
    b = first if after < 500 else other
    b[0] += 1
    b[1] += w > med + 4
print(f"  slow (over p50 + 4 us): {100 * first[1] / max(first[0], 1):.2f} % of the sends within 500 us after "
      f"the tick, {100 * other[1] / max(other[0], 1):.2f} % of the others")
mono = lambda t: m0 + (t - t0) * ns_per
ms = [mono(e[0]) for e in evs]
for e in json.load(open(sys.argv[2]))['settings']['explain']['examples']:
    if e['cause'] != 'dispatcher' or 'still late' in e['why']:
        continue
    T = e['target_ns']
    print(f"dispatcher, {e['lateness_ns'] / 1000:.2f} us late ({e['why']}); events from 25 us before its instant:")
    for i in range(bisect.bisect_left(ms, T - 25_000), bisect.bisect_right(ms, T + 15_000)):
        print(f"  {(ms[i] - T) / 1000:8.2f} us  {evs[i][2]} {evs[i][3]}")
PY
echo "kept in $OUT"
