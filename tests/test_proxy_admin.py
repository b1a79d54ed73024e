"""darner-proxy's fan-out and administration against a real, password-protected Redis Cluster
(three primaries of Debian's redis-server with `requirepass`, made with `redis-cli -a ...
--cluster create`): SCAN, KEYS, DBSIZE, FLUSHALL/FLUSHDB, RANDOMKEY and INFO over every
primary; client AUTH to the proxy and the proxy's own backend credentials; the config file;
maxclients; the Prometheus endpoint.

Every fanned-out answer is checked against what the nodes say when asked directly, and every
error text the proxy writes itself against a redis-server's.
"""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request

import pytest
import redis

import harness
from harness import HarnessError, Server
from keyslot import key_slot
from test_proxy import ProxyServer, proxy_bin, redis_cluster, wait_for

NODE_PASS = "node-secret"
PROXY_PASS = "proxy secret"


@pytest.fixture(scope="module")
def cluster():
    with redis_cluster(password=NODE_PASS) as nodes:
        yield nodes


class AuthProxy(ProxyServer):
    """A proxy whose clients must AUTH (harness clients do, with `auth`)."""

    def __init__(self, seeds, extra=(), auth=None):
        super().__init__(seeds, extra)
        self.auth = auth


def start(p):
    try:
        return p.start()
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="module")
def metrics_port():
    return harness.free_port()


@pytest.fixture(scope="module")
def proxy(cluster, metrics_port):
    # A long refresh interval: the backend counters then move only with the clients' requests.
    p = AuthProxy(["127.0.0.1:%d" % cluster[0].port],
                  ["--backend-password", NODE_PASS, "--requirepass", PROXY_PASS,
                   "--cluster-refresh-interval", "60000",
                   "--metrics-listen", "127.0.0.1:%d" % metrics_port], auth=PROXY_PASS)
    start(p)
    yield p
    p.stop()


@pytest.fixture
def r(proxy):
    c = proxy.client()
    c.flushall()
    yield c
    c.close()


def raw_call(server, *args, password=None):
    """The exact reply line(s) of one request on a fresh connection (after AUTH password)."""
    with server.raw() as c:
        if password is not None:
            assert c.call("AUTH", password).raw == b"+OK\r\n"
        return c.call(*args).raw


def fill(r, n=120):
    """n keys spread over the slots (and so the nodes): strings, some hashes, some with TTLs."""
    keys = []
    for i in range(n):
        k = "user:%d" % i if i % 3 else "item:%d" % i
        if i % 10 == 0:
            r.hset(k, "f", "v")
        else:
            r.set(k, "v", ex=1000 if i % 4 == 0 else None)
        keys.append(k.encode())
    return keys


def node_keys(cluster):
    per = [set(n.client().keys("*")) for n in cluster]
    assert all(per), "every node holds some keys: the fan-out is exercised"
    return per


# ---- fan-out -------------------------------------------------------------------------------

def test_keys_and_dbsize_are_the_nodes_union_and_sum(r, cluster):
    written = set(fill(r))
    per = node_keys(cluster)
    union = set().union(*per)
    assert union == written
    got = r.keys("*")
    assert len(got) == len(set(got)) and set(got) == union
    assert set(r.keys("item:*")) == {k for k in union if k.startswith(b"item:")}
    assert r.dbsize() == sum(n.client().dbsize() for n in cluster) == len(written)


@pytest.mark.parametrize("count", [1, 7, 1000])
def test_scan_returns_every_key_exactly_once(r, cluster, count):
    written = set(fill(r))
    seen, cursor, calls, cursors = [], 0, 0, set()
    while True:
        cursor, keys = r.scan(cursor, count=count)
        seen += keys
        calls += 1
        cursors.add(cursor)
        assert calls < 10000
        if cursor == 0:
            break
    assert len(seen) == len(set(seen)), "a key returned twice"
    assert set(seen) == written
    # A full walk visits the three nodes: at least the two hand-over cursors (1 and 2).
    assert {1, 2} <= cursors


