#!/usr/bin/env bash
# Bad input (issue 19): several hundred malformed or absurd command lines, files and flags, each
# run in a scratch directory with a timeout, and each checked for:
#   - exit 2 (bad input), or 3 where the system refused (those cases are listed as such below);
#   - nothing written: the scratch directory (inputs and output targets) unchanged, no result in a
#     temporary PUNCTUAL_DATA_DIR, no journal of the run left in /run/punctual;
#   - nothing changed on the system: the snapshot of scripts/sysstate.py (IRQ affinities, RT and RR
#     sysctls, task masks, punctual tracefs instances and mounts, cpu_dma_latency holders, wake
#     channels) equal before and after, and no process of the run left;
#   - a message that names the flag or the file (and no panic, no raw escape sequence, not huge).
# Families: bare numbers where a unit is needed, negative, overflowing (18446744073709551615ns,
# 18446744073s), zero where zero is meaningless, garbage, unknown enum values, offline CPUs, bad
# load specs, nonexistent / unwritable / directory / trailing-slash / symlink-in-a-world-writable-dir
# outputs, malformed plans (TOML and compiled), events CSV, scenarios and trace files, missing exec
# programs and broken plugins (also in `shield = true` plans).
# Needs root (a trace file is recorded first) and python3. Exit 0 when every case passes, 1 when one
# fails, 4 when none fails but some are undecided (the system changed while a punctual this script
# did not start was running). Interrupted (Ctrl-C, SIGTERM), it stops the case under test and puts
# back what that case changed before exiting 130.
#   scripts/bad-input.sh
#   BI_ONLY=latency,run scripts/bad-input.sh          # only the cases of these commands
#   PUNCTUAL=/path/to/punctual scripts/bad-input.sh   # test that binary (no build)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
  echo "bad-input: needs root (it checks that nothing of the system changes, and records a trace)" >&2
  exit 3
fi
command -v python3 >/dev/null || { echo "bad-input: needs python3" >&2; exit 3; }
if [ -z "${PUNCTUAL:-}" ]; then
  CARGO_INCREMENTAL=0 cargo build --release -q -p punctual -p punctual-libpunctual
  PUNCTUAL=target/release/punctual
fi
BI_SCRIPTS=$(pwd)/scripts BI_REPO=$(pwd) exec python3 - "$(realpath "$PUNCTUAL")" <<'PY'
import json, os, shutil, signal, stat, struct, subprocess, sys, tempfile, time, zlib
sys.path.insert(0, os.environ["BI_SCRIPTS"])
from sysstate import *  # noqa: F401,F403

P = sys.argv[1]
REPO = os.environ["BI_REPO"]
ONLY = [x for x in os.environ.get("BI_ONLY", "").split(",") if x]
BATCH = f"bi{os.getpid()}-{int(time.time())}"
CPUS = online_cpus()
LAST = str(CPUS[-1])
OFF = str(CPUS[-1] + 1)  # the first CPU that is not online

scratch = tempfile.mkdtemp(prefix="punctual-bi-")
os.chmod(scratch, 0o700)
work = os.path.join(scratch, "work")       # the cases' working directory (checked unchanged)
datadir = os.path.join(scratch, "data")    # PUNCTUAL_DATA_DIR (checked empty)
os.makedirs(work, mode=0o700)
os.makedirs(datadir, mode=0o700)
F = os.path.join(work, "f")                # fixtures
os.makedirs(F)


