#!/usr/bin/env python3
"""vlan_tag.py IN.pcap OUT.pcap --vid 100 [--outer-vid 200 [--outer-tpid 0x88a8]] [--pcp P]

Inserts an 802.1Q tag (TPID 0x8100, VLAN id --vid) after the MAC addresses of
every Ethernet frame of a classic pcap; with --outer-vid also an outer tag in
front of it (TPID --outer-tpid, 0x88a8 by default: 802.1ad QinQ). Frames keep
their timestamps; each grows by 4 (or 8) bytes. Frames shorter than 14 bytes
are copied unchanged. Deterministic, standard library only (see pcapio.py).
Used by make-captures.sh because this kernel has no VLAN devices.
"""
import argparse
import struct
import sys

from pcapio import LINKTYPE_ETHERNET, read_pcap, write_pcap


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inp")
    ap.add_argument("out")
    ap.add_argument("--vid", type=int, required=True, help="inner (or only) VLAN id")
    ap.add_argument("--outer-vid", type=int, help="add an outer tag with this VLAN id")
    ap.add_argument("--outer-tpid", type=lambda s: int(s, 0), default=0x88A8)
    ap.add_argument("--pcp", type=int, default=0, help="priority bits of every tag")
    a = ap.parse_args()
    for v in (a.vid, a.outer_vid):
        if v is not None and not 0 <= v < 4096:
            sys.exit(f"vlan_tag: VLAN id {v} out of range 0..4095")
    hdr, frames = read_pcap(a.inp)
    if hdr.linktype != LINKTYPE_ETHERNET:
        sys.exit(f"vlan_tag: {a.inp}: link type {hdr.linktype}, need Ethernet (1)")
    tag = struct.pack("!HH", 0x8100, (a.pcp << 13) | a.vid)
    if a.outer_vid is not None:
        tag = struct.pack("!HH", a.outer_tpid, (a.pcp << 13) | a.outer_vid) + tag
    out = []
    for sec, frac, data, orig in frames:
        if len(data) >= 14:
            data = data[:12] + tag + data[12:]
            orig += len(tag)
        out.append((sec, frac, data, orig))
    write_pcap(a.out, hdr, out)
    print(f"vlan_tag: {len(out)} frames -> {a.out} (tag bytes {tag.hex()})")


if __name__ == "__main__":
    main()
