"""AOF bases of commands (`aof-use-rdb-preamble no`, issue 14): a rewrite (BGREWRITEAOF, the
automatic one, CONFIG SET appendonly yes, the base made at start-up) writes the base as the
RESP commands that rebuild each key, as Redis's rewriteAppendOnlyFileRio does, named
`<appendfilename>.<seq>.base.aof`.

The base is checked the way a user would: Debian's redis-server 7.0 loads the directory and
has the same keys (DEBUG DIGEST, and per key DEBUG DIGEST-VALUE, TYPE and PEXPIRETIME, stream
groups with their consumers and pending entries, the function library); Darner restarts from
it with the same data, Darner's own hash field and set member TTLs included; and the directive
switches at run time both ways.
"""
from __future__ import annotations

import os
import random
import time

import pytest

from resp_reader import RawConn
from test_aof import cross_state, groups, ok, run_all, state, write_everything
from test_aof_rewrite import (aof_files, info, manifest, poll, redis_on_aof_dir, restart,
                              wait_rewritten)

pytestmark = pytest.mark.darner_only

FAR_MS = 4102444800000  # 2100-01-01


def more_streams_and_big_values(c: RawConn):
    """What write_everything lacks: streams with several groups, consumers with and without
    pending entries, delivery counts; an empty stream with a group; collections split over
    several commands (past 64 elements) in another database, with TTLs."""
    cmds = [("XADD", "x:big", "%d-%d" % (1 + i // 3, i % 3), "f", "v%d" % i, "n", str(i))
            for i in range(150)]
    cmds += [
        ("XGROUP", "CREATE", "x:big", "ga", "0", "ENTRIESREAD", "0"),
        ("XGROUP", "CREATE", "x:big", "gb", "$"),
        ("XREADGROUP", "GROUP", "ga", "c1", "COUNT", "10", "STREAMS", "x:big", ">"),
        ("XREADGROUP", "GROUP", "ga", "c2", "COUNT", "5", "STREAMS", "x:big", ">"),
        ("XCLAIM", "x:big", "ga", "c3", "0", "1-0", "TIME", "1700000000123", "RETRYCOUNT", "7",
         "FORCE", "JUSTID"),
        ("XGROUP", "CREATECONSUMER", "x:big", "gb", "idle"),
        ("XDEL", "x:big", "20-0", "20-1"),
        ("XGROUP", "CREATE", "x:empty", "g", "$", "MKSTREAM"),
        ("XGROUP", "CREATECONSUMER", "x:empty", "g", "lonely"),
        ("SELECT", "7"),
        ("RPUSH", "db7:list") + tuple("e%d" % i for i in range(200)),
        ("SADD", "db7:ints") + tuple(str(i * 7) for i in range(100)),
        ("ZADD", "db7:z") + tuple(x for i in range(130) for x in (repr(i * 1.25), "m%d" % i)),
        ("HSET", "db7:h") + tuple(x for i in range(65) for x in ("f%d" % i, "x" * i)),
        ("PEXPIREAT", "db7:h", str(FAR_MS + 5)),
        ("PEXPIREAT", "db7:z", str(FAR_MS + 6)),
        ("SELECT", "0"),
    ]
    run_all(c, cmds)


def every_key(c: RawConn) -> dict:
    """Per database and key: type, DEBUG DIGEST-VALUE and absolute TTL."""
    out = {}
    for db in range(16):
        ok(c, "SELECT", str(db))
        for k in sorted(c.call("KEYS", "*").py()):
            out[(db, k)] = (c.call("TYPE", k).py(), c.call("DEBUG", "DIGEST-VALUE", k).py(),
                            c.call("PEXPIRETIME", k).py())
    ok(c, "SELECT", "0")
    return out


def pending_details(c: RawConn, key: str) -> list:
    """Each group's PEL with delivery times and counts (XINFO STREAM FULL)."""
    full = c.call("XINFO", "STREAM", key, "FULL").py()
    full = dict(zip(full[::2], full[1::2]))
    out = []
    for g in full[b"groups"]:
        g = dict(zip(g[::2], g[1::2]))
        out.append((g[b"name"], g[b"last-delivered-id"], g[b"entries-read"], g[b"pel-count"],
                    [tuple(p) for p in g[b"pending"]]))
    return out


def everything(c: RawConn) -> dict:
    s = cross_state(c)
    s["keys"] = every_key(c)
    s["streams"] = {k: (groups(c, k), pending_details(c, k)) for k in ("x:s", "x:big", "x:empty")}
    return s


def base_of(workdir: str) -> bytes:
    bases = [l[1] for l in manifest(workdir) if l[5] == "b"]
    assert len(bases) == 1, bases
    with open(os.path.join(workdir, "appendonlydir", bases[0]), "rb") as f:
        return f.read()


def test_base_of_commands_loads_into_redis_7_0_and_back_into_darner(darner_factory):
    srv = darner_factory("--appendonly", "yes", "--aof-use-rdb-preamble", "no", threads=4)
    # The base made at start-up is one of commands too (empty: no keys, no libraries).
    assert manifest(srv.workdir)[0][1:] == ["appendonly.aof.1.base.aof", "seq", "1", "type", "b"]
    with srv.raw() as c:
        write_everything(c, random.Random(11))
        more_streams_and_big_values(c)
        assert c.call("BGREWRITEAOF").kind == "+"
        wait_rewritten(c, 1)
        want = everything(c)
    assert [(l[1], l[5]) for l in manifest(srv.workdir)] == [
        ("appendonly.aof.2.base.aof", "b"), ("appendonly.aof.2.incr.aof", "i")]
    assert aof_files(srv.workdir) == {"appendonly.aof.2.base.aof", "appendonly.aof.2.incr.aof",
                                      "appendonly.aof.manifest"}
    base = base_of(srv.workdir)
    assert base.startswith(b"*"), base[:40]
    # Everything is in the base: the incr file opened at the cut is empty.
    assert os.path.getsize(os.path.join(srv.workdir, "appendonlydir",
                                        "appendonly.aof.2.incr.aof")) == 0
    # The 200-element list goes as four RPUSH (64 + 64 + 64 + 8 elements).
    assert base.count(b"*66\r\n$5\r\nRPUSH\r\n$8\r\ndb7:list\r\n") == 3
    assert base.count(b"*10\r\n$5\r\nRPUSH\r\n$8\r\ndb7:list\r\n") == 1
    assert b"$8\r\nFUNCTION\r\n$4\r\nLOAD\r\n" in base
    srv.stop(cleanup=False)

    with redis_on_aof_dir(srv.workdir) as r:
        assert everything(r) == want

    restart(srv, "--threads", 3)
    with srv.raw() as c:
        assert everything(c) == want


def darner_only_ttls(c: RawConn) -> dict:
    """Hash field TTLs (absolute) and set member TTLs (FIELDTTL: seconds left, rounded up)."""
    fields = ["f%d" % i for i in range(100)]
    members = ["m%d" % i for i in range(100)]
    return {
        "hpexpiretime": c.call("HPEXPIRETIME", "hf:big", "FIELDS", str(len(fields)),
                               *fields).py(),
        "small": c.call("HPEXPIRETIME", "hf:small", "FIELDS", "2", "a", "b").py(),
        "members": [c.call("FIELDTTL", "sx:big", m).py() for m in members],
        "small_members": [c.call("FIELDTTL", "sx:small", m).py() for m in ("a", "b", "c")],
    }


def close_ttls(a: dict, b: dict):
    """Equal, but member TTLs (seconds left) may have moved by a second or two."""
    assert a["hpexpiretime"] == b["hpexpiretime"] and a["small"] == b["small"]
    for x, y in [(a["members"], b["members"]), (a["small_members"], b["small_members"])]:
        assert len(x) == len(y)
        for p, q in zip(x, y):
            assert (p < 0) == (q < 0) and abs(p - q) <= 3, (x, y)


def test_darner_restarts_from_a_base_of_commands_with_field_and_member_ttls(darner_factory):
    srv = darner_factory("--appendonly", "yes", "--aof-use-rdb-preamble", "no", threads=4)
    with srv.raw() as c:
        write_everything(c, random.Random(12))
        more_streams_and_big_values(c)
        run_all(c, [
            ("HSET", "hf:big") + tuple(x for i in range(100) for x in ("f%d" % i, "v%d" % i)),
            ("HPEXPIREAT", "hf:big", str(FAR_MS + 1), "FIELDS", "40")
            + tuple("f%d" % i for i in range(0, 80, 2)),
            ("HSET", "hf:small", "a", "1", "b", "2"),
            ("HPEXPIREAT", "hf:small", str(FAR_MS + 2), "FIELDS", "1", "a"),
            ("SADD", "sx:big") + tuple("m%d" % i for i in range(0, 100, 3)),
            ("SADDEX", "sx:big", "100000") + tuple("m%d" % i for i in range(1, 100, 3)),
            ("SADDEX", "sx:big", "200000") + tuple("m%d" % i for i in range(2, 100, 3)),
            ("SADD", "sx:small", "a"), ("SADDEX", "sx:small", "5000", "b"),
        ])
        assert c.call("BGREWRITEAOF").kind == "+"
        wait_rewritten(c, 1)
        digest = c.call("DEBUG", "DIGEST").py()
        want = everything(c)
        ttls = darner_only_ttls(c)
    base = base_of(srv.workdir)
    assert base.startswith(b"*") and b"HPEXPIREAT" in base and b"SADDEX" in base
    for threads in (4, 3):
        restart(srv, "--threads", threads)
        with srv.raw() as c:
            assert c.call("DEBUG", "DIGEST").py() == digest
            assert everything(c) == want
            close_ttls(darner_only_ttls(c), ttls)


def test_writes_during_a_rewrite_of_commands_are_kept(darner_factory):
    """The base is the cut's instant (the snapshot's serialize-before-write): values changed
    while it is written, big ones included, come back from base + incr file as acknowledged."""
    srv = darner_factory("--appendonly", "yes", "--aof-use-rdb-preamble", "no", threads=2)
    with srv.raw() as c:
        big = [("RPUSH", "big:%d" % i) + tuple("e%d" % j for j in range(3000)) for i in range(40)]
        run_all(c, big)
        c.send_many([("BGREWRITEAOF",)] + [("RPUSH", "big:%d" % i, "late") for i in range(40)]
                    + [("LPOP", "big:%d" % i) for i in range(0, 40, 3)]
                    + [("DEL", "big:39"), ("SET", "during", "x")])
        replies = c.read_replies(1 + 40 + 14 + 2, timeout=60)
        assert replies[0].kind == "+", replies[0]
        wait_rewritten(c, 1)
        digest = c.call("DEBUG", "DIGEST").py()
    assert base_of(srv.workdir).startswith(b"*")
    restart(srv)
    with srv.raw() as c:
        assert c.call("DEBUG", "DIGEST").py() == digest
        assert c.call("LLEN", "big:0").py() == 3000
        assert c.call("RPOP", "big:1").py() == b"late"


def test_config_set_aof_use_rdb_preamble_switches_the_base_at_run_time(darner_factory):
    srv = darner_factory("--appendonly", "yes", threads=2)
    with srv.raw() as c:
        assert c.call("CONFIG", "GET", "aof-use-rdb-preamble").py() == \
            [b"aof-use-rdb-preamble", b"yes"]
        write_everything(c, random.Random(13))
        assert c.call("CONFIG", "SET", "aof-use-rdb-preamble", "no").raw == b"+OK\r\n"
        assert c.call("CONFIG", "GET", "aof-use-rdb-preamble").py() == \
            [b"aof-use-rdb-preamble", b"no"]
        assert c.call("BGREWRITEAOF").kind == "+"
        wait_rewritten(c, 1)
        assert [l[1] for l in manifest(srv.workdir)] == ["appendonly.aof.2.base.aof",
                                                          "appendonly.aof.2.incr.aof"]
        assert base_of(srv.workdir).startswith(b"*")
        ok(c, "SET", "between", "rewrites")
        assert c.call("CONFIG", "SET", "aof-use-rdb-preamble", "yes").raw == b"+OK\r\n"
        assert c.call("BGREWRITEAOF").kind == "+"
        wait_rewritten(c, 2)
        # The base of commands is replaced (and deleted) like any other.
        assert aof_files(srv.workdir) == {"appendonly.aof.3.base.rdb",
                                          "appendonly.aof.3.incr.aof", "appendonly.aof.manifest"}
        assert base_of(srv.workdir).startswith(b"REDIS")
        assert c.call("CONFIG", "SET", "aof-use-rdb-preamble", "maybe").is_error
        want = state(c)
    restart(srv)
    with srv.raw() as c:
        assert state(c) == want


def test_config_set_appendonly_yes_with_preamble_no_writes_a_base_of_commands(darner_factory):
    srv = darner_factory("--aof-use-rdb-preamble", "no", threads=4)
    with srv.raw() as c:
        write_everything(c, random.Random(14))
        more_streams_and_big_values(c)
        assert c.call("CONFIG", "SET", "appendonly", "yes").raw == b"+OK\r\n"
        poll(lambda: info(c)["aof_enabled"] == "1", what="the AOF to be on")
        wait_rewritten(c, 1)
        ok(c, "SET", "after", "switch")
        want = everything(c)
    assert [(l[1], l[5]) for l in manifest(srv.workdir)] == [
        ("appendonly.aof.1.base.aof", "b"), ("appendonly.aof.1.incr.aof", "i")]
    assert base_of(srv.workdir).startswith(b"*")
    restart(srv, "--appendonly", "yes")
    with srv.raw() as c:
        assert everything(c) == want


def test_automatic_rewrite_with_preamble_no_writes_a_base_of_commands(darner_factory):
    srv = darner_factory("--appendonly", "yes", "--aof-use-rdb-preamble", "no",
                         "--auto-aof-rewrite-percentage", "50",
                         "--auto-aof-rewrite-min-size", "65536")
    with srv.raw() as c:
        run_all(c, [("SET", "k:%d" % i, "v" * 20) for i in range(5000)])
        wait_rewritten(c, 1)
        digest = c.call("DEBUG", "DIGEST").py()
    assert base_of(srv.workdir).startswith(b"*")
    restart(srv)
    with srv.raw() as c:
        assert c.call("DEBUG", "DIGEST").py() == digest


def test_timestamps_and_functions_open_a_base_of_commands(darner_factory):
    srv = darner_factory("--appendonly", "yes", "--aof-use-rdb-preamble", "no",
                         "--aof-timestamp-enabled", "yes")
    with srv.raw() as c:
        ok(c, "FUNCTION", "LOAD", "#!lua name=tslib\nredis.register_function('f', "
                                  "function() return 1 end)")
        ok(c, "SET", "k", "v")
        assert c.call("BGREWRITEAOF").kind == "+"
        wait_rewritten(c, 1)
    base = base_of(srv.workdir)
    first, rest = base.split(b"\r\n", 1)
    assert first.startswith(b"#TS:") and abs(int(first[4:]) - time.time()) < 60, first
    assert rest.startswith(b"*3\r\n$8\r\nFUNCTION\r\n$4\r\nLOAD\r\n"), rest[:60]
    restart(srv)
    with srv.raw() as c:
        assert c.call("FCALL", "f", "0").py() == 1
        assert c.call("GET", "k").py() == b"v"


def test_a_big_stream_in_a_base_of_commands_goes_in_steps_and_stays_as_at_the_cut(darner_factory):
    """A stream past the snapshot's 1024 entries is written as its entries' XADDs node by node,
    then XSETID and its groups; writes to it while the rewrite runs come back from base + incr
    file as acknowledged, in Darner and in redis-server 7.0."""
    srv = darner_factory("--appendonly", "yes", "--aof-use-rdb-preamble", "no", threads=2)
    n = 50_000
    with srv.raw() as c:
        for i in range(0, n, 2000):
            run_all(c, [("XADD", "x:huge", "%d-%d" % (j + 1, j % 3), "f", str(j), "g", "y" * (j % 9))
                        for j in range(i, i + 2000)])
        run_all(c, [("XGROUP", "CREATE", "x:huge", "g", "0"),
                    ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "700", "STREAMS", "x:huge", ">"),
                    ("XREADGROUP", "GROUP", "g", "bob", "COUNT", "300", "STREAMS", "x:huge", ">"),
                    ("XGROUP", "CREATECONSUMER", "x:huge", "g", "idle"),
                    ("XDEL", "x:huge", "30001-0", "30002-1")])
        c.send_many([("BGREWRITEAOF",)] + [("SET", "k%d" % i, "v") for i in range(500)]
                    + [("XADD", "x:huge", "*", "late", "1"), ("XACK", "x:huge", "g", "1-0"),
                       ("XDEL", "x:huge", "40001-1"), ("XTRIM", "x:huge", "MAXLEN", "20000")])
        replies = c.read_replies(1 + 500 + 4, timeout=60)
        assert replies[0].kind == "+", replies[0]
        assert not any(r.is_error for r in replies), replies
        wait_rewritten(c, 1)
        digest = c.call("DEBUG", "DIGEST").py()
        want = (c.call("XLEN", "x:huge").py(), groups(c, "x:huge"), pending_details(c, "x:huge"))
        assert want[0] == 20_000
    base = base_of(srv.workdir)
    assert base.count(b"$4\r\nXADD\r\n$6\r\nx:huge\r\n") == n - 2
    srv.stop(cleanup=False)

    with redis_on_aof_dir(srv.workdir) as r:
        assert r.call("DEBUG", "DIGEST").py() == digest
        assert (r.call("XLEN", "x:huge").py(), groups(r, "x:huge"),
                pending_details(r, "x:huge")) == want

    restart(srv)
    with srv.raw() as c:
        assert c.call("DEBUG", "DIGEST").py() == digest
        assert (c.call("XLEN", "x:huge").py(), groups(c, "x:huge"),
                pending_details(c, "x:huge")) == want
