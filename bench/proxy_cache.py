#!/usr/bin/env python3
"""The proxy's shared cache (issue 16): GET throughput and latency through darner-proxy with
`proxy-cache yes`, without it, and directly on the cluster, in one run.

Starts a Redis Cluster of three primaries (as bench/proxy.py does) and two proxies in front of it
(cache on, cache off), loads `--keys` keys for each case, then:

1. redis-benchmark GET over those keys (uniform, `-r`), 50 connections: RESP2 unpipelined and
   pipelined (`-P 16`, RESP2 and RESP3): ops/s, p99, and the cache's hit rate over the case.
   Direct is `redis-benchmark --cluster`. With `--bench-threads N`, redis-benchmark runs
   `--threads N` (without it, one thread, as redis-benchmark does by default).
2. Issue 16's target case: 90% GET / 10% SET (`darner-bench --ratio 1:9`), Zipf-distributed
   keys (s = 0.99) over `--keys` keys, 32-byte values, `--bench-threads` threads (2 unless given)
   of `--connections` connections each, `--pipeline` requests in flight per connection, through
   the cache-on proxy, the cache-off proxy, and directly on the cluster (`darner-bench --cluster`:
   one socket per primary per connection, each request to its key's primary). Ops/s, GET p50 and
   p99, errors, the cache's hit rate, and ops/s as a multiple of direct's: the target is cache
   on >= 2x direct.
3. A read-your-writes check through the cache-on proxy (two redis-py workers, a 90/10 Zipf mix;
   every GET of a key the worker itself wrote last must return that write or a later one): a
   smoke check of coherence under this load, not a measurement. tests/test_proxy_cache.py
   (test_a_client_reads_its_own_writes, test_concurrent_writers_never_make_a_reader_go_back)
   is the real test of it.

Every server binds 127.0.0.1 and is stopped whatever happens. darner-bench and darner-proxy come
from target/release (cargo build --release), or DARNER_BENCH_BIN / DARNER_PROXY_BIN.

    python3 bench/proxy_cache.py [--seconds 5] [--keys 10000] [--requests 200000]
        [--proxy-threads 1] [--bench-threads N] [--connections 25] [--pipeline 1]

On a 16-core machine, give the proxy and the load generator enough threads that the load
generator is not what is measured, e.g. `--proxy-threads 4 --bench-threads 4`.
"""

import argparse
import bisect
import itertools
import json
import os
import random
import subprocess
import sys
import time
from multiprocessing import Pool

import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import free_port, stop_process, wait_ready  # noqa: E402
from proxy import ROOT, Cluster, proxy_binary  # noqa: E402


def bench_binary():
    b = os.environ.get("DARNER_BENCH_BIN") or os.path.join(ROOT, "target", "release",
                                                             "darner-bench")
    if not os.path.exists(b):
        sys.exit("darner-bench not built: run cargo build --release first")
    return b


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
    # cache_joins: none before the build that joins misses to fills in flight.
    return (info.get("cache_hits", 0), info.get("cache_misses", 0),
            info.get("cache_joins", float("nan")))


def hit_rate(port, before):
    h, m, _ = cache_counts(port)
    h, m = h - before[0], m - before[1]
    return h / (h + m) if h + m else float("nan")


def join_rate(port, before):
    """The share of the cacheable reads answered by a fill in flight they joined (part of the
    hit rate)."""
    h, m, j = cache_counts(port)
    h, m, j = h - before[0], m - before[1], j - before[2]
    return j / (h + m) if h + m else float("nan")


def redis_benchmark(port, pipeline, resp3, keys, requests, cluster, threads):
    args = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", "get", "-n",
            str(requests), "-c", "50", "-P", str(pipeline), "-r", str(keys), "--csv"]
    if threads:
        args += ["--threads", str(threads)]
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


ZIPF_PREFIX = "zipf:"  # darner-bench's keys: prefix + decimal index


def darner_bench(port, args, cluster):
    """Case 2's workload on `port` (with --cluster: a node of the cluster); its JSON result."""
    cmd = [bench_binary(), "--port", str(port), "--ratio", "1:9", "--key-pattern", "zipf",
           "--key-maximum", str(args.keys), "--key-prefix", ZIPF_PREFIX, "--data-size", "32",
           "--threads", str(args.bench_threads or 2), "--connections", str(args.connections),
           "--pipeline", str(args.pipeline), "--test-time", str(args.seconds), "--json"]
    if cluster:
        cmd.append("--cluster")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.seconds + 120)
    if out.returncode != 0:
        raise RuntimeError("darner-bench failed: %s" % out.stderr[-500:])
    return json.loads(out.stdout)


def ryw_worker(job):
    port, seconds, keys, seed = job
    rnd = random.Random(seed)
    cum = list(itertools.accumulate(1.0 / (i + 1) for i in range(keys)))
    c = redis.Redis(port=port, protocol=2, socket_timeout=5)
    mine = {}
    reads = stale = 0
    end = time.time() + seconds
    n = 0
    while time.time() < end:
        k = "ryw:%d" % bisect.bisect_left(cum, rnd.random() * cum[-1])
        if rnd.random() < 0.1:
            n += 1
            v = "%d:%d" % (seed, n)
            c.set(k, v)
            mine[k] = (seed, n)
        else:
            v = c.get(k)
            reads += 1
            # Another worker may have written since; this one's own last write must not be
            # replaced by an older one of its own, nor vanish.
            if k in mine:
                if v is None:
                    stale += 1
                else:
                    w, i = v.split(b":")
                    if int(w) == seed and int(i) < mine[k][1]:
                        stale += 1
    return reads, stale


