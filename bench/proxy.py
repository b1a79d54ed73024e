#!/usr/bin/env python3
"""The cluster proxy (issue 16) against clients that talk to the cluster directly, in one run.

Starts a Redis Cluster of three primaries (Debian's redis-server, `redis-cli --cluster create`, on
free loopback ports) and `darner-proxy` in front of it, then measures:

1. Long-lived connections: redis-benchmark GET and SET, unpipelined and pipelined, through the
   proxy (as a single node) and directly on the cluster (`redis-benchmark --cluster`): ops/s and
   p99, and the ratio proxy / direct. `--bench-threads N` runs redis-benchmark with
   `--threads N` (by default it runs one thread).
2. Short-lived clients (the PHP-FPM pattern): worker processes each connect, run a few commands
   touching several slots, disconnect, in a loop, for a fixed time: through the proxy with a
   plain client, and directly with redis-py's RedisCluster (which discovers the topology on every
   new client, as a PHP cluster client does). Per-request latency p50/p99, connections the
   cluster's nodes accepted per second, and the TIME_WAIT sockets on the nodes' ports the case
   added.

Every server binds 127.0.0.1 and is stopped whatever happens.

    python3 bench/proxy.py [--seconds 10] [--workers 8] [--proxy-threads 1] [--bench-threads N]
                           [--clients 50]
"""

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from multiprocessing import Pool

import redis
from redis.cluster import RedisCluster

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import free_port, stop_process, wait_ready  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def proxy_binary():
    b = os.environ.get("DARNER_PROXY_BIN") or os.path.join(ROOT, "target", "release", "darner-proxy")
    if not os.path.exists(b):
        sys.exit("darner-proxy not built: run cargo build --release first")
    return b


class Cluster:
    def __init__(self, n=3):
        self.dir = tempfile.mkdtemp(prefix="bench-proxy-")
        self.procs = []
        self.ports = []
        for i in range(n):
            port = free_port()
            while port > 55000:  # a node's cluster bus listens on port + 10000
                port = free_port()
            d = os.path.join(self.dir, str(port))
            os.makedirs(d)
            p = subprocess.Popen(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--cluster-enabled", "yes",
                 "--cluster-config-file", "nodes.conf", "--dir", d],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.procs.append(p)
            self.ports.append(port)
            wait_ready(port, p)
        subprocess.run(["redis-cli", "--cluster", "create"]
                       + ["127.0.0.1:%d" % p for p in self.ports]
                       + ["--cluster-replicas", "0", "--cluster-yes"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while time.time() < deadline:
            if all(redis.Redis(port=p).cluster("info")["cluster_state"] == "ok" for p in self.ports):
                return
            time.sleep(0.2)
        raise RuntimeError("the cluster did not become ok")

    def accepted(self):
        return sum(redis.Redis(port=p).info("stats")["total_connections_received"]
                   for p in self.ports)

    def stop(self):
        for p in self.procs:
            stop_process(p)
        shutil.rmtree(self.dir, ignore_errors=True)


def time_wait_on(ports):
    """TIME_WAIT sockets whose local or remote port is one of `ports`, read from /proc/net/tcp
    and tcp6 (state 06): `ss` may be missing on the machine the benchmark runs on."""
    n = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) < 4 or cols[3] != "06":
                continue
            local, remote = (int(a.rsplit(":", 1)[1], 16) for a in cols[1:3])
            if local in ports or remote in ports:
                n += 1
    return n


def redis_benchmark(port, test, pipeline, requests, cluster, threads=None, clients=50):
    args = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", test, "-n",
            str(requests), "-c", str(clients), "-P", str(pipeline), "-r", "100000", "--csv"]
    if threads:
        # redis-benchmark's own threads (7.0): one thread cannot keep a multi-threaded proxy
        # or three nodes busy on a many-core machine.
        args += ["--threads", str(threads)]
    if cluster:
        args.append("--cluster")
    out = subprocess.run(args, capture_output=True, text=True, timeout=300).stdout
    for line in out.splitlines():
        cols = [c.strip('"') for c in line.split(",")]
        if cols and cols[0].upper().startswith(test.upper()):
            return float(cols[1]), float(cols[6])  # rps, p99 ms
    raise RuntimeError("no result from redis-benchmark: %r" % out[-500:])


# ---- short-lived clients ----

