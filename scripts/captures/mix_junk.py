#!/usr/bin/env python3
"""mix_junk.py BASE.pcap OUT.pcap [--seed 1] [--per-kind 10] [--summary FILE]

Mixes frames that a TCP GRO must pass through untouched (or drop) into a real
IPv4 TCP capture, at positions drawn from a seeded RNG: the same input, seed
and --per-kind always give the same output (standard library only; pcapio.py).

Kinds (--per-kind frames of each):
  udp           IPv4 UDP datagram, valid checksums, random ports/payload
  arp           ARP request / reply (alternating) between the capture's hosts
  icmp_echo     ICMP echo request / reply (alternating), valid checksums
  ipv4_frag     IPv4 fragment with MF set: alternately a first fragment (offset
                0, carrying the data flow's next TCP segment) and a middle one
  ipv4_options  IPv4 header with options (IHL 6: NOP NOP NOP EOL)
  ipv6_hbh      IPv6 TCP segment with a hop-by-hop header (PadN) before TCP,
                one synthetic flow fd00:99::1 -> fd00:99::2, valid checksum
  truncated     frame cut in the middle of the IPv4 header or of the TCP header
                (alternately; pcap caplen == len, as if that short on the wire)
  bad_ip_csum   IPv4 header checksum corrupted
  bad_tcp_csum  one TCP payload byte flipped (TCP checksum no longer matches)
  bad_doff      TCP data offset < 5 (TCP checksum recomputed, so only that is wrong)
  runt          the first 1..13 bytes of a frame (shorter than an Ethernet header)
The kinds ipv4_frag (first fragments), ipv4_options, truncated, bad_ip_csum,
bad_tcp_csum and bad_doff are mutated copies of a data segment of the
capture's main flow, inserted just before that segment: same 5-tuple and the
sequence number the flow expects next, so a GRO that ignored the defect would
merge them. The others go anywhere. Inserted frames take the timestamp of the
frame they precede. Prints the counts per kind, and writes them plus the frame
number (1-based, in OUT) and kind of every inserted frame to --summary.
"""
import argparse
import collections
import random
import struct
import sys

from pcapio import (LINKTYPE_ETHERNET, csum, ipv4_hdr_csum, l4_csum_v4,
                    l4_csum_v6, read_pcap, write_pcap)

KINDS = ["udp", "arp", "icmp_echo", "ipv4_frag", "ipv4_options", "ipv6_hbh",
         "truncated", "bad_ip_csum", "bad_tcp_csum", "bad_doff", "runt"]
DERIVED = {"ipv4_frag", "ipv4_options", "truncated", "bad_ip_csum",
           "bad_tcp_csum", "bad_doff"}
V6_SRC = bytes.fromhex("fd000099000000000000000000000001")
V6_DST = bytes.fromhex("fd000099000000000000000000000002")


class Seg:
    """An Ethernet/IPv4/TCP frame split into its parts."""

    def __init__(self, data):
        self.eth = data[:14]
        ihl = (data[14] & 0xF) * 4
        tot = struct.unpack_from("!H", data, 16)[0]
        self.ip = data[14:14 + ihl]
        l4 = data[14 + ihl:14 + tot]
        self.doff = (l4[12] >> 4) * 4
        self.tcp = l4[:self.doff]
        self.payload = l4[self.doff:]
        self.src, self.dst = self.ip[12:16], self.ip[16:20]

    def l4(self):
        return self.tcp + self.payload


def parse_tcp4(data):
    if len(data) < 54 or data[12:14] != b"\x08\x00" or data[14] >> 4 != 4 or data[23] != 6:
        return None
    ihl = (data[14] & 0xF) * 4
    tot = struct.unpack_from("!H", data, 16)[0]
    if ihl < 20 or 14 + tot > len(data) or tot < ihl + 20:
        return None
    if (data[14 + ihl + 12] >> 4) < 5:
        return None
    return Seg(data)


def ipv4(src, dst, proto, payload, ident, flags_frag=0x4000, ttl=64, options=b""):
    ihl = 5 + len(options) // 4
    h = bytearray(struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, ihl * 4 + len(payload), ident,
                              flags_frag, ttl, proto, 0, src, dst) + options)
    h[10:12] = struct.pack("!H", ipv4_hdr_csum(h))
    return bytes(h) + payload


def fix_ip(ip):
    ip = bytearray(ip)
    ip[10:12] = struct.pack("!H", ipv4_hdr_csum(ip))
    return bytes(ip)


def tcp_with_csum(tcp, payload, csum_fn):
    t = bytearray(tcp)
    t[16:18] = b"\x00\x00"
    t[16:18] = struct.pack("!H", csum_fn(bytes(t) + payload))
    return bytes(t)


