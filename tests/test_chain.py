"""PSYNC2 across promotion and demotion, chained replication, replica-serve-stale-data (issue 15).

Darner primaries and replicas (and redis-server 7.0 ones) on loopback ports:

- a replica promoted with REPLICAOF NO ONE keeps its backlog and the old primary's ID as its
  second one, so its former siblings and the old primary itself, repointed to it, continue
  with a partial resync (PSYNC2), no full sync;
- a replica serves replicas of its own, passing its primary's stream on byte for byte (the
  offsets of the whole chain are the primary's);
- with replica-serve-stale-data no, a replica whose link is down answers -MASTERDOWN.

Every wait polls with a deadline.
"""

from __future__ import annotations

import threading

import pytest
import redis

import harness
from test_replica import wait_for

pytestmark = pytest.mark.darner_only


def info(client):
    return client.info("replication")


def stats(client):
    return client.info("stats")


def digest(client):
    return client.execute_command("DEBUG", "DIGEST")


def fill(c, prefix="k", n=200):
    c.set(prefix + ":s", "v")
    c.incrby(prefix + ":n", 7)
    c.rpush(prefix + ":l", *range(50))
    c.hset(prefix + ":h", mapping={"f%d" % i: i for i in range(40)})
    c.zadd(prefix + ":z", {"m%d" % i: i for i in range(30)})
    c.execute_command("SELECT", 0)
    for i in range(n):
        c.set("%s:%d" % (prefix, i), i)


def synced(up, down):
    """`down` follows `up` with its link up and has applied all `up` has."""
    u = info(up)["master_repl_offset"]
    d = info(down)
    return d.get("master_link_status") == "up" and d.get("master_repl_offset") == u


def wait_same(up, down, timeout=20.0):
    # A darner primary's offset counts a write once its feed thread rendered it, a moment
    # after the write: the same offset and the same data, polled together.
    wait_for(lambda: synced(up, down) and digest(down) == digest(up), timeout,
             "the replica to reach its primary's offset and data")


def replica_of(factory, primary):
    srv = factory("--replicaof", "127.0.0.1", primary.port)
    return srv, srv.client()


# ---- PSYNC2 across promotion and demotion ----


def test_promoted_replica_continues_its_sibling_and_the_demoted_primary_partially(darner_factory):
    primary = darner_factory()
    p = primary.client()
    fill(p)
    a_srv, a = replica_of(darner_factory, primary)
    b_srv, b = replica_of(darner_factory, primary)
    wait_same(p, a)
    wait_same(p, b)
    # More stream after the full syncs: the backlogs of the replicas hold it.
    fill(p, "more", 50)
    with p.pipeline(transaction=True) as t:
        t.set("tx", "1")
        t.incr("more:n")
        t.execute()
    wait_same(p, a)
    wait_same(p, b)
    old_id = info(p)["master_replid"]
    offset = info(p)["master_repl_offset"]

    # A is promoted; the old primary and B follow it.
    assert a.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    ia = info(a)
    assert ia["role"] == "master"
    assert ia["master_replid2"] == old_id
    assert ia["second_repl_offset"] == offset + 1
    assert ia["master_replid"] != old_id
    p.execute_command("REPLICAOF", "127.0.0.1", a_srv.port)
    b.execute_command("REPLICAOF", "127.0.0.1", a_srv.port)
    wait_for(lambda: info(a).get("connected_slaves") == 2 and stats(a)["sync_partial_ok"] == 2,
             what="both to continue with the promoted replica")
    ia = info(a)
    assert stats(a)["sync_full"] == 0, ia
    assert stats(a)["sync_partial_err"] == 0, ia
    wait_same(a, b)
    wait_same(a, p)
    # The demoted primary took the new ID, its own valid up to where it stopped.
    ip = info(p)
    assert ip["role"] == "slave"
    assert ip["master_replid"] == ia["master_replid"]
    assert ip["master_replid2"] == old_id

    # Writes on the new primary reach both.
    fill(a, "new", 30)
    a.delete("k:l")
    wait_same(a, b)
    wait_same(a, p)
    assert b.get("new:s") == b"v" and p.exists("k:l") == 0
    assert stats(a)["sync_full"] == 0


