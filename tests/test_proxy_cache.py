"""darner-proxy's shared client cache (`proxy-cache yes`) against a real Redis Cluster (three
primaries of Debian's redis-server, made with `redis-cli --cluster create`).

Whether a read reached a node is read from that node's own INFO commandstats; coherence is
checked by writing to the nodes directly (behind the proxy's back), through the proxy, and from
concurrent writers, and by flushing and restarting a node.

The proxy runs one thread here, but for the tests of the cache's sharing between threads (a
second proxy with two threads, `proxy2`): one cache serves every thread, filled once.
"""

from __future__ import annotations

import threading
import time
import urllib.request

import pytest
import redis

import harness
from harness import HarnessError
from keyslot import key_slot
from resp_reader import RawConn
from test_proxy import ProxyServer, cluster, owner, wait_for  # noqa: F401 (fixture)

# How long an invalidation may take to reach the proxy over loopback: generous, for a loaded
# CI machine; on an idle one it is well under a millisecond.
INVALIDATION_BOUND = 2.0


def start_proxy(cluster, *extra, threads=1):
    p = ProxyServer(["127.0.0.1:%d" % cluster[0].port],
                    ["--threads", str(threads), "--proxy-cache", "yes", *extra])
    try:
        p.start()
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)
    return p


@pytest.fixture(scope="module")
def proxy(cluster):
    p = start_proxy(cluster)
    yield p
    p.stop()


@pytest.fixture(scope="module")
def proxy2(cluster):
    p = start_proxy(cluster, threads=2)
    yield p
    p.stop()


def client_on(proxy, thread, threads=2, protocol=3):
    """A client of `proxy` served by its thread `thread` (the proxy numbers clients so that
    client id - 1 is the thread modulo the thread count); the others opened meanwhile are
    closed."""
    for _ in range(64):
        c = proxy.client(protocol=protocol)
        if (c.client_id() - 1) % threads == thread:
            return c
        c.close()
    pytest.fail("no connection landed on thread %d in 64 tries" % thread)


@pytest.fixture
def r3(proxy, cluster):
    """A RESP3 client: its reads travel on the tracking connections, so they fill the cache."""
    c = proxy.client(protocol=3)
    c.flushall()
    yield c
    c.close()


@pytest.fixture
def r2(proxy):
    """A RESP2 client (redis-py speaks RESP3 unless told)."""
    c = proxy.client(protocol=2)
    yield c
    c.close()


def calls(node, cmd):
    stats = node.client().info("commandstats")
    return stats.get("cmdstat_%s" % cmd, {}).get("calls", 0)


def proxy_stats(client):
    return {k: v for k, v in client.info("proxy").items() if k.startswith("cache_")}


def test_hits_are_served_without_reaching_the_node(r3, r2, cluster):
    r3.set("c:k", "v1")
    node = owner(cluster, "c:k")
    before = calls(node, "get")
    stats = proxy_stats(r3)
    assert r3.get("c:k") == b"v1"
    for _ in range(50):
        assert r3.get("c:k") == b"v1"
    # A RESP2 client reads the same entry.
    for _ in range(10):
        assert r2.get("c:k") == b"v1"
    assert calls(node, "get") == before + 1
    after = proxy_stats(r3)
    assert after["cache_hits"] - stats["cache_hits"] == 60
    assert after["cache_misses"] - stats["cache_misses"] == 1


