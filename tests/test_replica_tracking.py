"""CLIENT TRACKING on a replica (issue 15): a tracking client of a replica is told about the
keys the replication stream changes, and gets a null invalidation when a full sync replaces
the data, exactly as a client of a redis-server replica is.

The same scenario runs against a redis-server 7.0 replica and a darner replica of the same
primary (a redis-server 7.0 one, then a darner one); every byte each tracking connection receives is compared. Pushes are
read with a deadline, never after a fixed sleep.
"""

from __future__ import annotations


import pytest

import harness
from test_replica import wait_for

pytestmark = pytest.mark.darner_only


def synced(primary_client, replica_client):
    off = primary_client.info("replication")["master_repl_offset"]
    wait_for(
        lambda: replica_client.info("replication").get("slave_repl_offset", -1) >= off
        and replica_client.info("replication").get("master_link_status") == "up",
        what="the replica to reach offset %d" % off,
    )


def scenario(primary, replica):
    """What a default-mode and a BCAST tracking client of `replica` receive."""
    p = primary.client()
    p.flushall()
    p.set("k", "1")
    p.hset("h", "f", "v")
    r = replica.client()
    synced(p, r)
    got = []
    t = replica.raw()
    t.call("HELLO", "3")
    got.append(t.call("CLIENT", "TRACKING", "on").raw)
    got.append(t.call("GET", "k").raw)
    got.append(t.call("HGET", "h", "f").raw)
    b = replica.raw()
    b.call("HELLO", "3")
    got.append(b.call("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "p:").raw)

    # The stream changes tracked keys: one push each, in the stream's order.
    p.set("k", "2")
    got.append(t.read_reply().raw)
    p.hset("h", "f", "w")
    got.append(t.read_reply().raw)
    # An untracked key: nothing; a key under the BCAST prefix: the BCAST client hears it.
    p.set("other", "x")
    p.set("p:1", "x")
    got.append(b.read_reply().raw)
    # An expiry the primary propagates (as a DEL) invalidates too.
    got.append(t.call("GET", "k").raw)
    p.pexpire("k", 1)
    got.append(t.read_reply().raw)
    synced(p, r)
    got.append(t.pending(0.2))

    # A full sync replaces the data: every tracking client gets a null invalidation.
    got.append(t.call("GET", "other").raw)
    r.execute_command("REPLICAOF", "NO", "ONE")
    r.execute_command("REPLICAOF", "127.0.0.1", primary.port)
    got.append(t.read_reply(timeout=20).raw)
    got.append(b.read_reply(timeout=20).raw)
    synced(p, r)
    assert r.get("other") == b"x"
    return got


@pytest.fixture(params=["redis-primary", "darner-primary"])
def primary(request):
    if request.param == "redis-primary":
        srv = harness.start_reference(["--repl-diskless-sync-delay", "0"])
    else:
        srv = harness.start_darner(["--save", ""])
    try:
        yield srv
    finally:
        srv.stop()


def test_tracking_clients_of_a_replica_hear_the_stream_and_the_full_sync(primary, darner_factory):
    ref = harness.start_reference(
        ["--replicaof", "127.0.0.1", str(primary.port), "--repl-diskless-load", "disabled"]
    )
    try:
        want = scenario(primary, ref)
    finally:
        ref.stop()
    rep = darner_factory("--replicaof", "127.0.0.1", primary.port)
    got = scenario(primary, rep)
    assert got == want
    # The scenario holds what it says: pushes for k and h, the BCAST push, the null.
    assert b"invalidate" in want[4] and b"k" in want[4]
    assert want[-2].endswith(b"_\r\n") and want[-1].endswith(b"_\r\n")
    assert "Full resync" in rep.log_tail(20000) or "FULLRESYNC" in rep.log_tail(20000)


def test_tracking_clients_of_a_swapdb_replica_hear_the_same(primary, darner_factory):
    # repl-diskless-load swapdb: the full sync's swap of the loaded databases tells every
    # tracking client, as the flush of the other load paths does.
    ref = harness.start_reference(
        ["--replicaof", "127.0.0.1", str(primary.port), "--repl-diskless-load", "swapdb"]
    )
    try:
        want = scenario(primary, ref)
    finally:
        ref.stop()
    rep = darner_factory("--replicaof", "127.0.0.1", primary.port,
                         "--repl-diskless-load", "swapdb")
    got = scenario(primary, rep)
    assert got == want
    assert want[-2].endswith(b"_\r\n") and want[-1].endswith(b"_\r\n")
    assert "Swapping active DB with loaded DB" in rep.log_tail(20000)
