"""A replica restarted from its own RDB file continues with a partial resync (issue 15).

As Redis's replicas, a Darner replica records in its snapshots where its data stands in the
primary's stream (`repl-id`, `repl-offset`, `repl-stream-db`), taken with the link paused
where everything it forwarded is applied, so the offset is exact. Restarted from that file
with `replicaof` set, it asks to continue from there: the primary counts a partial resync
(`sync_partial_ok`), no second full sync, and the writes made while it was down arrive,
in the database the stream had selected. Cases: killed (SIGKILL) after a save-point
snapshot, and stopped by SIGTERM (the shutdown save); under a Darner and a Redis 7.0
primary. Waits poll with deadlines.
"""

from __future__ import annotations

import time

import pytest

import harness
from test_replica import digest, wait_for

pytestmark = pytest.mark.darner_only


def rdb_aux(path):
    """The AUX fields of the RDB file at `path`, as {name: value} (bytes), read up to the
    first record that is not an AUX field (they come first, after the header)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:5] == b"REDIS", data[:9]
    pos = 9

    def length():
        nonlocal pos
        b = data[pos]
        kind = b >> 6
        if kind == 0:
            pos += 1
            return b & 0x3F, False
        if kind == 1:
            pos += 2
            return ((b & 0x3F) << 8) | data[pos - 1], False
        if kind == 3:
            pos += 1
            return b & 0x3F, True
        if b == 0x80:
            pos += 5
            return int.from_bytes(data[pos - 4:pos], "big"), False
        pos += 9
        return int.from_bytes(data[pos - 8:pos], "big"), False

    def string():
        nonlocal pos
        n, encoded = length()
        if not encoded:
            pos += n
            return data[pos - n:pos]
        width = {0: 1, 1: 2, 2: 4}[n]
        pos += width
        return str(int.from_bytes(data[pos - width:pos], "little", signed=True)).encode()

    fields = {}
    while data[pos] == 0xFA:
        pos += 1
        key = string()
        fields[key] = string()
    return fields


def synced(p, r):
    off = p.info("replication")["master_repl_offset"]
    rep = r.info("replication")
    return rep.get("master_link_status") == "up" and rep.get("slave_repl_offset") == off


def start_primary(kind, darner_factory):
    if kind == "darner-primary":
        return darner_factory(), False
    return harness.start_reference(["--repl-diskless-sync-delay", "0"]), True


@pytest.mark.parametrize("how", ["kill-after-save-point", "sigterm"])
@pytest.mark.parametrize("kind", ["darner-primary", "redis-primary"])
def test_a_restarted_replica_continues_partially(kind, how, darner_factory):
    primary, own = start_primary(kind, darner_factory)
    try:
        p = primary.client()
        p.set("before", "1")
        # Save points on, so the replica snapshots by itself (and at shutdown).
        rep = darner_factory("--replicaof", "127.0.0.1", primary.port, "--save", "1 1",
                             save_off=False)
        r = rep.client()
        wait_for(lambda: synced(p, r), 20, "the replica to sync")
        # The stream's last SELECT is database 3 when the replica saves.
        p3 = primary.client(db=3)
        p3.set("three", "3")
        p.set("zero", "0")
        p3.set("three-b", "3")
        wait_for(lambda: synced(p, r), 20, "the replica to apply the writes")
        if how == "kill-after-save-point":
            # A snapshot that holds the writes: without the checks of the data and of
            # rdb_saves, a wait that began before the replica applied them (an offset
            # compared too early) saw no change to save and killed the replica before any
            # save; it restarted from the full sync's copy of the primary's snapshot
            # (which has the repl fields of the cut, not of the writes after it).
            wait_for(lambda: rep.client(db=3).get("three-b") == b"3"
                     and r.get("zero") == b"0"
                     and r.info("persistence")["rdb_saves"] >= 1
                     and r.info("persistence")["rdb_changes_since_last_save"] == 0
                     and r.info("persistence")["rdb_bgsave_in_progress"] == 0
                     and r.info("persistence")["rdb_last_bgsave_status"] == "ok",
                     20, "the replica's save point snapshot")
            rep.kill()
        else:
            rep.stop(cleanup=False)
        full_before = p.info("stats")["sync_full"]
        partial_before = p.info("stats")["sync_partial_ok"]
        # Written while the replica is down: a command for database 3 without a SELECT
        # before it in what the replica misses, and one for database 0.
        p3.set("while-down-3", "x")
        p.set("while-down-0", "y")
        rep.fixed_port = rep.port
        rep.start()
        r = rep.client()
        wait_for(lambda: synced(p, r), 20, "the restarted replica to catch up")
        assert p.info("stats")["sync_partial_ok"] == partial_before + 1, (
            "no partial resync; the replica's log:\n" + rep.log_tail(6000))
        assert p.info("stats")["sync_full"] == full_before
        assert rep.client(db=3).get("while-down-3") == b"x"
        assert r.get("while-down-0") == b"y"
        assert digest(r) == digest(p)
    finally:
        if own:
            primary.stop()


def test_a_replica_saving_while_it_applies_keeps_its_offset_exact(darner_factory):
    """Snapshots taken by the save points while the stream flows: each restart from the
    latest one continues partially with the same data as the primary (an offset ahead of or
    behind the data would apply a write twice or skip it; INCR shows either)."""
    # A backlog far larger than the stream a round writes: a replica that applies slowly
    # (a loaded machine) may fall a megabyte behind the pipelined INCRs, and a cut that far
    # back is past the default 1 MB backlog by the restart (a full sync, as in Redis: not
    # what this checks).
    primary = darner_factory("--repl-backlog-size", "64mb")
    p = primary.client()
    rep = darner_factory("--replicaof", "127.0.0.1", primary.port, "--save", "1 1",
                         save_off=False)
    r = rep.client()
    wait_for(lambda: synced(p, r), 20, "the replica to sync")
    for round_ in range(2):
        saves = r.info("persistence")["rdb_saves"]
        # INCRs flow while the replica's save point snapshot is cut (the save point asks
        # for a second since the last save or the start).
        deadline = time.monotonic() + 20
        while r.info("persistence")["rdb_saves"] < saves + 1:
            assert time.monotonic() < deadline, "no save point snapshot"
            with p.pipeline(transaction=False) as pl:
                for _ in range(100):
                    pl.incr("counter")
                pl.execute()
        wait_for(lambda: r.info("persistence")["rdb_bgsave_in_progress"] == 0, 20,
                 "the snapshot to end")
        rep.kill()
        p.incr("counter")
        rep.fixed_port = rep.port
        rep.start()
        r = rep.client()
        wait_for(lambda: synced(p, r), 20, "the restarted replica to catch up")
        assert r.get("counter") == p.get("counter")
        assert digest(r) == digest(p)
    assert p.info("stats")["sync_full"] == 1, rep.log_tail(6000)


def paused_link_snapshot_then_restart(primary, rep, pause_ms):
    """A BGSAVE (scheduled inside MULTI, so the cron starts it with the link paused first)
    while CLIENT PAUSE WRITE on the replica holds back a write of the stream for `pause_ms`;
    then the replica is killed, misses a write and restarts. Returns the primary's
    (sync_full, sync_partial_ok) increments and the restarted replica's client."""
    p = primary.client()
    r = rep.client()
    saves = r.info("persistence")["rdb_saves"]
    r.execute_command("CLIENT", "PAUSE", pause_ms, "WRITE")
    p.set("held", "1")
    with r.pipeline(transaction=True) as t:
        t.execute_command("BGSAVE")
        assert t.execute() == [True]  # "Background saving scheduled"
    wait_for(lambda: r.info("persistence")["rdb_saves"] > saves
             and r.info("persistence")["rdb_bgsave_in_progress"] == 0, 30,
             "the scheduled snapshot")
    assert r.info("persistence")["rdb_last_bgsave_status"] == "ok"
    wait_for(lambda: synced(p, r), 30, "the held write to be applied")
    rep.kill()
    before = p.info("stats")
    p.set("while-down", "x")
    rep.fixed_port = rep.port
    rep.start()
    r = rep.client()
    wait_for(lambda: synced(p, r), 20, "the restarted replica to catch up")
    after = p.info("stats")
    assert r.get("held") == b"1" and r.get("while-down") == b"x"
    assert digest(r) == digest(p)
    return (after["sync_full"] - before["sync_full"],
            after["sync_partial_ok"] - before["sync_partial_ok"]), r


