"""darner-proxy in front of a real Redis Cluster: three primaries of Debian's redis-server
(`--cluster-enabled yes`, made with `redis-cli --cluster create`), the proxy next to
DARNER_BIN, and redis-py talking to the proxy as to one node (and as RedisCluster).

Error texts the proxy writes itself are compared with what a cluster node says for the same
request; routing is checked by asking the owning node directly where the keys went.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from contextlib import contextmanager

import pytest
import redis

import harness
from harness import HarnessError, Server
from keyslot import key_slot


def proxy_bin() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(harness.darner_bin())), "darner-proxy")


class ProxyServer(Server):
    """darner-proxy on a free loopback port (the harness's Server, with the proxy's options)."""

    def __init__(self, seeds, extra=()):
        super().__init__(proxy_bin(), list(extra), name="darner-proxy")
        self.seeds = seeds

    def build_cmdline(self, port):
        return [self.binary, "--listen", "127.0.0.1:%d" % port, "--cluster", ",".join(self.seeds),
                "--threads", "2", "--cluster-refresh-interval", "1000"] + self.user_args


def wait_for(pred, timeout=15.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting for %s" % what)


def proxy_tests_can_run():
    """Skips (or fails) the calling test where the proxy cannot be tested; returns the
    redis-server binary the clusters are made of."""
    if harness.darner_is_redis():
        pytest.skip("the proxy is darner's; nothing to validate against redis-server")
    if not os.access(proxy_bin(), os.X_OK):
        # `cargo build --release` builds it next to darner: missing means the build broke.
        pytest.fail("darner-proxy not found next to DARNER_BIN (%s)" % proxy_bin(), pytrace=False)
    binary = harness.redis_server_bin()
    if not binary:
        pytest.skip("redis-server not installed")
    return binary


@contextmanager
def redis_cluster(primaries=3, password=None):
    """A Redis Cluster of `primaries` nodes of Debian's redis-server (made with `redis-cli
    --cluster create`, every node with `requirepass` when `password` is given), stopped on
    exit; yields the nodes once every node says cluster_state:ok and sees every shard."""
    binary = proxy_tests_can_run()
    auth = ["--requirepass", password, "--masterauth", password] if password else []
    cli_auth = ["-a", password, "--no-auth-warning"] if password else []
    nodes = []
    try:
        for _ in range(primaries):
            nodes.append(Server(binary, ["--cluster-enabled", "yes", "--cluster-config-file",
                                         "nodes.conf", "--cluster-node-timeout", "15000", *auth],
                                is_redis=True, name="cluster-node", auth=password).start())
        addrs = ["127.0.0.1:%d" % n.port for n in nodes]
        out = subprocess.run(["redis-cli", *cli_auth, "--cluster", "create", *addrs,
                              "--cluster-replicas", "0", "--cluster-yes"],
                             capture_output=True, timeout=30)
        assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()
        clients = [n.client() for n in nodes]

        def formed():
            for c in clients:
                info = c.execute_command("CLUSTER", "INFO")
                ok = (info.get("cluster_state") == "ok" if isinstance(info, dict)
                      else b"cluster_state:ok" in info)
                if not ok or len(c.execute_command("CLUSTER", "SLOTS")) != primaries:
                    return False
            return True
        wait_for(formed, what="cluster_state:ok on every node")
        yield nodes
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)
    finally:
        for n in nodes:
            n.stop()


@pytest.fixture(scope="module")
def cluster():
    with redis_cluster() as nodes:
        yield nodes


@pytest.fixture(scope="module")
def proxy(cluster):
    p = ProxyServer(["127.0.0.1:%d" % cluster[0].port])
    try:
        p.start()
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)
    yield p
    p.stop()


@pytest.fixture
def r(proxy, cluster):
    c = proxy.client()
    c.flushall()
    yield c
    c.close()


def owner(cluster, key):
    """The node whose CLUSTER SLOTS range holds the key's slot, asked of node 0."""
    slot = key_slot(key)
    for start, end, primary, *_ in cluster[0].client().execute_command("CLUSTER", "SLOTS"):
        if start <= slot <= end:
            port = primary[1]
            return next(n for n in cluster if n.port == port)
    raise AssertionError("slot %d not served" % slot)


def keys_on_distinct_nodes(cluster, prefix="k"):
    """One key per primary."""
    found = {}
    i = 0
    while len(found) < len(cluster):
        k = "%s%d" % (prefix, i)
        found.setdefault(owner(cluster, k).port, k)
        i += 1
    return list(found.values())


def error_text(server, *args):
    """The exact error line a server answers (redis-py would strip some error codes)."""
    with server.raw() as c:
        reply = c.call(*args).raw
    assert reply.startswith(b"-"), reply
    return reply.decode()


def test_set_get_across_slots_land_on_their_owner(r, cluster):
    keys = ["key:%d" % i for i in range(60)]
    for k in keys:
        assert r.set(k, k.upper())
    for k in keys:
        assert r.get(k) == k.upper().encode()
        # Stored on the node that owns the key's slot, and only there.
        assert owner(cluster, k).client().get(k) == k.upper().encode()
    assert len({owner(cluster, k).port for k in keys}) == 3
    assert r.dbsize() == 60
    assert sorted(r.keys("key:*")) == sorted(k.encode() for k in keys)


def test_mget_mset_del_split_and_merged_in_order(r, cluster):
    a, b, c = keys_on_distinct_nodes(cluster)
    assert r.mset({a: "1", b: "2", c: "3"})
    assert r.mget([c, "missing", a, b, a]) == [b"3", None, b"1", b"2", b"1"]
    assert r.exists(a, b, c, "missing", a) == 4
    assert r.touch(a, b, "missing") == 2
    assert r.delete(a, b, "missing") == 2
    assert r.unlink(c, c) == 1
    assert r.mget([a, b, c]) == [None, None, None]
    for k in (a, b, c):
        assert owner(cluster, k).client().exists(k) == 0


def test_split_errors_are_the_clients(r, proxy, cluster):
    a, b, c = keys_on_distinct_nodes(cluster)
    r.rpush(b, "x")
    r.set(a, "1")
    # MGET answers nil for a key of another type, as Redis does, also when split.
    assert r.mget([a, b]) == [b"1", None]
    # An odd MSET is refused with Redis's text.
    assert error_text(proxy, "MSET", a) == error_text(cluster[0], "MSET", a)


def test_crossslot_as_redis(r, proxy, cluster):
    a, b, _ = keys_on_distinct_nodes(cluster)
    node = cluster[0]
    for args in (("MSETNX", a, "1", b, "2"), ("RENAME", a, b), ("SUNIONSTORE", a, a, b),
                 ("EVAL", "return 1", "2", a, b)):
        want = error_text(node, *args)
        assert want.startswith("-CROSSSLOT")
        assert error_text(proxy, *args) == want
    # One slot through a hashtag: the atomic command goes through.
    assert r.msetnx({"{user7}.a": "1", "{user7}.b": "2"})
    assert r.mget(["{user7}.a", "{user7}.b"]) == [b"1", b"2"]
    assert r.sadd("{t}s1", "x", "y") and r.sadd("{t}s2", "y", "z")
    assert r.sunionstore("{t}dst", ["{t}s1", "{t}s2"]) == 3
    assert owner(cluster, "{t}dst").client().scard("{t}dst") == 3


def test_local_answers_match_a_cluster_node(r, proxy, cluster):
    node = cluster[0]
    for args in (("SELECT", "1"), ("SELECT", "x"), ("PING", "a", "b"), ("HELLO", "4"),
                 ("CLUSTER", "NOPE"), ("CLUSTER", "KEYSLOT"), ("READONLY", "x")):
        assert error_text(proxy, *args) == error_text(node, *args), args
    assert r.execute_command("SELECT", "0")
    for key in ("foo", "{user1000}.following", "a{}b", "{}{x}"):
        assert r.execute_command("CLUSTER", "KEYSLOT", key) == \
            node.client().execute_command("CLUSTER", "KEYSLOT", key) == key_slot(key)
    assert r.ping() and r.echo("hi") == b"hi"
    assert r.execute_command("READONLY") and r.execute_command("READWRITE")


def test_cluster_commands_name_the_proxy(r, proxy):
    slots = r.execute_command("CLUSTER", "SLOTS")
    assert len(slots) == 1
    start, end, primary = slots[0][:3]
    assert (start, end) == (0, 16383)
    assert primary[0] in (b"127.0.0.1", "127.0.0.1") and primary[1] == proxy.port
    myid = r.execute_command("CLUSTER", "MYID")
    myid = myid.decode() if isinstance(myid, bytes) else myid
    assert len(myid) == 40
    nodes = r.execute_command("CLUSTER", "NODES")
    assert myid in str(nodes) and "127.0.0.1:%d" % proxy.port in str(nodes)
    info = r.execute_command("CLUSTER", "INFO")
    info = info.decode() if isinstance(info, bytes) else info
    assert "cluster_state:ok\r\n" in info and "cluster_known_nodes:1\r\n" in info
    shards = r.execute_command("CLUSTER", "SHARDS")
    assert len(shards) == 1


def shape(reply):
    """A reply's types and map keys, without its values."""
    if reply.kind in ("*", "~", ">") and reply.value is not None:
        return [reply.kind, [shape(r) for r in reply.value]]
    if reply.kind == "%":
        return ["%", [(k.value, shape(v)) for k, v in reply.value]]
    return reply.kind


@pytest.mark.parametrize("proto", ["2", "3"])
def test_cluster_replies_have_a_nodes_shape(proxy, cluster, proto):
    """CLUSTER SLOTS/SHARDS of the proxy: one entry shaped exactly as a real node's entries
    (types, map keys), in RESP2 and RESP3; HELLO's fields as a node's."""
    got = {}
    for server in (proxy, cluster[0]):
        with server.raw() as c:
            hello = c.call("HELLO", proto)
            slots = c.call("CLUSTER", "SLOTS")
            shards = c.call("CLUSTER", "SHARDS")
            info = c.call("CLUSTER", "INFO")
        got[server.port] = (shape(hello), shape(slots.value[0]), shape(shards.value[0]),
                            info.kind)
        assert len(slots.value) == (1 if server is proxy else 3)
    assert got[proxy.port] == got[cluster[0].port]


def test_pipeline_keeps_order(r, cluster):
    keys = ["p%d" % i for i in range(300)]
    pipe = r.pipeline(transaction=False)
    for i, k in enumerate(keys):
        pipe.set(k, i)
        pipe.incr(k)
        pipe.ping()
        pipe.get(k)
    pipe.mget(keys[:50])
    got = pipe.execute()
    want = []
    for i in range(300):
        want += [True, i + 1, True, str(i + 1).encode()]
    want.append([str(i + 1).encode() for i in range(50)])
    assert got == want


def test_big_values_and_long_pipelines(r, proxy, cluster):
    """Values of several MiB (replies cut into many reads, requests longer than a read turn)
    and a pipeline longer than the proxy's 1024 pending requests per client."""
    big = os.urandom(3 * 1024 * 1024 + 7)
    assert r.set("big", big)
    assert r.get("big") == big
    assert owner(cluster, "big").client().strlen("big") == len(big)
    a, b, c = keys_on_distinct_nodes(cluster, "bigm")
    r.mset({a: big, b: b"x", c: big[:100000]})
    assert r.mget([a, b, c]) == [big, b"x", big[:100000]]
    pipe = r.pipeline(transaction=False)
    n = 5000
    for i in range(n):
        pipe.set("lp%d" % i, b"v" * 300 + str(i).encode())
    for i in range(n):
        pipe.get("lp%d" % i)
    got = pipe.execute()
    assert got[:n] == [True] * n
    assert got[n:] == [b"v" * 300 + str(i).encode() for i in range(n)]


def test_inline_requests(proxy):
    with proxy.raw() as c:
        c.send_raw(b"SET inl 'a b'\r\nGET inl\r\nPING\r\n")
        assert [x.raw for x in c.read_replies(3)] == [b"+OK\r\n", b"$3\r\na b\r\n", b"+PONG\r\n"]


def backend_connections(proxy, cluster):
    """Established TCP connections of the proxy process, counted per cluster node port (read
    from /proc: the nodes' own CLIENT LIST cannot tell the proxy from the test's clients)."""
    inodes = set()
    fd_dir = "/proc/%d/fd" % proxy.proc.pid
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = {n.port: 0 for n in cluster}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            remote_port = int(f[2].rsplit(":", 1)[1], 16)
            if f[9] in inodes and f[3] == "01" and remote_port in ports:
                ports[remote_port] += 1
    return ports


def test_many_clients_share_the_backends(proxy, cluster):
    """Short-lived clients (each connects, runs a few commands over several slots, leaves), in
    parallel: the cluster sees the proxy's few long-lived connections, not the churn."""
    errors = []

    def worker(n):
        try:
            for round_ in range(40):
                c = proxy.client()
                for i in range(5):
                    k = "w%d:%d:%d" % (n, round_, i)
                    c.set(k, i)
                    assert c.get(k) == str(i).encode()
                c.close()
        except Exception as e:  # reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    conns = backend_connections(proxy, cluster)
    # One connection per proxy thread (2) and protocol (RESP2, and RESP3 if a RESP3 client
    # came) to each node, whatever the 320 client connections did.
    assert all(1 <= n <= 2 * 2 for n in conns.values()), conns


def test_resp3_client(proxy, cluster):
    c = proxy.client(protocol=3)
    c.flushall()
    a, b, _ = keys_on_distinct_nodes(cluster)
    c.hset(a, mapping={"f": "v"})
    assert c.hgetall(a) == {b"f": b"v"}
    assert c.mget([a + "x", b]) == [None, None]
    c.set(b, "1")
    assert c.mget([b, a + "x"]) == [b"1", None]
    c.close()


def test_unsupported_commands_say_so(r, proxy):
    for args in (("RESET",), ("SHUTDOWN",)):
        assert "not supported by darner proxy yet" in error_text(proxy, *args)
    # The connection is still usable.
    assert r.ping()


def test_redis_cluster_client_through_the_proxy(proxy, cluster):
    rc = redis.RedisCluster(host="127.0.0.1", port=proxy.port, socket_timeout=10)
    try:
        nodes = rc.get_nodes()
        assert [(n.host, n.port) for n in nodes] == [("127.0.0.1", proxy.port)]
        a, b, c = keys_on_distinct_nodes(cluster, "rc")
        for k in (a, b, c):
            assert rc.set(k, k)
        assert rc.mget_nonatomic([a, b, c]) == [a.encode(), b.encode(), c.encode()]
        assert rc.delete(a) == 1
        assert owner(cluster, b).client().get(b) == b.encode()
    finally:
        rc.close()


def test_slot_migration_while_the_proxy_answers(r, proxy, cluster):
    """A slot moves from one primary to another (CLUSTER SETSLOT IMPORTING/MIGRATING, MIGRATE,
    SETSLOT NODE), with a writer through the proxy all along: ASK during the move, MOVED after,
    and no request fails."""
    key = "migrating"
    slot = key_slot(key)
    src = owner(cluster, key)
    dst = next(n for n in cluster if n.port != src.port)
    sc, dc = src.client(), dst.client()
    src_id, dst_id = sc.execute_command("CLUSTER", "MYID"), dc.execute_command("CLUSTER", "MYID")
    same_slot = ["{%s}%d" % (key, i) for i in range(20)]
    r.set(key, "v0")
    for k in same_slot[:10]:
        r.set(k, "old")

    stop = threading.Event()
    errors = []
    count = [0]

    def writer():
        c = proxy.client()
        i = 0
        while not stop.is_set():
            try:
                k = same_slot[i % 10]
                c.set(k, i)
                assert c.get(k) == str(i).encode()
                count[0] += 1
            except Exception as e:
                errors.append(repr(e))
            i += 1
        c.close()

    t = threading.Thread(target=writer)
    t.start()
    try:
        dc.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
        sc.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
        # A key the source does not have: the source answers ASK, the proxy follows it to the
        # importing node (with ASKING) and the key is created there.
        assert r.set(same_slot[15], "new")
        assert r.get(same_slot[15]) == b"new"
        with dst.raw() as c:
            assert c.call("ASKING").raw == b"+OK\r\n"
            assert c.call("GET", same_slot[15]).raw == b"$3\r\nnew\r\n"
        time.sleep(0.2)
        while True:
            ks = sc.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100)
            if not ks:
                break
            sc.execute_command("MIGRATE", "127.0.0.1", dst.port, "", 0, 5000, "REPLACE",
                               "KEYS", *ks)
        for n in cluster:
            n.client().execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
        time.sleep(0.3)
    finally:
        stop.set()
        t.join(30)
    assert not errors, errors[:5]
    assert count[0] > 0
    # After the move: MOVED from the old owner, followed by the proxy.
    assert r.get(key) == b"v0"
    assert dc.get(key) == b"v0"
    assert sc.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0
    assert r.get(same_slot[15]) == b"new"
    # The proxy's map now has the new owner: the old one is no longer asked.
    sc.config_resetstat()
    assert r.set(same_slot[19], "after")
    assert dc.get(same_slot[19]) == b"after"
    assert rejected(sc, "set") == 0


def rejected(node_client, command):
    """How many `command` calls the node refused (MOVED, ASK, CROSSSLOT, ...) since RESETSTAT."""
    stats = node_client.info("commandstats").get("cmdstat_%s" % command, {})
    return int(stats.get("rejected_calls", 0))


def test_periodic_refresh_learns_a_moved_slot(r, proxy, cluster):
    """A slot (empty) handed to another primary behind the proxy's back: within a refresh
    interval (1 s here) the proxy sends its keys to the new owner without being redirected."""
    key = "refresh-me"
    slot = key_slot(key)
    src = owner(cluster, key)
    dst = next(n for n in cluster if n.port != src.port)
    sc, dc = src.client(), dst.client()
    assert sc.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0
    dst_id = dc.execute_command("CLUSTER", "MYID")
    for n in cluster:
        n.client().execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)

    # No request for the slot meanwhile (a MOVED would teach the proxy too): only the periodic
    # refresh (every second here) can tell it.
    time.sleep(3)
    sc.config_resetstat()
    for _ in range(8):
        c = proxy.client()
        assert c.get(key) is None
        c.close()
    assert rejected(sc, "get") == 0
    assert r.set(key, "x") and dc.get(key) == b"x"


def test_darner_proxy_subcommand_execs_the_proxy(cluster):
    """`darner proxy ...` becomes the darner-proxy process (exec: no engine in it)."""

    class ViaDarner(ProxyServer):
        def build_cmdline(self, port):
            return [harness.darner_bin(), "proxy"] + super().build_cmdline(port)[1:]

    p = ViaDarner(["127.0.0.1:%d" % cluster[1].port])
    try:
        p.start()
        assert os.path.basename(os.readlink("/proc/%d/exe" % p.proc.pid)) == "darner-proxy"
        c = p.client()
        assert c.set("via-darner", "1") and c.get("via-darner") == b"1"
        assert c.execute_command("CLUSTER", "SLOTS")[0][2][1] == p.port
        c.close()
    finally:
        p.stop()


def test_protocol_errors_as_redis(proxy, cluster):
    for bad in (b"*x\r\n", b"*1\r\n$-5\r\n", b"*1\r\nfoo\r\n", b'SET "a\r\n'):
        replies = []
        for server in (proxy, cluster[0]):
            with server.raw() as c:
                c.send_raw(b"PING\r\n" + bad)
                replies.append(c.wait_closed())
        assert replies[0] == replies[1], bad


def test_op_timeout_fails_only_the_stalled_backends_requests(cluster):
    """--op-timeout: a node stalled by DEBUG SLEEP fails the requests waiting on it with an
    upstream error after the timeout; another node's keys are served meanwhile; once the node
    is back, a new connection serves it again."""
    p = ProxyServer(["127.0.0.1:%d" % cluster[0].port], ["--op-timeout", "300"])
    try:
        p.start()
        victim = cluster[1]
        keys = {}
        i = 0
        while len(keys) < 2:
            k = "stall%d" % i
            keys.setdefault(owner(cluster, k).port == victim.port, k)
            i += 1
        fine_key, stalled_key = keys[False], keys[True]
        c = p.client()
        c.set(fine_key, "1")
        c.set(stalled_key, "1")
        sleeper = victim.raw(timeout=30)
        sleeper.send("DEBUG", "SLEEP", "2")
        time.sleep(0.1)
        t0 = time.monotonic()
        err = error_text(p, "GET", stalled_key)
        waited = time.monotonic() - t0
        assert err == "-ERR upstream 127.0.0.1:%d: timed out after 300 ms\r\n" % victim.port
        assert 0.25 <= waited < 1.5, waited
        assert c.get(fine_key) == b"1"
        assert sleeper.read_reply().raw == b"+OK\r\n"
        sleeper.close()
        assert c.get(stalled_key) == b"1"
        c.close()
    finally:
        p.stop()


def raw_replies(server, commands):
    """The raw replies to `commands`, sent in one pipeline."""
    with server.raw() as c:
        c.send_many(commands)
        return [rep.raw for rep in c.read_replies(len(commands))]


def two_slots_on_one_node(cluster):
    """Two keys of different slots owned by the same primary, and that primary."""
    first = "t0"
    node = owner(cluster, first)
    i = 1
    while True:
        k = "t%d" % i
        if owner(cluster, k).port == node.port and key_slot(k) != key_slot(first):
            return first, k, node
        i += 1


def test_transaction_runs_on_its_slots_owner(r, proxy, cluster):
    p = r.pipeline(transaction=True)
    p.set("{tx}a", "1").incr("{tx}b").get("{tx}a").lpush("{tx}l", "x")
    assert p.execute() == [True, 1, b"1", 1]
    node = owner(cluster, "{tx}a").client()
    assert node.mget(["{tx}a", "{tx}b"]) == [b"1", b"1"]
    # Keyless commands only, or none: answered as a node answers them.
    for cmds in ([("MULTI",), ("EXEC",)], [("MULTI",), ("PING",), ("ECHO", "e"), ("EXEC",)],
                 [("MULTI",), ("PING",), ("SET", "{tx}a", "2"), ("EXEC",), ("GET", "{tx}a")],
                 [("MULTI",), ("SET", "{tx}a", "3"), ("DISCARD",), ("GET", "{tx}a")]):
        assert raw_replies(proxy, cmds) == raw_replies(owner(cluster, "{tx}a"), cmds), cmds
    # Many clients' transactions interleaved with plain traffic.
    errors = []

    def worker(n):
        try:
            c = proxy.client()
            for i in range(30):
                p = c.pipeline(transaction=True)
                p.incr("{w%d}n" % n).set("{w%d}last" % n, i).get("{w%d}last" % n)
                assert p.execute() == [i + 1, True, str(i).encode()]
                assert c.get("plain%d" % n) is None
            c.close()
        except Exception as e:  # reported below
            errors.append(repr(e))
    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    # 180 transactions later, the cluster sees the shared connections and the idle pool (at
    # most 8 per node, protocol and proxy thread), not a connection per transaction.
    conns = backend_connections(proxy, cluster)
    assert all(n <= 2 * 2 + 2 * 8 for n in conns.values()), conns
    # A client that leaves inside MULTI takes its transaction's connection with it: the node
    # has no client left in MULTI.
    node = owner(cluster, "{tx}a")

    def in_multi():
        return sum(1 for c in node.client().client_list() if c.get("multi", "-1") != "-1")
    c = proxy.raw()
    c.send_many([("MULTI",), ("SET", "{tx}a", "left")])
    assert [rep.raw for rep in c.read_replies(2)] == [b"+OK\r\n", b"+QUEUED\r\n"]
    assert in_multi() == 1
    c.close()
    wait_for(lambda: in_multi() == 0, timeout=5, what="the transaction's connection closed")
    assert r.get("{tx}a") == b"2"


def test_transaction_errors_as_a_cluster_node(r, proxy, cluster):
    """The proxy is one node owning every slot: a transaction over two slots is queued and its
    EXEC refused with CROSSSLOT, as a node owning both slots does; the other misuses get the
    node's texts."""
    k1, k2, node = two_slots_on_one_node(cluster)
    r.delete(k1, k2)
    for cmds in ([("MULTI",), ("SET", k1, "1"), ("SET", k2, "2"), ("EXEC",), ("GET", k1)],
                 [("MULTI",), ("GET", k1), ("MGET", k1, k2), ("EXEC",)],
                 [("MULTI",), ("MULTI",), ("WATCH", k1), ("GET",), ("SET", k1, "x"), ("EXEC",),
                  ("GET", k1)],
                 [("MULTI",), ("NOSUCHCOMMAND",), ("SET", k1, "x"), ("EXEC",)],
                 [("MULTI",), ("CONFIG", "NOSUCH"), ("EXEC",)],
                 [("EXEC",), ("DISCARD",), ("WATCH", k1, k2), ("UNWATCH",), ("MULTI",),
                  ("EXEC",)],
                 [("MULTI",), ("SET", k1, "1"), ("WATCH", k1), ("EXEC",), ("GET", k1)]):
        r.delete(k1, k2)
        want = raw_replies(node, cmds)
        r.delete(k1, k2)
        assert raw_replies(proxy, cmds) == want, cmds
    # A command that goes to every primary cannot join a transaction: refused, EXEC aborts.
    got = raw_replies(proxy, [("MULTI",), ("DBSIZE",), ("EXEC",)])
    assert got[1].startswith(b"-ERR command 'dbsize' goes to every primary"), got
    assert got[2].startswith(b"-EXECABORT"), got


def test_watch(r, proxy, cluster):
    key = "{watched}k"
    r.set(key, "0")
    other = proxy.client()
    with r.pipeline() as p:
        p.watch(key)
        assert p.get(key) == b"0"
        other.set(key, "changed")
        p.multi()
        p.set(key, "mine")
        with pytest.raises(redis.WatchError):
            p.execute()
    assert r.get(key) == b"changed"
    with r.pipeline() as p:
        p.watch(key)
        p.multi()
        p.set(key, "mine")
        assert p.execute() == [True]
    assert r.get(key) == b"mine"
    # The client's own write after WATCH, pipelined, reaches the node after the WATCH (it
    # follows it on the pinned connection) and voids EXEC, as on a node.
    cmds = [("WATCH", key), ("SET", key, "1"), ("MULTI",), ("GET", key), ("EXEC",),
            ("WATCH", key), ("UNWATCH",), ("MULTI",), ("GET", key), ("EXEC",)]
    assert raw_replies(proxy, cmds) == raw_replies(owner(cluster, key), cmds)
    # Requests pipelined before the WATCH, for the same node, run before it, even with a
    # backlog on the shared connection that a fresh connection could overtake: the SET must
    # not void the transaction.
    filler = [("SET", "{watched}f%d" % i, "x" * 1000) for i in range(300)]
    cmds = filler + [("SET", key, "before"), ("WATCH", key), ("MULTI",), ("GET", key), ("EXEC",)]
    for _ in range(5):
        got = raw_replies(proxy, cmds)
        assert got[-1] == b"*1\r\n$6\r\nbefore\r\n", got[-5:]
    assert raw_replies(owner(cluster, key), cmds)[-1] == got[-1]
    # A client that goes away while watching leaves nothing behind: the next one is unaffected.
    c = proxy.client()
    c.execute_command("WATCH", key)
    c.close()
    with r.pipeline() as p:
        p.watch(key)
        p.multi()
        p.set(key, "again")
        assert p.execute() == [True]
    other.close()


def test_moved_inside_a_transaction_ends_it(r, proxy, cluster):
    """The slot of a watched key moves to another node: the transaction's command gets a clear
    error and EXEC aborts (no hang); the next transaction runs on the new owner."""
    key = "moving-tx"
    slot = key_slot(key)
    src = owner(cluster, key)
    dst = next(n for n in cluster if n.port != src.port)
    src_id = src.client().execute_command("CLUSTER", "MYID")
    dst_id = dst.client().execute_command("CLUSTER", "MYID")
    r.delete(key)
    c = proxy.client(socket_timeout=5)
    try:
        assert c.execute_command("WATCH", key)
        for n in cluster:
            n.client().execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
        replies = raw_replies(proxy, [("PING",)])  # the proxy still answers others
        assert replies == [b"+PONG\r\n"]
        assert c.execute_command("MULTI")
        with pytest.raises(redis.ResponseError, match="slot %d moved to another node" % slot):
            c.execute_command("SET", key, "1")
        with pytest.raises(redis.ResponseError, match="discarded because of previous errors"):
            c.execute_command("EXEC")
        # Same client, so same proxy thread, whose map the MOVED updated (another thread
        # learns it at its next refresh).
        p = c.pipeline(transaction=True)
        p.set(key, "2").get(key)
        assert p.execute() == [True, b"2"]
        assert dst.client().get(key) == b"2"
    finally:
        c.close()
        r.delete(key)
        wait_for(lambda: dst.client().execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0,
                 what="slot emptied")
        for n in cluster:
            n.client().execute_command("CLUSTER", "SETSLOT", slot, "NODE", src_id)


@pytest.fixture
def one_thread_proxy(cluster):
    """A proxy with one thread: every client shares its backend connections, so a blocked
    client would hold up the others if it used them."""
    p = ProxyServer(["127.0.0.1:%d" % cluster[0].port], ["--threads", "1"])
    p.start()
    try:
        yield p
    finally:
        p.stop()


def blocked_on(node, command):
    """How many of the node's clients are blocked in `command`."""
    return sum(1 for c in node.client().client_list()
               if c.get("cmd") == command and "b" in c.get("flags", ""))


def test_blocking_commands_do_not_hold_up_others(one_thread_proxy, cluster):
    proxy = one_thread_proxy
    r = proxy.client()
    key = "{blk}list"
    r.delete(key, "{blk}dst")
    got = []
    blocked = proxy.client(socket_timeout=20)
    t = threading.Thread(target=lambda: got.append(blocked.blpop([key], 0)))
    t.start()
    node = owner(cluster, key)
    wait_for(lambda: blocked_on(node, "blpop") == 1, what="BLPOP blocked on the node")
    # Everything else goes on, on the same proxy thread, keys on the same node included.
    start = time.monotonic()
    for i in range(50):
        assert r.set("{blk}other%d" % i, i) and r.get("{blk}other%d" % i) == str(i).encode()
    assert time.monotonic() - start < 2
    assert r.lpush(key, "v") == 1
    t.join(10)
    assert got == [(key.encode(), b"v")]
    blocked.close()
    # Timeouts pass through.
    start = time.monotonic()
    assert r.blpop([key], 0.2) is None
    assert 0.15 <= time.monotonic() - start < 2
    # Each blocking command, with data there, and with data pushed while it waits.
    r.rpush(key, "a", "b")
    assert r.brpop([key], 1) == (key.encode(), b"b")
    assert r.blmove(key, "{blk}dst", 1, "LEFT", "RIGHT") == b"a"
    assert r.execute_command("BLMPOP", 1, 1, "{blk}dst", "LEFT") == [b"{blk}dst", [b"a"]]
    r.zadd("{blk}z", {"m": 1})
    assert r.bzpopmin(["{blk}z"], 1) == (b"{blk}z", b"m", 1.0)
    sid = r.xadd("{blk}s", {"f": "v"})
    assert r.xread({"{blk}s": "0"}, block=100) == [[b"{blk}s", [(sid, {b"f": b"v"})]]]
    r.xgroup_create("{blk}s", "g", id="0")
    assert r.xreadgroup("g", "c", {"{blk}s": ">"}, block=100) == \
        [[b"{blk}s", [(sid, {b"f": b"v"})]]]
    assert raw_replies(proxy, [("XREAD", "BLOCK", "100", "STREAMS", "{blk}s", "$")]) == \
        [b"*-1\r\n"]
    later = threading.Timer(0.2, lambda: proxy.client().rpush(key, "late"))
    later.start()
    assert r.blmove(key, "{blk}dst", 5, "LEFT", "RIGHT") == b"late"
    later.join()
    # Pipelined blocking commands keep their order with the others.
    replies = raw_replies(proxy, [("BLPOP", key, "0.1"), ("SET", "{blk}x", "1"),
                                  ("BRPOP", "{blk}dst", "0.1"), ("GET", "{blk}x")])
    assert replies == [b"*-1\r\n", b"+OK\r\n", b"*2\r\n$8\r\n{blk}dst\r\n$4\r\nlate\r\n",
                       b"$1\r\n1\r\n"]
    # The client's own later request for the same node waits behind its blocked command, as
    # on one connection to a node: the push comes after the timeout, not into the BLPOP.
    cmds = [("BLPOP", key, "0.1"), ("LPUSH", key, "after"), ("LPOP", key)]
    assert raw_replies(proxy, cmds) == raw_replies(node, cmds) == \
        [b"*-1\r\n", b":1\r\n", b"$5\r\nafter\r\n"]
    # RESP3 clients get RESP3 replies on their own connections too.
    c3 = proxy.client(protocol=3)
    c3.rpush(key, "x")
    assert c3.blpop([key], 1) == [key.encode(), b"x"]
    assert c3.zadd("{blk}z", {"m": 1}) == 1
    assert c3.bzpopmin(["{blk}z"], 1) == [b"{blk}z", b"m", 1.0]
    p = c3.pipeline(transaction=True)
    p.hset("{blk}h", "f", "v").hgetall("{blk}h")
    assert p.execute() == [1, {b"f": b"v"}]
    c3.close()
    # Cross-slot keys: refused as by a node.
    assert error_text(proxy, "BLPOP", "a", "b", "0") == \
        error_text(cluster[0], "BLPOP", "a", "b", "0")
    r.close()


def test_a_blocking_command_follows_a_moved_slot(one_thread_proxy, cluster):
    """An (empty) slot handed to another primary behind the proxy's back: a blocking command
    sent to the old owner is redirected and waits on the new one, not failed."""
    proxy = one_thread_proxy
    key = "moving-list"
    slot = key_slot(key)
    src = owner(cluster, key)
    dst = next(n for n in cluster if n.port != src.port)
    src_id = src.client().execute_command("CLUSTER", "MYID")
    dst_id = dst.client().execute_command("CLUSTER", "MYID")
    r = proxy.client()
    try:
        assert r.blpop([key], 0.05) is None  # the proxy's map has the old owner
        for n in cluster:
            n.client().execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
        got = []
        t = threading.Thread(target=lambda: got.append(r.blpop([key], 5)))
        t.start()
        wait_for(lambda: blocked_on(dst, "blpop") == 1, what="BLPOP blocked on the new owner")
        dst.client().rpush(key, "v")
        t.join(10)
        assert got == [(key.encode(), b"v")]
    finally:
        r.close()
        dst.client().delete(key)
        for n in cluster:
            n.client().execute_command("CLUSTER", "SETSLOT", slot, "NODE", src_id)


def test_a_client_closed_while_blocked_closes_its_backend_connection(one_thread_proxy, cluster):
    proxy = one_thread_proxy
    key = "{gone}list"
    node = owner(cluster, key)
    for _ in range(3):
        c = proxy.raw()
        c.send("BLPOP", key, "0")
        wait_for(lambda: blocked_on(node, "blpop") == 1, what="BLPOP blocked on the node")
        c.close()
        wait_for(lambda: blocked_on(node, "blpop") == 0, timeout=5,
                 what="the node's blocked connection closed")
    # A blocking command that finished leaves its connection to the next one: the cluster sees
    # a handful of connections, not one per blocking call.
    r = proxy.client()
    for i in range(20):
        c = proxy.client()
        assert c.blpop([key], 0.01) is None
        c.close()
    assert r.ping()
    conns = backend_connections(proxy, cluster)
    assert conns[node.port] <= 3, conns
    r.close()


def next_message(ps, timeout=5.0):
    """The next message of a redis-py PubSub (confirmations included), or a failure."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = ps.get_message(timeout=0.1)
        if m is not None:
            return m
    raise AssertionError("no pub/sub message within %.1f s" % timeout)


def subscribers_on(cluster):
    """The cluster's connections in subscribed mode (flag P), by node port."""
    return {n.port: sum(1 for c in n.client().client_list() if "P" in c.get("flags", ""))
            for n in cluster}


@pytest.mark.parametrize("proto", [2, 3])
def test_pubsub_through_the_proxy(proxy, cluster, proto):
    # Channels of this run's own: a cluster forwards PUBLISH to the other nodes over its bus,
    # so a message of an earlier test may still be on its way.
    p = "ps%d-" % proto
    c = proxy.client(protocol=proto)
    pub = proxy.client()
    ps = c.pubsub()
    try:
        ps.subscribe(p + "news")
        assert next_message(ps) == {"type": "subscribe", "pattern": None,
                                    "channel": (p + "news").encode(), "data": 1}
        ps.psubscribe(p + "*")
        assert next_message(ps) == {"type": "psubscribe", "pattern": None,
                                    "channel": (p + "*").encode(), "data": 2}
        # Published through the proxy, then directly on every node: classic pub/sub reaches
        # the subscribers of every node, so the node the proxy picked does not matter.
        # PUBLISH counts the receiving node's subscribers only: 0 or 2 here.
        assert pub.publish(p + "news", "via-proxy") in (0, 2)
        got = [next_message(ps), next_message(ps)]
        assert {"type": "message", "pattern": None, "channel": (p + "news").encode(),
                "data": b"via-proxy"} in got
        assert {"type": "pmessage", "pattern": (p + "*").encode(),
                "channel": (p + "news").encode(), "data": b"via-proxy"} in got
        for i, n in enumerate(cluster):
            n.client().publish(p + "next", "direct-%d" % i)
            assert next_message(ps) == {"type": "pmessage", "pattern": (p + "*").encode(),
                                        "channel": (p + "next").encode(),
                                        "data": b"direct-%d" % i}
        ps.unsubscribe(p + "news")
        assert next_message(ps) == {"type": "unsubscribe", "pattern": None,
                                    "channel": (p + "news").encode(), "data": 1}
        ps.punsubscribe(p + "*")
        assert next_message(ps) == {"type": "punsubscribe", "pattern": None,
                                    "channel": (p + "*").encode(), "data": 0}
    finally:
        ps.close()
        pub.close()
        c.close()


def test_subscribed_mode_as_a_cluster_node(proxy, cluster):
    """The raw bytes of (un)subscribe confirmations, messages and the errors of subscribed
    mode (RESP2) are the node's."""
    script = [("SUBSCRIBE", "a", "b"), ("DBSIZE",), ("PING",), ("PING", "hi"),
              ("UNSUBSCRIBE", "a", "b")]
    replies = {}
    for name, server in (("node", cluster[0]), ("proxy", proxy)):
        with server.raw() as conn:
            # A request answered before the subscription stays ahead of its confirmations.
            conn.send_many([("ECHO", "first")] + script)
            replies[name] = [rep.raw for rep in conn.read_replies(8)]
    assert replies["proxy"] == replies["node"]
    assert replies["proxy"][0] == b"$5\r\nfirst\r\n"
    assert replies["proxy"][3].startswith(b"-ERR Can't execute 'dbsize'")


def test_a_subscriber_leaving_closes_its_backend_connection(proxy, cluster):
    before = sum(subscribers_on(cluster).values())
    for _ in range(3):
        c = proxy.client()
        ps = c.pubsub()
        ps.subscribe("gone")
        assert next_message(ps)["type"] == "subscribe"
        assert sum(subscribers_on(cluster).values()) == before + 1
        ps.close()
        c.close()
        wait_for(lambda: sum(subscribers_on(cluster).values()) == before, timeout=5,
                 what="the subscriber's backend connection closed")


def test_sharded_pubsub_goes_to_the_channels_owner(proxy, cluster):
    a, b = "{sh}a", "{sh}b"
    node = owner(cluster, a)
    # Channels of two slots: the node's own refusal.
    assert error_text(proxy, "SSUBSCRIBE", "{x}1", "{y}2") == \
        error_text(node, "SSUBSCRIBE", "{x}1", "{y}2")
    c = proxy.client()
    ps = c.pubsub()
    try:
        ps.ssubscribe(a, b)
        assert next_message(ps) == {"type": "ssubscribe", "pattern": None, "channel": a.encode(),
                                    "data": 1}
        assert next_message(ps) == {"type": "ssubscribe", "pattern": None, "channel": b.encode(),
                                    "data": 2}
        # Sharded messages stay within the slot's shard: SPUBLISH on the owner counts the
        # proxy's connection only if it went there.
        assert node.client().execute_command("SPUBLISH", a, "direct") == 1
        assert next_message(ps)["data"] == b"direct"
        assert proxy.client().execute_command("SPUBLISH", b, "via-proxy") == 1
        assert next_message(ps) == {"type": "smessage", "pattern": None, "channel": b.encode(),
                                    "data": b"via-proxy"}
        ps.sunsubscribe(a)
        assert next_message(ps) == {"type": "sunsubscribe", "pattern": None,
                                    "channel": a.encode(), "data": 1}
    finally:
        ps.close()
        c.close()


def test_a_subscriber_that_does_not_read_is_closed(proxy, cluster):
    """Messages pile up in the proxy for a subscriber that does not read: past 32 MB (Redis's
    default pubsub hard limit) the client is closed, and its backend connection with it."""
    import socket
    before = sum(subscribers_on(cluster).values())
    sock = socket.create_connection(("127.0.0.1", proxy.port))
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(b"*2\r\n$9\r\nSUBSCRIBE\r\n$5\r\nflood\r\n")
        wait_for(lambda: sum(subscribers_on(cluster).values()) == before + 1, timeout=5,
                 what="the subscription on a node")
        node = cluster[0].client()
        payload = b"x" * (1024 * 1024)
        for _ in range(64):
            node.publish("flood", payload)
        wait_for(lambda: sum(subscribers_on(cluster).values()) == before, timeout=10,
                 what="the flooded subscriber's backend connection closed")
    finally:
        sock.close()


def test_a_dead_backend_fails_only_its_requests(proxy, cluster):
    """Runs last: it kills a primary. Requests for that primary's slots get an upstream error;
    the other primaries' keys are served as before (the survivors keep cluster_state:ok for
    the 15 s node timeout, far longer than the test)."""
    victim = cluster[2]
    keys = {}
    i = 0
    while len(keys) < 2:
        k = "dead%d" % i
        keys.setdefault(owner(cluster, k).port == victim.port, k)
        i += 1
    alive_key, dead_key = keys[False], keys[True]
    c = proxy.client()
    c.set(alive_key, "1")
    c.set(dead_key, "1")
    victim.kill()
    err = error_text(proxy, "GET", dead_key)
    assert err.startswith("-ERR upstream 127.0.0.1:%d: " % victim.port), err
    assert c.get(alive_key) == b"1"
    assert c.mget([alive_key, alive_key]) == [b"1", b"1"]
    c.close()

