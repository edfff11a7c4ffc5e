#!/usr/bin/env bash
# Issue 26: every late release explained, and what it costs. Runs one after the other on this
# machine, each with the command printed beside its figures, the load average and the steal time:
#  a. cost of --explain: 30 wake clients at 10 ms (3,000 releases a second) run ROUNDS times
#     alternating without and with --explain (both sides see the same machine): the clients'
#     lateness percentiles and share within 10 us, the dispatcher's CPU, the trace drain thread's
#     CPU (settings.explain.drain_cpu_ns) in % of one CPU, and the kernel's tracing share estimated
#     as events/s x COST_NS (120 ns per traced event: scripts/bench-explain-events.sh), with the
#     busy share measured on the CPUs without the dispatcher beside it (cpuidle residencies);
#  b. kurt-periodic (--quick unless FULL=1 or the argument `full`), explained by default: its tables,
#     its late releases by cause with the floor per row, and its targets;
#  c. the 10 us mark plan (docs/benchmarks.md, "A release every 10 us") shielded for DURATION,
#     explained: its late and missed releases by cause;
#  d. one minute of UDP packets 500 us apart (the capture made as scripts/bench-traffic-veth.sh
#     makes it) replayed shielded, off the tick (--avoid-interference), to a loopback receiver
#     taking kernel timestamps (SO_TIMESTAMPNS),
#     explained: the sender's gaps within 1 % and their causes, and the receiver's inter-arrivals.
# It ends with the issue's targets, each PASS or FAIL with the measured figure. Every document
# lands in $OUT (default target/bench/explain). Needs root (tracefs, shields) and a release build.
# Another punctual's shield on the CPU (a test elsewhere) makes a shielded run wait for it (up to 2 min).
# Usage: [ROUNDS=3] [DURATION=10s] [REPLAY_N=120000] [COST_NS=120] [ONLY=abcd] [CPU=N] [TRACES=1] scripts/bench-explain.sh [full]
# PUNCTUAL=/path/to/punctual measures that binary instead of building the release one.
# TRACES=1 keeps the kernel traces b, c and d were explained from in $OUT/traces (--explain-trace;
# a full run took 125 MB, 117 MB of them kurt-periodic's rows), to read a late release again.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -n "${PUNCTUAL:-}" ] || cargo build --release -q -p punctual
# Absolute: the plans written below name it, and a plan's relative paths are its directory's.
P=$(realpath "${PUNCTUAL:-$PWD/target/release/punctual}")
dur=${DURATION:-10s}
rounds=${ROUNDS:-3}
replay_n=${REPLAY_N:-120000}
out=${OUT:-target/bench/explain}
full=""
[ "${1:-}" = full ] || [ -n "${FULL:-}" ] && full=1
mkdir -p "$out"
only=${ONLY:-abcd}
# --explain-trace FILE for part $1, when TRACES=1.
kept() { [ -n "${TRACES:-}" ] && mkdir -p "$out/traces" && printf '%s\n' --explain-trace "$out/traces/$1.trace"; return 0; }
for part in a b c d; do
  case $only in *$part*) rm -f "$out"/targets-$part.tsv ;; esac
done
# The figures are read from the documents by this helper (kept beside them).
H=$out/helper.py
cat > "$H" <<'PYEOF'
# bench-explain.sh's figures, read from the result documents (written to $OUT by the script).
import json, os, socket, statistics as st, sys, time

CAUSES = ["steal", "throttle", "task", "irq", "softirq", "wake_path", "lead", "dispatcher", "unexplained"]
OWN = ("dispatcher", "lead", "wake_path")

def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except Exception:
        return None

def target(out, name, wanted, measured, ok):
    with open(os.path.join(out, f"targets-{name[0]}.tsv"), "a") as f:
        f.write(f"{name}\t{wanted}\t{measured}\t{'PASS' if ok else ('FAIL' if ok is not None else 'n/a')}\n")

def steal(d):
    s = (d or {}).get("settings", {}).get("steal_ns")
    if not s:
        return "steal: not reported"
    return "steal " + ", ".join(f"CPU {c} {int(v)/1e6:.1f} ms" for c, v in sorted(s.items()))

