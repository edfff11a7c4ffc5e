#!/usr/bin/env bash
# Memory and time of `punctual trace analyze` on synthetic traces of a busy machine (docs/benchmarks.md,
# "Trace analysis memory (issue 18)"): N short-lived processes over 60 s (100,000 over 120 s) on two
# CPUs, written by crates/trace/examples/synth_trace.rs. For each trace: the binary with tables only,
# the binary with --json, and the library alone without the document's series (what the binary does
# once it skips the series when no export is asked).
# Usage: scripts/bench-trace-analyze-memory.sh [PUNCTUAL_BINARY_TO_COMPARE]
# Needs bash, GNU time; builds the release binary and the examples.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v /usr/bin/time >/dev/null || apt-get install -y time >/dev/null
cargo build --release -p punctual >/dev/null 2>&1
cargo build --release -p punctual-trace --examples >/dev/null 2>&1
P=target/release/punctual
OTHER=${1:-}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

measure() { # label, command...
    local label=$1; shift
    /usr/bin/time -f "%e %M" -o "$TMP/t" "$@" >/dev/null 2>"$TMP/err" || { echo "$label: failed"; cat "$TMP/err"; return; }
    read -r wall kb < "$TMP/t"
    printf '%-28s %8s s %10s MiB\n' "$label" "$wall" "$(( kb / 1024 ))"
}

for spec in 4000:60 11000:60 100000:120; do
    n=${spec%:*}; s=${spec#*:}
    f="$TMP/t$n.ptf"
    target/release/examples/synth_trace "$n" "$s" "$f"
    echo "## $n processes, $s s, $(( $(stat -c %s "$f") / 1024 )) KiB trace"
    if [ -n "$OTHER" ] && [ "$n" -le 11000 ]; then
        measure "compared binary, tables" "$OTHER" trace analyze "$f"
    fi
    measure "punctual, tables" "$P" trace analyze "$f"
    measure "punctual, --json" "$P" trace analyze "$f" --json "$TMP/r.json"
    measure "library, tables only" target/release/examples/analyze_trace "$f"
done
