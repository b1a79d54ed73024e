#!/usr/bin/env python3
"""Server CPU per operation on the cross-thread path (issue 12): darner --threads 1 (no hop)
and --threads 2 (half the keys on the other thread), one or more builds side by side.

Each server runs on core 0 (taskset), darner-bench on core 1; both servers of a build are
filled with key:0 .. key:999,999 (32-byte values, as bench/multikey.py does) so that GETs and
MGETs hit. Cases, 50 connections, uniform keys, --time seconds each: get, set (unpipelined),
get-p16, set-p16 (16 in flight per connection), mset10, mget10 (10 keys per command); and,
only when asked for (--cases), mget10-track (mget10 from connections with CLIENT TRACKING on,
so every key read is recorded in the server's tracking table, which grows over the runs). Each
case runs --rounds rounds, every server once per round (a round's runs share the machine's
moment); the figure is the server's utime+stime over the run (/proc/PID/stat) divided by the
operations darner-bench counted, in microseconds, median of the rounds; then the same for
utime alone (user space is where the request path's own work shows; the kernel's TCP share
moves more with what else runs on the machine).

--syscalls instead counts system calls and context switches per operation (one run per
server and case, `perf stat` on the server's tracepoints: needs perf and root; strace -c
slows the server so much that it batches differently).

Usage: bench/cpu_per_op.py [--bins NAME=PATH,...] [--bench target/release/darner-bench]
           [--threads 1,2] [--cases get,set,...] [--rounds 3] [--time 3] [--syscalls]
  e.g. an A/B of two builds: --bins base=/tmp/darner-base,new=target/release/darner
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import CLK_TCK, free_port, cpu_seconds, wait_ready, stop_process  # noqa: E402
from multikey import fill, KEYS  # noqa: E402

CASES = {
    "get": ["--command", "get"],
    "set": ["--command", "set"],
    "get-p16": ["--command", "get", "--pipeline", "16"],
    "set-p16": ["--command", "set", "--pipeline", "16"],
    "mset10": ["--command", "mset:10"],
    "mget10": ["--command", "mget:10"],
    # The same with CLIENT TRACKING on (every read recorded): opt-in, not in the defaults.
    "mget10-track": ["--command", "mget:10", "--tracking"],
}
SYSCALLS = ["sendto", "recvfrom", "epoll_wait", "write", "read", "futex"]


def start(path, threads):
    port = free_port()
    p = subprocess.Popen(["taskset", "-c", "0", path, "--port", str(port), "--threads",
                          str(threads), "--save", "", "--appendonly", "no"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(port, p)
        fill(port)
    except BaseException:
        stop_process(p)
        raise
    return p, port


def bench_cmd(args, port, case):
    return ["taskset", "-c", "1", args.bench, "--port", str(port), "--connections", "50",
            "--key-maximum", str(KEYS), "--test-time", str(args.time), "--json"] + CASES[case]


def load(args, port, case):
    out = subprocess.run(bench_cmd(args, port, case), capture_output=True, text=True,
                         timeout=args.time + 60)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    j = json.loads(out.stdout)
    if j["errors"]:
        raise RuntimeError(f"{case}: {j['errors']} errors")
    return j


def user_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[11]) / CLK_TCK


def cpu_run(args, proc, port, case):
    c0, u0 = cpu_seconds(proc.pid), user_seconds(proc.pid)
    j = load(args, port, case)
    c1, u1 = cpu_seconds(proc.pid), user_seconds(proc.pid)
    return (c1 - c0) * 1e6 / j["ops"], (u1 - u0) * 1e6 / j["ops"], j["ops_per_sec"]


def syscall_run(args, proc, port, case):
    events = ["raw_syscalls:sys_enter"] + [f"syscalls:sys_enter_{s}" for s in SYSCALLS]
    events.append("context-switches")
    with tempfile.NamedTemporaryFile("r", suffix=".perf") as log:
        st = subprocess.Popen(["perf", "stat", "-x", ",", "-e", ",".join(events), "-o",
                               log.name, "-p", str(proc.pid)], stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.3)
            j = load(args, port, case)
        finally:
            st.send_signal(signal.SIGINT)
            st.wait(10)
        counts = {}
        for line in log:
            f = line.strip().split(",")
            if len(f) > 3 and f[0].replace(".", "").isdigit():
                name = f[2].replace("raw_syscalls:sys_enter", "all syscalls")
                counts[name.replace("syscalls:sys_enter_", "")] = float(f[0])
    return {k: v / j["ops"] for k, v in counts.items() if v}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bins", default="darner=target/release/darner")
    ap.add_argument("--bench", default="target/release/darner-bench")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--cases", default=",".join(c for c in CASES if c != "mget10-track"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--time", type=float, default=3)
    ap.add_argument("--syscalls", action="store_true")
    a = ap.parse_args()
    bins = [b.split("=", 1) for b in a.bins.split(",")]
    cases = a.cases.split(",")
    for c in cases:
        if c not in CASES:
            ap.error(f"unknown case {c} (one of {', '.join(CASES)})")
    servers = {}
    runs = {}
    users = {}
    try:
        for name, path in bins:
            for t in [int(x) for x in a.threads.split(",")]:
                servers[(name, t)] = start(path, t)
        for case in cases:
            if a.syscalls:
                for (name, t), (p, port) in servers.items():
                    per = syscall_run(a, p, port, case)
                    print(f"{case:8} {name} --threads {t}: " + ", ".join(
                        f"{k} {v:.3f}" for k, v in per.items()) + " per op", flush=True)
                continue
            for r in range(a.rounds):
                for (name, t), (p, port) in servers.items():
                    us, user, ops = cpu_run(a, p, port, case)
                    runs.setdefault((case, name, t), []).append(us)
                    users.setdefault((case, name, t), []).append(user)
                    print(f"  {case:8} round {r + 1} {name} --threads {t}: {us:6.2f} us/op, "
                          f"user {user:6.2f} ({ops:,.0f} ops/s)", flush=True)
    finally:
        for p, _ in servers.values():
            stop_process(p)
    if runs:
        print("\n| case | " + " | ".join(f"{n} t{t}" for n, t in servers) + " |")
        print("| --- |" + " ---: |" * len(servers))
        for case in cases:
            cells = []
            for n, t in servers:
                rr = runs[(case, n, t)]
                cells.append(f"{statistics.median(rr):.2f} ({min(rr):.2f}-{max(rr):.2f})")
            print(f"| {case} | " + " | ".join(cells) + " |")
        print("\n(us of server CPU per operation, median of the rounds (range))")
        print("\n| case, user space only | " + " | ".join(f"{n} t{t}" for n, t in servers) + " |")
        print("| --- |" + " ---: |" * len(servers))
        for case in cases:
            print(f"| {case} | " + " | ".join(
                f"{statistics.median(users[(case, n, t)]):.2f}" for n, t in servers) + " |")


if __name__ == "__main__":
    main()