def causes_of(series):
    t = {c: 0 for c in CAUSES}
    for s in series:
        for c, v in (s.get("lateness_causes") or {}).items():
            t[c] = t.get(c, 0) + int(v)
    return t

def causes_text(t):
    n = sum(t.values())
    if n == 0:
        return "none late"
    return ", ".join(f"{c} {v} ({100*v/n:.0f} %)" for c, v in sorted(t.items(), key=lambda x: -x[1]) if v)

def offenders(series, k=3):
    agg = {}
    for s in series:
        for o in s.get("lateness_offenders") or []:
            key = (o.get("cause"), o.get("name"))
            agg[key] = agg.get(key, 0) + int(o.get("count", 0))
    top = sorted(agg.items(), key=lambda x: -x[1])[:k]
    return "; ".join(f"{c} {n}: {v}" for (c, n), v in top) or "-"

def examples(d, causes, k=2):
    x = (d or {}).get("settings", {}).get("explain") or {}
    ex = [e for e in (x.get("examples") or []) if e.get("cause") in causes][:k]
    for e in ex:
        print("     example: " + json.dumps(e)[:600])

def ns(v):
    return "-" if v is None else f"{v/1000:.2f} us"

def busy(out, m, r):
    """Per CPU, the share of the run's wall time it was out of its idle states."""
    try:
        a = open(f"{out}/cost-{m}-{r}.idle0").read().split()
        b = open(f"{out}/cost-{m}-{r}.idle1").read().split()
    except OSError:
        return {}
    wall = int(b[0]) - int(a[0])
    i0 = dict(x.split(":") for x in a[1:]); i1 = dict(x.split(":") for x in b[1:])
    return {int(c): 1 - (int(i1[c]) - int(i0[c])) / wall for c in i0 if c in i1 and wall > 0}

