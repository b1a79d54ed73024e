"""darner-proxy's high availability against a real six-node Redis Cluster (three primaries,
three replicas, Debian's redis-server, made with `redis-cli --cluster create
--cluster-replicas 1`): read policies, read retries, outlier ejection and probing, and
failover under load.

Where a request went is read from the nodes' own INFO commandstats (`calls` of GET and SET,
and `rejected_calls`, which counts a request a node redirected instead of running), never
from the proxy's account of itself.

The nodes run with a short cluster-node-timeout so that a failover takes a couple of seconds,
and with `cluster-allow-reads-when-down yes`: between a primary's failure being agreed and its
replica's promotion the cluster state is `fail`, and without that setting every node refuses
every request in that window, reads included (a Redis Cluster fact, whoever the client).
"""

from __future__ import annotations

import subprocess
import threading
import time
from contextlib import contextmanager

import pytest
import redis

import harness
from harness import HarnessError, Server
from keyslot import key_slot
from test_proxy import ProxyServer, proxy_tests_can_run, wait_for

NODE_TIMEOUT_MS = 1500
NODE_ARGS = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
             "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
             "--cluster-allow-reads-when-down", "yes",
             # A replica reports `loading` health until its replication offset moves, which
             # on an idle primary waits for the replication PING (10 s by default).
             "--repl-ping-replica-period", "1",
             # The first full sync starts at once (Redis 7 waits 5 s for more replicas).
             "--repl-diskless-sync-delay", "0"]


def shards_of(node):
    """{primary port: [replica ports]} and every node's health, as `node` sees them."""
    out, health = {}, {}
    for shard in node.client().execute_command("CLUSTER", "SHARDS"):
        shard = dict(zip(shard[::2], shard[1::2])) if isinstance(shard, list) else shard
        primary, replicas = None, []
        for n in shard[b"nodes"]:
            n = dict(zip(n[::2], n[1::2])) if isinstance(n, list) else n
            health[n[b"port"]] = n[b"health"].decode()
            if n[b"role"] == b"master":
                if shard[b"slots"]:
                    primary = n[b"port"]
            else:
                replicas.append(n[b"port"])
        if primary is not None:
            out[primary] = replicas
    return out, health


class Cluster:
    """Six redis-server nodes; `primaries` and `replicas` are Servers, `replica_of` maps a
    primary's port to its replica."""

    def __init__(self):
        binary = harness.redis_server_bin()
        self.nodes = []
        try:
            for _ in range(6):
                self.nodes.append(Server(binary, NODE_ARGS, is_redis=True,
                                         name="ha-node").start())
            addrs = ["127.0.0.1:%d" % n.port for n in self.nodes]
            out = subprocess.run(["redis-cli", "--cluster", "create", *addrs,
                                  "--cluster-replicas", "1", "--cluster-yes"],
                                 capture_output=True, timeout=60)
            assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()
            wait_for(self.settled, timeout=30, what="3 shards of 2 online nodes on every node")
        except BaseException:
            self.stop()
            raise
        shards, _ = shards_of(self.nodes[0])
        by_port = {n.port: n for n in self.nodes}
        self.primaries = [by_port[p] for p in sorted(shards)]
        self.replica_of = {p: by_port[r[0]] for p, r in shards.items()}
        self.replicas = [self.replica_of[p.port] for p in self.primaries]

    def settled(self, nodes=None):
        """Every node: cluster_state ok, three shards with slots, each with one replica, all
        online (a replica reports `loading` until its first sync is done)."""
        for n in nodes or self.nodes:
            try:
                if b"cluster_state:ok" not in n.client().execute_command("CLUSTER", "INFO"):
                    return False
                shards, health = shards_of(n)
            except redis.RedisError:
                return False
            if len(shards) != 3 or any(len(r) != 1 for r in shards.values()):
                return False
            if len(health) != 6 or any(h != "online" for h in health.values()):
                return False
        return True

    def owner(self, key):
        slot = key_slot(key)
        asked = next(n for n in self.nodes if n.alive())
        for start, end, primary, *_ in asked.client().execute_command("CLUSTER", "SLOTS"):
            if start <= slot <= end:
                return next(n for n in self.nodes if n.port == primary[1])
        raise AssertionError("slot %d not served" % slot)

    def seeds(self):
        return ["127.0.0.1:%d" % n.port for n in self.nodes]

    def stop(self):
        for n in self.nodes:
            n.stop()


