#!/usr/bin/env python3
"""The engine library's layers, checked on its source (engine/grorx/src).

Each top-level module (a folder, or a file beside lib.rs) sits in one layer
of LAYERS. Read from every `crate::` and `super::` path outside comments
and strings, the check fails when
  - two top-level modules import each other, directly or round a circle;
  - a module imports from a layer above its own;
  - a path names something at the crate root that is no module of a layer
    (inside the crate, an item is named where it lives, not by lib.rs's
    re-export);
  - `dpdk_sys` is named outside dpdk/, except in the files DPDK_ALLOWED
    lists with why (an entry whose file no longer names it fails too);
  - a top-level module has no layer.
lib.rs is the public face: it may name any module.
"""

import argparse
import re
import sys
from pathlib import Path

from rustlex import strip

# Bottom first. A module imports from its own layer (no circle) or below.
LAYERS = [
    # Pure arithmetic, counters and the settings' names: no DPDK, nothing
    # of the engine.
    ("pool_sizing", "counters", "setting"),
    # DPDK wrapped: EAL, lcores, mbufs, mempools, the ring port.
    ("dpdk",),
    # What the data path is made of: ports and their gates, the skb.
    ("port", "skb"),
    # What a stage or the source uses: forwarding, the capture writer, the
    # generator.
    ("forward", "capture", "gen"),
    # The Stage trait and the built-in stages.
    ("stage",),
    # The poll loop that runs them.
    ("worker",),
    # Measurement-only stages (DPDK's rte_gro, per-packet free).
    ("measure",),
    # What a run reports: at the end, and live (DPDK telemetry).
    ("report",),
    # A run, start to finish.
    ("run",),
]

# grorx-gro, re-exported at the crate root under these names: below all.
EXTERNAL = {"gro", "csum", "traffic", "wire"}

# Where dpdk_sys belongs.
DPDK_HOME = "dpdk"

# Files outside dpdk/ that name dpdk_sys, and why. Everything else reaches
# DPDK through dpdk/: the raw mbuf type, its field accessors and flags
# (dpdk/mbuf.rs), the transmit loop (dpdk/tx.rs), ethdev (dpdk/ethdev.rs),
# rings, alarms, telemetry and rte_gro. None is left.
DPDK_ALLOWED = {}

LAYER_OF = {m: i for i, layer in enumerate(LAYERS) for m in layer}


def module_path(rel):
    """engine/grorx/src-relative path -> module path (lib.rs: [])."""
    parts = list(rel.with_suffix("").parts)
    if parts[-1] in ("mod", "lib"):
        parts.pop()
    return parts


def inline_depths(code):
    """For each offset, how many inline `mod x { .. }` blocks enclose it:
    a list of (offset, depth) change points."""
    changes, stack, depth = [(0, 0)], [], 0
    for m in re.finditer(r"\bmod\s+\w+\s*\{|[{}]", code):
        tok = m.group(0)
        if tok == "}":
            if stack and stack.pop():
                depth -= 1
                changes.append((m.end(), depth))
        elif tok == "{":
            stack.append(False)
        else:
            stack.append(True)
            depth += 1
            changes.append((m.end(), depth))
    return changes


def depth_at(changes, off):
    d = 0
    for o, v in changes:
        if o > off:
            break
        d = v
    return d


def group_heads(code, start):
    """The first segment of each path in a `{a::b, c, d::{e}}` group that
    opens at code[start] == '{'."""
    heads, depth, item = [], 0, ""
    for ch in code[start:]:
        if ch == "{":
            depth += 1
            if depth == 1:
                continue
        elif ch == "}":
            depth -= 1
            if depth == 0:
                heads.append(item)
                break
        if depth == 1 and ch == ",":
            heads.append(item)
            item = ""
        elif depth >= 1:
            item += ch
    out = []
    for h in heads:
        m = re.match(r"\s*(\w+)", h)
        if m:
            out.append(m.group(1))
    return out


