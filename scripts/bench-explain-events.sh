#!/usr/bin/env bash
# What the kernel's side of `--explain` costs per event, and what the ways of taking fewer events
# save, side by side in one script: a private tracefs instance holding the events `--explain`
# enables (crates/trace/src/capture.rs, `explain_events`) on one CPU, in several variants, around
# the same fixed wake-up load on that CPU (cyclictest, one SCHED_FIFO thread waking every
# INTERVAL us), rounds alternated. For each variant: the CPU's busy share (from its cpuidle
# residencies: `/proc/stat` charges by ticks, and a CPU that wakes 10,000 times a second reads as
# idle there), the events the instance took (the per-CPU `stats`), the extra busy time per event
# against the untraced rounds, and cyclictest's average latency (the cost on the wake-up path).
#
# Variants: off (no instance); explain (as `--explain` sets it up); no-record-cmd (`record-cmd`
# off: the kernel then stops saving each switched task's name; it is the top level's option, so
# this variant changes it for the whole machine for its rounds and puts it back); idle-filter
# (no-record-cmd, and cpu_idle keeps only entries: a filter drops exits); no-idle (no-record-cmd,
# cpu_idle not enabled).
#
# With HOG=1, a SCHED_IDLE CPU hog (stress-ng) fills the CPU's idle time instead, and the cost is
# the hog's throughput lost per event: it counts what runs in interrupts while the CPU would be
# idle (the busy share does not: cpuidle counts an interrupt taken in an idle state as idle), but
# a CPU that never idles takes no idle events.
#
# With SWITCH_OPS=N, the per-event cost is timed as scripts/bench-trace-overhead.sh times it, N
# context switches pinned to the CPU (stress-ng --switch) with and without the instance, but with no
# recorder reading the buffer (that script's 618 ns per event was measured with its recorder
# running), and only the variants off and explain.
#
# usage: [HOG=1 | SWITCH_OPS=N] scripts/bench-explain-events.sh [ROUNDS] [SECONDS] [INTERVAL_US] [CPU]
#   (root; needs cyclictest from rt-tests; default 3 rounds of 5 s at 100 us on the last CPU)
# Nothing is left changed: the instance and the private tracefs mount are removed on every exit.
set -euo pipefail
. "$(dirname "$0")/lib/cli.sh"
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench-explain-events: needs root (tracefs, SCHED_FIFO)" >&2; exit 2; }
command -v cyclictest >/dev/null || { echo "bench-explain-events: needs cyclictest (apt-get install rt-tests)" >&2; exit 2; }
exec python3 - "${1:-3}" "${2:-5}" "${3:-100}" "${4:-$(( $(nproc) - 1 ))}" <<'PY'
import os, re, signal, subprocess, sys, tempfile, time, statistics as st

ROUNDS, SECS, INTERVAL, CPU = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
HOG = os.environ.get("HOG") == "1"
SWITCH_OPS = int(os.environ.get("SWITCH_OPS", "0"))
EVENTS = ["sched/sched_switch", "sched/sched_waking", "irq/irq_handler_entry", "irq/irq_handler_exit",
          "irq/softirq_entry", "irq/softirq_exit", "power/cpu_idle", "sched/sched_wake_idle_without_ipi",
          "sched/sched_stat_runtime"]
VARIANTS = ["off", "explain", "no-record-cmd", "idle-filter", "no-idle"]

mnt = tempfile.mkdtemp(prefix="punctual-bench-tracefs-")
inst = None

def cleanup(*_):
    global inst
    if inst and os.path.isdir(inst):
        try:
            open(f"{inst}/tracing_on", "w").write("0")
        except OSError:
            pass
        os.rmdir(inst)
    inst = None
    if os.path.ismount(mnt):
        if "record_cmd" in globals():
            open(f"{mnt}/options/record-cmd", "w").write(record_cmd)
        subprocess.run(["umount", mnt], check=False)
    if os.path.isdir(mnt):
        os.rmdir(mnt)

def interrupted(*_):
    cleanup()
    sys.exit(130)

signal.signal(signal.SIGINT, interrupted)
signal.signal(signal.SIGTERM, interrupted)
subprocess.run(["mount", "-t", "tracefs", "nodev", mnt], check=True)
record_cmd = open(f"{mnt}/options/record-cmd").read().strip()
vectors = sorted(d for d in os.listdir(f"{mnt}/events/irq_vectors")
                 if d.endswith("_entry") or d.endswith("_exit")) if os.path.isdir(f"{mnt}/events/irq_vectors") else []
EVENTS += [f"irq_vectors/{v}" for v in vectors]

def setup(variant):
    global inst
    if variant == "off":
        return
    # record-cmd is the top level's option (an instance's copy cannot be written; it is copied when
    # the instance is made): set before, put back at the end.
    open(f"{mnt}/options/record-cmd", "w").write("1" if variant == "explain" else "0")
    inst = f"{mnt}/instances/punctual-bench-{os.getpid()}"
    os.mkdir(inst)
    w = lambda f, v: open(f"{inst}/{f}", "w").write(v)
    w("trace_clock", "mono")
    w("buffer_size_kb", "2048")
    w("tracing_cpumask", format(1 << CPU, "x"))
    for e in EVENTS:
        if variant == "no-idle" and e == "power/cpu_idle":
            continue
        if not os.path.isdir(f"{inst}/events/{e}"):
            continue
        if variant == "idle-filter" and e == "power/cpu_idle":
            w(f"events/{e}/filter", "state != 4294967295")
        w(f"events/{e}/enable", "1")
    w("tracing_on", "1")

def events_taken():
    if inst is None:
        return 0
    s = open(f"{inst}/per_cpu/cpu{CPU}/stats").read()
    g = lambda k: int(re.search(rf"^{k}: (\d+)", s, re.M).group(1))
    return g("entries") + g("overrun")

