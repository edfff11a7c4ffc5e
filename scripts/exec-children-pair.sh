#!/bin/bash
# Issue 32 (docs/benchmarks.md, "Reliability re-probe"): runs the spinner test and the CPU-share test
# of crates/dispatch/tests/exec_children.rs in one process (two libtest threads), holding the
# machine's test CPU lock itself (the tests get a private TMPDIR, so they do not wait on it again);
# prints every thread's and child's policy at 12 s, and kills the process (by pid) after $1 s
# (default 60). Build first: cargo test -p punctual-dispatch --test exec_children --no-run
mkdir -p "${TMPDIR_TESTS:-/tmp/punctual-pair-tmp}"
bin=$(ls -t target/debug/deps/exec_children-* | grep -v '\.d$' | head -1)
limit=${1:-60}
t0=$(date +%s.%N)
flock /tmp/punctual-tests-cpu.lock env TMPDIR=${TMPDIR_TESTS:-/tmp/punctual-pair-tmp} $bin --test-threads=2 an_exec_child_spinning watchdog_gap > /tmp/punctual-pair.out 2>&1 &
pid=$!; sleep 0.5; while ! pgrep -f -n "^$bin" >/dev/null; do sleep 0.2; done; echo "lock taken after $(echo "$(date +%s.%N) - $t0" | bc) s"; t0=$(date +%s.%N); pid=$(pgrep -n -P $pid)
sleep 12
echo "--- at 12 s: threads of $pid and children (policy)"
ps -L -o pid,ppid,tid,cls,rtprio,stat,comm --ppid $pid -p $pid | head -20
while kill -0 $pid 2>/dev/null; do
  now=$(date +%s.%N)
  if (( $(echo "$now - $t0 > $limit" | bc) )); then echo "HUNG: still running after $limit s"; for c in $(pgrep -P $pid); do kill -9 $c; done; kill -9 $pid; break; fi
  sleep 1
done
wait $pid 2>/dev/null; echo "rc=$? elapsed=$(echo "$(date +%s.%N) - $t0" | bc)"
grep -E "^test |panicked|stopped after|result" /tmp/punctual-pair.out