class Mixer:
    def __init__(self, frames, rng):
        self.rng = rng
        self.frames = frames
        segs = [parse_tcp4(f[2]) for f in frames]
        flows = collections.Counter()
        for s in segs:
            if s:
                flows[(s.src, s.dst, s.tcp[:4])] += len(s.payload)
        if not flows:
            sys.exit("mix_junk: no IPv4 TCP data in the base capture")
        self.flow = flows.most_common(1)[0][0]
        self.data_idx = [i for i, s in enumerate(segs)
                         if s and (s.src, s.dst, s.tcp[:4]) == self.flow and s.payload]
        self.segs = segs
        first = segs[self.data_idx[0]]
        self.mac_dst, self.mac_src = first.eth[0:6], first.eth[6:12]
        self.ip_src, self.ip_dst = first.src, first.dst
        self.sport, self.dport = struct.unpack("!HH", first.tcp[:4])
        self.v6_seq = rng.getrandbits(32)
        self.v6_ack = rng.getrandbits(32)

    def eth(self, etype, reverse=False, dst=None):
        d, s = (self.mac_src, self.mac_dst) if reverse else (self.mac_dst, self.mac_src)
        return (dst or d) + s + struct.pack("!H", etype)

    # --- kinds that go anywhere -------------------------------------------
    def udp(self, k):
        r = self.rng
        payload = r.randbytes(r.randint(0, 1400))
        u = struct.pack("!HHHH", r.randint(1024, 65535), r.choice([53, 123, 4789, 9999]),
                        8 + len(payload), 0) + payload
        c = l4_csum_v4(self.ip_src, self.ip_dst, 17, u) or 0xFFFF
        u = u[:6] + struct.pack("!H", c) + u[8:]
        return "", self.eth(0x0800) + ipv4(self.ip_src, self.ip_dst, 17, u, r.getrandbits(16))

    def arp(self, k):
        if k % 2 == 0:
            body = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, self.mac_src, self.ip_src,
                               b"\x00" * 6, self.ip_dst)
            return "request", self.eth(0x0806, dst=b"\xff" * 6) + body
        body = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 2, self.mac_dst, self.ip_dst,
                           self.mac_src, self.ip_src)
        return "reply", self.eth(0x0806, reverse=True) + body

    def icmp_echo(self, k):
        r = self.rng
        typ = 8 if k % 2 == 0 else 0
        m = struct.pack("!BBHHH", typ, 0, 0, 0x4A55, k // 2 + 1) + r.randbytes(56)
        m = m[:2] + struct.pack("!H", csum(m)) + m[4:]
        if typ == 8:
            return "request", self.eth(0x0800) + ipv4(self.ip_src, self.ip_dst, 1, m, r.getrandbits(16))
        return "reply", self.eth(0x0800, reverse=True) + ipv4(self.ip_dst, self.ip_src, 1, m,
                                                                r.getrandbits(16))

    def ipv6_hbh(self, k):
        r = self.rng
        tmpl = self.segs[r.choice(self.data_idx)]
        payload = tmpl.payload[:r.randint(100, 1400)]
        tcp = bytearray(tmpl.tcp)
        tcp[4:12] = struct.pack("!II", self.v6_seq, self.v6_ack)
        self.v6_seq = (self.v6_seq + len(payload)) & 0xFFFFFFFF
        tcp = tcp_with_csum(tcp, payload, lambda seg: l4_csum_v6(V6_SRC, V6_DST, 6, seg))
        hbh = bytes([6, 0, 1, 4, 0, 0, 0, 0])  # next header TCP, len 0, PadN(4)
        ip6 = struct.pack("!IHBB16s16s", 6 << 28, len(hbh) + len(tcp) + len(payload), 0, 64,
                          V6_SRC, V6_DST)
        return "", self.eth(0x86DD) + ip6 + hbh + tcp + payload

    def runt(self, k):
        data = self.frames[self.rng.randrange(len(self.frames))][2]
        n = self.rng.randint(1, 13)
        return f"{n}B", data[:n]

    # --- mutated copies of the data segment they precede --------------------
    def ipv4_frag(self, k, s):
        ip = bytearray(s.ip)
        if k % 2 == 0:  # first fragment: offset 0, MF, whole TCP segment inside
            ip[6:8] = struct.pack("!H", 0x2000)
            return "first", s.eth + fix_ip(ip) + s.l4()
        l4 = s.l4()
        ip[6:8] = struct.pack("!H", 0x2000 | ((len(l4) // 8) & 0x1FFF))
        return "middle", s.eth + fix_ip(ip) + l4

    def ipv4_options(self, k, s):
        ip = bytearray(s.ip[:20])
        ip[0] = 0x46
        ip[2:4] = struct.pack("!H", struct.unpack("!H", ip[2:4])[0] + 4)
        ip = fix_ip(bytes(ip) + b"\x01\x01\x01\x00")
        return "", s.eth + ip + s.l4()

    def truncated(self, k, s):
        full = s.eth + s.ip + s.l4()
        if k % 2 == 0:
            n = 14 + self.rng.randint(1, len(s.ip) - 1)
            return f"in_ip_hdr:{n}B", full[:n]
        n = 14 + len(s.ip) + self.rng.randint(1, len(s.tcp) - 1)
        return f"in_tcp_hdr:{n}B", full[:n]

    def bad_ip_csum(self, k, s):
        while True:
            ip = bytearray(s.ip)
            bad = struct.unpack("!H", ip[10:12])[0] ^ self.rng.randint(1, 0xFFFF)
            ip[10:12] = struct.pack("!H", bad)
            if csum(bytes(ip)) != 0:
                return "", s.eth + bytes(ip) + s.l4()

    def bad_tcp_csum(self, k, s):
        p = bytearray(s.payload)
        i = self.rng.randrange(len(p))
        p[i] ^= 0xFF
        assert l4_csum_v4(s.src, s.dst, 6, s.tcp + bytes(p)) != 0
        return f"byte{i}", s.eth + s.ip + s.tcp + bytes(p)

    def bad_doff(self, k, s):
        t = bytearray(s.tcp)
        d = self.rng.randint(0, 4)
        t[12] = (d << 4) | (t[12] & 0xF)
        t = tcp_with_csum(t, s.payload, lambda seg: l4_csum_v4(s.src, s.dst, 6, seg))
        return f"doff{d}", s.eth + s.ip + t + s.payload

    def build(self, per_kind):
        """Return [(insert_before_index, order, kind, variant, frame)]."""
        n = len(self.frames)
        n_derived = per_kind * len(DERIVED)
        if len(self.data_idx) >= n_derived:
            anchors = self.rng.sample(self.data_idx, n_derived)
        else:
            anchors = [self.rng.choice(self.data_idx) for _ in range(n_derived)]
        out = []
        for kind in KINDS:
            for k in range(per_kind):
                if kind in DERIVED:
                    pos = anchors.pop()
                    variant, frame = getattr(self, kind)(k, self.segs[pos])
                else:
                    pos = self.rng.randrange(n + 1)
                    variant, frame = getattr(self, kind)(k)
                out.append((pos, len(out), kind, variant, frame))
        return sorted(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base")
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--per-kind", type=int, default=10)
    ap.add_argument("--summary", help="also write the summary and frame list here")
    a = ap.parse_args()
    hdr, frames = read_pcap(a.base)
    if hdr.linktype != LINKTYPE_ETHERNET:
        sys.exit(f"mix_junk: {a.base}: link type {hdr.linktype}, need Ethernet (1)")
    rng = random.Random(a.seed)
    mx = Mixer(frames, rng)
    junk = mx.build(a.per_kind)

    out, listing, j = [], [], 0
    for i in range(len(frames) + 1):
        while j < len(junk) and junk[j][0] == i:
            _, _, kind, variant, frame = junk[j]
            sec, frac = frames[min(i, len(frames) - 1)][:2]
            out.append((sec, frac, frame, len(frame)))
            listing.append(f"{len(out):7d}  {kind}{' ' + variant if variant else ''}")
            j += 1
        if i < len(frames):
            out.append(frames[i])
    write_pcap(a.out, hdr, out)

    counts = collections.Counter(x[2] for x in junk)
    sport, dport = mx.sport, mx.dport
    lines = [f"mix_junk: base {a.base}: {len(frames)} frames, main flow "
             f"{'.'.join(map(str, mx.ip_src))}:{sport} -> {'.'.join(map(str, mx.ip_dst))}:{dport} "
             f"({len(mx.data_idx)} data segments); seed {a.seed}",
             f"inserted {len(junk)} frames -> {a.out}: {len(out)} frames"]
    lines += [f"  {kind:<13} {counts[kind]}" for kind in KINDS]
    print("\n".join(lines))
    if a.summary:
        with open(a.summary, "w") as f:
            f.write("\n".join(lines) + "\n\ninserted frames (frame number in the output, 1-based; kind; variant):\n")
            f.write("\n".join(listing) + "\n")


if __name__ == "__main__":
    main()
