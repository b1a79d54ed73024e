#!/usr/bin/env python3
"""Memory of one big stream: darner vs redis-server, same machine, same run.

Appends N entries (default 1,000,000) of 5 small fields (`f1`..`f5`, values the entry's
numbers) to one stream over one pipelined connection, with ids `<base+i>-0`, then prints each
server's RSS growth, bytes per entry and the ratio darner/redis.

Servers bind 127.0.0.1 on free ports, and both are stopped whatever happens.

Usage: bench/stream_memory.py [--darner $CARGO_TARGET_DIR/release/darner] [--redis redis-server]
                              [--entries 1000000] [--fields 5]
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import free_port, rss_bytes, Server  # noqa: E402
from small_collections import call, encode, read_replies  # noqa: E402

BASE_MS = 1_700_000_000_000


def load(port, entries, fields, batch=5_000):
    import socket
    with socket.create_connection(("127.0.0.1", port)) as s:
        rest = b""
        for start in range(0, entries, batch):
            end = min(entries, start + batch)
            cmds = []
            for i in range(start, end):
                args = [b"XADD", b"stream", b"%d-0" % (BASE_MS + i)]
                for j in range(fields):
                    args += [b"f%d" % (j + 1), b"%d" % (i * fields + j)]
                cmds.append(encode(*args))
            s.sendall(b"".join(cmds))
            # Each reply is a bulk string: two lines.
            rest = read_replies(s, 2 * (end - start), rest)


def main():
    ap = argparse.ArgumentParser()
    tgt = os.environ.get("CARGO_TARGET_DIR", "target")
    ap.add_argument("--darner", default=os.path.join(tgt, "release", "darner"))
    ap.add_argument("--redis", default="redis-server")
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--fields", type=int, default=5)
    args = ap.parse_args()
    ver = subprocess.run([args.redis, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"# darner --threads 1 vs {ver}")
    print(f"# one stream, {args.entries:,} entries of {args.fields} fields f<j> = <number>")
    servers = []
    try:
        dport, rport = free_port(), free_port()
        servers.append(Server("darner", [args.darner, "--port", str(dport), "--bind", "127.0.0.1",
                                         "--save", "", "--threads", "1", "--loglevel", "warning"], dport))
        servers.append(Server("redis", [args.redis, "--port", str(rport), "--bind", "127.0.0.1",
                                        "--save", "", "--appendonly", "no", "--loglevel", "warning"],
                              rport))
        growth = {}
        for s in servers:
            before = rss_bytes(s.proc.pid)
            t0 = time.time()
            load(s.port, args.entries, args.fields)
            took = time.time() - t0
            time.sleep(0.5)
            growth[s.name] = rss_bytes(s.proc.pid) - before
            n = call(s.port, b"XLEN", b"stream").strip().lstrip(b":").decode()
            g = growth[s.name]
            print(f"{s.name:<7} RSS growth {g / 2**20:8.1f} MiB  {g / args.entries:6.1f} bytes/entry  "
                  f"load {took:5.1f} s  XLEN {n}")
        print(f"ratio darner/redis: {growth['darner'] / max(growth['redis'], 1):.2f}")
    finally:
        for s in servers:
            s.stop()


if __name__ == "__main__":
    sys.exit(main())
