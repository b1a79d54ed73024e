#!/usr/bin/env python3
"""Replication: darner vs redis-server, same machine, same run (issue 15).

Each case runs with a primary and its replicas of one kind (darner -> darner, redis ->
redis), every server fresh in a temp dir of its own:

  full sync    seconds from REPLICAOF on an empty replica until its link is up and its offset
               equals the primary's, the primary holding --keys string keys of --value-size
               bytes. Disk-based for both (the snapshot written to a file, then sent:
               repl-diskless-sync no); --redis-diskless / --darner-diskless add rows for the
               diskless sync (delay 0), received to disk and loaded from the socket
               (repl-diskless-load on-empty-db). --sync-only: only this case.
  throughput   redis-benchmark SET (-c 50 -P 16, 16-byte values, 1,000,000-key space,
               --requests) on the primary with 0, 1 and 2 replicas attached: ops/s, and the
               ratio to no replica.
  lag          while redis-benchmark loads the primary (one replica attached), a writer sets
               key `lag` to its clock (ns) every millisecond and a reader polls the replica:
               each new value's age when the reader sees it (p50 / p99 / max ms, for
               --lag-seconds). On a small machine the reader, the writer, the benchmark and the
               servers share the cores: compare the two kinds, not the absolute figures.

Targets (issue 15): full sync at most 0.8x Redis's; primary throughput with one and with two
replicas at least 0.9x of none (the ratio to Redis's printed); lag printed for both.

Servers bind 127.0.0.1 on free ports, every wait is bounded, and every server is stopped
whatever happens.

Usage: bench/replication.py [--darner target/release/darner] [--redis redis-server]
                            [--threads 2] [--replica-threads 1] [--keys 1000000]
                            [--value-size 1024] [--requests 1000000] [--lag-seconds 5]
                            [--servers darner,redis] [--redis-diskless]
                            [--darner-diskless] [--sync-only]
"""
import argparse
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import Server, free_port, machine_line  # noqa: E402
from persistence import Conn, info, load_dataset  # noqa: E402


class Node:
    """A server of `kind` in a temp dir of its own."""

    def __init__(self, kind, args, extra):
        self.dir = tempfile.mkdtemp(prefix="repl-bench-%s-" % kind)
        self.port = free_port()
        common = ["--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
                  "--save", "", "--appendonly", "no", "--logfile",
                  os.path.join(self.dir, "server.log")]
        repl = ["--repl-diskless-sync", "yes" if extra.diskless else "no",
                "--repl-diskless-sync-delay", "0",
                "--repl-diskless-load", "on-empty-db" if extra.load else "disabled"]
        if kind == "darner":
            argv = [args.darner, "--threads", str(extra.threads)] + common + repl
        else:
            argv = [args.redis] + common + repl
        try:
            self.srv = Server(kind, argv, self.port)
        except Exception:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        self.c = Conn(self.port, timeout=600)

    def stop(self):
        self.srv.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class Opts:
    """A node's options: darner's `threads`, a primary's `diskless` sync, a replica's
    diskless `load`."""

    def __init__(self, threads=1, diskless=False, load=False):
        self.threads, self.diskless, self.load = threads, diskless, load


def offset_of(c):
    return int(info(c, "replication").get("master_repl_offset", "-1"))


