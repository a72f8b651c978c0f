#!/usr/bin/env python3
"""reorder_stats.py IN.pcap: how reordered each TCP flow's data is, in arrival order.

Per flow (one direction of a connection), over its data segments (payload > 0):
- late by k: a segment that arrived after k segments of its flow with a higher
  sequence number (k = 1, 2, 3, >3 places);
- retransmitted: a segment whose bytes had all arrived before (a duplicate),
  or, for IPv4, one below the highest sequence seen whose IP ID is newer than
  every ID seen before in the flow (sent after them: it fills a hole left by
  a loss); neither counts as late;
- never arrived: bytes missing between the flow's lowest and highest sequence.
Prints a line per flow, then a line of totals (key=value). Reads Ethernet
classic pcap, untagged or VLAN-tagged, IPv4 and IPv6. Standard library only.
"""
import bisect
import struct
import sys

from pcapio import LINKTYPE_ETHERNET, read_pcap


def tcp_data(frame):
    """(flow, seq, payload length, IPv4 ID or None) of a TCP frame, else None."""
    off, et = 14, struct.unpack("!H", frame[12:14])[0] if len(frame) >= 14 else 0
    while et in (0x8100, 0x88A8) and len(frame) >= off + 4:
        et, off = struct.unpack("!H", frame[off + 2:off + 4])[0], off + 4
    if et == 0x0800 and len(frame) >= off + 20:
        vihl, tlen, ipid, frag, proto = struct.unpack("!BxHHHxB", frame[off:off + 10])
        if proto != 6 or frag & 0x1FFF:
            return None
        l4, end = off + (vihl & 15) * 4, off + tlen
        addrs = frame[off + 12:off + 20]
    elif et == 0x86DD and len(frame) >= off + 40:
        plen, nxt = struct.unpack("!HB", frame[off + 4:off + 7])
        if nxt != 6:
            return None
        l4, end, ipid = off + 40, off + 40 + plen, None
        addrs = frame[off + 8:off + 40]
    else:
        return None
    if len(frame) < l4 + 20:
        return None
    sport, dport, seq, doff = struct.unpack("!HHIxxxxB", frame[l4:l4 + 13])
    return (addrs, sport, dport), seq, min(end, len(frame)) - l4 - (doff >> 4) * 4, ipid


def name(flow):
    addrs, sport, dport = flow
    if len(addrs) == 8:
        a, b = (".".join(map(str, addrs[i:i + 4])) for i in (0, 4))
    else:
        a, b = (":".join("%x" % w for w in struct.unpack("!8H", addrs[i:i + 16])) for i in (0, 16))
    return f"{a}:{sport} > {b}:{dport}"


class Flow:
    def __init__(self, seq):
        self.isn, self.seen, self.ranges = seq, [], []  # seen: sorted starts
        self.max_end = 0
        self.id_u = self.max_id = None
        self.n = self.late = self.retx = 0
        self.hist = [0, 0, 0, 0]  # late by 1, 2, 3, >3

    def add(self, seq, length, ipid):
        rel = (seq - self.isn) & 0xFFFFFFFF
        if rel > 0x80000000:
            rel -= 1 << 32  # before the first segment seen
        newest = False
        if ipid is not None:
            if self.id_u is None:
                self.id_u = ipid
            else:
                self.id_u += ((ipid - self.id_u + 0x8000) & 0xFFFF) - 0x8000
            newest = self.max_id is None or self.id_u > self.max_id
            self.max_id = self.id_u if self.max_id is None else max(self.max_id, self.id_u)
        self.n += 1
        end = rel + length
        i = bisect.bisect_left(self.seen, rel)
        dup = i < len(self.seen) and self.seen[i] == rel  # same start: same bytes again
        if dup or (rel < self.max_end and newest):
            self.retx += 1
        elif rel < self.max_end:
            k = len(self.seen) - bisect.bisect_right(self.seen, rel)
            self.late += 1
            self.hist[min(k, 4) - 1] += 1
        if not dup:
            self.seen.insert(i, rel)
        self.ranges.append((rel, end))
        self.max_end = max(self.max_end, end)

    def missing(self):
        gap, reach = 0, None
        for a, b in sorted(self.ranges):
            if reach is not None and a > reach:
                gap += a - reach
            reach = b if reach is None else max(reach, b)
        return gap


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.splitlines()[0])
    hdr, frames = read_pcap(sys.argv[1])
    if hdr.linktype != LINKTYPE_ETHERNET:
        sys.exit(f"reorder_stats: {sys.argv[1]}: link type {hdr.linktype}, need Ethernet (1)")
    flows = {}
    for _, _, data, _ in frames:
        t = tcp_data(data)
        if t and t[2] > 0:
            flows.setdefault(t[0], Flow(t[1])).add(t[1], t[2], t[3])
    tot = dict(segments=0, late=0, by1=0, by2=0, by3=0, over3=0, retx=0, missing=0)
    for flow, f in flows.items():
        gap = f.missing()
        print(f"{name(flow)}: {f.n} data segments, {f.late} late ({100 * f.late / f.n:.2f}%):"
              f" by 1: {f.hist[0]}, 2: {f.hist[1]}, 3: {f.hist[2]}, >3: {f.hist[3]};"
              f" {f.retx} retransmitted; {gap} bytes never arrived")
        for k, v in zip(tot, (f.n, f.late, *f.hist, f.retx, gap)):
            tot[k] += v
    pct = 100 * tot["late"] / tot["segments"] if tot["segments"] else 0.0
    print(" ".join(f"{k}={v}" for k, v in tot.items()) + f" late_pct={pct:.2f}")


if __name__ == "__main__":
    main()
