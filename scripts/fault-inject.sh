#!/usr/bin/env bash
# Fault injection (issue 19): SIGINT, SIGTERM and SIGKILL at several delays into every punctual
# command that changes the system or starts children, then a check that nothing was left behind.
#
# Before the batch it snapshots what punctual may change: every IRQ's smp_affinity_list,
# default_smp_affinity, sched_rt_runtime_us, sched_rr_timeslice_ms, the CPU mask of every task,
# tracefs instances named punctual-* (seen through a tracefs mounted in a private mount namespace,
# so the host's mounts are not touched), mounts under /run/punctual, who holds
# /dev/cpu_dma_latency, wake channels (/run/punctual-wake, /dev/shm) and journals in /run/punctual. Every run carries
# a unique PUNCTUAL_FAULT_TAG in its environment, so its descendants are found in /proc/*/environ.
#
# After each injection: wait for the process and record its exit code (130 for INT/TERM, or 0 if
# the run had finished; 137 for KILL; 143 for a TERM that came before main set its handlers, accepted
# only with no output); after SIGKILL run `punctual shield --restore` (what the next
# run would do); then, within 2 s: no tagged process alive, settings as before the injection, no
# punctual tracefs instance or mount, nobody tagged holding cpu_dma_latency, no channel file, no
# journal, nothing but the outputs in the output directory (a JSON output must parse). Anything left
# is reported and cleaned up (tagged processes killed by pid, `shield --restore`, settings written
# back) so the next injection starts clean. At the end `punctual shield --restore` runs and any
# setting still differing from the first snapshot is written back.
#
# Interrupted itself (SIGINT, SIGTERM, SIGHUP), it stops the run under test (SIGINT, SIGKILL after
# 15 s), kills what that run left, runs `shield --restore` and writes back every setting of the
# first snapshot, then exits 130. (SIGKILL of the script escapes this; `punctual shield --restore`
# and the next punctual start then repair what a run left.)
# Traffic stays on loopback (the udp action targets a socket this script binds on 127.0.0.1).
# Needs root and python3. Exit 0: nothing left behind and every exit code as expected; 1 otherwise.
# SIGINT and SIGTERM must end a command within FI_STOP_BOUND seconds (default 1) of the signal, in
# every phase, start-up included (issue 32): an injection that takes longer is reported as slow.
#   scripts/fault-inject.sh                       # 8 commands x 3 signals x 6 delays = 144 injections
#   FI_DELAYS=0.1,3 FI_ONLY=run-exec-wake-udp,check scripts/fault-inject.sh
#   FI_RANDOM=50 FI_SPAN=2 FI_SIGNALS=INT,TERM scripts/fault-inject.sh   # 50 random delays in [0, 2 s]
#                                                 # per command and signal: start-up at random points
#   PUNCTUAL=/path/to/punctual scripts/fault-inject.sh   # test that binary (no build)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
  echo "fault-inject: needs root (punctual changes IRQs, sysctls and task masks only as root)" >&2
  exit 3
fi
command -v python3 >/dev/null || { echo "fault-inject: needs python3" >&2; exit 3; }
if [ -z "${PUNCTUAL:-}" ]; then
  CARGO_INCREMENTAL=0 cargo build --release -q -p punctual
  PUNCTUAL=target/release/punctual
fi
FI_SCRIPTS=$(pwd)/scripts exec python3 - "$(realpath "$PUNCTUAL")" <<'PY'
import json, os, signal, socket, subprocess, sys, tempfile, threading, time
sys.path.insert(0, os.environ["FI_SCRIPTS"])
from sysstate import *  # noqa: F401,F403  (snapshot, settings_diff, tagged, ...)

P = sys.argv[1]
DELAYS = [float(x) for x in os.environ.get("FI_DELAYS", "0.02,0.1,0.5,1,3,6").split(",")]
if os.environ.get("FI_RANDOM"):
    import random
    rng = random.Random(int(os.environ.get("FI_SEED", "1")))
    span = float(os.environ.get("FI_SPAN", "2"))
    DELAYS = sorted(round(rng.uniform(0, span), 3) for _ in range(int(os.environ["FI_RANDOM"])))
