"""pcapio: minimal classic-pcap (libpcap, not pcapng) reader/writer and the
Internet checksum, standard library only. Shared by vlan_tag.py and
mix_junk.py (imported from the same directory).

A frame is a tuple (ts_sec, ts_frac, data, orig_len); ts_frac is in micro- or
nanoseconds, as in the file read (the writer keeps that precision).
"""
import struct

MAGIC_US = 0xA1B2C3D4
MAGIC_NS = 0xA1B23C4D
LINKTYPE_ETHERNET = 1


class PcapHeader:
    def __init__(self, nsec=False, snaplen=262144, linktype=LINKTYPE_ETHERNET):
        self.nsec = nsec
        self.snaplen = snaplen
        self.linktype = linktype


def read_pcap(path):
    """Return (PcapHeader, [frames]). Raises ValueError on pcapng or junk."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 24:
        raise ValueError(f"{path}: too short for a pcap header")
    for endian in ("<", ">"):
        magic = struct.unpack(endian + "I", blob[:4])[0]
        if magic in (MAGIC_US, MAGIC_NS):
            break
    else:
        if blob[:4] == b"\x0a\x0d\x0d\x0a":
            raise ValueError(f"{path}: pcapng, not classic pcap (convert with editcap -F pcap)")
        raise ValueError(f"{path}: not a pcap file")
    _, _, _, _, _, snaplen, linktype = struct.unpack(endian + "IHHiIII", blob[:24])
    hdr = PcapHeader(magic == MAGIC_NS, snaplen, linktype & 0xFFFF)
    frames = []
    off = 24
    rec = struct.Struct(endian + "IIII")
    while off + 16 <= len(blob):
        sec, frac, incl, orig = rec.unpack_from(blob, off)
        off += 16
        if off + incl > len(blob):
            raise ValueError(f"{path}: truncated record at byte {off - 16}")
        frames.append((sec, frac, blob[off:off + incl], orig))
        off += incl
    return hdr, frames


def write_pcap(path, hdr, frames):
    """Write frames (little-endian classic pcap, the header's precision)."""
    magic = MAGIC_NS if hdr.nsec else MAGIC_US
    snaplen = max([hdr.snaplen] + [len(fr[2]) for fr in frames])
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", magic, 2, 4, 0, 0, snaplen, hdr.linktype))
        for sec, frac, data, orig in frames:
            f.write(struct.pack("<IIII", sec, frac, len(data), max(orig, len(data))))
            f.write(data)


def csum(data, start=0):
    """Internet (one's complement) checksum of data, folded and inverted."""
    if len(data) % 2:
        data = bytes(data) + b"\x00"
    s = start + sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def ipv4_hdr_csum(hdr):
    """Checksum for an IPv4 header given with its checksum field (any value)."""
    h = bytearray(hdr)
    h[10:12] = b"\x00\x00"
    return csum(bytes(h))


def l4_csum_v4(src, dst, proto, seg):
    """TCP/UDP checksum over the IPv4 pseudo header; seg has its field zeroed."""
    pseudo = src + dst + struct.pack("!BBH", 0, proto, len(seg))
    return csum(pseudo + seg)


def l4_csum_v6(src, dst, proto, seg):
    """TCP/UDP/ICMPv6 checksum over the IPv6 pseudo header; field zeroed."""
    pseudo = src + dst + struct.pack("!I3xB", len(seg), proto)
    return csum(pseudo + seg)
