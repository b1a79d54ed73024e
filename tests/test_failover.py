"""FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms] between darner servers (issue 15).

The primary holds writes back, waits for the target replica to acknowledge its whole stream,
becomes a replica of the target and sends it `PSYNC <replid> <offset> FAILOVER`, on which the
target promotes itself. Errors are compared with redis-server's for the same setups; the
hand-over is checked with a writer that never stops: every write the old primary
acknowledged is on the new one. Every wait polls with a deadline; a replica stopped with
SIGSTOP is continued whatever happens.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
import redis

import harness

pytestmark = pytest.mark.darner_only


def wait_for(cond, timeout, what, servers=()):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = cond()
        except (OSError, redis.ConnectionError) as e:
            last = e
        else:
            if last:
                return last
        time.sleep(0.02)
    tails = "".join("\n--- %r log:\n%s" % (s, s.log_tail(3000)) for s in servers)
    raise AssertionError("timed out after %.0fs waiting for %s (last: %r)%s"
                         % (timeout, what, last, tails))


def role(server):
    c = server.client(socket_timeout=5)
    try:
        return c.execute_command("ROLE")
    finally:
        c.close()


def follows(server, primary_port):
    r = role(server)
    return r[0] == b"slave" and r[2] == primary_port and r[3] == b"connected"


def failover_state(server):
    return server.client().info("replication")["master_failover_state"]


def synced(primary, replica):
    offset = primary.client().info("replication")["master_repl_offset"]
    info = replica.client().info("replication")
    return info.get("master_link_status") == "up" and info.get("slave_repl_offset") == offset


def reply(client, *args):
    """The reply, or the error's text."""
    try:
        return client.execute_command(*args)
    except redis.ResponseError as e:
        return "error: %s" % e


@pytest.fixture
def pair(darner_factory):
    """A darner primary and its darner replica, synced."""
    p = darner_factory()
    r = darner_factory("--replicaof", "127.0.0.1", p.port)
    wait_for(lambda: synced(p, r), 10, "the replica to sync", (p, r))
    return p, r


@pytest.fixture
def redis_pair():
    p = harness.start_reference(["--repl-diskless-sync-delay", "0"])
    try:
        r = harness.start_reference(["--replicaof", "127.0.0.1", str(p.port)])
        try:
            wait_for(lambda: synced(p, r), 10, "the redis replica to sync", (p, r))
            yield p, r
        finally:
            r.stop()
    finally:
        p.stop()


def error_replies(primary, replica):
    """FAILOVER's (and PSYNC FAILOVER's) errors on a primary with one online replica, on the
    replica, and on a server without replicas (the replica's primary, once detached)."""
    pc, rc = primary.client(), replica.client()
    out = [reply(pc, *cmd) for cmd in [
        ("FAILOVER", "TO", "127.0.0.1", "1"),
        ("FAILOVER", "TO", "127.0.0.1", replica.port, "FORCE"),
        ("FAILOVER", "FORCE", "TIMEOUT", "100"),
        ("FAILOVER", "TIMEOUT", "0"),
        ("FAILOVER", "TIMEOUT", "-5"),
        ("FAILOVER", "TIMEOUT", "abc"),
        ("FAILOVER", "TO", "127.0.0.1", "abc"),
        ("FAILOVER", "TO", "127.0.0.1"),
        ("FAILOVER", "BOGUS"),
        ("FAILOVER", "FORCE", "FORCE"),
        ("FAILOVER", "ABORT"),
        ("FAILOVER", "ABORT", "TIMEOUT", "5"),
        ("PSYNC", "?", "-1", "FAILOVER"),
    ]]
    out += [reply(rc, *cmd) for cmd in [
        ("FAILOVER",),
        ("FAILOVER", "TO", "127.0.0.1", primary.port),
        ("PSYNC", "0" * 40, "1", "FAILOVER"),
    ]]
    # Still a replica after the refused PSYNC FAILOVER.
    out.append(role(replica)[0])
    rc.execute_command("REPLICAOF", "NO", "ONE")
    out.append(reply(rc, "FAILOVER"))
    out.append(reply(rc, "FAILOVER", "TO", "127.0.0.1", primary.port, "TIMEOUT", "10", "FORCE"))
    return out


def test_failover_errors_are_redis_errors(pair, redis_pair):
    ours = error_replies(*pair)
    theirs = error_replies(*redis_pair)
    assert ours == theirs
    # Every reply but ROLE's is an error.
    assert [e for e in ours if not str(e).startswith("error: ")] == [b"slave"]


class Writer(threading.Thread):
    """Writes w:0, w:1, ... to the primary until it refuses (READONLY), remembering what
    it acknowledged."""

    def __init__(self, server):
        super().__init__(daemon=True)
        self.client = server.client(socket_timeout=20)
        self.acked = []
        self.refusal = None
        self.stop = threading.Event()

    def run(self):
        i = 0
        while not self.stop.is_set():
            try:
                self.client.set("w:%d" % i, i)
            except redis.RedisError as e:
                self.refusal = str(e)
                return
            self.acked.append(i)
            i += 1


