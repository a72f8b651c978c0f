#!/usr/bin/env python3
# Copy of shared/tools/grocheck.py (our organisation's own tool, unchanged below this header):
# CI runs on a fresh clone where ../shared may not exist, so the tests use this copy.
"""Check a GRO engine's output capture against its input capture.

grocheck.py IN.pcap OUT.pcap [--max-frags N] [--max-size N] [--strict-order]
                            [--same-segments]

Holds the output to Linux's TCP GRO rules and to conservation:
- per flow, the TCP payload bytes in arrival order are identical in and out
  (or, for an engine that reorders into sequence order, every byte at its
  sequence number is unchanged; --strict-order forbids that);
- every output packet is a run of consecutive input segments of one flow that
  Linux would merge (contiguous seq, same ACK, same options, flags, IP rules,
  size rules), within max_frags segments and max_size bytes;
- every output IPv4 header checksum and every TCP checksum verifies.
--same-segments: OUT must hold the very segments of IN (GRO then GSO round trip).
Prints a summary and, last, one line of figures. Exit 0 only when all hold.
"""
import struct
import sys
from collections import defaultdict


def read_pcap(path):
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack("<I", data[:4])[0]
    if magic in (0xA1B2C3D4, 0xA1B23C4D):
        endian = "<"
    elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
        endian = ">"
    else:
        raise SystemExit(f"{path}: not a pcap file (pcapng is not read here)")
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    if linktype != 1:
        raise SystemExit(f"{path}: link type {linktype}, expected Ethernet (1)")
    off, out = 24, []
    while off + 16 <= len(data):
        _, _, incl, orig = struct.unpack(endian + "IIII", data[off:off + 16])
        off += 16
        out.append((data[off:off + incl], orig))
        off += incl
    return out


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


class Seg:
    __slots__ = ("flow", "seq", "ack", "flags", "win", "opts", "payload", "ipid", "df",
                 "ttl", "tos", "v6", "ok_ipcsum", "ok_tcpcsum", "iplen_ok")


def parse(frame):
    """Return a Seg for a TCP frame, or None for anything else."""
    if len(frame) < 14:
        return None
    et = struct.unpack("!H", frame[12:14])[0]
    off = 14
    vlans = []
    while et in (0x8100, 0x88A8) and len(frame) >= off + 4:
        vlans.append(struct.unpack("!H", frame[off:off + 2])[0] & 0x0FFF)
        et = struct.unpack("!H", frame[off + 2:off + 4])[0]
        off += 4
    s = Seg()
    if et == 0x0800:
        if len(frame) < off + 20:
            return None
        vihl, tos, tlen, ipid, frag, ttl, proto = struct.unpack("!BBHHHBB", frame[off:off + 10])
        ihl = (vihl & 15) * 4
        if proto != 6 or ihl < 20:
            return None
        src, dst = frame[off + 12:off + 16], frame[off + 16:off + 20]
        s.v6 = False
        s.ipid, s.df, s.ttl, s.tos = ipid, bool(frag & 0x4000), ttl, tos
        s.ok_ipcsum = csum(frame[off:off + ihl]) == 0xFFFF
        l4 = off + ihl
        end = off + tlen
        s.iplen_ok = end <= len(frame)
        pseudo = src + dst + struct.pack("!BBH", 0, 6, end - l4)
    elif et == 0x86DD:
        if len(frame) < off + 40:
            return None
        vtf, plen, nxt, hop = struct.unpack("!IHBB", frame[off:off + 8])
        if nxt != 6:
            return None
        src, dst = frame[off + 8:off + 24], frame[off + 24:off + 40]
        s.v6 = True
        s.ipid, s.df, s.ttl, s.tos = 0, True, hop, (vtf >> 20) & 0xFF
        s.ok_ipcsum = True
        l4 = off + 40
        end = l4 + plen
        s.iplen_ok = end <= len(frame)
        pseudo = src + dst + struct.pack("!IxxxB", end - l4, 6)
    else:
        return None
    if len(frame) < l4 + 20 or not s.iplen_ok:
        return None  # malformed: counted with the non-TCP frames, which must all pass through
    sport, dport, seq, ack, doff_flags, win = struct.unpack("!HHIIHH", frame[l4:l4 + 16])
    thl = (doff_flags >> 12) * 4
    end = min(end, len(frame))
    s.flow = (tuple(vlans), src, dst, sport, dport)
    s.seq, s.ack, s.flags, s.win = seq, ack, doff_flags & 0x1FF, win
    s.opts = bytes(frame[l4 + 20:l4 + thl])
    s.payload = bytes(frame[l4 + thl:end])
    s.ok_tcpcsum = csum(pseudo + frame[l4:end]) == 0xFFFF
    return s


