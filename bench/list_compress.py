#!/usr/bin/env python3
"""Memory of a compressible list with list-compress-depth: darner vs redis-server.

The same list (by default 1,000,000 elements "item:<i mod 1000>:payload-<i mod 7>", the
repetitive shape of a queue of similar jobs or log lines) is loaded into a fresh darner
(`--threads 1`) and a fresh redis-server, each started with the given list-compress-depth
(1 by default: every node but the two end ones LZF-compressed; 0 for the uncompressed
baseline), over one pipelined connection. The script prints each server's RSS growth
(SETTLE seconds after the load), the payload and the ratio darner/redis, then checks that
both servers return the same LRANGE over the middle of the list. Servers bind 127.0.0.1 on
free ports and are stopped whatever happens.

Usage: bench/list_compress.py [--darner PATH] [--redis redis-server] [--n 1000000]
                              [--depths 0,1]
"""
import argparse
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import free_port, rss_bytes, stop_process, wait_ready  # noqa: E402

SETTLE = 3.0
BATCH = 1000


def encode(args):
    out = bytearray(b"*%d\r\n" % len(args))
    for a in args:
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return bytes(out)


def element(i):
    return b"item:%d:payload-%d" % (i % 1000, i % 7)


def roundtrips(s, reqs):
    """Sends the requests and reads one reply line per request (integer or status)."""
    s.sendall(b"".join(reqs))
    buf = b""
    while buf.count(b"\r\n") < len(reqs):
        chunk = s.recv(1 << 20)
        if not chunk:
            raise RuntimeError("connection closed")
        buf += chunk
    if b"-" in [line[:1] for line in buf.split(b"\r\n")]:
        raise RuntimeError("error reply: %r" % buf[:200])


def load(port, n):
    payload = 0
    with socket.create_connection(("127.0.0.1", port)) as s:
        pending = []
        for start in range(0, n, BATCH):
            args = [b"RPUSH", b"queue"]
            for i in range(start, min(n, start + BATCH)):
                e = element(i)
                args.append(e)
                payload += len(e)
            pending.append(encode(args))
            if len(pending) == 16:
                roundtrips(s, pending)
                pending = []
        if pending:
            roundtrips(s, pending)
    return payload


def lrange(port, a, b):
    import redis  # the tests' client library (tests/requirements.txt)
    return redis.Redis(port=port).lrange("queue", a, b)


def measure(name, argv, port, n):
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(port, proc)
        before = rss_bytes(proc.pid)
        t0 = time.time()
        payload = load(port, n)
        took = time.time() - t0
        time.sleep(SETTLE)
        grown = rss_bytes(proc.pid) - before
        middle = lrange(port, n // 2, n // 2 + 99)
        return payload, grown, took, middle
    finally:
        stop_process(proc)


def main():
    ap = argparse.ArgumentParser()
    tgt = os.environ.get("CARGO_TARGET_DIR", "target")
    ap.add_argument("--darner", default=os.path.join(tgt, "release", "darner"))
    ap.add_argument("--redis", default="redis-server")
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--depths", default="0,1")
    args = ap.parse_args()
    ver = subprocess.run([args.redis, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"# darner --threads 1 vs {ver}; {args.n} elements; RSS growth after loading, MiB")
    print(f"{'depth':<7}{'payload':>9}{'darner':>9}{'redis':>9}{'ratio':>7}"
          f"{'darner load s':>15}{'redis load s':>14}")
    for depth in args.depths.split(","):
        res = {}
        for name in ("darner", "redis"):
            port = free_port()
            if name == "darner":
                argv = [args.darner, "--save", "", "--threads", "1"]
            else:
                argv = [args.redis, "--save", "", "--appendonly", "no"]
            argv += ["--port", str(port), "--bind", "127.0.0.1", "--loglevel", "warning",
                     "--list-compress-depth", depth]
            res[name] = measure(name, argv, port, args.n)
        (payload, dg, dt, dm), (_, rg, rt, rm) = res["darner"], res["redis"]
        if dm != rm:
            raise SystemExit("LRANGE differs between the servers")
        print(f"{depth:<7}{payload / 2**20:9.1f}{dg / 2**20:9.1f}{rg / 2**20:9.1f}"
              f"{dg / max(rg, 1):7.2f}{dt:15.2f}{rt:14.2f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
