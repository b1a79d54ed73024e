"""Darner as a primary (issue 15, part (c)): a redis-server 7.0 replica, and a Darner
replica, follow a Darner primary run with two shards.

Real processes on loopback ports: the full sync (a fork-less snapshot sent as an RDB file),
the ordered stream afterwards (single keys, MSET and MULTI/EXEC across shards, SELECT,
EXPIRE, DEL), and a partial resync after the link is killed. Every wait polls with a
deadline; equality is checked with DEBUG DIGEST once the replica's offset reached the
primary's.
"""

from __future__ import annotations

import time

import pytest

import harness

pytestmark = pytest.mark.darner_only


def wait_for(cond, timeout=20.0, what="condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = cond()
        if last:
            return last
        time.sleep(0.02)
    raise AssertionError("timed out waiting for %s (last: %r)" % (what, last))


def info(client, section="replication"):
    return client.info(section)


def digest(client):
    return client.execute_command("DEBUG", "DIGEST")


def fill(p):
    """Keys of every type in several databases, some with TTLs."""
    c = p.client()
    c.set("s", "v")
    c.set("n", 12345)
    c.set("big", "x" * 100_000)
    c.rpush("l", *range(200))
    c.hset("h", mapping={"f%d" % i: i for i in range(300)})
    c.sadd("set", *range(50))
    c.sadd("names", "a", "b", "c")
    c.zadd("z", {"m%d" % i: i * 0.25 for i in range(150)})
    c.pfadd("hll", *("e%d" % i for i in range(100)))
    c.xadd("st", {"a": "1"})
    c.xadd("st", {"b": "2"})
    c.xgroup_create("st", "g", id="0")
    c.setex("ttl", 3600, "soon")
    c.pexpire("h", 3_600_000)
    for i in range(200):
        c.set("k%d" % i, i)
    for db in (1, 5):
        d = p.client(db=db)
        d.set("in-db-%d" % db, db)
        d.rpush("list-%d" % db, "a", "b")
        d.expire("list-%d" % db, 7200)
        d.close()
    c.close()


def synced(p, r):
    """The replica applied everything the primary sent."""
    want = info(p)["master_repl_offset"]
    ri = info(r)
    return ri.get("master_link_status") == "up" and ri.get("slave_repl_offset") == want


def wait_same(p, r, timeout=30.0):
    wait_for(lambda: synced(p, r), timeout, "the replica's offset to reach the primary's")
    assert digest(r) == digest(p)


def write_load(primary):
    """Writes of every kind the stream carries, across both shards and several dbs."""
    p = primary.client()
    p.set("after", "1")
    p.incrby("n", 5)
    p.lpush("l", "front")
    p.hdel("h", "f1")
    p.zincrby("z", 10, "m1")
    p.xadd("st", {"c": "3"})
    p.mset({"m%d" % i: i for i in range(40)})
    d3 = primary.client(db=3)
    d3.set("three", "3")
    d3.expire("three", 999)
    with p.pipeline(transaction=True) as t:
        for i in range(20):
            t.set("tx%d" % i, i)
        t.rpush("l", "tx")
        t.sadd("set", "new")
        t.execute()
    p.delete("big", "k1", "k2", "k3")
    p.expire("s", 5000)
    p.close()
    d3.close()


@pytest.fixture
def primary(darner_factory):
    return darner_factory()


def start_redis_replica(port):
    return harness.start_reference(["--replicaof", "127.0.0.1", str(port)])


def test_a_redis_replica_gets_the_snapshot_and_then_the_stream(primary):
    fill(primary)
    p = primary.client()
    rep = start_redis_replica(primary.port)
    try:
        r = rep.client()
        wait_for(lambda: info(r).get("master_link_status") == "up", what="link up")
        wait_same(p, r)
        assert r.get("s") == b"v"
        assert rep.client(db=5).get("in-db-5") == b"5"
        write_load(primary)
        wait_same(p, r)
        assert r.get("after") == b"1" and r.get("tx19") == b"19"
        assert rep.client(db=3).get("three") == b"3"
        assert r.exists("big") == 0
        i = info(p)
        assert i["connected_slaves"] == 1
        assert i["slave0"]["state"] == "online"
        assert i["repl_backlog_active"] == 1
        assert i["repl_backlog_histlen"] > 0
        assert info(p, "stats")["sync_full"] == 1
        role = p.execute_command("ROLE")
        assert role[0] == b"master" and len(role[2]) == 1
        assert role[2][0][1] == str(rep.port).encode()
        flags = [c["flags"] for c in p.client_list() if c["flags"] == "S"]
        assert flags == ["S"]
        assert "Synchronization with replica 127.0.0.1:%d succeeded" % rep.port in \
            primary.log_tail(20000)
    finally:
        rep.stop()


def test_a_killed_link_resumes_with_a_partial_resync(primary):
    fill(primary)
    p = primary.client()
    rep = start_redis_replica(primary.port)
    try:
        r = rep.client()
        wait_same(p, r)
        before = info(p, "stats")["sync_partial_ok"]
        full = info(p, "stats")["sync_full"]
        assert r.execute_command("CLIENT", "KILL", "TYPE", "master") >= 1
        write_load(primary)
        wait_for(lambda: info(p, "stats")["sync_partial_ok"] == before + 1,
                 what="a partial resync")
        assert info(p, "stats")["sync_full"] == full
        wait_same(p, r)
        assert r.get("after") == b"1"
    finally:
        rep.stop()


def test_a_darner_replica_follows_a_darner_primary(primary, darner_factory):
    fill(primary)
    p = primary.client()
    rep = darner_factory("--replicaof", "127.0.0.1", primary.port)
    r = rep.client()
    wait_for(lambda: info(r).get("master_link_status") == "up", what="link up")
    wait_same(p, r)
    write_load(primary)
    wait_same(p, r)
    assert r.get("tx7") == b"7"
    assert rep.client(db=3).get("three") == b"3"


def test_replconf_and_psync_misuse_get_redis_errors(primary):
    with primary.raw() as c:
        assert c.call("REPLCONF", "listening-port").raw == b"-ERR syntax error\r\n"
        assert c.call("REPLCONF", "foo", "1").raw == \
            b"-ERR Unrecognized REPLCONF option: foo\r\n"
        assert c.call("REPLCONF", "listening-port", "6380", "capa", "psync2").raw == b"+OK\r\n"
        assert c.call("PSYNC", "?", "x").raw == \
            b"-ERR value is not an integer or out of range\r\n"
        assert c.call("PSYNC", "?").raw.startswith(b"-ERR wrong number of arguments")