STOP_BOUND = float(os.environ.get("FI_STOP_BOUND", "1"))
ONLY = [x for x in os.environ.get("FI_ONLY", "").split(",") if x]
SIGNALS = [("INT", signal.SIGINT), ("TERM", signal.SIGTERM), ("KILL", signal.SIGKILL)]
if os.environ.get("FI_SIGNALS"):
    SIGNALS = [s for s in SIGNALS if s[0] in os.environ["FI_SIGNALS"].split(",")]
BATCH = f"fi{os.getpid()}-{int(time.time())}"
LAST = str(online_cpus()[-1])

# --- what is run -------------------------------------------------------------------------------

scratch = tempfile.mkdtemp(prefix="punctual-fi-")
os.chmod(scratch, 0o700)
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind(("127.0.0.1", 0))
port = udp.getsockname()[1]
received = [0]


def drain():
    while True:
        try:
            udp.recv(65536)
            received[0] += 1
        except OSError:
            return


threading.Thread(target=drain, daemon=True).start()

plan_exec = os.path.join(scratch, "exec-udp.toml")
with open(plan_exec, "w") as f:
    f.write(f'''[plan]
name = "fi-exec-wake-udp"
cpus = "{LAST}"
duration = "10s"

[[task]]
name = "sleep"
period = "10ms"
offset = "auto"
action = {{ kind = "exec", argv = ["/bin/sleep", "0.001"] }}

[[task]]
name = "ping"
period = "10ms"
offset = "auto"
action = {{ kind = "udp", to = "127.0.0.1:{port}", bytes = 64 }}

[[task]]
name = "client"
period = "10ms"
offset = "auto"
action = {{ kind = "wake", channel = "CHANNEL", spawn = ["{P}", "__periodic", "--mode", "wake", "--period-ns", "10000000", "--first-ns", "0", "--until-ns", "0", "--channel", "CHANNEL"] }}
''')
plan_shield = os.path.join(scratch, "shield.toml")
with open(plan_shield, "w") as f:
    f.write(f'''[plan]
name = "fi-shield"
cpus = "{LAST}"
shield = true
duration = "10s"

[[task]]
name = "tick"
period = "1ms"
offset = "auto"
action = {{ kind = "mark" }}

[[task]]
name = "true"
period = "100ms"
offset = "auto"
action = {{ kind = "exec", argv = ["/bin/true"] }}
''')

# name -> (argv with OUT for the output directory, output file names)
COMMANDS = [
    ("run-exec-wake-udp", ["run", plan_exec, "--json", "OUT/run.json"], ["run.json"]),
    ("run-shield-plan", ["run", plan_shield, "--json", "OUT/run.json"], ["run.json"]),
    ("shield-D", ["shield", "--cpus", LAST, "-D", "10s"], []),
    ("shield-cmd", ["shield", "--cpus", LAST, "--", "sleep", "10"], []),
    ("trace-record", ["trace", "record", "-o", "OUT/t.ptf", "-D", "10s"], ["t.ptf"]),
    ("latency-load", ["latency", "-D", "10s", "--load", "cpu:1,io:1", "--json", "OUT/l.json"], ["l.json"]),
    ("bench-alarm", ["bench", "alarm", "--workload", "blk:2,cont:1", "--alarms", "40",
                     "--rr-timeslice", "1ms", "--json", "OUT/a.json"], ["a.json"]),
    ("check", ["check", "-D", "8s", "--json", "OUT/c.json"], ["c.json"]),
]
if ONLY:
    unknown = set(ONLY) - {c[0] for c in COMMANDS}
    if unknown:
        sys.exit(f"fault-inject: unknown FI_ONLY names {sorted(unknown)}; known: {[c[0] for c in COMMANDS]}")
    COMMANDS = [c for c in COMMANDS if c[0] in ONLY]


