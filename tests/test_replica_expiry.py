"""A replica leaves expiring keys to its primary (issue 15), as a Redis replica does: a key
whose TTL passed reads as missing on the replica but stays there (DBSIZE counts it, the
active cycle skips it) until the primary's DEL arrives; once promoted, the replica expires
keys itself again.

The primary's active expiry is turned off (DEBUG SET-ACTIVE-EXPIRE 0), so it sends its DEL
only when a client touches the key there. The same steps run against a redis-server 7.0
replica and a darner replica of the same primary (a redis-server 7.0 one, then a darner
one), and what each step answers is compared. Waits poll with a deadline.
"""

from __future__ import annotations

import time

import pytest

import harness
from test_replica import wait_for
from test_replica_tracking import primary, synced  # noqa: F401 - a fixture

pytestmark = pytest.mark.darner_only


def replicated(p, r):
    """The replica applied what the primary wrote: WAIT first (a darner primary may count
    its last writes in `master_repl_offset` a moment after it answered them), then the
    offsets."""
    p.execute_command("WAIT", 1, 5000)
    synced(p, r)


def steps(primary, replica):
    p = primary.client()
    r = replica.client()
    p.flushall()
    p.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    p.set("stays", "1")
    p.set("gone", "1", px=150)
    p.hset("h", "f", "v")
    p.pexpire("h", 150)
    replicated(p, r)
    seen = [r.dbsize()]
    # Past the TTL: the replica hides both keys but keeps them, however long it runs its
    # active cycle, until the primary says DEL.
    time.sleep(0.3)
    seen += [r.get("gone"), r.exists("gone"), r.ttl("gone"), r.hgetall("h"), r.type("h")]
    wait_for(lambda: r.get("gone") is None, what="the TTL to pass on the replica")
    time.sleep(0.3)
    seen.append(r.dbsize())
    seen.append(sorted(r.scan_iter("*")))
    seen.append(r.dbsize())
    # The primary touches one key: it expires there and its DEL reaches the replica.
    seen.append(p.get("gone"))
    replicated(p, r)
    seen.append(r.dbsize())
    # Promoted, the replica expires what is left itself.
    r.execute_command("REPLICAOF", "NO", "ONE")
    wait_for(lambda: r.dbsize() == 1, what="the promoted replica to expire h")
    seen.append(sorted(r.keys("*")))
    p.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")
    return seen


def test_a_replica_keeps_expired_keys_until_the_primary_deletes_them(primary, darner_factory):
    ref = harness.start_reference(["--replicaof", "127.0.0.1", str(primary.port)])
    try:
        want = steps(primary, ref)
    finally:
        ref.stop()
    rep = darner_factory("--replicaof", "127.0.0.1", primary.port)
    got = steps(primary, rep)
    assert got == want
    # What the steps say: 3 keys, hidden once due but counted until the DEL, then 2.
    assert want[0] == 3 and want[6] == 3 and want[8] == 3 and want[10] == 2, want
    assert want[-1] == [b"stays"]


def test_a_replica_leaves_evicting_to_its_primary(darner_factory):
    """replica-ignore-maxmemory (default yes, as Redis): a replica over maxmemory keeps every
    key its primary has; told `no`, or promoted, it evicts."""
    primary = darner_factory()
    p = primary.client()
    rep = darner_factory("--replicaof", "127.0.0.1", primary.port)
    r = rep.client()
    assert r.config_get("replica-ignore-maxmemory") == {"replica-ignore-maxmemory": "yes"}
    assert r.config_get("slave-ignore-maxmemory") == {"slave-ignore-maxmemory": "yes"}
    n = 4000
    with p.pipeline(transaction=False) as pl:
        for i in range(n):
            pl.set("k%d" % i, "x" * 2000)
        pl.execute()
    synced(p, r)
    used = r.info("memory")["used_memory"]
    r.config_set("maxmemory-policy", "allkeys-random")
    r.config_set("maxmemory", used - 4_000_000)
    p.set("one-more", "1")
    synced(p, r)
    # Give its cron a few ticks: nothing may go.
    time.sleep(0.5)
    p.set("and-another", "1")
    synced(p, r)
    assert r.dbsize() == n + 2
    assert r.info("stats")["evicted_keys"] == 0
    r.config_set("replica-ignore-maxmemory", "no")
    wait_for(lambda: r.dbsize() < n, what="the replica to evict once told not to ignore maxmemory")
    assert r.info("stats")["evicted_keys"] > 0


def past_ttls(replica):
    r = replica.client()
    r.config_set("replica-read-only", "no")
    # A writable replica expires its own clients' keys itself: not while this looks.
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    out = []
    for cmd in (
        ("SET", "w", "1"), ("PEXPIREAT", "w", "1"), ("DBSIZE",), ("GET", "w"), ("EXISTS", "w"),
        ("SET", "g", "1"), ("GETEX", "g", "PXAT", "1"), ("DBSIZE",), ("GET", "g"),
        ("SET", "e", "1"), ("EXPIRE", "e", "-5"), ("DBSIZE",), ("TTL", "e"),
    ):
        out.append(r.execute_command(*cmd))
    # Let go, it removes them.
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")
    wait_for(lambda: r.dbsize() == 0, what="the replica to expire its own keys")
    out.append(r.info("stats")["expired_keys"])
    return out


