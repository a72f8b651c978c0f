#!/usr/bin/env python3
"""in_order.py IN.pcap OUT.pcap: the same capture with every TCP flow's data
segments in sequence order.

Each flow's data segments keep the places they had in the capture (so flows
interleave and bursts fall as before); only which of them sits in which
place changes: the k-th place of a flow gets its k-th segment in sequence
order (ties by arrival). Frames without TCP payload stay where they were.
The in-order copy of a reordered capture: what GRO would see without the
reordering. Standard library only.
"""
import sys
from collections import defaultdict

from pcapio import read_pcap, write_pcap
from reorder_stats import tcp_data


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[0])
    hdr, frames = read_pcap(sys.argv[1])
    places = defaultdict(list)  # flow -> [(index, relative seq)]
    for i, (_, _, data, _) in enumerate(frames):
        d = tcp_data(data)
        if d and d[2] > 0:
            flow, seq = d[0], d[1]
            isn = places[flow][0][2] if places[flow] else seq
            rel = (seq - isn + 0x80000000) & 0xFFFFFFFF
            places[flow].append((i, rel, isn))
    out = list(frames)
    for segs in places.values():
        slots = [i for i, _, _ in segs]
        by_seq = sorted(segs, key=lambda s: (s[1], s[0]))
        for slot, (i, _, _) in zip(slots, by_seq):
            sec, frac, _, _ = frames[slot]
            out[slot] = (sec, frac, frames[i][2], frames[i][3])
    write_pcap(sys.argv[2], hdr, out)


if __name__ == "__main__":
    main()