def cost(out, rounds, cost_ns, disp_cpu):
    rows = {"plain": [], "explain": []}
    print(f"   {'round':>5} {'side':<8} {'<=10us':>8} {'late':>5} {'p50':>9} {'p99':>9} {'p99.9':>9} {'max':>10} {'disp CPU':>8} {'drain':>6} {'kernel':>6} {'steal':>7}")
    for r in range(1, rounds + 1):
        for m in ("plain", "explain"):
            d = load(f"{out}/cost-{m}-{r}.json")
            if d is None:
                print(f"   {r:>5} {m:<8} (no document: see {out}/cost-{m}-{r}.err)")
                continue
            cl = [s for s in d["series"] if s["kind"] == "lateness" and "(dispatcher)" not in s["name"]]
            n = sum(s["count"] for s in cl)
            w = sum(s["within"]["10us"] * s["count"] for s in cl)
            # Percentiles over the 30 clients: the median client's p50, the worst client's tail.
            p50 = st.median(s["percentiles"]["50"] for s in cl) if cl else None
            p99 = max((s["percentiles"]["99"] for s in cl), default=None)
            p999 = max((s["percentiles"]["99.9"] for s in cl), default=None)
            mx = max((s["max"] for s in cl), default=None)
            c = d["dispatchers"][0]
            use = 100 * c["cpu_ns"] / max(c["duration_ns"], 1)
            sl = sum(int(v) for v in d["settings"].get("steal_ns", {}).values()) / 1e6
            x = d["settings"].get("explain")
            drain = kern = None
            if x:
                secs = x["window_ns"] / 1e9
                drain = 100 * x["drain_cpu_ns"] / x["window_ns"]
                kern = 100 * (x["events"] / secs) * cost_ns / 1e9
            rows[m].append((100 * w / max(n, 1), drain, kern, x, busy(out, m, r)))
            f = lambda v: "-" if v is None else f"{v:5.2f}%"
            print(f"   {r:>5} {m:<8} {100*w/max(n,1):7.2f}% {n-round(w):>5} {ns(p50):>9} {ns(p99):>9} {ns(p999):>9} {ns(mx):>10} {use:7.1f}% {f(drain):>6} {f(kern):>6} {sl:5.0f}ms")
    x = next((r[3] for r in rows["explain"] if r[3]), None)
    if x:
        k = x.get("events_by_kind", {})
        tot = max(sum(k.values()), 1)
        print(f"   trace: {x['events']/(x['window_ns']/1e9):.0f} events/s; by kind: " + ", ".join(f"{n} {100*v/tot:.0f} %" for n, v in sorted(k.items(), key=lambda x: -x[1])[:6]))
    print(f"   drain: the trace thread's CPU; kernel: events/s x {cost_ns:.0f} ns per traced event (scripts/bench-explain-events.sh); both in % of one CPU.")
    # Measured: the busy share of the CPUs without the dispatcher (its CPU spins, so what the
    # trace costs there only shortens the spin), with against without, beside what the estimate
    # gives for the same CPUs (their events x the per-event cost, and the drain thread, which
    # runs there).
    others = lambda b: sum(v for c, v in b.items() if c != disp_cpu)
    bp = [others(r[4]) for r in rows["plain"] if r[4]]
    be = [others(r[4]) for r in rows["explain"] if r[4]]
    if bp and be:
        est = []
        for r in rows["explain"]:
            x = r[3]
            if x and r[1] is not None:
                secs = x["window_ns"] / 1e9
                ev = sum(int(v) for c, v in (x.get("events_by_cpu") or {}).items() if int(c) != disp_cpu)
                est.append(100 * ev / secs * cost_ns / 1e9 + r[1])
        print(f"   measured on the CPUs without the dispatcher: busy {100*st.mean(bp):.2f} % without, {100*st.mean(be):.2f} % with "
              f"(rounds {100*min(bp):.2f}-{100*max(bp):.2f} and {100*min(be):.2f}-{100*max(be):.2f}): "
              f"{100*(st.mean(be)-st.mean(bp)):+.2f} % of a CPU; estimated for them {st.mean(est) if est else float('nan'):.2f} %")
    print("   p50: the median client's; p99, p99.9, max: the worst client's (lateness of the wake-up after the instant).")
    if rows["plain"] and rows["explain"]:
        a = [r[0] for r in rows["plain"]]; b = [r[0] for r in rows["explain"]]
        noise = max(max(a) - min(a), max(b) - min(b))
        diff = st.mean(b) - st.mean(a)
        print(f"   within 10 us: without {st.mean(a):.2f} % (range {min(a):.2f}-{max(a):.2f}), with {st.mean(b):.2f} % (range {min(b):.2f}-{max(b):.2f}); difference {diff:+.2f} points, noise (widest range) {noise:.2f}")
        target(out, "a. --explain within noise at 3,000 releases/s", f"|diff| <= noise", f"{diff:+.2f} vs {noise:.2f} points", abs(diff) <= noise)
        tot = [r[1] + r[2] for r in rows["explain"] if r[1] is not None]
        dr = [r[1] for r in rows["explain"] if r[1] is not None]
        if tot:
            target(out, "a. --explain cost (drain + kernel est.)", "<= 2 % of a CPU", f"{max(tot):.2f} % (drain {max(dr):.2f} %)", max(tot) <= 2.0)