def test_other_commands_and_missing_keys(r3, r2, cluster):
    r3.hset("c:h", mapping={"a": "1", "b": "22"})
    r3.set("c:s", "hello")
    r3.sadd("c:set", "x", "y")
    reads = [
        ("hget", ("c:h", "a"), b"1"),
        ("hlen", ("c:h",), 2),
        ("hexists", ("c:h", "b"), True),
        ("hstrlen", ("c:h", "b"), 2),
        ("strlen", ("c:s",), 5),
        ("getrange", ("c:s", 1, 3), b"ell"),
        ("exists", ("c:s",), 1),
        ("scard", ("c:set",), 2),
        ("sismember", ("c:set", "y"), True),
        ("get", ("c:missing",), None),
        ("hget", ("c:h", "zz"), None),
    ]
    for cmd, args, want in reads:
        node = owner(cluster, args[0])
        before = calls(node, cmd)
        for _ in range(3):
            assert getattr(r3, cmd)(*args) == want, cmd
        # The null a RESP3 connection read is a RESP2 null for a RESP2 client.
        assert getattr(r2, cmd)(*args) == want, cmd
        assert calls(node, cmd) == before + 1, cmd
    # Not cacheable (a second key, a side effect): every call reaches the node.
    node = owner(cluster, "c:s")
    before = calls(node, "getex")
    for _ in range(3):
        assert r3.getex("c:s") == b"hello"
    assert calls(node, "getex") == before + 3
    # An error is not cached.
    node = owner(cluster, "c:h")
    before = calls(node, "get")
    for _ in range(2):
        with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
            r3.get("c:h")
    assert calls(node, "get") == before + 2


def test_resp2_clients_fill_it_too(r2, proxy, cluster):
    r2.delete("c:two", "c:two:missing")
    r2.set("c:two", "v0")
    node = owner(cluster, "c:two")
    before = calls(node, "get")
    for _ in range(5):
        assert r2.get("c:two") == b"v0"
        assert r2.get("c:two:missing") is None
    assert calls(node, "get") == before + 2
    # A read made in RESP2 is answered in RESP2, though it is read on a RESP3 connection and a
    # HELLO 3 follows it.
    with proxy.raw() as c:
        c.send_many([("GET", "c:two:never"), ("HELLO", "3"), ("GET", "c:two:never")])
        replies = c.read_replies(3)
        assert replies[0].raw == b"$-1\r\n"
        assert replies[2].raw == b"_\r\n"
    # Pipelined reads fill too (on the tracking connections, back to back).
    keys = ["c:two:%d" % i for i in range(30)]
    for k in keys:
        r2.set(k, k)
    before = sum(calls(n, "get") for n in cluster)
    for _ in range(3):
        p = r2.pipeline(transaction=False)
        for k in keys:
            p.get(k)
        assert p.execute() == [k.encode() for k in keys]
    assert sum(calls(n, "get") for n in cluster) == before + len(keys)
    # A pipeline's requests keep their order though the reads that fill travel on other
    # backend connections than the writes between them.
    for i in range(300):
        p = r2.pipeline(transaction=False)
        p.get("c:two").set("c:two", "v%d" % (i + 1)).get("c:two").get("c:two")
        assert p.execute() == [b"v%d" % i, True, b"v%d" % (i + 1), b"v%d" % (i + 1)]


def test_a_direct_write_to_the_node_invalidates(r3, cluster):
    for i in range(20):
        key = "c:direct:%d" % i
        r3.set(key, "old")
        assert r3.get(key) == b"old"
        assert r3.get(key) == b"old"
        node = owner(cluster, key)
        node.client().set(key, "new")
        start = time.monotonic()
        while r3.get(key) != b"new":
            assert time.monotonic() - start < INVALIDATION_BOUND, "stale after the direct write"
            time.sleep(0.001)
        # Cached again once read.
        before = calls(node, "get")
        assert r3.get(key) == b"new"
        assert r3.get(key) == b"new"
        assert calls(node, "get") <= before + 1
        # A direct DEL and an expiry are changes too.
        node.client().delete(key)
        wait_for(lambda: r3.get(key) is None, INVALIDATION_BOUND, "DEL seen")
    r3.set("c:ttl", "v", px=100)
    assert r3.get("c:ttl") == b"v"
    # The node expires it (actively, within its cycles) and tracking reports it.
    wait_for(lambda: r3.get("c:ttl") is None, 5.0, "expiry seen")


def keys_on(node):
    """The node's key count (INFO keyspace): it counts keys past their TTL until the node
    deletes them, and reading it deletes nothing."""
    return node.client().info("keyspace").get("db0", {}).get("keys", 0)


