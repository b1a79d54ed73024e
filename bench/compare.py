#!/usr/bin/env python3
"""Side-by-side benchmark: darner vs redis-server, same machine, same run, same flags.

Throughput: redis-benchmark SET and GET, 50 connections, unpipelined / -P 16 / -P 64 on a
1,000,000-key space. Each server is pinned to one core (taskset), the load generator to another.
For each case it prints ops/s, ops per server CPU-second (utime+stime of the server process over
the case) and the ratio darner/redis.

Memory: 1,000,000 keys key:%08d -> 16-byte values loaded over one pipelined connection; RSS
growth of each server process, and the ratio.

Servers bind 127.0.0.1 on free ports, every case is bounded (-n requests), and both servers are
stopped whatever happens.

Each case runs --repeat times, alternating darner and redis; each figure is the median of its
runs, and each ratio the median of the per-pair ratios (a darner run and the redis run right
after it share the machine's moment; single runs on a small shared machine vary by 20% or more),
with the range of the pairs' CPU ratios in brackets.

Usage: bench/compare.py [--darner target/release/darner] [--threads 1] [--requests 2000000]
                        [--repeat 3] [--only throughput|memory] [--tests set,get]
                        [--pipelines 1,16,64]
"""
import argparse
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import free_port, cpu_seconds, rss_bytes, Server  # noqa: E402



def start_servers(args, cores):
    servers = []
    dport, rport = free_port(), free_port()
    servers.append(Server("darner", [args.darner, "--port", str(dport), "--bind", "127.0.0.1", "--save", "",
                                     "--threads", str(args.threads), "--loglevel", "warning"], dport, cores[0]))
    servers.append(Server("redis", [args.redis, "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
                                    "--appendonly", "no", "--loglevel", "warning"], rport, cores[0]))
    return servers


def bench_case(server, test, pipeline, requests, gen_core):
    cmd = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(server.port), "-c", "50", "-n", str(requests),
           "-r", "1000000", "-t", test, "-P", str(pipeline), "--csv", "-q"]
    if gen_core is not None:
        cmd = ["taskset", "-c", str(gen_core)] + cmd
    c0 = cpu_seconds(server.proc.pid)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600).stdout
    c1 = cpu_seconds(server.proc.pid)
    rps = 0.0
    for line in out.splitlines():
        parts = [p.strip('"') for p in line.split(",")]
        if len(parts) >= 2 and parts[0].upper().startswith(test.upper()):
            rps = float(parts[1])
    cpu = max(c1 - c0, 1e-9)
    return rps, requests / cpu, " ".join(cmd)


def load_keys(port, n=1_000_000, batch=10_000):
    value = b"v" * 16
    with socket.create_connection(("127.0.0.1", port)) as s:
        for start in range(0, n, batch):
            buf = bytearray()
            for i in range(start, min(n, start + batch)):
                k = b"key:%08d" % i
                buf += b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$16\r\n%s\r\n" % (len(k), k, value)
            s.sendall(buf)
            want = 5 * (min(n, start + batch) - start)
            got = 0
            while got < want:
                chunk = s.recv(1 << 20)
                if not chunk:
                    raise RuntimeError("connection closed while loading")
                got += len(chunk)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--darner", default="target/release/darner")
    ap.add_argument("--redis", default="redis-server")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--requests", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", choices=["throughput", "memory"])
    ap.add_argument("--tests", default="set,get", help="comma-separated: set,get")
    ap.add_argument("--pipelines", default="1,16,64", help="comma-separated pipeline depths")
    args = ap.parse_args()
    ncpu = os.cpu_count() or 1
    cores = (0, 1) if ncpu >= 2 else (None, None)
    print(f"# darner --threads {args.threads} vs {subprocess.run([args.redis, '--version'], capture_output=True, text=True).stdout.strip()}")
    print(f"# server pinned to core {cores[0]}, redis-benchmark to core {cores[1]}; {ncpu} cores")
    servers = []
    try:
        servers = start_servers(args, cores)
        d, r = servers
        if args.only in (None, "throughput"):
            print(f"{'case':<14}{'darner ops/s':>14}{'redis ops/s':>14}{'ratio':>8}{'darner ops/cpu-s':>18}{'redis ops/cpu-s':>17}{'ratio':>8}")
            for test in args.tests.split(","):
                for p in (int(x) for x in args.pipelines.split(",")):
                    n = args.requests if p > 1 else max(args.requests // 4, 100_000)
                    runs = []
                    for _ in range(args.repeat):
                        drps, dcpu, cmd = bench_case(d, test, p, n, cores[1])
                        rrps, rcpu, _ = bench_case(r, test, p, n, cores[1])
                        runs.append((drps, dcpu, rrps, rcpu))
                    med = lambda v: sorted(v)[len(v) // 2]  # noqa: E731
                    drps, dcpu = med([x[0] for x in runs]), med([x[1] for x in runs])
                    rrps, rcpu = med([x[2] for x in runs]), med([x[3] for x in runs])
                    # Ratios are medians of each darner run over the redis run right after it:
                    # the machine's speed drifts between moments, and a pair shares its moment.
                    rps_ratio = med([x[0] / max(x[2], 1) for x in runs])
                    cpu_ratios = sorted(x[1] / max(x[3], 1) for x in runs)
                    name = f"{test.upper()} P{p}"
                    spread = f"  ({cpu_ratios[0]:.2f}-{cpu_ratios[-1]:.2f})" if len(runs) > 1 else ""
                    print(f"{name:<14}{drps:>14,.0f}{rrps:>14,.0f}{rps_ratio:>8.2f}{dcpu:>18,.0f}{rcpu:>17,.0f}{med(cpu_ratios):>8.2f}{spread}", flush=True)
            print(f"# figures: medians of {args.repeat} runs; ratios: medians of paired runs (range in brackets)")
            print(f"# last command: {cmd.replace(str(d.port), 'PORT')}")
        if args.only in (None, "memory"):
            # Fresh servers so the throughput runs' keys do not count.
            for s in servers:
                s.stop()
            servers = start_servers(args, cores)
            growth = {}
            for s in servers:
                before = rss_bytes(s.proc.pid)
                load_keys(s.port)
                time.sleep(0.5)
                growth[s.name] = rss_bytes(s.proc.pid) - before
            dg, rg = growth["darner"], growth["redis"]
            print(f"memory: 1,000,000 keys key:%08d -> 16-byte values: RSS growth darner {dg / 2**20:.1f} MiB, "
                  f"redis {rg / 2**20:.1f} MiB, ratio {dg / max(rg, 1):.2f} ({dg / 1e6:.1f} vs {rg / 1e6:.1f} bytes/key)")
    finally:
        for s in servers:
            s.stop()


if __name__ == "__main__":
    sys.exit(main())
