#!/usr/bin/env python3
"""Overhead of client tracking: darner vs redis-server, same machine, same run.

For each server, 50 RESP3 clients send unpipelined GETs of random keys (10,000-key space)
for --seconds, once without tracking and once with CLIENT TRACKING on (alternating, --repeat
times), while one writer SETs random keys at --writes per second (so tracking clients get
invalidations); a probe measures how long an invalidation takes to arrive after the write is
sent (a tracking connection reads a key, another writes it). Prints GET ops/s, the ratio
tracking/no-tracking, and the latency p50/p99/max, for both servers. The load generator is
bench/tracking_load (built here with cargo).

Servers bind 127.0.0.1 on free ports and are always stopped.

Usage: bench/tracking.py [--darner target/release/darner] [--threads 2] [--clients 50]
                         [--seconds 5] [--repeat 3] [--writes 1000] [--probes 500]
                         [--load-sched 0|N|idle] [--probe-nice 0]

With --load-sched idle --probe-nice -10 (as root), the 50 GET threads and the writer yield the
cores to the servers and to the probe: on a machine where everything shares 2 cores, that
stands in for a load generator on cores of its own, so that the latency measured is the
server's path rather than the probe's wait for a core. GET/s and GET/cpu-s figures of such a
run are not the overhead measurement (the servers then wake for nearly every request).
"""
import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from benchlib import cpu_seconds, free_port, stop_process, wait_ready  # noqa: E402


def start(argv, port):
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(port, proc)
    except Exception:
        proc.kill()
        raise
    return proc


def run_load(tool, port, a, tracking, pid):
    cpu0 = cpu_seconds(pid)
    nice = ["nice", "-n", str(a.probe_nice)] if a.probe_nice else []
    out = subprocess.run(
        nice + [tool, str(port), str(a.clients), str(a.seconds), "1" if tracking else "0", "10000",
         str(a.writes), str(a.probes if tracking else 0), a.load_sched],
        capture_output=True, text=True, timeout=a.seconds * 4 + 60, check=True).stdout
    f = dict(kv.split("=") for kv in out.split())
    f = {k: float(v) for k, v in f.items()}
    f["ops"] = f["gets"] / f["secs"]
    # GETs per second of server CPU (utime + stime): the server's own cost, apart from how
    # the 2 cores are shared with the load generator's threads.
    f["ops_cpu"] = f["gets"] / max(cpu_seconds(pid) - cpu0, 1e-9)
    return f


def main():
    root = os.path.dirname(HERE)
    p = argparse.ArgumentParser()
    p.add_argument("--darner", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target")), "release", "darner"))
    p.add_argument("--redis", default="redis-server")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--writes", type=int, default=1000)
    p.add_argument("--probes", type=int, default=500)
    p.add_argument("--load-sched", default="0",
                   help="the load generator's GET and SET threads: a nice value, or idle "
                        "(SCHED_IDLE: they run only when nothing else wants the core)")
    p.add_argument("--probe-nice", type=int, default=0,
                   help="nice value the load generator starts at, which its probe keeps (below 0 "
                        "needs root)")
    a = p.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q"], cwd=os.path.join(HERE, "tracking_load"),
                   check=True)
    tool = os.path.join(HERE, "tracking_load", "target", "release", "tracking-load")
    results = {}
    for name in ("darner", "redis"):
        port = free_port()
        argv = ([a.darner, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                 "--threads", str(a.threads)]
                if name == "darner" else
                [a.redis, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        proc = start(argv, port)
        try:
            plain, tracked = [], []
            for _ in range(a.repeat):
                plain.append(run_load(tool, port, a, False, proc.pid))
                tracked.append(run_load(tool, port, a, True, proc.pid))
        finally:
            stop_process(proc)
        results[name] = (plain, tracked)
    print(f"# {a.clients} clients, unpipelined GETs over 10,000 keys, {a.writes} SET/s, "
          f"{a.seconds:g} s x {a.repeat}; darner --threads {a.threads}; "
          f"load threads at {a.load_sched}, probe at nice {a.probe_nice}")
    print(f"{'server':8} {'GET/s plain':>12} {'GET/s tracking':>15} {'ratio':>6} "
          f"{'GET/cpu-s plain':>16} {'tracking':>9} {'ratio':>6} "
          f"{'pushes/s':>9} {'inval p50':>10} {'p99':>8} {'max':>8}")
    for name, (plain, tracked) in results.items():
        po = statistics.median(r["ops"] for r in plain)
        to = statistics.median(r["ops"] for r in tracked)
        pushes = statistics.median(r["pushes"] / r["secs"] for r in tracked)
        p50 = statistics.median(r["lat_p50_us"] for r in tracked)
        p99 = statistics.median(r["lat_p99_us"] for r in tracked)
        mx = max(r["lat_max_us"] for r in tracked)
        pc = statistics.median(r["ops_cpu"] for r in plain)
        tc = statistics.median(r["ops_cpu"] for r in tracked)
        print(f"{name:8} {po:12,.0f} {to:15,.0f} {to / po:6.2f} {pc:16,.0f} {tc:9,.0f} "
              f"{tc / pc:6.2f} {pushes:9,.0f} {p50:8.0f}us {p99:6.0f}us {mx:6.0f}us")
    print("# ratio: with tracking / without (target: >= 0.85); GET/cpu-s: GETs per second of "
          "server CPU; inval: time from sending the write to receiving the invalidation "
          "(median over runs of each run's percentile)")


if __name__ == "__main__":
    main()
