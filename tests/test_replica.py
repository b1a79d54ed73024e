"""Darner as a replica of a redis-server 7.0 primary (issue 15, the migration path).

A real redis-server primary and a real darner replica on loopback ports: the full sync, the
command stream afterwards, a partial resync after the link is killed, READONLY, promotion
with REPLICAOF NO ONE, and REPLICAOF given at run time. Every wait polls with a deadline.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time

import pytest

import harness

pytestmark = pytest.mark.darner_only


def wait_for(cond, timeout=20.0, what="condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = cond()
        if last:
            return last
        time.sleep(0.02)
    raise AssertionError("timed out waiting for %s (last: %r)" % (what, last))


def info(client, section="replication"):
    return client.info(section)


@pytest.fixture
def primary():
    # A diskless sync without delay: the snapshot goes out as soon as the replica asks.
    srv = harness.start_reference(["--repl-diskless-sync-delay", "0"])
    try:
        yield srv
    finally:
        srv.stop()


def fill(p):
    """Keys of every type in several databases, some with TTLs."""
    c = p.client()
    c.set("s", "v")
    c.set("n", 12345)
    c.set("big", "x" * 100_000)
    c.rpush("l", *range(200))
    c.hset("h", mapping={"f%d" % i: i for i in range(300)})
    c.sadd("set", *range(50))
    c.sadd("names", "a", "b", "c")
    # Scores whose shortest form is also %.17g (7.0 and 7.2 digest floats differently).
    c.zadd("z", {"m%d" % i: i * 0.25 for i in range(150)})
    c.pfadd("hll", *("e%d" % i for i in range(100)))
    c.xadd("st", {"a": "1"})
    c.xadd("st", {"b": "2"})
    c.xgroup_create("st", "g", id="0")
    c.setex("ttl", 3600, "soon")
    c.pexpire("h", 3_600_000)
    for db in (1, 5):
        d = p.client(db=db)
        d.set("in-db-%d" % db, db)
        d.rpush("list-%d" % db, "a", "b")
        d.expire("list-%d" % db, 7200)
        d.close()
    c.close()


def digest(client):
    return client.execute_command("DEBUG", "DIGEST")


def synced(primary_client, replica_client):
    """The replica applied everything the primary sent."""
    p = info(primary_client)["master_repl_offset"]
    r = info(replica_client)
    return r.get("master_link_status") == "up" and r.get("slave_repl_offset") == p


def wait_same(p, r, timeout=20.0):
    wait_for(lambda: synced(p, r), timeout, "the replica's offset to reach the primary's")
    assert digest(r) == digest(p)


def follower(primary, darner_factory):
    """A darner replica of `primary` that holds the primary's data: the primary's client, the
    replica and its client."""
    p = primary.client()
    rep = darner_factory("--replicaof", "127.0.0.1", primary.port)
    r = rep.client()
    wait_same(p, r)
    return p, rep, r


def test_full_sync_then_stream_gives_the_primarys_data(primary, darner_factory):
    fill(primary)
    p, rep, r = follower(primary, darner_factory)
    assert r.get("s") == b"v"
    assert r.ttl("ttl") > 3000
    assert r.execute_command("ROLE")[:3] == [b"slave", b"127.0.0.1", primary.port]
    # Writes afterwards, in other databases and in a transaction, reach the replica.
    p.set("after", "1")
    p.incrby("n", 5)
    p.lpush("l", "front")
    p.hdel("h", "f1")
    p.zincrby("z", 10, "m1")
    p.xadd("st", {"c": "3"})
    d3 = primary.client(db=3)
    d3.set("three", "3")
    d3.expire("three", 999)
    with p.pipeline(transaction=True) as t:
        t.set("tx1", "a")
        t.rpush("l", "tx")
        t.sadd("set", "new")
        t.execute()
    p.delete("big")
    wait_same(p, r)
    assert r.get("after") == b"1"
    assert rep.client(db=3).get("three") == b"3"
    log = rep.log_tail(20000)
    assert "MASTER <-> REPLICA sync: Finished with success" in log
    assert "Connecting to MASTER 127.0.0.1:%d" % primary.port in log


def test_writes_on_a_read_only_replica_get_readonly(primary, darner_factory):
    _, rep, r = follower(primary, darner_factory)
    with rep.raw() as c:
        assert c.call("SET", "k", "v").raw == b"-READONLY You can't write against a read only replica.\r\n"
        assert c.call("GET", "k").raw == b"$-1\r\n"
        assert c.call("MULTI").raw == b"+OK\r\n"
        assert c.call("INCR", "k").raw.startswith(b"-READONLY")
        assert c.call("EXEC").raw.startswith(b"-EXECABORT")
    assert info(r)["slave_read_only"] == 1
    # With replica-read-only no, clients may write.
    r.config_set("replica-read-only", "no")
    assert r.set("local", "1")


def test_killing_the_link_resumes_with_a_partial_resync(primary, darner_factory):
    fill(primary)
    p, rep, r = follower(primary, darner_factory)
    before = info(p, "stats")["sync_partial_ok"]
    full_before = info(p, "stats")["sync_full"]
    assert p.execute_command("CLIENT", "KILL", "TYPE", "replica") >= 1
    p.set("while-down", "x")
    p.rpush("l", "more")
    wait_for(lambda: info(p, "stats")["sync_partial_ok"] == before + 1, what="a partial resync")
    assert info(p, "stats")["sync_full"] == full_before
    wait_same(p, r)
    assert r.get("while-down") == b"x"
    assert "Successful partial resynchronization with master." in rep.log_tail(20000)


def test_replicaof_no_one_promotes_and_allows_writes(primary, darner_factory):
    p, rep, r = follower(primary, darner_factory)
    p.set("k", "1")
    wait_same(p, r)
    old_id = info(r)["master_replid"]
    assert r.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    role = r.execute_command("ROLE")
    assert role[0] == b"master" and role[2] == []
    i = info(r)
    assert i["role"] == "master"
    assert i["master_replid2"] == old_id and i["master_replid"] != old_id
    assert i["second_repl_offset"] == i["master_repl_offset"] + 1
    assert r.set("mine", "2")
    # The link is gone: the old primary's writes no longer arrive.
    wait_for(lambda: info(p)["connected_slaves"] == 0, what="the primary to lose its replica")
    p.set("k", "after")
    assert r.get("k") == b"1"
    assert r.config_get("replicaof") == {"replicaof": ""}
    assert "MASTER MODE enabled (user request from 'id=" in rep.log_tail(20000)


def test_replicaof_at_run_time(primary, darner_factory):
    fill(primary)
    p = primary.client()
    rep = darner_factory()
    r = rep.client()
    r.set("gone", "soon")
    assert r.execute_command("ROLE") == [b"master", 0, []]
    with rep.raw() as c:
        assert c.call("REPLICAOF", "127.0.0.1", "70000").raw == b"-ERR Invalid master port\r\n"
        assert c.call("REPLICAOF", "127.0.0.1", "x").raw == b"-ERR Invalid master port\r\n"
        assert c.call("REPLICAOF", "127.0.0.1", str(primary.port)).raw == b"+OK\r\n"
        assert c.call("REPLICAOF", "127.0.0.1", str(primary.port)).raw == \
            b"+OK Already connected to specified master\r\n"
    wait_same(p, r)
    assert r.get("gone") is None
    assert r.config_get("replicaof") == {"replicaof": "127.0.0.1 %d" % primary.port}
    p.set("later", "yes")
    wait_same(p, r)
    with rep.raw() as c:
        assert c.call("SLAVEOF", "NO", "ONE").raw == b"+OK\r\n"
    assert info(r)["role"] == "master"


class FakePrimary:
    """A primary that answers the handshake (`+FULLRESYNC <replid> 0`) and then sends a
    snapshot that is not an RDB file (`payload`). Counts the replica's connections."""

    def __init__(self, replid=b"a" * 40, payload=b"$16\r\nnot an rdb file!"):
        self.replid = replid
        self.payload = payload
        import socket
        import threading
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stop = False
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        import socket
        self.sock.settimeout(0.2)
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.connections += 1
            conn.settimeout(5)
            try:
                # PING first (answered before the rest comes), then REPLCONF
                # listening-port, REPLCONF capa and PSYNC.
                for answer, commands in ((b"+PONG\r\n", 1), (b"+OK\r\n+OK\r\n", 2),
                                         (b"+FULLRESYNC " + self.replid + b" 0\r\n", 1)):
                    buf = b""
                    while buf.count(b"*") < commands or not buf.endswith(b"\r\n"):
                        chunk = conn.recv(4096)
                        if not chunk:
                            raise OSError("closed")
                        buf += chunk
                    conn.sendall(answer)
                conn.sendall(self.payload)
                time.sleep(0.2)
            except OSError:
                pass
            finally:
                conn.close()

    def close(self):
        self.stop = True
        self.sock.close()