def test_scan_passes_match_count_and_type(r, proxy, cluster):
    written = set(fill(r))
    hashes = {k for k in written if r.type(k) == b"hash"}
    assert set(r.scan_iter(match="item:*", count=5)) == {k for k in written
                                                          if k.startswith(b"item:")}
    assert set(r.scan_iter(_type="hash")) == hashes
    c3 = proxy.client(protocol=3)
    try:
        got = list(c3.scan_iter(count=9))
        assert len(got) == len(set(got)) and set(got) == written
    finally:
        c3.close()
    # A node's own errors for its options come back unchanged.
    node = cluster[0]
    for args in (("SCAN", "0", "COUNT", "x"), ("SCAN", "0", "MATCH"), ("SCAN", "0", "COUNT", "0")):
        assert raw_call(proxy, *args, password=PROXY_PASS) == \
            raw_call(node, *args, password=NODE_PASS), args


def test_scan_cursor_errors_as_a_node(r, proxy, cluster):
    for cursor in ("abc", "-1x", "1 ", " 1", "-", "18446744073709551616"):
        assert raw_call(proxy, "SCAN", cursor, password=PROXY_PASS) == \
            raw_call(cluster[0], "SCAN", cursor, password=NODE_PASS), cursor
    # A cursor naming a fourth primary is not one the proxy gave.
    assert raw_call(proxy, "SCAN", "3", password=PROXY_PASS) == b"-ERR invalid cursor\r\n"
    # Read as strtoul reads it: "" is 0, a sign is taken.
    for cursor in ("", "+0"):
        assert raw_call(proxy, "SCAN", cursor, password=PROXY_PASS).startswith(b"*2\r\n")
    assert raw_call(proxy, "SCAN", password=PROXY_PASS) == \
        raw_call(cluster[0], "SCAN", password=NODE_PASS)


@pytest.mark.parametrize("cmd", [("FLUSHALL",), ("FLUSHALL", "ASYNC"), ("FLUSHDB", "SYNC"),
                                 ("FLUSHDB",)])
def test_flush_empties_every_primary(r, proxy, cluster, cmd):
    fill(r, 60)
    node_keys(cluster)
    assert r.execute_command(*cmd) in (True, b"OK")
    wait_for(lambda: all(n.client().dbsize() == 0 for n in cluster), timeout=5,
             what="every node empty after %s" % " ".join(cmd))
    assert raw_call(proxy, *cmd, "BAD", password=PROXY_PASS) == \
        raw_call(cluster[0], *cmd, "BAD", password=NODE_PASS)


def test_randomkey(r, proxy, cluster):
    assert r.randomkey() is None
    # One key, on whichever node: always found, whatever primary is asked first.
    r.set("lonely", "1")
    assert all(r.randomkey() == b"lonely" for _ in range(20))
    # One key per node: every one comes up (each draw starts at a random primary: the
    # chance of 60 draws missing one is 3 x (2/3)^60, about 1e-10).
    keys = set()
    i = 0
    owners = set()
    while len(owners) < 3:
        k = "rk%d" % i
        port = owner_port(cluster, k)
        if port not in owners:
            owners.add(port)
            keys.add(k.encode())
            r.set(k, "1")
        i += 1
    r.delete("lonely")
    got = {r.randomkey() for _ in range(60)}
    assert got == keys
    assert raw_call(proxy, "RANDOMKEY", "x", password=PROXY_PASS) == \
        raw_call(cluster[0], "RANDOMKEY", "x", password=NODE_PASS)


def owner_port(cluster, key):
    slot = key_slot(key)
    for start_, end, primary, *_ in cluster[0].client().execute_command("CLUSTER", "SLOTS"):
        if start_ <= slot <= end:
            return primary[1]
    raise AssertionError("slot %d not served" % slot)


def backend_requests(c):
    info = c.info("proxy")
    return {v["addr"]: v["requests"] for k, v in info.items() if k.startswith("backend")}


def test_ping_and_echo_never_reach_a_backend(r):
    r.set("warm", "1")  # every thread's connection is open: no topology request comes later
    before = backend_requests(r)
    for _ in range(20):
        assert r.ping() is True
        assert r.echo("hi") == b"hi"
    assert backend_requests(r) == before


# ---- INFO ----------------------------------------------------------------------------------

def test_info_keyspace_is_the_sum_of_the_nodes(r, cluster):
    fill(r)
    ks = r.info("keyspace")["db0"]
    direct = [n.client().info("keyspace")["db0"] for n in cluster]
    assert ks["keys"] == sum(d["keys"] for d in direct)
    assert ks["expires"] == sum(d["expires"] for d in direct) > 0
    default = r.info()
    assert default["db0"]["keys"] == ks["keys"]
    for field in ("redis_version", "connected_clients", "maxclients", "total_commands_processed",
                  "proxy_backends"):
        assert field in default, field
    assert "cmdstat_get" not in default
    assert default["tcp_port"] == r.connection_pool.connection_kwargs["port"]
    assert default["proxy_backends"] == 3
    addrs = {v["addr"] for k, v in default.items() if k.startswith("backend")}
    assert addrs == {"127.0.0.1:%d" % n.port for n in cluster}


