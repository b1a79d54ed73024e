"""A primary's own snapshots and its replication position, and `rdb-key-save-delay` (issue 15).

FLUSHALL with save points set writes the empty dataset at once (Redis 7.2's
flushAllDataAndResetRDB); on a primary with a backlog that file records where it stands in
its stream (`repl-id`, `repl-offset`, Redis's rdbPopulateSaveInfo): Darner's offset is the
stream's just after the FLUSHALL, so a primary restarted from the file continues its replica
(Darner or Redis 7.0) with a partial resync, the replica emptied and the writes after the
restart reaching it.

`rdb-key-save-delay` slows a snapshot's key records and nothing else: a diskless full sync's
records reach the replica at the pace of the keys (Redis's child hands its buffer on every
16 KB), not the header first and everything else near the end. Checked over a raw PSYNC
against a Darner primary and against redis-server 7.0, the reference. Waits poll with
deadlines; the timing test passes 10 runs in a row.
"""

from __future__ import annotations

import os
import socket
import time

import pytest

import harness
from test_primary_restart import restart_and_continue, synced
from test_replica import digest, wait_for
from test_replica_restart import rdb_aux

pytestmark = pytest.mark.darner_only


@pytest.mark.parametrize("replica_kind", ["darner", "redis"])
def test_flushall_save_records_the_position_and_a_restart_continues(replica_kind,
                                                                    darner_factory):
    # No PING in the stream during the test: the replica must stand at the saved offset.
    primary = darner_factory("--repl-ping-replica-period", "60", "--save", "3600 1")
    rep = None
    try:
        p = primary.client()
        for i in range(50):
            p.set("k%d" % i, i)
        primary.client(db=2).set("two", "2")
        rargs = ["--replicaof", "127.0.0.1", primary.port]
        rep = (harness.start_reference(rargs) if replica_kind == "redis"
               else darner_factory(*rargs))
        r = rep.client()
        wait_for(lambda: synced(p, r), 20, "the replica to sync")
        p.incr("counter")
        assert p.flushall() is True
        wait_for(lambda: synced(p, r), 20, "the replica to apply the FLUSHALL")
        assert r.dbsize() == 0
        replid = p.info("replication")["master_replid"]
        offset = p.info("replication")["master_repl_offset"]
        # Killed: the file is FLUSHALL's (no shutdown save).
        primary.kill()
        fields = rdb_aux(os.path.join(primary.workdir, "dump.rdb"))
        assert fields.get(b"repl-id") == replid.encode(), fields
        assert int(fields[b"repl-offset"]) == offset, (fields, offset)
        assert fields.get(b"repl-stream-db") == b"0", fields
        p = restart_and_continue(primary, rep, replid, offset)
        p.set("after", "y")
        primary.client(db=2).set("after-2", "z")
        wait_for(lambda: synced(p, r), 20, "the replica to apply the later writes")
        assert r.get("after") == b"y" and rep.client(db=2).get("after-2") == b"z"
        assert r.dbsize() == 1
        assert digest(r) == digest(p)
    finally:
        if rep is not None and replica_kind == "redis":
            rep.stop()


def test_flushall_inside_exec_saves_without_a_position(darner_factory):
    # Its transaction's log holds the other commands of the EXEC: the save cannot cut it.
    primary = darner_factory("--save", "3600 1")
    rep = darner_factory("--replicaof", "127.0.0.1", primary.port)
    p, r = primary.client(), rep.client()
    wait_for(lambda: synced(p, r), 20, "the replica to sync")
    tx = p.pipeline(transaction=True)
    tx.set("a", 1).flushall().set("b", 2)
    assert tx.execute() == [True, True, True]
    wait_for(lambda: synced(p, r), 20, "the replica to apply the EXEC")
    assert r.get("a") is None and r.get("b") == b"2"
    fields = rdb_aux(os.path.join(primary.workdir, "dump.rdb"))
    assert b"repl-id" not in fields and b"repl-offset" not in fields, fields
    assert digest(r) == digest(p)


# The slowed snapshot: KEYS records of about 210 bytes (incompressible), each followed by a
# sleep of DELAY_US: a few seconds in all, 16 KB (about 75 keys) at a time.
KEYS = 3000
DELAY_US = 1000


def psync_timeline(port, timeout=60.0):
    """A raw diskless replica's full sync: (seconds to the first key bytes after the RDB's
    start, seconds to half the payload, seconds to the end mark, payload length)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(b"*3\r\n$8\r\nREPLCONF\r\n$4\r\ncapa\r\n$3\r\neof\r\n")
        buf = b""
        while b"\r\n" not in buf:
            buf += s.recv(4096)
        assert buf.startswith(b"+OK"), buf
        buf = b""
        t0 = time.monotonic()
        s.sendall(b"*3\r\n$5\r\nPSYNC\r\n$1\r\n?\r\n$2\r\n-1\r\n")
        arrivals = []  # (time, bytes of payload so far)
        mark = None
        payload = b""
        while True:
            d = s.recv(1 << 16)
            assert d, "the primary closed the link"
            now = time.monotonic() - t0
            if mark is None:
                buf += d
                i = buf.find(b"$EOF:")
                if i < 0 or buf.find(b"\r\n", i) < 0:
                    continue
                j = buf.index(b"\r\n", i)
                mark = buf[i + 5:j]
                assert len(mark) == 40, buf
                d = buf[j + 2:]
            payload += d
            arrivals.append((now, len(payload)))
            if payload.endswith(mark):
                break
        total = len(payload) - len(mark)
        # The RDB's start: header, AUX fields, then the first SELECTDB (0xfe).
        start = payload.index(b"\xfe")
        first = next(t for t, n in arrivals if n > start + 64)
        half = next(t for t, n in arrivals if n >= total // 2)
        return first, half, arrivals[-1][0], total
    finally:
        s.close()


@pytest.mark.parametrize("kind", ["darner", "redis"])
def test_rdb_key_save_delay_paces_the_records_not_the_start(kind, darner_factory):
    args = ["--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
            "--rdb-key-save-delay", str(DELAY_US)]
    server = harness.start_reference(args) if kind == "redis" else darner_factory(*args)
    try:
        c = server.client()
        pipe = c.pipeline(transaction=False)
        for i in range(KEYS):
            pipe.set("k%d" % i, os.urandom(100).hex())
        pipe.execute()
        first, half, end, total = psync_timeline(server.port)
        assert total > KEYS * 200, total
        # The delay holds: at least the keys' sleeps shared by Darner's two shards.
        assert end >= KEYS * DELAY_US / 1e6 / 2 * 0.8, (first, half, end)
        # The records come as the keys are written: the first ones early, half of the
        # payload well before the end (not the header, then the rest near the end).
        assert first < 0.25 * end, (first, half, end)
        assert half < 0.8 * end, (first, half, end)
    finally:
        if kind == "redis":
            server.stop()