def test_a_key_past_its_ttl_is_a_miss_before_the_node_deletes_it(r3, r2, cluster):
    key = "c:ttl:lazy"
    node = owner(cluster, key)
    direct = node.client()
    # The node deletes expired keys only on access: the proxy must stop serving the key at
    # its TTL by itself, as a client of the node would see it gone.
    direct.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    try:
        for ttl_ms in (1500, 300):
            r3.set(key, "v")
            assert r3.get(key) == b"v"  # cached without a TTL
            r3.pexpire(key, ttl_ms)  # a write: drops the entry
            start = time.monotonic()
            before = calls(node, "get")
            assert r3.get(key) == b"v"  # fills again, with the TTL
            assert r3.get(key) == b"v"
            assert r2.get(key) == b"v"
            # The two hits came before the TTL ran out (generous on a slow machine)...
            assert time.monotonic() - start < ttl_ms / 1000
            assert calls(node, "get") == before + 1, "hits served from the cache"
            keys = keys_on(node)
            time.sleep(ttl_ms / 1000 + 0.05)
            # ...and now the key is past it, still in the node's keyspace...
            assert keys_on(node) == keys
            # ...but a miss for the proxy's clients, in either protocol.
            assert r2.get(key) is None
            assert r3.get(key) is None
            # (The first read's fill is dropped: its read expired the key, whose invalidation
            # the node sends right after it, before the PTTL's reply.)
            assert calls(node, "get") >= before + 2, "the expired entry was not served"
            assert keys_on(node) == keys - 1, "the node deleted it on the proxy's read"
        # A hash's entry (several requests) expires alike.
        r3.hset("c:ttl:h", "f", "1")
        r3.pexpire("c:ttl:h", 300)
        assert r3.hget("c:ttl:h", "f") == b"1"
        assert r3.hlen("c:ttl:h") == 1
        time.sleep(0.35)
        assert r3.hlen("c:ttl:h") == 0
        assert r3.hget("c:ttl:h", "f") is None
    finally:
        direct.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("protocol", [2, 3])
def test_a_client_reads_its_own_writes(request, cluster, protocol, threads):
    proxy = request.getfixturevalue("proxy" if threads == 1 else "proxy2")
    c = proxy.client(protocol=protocol)
    other = proxy.client(protocol=3)
    c.delete("c:ryw")
    try:
        for i in range(200):
            # Another connection keeps the key cached.
            assert other.get("c:ryw") in (None, str(i - 1).encode())
            c.set("c:ryw", i)
            assert c.get("c:ryw") == str(i).encode(), i
        # Pipelined: the GET after the SET in one batch.
        for i in range(50):
            other.get("c:ryw")
            p = c.pipeline(transaction=False)
            p.set("c:ryw", "p%d" % i).get("c:ryw").incr("c:ctr").get("c:ctr")
            res = p.execute()
            assert res[1] == b"p%d" % i and res[3] == str(res[2]).encode()
        # Writes the proxy cannot key (a transaction, a script) flush the cache.
        other.get("c:ryw")
        p = c.pipeline(transaction=True)
        p.set("c:ryw", "tx")
        p.execute()
        assert c.get("c:ryw") == b"tx"
        other.get("c:ryw")
        c.eval("redis.call('SET', KEYS[1], 'lua')", 1, "c:ryw")
        assert c.get("c:ryw") == b"lua"
        assert other.get("c:ryw") == b"lua"
    finally:
        c.close()
        other.close()


