#!/usr/bin/env python3
"""Damage checksum fields, and nothing else, of a few frames of a capture.

csum_damage.py IN.pcap OUT.pcap [--seed N] [--rate R] [--fields ip,tcp] [--list FILE]

Each IPv4 TCP frame of IN (untagged or behind 802.1Q/802.1ad tags) is picked
with probability R (default 0.03) by a random generator seeded with N (default
1), so the same IN gives the same OUT. A picked frame gets ONE of --fields
(default both) made wrong: `ip` its IPv4 header checksum, `tcp` its TCP
checksum, XORed with a random value that is neither 0 nor 0xffff (0 and 0xffff
sum alike in one's complement: the field would still verify). Every other byte,
and every other frame, is copied as it is; record headers are kept.

--list FILE writes one line per damaged frame: its index in the capture
(from 0) and the field (`ip` or `tcp`). Prints, last, one line of figures:
frames= tcp4= damaged_ip= damaged_tcp=.
"""
import random
import struct
import sys


def read_pcap(path):
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack("<I", data[:4])[0]
    if magic in (0xA1B2C3D4, 0xA1B23C4D):
        endian = "<"
    elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
        endian = ">"
    else:
        raise SystemExit(f"{path}: not a classic pcap file")
    off, recs = 24, []
    while off + 16 <= len(data):
        incl = struct.unpack(endian + "I", data[off + 8:off + 12])[0]
        recs.append((data[off:off + 16], bytearray(data[off + 16:off + 16 + incl])))
        off += 16 + incl
    return data[:24], recs


def tcp4_offsets(f):
    """(IPv4 header offset, TCP header offset) of an IPv4 TCP frame, else None."""
    off = 12
    et = struct.unpack("!H", f[off:off + 2])[0] if len(f) >= 14 else 0
    while et in (0x8100, 0x88A8) and len(f) >= off + 6:
        off += 4
        et = struct.unpack("!H", f[off:off + 2])[0]
    l3 = off + 2
    if et != 0x0800 or len(f) < l3 + 20 or f[l3] >> 4 != 4 or f[l3 + 9] != 6:
        return None
    l4 = l3 + (f[l3] & 0x0F) * 4
    if len(f) < l4 + 20:
        return None
    return l3, l4


def main():
    args = sys.argv[1:]
    opts = {"--seed": "1", "--rate": "0.03", "--fields": "ip,tcp", "--list": None}
    for k in list(opts):
        if k in args:
            i = args.index(k)
            opts[k] = args[i + 1]
            del args[i:i + 2]
    if len(args) != 2:
        raise SystemExit(__doc__)
    fields = opts["--fields"].split(",")
    if not fields or any(x not in ("ip", "tcp") for x in fields):
        raise SystemExit("--fields: ip, tcp or ip,tcp")
    rng = random.Random(int(opts["--seed"]))
    rate = float(opts["--rate"])
    head, recs = read_pcap(args[0])
    damaged = {"ip": 0, "tcp": 0}
    listed = []
    tcp4 = 0
    for i, (_, f) in enumerate(recs):
        at = tcp4_offsets(f)
        if at is None:
            continue
        tcp4 += 1
        # The same draws for every frame, picked or not.
        pick, which, x = rng.random(), rng.randrange(len(fields)), rng.randrange(1, 0xFFFF)
        if pick >= rate:
            continue
        field = fields[which]
        pos = at[0] + 10 if field == "ip" else at[1] + 16
        old = struct.unpack("!H", f[pos:pos + 2])[0]
        f[pos:pos + 2] = struct.pack("!H", old ^ x)
        damaged[field] += 1
        listed.append(f"{i} {field}")
    with open(args[1], "wb") as out:
        out.write(head)
        for rh, f in recs:
            out.write(rh)
            out.write(f)
    if opts["--list"]:
        with open(opts["--list"], "w") as lf:
            lf.write("".join(x + "\n" for x in listed))
    print(f"frames={len(recs)} tcp4={tcp4} damaged_ip={damaged['ip']} damaged_tcp={damaged['tcp']}")


if __name__ == "__main__":
    main()
