"""`repl-diskless-load swapdb` on a Darner replica (issue 15): the primary's snapshot is
parsed from the socket into staging databases while the old dataset stays in memory; the
new data replaces the old at once at the end, and a failed load leaves the old data as it
was. When the primary's history is the replica's own (a full sync after a failed PSYNC),
clients go on reading the old data meanwhile (INFO `async_loading:1`); otherwise they get
-LOADING.

Real processes on loopback ports: darner replicas under a darner primary and under
redis-server 7.0. A primary's `rdb-key-save-delay` (microseconds a key) makes its snapshot,
and so the replica's load, last. Every wait polls with a deadline.
"""

from __future__ import annotations

import os
import time

import pytest

import harness
from test_primary import fill
from test_replica import FakePrimary, digest, info, synced, wait_for
from test_replica_restart import rdb_aux

pytestmark = pytest.mark.darner_only

# Keys of the slow snapshots: with rdb-key-save-delay at DELAY_US a key, a snapshot lasts
# well over a second (Redis writes them one by one; Darner's two shards in parallel).
SLOW_KEYS = 3000
DELAY_US = 1000


def start_primary(darner_factory, kind, *args):
    """A primary without a snapshot delay and with a small backlog (so a replica cut off
    from it for a few writes must sync in full), darner or redis-server 7.0."""
    args = ["--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
            "--repl-backlog-size", "16384", *args]
    if kind == "redis":
        return harness.start_reference(args)
    return darner_factory(*args)


@pytest.fixture(params=["darner", "redis"])
def primary(request, darner_factory):
    srv = start_primary(darner_factory, request.param)
    try:
        yield srv
    finally:
        srv.stop()


def slow_keys(p):
    c = p.client()
    with c.pipeline(transaction=False) as pipe:
        for i in range(SLOW_KEYS):
            pipe.set("slow:%d" % i, "%d:%s" % (i, "v" * 100))
        pipe.execute()
    c.close()


def swapdb_replica(darner_factory, primary):
    rep = darner_factory("--repl-diskless-load", "swapdb",
                         "--replicaof", "127.0.0.1", primary.port)
    return rep, rep.client()


def force_full_sync(p):
    """Cuts the replicas off and writes past the backlog in one transaction: the replica's
    PSYNC then fails and the primary sends a new snapshot, under the same history."""
    with p.pipeline(transaction=True) as t:
        t.execute_command("CLIENT", "KILL", "TYPE", "replica")
        t.set("marker", "new")
        for i in range(4):
            t.set("pad%d" % i, "x" * 16384)
        t.execute()


def wait_same(p, r, timeout=30.0):
    # Offsets and digests together: right after a full sync, the offsets can agree a moment
    # before the primary's last writes are counted (seen on the disk and on-empty-db paths
    # too), so one look at the digests could see the replica behind.
    wait_for(lambda: synced(p, r) and digest(r) == digest(p), timeout,
             "the replica to hold the primary's data")


def persistence(r):
    return info(r, "persistence")


def test_a_swapdb_replica_ends_equal_to_its_primary(primary, darner_factory):
    fill(primary)
    p = primary.client()
    rep = darner_factory("--repl-diskless-load", "swapdb")
    r = rep.client()
    r.set("local", "1")
    r.execute_command("SELECT", 7)
    r.set("local7", "1")
    r.execute_command("SELECT", 0)
    assert r.execute_command("REPLICAOF", "127.0.0.1", primary.port) == b"OK"
    wait_same(p, r)
    assert r.exists("local") == 0
    assert r.dbsize() == p.dbsize()
    p.set("after", "1")
    p.rpush("l", "more")
    wait_same(p, r)
    log = rep.log_tail(200000)
    assert "with EOF to parser" in log
    assert "Swapping active DB with loaded DB" in log
    assert "Discarding old DB in background" in log
    # No file: the snapshot went from the socket to the staging databases.
    assert [f for f in os.listdir(rep.workdir) if f.endswith(".rdb")] == []
    s = persistence(r)
    assert s["loading"] == 0 and s["async_loading"] == 0


def test_a_length_framed_snapshot_loads_too(darner_factory):
    # A disk-based sync on the primary sends `$<len>`: the replica parses it the same way.
    primary = darner_factory("--repl-diskless-sync", "no")
    fill(primary)
    p = primary.client()
    rep, r = swapdb_replica(darner_factory, primary)
    wait_same(p, r)
    assert "bytes from master to parser" in rep.log_tail(200000)


