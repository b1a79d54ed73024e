"""MONITOR through darner-proxy, against real Redis Clusters of Debian's redis-server (three
primaries; and three primaries with a replica each, for a read policy that reads replicas).

What a monitoring client sees is read from the proxy's socket and compared with what the
nodes' own MONITOR lines look like; which nodes are watched is read from the nodes' own
CLIENT LIST (a monitoring client has flag `O`), never from the proxy's account of itself.
"""

from __future__ import annotations

import re

import pytest

from resp_reader import ConnectionClosed
from test_proxy import (cluster, keys_on_distinct_nodes, owner, proxy,  # noqa: F401
                        wait_for)
from test_proxy_ha import cluster6, proxy_on  # noqa: F401 (fixture)

# A node's MONITOR line: `+<seconds>.<micros> [<db> <addr>] "<arg>" ...`.
LINE = re.compile(rb'^\+\d+\.\d{6} \[0 127\.0\.0\.1:\d+\] (".*")\r\n$')


def monitors_on(nodes):
    """{port: monitoring clients} as each node's CLIENT LIST says."""
    out = {}
    for n in nodes:
        text = n.client().execute_command("CLIENT", "LIST")
        text = text.decode() if isinstance(text, bytes) else text
        out[n.port] = sum(1 for line in text.splitlines()
                          if re.search(r"\bflags=\w*O\w*\b", line))
    return out


def read_lines_until(conn, want, timeout=10):
    """MONITOR lines read until every byte string of `want` was seen in one; all lines read."""
    lines, missing = [], set(want)
    while missing:
        line = conn.read_reply(timeout=timeout).raw
        lines.append(line)
        missing = {w for w in missing if w not in line}
    return lines


def test_monitor_shows_every_primarys_commands_as_the_nodes_write_them(proxy, cluster):
    keys = keys_on_distinct_nodes(cluster, prefix="mon")
    before = monitors_on(cluster)
    with proxy.raw() as mon:
        mon.send("MONITOR")
        assert mon.read_reply().raw == b"+OK\r\n"
        # Every primary watched from the `+OK` on: one monitor connection each.
        assert monitors_on(cluster) == {p: n + 1 for p, n in before.items()}
        c = proxy.client()
        for k in keys:
            c.set(k, "v-" + k)
        lines = read_lines_until(mon, [b'"SET" "%s" "v-%s"' % (k.encode(), k.encode())
                                       for k in keys])
        for line in lines:
            assert LINE.match(line), line
        # The same write watched on its node directly reads the same but for time and address.
        with cluster[0].raw() as direct:
            direct.send("MONITOR")
            assert direct.read_reply().raw == b"+OK\r\n"
            k = next(k for k in keys if owner(cluster, k).port == cluster[0].port)
            c.set(k, "again")
            want = b'"SET" "%s" "again"' % k.encode()
            theirs = read_lines_until(direct, [want])[-1]
            ours = read_lines_until(mon, [want])[-1]
            assert LINE.match(theirs).group(1) == LINE.match(ours).group(1)
        c.close()
    # The client gone, its monitor connections go too.
    wait_for(lambda: monitors_on(cluster) == before, timeout=5,
             what="the monitor connections closed")


def test_a_monitoring_client_may_do_what_redis_allows(proxy, cluster):
    """PING, keyspace commands' refusal and QUIT as a monitoring client of one node gets them;
    the command pipelined after MONITOR is answered after its `+OK`."""
    k = next(k for k in keys_on_distinct_nodes(cluster, prefix="m")
             if owner(cluster, k).port == cluster[0].port)
    with cluster[0].raw() as direct:
        direct.send("MONITOR")
        direct.read_reply()
        direct.send("GET", k)
        refusal = direct.read_reply().raw
    assert refusal == b"-ERR Replica can't interact with the keyspace\r\n"
    with proxy.raw() as mon:
        mon.send_many([("ECHO", "first"), ("MONITOR",), ("PING",), ("GET", k),
                       ("CLIENT", "ID")])
        got = [r.raw for r in mon.read_replies(5)]
        assert got[:4] == [b"$5\r\nfirst\r\n", b"+OK\r\n", b"+PONG\r\n", refusal], got
        assert got[4].startswith(b"-ERR command 'client' is not supported by darner proxy "
                                 b"while MONITOR is on"), got
        mon.send("QUIT")
        assert mon.read_reply().raw == b"+OK\r\n"
        with pytest.raises(ConnectionClosed):
            mon.read_reply(timeout=5)


