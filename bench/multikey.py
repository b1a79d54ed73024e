#!/usr/bin/env python3
"""Multi-key commands across threads: redis-server, darner --threads 1 and darner --threads 2
in the same run, under the same load from darner-bench (issue 12's targets).

Cases (closed loop, --connections in all, --key-maximum 1,000,000, uniform keys, 32-byte
values, each --time seconds):
  mset10   MSET of 10 keys                 (`--command mset:10`)
  mget10   MGET of 10 keys                 (`--command mget:10`)
  del10    DEL of 10 keys: MSET/DEL pairs  (`--command mset-del:10 --key-prefix md:`), an MSET
           of 10 keys then a DEL of the same 10, each counted as an operation, so that every
           DEL deletes 10 keys that are there (a DEL of random keys would empty the key space
           in seconds and then time DELs of missing keys). Its own key prefix: the MSETs insert
           and the DELs remove. Its figures are of the pair mix, half MSETs (compare with
           mset10 to see what the DELs add). DEL's own cost is not split out: taking the MSETs'
           share away at the mset10 rate of another run triples that run's noise (tried: the
           estimate for redis moved between 99,000 and 720,000 DELs per CPU-s over two runs).
  get, set          GET / SET, unpipelined
  get-p16, set-p16  GET / SET, 16 requests in flight per connection
Before the cases each server is filled with key:0 .. key:999999 (32-byte values), so every
GET and MGET hits and every SET and MSET overwrites, on every server alike.

Layouts: unpinned (no taskset for anyone) and pinned (every server on the first core, taskset;
darner-bench on the second). The three servers run side by side (idle ones use no CPU); each
case runs --repeat rounds, each round running redis, darner-t1 and darner-t2 one after the
other. Figures are medians over the rounds; each ratio is the median of the rounds' ratios (a
round's runs share the machine's moment).

Reported: ops/s and ops per server CPU-second (utime+stime of the server process from
/proc/<pid>/stat over the run, all its threads), the ratios darner-t2 / redis, darner-t1 /
redis and darner-t2 / darner-t1, as markdown, and issue 12's targets marked met / not met:
  MSET, MGET, DEL of 10, darner-t2 / redis: ops/s >= 1.0 and per CPU-s >= 1.0 unpinned,
    per CPU-s >= 0.9 pinned;
  GET, darner-t2 / darner-t1 per CPU-s >= 0.9 (both layouts);
  GET, SET per CPU-s, darner-t1 / redis, pinned (bench/compare.py's layout): >= 1.1
    unpipelined, >= 1.5 pipelined.

Servers bind 127.0.0.1 on free ports, every run is bounded (--time plus a timeout), and every
server is stopped whatever happens.

Usage: bench/multikey.py [--quick] [--darner target/release/darner]
           [--bench target/release/darner-bench] [--redis /usr/bin/redis-server]
           [--repeat 3] [--time 3] [--connections 50] [--client-threads 1]
           [--layouts unpinned,pinned] [--cases mset10,mget10,...] [--json FILE]
  --quick: one round of 1 s per case, under a minute.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import free_port, cpu_seconds, cores_available, machine_line, Server  # noqa: E402

KEYS = 1_000_000
VALUE_SIZE = 32  # darner-bench's default --data-size
CASES = {
    "mset10": ("MSET of 10", ["--command", "mset:10"]),
    "mget10": ("MGET of 10", ["--command", "mget:10"]),
    "del10": ("DEL of 10 (MSET+DEL pairs)", ["--command", "mset-del:10", "--key-prefix", "md:"]),
    "get": ("GET", ["--command", "get"]),
    "set": ("SET", ["--command", "set"]),
    "get-p16": ("GET, pipeline 16", ["--command", "get", "--pipeline", "16"]),
    "set-p16": ("SET, pipeline 16", ["--command", "set", "--pipeline", "16"]),
}
SERVERS = ["redis", "darner-t1", "darner-t2"]
LAYOUTS = ["unpinned", "pinned"]


def med(v):
    v = sorted(x for x in v if x == x)  # NaNs out
    if not v:
        return float("nan")
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def start_server(args, name, core):
    port = free_port()
    if name == "redis":
        argv = [args.redis, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--loglevel", "warning"]
    else:
        threads = name.split("-t")[1]
        argv = [args.darner, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--threads", threads,
                "--loglevel", "warning"]
    return Server(name, argv, port, core)


def read_exactly(s, n):
    got = bytearray()
    while len(got) < n:
        chunk = s.recv(max(65536, n - len(got)))
        if not chunk:
            raise RuntimeError("connection closed while loading")
        got += chunk
    return bytes(got)


def fill(port):
    """key:0 .. key:999999 -> 32-byte values, MSETs of 1000 keys, pipelined; checks DBSIZE."""
    value = b"x" * VALUE_SIZE
    per, batch = 1000, 20  # keys per MSET, MSETs per write
    with socket.create_connection(("127.0.0.1", port)) as s:
        for first in range(0, KEYS, per * batch):
            buf = bytearray()
            sent = 0
            for start in range(first, min(KEYS, first + per * batch), per):
                keys = range(start, min(KEYS, start + per))
                buf += b"*%d\r\n$4\r\nMSET\r\n" % (1 + 2 * len(keys))
                for i in keys:
                    k = b"key:%d" % i
                    buf += b"$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(value), value)
                sent += 1
            s.sendall(buf)
            reply = read_exactly(s, 5 * sent)
            if reply != b"+OK\r\n" * sent:
                raise RuntimeError(f"MSET while loading: {reply[:80]!r}")
        s.sendall(b"DBSIZE\r\n")
        reply = read_exactly(s, len(b":%d\r\n" % KEYS))
        if reply != b":%d\r\n" % KEYS:
            raise RuntimeError(f"DBSIZE after loading: {reply!r}")


def run_bench(args, server, extra, client_core):
    threads = args.client_threads
    conns = max(1, -(-args.connections // threads))
    cmd = [args.bench, "--port", str(server.port), "--threads", str(threads),
           "--connections", str(conns), "--key-maximum", str(KEYS), "--test-time",
           str(args.time), "--json"] + extra
    if client_core is not None:
        cmd = ["taskset", "-c", str(client_core)] + cmd
    c0 = cpu_seconds(server.proc.pid)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.time + 120)
    c1 = cpu_seconds(server.proc.pid)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {out.stderr.strip()}")
    j = json.loads(out.stdout)
    cpu = c1 - c0
    return {
        "ops": j["ops"], "ops_per_sec": j["ops_per_sec"], "cpu_s": cpu,
        "ops_per_cpu_s": j["ops"] / cpu if cpu > 0 else float("nan"),
        "errors": j["errors"], "hits": j["hits"], "misses": j["misses"],
        "by_type": {k: v["ops"] for k, v in j.get("by_type", {}).items()},
        "command": " ".join(cmd).replace(str(server.port), "PORT"),
    }


def run_layout(args, layout, cases, cores):
    server_core, client_core = (cores[0], cores[1]) if layout == "pinned" else (None, None)
    servers = {}
    runs = {c: {s: [] for s in SERVERS} for c in cases}
    try:
        for name in SERVERS:
            servers[name] = start_server(args, name, server_core)
            t = time.time()
            fill(servers[name].port)
            print(f"# {layout}: {name} filled with {KEYS:,} keys in {time.time() - t:.1f} s",
                  flush=True)
        for case in cases:
            for rnd in range(args.repeat):
                for name in SERVERS:
                    r = run_bench(args, servers[name], CASES[case][1], client_core)
                    runs[case][name].append(r)
                    print(f"  {layout:<8} {case:<8} round {rnd + 1} {name:<9} "
                          f"{r['ops_per_sec']:>11,.0f} ops/s {r['ops_per_cpu_s']:>11,.0f} "
                          f"ops/cpu-s  errors {r['errors']}", flush=True)
    finally:
        for s in servers.values():
            s.stop()
    return runs


def summarize(runs, case):
    """Medians of the figures and of the rounds' ratios for one case of one layout."""
    rr = runs[case]
    n = min(len(rr[s]) for s in SERVERS)
    row = {}
    for s in SERVERS:
        row[f"{s} ops/s"] = med([r["ops_per_sec"] for r in rr[s]])
        row[f"{s} cpu"] = med([r["ops_per_cpu_s"] for r in rr[s]])
        row[f"{s} errors"] = sum(r["errors"] for r in rr[s])
    for a, b, key in [("darner-t2", "redis", "t2/redis"), ("darner-t1", "redis", "t1/redis"),
                      ("darner-t2", "darner-t1", "t2/t1")]:
        for unit, field in [("ops/s", "ops_per_sec"), ("cpu", "ops_per_cpu_s")]:
            ratios = [rr[a][i][field] / rr[b][i][field] for i in range(n)
                      if rr[b][i][field] > 0]
            row[f"{key} {unit}"] = med(ratios)
            row[f"{key} {unit} rounds"] = ratios
    return row