def spawn(argv, tag, log, extra_env=None):
    env = dict(os.environ)
    env["PUNCTUAL_FAULT_TAG"] = tag
    env.pop("PUNCTUAL_STATE_DIR", None)
    env.pop("PUNCTUAL_SHM_DIR", None)
    if extra_env:
        env.update(extra_env)
    return subprocess.Popen([P] + argv, env=env, stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


def restore_run(tag, logdir):
    with open(os.path.join(logdir, "restore.log"), "w") as log:
        r = spawn(["shield", "--restore"], tag + "-restore", log)
        try:
            return r.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(r.pid, signal.SIGKILL)
            r.wait()
            return "hung"


def leftovers(pre, seen, tag, outdir, datadir, outputs, ignore):
    """Everything an injection left behind, by kind; empty when clean."""
    left = {"processes": [], "settings": [], "files": []}
    procs = {p for p in seen if alive(p)} | tagged(tag)
    left["processes"] += [f"pid {p} ({read(f'/proc/{p}/comm')})" for p, _ in sorted(procs)]
    holders = [h for h in dma_holders() - pre["dma"] if (env_tag(h) or "") in (tag, tag + "-restore")]
    left["processes"] += [f"pid {h} holds /dev/cpu_dma_latency" for h in holders]
    now = snapshot()
    left["settings"] += settings_diff(pre, now, ignore)
    left["settings"] += [f"tracefs instance {i}" for i in sorted(now["tracefs"] - pre["tracefs"])]
    left["files"] += [f"mount {m}" for m in sorted(now["mounts"] - pre["mounts"])]
    left["files"] += sorted(now["shm"] - pre["shm"])
    left["files"] += [f"{STATE}/{n}" for n in sorted(now["journals"] - pre["journals"])]
    for n in sorted(os.listdir(outdir)):
        if n not in outputs:
            left["files"].append(f"stray {n} beside the outputs")
        elif n.endswith(".json"):
            try:
                json.load(open(os.path.join(outdir, n)))
            except (ValueError, OSError) as e:
                left["files"].append(f"{n} is not a whole JSON document ({e})")
    for root, _, files in os.walk(datadir):
        for n in files:
            if n.startswith(".") or n.endswith(".tmp"):
                left["files"].append(f"stray {os.path.join(root, n)} in the results store")
    return left, now


def clean(left_procs_tag, pre, seen, now):
    """Undo what an injection left so the next one starts clean (only processes this batch started)."""
    for p in {q for q in seen if alive(q)} | tagged(left_procs_tag):
        try:
            os.kill(p[0], signal.SIGKILL)
        except OSError:
            pass
    restore_run(left_procs_tag + "-clean", scratch)
    now = snapshot()
    for f in now["shm"] - pre["shm"]:
        if os.path.basename(f).startswith(f"punctual-wake-fi-{os.getpid()}-"):
            try:
                os.unlink(f)
            except OSError:
                pass
    restore_settings(pre, now)
    for i in now["tracefs"] - pre["tracefs"]:
        remove_instance(i)
    for m in now["mounts"] - pre["mounts"]:
        subprocess.run(["umount", "-l", m], capture_output=True)


batch = snapshot()
print(f"fault injection: {P}, {len(COMMANDS)} commands x {len(SIGNALS)} signals x {len(DELAYS)} delays "
      f"({', '.join(f'{d:g}' for d in DELAYS)} s), CPU {LAST}, scratch {scratch}", flush=True)
if batch["tracefs"] or batch["mounts"] or batch["journals"]:
    print(f"note: before the batch: tracefs {sorted(batch['tracefs'])}, mounts {sorted(batch['mounts'])}, "
          f"journals {sorted(batch['journals'])}", flush=True)
rows = {c[0]: {"n": 0, "ok_exit": 0, "early": 0, "slow": 0, "worst_stop": 0.0, "processes": 0, "settings": 0,
               "files": 0, "foreign": 0} for c in COMMANDS}
problems = []
n = 0
t_start = time.time()


class Interrupted(Exception):
    pass


def on_signal(signum, _frame):
    raise Interrupted(signum)


# The batch itself interrupted (Ctrl-C, SIGTERM, a closed terminal): the run under test is stopped
# the way a user would (SIGINT, then SIGKILL after 15 s), and the end below restores everything.
# (Only SIGKILL of this script escapes this; `punctual shield --restore` then repairs what a run left.)
current = {"proc": None, "seen": set(), "tag": None, "pre": None}
interrupted = None
for s_ in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s_, on_signal)
try:
    for name, argv, outputs in COMMANDS:
        for sname, sig in SIGNALS:
            for delay in DELAYS:
                n += 1
                tag = f"{BATCH}-{n}"
                inj = os.path.join(scratch, f"inj-{n}")
                outdir = os.path.join(inj, "out")
                datadir = os.path.join(inj, "data")
                os.makedirs(outdir, mode=0o700)
                os.makedirs(datadir, mode=0o700)
                pre = snapshot()
                drift = settings_diff(batch, pre)
                foreign = set(foreign_punctuals(BATCH))
                args = [a.replace("OUT/", outdir + "/") for a in argv]
                if plan_exec in args:
                    # A channel name of its own, so a socket left by one injection is not taken for
                    # the next one's (a new dispatcher removes a stale socket of its own name).
                    own = os.path.join(inj, "exec-wake-udp.toml")
                    with open(own, "w") as f:
                        f.write(open(plan_exec).read().replace("CHANNEL", f"fi-{os.getpid()}-{n}"))
                    args = [own if a == plan_exec else a for a in args]
                log = open(os.path.join(inj, "punctual.log"), "w")
                t0 = time.monotonic()
                proc = spawn(args, tag, log, {"PUNCTUAL_DATA_DIR": datadir})
                seen = set()
                current.update(proc=proc, seen=seen, tag=tag, pre=pre)
                finished_first = False
                while time.monotonic() - t0 < delay:
                    if proc.poll() is not None:
                        finished_first = True
                        break
                    seen |= descendants(proc.pid) | tagged(tag)
                    time.sleep(min(0.05, max(0.0, delay - (time.monotonic() - t0))))
                if not finished_first and proc.poll() is None:
                    os.kill(proc.pid, sig)
                else:
                    finished_first = True
                t_sig = time.monotonic()
                hung = False
                try:
                    rc = proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    hung = True
                    os.kill(proc.pid, signal.SIGKILL)
                    rc = proc.wait()
                stop_s = time.monotonic() - t_sig
                slow = not finished_first and sig != signal.SIGKILL and stop_s > STOP_BOUND
                log.close()
                rc = 128 - rc if rc < 0 else rc
                restore_rc = None
                if sig == signal.SIGKILL and not finished_first:
                    restore_rc = restore_run(tag, inj)
                # Within 2 s: poll until clean, then take what is left as left.
                deadline = time.monotonic() + 2.0
                ignore = {p for p, _ in seen}
                while True:
                    left, now = leftovers(pre, seen, tag, outdir, datadir, outputs, ignore)
                    if not any(left.values()) or time.monotonic() >= deadline:
                        break
                    time.sleep(0.1)
                foreign |= set(foreign_punctuals(BATCH))
                # 0 only for a run that ended before the signal: every run lasts longer than the last delay.
                expected = {0} if finished_first else ({137} if sig == signal.SIGKILL else {130})
                # SIGTERM in the ~1 ms between exec and main's handlers (the loader, the runtime's
                # set-up) ends the process the default way: 143, before it wrote or changed anything.
                # That is a correct end, counted apart; output or anything left makes it a failure.
                early = (not finished_first and sig == signal.SIGTERM and rc == 128 + sig and not hung
                         and os.path.getsize(os.path.join(inj, "punctual.log")) == 0)
                if early:
                    expected = expected | {rc}
                ok_exit = rc in expected and not hung and restore_rc in (None, 0)
                r = rows[name]
                r["n"] += 1
                r["early"] += early
                r["ok_exit"] += ok_exit
                r["slow"] += slow
                if not finished_first and sig != signal.SIGKILL:
                    r["worst_stop"] = max(r["worst_stop"], stop_s)
                if slow and not hung:
                    tail = open(os.path.join(inj, "punctual.log")).read().strip().splitlines()[-2:]
                    problems.append(f"#{n} {name} SIG{sname} at {delay:g} s: slow stop, {stop_s:.2f} s after the "
                                    f"signal (bound {STOP_BOUND:g} s); last output: {' | '.join(tail)}")
                for k in ("processes", "settings", "files"):
                    r[k] += bool(left[k])
                r["foreign"] += bool(foreign or drift)
                what = f"#{n} {name} SIG{sname} at {delay:g} s"
                if not ok_exit:
                    tail = open(os.path.join(inj, "punctual.log")).read().strip().splitlines()[-3:]
                    problems.append(f"{what}: exit {rc}{' (hung 30 s, killed)' if hung else ''}"
                                    f"{' (finished before the signal)' if finished_first else ''}"
                                    f"{f', shield --restore exit {restore_rc}' if restore_rc not in (None, 0) else ''}"
                                    f"; expected {sorted(expected)}; last output: {' | '.join(tail)}")
                for k in ("processes", "settings", "files"):
                    for item in left[k]:
                        note = " (another punctual was running: may be its)" if foreign and k == "settings" else ""
                        problems.append(f"{what}: left {k}: {item}{note}")
                if drift:
                    problems.append(f"{what}: note: before it, settings already differed from the batch snapshot "
                                    f"(not counted): {'; '.join(drift[:5])}")
                if any(left.values()):
                    clean(tag, pre, seen, now)
                status = "ok" if ok_exit and not any(left.values()) else "LEFT/UNEXPECTED"
                status += " SLOW" if slow else ""
                print(f"{what}: exit {rc} after {stop_s:.2f} s{' (finished first)' if finished_first else ''} {status}",
                      file=sys.stderr, flush=True)

