#!/usr/bin/env python3
"""Traffic ends for live tests, run inside the namespaces (stdlib only).

  traffic.py bulk-serve IP PORT            one TCP connection, both ways at once
  traffic.py bulk IP PORT UP DOWN          client: sends UP bytes, takes DOWN bytes
  traffic.py udp-serve IP PORT COUNT SIZE  UDP both ways: echoes a stream of its own
  traffic.py udp IP PORT COUNT SIZE        client: COUNT datagrams of SIZE each way
  traffic.py connect IP PORT SECS          whether a TCP connection opens within SECS

Each end prints one JSON object: what it sent and what it received, with the
SHA-256 of each byte stream, so the caller holds each direction end to end
(the sender's `sent_sha256` against the receiver's `recv_sha256`). TCP data
is random; UDP datagrams carry their sequence number and a payload derived
from it, checked on arrival (corrupt, duplicate, missing counted), and go out
16 at a time through UDP GSO so that they reach the forwarder in bursts.
"""
import hashlib
import json
import os
import socket
import struct
import sys
import threading
import time

CHUNK = 256 << 10
TIMEOUT = 60
UDP_SEGMENT = 103  # SOL_UDP option: one send, many datagrams (Linux UDP GSO)
UDP_BURST = 16
UDP_IDLE = 3.0


def send_random(sock, n, out):
    h, left = hashlib.sha256(), n
    while left:
        buf = os.urandom(min(CHUNK, left))
        sock.sendall(buf)
        h.update(buf)
        left -= len(buf)
    sock.shutdown(socket.SHUT_WR)
    out.update(sent_bytes=n, sent_sha256=h.hexdigest())


def recv_all(sock, n, out):
    h, got = hashlib.sha256(), 0
    while got < n:
        buf = sock.recv(min(CHUNK, n - got))
        if not buf:
            break
        h.update(buf)
        got += len(buf)
    out.update(recv_bytes=got, recv_sha256=h.hexdigest())


def both_ways(sock, up, down):
    """Sends `up` bytes while taking `down`; returns what each side did."""
    out, t0 = {}, time.monotonic()
    tx = threading.Thread(target=send_random, args=(sock, up, out))
    tx.start()
    recv_all(sock, down, out)
    tx.join()
    out["seconds"] = round(time.monotonic() - t0, 3)
    return out


def bulk_serve(ip, port):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((ip, int(port)))
    ls.listen(1)
    ls.settimeout(TIMEOUT)
    print(json.dumps({"listening": True}), flush=True)
    s, _ = ls.accept()
    s.settimeout(TIMEOUT)
    up, down = struct.unpack("!QQ", recv_exact(s, 16))
    print(json.dumps(both_ways(s, down, up)), flush=True)


def bulk(ip, port, up, down):
    # A forwarder that has just started may take the first SYN or two.
    s = socket.create_connection((ip, int(port)), timeout=TIMEOUT)
    s.sendall(struct.pack("!QQ", int(up), int(down)))
    print(json.dumps(both_ways(s, int(up), int(down))), flush=True)


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        part = s.recv(n - len(b))
        if not part:
            raise SystemExit("peer closed early")
        b += part
    return b


# UDP: datagram = seq (8 B) + PATTERN[seq % 4096 ...], so a payload is checked
# without keeping what was sent.
PATTERN = hashlib.shake_256(b"grorx live udp").digest(4096 + 65536)


def datagram(seq, size):
    off = (seq * 97) % 4096
    return struct.pack("!Q", seq) + PATTERN[off:off + size - 8]


def udp_send(sock, addr, count, size, out):
    sock.setsockopt(socket.SOL_UDP, UDP_SEGMENT, size)
    h = hashlib.sha256()
    for first in range(0, count, UDP_BURST):
        burst = b"".join(datagram(s, size) for s in range(first, min(first + UDP_BURST, count)))
        h.update(burst)
        sock.sendto(burst, addr)
        time.sleep(0.001)
    out.update(sent_datagrams=count, sent_bytes=count * size, sent_sha256=h.hexdigest())


def udp_recv(sock, count, size, out):
    """Takes datagrams until `count` arrived or none came for UDP_IDLE s;
    the digest is over the datagrams in sequence order."""
    seen, corrupt, dup = {}, 0, 0
    sock.settimeout(UDP_IDLE)
    while len(seen) < count:
        try:
            d = sock.recv(65536)
        except socket.timeout:
            break
        if d in (b"hello", b"go"):
            continue  # the handshake, sent again while the far end started
        seq = struct.unpack("!Q", d[:8])[0] if len(d) >= 8 else -1
        if len(d) != size or seq >= count or d != datagram(seq, size):
            corrupt += 1
        elif seq in seen:
            dup += 1
        else:
            seen[seq] = d
    h = hashlib.sha256()
    for s in sorted(seen):
        h.update(seen[s])
    out.update(recv_datagrams=len(seen), recv_bytes=len(seen) * size, recv_sha256=h.hexdigest(),
               corrupt=corrupt, duplicates=dup, missing=count - len(seen))


def udp_socket(ip, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind((ip, int(port)))
    return s


def udp_both(sock, addr, count, size, out):
    tx = threading.Thread(target=udp_send, args=(sock, addr, count, size, out))
    tx.start()
    udp_recv(sock, count, size, out)
    tx.join()
    print(json.dumps(out), flush=True)


def udp_serve(ip, port, count, size):
    s = udp_socket(ip, port)
    print(json.dumps({"listening": True}), flush=True)
    s.settimeout(TIMEOUT)
    hello, addr = s.recvfrom(64)
    if hello != b"hello":
        raise SystemExit("udp-serve: expected hello")
    s.sendto(b"go", addr)
    udp_both(s, addr, int(count), int(size), {})


def udp(ip, port, count, size):
    s = udp_socket("0.0.0.0", 0)
    s.settimeout(1.0)
    for _ in range(10):
        s.sendto(b"hello", (ip, int(port)))
        try:
            if s.recv(64) == b"go":
                break
        except socket.timeout:
            continue
    else:
        raise SystemExit("udp: no answer from the server")
    udp_both(s, (ip, int(port)), int(count), int(size), {})


def connect(ip, port, secs):
    try:
        socket.create_connection((ip, int(port)), timeout=float(secs)).close()
        ok = True
    except OSError:
        ok = False
    print(json.dumps({"connected": ok}), flush=True)


def main(argv):
    cmds = {"bulk-serve": bulk_serve, "bulk": bulk, "udp-serve": udp_serve, "udp": udp,
            "connect": connect}
    if len(argv) < 2 or argv[1] not in cmds or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) > 1 and argv[1] in ("-h", "--help") else 2
    cmds[argv[1]](*argv[2:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