def kurt(out):
    d = load(f"{out}/kurt.json")
    if d is None:
        print("   no document: see kurt.err"); return
    rows = {}
    for s in d["series"]:
        parts = s["name"].split()
        if len(parts) != 4:
            continue
        mode, load_, n, kind = parts
        rows.setdefault((load_, int(n), mode), {})[kind] = s
    print(f"   {'row':<22} {'<=10us':>8} {'floor':>8} {'late':>5} {'steal':>6}  causes")
    allc = {c: 0 for c in CAUSES}
    for key in sorted(rows):
        r = rows[key]; iv = r.get("interval"); lt = r.get("lateness") or {}
        w = iv["within"]["10us"] * 100 if iv and iv.get("count") else float("nan")
        fl = (iv or {}).get("floor_instants", {}).get("10us")
        fl = "-" if fl is None else f"{100*(1-fl):.2f}%"
        t = causes_of([lt])
        for c, v in t.items():
            allc[c] += v
        sl = (iv or {}).get("steal_share")
        sl = "-" if sl is None else f"{100*sl:.2f}%"
        print(f"   {key[2]+' '+key[0]+' '+str(key[1]):<22} {w:7.2f}% {fl:>8} {sum(t.values()):>5} {sl:>6}  {causes_text(t)}")
        o = offenders([lt], 2)
        if o != "-":
            print(f"   {'':<22} top: {o}")
        dp = lt.get("dispatcher")
        if dp:
            us = lambda v: "-" if v is None else f"{v/1000:.0f}"
            m = ", ".join(f"CPU {c['cpu']} {us(c['margin_ns'])}/{us(c.get('margin_cap_ns'))} us, {100*c['cpu_share']:.1f} %{', yielded ' + str(c['yields']) + 'x' if c.get('yields') else ''}" for c in dp["cpus"])
            ld = dp.get("leads_ns") or [None] * 3
            mv = dp.get("rephased") or 0
            mv = f"; moved {mv}x ({', '.join(dp.get('rephased_tasks') or [])})" if mv else ""
            print(f"   {'':<22} margin/cap {m}; leads {'/'.join(us(v) for v in ld)} us (cap {us(dp.get('lead_cap_ns'))}){mv}")
    print(f"   all rows: {causes_text(allc)}")
    n = sum(allc.values())
    target(out, "b. kurt-periodic: unexplained share of late", "<= 5 %", f"{100*allc['unexplained']/max(n,1):.2f} % of {n}", allc["unexplained"] <= 0.05 * n)
    # punctual's own causes, in the rows punctual releases ((c), (d)): the baselines' wake path is the kernel's.
    wake_rows = [r.get("lateness") or {} for k, r in rows.items() if k[2].startswith("wake")]
    pc = causes_of(wake_rows)
    # A `task` that was punctual's own idle poller (punctual-idle<cpu>) is punctual's too.
    poller = sum(o["count"] for lt in wake_rows for o in (lt.get("lateness_offenders") or [])
                 if o.get("cause") == "task" and o.get("name", "").startswith("punctual-idle"))
    own = sum(pc[c] for c in OWN) + poller
    target(out, "b. kurt-periodic (c)/(d): late counted dispatcher/lead/wake_path, task by punctual's poller", "0 (punctual's own)", f"{pc['dispatcher']}/{pc['lead']}/{pc['wake_path']}, {poller} of {sum(pc.values())}", own == 0)
    def within(mode, load_, n):
        iv = rows.get((load_, n, mode), {}).get("interval")
        return None if not iv or not iv.get("count") else iv["within"]["10us"]
    def floor(mode, load_, n):
        iv = rows.get((load_, n, mode), {}).get("interval") or {}
        f = iv.get("floor_instants", {}).get("10us")
        return None if f is None else 1 - f
    for m, label in (("wake", "(c)"), ("wake-shielded", "(d)")):
        v, f = within(m, "idle", 30), floor(m, "idle", 30)
        if v is not None:
            ok = v >= 0.995 or (f is not None and v >= f - 0.002)
            target(out, f"b. {label} 30 idle within 10 us", ">= 99.5 % or floor - 0.2", f"{100*v:.2f} % (floor {'-' if f is None else f'{100*f:.2f} %'})", ok)
    modes = sorted({k[2] for k in rows})
    c_mode = "wake" if "wake" in modes else None
    b_mode = "abs" if "abs" in modes else None
    worse = []
    for (l, n, m) in rows:
        if m == c_mode and b_mode:
            c, b = within(c_mode, l, n), within(b_mode, l, n)
            if c is not None and b is not None and c < b:
                worse.append(f"{l} {n}: {100*c:.2f} < {100*b:.2f}")
    if c_mode and b_mode:
        target(out, "b. (c) >= (b) in every row", "every row", "; ".join(worse) or "yes", not worse)
    tg = None
    a = [within(m, "idle", 30) for m in ("rel", "abs")]
    c = within("wake", "idle", 30)
    if c is not None and None not in a:
        best = min(1 - a[0], 1 - a[1])
        ratio = best / (1 - c) if c < 1 else float("inf")
        target(out, "b. fewer outside 10 us than the better baseline", ">= 10x", f"{ratio:.1f}x", ratio >= 10)
    if "wake-shielded" in modes:
        v = {n: within("wake-shielded", "idle", n) for n in (1, 10, 20)}
        if None not in v.values():
            target(out, "b. (d) 1 process not worse than 10 and 20", ">= min(10, 20)", f"{100*v[1]:.2f} vs {100*v[10]:.2f} / {100*v[20]:.2f} %", v[1] >= min(v[10], v[20]))
    print(f"   ({steal(d)})")
    # The experiment keeps its examples per series: punctual's own in the (c)/(d) rows, two a row.
    for key in sorted(rows):
        if not key[2].startswith("wake"):
            continue
        lt = rows[key].get("lateness") or {}
        ex = [e for e in (lt.get("lateness_examples") or []) if e.get("cause") in OWN + ("unexplained",)][:2]
        for e in ex:
            print(f"     example ({key[2]} {key[0]} {key[1]}): " + json.dumps(e)[:600])