def fmt(x, ratio=False):
    if x != x:
        return "n/a"
    return f"{x:.2f}" if ratio else f"{x:,.0f}"


def targets(results):
    """(target, layout, measured, threshold) for each of issue 12's targets measured."""
    t = []

    def get(layout, case, key):
        row = results.get(layout, {}).get(case)
        return None if row is None else (row[key], row[f"{key} rounds"])

    for case, name in [("mset10", "MSET of 10"), ("mget10", "MGET of 10"),
                       ("del10", "DEL of 10 (MSET+DEL pairs)")]:
        t.append((f"{name}: darner-t2 / redis ops/s", "unpinned",
                  get("unpinned", case, "t2/redis ops/s"), 1.0))
        t.append((f"{name}: darner-t2 / redis per CPU-s", "unpinned",
                  get("unpinned", case, "t2/redis cpu"), 1.0))
        t.append((f"{name}: darner-t2 / redis per CPU-s", "pinned",
                  get("pinned", case, "t2/redis cpu"), 0.9))
    for layout in LAYOUTS:
        t.append(("GET: darner-t2 / darner-t1 per CPU-s", layout,
                  get(layout, "get", "t2/t1 cpu"), 0.9))
    for case, name, need in [("get", "GET", 1.1), ("set", "SET", 1.1),
                             ("get-p16", "GET pipeline 16", 1.5),
                             ("set-p16", "SET pipeline 16", 1.5)]:
        t.append((f"{name}: darner-t1 / redis per CPU-s", "pinned",
                  get("pinned", case, "t1/redis cpu"), need))
    return [(name, layout, got[0], got[1], need) for name, layout, got, need in t
            if got is not None]


