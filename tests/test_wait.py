"""WAIT, min-replicas-to-write / min-replicas-max-lag, repl-ping-replica-period and
repl-backlog-ttl on a Darner primary (issue 15, the primary side).

Real processes on loopback ports: a redis-server 7.0 replica and a Darner replica follow a
Darner primary run with two shards, or a test plays the replica itself over a raw socket
(PSYNC, then REPLCONF ACK) to control exactly what is acknowledged. Every wait polls with a
deadline.
"""

from __future__ import annotations

import threading
import time

import pytest
import redis

import harness
from test_primary import read_line, read_snapshot, start_redis_replica
from test_replica import follower, info, wait_for

pytestmark = pytest.mark.darner_only


@pytest.fixture
def primary(darner_factory):
    return darner_factory()


def online(p, n):
    """Waits until `n` replicas of `p` are online."""
    def ok():
        i = info(p)
        states = [i.get("slave%d" % k, {}).get("state") for k in range(i["connected_slaves"])]
        return i["connected_slaves"] == n and states.count("online") == n
    wait_for(ok, what="%d online replicas" % n)


def redis_follower(primary):
    """A redis-server replica of `primary`, online: the primary's client, the replica."""
    p = primary.client()
    rep = start_redis_replica(primary.port)
    online(p, 1)
    return p, rep


def timed(f):
    t = time.monotonic()
    r = f()
    return r, time.monotonic() - t


class Background:
    """A command run on its own connection in a thread (a client that blocks)."""

    def __init__(self, server, *args, name="waiter"):
        self.c = server.client(socket_timeout=30)
        self.c.client_setname(name)
        self.id = self.c.client_id()
        self.result = None
        self.t = threading.Thread(target=self._run, args=args, daemon=True)
        self.t.start()

    def _run(self, *args):
        try:
            self.result = self.c.execute_command(*args)
        except Exception as e:  # the reply, an error reply included
            self.result = e

    def join(self, timeout=20.0):
        self.t.join(timeout)
        assert not self.t.is_alive(), "the command did not return"
        return self.result


def blocked(p, n=1):
    wait_for(lambda: info(p, "clients")["blocked_clients"] == n,
             what="%d blocked clients" % n)


# ---------------------------------------------------------------------------- WAIT

def test_wait_1_returns_1_once_a_redis_replica_has_the_writes(primary):
    p, rep = redis_follower(primary)
    try:
        r = rep.client()
        for i in range(50):
            p.set("w%d" % i, i)
        p.mset({"m%d" % i: i for i in range(20)})
        assert p.execute_command("WAIT", 1, 10000) == 1
        # What WAIT counted is there: the replica acknowledged every write before it.
        assert r.get("w49") == b"49" and r.get("m19") == b"19"
    finally:
        rep.stop()


def test_wait_1_returns_1_once_a_darner_replica_has_the_writes(primary, darner_factory):
    p, rep, r = follower(primary, darner_factory)
    online(p, 1)
    for i in range(50):
        p.set("w%d" % i, i)
    with p.pipeline(transaction=True) as t:
        for i in range(10):
            t.set("tx%d" % i, i)
        t.execute()
    assert p.execute_command("WAIT", 1, 10000) == 1
    assert r.get("w49") == b"49" and r.get("tx9") == b"9"


def test_wait_in_a_pipeline_after_writes_covers_them(primary):
    p, rep = redis_follower(primary)
    try:
        r = rep.client()
        with p.pipeline(transaction=False) as pl:
            for i in range(30):
                pl.set("pl%d" % i, i)
            pl.execute_command("WAIT", 1, 10000)
            out = pl.execute()
        assert out[-1] == 1
        assert r.get("pl29") == b"29"
    finally:
        rep.stop()