@contextmanager
def six_nodes():
    proxy_tests_can_run()
    try:
        c = Cluster()
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def cluster6():
    """Shared by the tests that leave every node running."""
    with six_nodes() as c:
        yield c


@pytest.fixture
def fresh_cluster():
    """For a test that kills nodes."""
    with six_nodes() as c:
        yield c


@contextmanager
def proxy_on(cluster, policy, *extra):
    # Every node as a seed: a test may have killed any of them.
    p = ProxyServer(cluster.seeds(), ["--read-policy", policy, *extra])
    try:
        p.start()
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)
    try:
        yield p
    finally:
        p.stop()


def keys_per_shard(cluster, n=4, prefix="ha"):
    """`n` keys on each primary."""
    found = {p.port: [] for p in cluster.primaries}
    i = 0
    while any(len(v) < n for v in found.values()):
        k = "%s:%d" % (prefix, i)
        port = cluster.owner(k).port
        if len(found[port]) < n:
            found[port].append(k)
        i += 1
    return [k for v in found.values() for k in v]


def cmdstat(node, command):
    """(calls, rejected_calls) of `command` on `node`."""
    info = node.client().info("commandstats")
    s = info.get("cmdstat_%s" % command, {})
    return s.get("calls", 0), s.get("rejected_calls", 0)


def reset_stats(cluster):
    for n in cluster.nodes:
        if n.alive():
            n.client().config_resetstat()


def populate(cluster, proxy, keys):
    """Writes the keys through the proxy and waits until every replica has them."""
    c = proxy.client()
    for k in keys:
        assert c.set(k, "v-" + k)
    c.close()
    for p in cluster.primaries:
        # WAIT on the primary itself: its replica acknowledged everything written so far.
        assert p.client().execute_command("WAIT", "1", "5000") == 1


@pytest.mark.parametrize("policy, readers", [
    ("master", "primaries"), ("prefer-master", "primaries"), ("replica", "replicas"),
    ("prefer-replica", "replicas"), ("any", "both")])
def test_read_policy_sends_reads_where_it_says(cluster6, policy, readers):
    keys = keys_per_shard(cluster6)
    with proxy_on(cluster6, policy) as p:
        populate(cluster6, p, keys)
        reset_stats(cluster6)
        c = p.client()
        rounds = 5
        for _ in range(rounds):
            for k in keys:
                assert c.get(k) == ("v-" + k).encode()
        # A split MGET: each part follows the policy too.
        assert c.mget(keys) == [("v-" + k).encode() for k in keys]
        for k in keys:
            assert c.set(k, "w-" + k)
        c.close()
    gets = {n.port: cmdstat(n, "get") for n in cluster6.nodes}
    mgets = {n.port: cmdstat(n, "mget") for n in cluster6.nodes}
    sets = {n.port: cmdstat(n, "set") for n in cluster6.nodes}
    total = rounds * len(keys)
    on_primaries = sum(gets[n.port][0] for n in cluster6.primaries)
    on_replicas = sum(gets[n.port][0] for n in cluster6.replicas)
    # Nothing was redirected: every read went to a node that serves it.
    assert all(rej == 0 for _, rej in gets.values()), gets
    assert on_primaries + on_replicas == total, gets
    mget_parts = {"primaries": sum(mgets[n.port][0] for n in cluster6.primaries),
                  "replicas": sum(mgets[n.port][0] for n in cluster6.replicas)}
    if readers == "primaries":
        assert on_replicas == 0 and mget_parts["replicas"] == 0, gets
    elif readers == "replicas":
        assert on_primaries == 0 and mget_parts["primaries"] == 0, gets
        # Each replica served its own shard's keys.
        for r in cluster6.replicas:
            assert gets[r.port][0] == rounds * 4, gets
    else:
        # `any` takes turns between a shard's nodes.
        assert on_primaries > total // 4 and on_replicas > total // 4, gets
    # One MGET per slot (the proxy splits by slot).
    assert sum(mgets[n.port][0] for n in cluster6.nodes) == len({key_slot(k) for k in keys}), mgets
    # Writes ran on the primaries only, once each; no replica was even asked (it would have
    # redirected, which counts as a rejected call there).
    assert sum(sets[n.port][0] for n in cluster6.primaries) == len(keys), sets
    assert all(sets[n.port][1] == 0 for n in cluster6.nodes), sets