FIN, SYN, RST, PSH, ACK, URG, CWR = 1, 2, 4, 8, 16, 32, 128


def mergeable(run, nxt):
    """May segment `nxt` be merged after the run (Linux tcp_gro_receive/inet_gro_receive)?"""
    first, last = run[0], run[-1]
    if last.flags & (PSH | FIN):
        return "after psh/fin"
    if nxt.flags & (SYN | RST | URG | CWR):
        return "flags"
    if (nxt.flags ^ first.flags) & ~(CWR | FIN | PSH):
        return "flags differ"
    if nxt.ack != first.ack:
        return "ack"
    if nxt.win != first.win:
        return "window"  # Linux compares the whole doff/flags/window word
    if nxt.opts != first.opts:
        return "options"
    if (last.seq + len(last.payload)) & 0xFFFFFFFF != nxt.seq:
        return "seq gap"
    if not nxt.payload:
        return "no payload"
    if not (first.ok_tcpcsum and nxt.ok_tcpcsum and first.ok_ipcsum and nxt.ok_ipcsum):
        return "bad checksum"
    if len(nxt.payload) > len(first.payload) or len(last.payload) < len(first.payload):
        return "size"
    if nxt.ttl != first.ttl or nxt.tos != first.tos or nxt.df != first.df or nxt.v6 != first.v6:
        return "ip fields"
    if not nxt.v6 and not (nxt.ipid == (last.ipid + 1) & 0xFFFF or (nxt.df and nxt.ipid == last.ipid)):
        return "ip id"
    return None


def seq_bytes(segs):
    """Map of sequence number -> byte for a flow's payload (last write wins)."""
    m = {}
    for s in segs:
        for k, b in enumerate(s.payload):
            m[(s.seq + k) & 0xFFFFFFFF] = b
    return m