def test_failover_to_a_replica_loses_no_acknowledged_write(pair):
    p, r = pair
    p.client().rpush("list", *range(100))
    w = Writer(p)
    w.start()
    try:
        wait_for(lambda: len(w.acked) > 200, 10, "writes before the failover", (p, r))
        assert p.client().execute_command("FAILOVER", "TO", "127.0.0.1", r.port) == b"OK"
        wait_for(lambda: role(r)[0] == b"master", 10, "the target to be the primary", (p, r))
        wait_for(lambda: follows(p, r.port), 10, "the old primary to follow it", (p, r))
        wait_for(lambda: w.refusal is not None, 10, "the writer to be refused", (p, r))
    finally:
        w.stop.set()
        w.join(10)
    assert w.refusal.startswith("You can't write against a read only replica")
    assert failover_state(p) == "no-failover"
    assert failover_state(r) == "no-failover"
    rc = r.client()
    # Every acknowledged write is on the new primary.
    got = rc.mget(["w:%d" % i for i in w.acked])
    assert got == [str(i).encode() for i in w.acked]
    # ... and the old primary follows it, with the same data.
    rc.set("after", "1")
    wait_for(lambda: synced(r, p), 10, "the old primary to catch up", (p, r))
    assert p.client().execute_command("DEBUG", "DIGEST") == rc.execute_command("DEBUG", "DIGEST")
    assert p.client().get("after") == b"1"
    assert "Failover target 127.0.0.1:%d is synced, failing over." % r.port in p.log_tail(20000)
    assert "MASTER MODE enabled (failover request from" in r.log_tail(20000)
    # The target kept its backlog across the promotion: the old primary continued partially.
    stats = rc.info("stats")
    assert (stats["sync_full"], stats["sync_partial_ok"]) == (0, 1)


def test_failover_to_any_replica_picks_the_synced_one(pair):
    p, r = pair
    p.client().set("k", "v")
    assert p.client().execute_command("FAILOVER") == b"OK"
    wait_for(lambda: role(r)[0] == b"master" and follows(p, r.port), 10,
             "the replica to take over", (p, r))
    assert r.client().get("k") == b"v"


class Stopped:
    """The server stopped with SIGSTOP (no ACKs), continued on exit whatever happens."""

    def __init__(self, server):
        self.pid = server.proc.pid

    def __enter__(self):
        os.kill(self.pid, signal.SIGSTOP)
        return self

    def cont(self):
        os.kill(self.pid, signal.SIGCONT)

    def __exit__(self, *exc):
        self.cont()


def test_failover_holds_writes_until_aborted_or_timed_out(pair):
    p, r = pair
    pc = p.client()
    pc.set("before", "1")
    wait_for(lambda: synced(p, r), 10, "the replica to sync", (p, r))
    with Stopped(r):
        pc.set("unacked", "1")
        assert pc.execute_command("FAILOVER", "TO", "127.0.0.1", r.port) == b"OK"
        assert failover_state(p) == "waiting-for-sync"
        assert reply(pc, "FAILOVER") == "error: FAILOVER already in progress."
        assert reply(pc, "REPLICAOF", "127.0.0.1", r.port) == \
            "error: REPLICAOF not allowed while failing over."
        # A write waits (reads do not) ...
        held = {}
        t = threading.Thread(target=lambda: held.update(r=reply(p.client(), "SET", "held", "1")))
        t.start()
        assert pc.get("before") == b"1"
        time.sleep(0.2)  # the write is still held: a lower bound, not a wait for an event
        assert t.is_alive() and not held
        # ... until the failover is aborted.
        assert pc.execute_command("FAILOVER", "ABORT") == b"OK"
        t.join(10)
        assert held == {"r": True}
        assert failover_state(p) == "no-failover"
        # A replica that never catches up: TIMEOUT aborts.
        assert pc.execute_command("FAILOVER", "TIMEOUT", "300") == b"OK"
        wait_for(lambda: failover_state(p) == "no-failover", 10, "the timeout", (p, r))
        assert role(p)[0] == b"master"
        assert pc.set("after-timeout", "1")
        assert "FAILOVER to any replica aborted: Replica never caught up before timeout" \
            in p.log_tail(20000)
        # FORCE: after the timeout the primary steps down anyway, and the target (once it
        # runs again) takes over.
        assert pc.execute_command("FAILOVER", "TO", "127.0.0.1", r.port, "TIMEOUT", "300",
                                  "FORCE") == b"OK"
        wait_for(lambda: failover_state(p) == "failover-in-progress", 10, "the step-down",
                 (p, r))
        assert role(p)[0] == b"slave"
    wait_for(lambda: role(r)[0] == b"master" and follows(p, r.port), 15,
             "the target to take over", (p, r))
    assert failover_state(p) == "no-failover"
    assert r.client().get("before") == b"1"


