"""darner-proxy's hedged reads (`--read-hedge-after`) against a real six-node Redis Cluster
(the fixtures of test_proxy_ha): a read still unanswered after the budget gets a second copy on
another node its policy allows, and the first reply answers.

A replica is made slow with `CLIENT PAUSE <ms> ALL`: it reads its clients' requests but runs
none until the pause ends, then runs them all, so the first copies' replies do come back, late,
on the proxy's shared connection, and must be dropped there. Where a read was answered is read
from the nodes' own INFO commandstats; the hedges from the proxy's INFO.
"""

from __future__ import annotations

import threading
import time

from test_proxy_ha import (cluster6, cmdstat, keys_per_shard, populate,  # noqa: F401
                           proxy_on, reset_stats)
from test_proxy import wait_for

PAUSE_MS = 2500
BUDGET_MS = 100
# Answered within the budget plus this, far below the pause: the other node answered.
MARGIN_S = 0.9


def hedges(client):
    info = client.info("proxy")
    return info["proxy_read_hedges"], info["proxy_read_hedges_won"]


class Paused:
    """`node` runs no client's command for `ms` (set on entry); on exit, waits for the pause
    to end (UNPAUSE, a client's command itself, runs only then)."""

    def __init__(self, node, ms=PAUSE_MS):
        self.node, self.ms = node, ms

    def __enter__(self):
        self.node.client().execute_command("CLIENT", "PAUSE", str(self.ms), "ALL")
        return self

    def __exit__(self, *exc):
        self.node.client().execute_command("CLIENT", "UNPAUSE")


def test_a_read_on_a_paused_replica_is_answered_by_the_primary_after_the_budget(cluster6):
    keys = keys_per_shard(cluster6, n=2, prefix="hedge1")
    with proxy_on(cluster6, "prefer-replica", "--threads", "1",
                  "--read-hedge-after", str(BUDGET_MS),
                  "--read-hedge-max-percent", "100") as p:
        populate(cluster6, p, keys)
        shard = cluster6.owner(keys[0])
        victim = cluster6.replica_of[shard.port]
        c = p.client()
        # Warm: the shared connections are open (an unpaused replica answers in time).
        for k in keys:
            assert c.get(k) == ("v-" + k).encode()
        sent, won = hedges(c)
        reset_stats(cluster6)
        with Paused(victim):
            start = time.monotonic()
            assert c.get(keys[0]) == ("v-" + keys[0]).encode()
            took = time.monotonic() - start
            during = hedges(c)
        # The paused replica runs the first copy once the pause ends; its reply is dropped:
        # this connection's next replies are its own.
        wait_for(lambda: cmdstat(victim, "get")[0] == 1, timeout=10,
                 what="the replica to run the first copy")
        for k in keys:
            assert c.get(k) == ("v-" + k).encode()
        c.close()
    assert BUDGET_MS / 1000 <= took < BUDGET_MS / 1000 + MARGIN_S, took
    assert during == (sent + 1, won + 1), (sent, won, during)
    assert cmdstat(shard, "get")[0] == 1


