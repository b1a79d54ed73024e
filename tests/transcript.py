"""Multi-connection transcripts: the same steps against darner and redis-server, every byte
each connection receives recorded, for Pub/Sub and client tracking tests.

A step is (connection name, command tuple[, mode]). After each step (once the sender holds
its first reply frame: every command answers), whatever every connection has received is
collected, so a message that reaches the wrong client, arrives twice or not at all shows as
a difference. Modes:
  SORTED  the frames of that step are compared as a multiset (an order Redis takes from its
          hash tables, or messages from different shards);
  AFTER_REPLY  the sender's first frame (its reply) in place, then the rest of that step's
          frames as a multiset (a client's own invalidations of keys of several shards
          follow its reply in any order);
  KEYS    the frames that are not invalidations as a multiset, and the keys of the
          invalidations as one (BCAST: Redis sends a command's keys of one prefix in one
          message; Darner, one message per shard);
An argument "$ID:x" is replaced by connection x's client id on that server; a connection
named with a trailing "3" ("r3") speaks RESP3 (HELLO 3 before the steps).
"""

from __future__ import annotations

import re
import select
import socket
import time

from resp_reader import Incomplete, RawConn, parse

SORTED = "sorted"
AFTER_REPLY = "after_reply"
KEYS = "keys"


def invalidated(frame: bytes):
    """The keys of an invalidation frame (a RESP3 push, or a RESP2 message on
    __redis__:invalidate), or None for another frame (a null: a flush)."""
    v = parse(frame, 0)[0].py()
    if isinstance(v, list) and len(v) == 2 and v[0] == b"invalidate":
        return v[1] or []
    if isinstance(v, list) and len(v) == 3 and v[:2] == [b"message", b"__redis__:invalidate"]:
        return v[2] or []
    return None


def keys_mode(data: bytes):
    other, keys = [], []
    for f in frames(data):
        ks = invalidated(f)
        if ks is None:
            other.append(f)
        else:
            keys.extend(ks)
    return sorted(other), sorted(keys)


def frames(data: bytes):
    out, pos = [], 0
    while pos < len(data):
        _, end = parse(data, pos)
        out.append(data[pos:end])
        pos = end
    return out


def wait_frame(conn, timeout: float) -> bytes:
    """What `conn` receives until it holds one complete frame (or `timeout` passes)."""
    got = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got += conn.pending(0.01)
        if got:
            try:
                parse(got, 0)
                return got
            except Incomplete:
                pass
    return got


def gather(conns, quiet: float = 0.05, limit: float = 3.0):
    """What every connection receives until none has received anything for `quiet` seconds
    (messages that lag under load still count for their step). One select over all the
    connections: asking each in turn for a fixed time made a step cost that time once per
    connection."""
    got = {n: c.pending(0) for n, c in conns.items()}  # what a reader already holds
    socks = {c.sock: n for n, c in conns.items()}
    deadline = time.monotonic() + limit
    while socks and time.monotonic() < deadline:
        readable, _, _ = select.select(list(socks), [], [], quiet)
        if not readable:
            break
        for sock in readable:
            try:
                data = sock.recv(1 << 20)
            except (BlockingIOError, socket.timeout):
                continue
            except ConnectionResetError:
                data = b""
            if not data:
                del socks[sock]  # closed: nothing more comes from it
                continue
            got[socks[sock]] += data
    return got


def normalize(args, data: bytes) -> bytes:
    if tuple(args[:2]) in (("CLIENT", "LIST"), ("CLIENT", "INFO")):
        # Ids, addresses, ages and memory differ; the pub/sub and tracking fields must not.
        keep = (b"flags=", b"sub=", b"psub=", b"ssub=")
        return b" ".join(f for f in data.split() if f.startswith(keep))
    return data


def transcript(port: int, steps, names, proto: int = 2):
    conns = {n: RawConn(port=port, timeout=5) for n in names}
    try:
        ids = {}
        for n, c in conns.items():
            if proto == 3 or n.endswith("3"):
                assert not c.call("HELLO", "3").is_error
            ids[n] = c.call("CLIENT", "ID").py()
        out = []
        for step in steps:
            name, args = step[0], step[1]
            sent = tuple(str(ids[a[4:]]) if isinstance(a, str) and a.startswith("$ID:") else a
                         for a in args)
            conns[name].send(*sent)
            # Every command answers: wait for the sender's first frame, so a reply that a busy
            # machine delays is not counted in a later step (or taken as missing).
            head = wait_frame(conns[name], 5.0)
            received = gather(conns)
            received[name] = head + received[name]
            for n in names:
                got = received[n]
                if got and str(args[0]).upper() == "CLIENT":
                    # Client ids differ between the servers: CLIENT replies (ID, GETREDIR,
                    # TRACKINGINFO) show them by name. (Only those: a small id would also
                    # match a count in another reply.)
                    for cn, cid in ids.items():
                        got = re.sub(rb"(^|\n):%d\r\n" % cid,
                                     rb"\1:$ID:%s\r\n" % cn.encode(), got)
                if got:
                    data = normalize(args, got) if n == name else got
                    mode = step[2] if len(step) > 2 else None
                    if mode == SORTED or (mode == AFTER_REPLY and n != name):
                        data = sorted(frames(data))
                    elif mode == AFTER_REPLY:
                        fs = frames(data)
                        data = fs[:1] + sorted(fs[1:])
                    elif mode == KEYS:
                        data = keys_mode(data)
                    out.append((args, n, data))
        return out
    finally:
        for c in conns.values():
            c.close()


def assert_same(darner_port: int, redis_port: int, steps, names, proto: int = 2):
    want = transcript(redis_port, steps, names, proto)
    got = transcript(darner_port, steps, names, proto)
    for w, g in zip(want, got):
        assert g == w, "first difference after %r:\n redis  %r\n darner %r" % (w[0], w, g)
    assert len(got) == len(want)