@pytest.mark.parametrize("kinds", ["darner-to-redis", "redis-to-darner"])
def test_failover_between_darner_and_redis(kinds, darner_factory):
    """A darner primary hands over to a redis-server 7.0 replica (which continues the old
    primary with a partial resync), and a redis-server primary hands over to a darner
    replica: PSYNC ... FAILOVER both ways."""
    servers = []
    try:
        if kinds == "darner-to-redis":
            p = darner_factory()
            r = harness.start_reference(["--replicaof", "127.0.0.1", str(p.port)])
            servers.append(r)
        else:
            p = harness.start_reference(["--repl-diskless-sync-delay", "0"])
            servers.append(p)
            r = darner_factory("--replicaof", "127.0.0.1", p.port)
        pc = p.client()
        pc.set("k", "v")
        pc.rpush("l", 1, 2, 3)
        wait_for(lambda: synced(p, r)
                 and pc.info("replication").get("slave0", {}).get("state") == "online", 10,
                 "the replica to be online", (p, r))
        assert pc.execute_command("FAILOVER", "TO", "127.0.0.1", r.port) == b"OK"
        wait_for(lambda: role(r)[0] == b"master" and follows(p, r.port), 10,
                 "the replica to take over", (p, r))
        r.client().set("after", "1")
        wait_for(lambda: p.client().get("after") == b"1", 10, "the old primary to follow",
                 (p, r))
        assert p.client().lrange("l", 0, -1) == [b"1", b"2", b"3"]
        assert failover_state(p) == "no-failover"
        if kinds == "darner-to-redis":
            # Redis kept its backlog across the promotion: darner's PSYNC continued.
            assert r.client().info("stats")["sync_partial_ok"] == 1
    finally:
        for s in servers:
            s.stop()


def sync_counts(server):
    stats = server.client().info("stats")
    return stats["sync_full"], stats["sync_partial_ok"]


@pytest.mark.parametrize("repointed", [False, True], ids=["stays", "repointed"])
@pytest.mark.parametrize("other", ["darner", "redis"])
def test_after_a_failover_the_other_replica_continues_partially(other, repointed,
                                                                 darner_factory):
    """A primary with two replicas fails over to one of them: the other one (a Darner
    replica, or a Redis 7.0 one) keeps its data and continues with a partial resync
    (PSYNC2: its PSYNC names the old replication ID, which the old primary and the new
    one keep as their second ID up to the hand-over's offset), whether it stays on the old
    primary (now a replica of the new one: chained) or is repointed to the new primary
    with REPLICAOF. The server it syncs with counts a partial resync and no full one."""
    p = darner_factory()
    r1 = darner_factory("--replicaof", "127.0.0.1", p.port)
    own = []
    try:
        if other == "darner":
            r2 = darner_factory("--replicaof", "127.0.0.1", p.port)
        else:
            r2 = harness.start_reference(["--replicaof", "127.0.0.1", str(p.port)])
            own.append(r2)
        servers = (p, r1, r2)
        pc = p.client()
        for i in range(100):
            pc.set("k%d" % i, i)
        pc.rpush("l", *range(50))
        wait_for(lambda: synced(p, r1) and synced(p, r2), 20, "both replicas to sync",
                 servers)
        # Counted before the failover: the other replica may sync again as soon as the old
        # primary steps down.
        full_before, partial_before = sync_counts(p)
        assert pc.execute_command("FAILOVER", "TO", "127.0.0.1", r1.port) == b"OK"
        wait_for(lambda: role(r1)[0] == b"master" and follows(p, r1.port), 20,
                 "the old primary to follow the target", servers)
        upstream = r1 if repointed else p
        if repointed:
            assert r2.client().execute_command("REPLICAOF", "127.0.0.1", r1.port) == b"OK"
        r1.client().set("after", "1")
        r1.client().rpush("l", "x")
        wait_for(lambda: follows(r2, upstream.port) and synced(r1, p) and synced(upstream, r2)
                 and r2.client().get("after") == b"1", 20,
                 "the other replica to catch up", servers)
        # The target: the old primary's PSYNC continued, and the other replica's if it was
        # repointed (which may have continued on the old primary first).
        assert sync_counts(r1) == (0, 1 + repointed), r2.log_tail(4000)
        full, partial = sync_counts(p)
        assert full == full_before, "a full resync:\n" + r2.log_tail(4000)
        if not repointed:
            assert partial == partial_before + 1, "no partial resync:\n" + r2.log_tail(4000)
        digest = r1.client().execute_command("DEBUG", "DIGEST")
        assert r2.client().execute_command("DEBUG", "DIGEST") == digest
        assert p.client().execute_command("DEBUG", "DIGEST") == digest
    finally:
        for s in own:
            s.stop()