def test_a_snapshot_waits_for_a_slow_link_to_pause(darner_factory):
    """The link pauses for a snapshot once the commands it forwarded are applied, however
    long that takes within 10 s (a loaded machine, a busy script, here CLIENT PAUSE WRITE
    holding the stream's write back for 2.5 s): the file records the replica's position
    and the restart continues partially. The wait used to stop after a second; the file
    then had no position and the restart synced in full."""
    primary = darner_factory()
    primary.client().set("before", "1")
    rep = darner_factory("--replicaof", "127.0.0.1", primary.port)
    wait_for(lambda: synced(primary.client(), rep.client()), 20, "the replica to sync")
    counts, _ = paused_link_snapshot_then_restart(primary, rep, 2500)
    assert counts == (0, 1), rep.log_tail(6000)
    assert "did not pause in time" not in rep.log_tail(100000)


@pytest.mark.parametrize("sync", ["disk", "diskless"])
@pytest.mark.parametrize("replica", ["darner-replica", "redis-replica"])
def test_a_replica_killed_right_after_its_full_sync_continues_partially(
        replica, sync, darner_factory):
    """Killed (SIGKILL) right after its full sync, before any save of its own, a replica
    restarts from the copy of the primary's snapshot it kept as its file: that snapshot
    holds the primary's replication ID and the offset at its cut (as Redis's full-sync RDB
    does), so the replica continues with a partial resync. A Redis 7.0 replica too."""
    primary = darner_factory("--repl-diskless-sync", "yes" if sync == "diskless" else "no")
    p = primary.client()
    p3 = primary.client(db=3)
    # Another replica first: the stream (and its offset) starts with the first replica, so
    # the writes then put the cut of the replica under test past 0, the last of them in
    # database 3 (the stream after the cut must select its database itself).
    first = darner_factory("--replicaof", "127.0.0.1", primary.port)
    wait_for(lambda: synced(p, first.client()), 20, "the first replica to sync")
    p.set("before", "1")
    p3.set("three", "3")
    args = ["--replicaof", "127.0.0.1", primary.port]
    if replica == "redis-replica":
        rep = harness.start_reference(args)
    else:
        rep = darner_factory(*args)
    try:
        r = rep.client()
        wait_for(lambda: synced(p, r), 20, "the replica to sync")
        assert p.info("stats")["sync_full"] == 2
        replid = p.info("replication")["master_replid"]
        # The file it received, kept as its own (saves are off): the primary's snapshot.
        fields = rdb_aux(rep.workdir + "/dump.rdb")
        assert fields.get(b"repl-id") == replid.encode(), fields
        assert fields.get(b"repl-stream-db") == b"0", fields
        cut = int(fields[b"repl-offset"])
        assert 0 < cut <= p.info("replication")["master_repl_offset"], fields
        # Applied after the cut but not in the file: the restarted replica gets it again
        # from the cut's offset (an offset past the cut would lose it, one before the cut
        # would apply a write of the snapshot twice: the counter shows either).
        p.incr("counter")
        wait_for(lambda: synced(p, r), 20, "the replica to apply the INCR")
        assert r.info("persistence")["rdb_saves"] == 0
        rep.kill()
        partial_before = p.info("stats")["sync_partial_ok"]
        # Written while it is down, in database 3 and then 0 (the stream after a cut selects
        # its database itself: the file's repl-stream-db is 0).
        p3.set("while-down-3", "x")
        p.set("while-down-0", "y")
        p.incr("counter")
        rep.fixed_port = rep.port
        rep.start()
        r = rep.client()
        wait_for(lambda: synced(p, r), 20, "the restarted replica to catch up")
        assert p.info("stats")["sync_partial_ok"] == partial_before + 1, (
            "no partial resync; the replica's log:\n" + rep.log_tail(6000))
        assert p.info("stats")["sync_full"] == 2
        assert rep.client(db=3).get("while-down-3") == b"x"
        assert r.get("while-down-0") == b"y"
        assert r.get("counter") == b"2"
        assert digest(r) == digest(p)
    finally:
        if replica == "redis-replica":
            rep.stop()
