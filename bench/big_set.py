#!/usr/bin/env python3
"""Memory of one big set: darner vs redis-server, side by side in one run.

Starts darner (--threads 1) and redis-server on free 127.0.0.1 ports, loads N members of 10
bytes (`m%09d`) into one set over a pipelined connection (SADD with batches of members),
and prints each server's RSS growth, bytes per member and the darner/redis ratio. Servers are
always stopped.

Usage:
    bench/big_set.py [--members 10000000] [--batch 1000] [--darner target/release/darner]
"""
import argparse
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from compare import Server, free_port, rss_bytes  # noqa: E402


def load(port, n, batch, window=20):
    """SADD big m000000000 ... in batches of `batch` members, `window` commands in flight."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        inflight = 0
        pending = b""
        start = 0
        while start < n or inflight:
            buf = bytearray()
            while start < n and inflight < window:
                end = min(n, start + batch)
                buf += b"*%d\r\n$4\r\nSADD\r\n$3\r\nbig\r\n" % (end - start + 2)
                for i in range(start, end):
                    buf += b"$10\r\nm%09d\r\n" % i
                start = end
                inflight += 1
            if buf:
                s.sendall(buf)
            chunk = s.recv(1 << 16)
            if not chunk:
                raise RuntimeError("connection closed while loading")
            pending += chunk
            while b"\r\n" in pending:
                line, pending = pending.split(b"\r\n", 1)
                if not line.startswith(b":"):
                    raise RuntimeError("unexpected reply %r" % line)
                inflight -= 1


def command(port, *args):
    with socket.create_connection(("127.0.0.1", port)) as s:
        req = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            req += b"$%d\r\n%s\r\n" % (len(a), a)
        s.sendall(req)
        time.sleep(0.05)
        return s.recv(1 << 16)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", type=int, default=10_000_000)
    ap.add_argument("--batch", type=int, default=1000)
    here = os.path.dirname(os.path.abspath(__file__))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(here, "..", "target"))
    ap.add_argument("--darner", default=os.path.join(target, "release", "darner"))
    ap.add_argument("--redis", default="redis-server")
    args = ap.parse_args()

    servers = []
    try:
        dport, rport = free_port(), free_port()
        servers.append(Server("darner", [args.darner, "--port", str(dport), "--bind", "127.0.0.1",
                                         "--save", "", "--threads", "1", "--loglevel", "warning"], dport, None))
        servers.append(Server("redis", [args.redis, "--port", str(rport), "--bind", "127.0.0.1",
                                        "--save", "", "--appendonly", "no", "--loglevel", "warning"],
                              rport, None))
        growth = {}
        for s in servers:
            before = rss_bytes(s.proc.pid)
            t = time.time()
            load(s.port, args.members, args.batch)
            secs = time.time() - t
            time.sleep(0.5)
            growth[s.name] = rss_bytes(s.proc.pid) - before
            card = command(s.port, "SCARD", "big").strip()
            enc = command(s.port, "OBJECT", "ENCODING", "big").split(b"\r\n")[1]
            print(f"{s.name:6}: {args.members:,} members of 10 bytes: RSS growth "
                  f"{growth[s.name] / 2**20:8.1f} MiB ({growth[s.name] / args.members:5.1f} B/member), "
                  f"SCARD {card.decode()}, encoding {enc.decode()}, load {secs:.1f} s")
        print(f"ratio darner/redis: {growth['darner'] / max(growth['redis'], 1):.3f}")
    finally:
        for s in servers:
            s.stop()


if __name__ == "__main__":
    main()
