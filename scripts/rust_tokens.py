"""A Rust tokenizer for the scripts that read the workspace's sources (long-functions.sh,
module-circles.sh): comments, strings and char literals are skipped, so what they hold never
counts as code."""

import re

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def tokens(src):
    """Yields (kind, text, line): "id" for identifiers and keywords, "p" for each punctuation
    character (`::` as one)."""
    i, n, line = 0, len(src), 1
    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    line += src[i] == "\n"
                    i += 1
        elif c in "rb" and (m := re.match(r'(?:br|r)(#*)"', src[i:i + 260])):
            end = '"' + m.group(1)
            j = src.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            line += src.count("\n", i, j)
            i = j
        elif c == '"' or (c == "b" and src.startswith('b"', i)):
            i += 1 if c == '"' else 2
            while i < n and src[i] != '"':
                if src[i] == "\\":
                    i += 1
                line += src[i] == "\n"
                i += 1
            i += 1
        elif c == "'" or (c == "b" and src.startswith("b'", i)):
            k = i + (1 if c == "'" else 2)
            # A char literal closes within a few characters; otherwise this is a lifetime.
            m = re.match(r"(\\(x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]{1,6}\}|.)|[^\\\n])'", src[k:k + 12])
            if m:
                i = k + m.end()
            else:
                i = k
        elif c.isalpha() or c == "_":
            m = IDENT.match(src, i)
            yield ("id", m.group(), line)
            i = m.end()
        elif c.isspace():
            i += 1
        elif src.startswith("::", i):
            yield ("p", "::", line)
            i += 2
        else:
            yield ("p", c, line)
            i += 1