def test_roles_offset_covers_a_write_just_answered_as_the_replica_acks_it(darner_factory):
    """ROLE on a primary reports an offset that covers every write already answered (as
    INFO's master_repl_offset, and as Redis, where a write is in the stream before its
    reply leaves): right after a write, it is where a Darner replica's acknowledgement
    stands once WAIT returns. The replica may have acknowledged WAIT's GETACK too (37
    bytes, the only other thing in the stream: the PING period is an hour), never a whole
    1 KB write more. ROLE's replica entries are Redis 7.2's [ip, port, offset] strings."""
    primary = darner_factory("--repl-ping-replica-period", "3600")
    p, rep, r = follower(primary, darner_factory)
    online(p, 1)
    p.set("warm-up", "1")
    getack = len(b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n")
    for i in range(100):
        with p.pipeline(transaction=False) as pl:
            pl.set("k%d" % (i % 7), "%04d" % i * 250)
            pl.execute_command("ROLE")
            _, role = pl.execute()
        assert role[0] == b"master"
        offset = role[1]
        assert p.execute_command("WAIT", 1, 10000) == 1
        after = p.execute_command("ROLE")
        [(ip, port, acked)] = after[2]
        assert (ip, port) == (b"127.0.0.1", str(rep.port).encode())
        assert offset <= int(acked) <= offset + getack, (i, role, after)
        assert r.get("k%d" % (i % 7)) == b"%04d" % i * 250


def test_wait_for_more_replicas_than_there_are_times_out_with_the_count(primary):
    p, rep = redis_follower(primary)
    try:
        p.set("k", "v")
        assert p.execute_command("WAIT", 1, 10000) == 1
        n, took = timed(lambda: p.execute_command("WAIT", 2, 500))
        assert n == 1
        assert took >= 0.45
    finally:
        rep.stop()


def test_wait_0_0_returns_at_once(primary):
    p = primary.client(socket_timeout=5)
    p.set("k", "v")
    # No replica at all: nothing to wait for.
    assert p.execute_command("WAIT", 0, 0) == 0
    assert p.execute_command("WAIT", -3, 0) == 0
    rep = start_redis_replica(primary.port)
    try:
        online(p, 1)
        p.set("k", "w")
        n = p.execute_command("WAIT", 0, 0)
        assert n in (0, 1)
    finally:
        rep.stop()


def test_a_killed_replica_is_not_counted(primary, darner_factory):
    p, drep, _ = follower(primary, darner_factory)
    rep = start_redis_replica(primary.port)
    try:
        online(p, 2)
        p.set("a", "1")
        assert p.execute_command("WAIT", 2, 10000) == 2
        drep.stop()
        wait_for(lambda: info(p)["connected_slaves"] == 1, what="the replica gone")
        p.set("a", "2")
        assert p.execute_command("WAIT", 1, 10000) == 1
        # The one replica left has the write; the killed one is not counted.
        assert p.execute_command("WAIT", 2, 300) == 1
    finally:
        rep.stop()


def read_until(c, needle, timeout=10.0):
    """Reads the raw stream until `needle` is in it; returns all it read."""
    deadline = time.monotonic() + timeout
    got = bytes(c.reader.buf)
    c.reader.buf = b""
    while needle not in got:
        got += c._recv_some(deadline)
    return got


GETACK = b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n"


def test_a_blocked_wait_asks_for_an_ack_and_returns_on_the_one_that_covers_its_writes(primary):
    p = primary.client()
    with primary.raw() as c:
        assert c.call("REPLCONF", "capa", "psync2").raw == b"+OK\r\n"
        c.send("PSYNC", "?", "-1")
        line = read_line(c)
        assert line.startswith(b"+FULLRESYNC ")
        cut = int(line.split(b" ")[2])
        read_snapshot(c)
        online(p, 1)
        p.set("k", "v")
        w = Background(primary, "WAIT", 1, 0)
        blocked(p)
        # The write, then the request for an acknowledgement.
        stream = read_until(c, GETACK)
        end_of_set = cut + stream.index(b"k\r\n$1\r\nv\r\n") + len(b"k\r\n$1\r\nv\r\n")
        # An acknowledgement short of the write leaves the client blocked.
        c.send("REPLCONF", "ACK", str(end_of_set - 1))
        wait_for(lambda: info(p)["slave0"]["offset"] == end_of_set - 1, what="the ack seen")
        assert info(p, "clients")["blocked_clients"] == 1
        assert w.t.is_alive()
        c.send("REPLCONF", "ACK", str(end_of_set))
        assert w.join() == 1
        assert info(p, "clients")["blocked_clients"] == 0
        # The GETACK after the write is no write: with no write since, WAIT has what it
        # needs without another acknowledgement (the replica acknowledges a GETACK only up
        # to its start).
        assert info(p)["master_repl_offset"] > end_of_set
        assert primary.client(socket_timeout=5).execute_command("WAIT", 1, 0) == 1


def test_wait_errors_as_redis(primary, darner_factory, redis_ref):
    p = primary.client()
    ref = redis_ref.client()
    for args in [("WAIT", "x", 0), ("WAIT", 1, "x"), ("WAIT", 1, -1), ("WAIT", 1, "1.5"),
                 ("WAIT", "1"), ("WAIT", 1, 2, 3)]:
        with primary.raw() as a, redis_ref.raw() as b:
            assert a.call(*args).raw == b.call(*args).raw, args
    # A deadline past the clock's range: Redis 7.2 refuses it (7.0 overflowed).
    with primary.raw() as a:
        assert a.call("WAIT", 1, "9223372036854775807").raw == \
            b"-ERR timeout is out of range\r\n"
    # On a replica, Redis's refusal.
    rep = start_redis_replica(primary.port)
    try:
        _, drep, _ = follower(primary, darner_factory)
        with drep.raw() as a, rep.raw() as b:
            got = a.call("WAIT", 0, 0).raw
            assert got == b.call("WAIT", 0, 0).raw
            assert got.startswith(b"-ERR WAIT cannot be used with replica instances.")
    finally:
        rep.stop()
    assert p.ping() and ref.ping()


def test_wait_inside_multi_or_a_script_does_not_block(primary):
    # Without replicas: 0 at once, as Redis 7.2's "Scripts do not block on wait".
    c = primary.client(socket_timeout=10)
    assert c.eval("return redis.pcall('wait', '1', '0')", 0) == 0
    p, rep = redis_follower(primary)
    try:
        p.set("k", "v")
        assert p.execute_command("WAIT", 1, 10000) == 1
        # The replica has every write: the count is 1, and asking for more does not block.
        with c.pipeline(transaction=True) as t:
            t.get("k")
            t.execute_command("WAIT", 5, 0)
            out, took = timed(t.execute)
        assert out == [b"v", 1]
        assert took < 5
        n, took = timed(lambda: c.eval("return redis.call('wait', 5, 0)", 0))
        assert n == 1 and took < 5
    finally:
        rep.stop()


def test_client_unblock_ends_a_wait_with_the_count_or_an_error(primary):
    p, rep = redis_follower(primary)
    try:
        p.set("k", "v")
        off = info(p)["master_repl_offset"]
        w = Background(primary, "WAIT", 5, 0)
        blocked(p)
        # Unblocked as by its timeout, it answers the count of replicas that acknowledged.
        wait_for(lambda: info(p)["slave0"]["offset"] >= off, what="the replica's ack")
        assert p.execute_command("CLIENT", "UNBLOCK", w.id) == 1
        assert w.join() == 1
        w = Background(primary, "WAIT", 5, 0)
        blocked(p)
        assert p.execute_command("CLIENT", "UNBLOCK", w.id, "ERROR") == 1
        e = w.join()
        assert isinstance(e, redis.ResponseError)
        assert str(e) == "UNBLOCKED client unblocked via CLIENT UNBLOCK"
        assert info(p, "clients")["blocked_clients"] == 0
    finally:
        rep.stop()


def test_a_client_blocked_in_wait_that_disconnects_is_unblocked(primary):
    p, rep = redis_follower(primary)
    try:
        with primary.raw() as c:
            c.send("WAIT", 5, 0)
            blocked(p)
        wait_for(lambda: info(p, "clients")["blocked_clients"] == 0, what="unblocked")
        # Nothing left behind: a later WAIT works as before.
        p.set("k", "v")
        assert p.execute_command("WAIT", 1, 10000) == 1
    finally:
        rep.stop()


# ------------------------------------------------ min-replicas-to-write / max-lag

SCRIPT_FLAGS = "#!lua\nreturn 1"
SCRIPT_NO_WRITES = "#!lua flags=no-writes\nreturn 1"


def test_min_replicas_to_write_refuses_writes_as_redis(darner_factory):
    """With no replica, the same replies as redis-server under the same setting: writes,
    MULTI/EXEC (a queued write aborts EXEC), scripts with and without flags."""
    d = darner_factory("--min-replicas-to-write", "1")
    ref = harness.start_reference(["--min-replicas-to-write", "1"])
    cmds = [
        ("SET", "a", "1"), ("GET", "a"), ("INCR", "n"),
        ("MULTI",), ("SET", "a", "2"), ("GET", "a"), ("EXEC",),
        ("MULTI",), ("GET", "a"), ("EXEC",),
        ("EVAL", "return redis.call('set', 'a', '1')", 0),
        ("EVAL", "return redis.call('get', 'a')", 0),
        ("EVAL", SCRIPT_FLAGS, 0), ("EVAL", SCRIPT_NO_WRITES, 0),
        ("CONFIG", "GET", "min-slaves-to-write"), ("CONFIG", "GET", "min-replicas-max-lag"),
        # Either setting at 0 turns the check off.
        ("CONFIG", "SET", "min-replicas-max-lag", "0"), ("SET", "a", "1"),
        ("CONFIG", "SET", "min-replicas-max-lag", "10"), ("SET", "a", "1"),
        ("CONFIG", "SET", "min-slaves-to-write", "0"), ("SET", "a", "1"),
        ("CONFIG", "SET", "min-replicas-to-write", "-1"),
    ]
    try:
        with d.raw() as a, ref.raw() as b:
            for args in cmds:
                got, want = a.call(*args).raw, b.call(*args).raw
                assert got == want, (args, got, want)
            # MULTI whose write was queued before the setting changed: EXEC is refused.
            for c in (a, b):
                assert c.call("MULTI").raw == b"+OK\r\n"
                assert c.call("SET", "x", "1").raw == b"+QUEUED\r\n"
            b2 = ref.client()
            b2.config_set("min-replicas-to-write", "1")
            d.client().config_set("min-replicas-to-write", "1")
            assert a.call("EXEC").raw == b.call("EXEC").raw == \
                b"-EXECABORT Transaction discarded because of: " \
                b"NOREPLICAS Not enough good replicas to write.\r\n"
        i = info(d.client())
        assert i["min_slaves_good_slaves"] == 0
        d.client().config_set("min-replicas-to-write", "0")
        assert "min_slaves_good_slaves" not in info(d.client())
    finally:
        ref.stop()


def test_min_replicas_to_write_counts_online_replicas_that_acked_recently(darner_factory):
    primary = darner_factory("--min-replicas-to-write", "1", "--min-replicas-max-lag", "2")
    p = primary.client()
    with pytest.raises(redis.ResponseError, match="NOREPLICAS"):
        p.set("k", "v")
    rep = start_redis_replica(primary.port)
    try:
        online(p, 1)
        wait_for(lambda: info(p)["min_slaves_good_slaves"] == 1, what="a good replica")
        assert p.set("k", "v")
        assert p.execute_command("WAIT", 1, 10000) == 1
        assert rep.client().get("k") == b"v"
    finally:
        rep.stop()
    wait_for(lambda: info(p)["connected_slaves"] == 0, what="the replica gone")
    with pytest.raises(redis.ResponseError, match="NOREPLICAS"):
        p.set("k", "w")


def test_a_replica_that_stops_acknowledging_is_not_good_after_max_lag(darner_factory):
    primary = darner_factory("--min-replicas-to-write", "1", "--min-replicas-max-lag", "2")
    p = primary.client()
    with primary.raw() as c:
        assert c.call("REPLCONF", "capa", "psync2").raw == b"+OK\r\n"
        c.send("PSYNC", "?", "-1")
        assert read_line(c).startswith(b"+FULLRESYNC ")
        read_snapshot(c)
        online(p, 1)
        c.send("REPLCONF", "ACK", "0")
        assert p.set("k", "v")
        # No acknowledgement for more than two seconds: writes are refused.
        def refused():
            try:
                p.set("k", "v")
                return False
            except redis.ResponseError as e:
                return "NOREPLICAS" in str(e)
        wait_for(refused, what="writes refused")
        assert info(p)["min_slaves_good_slaves"] == 0
        c.send("REPLCONF", "ACK", "0")
        wait_for(lambda: info(p)["min_slaves_good_slaves"] == 1, what="good again")
        assert p.set("k", "v")


# ------------------------------------------- repl-ping-replica-period, repl-backlog-ttl

PING = b"*1\r\n$4\r\nPING\r\n"


def test_repl_ping_replica_period_sets_how_often_the_stream_pings(primary):
    p = primary.client()
    assert p.config_get("repl-ping-replica-period") == {"repl-ping-replica-period": "10"}
    p.config_set("repl-ping-slave-period", "1")
    assert p.config_get("repl-ping-replica-period") == {"repl-ping-replica-period": "1"}
    with primary.raw() as c:
        c.send("SYNC")
        read_snapshot(c)
        # Two PINGs within a few seconds (the default period is 10 s).
        got = read_until(c, PING, timeout=5)
        c.reader.buf = got[got.index(PING) + len(PING):]
        read_until(c, PING, timeout=5)
    with primary.raw() as a:
        assert a.call("CONFIG", "SET", "repl-ping-replica-period", "0").raw.startswith(
            b"-ERR CONFIG SET failed (possibly related to argument 'repl-ping-replica-period')")


def test_repl_backlog_ttl_frees_the_backlog_of_a_primary_left_without_replicas(primary):
    p = primary.client()
    assert p.config_get("repl-backlog-ttl") == {"repl-backlog-ttl": "3600"}
    rep = start_redis_replica(primary.port)
    try:
        online(p, 1)
        p.set("k", "v")
        assert p.execute_command("WAIT", 1, 10000) == 1
    finally:
        rep.stop()
    wait_for(lambda: info(p)["connected_slaves"] == 0, what="the replica gone")
    before = info(p)
    assert before["repl_backlog_active"] == 1
    p.config_set("repl-backlog-ttl", "1")
    wait_for(lambda: info(p)["repl_backlog_active"] == 0, what="the backlog freed")
    after = info(p)
    # A new history: the old ID cannot be continued.
    assert after["master_replid"] != before["master_replid"]
    assert after["second_repl_offset"] == -1
    assert "Replication backlog freed after 1 seconds without connected replicas." in \
        primary.log_tail(20000)
    # The next replica gets a full sync and a new backlog.
    rep = start_redis_replica(primary.port)
    try:
        online(p, 1)
        assert info(p)["repl_backlog_active"] == 1
    finally:
        rep.stop()



def test_min_replicas_to_write_leaves_the_aof_replay_alone(tmp_path):
    d = str(tmp_path)
    srv = harness.start_darner(["--dir", d, "--appendonly", "yes"])
    try:
        c = srv.client()
        for i in range(20):
            c.set("k%d" % i, i)
        c.incr("n")
    finally:
        srv.stop()
    srv = harness.start_darner(["--dir", d, "--appendonly", "yes",
                                "--min-replicas-to-write", "1"])
    try:
        c = srv.client()
        assert c.get("k19") == b"19" and c.get("n") == b"1"
        with pytest.raises(redis.ResponseError, match="NOREPLICAS"):
            c.set("k", "v")
    finally:
        srv.stop()


def drain(c, secs):
    """What the raw stream brings within `secs` (nothing raised when it brings nothing)."""
    import socket
    deadline = time.monotonic() + secs
    got = bytes(c.reader.buf)
    c.reader.buf = b""
    while True:
        try:
            got += c._recv_some(deadline)
        except socket.timeout:
            return got


def wait_under_pause(server):
    """A raw replica of `server` that acknowledges only when told; a client writes, then WAITs
    while CLIENT PAUSE WRITE is in force: what the replica sees and what WAIT answers."""
    p = server.client()
    out = []
    with server.raw() as c:
        assert c.call("REPLCONF", "capa", "psync2").raw == b"+OK\r\n"
        c.send("PSYNC", "?", "-1")
        line = read_line(c)
        assert line.startswith(b"+FULLRESYNC ")
        read_snapshot(c)
        online(p, 1)
        writer = server.client(socket_timeout=30)
        for key in ("k1", "k2"):
            writer.set(key, "v")
            drain(c, 0.2)
            end = info(p)["master_repl_offset"]
            p.execute_command("CLIENT", "PAUSE", 20_000, "WRITE")
            res = {}
            t = threading.Thread(target=lambda: res.update(n=writer.execute_command("WAIT", 1, 0)))
            t.start()
            # WAIT runs during the pause (it blocks for the acknowledgement) ...
            wait_for(lambda: info(p, "clients")["blocked_clients"] == 1, what="WAIT blocked")
            # ... but no GETACK goes while paused: the stream's offset stays put.
            seen = drain(c, 0.5)
            out += [GETACK in seen, info(p)["master_repl_offset"] - end]
            if key == "k1":
                # The replica's own ACK (it sends one every second) is let through.
                c.send("REPLCONF", "ACK", str(end))
            else:
                # Unpaused, the GETACK goes; the replica's answer ends the WAIT.
                p.execute_command("CLIENT", "UNPAUSE")
                out.append(GETACK in read_until(c, GETACK))
                c.send("REPLCONF", "ACK", str(end))
            t.join(10)
            out += [t.is_alive(), res.get("n")]
            p.execute_command("CLIENT", "UNPAUSE")
    return out


@pytest.mark.parametrize("kind", ["redis", "darner"])
def test_wait_under_client_pause_write_waits_for_acks_without_a_getack(kind):
    """Redis holds `REPLCONF GETACK` back during CLIENT PAUSE (PAUSE_ACTION_REPLICA: the
    offset a failover waits for stays put) but lets WAIT and the replicas' ACKs through; the
    GETACK goes once the pause ends. redis-server 7.0 answers the same as Darner."""
    # No PING in the stream meanwhile (it goes during a pause, and moves the offset).
    quiet = ["--repl-ping-replica-period", "3600"]
    if kind == "redis":
        server = harness.start_reference(["--repl-diskless-sync", "no"] + quiet)
    else:
        server = harness.start_darner(["--save", ""] + quiet)
    try:
        got = wait_under_pause(server)
    finally:
        server.stop()
    assert got == [False, 0, False, 1, False, 0, True, False, 1], got
