#!/usr/bin/env python3
"""The datapath's rate while its metrics endpoint is abused, against the
same run left alone, pairs interleaved.

  scripts/metrics-abuse.py [--grorx BIN] [--pairs N] [--seconds S] [--port SPEC]

Each pair runs `grorx sink --port net_null0 --metrics 127.0.0.1:P` twice for
S seconds (the order alternating): once untouched, once with 8 clients
scraping /metrics in a loop and 3000 idle connections held open. The worker
has CPU 1 to itself (grorx's default); the main lcore, the metrics thread
and the clients (pinned there: they stand for other hosts) share CPU 0. Prints each run's rate, the ratio of the
medians (abused / alone), and the scrapes the clients got. Standard library
only; raises its own descriptor limit for the idle connections.
"""
import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ALL_CPUS = os.sched_getaffinity(0)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def scrape(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
    n = 0
    while True:
        b = s.recv(65536)
        if not b:
            break
        n += len(b)
    s.close()
    return n


def run(grorx, port_spec, seconds, abuse, name):
    """One run: its rate (median of the 1 s intervals while the clients
    worked, or over the same stretch untouched), scrapes, idle connections."""
    mport = free_port()
    p = subprocess.Popen([grorx, "sink", "--port", port_spec, "--json-interval", "1", "-q",
                          "--name", name, "--metrics", f"127.0.0.1:{mport}"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         # grorx places its lcores on the CPUs it may use: all of them.
                         preexec_fn=lambda: os.sched_setaffinity(0, ALL_CPUS))
    stop, scrapes, idle, errors = threading.Event(), [0], [], {}

    def loop():
        while not stop.is_set():
            try:
                if scrape(mport) > 0:
                    scrapes[0] += 1
            except OSError as e:
                errors[str(e)] = errors.get(str(e), 0) + 1

    try:
        end = time.monotonic() + 15
        while True:
            try:
                scrape(mport)
                break
            except OSError:
                if time.monotonic() > end:
                    raise SystemExit(f"no metrics from grorx: {p.stderr.read() if p.poll() is not None else ''}")
                time.sleep(0.1)
        t0 = time.monotonic()
        if abuse:
            for _ in range(3000):
                try:
                    idle.append(socket.create_connection(("127.0.0.1", mport), timeout=1))
                except OSError:
                    pass
            threads = [threading.Thread(target=loop, daemon=True) for _ in range(8)]
            for t in threads:
                t.start()
        start = time.monotonic() - t0
        time.sleep(seconds)
        stop.set()
    finally:
        p.send_signal(2)
        out, err = p.communicate(timeout=60)
        for s in idle:
            s.close()
    if p.returncode != 0:
        raise SystemExit(f"grorx failed ({p.returncode}): {err[-2000:]}")
    objs = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
    # The intervals that ended inside the window, one second in.
    first = objs[0]["elapsed_s"] if objs else 0
    window = [o["rx_pps"] for o in objs
              if o["type"] == "interval" and start + 1.5 <= o["elapsed_s"] - first <= start + seconds]
    if errors:
        print(f"  scrape errors: {errors}", flush=True)
    return statistics.median(window), scrapes[0], len(idle)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grorx", default=os.path.join(HERE, "..", "target", "release", "grorx"))
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--seconds", type=int, default=8, help="the clients' time in each run")
    ap.add_argument("--port", default="net_null0")
    a = ap.parse_args()
    # The clients stay off the worker's CPU: they stand for other hosts.
    os.sched_setaffinity(0, {0})
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 8192), max(hard, 8192)))
    alone, abused = [], []
    for i in range(a.pairs):
        for abuse in ((False, True) if i % 2 == 0 else (True, False)):
            pps, n, idle = run(a.grorx, a.port, a.seconds, abuse, f"abuse-{os.getpid()}-{i}")
            (abused if abuse else alone).append(pps)
            what = f"abused ({n} scrapes, {idle} idle connections)" if abuse else "alone"
            print(f"pair {i}: {pps / 1e6:.2f} Mpps {what}", flush=True)
    ratio = statistics.median(abused) / statistics.median(alone)
    print(f"median abused / alone: {ratio:.3f} ({statistics.median(abused) / 1e6:.2f} / "
          f"{statistics.median(alone) / 1e6:.2f} Mpps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