@pytest.mark.parametrize("threads", [1, 2])
def test_concurrent_writers_never_make_a_reader_go_back(request, cluster, threads):
    proxy = request.getfixturevalue("proxy" if threads == 1 else "proxy2")
    keys = ["c:mono:%d" % i for i in range(4)]
    setup = proxy.client()
    for k in keys:
        setup.set(k, 0)
    setup.close()
    stop = threading.Event()
    errors = []

    def writer(direct, idx):
        try:
            conns = {}
            for k in keys:
                conns[k] = (owner(cluster, k).client() if direct
                            else proxy.client(protocol=2))
            n = 0
            while not stop.is_set():
                k = keys[(n + idx) % len(keys)]
                conns[k].incr(k)
                n += 1
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append("writer: %r" % e)

    def reader(protocol):
        try:
            c = proxy.client(protocol=protocol)
            seen = {k: 0 for k in keys}
            reads = 0
            while not stop.is_set():
                for k in keys:
                    v = int(c.get(k))
                    if v < seen[k]:
                        errors.append("%s went back from %d to %d" % (k, seen[k], v))
                        return
                    seen[k] = v
                    reads += 1
            c.close()
        except Exception as e:  # noqa: BLE001
            errors.append("reader: %r" % e)

    threads = ([threading.Thread(target=writer, args=(True, i)) for i in range(2)]
               + [threading.Thread(target=writer, args=(False, 2))]
               + [threading.Thread(target=reader, args=(p,)) for p in (3, 3, 2)])
    for t in threads:
        t.start()
    time.sleep(2.0)
    stop.set()
    for t in threads:
        t.join(10)
    assert not errors, errors
    # Quiet now: every reader converges on the final values.
    c = proxy.client(protocol=3)
    for k in keys:
        final = int(owner(cluster, k).client().get(k))
        wait_for(lambda: int(c.get(k)) == final, INVALIDATION_BOUND, "final value of %s" % k)
    stats = proxy_stats(c)
    c.close()
    assert stats["cache_hits"] > 0 and stats["cache_invalidations"] > 0


def test_flushing_a_node_invalidates(r3, cluster):
    key = "c:flush"
    r3.set(key, "v")
    assert r3.get(key) == b"v"
    node = owner(cluster, key)
    before = calls(node, "get")
    assert r3.get(key) == b"v"
    assert calls(node, "get") == before
    node.client().flushall()
    wait_for(lambda: r3.get(key) is None, INVALIDATION_BOUND, "the flush seen")


def test_eviction_keeps_the_bound(cluster):
    mport = harness.free_port()
    p = start_proxy(cluster, "--proxy-cache-max-memory", "64kb",
                    "--metrics-listen", "127.0.0.1:%d" % mport)
    try:
        c = p.client(protocol=3)
        value = "x" * 1000
        keys = ["c:ev:%d" % i for i in range(300)]
        for k in keys:
            c.set(k, value)
        for k in keys:
            assert c.get(k) == value.encode()
        stats = proxy_stats(c)
        # 300 entries of about 1 KB do not fit in 64 KB.
        assert stats["cache_evictions"] >= 200
        # The first keys were evicted: reading them reaches a node again.
        total = lambda: sum(calls(n, "get") for n in cluster)  # noqa: E731
        before = total()
        for k in keys[:20]:
            assert c.get(k) == value.encode()
        assert total() - before >= 15
        # The same counters on the Prometheus endpoint.
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % mport, timeout=5) as resp:
            text = resp.read().decode()
        metrics = dict(line.rsplit(" ", 1) for line in text.splitlines()
                       if line.startswith("darner_proxy_cache_"))
        stats = proxy_stats(c)
        assert int(metrics["darner_proxy_cache_evictions_total"]) == stats["cache_evictions"]
        assert int(metrics["darner_proxy_cache_hits_total"]) == stats["cache_hits"]
        c.close()
    finally:
        p.stop()


def test_a_slot_moving_to_another_node(r3, cluster):
    """Cached keys whose slot moves (IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE): a write on the
    new owner, which never saw the proxy's reads, is still seen, and the new owner's entries
    are kept coherent in turn."""
    keys = ["{c:moving}%d" % i for i in range(5)]
    key = keys[0]
    slot = key_slot(key)
    src = owner(cluster, key)
    dst = next(n for n in cluster if n.port != src.port)
    sc, dc = src.client(), dst.client()
    src_id, dst_id = sc.execute_command("CLUSTER", "MYID"), dc.execute_command("CLUSTER", "MYID")
    for k in keys:
        r3.set(k, "before")
        assert r3.get(k) == b"before"
        assert r3.get(k) == b"before"
    dc.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
    sc.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
    sc.execute_command("MIGRATE", "127.0.0.1", dst.port, "", 0, 5000, "KEYS", *keys)
    for n in cluster:
        n.client().execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
    for k in keys:
        dc.set(k, "moved")
    for k in keys:
        wait_for(lambda: r3.get(k) == b"moved", INVALIDATION_BOUND, "%s from the new owner" % k)
    before = calls(dst, "get")
    assert r3.get(key) == b"moved"
    assert r3.get(key) == b"moved"
    assert calls(dst, "get") <= before + 1
    dc.set(key, "again")
    wait_for(lambda: r3.get(key) == b"again", INVALIDATION_BOUND, "the new owner's write")