def short_lived_worker(job):
    mode, port, seconds, seed = job
    rnd = random.Random(seed)
    lat = []
    errors = 0
    end = time.time() + seconds
    while time.time() < end:
        try:
            t0 = time.perf_counter()
            if mode == "proxy":
                c = redis.Redis(port=port, socket_timeout=5)
            else:
                c = RedisCluster(host="127.0.0.1", port=port, socket_timeout=5)
            for _ in range(rnd.randint(1, 10)):
                k = "user:%d" % rnd.randrange(100000)
                if rnd.random() < 0.8:
                    c.get(k)
                else:
                    c.set(k, "v" * 32)
                t1 = time.perf_counter()
                lat.append(t1 - t0)
                t0 = t1
            c.close()
        except redis.RedisError:
            errors += 1
    return lat, errors


def short_lived(mode, port, seconds, workers):
    with Pool(workers) as pool:
        results = pool.map(short_lived_worker,
                           [(mode, port, seconds, i) for i in range(workers)])
    lat = sorted(x for r in results for x in r[0])
    errors = sum(r[1] for r in results)
    if not lat:
        return 0, 0, 0, errors
    p50 = statistics.median(lat) * 1000
    p99 = lat[int(len(lat) * 0.99) - 1] * 1000
    return len(lat) / seconds, p50, p99, errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--requests", type=int, default=200000)
    ap.add_argument("--proxy-threads", type=int, default=1)
    ap.add_argument("--bench-threads", type=int, default=None,
                    help="redis-benchmark --threads N (default: not passed, one thread)")
    ap.add_argument("--clients", type=int, default=50,
                    help="redis-benchmark -c: connections in all (with --cluster, spread over "
                         "the nodes). Unpipelined, a closed loop at a fixed concurrency is "
                         "bound by latency, and the proxy's hop doubles the round trip: more "
                         "connections show what each side sustains once the nodes are busy")
    args = ap.parse_args()

    cluster = Cluster()
    proxy = None
    try:
        pport = free_port()
        proxy = subprocess.Popen(
            [proxy_binary(), "--listen", "127.0.0.1:%d" % pport, "--cluster",
             ",".join("127.0.0.1:%d" % p for p in cluster.ports),
             "--threads", str(args.proxy_threads)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_ready(pport, proxy)
        print("cluster of 3 primaries on %s; darner-proxy --threads %d on %d"
              % (cluster.ports, args.proxy_threads, pport))

        print("\n1. long-lived connections (redis-benchmark -c %d -r 100000, %d requests%s)"
              % (args.clients, args.requests,
                 ", --threads %d" % args.bench_threads if args.bench_threads else ""))
        print("%-14s %14s %10s %14s %10s %8s %8s" % ("case", "proxy ops/s", "p99 ms",
                                                     "direct ops/s", "p99 ms", "ops x", "p99 x"))
        for test in ("get", "set"):
            for pipeline in (1, 16):
                prps, pp99 = redis_benchmark(pport, test, pipeline, args.requests, False,
                                             args.bench_threads, args.clients)
                drps, dp99 = redis_benchmark(cluster.ports[0], test, pipeline, args.requests, True,
                                             args.bench_threads, args.clients)
                print("%-14s %14.0f %10.3f %14.0f %10.3f %8.2f %8.2f" % (
                    "%s -P %d" % (test.upper(), pipeline), prps, pp99, drps, dp99,
                    prps / drps, pp99 / dp99 if dp99 else float("nan")))

        print("\n2. short-lived clients (%d worker processes, %.0f s each way: connect, 1-10 "
              "GET/SET on random slots, disconnect)" % (args.workers, args.seconds))
        print("%-22s %12s %9s %9s %16s %14s %7s" % ("case", "requests/s", "p50 ms", "p99 ms",
                                                    "node conns/s", "new TIME_WAIT", "errors"))
        for mode, port in (("proxy", pport), ("direct RedisCluster", cluster.ports[0])):
            before = cluster.accepted()
            tw_before = time_wait_on(cluster.ports)
            rps, p50, p99, errors = short_lived(mode.split()[0], port, args.seconds, args.workers)
            conns = (cluster.accepted() - before) / args.seconds
            # New ones: those left by the earlier cases last 60 s and are not this case's.
            tw = max(0, time_wait_on(cluster.ports) - tw_before)
            print("%-22s %12.0f %9.3f %9.3f %16.1f %14d %7d" % (mode, rps, p50, p99, conns, tw,
                                                                errors))
    finally:
        if proxy is not None:
            stop_process(proxy)
        cluster.stop()


if __name__ == "__main__":
    main()
