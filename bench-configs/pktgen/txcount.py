#!/usr/bin/env python3
"""Pktgen's TX count and rate, read from the port's ethdev counters.

    txcount.py [--file-prefix pg] [--port 0] [--interval 1] [--wait 60]

Polls DPDK telemetry (`/ethdev/stats,PORT`) of the DPDK process started with
`--file-prefix PREFIX` (Pktgen here) through its socket
/var/run/dpdk/PREFIX/dpdk_telemetry.v2, until that process exits, then prints
one summary line (JSON) on stdout:

    {"tx_packets": N, "tx_bytes": B, "peak_tx_pps": P, "tx_pps": [...],
     "samples": S, "counter_resets": R}

- tx_packets / tx_bytes: the highest opackets / obytes seen. A port's counters
  go back to 0 when the link goes down (a memif peer that left): the highest
  value is the count up to then, and counter_resets says it happened.
- tx_pps: packets sent in each interval, per second; peak_tx_pps its highest.
Start it before or just after Pktgen (it waits up to --wait seconds for the
socket). It reads what the driver counted (the same counters Pktgen's screen
shows), without Pktgen's once-a-second screen sampling and its lag.
Standard library only.
"""
import argparse
import json
import os
import socket
import sys
import time


def connect(path, wait):
    deadline = time.monotonic() + wait
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            s.connect(path)
            info = json.loads(s.recv(16384).decode())
            return s, info
        except OSError:
            s.close()
            if time.monotonic() > deadline:
                sys.exit(f"txcount: no DPDK telemetry at {path} after {wait} s")
            time.sleep(0.1)


def query(s, cmd):
    s.send(cmd.encode())
    reply = s.recv(1 << 20)
    if not reply:
        raise EOFError
    return json.loads(reply.decode())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--file-prefix", default="pg", help="the DPDK process's --file-prefix (default: pg)")
    ap.add_argument("--port", type=int, default=0, help="ethdev port id (default: 0)")
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between samples (default: 1)")
    ap.add_argument("--wait", type=float, default=60.0, help="seconds to wait for the socket (default: 60)")
    a = ap.parse_args()

    run_dir = os.environ.get("XDG_RUNTIME_DIR", "/tmp") if os.getuid() else "/var/run"
    path = os.path.join(run_dir, "dpdk", a.file_prefix, "dpdk_telemetry.v2")
    s, _info = connect(path, a.wait)

    best_pkts = best_bytes = 0
    prev = None  # (time, opackets)
    rates = []
    resets = samples = 0
    cmd = f"/ethdev/stats,{a.port}"
    try:
        while True:
            try:
                st = query(s, cmd)["/ethdev/stats"]
            except (OSError, EOFError, ValueError):
                break  # the process exited (or closed the socket)
            if st is None:  # no such port (yet): the ports may still be starting
                time.sleep(a.interval)
                continue
            now = time.monotonic()
            samples += 1
            op, ob = st["opackets"], st["obytes"]
            if prev is not None:
                if op < prev[1]:
                    resets += 1
                else:
                    rates.append(round((op - prev[1]) / (now - prev[0])))
            prev = (now, op)
            best_pkts = max(best_pkts, op)
            best_bytes = max(best_bytes, ob)
            time.sleep(a.interval)
    except KeyboardInterrupt:
        pass
    if samples == 0:
        print(f"txcount: port {a.port} never answered", file=sys.stderr)
    print(json.dumps({
        "tx_packets": best_pkts,
        "tx_bytes": best_bytes,
        "peak_tx_pps": max(rates, default=0),
        "tx_pps": rates,
        "samples": samples,
        "counter_resets": resets,
    }))


if __name__ == "__main__":
    main()