def dense(out):
    d = load(f"{out}/dense-10us.json")
    if d is None:
        print("   no document: see dense-10us.err"); return
    s = [x for x in d["series"] if x["kind"] == "lateness" and "(dispatcher)" not in x["name"]]
    n = sum(x["count"] for x in s); missed = sum(x.get("missed_periods", 0) for x in s)
    w = sum(x["within"]["10us"] * x["count"] for x in s)
    t = causes_of(s)
    late = sum(t.values())
    fl = s[0].get("floor_instants", {}).get("10us") if s else None
    print(f"   releases {n}, missed {missed}, within 10 us {100*w/max(n,1):.2f} %, floor {'-' if fl is None else f'{100*(1-fl):.2f} %'}; {steal(d)}")
    print(f"   late or missed releases explained: {late}: {causes_text(t)}")
    print(f"   top: {offenders(s)}")
    target(out, "c. 10 us plan: unexplained share of late", "<= 5 %", f"{100*t['unexplained']/max(late,1):.2f} % of {late}", t["unexplained"] <= 0.05 * late)
    target(out, "c. 10 us plan: late counted dispatcher/lead/wake_path", "0", f"{t['dispatcher']}/{t['lead']}/{t['wake_path']}", sum(t[c] for c in OWN) == 0)
    examples(d, OWN + ("unexplained",))

def replay(out, spacing):
    d = load(f"{out}/replay.json")
    if d is None:
        print("   no document: see replay.err"); return
    tr = d.get("traffic", {})
    s = [x for x in d["series"] if x.get("lateness_causes") is not None]
    t = causes_of(s)
    late = sum(t.values())
    g = tr.get("gaps_within_1pct")
    print(f"   sent {tr.get('sent')}/{tr.get('scheduled')}, gaps within 1 %: {'-' if g is None else f'{100*g:.2f} %'}; {steal(d)}")
    print(f"   gaps outside 1 % explained: {late}: {causes_text(t)}")
    print(f"   top: {offenders(s)}")
    rx = load(f"{out}/receiver.json")
    if rx:
        print(f"   receiver (kernel timestamps): {rx['received']} datagrams; inter-arrival within 1 %: {100*rx['within_1pct']:.2f} %, "
              f"within 7 %: {100*rx['within_7pct']:.2f} %, p99 |error| {rx['p99_ns']/1000:.1f} us, max {rx['max_ns']/1000:.1f} us")
    if g is not None:
        hw = sum(t[c] for c in ("steal", "irq", "softirq"))
        target(out, "d. replay: gaps within 1 % (or all outside steal/irq/softirq)", ">= 99.7 %", f"{100*g:.2f} % ({hw} of {late} outside: steal/irq/softirq)", g >= 0.997 or hw == late)
    target(out, "d. replay: unexplained share of late gaps", "<= 5 %", f"{100*t['unexplained']/max(late,1):.2f} % of {late}", t["unexplained"] <= 0.05 * late)
    examples(d, OWN + ("unexplained",))

def receive(port, path):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, 35, 1)  # SO_TIMESTAMPNS
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind(("127.0.0.1", port))
    s.settimeout(240)
    ts = []
    while True:
        try:
            _, anc, _, _ = s.recvmsg(128, 64)
        except socket.timeout:
            break
        for lvl, typ, data in anc:
            if lvl == socket.SOL_SOCKET and typ == 35:
                sec, nsec = int.from_bytes(data[:8], "little"), int.from_bytes(data[8:16], "little")
                ts.append(sec * 10**9 + nsec)
        s.settimeout(2)
    spacing = 500_000
    err = sorted(abs(b - a - spacing) for a, b in zip(ts, ts[1:]))
    n = max(len(err), 1)
    json.dump({"received": len(ts), "within_1pct": sum(e <= spacing / 100 for e in err) / n,
               "within_7pct": sum(e <= 7 * spacing / 100 for e in err) / n,
               "p99_ns": err[int(n * 0.99)] if err else 0, "max_ns": err[-1] if err else 0}, open(path, "w"))

