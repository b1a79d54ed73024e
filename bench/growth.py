#!/usr/bin/env python3
"""GET latency while the keyspace grows: darner vs redis-server, side by side in one run.

A loader process fills each server with N keys (`key:%010d` -> 16 bytes, pipelined), while a
prober process sends unpipelined GETs on one connection and records each round trip. The server
is pinned to core 0, loader and prober to core 1. For every
window of N/10 keys loaded it prints the prober's p50 / p99 / p99.9 / max, for darner and for
redis. A table that grows by rehashing everything at once shows up as a max / p99.9 spike at the
window where it doubles; darner's segmented table (and redis's incremental rehash) stay flat.

Servers bind 127.0.0.1 on free ports and are always stopped. Usage:
    bench/growth.py [--keys 10000000] [--darner target/release/darner] [--threads 1]
"""
import argparse
import multiprocessing as mp
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from compare import Server, free_port  # noqa: E402


def pin_to_load_core():
    # The server runs on core 0; loader and prober share core 1 (when there are two).
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})


def loader(port, n, windows, q):
    pin_to_load_core()
    batch = 10_000
    value = b"v" * 16
    per = n // windows
    with socket.create_connection(("127.0.0.1", port)) as s:
        for start in range(0, n, batch):
            end = min(n, start + batch)
            buf = bytearray()
            for i in range(start, end):
                k = b"key:%010d" % i
                buf += b"*3\r\n$3\r\nSET\r\n$14\r\n%s\r\n$16\r\n%s\r\n" % (k, value)
            s.sendall(buf)
            want, got = 5 * (end - start), 0
            while got < want:
                got += len(s.recv(1 << 20))
            if end % per == 0:
                q.put(end)
    q.put(None)


def prober(port, q_in, q_out):
    pin_to_load_core()
    lat = []
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        req = b"*2\r\n$3\r\nGET\r\n$14\r\nkey:0000000000\r\n"
        while True:
            t = time.perf_counter_ns()
            s.sendall(req)
            s.recv(256)
            lat.append(time.perf_counter_ns() - t)
            while not q_in.empty():
                m = q_in.get()
                q_out.put((m, lat))
                lat = []
                if m is None:
                    return


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))] / 1000 if xs else 0.0


def run(server, n, windows):
    q_load, q_res = mp.Queue(), mp.Queue()
    pr = mp.Process(target=prober, args=(server.port, q_load, q_res))
    pr.start()
    ld = mp.Process(target=loader, args=(server.port, n, windows, q_load))
    ld.start()
    rows = []
    while True:
        m, lat = q_res.get(timeout=600)
        if m is None:
            break
        rows.append((m, pct(lat, 0.5), pct(lat, 0.99), pct(lat, 0.999), max(lat) / 1000 if lat else 0.0))
    ld.join()
    pr.join()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--darner", default="target/release/darner")
    ap.add_argument("--redis", default="redis-server")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--keys", type=int, default=10_000_000)
    ap.add_argument("--windows", type=int, default=10)
    args = ap.parse_args()
    results = {}
    for name in ("darner", "redis"):
        port = free_port()
        if name == "darner":
            argv = [args.darner, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                    "--threads", str(args.threads)]
        else:
            argv = [args.redis, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        srv = Server(name, argv, port, 0 if (os.cpu_count() or 1) > 1 else None)
        try:
            results[name] = run(srv, args.keys, args.windows)
        finally:
            srv.stop()
    print(f"GET latency (us) while loading {args.keys:,} keys; darner --threads {args.threads}")
    print(f"{'keys':>12} | {'darner p50':>10} {'p99':>7} {'p99.9':>7} {'max':>8} | {'redis p50':>9} {'p99':>7} {'p99.9':>7} {'max':>8}")
    for d, r in zip(results["darner"], results["redis"]):
        print(f"{d[0]:>12,} | {d[1]:>10.0f} {d[2]:>7.0f} {d[3]:>7.0f} {d[4]:>8.0f} | {r[1]:>9.0f} {r[2]:>7.0f} {r[3]:>7.0f} {r[4]:>8.0f}")


if __name__ == "__main__":
    sys.exit(main())