def test_failover_and_back_continues_partially_both_ways(darner_factory):
    primary = darner_factory()
    p = primary.client()
    fill(p)
    a_srv, a = replica_of(darner_factory, primary)
    b_srv, b = replica_of(darner_factory, primary)
    wait_same(p, a)
    wait_same(p, b)
    # Over to A ...
    a.execute_command("REPLICAOF", "NO", "ONE")
    p.execute_command("REPLICAOF", "127.0.0.1", a_srv.port)
    b.execute_command("REPLICAOF", "127.0.0.1", a_srv.port)
    wait_for(lambda: stats(a)["sync_partial_ok"] == 2, what="both to continue with A")
    fill(a, "on-a", 30)
    wait_same(a, p)
    wait_same(a, b)
    # ... and back to P, which recorded what it applied from A while it followed.
    p_partial = stats(p)["sync_partial_ok"]
    p.execute_command("REPLICAOF", "NO", "ONE")
    a.execute_command("REPLICAOF", "127.0.0.1", primary.port)
    b.execute_command("REPLICAOF", "127.0.0.1", primary.port)
    wait_for(lambda: stats(p)["sync_partial_ok"] == p_partial + 2,
             what="both to continue with P again")
    assert stats(a)["sync_full"] == 0
    fill(p, "back-on-p", 30)
    p.incr("on-a:n")
    wait_same(p, a)
    wait_same(p, b)
    assert a.get("on-a:n") == b"8"
    assert len({info(x)["master_repl_offset"] for x in (p, a, b)}) == 1


def test_promotion_under_write_load_leaves_every_server_with_the_same_data(darner_factory):
    # The old primary keeps writing while a replica is promoted: the commands the link had
    # in flight are counted before the history shifts, so whoever continues partially
    # continues at the right place (and whoever is past it syncs in full).
    primary = darner_factory()
    p = primary.client()
    fill(p)
    a_srv, a = replica_of(darner_factory, primary)
    b_srv, b = replica_of(darner_factory, primary)
    wait_same(p, a)
    wait_same(p, b)
    finish = start_writer(primary)
    try:
        wait_for(lambda: int(a.get("load") or 0) > 500, what="the load to reach A")
        a.execute_command("REPLICAOF", "NO", "ONE")
        p.execute_command("REPLICAOF", "127.0.0.1", a_srv.port)
        b.execute_command("REPLICAOF", "127.0.0.1", a_srv.port)
    finally:
        finish()
    a.incr("load")
    wait_for(lambda: info(a).get("connected_slaves") == 2, what="both to follow A")
    wait_same(a, b)
    wait_same(a, p)
    assert p.llen("loadlist") == a.llen("loadlist") == b.llen("loadlist")


def test_promoted_darner_replica_continues_a_redis_sibling_partially(darner_factory):
    primary = darner_factory()
    p = primary.client()
    fill(p)
    a_srv, a = replica_of(darner_factory, primary)
    ref = harness.start_reference(["--replicaof", "127.0.0.1", str(primary.port)])
    try:
        r = ref.client()
        wait_same(p, a)
        wait_same(p, r)
        fill(p, "more", 20)
        wait_same(p, a)
        wait_same(p, r)
        a.execute_command("REPLICAOF", "NO", "ONE")
        r.execute_command("REPLICAOF", "127.0.0.1", a_srv.port)
        wait_for(lambda: stats(a)["sync_partial_ok"] == 1 and info(a).get("connected_slaves") == 1,
                 what="redis-server to continue with the promoted darner replica")
        assert stats(a)["sync_full"] == 0
        a.set("after", "promotion")
        wait_same(a, r)
        assert r.get("after") == b"promotion"
    finally:
        ref.stop()


def test_a_promoted_redis_replica_continues_the_demoted_darner_primary_and_a_darner_sibling(
        darner_factory):
    primary = darner_factory()
    p = primary.client()
    fill(p)
    b_srv, b = replica_of(darner_factory, primary)
    ref = harness.start_reference(["--replicaof", "127.0.0.1", str(primary.port)])
    try:
        r = ref.client()
        wait_same(p, b)
        wait_same(p, r)
        fill(p, "more", 20)
        wait_same(p, b)
        wait_same(p, r)
        r.execute_command("REPLICAOF", "NO", "ONE")
        p.execute_command("REPLICAOF", "127.0.0.1", ref.port)
        b.execute_command("REPLICAOF", "127.0.0.1", ref.port)
        wait_for(lambda: stats(r)["sync_partial_ok"] == 2 and info(r).get("connected_slaves") == 2,
                 what="both darner servers to continue with the promoted redis-server")
        assert stats(r)["sync_full"] == 0
        r.set("after", "promotion")
        wait_same(r, p)
        wait_same(r, b)
        assert p.get("after") == b"promotion" and b.get("after") == b"promotion"
    finally:
        ref.stop()