def test_a_past_ttl_on_a_replica_keeps_the_key_until_the_primary_deletes_it(darner_factory):
    """EXPIRE, PEXPIREAT and GETEX with a time already past keep the key on a replica (a
    writable one here: its own clients' writes), logically expired, where a primary deletes
    it: Redis's checkAlreadyExpired is false on a replica."""
    primary = harness.start_reference(["--repl-diskless-sync-delay", "0"])
    try:
        ref = harness.start_reference(["--replicaof", "127.0.0.1", str(primary.port)])
        try:
            wait_for(lambda: ref.client().info("replication")["master_link_status"] == "up")
            want = past_ttls(ref)
        finally:
            ref.stop()
        rep = darner_factory("--replicaof", "127.0.0.1", primary.port)
        wait_for(lambda: rep.client().info("replication")["master_link_status"] == "up")
        assert past_ttls(rep) == want
    finally:
        primary.stop()
    assert want[2] == 1 and want[7] == 2 and want[11] == 3 and want[-1] == 3


def synced_after_load(primary, replica):
    p, r = primary.client(), replica.client()
    synced(p, r)
    seen = [r.dbsize(), r.get("due"), r.exists("due")]
    p.get("due")  # the primary expires it now: its DEL reaches the replica
    wait_for(lambda: r.dbsize() == 1, what="the primary's DEL")
    return seen


def test_a_full_sync_keeps_keys_already_due_until_the_primary_deletes_them(primary,
                                                                           darner_factory):
    """A key past its TTL in the primary's snapshot is loaded by the replica (hidden, counted)
    and stays until the primary's DEL, as a Redis replica loads it."""
    p = primary.client()
    p.flushall()
    p.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    p.set("stays", "1")
    p.set("due", "1", px=20)
    time.sleep(0.1)
    try:
        ref = harness.start_reference(["--replicaof", "127.0.0.1", str(primary.port)])
        try:
            want = synced_after_load(primary, ref)
        finally:
            ref.stop()
        p.set("due", "1", px=20)
        time.sleep(0.1)
        rep = darner_factory("--replicaof", "127.0.0.1", primary.port)
        assert synced_after_load(primary, rep) == want
        assert want == [2, None, 0]
    finally:
        p.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")


def own_keys(primary, replica):
    """A writable replica expires the keys its own clients gave a TTL, itself (Redis's
    rememberSlaveKeyWithExpire / expireSlaveKeys): the primary never had them, so no DEL
    would come; the primary's keys still wait for the primary's DEL."""
    p, r = primary.client(), replica.client()
    p.flushall()
    p.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    r.config_set("replica-read-only", "no")
    p.set("theirs", "1", px=150)
    replicated(p, r)
    tracked = lambda: r.info("stats")["slave_expires_tracked_keys"]  # noqa: E731
    seen = [tracked()]
    r.set("mine", "1", px=150)
    r.set("kept", "1")
    r.expire("kept", 1000)
    r.set("plain", "1")
    seen += [tracked(), r.dbsize()]
    wait_for(lambda: r.dbsize() == 3, what="the replica to expire its own key")
    # Its cycle keeps running: the primary's key, past its TTL too, stays (hidden).
    time.sleep(0.3)
    seen += [r.dbsize(), r.get("theirs"), r.info("stats")["expired_keys"], tracked()]
    # A key made persistent is forgotten by the next sweep.
    r.persist("kept")
    wait_for(lambda: tracked() == 0, what="the persisted key to be forgotten")
    seen.append(r.dbsize())
    # The primary's DEL removes its key.
    p.get("theirs")
    replicated(p, r)
    seen.append(sorted(r.keys("*")))
    # FLUSHALL forgets the names.
    r.set("again", "1", px=100_000)
    seen.append(tracked())
    r.flushall()
    seen.append(tracked())
    # So does a full sync (its own cycle stopped, only the sync can forget the name).
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    r.set("again", "1", px=100_000)
    seen.append(tracked())
    r.execute_command("REPLICAOF", "NO", "ONE")
    r.execute_command("REPLICAOF", "127.0.0.1", primary.port)
    wait_for(lambda: r.info("replication")["master_link_status"] == "up", what="link up")
    replicated(p, r)
    seen += [tracked(), r.exists("again")]
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")
    r.config_set("replica-read-only", "yes")
    p.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")
    return seen


