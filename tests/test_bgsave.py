"""BGSAVE without fork (issue 14): the file is the dataset at one instant of every shard, while
writes go on.

Each test writes data, takes DEBUG DIGEST, runs BGSAVE and, right after its reply, changes the
data from other connections (overwrites, deletes, new keys, FLUSHALL, transactions over two
shards). The file, loaded into Debian's redis-server, must have the digest taken before BGSAVE:
what changed after the cut is not in it, what changed before is. Darner's writes forced the
not-yet-written parts out first (serialize-before-write); a missing guard shows here as a
digest mismatch.
"""
from __future__ import annotations

import os
import threading
import time

import pytest

import harness
from resp_reader import RawConn


def pipeline(c: RawConn, cmds):
    c.send_many(cmds)
    return c.read_replies(len(cmds), timeout=60)


def wait_saved(c: RawConn, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = c.call("INFO", "persistence").py().decode()
        if "rdb_bgsave_in_progress:0" in info:
            assert "rdb_last_bgsave_status:ok" in info, info
            return
        time.sleep(0.05)
    raise AssertionError("BGSAVE did not finish")


def load_in_redis(path: str):
    """Starts redis-server on the file; returns the server."""
    d, name = os.path.split(path)
    return harness.start_reference(["--dir", d, "--dbfilename", name])


def assert_redis_loads(path: str, digest):
    """redis-server loads the file to the dataset whose DEBUG DIGEST is `digest`."""
    ref = load_in_redis(path)
    try:
        with ref.raw() as r:
            assert r.call("DEBUG", "DIGEST").py() == digest
    finally:
        ref.stop()


def fill(c: RawConn, n: int):
    cmds = [("SET", "k:%d" % i, "v%d" % i) for i in range(n)]
    cmds += [("HSET", "h:%d" % i, "f", "x" * (i % 50), "g", str(i)) for i in range(0, n, 10)]
    cmds += [("RPUSH", "l:%d" % i, "a", "b", str(i)) for i in range(0, n, 10)]
    cmds += [("ZADD", "z:%d" % i, str(i), "m") for i in range(0, n, 10)]
    cmds += [("SADD", "s:%d" % i, "1", "2", str(i)) for i in range(0, n, 10)]
    cmds += [("SET", "ttl:%d" % i, "t", "EX", "100000") for i in range(0, n, 10)]
    cmds += [("XADD", "x:%d" % i, "1-1", "f", "v") for i in range(0, n, 100)]
    cmds += [("SELECT", "5"), ("SET", "db5", "five"), ("SELECT", "0")]
    for r in pipeline(c, cmds):
        assert not r.is_error, r


@pytest.mark.darner_only
def test_bgsave_is_the_dataset_at_its_cut_while_writes_go_on(darner_factory):
    srv = darner_factory()
    n = 60_000
    with srv.raw() as c, srv.raw() as w:
        fill(c, n)
        digest = c.call("DEBUG", "DIGEST").py()
        # A second BGSAVE right behind the first (60,000 keys take many loop turns to write)
        # gets Redis's error: one at a time.
        got = [r.raw for r in pipeline(c, [("BGSAVE",), ("BGSAVE",)])]
        assert got == [b"+Background saving started\r\n",
                       b"-ERR Background save already in progress\r\n"]
        # After the cut: overwrite, delete, create, in every database, while it writes.
        changes = [("SET", "k:%d" % i, "changed") for i in range(0, n, 3)]
        changes += [("DEL", "h:%d" % i) for i in range(0, n, 20)]
        changes += [("RPUSH", "l:%d" % i, "more") for i in range(0, n, 20)]
        changes += [("SET", "new:%d" % i, "n") for i in range(0, n, 7)]
        changes += [("SELECT", "5"), ("SET", "db5", "changed"), ("SELECT", "0")]
        pipeline(w, changes)
        wait_saved(c)
        assert c.call("DEBUG", "DIGEST").py() != digest
        assert_redis_loads(os.path.join(srv.workdir, "dump.rdb"), digest)


@pytest.mark.darner_only
def test_bgsave_keeps_a_database_flushed_after_its_cut(darner_factory):
    # FLUSHDB: FLUSHALL stops a background save, as in Redis (test_save_points.py).
    srv = darner_factory()
    with srv.raw() as c:
        fill(c, 20_000)
        digest = c.call("DEBUG", "DIGEST").py()
        # One pipeline: the flush comes while the save still writes.
        got = [r.raw for r in pipeline(c, [("BGSAVE",), ("FLUSHDB",), ("SET", "after", "flush")])]
        assert got == [b"+Background saving started\r\n", b"+OK\r\n", b"+OK\r\n"]
        wait_saved(c)
        ref = load_in_redis(os.path.join(srv.workdir, "dump.rdb"))
        try:
            with ref.raw() as r:
                assert r.call("DEBUG", "DIGEST").py() == digest
        finally:
            ref.stop()


@pytest.mark.darner_only
def test_bgsave_never_splits_a_transaction_over_two_shards(darner_factory):
    srv = darner_factory(threads=2)
    with srv.raw() as c:
        # Two keys on different shards (one of these pairs is split: 2 threads).
        pairs = [("a{%d}" % i, "b{%d}" % (i + 1)) for i in range(8)]
        pipeline(c, [("SET", k, "0") for p in pairs for k in p])
        fill(c, 20_000)
        stop = threading.Event()

        def transfer():
            with srv.raw() as t:
                while not stop.is_set():
                    cmds = [("MULTI",)]
                    for a, b in pairs:
                        cmds += [("INCR", a), ("INCR", b)]
                    cmds.append(("EXEC",))
                    pipeline(t, cmds)

        th = threading.Thread(target=transfer)
        th.start()
        try:
            time.sleep(0.2)
            for _ in range(3):
                assert c.call("BGSAVE").raw == b"+Background saving started\r\n"
                wait_saved(c)
                ref = load_in_redis(os.path.join(srv.workdir, "dump.rdb"))
                try:
                    with ref.raw() as r:
                        got = [r.call("GET", k).py() for p in pairs for k in p]
                        assert got[0] != b"0", "no transfer before the cut"
                        for i in range(0, len(got), 2):
                            assert got[i] == got[i + 1], got
                        assert len(set(got)) == 1, got
                finally:
                    ref.stop()
        finally:
            stop.set()
            th.join(30)


@pytest.mark.darner_only
def test_big_values_are_written_in_steps_and_stay_as_at_the_cut(darner_factory):
    """Collections past bgsave.rs's BIG are written a step at a time; a write to one while it
    is pending or half written has the rest written first, from the value at the cut."""
    srv = darner_factory()
    with srv.raw() as c, srv.raw() as w:
        big = 30_000
        for i in range(0, big, 1000):
            pipeline(c, [
                ("HSET", "bh") + tuple(x for j in range(i, i + 1000) for x in ("f%d" % j, "v")),
                ("SADD", "bs") + tuple("m%d" % j for j in range(i, i + 1000)),
                ("ZADD", "bz") + tuple(x for j in range(i, i + 1000) for x in (str(j), "m%d" % j)),
                ("RPUSH", "bl") + tuple("e%d" % j for j in range(i, i + 1000)),
            ])
        for n in range(6):
            pipeline(c, [("HSET", "bh%d" % n) + tuple(x for j in range(5000)
                                                      for x in ("f%d" % j, "v"))])
        fill(c, 5000)
        digest = c.call("DEBUG", "DIGEST").py()
        assert c.call("BGSAVE").raw == b"+Background saving started\r\n"
        pipeline(w, [("HSET", "bh", "new", "x"), ("DEL", "bs"), ("ZADD", "bz", "-1", "first"),
                     ("LPOP", "bl"), ("HSET", "bh3", "f1", "changed"), ("DEL", "bh5"),
                     ("FLUSHDB",)])
        wait_saved(c)
        ref = load_in_redis(os.path.join(srv.workdir, "dump.rdb"))
        try:
            with ref.raw() as r:
                assert r.call("HLEN", "bh").py() == big
                assert r.call("DEBUG", "DIGEST").py() == digest
        finally:
            ref.stop()


def xinfo_full(c: RawConn, key: str):
    """XINFO STREAM key FULL COUNT 5000 as nested dicts (maps are flat lists in RESP2)."""
    def walk(v):
        if isinstance(v, list) and len(v) % 2 == 0 and v and all(
                isinstance(v[i], bytes) and v[i].isascii() and v[i][:1].isalpha()
                and not v[i][:1].isdigit() for i in range(0, len(v), 2)) and any(
                v[i] in (b"length", b"name", b"seen-time") for i in range(0, len(v), 2)):
            return {v[i]: walk(v[i + 1]) for i in range(0, len(v), 2)}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v
    return walk(c.call("XINFO", "STREAM", key, "FULL", "COUNT", "5000").py())


def xrange_all(c: RawConn, key: str):
    """Every entry of stream `key`, read in pages."""
    out, start = [], "-"
    while True:
        page = c.call("XRANGE", key, start, "+", "COUNT", "5000").py()
        out += page
        if len(page) < 5000:
            return out
        start = "(" + page[-1][0].decode()


def common(a, b):
    """`a` restricted to the keys `b` has too, recursively (Redis 7.0 lacks 7.2's fields)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: common(v, b[k]) for k, v in a.items() if k in b}
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [common(x, y) for x, y in zip(a, b)]
    return a


def comparable(info):
    """XINFO STREAM FULL less what a load rebuilds: the radix tree's figures (a loader packs
    the live entries into fresh nodes) and consumers' active-time (type 19, which Redis 7.0
    reads, does not store it: the loader takes the seen-time, as Redis does)."""
    info = {k: v for k, v in info.items() if not k.startswith(b"radix-tree")}
    for g in info[b"groups"]:
        for c in g[b"consumers"]:
            c.pop(b"active-time", None)
    return info


@pytest.mark.darner_only
def test_big_stream_is_written_in_steps_and_stays_as_at_the_cut(darner_factory):
    """A 50k-entry stream (some 500 nodes) with a consumer group and pending entries goes node
    by node; writes to it and to other keys right after the cut leave the file as the data at
    the cut, which Darner and redis-server 7.0 load alike."""
    srv = darner_factory()
    n = 50_000
    with srv.raw() as c, srv.raw() as w:
        for i in range(0, n, 2000):
            cmds = []
            for j in range(i, i + 2000):
                if j % 97 == 0:
                    cmds.append(("XADD", "big", "%d-%d" % (j + 1, j % 5), "odd%d" % j, "x"))
                else:
                    cmds.append(("XADD", "big", "%d-%d" % (j + 1, j % 5),
                                 "f", str(j), "g", "y" * (j % 30)))
            pipeline(c, cmds)
        setup = [("XGROUP", "CREATE", "big", "g", "0"),
                 ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "3000", "STREAMS", "big", ">"),
                 ("XREADGROUP", "GROUP", "g", "bob", "COUNT", "2000", "STREAMS", "big", ">"),
                 ("XACK", "big", "g") + tuple("%d-%d" % (j + 1, j % 5) for j in range(0, 3000, 3)),
                 ("XGROUP", "CREATE", "big", "g2", "$"),
                 ("XGROUP", "CREATECONSUMER", "big", "g2", "carol")]
        setup += [("XDEL", "big", "%d-%d" % (j + 1, j % 5)) for j in range(10_000, 30_000, 11)]
        for r in pipeline(c, setup):
            assert not r.is_error, r
        fill(c, 5000)
        digest = c.call("DEBUG", "DIGEST").py()
        want_range = xrange_all(c, "big")
        want_info = xinfo_full(c, "big")
        assert want_info[b"length"] == n - len(range(10_000, 30_000, 11))
        assert c.call("BGSAVE").raw == b"+Background saving started\r\n"
        # Other keys first, so the stream is likely half written when its own writes come.
        changes = [("SET", "k:%d" % i, "changed") for i in range(0, 5000, 2)]
        changes += [("XADD", "big", "*", "after", "cut"),
                    ("XDEL", "big", "40001-0"),
                    ("XACK", "big", "g", "2-1"),
                    ("XREADGROUP", "GROUP", "g", "dave", "COUNT", "10", "STREAMS", "big", ">"),
                    ("XGROUP", "CREATE", "big", "g3", "0"),
                    ("XTRIM", "big", "MAXLEN", "1000"),
                    ("SET", "new", "key")]
        for r in pipeline(w, changes):
            assert not r.is_error, r
        wait_saved(c)
        assert c.call("XLEN", "big").py() == 1000
        path = os.path.join(srv.workdir, "dump.rdb")
        again = darner_factory("--dir", srv.workdir, "--dbfilename", "dump.rdb")
        with again.raw() as a:
            assert a.call("DEBUG", "DIGEST").py() == digest
            assert xrange_all(a, "big") == want_range
            assert comparable(xinfo_full(a, "big")) == comparable(want_info)
        ref = load_in_redis(path)
        try:
            with ref.raw() as r:
                assert r.call("DEBUG", "DIGEST").py() == digest
                assert xrange_all(r, "big") == want_range
                full = xinfo_full(r, "big")
                # Redis keeps the file's nodes: the stream went node by node, its own nodes.
                assert full[b"radix-tree-keys"] == want_info[b"radix-tree-keys"]
                got, want = comparable(full), comparable(want_info)
                assert common(want, got) == common(got, want)
                assert {b"length", b"entries", b"groups", b"entries-added"} <= set(
                    common(got, want)), got.keys()
                assert len(got[b"groups"][0][b"pending"]) == 4000
        finally:
            ref.stop()


def rdb_length(b: bytes, i: int):
    """An RDB length at `i`: (value, next index, special encoding or None)."""
    t = b[i] >> 6
    if t == 0:
        return b[i] & 0x3F, i + 1, None
    if t == 1:
        return ((b[i] & 0x3F) << 8) | b[i + 1], i + 2, None
    if t == 3:
        return b[i] & 0x3F, i + 1, b[i] & 0x3F
    if b[i] == 0x80:
        return int.from_bytes(b[i + 1:i + 5], "big"), i + 5, None
    return int.from_bytes(b[i + 1:i + 9], "big"), i + 9, None


def skip_rdb_string(b: bytes, i: int) -> int:
    n, i, enc = rdb_length(b, i)
    if enc is None:
        return i + n
    if enc in (0, 1, 2):
        return i + (1, 2, 4)[enc]
    assert enc == 3, enc
    clen, i, _ = rdb_length(b, i)
    _, i, _ = rdb_length(b, i)
    return i + clen


def rdb_sizes_before_keys(b: bytes) -> dict:
    """RESIZEDB's (keys, keys with a TTL) by database, from the file's start to its first key."""
    assert b[:5] == b"REDIS"
    i, db, sizes = 9, None, {}
    while True:
        op = b[i]
        i += 1
        if op == 0xFA:  # AUX
            i = skip_rdb_string(b, skip_rdb_string(b, i))
        elif op == 0xF5:  # FUNCTION2
            i = skip_rdb_string(b, i)
        elif op == 0xFE:  # SELECTDB
            db, i, _ = rdb_length(b, i)
        elif op == 0xFB:  # RESIZEDB
            keys, i, _ = rdb_length(b, i)
            expires, i, _ = rdb_length(b, i)
            sizes[db] = (keys, expires)
        else:
            return sizes


@pytest.mark.darner_only
def test_bgsave_file_gives_each_database_its_size_before_the_keys(darner_factory):
    # RESIZEDB, as Redis writes it: a loader (a replica in its full sync) sizes its tables
    # from it instead of growing them key by key. Every non-empty database's hint comes
    # before the shards' pieces, with its keys and keys with a TTL at the cut.
    srv = darner_factory()
    with srv.raw() as c:
        fill(c, 5_000)
        pipeline(c, [("SELECT", "3")] + [("SET", "t:%d" % i, "x", "EX", "1000")
                                         for i in range(40)] + [("SELECT", "0")])
        want = {}
        for db in (0, 3, 5):
            c.call("SELECT", str(db))
            keys = c.call("DBSIZE").py()
            line = [ln for ln in c.call("INFO", "keyspace").py().decode().splitlines()
                    if ln.startswith("db%d:" % db)][0]
            expires = int(line.split("expires=")[1].split(",")[0])
            want[db] = (keys, expires)
        c.call("SELECT", "0")
        assert want[3] == (40, 40) and want[5] == (1, 0) and want[0][1] == 500, want
        assert c.call("BGSAVE").raw == b"+Background saving started\r\n"
        wait_saved(c)
        digest = c.call("DEBUG", "DIGEST").py()
    path = os.path.join(srv.workdir, "dump.rdb")
    with open(path, "rb") as f:
        assert rdb_sizes_before_keys(f.read()) == want
    assert_redis_loads(path, digest)


@pytest.mark.darner_only
def test_a_write_to_a_big_value_being_saved_waits_and_the_shard_serves_the_others(
        darner_factory):
    """A write to a big value the save has not written yet waits while the value is written
    in its bounded steps (bgsave.rs, `key_waits`), instead of having the rest serialized in
    its own turn: the other clients of the shard are served meanwhile; the write then runs
    with its right result, and so do a transaction and a reader of the key (they wait too),
    and the file holds the hash as it was at the cut."""
    # One thread: the big hash and the other keys share the one shard.
    srv = darner_factory(threads=1)
    fields = 300_000
    with srv.raw() as c, srv.raw() as w, srv.raw() as g, srv.raw() as t, srv.raw() as rd:
        for i in range(0, fields, 2000):
            pipeline(c, [("HSET", "big") + tuple(x for j in range(i, i + 2000)
                                                 for x in ("f%d" % j, "v%d" % j))])
        fill(c, 2000)
        digest = c.call("DEBUG", "DIGEST").py()
        # Each step of the big value (1024 fields) and each other key then sleeps 2 ms, so
        # the hash takes about 290 loop turns to write: the write waits that many.
        assert c.call("CONFIG", "SET", "rdb-key-save-delay", "2000").py() == b"OK"
        assert c.call("BGSAVE").raw == b"+Background saving started\r\n"
        w.send("HSET", "big", "f7", "changed", "fresh", "x")
        # The HSET arrives first (same thread, an earlier turn), then the others, each
        # answered while it waits: 30 requests need at most 30 turns, the hash ~290.
        time.sleep(0.05)
        t.send_many([("MULTI",), ("HSET", "big", "f8", "tx"), ("HGET", "big", "f8"), ("EXEC",)])
        rd.send("HGET", "big", "f9")
        for i in range(10):
            assert g.call("GET", "k:%d" % i, timeout=30).py() == b"v%d" % i
            assert g.call("HGET", "h:%d" % (i * 10), "g", timeout=30).py() == b"%d" % (i * 10)
            assert g.call("SET", "new:%d" % i, "n", timeout=30).py() == b"OK"
        # (Replies sent by then are in the sockets: a short read finds them.)
        assert w.pending(0.05) == b"", "the HSET did not wait for the hash's record"
        assert t.pending(0.05) == b"+OK\r\n+QUEUED\r\n+QUEUED\r\n", "nor did the EXEC"
        assert rd.pending(0.05) == b"", "nor did the reader"
        assert w.read_reply(timeout=60).py() == 1
        assert t.read_reply(timeout=60).py() == [0, b"tx"]
        assert rd.read_reply(timeout=60).py() == b"v9"
        assert c.call("HGET", "big", "f7").py() == b"changed"
        assert c.call("HLEN", "big").py() == fields + 1
        assert c.call("CONFIG", "SET", "rdb-key-save-delay", "0").py() == b"OK"
        wait_saved(c)
        ref = load_in_redis(os.path.join(srv.workdir, "dump.rdb"))
        try:
            with ref.raw() as r:
                assert r.call("HLEN", "big").py() == fields
                assert r.call("HGET", "big", "f7").py() == b"v7"
                assert r.call("HGET", "big", "fresh").py() is None
                assert r.call("DEBUG", "DIGEST").py() == digest
        finally:
            ref.stop()
