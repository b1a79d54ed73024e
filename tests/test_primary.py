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
from test_replica import digest, fill as fill_every_type, follower, info, wait_for, wait_same

pytestmark = pytest.mark.darner_only


def fill(p):
    """Keys of every type in several databases (test_replica's), and 200 more so both shards
    hold some."""
    fill_every_type(p)
    c = p.client()
    for i in range(200):
        c.set("k%d" % i, i)
    c.close()


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


# A diskless full sync (the default, for replicas that say `capa eof`) without its 5 s
# delay: the snapshot starts as soon as a replica asks.
NO_DELAY = ("--repl-diskless-sync-delay", "0")


@pytest.fixture
def primary(darner_factory):
    return darner_factory(*NO_DELAY)


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
    p, rep, r = follower(primary, darner_factory)
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


def read_line(c, timeout=10.0):
    """One line of the raw stream (without its CRLF), keep-alive newlines skipped."""
    deadline = time.monotonic() + timeout
    while True:
        buf = c.reader.buf
        while buf.startswith(b"\n"):
            buf = buf[1:]
        c.reader.buf = buf
        i = buf.find(b"\r\n")
        if i >= 0:
            c.reader.buf = buf[i + 2:]
            return buf[:i]
        c.reader.feed(c._recv_some(deadline))


def read_snapshot(c):
    head = read_line(c)
    assert head.startswith(b"$"), head
    rdb = c.read_raw(int(head[1:]))
    assert rdb.startswith(b"REDIS0010"), rdb[:16]
    return rdb


def test_sync_sends_the_snapshot_then_the_stream(primary):
    p = primary.client()
    p.set("before", "1")
    with primary.raw() as c:
        c.send("SYNC")
        rdb = read_snapshot(c)
        assert b"before" in rdb
        primary.client(db=2).set("after", "2")
        # The stream after a cut says which database it writes to.
        want = (b"*2\r\n$6\r\nSELECT\r\n$1\r\n2\r\n"
                b"*3\r\n$3\r\nSET\r\n$5\r\nafter\r\n$1\r\n2\r\n")
        assert c.read_raw(len(want)) == want


def test_psync_with_an_unknown_id_is_a_full_resync_at_the_cut_offset(primary):
    p = primary.client()
    p.set("k", "v")
    with primary.raw() as c:
        assert c.call("REPLCONF", "capa", "psync2").raw == b"+OK\r\n"
        c.send("PSYNC", "a" * 40, "1")
        line = read_line(c)
        _, replid, offset = line.split(b" ")
        assert line.startswith(b"+FULLRESYNC ")
        read_snapshot(c)
        i = info(p)
        assert replid.decode() == i["master_replid"]
        assert int(offset) <= i["master_repl_offset"]
        assert info(p, "stats")["sync_partial_err"] == 1
        assert "Replication ID mismatch" in primary.log_tail(20000)
    # The second replica continues from the backlog with the right ID.
    off = info(p)["master_repl_offset"]
    with primary.raw() as c:
        assert c.call("REPLCONF", "capa", "psync2").raw == b"+OK\r\n"
        c.send("PSYNC", info(p)["master_replid"], str(off + 1))
        assert read_line(c) == b"+CONTINUE " + info(p)["master_replid"].encode()
        p.set("next", "1")
        # The first write since the first replica's cut: its database is said first.
        want = (b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n"
                b"*3\r\n$3\r\nSET\r\n$4\r\nnext\r\n$1\r\n1\r\n")
        got = c.read_raw(len(want))
        assert got == want
    wait_for(lambda: info(p, "stats")["sync_partial_ok"] == 1, what="partial ok counted")
    # CONFIG SET resizes the backlog (raised to Redis's 16kb minimum).
    assert info(p)["repl_backlog_size"] == 1048576
    p.config_set("repl-backlog-size", "100")
    assert p.config_get("repl-backlog-size") == {"repl-backlog-size": "16384"}
    wait_for(lambda: info(p)["repl_backlog_size"] == 16384, what="the backlog resized")
    p.set("filler", "x" * 40000)
    i = wait_for(lambda: (lambda i: i if i["repl_backlog_histlen"] == 16384 else None)(info(p)),
                 what="a full backlog")
    assert i["repl_backlog_first_byte_offset"] == i["master_repl_offset"] - 16384 + 1