# ---- chained replication ----


def test_a_replica_serves_its_own_replica_with_its_primarys_stream(darner_factory):
    primary = darner_factory()
    p = primary.client()
    fill(p)
    a_srv, a = replica_of(darner_factory, primary)
    wait_same(p, a)
    # Writes keep coming while C syncs from A: its snapshot is cut at an offset of the
    # stream A applied.
    c_srv = darner_factory("--replicaof", "127.0.0.1", a_srv.port)
    c = c_srv.client()
    for i in range(300):
        p.incr("counter")
        p.rpush("seq", i)
    wait_same(p, a)
    wait_same(a, c)
    assert c.get("counter") == b"300"
    assert c.lrange("seq", -1, -1) == [b"299"]
    ia = info(a)
    assert ia["role"] == "slave" and ia["connected_slaves"] == 1
    assert ia["slave0"]["state"] == "online"
    assert ia["slave0"]["port"] == c_srv.port
    # One history down the chain: the primary's ID and offset.
    ic = info(c)
    assert ic["master_replid"] == info(p)["master_replid"]
    fill(p, "later", 20)
    p.delete("seq")
    wait_same(p, a)
    wait_same(a, c)
    offsets = {info(x)["master_repl_offset"] for x in (p, a, c)}
    assert len(offsets) == 1, offsets
    assert c.exists("seq") == 0 and c.get("later:s") == b"v"
    # The sub-replica's link drop is continued from the middle replica's backlog.
    assert a.execute_command("CLIENT", "KILL", "TYPE", "replica") == 1
    p.set("after-kill", "1")
    wait_for(lambda: stats(a)["sync_partial_ok"] == 1, what="C to continue from A")
    wait_same(p, a)
    wait_same(a, c)
    assert c.get("after-kill") == b"1"
    assert stats(a)["sync_full"] == 1


def start_writer(srv):
    """INCRs and RPUSHes on `srv` from a thread until the returned stop() is called."""
    stop = threading.Event()

    def writer():
        w = srv.client()
        i = 0
        while not stop.is_set():
            try:
                with w.pipeline(transaction=False) as pl:
                    for _ in range(50):
                        i += 1
                        pl.incr("load")
                        pl.rpush("loadlist", i)
                    pl.execute()
            except redis.ResponseError:
                pass  # READONLY once it follows another server

    t = threading.Thread(target=writer)
    t.start()

    def finish():
        stop.set()
        t.join()

    return finish


def test_sub_replicas_full_sync_under_write_load_cuts_at_an_applied_offset(darner_factory):
    primary = darner_factory()
    p = primary.client()
    fill(p)
    a_srv, a = replica_of(darner_factory, primary)
    wait_same(p, a)
    finish = start_writer(primary)
    try:
        wait_for(lambda: int(a.get("load") or 0) > 500, what="the load to reach A")
        subs = [replica_of(darner_factory, a_srv) for _ in range(2)]
        for _, c in subs:
            wait_for(lambda: info(c).get("master_link_status") == "up", what="C's link")
    finally:
        finish()
    wait_same(p, a)
    for _, c in subs:
        wait_same(a, c)
        assert c.llen("loadlist") == p.llen("loadlist")
    assert stats(a)["sync_full"] == 2


def test_a_redis_replica_under_a_darner_replica(darner_factory):
    primary = darner_factory()
    p = primary.client()
    fill(p)
    a_srv, a = replica_of(darner_factory, primary)
    wait_same(p, a)
    ref = harness.start_reference(["--replicaof", "127.0.0.1", str(a_srv.port)])
    try:
        r = ref.client()
        wait_same(a, r)
        fill(p, "later", 20)
        with p.pipeline(transaction=True) as t:
            t.set("tx", "1")
            t.incr("later:n")
            t.execute()
        wait_same(p, a)
        wait_same(a, r)
        assert r.get("tx") == b"1"
        assert info(r)["master_repl_offset"] == info(p)["master_repl_offset"]
    finally:
        ref.stop()


def test_a_darner_replica_under_a_redis_replica_of_a_darner_primary(darner_factory):
    primary = darner_factory()
    p = primary.client()
    fill(p)
    ref = harness.start_reference(["--replicaof", "127.0.0.1", str(primary.port)])
    try:
        r = ref.client()
        wait_same(p, r)
        c_srv, c = replica_of(darner_factory, ref)
        wait_same(r, c)
        p.set("later", "1")
        wait_same(p, r)
        wait_same(r, c)
        assert c.get("later") == b"1"
    finally:
        ref.stop()


