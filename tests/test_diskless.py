"""Diskless full sync on a Darner primary (issue 15): `repl-diskless-sync`, its delay and
max-replicas, and one snapshot shared by the replicas that ask at the same time (diskless,
and disk-based while the file is written).

Real processes on loopback ports: redis-server 7.0 and darner replicas, and raw
connections speaking the replica's side of the protocol. Every wait polls with a deadline.
"""

from __future__ import annotations

import os
import re
import time

import pytest

import harness
from test_primary import fill, read_line, read_snapshot, write_load
from test_replica import info, wait_for, wait_same

pytestmark = pytest.mark.darner_only

STARTED = "Starting BGSAVE for SYNC with target: "


def start_redis_replica(port):
    return harness.start_reference(["--replicaof", "127.0.0.1", str(port)])


def snapshots(primary, target):
    return primary.log_tail(200000).count(STARTED + target)


def repl_files(primary):
    """The full syncs' temporary files in the primary's directory."""
    return [f for f in os.listdir(primary.workdir) if "-repl-" in f]


def read_until(c, end, timeout=20.0):
    """Everything the raw connection receives up to and including `end`."""
    deadline = time.monotonic() + timeout
    while end not in c.reader.buf:
        c.reader.feed(c._recv_some(deadline))
    i = c.reader.buf.index(end) + len(end)
    data, c.reader.buf = c.reader.buf[:i], c.reader.buf[i:]
    return data


def test_a_redis_replica_that_says_capa_eof_syncs_diskless(darner_factory):
    primary = darner_factory("--repl-diskless-sync-delay", "0")
    fill(primary)
    p = primary.client()
    rep = start_redis_replica(primary.port)
    try:
        r = rep.client()
        wait_same(p, r)
        write_load(primary)
        wait_same(p, r)
        assert r.get("tx19") == b"19"
        assert snapshots(primary, "replicas sockets") == 1
        assert snapshots(primary, "disk") == 0
        assert "Streamed RDB transfer with replica 127.0.0.1:%d succeeded (socket)" % rep.port \
            in primary.log_tail(200000)
        assert "receiving streamed RDB from master with EOF" in rep.log_tail(200000)
        assert info(p, "stats")["sync_full"] == 1
    finally:
        rep.stop()


def test_a_darner_replica_syncs_diskless(darner_factory):
    primary = darner_factory("--repl-diskless-sync-delay", "0")
    fill(primary)
    p = primary.client()
    rep = darner_factory("--replicaof", "127.0.0.1", primary.port)
    r = rep.client()
    wait_same(p, r)
    write_load(primary)
    wait_same(p, r)
    assert snapshots(primary, "replicas sockets") == 1
    assert "receiving streamed RDB from master with EOF" in rep.log_tail(200000)


def test_the_diskless_payload_is_framed_by_an_eof_mark(darner_factory):
    primary = darner_factory("--repl-diskless-sync-delay", "0")
    p = primary.client()
    p.set("before", "1")
    with primary.raw() as c:
        assert c.call("REPLCONF", "capa", "eof", "capa", "psync2").raw == b"+OK\r\n"
        c.send("PSYNC", "?", "-1")
        assert read_line(c).startswith(b"+FULLRESYNC ")
        head = read_line(c)
        m = re.fullmatch(rb"\$EOF:([0-9a-f]{40})", head)
        assert m, head
        rdb = read_until(c, m.group(1))
        assert rdb.startswith(b"REDIS0010")
        assert b"before" in rdb
        # The stream follows the mark, once the replica acknowledged.
        c.send("REPLCONF", "ACK", "0")
        p.set("after", "2")
        want = (b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n"
                b"*3\r\n$3\r\nSET\r\n$5\r\nafter\r\n$1\r\n2\r\n")
        assert c.read_raw(len(want)) == want


def test_the_stream_after_a_diskless_snapshot_waits_for_the_replicas_first_ack(darner_factory):
    # A replica finds the EOF mark at the end of what it reads (Redis's does): nothing may
    # follow the mark until the replica says, with an ACK, that it has the snapshot.
    primary = darner_factory("--repl-diskless-sync-delay", "0", "--rdb-key-save-delay", "1000")
    p = primary.client()
    p.mset({"k%d" % i: i for i in range(400)})
    with primary.raw() as c:
        assert c.call("REPLCONF", "capa", "eof", "capa", "psync2").raw == b"+OK\r\n"
        c.send("PSYNC", "?", "-1")
        assert read_line(c).startswith(b"+FULLRESYNC ")
        mark = re.fullmatch(rb"\$EOF:([0-9a-f]{40})", read_line(c)).group(1)
        # Written while the snapshot is sent: after the cut, in the stream.
        p.set("during", "1")
        read_until(c, mark)
        wait_for(lambda: "Waiting for REPLCONF ACK from replica" in primary.log_tail(200000),
                 what="the end of the transfer")
        time.sleep(0.2)
        c.sock.setblocking(False)
        try:
            early = c.sock.recv(1 << 16)
        except BlockingIOError:
            early = b""
        c.sock.setblocking(True)
        assert c.reader.buf == b"" and early == b""
        c.send("REPLCONF", "ACK", "0")
        want = (b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n"
                b"*3\r\n$3\r\nSET\r\n$6\r\nduring\r\n$1\r\n1\r\n")
        assert c.read_raw(len(want)) == want
        wait_for(lambda: info(p)["slave0"]["state"] == "online", what="the replica online")