def test_a_node_restart_invalidates(r3, cluster):
    # Last: it restarts a node of the module's cluster.
    key = "c:restart"
    r3.set(key, "before")
    assert r3.get(key) == b"before"
    node = owner(cluster, key)
    before = calls(node, "get")
    assert r3.get(key) == b"before"
    assert calls(node, "get") == before
    node.stop(cleanup=False)
    node.fixed_port = node.port
    node.start()
    # Saving is off: it comes back empty, with its cluster configuration.

    def formed():
        info = node.client().execute_command("CLUSTER", "INFO")
        ok = (info.get("cluster_state") == "ok" if isinstance(info, dict)
              else b"cluster_state:ok" in info)
        return ok
    wait_for(formed, what="the restarted node back in the cluster")

    def gone():
        try:
            return r3.get(key) is None
        except redis.ResponseError:
            return False  # the proxy's connection to the node was lost with it
    wait_for(gone, 10.0, "the restart seen")


def test_one_fill_serves_every_thread(proxy2, cluster):
    a, b = client_on(proxy2, 0), client_on(proxy2, 1)
    try:
        a.set("c:shared", "v1")
        node = owner(cluster, "c:shared")
        before = calls(node, "get")
        hits = proxy_stats(a)["cache_hits"]
        assert a.get("c:shared") == b"v1"
        # Read on the other thread: no second fill.
        for _ in range(20):
            assert b.get("c:shared") == b"v1"
        assert calls(node, "get") == before + 1
        assert proxy_stats(b)["cache_hits"] >= hits + 20
        # A direct write reaches the thread whose connection filled the entry; the other
        # thread's readers see it as soon.
        node.client().set("c:shared", "v2")
        wait_for(lambda: b.get("c:shared") == b"v2", INVALIDATION_BOUND, "direct write seen")
        # A write through one thread, read at once on the other.
        assert a.get("c:shared") == b"v2"
        for i in range(100):
            a.set("c:shared", "w%d" % i)
            assert b.get("c:shared") == b"w%d" % i, i
            assert a.get("c:shared") == b"w%d" % i, i
    finally:
        a.close()
        b.close()


def test_a_tracking_client_is_told_of_what_another_thread_filled(proxy2, cluster):
    """A tracking client hears of keys through its own thread's connection: a read of an entry
    another thread filled goes to the node, so that its change is reported to the client."""
    filler = client_on(proxy2, 0)
    tracked = None
    try:
        filler.set("c:tr", "v1")
        assert filler.get("c:tr") == b"v1"
        node = owner(cluster, "c:tr")
        for _ in range(64):
            tracked = RawConn(port=proxy2.port)
            if (tracked.call("CLIENT", "ID").value - 1) % 2 == 1:
                break
            tracked.sock.close()
        assert tracked.call("HELLO", "3").kind == "%"
        assert tracked.call("CLIENT", "TRACKING", "on").raw == b"+OK\r\n"
        before = calls(node, "get")
        assert tracked.call("GET", "c:tr").raw == b"$2\r\nv1\r\n"
        assert calls(node, "get") == before + 1, "read on the tracking client's own thread"
        node.client().set("c:tr", "v2")
        r = tracked.read_reply(INVALIDATION_BOUND)
        assert r.raw == b">2\r\n$10\r\ninvalidate\r\n*1\r\n$4\r\nc:tr\r\n", r
        # Its own thread's connection read it now: the reads after the fill's PTTL hit.
        hits = proxy_stats(filler)["cache_hits"]
        for _ in range(10):
            assert tracked.call("GET", "c:tr").raw == b"$2\r\nv2\r\n"
        assert proxy_stats(filler)["cache_hits"] >= hits + 8
    finally:
        filler.close()
        if tracked is not None:
            tracked.sock.close()


