"""A replica's full-sync load stops the BGSAVE it has in progress (issue 15).

Redis's readSyncBulkPayload kills its RDB child before it loads the primary's snapshot (with
SIGUSR1: `rdb_last_bgsave_status` stays as it was, the child's temp file is removed): the
child holds the dataset about to be replaced, and would otherwise write it into
`dbfilename` after the load (over the primary's snapshot, which a disk-based load keeps
there). A Darner replica does the same. Checked against a Darner replica and a Redis 7.0
one, under a Darner primary, for a disk-based load (`repl-diskless-load disabled`, which
logs it) and an async one (`swapdb`): the save (made long with `rdb-key-save-delay`) is in
progress when the sync starts; after the sync it ends without an error and without its
temp file, and `dbfilename` never gets the replaced dataset. The same holds for the snapshot
a replica is making for its own replica: its load stops that one too, and the sub-replica
syncs again. Waits poll with deadlines.
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile

import pytest

import harness
from test_replica import digest, wait_for

pytestmark = pytest.mark.darner_only

# Each key the save writes waits 50 ms (rdb-key-save-delay): a thousand keep it going for
# about 25 s over both shards of a Darner replica (50 s in Redis's child), far longer than
# the sync takes even on a loaded machine, so it is still running when the load starts.
OLD_KEYS = 1000


def persistence(c):
    return c.info("persistence")


def synced(p, r):
    off = p.info("replication")["master_repl_offset"]
    rep = r.info("replication")
    return rep.get("master_link_status") == "up" and rep.get("slave_repl_offset") == off


def keys_of_file(path, darner_factory):
    """The keys of the RDB file at `path`, as a server started from a copy of it sees them."""
    d = tempfile.mkdtemp(prefix="darner-rdbcheck-")
    try:
        shutil.copy(path, os.path.join(d, "dump.rdb"))
        srv = darner_factory("--dir", d, "--dbfilename", "dump.rdb")
        try:
            return set(srv.client().keys("*"))
        finally:
            srv.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("load", ["disabled", "swapdb"])
@pytest.mark.parametrize("replica", ["darner-replica", "redis-replica"])
def test_a_full_sync_load_stops_the_replicas_bgsave(replica, load, darner_factory):
    primary = darner_factory()
    p = primary.client()
    for i in range(50):
        p.set("p:%d" % i, i)
    args = ["--repl-diskless-load", load, "--rdb-key-save-delay", "50000"]
    if replica == "redis-replica":
        rep = harness.start_reference(args)
    else:
        rep = darner_factory(*args)
    try:
        r = rep.client()
        with r.pipeline(transaction=False) as pl:
            for i in range(OLD_KEYS):
                pl.set("old:%d" % i, i)
            pl.execute()
        assert r.bgsave() is True
        before = persistence(r)
        assert before["rdb_bgsave_in_progress"] == 1
        r.execute_command("REPLICAOF", "127.0.0.1", primary.port)
        wait_for(lambda: synced(p, r) and digest(r) == digest(p), 20,
                 "the replica to load the primary's snapshot")
        # The save still had most of its keys to write: it was stopped, not finished.
        wait_for(lambda: persistence(r)["rdb_bgsave_in_progress"] == 0, 20,
                 "the stopped save to end")
        after = persistence(r)
        assert after["rdb_last_bgsave_status"] == "ok", after
        assert after["rdb_last_bgsave_status"] == before["rdb_last_bgsave_status"]
        # No other save started (rdb_saves counts those started, as Redis's).
        assert after["rdb_saves"] == before["rdb_saves"], (before, after)
        wait_for(lambda: not glob.glob(os.path.join(rep.workdir, "temp-*.rdb")), 10,
                 "the stopped save's temp file to go")
        dump = os.path.join(rep.workdir, "dump.rdb")
        if load == "disabled":
            # The primary's snapshot, kept as the replica's file, is still there.
            assert "Replica is about to load the RDB file received from the master" in \
                rep.log_tail(1 << 20)
            assert keys_of_file(dump, darner_factory) == set(p.keys("*"))
        else:
            # Loaded from the socket: no file, and the stopped save wrote none.
            assert not os.path.exists(dump)
        # The replica goes on with the primary's data alone.
        p.set("after", "1")
        wait_for(lambda: synced(p, r), 20, "the replica to apply a later write")
        assert r.get("after") == b"1"
        assert r.exists("old:0") == 0
    finally:
        if replica == "redis-replica":
            rep.stop()


@pytest.mark.parametrize("middle", ["darner-replica", "redis-replica"])
def test_a_full_sync_load_stops_the_sync_a_replica_serves_its_own_replica(middle,
                                                                         darner_factory):
    """A replica B (Darner, or Redis 7.0 as the reference) is serving a full sync to its own
    replica C, its snapshot made long with `rdb-key-save-delay` (OLD_KEYS keys at 50 ms: about
    25 s), when B is pointed at a new primary D. B's load of D's snapshot stops that snapshot
    (Redis kills the child and drops its sub-replicas, which then sync again): C ends with D's
    data, long before the old snapshot could have ended, and never with the old keys."""
    a = darner_factory()
    ac = a.client()
    with ac.pipeline(transaction=False) as pl:
        for i in range(OLD_KEYS):
            pl.set("old:%d" % i, i)
        pl.execute()
    args = ["--rdb-key-save-delay", "50000", "--repl-diskless-sync-delay", "0",
            "--replicaof", "127.0.0.1", str(a.port)]
    b = harness.start_reference(args) if middle == "redis-replica" else darner_factory(*args)
    try:
        bc = b.client()
        wait_for(lambda: synced(ac, bc) and digest(bc) == digest(ac), 20, "B to sync from A")
        c = darner_factory()
        cc = c.client()
        cc.execute_command("REPLICAOF", "127.0.0.1", b.port)
        wait_for(lambda: cc.info("replication").get("master_sync_in_progress") == 1
                 or cc.info("replication").get("master_link_status") == "up", 10,
                 "C's full sync from B to start")
        assert cc.info("replication").get("master_link_status") != "up", \
            "B's snapshot of %d keys ended at once: rdb-key-save-delay did not hold it" % OLD_KEYS
        d = darner_factory()
        dc = d.client()
        for i in range(20):
            dc.set("new:%d" % i, i)
        bc.execute_command("REPLICAOF", "127.0.0.1", d.port)
        # The old snapshot had about 25 s to go: C having D's data within 20 s means B
        # stopped it (20 keys of D's at 50 ms take a second).
        wait_for(lambda: synced(dc, bc) and synced(bc, cc) and digest(cc) == digest(dc), 20,
                 "C to sync again from B and hold D's data")
        assert cc.exists("old:0") == 0
        dc.set("after", "1")
        wait_for(lambda: cc.get("after") == b"1", 20, "C to apply D's later write through B")
    finally:
        if middle == "redis-replica":
            b.stop()
