#!/usr/bin/env bash
# How long `punctual run` takes to end after SIGTERM while other real-time work holds CPUs
# (issue 32): FIFO 99 busy loops (6 s each) on the CPUs named, started 1 s into a 20 s plan of
# one exec action and one spawned wake client, and SIGTERM 0.3 s after them. Prints the exit code
# and the time from the signal to the exit. Needs root; takes the tests' CPU lock.
#   scripts/stop-under-rt-load.sh "0 1" 5      # spinners on CPUs 0 and 1, five runs
#   PUNCTUAL=target/release/punctual scripts/stop-under-rt-load.sh 1
set -euo pipefail
cd "$(dirname "$0")/.."
cpus=${1:-"0 1"}
runs=${2:-1}
P=${PUNCTUAL:-target/release/punctual}
[ "$(id -u)" = 0 ] || { echo "stop-under-rt-load: needs root (SCHED_FIFO)" >&2; exit 3; }
[ -x "$P" ] || { echo "stop-under-rt-load: no $P (cargo build --release -p punctual)" >&2; exit 3; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
exe=$(realpath "$P")
cat >"$dir/plan.toml" <<PLAN
[plan]
name = "stop-under-rt-load"
duration = "20s"

[[task]]
name = "sleep"
period = "10ms"
offset = "auto"
action = { kind = "exec", argv = ["/bin/sleep", "0.001"] }

[[task]]
name = "client"
period = "10ms"
offset = "auto"
action = { kind = "wake", channel = "surl-$$", spawn = ["$exe", "__periodic", "--mode", "wake", "--period-ns", "10000000", "--first-ns", "0", "--until-ns", "0", "--channel", "surl-$$"] }
PLAN
exec 9>>/tmp/punctual-tests-cpu.lock
one() {
  flock 9
  "$P" run --no-store "$dir/plan.toml" >"$dir/out.log" 2>&1 9>&- &
  local pid=$! spins=() rc
  sleep 1
  for c in $cpus; do
    # Bounded by itself: a FIFO 99 loop would hold off a timeout(1) at the same priority.
    chrt -f 99 taskset -c "$c" python3 9>&- -c 'import time
e = time.time() + 6
while time.time() < e: pass' &
    spins+=($!)
  done
  sleep 0.3
  kill -TERM "$pid"
  local ts; ts=$(date +%s%N)
  wait "$pid" && rc=0 || rc=$?
  local te; te=$(date +%s%N)
  wait "${spins[@]}" 2>/dev/null || true
  flock -u 9
  printf 'FIFO 99 on CPUs [%s]: exit %s, ended %d ms after SIGTERM\n' "$cpus" "$rc" $(((te - ts) / 1000000))
}
for _ in $(seq "$runs"); do one; done
