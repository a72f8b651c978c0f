"""Rust source, lexed just enough for the source checks (check-fn-length,
check-modules, check-flag-words): where the comments, string literals and
char literals are, so that what is inside them never counts as code."""

import re

_RAW = re.compile(r'(b?)r(#*)"')
_CHAR = re.compile(r"'(\\u\{[0-9a-fA-F]+\}|\\x[0-9a-fA-F]{2}|\\.|[^\\'\n])'")


def tokens(src):
    """(kind, start, end) of each comment, string literal and char literal
    in order, and of each `{`, `}` and `;` outside them; kind is
    'comment', 'str', 'char' or the character. A `'` that starts no char
    literal is a lifetime or a label."""
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        prev = src[i - 1] if i else ""
        ident_before = prev.isalnum() or prev == "_"
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            yield ("comment", i, j)
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            yield ("comment", i, j)
            i = j
        elif not ident_before and (m := _RAW.match(src, i)):
            close = '"' + m.group(2)
            j = src.find(close, m.end())
            j = n if j < 0 else j + len(close)
            yield ("str", i, j)
            i = j
        elif c == '"' or (c == "b" and not ident_before and src.startswith('b"', i)):
            j = i + (2 if c == "b" else 1)
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            yield ("str", i, min(j + 1, n))
            i = j + 1
        elif c == "'" or (c == "b" and not ident_before and src.startswith("b'", i)):
            k = i + (1 if c == "b" else 0)
            m = _CHAR.match(src, k)
            if m:
                yield ("char", i, m.end())
                i = m.end()
            else:
                i += 1
        elif c in "{};":
            yield (c, i, i + 1)
            i += 1
        else:
            i += 1


def strip(src):
    """The code alone: comments blanked, string literals made `""` and char
    literals `' '` (newlines kept, so line numbers hold)."""
    out, at = [], 0
    for kind, s, e in tokens(src):
        if kind not in ("comment", "str", "char"):
            continue
        out.append(src[at:s])
        lines = "\n" * src.count("\n", s, e)
        out.append({"comment": lines, "str": '""' + lines, "char": "' '"}[kind])
        at = e
    out.append(src[at:])
    return "".join(out)