def test_with_the_cache_on_cacheable_reads_go_to_the_primary(cluster6):
    """With `proxy-cache yes`, a cacheable read (GET) goes to its primary whatever the read
    policy: the primary's tracking connection keeps the entry coherent (a write made directly
    on the primary is seen through the proxy), and repeated GETs are hits that reach no node.
    Reads the cache does not take (MGET) still follow the policy."""
    keys = keys_per_shard(cluster6, n=2, prefix="ch")
    with proxy_on(cluster6, "replica", "--proxy-cache", "yes") as p:
        populate(cluster6, p, keys)
        reset_stats(cluster6)
        c = p.client(protocol=2)
        for _ in range(3):
            for k in keys:
                assert c.get(k) == ("v-" + k).encode()
        assert c.mget(keys) == [("v-" + k).encode() for k in keys]
        gets = {n.port: cmdstat(n, "get")[0] for n in cluster6.nodes}
        mgets = {n.port: cmdstat(n, "mget")[0] for n in cluster6.nodes}
        # One miss per key, each on its primary; the other rounds were hits.
        assert sum(gets[n.port] for n in cluster6.primaries) == len(keys), gets
        assert sum(gets[n.port] for n in cluster6.replicas) == 0, gets
        assert sum(mgets[n.port] for n in cluster6.primaries) == 0, mgets
        # A write behind the proxy's back, on the primary: the cached entry is dropped.
        k = keys[0]
        assert cluster6.owner(k).client().set(k, "direct")
        wait_for(lambda: c.get(k) == b"direct", timeout=2, what="the invalidation of " + k)
        c.close()


def test_resp3_reads_follow_the_policy(cluster6):
    """A RESP3 client's reads travel on RESP3 backend connections (HELLO 3, then READONLY):
    they reach the replicas too, and come back as RESP3."""
    keys = keys_per_shard(cluster6, n=2, prefix="r3")
    with proxy_on(cluster6, "replica") as p:
        populate(cluster6, p, keys)
        reset_stats(cluster6)
        c = p.client(protocol=3)
        for k in keys:
            assert c.get(k) == ("v-" + k).encode()
        assert c.hgetall("r3:nohash") == {}
        c.close()
    assert sum(cmdstat(n, "get")[0] for n in cluster6.replicas) == len(keys)
    assert all(cmdstat(n, "get") == (0, 0) for n in cluster6.primaries)
    assert sum(cmdstat(n, "hgetall")[0] for n in cluster6.replicas) == 1