def test_info_resp3_and_sections(proxy, cluster):
    c = proxy.client(protocol=3)
    try:
        assert c.info("clients")["connected_clients"] >= 1
    finally:
        c.close()
    with proxy.raw() as raw:
        assert raw.call("AUTH", PROXY_PASS).raw == b"+OK\r\n"
        assert raw.call("HELLO", "3").kind == "%"
        for sections in (("clients",), ("server", "keyspace")):
            reply = raw.call("INFO", *sections)
            assert reply.raw.startswith(b"=") and b"\r\ntxt:# " in reply.raw[:20], reply.raw[:20]
        text = reply.raw.decode()
        assert "txt:# Server\r\n" in text and "\r\n\r\n# Keyspace\r\n" in text
        assert "# Clients" not in text
        assert raw.call("HELLO", "2").kind == "*"
        direct = raw.call("INFO", "server").raw
        assert direct.startswith(b"$") and b"\r\n# Server\r\n" in direct


def test_commandstats_count_each_command(r, proxy):
    def calls(name):
        return r.info("commandstats").get("cmdstat_%s" % name, {}).get("calls", 0)
    get0, set0, id0 = calls("get"), calls("set"), calls("client|id")
    for i in range(7):
        r.set("cs%d" % i, i)
    for i in range(5):
        r.get("cs%d" % i)
    r.client_id()
    assert (calls("get") - get0, calls("set") - set0, calls("client|id") - id0) == (5, 7, 1)
    total = r.info("stats")["total_commands_processed"]
    assert total >= 13


def test_backend_counters_move_with_requests(r, cluster):
    key = "counted"
    port = owner_port(cluster, key)
    r.set(key, "0")  # this thread's connection to the owner is open (and authenticated)
    before = r.info("proxy")
    for _ in range(10):
        r.set(key, "1")
    try:
        r.lpush(key, "x")  # WRONGTYPE: an error reply from the owner
    except redis.ResponseError:
        pass
    after = r.info("proxy")

    def entry(info):
        return next(v for k, v in info.items() if k.startswith("backend")
                    and v["addr"] == "127.0.0.1:%d" % port)
    b, a = entry(before), entry(after)
    assert a["requests"] - b["requests"] == 11
    assert a["replies"] - b["replies"] == 11
    assert a["errors"] - b["errors"] == 1
    assert a["in_flight"] == 0
    assert a["latency_usec"] > b["latency_usec"]
    # Bucket bounds (µs): loopback replies come well under the 10 s top bound.
    assert 0 < a["latency_p50_usec"] <= a["latency_p99_usec"] <= 10_000_000


def test_connected_clients(proxy):
    c = proxy.client()
    base = c.info("clients")["connected_clients"]
    extra = [proxy.client() for _ in range(3)]
    for e in extra:
        e.ping()
    assert c.info("clients")["connected_clients"] == base + 3
    for e in extra:
        e.close()
    wait_for(lambda: c.info("clients")["connected_clients"] == base, timeout=5,
             what="closed clients uncounted")
    c.close()


# ---- AUTH ----------------------------------------------------------------------------------

AUTH_CASES = [("GET", "k"), ("AUTH", "wrong"), ("AUTH", "default", "wrong"),
              ("AUTH", "nobody", "x"), ("AUTH", "a", "b", "c"), ("HELLO", "3"),
              ("HELLO", "3", "AUTH", "default", "wrong"), ("HELLO", "9", "AUTH", "x", "y"),
              ("GET",), ("NOSUCHCMD", "a"), ("CLIENT", "NOSUCH"), ("PING",)]


def test_auth_errors_as_a_password_protected_node(proxy, cluster):
    """Before AUTH, the proxy answers as a redis-server with requirepass does (the cluster's
    nodes have one), case by case, on fresh connections."""
    for args in AUTH_CASES:
        got, want = raw_call(proxy, *args), raw_call(cluster[0], *args)
        if args == ("HELLO", "3"):
            # Redis 7.2 added "<proto> " to this message (Debian's 7.0 lacks it); the proxy
            # follows 7.2, as the server does.
            assert got == want.replace(b"HELLO AUTH", b"HELLO <proto> AUTH"), (got, want)
        else:
            assert got == want, args