except Interrupted as e:
    interrupted = e.args[0]
    for s_ in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s_, signal.SIG_IGN)
    print(f"\nfault-inject: interrupted by signal {interrupted}; stopping the run under test and restoring",
          file=sys.stderr, flush=True)
    p_ = current["proc"]
    if p_ is not None and p_.poll() is None:
        try:
            os.kill(p_.pid, signal.SIGINT)
            p_.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.kill(p_.pid, signal.SIGKILL)
            p_.wait()
        except OSError:
            pass
    for q in {x for x in current["seen"] if alive(x)} | tagged(BATCH):
        try:
            os.kill(q[0], signal.SIGKILL)
        except OSError:
            pass

# The end: the next run's restore, then anything still differing from the first snapshot is put back.
final_restore = restore_run(f"{BATCH}-final", scratch)
end = snapshot()
end_diff = settings_diff(batch, end)
put_back = restore_settings(batch, end) if end_diff else []
for i in end["tracefs"] - batch["tracefs"]:
    remove_instance(i)
for m in end["mounts"] - batch["mounts"]:
    subprocess.run(["umount", "-l", m], capture_output=True)
stray = tagged(BATCH)
for p in stray:
    try:
        os.kill(p[0], signal.SIGKILL)
    except OSError:
        pass

print()
print(f"{'command':18} {'inj.':>5} {'exit ok':>7} {'slow':>5} {'worst stop':>10} {'left: procs':>11} "
      f"{'settings':>8} {'files':>5}")
