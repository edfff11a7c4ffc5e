#!/usr/bin/env bash
# The test suite, N times in a row (default 5), while another cargo build keeps the CPUs busy:
# the suite must pass every time on a loaded 2-CPU machine (issue 31). Prints, per run, the exit
# status, the wall time, libtest's totals, the load and host steal during the run, and whether the
# machine's shield-visible state (IRQ affinities, default_smp_affinity, sched_rt_runtime_us, pid 1's
# CPU mask, tracefs instances) is as it was before the run.
#
#   scripts/green-repeat.sh [N]
#
# The competing build is a release build of the workspace in its own target directory
# (target/green-load), cleaned and started again whenever it finishes; it is stopped (by its pid)
# when the runs end or on Ctrl-C.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
load_dir=target/green-load
log=target/green-repeat
mkdir -p "$log"

state() {
  for f in /proc/irq/[0-9]*/smp_affinity_list /proc/irq/default_smp_affinity \
           /proc/sys/kernel/sched_rt_runtime_us; do
    printf '%s %s\n' "$f" "$(cat "$f" 2>/dev/null)"
  done
  grep Cpus_allowed_list /proc/1/status
  ls /sys/kernel/tracing/instances 2>/dev/null | sed 's/^/instance /'
}
steal() { awk '/^cpu /{print $9}' /proc/stat; }
lock=${TMPDIR:-/tmp}/punctual-tests-cpu.lock
locked_state() { ( flock 9; state ) 9>>"$lock"; }

# In a session of its own, so stopping it ends its cargo and rustc processes too (by its pid).
setsid bash -c '
  while :; do
    cargo clean -q --release --target-dir "$1" -p punctual -p punctual-sim -p punctual-trace 2>/dev/null
    cargo build -q --release --workspace --target-dir "$1" >/dev/null 2>&1
  done' builder "$load_dir" &
bpid=$!
stop() { kill -- "-$bpid" 2>/dev/null; wait "$bpid" 2>/dev/null; }
trap 'stop; exit 130' INT TERM

cargo test --workspace --no-run -q >/dev/null 2>&1 || { stop; echo "build failed" >&2; exit 1; }
green=0
for i in $(seq 1 "$runs"); do
  # Read under the tests' CPU lock: a shield another process's test holds (it holds the lock
  # while it does) is not this suite's leftover.
  locked_state >"$log/state-before-$i"
  s0=$(steal); t0=$(date +%s)
  cargo test --workspace >"$log/run-$i.out" 2>&1
  rc=$?
  t1=$(date +%s); s1=$(steal)
  locked_state >"$log/state-after-$i"
  passed=$(grep -o '[0-9]* passed' "$log/run-$i.out" | awk '{s+=$1} END {print s+0}')
  failed=$(grep -o '[0-9]* failed' "$log/run-$i.out" | awk '{s+=$1} END {print s+0}')
  skipped=$(grep -c '^SKIPPED' "$log/run-$i.out")
  same=yes
  diff -q "$log/state-before-$i" "$log/state-after-$i" >/dev/null || same=NO
  builds=$(pgrep -f "target-dir $load_dir" | wc -l)
  printf 'run %d: exit %d, %d s, %d passed, %d failed, %d skipped, load %s, steal %d ticks, machine as before: %s, builder alive: %s\n' \
    "$i" "$rc" $((t1 - t0)) "$passed" "$failed" "$skipped" "$(cut -d' ' -f1-3 /proc/loadavg)" \
    $((s1 - s0)) "$same" "$([ "$builds" -gt 0 ] && echo yes || echo no)"
  [ "$rc" = 0 ] && [ "$same" = yes ] && green=$((green + 1))
done
stop
echo "$green of $runs runs green with the machine as before (logs in $log/)"
[ "$green" = "$runs" ]