def main():
    args = sys.argv[1:]
    strict_order = "--strict-order" in args
    if strict_order:
        args.remove("--strict-order")
    same_segments = "--same-segments" in args
    if same_segments:
        args.remove("--same-segments")
    max_frags, max_size = 17, 65535
    if "--max-frags" in args:
        i = args.index("--max-frags"); max_frags = int(args[i + 1]); del args[i:i + 2]
    if "--max-size" in args:
        i = args.index("--max-size"); max_size = int(args[i + 1]); del args[i:i + 2]
    if len(args) != 2:
        raise SystemExit(__doc__)
    inp = [parse(f) for f, _ in read_pcap(args[0])]
    outp_raw = read_pcap(args[1])
    outp = [parse(f) for f, _ in outp_raw]
    problems = []
    truncated = sum(1 for f, orig in outp_raw if len(f) < orig)
    if truncated:
        problems.append(f"{truncated} output packets truncated by the capture's snaplen")

    in_by_flow, out_by_flow = defaultdict(list), defaultdict(list)
    for s in inp:
        if s is not None:
            in_by_flow[s.flow].append(s)
    for s in outp:
        if s is not None:
            out_by_flow[s.flow].append(s)
    n_in_tcp = sum(len(v) for v in in_by_flow.values())
    n_out_tcp = sum(len(v) for v in out_by_flow.values())
    n_in_other = sum(1 for s in inp if s is None)
    n_out_other = sum(1 for s in outp if s is None)
    if n_in_other != n_out_other:
        problems.append(f"non-TCP frames: {n_in_other} in, {n_out_other} out")

    bad_ip = sum(1 for v in out_by_flow.values() for s in v if not s.ok_ipcsum) - \
        sum(1 for v in in_by_flow.values() for s in v if not s.ok_ipcsum)
    bad_tcp_out = sum(1 for v in out_by_flow.values() for s in v if not s.ok_tcpcsum)
    bad_tcp_in = sum(1 for v in in_by_flow.values() for s in v if not s.ok_tcpcsum)
    bad_len = sum(1 for v in out_by_flow.values() for s in v if not s.iplen_ok)
    if bad_ip > 0:
        problems.append(f"{bad_ip} more output packets with a bad IPv4 header checksum than input ones")
    if bad_tcp_out > bad_tcp_in:
        problems.append(f"{bad_tcp_out} output packets with a bad TCP checksum ({bad_tcp_in} in the input)")
    if bad_len:
        problems.append(f"{bad_len} output packets whose IP length exceeds the frame")

    ideal = 0
    violations = defaultdict(int)
    max_seen = 0
    reordered_flows = 0
    for flow, segs in in_by_flow.items():
        # ideal: greedy runs in arrival order under the rules and limits, ignoring bursts
        run = []
        for s in segs:
            if run and mergeable(run, s) is None and len(run) < max_frags and \
                    sum(len(x.payload) for x in run) + len(s.payload) + 40 + len(s.opts) + 20 <= max_size:
                run.append(s)
            else:
                if run:
                    ideal += 1
                run = [s]
        ideal += 1 if run else 0
        outs = out_by_flow.get(flow, [])
        pin = b"".join(s.payload for s in segs)
        pout = b"".join(s.payload for s in outs)
        if pin != pout:
            # not arrival order: allowed only as a reordering of whole segments into
            # sequence order, with every byte at its sequence number unchanged
            if len(pin) != len(pout) or seq_bytes(segs) != seq_bytes(outs):
                problems.append(f"flow {flow[3]}->{flow[4]}: payload bytes differ "
                                f"({len(pin)} in, {len(pout)} out)")
                continue
            reordered_flows += 1
            if strict_order:
                problems.append(f"flow {flow[3]}->{flow[4]}: segments delivered out of arrival order")
            continue
        # map each output packet onto consecutive input segments
        i = 0
        for o in outs:
            want, run = len(o.payload), []
            if want == 0:
                run = [segs[i]]; i += 1
            else:
                got = 0
                while got < want and i < len(segs):
                    run.append(segs[i]); got += len(segs[i].payload); i += 1
                if got != want:
                    violations["boundary inside a segment"] += 1
                    break
            max_seen = max(max_seen, len(run))
            if o.seq != run[0].seq:
                violations["seq of merged packet"] += 1
            if len(run) > max_frags:
                violations["more segments than max_frags"] += 1
            for k in range(1, len(run)):
                why = mergeable(run[:k], run[k])
                if why:
                    violations["merged across: " + why] += 1
                    break
        if i != len(segs):
            violations["segments left unmatched"] += 1
    for flow in out_by_flow:
        if flow not in in_by_flow:
            problems.append(f"output flow {flow[3]}->{flow[4]} not in the input")
    if same_segments:
        # segmentation after GRO must give back the input's segments, flow by flow
        for flow, segs in in_by_flow.items():
            a = [(x.seq, x.flags, x.payload) for x in segs]
            b = [(x.seq, x.flags, x.payload) for x in out_by_flow.get(flow, [])]
            if a != b:
                k = next((i for i, (u, v) in enumerate(zip(a, b)) if u != v), min(len(a), len(b)))
                problems.append(f"flow {flow[3]}->{flow[4]}: segment {k} differs "
                                f"({len(a)} segments in, {len(b)} out)")
    for why, n in sorted(violations.items()):
        problems.append(f"{n} x {why}")

    merged_away = n_in_tcp - n_out_tcp
    possible = n_in_tcp - ideal
    quality = merged_away / possible if possible else 1.0
    for p in problems:
        print("PROBLEM:", p)
    print(f"flows={len(in_by_flow)} tcp_in={n_in_tcp} tcp_out={n_out_tcp} ideal_out={ideal} "
          f"merge_quality={quality:.3f} max_segs={max_seen} reordered_flows={reordered_flows} "
          f"problems={len(problems)}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