def test_auth_then_commands(proxy, cluster):
    with proxy.raw() as c:
        assert c.call("SET", "a", "1").raw == b"-NOAUTH Authentication required.\r\n"
        assert c.call("AUTH", "nope").raw.startswith(b"-WRONGPASS")
        assert c.call("AUTH", PROXY_PASS).raw == b"+OK\r\n"
        assert c.call("SET", "a", "1").raw == b"+OK\r\n"
        # A failed AUTH afterwards leaves the connection authenticated, as on Redis.
        assert c.call("AUTH", "nope").raw.startswith(b"-WRONGPASS")
        assert c.call("GET", "a").raw == b"$1\r\n1\r\n"
    with proxy.raw() as c:
        reply = c.call("HELLO", "3", "AUTH", "default", PROXY_PASS, "SETNAME", "me")
        assert reply.kind == "%"
        assert c.call("CLIENT", "GETNAME").raw == b"$2\r\nme\r\n"
        assert c.call("GET", "a").raw == b"$1\r\n1\r\n"
    # redis-py's own AUTH on connect.
    c = redis.Redis(host="127.0.0.1", port=proxy.port, username="default", password=PROXY_PASS)
    assert c.get("a") == b"1"
    c.close()


def test_auth_without_requirepass_as_redis(cluster):
    """Without requirepass the proxy is a nopass default user, as a redis-server without one."""
    p = start(ProxyServer(["127.0.0.1:%d" % cluster[0].port], ["--backend-password", NODE_PASS]))
    ref = harness.start_reference()
    try:
        for args in (("AUTH", "x"), ("AUTH", "default", "any"), ("AUTH", "bob", "x"),
                     ("HELLO", "2", "AUTH", "default", "any"), ("AUTH", "a", "b", "c")):
            got, want = raw_call(p, *args), raw_call(ref, *args)
            if args[0] == "HELLO":
                # The maps differ (mode, id); the kind of reply must not.
                assert got[:1] == want[:1] == b"*", (got, want)
            else:
                assert got == want, args
        assert p.client().set("open", "1")
    finally:
        p.stop()
        ref.stop()


def test_wrong_backend_password_is_reported(cluster):
    p = start(ProxyServer(["127.0.0.1:%d" % cluster[0].port],
                          ["--backend-password", "not-it", "--cluster-refresh-interval", "100"]))
    try:
        # No node would give the proxy the topology: no slot is served.
        assert raw_call(p, "GET", "k") == b"-CLUSTERDOWN Hash slot not served\r\n"
        wait_for(lambda: "handshake refused (WRONGPASS" in p.log_tail(), timeout=5,
                 what="the refused AUTH in the log")
        assert "AUTH refused: WRONGPASS" in p.log_tail(20000)
        # The refused topology requests are retried at a measured pace (10 a second per
        # thread), not in a loop of new connections (thousands a second).
        node = cluster[0].client()
        before = node.info("stats")["total_connections_received"]
        time.sleep(1)
        made = node.info("stats")["total_connections_received"] - before
        assert made < 100, made
    finally:
        p.stop()


# ---- config file ---------------------------------------------------------------------------

class FileProxy(Server):
    """darner-proxy started with a config file (and perhaps options after it)."""

    def __init__(self, path, port, extra=(), auth=None, via_darner=False):
        super().__init__(proxy_bin(), list(extra), name="darner-proxy", auth=auth,
                         add_port=False, port=port)
        self.path = path
        self.via_darner = via_darner

    def build_cmdline(self, port):
        if self.via_darner:
            return [harness.darner_bin(), "proxy", "--config", self.path] + self.user_args
        return [self.binary, self.path] + self.user_args


def test_config_file_and_command_line_override(cluster, tmp_path):
    port = harness.free_port()
    conf = tmp_path / "proxy.conf"
    conf.write_text("# darner-proxy\n"
                    "listen 127.0.0.1:%d\n"
                    "cluster 127.0.0.1:%d 127.0.0.1:%d\n"
                    "backend-password %s\n"
                    "requirepass \"%s\"\n"
                    "maxclients 50\n"
                    "threads 1\n" % (port, cluster[0].port, cluster[1].port, NODE_PASS,
                                     PROXY_PASS))
    for via_darner in (False, True):
        p = start(FileProxy(str(conf), port, ["--maxclients", "40"], auth=PROXY_PASS,
                            via_darner=via_darner))
        try:
            c = p.client()
            assert c.set("from-file", "1") and c.get("from-file") == b"1"
            info = c.info()
            assert info["maxclients"] == 40, "the command line overrides the file"
            assert info["io_threads_active"] == 1
            c.close()
            assert raw_call(p, "GET", "x") == b"-NOAUTH Authentication required.\r\n"
        finally:
            p.stop()


