#!/usr/bin/env bash
# Check the minimum supported Rust version (issue 18): the workspace's `rust-version` must be true.
#   1. every workspace member inherits it (so cargo's MSRV-aware resolver and clippy's
#      `incompatible_msrv` lint, which flags std APIs newer than it, apply to every crate);
#   2. no package in Cargo.lock that is built on this platform declares a higher `rust-version`
#      (fix with: CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback cargo update -p NAME);
#   3. with --build (or when that toolchain is installed), `cargo +MSRV check` builds every target
#      with that exact toolchain (install it with: rustup toolchain install MSRV --profile minimal).
# Usage: scripts/check-msrv.sh [--build]
set -euo pipefail
cd "$(dirname "$0")/.."
META=$(mktemp)
trap 'rm -f "$META"' EXIT
cargo metadata --format-version 1 --locked --filter-platform "$(rustc -vV | sed -n 's/^host: //p')" >"$META"
MSRV=$(python3 - "$META" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
pk = {p["id"]: p for p in m["packages"]}
nodes = {n["id"]: n for n in m["resolve"]["nodes"]}
members = [pk[i] for i in m["workspace_members"]]
versions = {p["rust_version"] for p in members}
if len(versions) != 1 or None in versions:
    bad = [p["name"] for p in members if p["rust_version"] is None]
    sys.exit(f"members without rust-version (add rust-version.workspace = true): {bad or versions}")
msrv = versions.pop()
key = lambda v: tuple(int(x) for x in v.split("."))
seen, todo = set(), list(m["workspace_members"])
while todo:
    i = todo.pop()
    if i not in seen:
        seen.add(i)
        todo.extend(d["pkg"] for d in nodes[i]["deps"])
over = sorted(
    (pk[i]["name"], pk[i]["version"], pk[i]["rust_version"])
    for i in seen
    if pk[i]["rust_version"] and key(pk[i]["rust_version"]) > key(msrv)
)
for name, version, rv in over:
    print(f"{name} {version} needs Rust {rv} > {msrv}", file=sys.stderr)
if over:
    sys.exit(f"{len(over)} locked packages need a newer Rust than rust-version = {msrv}")
print(f"{msrv}")
print(f"rust-version {msrv}: all {len(seen)} packages built on this platform allow it", file=sys.stderr)
PY
)
# rustup names the toolchain as installed: "1.87.0" answers for rust-version "1.87".
installed() { rustup toolchain list 2>/dev/null | grep -o "^$MSRV\(\.0\)\?-" | head -1 | sed 's/-$//'; }
TC=$(installed)
if [ "${1:-}" = "--build" ] || [ -n "$TC" ]; then
    [ -n "$TC" ] || { rustup toolchain install "$MSRV" --profile minimal; TC=$(installed); }
    # A target directory of its own: artifacts of another toolchain would only be rebuilt anyway.
    CARGO_TARGET_DIR=target/msrv cargo "+$TC" check --workspace --all-targets --locked
    echo "cargo +$TC check --workspace --all-targets: ok"
else
    echo "SKIPPED cargo +$MSRV check: toolchain $MSRV not installed (scripts/check-msrv.sh --build installs it)" >&2
fi
