#!/usr/bin/env bash
# Lists Rust functions longer than a limit (default 150 lines, issue 12) and exits 1 if there is any.
# A function's length runs from the line of its `fn` to the line of its closing brace, both included;
# a function nested in another counts in both. Comments, strings and char literals are skipped, so
# braces inside them do not count.
# Usage: scripts/long-functions.sh [limit] [path...]   (paths default to crates/*/src)
# Output: one line per long function, longest first: "<lines> <file>:<line> <name>".
set -euo pipefail
cd "$(dirname "$0")/.."
limit=${1:-150}
shift || true
if [ "$#" -eq 0 ]; then set -- crates/*/src; fi
exec python3 - "$limit" "$@" <<'PY'
import os, re, sys

sys.path.insert(0, "scripts")
from rust_tokens import tokens  # noqa: E402

limit = int(sys.argv[1])
def functions(path):
    with open(path, encoding="utf-8") as f:
        toks = list(tokens(f.read()))
    out = []
    for k, (kind, text, line) in enumerate(toks):
        if kind != "id" or text != "fn" or k + 1 >= len(toks) or toks[k + 1][0] != "id":
            continue
        name, depth, j = toks[k + 1][1], 0, k + 2
        # The body is the first `{` outside parentheses and brackets; a `;` there first means no body.
        while j < len(toks):
            t = toks[j][1] if toks[j][0] == "p" else None
            if t in ("(", "["):
                depth += 1
            elif t in (")", "]"):
                depth -= 1
            elif depth == 0 and t in ("{", ";"):
                break
            j += 1
        if j >= len(toks) or toks[j][1] != "{":
            continue
        braces = 0
        while j < len(toks):
            if toks[j][0] == "p" and toks[j][1] == "{":
                braces += 1
            elif toks[j][0] == "p" and toks[j][1] == "}":
                braces -= 1
                if braces == 0:
                    break
            j += 1
        end = toks[j][2] if j < len(toks) else toks[-1][2]
        out.append((end - line + 1, path, line, name))
    return out


found = []
for root in sys.argv[2:]:
    walk = [(root, [], [os.path.basename(root)])] if os.path.isfile(root) else os.walk(root)
    for d, _, files in walk:
        for fname in files:
            if fname.endswith(".rs"):
                p = root if os.path.isfile(root) else os.path.join(d, fname)
                found += [f for f in functions(p) if f[0] > limit]
for lines, path, line, name in sorted(found, key=lambda f: (-f[0], f[1], f[2])):
    print(f"{lines} {path}:{line} {name}")
sys.exit(1 if found else 0)
PY