def test_transactions_and_watch_stay_on_the_primary(cluster6):
    key = "{txha}k"
    primary = cluster6.owner(key)
    replica = cluster6.replica_of[primary.port]
    with proxy_on(cluster6, "replica") as p:
        populate(cluster6, p, [key])
        reset_stats(cluster6)
        c = p.client()
        with c.pipeline(transaction=True) as tx:
            tx.get(key)
            tx.set(key, "2")
            assert tx.execute() == [("v-" + key).encode(), True]
        with c.pipeline(transaction=True) as tx:
            tx.watch(key)
            # After WATCH, a read of the watched slot travels with the transaction.
            assert tx.get(key) == b"2"
            tx.multi()
            tx.set(key, "3")
            assert tx.execute() == [True]
        # Outside a transaction the read goes to the replica again.
        primary.client().execute_command("WAIT", "1", "5000")
        assert c.get(key) == b"3"
        c.close()
    assert cmdstat(primary, "get") == (2, 0)
    assert cmdstat(replica, "get") == (1, 0)
    assert cmdstat(replica, "set")[1] == 0


def test_a_stalled_replica_s_reads_are_retried_on_the_primary(cluster6):
    """--op-timeout drops a replica that does not answer; the reads in flight on it go to the
    shard's primary, and the client never sees the stall as an error."""
    keys = keys_per_shard(cluster6, n=2, prefix="stall")
    with proxy_on(cluster6, "prefer-replica", "--threads", "1", "--op-timeout", "300") as p:
        populate(cluster6, p, keys)
        victim_shard = cluster6.owner(keys[0])
        victim = cluster6.replica_of[victim_shard.port]
        c = p.client()
        assert c.get(keys[0]) == ("v-" + keys[0]).encode()
        before = c.info("proxy")
        reset_stats(cluster6)
        # The replica stops answering its clients (the pause is in force once it says OK;
        # UNPAUSE, itself a client's command, runs when it ends).
        victim.client().execute_command("CLIENT", "PAUSE", "1500", "ALL")
        try:
            start = time.monotonic()
            assert c.get(keys[0]) == ("v-" + keys[0]).encode()
            took = time.monotonic() - start
        finally:
            victim.client().execute_command("CLIENT", "UNPAUSE")
        after = c.info("proxy")
        c.close()
    # INFO counts the one read sent again; one failure ejects no node.
    assert after["proxy_read_retries"] == before["proxy_read_retries"] + 1, after
    assert after["proxy_node_ejections"] == before["proxy_node_ejections"] == 0, after
    # Answered by the primary once the replica's connection timed out (not after the sleep).
    assert 0.25 < took < 1.2, took
    assert cmdstat(victim_shard, "get")[0] == 1


def test_with_the_cache_on_a_stalled_primary_s_cacheable_read_is_retried(cluster6):
    """A cache miss goes to the primary (its tracking keeps the entry coherent) with the PTTL
    that gives the entry its deadline queued behind it; when the primary stalls past
    --op-timeout, the read itself is retried on the shard's replica, as any read is."""
    key = keys_per_shard(cluster6, n=1, prefix="cstall")[0]
    with proxy_on(cluster6, "prefer-replica", "--threads", "1", "--op-timeout", "300",
                  "--proxy-cache", "yes") as p:
        populate(cluster6, p, [key])
        primary = cluster6.owner(key)
        replica = cluster6.replica_of[primary.port]
        c = p.client()
        before = c.info("proxy")
        reset_stats(cluster6)
        primary.client().execute_command("CLIENT", "PAUSE", "1500", "ALL")
        try:
            start = time.monotonic()
            assert c.get(key) == ("v-" + key).encode()
            took = time.monotonic() - start
        finally:
            primary.client().execute_command("CLIENT", "UNPAUSE")
        after = c.info("proxy")
        c.close()
    assert after["proxy_read_retries"] == before["proxy_read_retries"] + 1, after
    # Answered by the replica once the primary's connection timed out.
    assert 0.25 < took < 1.2, took
    assert cmdstat(replica, "get")[0] == 1