def test_a_redis_replica_gets_the_writes_made_during_its_diskless_sync(darner_factory):
    primary = darner_factory("--repl-diskless-sync-delay", "0", "--rdb-key-save-delay", "500")
    fill(primary)
    p = primary.client()
    rep = start_redis_replica(primary.port)
    try:
        wait_for(lambda: snapshots(primary, "replicas sockets") == 1, what="the snapshot")
        write_load(primary)
        wait_same(p, rep.client(), timeout=60)
        assert rep.client().get("tx19") == b"19"
    finally:
        rep.stop()


def test_a_replica_without_capa_eof_gets_a_disk_based_sync(darner_factory):
    primary = darner_factory("--repl-diskless-sync-delay", "0")
    primary.client().set("k", "v")
    with primary.raw() as c:
        assert c.call("REPLCONF", "capa", "psync2").raw == b"+OK\r\n"
        c.send("PSYNC", "?", "-1")
        assert read_line(c).startswith(b"+FULLRESYNC ")
        rdb = read_snapshot(c)
        assert b"k" in rdb
    assert snapshots(primary, "disk") == 1
    assert snapshots(primary, "replicas sockets") == 0


def test_replicas_asking_within_the_delay_share_one_diskless_snapshot(darner_factory):
    # Redis's default delay (5 s; the harness starts darner with 0): both replicas ask well
    # within it.
    primary = darner_factory("--repl-diskless-sync-delay", "5")
    fill(primary)
    p = primary.client()
    assert p.config_get("repl-diskless-sync*") == {
        "repl-diskless-sync": "yes",
        "repl-diskless-sync-delay": "5",
        "repl-diskless-sync-max-replicas": "0",
    }
    a = start_redis_replica(primary.port)
    b = start_redis_replica(primary.port)
    try:
        wait_same(p, a.client())
        wait_same(p, b.client())
        assert info(p, "stats")["sync_full"] == 2
        assert snapshots(primary, "replicas sockets") == 1
        assert "Delay next BGSAVE for diskless SYNC" in primary.log_tail(200000)
    finally:
        a.stop()
        b.stop()


def test_max_replicas_starts_the_diskless_snapshot_at_once(darner_factory):
    # A delay no test waits for: the second replica's arrival starts the snapshot.
    primary = darner_factory("--repl-diskless-sync-delay", "3600",
                             "--repl-diskless-sync-max-replicas", "2")
    fill(primary)
    p = primary.client()
    a = start_redis_replica(primary.port)
    try:
        wait_for(lambda: info(p).get("slave0", {}).get("state") == "wait_bgsave",
                 what="the first replica waiting")
        b = start_redis_replica(primary.port)
        try:
            wait_same(p, a.client())
            wait_same(p, b.client())
            assert snapshots(primary, "replicas sockets") == 1
        finally:
            b.stop()
    finally:
        a.stop()


