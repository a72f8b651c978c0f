#!/usr/bin/env python3
"""tshark_check.py IN.pcap OUT.pcap

Asks tshark, with IPv4 and TCP checksum validation on, about every frame of a
GRO engine's output capture and reports the complaints the engine is to blame
for: a bad IPv4 header or TCP checksum, a malformed frame, or any expert info
of severity error (lengths that exceed the frame, bogus header lengths...).
A complaint about an output frame that is a byte-identical copy of an input
frame (a frame passed through untouched) is inherited from the input and only
counted (tshark does not read IN). Prints one line per new complaint, then one line of figures; exit 0
when there is no new complaint, 1 when there is, 2 when tshark is missing.
"""
import os
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ next to the tools
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grocheck import read_pcap  # noqa: E402

ZERO_CSUM = "Illegal checksum value (0)"
TUNNEL_PORTS = {"4789", "6081"}

FILTER = ("ip.checksum.status == 0 || tcp.checksum.status == 0 || _ws.malformed"
          " || _ws.expert.severity >= error")


def complaints(path):
    """frame number (1-based) -> tshark's expert messages, for the frames FILTER matches."""
    # TCP/UDP payloads as plain data, no reassembly: what a payload dissector
    # makes of iperf3's bytes (tshark's Thrift heuristic flags some) is no
    # complaint about the headers.
    cmd = ["tshark", "-n", "-r", path, "-o", "tcp.check_checksum:TRUE",
           "-o", "ip.check_checksum:TRUE", "-o", "tcp.desegment_tcp_streams:FALSE",
           "-o", "tcp.analyze_sequence_numbers:FALSE",
           "-d", "tcp.port==1-65535,data", "-d", "udp.port==1-65535,data",
           "-Y", FILTER, "-T", "fields",
           "-e", "frame.number", "-e", "_ws.expert.message", "-e", "udp.dstport",
           "-E", "occurrence=a", "-E", "aggregator=; "]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise SystemExit(f"tshark failed on {path} (exit {r.returncode}): {r.stderr.strip()}")
    out = {}
    for line in r.stdout.splitlines():
        num, msg, ports = (line.split("\t") + ["", ""])[:3]
        # A zero UDP checksum over IPv6 is allowed for tunnels (RFC 6935),
        # which tshark does not know.
        if msg.strip() == ZERO_CSUM and TUNNEL_PORTS & set(ports.split("; ")):
            continue
        if num.strip():
            out[int(num)] = msg.strip() or "(no expert message)"
    return out


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    if shutil.which("tshark") is None:
        print("tshark_check: tshark not found (apt-get install tshark; "
              "scripts/captures/make-captures.sh installs it)", file=sys.stderr)
        sys.exit(2)
    inp, outp = sys.argv[1:]
    in_frames = {f for f, _ in read_pcap(inp)}
    out_frames = [f for f, _ in read_pcap(outp)]
    c_out = complaints(outp)
    new = {n: m for n, m in c_out.items() if out_frames[n - 1] not in in_frames}
    for n, m in sorted(new.items()):
        print(f"NEW COMPLAINT: output frame {n} ({len(out_frames[n - 1])} bytes): {m}")
    print(f"tshark: out_frames={len(out_frames)} out_complaints={len(c_out)} "
          f"inherited={len(c_out) - len(new)} new={len(new)}")
    sys.exit(1 if new else 0)


if __name__ == "__main__":
    main()