def targets(out):
    rows = []
    for part in "abcd":
        try:
            rows += [l.rstrip("\n").split("\t") for l in open(os.path.join(out, f"targets-{part}.tsv"))]
        except FileNotFoundError:
            rows.append((f"{part}. (not run)", "-", "-", "n/a"))
    w = max(len(r[0]) for r in rows)
    print(f"   {'target':<{w}}  {'wanted':<24} {'result':<6} measured")
    for name, wanted, measured, ok in rows:
        print(f"   {name:<{w}}  {wanted:<24} {ok:<6} {measured}")

cmd = sys.argv[1]
if cmd == "cost":
    cost(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]))
elif cmd == "kurt":
    kurt(sys.argv[2])
elif cmd == "dense":
    dense(sys.argv[2])
elif cmd == "replay":
    replay(sys.argv[2], int(sys.argv[3]))
elif cmd == "receive":
    receive(int(sys.argv[2]), sys.argv[3])
elif cmd == "targets":
    targets(sys.argv[2])
PYEOF
# Parts a, c and d run on CPU (default: the last online CPU).
cpu=${CPU:-$(tr ',' '\n' < /sys/devices/system/cpu/online | tail -1 | sed 's/.*-//')}
all=$(cat /sys/devices/system/cpu/online)
rx=""
trap '[ -n "$rx" ] && kill "$rx" 2>/dev/null || true' EXIT
# The machine around each figure: load average and the steal time of every CPU since the last call.
steal_total() { awk '/^cpu[0-9]/ { s += $9 } END { print s + 0 }' /proc/stat; }
last_steal=$(steal_total)
machine() {
  local now; now=$(steal_total)
  printf '   machine: load average %s; steal since the last figure %d ms (all CPUs); %s\n' \
    "$(cut -d' ' -f1-3 /proc/loadavg)" $(( (now - last_steal) * 1000 / $(getconf CLK_TCK) )) "$(date +%H:%M:%S)"
  last_steal=$now
}
# Run a punctual command; while another punctual shields the CPU, wait and try again (2 min).
again() { # stderr_file command...
  local err=$1; shift
  for _ in $(seq 1 24); do
    "$@" 2> "$err" && return 0
    grep -q 'already shielded' "$err" || return 1
    sleep 5
  done
  return 1
}
show() { printf '   $ %s\n' "$*"; }
echo "# $(date -Is) $(uname -r), $(getconf _NPROCESSORS_ONLN) CPUs, $(git rev-parse --short HEAD); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# other processes using the most CPU now:"
ps -eo pcpu,comm --sort=-pcpu --no-headers | head -5 | sed 's/^/#   /'

# CLOCK_MONOTONIC (us) and each CPU's time in its idle states since boot (us, the cpuidle
# residencies): a run's busy share per CPU, every cost in it (/proc/stat charges by ticks).
idle_now() {
  python3 -c 'import os, time
d = "/sys/devices/system/cpu"
cpus = sorted(int(c[3:]) for c in os.listdir(d) if c[3:].isdigit() and os.path.isdir(f"{d}/{c}/cpuidle"))
print(int(time.monotonic() * 1e6), *(f"{c}:" + str(sum(int(open(f"{d}/cpu{c}/cpuidle/{s}/time").read())
      for s in os.listdir(f"{d}/cpu{c}/cpuidle") if s.startswith("state"))) for c in cpus))'
}

