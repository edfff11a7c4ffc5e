#!/usr/bin/env bash
# KURT Tables 4.1 and 4.2 on this machine: punctual experiment run kurt-periodic.
# Usage: scripts/bench-kurt-periodic.sh [--quick]     (full: about 5 minutes; --quick: under a minute)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
out=${OUT:-target/bench}
mkdir -p "$out"
./target/release/punctual experiment run kurt-periodic "$@" --figures "$out" --json "$out/kurt-periodic.json"