def test_a_corrupt_snapshot_is_refused_and_the_sync_retried(darner_factory):
    fake = FakePrimary()
    try:
        rep = darner_factory()
        r = rep.client()
        r.set("k", "v")
        assert r.execute_command("REPLICAOF", "127.0.0.1", fake.port) == b"OK"
        wait_for(lambda: fake.connections >= 2, what="a second attempt")
        log = rep.log_tail(20000)
        assert "Failed trying to load the MASTER synchronization DB from disk" in log
        # Alive, not following, and no half-loaded data.
        assert r.ping()
        assert info(r)["master_link_status"] == "down"
        assert r.dbsize() == 0
        assert r.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    finally:
        fake.close()


def test_a_replicas_aof_holds_the_synced_dataset(primary):
    """With appendonly yes, a full sync rewrites the replica's AOF (Redis's
    restartAOFAfterSYNC): restarted alone on its directory, the replica has the primary's
    data, not the dataset the sync replaced plus the stream."""
    fill(primary)
    p = primary.client()
    d = tempfile.mkdtemp(prefix="darner-replica-aof-")
    try:
        rep = harness.start_darner(["--dir", d, "--appendonly", "yes",
                                    "--replicaof", "127.0.0.1", str(primary.port)])
        try:
            r = rep.client()
            wait_for(lambda: info(r).get("master_link_status") == "up", what="link up")
            p.set("after", "1")
            wait_same(p, r)
            wait_for(lambda: info(r, "persistence")["aof_rewrite_in_progress"] == 0
                     and info(r, "persistence")["aof_rewrite_scheduled"] == 0,
                     what="the AOF rewrite after the sync")
            want = digest(p)
        finally:
            rep.stop(cleanup=False)
        again = harness.start_darner(["--dir", d, "--appendonly", "yes"])
        try:
            assert digest(again.client()) == want
        finally:
            again.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def thread_cpu_ticks(pid, name):
    """CPU time (user + system, in clock ticks) of process `pid`'s thread named `name`."""
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
            st = f.read()
        if st[st.index("(") + 1:st.rindex(")")] == name:
            fields = st[st.rindex(")") + 2:].split()
            return int(fields[11]) + int(fields[12])
    raise AssertionError("no thread %r in process %d" % (name, pid))