def read_your_writes(port, seconds, keys, workers=2):
    with Pool(workers) as pool:
        results = pool.map(ryw_worker, [(port, seconds, keys, i) for i in range(workers)])
    return sum(r[0] for r in results), sum(r[1] for r in results)


def load(port, names):
    r = redis.Redis(port=port, protocol=2)
    p = r.pipeline(transaction=False)
    for i, k in enumerate(names):
        p.set(k, "v" * 32)
        if i % 1000 == 999:
            p.execute()
    p.execute()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5,
                    help="each darner-bench run of case 2 (3 runs)")
    ap.add_argument("--keys", type=int, default=10000)
    ap.add_argument("--requests", type=int, default=200000,
                    help="each redis-benchmark run of case 1 (9 runs)")
    ap.add_argument("--proxy-threads", type=int, default=1)
    ap.add_argument("--bench-threads", type=int, default=None,
                    help="load generator threads: darner-bench --threads (default 2) and "
                         "redis-benchmark --threads (default: not passed, one thread)")
    ap.add_argument("--connections", type=int, default=25,
                    help="darner-bench connections per thread (case 2)")
    ap.add_argument("--pipeline", type=int, default=1,
                    help="darner-bench requests in flight per connection (case 2)")
    args = ap.parse_args()

    cluster = Cluster()
    procs = []
    try:
        cached, cport = start_proxy(cluster, args.proxy_threads, True)
        procs.append(cached)
        plain, pport = start_proxy(cluster, args.proxy_threads, False)
        procs.append(plain)
        load(pport, ["key:%012d" % i for i in range(args.keys)])  # redis-benchmark -r's keys
        load(pport, [ZIPF_PREFIX + str(i) for i in range(args.keys)])
        print("cluster of 3 primaries on %s; darner-proxy --threads %d: cache on %d, off %d; "
              "%d keys" % (cluster.ports, args.proxy_threads, cport, pport, args.keys))

        print("\n1. redis-benchmark GET -c 50 -r %d, %d requests%s" % (
            args.keys, args.requests,
            ", --threads %d" % args.bench_threads if args.bench_threads else ""))
        print("%-22s %14s %9s %14s %9s %14s %9s %9s" % (
            "case", "cache ops/s", "p99 ms", "no-cache ops/s", "p99 ms", "direct ops/s",
            "p99 ms", "hit rate"))
        for pipeline, resp3 in ((1, False), (16, False), (16, True)):
            before = cache_counts(cport)
            crps, cp99 = redis_benchmark(cport, pipeline, resp3, args.keys, args.requests, False,
                                         args.bench_threads)
            rate = hit_rate(cport, before)
            prps, pp99 = redis_benchmark(pport, pipeline, resp3, args.keys, args.requests, False,
                                         args.bench_threads)
            drps, dp99 = redis_benchmark(cluster.ports[0], pipeline, resp3, args.keys,
                                         args.requests, True, args.bench_threads)
            print("%-22s %14.0f %9.3f %14.0f %9.3f %14.0f %9.3f %9.3f" % (
                "%s -P %d" % ("RESP3" if resp3 else "RESP2", pipeline), crps, cp99, prps, pp99,
                drps, dp99, rate))

        threads = args.bench_threads or 2
        print("\n2. 90%% GET / 10%% SET, Zipf keys over %d, darner-bench --threads %d "
              "--connections %d --pipeline %d, %.0f s each"
              % (args.keys, threads, args.connections, args.pipeline, args.seconds))
        print("%-10s %12s %12s %10s %10s %10s %8s %9s %7s %10s" % (
            "target", "ops/s", "GETs/s", "GET p50", "GET p99", "SET p99", "errors", "hit rate",
            "joined", "x direct"))
        rows = []
        for name, port, direct in (("cache on", cport, False), ("cache off", pport, False),
                                   ("direct", cluster.ports[0], True)):
            before = cache_counts(cport)
            r = darner_bench(port, args, direct)
            rate = hit_rate(cport, before) if port == cport else float("nan")
            joined = join_rate(cport, before) if port == cport else float("nan")
            rows.append((name, r, (rate, joined)))
        direct_ops = rows[-1][1]["ops_per_sec"]
        for name, r, (rate, joined) in rows:
            get = r["by_type"].get("get", {})
            put = r["by_type"].get("set", {})
            print("%-10s %12.0f %12.0f %8.3fms %8.3fms %8.3fms %8d %9.3f %7.3f %9.2fx" % (
                name, r["ops_per_sec"], get.get("ops_per_sec", 0), get.get("p50_us", 0) / 1000,
                get.get("p99_us", 0) / 1000, put.get("p99_us", 0) / 1000, r["errors"], rate,
                joined, r["ops_per_sec"] / direct_ops if direct_ops else float("nan")))
        print("issue 16's target: cache on >= 2x direct: %s" % (
            "met" if direct_ops and rows[0][1]["ops_per_sec"] >= 2 * direct_ops else "NOT met"))

        seconds = min(args.seconds, 2)
        reads, stale = read_your_writes(cport, seconds, args.keys)
        print("\n3. read-your-writes through the cache, 2 redis-py workers, %.0f s: %d GETs, "
              "%d stale" % (seconds, reads, stale))
        if stale:
            sys.exit("stale reads through the cache")
    finally:
        for p in procs:
            stop_process(p)
        cluster.stop()


if __name__ == "__main__":
    main()
