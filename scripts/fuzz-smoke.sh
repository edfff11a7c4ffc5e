#!/usr/bin/env bash
# Fuzz the parsers of files punctual reads (issue 18): the plan TOML, the compiled plan, the trace
# file (read + analysis + report) and the simulator scenario, with cargo-fuzz (libFuzzer) on the
# nightly toolchain, overflow checks and debug assertions on, at the lowest CPU priority.
#   scripts/fuzz-smoke.sh [SECONDS_PER_TARGET] [TARGET...]   default: 60 s each, every target
#   FUZZ_RUNS=10000000 scripts/fuzz-smoke.sh 2400            stop each at 10 M executions (or 40 min)
#   FUZZ_NICE=0 ...                                          at normal priority (default: nice 19)
#   scripts/fuzz-smoke.sh --seeds                            regenerate fuzz/seeds from examples/
# Each target starts from fuzz/seeds/TARGET (committed) and grows fuzz/corpus/TARGET (ignored); a
# crash stops the run and leaves the input in fuzz/artifacts/TARGET. Prints executions per target.
# Needs: rustup's nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
set -euo pipefail
cd "$(dirname "$0")/.."
TARGETS_ALL="plan_toml plan_compiled trace_file sim_scenario"

if [ "${1:-}" = "--seeds" ]; then
    cargo build --release -p punctual -p punctual-trace --example synth_trace >/dev/null 2>&1
    cargo build --release -p punctual >/dev/null 2>&1
    P=target/release/punctual
    S=fuzz/seeds
    rm -rf "$S"; mkdir -p "$S"/{plan_toml,plan_compiled,trace_file,sim_scenario}
    cp examples/plans/*.toml "$S/plan_toml/"
    cp examples/sim/*.toml "$S/sim_scenario/"
    "$P" plan compile examples/plans/basic.toml -o "$S/plan_compiled/basic.pplan" >/dev/null
    # The stream's first 40 events: small inputs fuzz faster.
    head -41 examples/plans/stream.csv > "$S/stream40.csv"
    "$P" plan compile examples/plans/stream.toml --events "$S/stream40.csv" \
        -o "$S/plan_compiled/stream40.pplan" >/dev/null
    rm "$S/stream40.csv"
    target/release/examples/synth_trace 4 1 "$S/trace_file/synth-4-processes.ptf"
    cp crates/trace/tests/fixtures/sleep-1ms.ptf "$S/trace_file/"
    ls -l "$S"/*
    exit 0
fi

SECONDS_EACH=${1:-60}
shift || true
TARGETS=${*:-$TARGETS_ALL}
command -v cargo-fuzz >/dev/null || { echo "cargo-fuzz missing: cargo install cargo-fuzz" >&2; exit 3; }
rustup toolchain list | grep -q '^nightly' || { echo "nightly missing: rustup toolchain install nightly" >&2; exit 3; }
cd fuzz
for t in $TARGETS; do
    mkdir -p "corpus/$t"
    log=$(mktemp)
    # -O -a: optimised, with debug assertions and overflow checks. No sanitizer: the parsers are
    # safe Rust, and AddressSanitizer's allocator costs most of the trace target's time (each
    # analysis allocates histograms of 270 KB). Inputs up to 4 KB (seeds are cut there). The
    # timeout is wall time: at nice 19 beside builds a 1 s unit (admission walks up to 5 M
    # releases) can take ten times that, so only a minute counts as a hang.
    if nice -n "${FUZZ_NICE:-19}" cargo +nightly fuzz run -O -a -s none "$t" "corpus/$t" "seeds/$t" -- \
        -max_total_time="$SECONDS_EACH" -runs="${FUZZ_RUNS:--1}" -max_len=4096 -rss_limit_mb=2048 -timeout=60 \
        -print_final_stats=1 \
        >"$log" 2>&1; then
        status=ok
    else
        status="CRASH (see fuzz/artifacts/$t and $log)"
    fi
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    printf '%-14s %12s executions %8s exec/s  %s\n' "$t" "${runs:-?}" "${rate:-?}" "$status"
    if [ "$status" = ok ] && [ -n "$runs" ]; then rm -f "$log"; else echo "  log: $log"; fi
done