def test_old_data_is_served_while_a_resync_of_the_same_history_loads(primary, darner_factory):
    fill(primary)
    slow_keys(primary)
    p = primary.client()
    p.set("marker", "old")
    rep, r = swapdb_replica(darner_factory, primary)
    wait_same(p, r)
    before = digest(r)
    keys = r.dbsize()
    p.config_set("rdb-key-save-delay", DELAY_US)
    force_full_sync(p)
    wait_for(lambda: persistence(r)["async_loading"] == 1, what="async_loading:1")
    # The old dataset, whole, while the new one loads beside it.
    assert persistence(r)["loading"] == 0
    assert r.get("marker") == b"old"
    assert r.get("slow:17").startswith(b"17:")
    assert r.dbsize() == keys
    assert digest(r) == before
    # Commands Redis flags no-async-loading wait for the end.
    # (A raw connection: redis-py retries on -LOADING.)
    with rep.raw() as raw:
        assert raw.call("REPLICAOF", "NO", "ONE").raw.startswith(b"-LOADING")
    assert persistence(r)["async_loading"] == 1
    p.config_set("rdb-key-save-delay", 0)
    wait_for(lambda: persistence(r)["async_loading"] == 0, timeout=60, what="the load's end")
    wait_same(p, r)
    assert r.get("marker") == b"new"
    assert "Swapping active DB with loaded DB" in rep.log_tail(200000)


def test_a_replica_of_another_history_answers_loading_meanwhile(primary, darner_factory):
    slow_keys(primary)
    p = primary.client()
    p.config_set("rdb-key-save-delay", DELAY_US)
    rep = darner_factory("--repl-diskless-load", "swapdb")
    r = rep.client()
    r.set("local", "1")
    assert r.execute_command("REPLICAOF", "127.0.0.1", primary.port) == b"OK"
    wait_for(lambda: persistence(r)["loading"] == 1, what="loading:1")
    assert persistence(r)["async_loading"] == 0
    with rep.raw() as raw:
        assert raw.call("GET", "local").raw == b"-LOADING Redis is loading the dataset in memory\r\n"
    assert persistence(r)["loading"] == 1
    p.config_set("rdb-key-save-delay", 0)
    wait_for(lambda: persistence(r)["loading"] == 0, timeout=60, what="the load's end")
    wait_same(p, r)
    assert r.exists("local") == 0


def test_a_load_cut_off_midway_keeps_the_old_data(darner_factory):
    for kind in ("darner", "redis"):
        primary = start_primary(darner_factory, kind)
        try:
            fill(primary)
            slow_keys(primary)
            p = primary.client()
            rep, r = swapdb_replica(darner_factory, primary)
            wait_same(p, r)
            before, keys = digest(r), r.dbsize()
            # Slower still: the primary dies long before its snapshot's end.
            p.config_set("rdb-key-save-delay", 5 * DELAY_US)
            force_full_sync(p)
            wait_for(lambda: persistence(r)["async_loading"] == 1, what="async_loading:1")
            # Part of the snapshot has been read: both primaries send it as it goes, 16 KB at
            # a time under rdb-key-save-delay (keys are going to the staging databases).
            wait_for(lambda: persistence(r).get("loading_loaded_bytes", 0) > 1000,
                     what="some of the payload")
            assert persistence(r)["async_loading"] == 1
            primary.kill()
            wait_for(lambda: persistence(r)["async_loading"] == 0, what="the load's end")
            assert "Discarding temporary DB in background" in rep.log_tail(200000)
            assert digest(r) == before
            assert r.dbsize() == keys
            assert r.get("marker") is None
            # The link is retried.
            wait_for(lambda: rep.log_tail(200000).split("Discarding temporary DB")[-1]
                     .count("Connecting to MASTER") >= 1, what="a new connection attempt")
        finally:
            primary.stop()


@pytest.mark.parametrize("same_history", [True, False])
def test_a_corrupt_snapshot_keeps_the_old_data(darner_factory, same_history):
    rep = darner_factory("--repl-diskless-load", "swapdb")
    r = rep.client()
    r.set("k", "v")
    r.rpush("l", *range(100))
    before = digest(r)
    # The replica's own history (async loading) or another one (-LOADING meanwhile).
    replid = info(r)["master_replid"].encode() if same_history else b"b" * 40
    # A valid RDB header, then a byte that is no opcode.
    payload = b"REDIS0011\xfa\x09redis-ver\x057.0.0\xf0junk"
    fake = FakePrimary(replid=replid, payload=b"$%d\r\n%s" % (len(payload), payload))
    try:
        assert r.execute_command("REPLICAOF", "127.0.0.1", fake.port) == b"OK"
        wait_for(lambda: fake.connections >= 2, what="a second attempt")
        log = rep.log_tail(20000)
        assert "Failed trying to load the MASTER synchronization DB from socket" in log
        assert "Discarding temporary DB in background" in log
        assert "Swapping active DB" not in log
        wait_for(lambda: persistence(r)["async_loading"] == 0 and persistence(r)["loading"] == 0,
                 what="no load")
        assert digest(r) == before
        assert r.get("k") == b"v"
        assert info(r)["master_link_status"] == "down"
    finally:
        fake.close()