def test_pipelined_reads_of_two_clients_while_hedging_each_get_their_own_in_order(cluster6):
    """Two clients pipeline reads of distinct keys over every shard through one thread (so
    through the same shared connections): the paused shard's are hedged, every reply is its
    own request's, in order, and the late first copies reach nobody."""
    per_shard = 10
    keys = {who: keys_per_shard(cluster6, n=per_shard, prefix="hedge-%s" % who)
            for who in ("a", "b")}
    with proxy_on(cluster6, "prefer-replica", "--threads", "1",
                  "--read-hedge-after", str(BUDGET_MS),
                  "--read-hedge-max-percent", "100") as p:
        populate(cluster6, p, keys["a"] + keys["b"])
        shard = cluster6.primaries[0]
        victim = cluster6.replica_of[shard.port]
        on_victim = {who: [k for k in ks if cluster6.owner(k) == shard]
                     for who, ks in keys.items()}
        assert all(len(v) == per_shard for v in on_victim.values())
        clients = {who: p.client() for who in keys}
        for who, c in clients.items():
            assert c.get(keys[who][0]) == ("v-" + keys[who][0]).encode()
        sent, won = hedges(clients["a"])
        results, errors = {}, []

        def pipeline(who):
            try:
                pipe = clients[who].pipeline(transaction=False)
                for k in keys[who]:
                    pipe.get(k)
                start = time.monotonic()
                got = pipe.execute()
                results[who] = (time.monotonic() - start, got)
            except Exception as e:  # noqa: BLE001 (reported by the main thread)
                errors.append(repr(e))

        reset_stats(cluster6)
        with Paused(victim):
            threads = [threading.Thread(target=pipeline, args=(who,)) for who in keys]
            for t in threads:
                t.start()
            for t in threads:
                t.join(10)
            during = hedges(clients["a"])
        assert not errors, errors
        for who in keys:
            took, got = results[who]
            assert got == [("v-" + k).encode() for k in keys[who]], who
            assert took < BUDGET_MS / 1000 + MARGIN_S, (who, took)
        # Every read of the paused shard was hedged and answered by its primary (a slow reply
        # of another shard may have been hedged too).
        paused_reads = sum(len(v) for v in on_victim.values())
        assert during[0] - sent >= paused_reads, (sent, during)
        assert during[1] - won >= paused_reads, (won, during)
        assert cmdstat(shard, "get")[0] >= paused_reads
        wait_for(lambda: cmdstat(victim, "get")[0] >= paused_reads, timeout=10,
                 what="the replica to run the first copies")
        # The late replies were dropped: both clients' next pipelines read their own.
        for who, c in clients.items():
            pipe = c.pipeline(transaction=False)
            for k in reversed(keys[who]):
                pipe.get(k)
            assert pipe.execute() == [("v-" + k).encode() for k in reversed(keys[who])], who
            c.close()


def test_with_the_budget_off_nothing_is_hedged(cluster6):
    key = keys_per_shard(cluster6, n=1, prefix="hedge-off")[0]
    shard = cluster6.owner(key)
    victim = cluster6.replica_of[shard.port]
    with proxy_on(cluster6, "prefer-replica", "--threads", "1") as p:
        populate(cluster6, p, [key])
        c = p.client()
        assert c.get(key) == ("v-" + key).encode()
        reset_stats(cluster6)
        with Paused(victim, ms=800):
            start = time.monotonic()
            assert c.get(key) == ("v-" + key).encode()
            took = time.monotonic() - start
        assert hedges(c) == (0, 0)
        c.close()
    # The read waited for the replica.
    assert took > 0.6, took
    assert cmdstat(shard, "get")[0] == 0
    assert cmdstat(victim, "get")[0] == 1


def test_hedges_are_capped_by_their_share_of_the_reads(cluster6):
    """The bucket starts full (100 hedges, as a quiet spell leaves it): a first pipeline of 100
    slow reads is hedged whole and empties it. At 10%, a pipeline of 50 slow reads then gets
    5 hedges (one token per ten reads); the others wait for the replica, and every reply is
    still the right one."""
    keys = keys_per_shard(cluster6, n=100, prefix="hedge-cap")
    shard = cluster6.primaries[1]
    mine = [k for k in keys if cluster6.owner(k) == shard]
    assert len(mine) == 100
    victim = cluster6.replica_of[shard.port]
    results = []
    with proxy_on(cluster6, "prefer-replica", "--threads", "1",
                  "--read-hedge-after", str(BUDGET_MS),
                  "--read-hedge-max-percent", "10") as p:
        populate(cluster6, p, mine)
        c = p.client()
        for batch in (mine, mine[:50]):
            # The first copies of the last round answered: their replies are dropped first.
            wait_for(lambda: c.get(mine[0]) == ("v-" + mine[0]).encode(), timeout=10,
                     what="the replica answering again")
            before = hedges(c)
            with Paused(victim, ms=1000):
                pipe = c.pipeline(transaction=False)
                for k in batch:
                    pipe.get(k)
                start = time.monotonic()
                got = pipe.execute()
                took = time.monotonic() - start
            after = hedges(c)
            results.append((got == [("v-" + k).encode() for k in batch],
                            after[0] - before[0], after[1] - before[1], took))
        c.close()
    (right1, sent1, won1, _), (right2, sent2, won2, took2) = results
    assert right1 and right2
    # A full bucket: every read of the first pipeline hedged, and answered by the primary.
    assert sent1 == 100 and won1 == 100, results
    # Then 50 reads earn 5 tokens.
    assert sent2 == 5 and won2 == 5, results
    # The unhedged reads waited for the pause to end.
    assert took2 > 0.7, took2