def test_a_writable_replica_expires_the_keys_its_clients_gave_a_ttl(primary, darner_factory):
    ref = harness.start_reference(["--replicaof", "127.0.0.1", str(primary.port)])
    try:
        want = own_keys(primary, ref)
    finally:
        ref.stop()
    rep = darner_factory("--replicaof", "127.0.0.1", primary.port)
    got = own_keys(primary, rep)
    assert got == want
    assert want == [0, 2, 4, 3, None, 1, 1, 3, [b"kept", b"plain"], 1, 0, 1, 0, 0], want


def test_a_replica_hides_hash_fields_and_set_members_past_their_ttl_until_the_primary_removes_them(
    darner_factory,
):
    """Redis 7.4's rule for hash fields (redis-server 7.0 has no field TTLs, so what Redis 7.4
    answers is asserted): a replica deletes no field itself; its clients' reads hide a field
    past its TTL (hashTypeGetValue: HGET, HMGET, HEXISTS, HSTRLEN, HGETALL, HKEYS, HVALS,
    HSCAN; HTTL says -2) while HLEN still counts it; the primary's HDEL (propagated when the
    field expires there) removes it. Darner's set member TTLs (SADDEX) follow the same rule,
    the primary's SREM removing them."""
    primary = darner_factory()
    p = primary.client()
    rep = darner_factory("--replicaof", "127.0.0.1", primary.port)
    r = rep.client()
    # Linked first: the primary counts no offset before its first replica.
    replicated(p, r)
    p.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    p.hset("h", mapping={"a": "1", "b": "2", "c": "3"})
    p.execute_command("HPEXPIRE", "h", 150, "FIELDS", 2, "a", "b")
    p.hset("h2", "x", "1")
    p.execute_command("HPEXPIRE", "h2", 150, "FIELDS", 1, "x")
    p.hset("w", mapping={"f": "1", "g": "2"})
    p.execute_command("HPEXPIRE", "w", 150, "FIELDS", 2, "f", "g")
    at = int(time.time() * 1000) + 150
    p.sadd("s", "stays")
    p.execute_command("SADDEX", "s", "PXAT", at, "short")
    p.execute_command("SADDEX", "s2", "PXAT", at, "only")
    replicated(p, r)
    assert r.hlen("h") == 3 and r.scard("s") == 2
    time.sleep(0.3)

    def hidden():
        return [
            r.hget("h", "a"),
            r.hmget("h", ["a", "c"]),
            r.hexists("h", "b"),
            r.hstrlen("h", "a"),
            r.hgetall("h"),
            r.hkeys("h"),
            r.hvals("h"),
            r.hscan("h"),
            r.execute_command("HTTL", "h", "FIELDS", 2, "a", "c"),
            r.hlen("h"),
            r.hgetall("h2"),
            r.hlen("h2"),
            r.exists("h2"),
            r.smembers("s"),
            r.scard("s"),
            r.sismember("s", "short"),
            r.smembers("s2"),
            r.exists("s2"),
            r.scard("s2"),
            r.sunion("s", "s2"),
            r.dbsize(),
        ]

    want = [
        None, [None, b"3"], False, 0, {b"c": b"3"}, [b"c"], [b"3"], (0, {b"c": b"3"}),
        [-2, -1], 3, {}, 1, 1,
        {b"stays"}, 1, 0, set(), 0, 0, {b"stays"}, 5,
    ]
    assert hidden() == want
    # However long its active cycle runs, the replica removes nothing itself.
    time.sleep(0.3)
    assert hidden() == want
    assert r.info("stats")["expired_keys"] == 0
    # A writable replica's own writes (Redis 7.4): HSETNX finds the field missing and sets
    # it anew (no TTL); HINCRBY counts from 0 but keeps the field's TTL (still hidden);
    # HDEL removes a hidden field (and counts it).
    r.config_set("replica-read-only", "no")
    assert r.hsetnx("w", "f", "new") == 1
    assert [r.hget("w", "f"), r.execute_command("HTTL", "w", "FIELDS", 1, "f")] == [b"new", [-1]]
    assert [r.hincrby("w", "g", 5), r.hget("w", "g"), r.hlen("w")] == [5, None, 2]
    assert [r.hdel("w", "g"), r.hgetall("w")] == [1, {b"f": b"new"}]
    r.config_set("replica-read-only", "yes")
    # The primary expires them when they are touched there; its HDEL / SREM / DEL arrive.
    assert p.hget("h", "a") is None
    replicated(p, r)
    assert r.hlen("h") == 2
    assert p.hgetall("h") == {b"c": b"3"} and p.hlen("h2") == 0
    assert p.smembers("s") == {b"stays"} and p.smembers("s2") == set()
    replicated(p, r)
    assert [r.hlen("h"), r.exists("h2"), r.scard("s"), r.exists("s2"), r.dbsize()] == [
        1, 0, 1, 0, 3,
    ]
    # Promoted, it expires fields itself again.
    p.execute_command("HPEXPIRE", "h", 50, "FIELDS", 1, "c")
    replicated(p, r)
    r.execute_command("REPLICAOF", "NO", "ONE")
    wait_for(lambda: r.dbsize() == 2, what="the promoted replica to expire the last field")
    p.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")
