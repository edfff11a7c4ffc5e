"""What punctual may change on this machine, and who is left running: shared by
scripts/fault-inject.sh and scripts/bad-input.sh (issue 19).

A snapshot holds every IRQ's smp_affinity_list, default_smp_affinity, sched_rt_runtime_us,
sched_rr_timeslice_ms, the CPU mask of every task, tracefs instances named punctual-* (seen through a
tracefs mounted in a private mount namespace, so the host's mounts are not touched), mounts under
/run/punctual, who holds /dev/cpu_dma_latency, wake channels in /run/punctual-wake and /dev/shm and journals in /run/punctual.
Runs are tagged with PUNCTUAL_FAULT_TAG in their environment so their descendants can be found.
"""
import os
import subprocess

STATE = "/run/punctual"


def online_cpus():
    out = []
    for part in open("/sys/devices/system/cpu/online").read().strip().split(","):
        a, _, b = part.partition("-")
        out += range(int(a), int(b or a) + 1)
    return out


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def start_time(pid):
    s = read(f"/proc/{pid}/stat")
    if not s:
        return None
    try:
        return int(s[s.rindex(")") + 2:].split()[19])
    except (ValueError, IndexError):
        return None


def pids():
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def tagged(tag):
    """(pid, start time) of live processes whose environment carries this tag, or one under it
    (TAG-...: the batch's tag finds every run, a run's tag its restore)."""
    exact = f"PUNCTUAL_FAULT_TAG={tag}".encode()
    under = exact + b"-"
    out = set()
    for pid in pids():
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        if any(v == exact or v.startswith(under) for v in env.split(b"\0")):
            st = start_time(pid)
            if st is not None:
                out.add((pid, st))
    return out


def descendants(root):
    kids = {}
    for pid in pids():
        s = read(f"/proc/{pid}/stat")
        if not s:
            continue
        try:
            f = s[s.rindex(")") + 2:].split()
            kids.setdefault(int(f[1]), []).append((pid, int(f[19])))
        except (ValueError, IndexError):
            continue
    out, todo = set(), [root]
    while todo:
        for c in kids.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c[0])
    return out


def alive(p):
    return start_time(p[0]) == p[1]


def env_tag(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for v in f.read().split(b"\0"):
                if v.startswith(b"PUNCTUAL_FAULT_TAG="):
                    return v.split(b"=", 1)[1].decode()
    except OSError:
        pass
    return None


def tracefs_instances():
    """punctual-* instances, through a tracefs mounted in a private mount namespace (instances are
    kernel-wide; the host's mount table is left alone)."""
    r = subprocess.run(["unshare", "-m", "sh", "-c",
                        "mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null && ls /sys/kernel/tracing/instances"],
                       capture_output=True, text=True)
    return {n for n in r.stdout.split() if n.startswith("punctual-")}


def remove_instance(name):
    subprocess.run(["unshare", "-m", "sh", "-c",
                    f"mount -t tracefs tracefs /sys/kernel/tracing && rmdir /sys/kernel/tracing/instances/{name}"],
                   capture_output=True)


def mounts_under_run():
    out = set()
    for line in open("/proc/self/mountinfo"):
        mp = line.split()[4]
        if mp == STATE or mp.startswith(STATE + "/"):
            out.add(mp)
    return out


def dma_holders():
    out = set()
    for pid in pids():
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == "/dev/cpu_dma_latency":
                        out.add(pid)
                        break
                except OSError:
                    pass
        except OSError:
            pass
    return out


def task_masks():
    out = {}
    for pid in pids():
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for t in tids:
            tid = int(t)
            try:
                out[tid] = (start_time(tid), frozenset(os.sched_getaffinity(tid)))
            except OSError:
                pass
    return out


def snapshot():
    irq = {}
    for d in os.listdir("/proc/irq"):
        if d.isdigit():
            v = read(f"/proc/irq/{d}/smp_affinity_list")
            if v is not None:
                irq[d] = v
    # Wake channels: root's live in /run/punctual-wake (issue 32), older ones and other users'
    # under /dev/shm. Full paths.
    shm = {f"/dev/shm/{n}" for n in os.listdir("/dev/shm") if n.startswith("punctual-")}
    for d in ("/run/punctual-wake",):
        try:
            shm |= {f"{d}/{n}" for n in os.listdir(d) if n.startswith("punctual-")}
        except OSError:
            pass
    try:
        state = {n for n in os.listdir(STATE) if n.startswith("journal-")}
    except OSError:
        state = set()
    return {
        "irq": irq,
        "default_smp_affinity": read("/proc/irq/default_smp_affinity"),
        "sched_rt_runtime_us": read("/proc/sys/kernel/sched_rt_runtime_us"),
        "sched_rr_timeslice_ms": read("/proc/sys/kernel/sched_rr_timeslice_ms"),
        "tasks": task_masks(),
        "tracefs": tracefs_instances(),
        "mounts": mounts_under_run(),
        "dma": dma_holders(),
        "shm": shm,
        "journals": state,
    }


def settings_diff(before, after, ignore_tids=()):
    """What differs in the settings punctual may change (tasks: only those alive in both)."""
    d = []
    for irq, v in before["irq"].items():
        w = after["irq"].get(irq)
        if w is not None and w != v:
            d.append(f"irq {irq} {v} -> {w}")
    for k in ("default_smp_affinity", "sched_rt_runtime_us", "sched_rr_timeslice_ms"):
        if before[k] != after[k]:
            d.append(f"{k} {before[k]} -> {after[k]}")
    for tid, (st, m) in before["tasks"].items():
        a = after["tasks"].get(tid)
        if a and a[0] == st and a[1] != m and tid not in ignore_tids:
            d.append(f"task {tid} ({read(f'/proc/{tid}/comm')}) mask {sorted(m)} -> {sorted(a[1])}")
    return d


def write(path, value):
    try:
        with open(path, "w") as f:
            f.write(value + "\n")
        return True
    except OSError:
        return False


def restore_settings(to, now):
    """Write back what differs (IRQs, sysctls, masks of tasks alive in both); returns what was done."""
    done = []
    for irq, v in to["irq"].items():
        w = now["irq"].get(irq)
        if w is not None and w != v and write(f"/proc/irq/{irq}/smp_affinity_list", v):
            done.append(f"irq {irq} -> {v}")
    for k, path in (("default_smp_affinity", "/proc/irq/default_smp_affinity"),
                    ("sched_rt_runtime_us", "/proc/sys/kernel/sched_rt_runtime_us"),
                    ("sched_rr_timeslice_ms", "/proc/sys/kernel/sched_rr_timeslice_ms")):
        if to[k] is not None and to[k] != now[k] and write(path, to[k]):
            done.append(f"{k} -> {to[k]}")
    for tid, (st, m) in to["tasks"].items():
        a = now["tasks"].get(tid)
        if a and a[0] == st and a[1] != m:
            try:
                os.sched_setaffinity(tid, m)
                done.append(f"task {tid} mask -> {sorted(m)}")
            except OSError:
                pass
    return done


def foreign_punctuals(own_tag_prefix):
    """Live punctual processes this batch did not start (another user's runs could change the same
    settings: their differences are marked, not hidden)."""
    out = []
    for pid in pids():
        if read(f"/proc/{pid}/comm") != "punctual":
            continue
        # A zombie's environment reads empty: one of ours, killed a moment ago, is not foreign.
        stat = read(f"/proc/{pid}/stat") or ""
        if stat[stat.rfind(")") + 2:][:1] == "Z":
            continue
        t = env_tag(pid)
        if t is None or not t.startswith(own_tag_prefix + "-"):
            out.append(pid)
    return out