def imports(rel, code):
    """(line, top-level module named) for every path that leaves the file's
    own top-level module by `crate::` or by enough `super::`."""
    here = module_path(rel)
    changes = inline_depths(code)
    found = []
    for m in re.finditer(r"\b(crate\s*::|(?:super\s*::\s*)+)\s*(\{|\w+)", code):
        lead, head = m.group(1), m.group(2)
        if lead.startswith("crate"):
            up_to_root = True
        else:
            supers = lead.count("super")
            level = len(here) + depth_at(changes, m.start())
            up_to_root = supers >= level
            if supers > level:
                continue  # not a path this check can place; rustc will say
        if not up_to_root:
            continue
        line = code.count("\n", 0, m.start()) + 1
        names = group_heads(code, m.start(2)) if head == "{" else [head]
        for name in names:
            if name in ("self", "super", "crate"):
                continue
            found.append((line, name))
    return found


def find_cycle(edges, nodes):
    """One circle among the modules, as a list of names, or None."""
    state = {}
    stack = []

    def visit(u):
        state[u] = 1
        stack.append(u)
        for v in sorted(edges.get(u, ())):
            if state.get(v) == 1:
                return stack[stack.index(v):] + [v]
            if v not in state:
                c = visit(v)
                if c:
                    return c
        stack.pop()
        state[u] = 2
        return None

    for u in sorted(nodes):
        if u not in state:
            c = visit(u)
            if c:
                return c
    return None


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
    )
    ap.add_argument("--src", default=None, help="the source tree to check")
    ap.add_argument("--graph", action="store_true", help="print the module-level imports")
    args = ap.parse_args()
    root = Path(__file__).resolve().parent.parent
    src = Path(args.src) if args.src else root / "engine/grorx/src"
    errors = []

    tops = set()
    for p in src.iterdir():
        if p.is_dir():
            tops.add(p.name)
        elif p.suffix == ".rs" and p.name != "lib.rs":
            tops.add(p.stem)
    for t in sorted(tops - set(LAYER_OF)):
        errors.append(f"{t}: a top-level module with no layer (add it to LAYERS)")

    edges = {}  # module -> {module: first (file, line)}
    dpdk_seen = set()
    for path in sorted(src.rglob("*.rs")):
        rel = path.relative_to(src)
        code = strip(path.read_text())
        top = module_path(rel)[0] if module_path(rel) else None
        if re.search(r"\bdpdk_sys\b", code):
            dpdk_seen.add(str(rel))
            if top != DPDK_HOME and str(rel) not in DPDK_ALLOWED:
                line = code.count("\n", 0, re.search(r"\bdpdk_sys\b", code).start()) + 1
                errors.append(f"{rel}:{line}: dpdk_sys outside {DPDK_HOME}/ "
                              "(wrap it there, or list the file in DPDK_ALLOWED with why)")
        if top is None:
            continue  # lib.rs
        for line, name in imports(rel, code):
            if name in EXTERNAL or name == top:
                continue
            if name not in LAYER_OF:
                errors.append(f"{rel}:{line}: crate::{name} is no module of a layer "
                              "(name the module the item lives in)")
                continue
            edges.setdefault(top, {}).setdefault(name, f"{rel}:{line}")
            if top in LAYER_OF and LAYER_OF[name] > LAYER_OF[top]:
                errors.append(f"{rel}:{line}: {top} imports {name}, a layer above it")

    for rel in sorted(set(DPDK_ALLOWED) - dpdk_seen):
        errors.append(f"{rel}: listed in DPDK_ALLOWED but names no dpdk_sys (drop the entry)")

    cycle = find_cycle({u: set(v) for u, v in edges.items()}, set(edges))
    if cycle:
        steps = [f"{a} -> {b} ({edges[a][b]})" for a, b in zip(cycle, cycle[1:])]
        errors.append("a circle: " + "; ".join(steps))

    if args.graph:
        for u in sorted(edges, key=lambda m: (LAYER_OF.get(m, -1), m)):
            print(f"{u} -> {', '.join(sorted(edges[u], key=lambda m: (LAYER_OF.get(m, -1), m)))}")

    if errors:
        for e in errors:
            print(f"check-modules: {e}", file=sys.stderr)
        return 1
    print(f"check-modules: {len(tops)} modules in {len(LAYERS)} layers, no circle, "
          f"no import upward; dpdk_sys under {DPDK_HOME}/ and in {len(DPDK_ALLOWED)} listed files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