def test_a_replica_and_the_aof_share_the_stream_across_a_rewrite(darner_factory):
    primary = darner_factory("--appendonly", "yes", *NO_DELAY)
    fill(primary)
    p = primary.client()
    rep = start_redis_replica(primary.port)
    try:
        r = rep.client()
        wait_same(p, r)
        # An AOF rewrite's cut is no cut of the replication stream, and the other way round.
        assert p.bgrewriteaof()
        write_load(primary)
        wait_for(lambda: info(p, "persistence")["aof_rewrite_in_progress"] == 0,
                 what="the rewrite's end")
        wait_same(p, r)
        want = digest(p)
        # A second replica's full sync while the AOF is written.
        rep2 = start_redis_replica(primary.port)
        try:
            wait_same(p, rep2.client())
        finally:
            rep2.stop()
        p.set("last", "1")
        wait_same(p, r)
        want = digest(p)
    finally:
        rep.stop()
    primary.stop(cleanup=False)
    primary.start()
    assert digest(primary.client()) == want


def test_client_kill_type_replica_on_the_primary_resumes_partially(primary, darner_factory):
    fill(primary)
    p, rep, r = follower(primary, darner_factory)
    before = info(p, "stats")["sync_partial_ok"]
    assert p.execute_command("CLIENT", "KILL", "TYPE", "replica") == 1
    write_load(primary)
    wait_for(lambda: info(p, "stats")["sync_partial_ok"] == before + 1, what="a partial resync")
    wait_same(p, r)
    assert "Connection with replica 127.0.0.1:%d lost." % rep.port in primary.log_tail(20000)


def test_a_replica_whose_buffer_overflows_during_its_sync_is_dropped(darner_factory):
    primary = darner_factory("--client-output-buffer-limit", "replica", "1mb", "0", "0", *NO_DELAY)
    c = primary.client()
    big = "x" * (1 << 20)
    # A snapshot bigger than the socket buffers hold: it waits for a replica that reads
    # nothing, and the stream after the cut is buffered meanwhile.
    for i in range(24):
        c.set("big%d" % i, big)
    with primary.raw() as r:
        r.send("SYNC")
        wait_for(lambda: info(c)["connected_slaves"] == 1, what="the replica")
        n = [0]

        def write_and_check():
            n[0] += 1
            c.set("more%d" % n[0], big)
            return info(c)["connected_slaves"] == 0

        wait_for(write_and_check, what="the replica to be dropped")
    assert "scheduled to be closed ASAP for overcoming of output buffer limits" in \
        primary.log_tail(20000)
    # The snapshot's claim was given back: BGSAVE runs again.
    wait_for(lambda: info(c, "persistence")["rdb_bgsave_in_progress"] == 0, what="no snapshot")
    assert c.bgsave()


def test_client_kill_type_master_on_a_darner_replica_syncs_again(primary, darner_factory):
    # On a Darner replica the primary's link is the loopback connection that applies the
    # stream: killing it loses its selected database and what it had in flight, so the
    # replica syncs again in full (and does not loop on a dead connection).
    fill(primary)
    p, rep, r = follower(primary, darner_factory)
    full = info(p, "stats")["sync_full"]
    assert r.execute_command("CLIENT", "KILL", "TYPE", "master") == 1
    write_load(primary)
    wait_for(lambda: info(p, "stats")["sync_full"] == full + 1, what="a new full sync")
    wait_same(p, r)
    assert r.get("after") == b"1"
    assert rep.log_tail(20000).count("The connection applying the MASTER's stream failed") == 1


def test_a_primary_that_starts_following_drops_its_replicas_and_serves_them_after(primary):
    fill(primary)
    p = primary.client()
    rep = start_redis_replica(primary.port)
    upstream = harness.start_reference()
    try:
        r = rep.client()
        wait_same(p, r)
        u = upstream.client()
        u.set("from-upstream", "1")
        assert p.execute_command("REPLICAOF", "127.0.0.1", upstream.port) == b"OK"
        wait_for(lambda: info(p).get("master_link_status") == "up", what="the link up")
        wait_for(lambda: p.get("from-upstream") == b"1", what="the upstream's data")
        # Its replica was dropped, and syncs again from this server's copy of the
        # upstream's data (chained replication, test_chain.py).
        wait_for(lambda: r.get("from-upstream") == b"1", what="the replica to sync again")
        assert info(p)["repl_backlog_active"] == 1
        assert p.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
        p.set("mine", "2")
        wait_same(p, r)
        # It retried with PSYNC (a full resync: the backlog went), never with SYNC.
        assert "Partial resynchronization not accepted" in primary.log_tail(20000)
        assert r.get("from-upstream") == b"1" and r.get("mine") == b"2"
    finally:
        upstream.stop()
        rep.stop()
