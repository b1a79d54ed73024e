#!/usr/bin/env python3
"""Memory of collections whose elements are big (1 KB to 64 KB): darner vs redis-server.

The other memory benchmarks use small elements (16-byte values, 10-byte members), where
per-element overhead dominates. Real caches also keep big ones: session blobs and JSON
documents in hash fields, queued jobs in lists, rendered fragments in strings. This script
checks that no encoding misbehaves with them (a table that splits on bytes once doubled its
directory for every shared hash bit: 4 GiB for 30,000 fields of 1 KB).

For each case, a fresh darner (`--threads 1`) and a fresh redis-server load the same data over
one pipelined connection; the script prints each server's RSS growth (5 s after the load), the
payload (the bytes of keys, fields and values sent) and the ratio darner/redis. Servers bind 127.0.0.1 on free
ports and are stopped whatever happens.

Usage: bench/big_elements.py [--darner PATH] [--redis redis-server] [--cases hash-1k,...]
"""
import argparse
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import free_port, rss_bytes, stop_process, wait_ready  # noqa: E402

KB = 1024
# Seconds between the end of a load and the RSS reading.
SETTLE = 5.0

# name: (command, keys, elements per key, element size in bytes)
CASES = {
    "hash-1k": ("HSET", 1, 30_000, KB),
    "hash-64k": ("HSET", 1, 500, 64 * KB),
    "hashes-20x200": ("HSET", 5_000, 20, 200),
    "set-1k": ("SADD", 1, 30_000, KB),
    "zset-1k": ("ZADD", 1, 30_000, KB),
    "list-1k": ("RPUSH", 1, 30_000, KB),
    "list-64k": ("RPUSH", 1, 500, 64 * KB),
    "strings-64k": ("SET", 500, 1, 64 * KB),
}


def encode(args):
    out = bytearray(b"*%d\r\n" % len(args))
    for a in args:
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return bytes(out)


def element(i, size):
    # Distinct and incompressible enough: a counter, then filler that varies with it.
    head = b"%010d:" % i
    return head + bytes((i * 7 + j) % 251 for j in range(64)) * (size // 64) + b"x" * (size % 64)


def commands(case):
    cmd, keys, per_key, size = CASES[case]
    payload = 0
    batch = 50 if size >= 16 * KB else 500
    for k in range(keys):
        key = b"big:%s:%06d" % (case.encode(), k)
        for start in range(0, per_key, batch):
            args = [cmd.encode(), key]
            for i in range(start, min(per_key, start + batch)):
                e = element(k * per_key + i, size)[:size]
                if cmd == "HSET":
                    f = b"field:%08d" % i
                    args += [f, e]
                    payload += len(f) + len(e)
                elif cmd == "ZADD":
                    args += [b"%d" % i, e]
                    payload += len(e) + 8
                elif cmd == "SET":
                    args = [b"SET", key, e]
                    payload += len(e)
                else:
                    args.append(e)
                    payload += len(e)
            payload += len(key) if start == 0 else 0
            yield encode(args)
    commands.payload = payload


def load(port, case):
    with socket.create_connection(("127.0.0.1", port)) as s:
        sent = 0
        pending = []
        for c in commands(case):
            pending.append(c)
            if len(pending) == 16:
                s.sendall(b"".join(pending))
                sent += len(pending)
                pending = []
        if pending:
            s.sendall(b"".join(pending))
            sent += len(pending)
        buf = b""
        while buf.count(b"\r\n") < sent:
            chunk = s.recv(1 << 20)
            if not chunk:
                raise RuntimeError("connection closed while loading")
            buf += chunk
        errors = [line for line in buf.split(b"\r\n") if line.startswith(b"-")]
        if errors:
            raise RuntimeError("error reply while loading: %r" % errors[0])
    return commands.payload


def start(name, argv, port):
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(port, proc)
    except Exception:
        stop_process(proc)
        raise
    return proc


def measure(case, darner, redis):
    out = {}
    for name in ("darner", "redis"):
        port = free_port()
        if name == "darner":
            argv = [darner, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--threads", "1",
                    "--loglevel", "warning"]
        else:
            argv = [redis, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no", "--loglevel", "warning"]
        proc = start(name, argv, port)
        try:
            before = rss_bytes(proc.pid)
            t0 = time.time()
            payload = load(port, case)
            took = time.time() - t0
            # Both allocators give freed pages back in the background, within seconds.
            time.sleep(SETTLE)
            out[name] = (rss_bytes(proc.pid) - before, took)
        finally:
            stop_process(proc)
    return payload, out


def main():
    ap = argparse.ArgumentParser()
    tgt = os.environ.get("CARGO_TARGET_DIR", "target")
    ap.add_argument("--darner", default=os.path.join(tgt, "release", "darner"))
    ap.add_argument("--redis", default="redis-server")
    ap.add_argument("--cases", default=",".join(CASES))
    args = ap.parse_args()
    ver = subprocess.run([args.redis, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"# darner --threads 1 vs {ver}; RSS growth after loading, MiB")
    print(f"{'case':<15}{'payload':>9}{'darner':>9}{'redis':>9}{'ratio':>7}"
          f"{'darner load s':>15}{'redis load s':>14}")
    for case in args.cases.split(","):
        payload, m = measure(case, args.darner, args.redis)
        (dg, dt), (rg, rt) = m["darner"], m["redis"]
        print(f"{case:<15}{payload / 2**20:9.1f}{dg / 2**20:9.1f}{rg / 2**20:9.1f}"
              f"{dg / max(rg, 1):7.2f}{dt:15.2f}{rt:14.2f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
