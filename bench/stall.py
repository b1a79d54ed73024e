#!/usr/bin/env python3
"""Does one big key stall the other clients? darner vs redis-server, same run, same flags.

One hash of N fields (UUIDv4 field -> 16-byte value, default 1,000,000; the issue's case is
--fields 10000000) is loaded into each server. Then, for each operation on it (HGETALL of the
whole hash, DEL, UNLINK, expiry, FLUSHALL), a probe process sends GETs on 16 other keys (some
on the big key's shard) one at a time and records every latency while a second client runs
the operation; the hash is reloaded between operations. The "idle" operation does nothing for
a second: its row is the machine's own noise floor. The whole-collection reads of the
other types run on a value of the same size: SMEMBERS of a set of N UUIDs, LRANGE 0 -1 of a
list of N UUIDs, ZRANGE 0 -1 WITHSCORES of a sorted set of N UUIDs scored 0..N-1, XRANGE - + and
XREVRANGE + - of a stream of N entries (`id` a UUID, `n` a counter; ops xrange, xrevrange). Printed per server and operation:
the probe's p50, p99.9 and max latency during the operation, how long the operation took
for the client that sent it, and, for darner, its own longest event loop turn from the start of
the operation to a second after it (INFO's `darner_eventloop_duration_max` after a CONFIG
RESETSTAT): the longest any client could have waited behind other work, apart from the
machine's own noise, which the probe's max also contains. When both servers ran, a last table
gives, per operation, darner's probe p99.9 and max over redis-server's (same run).

Servers bind 127.0.0.1 on free ports, every step is bounded, and both servers are stopped
whatever happens.

With --pin (on a machine of 2 cores or more), each server runs on core 0 and the probe and
the client on core 1 (the client reading a big reply at nice 10, so that it gives way to the
probe), so the scheduler never makes the server wait behind them: the probe's figures are
then the server's own (use it with --threads 1, which also puts the big key and
every probed key on one shard, the hardest case for darner).

Usage: bench/stall.py [--darner target/release/darner] [--threads 2] [--fields 1000000]
                      [--ops idle,hgetall,smembers,lrange,zrange,xrange,xrevrange,del,unlink,
                             expire,flushall]
                      [--pin] [--servers darner,redis]
"""
import argparse
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import free_port, wait_ready, stop_process  # noqa: E402


