#!/usr/bin/env python3
"""What GRO costs a live flow: request/response latency and bulk goodput
through a two-way forwarder between two kernels, side by side with
dpdk-testpmd io forwarding on the same ports, in one run.

  bench.py [--grorx BIN] [--driver af_packet|af_xdp] [--rounds N] [--seconds S] [--json FILE]

Per forwarder (testpmd --forward-mode=io --port-topology=paired; grorx
forward --port-topology paired with GRO off, per poll (the default), and
held 50, 100 and 200 us), rounds interleaved so that the machine's drift
falls on every forwarder alike:

- latency: sockperf ping-pong over TCP (TCP_NODELAY), 64-byte messages,
  round trips for S seconds: p50, p99, p99.9 of the round-trip time;
- goodput: iperf3, one TCP flow client -> server for S seconds: Gbit/s
  received and the sender's retransmissions;
- grorx: GRO segments per data packet, and the hold times seen (p99 and
  the longest) against their limit (the flush setting: a poll's end, or the
  hold time), from the bulk run;
- the forwarder's worker thread: how often it lost its CPU during the bulk
  run (involuntary context switches), which is what a hold beyond its
  limit waits on.

Latency and goodput each run through a forwarder of their own, started
afresh, so that GRO's figures are the bulk flow's alone.

The namespaces' processes run on CPU 0 and the forwarder's worker on CPU 1
(`-l 0,1`, grorx's default). Prints a table of medians over the rounds.
Needs root, sockperf, iperf3 and dpdk-testpmd (scripts/setup.sh live).
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import live  # noqa: E402
import netns  # noqa: E402

FORWARDERS = [
    ("testpmd io", None),
    ("grorx, GRO off", ["--gro", "off"]),
    ("grorx, GRO per poll", []),
    ("grorx, GRO held 50 us", ["--gro-flush-us", "50"]),
    ("grorx, GRO held 100 us", ["--gro-flush-us", "100"]),
    ("grorx, GRO held 200 us", ["--gro-flush-us", "200"]),
]


class Testpmd:
    """dpdk-testpmd io forwarding, paired, on the same two ports."""

    def __init__(self, pair, driver, tag):
        self.log = open(f"/tmp/{tag}-testpmd.log", "w+")
        vdevs = []
        for p in pair.ports(driver):
            vdevs += ["--vdev", p]
        self.args = ["stdbuf", "-oL", "dpdk-testpmd", "-l", "0,1", "--no-pci", "--file-prefix", tag, *vdevs,
                     "--", "--forward-mode=io", "--port-topology=paired", "--auto-start"]
        # testpmd ends at once when its stdin closes: a pipe kept open. Its
        # stdout, a file here, is line-buffered so that its lines show.
        self.proc = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=self.log,
                                     stderr=subprocess.STDOUT, text=True)

    def wait_ready(self, timeout=30):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.log.seek(0)
            text = self.log.read()
            if self.proc.poll() is not None:
                raise RuntimeError(f"testpmd exited: {text[-2000:]}")
            if "Press enter to exit" in text:
                return
            time.sleep(0.1)
        raise RuntimeError("testpmd did not start")

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.proc.returncode, None


def pinned(ns, *args):
    return ["ip", "netns", "exec", ns, "taskset", "-c", "0", *map(str, args)]


def latency(pair, seconds):
    """sockperf ping-pong: (p50, p99, p99.9) round trip in microseconds."""
    srv = subprocess.Popen(pinned(pair.srv, "sockperf", "server", "--tcp", "-i", pair.srv_ip,
                                  "-p", 11111), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        out = subprocess.run(pinned(pair.cli, "sockperf", "ping-pong", "--tcp", "-i", pair.srv_ip,
                                    "-p", 11111, "-m", 64, "-t", seconds, "--full-rtt"),
                             capture_output=True, text=True, timeout=seconds + 60).stdout
    finally:
        srv.kill()
        srv.wait()
    pct = {m.group(1): float(m.group(2))
           for m in re.finditer(r"percentile (\d+\.\d+) =\s+([\d.]+)", out)}
    if "50.000" not in pct:
        raise RuntimeError(f"sockperf gave no percentiles: {out[-1500:]}")
    return pct["50.000"], pct["99.000"], pct["99.900"]


def goodput(pair, seconds):
    """iperf3, one flow: (Gbit/s received, retransmissions)."""
    srv = subprocess.Popen(pinned(pair.srv, "iperf3", "-s", "-1", "-B", pair.srv_ip),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        out = subprocess.run(pinned(pair.cli, "iperf3", "-c", pair.srv_ip, "-t", seconds, "-J"),
                             capture_output=True, text=True, timeout=seconds + 60).stdout
    finally:
        srv.kill()
        srv.wait()
    end = json.loads(out)["end"]
    return end["sum_received"]["bits_per_second"] / 1e9, end["sum_sent"].get("retransmits", 0)


def hold_limit_us(extra):
    if "--gro-flush-us" in extra:
        return float(extra[extra.index("--gro-flush-us") + 1])
    return 0.0


def preemptions(pid):
    """Times the process's lcore worker threads lost their CPU so far
    (involuntary context switches: a poll-mode worker never yields)."""
    n = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            comm = open(f"/proc/{pid}/task/{tid}/comm").read()
            if "worker" not in comm:
                continue
            for line in open(f"/proc/{pid}/task/{tid}/status"):
                if line.startswith("nonvoluntary_ctxt_switches"):
                    n += int(line.split()[1])
        except OSError:
            pass
    return n


def with_forwarder(name, extra, pair, driver, grorx, tag, work):
    """Starts the forwarder, runs `work()`, stops it: (work's result, the
    worker's preemptions meanwhile, exit code, grorx's report or None)."""
    fwd = Testpmd(pair, driver, tag) if extra is None else live.Grorx(grorx, pair, driver, extra, tag)
    try:
        fwd.wait_ready()
        before = preemptions(fwd.proc.pid)
        got = work()
        lost = preemptions(fwd.proc.pid) - before
        code, report = fwd.stop()
    finally:
        if fwd.proc.poll() is None:
            fwd.proc.kill()
            fwd.proc.wait()
    return got, lost, code, report


def one(name, extra, pair, driver, grorx, seconds, tag):
    """Latency and goodput, each through a forwarder of its own (so that
    GRO's figures are the bulk flow's alone)."""
    lat, _, _, lrep = with_forwarder(name, extra, pair, driver, grorx, tag + "l",
                                     lambda: latency(pair, seconds))
    (gbps, retrans), lost, code, report = with_forwarder(name, extra, pair, driver, grorx, tag + "g",
                                                         lambda: goodput(pair, seconds))
    row = {"forwarder": name, "p50_us": lat[0], "p99_us": lat[1], "p999_us": lat[2],
           "gbps": gbps, "retransmits": retrans, "worker_preempted": lost}
    if report is not None:
        hold = report["histograms"]["gro_hold_ns"]
        lhold = lrep["histograms"]["gro_hold_ns"]
        row.update(exit=code, leaked=report["mbufs_leaked"] + lrep["mbufs_leaked"],
                   seg_per_pkt=live.data_segments_per_packet(report.get("gro")),
                   hold_max_us=hold["max"] / 1000, hold_p99_us=hold["p99"] / 1000,
                   hold_p999_us=hold["p999"] / 1000, rr_hold_max_us=lhold["max"] / 1000,
                   hold_limit_us=hold_limit_us(extra))
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grorx", default=None)
    ap.add_argument("--driver", default="af_packet", choices=["af_packet", "af_xdp"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--json", metavar="FILE", help="every measurement, as JSON")
    a = ap.parse_args()
    grorx = a.grorx or live.default_grorx()
    tag = f"lb{os.getpid() % 100000}"
    pair = netns.Pair(tag=tag)
    rows = []
    try:
        for r in range(a.rounds):
            for name, extra in FORWARDERS:
                row = one(name, extra, pair, a.driver, grorx, a.seconds, f"{tag}{r}")
                row["round"] = r
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    finally:
        pair.close()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"driver": a.driver, "rounds": a.rounds, "seconds": a.seconds, "rows": rows}, f, indent=1)
    med = lambda name, k: statistics.median(x[k] for x in rows if x["forwarder"] == name)  # noqa: E731
    base = "grorx, GRO off"
    print(f"{a.driver}, {a.rounds} rounds of {a.seconds} s each, medians; x: ratio to {base}")
    print(f"| forwarder | RTT p50 us | p99 us | p99.9 us | goodput Gbit/s | retransmits "
          f"| GRO seg/pkt | hold p99 / max us (limit) | worker preempted |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, extra in FORWARDERS:
        r = lambda k: med(name, k)  # noqa: E731
        x = lambda k: r(k) / med(base, k)  # noqa: E731
        gro = extra is not None and "off" not in extra
        seg = f"{r('seg_per_pkt'):.1f}" if gro else "-"
        lim = f"{r('hold_limit_us'):.0f} us" if gro and hold_limit_us(extra) else "a poll"
        hold = f"{r('hold_p99_us'):.0f} / {r('hold_max_us'):.0f} ({lim})" if gro else "-"
        print(f"| {name} | {r('p50_us'):.1f} x{x('p50_us'):.2f} | {r('p99_us'):.0f} x{x('p99_us'):.2f} "
              f"| {r('p999_us'):.0f} | {r('gbps'):.2f} x{x('gbps'):.2f} | {r('retransmits'):.0f} "
              f"| {seg} | {hold} | {r('worker_preempted'):.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