def wait_synced(primary, replica, timeout=600):
    """Polls until the replica's link is up and it applied everything the primary sent."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = info(replica.c, "replication")
        if (r.get("master_link_status") == "up" and r.get("master_sync_in_progress") == "0"
                and int(r.get("slave_repl_offset", "-2")) == offset_of(primary.c)):
            return
        time.sleep(0.02)
    raise RuntimeError("the replica did not catch up within %d s" % timeout)


def attach(primary, replica):
    replica.c.call("REPLICAOF", "127.0.0.1", primary.port)
    wait_synced(primary, replica)


def full_sync(kind, args, diskless=False, load=False):
    primary = Node(kind, args, Opts(threads=args.threads, diskless=diskless))
    replica = None
    try:
        load_dataset(primary.port, args.keys, args.value_size, 0)
        replica = Node(kind, args, Opts(threads=args.replica_threads, load=load))
        t = time.perf_counter()
        attach(primary, replica)
        return time.perf_counter() - t
    finally:
        for n in (replica, primary):
            if n is not None:
                n.stop()


def bench_set(port, requests):
    cmd = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", "50", "-n",
           str(requests), "-r", "1000000", "-d", "16", "-t", "set", "-P", "16", "--csv", "-q"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600).stdout
    for line in out.splitlines():
        parts = [p.strip('"') for p in line.split(",")]
        if len(parts) >= 2 and parts[0].upper().startswith("SET"):
            return float(parts[1])
    raise RuntimeError("no figure from redis-benchmark: %r" % out)


def throughput(kind, args, replicas):
    primary = Node(kind, args, Opts(threads=args.threads))
    nodes = []
    try:
        for _ in range(replicas):
            r = Node(kind, args, Opts(threads=args.replica_threads))
            nodes.append(r)
            attach(primary, r)
        return bench_set(primary.port, args.requests)
    finally:
        for n in nodes + [primary]:
            n.stop()


def lag_writer(port, stop):
    c = Conn(port)
    while not stop.is_set():
        c.call("SET", "lag", str(time.time_ns()))
        time.sleep(0.001)


def lag_reader(port, stop, out):
    c = Conn(port)
    seen = None
    lags = []
    while not stop.is_set():
        v = c.call("GET", "lag")
        now = time.time_ns()
        if v is not None and v != seen:
            seen = v
            lags.append((now - int(v)) / 1e6)
    out.put(lags)


def lag(kind, args):
    primary = Node(kind, args, Opts(threads=args.threads))
    replica = None
    load = None
    try:
        replica = Node(kind, args, Opts(threads=args.replica_threads))
        attach(primary, replica)
        load = subprocess.Popen(
            ["redis-benchmark", "-h", "127.0.0.1", "-p", str(primary.port), "-c", "50", "-n",
             "100000000", "-r", "1000000", "-d", "16", "-t", "set", "-P", "16", "-q"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        stop = mp.Event()
        q = mp.Queue()
        w = mp.Process(target=lag_writer, args=(primary.port, stop))
        rd = mp.Process(target=lag_reader, args=(replica.port, stop, q))
        w.start()
        rd.start()
        time.sleep(args.lag_seconds)
        stop.set()
        lags = sorted(q.get(timeout=60))
        w.join(30)
        rd.join(30)
        if not lags:
            raise RuntimeError("the reader saw no value")
        return (lags[len(lags) // 2], lags[min(len(lags) - 1, int(len(lags) * 0.99))],
                lags[-1], len(lags))
    finally:
        if load is not None:
            load.kill()
            load.wait()
        for n in (replica, primary):
            if n is not None:
                n.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--darner", default="target/release/darner")
    ap.add_argument("--redis", default="redis-server")
    ap.add_argument("--threads", type=int, default=2, help="the darner primary's threads")
    ap.add_argument("--replica-threads", type=int, default=1, help="each darner replica's")
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--value-size", type=int, default=1024)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--lag-seconds", type=float, default=5.0)
    ap.add_argument("--servers", default="darner,redis")
    ap.add_argument("--redis-diskless", action="store_true")
    ap.add_argument("--darner-diskless", action="store_true")
    ap.add_argument("--sync-only", action="store_true")
    args = ap.parse_args()
    args.darner = os.path.abspath(args.darner)
    kinds = args.servers.split(",")
    print("# %s" % machine_line())
    print("# darner primary --threads %d, replicas --threads %d; %d keys of %d bytes; SET -c 50 "
          "-P 16 -n %d" % (args.threads, args.replica_threads, args.keys, args.value_size,
                           args.requests))
    res = {}
    for kind in kinds:
        res[(kind, "sync")] = full_sync(kind, args)
        print("%-7s full sync %.2f s" % (kind, res[(kind, "sync")]), flush=True)
    for kind in kinds:
        if getattr(args, kind + "_diskless"):
            for load in (False, True):
                s = full_sync(kind, args, diskless=True, load=load)
                print("%-7s full sync, diskless, %s: %.2f s"
                      % (kind, "loaded from the socket" if load else "received to disk", s),
                      flush=True)
    if args.sync_only:
        return
    for kind in kinds:
        for n in (0, 1, 2):
            res[(kind, n)] = throughput(kind, args, n)
        print("%-7s SET ops/s: no replica %s, one %s (%.2fx), two %s (%.2fx)"
              % (kind, "{:,.0f}".format(res[(kind, 0)]), "{:,.0f}".format(res[(kind, 1)]),
                 res[(kind, 1)] / res[(kind, 0)], "{:,.0f}".format(res[(kind, 2)]),
                 res[(kind, 2)] / res[(kind, 0)]), flush=True)
    for kind in kinds:
        p50, p99, mx, n = lag(kind, args)
        print("%-7s lag under load: p50 %.2f ms, p99 %.2f ms, max %.2f ms (%d values seen)"
              % (kind, p50, p99, mx, n), flush=True)
    if "darner" in kinds and "redis" in kinds:
        print("darner/redis: full sync %.2fx; SET with one replica %.2fx, with two %.2fx"
              % (res[("darner", "sync")] / res[("redis", "sync")],
                 res[("darner", 1)] / res[("redis", 1)], res[("darner", 2)] / res[("redis", 2)]))


if __name__ == "__main__":
    main()