def command(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(1 << 20)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _fill(self, n):
        while len(self.buf) < n:
            chunk = self.s.recv(max(1 << 20, n - len(self.buf)))
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk

    def _skip(self, n):
        self._fill(n)
        self.buf = self.buf[n:]

    def reply(self):
        """Reads one reply; aggregates are skipped over (only their size matters here)."""
        line = self._line()
        t = line[:1]
        if t in (b"+", b"-", b":"):
            return line
        if t == b"$":
            n = int(line[1:])
            if n >= 0:
                self._skip(n + 2)
            return line
        if t in (b"*", b"%"):
            n = int(line[1:]) * (2 if t == b"%" else 1)
            for _ in range(max(n, 0)):
                self.reply()
            return line
        raise ValueError("unexpected reply %r" % line)

    def call(self, *args):
        self.s.sendall(command(*args))
        return self.reply()

    def call_bulk(self, *args):
        """Sends a command whose reply is a bulk string and returns its bytes."""
        self.s.sendall(command(*args))
        line = self._line()
        if line[:1] != b"$":
            raise ValueError("expected a bulk reply, got %r" % line)
        n = int(line[1:])
        self._fill(n + 2)
        body, self.buf = self.buf[:n], self.buf[n + 2:]
        return body


def longest_turn_us(c):
    """darner's longest event loop turn since the last CONFIG RESETSTAT (INFO stats), or None
    for a server that does not report it (redis)."""
    for line in c.call_bulk("INFO", "stats").decode().splitlines():
        if line.startswith("darner_eventloop_duration_max:"):
            return int(line.split(":", 1)[1])
    return None


# The value each operation runs on: (write command, length command, whole-read command).
KINDS = {
    "hash": ("HSET", "HLEN", None),
    "set": ("SADD", "SCARD", ("SMEMBERS",)),
    "list": ("RPUSH", "LLEN", ("LRANGE", 0, -1)),
    "zset": ("ZADD", "ZCARD", ("ZRANGE", 0, -1, "WITHSCORES")),
    "stream": ("XADD", "XLEN", ("XRANGE", "-", "+")),
}
READS = {"hgetall": ("hash", ("HGETALL",)), "smembers": ("set",), "lrange": ("list",), "zrange": ("zset",),
         "xrange": ("stream",), "xrevrange": ("stream", ("XREVRANGE", "+", "-"))}


def load(port, key, fields, batch=2000, kind="hash"):
    c = Conn(port)
    c.call("DEL", key)
    value = b"r" * 16
    write, length, _ = KINDS[kind]
    sent = 0
    while sent < fields:
        n = min(batch, fields - sent)
        if kind == "stream":
            # One XADD per entry (a uuid4 and a counter), pipelined.
            c.s.sendall(b"".join(command(write, key, "*", "id", str(uuid.uuid4()), "n", sent + i)
                                 for i in range(n)))
            for _ in range(n):
                c.reply()
            sent += n
            continue
        args = [write, key]
        for i in range(n):
            member = str(uuid.uuid4()).encode()
            if kind == "hash":
                args += [member, value]
            elif kind == "zset":
                args += [sent + i, member]
            else:
                args.append(member)
        c.s.sendall(command(*args))
        c.reply()
        sent += n
    got = int(c.call(length, key)[1:])
    if got != fields:
        raise RuntimeError("loaded %d elements, expected %d" % (got, fields))


def probe(port, keys, stop, out):
    """Sends GETs round-robin over `keys` until `stop` is set; returns latencies in µs."""
    c = Conn(port)
    lat = []
    i = 0
    while not stop.is_set():
        k = keys[i % len(keys)]
        i += 1
        t0 = time.perf_counter()
        c.call("GET", k)
        lat.append((time.perf_counter() - t0) * 1e6)
    out.put(lat)


def pct(v, q):
    if not v:
        return 0.0
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]