def w(name, content, mode=0o644):
    path = os.path.join(F, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(content.encode() if isinstance(content, str) else content)
    os.chmod(path, mode)
    return path


def run_setup(argv):
    r = subprocess.run([P] + argv, capture_output=True, text=True, cwd=work,
                       env=dict(os.environ, PUNCTUAL_DATA_DIR=os.path.join(scratch, "setup-data")))
    if r.returncode != 0:
        sys.exit(f"bad-input: setup `punctual {' '.join(argv)}` failed ({r.returncode}): {r.stderr}")


# --- fixtures ---------------------------------------------------------------------------------

os.makedirs(os.path.join(work, "adir"))
w("afile", "not a directory\n")
# A world-writable (sticky) directory holding a link to a file we own: outputs through it are refused.
ww = os.path.join(work, "ww")
os.makedirs(ww)
os.chmod(ww, 0o1777)
w("target.json", "{}\n")
os.symlink(os.path.join(F, "target.json"), os.path.join(ww, "link.json"))
os.symlink(os.path.join(work, "adir"), os.path.join(ww, "linkdir"))
w("noexec.sh", "#!/bin/sh\nexit 0\n", 0o644)
w("broken.so", "this is not an ELF object\n")
libc = next((p for p in ("/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6",
                         "/lib64/libc.so.6", "/usr/lib64/libc.so.6") if os.path.exists(p)), None)

GOOD_PLAN = w("good.toml", '[plan]\nduration = "1s"\n\n[[task]]\nname = "tick"\nperiod = "10ms"\n'
              'action = { kind = "mark" }\n')


def plan(body, head='[plan]\nduration = "1s"\n'):
    return head + body


TASK = '[[task]]\nname = "t"\nperiod = "10ms"\n'
MARK = 'action = { kind = "mark" }\n'

# Plans wrong in form: refused by run, plan check, plan compile and plan decode alike.
FORM_PLANS = {
    "syntax": "[plan\nduration = \"1s\"\n",
    "garbage": bytes(range(256)) * 4,
    "utf8": b'[plan]\nname = "\xff\xfe"\n',
    "empty": "",
    "no-tasks": '[plan]\nduration = "1s"\n',
    "period-bare": plan(TASK.replace('"10ms"', "10") + MARK),
    "period-negative": plan(TASK.replace('"10ms"', '"-10ms"') + MARK),
    "period-zero": plan(TASK.replace('"10ms"', '"0ms"') + MARK),
    "period-garbage": plan(TASK.replace('"10ms"', '"ten ms"') + MARK),
    "period-u64max": plan(TASK.replace('"10ms"', '"18446744073709551615ns"') + MARK),
    "period-584y": plan(TASK.replace('"10ms"', '"18446744073s"') + MARK),
    "period-overflow": plan(TASK.replace('"10ms"', '"99999999999999999999s"') + MARK),
    "period-missing": plan('[[task]]\nname = "t"\n' + MARK),
    "offset-ge-period": plan(TASK + 'offset = "10ms"\n' + MARK),
    "offset-negative": plan(TASK + 'offset = "-1ms"\n' + MARK),
    "wcet-gt-period": plan(TASK + 'wcet = "20ms"\n' + MARK),
    "wcet-zero": plan(TASK + 'wcet = "0ns"\n' + MARK),
    "kind-unknown": plan(TASK + 'action = { kind = "teleport" }\n'),
    "field-unknown": plan(TASK + 'perod = "5ms"\n' + MARK),
    "plan-field-unknown": plan(TASK + MARK, '[plan]\nduration = "1s"\nshiled = true\n'),
    "miss-unknown": plan(TASK + 'miss = "sometimes"\n' + MARK),
    "exec-empty-argv": plan(TASK + 'action = { kind = "exec", argv = [] }\n'),
    "exec-priority-100": plan(TASK + 'action = { kind = "exec", argv = ["/bin/true"], priority = 100 }\n'),
    "exec-priority-0": plan(TASK + 'action = { kind = "exec", argv = ["/bin/true"], priority = 0 }\n'),
    "udp-bad-ip": plan(TASK + 'action = { kind = "udp", to = "300.1.1.1:9" }\n'),
    "udp-no-port": plan(TASK + 'action = { kind = "udp", to = "127.0.0.1" }\n'),
    "udp-port-70000": plan(TASK + 'action = { kind = "udp", to = "127.0.0.1:70000" }\n'),
    "udp-hostname": plan(TASK + 'action = { kind = "udp", to = "localhost:9" }\n'),
    "udp-bytes-0": plan(TASK + 'action = { kind = "udp", to = "127.0.0.1:9", bytes = 0 }\n'),
    "udp-bytes-70000": plan(TASK + 'action = { kind = "udp", to = "127.0.0.1:9", bytes = 70000 }\n'),
    "udp-bytes-negative": plan(TASK + 'action = { kind = "udp", to = "127.0.0.1:9", bytes = -1 }\n'),
    "plugin-no-slash": plan(TASK + 'action = { kind = "plugin", path = "libfoo.so" }\n'),
    "duplicate-task": plan(TASK + MARK + TASK + MARK),
    "duplicate-action": plan('[[action]]\nname = "a"\nkind = "mark"\n[[action]]\nname = "a"\nkind = "mark"\n'
                             + TASK + 'use = "a"\n'),
    "use-unknown": plan(TASK + 'use = "nothing-by-this-name"\n'),
    "use-and-action": plan('[[action]]\nname = "a"\nkind = "mark"\n' + TASK + 'use = "a"\n' + MARK),
    "event-negative": plan('[[event]]\nat = "-1ms"\n' + MARK),
    "event-bare": plan('[[event]]\nat = 1000\n' + MARK),
    "event-data-13": plan('[[event]]\nat = "1ms"\ndata = [1,2,3,4,5,6,7,8,9,10,11,12,13]\n' + MARK),
    "event-data-256": plan('[[event]]\nat = "1ms"\ndata = [256]\n' + MARK),
    "event-no-action": plan('[[event]]\nat = "1ms"\n'),
    "duration-zero": plan(TASK + MARK, '[plan]\nduration = "0s"\n'),
    "duration-bare": plan(TASK + MARK, '[plan]\nduration = 10\n'),
    "duration-584y": plan(TASK + MARK, '[plan]\nduration = "18446744073s"\n'),
    "spin-margin-garbage": plan(TASK + MARK, '[plan]\nduration = "1s"\nspin_margin = "abc"\n'),
    "spin-margin-negative": plan(TASK + MARK, '[plan]\nduration = "1s"\nspin_margin = "-5us"\n'),
    "cpus-garbage": plan(TASK + MARK, '[plan]\nduration = "1s"\ncpus = "x"\n'),
    "shield-not-bool": plan(TASK + MARK, '[plan]\nduration = "1s"\nshield = "yes"\n'),
    "name-escapes": plan(TASK + 'use = "\\u001b[31mred\\u001b[0m\\n\\u202eevil"\n'),
    "name-1mb": plan(TASK + 'use = "' + "x" * 1_000_000 + '"\n'),
}
# Plans wrong for this machine or its files: refused by run and plan check (compile and decode
# only transform the plan, which may be meant for another machine).
exec_missing = 'action = { kind = "exec", argv = ["/nonexistent/prog"] }\n'
plugin_broken = 'action = { kind = "plugin", path = "./broken.so" }\n'
MACHINE_PLANS = {
    "cpus-offline": plan(TASK + MARK, f'[plan]\nduration = "1s"\ncpus = "{OFF}"\n'),
    "task-cpu-offline": plan(TASK + f"cpu = {OFF}\n" + MARK),
    "cpus-999": plan(TASK + MARK, '[plan]\nduration = "1s"\ncpus = "999"\n'),
    "exec-missing": plan(TASK + exec_missing),
    "exec-missing-relative": plan(TASK + 'action = { kind = "exec", argv = ["./no-such-prog"] }\n'),
    "exec-not-executable": plan(TASK + 'action = { kind = "exec", argv = ["./noexec.sh"] }\n'),
    "exec-directory": plan(TASK + 'action = { kind = "exec", argv = ["/tmp"] }\n'),
    "exec-user-unknown": plan(TASK + 'action = { kind = "exec", argv = ["/bin/true"], user = "no-such-user-xyz" }\n'),
    "plugin-missing": plan(TASK + 'action = { kind = "plugin", path = "./no-such.so" }\n'),
    "plugin-broken": plan(TASK + plugin_broken),
    "plugin-directory": plan(TASK + 'action = { kind = "plugin", path = "/tmp/" }\n'),
    "wake-spawn-missing": plan(TASK + 'action = { kind = "wake", spawn = ["/nonexistent/client"] }\n'),
    "shield-exec-missing": plan(TASK + exec_missing, '[plan]\nduration = "1s"\nshield = true\n'),
    "shield-plugin-broken": plan(TASK + plugin_broken, '[plan]\nduration = "1s"\nshield = true\n'),
    "shield-wake-missing": plan(TASK + 'action = { kind = "wake", spawn = ["/nonexistent/client"] }\n',
                                '[plan]\nduration = "1s"\nshield = true\n'),
    "shield-cpus-offline": plan(TASK + MARK, f'[plan]\nduration = "1s"\nshield = true\ncpus = "{OFF}"\n'),
}
if libc:
    MACHINE_PLANS["plugin-no-symbol"] = plan(TASK + f'action = {{ kind = "plugin", path = "{libc}" }}\n')
    MACHINE_PLANS["shield-plugin-no-symbol"] = plan(TASK + f'action = {{ kind = "plugin", path = "{libc}" }}\n',
                                                    '[plan]\nduration = "1s"\nshield = true\n')
form_plan_paths = {k: w(f"plans/{k}.toml", v) for k, v in FORM_PLANS.items()}
machine_plan_paths = {k: w(f"plans/{k}.toml", v) for k, v in MACHINE_PLANS.items()}
w("plans/broken.so", "this is not an ELF object\n")
w("plans/noexec.sh", "#!/bin/sh\nexit 0\n", 0o644)

# Compiled plans: a good one, then damaged copies.
run_setup(["plan", "compile", os.path.join(REPO, "examples/plans/stream.toml"), "--events",
           os.path.join(REPO, "examples/plans/stream.csv"), "-o", os.path.join(scratch, "stream.pplan")])
good = open(os.path.join(scratch, "stream.pplan"), "rb").read()
os.unlink(os.path.join(scratch, "stream.pplan"))
hlen = struct.unpack_from("<I", good, 12)[0]
nev = struct.unpack_from("<Q", good, 16)[0]
ev0 = 32 + hlen
assert nev >= 3 and len(good) == ev0 + 24 * nev, "unexpected compiled plan layout"


def patch(b, off, fmt, val):
    b = bytearray(b)
    struct.pack_into(fmt, b, off, val)
    return bytes(b)


PPLANS = {
    "cut-0": b"",
    "cut-4": good[:4],
    "cut-8": good[:8],
    "cut-12": good[:12],
    "cut-16": good[:16],
    "cut-31": good[:31],
    "cut-in-header": good[:32 + hlen // 2],
    "cut-in-event": good[:ev0 + 24 + 12],
    "cut-last-byte": good[:-1],
    "trailing-bytes": good + b"\0" * 7,
    "magic": b"PUNCPLAX" + good[8:],
    "version-2": patch(good, 8, "<I", 2),
    "version-0": patch(good, 8, "<I", 0),
    "header-len-max": patch(good, 12, "<I", 0xFFFFFFFF),
    "header-len-past-end": patch(good, 12, "<I", len(good)),
    "count-max": patch(good, 16, "<Q", 2**64 - 1),
    "count-plus-one": patch(good, 16, "<Q", nev + 1),
    "reserved": patch(good, 24, "<Q", 1),
    "header-not-utf8": good[:40] + b"\xff" + good[41:],
    "header-not-toml": good[:32] + b"[[[" + good[35:],
    "events-out-of-order": patch(good, ev0, "<Q", struct.unpack_from("<Q", good, ev0 + 48)[0] + 1),
    "action-index": patch(good, ev0 + 8, "<H", 0xFFFF),
    "data-len-13": patch(good, ev0 + 10, "<B", 13),
    "flags": patch(good, ev0 + 11, "<B", 1),
}
pplan_paths = {k: w(f"pplans/{k}.pplan", v) for k, v in PPLANS.items()}

STREAM_TOML = os.path.join(REPO, "examples/plans/stream.toml")
CSVS = {
    "header": "at,action,data\n1000,mark,\n",
    "no-header": "1000,mark,\n",
    "unknown-action": "at_ns,action,data_hex\n1000,nothing,\n",
    "at-garbage": "at_ns,action,data_hex\nsoon,mark,\n",
    "at-negative": "at_ns,action,data_hex\n-5,mark,\n",
    "at-unit": "at_ns,action,data_hex\n5ms,mark,\n",
    "at-overflow": "at_ns,action,data_hex\n18446744073709551616,mark,\n",
    "hex-garbage": "at_ns,action,data_hex\n1000,ping,zz\n",
    "hex-odd": "at_ns,action,data_hex\n1000,ping,abc\n",
    "hex-13-bytes": "at_ns,action,data_hex\n1000,ping," + "00" * 13 + "\n",
    "extra-column": "at_ns,action,data_hex\n1000,mark,,x\n",
    "missing-column": "at_ns,action,data_hex\n1000\n",
    "binary": bytes(range(256)),
}
csv_paths = {k: w(f"csv/{k}.csv", v) for k, v in CSVS.items()}

SCEN = '[sim]\nname = "s"\nhz = 100\nquantum = "50ms"\nduration = "1s"\nworkload = "cont:2"\n'
SCENARIOS = {
    "syntax": "[sim\nhz = 100\n",
    "garbage": bytes(range(256)) * 4,
    "field-unknown": SCEN + "hertz = 100\n",
    "hz-zero": SCEN.replace("hz = 100", "hz = 0"),
    "hz-huge": SCEN.replace("hz = 100", "hz = 1000001"),
    "hz-string": SCEN.replace("hz = 100", 'hz = "fast"'),
    "hz-negative": SCEN.replace("hz = 100", "hz = -100"),
    "quantum-zero": SCEN.replace('"50ms"', '"0ms"'),
    "quantum-bare": SCEN.replace('"50ms"', "50"),
    "quantum-negative": SCEN.replace('"50ms"', '"-50ms"'),
    "quantum-ticks-huge": SCEN.replace('"50ms"', '"99999999999999ticks"'),
    "quantum-under-tick": SCEN.replace('"50ms"', '"1ms"'),
    "duration-negative": SCEN.replace('duration = "1s"', 'duration = "-1s"'),
    "duration-584y": SCEN.replace('duration = "1s"', 'duration = "18446744073s"'),
    "duration-bare": SCEN.replace('duration = "1s"', "duration = 1"),
    "policy-unknown": SCEN + 'policy = "lottery"\n',
    "timer-unknown": SCEN + 'timer = "sundial"\n',
    "workload-unknown": SCEN.replace('"cont:2"', '"gpu:2"'),
    "cpus-zero": SCEN + "cpus = 0\n",
    "behaviour-unknown": SCEN + '[[task]]\nname = "x"\nbehaviour = "dance"\n',
    "periodic-no-period": SCEN + '[[task]]\nname = "x"\nbehaviour = "periodic"\nwcet = "1ms"\n',
    "priority-100": SCEN + '[[task]]\nname = "x"\nbehaviour = "periodic"\npolicy = "fifo"\npriority = 100\nperiod = "10ms"\nwcet = "1ms"\n',
    "switch-cost-huge": SCEN + 'switch_cost = "18446744073s"\n',
    "name-escapes": SCEN.replace('name = "s"', 'name = "\\u001b[31mred\\u001b[0m"') + '[[task]]\nname = "\\u001b]0;x\\u0007"\nbehaviour = "dance"\n',
}
scen_paths = {k: w(f"scen/{k}.toml", v) for k, v in SCENARIOS.items()}

# A trace file, then damaged copies.
run_setup(["trace", "record", "-D", "1s", "--events", "sched,irq", "-o", os.path.join(scratch, "good.ptf")])
tr = open(os.path.join(scratch, "good.ptf"), "rb").read()
os.unlink(os.path.join(scratch, "good.ptf"))
th = struct.unpack_from("<I", tr, 10)[0]
blocks = []  # (offset, kind, cpu, count, len)
off = 14 + th
while off + 20 <= len(tr) and tr[off:off + 4] == b"PTBK":
    kind, _, cpu, count, ln, _crc = struct.unpack_from("<BBHIII", tr, off + 4)
    blocks.append((off, kind, cpu, count, ln))
    off += 20 + ln
ev_blocks = [b for b in blocks if b[1] == 1]
trailer = [b for b in blocks if b[1] == 2]
assert ev_blocks and trailer, "unexpected trace layout"


def with_block_payload(data, blk, payload):
    o, kind, cpu, count, _ = blk
    hdr = b"PTBK" + struct.pack("<BBHIII", kind, 0, cpu, count, len(payload), zlib.crc32(payload))
    return data[:o] + hdr + payload + data[o + 20 + blk[4]:]


b0 = ev_blocks[0]
payload0 = tr[b0[0] + 20:b0[0] + 20 + b0[4]]
tb = trailer[0]
trailer_json = json.loads(tr[tb[0] + 20:tb[0] + 20 + tb[4]])
trailer_json["events"] = trailer_json.get("events", 0) + 12345
TRACES = {
    "empty": b"",
    "cut-4": tr[:4],
    "cut-10": tr[:10],
    "cut-in-header": tr[:14 + th // 2],
    "magic": b"PUNCTTRX" + tr[8:],
    "version-2": patch(tr, 8, "<H", 2),
    "header-len-max": patch(tr, 10, "<I", 0xFFFFFFFF),
    "header-not-json": tr[:14] + b"{{{" + tr[17:],
    "block-crc": tr[:b0[0] + 20 + b0[4] // 2] + bytes([tr[b0[0] + 20 + b0[4] // 2] ^ 0x55]) + tr[b0[0] + 21 + b0[4] // 2:],
    "cut-in-block": tr[:b0[0] + 20 + b0[4] // 2],
    "no-trailer": tr[:tb[0]],
    "trailer-count": with_block_payload(tr, tb, json.dumps(trailer_json).encode()),
    "block-len-max": patch(tr, b0[0] + 12, "<I", 0xFFFFFFFF),
    "block-kind-9": with_block_payload(tr, (b0[0], 9, b0[2], b0[3], b0[4]), payload0),
    "undecodable-event": with_block_payload(tr, b0, payload0[:8] + b"\xff" * 16 + payload0[24:]),
    "not-a-trace": "just text\n",
}
trace_paths = {k: w(f"traces/{k}.ptf", v) for k, v in TRACES.items()}
# A trace whose timestamps go backwards (a later block of a CPU starting before the previous one
# ended): it may be read, but nothing it reports may last longer than the trace.
later = [b for b in ev_blocks[1:] if b[2] == b0[2]]
backwards = None
if later:
    bl = later[0]
    pl = bytearray(tr[bl[0] + 20:bl[0] + 20 + bl[4]])
    struct.pack_into("<Q", pl, 0, max(0, struct.unpack_from("<Q", pl, 0)[0] - 10**9))
    backwards = w("traces/backwards.ptf", with_block_payload(tr, bl, bytes(pl)))
good_trace = w("traces/good.ptf", tr)
good_scen = w("scen/good.toml", SCEN)

# --- cases ------------------------------------------------------------------------------------

cases = []  # dict(group, argv, codes, names, check)


def case(group, argv, names, codes=(2,), check=None, env=None, ignored=False):
    cases.append({"group": group, "argv": [str(a) for a in argv], "codes": set(codes),
                  "names": names if isinstance(names, list) else [names], "check": check,
                  "env": env or {}, "ignored": ignored})


BARE = ["1000", "5"]
NEG = ["-5ms", "-1s"]
GARBAGE = ["abc", "1.2.3ms", "ms", "5xs", "", "0x10ms", "5ms5", "nan"]
HUGE = ["18446744073709551615ns", "18446744073s", "99999999999999999999s", "18446744073709551616ns"]
ZERO = ["0s", "0ns"]


J = lambda ext="json": os.path.join(work, f"out.{ext}")  # an output target that must stay absent

# Base command lines: valid and short, with an output that must not appear.
BASES = {
    "latency": ["latency", "-t", "1", "-D", "1s", "--dma-latency", "off", "--json", J()],
    "check": ["check", "-D", "2s", "--json", J()],
    "run": ["run", GOOD_PLAN, "-D", "1s", "--json", J()],
    "bench ctxsw": ["bench", "ctxsw", "-D", "1s", "--json", J()],
    "bench trap": ["bench", "trap", "-D", "1s", "--json", J()],
    "bench memcpy": ["bench", "memcpy", "--sizes", "16KiB", "-D", "1s", "--json", J()],
    "bench dispatch": ["bench", "dispatch", "-D", "1s", "--json", J()],
    "bench gaps": ["bench", "gaps", "-D", "1s", "--json", J()],
    "bench alarm": ["bench", "alarm", "--workload", "blk:1", "--alarms", "2", "--max-delay", "10ms", "--json", J()],
    "simulate": ["simulate", "-w", "cont:2", "-D", "1s", "--json", J()],
    "simulate frames": ["simulate", "frames", "--frames", "10", "--shifts", "2", "--json", J()],
    "simulate scenario": ["simulate", "scenario", good_scen, "--json", J()],
    "trace record": ["trace", "record", "-o", J("ptf"), "-D", "1s"],
    "trace analyze": ["trace", "analyze", good_trace, "--json", J()],
    "shield": ["shield", "--cpus", LAST, "-D", "1s"],
    "plan check": ["plan", "check", GOOD_PLAN],
    "plan compile": ["plan", "compile", GOOD_PLAN, "-o", J("pplan")],
    "plan decode": ["plan", "decode", GOOD_PLAN, "-o", J("toml")],
    "experiment": ["experiment", "run", "etsion-frames", "--quick", "--json", J()],
    "install-lib": ["install-lib", "--prefix", os.path.join(work, "prefix")],
}


def with_flag(base, flag, value):
    """base with flag set to value (replacing it if present); values that start with '-' or are
    empty are given as --flag=value so the parser sees a value, not a flag."""
    argv = list(base)
    if flag in argv:
        i = argv.index(flag)
        del argv[i:i + 2]
    sep = "--" in argv and argv.index("--") or len(argv)
    if value is None:
        ins = [flag]
    elif value.startswith("-") or value == "" or " " in value:
        ins = [f"{flag}={value}"] if flag.startswith("--") else [flag + value]
    else:
        ins = [flag, value]
    return argv[:sep] + ins + argv[sep:]


def bad_values(group, flag, names, values, base=None):
    for v in values:
        case(group, with_flag(base or BASES[group], flag, v), names)


# Durations: (group, flag, names, families)
DUR_FLAGS = [
    ("latency", "-i", ["--interval"], [BARE, NEG, GARBAGE, HUGE, ZERO]),
    ("latency", "-D", ["--duration"], [BARE, NEG, GARBAGE, HUGE, ZERO]),
    ("latency", "--dma-latency", ["--dma-latency"], [BARE, NEG, GARBAGE, HUGE]),
    ("latency", "--fail-above", ["--fail-above"], [BARE, NEG, GARBAGE]),
    ("check", "-D", ["--duration"], [BARE, NEG, GARBAGE, HUGE, ZERO]),
    ("check", "-i", ["--interval"], [BARE, NEG, GARBAGE, HUGE, ZERO]),
    ("check", "--dma-latency", ["--dma-latency"], [BARE, NEG, GARBAGE[:3], HUGE[:2]]),
    ("check", "--fail-above", ["--fail-above"], [BARE, NEG, GARBAGE[:3]]),
    ("run", "-D", ["--duration"], [BARE, NEG, GARBAGE, HUGE, ZERO]),
    ("run", "--spin-margin", ["--spin-margin"], [BARE, NEG, GARBAGE, HUGE]),
    ("run", "--watchdog", ["--watchdog"], [BARE, NEG, GARBAGE, HUGE, ZERO]),
    ("run", "--attach-timeout", ["--attach-timeout"], [BARE, NEG, GARBAGE[:3], HUGE]),
    ("run", "--dma-latency", ["--dma-latency"], [BARE, NEG, GARBAGE[:3], HUGE[:2]]),
    ("run", "--fail-above", ["--fail-above"], [BARE, NEG, GARBAGE[:3]]),
    ("bench ctxsw", "-D", ["--duration"], [BARE, NEG, GARBAGE[:3], HUGE, ZERO]),
    ("bench trap", "-D", ["--duration"], [BARE, NEG, GARBAGE[:3], HUGE, ZERO]),
    ("bench memcpy", "-D", ["--duration"], [BARE, NEG, GARBAGE[:3], HUGE, ZERO]),
    ("bench dispatch", "-D", ["--duration"], [BARE, NEG, GARBAGE[:3], HUGE, ZERO]),
    ("bench dispatch", "-i", ["--interval"], [BARE, NEG, GARBAGE[:3], HUGE, ZERO]),
    ("bench gaps", "-D", ["--duration"], [BARE, NEG, GARBAGE[:3], HUGE, ZERO]),
    ("bench gaps", "--threshold", ["--threshold"], [BARE, NEG, GARBAGE[:3]]),
    ("bench alarm", "--min-delay", ["--min-delay"], [BARE, NEG, GARBAGE[:3], HUGE[:2]]),
    ("bench alarm", "--max-delay", ["--max-delay"], [BARE, NEG, GARBAGE[:3], HUGE[:2], ZERO]),
    ("bench alarm", "--rr-timeslice", ["--rr-timeslice"], [BARE, NEG, GARBAGE[:3], HUGE, ZERO, ["1500us"]]),
    ("simulate", "-D", ["--duration"], [BARE, NEG, GARBAGE, HUGE, ZERO]),
    ("simulate", "-q", ["--quantum"], [BARE, NEG, GARBAGE[:3], HUGE, ZERO, ["99999999999999ticks", "0ticks", "1us"]]),
    ("simulate", "--irq-cost", ["--irq-cost"], [BARE, NEG, GARBAGE[:3], HUGE]),
    ("simulate", "--irq-indirect", ["--irq-indirect"], [BARE, NEG, GARBAGE[:3], HUGE]),
    ("simulate", "--switch-cost", ["--switch-cost"], [BARE, NEG, GARBAGE[:3], HUGE]),
    ("simulate", "--entry-interval", ["--entry-interval"], [BARE, NEG, GARBAGE[:3], HUGE]),
    ("simulate", "--overshoot", ["--overshoot"], [BARE, NEG, GARBAGE[:3], HUGE]),
    ("simulate", "--fail-above", ["--fail-above"], [BARE, NEG, GARBAGE[:3]]),
    ("simulate frames", "--poll", ["--poll"], [BARE, NEG, GARBAGE[:3], HUGE[:2], ZERO]),
    ("simulate frames", "-D", ["--duration"], [BARE[:1], NEG[:1], GARBAGE[:1], HUGE[:2], ZERO[:1]]),
    ("simulate scenario", "-D", ["--duration"], [BARE[:1], NEG[:1], GARBAGE[:1], HUGE[:2], ZERO[:1]]),
    ("simulate scenario", "-q", ["--quantum"], [BARE[:1], NEG[:1], HUGE[:2], ZERO[:1]]),
    ("simulate scenario", "--switch-cost", ["--switch-cost"], [BARE[:1], NEG[:1], HUGE[:2]]),
    ("trace record", "-D", ["--duration"], [BARE, NEG, GARBAGE[:3], HUGE, ZERO]),
    ("trace analyze", "--phase", ["--phase"], [BARE, NEG, GARBAGE[:3]]),
    ("shield", "-D", ["--duration"], [BARE, NEG, GARBAGE[:3], HUGE, ZERO]),
    ("plan check", "--spin-margin", ["--spin-margin"], [BARE, NEG, GARBAGE[:3], HUGE[:2]]),
]
for group, flag, names, fams in DUR_FLAGS:
    for fam in fams:
        bad_values(group, flag, names, fam)
bad_values("simulate", "--entry-interval", ["--entry-interval"], ZERO, with_flag(BASES["simulate"], "--timer", "soft"))
# latency --spin-margin belongs to hybrid mode.
hybrid = with_flag(BASES["latency"], "--mode", "hybrid")
bad_values("latency", "--spin-margin", ["--spin-margin"], BARE + NEG + GARBAGE[:3] + HUGE[:2] + ["2ms"], hybrid)
case("latency", with_flag(BASES["latency"], "--spin-margin", "50us"), ["--spin-margin"])

# Counts and numbers.
COUNT_BAD = ["0", "-1", "abc", "1.5", "18446744073709551616", ""]
NUMS = [
    ("latency", "-t", ["--threads"], COUNT_BAD + ["100000"]),
    ("latency", "-l", ["--loops"], COUNT_BAD),
    ("latency", "--hist-buckets", ["--hist-buckets"], COUNT_BAD + ["10000000000"]),
    ("latency", "-p", ["--priority"], ["0", "100", "-1", "abc"]),
    ("check", "-p", ["--priority"], ["0", "100", "-1", "abc"]),
    ("run", "-p", ["--priority"], ["0", "100", "-1", "abc"]),
    ("bench ctxsw", "-p", ["--priority"], ["0", "100", "abc"]),
    ("bench alarm", "-p", ["--priority"], ["0", "100", "abc"]),
    ("bench alarm", "--alarms", ["--alarms"], ["0", "-1", "abc", "18446744073709551616"]),
    ("bench alarm", "--workload", ["--workload"], ["", "blk:0", "foo:1", "pct0:1", "pct100:1", "cont:-1", "cont:99999", "cont:1,,blk:1"]),
    ("bench memcpy", "--sizes", ["--sizes"], ["0", "512B", "abc", "1TiB", "-1KiB", "16KiB,,64KiB", "16"]),
    ("bench dispatch", "--raiser-cpu", ["--raiser-cpu"], [OFF, "999", "abc", "-1"]),
    ("simulate", "--cpus", ["--cpus"], ["0", "-1", "abc", "100000"]),
    ("simulate", "--seed", ["--seed"], ["-1", "abc", "18446744073709551616"]),
    ("simulate", "--max-events", ["--max-events"], ["0", "-1", "abc"]),
    ("simulate", "-j", ["--jobs"], ["0", "-1", "abc"]),
    ("simulate", "--hz", ["--hz"], ["0", "1000001", "abc", "-100", "100,,1000", "", "100.5"]),
    ("simulate", "-w", ["--workload", "pct"], ["", "foo:1", "cont:0", "periodic:1:10ms", "player:1:0", "pct0:1", "cont:-1"]),
    ("simulate frames", "--fps", ["--fps"], ["0", "-1", "abc", "1000001"]),
    ("simulate frames", "--frames", ["--frames"], ["0", "-1", "abc"]),
    ("simulate frames", "--shifts", ["--shifts"], ["0", "-1", "abc"]),
    ("trace analyze", "--hz", ["--hz"], ["0", "abc", "-1", "1000001"]),
    ("trace analyze", "--top", ["--top"], ["-1", "abc"]),
    ("trace analyze", "--timeline", ["--timeline"], ["-1", "abc"]),
    ("trace record", "--buffer-size", ["--buffer-size"], ["4", "0M", "-1M", "abc", "18446744073709551615G", "1T"]),
    ("run", "--bound", ["--bound"], ["0%", "101%", "-5%", "abc", "nan%", "50%%"]),
    ("plan check", "--bound", ["--bound"], ["0%", "101%", "-5%", "abc"]),
]
for group, flag, names, values in NUMS:
    bad_values(group, flag, names, values)
case("latency", with_flag(with_flag(BASES["latency"], "--policy", "other"), "-p", "5"), ["--priority"])
case("latency", with_flag(BASES["latency"], "-l", "5"), ["--loops"])  # with -D
case("latency", with_flag(BASES["latency"], "-i", "5us"), ["--interval"])  # under 10 us without --force

# Unknown enum values.
ENUMS = [
    ("latency", "--mode", ["busy", "", "ABS "]), ("latency", "--policy", ["deadline", ""]),
    ("latency", "--clock", ["tai", ""]), ("check", "--policy", ["deadline"]), ("run", "--policy", ["idle"]),
    ("bench ctxsw", "--channel", ["socket", ""]), ("bench ctxsw", "--policy", ["batch"]),
    ("bench dispatch", "--event", ["futex", ""]), ("bench memcpy", "--method", ["rep-movsb", ""]),
    ("bench gaps", "--policy", ["deadline"]), ("bench alarm", "--mechanism", ["itimer", ""]),
    ("bench alarm", "--policy", ["deadline"]), ("simulate", "--policy", ["lottery", ""]),
    ("simulate", "--timer", ["sundial", ""]), ("trace record", "--events", ["foo", "sched,foo", ""]),
    ("trace analyze", "--by", ["cpu", ""]), ("latency", "--dma-latency", ["on"]),
    ("run", "--watchdog", ["on"]), ("run", "--spin-margin", ["automatic"]),
    ("simulate frames", "--poll", ["tick"]),
]
for group, flag, values in ENUMS:
    bad_values(group, flag, [flag], values)

# CPUs.
CPU_BAD = ["999", OFF, "x", "-1", f"{LAST}-0" if LAST != "0" else "1-0", "0-", "", "4000", ",", "0-1-2"]
for group in ["latency", "run", "bench ctxsw", "bench trap", "bench memcpy", "bench dispatch", "bench gaps",
              "bench alarm", "plan check"]:
    bad_values(group, "-a", ["--affinity"], CPU_BAD if group in ("latency", "run") else CPU_BAD[:5])
bad_values("check", "-a", ["--affinity"], CPU_BAD[:5] + ["0-1"])
bad_values("bench alarm", "-a", ["--affinity"], ["0-1"])
bad_values("shield", "--cpus", ["--cpus"], ["999", OFF, "x", "", "-1", ",".join(map(str, CPUS))])

# Loads.
LOAD_BAD = ["gpu:2", "cpu:0", "cpu:9999", "cpu:-1", "cpu:x", "cpu@7", f"cpu:1@{OFF}", "cpu:1@", ",", "",
            "cpu:1,,io:1", "io:1@x"]
for group in ["latency", "check", "run", "bench ctxsw", "bench trap", "bench memcpy", "bench dispatch",
              "bench gaps", "bench alarm"]:
    bad_values(group, "--load", ["--load"], LOAD_BAD if group in ("latency", "run", "check") else LOAD_BAD[:6])

# Outputs: nonexistent directory, a directory, trailing slash, unwritable, a link in a world-writable
# directory, empty.
OUT_BAD = ["/nonexistent-dir/out.x", "adir", "newdir/", "adir/", "/proc/version", "/proc/nope/out",
           "ww/link.json", "", "f/afile/out.x"]
OUT_FLAGS = [
    ("latency", "--json"), ("latency", "--csv"), ("latency", "--hist"), ("latency", "--samples"),
    ("check", "--json"), ("check", "--csv"), ("run", "--json"), ("run", "--csv"),
    ("bench ctxsw", "--json"), ("bench gaps", "--csv"), ("bench alarm", "--json"),
    ("simulate", "--json"), ("simulate", "--csv"), ("simulate", "--plot"), ("simulate frames", "--plot"),
    ("simulate scenario", "--json"), ("trace record", "-o"), ("trace analyze", "--json"),
    ("trace analyze", "--csv"), ("plan compile", "-o"), ("plan decode", "-o"), ("experiment", "--json"),
]
for group, flag in OUT_FLAGS:
    names = {"-o": ["--output"]}.get(flag, [flag])
    for v in OUT_BAD:
        target = v if v.startswith("/") or v == "" else os.path.join(work, v)
        if v.endswith("/"):
            target = target.rstrip("/") + "/"
        case(group, with_flag(BASES[group], flag, target), names)
for flag, group in (("--figures", "trace analyze"), ("--figures", "experiment")):
    for v in ["afile", "/proc/version", "/proc/nope/figs", "ww/linkdir", ""]:
        case(group, with_flag(BASES[group], flag, v if v.startswith("/") or v == "" else os.path.join(F, v) if v == "afile" else os.path.join(work, v)), [flag])
for v in [os.path.join(F, "afile"), "/proc/nope", "/proc/version", ""]:
    case("install-lib", ["install-lib", "--prefix", v] if v else ["install-lib", "--prefix="], ["--prefix"])
case("latency", with_flag(with_flag(BASES["latency"], "--json", "-"), "--csv", "-"), ["--json", "--csv", "stdout"])
case("latency", with_flag(BASES["latency"], "--json", os.path.join(F, "good.toml")) + ["--csv", os.path.join(F, "good.toml")], ["--json", "--csv"])

# Plans, TOML.
for k, path in form_plan_paths.items():
    names = [os.path.basename(path)]
    case("run", ["run", path, "-D", "1s", "--json", J()], names)
    case("plan check", ["plan", "check", path], names)
    case("plan compile", ["plan", "compile", path, "-o", J("pplan")], names)
    case("plan decode", ["plan", "decode", path, "-o", J("toml")], names)
for k, path in machine_plan_paths.items():
    names = [os.path.basename(path), "/nonexistent", "no-such", "broken.so", "noexec.sh", "libc", "/tmp", "--affinity", "cpus", "CPU"]
    case("run", ["run", path, "-D", "1s", "--json", J()], names)
    case("plan check", ["plan", "check", path], names)
for p in ["/nonexistent/plan.toml", os.path.join(work, "adir"), "/proc/self/mem", ""]:
    case("run", ["run", p, "-D", "1s"] if p else ["run", "", "-D", "1s"], ["plan", p or "PLAN"])
    case("plan check", ["plan", "check", p], ["plan", p or "PLAN"])
# Plans, compiled.
for k, path in pplan_paths.items():
    names = [os.path.basename(path)]
    case("run", ["run", path, "-D", "1s", "--json", J()], names)
    case("plan check", ["plan", "check", path], names)
    case("plan decode", ["plan", "decode", path, "-o", J("toml")], names)
# Events CSV.
for k, path in csv_paths.items():
    case("plan compile", ["plan", "compile", STREAM_TOML, "--events", path, "-o", J("pplan")], [os.path.basename(path), "--events"])
for p in ["/nonexistent/e.csv", os.path.join(work, "adir")]:
    case("plan compile", ["plan", "compile", STREAM_TOML, "--events", p, "-o", J("pplan")], [p, "--events"])
# Scenarios.
for k, path in scen_paths.items():
    case("simulate scenario", ["simulate", "scenario", path, "--json", J()], [os.path.basename(path)])
for p in ["/nonexistent/s.toml", os.path.join(work, "adir")]:
    case("simulate scenario", ["simulate", "scenario", p, "--json", J()], [p])
# Trace files (without --partial a damaged file is refused after showing what could be read).
for k, path in trace_paths.items():
    case("trace analyze", ["trace", "analyze", path, "--json", J()], [os.path.basename(path)])
for p in ["/nonexistent/t.ptf", os.path.join(work, "adir"), "/dev/null"]:
    case("trace analyze", ["trace", "analyze", p, "--json", J()], [p])


def sane_durations(out):
    """Nothing a trace reports may last longer than the trace (1 s recorded here)."""
    try:
        d = json.loads(out)
    except ValueError:
        return "the output is not a JSON document"
    worst = max((s.get("max", 0) for s in d.get("series", []) if isinstance(s.get("max", 0), int)), default=0)
    return None if worst < 60 * 10**9 else f"a series reports a maximum of {worst / 1e9:.0f} s"


if backwards:
    # It may succeed (exit 0), and a run that succeeds stores its result: not what this case checks.
    case("trace analyze", ["trace", "analyze", backwards, "--json", "-", "--no-store"], [os.path.basename(backwards)],
         codes=(0, 2), check=sane_durations)
# Commands that run other commands, and other combinations.
case("shield", ["shield", "--cpus", LAST, "--", "/nonexistent/cmd"], ["/nonexistent/cmd", "COMMAND"])
case("shield", ["shield", "--cpus", LAST, "--", os.path.join(F, "noexec.sh")], ["noexec.sh", "COMMAND"])
case("shield", ["shield", "-D", "1s"], ["--cpus"])
case("shield", ["shield", "--restore", "--cpus", LAST], ["--restore", "--cpus"])
case("shield", ["shield", "--cpus", LAST, "--dry-run", "--restore"], ["--restore", "--dry-run"])
case("trace record", ["trace", "record", "-o", J("ptf"), "--", "/nonexistent/cmd"], ["/nonexistent/cmd", "COMMAND"])
case("trace record", ["trace", "record", "-o", J("ptf"), "-D", "1s", "--", "/bin/true"], ["--duration"])
case("experiment", ["experiment", "run", "no-such-experiment"], ["no-such-experiment"])
case("experiment", ["experiment", "run", "\x1b[31mred"], ["experiment"],)
case("run", ["run", GOOD_PLAN, "-D", "1s", "--mode", "hybrid"], ["--mode"])
case("latency", ["latency", "--bogus"], ["--bogus"])

# Environment variables. The directory variables, pointing where a privileged run must not believe
# them (a world-writable directory, a link, a relative path, a file, a name with escape sequences),
# with a bad flag: exit 2 naming the flag, the note about the variable escaped, and nothing written
# there. Then variables the system refuses: exit 3, listed as such (a results directory that cannot
# be created, a PUNCTUAL_TRACEFS that is not a tracefs mount).
ENV_PLACES = [ww, os.path.join(ww, "linkdir"), "rel/dir", os.path.join(F, "afile"),
              os.path.join(work, "adir", "\x1b[2J\u202ex")]
ENV_BAD_COMMANDS = [
    ("latency", with_flag(BASES["latency"], "-i", "0s"), ["--interval"]),
    ("run", ["run", form_plan_paths["period-zero"], "-D", "1s", "--json", J()], ["period-zero.toml"]),
    ("shield", ["shield", "--cpus", OFF, "-D", "1s"], ["--cpus"]),
    ("check", with_flag(BASES["check"], "-D", "0s"), ["--duration"]),
]
for var in ("PUNCTUAL_STATE_DIR", "PUNCTUAL_SHM_DIR", "PUNCTUAL_DATA_DIR"):
    for place in ENV_PLACES:
        for group, argv, names in ENV_BAD_COMMANDS:
            case("env", argv, names, env={var: place}, ignored=place in ENV_PLACES[:4])
EXIT3_ENV = [  # (env, argv, names): the system refuses, exit 3
    ({"PUNCTUAL_DATA_DIR": "/proc/nope"}, ["check", "-D", "2s", "--json", J()], ["/proc/nope"]),
    ({"PUNCTUAL_DATA_DIR": "/proc/nope"}, BASES["experiment"], ["/proc/nope"]),
    ({"PUNCTUAL_TRACEFS": os.path.join(work, "adir")}, BASES["trace record"], ["PUNCTUAL_TRACEFS"]),
    ({"PUNCTUAL_TRACEFS": "/nonexistent"}, BASES["trace record"], ["PUNCTUAL_TRACEFS"]),
    ({"PUNCTUAL_TRACEFS": "/proc"}, BASES["trace record"], ["PUNCTUAL_TRACEFS"]),
]
for env_, argv, names in EXIT3_ENV:
    case("env (exit 3)", argv, names, codes=(3,), env=env_)

if ONLY:
    cases = [c for c in cases if c["group"] in ONLY]
if os.environ.get("BI_LIST"):
    for c in cases:
        print(c["group"], "|", " ".join(f"{k}={v!r}" for k, v in c["env"].items()), " ".join(repr(a) if not a or " " in a else a[:80] for a in c["argv"]), "|", sorted(c["codes"]))
    shutil.rmtree(scratch, ignore_errors=True)
    sys.exit(0)

# --- running ----------------------------------------------------------------------------------


def tree(root):
    """Every path under root with its type, size, mode and mtime (files only; links not followed)."""
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            try:
                s = os.lstat(p)
            except OSError:
                continue
            # A directory's mtime is not compared: the outputs' pre-check creates and removes a
            # probe file in the target directory (Output::check_writable); what it holds is.
            mtime = None if stat.S_ISDIR(s.st_mode) else s.st_mtime_ns
            out[p] = (stat.S_IFMT(s.st_mode), s.st_size, s.st_mode, mtime)
    return out


def system():
    s = snapshot()
    s.pop("journals")
    return s


def sys_diff(a, b, tag):
    d = settings_diff(a, b)
    for k in ("tracefs", "mounts", "shm"):
        d += [f"new {k}: {x}" for x in sorted(b[k] - a[k])]
    # Holders are processes: only the case's own (tagged) count.
    d += [f"new cpu_dma_latency holder: pid {x}" for x in sorted(b["dma"] - a["dma"]) if env_tag(x) == tag]
    return d


print(f"bad input: {P}, {len(cases)} cases, CPU {LAST} (offline: {OFF}), scratch {scratch}", flush=True)
base_tree = tree(work)
results = {}
failures = []
inconclusive = []
t_start = time.time()


class Interrupted(Exception):
    pass


def on_signal(signum, _frame):
    raise Interrupted(signum)


# Interrupted itself, the script stops the case under test (SIGINT, SIGKILL after 10 s), kills what
# it left, replays journals of dead runs (`shield --restore`) and, unless another punctual is
# running, writes back the settings of the snapshot taken before the batch.
batch_state = system()
i = 0
current = {"proc": None, "tag": None, "before": None}
interrupted = None
for s_ in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s_, on_signal)
try:
    for i, c in enumerate(cases, 1):
        tag = f"{BATCH}-{i}"
        foreign = set(foreign_punctuals(BATCH))
        before = system()
        env = dict(os.environ, PUNCTUAL_DATA_DIR=datadir, PUNCTUAL_FAULT_TAG=tag)
        for k in ("PUNCTUAL_STATE_DIR", "PUNCTUAL_SHM_DIR", "PUNCTUAL_TRACEFS"):
            env.pop(k, None)
        env.update(c["env"])
        t0 = time.monotonic()
        proc = subprocess.Popen([P] + c["argv"], cwd=work, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        current.update(proc=proc, tag=tag, before=before)
        timed_out = False
        try:
            out, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            timed_out = True
            proc.send_signal(signal.SIGINT)
            try:
                out, err = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
        took = time.monotonic() - t0
        rc = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
        err_s = err.decode("utf-8", "replace")
        why = []
        if timed_out:
            why.append("still running after 20 s (interrupted)")
        if rc not in c["codes"]:
            why.append(f"exit {rc}, expected {'/'.join(map(str, sorted(c['codes'])))}")
        if rc in (2, 3) and not any(n in err_s for n in c["names"]):
            why.append(f"message names none of {c['names'][:4]}")
        # A privileged run must say it ignores a directory it does not believe (once past the
        # argument parser, which reads no variable); a new path under a root-owned directory is believed.
        if c["env"] and rc == 2 and err_s.startswith("punctual:") and c["ignored"]:
            var = next(iter(c["env"]))
            if f"ignoring {var}" not in err_s:
                why.append(f"no note that {var} was ignored")
        if "panicked" in err_s or "RUST_BACKTRACE" in err_s:
            why.append("panic")
        if "\x1b" in err_s or "\u202e" in err_s:
            why.append("raw escape or bidi control in the message")
        if len(err) > 20000:
            why.append(f"message of {len(err)} bytes")
        if c["check"] and rc == 0:
            bad = c["check"](out.decode("utf-8", "replace"))
            if bad:
                why.append(bad)
        # Nothing written, nothing left, nothing changed.
        now_tree = tree(work)
        if now_tree != base_tree:
            added = sorted(set(now_tree) - set(base_tree))
            changed = sorted(p for p in set(now_tree) & set(base_tree) if now_tree[p] != base_tree[p])
            removed = sorted(set(base_tree) - set(now_tree))
            why.append(f"scratch changed: added {[os.path.relpath(p, work) for p in added][:4]} "
                       f"changed {[os.path.relpath(p, work) for p in changed][:4]} "
                       f"removed {[os.path.relpath(p, work) for p in removed][:4]}")
        stored = [os.path.join(d, n) for d, _, fs in os.walk(datadir) for n in fs]
        if stored:
            why.append(f"result stored: {stored[:3]}")
        if os.path.exists(f"{STATE}/journal-{proc.pid}.json"):
            why.append(f"journal left: {STATE}/journal-{proc.pid}.json")
        deadline = time.monotonic() + 2
        while tagged(tag) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = tagged(tag)
        if left:
            why.append(f"processes left: {sorted(left)}")
            for p in left:
                try:
                    os.kill(p[0], signal.SIGKILL)
                except OSError:
                    pass
        after = system()
        d = sys_diff(before, after, tag)
        foreign |= set(foreign_punctuals(BATCH))
        if d and foreign and not why:
            # Another user's punctual (shields, traces, runs of other sessions) changes the same
            # settings: the case cannot be judged on them, and is counted apart, never as passed.
            inconclusive.append((c, d, sorted(foreign)))
        elif d:
            why.append(f"system changed: {'; '.join(d[:4])}")
        r = results.setdefault(c["group"], {"n": 0, "ok": 0, "inc": 0})
        r["n"] += 1
        if not why and d and foreign:
            r["inc"] += 1
        elif why:
            first = err_s.strip().splitlines()[:2]
            failures.append((c, rc, why, " | ".join(first)[:300]))
        else:
            r["ok"] += 1
        # Put back what a wrongly accepted case changed, so the next case starts clean.
        if now_tree != base_tree or stored or d:
            for p in sorted(set(now_tree) - set(base_tree), reverse=True):
                try:
                    if os.path.isdir(p) and not os.path.islink(p):
                        shutil.rmtree(p)
                    else:
                        os.unlink(p)
                except OSError:
                    pass
            for p in stored:
                os.unlink(p)
            for sub in os.listdir(datadir):
                shutil.rmtree(os.path.join(datadir, sub), ignore_errors=True)
            # Never while another punctual runs: its shield would be undone under it.
            if d and not foreign:
                subprocess.run([P, "shield", "--restore"], capture_output=True)
                restore_settings(before, snapshot())
            base_tree = tree(work)
        if i % 50 == 0:
            print(f"  {i}/{len(cases)} ({len(failures)} failed so far)", file=sys.stderr, flush=True)

except Interrupted as e:
    interrupted = e.args[0]
    for s_ in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s_, signal.SIG_IGN)
    p_ = current["proc"]
    if p_ is not None and p_.poll() is None:
        try:
            os.kill(p_.pid, signal.SIGINT)
            p_.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(p_.pid, signal.SIGKILL)
            p_.wait()
        except OSError:
            pass
    for q in tagged(BATCH):
        try:
            os.kill(q[0], signal.SIGKILL)
        except OSError:
            pass
    subprocess.run([P, "shield", "--restore"], capture_output=True)
    if not foreign_punctuals(BATCH):
        restore_settings(batch_state, snapshot())
    shutil.rmtree(scratch, ignore_errors=True)
    print(f"bad-input: interrupted by signal {interrupted} at case {i} of {len(cases)}; restored",
          file=sys.stderr, flush=True)
    sys.exit(130)

def show(argv):
    def q(a):
        a = a.replace(work + "/", "")
        if len(a) > 60:
            a = a[:40] + f"...({len(a)} chars)"
        return a if a and all(ch.isalnum() or ch in "-_./:,=@%" for ch in a) else repr(a)
    return "punctual " + " ".join(q(a) for a in argv)


print()
print(f"{'command':20} {'cases':>6} {'passed':>7} {'failed':>7} {'undecided':>10}")
tn = tok = tinc = 0
for g in sorted(results):
    r = results[g]
    tn += r["n"]
    tok += r["ok"]
    tinc += r["inc"]
    print(f"{g:20} {r['n']:>6} {r['ok']:>7} {r['n'] - r['ok'] - r['inc']:>7} {r['inc']:>10}")
print(f"{'total':20} {tn:>6} {tok:>7} {tn - tok - tinc:>7} {tinc:>10}")
print("(undecided: passed every other check, but the system changed while another punctual, not")
print(" started by this script, was running; run again on a quiet machine to decide them)")
print(f"({time.time() - t_start:.0f} s; paths relative to {work}; exit 3 accepted only where listed)")
if inconclusive:
    print("\nundecided:")
    for c, d, fo in inconclusive:
        print(f"  {show(c['argv'])}\n      -> {'; '.join(d[:3])} (other punctual pids {fo[:4]})")
if failures:
    print("\nfailures:")
    for c, rc, why, first in failures:
        envs = " ".join(f"{k}={v!r}" for k, v in c["env"].items())
        print(f"  {envs + ' ' if envs else ''}{show(c['argv'])}\n      -> {'; '.join(why)}\n      said: {first}")
shutil.rmtree(scratch, ignore_errors=True)
sys.exit(1 if failures else (4 if inconclusive else 0))
PY
