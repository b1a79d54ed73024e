#!/usr/bin/env python3
"""Eviction under a cache workload: darner vs redis-server, same machine, same run.

The workload is a look-aside cache: GET a key drawn from a Zipf distribution (exponent
--zipf, 0.99 by default: key:0 is the most popular) over --keys keys, and SET it when the GET
missed. The key space holds about ten times what fits in --maxmemory. Each (server, policy)
case starts a fresh server with that maxmemory and policy, runs the workload --warmup
seconds to fill the cache, then --seconds measured, and prints:

  hit ratio     GET hits / GETs over the measured part
  ops/s         GETs and SETs per second over the measured part (the Python driver, one
                process per --clients, is the bottleneck on a small machine: compare the
                two servers, not the absolute figure)
  RSS/max       the server's resident memory at the end over maxmemory, and
  (RSS-empty)/max  the same without the empty server's RSS (measured right after start)
  used_memory   INFO's used_memory at the end, and evicted_keys

The targets: darner's hit ratio at least Redis's for each policy, and darner's RSS at most
1.05 x maxmemory plus the empty server's RSS.

Servers bind 127.0.0.1 on free ports, every phase is bounded in time, and each server is
stopped whatever happens. The driver processes draw their own keys (numpy) and speak RESP
over a raw socket, --batch GETs pipelined, then the SETs of that batch's misses pipelined.

--maxmemory takes a comma-separated list (e.g. 16mb,64mb,512mb) to sweep budgets: every case
runs for each, and the summary has one line per budget and policy (the key space, unless
--keys is given, is ten times what fits in each).

Usage: bench/eviction.py [--darner target/release/darner] [--redis redis-server]
                         [--threads 2] [--maxmemory 64mb[,...]] [--keys N] [--value-size 100]
                         [--policies allkeys-lru,allkeys-lfu] [--warmup 10] [--seconds 10]
                         [--clients 2] [--batch 64]
"""
import argparse
import multiprocessing as mp
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import free_port, rss_bytes, machine_line, Server  # noqa: E402


def memtoull(s):
    s = s.lower()
    for unit, mul in (("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10), ("g", 10**9),
                      ("m", 10**6), ("k", 1000), ("b", 1)):
        if s.endswith(unit):
            return int(s[: -len(unit)]) * mul
    return int(s)


def read_line(sock, buf):
    while b"\r\n" not in buf[0]:
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("server closed the connection")
        buf[0] += chunk
    line, rest = buf[0].split(b"\r\n", 1)
    buf[0] = rest
    return line


def read_bulk_hit(sock, buf):
    """Reads one reply to GET: True for a value, False for nil."""
    line = read_line(sock, buf)
    if line[:1] != b"$":
        raise RuntimeError("unexpected reply %r" % line[:80])
    n = int(line[1:])
    if n < 0:
        return False
    while len(buf[0]) < n + 2:
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("server closed the connection")
        buf[0] += chunk
    buf[0] = buf[0][n + 2:]
    return True


def driver(port, keys, zipf, value_size, batch, seed, phases, out):
    """Runs the workload; for each (name, seconds) phase puts (name, gets, hits, sets, secs)."""
    import numpy as np
    ranks = np.arange(1, keys + 1, dtype=np.float64)
    cdf = np.cumsum(ranks ** -zipf)
    cdf /= cdf[-1]
    rng = np.random.default_rng(seed)
    value = b"v" * value_size
    set_tail = b"\r\n$%d\r\n%s\r\n" % (value_size, value)
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = [b""]
    for name, seconds in phases:
        gets = hits = sets = 0
        start = time.monotonic()
        end = start + seconds
        while time.monotonic() < end:
            idx = np.searchsorted(cdf, rng.random(batch))
            names = [b"key:%d" % i for i in idx.tolist()]
            sock.sendall(b"".join(b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(k), k) for k in names))
            missed = [k for k in names if not read_bulk_hit(sock, buf)]
            gets += len(names)
            hits += len(names) - len(missed)
            if missed:
                sock.sendall(b"".join(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s%s" % (len(k), k, set_tail)
                                      for k in missed))
                for _ in missed:
                    line = read_line(sock, buf)
                    if line != b"+OK":
                        raise RuntimeError("SET answered %r" % line[:120])
                sets += len(missed)
        out.put((name, gets, hits, sets, time.monotonic() - start))
    sock.close()


def info(port):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"INFO\r\n")
        buf = [b""]
        n = int(read_line(s, buf)[1:])
        while len(buf[0]) < n:
            buf[0] += s.recv(1 << 16)
        text = buf[0][:n].decode()
    return dict(l.split(":", 1) for l in text.split("\r\n") if ":" in l)


