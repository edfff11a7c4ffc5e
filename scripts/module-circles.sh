#!/usr/bin/env bash
# Lists module circles inside crates (issue 30): two or more sibling modules of one crate that
# reach each other through `crate::`, `super::` or `self::` paths, and exits 1 if there is any.
# Such a circle means neither module can be read, tested or moved without the other; the shared
# piece belongs in one of them or in a module below both.
# Edges are taken from code only: comments, strings and `#[cfg(test)]` modules are skipped (a test
# may reach anywhere). A path into the crate root's `pub use` re-exports counts as a path into the
# module the item comes from (a glob re-export is not followed). A module reaching its ancestor or
# descendant is no circle (a parent declares its children and children use their parent's items);
# siblings are compared at every level.
# Usage: scripts/module-circles.sh [crate-src-dir...]   (default: crates/*/src; relative paths are
# taken from the repository's root)
# Output: one line per circle, "<src dir>: a <-> b [<-> c...]" (the modules that reach each other),
# then one indented line per edge between them, "a -> b  <file>:<line>", naming one place it is taken.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$#" -eq 0 ]; then set -- crates/*/src; fi
exec python3 - "$@" <<'PY'
import os, re, sys

sys.path.insert(0, "scripts")
from rust_tokens import IDENT, tokens  # noqa: E402


def without_tests(toks):
    """The tokens, less every `#[cfg(test)] mod NAME { ... }`."""
    out, k = [], 0
    while k < len(toks):
        window = [t for t, _ in toks[k:k + 10]]
        if window[:7] == ["#", "[", "cfg", "(", "test", ")", "]"]:
            j = k + 7
            while j < len(toks) and toks[j][0] in ("pub", "(", "crate", ")"):
                j += 1
            if j + 2 < len(toks) and toks[j][0] == "mod" and toks[j + 2][0] == "{":
                depth, j = 0, j + 2
                while j < len(toks):
                    depth += {"{": 1, "}": -1}.get(toks[j][0], 0)
                    j += 1
                    if depth == 0:
                        break
                k = j
                continue
        out.append(toks[k])
        k += 1
    return out


def path_trees(toks, k):
    """Parses the path (with `{...}` groups) that starts at toks[k]; returns the expanded paths
    (lists of segments, an `as` alias kept as ("as", name) at the end) and the index after it."""
    segs = []
    while k < len(toks):
        t = toks[k][0]
        if t == "{":
            paths, k = [], k + 1
            while k < len(toks) and toks[k][0] != "}":
                if toks[k][0] == ",":
                    k += 1
                    continue
                sub, after = path_trees(toks, k)
                paths += [segs + s for s in sub]
                k = max(after, k + 1)
            return paths or [segs], k + 1
        if t == "*" or IDENT.fullmatch(t):
            segs.append(t)
            k += 1
            if k + 1 < len(toks) and toks[k][0] == "as":
                segs.append(("as", toks[k + 1][0]))
                return [segs], k + 2
            if k < len(toks) and toks[k][0] == "::":
                k += 1
                continue
        break
    return [segs], k


def modules(src_dir):
    """Maps each module path (tuple) of the crate to its file."""
    out = {}
    for d, _, files in os.walk(src_dir):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(d, f), src_dir)[:-3].split(os.sep)
            if rel in (["lib"], ["main"]):
                mod = ()
            elif rel[-1] == "mod":
                mod = tuple(rel[:-1])
            else:
                mod = tuple(rel)
            out[mod] = os.path.join(d, f)
    if () not in out:
        return {}
    # Files that no module declares (binaries under src/bin, stray files) are left out.
    return {m: p for m, p in out.items() if all(m[:i] in out for i in range(len(m)))}


def resolve(mods, reexports, segs):
    """The module a full path from the crate root names (the deepest module it passes)."""
    mod = ()
    for i, s in enumerate(segs):
        if isinstance(s, tuple) or s == "*":
            break
        if mod + (s,) in mods:
            mod = mod + (s,)
        elif mod == () and s in reexports:
            return reexports[s]
        else:
            break
    return mod


def crate_edges(src_dir):
    mods = modules(src_dir)
    parsed = {}
    for mod, path in mods.items():
        with open(path, encoding="utf-8") as f:
            parsed[mod] = without_tests([(t, line) for _, t, line in tokens(f.read())])

    def absolute(mod, segs):
        """A `crate::`/`super::`/`self::` path (or, in the root, a child's name) from the root."""
        here = list(mod)
        while segs and segs[0] in ("crate", "super", "self"):
            if segs[0] == "crate":
                here = []
            elif segs[0] == "super":
                here = here[:-1]
            segs = segs[1:]
        return here + segs

    # The root's `pub use` re-exports: the name a user writes -> the module it comes from.
    reexports, toks = {}, parsed[()]
    for k, (t, _) in enumerate(toks):
        if t == "use" and k > 0 and toks[k - 1][0] in ("pub", ")"):
            for segs, _ in [path_trees(toks, k + 1)]:
                for p in segs:
                    target = resolve(mods, {}, absolute((), p))
                    if target and p and isinstance(p[-1], tuple):
                        reexports[p[-1][1]] = target
                    elif target and p and p[-1] != "*":
                        reexports[p[-1]] = target
    edges = {}
    for mod, toks in parsed.items():
        for k, (t, line) in enumerate(toks):
            if t not in ("crate", "super", "self") or (k > 0 and toks[k - 1][0] in ("$", "::")):
                continue
            if k + 1 >= len(toks) or toks[k + 1][0] != "::":
                continue
            paths, _ = path_trees(toks, k)
            for p in paths:
                target = resolve(mods, reexports, absolute(mod, p))
                common = 0
                while common < min(len(mod), len(target)) and mod[common] == target[common]:
                    common += 1
                if common == len(mod) or common == len(target):
                    continue  # the same module, an ancestor or a descendant
                a, b = mod[: common + 1], target[: common + 1]
                edges.setdefault((a, b), f"{mods[mod]}:{line}")
    return edges


def circles(edges):
    """Strongly connected components of more than one module, each as a closed walk."""
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


found = 0
for src_dir in sys.argv[1:]:
    edges = crate_edges(src_dir.rstrip("/"))
    for comp in circles(edges):
        found += 1
        name = lambda m: "::".join(m)
        members = set(comp)
        print(f"{src_dir}: {' <-> '.join(name(m) for m in comp)}")
        for (a, b), where in sorted(edges.items()):
            if a in members and b in members:
                print(f"    {name(a)} -> {name(b)}  {where}")
sys.exit(1 if found else 0)
PY
