#!/usr/bin/env python3
"""The append-only file's cost on writes: darner vs redis-server, same machine, same run
(issue 14).

Load: redis-benchmark SET of --value-size byte values on a 1,000,000-key space, --clients
connections (50), pipeline --pipeline (4). For each server, each case on a fresh process in
a fresh temp dir (under --dir: put it on the disk you want to measure; tmpfs makes fsync
free):

  no AOF     --appendonly no
  everysec   --appendonly yes --appendfsync everysec
  always     --appendonly yes --appendfsync always (each reply waits for its fsync; group
             commit lets 50 clients share them)

It prints ops/s per case and server, then the ratios: everysec / no AOF for each server, and
darner always / redis always.

Targets (issue 14): darner everysec >= 0.9x darner without AOF; darner always with 50 clients
>= 2x redis always.

What group commit saves depends on what an fsync costs: the bench measures it (a 2 KiB write
and fdatasync in --dir, median of 50) before each `always` case and prints the median. On
this VM's disk an fsync takes 0.2 ms when nothing else writes and several ms while other
I/O runs; --disk-load keeps a second writer busy on the same disk during every case (1 MiB
writes, each fdatasynced), for both servers alike, so `always` can be compared where fsyncs
cost what they cost on a busy or networked disk.

Each case runs --repeat times, darner and redis alternating; figures are medians of the runs,
ratios medians of the per-run ratios. Servers bind 127.0.0.1 on free ports, every case is
bounded (-n requests, and a timeout), and every server is stopped whatever happens.

Usage: bench/aof.py [--darner target/release/darner] [--redis redis-server] [--threads 2]
                    [--requests 1000000] [--always-requests 300000] [--clients 50]
                    [--pipeline 4] [--value-size 16] [--repeat 3] [--dir /var/tmp]
                    [--servers darner,redis] [--disk-load]
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
from benchlib import free_port, machine_line, cpu_seconds, Server  # noqa: E402

CASES = {
    "no AOF": ["--appendonly", "no"],
    "everysec": ["--appendonly", "yes", "--appendfsync", "everysec"],
    "always": ["--appendonly", "yes", "--appendfsync", "always"],
}


def start(kind, args, case, workdir):
    port = free_port()
    common = ["--port", str(port), "--bind", "127.0.0.1", "--dir", workdir, "--save", "",
              "--loglevel", "warning", "--logfile", os.path.join(workdir, "server.log")]
    if kind == "darner":
        argv = [args.darner, "--threads", str(args.threads)] + common + CASES[case]
    else:
        argv = [args.redis] + common + CASES[case]
    return Server(kind, argv, port)


def run_case(args, kind, case):
    """(ops/s, server CPU-milliseconds per 1000 ops, command line) of one fresh server."""
    workdir = tempfile.mkdtemp(prefix="aofbench-%s-" % kind, dir=args.dir)
    srv = None
    try:
        srv = start(kind, args, case, workdir)
        n = args.always_requests if case == "always" else args.requests
        cmd = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(srv.port), "-c", str(args.clients),
               "-n", str(n), "-r", "1000000", "-d", str(args.value_size), "-t", "set",
               "-P", str(args.pipeline), "--csv", "-q"]
        c0 = cpu_seconds(srv.proc.pid)
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout).stdout
        c1 = cpu_seconds(srv.proc.pid)
        rps = 0.0
        for line in out.splitlines():
            parts = [p.strip('"') for p in line.split(",")]
            if len(parts) >= 2 and parts[0].upper().startswith("SET"):
                rps = float(parts[1])
        if rps <= 0:
            raise RuntimeError("no figure from redis-benchmark for %s %s: %r" % (kind, case, out))
        return rps, (c1 - c0) * 1e6 / n, " ".join(cmd)
    finally:
        if srv is not None:
            srv.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def fsync_ms(directory):
    """Median milliseconds of a 2 KiB append + fdatasync in `directory` (50 of them)."""
    path = os.path.join(directory, "fsync-probe-%d" % os.getpid())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        times = []
        for _ in range(50):
            t = time.perf_counter()
            os.write(fd, b"x" * 2048)
            os.fdatasync(fd)
            times.append(time.perf_counter() - t)
    finally:
        os.close(fd)
        os.unlink(path)
    return med(times) * 1000


def disk_writer(directory, stop):
    """--disk-load: 1 MiB writes, each fdatasynced, into one file (rewound every 256 MiB)."""
    path = os.path.join(directory, "disk-load-%d" % os.getpid())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    block = os.urandom(1 << 20)
    try:
        n = 0
        while not stop.is_set():
            if n % 256 == 0:
                os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, block)
            os.fdatasync(fd)
            n += 1
    finally:
        os.close(fd)
        os.unlink(path)


def med(v):
    v = sorted(v)
    return v[len(v) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--darner", default="target/release/darner")
    ap.add_argument("--redis", default="redis-server")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--always-requests", type=int, default=300_000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--pipeline", type=int, default=4)
    ap.add_argument("--value-size", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=300, help="seconds per case at most")
    ap.add_argument("--dir", default=None, help="where the temp dirs go (default: $TMPDIR)")
    ap.add_argument("--servers", default="darner,redis")
    ap.add_argument("--disk-load", action="store_true",
                    help="a second writer keeps the disk busy during every case")
    args = ap.parse_args()
    kinds = args.servers.split(",")
    version = subprocess.run([args.redis, "--version"], capture_output=True, text=True).stdout
    print("# %s" % machine_line())
    print("# darner --threads %d vs %s" % (args.threads, version.strip()))
    print("# SET, %d clients, pipeline %d, %d-byte values, 1,000,000-key space; dirs under %s"
          % (args.clients, args.pipeline, args.value_size, args.dir or tempfile.gettempdir()))
    res = {}  # (kind, case) -> [(rps, cpu per 1000)]
    fsyncs = []
    cmd = ""
    probe_dir = args.dir or tempfile.gettempdir()
    stop = mp.Event()
    loader = None
    if args.disk_load:
        loader = mp.Process(target=disk_writer, args=(probe_dir, stop), daemon=True)
        loader.start()
    try:
        for _ in range(args.repeat):
            for case in CASES:
                for kind in kinds:
                    if case == "always":
                        fsyncs.append((kind, fsync_ms(probe_dir)))
                    rps, cpu, cmd = run_case(args, kind, case)
                    res.setdefault((kind, case), []).append((rps, cpu))
    finally:
        stop.set()
        if loader is not None:
            loader.join(30)
    print("%-10s" % "case" + "".join("%16s%14s" % (k + " ops/s", "cpu-ms/1k") for k in kinds))
    for case in CASES:
        row = "%-10s" % case
        for kind in kinds:
            runs = res[(kind, case)]
            row += "%16s%14.2f" % ("{:,.0f}".format(med([r[0] for r in runs])),
                                   med([r[1] for r in runs]))
        print(row)
    print()

    def ratio(a, b):
        pairs = [x[0] / max(y[0], 1) for x, y in zip(res[a], res[b])]
        return med(pairs), min(pairs), max(pairs)

    for kind in kinds:
        r, lo, hi = ratio((kind, "everysec"), (kind, "no AOF"))
        target = "  (target >= 0.90)" if kind == "darner" else ""
        print("%-7s everysec / no AOF:        %.2f  [%.2f-%.2f]%s" % (kind, r, lo, hi, target))
    if "darner" in kinds and "redis" in kinds:
        r, lo, hi = ratio(("darner", "always"), ("redis", "always"))
        print("darner always / redis always (%d clients): %.2f  [%.2f-%.2f]  (target >= 2.0)"
              % (args.clients, r, lo, hi))
    # Each `always` run with the fsync latency measured just before it: the ratio follows it.
    print("# always, run by run (a 2 KiB write + fdatasync just before each%s):"
          % (", with --disk-load" if args.disk_load else ""))
    for kind in kinds:
        lat = [ms for k, ms in fsyncs if k == kind]
        print("#   %-7s %s" % (kind, "  ".join(
            "{:,.0f} ops/s ({:.2f} ms)".format(r[0], ms)
            for r, ms in zip(res[(kind, "always")], lat))))
    print("# medians of %d runs; ratios: medians of per-run ratios [range]" % args.repeat)
    print("# last command: %s" % cmd.split(" -p ")[0] + " -p PORT " + cmd.split(" -p ")[1].split(" ", 1)[1])


if __name__ == "__main__":
    sys.exit(main())