# Joined misses: a cacheable read that misses while a fill of the same request is in flight
# waits for that fill's reply instead of reading the key itself. The node is held asleep
# (DEBUG SLEEP on a connection of its own) so that the fill stays in flight while the other
# reads arrive: what they are answered with and how many GETs the node ran are then exact.

SLEEP = 1.5


def asleep(node):
    """`node` blocked for SLEEP seconds; its connection, whose +OK comes when it wakes."""
    s = RawConn(port=node.port)
    s.send("DEBUG", "SLEEP", SLEEP)
    time.sleep(0.1)
    return s


def proxy_counter(client, name):
    if name.startswith("cmdstat_"):
        return client.info("commandstats").get(name, {}).get("calls", 0)
    return proxy_stats(client)[name]


def counted(client, name, before, what):
    """Waits until the proxy's counter `name` passed `before` (counted when the request was
    planned: its fill, if any, is then queued on the node's connection)."""
    wait_for(lambda: proxy_counter(client, name) > before, SLEEP / 3, what)


def raw_on(proxy, thread, threads, protocol):
    for _ in range(64):
        c = RawConn(port=proxy.port)
        if (c.call("CLIENT", "ID").value - 1) % threads == thread:
            if protocol == 3:
                assert c.call("HELLO", "3").kind == "%"
            return c
        c.sock.close()
    pytest.fail("no connection landed on thread %d in 64 tries" % thread)


@pytest.mark.parametrize("value", [b"v1", None])
def test_concurrent_misses_of_a_key_join_one_fill(proxy2, cluster, value):
    """Readers on both threads, in both protocols, miss on a key while its fill is in flight:
    the node runs one GET, and each reader gets the fill's reply in its protocol."""
    key = "c:join:%s" % ("set" if value else "none")
    setup = proxy2.client(protocol=3)
    conns = []
    try:
        if value:
            setup.set(key, value)
        else:
            setup.delete(key)
        conns = [raw_on(proxy2, i % 2, 2, 3 if i % 4 < 2 else 2) for i in range(8)]
        node = owner(cluster, key)
        gets, stats = calls(node, "get"), proxy_stats(setup)
        sleeper = asleep(node)
        conns[0].send("GET", key)
        counted(setup, "cache_misses", stats["cache_misses"], "the fill sent")
        for c in conns[1:]:
            c.send("GET", key)
        for i, c in enumerate(conns):
            resp3 = i % 4 < 2
            want = (b"$2\r\nv1\r\n" if value else b"_\r\n" if resp3 else b"$-1\r\n")
            assert c.read_reply(SLEEP + 5).raw == want, i
        assert sleeper.read_reply(5).raw == b"+OK\r\n"
        sleeper.sock.close()
        assert calls(node, "get") == gets + 1
        after = proxy_stats(setup)
        assert after["cache_joins"] - stats["cache_joins"] == 7
        assert after["cache_misses"] - stats["cache_misses"] == 1
        assert after["cache_hits"] - stats["cache_hits"] == 7
    finally:
        setup.close()
        for c in conns:
            c.sock.close()