def idle_us():
    d = f"/sys/devices/system/cpu/cpu{CPU}/cpuidle"
    return sum(int(open(f"{d}/{st}/time").read()) for st in os.listdir(d) if st.startswith("state"))

def steal_ns():
    for line in open("/proc/stat"):
        if line.startswith(f"cpu{CPU} "):
            return int(line.split()[8]) * 1e9 / os.sysconf("SC_CLK_TCK")
    return 0

def one(variant):
    setup(variant)
    loops = int(SECS * 1e6 / INTERVAL)
    hog = None
    if HOG:
        hog = subprocess.Popen(["stress-ng", "--cpu", "1", "--cpu-method", "int64", "--sched", "idle",
                                "--taskset", str(CPU), "--metrics-brief", "-t", f"{SECS + 1:g}s"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(0.5)
    i0, s0, t0 = idle_us(), steal_ns(), time.monotonic()
    out = subprocess.run(["cyclictest", "-q", "-m", "-t1", "-p", "95", "-a", str(CPU), "-i", str(INTERVAL),
                          "-l", str(loops)], capture_output=True, text=True, check=True).stdout
    t1, i1, s1 = time.monotonic(), idle_us(), steal_ns()
    ev = events_taken()
    ops = None
    if hog:
        text = hog.communicate()[0]
        ops = float(re.search(r" cpu\s+\d+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+([\d.]+)", text).group(1))
    cleanup_instance()
    avg = int(re.search(r"Avg:\s+(\d+)", out).group(1))
    # Busy: every moment the CPU was not in an idle state (the cpuidle residencies, in us).
    return {"busy": 1 - (i1 - i0) / ((t1 - t0) * 1e6), "events": ev / (t1 - t0), "avg": avg,
            "wall": t1 - t0, "steal_ms": (s1 - s0) / 1e6, "ops": ops}

def cleanup_instance():
    global inst
    if inst:
        open(f"{inst}/tracing_on", "w").write("0")
        os.rmdir(inst)
        inst = None

def switch_round(variant):
    """Seconds for a fixed number of context switches pinned to the CPU, and the events taken."""
    setup(variant)
    t0 = time.monotonic()
    subprocess.run(["taskset", "-c", str(CPU), "stress-ng", "--switch", "1", "--switch-ops", str(SWITCH_OPS),
                    "--quiet"], check=True)
    dt = time.monotonic() - t0
    ev = events_taken()
    cleanup_instance()
    return dt, ev

if SWITCH_OPS:
    res = {v: [] for v in ("off", "explain")}
    try:
        print(f"CPU {CPU}, {SWITCH_OPS} stress-ng --switch operations a round, {ROUNDS} rounds, plain and traced alternated")
        for r in range(1, ROUNDS + 1):
            for v in res:
                res[v].append(switch_round(v))
                print(f"{r:>5} {v:8} {res[v][-1][0]:.3f} s {res[v][-1][1]:>10,} events", flush=True)
    finally:
        cleanup()
    off = st.median(x[0] for x in res["off"])
    t, e = st.median(x[0] for x in res["explain"]), st.median(x[1] for x in res["explain"])
    print(f"median {off:.3f} s plain, {t:.3f} s traced, {e:,.0f} events: {(t - off) * 1e9 / e:.0f} ns per event")
    sys.exit(0)

res = {v: [] for v in VARIANTS}
try:
    print(f"CPU {CPU}, cyclictest every {INTERVAL} us for {SECS:g} s a round, {ROUNDS} rounds, variants alternated")
    print(f"{'round':>5} {'variant':14} {'busy':>8} {'events/s':>10} {'avg lat.':>9} {'steal':>8}")
    for r in range(1, ROUNDS + 1):
        for v in VARIANTS:
            m = one(v)
            res[v].append(m)
            hog = f" hog {m['ops']:.1f} ops/s" if m["ops"] else ""
            print(f"{r:>5} {v:14} {100 * m['busy']:7.2f}% {m['events']:10,.0f} {m['avg']:7d} us {m['steal_ms']:6.0f} ms{hog}", flush=True)
finally:
    cleanup()
med = lambda v, k: st.median(m[k] for m in res[v])
off = med("off", "busy")
print()
if HOG:
    # Every cost of the traced events, in interrupts too, comes out of the hog's time.
    base = med("off", "ops")
    print(f"{'variant':14} {'hog ops/s':>10} {'events/s':>10} {'hog lost':>9} {'per event':>10} {'avg lat.':>9}")
    for v in VARIANTS:
        o, e = med(v, "ops"), med(v, "events")
        lost = 1 - o / base
        per = f"{lost * 1e9 / e:7.0f} ns" if e else "      -"
        print(f"{v:14} {o:10.1f} {e:10,.0f} {100 * lost:+8.2f}% {per:>10} {med(v, 'avg'):7.0f} us")
    print("(medians of the rounds; the SCHED_IDLE hog's throughput lost against the untraced rounds)")
    sys.exit(0)
print(f"{'variant':14} {'busy':>8} {'events/s':>10} {'extra busy':>11} {'per event':>10} {'avg lat.':>9}")
for v in VARIANTS:
    b, e = med(v, "busy"), med(v, "events")
    extra = b - off
    per = f"{extra * 1e9 / e:7.0f} ns" if e else "      -"
    print(f"{v:14} {100 * b:7.2f}% {e:10,.0f} {100 * extra:+10.2f}% {per:>10} {med(v, 'avg'):7.0f} us")
print("(medians of the rounds; extra busy against the untraced rounds, in % of one CPU)")
print("(busy is out of the idle states: an interrupt taken while idle, and its events, count as idle; HOG=1 counts them)")
PY
