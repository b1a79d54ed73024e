"""WAIT through darner-proxy against a real six-node Redis Cluster of Debian's redis-server
(three primaries with a replica each): the count a client gets is compared with what a node
answers for the same writes, a replica that stops acknowledging (SIGSTOP) lowers it only for
the clients that wrote to its shard, and a WAIT that waits never holds up other clients."""

from __future__ import annotations

import os
import signal
import time

from test_proxy import wait_for
from test_proxy_ha import cluster6, proxy_on  # noqa: F401 (fixture)


def key_on(cluster, primary, prefix):
    i = 0
    while cluster.owner("%s%d" % (prefix, i)).port != primary.port:
        i += 1
    return "%s%d" % (prefix, i)


def timed(c, *args):
    t0 = time.monotonic()
    reply = c.execute_command(*args)
    return reply, time.monotonic() - t0


def test_wait_counts_the_replicas_that_got_the_clients_writes(cluster6):
    with proxy_on(cluster6, "master") as p:
        c = p.client()
        # No write yet: what a fresh connection to a node answers (each shard has a replica,
        # counted once its replication link is online, which may follow the cluster's state).
        for primary in cluster6.primaries:
            wait_for(lambda: primary.client().execute_command("WAIT", 0, 0) == 1, timeout=15,
                     what="a replica counted by %d" % primary.port)
        direct = cluster6.primaries[0].client()
        assert c.execute_command("WAIT", 0, 0) == 1
        assert c.execute_command("WAIT", 1, 0) == 1
        for n, primary in enumerate(cluster6.primaries):
            c.set(key_on(cluster6, primary, "w%d-" % n), "v")
        assert timed(c, "WAIT", 1, 5000)[0] == 1
        # More than there are: the count when the timeout ends, as a node answers.
        c.set(key_on(cluster6, cluster6.primaries[1], "more"), "v")
        count, took = timed(c, "WAIT", 2, 300)
        assert count == 1 and 0.25 < took < 3, (count, took)
        direct.set(key_on(cluster6, cluster6.primaries[0], "d"), "v")
        assert direct.execute_command("WAIT", 2, 300) == 1
        # Requests pipelined after WAIT are answered after it.
        pipe = c.pipeline(transaction=False)
        k = key_on(cluster6, cluster6.primaries[2], "pipe")
        pipe.set(k, "1").execute_command("WAIT", 1, 5000).get(k)
        assert pipe.execute() == [True, 1, b"1"]
        # A transaction's writes are waited for too.
        tx = c.pipeline(transaction=True)
        tx.set(k, "2").incr(k)
        assert tx.execute() == [True, 3]
        assert c.execute_command("WAIT", 1, 5000) == 1


def test_a_replica_that_does_not_acknowledge_counts_only_for_its_shards_writers(cluster6):
    stopped_primary = cluster6.primaries[0]
    replica = cluster6.replica_of[stopped_primary.port]
    other = cluster6.primaries[1]
    with proxy_on(cluster6, "master") as p:
        writer, bystander = p.client(), p.client()
        direct = stopped_primary.client()
        os.kill(replica.proc.pid, signal.SIGSTOP)
        try:
            writer.set(key_on(cluster6, stopped_primary, "stop"), "v")
            bystander.set(key_on(cluster6, other, "other"), "v")
            count, took = timed(writer, "WAIT", 1, 300)
            assert count == 0 and 0.25 < took < 3, (count, took)
            assert bystander.execute_command("WAIT", 1, 5000) == 1
            direct.set(key_on(cluster6, stopped_primary, "stop-direct"), "v")
            assert direct.execute_command("WAIT", 1, 300) == 0
        finally:
            os.kill(replica.proc.pid, signal.SIGCONT)
        # Acknowledged once it runs again (the node asks it at once, as for a WAIT of its own).
        count, took = timed(writer, "WAIT", 1, 5000)
        assert count == 1, (count, took)


def test_a_waiting_client_holds_up_no_other(cluster6):
    primary = cluster6.primaries[2]
    with proxy_on(cluster6, "master", "--threads", "1") as p:
        other = p.client()
        k = key_on(cluster6, primary, "hol")
        with p.raw() as waiter:
            waiter.send("SET", k, "1")
            assert waiter.read_reply().raw == b"+OK\r\n"
            waiter.send("WAIT", 2, 1500)
            time.sleep(0.1)
            for _ in range(20):
                value, took = timed(other, "GET", k)
                assert value == b"1" and took < 0.2, took
            assert waiter.read_reply(timeout=5).raw == b":1\r\n"