def test_no_retry_past_the_read_retry_deadline(cluster6):
    """With no time left for a retry, the stalled read fails with the upstream's reason."""
    key = keys_per_shard(cluster6, n=1, prefix="late")[0]
    victim = cluster6.replica_of[cluster6.owner(key).port]
    with proxy_on(cluster6, "prefer-replica", "--threads", "1", "--op-timeout", "300",
                  "--read-retry-deadline", "0") as p:
        populate(cluster6, p, [key])
        with p.raw() as c:
            assert c.call("GET", key).raw == ("$%d\r\nv-%s\r\n" % (len(key) + 2, key)).encode()
            victim.client().execute_command("CLIENT", "PAUSE", "1500", "ALL")
            try:
                reply = c.call("GET", key).raw
            finally:
                victim.client().execute_command("CLIENT", "UNPAUSE")
        assert reply == b"-ERR upstream 127.0.0.1:%d: timed out after 300 ms\r\n" % victim.port


class Load:
    """Threads reading (or writing) keys through the proxy in a loop, each on its own
    connection, recording every failure with its time."""

    def __init__(self, proxy, keys, write=False, threads=4):
        self.proxy, self.keys, self.write = proxy, keys, write
        self.stop_flag = threading.Event()
        self.failures = []
        self.ok = 0
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(i,)) for i in range(threads)]

    def run(self, i):
        c = self.proxy.client(socket_timeout=10)
        n = i
        while not self.stop_flag.is_set():
            k = self.keys[n % len(self.keys)]
            n += 1
            try:
                if self.write:
                    good = c.set(k, "x%d" % n)
                else:
                    good = c.get(k) == ("v-" + k).encode()
                err = None if good else "wrong answer"
            except redis.RedisError as e:
                err = "%s: %s" % (type(e).__name__, e)
                c.close()
            with self.lock:
                if err is None:
                    self.ok += 1
                else:
                    self.failures.append((time.monotonic(), k, err))
        c.close()

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop_flag.set()
        for t in self.threads:
            t.join(15)

    def count(self):
        with self.lock:
            return self.ok


def wait_more_ok(load, n, timeout=10.0):
    start = load.count()
    wait_for(lambda: load.count() >= start + n, timeout=timeout, what="%d more answers" % n)


def test_killing_a_replica_under_read_load_fails_no_read(fresh_cluster):
    cluster = fresh_cluster
    keys = keys_per_shard(cluster, n=8, prefix="kr")
    with proxy_on(cluster, "prefer-replica", "--op-timeout", "1000") as p:
        populate(cluster, p, keys)
        victim = cluster.replicas[0]
        its_primary = cluster.primaries[0]
        with Load(p, keys) as load:
            wait_more_ok(load, 300)
            victim.kill()
            wait_more_ok(load, 1500)
            reset_stats(cluster)
            wait_more_ok(load, 500)
            # The victim's shard is read from its primary now; the others from their replicas.
            assert cmdstat(its_primary, "get")[0] > 0
            for n in cluster.primaries[1:]:
                assert cmdstat(n, "get")[0] == 0
            # The replica comes back (same port and nodes.conf): once it answers the proxy's
            # probe and is in sync, it takes its shard's reads again.
            victim.fixed_port = victim.port
            victim.start()
            wait_for(lambda: cluster.settled([cluster.primaries[0], victim]), timeout=30,
                     what="the replica back online")
            reset_stats(cluster)
            # (Up to the probe backoff, which doubled with each failed probe meanwhile.)
            wait_for(lambda: cmdstat(victim, "get")[0] > 0, timeout=20,
                     what="reads on the restarted replica")
            wait_more_ok(load, 300)
            log = p.log_tail(100000)
            info = p.client().info("proxy")
        assert load.failures == [], load.failures[:5]
        # The dead replica was ejected rather than tried by every read, and taken back only
        # after it answered a probe.
        name = "127.0.0.1:%d" % victim.port
        assert "%s ejected from reads" % name in log, log
        assert "%s answered its probe" % name in log, log
        # INFO counted them: the reads that met the dead replica went to the primary, and the
        # replica was ejected and probed before it took reads again.
        assert info["proxy_read_retries"] >= 1, info
        assert info["proxy_node_ejections"] >= 1, info
        assert info["proxy_node_probes"] >= 1, info


