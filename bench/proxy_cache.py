#!/usr/bin/env python3
"""The proxy's shared cache (issue 16): GET throughput and latency through darner-proxy with
`proxy-cache yes`, without it, and directly on the cluster, in one run.

Starts a Redis Cluster of three primaries (as bench/proxy.py does) and two proxies in front of it
(cache on, cache off), loads `--keys` keys, then:

1. redis-benchmark GET over those keys (uniform, `-r`), 50 connections: RESP2 unpipelined and
   pipelined (`-P 16`, RESP2 and RESP3): ops/s, p99, and the cache's hit rate over the case.
2. A 90% read / 10% write workload with Zipf-distributed keys (s = 1), from worker processes
   with redis-py, through each proxy: GET p50/p99 and the hit rate; every read is checked against
   the last value its own worker wrote (read-your-writes).

Every server binds 127.0.0.1 and is stopped whatever happens.

    python3 bench/proxy_cache.py [--seconds 5] [--workers 4] [--keys 10000] [--proxy-threads 1]
"""

import argparse
import bisect
import itertools
import os
import random
import statistics
import subprocess
import sys
import time
from multiprocessing import Pool

import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import free_port, stop_process, wait_ready  # noqa: E402
from proxy import Cluster, proxy_binary  # noqa: E402


def start_proxy(cluster, threads, cache):
    port = free_port()
    args = [proxy_binary(), "--listen", "127.0.0.1:%d" % port, "--cluster",
            ",".join("127.0.0.1:%d" % p for p in cluster.ports), "--threads", str(threads)]
    if cache:
        args += ["--proxy-cache", "yes", "--proxy-cache-max-memory", "256mb"]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_ready(port, p)
    return p, port


def cache_counts(port):
    info = redis.Redis(port=port, protocol=2).info("proxy")
    return info.get("cache_hits", 0), info.get("cache_misses", 0)


def hit_rate(port, before):
    h, m = cache_counts(port)
    h, m = h - before[0], m - before[1]
    return h / (h + m) if h + m else float("nan")


def redis_benchmark(port, pipeline, resp3, keys, requests, cluster):
    args = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", "get", "-n",
            str(requests), "-c", "50", "-P", str(pipeline), "-r", str(keys), "--csv"]
    if resp3:
        args.append("-3")
    if cluster:
        args.append("--cluster")
    out = subprocess.run(args, capture_output=True, text=True, timeout=300).stdout
    for line in out.splitlines():
        cols = [c.strip('"') for c in line.split(",")]
        if cols and cols[0].upper().startswith("GET"):
            return float(cols[1]), float(cols[6])
    raise RuntimeError("no result from redis-benchmark: %r" % out[-500:])


def zipf_worker(job):
    port, seconds, keys, seed = job
    rnd = random.Random(seed)
    cum = list(itertools.accumulate(1.0 / (i + 1) for i in range(keys)))
    c = redis.Redis(port=port, protocol=2, socket_timeout=5)
    mine = {}
    lat = []
    stale = 0
    end = time.time() + seconds
    n = 0
    while time.time() < end:
        k = "key:%012d" % bisect.bisect_left(cum, rnd.random() * cum[-1])
        if rnd.random() < 0.1:
            n += 1
            v = "%d:%d" % (seed, n)
            c.set(k, v)
            mine[k] = v.encode()
        else:
            t0 = time.perf_counter()
            v = c.get(k)
            lat.append(time.perf_counter() - t0)
            # Another worker may have written since; this one's own write must not be older.
            if k in mine and v != mine[k] and v is not None and v.split(b":")[0] == str(seed).encode():
                stale += 1
    return lat, stale


def zipf(port, seconds, workers, keys):
    with Pool(workers) as pool:
        results = pool.map(zipf_worker, [(port, seconds, keys, i) for i in range(workers)])
    lat = sorted(x for r in results for x in r[0])
    stale = sum(r[1] for r in results)
    p50 = statistics.median(lat) * 1000
    p99 = lat[int(len(lat) * 0.99) - 1] * 1000
    return len(lat) / seconds, p50, p99, stale


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--keys", type=int, default=10000)
    ap.add_argument("--requests", type=int, default=200000)
    ap.add_argument("--proxy-threads", type=int, default=1)
    args = ap.parse_args()

    cluster = Cluster()
    procs = []
    try:
        cached, cport = start_proxy(cluster, args.proxy_threads, True)
        procs.append(cached)
        plain, pport = start_proxy(cluster, args.proxy_threads, False)
        procs.append(plain)
        r = redis.Redis(port=pport, protocol=2)
        p = r.pipeline(transaction=False)
        for i in range(args.keys):
            p.set("key:%012d" % i, "v" * 32)
            if i % 1000 == 999:
                p.execute()
        p.execute()
        print("cluster of 3 primaries on %s; darner-proxy --threads %d: cache on %d, off %d; "
              "%d keys" % (cluster.ports, args.proxy_threads, cport, pport, args.keys))

        print("\n1. redis-benchmark GET -c 50 -r %d, %d requests" % (args.keys, args.requests))
        print("%-22s %14s %9s %14s %9s %14s %9s %9s" % (
            "case", "cache ops/s", "p99 ms", "no-cache ops/s", "p99 ms", "direct ops/s",
            "p99 ms", "hit rate"))
        for pipeline, resp3 in ((1, False), (16, False), (16, True)):
            before = cache_counts(cport)
            crps, cp99 = redis_benchmark(cport, pipeline, resp3, args.keys, args.requests, False)
            rate = hit_rate(cport, before)
            prps, pp99 = redis_benchmark(pport, pipeline, resp3, args.keys, args.requests, False)
            drps, dp99 = redis_benchmark(cluster.ports[0], pipeline, resp3, args.keys,
                                         args.requests, True)
            print("%-22s %14.0f %9.3f %14.0f %9.3f %14.0f %9.3f %9.3f" % (
                "%s -P %d" % ("RESP3" if resp3 else "RESP2", pipeline), crps, cp99, prps, pp99,
                drps, dp99, rate))

        print("\n2. 90%% GET / 10%% SET, Zipf keys, %d redis-py workers, %.0f s each"
              % (args.workers, args.seconds))
        print("%-12s %12s %9s %9s %9s %7s" % ("proxy", "GETs/s", "p50 ms", "p99 ms", "hit rate",
                                              "stale"))
        for name, port in (("cache on", cport), ("cache off", pport)):
            before = cache_counts(port)
            gps, p50, p99, stale = zipf(port, args.seconds, args.workers, args.keys)
            rate = hit_rate(port, before) if port == cport else float("nan")
            print("%-12s %12.0f %9.3f %9.3f %9.3f %7d" % (name, gps, p50, p99, rate, stale))
    finally:
        for p in procs:
            stop_process(p)
        cluster.stop()


if __name__ == "__main__":
    main()
