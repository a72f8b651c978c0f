#!/usr/bin/env python3
"""tunnel_encap.py IN.pcap OUT.pcap --kind vxlan|geneve [--outer 4|6] [--udp-csum]
                  [--df] [--vni N] [--port P] [--geneve-opt-words N]

Wraps every Ethernet frame of a classic pcap in a VXLAN (RFC 7348) or Geneve
(RFC 8926) tunnel, as a VTEP would send it: outer Ethernet (02:00:00:00:98:01 ->
02:00:00:00:98:02), outer IPv4 10.98.0.1 -> 10.98.0.2 (TTL 64) or IPv6
fd00:98::1 -> fd00:98::2 (hop limit 64), UDP to --port (4789 for VXLAN, 6081 for
Geneve by default) from a source port chosen per inner flow (a hash of the inner
addresses and ports, 49152-65535, as Linux's udp_flow_src_port does), the tunnel
header with --vni (default 42), then the frame unchanged. Geneve carries
--geneve-opt-words 4-byte words of options (default 2: one option, class 0x0102
type 0x80, 4 bytes of data).

Outer UDP checksum: 0 (none, Linux's default for VXLAN over IPv4), or computed
over the whole datagram with --udp-csum. Outer IPv4 ID: with --df 0, as Linux
sends a tunnel's DF datagrams (atomic, RFC 6864); without DF one counter per
outer flow (UDP source port), so a GRO that requires consecutive or fixed outer
IDs (as Linux's does) can merge each flow. Timestamps are kept.
Deterministic, standard library only (see pcapio.py). Used by make-captures.sh
(--tunnels) and grorx's tests: this kernel has no VXLAN or Geneve devices.
"""
import argparse
import struct
import sys
import zlib

from pcapio import LINKTYPE_ETHERNET, ipv4_hdr_csum, l4_csum_v4, l4_csum_v6, read_pcap, write_pcap

OUTER_DST_MAC = bytes.fromhex("020000009802")
OUTER_SRC_MAC = bytes.fromhex("020000009801")
V4_SRC, V4_DST = bytes([10, 98, 0, 1]), bytes([10, 98, 0, 2])
V6_SRC = bytes.fromhex("fd000098000000000000000000000001")
V6_DST = bytes.fromhex("fd000098000000000000000000000002")


def inner_flow(frame):
    """The bytes that name the inner flow: addresses and ports past any VLAN
    tags (the MACs for anything that is not IP)."""
    off = 12
    while frame[off:off + 2] in (b"\x81\x00", b"\x88\xa8"):
        off += 4
    et, l3 = frame[off:off + 2], off + 2
    if et == b"\x08\x00" and len(frame) >= l3 + 24:
        ihl = (frame[l3] & 15) * 4
        return frame[l3 + 12:l3 + 20] + frame[l3 + ihl:l3 + ihl + 4]
    if et == b"\x86\xdd" and len(frame) >= l3 + 44:
        return frame[l3 + 8:l3 + 44]
    return frame[:12]


def tunnel_header(kind, vni, opt_words):
    vni_bytes = struct.pack("!I", vni << 8)
    if kind == "vxlan":
        return b"\x08\x00\x00\x00" + vni_bytes
    opts = b""
    if opt_words:
        # One option: class 0x0102, type 0x80, length (words after its own 4 bytes).
        opts = struct.pack("!HBB", 0x0102, 0x80, opt_words - 1)
        opts += bytes((i * 37 + 11) & 0xFF for i in range(4 * (opt_words - 1)))
    return struct.pack("!BBH", opt_words, 0, 0x6558) + vni_bytes + opts


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inp")
    ap.add_argument("out")
    ap.add_argument("--kind", choices=["vxlan", "geneve"], required=True)
    ap.add_argument("--outer", type=int, choices=[4, 6], default=4)
    ap.add_argument("--udp-csum", action="store_true", help="set the outer UDP checksum")
    ap.add_argument("--df", action="store_true", help="outer IPv4 DF, ID 0")
    ap.add_argument("--vni", type=int, default=42)
    ap.add_argument("--port", type=int)
    ap.add_argument("--geneve-opt-words", type=int, default=2)
    a = ap.parse_args()
    if not 0 <= a.vni < 1 << 24:
        sys.exit(f"tunnel_encap: --vni {a.vni}: give 0..16777215")
    if not 0 <= a.geneve_opt_words <= 63 or a.geneve_opt_words == 1:
        sys.exit("tunnel_encap: --geneve-opt-words: 0, or 2..63 (an option is at least 2 words)")
    port = a.port or (4789 if a.kind == "vxlan" else 6081)
    hdr, frames = read_pcap(a.inp)
    if hdr.linktype != LINKTYPE_ETHERNET:
        sys.exit(f"tunnel_encap: {a.inp}: link type {hdr.linktype}, need Ethernet (1)")
    th = tunnel_header(a.kind, a.vni, a.geneve_opt_words if a.kind == "geneve" else 0)
    ids = {}
    out = []
    for sec, frac, data, orig in frames:
        if len(data) < 14 or len(data) < orig:
            out.append((sec, frac, data, orig))
            continue
        sport = 49152 + zlib.crc32(inner_flow(data)) % 16384
        payload = th + data
        ulen = 8 + len(payload)
        udp = struct.pack("!HHHH", sport, port, ulen, 0) + payload
        if a.outer == 4:
            if a.df:
                ip_id = 0
            else:
                ip_id = ids.get(sport, 0)
                ids[sport] = (ip_id + 1) & 0xFFFF
            if a.udp_csum:
                c = l4_csum_v4(V4_SRC, V4_DST, 17, udp) or 0xFFFF
                udp = udp[:6] + struct.pack("!H", c) + udp[8:]
            ip = struct.pack("!BBHHHBBH", 0x45, 0, 20 + ulen, ip_id,
                             0x4000 if a.df else 0, 64, 17, 0) + V4_SRC + V4_DST
            ip = ip[:10] + struct.pack("!H", ipv4_hdr_csum(ip)) + ip[12:]
            eth = OUTER_DST_MAC + OUTER_SRC_MAC + b"\x08\x00"
        else:
            if a.udp_csum:
                c = l4_csum_v6(V6_SRC, V6_DST, 17, udp) or 0xFFFF
                udp = udp[:6] + struct.pack("!H", c) + udp[8:]
            ip = struct.pack("!IHBB", 6 << 28, ulen, 17, 64) + V6_SRC + V6_DST
            eth = OUTER_DST_MAC + OUTER_SRC_MAC + b"\x86\xdd"
        frame = eth + ip + udp
        out.append((sec, frac, frame, len(frame)))
    write_pcap(a.out, hdr, out)


if __name__ == "__main__":
    main()
