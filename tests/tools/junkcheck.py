#!/usr/bin/env python3
"""junkcheck.py IN.pcap OUT.pcap JUNK.txt [--stripped DIR]

For a capture made by scripts/captures/mix_junk.py (JUNK.txt is its
--summary): checks that every inserted junk frame is in a GRO engine's output
capture, byte-identical (passed through untouched), and where it landed:
a junk frame that grocheck.py counts as a segment of a TCP flow (the mutated
copies: fragments, IP options, bad checksums, bad data offset) must keep its
place in that flow's byte stream, as grocheck --strict-order requires.
--stripped DIR writes DIR/in.pcap and DIR/out.pcap without the junk frames,
so the merges of the real segments can be checked with grocheck --strict-order.

Prints MISSING / REORDERED lines, then one line of figures:
  junk=N found=N missing=N reordered=N kinds=kind:count,...
Exit 0 when no junk frame is missing (reordering is reported, not fatal).
"""
import collections
import os
import re
import struct
import sys

sys.dont_write_bytecode = True  # no __pycache__ next to the tools
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grocheck import parse, read_pcap  # noqa: E402


def read_junk_list(path):
    """[(frame number in IN, 1-based), kind, variant]"""
    out, started = [], False
    for line in open(path):
        if line.startswith("inserted frames"):
            started = True
            continue
        m = re.match(r"\s*(\d+)\s+(\S+)(?:\s+(\S+))?\s*$", line)
        if started and m:
            out.append((int(m.group(1)), m.group(2), m.group(3) or ""))
    if not out:
        raise SystemExit(f"junkcheck: no inserted frames listed in {path}")
    return out


def write_pcap(path, frames):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
        for i, (data, orig) in enumerate(frames):
            f.write(struct.pack("<IIII", i // 1000, (i % 1000) * 1000, len(data), orig))
            f.write(data)


def flow_offsets(frames):
    """Per frame: (flow, byte offset of its payload in that flow's stream), None if not TCP."""
    pos, res = collections.defaultdict(int), []
    for data, _ in frames:
        s = parse(data)
        if s is None:
            res.append(None)
            continue
        res.append((s.flow, pos[s.flow]))
        pos[s.flow] += len(s.payload)
    return res


def main():
    args = sys.argv[1:]
    stripped = None
    if "--stripped" in args:
        i = args.index("--stripped")
        stripped = args[i + 1]
        del args[i:i + 2]
    if len(args) != 3:
        raise SystemExit(__doc__)
    inp, outp = read_pcap(args[0]), read_pcap(args[1])
    junk = read_junk_list(args[2])
    off_in, off_out = flow_offsets(inp), flow_offsets(outp)

    # output positions of each frame's bytes, first come first served
    where = collections.defaultdict(collections.deque)
    for j, (data, _) in enumerate(outp):
        where[data].append(j)
    missing = reordered = 0
    taken = set()
    kinds = collections.Counter()
    for n, kind, variant in junk:
        kinds[kind] += 1
        name = f"{kind} {variant}".strip()
        data = inp[n - 1][0]
        if not where[data]:
            missing += 1
            print(f"MISSING: input frame {n} ({kind} {variant}, {len(data)} bytes) "
                  "is not in the output byte-identical")
            continue
        j = where[data].popleft()
        taken.add(j)
        a, b = off_in[n - 1], off_out[j]
        if a is not None and (b is None or a != b):
            reordered += 1
            flow = a[0]
            how = ("ahead of payload that arrived before it" if b and b[1] < a[1]
                   else "behind payload that arrived after it" if b else "outside its flow")
            print(f"REORDERED: input frame {n} ({name}) is output frame {j + 1}: "
                  f"flow {flow[3]}->{flow[4]} byte offset {a[1]} in, "
                  f"{b[1] if b else '?'} out: delivered {how}")
    if stripped:
        os.makedirs(stripped, exist_ok=True)
        jn = {n for n, _, _ in junk}
        write_pcap(os.path.join(stripped, "in.pcap"),
                   [f for i, f in enumerate(inp) if i + 1 not in jn])
        write_pcap(os.path.join(stripped, "out.pcap"),
                   [f for j, f in enumerate(outp) if j not in taken])
    print(f"junk={len(junk)} found={len(junk) - missing} missing={missing} "
          f"reordered={reordered} kinds=" + ",".join(f"{k}:{v}" for k, v in sorted(kinds.items())))
    sys.exit(1 if missing else 0)


if __name__ == "__main__":
    main()
