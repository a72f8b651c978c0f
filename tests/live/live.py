#!/usr/bin/env python3
"""grorx in the live path between two kernels: one case end to end.

  live.py CASE [--grorx BIN] [--bytes N] [--json]
  live.py --list

A case builds two network namespaces on veth pairs (netns.py), starts
`grorx forward --port-topology paired` on the two root ends (net_af_packet or
net_af_xdp), runs real traffic both ways at once between the kernels
(traffic.py: TCP bulk, or UDP datagrams), stops grorx with SIGINT and holds
the run to what a bump in the wire owes its users:

- every byte arrives, both ways: each direction's SHA-256 at the sender
  equals the receiver's (UDP: no datagram missing, corrupt or duplicated);
- GRO merged: more than one segment per packet on the data it could merge;
- nothing leaked: grorx exits 0 with 0 mbufs leaked and 0 freed twice;
- nothing dropped inside grorx (forward.tx_dropped, no_mbuf, malformed 0).

Retransmissions are counted (the kernels' TcpRetransSegs), not judged: on two
vCPUs the veths' rings overrun now and then. Prints a line of figures per
case (or the JSON object with --json); exit 1 with the reasons when a check
fails.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import netns  # noqa: E402

TRAFFIC = os.path.join(HERE, "traffic.py")
PORT = 5201

# name: (driver, grorx arguments, traffic, overlay). Every live run keeps the
# reorder window on: in-order traffic must pass it unharmed.
CASES = {
    "af_packet": ("af_packet", ["--gro-reorder", "8"], "tcp", False),
    "af_packet-held": ("af_packet", ["--gro-flush-us", "100", "--gro-reorder", "8"], "tcp", False),
    "af_packet-gro-off": ("af_packet", ["--gro", "off"], "tcp", False),
    "af_xdp": ("af_xdp", ["--gro-reorder", "8"], "tcp", False),
    "udp": ("af_packet", ["--gro-udp", "--gro-reorder", "8"], "udp", False),
    "vxlan": ("af_packet", ["--encap", "vxlan", "--gro-reorder", "8"], "tcp", True),
}


def default_grorx():
    root = os.path.normpath(os.path.join(HERE, "..", ".."))
    for build in ("release", "debug"):
        p = os.path.join(root, "target", build, "grorx")
        if os.path.exists(p):
            return p
    return "grorx"


class Grorx:
    """`grorx forward` on the pair's root ends, stopped with SIGINT."""

    def __init__(self, binary, pair, driver, extra, tag):
        self.log = open(f"/tmp/{tag}-grorx.log", "w+")
        args = [binary, "forward", "--name", tag, "--json", "--duration", "300"]
        for p in pair.ports(driver):
            args += ["--port", p]
        args += ["--port-topology", "paired", *extra]
        self.args = args
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log, text=True)

    def wait_ready(self, timeout=30):
        """Until grorx has said which lcore polls what (its ports are up)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"grorx exited at start ({self.proc.returncode}): {self.stderr()}")
            if "lcore " in self.stderr():
                return
            time.sleep(0.1)
        raise RuntimeError(f"grorx did not start in {timeout} s: {self.stderr()}")

    def stderr(self):
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            out, _ = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        report = json.loads(lines[-1]) if lines else None
        return self.proc.returncode, report


def in_ns(ns, *args):
    return ["ip", "netns", "exec", ns, sys.executable, TRAFFIC, *map(str, args)]


def start_server(ns, *args):
    p = subprocess.Popen(in_ns(ns, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if '"listening"' not in line:
        raise RuntimeError(f"server did not start: {line}{p.stderr.read()}")
    return p


def finish(p, timeout=120):
    out, err = p.communicate(timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(p.args[4:6])} failed ({p.returncode}): {err.strip()}")
    return json.loads(out.strip().splitlines()[-1])


def run_traffic(pair, kind, nbytes):
    """Both directions at once; returns (client's, server's) accounts."""
    if kind == "tcp":
        srv = start_server(pair.srv, "bulk-serve", pair.srv_ip, PORT)
        cli = subprocess.Popen(in_ns(pair.cli, "bulk", pair.srv_ip, PORT, nbytes, nbytes),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    else:
        count = max(nbytes // 1400, 1)
        srv = start_server(pair.srv, "udp-serve", pair.srv_ip, PORT, count, 1400)
        cli = subprocess.Popen(in_ns(pair.cli, "udp", pair.srv_ip, PORT, count, 1400),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        return finish(cli), finish(srv)
    finally:
        for p in (cli, srv):
            if p.poll() is None:
                p.kill()


def data_segments_per_packet(gro):
    """Segments per packet over what GRO could merge (frames without
    payload, and non-IP or unmerged protocols, left out)."""
    if not gro:
        return 1.0
    pt = gro["passthrough"]
    other = sum(pt.get(k, 0) for k in ("not_ip", "not_tcp", "tcp_no_payload", "udp_no_payload"))
    segs, pkts = gro["segments_in"] - other, gro["packets_out"] - other
    return segs / pkts if pkts > 0 else 0.0


def check(case, cli, srv, code, report, gro_on):
    bad = []
    for who, snd, rcv in (("client -> server", cli, srv), ("server -> client", srv, cli)):
        if snd["sent_sha256"] != rcv["recv_sha256"] or snd["sent_bytes"] != rcv["recv_bytes"]:
            bad.append(f"{who}: sent {snd['sent_bytes']} B sha256 {snd['sent_sha256'][:12]}, "
                       f"received {rcv['recv_bytes']} B sha256 {rcv['recv_sha256'][:12]}")
        for k in ("corrupt", "duplicates", "missing"):
            if rcv.get(k):
                bad.append(f"{who}: {rcv[k]} datagram(s) {k}")
    if report is None:
        return bad + [f"grorx wrote no report (exit {code})"]
    if code != 0:
        bad.append(f"grorx exit {code}")
    for k in ("mbufs_leaked", "mbufs_freed_twice"):
        if report[k]:
            bad.append(f"{k} {report[k]}")
    fwd = report.get("forward") or {}
    for k in ("tx_dropped", "no_mbuf", "malformed", "prepare_failed"):
        if fwd.get(k):
            bad.append(f"forward.{k} {fwd[k]}")
    if gro_on and data_segments_per_packet(report.get("gro")) <= 1.0:
        bad.append("GRO merged nothing")
    return bad


def run_case(name, binary, nbytes):
    driver, extra, kind, overlay = CASES[name]
    tag = f"lv{os.getpid() % 100000}"
    pair = netns.Pair(tag=tag, vxlan=overlay)
    g = None
    try:
        g = Grorx(binary, pair, driver, extra, tag)
        g.wait_ready()
        retrans0 = pair.retransmits()
        cli, srv = run_traffic(pair, kind, nbytes)
        retrans = pair.retransmits() - retrans0
        code, report = g.stop()
        bad = check(name, cli, srv, code, report, "off" not in extra)
        gro = (report or {}).get("gro") or {}
        hold = (report or {}).get("histograms", {}).get("gro_hold_ns", {})
        res = {
            "case": name,
            "ok": not bad,
            "problems": bad,
            "bytes_each_way": cli["sent_bytes"],
            "seconds": max(cli.get("seconds", 0), srv.get("seconds", 0)),
            "retransmits": retrans,
            "gro_segments_per_packet": round(data_segments_per_packet(gro), 2),
            "gro_max_segments": gro.get("max_segments_per_packet", 0),
            "hold_max_ns": hold.get("max", 0),
            "mbufs_leaked": (report or {}).get("mbufs_leaked"),
            "taken_back": sum(p.get("taken_back", 0) for p in (report or {}).get("pools", [])),
            "forward": (report or {}).get("forward"),
            "grorx": " ".join(g.args[1:]),
        }
        if bad:
            res["grorx_stderr"] = g.stderr()[-4000:]
        return res
    finally:
        if g and g.proc.poll() is None:
            g.proc.kill()
            g.proc.wait()
        pair.close()


def run_firewall(binary, nbytes, seconds=10):
    """examples/stateful_firewall.rs between the namespaces, the client's
    side inside: the client's connection works both ways, byte-exact; the
    server's attempt to connect in is dropped; nothing leaks."""
    tag = f"fw{os.getpid() % 100000}"
    pair = netns.Pair(tag=tag)
    inside, outside = pair.ports("af_packet")
    env = dict(os.environ, GRORX_NAME=tag)
    fw = subprocess.Popen([binary, inside, outside, str(seconds)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=env)
    try:
        cli, srv = run_traffic(pair, "tcp", nbytes)
        guard = start_server(pair.cli, "bulk-serve", pair.cli_ip, PORT + 1)
        try:
            knock = finish(subprocess.Popen(in_ns(pair.srv, "connect", pair.cli_ip, PORT + 1, 2),
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                            text=True))
        finally:
            guard.kill()
            guard.wait()
        out, err = fw.communicate(timeout=seconds + 60)
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        counts = json.loads(lines[-1]) if lines else None
        bad = check("firewall", cli, srv, fw.returncode, {"mbufs_leaked": 0, "mbufs_freed_twice": 0},
                    False)
        if counts is None:
            bad.append(f"the firewall printed no counts (exit {fw.returncode}): {err[-2000:]}")
        else:
            if counts["mbufs_leaked"]:
                bad.append(f"mbufs_leaked {counts['mbufs_leaked']}")
            if not counts["dropped"].get("not established"):
                bad.append("nothing dropped as not established")
        if knock["connected"]:
            bad.append("a connection from the outside got in")
        return {"case": "firewall", "ok": not bad, "problems": bad, "counts": counts,
                "outside_connect": knock["connected"], "bytes_each_way": cli["sent_bytes"],
                "grorx_stderr": err[-4000:] if bad else ""}
    finally:
        if fw.poll() is None:
            fw.kill()
            fw.wait()
        pair.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("case", nargs="?", choices=sorted([*CASES, "firewall"]))
    ap.add_argument("--firewall", metavar="BIN",
                    help="the stateful_firewall example's binary (case firewall)")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    ap.add_argument("--grorx", default=None, help="the grorx binary (default: target/release, then debug)")
    ap.add_argument("--bytes", type=int, default=64 << 20, help="bytes each way (default 64 MiB)")
    ap.add_argument("--json", action="store_true", help="print the case's JSON object")
    a = ap.parse_args()
    if a.list:
        for name, (driver, extra, kind, overlay) in CASES.items():
            print(f"{name:20} {driver:10} {kind:4} {'vxlan' if overlay else 'plain':6} {' '.join(extra)}")
        print(f"{'firewall':20} {'af_packet':10} tcp  plain  examples/stateful_firewall.rs (--firewall BIN)")
        return 0
    if not a.case:
        ap.error("name a case (--list shows them)")
    if os.geteuid() != 0:
        print("live.py: needs root (network namespaces, veths)", file=sys.stderr)
        return 2
    if a.case == "firewall":
        if not a.firewall:
            ap.error("case firewall: give --firewall BIN (cargo build -p grorx-examples --example stateful_firewall)")
        r = run_firewall(a.firewall, a.bytes)
        print(json.dumps(r) if a.json else f"firewall: {'ok' if r['ok'] else 'FAILED'}: {r['counts']}")
        for p in r["problems"]:
            print(f"  {p}")
        return 0 if r["ok"] else 1
    r = run_case(a.case, a.grorx or default_grorx(), a.bytes)
    if a.json:
        print(json.dumps(r))
    else:
        fwd = r["forward"] or {}
        print(f"{r['case']}: {'ok' if r['ok'] else 'FAILED'}: {r['bytes_each_way']} B each way in "
              f"{r['seconds']} s, GRO {r['gro_segments_per_packet']} seg/pkt (max {r['gro_max_segments']}), "
              f"hold max {r['hold_max_ns'] / 1000:.0f} us, retransmits {r['retransmits']}, "
              f"GSO {fwd.get('gso_packets', 0)} -> {fwd.get('gso_segments', 0)} segments, "
              f"leaked {r['mbufs_leaked']}, taken back {r['taken_back']}")
        for p in r["problems"]:
            print(f"  {p}")
        if not r["ok"]:
            print(r.get("grorx_stderr", ""), file=sys.stderr)
    return 0 if r["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