def test_a_write_after_the_fill_is_sent_keeps_later_misses_off_it(proxy, cluster):
    """A write through the proxy planned after a fill was sent: the fill may have read before
    it, so a miss after the write does not take the fill's reply, and one that joined before
    it is sent to the node again, behind the write."""
    key = "c:join:w"
    setup = proxy.client(protocol=3)
    a, b, c, d = (raw_on(proxy, 0, 1, p) for p in (3, 3, 2, 3))
    try:
        setup.set(key, "v1")
        node = owner(cluster, key)
        gets, stats = calls(node, "get"), proxy_stats(setup)
        sets = proxy_counter(setup, "cmdstat_set")
        sleeper = asleep(node)
        a.send("GET", key)
        counted(setup, "cache_misses", stats["cache_misses"], "the fill sent")
        d.send("GET", key)
        time.sleep(0.05)
        b.send("SET", key, "v2")
        counted(setup, "cmdstat_set", sets, "the SET planned")
        c.send("GET", key)
        # One thread, one connection to the node: the fill ran before the SET, and the GETs
        # sent after it (c's, and d's again) after it.
        assert a.read_reply(SLEEP + 5).raw == b"$2\r\nv1\r\n"
        assert b.read_reply(5).raw == b"+OK\r\n"
        assert c.read_reply(5).raw == b"$2\r\nv2\r\n"
        assert d.read_reply(5).raw == b"$2\r\nv2\r\n"
        assert sleeper.read_reply(5).raw == b"+OK\r\n"
        sleeper.sock.close()
        assert calls(node, "get") == gets + 3
        assert proxy_stats(setup)["cache_joins"] == stats["cache_joins"]
        # A client's own write, then its read, in one pipeline: never joined.
        setup.set(key, "v2")  # d's read may have cached it: a's read must miss
        sleeper = asleep(node)
        stats = proxy_stats(setup)
        a.send("GET", key)
        counted(setup, "cache_misses", stats["cache_misses"], "the fill sent")
        b.send_many([("SET", key, "v3"), ("GET", key)])
        assert a.read_reply(SLEEP + 5).raw == b"$2\r\nv2\r\n"
        assert [r.raw for r in b.read_replies(2, 5)] == [b"+OK\r\n", b"$2\r\nv3\r\n"]
        assert sleeper.read_reply(5).raw == b"+OK\r\n"
        sleeper.sock.close()
        assert proxy_stats(setup)["cache_joins"] == stats["cache_joins"]
    finally:
        setup.close()
        for x in (a, b, c, d):
            x.sock.close()


@pytest.mark.parametrize("protocol", [2, 3])
def test_a_joined_read_keeps_its_place_in_the_pipeline(proxy, cluster, protocol):
    """What a client pipelines after a joined read waits for it: its replies come in order,
    and its write of the key runs after the read it follows."""
    key, other = "c:join:p", "c:join:p2"
    setup = proxy.client(protocol=3)
    a, c = raw_on(proxy, 0, 1, 3), raw_on(proxy, 0, 1, protocol)
    try:
        setup.set(key, "v1")
        setup.set(other, "o1")
        node = owner(cluster, key)
        stats = proxy_stats(setup)
        sleeper = asleep(node)
        a.send("GET", key)
        counted(setup, "cache_misses", stats["cache_misses"], "the fill sent")
        c.send_many([("GET", key), ("SET", other, "o2"), ("GET", other), ("GET", key)])
        assert a.read_reply(SLEEP + 5).raw == b"$2\r\nv1\r\n"
        assert [r.raw for r in c.read_replies(4, 5)] == [
            b"$2\r\nv1\r\n", b"+OK\r\n", b"$2\r\no2\r\n", b"$2\r\nv1\r\n"]
        assert sleeper.read_reply(5).raw == b"+OK\r\n"
        sleeper.sock.close()
        assert proxy_stats(setup)["cache_joins"] - stats["cache_joins"] == 1
        # Its write of the key drops the fill it joined (which may read after the write):
        # the read goes to the node again, ahead of the write.
        setup.delete(key)
        stats = proxy_stats(setup)
        sleeper = asleep(node)
        a.send("GET", key)
        counted(setup, "cache_misses", stats["cache_misses"], "the fill sent")
        c.send_many([("GET", key), ("SET", key, "v2"), ("GET", key)])
        null = b"_\r\n" if protocol == 3 else b"$-1\r\n"
        assert a.read_reply(SLEEP + 5).raw == b"_\r\n"
        assert [r.raw for r in c.read_replies(3, 5)] == [null, b"+OK\r\n", b"$2\r\nv2\r\n"]
        assert sleeper.read_reply(5).raw == b"+OK\r\n"
        sleeper.sock.close()
        assert proxy_stats(setup)["cache_joins"] == stats["cache_joins"]
    finally:
        setup.close()
        a.sock.close()
        c.sock.close()
