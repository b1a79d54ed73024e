"""MSET, MGET, DEL, UNLINK, EXISTS and TOUCH over keys of several shards.

A client's plain multi-shard command of these runs without a transaction task (Darner's
worker/direct.rs), a client that tracks keys too (its reads recorded by the shares), and
inside MULTI/EXEC they are steps of EXEC's transaction. These tests hold the direct path to
the same answers: pipelines mixing single-shard and multi-shard commands, sent at once, must
get Redis's replies byte for byte, from a plain client, a RESP3 one and a tracking one;
concurrent writers must never be seen half done; what the AOF gets must be the commands as
sent; and INFO commandstats and the slow log must count them as Redis does.
"""

from __future__ import annotations

import random
import time

import pytest

from keyslot import shard
from resp_reader import RawConn
from test_atomicity import Load, _client
from test_aof_propagation import both, restart

# Keys spread over the session server's two shards (checked by `test_keys_span_both_shards`).
KEYS = ["a", "b", "c", "d", "e", "f", "g", "h"]


@pytest.mark.darner_only
def test_keys_span_both_shards():
    assert {shard(k) for k in KEYS} == {0, 1}
    # MSET a 1 b (the arity error) must be a multi-shard command too.
    assert shard(KEYS[0]) != shard(KEYS[1])


def replies(conn: RawConn, cmds) -> list:
    """Sends `cmds` in one write, then a PING; returns every raw reply before the PONG."""
    conn.send_many(list(cmds) + [("PING",)])
    out = []
    while True:
        rep = conn.read_reply(timeout=10)
        if rep.raw == b"+PONG\r\n":
            return out
        out.append(rep.raw)


def scripted():
    """One pipeline of every case: single-shard commands between multi-shard ones reading
    their writes, duplicate keys, missing keys, a key of another type, MSET's arity error,
    CLIENT REPLY SKIP of a multi-shard command."""
    a, b, c, d, e, f, g, h = KEYS
    return [
        ("SET", a, "0"),
        ("MSET", a, "1", b, "2", c, "3", d, "4"),
        ("GET", a), ("GET", d),
        ("MGET", a, b, c, d, "nokey"),
        ("RPUSH", e, "x"),
        ("MGET", a, e, b, f),
        ("EXISTS", a, b, "nokey", a, e),
        ("TOUCH", a, b, "nokey", e),
        ("MSET", a, "x", a, "y", b, "z"),
        ("MGET", a, b),
        ("DEL", a, "nokey", b, a),
        ("MGET", a, b, c, d),
        ("INCR", a),
        ("UNLINK", c, d, e, f),
        ("EXISTS", c, d, e, f),
        ("MSET", a, "1", b),
        ("CLIENT", "REPLY", "SKIP"),
        ("MSET", g, "skipped", h, "skipped"),
        ("MGET", g, h),
        ("MSET",) + tuple(x for i in range(40) for x in ("k%d" % i, "v%d" % i)),
        ("MGET",) + tuple("k%d" % i for i in range(0, 40, 3)),
        ("DEL",) + tuple("k%d" % i for i in range(0, 40, 2)),
        ("EXISTS",) + tuple("k%d" % i for i in range(40)),
    ]


def randomized(rnd: random.Random, n: int):
    """`n` random commands over a few keys of both shards: single-shard and multi-shard
    reads and writes interleaved."""
    cmds = []
    for _ in range(n):
        ks = rnd.sample(KEYS, rnd.randint(1, len(KEYS)))
        op = rnd.choice(["mset", "mget", "del", "exists", "touch", "set", "get", "incr"])
        if op == "mset":
            cmds.append(("MSET",) + tuple(x for k in ks for x in (k, str(rnd.randint(0, 99)))))
        elif op in ("mget", "del", "exists", "touch"):
            cmds.append((op.upper(),) + tuple(ks + rnd.sample(KEYS, rnd.randint(0, 2))))
        elif op == "set":
            cmds.append(("SET", ks[0], str(rnd.randint(0, 99))))
        elif op == "get":
            cmds.append(("GET", ks[0]))
        else:
            cmds.append(("INCR", ks[0]))
    return cmds


def connect(srv, resp3=False, tracking=False) -> RawConn:
    conn = RawConn(port=srv.port)
    if resp3:
        assert conn.call("HELLO", "3").raw.startswith(b"%")
    if tracking:
        # RESP2 tracking sends its invalidations elsewhere: this connection's replies stay
        # the commands' own.
        sink = RawConn(port=srv.port)
        sink_id = sink.call("CLIENT", "ID").py()
        assert conn.call("CLIENT", "TRACKING", "ON", "REDIRECT", sink_id).raw == b"+OK\r\n"
        conn._sink = sink  # kept open while `conn` is used
    return conn


def same_as_redis(darner, redis_ref, cmds, **how):
    with RawConn(port=redis_ref.port) as ref:
        ref.call("FLUSHALL")
        if how.get("resp3"):
            ref.call("HELLO", "3")
        want = replies(ref, cmds)
    conn = connect(darner, **how)
    try:
        conn.call("FLUSHALL")
        got = replies(conn, cmds)
    finally:
        conn.close()
        if getattr(conn, "_sink", None):
            conn._sink.close()
    for i, (w, g) in enumerate(zip(want, got)):
        assert g == w, "reply %d (command %r unless a reply was skipped before): darner %r, " \
            "redis %r" % (i, cmds[i] if i < len(cmds) else "?", g, w)
    assert len(got) == len(want)


