"""No write acknowledged by WAIT is lost when the primary dies (issue 15's failover test).

A client loop writes a new key and waits for the replicas' acknowledgement (WAIT) after each
write, noting the writes WAIT confirmed. The primary is then killed (SIGKILL) in the middle
of the loop, and a replica promoted: by REPLICAOF NO ONE (a darner replica and a redis-server
7.0 replica of a darner primary), and by Redis Sentinel (two darner replicas, WAIT 2, so
whichever replica Sentinel picks holds every confirmed write). Every confirmed key must be
on the new primary. (FAILOVER's own loop is in test_failover.py.) Waits poll with deadlines.
"""

from __future__ import annotations

import threading

import pytest
import redis

import harness
from test_sentinel import deployment, is_primary, wait_for  # noqa: F401 - fixture

pytestmark = pytest.mark.darner_only


class Writer(threading.Thread):
    """SET w<i> i, then WAIT `replicas`: the keys WAIT confirmed, until the primary dies."""

    def __init__(self, primary, replicas):
        super().__init__(daemon=True)
        self.client = primary.client(socket_timeout=5)
        self.replicas = replicas
        self.confirmed = []
        self.unconfirmed = 0
        self.stop = threading.Event()

    def run(self):
        i = 0
        while not self.stop.is_set():
            i += 1
            try:
                self.client.set("w%d" % i, i)
                acked = self.client.execute_command("WAIT", self.replicas, 1000)
            except (redis.ConnectionError, redis.TimeoutError):
                return
            if acked >= self.replicas:
                self.confirmed.append(i)
            else:
                self.unconfirmed += 1


def run_until_killed(primary, replicas, min_confirmed=200):
    w = Writer(primary, replicas)
    w.start()
    wait_for(lambda: len(w.confirmed) >= min_confirmed, 30, "the writer to get WAIT's confirmations")
    primary.kill()
    w.join(10)
    assert not w.is_alive()
    return w.confirmed


def missing(server, confirmed):
    c = server.client()
    got = []
    for start in range(0, len(confirmed), 500):
        part = confirmed[start:start + 500]
        got += c.mget(["w%d" % i for i in part])
    return [i for i, v in zip(confirmed, got) if v != str(i).encode()]


@pytest.mark.parametrize("kind", ["darner-replica", "redis-replica"])
def test_replicaof_no_one_after_a_kill_keeps_every_confirmed_write(kind, darner_factory):
    primary = darner_factory()
    if kind == "darner-replica":
        replica = darner_factory("--replicaof", "127.0.0.1", primary.port)
    else:
        replica = harness.start_reference(["--replicaof", "127.0.0.1", str(primary.port)])
    try:
        wait_for(lambda: replica.client().info("replication")["master_link_status"] == "up",
                 20, "the replica's link")
        confirmed = run_until_killed(primary, 1)
        r = replica.client()
        r.execute_command("REPLICAOF", "NO", "ONE")
        wait_for(lambda: is_primary(replica), 10, "the promotion")
        assert missing(replica, confirmed) == []
        # The promoted replica takes writes.
        assert r.set("after", "1")
    finally:
        if kind == "redis-replica":
            replica.stop()


def test_sentinel_failover_keeps_every_write_wait_confirmed(deployment):
    d = deployment
    wait_for(lambda: all(r.client().info("replication")["master_link_status"] == "up"
                         for r in d.replicas), 20, "the replicas' links")
    d.start_sentinels()
    wait_for(d.discovered, 15, "the sentinels to discover the replicas and each other", d.logs())
    old_port = d.primary.port
    confirmed = run_until_killed(d.primary, 2)
    wait_for(lambda: all(d.master_port(i) != old_port for i in range(len(d.sentinels))),
             20, "every sentinel to name a new primary", d.logs())
    new_port = d.master_port(0)
    promoted = next(r for r in d.replicas if r.port == new_port)
    wait_for(lambda: is_primary(promoted), 5, "the promoted replica to be a primary", d.logs())
    assert missing(promoted, confirmed) == []
    assert promoted.client().set("after", "1")
