#!/usr/bin/env python3
"""Functions longer than a limit, in the non-test Rust source under a folder.

A function is measured from the line of its `fn` to the line of its closing
brace (both counted). Braces are matched on the code alone: comments, string
literals (raw and byte strings too) and char literals are blanked first, so
a `{` in a message or a `'}'` does not count. `#[cfg(test)]` items (a test
module inline or in its own file, a test-only function) and files under a
`tests/` folder are left out. Declarations without a body (`fn f();` in a trait or an extern block)
have no length.

Prints each function over the limit as FILE:LINE: NAME LENGTH lines, longest
first, and exits 1 when there is one.
"""

import argparse
import re
import sys
from pathlib import Path

from rustlex import strip


def match_brace(code, open_at):
    """The offset of the `}` that closes the `{` at code[open_at], or -1."""
    depth = 0
    for j in range(open_at, len(code)):
        ch = code[j]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return j
    return -1


def test_spans(code):
    """(start, end) offsets of the items under `#[cfg(test)]`: the block of
    the next `{` after the attribute, unless a `;` ends the item first."""
    spans = []
    for m in re.finditer(r"#\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]", code):
        j = m.end()
        while j < len(code) and code[j] not in "{;":
            j += 1
        if j < len(code) and code[j] == "{":
            end = match_brace(code, j)
            spans.append((m.start(), len(code) if end < 0 else end))
        else:
            spans.append((m.start(), j))
    return spans


def body_open(code, at):
    """After `fn name` at `at`: the offset of the body's `{`, or -1 when a
    `;` ends the declaration first. Parentheses, brackets and angle brackets
    of the signature are skipped; a `{` inside them (a const generic block)
    does not open the body."""
    depth = 0
    j = at
    while j < len(code):
        ch = code[j]
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif depth == 0 and ch == ";":
            return -1
        elif depth == 0 and ch == "{":
            return j
        j += 1
    return -1


def functions(code):
    """(name, first line, last line) of every function with a body."""
    for m in re.finditer(r"\bfn\s+(\w+)", code):
        open_at = body_open(code, m.end())
        if open_at < 0:
            continue
        close = match_brace(code, open_at)
        if close < 0:
            continue
        first = code.count("\n", 0, m.start()) + 1
        last = code.count("\n", 0, close) + 1
        yield m.start(), m.group(1), first, last


def test_module_files(path, code):
    """The files of the out-of-line modules `path` declares test-only
    (`#[cfg(test)] mod tests;`)."""
    here = path.parent if path.name in ("mod.rs", "lib.rs", "main.rs") else path.with_suffix("")
    for m in re.finditer(r"#\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", code):
        yield here / f"{m.group(1)}.rs"
        yield here / m.group(1) / "mod.rs"


def long_functions(code, limit):
    spans = test_spans(code)
    for off, name, first, last in functions(code):
        if any(a <= off < b for a, b in spans):
            continue
        length = last - first + 1
        if length > limit:
            yield name, first, length


def main():
    doc = __doc__.split("\n\n")
    ap = argparse.ArgumentParser(
        description=doc[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(doc[1:]),
    )
    ap.add_argument("dirs", nargs="*", default=None,
                    help="folders (or files) to check (default: engine/grorx/src)")
    ap.add_argument("--max", type=int, default=100, help="the longest a function may be, in lines")
    args = ap.parse_args()
    root = Path(__file__).resolve().parent.parent
    dirs = [Path(d) for d in args.dirs] if args.dirs else [root / "engine/grorx/src"]

    files = []
    for d in dirs:
        if d.is_file():
            files.append(d)
        else:
            files += [p for p in sorted(d.rglob("*.rs"))
                      if "tests" not in p.relative_to(d).parts[:-1]]
    codes = {p: strip(p.read_text()) for p in files}
    test_only = {t.resolve() for p, code in codes.items() for t in test_module_files(p, code)}
    found = []
    for path, code in codes.items():
        if path.resolve() in test_only:
            continue
        for name, line, length in long_functions(code, args.max):
            found.append((length, f"{path}:{line}: {name} {length}"))
    for _, text in sorted(found, key=lambda f: -f[0]):
        print(text)
    if found:
        print(f"check-fn-length: {len(found)} function(s) over {args.max} lines", file=sys.stderr)
        return 1
    print(f"check-fn-length: no function over {args.max} lines", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