def run_op(port, op, key, probe_keys, nice_reader=False):
    stop = mp.Event()
    out = mp.Queue()
    p = mp.Process(target=probe, args=(port, probe_keys, stop, out))
    p.start()
    time.sleep(0.5)  # the probe's own warm-up
    c = Conn(port)
    # The server's own view of the stall (darner): its longest loop turn from here on.
    c.call("CONFIG", "RESETSTAT")
    t0 = time.perf_counter()
    if op in READS:
        kind = READS[op][0]
        read = READS[op][1] if len(READS[op]) > 1 else KINDS[kind][2]
        # Read the whole reply as raw bytes (parsing millions of items in Python would take
        # longer than the server): a PING behind it marks its end. Pinned, the reader shares
        # its core with the probe: at nice 10 it gives way whenever the probe wakes up, so
        # the probe's figures are the server's, not the client's. It reads 256 KB at a time: one
        # recv copying 4 MB ran ~1 ms in the kernel, and the probe waited for it on that core
        # (LRANGE's probe p99.9 went from ~1.1 ms to ~0.5 ms with the smaller reads while the
        # server's own loop turns did not change).
        if nice_reader:
            os.setpriority(os.PRIO_PROCESS, 0, 10)
        c.s.sendall(command(read[0], key, *read[1:]) + command("PING"))
        tail = b""
        while not tail.endswith(b"\r\n+PONG\r\n"):
            chunk = c.s.recv(1 << 18)
            if not chunk:
                raise ConnectionError("closed")
            tail = (tail + chunk)[-16:]
        if nice_reader:
            os.setpriority(os.PRIO_PROCESS, 0, 0)
    elif op == "del":
        c.call("DEL", key)
    elif op == "unlink":
        c.call("UNLINK", key)
    elif op == "flushall":
        c.call("FLUSHALL")
    elif op == "idle":
        # No operation: the probe's figures are the machine's noise floor.
        time.sleep(1.0)
    elif op == "expire":
        c.call("PEXPIRE", key, 1)
        # Expiry happens in the server's own time: watch until the key is gone.
        while c.call("EXISTS", key) != b":0":
            time.sleep(0.001)
    took = (time.perf_counter() - t0) * 1000
    time.sleep(1.0)  # let background work (lazy freeing) show up in the probe too
    stop.set()
    lat = out.get(timeout=60)
    p.join(10)
    return took, lat, longest_turn_us(c)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--darner", default="target/release/darner")
    ap.add_argument("--redis", default="redis-server")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--fields", type=int, default=1_000_000)
    ap.add_argument("--ops",
                    default="idle,hgetall,smembers,lrange,zrange,xrange,del,unlink,expire,flushall")
    ap.add_argument("--servers", default="darner,redis",
                    help="comma-separated: which of darner,redis to run")
    ap.add_argument("--pin", action="store_true",
                    help="servers on core 0, probe and client on core 1")
    args = ap.parse_args()
    ops = args.ops.split(",")
    pin = []
    if args.pin:
        pin = ["taskset", "-c", "0"]
        os.sched_setaffinity(0, {1})  # this process and the probe it forks
    servers = []
    try:
        dport, rport = free_port(), free_port()
        wanted = args.servers.split(",")
        if "darner" in wanted:
            servers.append(("darner", dport, subprocess.Popen(
                pin + [args.darner, "--port", str(dport), "--bind", "127.0.0.1", "--save", "", "--threads",
                       str(args.threads), "--loglevel", "warning"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
        if "redis" in wanted:
            servers.append(("redis", rport, subprocess.Popen(
                pin + [args.redis, "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
                       "--appendonly", "no", "--loglevel", "warning"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
        for _, port, proc in servers:
            wait_ready(port, proc, timeout=20)
        print(f"# one hash of {args.fields:,} fields (uuid4 -> 16 bytes), or a set/list/zset of as many "
              f"uuid4s; probe: GET on 16 other keys, "
              f"one at a time; darner --threads {args.threads}"
              + ("; servers on core 0, probe and client on core 1" if args.pin else ""))
        print(f"{'server':<8}{'operation':<10}{'op ms':>10}{'probe p50 µs':>14}{'p99.9 µs':>12}{'max µs':>12}{'GETs':>9}{'turn max µs':>15}")
        key = "big"
        probe_keys = ["probe:%d" % i for i in range(16)]
        results = {}
        for name, port, _ in servers:
            c = Conn(port)
            for k in probe_keys:
                c.call("SET", k, "v" * 16)
            for op in ops:
                if op != "idle":
                    load(port, key, args.fields, kind=READS[op][0] if op in READS else "hash")
                if op == "flushall":
                    # FLUSHALL takes the probe keys too: the probe then reads misses, still a GET.
                    pass
                took, lat, turn = run_op(port, op, key, probe_keys, nice_reader=args.pin)
                results[(name, op)] = (pct(lat, 0.999), max(lat) if lat else 0.0)
                turn = "-" if turn is None else f"{turn:,}"
                print(f"{name:<8}{op:<10}{took:>10.1f}{pct(lat, 0.5):>14.0f}{pct(lat, 0.999):>12.0f}"
                      f"{max(lat) if lat else 0:>12.0f}{len(lat):>9}{turn:>15}", flush=True)
                if op == "flushall":
                    for k in probe_keys:
                        c.call("SET", k, "v" * 16)
        if ("darner", ops[0]) in results and ("redis", ops[0]) in results:
            print(f"\n{'operation':<10}{'p99.9 darner/redis':>20}{'max darner/redis':>18}")
            for op in ops:
                (dp, dm), (rp, rm) = results[("darner", op)], results[("redis", op)]
                print(f"{op:<10}{dp / max(rp, 1e-9):>20.3f}{dm / max(rm, 1e-9):>18.3f}")
    finally:
        for _, _, proc in servers:
            stop_process(proc)


if __name__ == "__main__":
    sys.exit(main())