def test_reset_ends_monitoring(proxy, cluster):
    before = monitors_on(cluster)
    with proxy.raw() as mon:
        mon.send("MONITOR")
        assert mon.read_reply().raw == b"+OK\r\n"
        mon.send("RESET")
        assert mon.read_reply().raw == b"+RESET\r\n"
        wait_for(lambda: monitors_on(cluster) == before, timeout=5,
                 what="the monitor connections closed")
        # A client as any other again: its commands run, and nothing is monitored any more.
        proxy.client().set("after-reset", "1")
        mon.send("GET", "after-reset")
        assert mon.read_reply().raw == b"$1\r\n1\r\n"
        mon.send("MONITOR")
        assert mon.read_reply().raw == b"+OK\r\n"


def test_monitor_watches_replicas_when_reads_may_go_there(cluster6):
    nodes = cluster6.nodes
    before = monitors_on(nodes)
    with proxy_on(cluster6, "replica") as p:
        with p.raw() as mon:
            mon.send("MONITOR")
            assert mon.read_reply().raw == b"+OK\r\n"
            assert monitors_on(nodes) == {port: n + 1 for port, n in before.items()}
            c = p.client()
            c.set("seen-on-replica", "1")
            # The read runs on the key's replica; its line comes from there.
            wait_for(lambda: c.get("seen-on-replica") == b"1", timeout=5,
                     what="the write replicated")
            read_lines_until(mon, [b'"GET" "seen-on-replica"', b'"SET" "seen-on-replica" "1"'])
            c.close()
        wait_for(lambda: monitors_on(nodes) == before, timeout=5,
                 what="the monitor connections closed")
    with proxy_on(cluster6, "master") as p:
        with p.raw() as mon:
            mon.send("MONITOR")
            assert mon.read_reply().raw == b"+OK\r\n"
            now = monitors_on(nodes)
            for n in cluster6.primaries:
                assert now[n.port] == before[n.port] + 1
            for n in cluster6.replicas:
                assert now[n.port] == before[n.port]


def test_monitor_follows_a_replica_added_later():
    """A node that joins after MONITOR (a replica added with `redis-cli --cluster add-node
    --cluster-slave`, under a read policy that reads replicas) is watched from the topology
    refresh that names it on: its own CLIENT LIST shows the monitor connection, and a command
    it runs reaches the monitoring client."""
    import subprocess

    from harness import Server
    from test_proxy import ProxyServer, proxy_tests_can_run, redis_cluster
    binary = proxy_tests_can_run()
    with redis_cluster() as nodes:
        p = ProxyServer(["127.0.0.1:%d" % nodes[0].port],
                        ["--read-policy", "prefer-replica", "--cluster-refresh-interval", "200"])
        p.start()
        new = None
        try:
            with p.raw() as mon:
                mon.send("MONITOR")
                assert mon.read_reply().raw == b"+OK\r\n"
                assert set(monitors_on(nodes).values()) == {1}
                new = Server(binary, ["--cluster-enabled", "yes", "--cluster-config-file",
                                      "nodes.conf", "--cluster-node-timeout", "15000"],
                             is_redis=True, name="cluster-node").start()
                primary_id = nodes[0].client().execute_command("CLUSTER", "MYID")
                primary_id = primary_id.decode() if isinstance(primary_id, bytes) else primary_id
                out = subprocess.run(
                    ["redis-cli", "--cluster", "add-node", "127.0.0.1:%d" % new.port,
                     "127.0.0.1:%d" % nodes[0].port, "--cluster-slave",
                     "--cluster-master-id", primary_id],
                    capture_output=True, timeout=30)
                assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()
                wait_for(lambda: monitors_on([new]) == {new.port: 1}, timeout=20,
                         what="a monitor connection to the new replica")
                direct = new.client()
                direct.echo("seen-on-the-new-node")
                read_lines_until(mon, [b'"ECHO" "seen-on-the-new-node"'])
                # The nodes watched from the start are still watched once each.
                assert set(monitors_on(nodes).values()) == {1}
                direct.close()
        finally:
            p.stop()
            if new is not None:
                new.stop()