def test_config_file_unknown_directive_refused(cluster, tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("listen 127.0.0.1:%d\ncluster 127.0.0.1:%d\n\nrequirepas x\n"
                    % (harness.free_port(), cluster[0].port))
    rc, out = harness.run_to_exit(proxy_bin(), [str(conf)])
    assert rc == 1, out
    assert "%s:4: unknown directive 'requirepas'" % conf in out
    rc, out = harness.run_to_exit(proxy_bin(), ["--config", str(tmp_path / "missing.conf")])
    assert rc == 1 and "cannot read config file" in out, out


# ---- maxclients ----------------------------------------------------------------------------

def admitted(server):
    """A connection the server kept, once the harness's readiness probe has been let go (its
    close reaches the server a moment after start() returns)."""
    got = []

    def try_once():
        c = server.raw()
        if c.call("PING").raw == b"+PONG\r\n":
            got.append(c)
            return True
        c.close()
        return False
    wait_for(try_once, timeout=5, what="a connection admitted")
    return got[0]


def rejected_connections(conn):
    text = conn.call("INFO", "stats").raw.decode()
    return int(text.split("rejected_connections:")[1].split("\r\n")[0])


@pytest.mark.parametrize("reference", [False, True])
def test_maxclients(cluster, reference):
    """Past maxclients a new connection gets Redis's error and is closed (the same bytes from
    the proxy and from a redis-server); a place freed is taken again."""
    if reference:
        p = harness.start_reference(["--maxclients", "2"])
    else:
        p = start(ProxyServer(["127.0.0.1:%d" % cluster[0].port],
                              ["--backend-password", NODE_PASS, "--maxclients", "2"]))
    try:
        a, b = admitted(p), admitted(p)
        with p.raw() as third:
            assert third.wait_closed() == b"-ERR max number of clients reached\r\n"
        assert rejected_connections(a) >= 1
        b.close()
        admitted(p).close()
        a.close()
    finally:
        p.stop()


# ---- Prometheus ----------------------------------------------------------------------------

def scrape(port, path="/metrics"):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain")
        return resp.read().decode()


def sample(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split(" ")[-1])
    return 0.0


def test_prometheus_endpoint(r, proxy, cluster, metrics_port):
    r.set("m", "1")
    before = scrape(metrics_port)
    assert "# TYPE darner_proxy_backend_latency_seconds histogram" in before
    # The cluster-change counters (their values are checked in test_proxy_reshard.py and
    # test_proxy_ha.py through INFO, which reads the same registry).
    for name in ("redirects_moved", "redirects_ask", "tryagain_retries", "topology_refreshes",
                 "read_retries", "node_ejections", "node_probes"):
        assert "# TYPE darner_proxy_%s_total counter\n" % name in before, name
        assert "\ndarner_proxy_%s_total " % name in before, name
    for _ in range(9):
        r.get("m")
    after = scrape(metrics_port)
    get = 'darner_proxy_commands_total{cmd="get"}'
    assert sample(after, get) - sample(before, get) == 9
    assert sample(after, "darner_proxy_connected_clients") >= 1
    node = "127.0.0.1:%d" % owner_port(cluster, "m")
    count = 'darner_proxy_backend_latency_seconds_count{backend="%s"}' % node
    assert sample(after, count) - sample(before, count) == 9
    inf = 'darner_proxy_backend_latency_seconds_bucket{backend="%s",le="+Inf"}' % node
    assert sample(after, inf) == sample(after, count)
    for n in cluster:
        assert 'darner_proxy_backend_requests_total{backend="127.0.0.1:%d"}' % n.port in after
    with pytest.raises(urllib.error.HTTPError) as e:
        scrape(metrics_port, "/nope")
    assert e.value.code == 404
    # A client that sends half a request and stalls does not stop the next scrape for long.
    s = socket.create_connection(("127.0.0.1", metrics_port))
    s.sendall(b"GET /metr")
    t0 = time.monotonic()
    assert "darner_proxy_uptime_seconds" in scrape(metrics_port)
    assert time.monotonic() - t0 < 4
    s.close()
