"""A primary restarted from its own RDB file continues with its replicas partially (issue 15).

As Redis 7's, a primary with a backlog records in its own snapshots (BGSAVE, SAVE, save
points, the shutdown save) its replication ID and the offset at the cut (`repl-id`,
`repl-offset`, `repl-stream-db` 0: Redis's rdbPopulateSaveInfo); started from such a file
it keeps that history as its second ID, valid up to the recorded offset + 1, under a new
ID, with a backlog from there (Redis's loadDataFromDisk). A replica that stood at that
offset reconnects and continues with a partial resync (`sync_partial_ok`, no full sync),
and the writes made after the restart reach it. Checked with a Darner primary and a Darner
or Redis 7.0 replica, and with a Redis 7.0 primary (the behaviour this follows); the
primary stopped by SIGTERM (its shutdown save) or killed (SIGKILL) after a BGSAVE or a
SAVE. Waits poll with deadlines.
"""

from __future__ import annotations

import os

import pytest

import harness
from test_replica import digest, wait_for
from test_replica_restart import rdb_aux

pytestmark = pytest.mark.darner_only


def synced(p, r):
    off = p.info("replication")["master_repl_offset"]
    rep = r.info("replication")
    return rep.get("master_link_status") == "up" and rep.get("slave_repl_offset") == off


def restart_and_continue(primary, rep, replid, saved):
    """Restarts `primary` (killed or stopped) on its port from its file, whose position is
    `replid` at offset `saved`: it offers that history as its second one, and its replica
    `rep` reconnects with a partial resync. Returns a client of the restarted primary."""
    primary.fixed_port = primary.port
    primary.start()
    p, r = primary.client(), rep.client()
    ip = p.info("replication")
    assert ip["master_replid2"] == replid, ip
    assert ip["second_repl_offset"] == saved + 1, ip
    assert ip["master_replid"] != replid, ip
    wait_for(lambda: p.info("replication").get("connected_slaves") == 1
             and synced(p, r), 20, "the replica to reconnect")
    stats = p.info("stats")
    assert stats["sync_partial_ok"] == 1 and stats["sync_full"] == 0, (
        stats, rep.log_tail(4000))
    return p


@pytest.mark.parametrize("how", ["sigterm-save", "bgsave-then-kill", "save-then-kill"])
@pytest.mark.parametrize("servers", ["darner-darner", "darner-redis", "redis-darner"])
def test_a_restarted_primary_continues_its_replica_partially(servers, how, darner_factory):
    # No PING in the stream during the test: the replica must stand at the saved offset.
    pargs = ["--repl-ping-replica-period", "60", "--save", "3600 1"]
    primary_kind, replica_kind = servers.split("-")
    if primary_kind == "redis":
        primary = harness.start_reference(pargs + ["--repl-diskless-sync-delay", "0"])
    else:
        primary = darner_factory(*pargs)
    rep = None
    try:
        p = primary.client()
        p.set("before", "1")
        rargs = ["--replicaof", "127.0.0.1", primary.port]
        rep = harness.start_reference(rargs) if replica_kind == "redis" else darner_factory(*rargs)
        r = rep.client()
        wait_for(lambda: synced(p, r), 20, "the replica to sync")
        # Stream after the full sync, in databases 3 and 0.
        primary.client(db=3).set("three", "3")
        p.incr("counter")
        wait_for(lambda: synced(p, r), 20, "the replica to apply the writes")
        replid = p.info("replication")["master_replid"]
        offset = p.info("replication")["master_repl_offset"]
        if how == "sigterm-save":
            primary.stop(cleanup=False)
        elif how == "save-then-kill":
            assert p.save() is True
            primary.kill()
        else:
            saves = p.info("persistence")["rdb_saves"]
            assert p.bgsave() is True
            wait_for(lambda: p.info("persistence")["rdb_bgsave_in_progress"] == 0
                     and p.info("persistence")["rdb_saves"] == saves + 1, 20,
                     "the BGSAVE to end")
            assert p.info("persistence")["rdb_last_bgsave_status"] == "ok"
            primary.kill()
        fields = rdb_aux(os.path.join(primary.workdir, "dump.rdb"))
        assert fields.get(b"repl-id") == replid.encode(), fields
        # The offset at the cut: the stream's end then (Redis's shutdown adds the GETACK it
        # sends its replicas as it stops, which they apply too).
        saved = int(fields[b"repl-offset"])
        if how != "sigterm-save":
            assert saved == offset, (fields, offset)
        else:
            assert offset <= saved, (fields, offset)
        assert fields.get(b"repl-stream-db") == b"0", fields
        p = restart_and_continue(primary, rep, replid, saved)
        assert r.info("replication")["master_replid"] == p.info("replication")["master_replid"]
        # Writes after the restart reach it, in the database the stream selects.
        primary.client(db=3).set("after-3", "x")
        p.set("after", "y")
        p.incr("counter")
        wait_for(lambda: synced(p, r), 20, "the replica to apply the later writes")
        assert rep.client(db=3).get("after-3") == b"x"
        assert r.get("after") == b"y" and r.get("counter") == b"2"
        assert digest(r) == digest(p)
    finally:
        if rep is not None and replica_kind == "redis":
            rep.stop()
        if primary_kind == "redis":
            primary.stop()
