#!/usr/bin/env python3
"""Speed of the small-hash path: two darner binaries (a base and a new one), same machine,
same run.

For each binary, a fresh `darner --threads 1` pinned to core 0 and `redis-benchmark -P 16`
pinned to core 1 run four cases in a row:

    -t hset                                          one key, one field rewritten
    -r 100000 hset h:__rand_int__ f__rand_int__ 12   100k small hashes growing to ~10 fields
    -r 100000 hget h:__rand_int__ f__rand_int__
    -r 100000 hincrby h:__rand_int__ f__rand_int__ 1

then the server is stopped. The binaries alternate --rounds times (base, new, base, ...), and
each round waits first until the machine has been idle for 3 s (it is shared). Printed: each
run's requests/s and server CPU (utime+stime) per request, then the medians.

With --callgrind, each binary instead runs once under valgrind's callgrind (-n --cg-requests,
10 connections), its counters zeroed before each case and dumped after: the server's
instructions per request, which the machine's noise does not move.

Servers bind 127.0.0.1 on free ports and are stopped whatever happens.

Usage: bench/hash_path.py BASE NEW [--rounds 3] [--requests 1000000]
                          [--callgrind] [--cg-requests 100000]
"""
import argparse
import glob
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import free_port, cpu_seconds, wait_ready, stop_process  # noqa: E402

CASES = [
    ("hset one key", ["-t", "hset"]),
    ("hset", ["-r", "100000", "hset", "h:__rand_int__", "f__rand_int__", "12"]),
    ("hget", ["-r", "100000", "hget", "h:__rand_int__", "f__rand_int__"]),
    ("hincrby", ["-r", "100000", "hincrby", "h:__rand_int__", "f__rand_int__", "1"]),
]


def wait_idle(limit=600):
    """Waits until the machine's CPUs were at least 95% idle for 3 seconds in a row."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]
    quiet, deadline = 0, time.time() + limit
    while quiet < 3 and time.time() < deadline:
        t0, i0 = sample()
        time.sleep(1)
        t1, i1 = sample()
        quiet = quiet + 1 if (i1 - i0) * 100 >= 95 * max(1, t1 - t0) else 0


def bench(port, args, requests, connections=50, pin=True):
    cmd = ["redis-benchmark", "-p", str(port), "-P", "16", "-c", str(connections),
           "-n", str(requests), "-q"] + args
    if pin:
        cmd = ["taskset", "-c", "1"] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600).stdout
    for line in reversed(out.replace("\r", "\n").splitlines()):
        if "requests per second" in line:
            return float(line.split(":")[-1].split("requests")[0].split()[-1])
    raise RuntimeError(f"no result from {cmd}: {out[-200:]}")


def run_binary(binary, requests):
    port = free_port()
    argv = ["taskset", "-c", "0", binary, "--port", str(port), "--bind", "127.0.0.1",
            "--save", "", "--threads", "1"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(port, proc)
        res = []
        for _, args in CASES:
            c0 = cpu_seconds(proc.pid)
            rps = bench(port, args, requests)
            res.append((rps, (cpu_seconds(proc.pid) - c0) * 1e9 / requests))
        return res
    finally:
        stop_process(proc)


def run_callgrind(binary, requests):
    port = free_port()
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg")
        argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--threads", "1"]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_ready(port, proc, timeout=60)
            res = []
            for i, (_, args) in enumerate(CASES):
                subprocess.run(["callgrind_control", "-z", str(proc.pid)], check=True,
                               capture_output=True)
                bench(port, args, requests, connections=10, pin=False)
                subprocess.run(["callgrind_control", "-d", str(proc.pid)], check=True,
                               capture_output=True)
                dump = f"{out}.{i + 1}"
                for _ in range(100):
                    if glob.glob(dump):
                        break
                    time.sleep(0.1)
                with open(dump) as f:
                    total = next(int(line.split()[1]) for line in f
                                 if line.startswith(("summary:", "totals:")))
                res.append(total / requests)
            return res
        finally:
            stop_process(proc)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--callgrind", action="store_true")
    ap.add_argument("--cg-requests", type=int, default=100_000)
    a = ap.parse_args()
    bins = [("base", a.base), ("new", a.new)]
    if a.callgrind:
        got = {name: run_callgrind(b, a.cg_requests) for name, b in bins}
        print("server instructions per request (callgrind)")
        for i, (case, _) in enumerate(CASES):
            b, n = got["base"][i], got["new"][i]
            print(f"{case:13} base {b:6.0f}  new {n:6.0f}  {100 * (n / b - 1):+.0f}%")
        return
    runs = {name: [] for name, _ in bins}
    for r in range(a.rounds):
        for name, b in bins:
            wait_idle()
            res = run_binary(b, a.requests)
            runs[name].append(res)
            cells = [f"{case} {rps / 1000:.0f}k ({ns:.0f} ns)"
                     for (case, _), (rps, ns) in zip(CASES, res)]
            print(f"round {r + 1} {name:4} " + "  ".join(cells), flush=True)
    print("medians: thousands of requests/s (server CPU ns per request)")
    for i, (case, _) in enumerate(CASES):
        line = f"{case:13}"
        for name, _ in bins:
            rps = statistics.median(r[i][0] for r in runs[name]) / 1000
            ns = statistics.median(r[i][1] for r in runs[name])
            line += f"  {name} {rps:6.0f}k ({ns:4.0f} ns)"
        print(line)


if __name__ == "__main__":
    main()