def markdown(args, results, header):
    lines = header[:]
    for layout, rows in results.items():
        where = ("nothing pinned" if layout == "unpinned" else
                 f"every server on core {args.cores[0]}, darner-bench on core {args.cores[1]}")
        lines += ["", f"**{layout}** ({where}):", "",
                  "| case | redis ops/s | darner-t1 ops/s | darner-t2 ops/s | t2/redis | t1/redis "
                  "| redis ops/CPU-s | darner-t1 ops/CPU-s | darner-t2 ops/CPU-s | t2/redis "
                  "| t1/redis | t2/t1 |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
                  "| ---: |"]
        for case, row in rows.items():
            errs = sum(row[f"{s} errors"] for s in SERVERS)
            label = CASES[case][0] + (f" ({errs} errors)" if errs else "")
            lines.append(
                f"| {label} | " + " | ".join(fmt(row[f"{s} ops/s"]) for s in SERVERS) + " | "
                f"{fmt(row['t2/redis ops/s'], True)} | {fmt(row['t1/redis ops/s'], True)} | "
                + " | ".join(fmt(row[f"{s} cpu"]) for s in SERVERS) + " | "
                f"{fmt(row['t2/redis cpu'], True)} | {fmt(row['t1/redis cpu'], True)} | "
                f"{fmt(row['t2/t1 cpu'], True)} |")
    tg = targets(results)
    if tg:
        lines += ["", "Issue 12's targets:", "",
                  "| target | layout | measured | rounds | needed | |",
                  "| --- | --- | ---: | ---: | ---: | --- |"]
        for name, layout, got, rounds, need in tg:
            mark = "n/a" if got != got else ("met" if got >= need else "**not met**")
            spread = (f"{min(rounds):.2f}-{max(rounds):.2f}" if len(rounds) > 1 else "")
            lines.append(f"| {name} | {layout} | {fmt(got, True)} | {spread} | {need:.1f} "
                         f"| {mark} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="one round of 1 s per case")
    ap.add_argument("--darner", default="target/release/darner")
    ap.add_argument("--bench", default="target/release/darner-bench")
    ap.add_argument("--redis", default="/usr/bin/redis-server")
    ap.add_argument("--repeat", type=int, help="rounds per case (3; --quick 1)")
    ap.add_argument("--time", type=float, help="seconds per run (3; --quick 1)")
    ap.add_argument("--connections", type=int, default=50, help="connections in all (50)")
    ap.add_argument("--client-threads", type=int, default=1, help="darner-bench threads (1)")
    ap.add_argument("--layouts", default=",".join(LAYOUTS))
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--json", help="also write the raw figures of every run here")
    args = ap.parse_args()
    args.repeat = args.repeat or (1 if args.quick else 3)
    args.time = args.time or (1.0 if args.quick else 3.0)
    cases = args.cases.split(",")
    layouts = args.layouts.split(",")
    for c in cases:
        if c not in CASES:
            ap.error(f"unknown case {c} (from {','.join(CASES)})")
    for lay in layouts:
        if lay not in LAYOUTS:
            ap.error(f"unknown layout {lay} (from {','.join(LAYOUTS)})")
    for b in (args.darner, args.bench):
        if not os.access(b, os.X_OK):
            ap.error(f"{b}: not an executable (cargo build --release)")
    if args.repeat < 1 or args.time <= 0 or args.client_threads < 1 or args.connections < 1:
        ap.error("--repeat, --time, --client-threads and --connections must be positive")
    args.cores = cores_available()
    if "pinned" in layouts and len(args.cores) < 2:
        ap.error("the pinned layout needs 2 cores (--layouts unpinned)")

    redis_version = subprocess.run([args.redis, "--version"], capture_output=True,
                                   text=True).stdout.strip()
    load_before = os.getloadavg()
    started = time.time()
    all_runs, results = {}, {}
    for layout in layouts:
        runs = run_layout(args, layout, cases, args.cores)
        all_runs[layout] = runs
        results[layout] = {c: summarize(runs, c) for c in cases}
    load_after = os.getloadavg()
    header = [f"Machine: {machine_line()}; load average {load_before[0]:.2f} before the run, "
              f"{load_after[0]:.2f} after. {redis_version.split(' sha=')[0]}.",
              "",
              f"Run: `{' '.join(sys.argv)}`, {time.time() - started:.0f} s: {args.repeat} "
              f"round(s) of {args.time:g} s per case and server, darner-bench with "
              f"{args.connections} connections on {args.client_threads} thread(s), "
              f"{KEYS:,} keys (filled first), 32-byte values. Figures: medians over the "
              "rounds; ratios: medians of the rounds' ratios. Per CPU-s: operations per second "
              "of server CPU (utime+stime, all threads)."]
    # DEL's sanity: each DEL of the pairs should delete 10 keys.
    for layout, runs in all_runs.items():
        for s in SERVERS:
            for r in runs.get("del10", {}).get(s, []):
                asked = r["hits"] + r["misses"]
                if asked and r["hits"] < 0.99 * asked:
                    header.append(f"\nWarning: {layout} {s}: the DELs deleted only "
                                  f"{r['hits']:,} of {asked:,} keys.")
    md = markdown(args, results, header)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"argv": sys.argv, "runs": all_runs, "results": results}, f, indent=1)
    print()
    print(md)


if __name__ == "__main__":
    sys.exit(main())