if [[ $only == *a* ]]; then
echo
echo "== a. cost of --explain at 3,000 releases/s: 30 wake clients at 10 ms, $rounds pairs of $dur"
plan="$out/wake-30.toml"
{
  printf '[plan]\nname = "wake-30"\nspin_margin = "auto"\ncpus = "%s"\n\n' "$cpu"
  for i in $(seq 0 29); do
    printf '[[task]]\nname = "p%d"\nperiod = "10ms"\noffset = "auto"\n' "$i"
    printf 'action = { kind = "wake", channel = "bx-%d-%d", spawn = ["%s", "__periodic", "--mode", "wake", "--period-ns", "10000000", "--first-ns", "0", "--until-ns", "0", "--channel", "bx-%d-%d"] }\n\n' \
      $$ "$i" "$P" $$ "$i"
  done
} > "$plan"
show "punctual run $plan -D $dur --no-store [--explain] --json $out/cost-{plain,explain}-N.json"
for r in $(seq 1 "$rounds"); do
  for mode in plain explain; do
    extra=()
    [ "$mode" = explain ] && extra=(--explain)
    idle_now > "$out/cost-$mode-$r.idle0"
    taskset -c "$all" "$P" run "$plan" -D "$dur" --no-store "${extra[@]}" \
      --json "$out/cost-$mode-$r.json" > "$out/cost-$mode-$r.txt" 2> "$out/cost-$mode-$r.err" || true
    idle_now > "$out/cost-$mode-$r.idle1"
  done
done
python3 "$H" cost "$out" "$rounds" "${COST_NS:-120}" "$cpu"
machine
fi

if [[ $only == *b* ]]; then
echo
if [ -n "$full" ]; then q=(); echo "== b. kurt-periodic (full), explained"; else q=(--quick); echo "== b. kurt-periodic --quick, explained"; fi
mapfile -t kt < <(kept kurt)
show "punctual experiment run kurt-periodic ${q[*]} --no-store${kt[*]:+ ${kt[*]}} --json $out/kurt.json --figures $out/kurt-figures"
again "$out/kurt.err" taskset -c "$all" "$P" experiment run kurt-periodic "${q[@]}" --no-store "${kt[@]}" \
  --json "$out/kurt.json" --figures "$out/kurt-figures" > "$out/kurt.txt" || true
sed -n '/^Table 4.1/,$p' "$out/kurt.txt" | grep -v '^ *[0-9]* *thesis' || cat "$out/kurt.err"
python3 "$H" kurt "$out"
machine
fi

if [[ $only == *c* ]]; then
echo
echo "== c. the 10 us mark plan, shielded, $dur, explained"
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
mapfile -t kt < <(kept dense-10us)
show "punctual run $out/dense-10us.toml -D $dur --no-store --explain${kt[*]:+ ${kt[*]}} --json $out/dense-10us.json"
again "$out/dense-10us.err" taskset -c "$all" "$P" run "$out/dense-10us.toml" -D "$dur" --no-store --explain "${kt[@]}" \
  --json "$out/dense-10us.json" > "$out/dense-10us.txt" || true
cat "$out/dense-10us.txt"
python3 "$H" dense "$out"
machine
fi

if [[ $only == *d* ]]; then
echo
echo "== d. $replay_n UDP packets 500 us apart to a loopback receiver, shielded, explained"
port=$(( 42000 + $$ % 1000 ))
python3 scripts/make-udp-pcap.py "$out/udp.pcap" "$replay_n" "$port"
# The receiver: takes every datagram with the kernel's receive timestamp, stops 2 s after the last.
python3 "$H" receive "$port" "$out/receiver.json" & rx=$!
sleep 0.5
mapfile -t kt < <(kept replay)
# Started at the phase of the 500 us spacing that keeps the sends off the tick (b50 started on it:
# 7,761 of its 13,233 late gaps were the tick's).
show "punctual traffic replay $out/udp.pcap --udp-to 127.0.0.1:$port --interval 500us -a $cpu --shield --avoid-interference --explain${kt[*]:+ ${kt[*]}} --no-store --json $out/replay.json"
again "$out/replay.err" taskset -c "$all" "$P" traffic replay "$out/udp.pcap" --udp-to "127.0.0.1:$port" --interval 500us \
  -a "$cpu" --shield --avoid-interference --explain "${kt[@]}" --no-store --json "$out/replay.json" > "$out/replay.txt" || kill "$rx" 2>/dev/null || true
wait "$rx" || true
rx=""
cat "$out/replay.txt"
python3 "$H" replay "$out" 500000
machine
fi

echo
echo "== targets (issue 26) on this run"
python3 "$H" targets "$out"