def test_writes_are_never_hedged(cluster6):
    """A paused primary delays a pipeline of writes: none gets a second copy."""
    keys = keys_per_shard(cluster6, n=3, prefix="hedge-w")
    shard = cluster6.owner(keys[0])
    mine = [k for k in keys if cluster6.owner(k) == shard]
    with proxy_on(cluster6, "prefer-replica", "--threads", "1",
                  "--read-hedge-after", str(BUDGET_MS),
                  "--read-hedge-max-percent", "100") as p:
        c = p.client()
        assert c.set(mine[0], "x")
        reset_stats(cluster6)
        with Paused(shard, ms=800):
            pipe = c.pipeline(transaction=False)
            for k in mine:
                pipe.set(k, "w-" + k)
                pipe.incr(k + ":n")
            start = time.monotonic()
            got = pipe.execute()
            took = time.monotonic() - start
        assert hedges(c) == (0, 0)
        c.close()
    assert got == [v for _ in mine for v in (True, 1)]
    assert took > 0.6, took
    assert cmdstat(shard, "set")[0] == len(mine)


def test_a_first_copy_that_fails_after_the_hedge_answered_is_not_retried(cluster6):
    """The hedge answers; then the paused replica's connection times out (--op-timeout) with
    the first copy still on it: that copy is dropped, not retried, and answers nobody."""
    keys = keys_per_shard(cluster6, n=2, prefix="hedge-fail")
    shard = cluster6.owner(keys[0])
    victim = cluster6.replica_of[shard.port]
    with proxy_on(cluster6, "prefer-replica", "--threads", "1", "--op-timeout", "600",
                  "--read-hedge-after", str(BUDGET_MS),
                  "--read-hedge-max-percent", "100") as p:
        populate(cluster6, p, keys)
        c = p.client()
        for k in keys:
            assert c.get(k) == ("v-" + k).encode()
        before = c.info("proxy")
        reset_stats(cluster6)
        with Paused(victim, ms=1500):
            start = time.monotonic()
            assert c.get(keys[0]) == ("v-" + keys[0]).encode()
            took = time.monotonic() - start
            # Past the op-timeout: the replica's connection was dropped meanwhile.
            time.sleep(0.8)
            after = c.info("proxy")
        # The client's next replies are its own.
        for k in keys:
            assert c.get(k) == ("v-" + k).encode()
        c.close()
    assert took < BUDGET_MS / 1000 + MARGIN_S, took
    assert after["proxy_read_hedges"] == before["proxy_read_hedges"] + 1, after
    assert after["proxy_read_hedges_won"] == before["proxy_read_hedges_won"] + 1, after
    # The replica's connection did time out with the first copy on it...
    victim_addr = "127.0.0.1:%d" % victim.port
    lines = [v for k, v in after.items() if k.startswith("backend")
             and isinstance(v, dict) and v.get("addr") == victim_addr]
    assert len(lines) == 1 and lines[0]["failed"] >= 1, after
    # ... and the dropped first copy was not sent again.
    assert after["proxy_read_retries"] == before["proxy_read_retries"], after
    # The hedge reached the primary (then perhaps the reads after the pause, while the
    # replica's connection is reopened).
    assert cmdstat(shard, "get")[0] >= 1


def test_the_master_policy_never_hedges(cluster6):
    """Under `master` a read has one node: a paused primary delays it, unhedged."""
    key = keys_per_shard(cluster6, n=1, prefix="hedge-m")[0]
    shard = cluster6.owner(key)
    with proxy_on(cluster6, "master", "--threads", "1",
                  "--read-hedge-after", str(BUDGET_MS),
                  "--read-hedge-max-percent", "100") as p:
        populate(cluster6, p, [key])
        c = p.client()
        assert c.get(key) == ("v-" + key).encode()
        with Paused(shard, ms=800):
            start = time.monotonic()
            assert c.get(key) == ("v-" + key).encode()
            took = time.monotonic() - start
        assert hedges(c) == (0, 0)
        c.close()
    assert took > 0.6, took
