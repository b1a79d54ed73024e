#!/usr/bin/env python3
"""Memory of one big hash: darner vs redis-server, side by side in one run.

Loads N fields (default 10,000,000) into ONE hash: field = a UUIDv4 text (36 bytes), value = 16
bytes, with `HSET key field value` sent over one pipelined connection in batches. The same
fields (from a fixed seed) go to both servers. Prints each server's RSS growth (after load minus
before), bytes per field, the load time, and the ratio darner/redis.

Servers bind 127.0.0.1 on free ports (darner with --threads 1) and are always stopped.
Usage: bench/big_hash.py [--fields 10000000] [--only darner|redis] [--darner target/release/darner] [--redis redis-server]
"""
import argparse
import os
import random
import socket
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(__file__))
from compare import Server, free_port, rss_bytes  # noqa: E402

BATCH = 10_000
KEY = b"bighash"


def batches(n, seed=1):
    rng = random.Random(seed)
    value = b"v" * 16
    head = b"*4\r\n$4\r\nHSET\r\n$%d\r\n%s\r\n$36\r\n" % (len(KEY), KEY)
    tail = b"\r\n$16\r\n" + value + b"\r\n"
    for start in range(0, n, BATCH):
        count = min(BATCH, n - start)
        buf = bytearray()
        for _ in range(count):
            f = str(uuid.UUID(int=rng.getrandbits(128), version=4)).encode()
            buf += head + f + tail
        yield count, bytes(buf)


def load(port, n):
    """Sends the HSETs, reading the replies of one batch while the next is written."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        pending = 0
        buf = b""
        for count, payload in batches(n):
            s.sendall(payload)
            pending += count
            # Keep at most one batch in flight: read until the previous batches are answered.
            while pending > count:
                buf += s.recv(1 << 20)
                lines = buf.count(b"\r\n")
                if lines:
                    cut = buf.rfind(b"\r\n") + 2
                    if not buf.startswith(b":"):
                        raise RuntimeError("unexpected reply: %r" % buf[:100])
                    pending -= lines
                    buf = buf[cut:]
        while pending > 0:
            buf += s.recv(1 << 20)
            lines = buf.count(b"\r\n")
            if lines:
                pending -= lines
                buf = buf[buf.rfind(b"\r\n") + 2:]
        s.sendall(b"*2\r\n$4\r\nHLEN\r\n$%d\r\n%s\r\n" % (len(KEY), KEY))
        reply = s.recv(64)
        return int(reply[1:].split(b"\r\n")[0])


def measure(server, n):
    time.sleep(0.5)
    before = rss_bytes(server.proc.pid)
    t0 = time.time()
    hlen = load(server.port, n)
    elapsed = time.time() - t0
    time.sleep(1.0)
    after = rss_bytes(server.proc.pid)
    if hlen != n:
        raise RuntimeError(f"{server.name}: HLEN {hlen}, expected {n} (a UUID collision?)")
    return after - before, elapsed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fields", type=int, default=10_000_000)
    here = os.path.dirname(os.path.abspath(__file__))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(here, "..", "target"))
    ap.add_argument("--darner", default=os.path.join(target, "release", "darner"))
    ap.add_argument("--redis", default="redis-server")
    ap.add_argument("--only", choices=["darner", "redis"], help="measure one server only")
    args = ap.parse_args()

    results = {}
    for name in [args.only] if args.only else ["darner", "redis"]:
        port = free_port()
        if name == "darner":
            argv = [args.darner, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--threads", "1",
                    "--loglevel", "warning"]
        else:
            argv = [args.redis, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no", "--loglevel", "warning"]
        server = Server(name, argv, port, None)
        try:
            grow, secs = measure(server, args.fields)
        finally:
            server.stop()
        results[name] = grow
        print(f"{name:7s} RSS growth {grow / 2**20:9.1f} MiB  {grow / args.fields:6.1f} bytes/field"
              f"  load {secs:6.1f} s ({args.fields / secs / 1e3:.0f} k HSET/s)", flush=True)
    if len(results) == 2:
        print(f"ratio darner/redis: {results['darner'] / results['redis']:.3f}  ({args.fields} fields, "
              f"36-byte UUIDv4 -> 16-byte value)")


if __name__ == "__main__":
    main()
