#!/usr/bin/env python3
"""Snapshots: darner vs redis-server, same machine, same run (issue 14).

Dataset: --keys string keys of --value-size bytes plus one hash of --hash-fields fields (the
issue's figures are 1,000,000 keys of 1 KB and a 10,000,000-field hash; the defaults are
smaller so a run takes a minute on a laptop). For each server, on a fresh process in a temp
dir, it prints:

  SAVE           seconds the SAVE command took (darner: only if SAVE is built)
  BGSAVE         seconds from BGSAVE to rdb_bgsave_in_progress:0, while a writer process
                 overwrites random keys at full speed (pipelined SETs)
  peak/steady    the highest memory seen during BGSAVE over the RSS just before it. For Redis
                 the forked child counts too: the sum of both processes' Pss
                 (/proc/PID/smaps_rollup), sampled every 20 ms
  probe p99.9 / max   a probe process GETs one key in a loop during BGSAVE (one request at a
                 time): latency percentiles in ms of the GETs sent from the BGSAVE command to
                 rdb_bgsave_in_progress:0 (Redis's fork stalls it); and the same under the
                 same writer without a snapshot, --baseline seconds first
  load           seconds from start with the file to the first PING answered, not LOADING
                 (darner: only if loading is built)

Targets (issue 14): SAVE and BGSAVE at most 1.0x Redis's time with --threads 1 and faster with
2; peak memory during BGSAVE at most 1.1x darner's steady RSS (Redis's near 2x); probe p99.9
under 2 ms and max under 5 ms; load at most 0.8x Redis's.

--only load: load time alone. Each server is given the dataset, SAVEs and stops; then the
restarts alternate (darner, redis, darner, ...) --repeat times each, on the same files, and the
median, min and max of each are printed with the ratio of the medians (on a shared machine the
noise is large: compare medians, measured in the same run).

--only bigwrite (darner only, --threads forced to 1 so that every key shares the big hash's
shard): --repeat rounds on one server loaded once; each round resets the stats, starts the
probe (GETs of key:0 in a loop), sends BGSAVE, and --hit-after seconds later an HSET to the big
hash (a write to a big value the save has not written yet), then waits for the save's end. It
prints each round's HSET latency, the probe's max during the save, and the server's longest
loop turn (INFO's darner_eventloop_duration_max): how long the write held the other clients
of its shard.

Servers bind 127.0.0.1 on free ports, every phase is bounded in time, and each server is
stopped whatever happens.

Usage: bench/persistence.py [--darner target/release/darner] [--redis redis-server]
                            [--threads 2] [--keys 200000] [--value-size 1024]
                            [--hash-fields 1000000] [--servers darner,redis]
                            [--only bgsave|load] [--worst N] [--repeat 5]
--only bgsave skips SAVE and the load; --worst N prints the probe's N slowest GETs during
BGSAVE with their time after BGSAVE was sent (to place a stall).
"""
import argparse
import multiprocessing as mp
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import free_port, rss_bytes, machine_line, stop_process, wait_ready  # noqa: E402


def enc(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, port, timeout=600):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(1 << 20)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def reply(self):
        line = self._line()
        t = line[:1]
        if t == b"$":
            n = int(line[1:])
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.s.recv(1 << 20)
            v, self.buf = self.buf[:n], self.buf[n + 2:]
            return v
        if t == b"*":
            return [self.reply() for _ in range(int(line[1:]))]
        if t == b"-":
            raise RuntimeError(line.decode())
        return line[1:]

    def call(self, *args):
        self.s.sendall(enc(*args))
        return self.reply()

    def pipeline(self, cmds):
        self.s.sendall(b"".join(enc(*c) for c in cmds))
        return [self.reply() for _ in cmds]


def info(c, section):
    text = c.call("INFO", section).decode()
    return dict(l.split(":", 1) for l in text.split("\r\n") if ":" in l)