@pytest.mark.parametrize("how", [{}, {"resp3": True}, {"tracking": True}],
                         ids=["plain", "resp3", "tracking-task-path"])
def test_pipeline_of_cross_shard_commands_answers_as_redis(darner, redis_ref, how):
    same_as_redis(darner, redis_ref, scripted(), **how)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_pipelines_answer_as_redis(darner, redis_ref, seed):
    rnd = random.Random(seed)
    same_as_redis(darner, redis_ref, randomized(rnd, 300))


def test_same_commands_inside_multi_exec_answer_alike(darner, redis_ref):
    cmds = [("MULTI",)] + scripted()[:16] + [("EXEC",)]
    same_as_redis(darner, redis_ref, cmds)


def test_concurrent_msets_and_dels_are_never_seen_half_done(darner_factory):
    """Writers set every key to one generation, or delete them all, with one command each;
    readers must see all keys equal (or all gone) with MGET, and EXISTS must count all of
    them or none."""
    srv = darner_factory(threads=2)
    keys = ["iso:%d" % i for i in range(10)]
    assert len({shard(k) for k in keys}) == 2
    load = Load(srv)
    clients = []

    def writer(seed):
        c = _client(srv)
        clients.append(c)
        rnd = random.Random(seed)
        gen = [seed * 10 ** 9]

        def step():
            gen[0] += 1
            if rnd.random() < 0.2:
                c.delete(*keys)
            else:
                c.mset({k: gen[0] for k in keys})
        return step

    def reader():
        c = _client(srv)
        clients.append(c)

        def step():
            vals = c.mget(keys)
            if len(set(vals)) != 1:
                load.violation("MGET saw %r" % (vals,))
            n = c.exists(*keys)
            if n not in (0, len(keys)):
                load.violation("EXISTS counted %d of %d" % (n, len(keys)))
        return step

    try:
        for i in range(2):
            load.spawn("writer%d" % i, writer(i + 1))
        for i in range(2):
            load.spawn("reader%d" % i, reader())
        load.run_for(2.0)
    finally:
        for c in clients:
            c.close()
    assert all(load.counts.get(n, 0) > 10 for n in ("writer0", "writer1", "reader0", "reader1")), load.counts


def test_aof_gets_cross_shard_writes_as_redis_writes_them(darner_factory):
    cmds = [
        ("MSET", "a", "1", "b", "2", "c", "3", "d", "4"),
        ("MGET", "a", "b", "c", "d"),
        ("EXISTS", "a", "b", "c"),
        ("TOUCH", "a", "b"),
        ("DEL", "a", "nokey", "c"),
        ("UNLINK", "b", "d"),
        ("MSET", "e", "5", "f", "6", "g", "7"),
    ]
    assert {shard(k) for k in "abcdefg"} == {0, 1}

    def script(c):
        for cmd in cmds:
            c.execute_command(*cmd)

    got, want, d = both(darner_factory, script)
    assert got == want
    assert got == [list(cmds[i]) for i in (0, 4, 5, 6)]
    # And they load back.
    new = restart(darner_factory, d)
    c = new.client()
    assert c.mget("a", "b", "c", "d", "e", "f", "g") == [None] * 4 + [b"5", b"6", b"7"]
    c.close()


def test_commandstats_and_slowlog_count_cross_shard_commands(darner_factory):
    srv = darner_factory("--slowlog-log-slower-than", "0", threads=2)
    with RawConn(port=srv.port) as c:
        c.call("CONFIG", "RESETSTAT")
        c.call("SLOWLOG", "RESET")
        replies(c, [("MSET", "a", "1", "b", "2"), ("MGET", "a", "b"), ("DEL", "a", "b"),
                    ("EXISTS", "a", "b"), ("MSET", "a", "1", "b")])
        stats = c.call("INFO", "commandstats").py().decode()
        for name, calls, failed in [("mset", 2, 1), ("mget", 1, 0), ("del", 1, 0), ("exists", 1, 0)]:
            line = next(l for l in stats.splitlines() if l.startswith("cmdstat_%s:" % name))
            assert "calls=%d," % calls in line and "failed_calls=%d" % failed in line, line
        logged = [e[3] for e in c.call("SLOWLOG", "GET", "20").py()]
        for cmd in ([b"MSET", b"a", b"1", b"b", b"2"], [b"MGET", b"a", b"b"], [b"DEL", b"a", b"b"]):
            assert cmd in logged, logged


def test_a_no_touch_client_leaves_the_access_clock_of_keys_across_shards(darner_factory):
    """CLIENT NO-TOUCH holds for the multi-shard commands too (the direct path's shares and a
    transaction's steps), as in Redis, which asks the client at every lookup; TOUCH still
    touches (Redis 7.2 exempts it)."""
    d = darner_factory("--threads", "2")
    c = d.client()
    c.mset({k: "v" for k in KEYS})
    time.sleep(3.1)
    nt = d.client()
    nt.execute_command("CLIENT", "NO-TOUCH", "on")
    nt.mget(KEYS)
    nt.exists(*KEYS)
    p = nt.pipeline(transaction=True)
    p.get(KEYS[0])
    p.mget(KEYS)
    p.execute()
    idle = [c.object("idletime", k) for k in KEYS]
    assert min(idle) >= 2, idle
    nt.touch(*KEYS[:2])
    c.mget(KEYS[2:])
    idle = [c.object("idletime", k) for k in KEYS]
    assert max(idle) <= 1, idle