def test_replicas_asking_while_a_disk_snapshot_is_written_share_it(darner_factory):
    primary = darner_factory("--repl-diskless-sync", "no", "--rdb-key-save-delay", "2000")
    p = primary.client()
    p.mset({"k%d" % i: i for i in range(2000)})
    with primary.raw() as one, primary.raw() as two:
        for c in (one, two):
            assert c.call("REPLCONF", "capa", "eof", "capa", "psync2").raw == b"+OK\r\n"
        one.send("PSYNC", "?", "-1")
        wait_for(lambda: snapshots(primary, "disk") == 1, what="the first snapshot")
        # Written during the snapshot: after the cut, in the buffered stream of both.
        p.set("during", "1")
        two.send("PSYNC", "?", "-1")
        first = read_line(one, timeout=30)
        second = read_line(two, timeout=30)
        assert first.startswith(b"+FULLRESYNC ") and first == second
        assert read_snapshot(one) == read_snapshot(two)
        want = b"*3\r\n$3\r\nSET\r\n$6\r\nduring\r\n$1\r\n1\r\n"
        for c in (one, two):
            got = c.read_raw(len(b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n") + len(want))
            assert got.endswith(want), got
    log = primary.log_tail(200000)
    assert snapshots(primary, "disk") == 1
    assert "Waiting for end of BGSAVE for SYNC" in log
    assert info(p, "stats")["sync_full"] == 2
    assert repl_files(primary) == []


def test_a_diskless_replica_that_reads_nothing_is_dropped_at_its_output_limit(darner_factory):
    # One snapshot for two replicas (max-replicas 2): one reads everything, the other nothing.
    primary = darner_factory("--repl-diskless-sync-delay", "3600",
                             "--repl-diskless-sync-max-replicas", "2",
                             "--client-output-buffer-limit", "replica", "1mb", "0", "0")
    c = primary.client()
    # Values LZF cannot shrink: more than the sockets' buffers hold.
    for i in range(24):
        c.set("big%d" % i, os.urandom(1 << 20))
    rep = start_redis_replica(primary.port)
    try:
        with primary.raw() as stuck:
            assert stuck.call("REPLCONF", "capa", "eof").raw == b"+OK\r\n"
            stuck.send("PSYNC", "?", "-1")
            wait_same(c, rep.client())
            wait_for(lambda: info(c)["connected_slaves"] == 1, what="the stuck one dropped")
    finally:
        rep.stop()
    assert "scheduled to be closed ASAP for overcoming of output buffer limits" in \
        primary.log_tail(200000)
    wait_for(lambda: info(c, "persistence")["rdb_bgsave_in_progress"] == 0, what="no snapshot")
    assert c.bgsave()


# ---- the replica's side: repl-diskless-load ----


def test_a_replica_with_diskless_load_on_an_empty_db_loads_from_the_socket(darner_factory):
    primary = darner_factory("--repl-diskless-sync-delay", "0")
    fill(primary)
    p = primary.client()
    rep = darner_factory("--repl-diskless-load", "on-empty-db",
                         "--replicaof", "127.0.0.1", primary.port)
    r = rep.client()
    wait_same(p, r)
    write_load(primary)
    wait_same(p, r)
    assert "receiving streamed RDB from master with EOF to parser" in rep.log_tail(200000)
    # No file: neither a temporary one nor the dump file it would have been renamed to.
    assert [f for f in os.listdir(rep.workdir) if f.endswith(".rdb")] == []


def test_diskless_load_from_a_redis_primary(darner_factory):
    primary = harness.start_reference(["--repl-diskless-sync-delay", "0"])
    try:
        fill(primary)
        p = primary.client()
        rep = darner_factory("--repl-diskless-load", "on-empty-db",
                             "--replicaof", "127.0.0.1", primary.port)
        r = rep.client()
        wait_same(p, r)
        assert r.get("s") == b"v"
        assert "with EOF to parser" in rep.log_tail(200000)
        assert [f for f in os.listdir(rep.workdir) if f.endswith(".rdb")] == []
    finally:
        primary.stop()


def test_diskless_load_on_empty_db_goes_to_disk_when_the_replica_holds_keys(darner_factory):
    primary = darner_factory("--repl-diskless-sync-delay", "0")
    fill(primary)
    p = primary.client()
    rep = darner_factory("--repl-diskless-load", "on-empty-db")
    r = rep.client()
    r.set("old", "1")
    assert r.execute_command("REPLICAOF", "127.0.0.1", primary.port) == b"OK"
    wait_same(p, r)
    assert r.exists("old") == 0
    log = rep.log_tail(200000)
    assert "with EOF to disk" in log and "to parser" not in log


def test_repl_diskless_load_takes_its_three_values(darner_factory):
    # swapdb (tests/test_swapdb.py) is accepted at start-up and by CONFIG SET.
    srv = darner_factory("--repl-diskless-load", "swapdb")
    c = srv.client()
    assert c.config_get("repl-diskless-load") == {"repl-diskless-load": "swapdb"}
    c.config_set("repl-diskless-load", "on-empty-db")
    assert c.config_get("repl-diskless-load") == {"repl-diskless-load": "on-empty-db"}
    c.config_set("repl-diskless-load", "swapdb")
    assert c.config_get("repl-diskless-load") == {"repl-diskless-load": "swapdb"}
    with pytest.raises(Exception, match="argument"):
        c.config_set("repl-diskless-load", "bogus")


def test_a_lone_diskless_replica_that_reads_nothing_is_dropped_after_repl_timeout(darner_factory):
    # Alone in its snapshot, the replica sets the pace (the shards wait for it, in bounded
    # memory); taking nothing for repl-timeout seconds, it is dropped and the snapshot ends.
    primary = darner_factory("--repl-diskless-sync-delay", "0", "--repl-timeout", "2")
    c = primary.client()
    for i in range(24):
        c.set("big%d" % i, os.urandom(1 << 20))
    with primary.raw() as stuck:
        assert stuck.call("REPLCONF", "capa", "eof").raw == b"+OK\r\n"
        stuck.send("PSYNC", "?", "-1")
        wait_for(lambda: snapshots(primary, "replicas sockets") == 1, what="the snapshot")
        # The shards keep serving meanwhile.
        assert c.set("during", "1")
        wait_for(lambda: info(c)["connected_slaves"] == 0, timeout=30, what="the drop")
    assert "timeout writing to the replica" in primary.log_tail(200000)
    wait_for(lambda: info(c, "persistence")["rdb_bgsave_in_progress"] == 0, what="no snapshot")
    assert c.bgsave()