def run_case(args, name, argv, port, policy):
    srv = Server(name, argv, port)
    try:
        time.sleep(0.3)
        empty_rss = rss_bytes(srv.proc.pid)
        out = mp.Queue()
        phases = [("warmup", args.warmup), ("measure", args.seconds)]
        procs = [mp.Process(target=driver, args=(port, args.keys, args.zipf, args.value_size,
                                                 args.batch, 1000 + i, phases, out))
                 for i in range(args.clients)]
        for p in procs:
            p.start()
        results = [out.get(timeout=args.warmup + args.seconds + 120) for _ in range(2 * args.clients)]
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.terminate()
        m = [r for r in results if r[0] == "measure"]
        gets = sum(r[1] for r in m)
        hits = sum(r[2] for r in m)
        sets = sum(r[3] for r in m)
        secs = max(r[4] for r in m)
        rss = rss_bytes(srv.proc.pid)
        i = info(port)
        return {
            "server": name, "policy": policy,
            "hit": hits / max(gets, 1), "ops": (gets + sets) / secs,
            "rss": rss, "empty": empty_rss,
            "used": int(i.get("used_memory", 0)), "evicted": int(i.get("evicted_keys", 0)),
            "keys": sum(int(v.split("keys=")[1].split(",")[0]) for k, v in i.items()
                        if k.startswith("db") and "keys=" in v),
        }
    finally:
        srv.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--darner", default="target/release/darner")
    ap.add_argument("--redis", default="redis-server")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--maxmemory", default="64mb",
                    help="a budget, or a comma-separated list of budgets to sweep")
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--keys", type=int, default=0,
                    help="key space (default: about 10x what fits, from ~170 bytes a key)")
    ap.add_argument("--zipf", type=float, default=0.99)
    ap.add_argument("--policies", default="allkeys-lru,allkeys-lfu")
    ap.add_argument("--warmup", type=float, default=10)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    print(machine_line())
    budgets = [b.strip() for b in args.maxmemory.split(",") if b.strip()]
    rows = []
    for budget in budgets:
        rows += run_budget(args, budget)
    print()
    print("maxmemory  policy        hit ratio darner/redis   ops/s darner/redis   "
          "darner RSS <= 1.05 max + empty")
    for budget, maxmemory, policy, d, x in rows:
        ok = d["rss"] <= 1.05 * maxmemory + d["empty"]
        print(f"{budget:<10} {policy:<13} {d['hit']:.4f} / {x['hit']:.4f} ({d['hit'] - x['hit']:+.4f})   "
              f"{d['ops'] / max(x['ops'], 1):.2f}x              {'yes' if ok else 'no'} "
              f"({(d['rss'] - d['empty']) / maxmemory:.3f} x max)")


def run_budget(args, budget):
    """Runs every policy on both servers with one maxmemory; returns the summary rows."""
    maxmemory = memtoull(budget)
    keys = args.keys or 10 * maxmemory // (args.value_size + 70)
    print(f"maxmemory {budget} ({maxmemory} bytes), {keys} keys, zipf {args.zipf}, "
          f"values {args.value_size} bytes, {args.clients} clients x {args.batch} pipelined, "
          f"warmup {args.warmup}s, measured {args.seconds}s, darner --threads {args.threads}")
    case_args = argparse.Namespace(**{**vars(args), "keys": keys})
    rows = []
    for policy in args.policies.split(","):
        got = {}
        for name in ("darner", "redis"):
            port = free_port()
            common = ["--port", str(port), "--bind", "127.0.0.1", "--maxmemory", str(maxmemory),
                      "--maxmemory-policy", policy, "--loglevel", "warning"]
            if name == "darner":
                argv = [args.darner, "--save", "", "--threads", str(args.threads)] + common
            else:
                argv = [args.redis, "--save", "", "--appendonly", "no"] + common
            r = got[name] = run_case(case_args, name, argv, port, policy)
            print(f"{r['policy']:<12} {r['server']:<7} hit {r['hit']:.4f}  {r['ops']:>9.0f} ops/s  "
                  f"RSS {r['rss'] / 2**20:7.1f} MiB = {r['rss'] / maxmemory:.3f} x max, "
                  f"(empty {r['empty'] / 2**20:.1f} MiB) RSS-empty = {(r['rss'] - r['empty']) / maxmemory:.3f} x max  "
                  f"used_memory {r['used'] / 2**20:.1f} MiB  keys {r['keys']}  evicted {r['evicted']}",
                  flush=True)
        rows.append((budget, maxmemory, policy, got["darner"], got["redis"]))
    return rows


if __name__ == "__main__":
    main()
