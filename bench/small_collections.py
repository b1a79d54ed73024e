#!/usr/bin/env python3
"""Memory of many small collections: darner vs redis-server, same machine, same run.

Loads N keys (default 1,000,000), each a sorted set (`--type zset`, keys `zset:%08d`) of
--members members (default 10) `member:<j>` with integer scores (`--float-scores`: scores
like 12.25), or a hash (`--type hash`, keys `hash:%08d`) of --members fields `member:<j>`
whose values are the same numbers, over one pipelined connection with one ZADD / HSET per key,
then prints each server's RSS growth, bytes per key and the ratio darner/redis. Also shows
OBJECT ENCODING and the size of a sample key in both servers.

Servers bind 127.0.0.1 on free ports, and both are stopped whatever happens.

Usage: bench/small_collections.py [--type zset|hash] [--darner $CARGO_TARGET_DIR/release/darner]
                                  [--redis redis-server] [--keys 1000000] [--members 10]
                                  [--float-scores] [--random-members]
"""
import argparse
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import free_port, rss_bytes, Server  # noqa: E402


def encode(*args):
    out = bytearray(b"*%d\r\n" % len(args))
    for a in args:
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return bytes(out)


def command_for(kind, i, members, float_scores, random_members=False):
    args = [b"ZADD", b"zset:%08d" % i] if kind == "zset" else [b"HSET", b"hash:%08d" % i]
    for j in range(members):
        score = (j * 10 + i % 7) + (0.25 if float_scores else 0)
        number = repr(score).encode() if float_scores else b"%d" % score
        if random_members:
            # 8 bytes that share no prefix with their neighbours (a worst case for front coding).
            name = b"%08x" % ((i * 2654435761 + j * 40503 * 65537) & 0xFFFFFFFF)
        else:
            name = b"member:%d" % j
        args += [number, name] if kind == "zset" else [name, number]
    return encode(*args)


def read_replies(s, n, buf):
    """Reads n one-line replies (ints or errors); returns the leftover buffer."""
    while True:
        lines = buf.count(b"\r\n")
        if lines >= n:
            break
        chunk = s.recv(1 << 20)
        if not chunk:
            raise RuntimeError("connection closed while loading")
        buf += chunk
    parts = buf.split(b"\r\n")
    for p in parts[:n]:
        if p.startswith(b"-"):
            raise RuntimeError("error reply while loading: %r" % p)
    return b"\r\n".join(parts[n:])


def load(port, kind, keys, members, float_scores, random_members=False, batch=5_000):
    with socket.create_connection(("127.0.0.1", port)) as s:
        rest = b""
        for start in range(0, keys, batch):
            end = min(keys, start + batch)
            s.sendall(b"".join(command_for(kind, i, members, float_scores, random_members)
                               for i in range(start, end)))
            rest = read_replies(s, end - start, rest)


def call(port, *args):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(encode(*args))
        data = b""
        while not data.endswith(b"\r\n"):
            data += s.recv(4096)
        return data


def main():
    ap = argparse.ArgumentParser()
    tgt = os.environ.get("CARGO_TARGET_DIR", "target")
    ap.add_argument("--darner", default=os.path.join(tgt, "release", "darner"))
    ap.add_argument("--redis", default="redis-server")
    ap.add_argument("--type", choices=["zset", "hash"], default="zset")
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--float-scores", action="store_true")
    ap.add_argument("--random-members", action="store_true",
                    help="8-byte hex members without shared prefixes instead of member:<j>")
    args = ap.parse_args()
    ver = subprocess.run([args.redis, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"# darner --threads 1 vs {ver}")
    kind = "x.25" if args.float_scores else "integer"
    names = "random 8-byte hex" if args.random_members else "member:<j>"
    print(f"# {args.keys:,} keys {args.type}:%08d, {args.members} members {names} each, {kind} numbers")
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
            load(s.port, args.type, args.keys, args.members, args.float_scores, args.random_members)
            took = time.time() - t0
            time.sleep(0.5)
            growth[s.name] = rss_bytes(s.proc.pid) - before
            sample = b"%s:%08d" % (args.type.encode(), args.keys // 2)
            enc = call(s.port, b"OBJECT", b"ENCODING", sample).split(b"\r\n")[1]
            size_cmd = b"ZCARD" if args.type == "zset" else b"HLEN"
            card = call(s.port, size_cmd, sample).strip().lstrip(b":")
            g = growth[s.name]
            print(f"{s.name:<7} RSS growth {g / 2**20:8.1f} MiB  {g / args.keys:6.1f} bytes/key  "
                  f"load {took:5.1f} s  sample: encoding {enc.decode()}, size {card.decode()}")
        dg, rg = growth["darner"], growth["redis"]
        print(f"ratio darner/redis: {dg / max(rg, 1):.2f}")
    finally:
        for s in servers:
            s.stop()


if __name__ == "__main__":
    sys.exit(main())