tot = {"n": 0, "ok_exit": 0, "early": 0, "slow": 0, "worst_stop": 0.0, "processes": 0, "settings": 0, "files": 0,
       "foreign": 0}
for name, *_ in COMMANDS:
    r = rows[name]
    for k in tot:
        tot[k] = max(tot[k], r[k]) if k == "worst_stop" else tot[k] + r[k]
    print(f"{name:18} {r['n']:>5} {r['ok_exit']:>7} {r['slow']:>5} {r['worst_stop']:>8.2f} s {r['processes']:>11} "
          f"{r['settings']:>8} {r['files']:>5}")
print(f"{'total':18} {tot['n']:>5} {tot['ok_exit']:>7} {tot['slow']:>5} {tot['worst_stop']:>8.2f} s "
      f"{tot['processes']:>11} {tot['settings']:>8} {tot['files']:>5}")
print(f"(slow: SIGINT/SIGTERM answered later than {STOP_BOUND:g} s; worst stop: the longest such answer)")
print(f"(exit ok includes {tot['early']} SIGTERM(s) that arrived before main set its handlers: exit 143 with no "
      f"output and nothing left)")
print(f"({time.time() - t_start:.0f} s; {received[0]} datagrams received on 127.0.0.1:{port}; "
      f"{tot['foreign']} injections overlapped another punctual or began with settings already changed; "
      f"final shield --restore exit {final_restore}; logs in {scratch})")
if end_diff:
    print(f"at the end, settings differed from the first snapshot (written back: {len(put_back)}):")
    for d in end_diff[:20]:
        print(f"  {d}")
if stray:
    print(f"at the end, tagged processes were still alive and were killed: {sorted(stray)}")
if problems:
    print("\nproblems:")
    for p in problems:
        print(f"  {p}")
bad = tot["n"] - tot["ok_exit"] + tot["slow"] + tot["processes"] + tot["settings"] + tot["files"] + len(stray)
if interrupted:
    print(f"interrupted by signal {interrupted} after {n} injections; everything restored as above")
    sys.exit(130)
sys.exit(1 if bad or final_restore != 0 else 0)
PY