def load_dataset(port, keys, size, fields):
    c = Conn(port)
    value = os.urandom(size // 2).hex()[:size]
    batch = 1000
    for i in range(0, keys, batch):
        c.pipeline([("SET", "key:%d" % j, value) for j in range(i, min(keys, i + batch))])
    for i in range(0, fields, 10_000):
        args = ["HSET", "bighash"]
        for j in range(i, min(fields, i + 10_000)):
            args += ["f%d" % j, "v%d" % j]
        c.call(*args)


def writer(port, keys, size, stop):
    c = Conn(port)
    value = b"w" * size
    rnd = random.Random(1)
    while not stop.is_set():
        c.pipeline([("SET", "key:%d" % rnd.randrange(keys), value) for _ in range(100)])


def probe(port, stop, out):
    """GETs one key in a loop; puts (start, seconds) of each GET (time.perf_counter, the
    system's monotonic clock, so the parent can place them in time)."""
    c = Conn(port)
    lat = []
    while not stop.is_set():
        t = time.perf_counter()
        c.call("GET", "key:0")
        lat.append((t, time.perf_counter() - t))
    out.put(lat)


def worst(samples, since, n):
    """The n slowest GETs as 'ms@+s' (latency in ms at seconds after `since`), slowest first."""
    top = sorted(samples, key=lambda s: -s[1])[:n]
    return " ".join("%.1f@%+.3f" % (d * 1000, t - since) for t, d in top)


def pss(pid):
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def start(argv, port, cwd):
    p = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_ready(port, p, timeout=600)
    return p


def run_server(name, argv_of, args):
    res = {}
    d = tempfile.mkdtemp(prefix="persist-bench-")
    port = free_port()
    proc = start(argv_of(port), port, d)
    try:
        load_dataset(port, args.keys, args.value_size, args.hash_fields)
        c = Conn(port)
        time.sleep(1)
        steady = rss_bytes(proc.pid)
        res["steady_rss"] = steady
        # SAVE
        t = time.perf_counter()
        try:
            if args.only == "bgsave":
                raise RuntimeError("skipped (--only bgsave)")
            c.call("SAVE")
            res["save"] = time.perf_counter() - t
        except RuntimeError as e:
            res["save"] = None
            res["save_err"] = str(e)
        # The probe's latency under the same writes without a snapshot first (the baseline:
        # on a small machine the writer's pipelines, not the snapshot, may dominate it).
        stop = mp.Event()
        q = mp.Queue()
        w = mp.Process(target=writer, args=(port, args.keys, args.value_size, stop))
        pr = mp.Process(target=probe, args=(port, stop, q))
        w.start()
        pr.start()
        time.sleep(args.baseline)
        stop.set()
        lat = sorted(d for _, d in q.get(timeout=60))
        w.join(30)
        pr.join(30)
        res["base_p999_ms"] = lat[int(len(lat) * 0.999) - 1] * 1000 if lat else 0
        res["base_max_ms"] = lat[-1] * 1000 if lat else 0
        # BGSAVE under writes, with a probe.
        stop = mp.Event()
        q = mp.Queue()
        w = mp.Process(target=writer, args=(port, args.keys, args.value_size, stop))
        pr = mp.Process(target=probe, args=(port, stop, q))
        w.start()
        pr.start()
        time.sleep(1)
        steady = max(steady, rss_bytes(proc.pid))
        peak = 0
        t = time.perf_counter()
        res["bgsave_epoch"] = time.time()
        c.call("BGSAVE")
        while True:
            if name == "redis":
                mem = pss(proc.pid) + sum(pss(k) for k in children(proc.pid))
            else:
                mem = rss_bytes(proc.pid)
            peak = max(peak, mem)
            if info(c, "persistence").get("rdb_bgsave_in_progress") == "0":
                break
            if time.perf_counter() - t > 600:
                raise RuntimeError("BGSAVE did not finish")
            time.sleep(0.02)
        res["bgsave"] = time.perf_counter() - t
        stop.set()
        samples = q.get(timeout=60)
        res["worst"] = worst(samples, t, args.worst)
        # Only the GETs sent while the BGSAVE ran (the probe started a second before it).
        lat = sorted(d for s, d in samples if t <= s <= t + res["bgsave"])
        w.join(30)
        pr.join(30)
        res["peak"] = peak
        res["peak_ratio"] = peak / steady
        res["p999_ms"] = lat[int(len(lat) * 0.999) - 1] * 1000 if lat else 0
        res["max_ms"] = lat[-1] * 1000 if lat else 0
        res["probes"] = len(lat)
    finally:
        stop_process(proc)
    # Load time.
    if args.only != "bgsave" and os.path.exists(os.path.join(d, "dump.rdb")):
        res.update(time_load(argv_of, d))
    shutil.rmtree(d, ignore_errors=True)
    return res


def only_bigwrite(argv_of, args):
    """--only bigwrite: see the docstring. Returns the rounds' figures."""
    d = tempfile.mkdtemp(prefix="persist-bench-")
    port = free_port()
    proc = start(argv_of(port), port, d)
    rounds = []
    try:
        load_dataset(port, args.keys, args.value_size, args.hash_fields)
        c, w = Conn(port), Conn(port)
        for i in range(args.repeat):
            time.sleep(0.5)
            c.call("CONFIG", "RESETSTAT")
            stop = mp.Event()
            q = mp.Queue()
            pr = mp.Process(target=probe, args=(port, stop, q))
            pr.start()
            time.sleep(0.3)
            t0 = time.perf_counter()
            c.call("BGSAVE")
            time.sleep(args.hit_after)
            t = time.perf_counter()
            w.call("HSET", "bighash", "f0", "round%d" % i)
            hset = time.perf_counter() - t
            deadline = time.time() + 600
            while info(c, "persistence").get("rdb_bgsave_in_progress") != "0":
                if time.time() > deadline:
                    raise RuntimeError("BGSAVE did not finish")
                time.sleep(0.01)
            t1 = time.perf_counter()
            turn = int(info(c, "stats").get("darner_eventloop_duration_max", "0"))
            stop.set()
            lat = q.get(timeout=60)
            pr.join(timeout=10)
            during = [dt for (ts, dt) in lat if t0 <= ts <= t1]
            r = {"hset_ms": hset * 1000, "probe_max_ms": max(during) * 1000,
                 "turn_ms": turn / 1000, "bgsave": t1 - t0}
            rounds.append(r)
            print("round %d: HSET %.2f ms  probe max %.2f ms (%d GETs)  longest turn %.2f ms"
                  "  BGSAVE %.2f s" % (i + 1, r["hset_ms"], r["probe_max_ms"], len(during),
                                       r["turn_ms"], r["bgsave"]), flush=True)
    finally:
        stop_process(proc)
        shutil.rmtree(d, ignore_errors=True)
    for k in ("hset_ms", "probe_max_ms", "turn_ms"):
        v = sorted(r[k] for r in rounds)
        print("%-13s median %.2f ms (min %.2f, max %.2f, %d rounds)"
              % (k, v[len(v) // 2], v[0], v[-1], len(v)))
    return rounds


def time_load(argv_of, d):
    """Starts the server in `d` (which holds dump.rdb): {"load": seconds from start to the
    first PING answered, not LOADING; "loaded_keys": DBSIZE} or {"load": None, "load_err"}."""
    port = free_port()
    t = time.perf_counter()
    p = subprocess.Popen(argv_of(port), cwd=d, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        # PING answers -LOADING until the file is in: ready means loaded.
        wait_ready(port, p, timeout=600)
        res = {"load": time.perf_counter() - t}
        keys = Conn(port).call("DBSIZE")
        res["loaded_keys"] = int(keys) if keys is not None else -1
        return res
    except RuntimeError as e:
        return {"load": None, "load_err": str(e)}
    finally:
        stop_process(p)


def only_load(names, argv, args):
    """--only load: each server's file made once, then alternating timed restarts."""
    dirs = {}
    try:
        for name in names:
            d = tempfile.mkdtemp(prefix="persist-bench-")
            dirs[name] = d
            port = free_port()
            proc = start(argv[name](port), port, d)
            try:
                load_dataset(port, args.keys, args.value_size, args.hash_fields)
                Conn(port).call("SAVE")
            finally:
                stop_process(proc)
            print("%-7s dump.rdb %.0f MiB" % (name, os.path.getsize(os.path.join(d, "dump.rdb"))
                                              / 2**20))
        times = {name: [] for name in names}
        for i in range(args.repeat):
            for name in names:
                r = time_load(argv[name], dirs[name])
                if r["load"] is None:
                    raise RuntimeError("%s: %s" % (name, r["load_err"]))
                times[name].append(r["load"])
                print("run %d %-7s load %.3f s (%d keys)" % (i + 1, name, r["load"],
                                                             r["loaded_keys"]), flush=True)
        med = {}
        for name in names:
            t = sorted(times[name])
            med[name] = t[len(t) // 2] if len(t) % 2 else (t[len(t) // 2 - 1] + t[len(t) // 2]) / 2
            print("%-7s load median %.3f s  (min %.3f, max %.3f, %d runs)"
                  % (name, med[name], t[0], t[-1], len(t)))
        if "darner" in med and "redis" in med:
            print("darner/redis: load %.2fx (medians)" % (med["darner"] / med["redis"]))
    finally:
        for d in dirs.values():
            shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--darner", default="target/release/darner")
    ap.add_argument("--redis", default="redis-server")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--keys", type=int, default=200_000)
    ap.add_argument("--value-size", type=int, default=1024)
    ap.add_argument("--hash-fields", type=int, default=1_000_000)
    ap.add_argument("--servers", default="darner,redis")
    ap.add_argument("--baseline", type=float, default=3.0,
                    help="seconds of the writer and the probe without a snapshot first")
    ap.add_argument("--only", choices=["all", "bgsave", "load", "bigwrite"], default="all",
                    help="bgsave: skip SAVE and the load (quicker runs for the probe); "
                         "load: time only the restart with the file (see the docstring)")
    ap.add_argument("--worst", type=int, default=0,
                    help="print the probe's N slowest GETs during BGSAVE as ms@seconds "
                         "after BGSAVE was sent (BGSAVE's own time is printed too)")
    ap.add_argument("--repeat", type=int, default=5,
                    help="with --only load: restarts each; with --only bigwrite: rounds")
    ap.add_argument("--hit-after", type=float, default=0.05,
                    help="with --only bigwrite: seconds from BGSAVE to the HSET")
    args = ap.parse_args()
    print(machine_line())
    print("dataset: %d keys of %d bytes + a hash of %d fields; darner --threads %d"
          % (args.keys, args.value_size, args.hash_fields, args.threads))
    darner = os.path.abspath(args.darner)
    argv = {
        "darner": lambda port: [darner, "--port", str(port), "--bind", "127.0.0.1",
                                "--save", "", "--threads", str(args.threads)],
        "redis": lambda port: [args.redis, "--port", str(port), "--bind", "127.0.0.1",
                               "--save", "", "--appendonly", "no"],
    }
    if args.only == "bigwrite":
        args.threads = 1
        print("bigwrite: darner --threads 1, HSET %.3f s after BGSAVE" % args.hit_after)
        only_bigwrite(argv["darner"], args)
        return
    if args.only == "load":
        only_load(args.servers.split(","), argv, args)
        return
    results = {}
    for name in args.servers.split(","):
        results[name] = run_server(name, argv[name], args)
        r = results[name]
        fmt = lambda v, f="%.2f s": "n/a" if v is None else f % v  # noqa: E731
        print("%-7s SAVE %s  BGSAVE %s  peak/steady %.2f (%.0f / %.0f MiB)  probe p99.9 %.2f ms"
              " max %.2f ms (%d GETs; without BGSAVE %.2f / %.2f ms)  load %s%s"
              % (name, fmt(r.get("save")), fmt(r["bgsave"]), r["peak_ratio"],
                 r["peak"] / 2**20, r["steady_rss"] / 2**20, r["p999_ms"], r["max_ms"],
                 r["probes"], r["base_p999_ms"], r["base_max_ms"], fmt(r.get("load")),
                 ("  (" + r["save_err"] + ")") if r.get("save_err") else ""))
        if args.worst:
            print("        slowest GETs (ms@s after BGSAVE, sent at %.3f): %s"
                  % (r["bgsave_epoch"], r["worst"]))
    if "darner" in results and "redis" in results:
        d, r = results["darner"], results["redis"]

        def ratio(k):
            if d.get(k) is None or r.get(k) in (None, 0):
                return "n/a"
            return "%.2fx" % (d[k] / r[k])
        print("darner/redis: SAVE %s  BGSAVE %s  load %s  peak/steady darner %.2f redis %.2f"
              % (ratio("save"), ratio("bgsave"), ratio("load"), d["peak_ratio"],
                 r["peak_ratio"]))


if __name__ == "__main__":
    main()