def test_a_replica_full_synced_again_drops_its_own_replicas(darner_factory):
    primary = darner_factory()
    p = primary.client()
    p.set("a", "1")
    a_srv, a = replica_of(darner_factory, primary)
    wait_same(p, a)
    c_srv, c = replica_of(darner_factory, a_srv)
    wait_same(a, c)
    # A follows another primary with another history: a full sync, and C syncs again.
    other = darner_factory()
    o = other.client()
    o.set("other", "data")
    a.execute_command("REPLICAOF", "127.0.0.1", other.port)
    wait_same(o, a)
    wait_same(a, c)
    assert c.get("other") == b"data" and c.exists("a") == 0
    assert info(c)["master_replid"] == info(o)["master_replid"]


def test_psync_to_a_replica_without_its_link_is_refused(darner_factory):
    rep = darner_factory("--replicaof", "127.0.0.1", harness.free_port())
    c = rep.client()
    with pytest.raises(redis.ResponseError) as e:
        c.execute_command("PSYNC", "?", "-1")
    assert str(e.value) == "NOMASTERLINK Can't SYNC while not connected with my master"


# ---- replica-serve-stale-data ----


STALE_CASES = [
    ("GET", "k"),
    ("SET", "k", "v"),
    ("DBSIZE",),
    ("PING",),
    ("ECHO", "x"),
    ("CONFIG", "GET", "replica-serve-stale-data"),
]


def stale_replies(srv):
    raw = srv.raw()
    out = []
    for cmd in STALE_CASES:
        out.append(raw.call(*cmd))
    # A transaction queuing a command without the stale flag.
    out.append(raw.call("MULTI"))
    out.append(raw.call("GET", "k"))
    out.append(raw.call("EXEC"))
    return out


def test_replica_serve_stale_data_no_answers_masterdown_like_redis(darner_factory):
    dead = str(harness.free_port())
    # Set once started: PING has no stale flag either (a server that answers it with
    # -MASTERDOWN never looks ready to the harness).
    args = ["--replicaof", "127.0.0.1", dead]
    rep = darner_factory(*args)
    ref = harness.start_reference(args)
    try:
        for srv in (rep, ref):
            srv.client().config_set("replica-serve-stale-data", "no")
        mine = stale_replies(rep)
        theirs = stale_replies(ref)
        assert mine == theirs
        assert "MASTERDOWN Link with MASTER is down" in repr(mine[0])
        # Back to yes: the replica serves what it has.
        c = rep.client()
        c.config_set("replica-serve-stale-data", "yes")
        assert c.get("k") is None
        assert c.config_get("slave-serve-stale-data") == {"slave-serve-stale-data": "yes"}
    finally:
        ref.stop()


def test_replica_serve_stale_data_no_serves_once_the_link_is_up(darner_factory):
    primary = darner_factory()
    p = primary.client()
    p.set("k", "v")
    rep = darner_factory("--replicaof", "127.0.0.1", primary.port)
    c = rep.client()
    wait_for(lambda: info(c).get("master_link_status") == "up", what="the link")
    c.config_set("replica-serve-stale-data", "no")
    wait_for(lambda: c.get("k") == b"v", what="the replica to serve")
    primary.stop()
    wait_for(lambda: info(c).get("master_link_status") == "down", what="the link to drop")
    with pytest.raises(redis.ResponseError) as e:
        c.get("k")
    assert isinstance(e.value, redis.exceptions.MasterDownError)
    assert str(e.value).startswith("Link with MASTER is down")


def test_a_replica_keeps_a_backlog_of_its_primarys_stream_sized_by_config(darner_factory):
    primary = darner_factory()
    p = primary.client()
    a_srv, a = replica_of(darner_factory, primary)
    wait_same(p, a)
    fill(p, "x", 20)
    wait_same(p, a)
    ia, ip = info(a), info(p)
    assert ia["repl_backlog_active"] == 1
    # The same bytes at the same offsets as the primary's backlog.
    assert ia["repl_backlog_first_byte_offset"] == ip["repl_backlog_first_byte_offset"]
    assert ia["repl_backlog_histlen"] == ip["repl_backlog_histlen"]
    a.config_set("repl-backlog-size", "100000")
    wait_for(lambda: info(a)["repl_backlog_size"] == 100000, what="the backlog resized")