def test_the_link_waits_without_spinning_while_its_window_is_full(primary, darner_factory):
    """While the replica's shard is busy (DEBUG SLEEP), the link forwards its window of
    commands and waits for their replies: it leaves the primary's further bytes unread and
    does not spin on them (it took a core doing so, and a replica on a loaded machine fell
    far behind its primary)."""
    p = primary.client()
    rep = darner_factory("--replicaof", "127.0.0.1", primary.port, threads=1)
    r = rep.client()
    wait_same(p, r)
    hz = os.sysconf("SC_CLK_TCK")
    sleeper = threading.Thread(target=lambda: rep.client().execute_command("DEBUG", "SLEEP", 3))
    sleeper.start()
    try:
        time.sleep(0.3)
        # Far more commands than the link's window (1024): the rest stay in the socket.
        with p.pipeline(transaction=False) as pl:
            for i in range(20_000):
                pl.set("w:%d" % i, i)
            pl.execute()
        time.sleep(0.3)
        before = thread_cpu_ticks(rep.proc.pid, "replica-link")
        time.sleep(1.5)
        used = (thread_cpu_ticks(rep.proc.pid, "replica-link") - before) / hz
    finally:
        sleeper.join(30)
    # Waiting in poll takes next to no CPU; spinning took the 1.5 s of a core (or, on a
    # loaded machine, its share of one: still several tenths of a second).
    assert used < 0.1, "the link thread used %.2f s of CPU in 1.5 s while waiting" % used
    wait_same(p, r)
    assert r.get("w:19999") == b"19999"
