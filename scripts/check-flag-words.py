#!/usr/bin/env python3
"""The libraries speak their own words: few grorx command-line flags in them.

A library user never typed `--max-frags`: grorx-gro and grorx name a setting
as it is written in Rust (`GroConfig::max_frags`), and the command maps it to
its flag when it prints the error. This check keeps it so.

The flags are the command's long options, read from its clap arguments
(engine/cli/src): every `#[arg(...)]` with `long` names the field below it,
snake_case as kebab-case (`gro_flush_us` -> `--gro-flush-us`), or
`long = "..."` names it outright.

Counted: each string literal in engine/grorx/src and engine/gro/src that
holds `--FLAG` for one of those flags (a whole flag: `--gro` is not found in
`--gro-reorder`). Not counted:
  - comments and doc comments (they may say how the command sets a thing);
  - `#[cfg(test)]` modules, inline or in their own file, and files under a
    `tests/` folder: a test may check what the command prints;
  - a literal that is one argument word and nothing else (`"--no-huge"`,
    `"--lcores=0@0"`): that is an element of some program's argv (EAL's,
    built in dpdk/eal_args.rs and run/startup.rs, whose flags share names
    with a few of ours), not a message to a person. Only a literal with
    words around the flag is prose; a message glued together from a lone
    flag literal would slip through, and is for review to catch.

Each hit is printed as file:line with the flags it names; the check fails
when there are more than LIMIT.
"""

import argparse
import re
import sys
from pathlib import Path

from rustlex import tokens

LIMIT = 10
ROOT = Path(__file__).resolve().parent.parent
CLI_SRC = ROOT / "engine/cli/src"
LIBRARIES = [ROOT / "engine/grorx/src", ROOT / "engine/gro/src"]


CFG_TEST = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*([{;])")


def test_spans(text, toks):
    """Byte ranges of inline `#[cfg(test)] mod x { ... }` blocks, and the
    names of `#[cfg(test)] mod x;` declared in files of their own."""
    spans, external = [], []
    braces = [(s, k) for k, s, _ in toks if k in "{}"]
    code = mask(text, toks)
    for m in CFG_TEST.finditer(code):
        if m.group(2) == ";":
            external.append(m.group(1))
            continue
        depth = 0
        for s, k in braces:
            if s < m.end() - 1:
                continue
            depth += 1 if k == "{" else -1
            if depth == 0:
                spans.append((m.start(), s + 1))
                break
    return spans, external


def mask(text, toks):
    """The text with comments and literals blanked (attributes stay)."""
    out = list(text)
    for k, s, e in toks:
        if k in ("comment", "str"):
            for i in range(s, e):
                if out[i] != "\n":
                    out[i] = " "
    return "".join(out)


def cli_flags():
    """The command's long flags, from its clap `#[arg(...)]` fields."""
    flags = set()
    for path in sorted(CLI_SRC.rglob("*.rs")):
        text = path.read_text()
        for m in re.finditer(r"#\[arg\(", text):
            depth, j = 1, m.end()
            while depth:
                depth += {"(": 1, ")": -1}.get(text[j], 0)
                j += 1
            attr = text[m.end():j - 1]
            if not re.search(r"\blong\b", attr):
                continue
            named = re.search(r'\blong\s*=\s*"([^"]+)"', attr)
            if named:
                flags.add(named.group(1))
                continue
            # The field the attribute is on: past doc comments and other
            # attributes.
            field = re.compile(r"(?:\s|///[^\n]*|#\[[^\]]*\])*(?:pub\s+)?(\w+)\s*:").match(text, j + 1)
            if not field:
                sys.exit(f"check-flag-words: no field after #[arg(...)] in {path}")
            flags.add(field.group(1).replace("_", "-"))
    return flags


def is_test_file(path, lib):
    return "tests" in path.relative_to(lib).parts[:-1]


def hits(flags):
    """(file, line, flags) of every library literal that names a flag."""
    pat = re.compile(r"--(" + "|".join(sorted(map(re.escape, flags), key=len, reverse=True)) + r")(?![A-Za-z0-9_-])")
    argv_word = re.compile(r'^b?r?#*"--[A-Za-z0-9-]+(=[^\s"]*)?"#*$')
    found, skipped = [], set()
    for lib in LIBRARIES:
        files = sorted(lib.rglob("*.rs"))
        # Files declared as `#[cfg(test)] mod x;` elsewhere: x.rs, x/mod.rs.
        for path in files:
            text = path.read_text()
            toks = list(tokens(text))
            _, external = test_spans(text, toks)
            here = path.parent if path.name in ("mod.rs", "lib.rs", "main.rs") else path.with_suffix("")
            for name in external:
                skipped.add(here / f"{name}.rs")
                skipped.update((here / name).rglob("*.rs"))
        for path in files:
            if path in skipped or is_test_file(path, lib):
                continue
            text = path.read_text()
            toks = list(tokens(text))
            spans, _ = test_spans(text, toks)
            for k, s, e in toks:
                if k != "str" or any(a <= s < b for a, b in spans):
                    continue
                lit = text[s:e]
                named = [(m.start(), m.group(0)) for m in pat.finditer(lit)]
                if not named or argv_word.match(lit):
                    continue
                line = text.count("\n", 0, s + named[0][0]) + 1
                found.append((path.relative_to(ROOT), line, sorted({f for _, f in named})))
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list-flags", action="store_true", help="print the CLI's flags and stop")
    a = ap.parse_args()
    flags = cli_flags()
    if len(flags) < 20:
        sys.exit(f"check-flag-words: only {len(flags)} flags found in {CLI_SRC}: the clap parsing broke")
    if a.list_flags:
        print("\n".join(sorted(flags)))
        return 0
    found = hits(flags)
    for path, line, named in found:
        print(f"{path}:{line}: {' '.join(named)}")
    verdict = "at most" if len(found) <= LIMIT else "more than"
    print(f"check-flag-words: {len(found)} library string(s) name a command-line flag ({verdict} {LIMIT})",
          file=sys.stderr)
    return 0 if len(found) <= LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())