def test_killing_a_primary_under_load(fresh_cluster):
    """Reads with prefer-replica never fail; writes fail only while the cluster fails over,
    then succeed again without a restart of the proxy or the clients."""
    cluster = fresh_cluster
    keys = keys_per_shard(cluster, n=8, prefix="kp")
    # Written apart from the read keys, whose values the readers check.
    write_keys = keys_per_shard(cluster, n=8, prefix="kpw")
    with proxy_on(cluster, "prefer-replica", "--op-timeout", "1000") as p:
        populate(cluster, p, keys)
        victim = cluster.primaries[0]
        heir = cluster.replica_of[victim.port]
        survivor = cluster.primaries[1]
        with Load(p, keys) as reads, Load(p, write_keys, write=True, threads=2) as writes:
            wait_more_ok(reads, 300)
            wait_more_ok(writes, 100)
            killed_at = time.monotonic()
            victim.kill()

            def promoted():
                shards, _ = shards_of(survivor)
                return heir.port in shards

            wait_for(promoted, timeout=30, what="the replica promoted")
            promoted_at = time.monotonic()
            # Writes come back within a topology refresh (1 s in these tests) or a failed
            # write's immediate refresh.
            wait_for(lambda: not writes.failures or
                     writes.failures[-1][0] < time.monotonic() - 1.5,
                     timeout=10, what="writes to stop failing")
            settled_at = time.monotonic()
            wait_more_ok(writes, 300)
            wait_more_ok(reads, 300)
        assert reads.failures == [], reads.failures[:5]
        late = [f for f in writes.failures if f[0] > settled_at]
        assert late == [], late[:5]
        # Write failures there were, if any, came between the kill and a little after the
        # promotion, and name the cause.
        for t, _, err in writes.failures:
            assert killed_at <= t <= promoted_at + 3, (t - killed_at, err)
            # (redis-py turns -CLUSTERDOWN into ClusterDownError.)
            assert "upstream" in err or err.startswith("ClusterDownError"), err
        # The heir serves its shard's writes.
        assert cmdstat(heir, "set")[0] > 0
    # The heir's shard has no replica left (its old primary is down): under `replica` its
    # reads are refused, the other shards' are served by their replicas.
    wait_for(lambda: shards_of(survivor)[1].get(victim.port) not in (None, "online"),
             what="the dead primary flagged on the survivor")
    heir_key = next(k for k in keys if cluster.owner(k).port == heir.port)
    other_key = next(k for k in keys if cluster.owner(k).port == survivor.port)
    with proxy_on(cluster, "replica") as p:
        c = p.client()
        assert c.get(other_key) == ("v-" + other_key).encode()
        c.close()
        with p.raw() as raw:
            assert raw.call("GET", heir_key).raw == (
                "-ERR no replica of slot %d's primary is online (read-policy replica, darner "
                "proxy)\r\n" % key_slot(heir_key)).encode()