def test_no_background_save_starts_while_a_resync_loads_async(primary, darner_factory):
    """A save point met while the replica loads its primary's snapshot beside the old data
    starts no BGSAVE (Redis runs no serverCron during a load): it would save the old dataset
    about to be replaced. Once the new one is in place, the save point saves it, with its
    place in the primary's stream."""
    slow_keys(primary)
    p = primary.client()
    rep, r = swapdb_replica(darner_factory, primary)
    wait_same(p, r)
    # A change the replica applies: its save point has something to save.
    p.set("applied", "1")
    wait_same(p, r)
    assert persistence(r)["rdb_changes_since_last_save"] >= 1
    saves = persistence(r)["rdb_saves"]
    p.config_set("rdb-key-save-delay", 5 * DELAY_US)
    force_full_sync(p)
    wait_for(lambda: persistence(r)["async_loading"] == 1, what="async_loading:1")
    assert r.config_set("save", "1 1")
    # Past the save point's second in whole seconds, the cron (10 ticks a second) had
    # every chance to start it.
    time.sleep(2.5)
    s = persistence(r)
    assert s["async_loading"] == 1, "the load ended too soon to show anything"
    assert s["rdb_bgsave_in_progress"] == 0 and s["rdb_saves"] == saves, s
    assert not [f for f in os.listdir(rep.workdir) if f.endswith(".rdb")]
    p.config_set("rdb-key-save-delay", 0)
    wait_for(lambda: persistence(r)["async_loading"] == 0, timeout=60, what="the load's end")
    wait_same(p, r)
    p.set("after", "1")
    wait_same(p, r)
    wait_for(lambda: persistence(r)["rdb_saves"] > saves
             and persistence(r)["rdb_bgsave_in_progress"] == 0
             and persistence(r)["rdb_changes_since_last_save"] == 0, 20,
             "the save point's save after the load")
    assert persistence(r)["rdb_last_bgsave_status"] == "ok"
    fields = rdb_aux(os.path.join(rep.workdir, "dump.rdb"))
    assert fields.get(b"repl-id") == info(p, "replication")["master_replid"].encode(), fields


def test_used_memory_counts_the_old_and_the_loading_datasets(darner_factory):
    """While a swapdb replica loads beside its old data, `used_memory` counts both (as
    Redis's: every allocation is counted), about twice the dataset at the load's end; once
    the new databases are swapped in and the old ones freed, it comes back to one dataset."""
    primary = start_primary(darner_factory, "darner")
    try:
        c = primary.client()
        # About 6 MB of incompressible values.
        with c.pipeline(transaction=False) as pipe:
            for i in range(3000):
                pipe.set("big:%d" % i, os.urandom(1000).hex())
            pipe.execute()
        rep, r = swapdb_replica(darner_factory, primary)
        wait_same(c, r)
        one = info(r, "memory")["used_memory"]
        c.config_set("rdb-key-save-delay", 2 * DELAY_US)
        force_full_sync(c)
        wait_for(lambda: persistence(r)["async_loading"] == 1, what="async_loading:1")
        # Samples while it loads, each from one INFO reply: (bytes read, used_memory).
        samples = []
        while True:
            now = info(r, "all")
            if now["async_loading"] != 1:
                break
            samples.append((now.get("loading_loaded_bytes", 0), now["used_memory"]))
            time.sleep(0.05)
        late = [(loaded, used) for loaded, used in samples if loaded > 3_000_000]
        assert late, samples[-5:]
        # The old dataset stays counted, and the loaded keys come on top of it (without the
        # old one, used_memory could not pass it by half of what was read).
        assert all(used > one + loaded // 2 for loaded, used in late), (one, late)
        c.config_set("rdb-key-save-delay", 0)
        wait_same(c, r)
        wait_for(lambda: info(r, "memory")["used_memory"] < one * 1.5, 20,
                 "the old dataset to be freed")
    finally:
        primary.stop()