def test_a_read_answered_tryagain_is_placed_again_by_the_policy(cluster6):
    """A split MGET (one slot, being migrated, one key already moved) that the primary answers
    -TRYAGAIN goes back through the read policy when its wait is over, not to the primary
    again: under `any` the shard's replica takes its turn and answers (a replica does not know
    of the migration and serves its copy, as it would have had the read gone there first),
    where a retry pinned to the primary would get TRYAGAIN until the last key moved."""
    from test_proxy_reshard import start_move
    src, dst = cluster6.primaries[0], cluster6.primaries[1]
    replica = cluster6.replica_of[src.port]
    i = 0
    while cluster6.owner("{ta%d}" % i) is not src:
        i += 1
    tag = "ta%d" % i
    slot = key_slot("{%s}" % tag)
    a, b = "{%s}:a" % tag, "{%s}:b" % tag
    with proxy_on(cluster6, "any") as p:
        c = p.client()
        c.mset({a: "1", b: "2"})
        start_move(slot, src, dst)
        try:
            src.client().execute_command("MIGRATE", "127.0.0.1", dst.port, "", 0, 5000,
                                         "KEYS", a)
            # The replica has the DEL that MIGRATE made.
            assert src.client().execute_command("WAIT", "1", "5000") == 1
            tries = c.info("proxy")["proxy_tryagain_retries"]
            calls = cmdstat(replica, "mget")[0]
            for _ in range(6):
                assert c.mget([a, b]) == [None, b"2"]
            # Every answer came from the replica, though the reads that the policy first sent
            # to the primary (every other one under `any`) were answered TRYAGAIN there.
            assert cmdstat(replica, "mget")[0] == calls + 6
            assert c.info("proxy")["proxy_tryagain_retries"] >= tries + 3
        finally:
            c.close()
            # Back as it was: the owner stops migrating, the key returns (from the node still
            # importing, which may MIGRATE it), and that node stops importing.
            src.client().execute_command("CLUSTER", "SETSLOT", slot, "STABLE")
            dst.client().execute_command("MIGRATE", "127.0.0.1", src.port, "", 0, 5000,
                                         "KEYS", a)
            dst.client().execute_command("CLUSTER", "SETSLOT", slot, "STABLE")


def test_a_tracking_client_is_told_to_flush_on_failover(fresh_cluster):
    """A RESP3 client tracking through the proxy: the connection to a primary that dies takes
    its tracking with it, so the client gets the null invalidation (flush everything); once
    the replica is promoted its reads are tracked there, and a write reaches it as a push."""
    from resp_reader import RawConn
    cluster = fresh_cluster
    victim = cluster.primaries[0]
    heir = cluster.replica_of[victim.port]
    survivor = cluster.primaries[1]
    key = next(k for k in keys_per_shard(cluster, n=1, prefix="tf")
               if cluster.owner(k) is victim)
    null = b">2\r\n$10\r\ninvalidate\r\n_\r\n"
    mine = b">2\r\n$10\r\ninvalidate\r\n*1\r\n$%d\r\n%s\r\n" % (len(key), key.encode())
    with proxy_on(cluster, "master", "--threads", "1") as p:
        t = RawConn(port=p.port)
        pushes = []

        def call(*cmd):
            """The reply to `cmd`; the pushes that come first are kept apart."""
            t.send(*cmd)
            while True:
                r = t.read_reply(10)
                if r.kind != ">":
                    return r
                pushes.append(r.raw)

        assert call("HELLO", "3").kind == "%"
        assert call("CLIENT", "TRACKING", "on").raw == b"+OK\r\n"
        w = p.client()
        w.set(key, "1")
        assert victim.client().execute_command("WAIT", "1", "5000") == 1
        assert call("GET", key).raw == b"$1\r\n1\r\n"
        victim.kill()
        r = t.read_reply(10)
        assert r.raw == null, r

        def promoted():
            shards, _ = shards_of(survivor)
            return heir.port in shards

        wait_for(promoted, timeout=30, what="the replica promoted")
        wait_for(lambda: call("GET", key).raw == b"$1\r\n1\r\n", timeout=15,
                 what="reads served by the heir")
        del pushes[:]
        def written():
            try:
                return w.set(key, "2")
            except redis.RedisError:
                return False

        wait_for(written, timeout=15, what="writes served by the heir")
        deadline = time.monotonic() + 5
        while mine not in pushes:
            assert time.monotonic() < deadline, pushes
            pushes.append(t.read_reply(5).raw)
        assert set(pushes) <= {mine, null}, pushes
        w.close()
        t.sock.close()
