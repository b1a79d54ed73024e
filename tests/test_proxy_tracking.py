"""Proxy clients' own CLIENT TRACKING through darner-proxy, against a real Redis Cluster (three
primaries of Debian's redis-server 7.0): the replies compared byte for byte with a node's own,
the `>invalidate` pushes a client gets for what it read (default mode, OPTIN/OPTOUT) or for its
prefixes (BCAST) when another client writes through the proxy or directly on a node, the null
invalidation when a backend connection is lost or a node flushed, and redis-py's client-side
cache through the proxy. Each test runs with the proxy's shared cache off and on (the backend
connections track for the cache already, or start tracking for the first tracking client).
"""

from __future__ import annotations

import contextlib
import time

import pytest
import redis

from harness import HarnessError
from keyslot import key_slot
from resp_reader import RawConn
from transcript import SORTED, assert_same
from test_proxy import ProxyServer, cluster, owner, wait_for  # noqa: F401 (fixture)

# How long an invalidation may take over loopback on a loaded CI machine (well under a
# millisecond when idle), and how long to listen for one that must not come.
DELIVERY_BOUND = 3.0
QUIET = 0.3


@pytest.fixture(scope="module", params=["no", "yes"], ids=["cache-off", "cache-on"])
def proxy(request, cluster):
    p = ProxyServer(["127.0.0.1:%d" % cluster[0].port],
                    ["--threads", "1", "--proxy-cache", request.param])
    try:
        p.start()
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)
    yield p
    p.stop()


def conn(port, protocol=3):
    c = RawConn(port=port)
    if protocol == 3:
        assert c.call("HELLO", "3").kind == "%"
    return c


@pytest.fixture
def conns(proxy, cluster):
    opened = []

    def make(protocol=3, port=None):
        c = conn(port or proxy.port, protocol)
        opened.append(c)
        return c
    proxy.client().flushall()
    yield make
    for c in opened:
        c.sock.close()


def push(*keys):
    if keys == (None,):
        return b">2\r\n$10\r\ninvalidate\r\n_\r\n"
    body = b"".join(b"$%d\r\n%s\r\n" % (len(k), k) for k in keys)
    return b">2\r\n$10\r\ninvalidate\r\n*%d\r\n%s" % (len(keys), body)


def next_push(c, timeout=DELIVERY_BOUND):
    r = c.read_reply(timeout)
    assert r.kind == ">", r
    return r.raw


def drain_null_invalidations(c):
    """Each flushed node (and each lost backend connection) may bring its own null
    invalidation, coalesced or not by the proxy: take whatever more of them arrive, so that
    the next reply read is a command's."""
    rest = c.pending(QUIET)
    assert rest == push(None) * (len(rest) // len(push(None))), rest


def quiet(c):
    assert c.pending(QUIET) == b"", "an invalidation that Redis would not send"


def key_on(cluster, node, prefix):
    """A key whose slot `node` owns."""
    i = 0
    while owner(cluster, "%s%d" % (prefix, i)) is not node:
        i += 1
    return "%s%d" % (prefix, i)


def sync_bcast(t, w, cluster, prefix):
    """Waits until every node reports `prefix` keys to the BCAST client `t`: the proxy makes
    its connections track in BCAST mode after t's +OK, and tells t to flush (null pushes) as
    each node confirms. Returns once a probe written on each node came back, every frame
    before it a null push."""
    for node in cluster:
        key = key_on(cluster, node, prefix + "probe").encode()
        deadline = time.monotonic() + DELIVERY_BOUND
        while True:
            assert time.monotonic() < deadline, "BCAST never reported %r" % key
            w.call("SET", key, "1")
            got = b""
            until = time.monotonic() + 0.2
            while push(key) not in got and time.monotonic() < until:
                got += t.pending(0.02)
            frames = got.replace(push(key), b"").replace(push(None), b"")
            assert frames == b"", got
            if push(key) in got:
                break


SEQUENCE = [
    ("CLIENT", "TRACKINGINFO"), ("CLIENT", "GETREDIR"), ("CLIENT", "CACHING", "yes"),
    ("CLIENT", "TRACKING", "on", "OPTIN"), ("CLIENT", "CACHING", "no"),
    ("CLIENT", "CACHING", "yes"), ("CLIENT", "TRACKINGINFO"), ("CLIENT", "GETREDIR"),
    ("CLIENT", "TRACKING", "on", "BCAST"), ("CLIENT", "TRACKING", "on", "OPTOUT"),
    ("CLIENT", "TRACKING", "on", "PREFIX", "a"), ("CLIENT", "TRACKING", "maybe"),
    ("CLIENT", "CACHING", "maybe"), ("CLIENT", "TRACKING", "on", "NOLOOP", "OPTIN"),
    ("CLIENT", "TRACKINGINFO"), ("CLIENT", "TRACKING", "off"), ("CLIENT", "TRACKINGINFO"),
    ("CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT"), ("CLIENT", "TRACKING", "on", "BCAST", "OPTIN"),
    ("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a:", "PREFIX", "b:"),
    ("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a:x"),
    ("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "c:", "PREFIX", "c:d"),
    ("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "c:"), ("CLIENT", "TRACKINGINFO"),
    ("CLIENT", "TRACKING", "on"), ("CLIENT", "TRACKING", "off"),
    ("CLIENT", "TRACKING", "on", "bogus"), ("CLIENT", "TRACKING"),
    ("CLIENT", "CACHING"), ("CLIENT", "TRACKINGINFO", "x"), ("CLIENT", "GETREDIR", "x"),
]


@pytest.mark.parametrize("protocol", [2, 3])
def test_replies_are_a_nodes_own(conns, cluster, protocol):
    via = conns(protocol)
    direct = conns(protocol, port=cluster[0].port)
    for cmd in SEQUENCE:
        want = direct.call(*cmd).raw
        assert via.call(*cmd).raw == want, cmd


# REDIRECT: a RESP2 client subscribed to __redis__:invalidate hears of another client's
# reads as pub/sub messages, a RESP3 one as pushes; each connection's bytes compared with a
# standalone redis-server's (every key read here is cacheable, so the proxy's connections
# track it as the node would).
REDIRECT_SCENARIO = [
    ("sub", ("SUBSCRIBE", "__redis__:invalidate")),
    ("t", ("CLIENT", "TRACKING", "on", "REDIRECT", "$ID:sub")), ("t", ("GET", "k1")),
    ("t", ("CLIENT", "GETREDIR")), ("t", ("CLIENT", "TRACKINGINFO")),
    ("w", ("SET", "k1", "v")), ("w", ("SET", "k1", "v2")), ("t", ("GET", "k1")),
    ("t", ("HGET", "h", "f")), ("w", ("HSET", "h", "f", "v")),
    ("t", ("CLIENT", "TRACKING", "on", "OPTIN", "REDIRECT", "$ID:sub")),
    ("t", ("GET", "o1")), ("t", ("CLIENT", "CACHING", "yes")), ("t", ("GET", "o2")),
    ("w", ("SET", "o1", "1")), ("w", ("SET", "o2", "1")),
    ("t", ("CLIENT", "TRACKING", "off")), ("t", ("CLIENT", "GETREDIR")),
    ("t", ("CLIENT", "TRACKING", "on")),       # RESP2 without redirect: nothing is sent
    ("t", ("GET", "q")), ("w", ("SET", "q", "1")),
    ("r3", ("CLIENT", "TRACKING", "on", "REDIRECT", "$ID:sub")), ("r3", ("GET", "z")),
    ("w", ("SET", "z", "1")),
    ("r3", ("CLIENT", "TRACKING", "on", "REDIRECT", "$ID:s3")), ("r3", ("GET", "y")),
    ("w", ("SET", "y", "1")),
    ("r3", ("CLIENT", "TRACKING", "on", "REDIRECT", "$ID:w")), ("r3", ("GET", "x")),
    ("w", ("SET", "x", "1")),                  # a RESP2 target not subscribed: nothing
    ("t", ("CLIENT", "TRACKING", "on", "REDIRECT", "99999")),
    ("t", ("CLIENT", "TRACKING", "on", "REDIRECT", "abc")),
    ("t", ("CLIENT", "TRACKING", "on", "REDIRECT", "-1")),
    ("t", ("CLIENT", "TRACKING", "on", "REDIRECT", "$ID:sub", "REDIRECT", "$ID:w")),
    ("t", ("CLIENT", "TRACKING", "on", "REDIRECT", "99999", "BCAST", "OPTIN")),
    ("t", ("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "b:", "REDIRECT", "$ID:sub")),
    ("w", ("SET", "b:1", "1")),
    ("t", ("CLIENT", "TRACKINGINFO")),
]


NOLOOP_SCENARIO = [
    ("r3", ("CLIENT", "TRACKING", "on", "NOLOOP")), ("r3", ("GET", "a")),
    ("r3", ("SET", "a", "1")),                 # its own write: no push, and the record goes
    ("w", ("SET", "a", "2")),                  # so none for this one either
    ("r3", ("GET", "b")), ("w", ("SET", "b", "1")),   # another's write: a push
    ("r3", ("GET", "c")), ("s3", ("CLIENT", "TRACKING", "on")), ("s3", ("GET", "c")),
    ("r3", ("INCR", "c")),                     # the other reader hears of it, not the writer
    ("r3", ("HGET", "h", "f")), ("r3", ("HSET", "h", "f", "v")),
    ("r3", ("MGET", "m1", "m2")), ("r3", ("MSET", "m1", "1", "m2", "2"), SORTED),
    ("r3", ("GET", "d")), ("r3", ("DEL", "d")),       # nothing deleted, nothing said
    ("r3", ("GET", "d")), ("w", ("SET", "d", "1")),
    ("r3", ("GET", "e")), ("w", ("SET", "e", "1")), ("r3", ("GET", "e")),
    ("r3", ("DEL", "e")),
    ("r3", ("CLIENT", "TRACKINGINFO")),
]


@pytest.mark.parametrize("cache", ["no", "yes"])
def test_noloop_transcript_matches_redis(cluster, redis_ref, cache):
    # A proxy of its own: once a BCAST client made a thread's connections track in BCAST
    # mode, NOLOOP cannot tell a client's own writes apart there (see docs/compatibility.md).
    p = ProxyServer(["127.0.0.1:%d" % cluster[0].port],
                    ["--threads", "1", "--proxy-cache", cache])
    p.start()
    try:
        redis.Redis(port=redis_ref.port).flushall()
        p.client().flushall()
        assert_same(p.port, redis_ref.port, NOLOOP_SCENARIO, ("r3", "s3", "w"))
    finally:
        p.stop()


def test_noloop_reports_what_it_cannot_tell_apart(conns, cluster):
    """Writes that may change nothing (SET NX, a RESP2 client's or a transaction's write on a
    connection that does not track) are reported to a NOLOOP client: an invalidation too many,
    never one missing. And another client's write just before its own still reaches it."""
    t, w = conns(), conns()
    assert t.call("CLIENT", "TRACKING", "on", "NOLOOP").raw == b"+OK\r\n"
    t.call("GET", "nl:a")
    assert t.call("SET", "nl:a", "x", "NX").raw == b"+OK\r\n"
    assert next_push(t) == push(b"nl:a")
    t.call("GET", "{nl}b")
    t.call("MULTI")
    t.call("SET", "{nl}b", "1")
    t.call("EXEC")
    assert next_push(t) == push(b"{nl}b")
    for i in range(50):
        key = "nl:r%d" % i
        t.call("GET", key)
        node = owner(cluster, key).client()
        node.set(key, "other")      # another client's write, then its own
        t.send("SET", key, "own")
        got = {t.read_reply(DELIVERY_BOUND).raw for _ in range(2)}
        assert got == {b"+OK\r\n", push(key.encode())}
    quiet(t)


def test_redirect_transcript_matches_redis(proxy, cluster, redis_ref):
    redis.Redis(port=redis_ref.port).flushall()
    proxy.client().flushall()
    steps = REDIRECT_SCENARIO
    # The BCAST step needs the backend connections in BCAST mode before its write (see
    # sync_bcast): the transcript stops before it, and BCAST is checked below.
    cut = next(i for i, s in enumerate(steps) if "BCAST" in s[1] and "PREFIX" in s[1])
    assert_same(proxy.port, redis_ref.port, steps[:cut], ("r3", "s3", "sub", "t", "w"))


def test_redirected_null_invalidation_is_a_nodes(conns, proxy, redis_ref):
    """FLUSHALL: the target's null invalidation, its null in the tracking client's protocol
    (Redis's own choice), the same bytes as from a node (once per flushed node here)."""
    got = {}
    for port in (redis_ref.port, proxy.port):
        sub, s3 = conn(port, 2), conn(port, 3)
        sid, s3id = sub.call("CLIENT", "ID").value, s3.call("CLIENT", "ID").value
        sub.call("SUBSCRIBE", "__redis__:invalidate")
        t3, t2 = conn(port, 3), conn(port, 2)
        assert t3.call("CLIENT", "TRACKING", "on", "REDIRECT", sid).raw == b"+OK\r\n"
        assert t2.call("CLIENT", "TRACKING", "on", "REDIRECT", s3id).raw == b"+OK\r\n"
        t3.call("GET", "fl:a")
        t2.call("GET", "fl:b")
        redis.Redis(port=port).flushall()
        data = {}
        for name, c in (("sub", sub), ("s3", s3)):
            deadline = time.monotonic() + DELIVERY_BOUND
            d = b""
            while not d and time.monotonic() < deadline:
                d += c.pending(0.05)
            data[name] = d + c.pending(QUIET)
        got[port] = data
        for c in (sub, s3, t3, t2):
            c.sock.close()
    want = got[redis_ref.port]
    assert want == {"sub": b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n_\r\n",
                    "s3": b">2\r\n$10\r\ninvalidate\r\n$-1\r\n"}, want
    for name, frame in want.items():
        mine = got[proxy.port][name]
        assert mine and mine == frame * (len(mine) // len(frame)), (name, mine)


def test_redirect_bcast_and_other_channels(conns, cluster):
    sub, t, w = conns(2), conns(2), conns(2)
    sub_id = sub.call("CLIENT", "ID").value
    assert sub.call("SUBSCRIBE", "__redis__:invalidate", "news").raw.startswith(b"*3\r\n")
    sub.read_reply()
    assert t.call("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "rb:", "REDIRECT",
                  sub_id).raw == b"+OK\r\n"
    message = lambda keys: (b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n"
                            + (b"*%d\r\n" % len(keys))
                            + b"".join(b"$%d\r\n%s\r\n" % (len(k), k) for k in keys))
    # Once the backend connections report every node's rb: keys (each node's switch to
    # BCAST makes the proxy flush its BCAST clients: null messages meanwhile).
    null = b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n$-1\r\n"
    for node in cluster:
        key = key_on(cluster, node, "rb:probe").encode()
        deadline = time.monotonic() + DELIVERY_BOUND
        while True:
            assert time.monotonic() < deadline, "BCAST never reported %r" % key
            w.call("SET", key, "1")
            got = sub.pending(0.2)
            assert got.replace(message([key]), b"").replace(null, b"") == b"", got
            if message([key]) in got:
                break
    w.call("SET", "rb:x", "1")
    assert sub.pending(DELIVERY_BOUND) == message([b"rb:x"])
    # Other channels still reach the subscriber, from the nodes.
    cluster[1].client().publish("news", "hi")
    assert sub.read_reply(DELIVERY_BOUND).raw == b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n"
    quiet(sub)


def test_redirect_of_reads_nothing_tracks(conns, cluster):
    """A RESP2 client's reads that the node's tracking cannot cover (a reply the proxy would
    have to convert from RESP3; a transaction's) are invalidated to the target right after
    their replies: the client keeps none of them."""
    sub, t = conns(3), conns(2)
    sid = sub.call("CLIENT", "ID").value
    assert t.call("CLIENT", "TRACKING", "on", "REDIRECT", sid).raw == b"+OK\r\n"
    assert t.call("HGETALL", "nt:h").raw == b"*0\r\n"
    assert next_push(sub) == push(b"nt:h")
    t.call("MULTI")
    t.call("GET", "{nt}a")
    t.call("STRLEN", "{nt}b")
    assert t.call("EXEC").kind == "*"
    assert next_push(sub) == push(b"{nt}a", b"{nt}b")
    quiet(sub)
    quiet(t)


def test_broken_redirect(conns, proxy, redis_ref):
    """The target disconnects: at the next invalidation a RESP3 client is told, and
    TRACKINGINFO flags it, as on a node."""
    got = []
    for port in (redis_ref.port, proxy.port):
        target = conn(port, 2)
        tid = target.call("CLIENT", "ID").value
        c = conn(port, 3)
        assert c.call("CLIENT", "TRACKING", "on", "REDIRECT", tid).raw == b"+OK\r\n"
        c.call("GET", "br")
        target.sock.close()
        time.sleep(0.2)
        redis.Redis(port=port).set("br", "1")
        deadline = time.monotonic() + DELIVERY_BOUND
        pushed = b""
        while not pushed and time.monotonic() < deadline:
            pushed += c.pending(0.05)
        pushed += c.pending(QUIET)
        info = c.call("CLIENT", "TRACKINGINFO").raw.replace(b":%d\r\n" % tid, b":ID\r\n")
        getredir = c.call("CLIENT", "GETREDIR").value == tid
        got.append((pushed.replace(b":%d\r\n" % tid, b":ID\r\n"), info, getredir))
        c.sock.close()
    assert got[0][0] == b">2\r\n$21\r\ntracking-redir-broken\r\n:ID\r\n"
    assert b"broken_redirect" in got[0][1]
    assert got[1] == got[0]


@contextlib.contextmanager
def threaded_proxy(cluster, threads, connections):
    """A proxy of `threads` threads and `connections` RESP2 connections to it, each with its
    client id (ids tell the thread: (id - 1) % threads); all closed and stopped after."""
    p = ProxyServer(["127.0.0.1:%d" % cluster[0].port], ["--threads", str(threads)])
    p.start()
    opened = []
    try:
        for _ in range(connections):
            c = conn(p.port, 2)
            opened.append(c)
        yield [(c, c.call("CLIENT", "ID").value) for c in opened]
    finally:
        for c in opened:
            c.sock.close()
        p.stop()


def test_redirect_across_threads(cluster):
    """With several threads, a target is often served by another thread than its tracking
    client: the invalidation crosses over (and a target gone there breaks the redirect)."""
    with threaded_proxy(cluster, 4, 24) as pool:
        threads = {(cid - 1) % 4 for _, cid in pool}
        assert len(threads) > 1, "the kernel put every connection on one thread"
        sub, sid = pool[0]
        t, tid = next((c, i) for c, i in pool if (i - 1) % 4 != (sid - 1) % 4)
        w = pool[-1][0]
        assert sub.call("SUBSCRIBE", "__redis__:invalidate").kind == "*"
        assert t.call("CLIENT", "TRACKING", "on", "REDIRECT", sid).raw == b"+OK\r\n"
        for i in range(20):
            key = "xt:%d" % i
            t.call("GET", key)
            w.call("SET", key, i)
            want = (b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$%d\r\n%s\r\n"
                    % (len(key), key.encode()))
            assert sub.read_reply(DELIVERY_BOUND).raw == want
        # A RESP3 client of another thread than its target's: the target leaves.
        r3, rid = next((c, i) for c, i in pool[1:-1]
                       if (i - 1) % 4 != (sid - 1) % 4 and c is not t)
        assert r3.call("HELLO", "3").kind == "%"
        assert r3.call("CLIENT", "TRACKING", "on", "REDIRECT", sid).raw == b"+OK\r\n"
        r3.call("GET", "xt:gone")
        sub.sock.close()
        time.sleep(0.2)
        w.call("SET", "xt:gone", "1")
        assert next_push(r3) == b">2\r\n$21\r\ntracking-redir-broken\r\n:%d\r\n" % sid
        assert b"broken_redirect" in r3.call("CLIENT", "TRACKINGINFO").raw


def test_a_target_leaving_as_its_invalidation_crosses_over(cluster):
    """The target leaves just as an invalidation for it is on its way from another thread:
    whether the tracking client's thread still saw the target live (and posted the
    invalidation, which then finds it gone and comes back) or not, the client is told its
    redirect is broken, as a node tells it of the invalidation that found its target gone.
    (On a quiet machine the proxy mostly sees the close first; the post-then-gone order is
    the one a loaded machine brings.)"""
    with threaded_proxy(cluster, 2, 40) as pool:
        r3, rid = pool[0]
        w = pool[1][0]
        targets = [(c, i) for c, i in pool[2:] if (i - 1) % 2 != (rid - 1) % 2][:10]
        assert len(targets) >= 5, "the kernel put nearly every connection on one thread"
        assert r3.call("HELLO", "3").kind == "%"
        for n, (sub, sid) in enumerate(targets):
            assert sub.call("SUBSCRIBE", "__redis__:invalidate").kind == "*"
            assert r3.call("CLIENT", "TRACKING", "off").raw == b"+OK\r\n"
            assert r3.call("CLIENT", "TRACKING", "on", "REDIRECT", sid).raw == b"+OK\r\n"
            key = "xt:race:%d" % n
            r3.call("GET", key)
            # No pause: the write's invalidation races the proxy's sight of the close.
            sub.sock.close()
            w.call("SET", key, n)
            assert next_push(r3) == b">2\r\n$21\r\ntracking-redir-broken\r\n:%d\r\n" % sid, n


def test_default_mode(conns, proxy, cluster):
    t, w = conns(), conns()
    node_a, node_b = cluster[0], cluster[1]
    a, b = key_on(cluster, node_a, "t:a"), key_on(cluster, node_b, "t:b")
    direct_b = node_b.client()
    assert t.call("CLIENT", "TRACKING", "on").raw == b"+OK\r\n"
    assert t.call("GET", a).raw == b"_\r\n"
    # Another client's write through the proxy: one push; the key is then forgotten.
    assert w.call("SET", a, "1").raw == b"+OK\r\n"
    assert next_push(t) == push(a.encode())
    w.call("SET", a, "2")
    quiet(t)
    # A write made directly on the node.
    assert t.call("GET", b).raw == b"_\r\n"
    direct_b.set(b, "x")
    assert next_push(t) == push(b.encode())
    # Keys of several nodes in one read, each invalidated by its own node.
    t.call("MGET", a, b)
    w.call("DEL", a, b)
    got = {next_push(t), next_push(t)}
    assert got == {push(a.encode()), push(b.encode())}
    # Its own write: the push comes after the write's reply, as from a node.
    t.call("GET", a)
    assert t.call("SET", a, "own").raw == b"+OK\r\n"
    assert next_push(t) == push(a.encode())
    # Hashes and the like: the keys of any read-only command.
    assert t.call("HGET", "t:h", "f").raw == b"_\r\n"
    w.call("HSET", "t:h", "f", "v")
    assert next_push(t) == push(b"t:h")
    # Reads of a pipeline each record their key.
    for i in range(20):
        t.send_many([("GET", a), ("GET", b)])
        assert all(r.kind in "$_" for r in t.read_replies(2))
        w.send_many([("SET", a, i), ("SET", b, i)])
        w.read_replies(2)
        assert {next_push(t), next_push(t)} == {push(a.encode()), push(b.encode())}
    quiet(t)
    # Tracking off: nothing more.
    t.call("GET", a)
    assert t.call("CLIENT", "TRACKING", "off").raw == b"+OK\r\n"
    w.call("SET", a, "3")
    quiet(t)


def test_reads_on_connections_that_do_not_track_are_invalidated_at_once(conns, cluster):
    """A transaction runs on a backend connection of the client's own, which does not track:
    its reads are invalidated right after EXEC's reply, so the client keeps none of them."""
    t, w = conns(), conns()
    t.call("CLIENT", "TRACKING", "on")
    w.call("SET", "{m}a", "1")
    assert t.call("MULTI").raw == b"+OK\r\n"
    assert t.call("GET", "{m}a").raw == b"+QUEUED\r\n"
    assert t.call("STRLEN", "{m}b").raw == b"+QUEUED\r\n"
    assert t.call("EXEC").raw == b"*2\r\n$1\r\n1\r\n:0\r\n"
    assert next_push(t) == push(b"{m}a", b"{m}b")
    # DISCARD: nothing read, nothing said.
    t.call("MULTI")
    t.call("GET", "{m}a")
    assert t.call("DISCARD").raw == b"+OK\r\n"
    # Reads after WATCH go on that connection too.
    t.call("WATCH", "{m}a")
    assert t.call("GET", "{m}a").raw == b"$1\r\n1\r\n"
    assert next_push(t) == push(b"{m}a")
    t.call("UNWATCH")
    quiet(t)


def test_optin_and_optout(conns, cluster):
    t, w = conns(), conns()
    assert t.call("CLIENT", "TRACKING", "on", "OPTIN").raw == b"+OK\r\n"
    t.call("GET", "o:1")
    t.call("CLIENT", "CACHING", "yes")
    t.call("GET", "o:2")
    t.call("GET", "o:3")  # the flag covered one command
    for k in ("o:1", "o:2", "o:3"):
        w.call("SET", k, "1")
    assert next_push(t) == push(b"o:2")
    quiet(t)
    t2 = conns()
    assert t2.call("CLIENT", "TRACKING", "on", "OPTOUT").raw == b"+OK\r\n"
    t2.call("CLIENT", "CACHING", "no")
    t2.call("GET", "n:1")
    t2.call("GET", "n:2")
    w.call("SET", "n:1", "1")
    w.call("SET", "n:2", "1")
    assert next_push(t2) == push(b"n:2")
    quiet(t2)


def test_bcast(conns, cluster):
    t, w = conns(), conns()
    assert t.call("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "user:", "PREFIX",
                  "sess:").raw == b"+OK\r\n"
    sync_bcast(t, w, cluster, "user:")
    w.call("SET", "user:1", "a")
    assert next_push(t) == push(b"user:1")
    w.call("SET", "other", "d")
    # A write made directly on any node, never read through the proxy.
    for i, node in enumerate(cluster):
        key = key_on(cluster, node, "sess:%d:" % i)
        node.client().set(key, "direct")
        assert next_push(t) == push(key.encode())
    quiet(t)
    # A default-mode client of the same thread keeps its invalidations across the switch of
    # the backend connections to BCAST (at worst a null one: flush everything).
    d = conns()
    assert d.call("CLIENT", "TRACKING", "on").raw == b"+OK\r\n"
    d.call("GET", "user:9")
    w.call("SET", "user:9", "1")
    assert next_push(d) == push(b"user:9")
    assert next_push(t) == push(b"user:9")
    w.call("SET", "unread", "1")
    quiet(d)
    quiet(t)


def test_switching_to_bcast_flushes_default_mode_clients(cluster):
    """The first BCAST client of a thread whose connections tracked in default mode: those
    connections forget what they tracked, so the default-mode clients are told to flush."""
    p = ProxyServer(["127.0.0.1:%d" % cluster[0].port], ["--threads", "1"])
    p.start()
    try:
        d, t, w = conn(p.port), conn(p.port), conn(p.port)
        d.call("CLIENT", "TRACKING", "on")
        d.call("GET", "sw:k")
        t.call("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "sw:")
        assert next_push(d) == push(None)
        sync_bcast(t, w, cluster, "sw:")
        # Still tracked afterwards, once read again.
        d.call("GET", "sw:k")
        w.call("SET", "sw:k", "1")
        assert next_push(d) == push(b"sw:k")
        assert next_push(t) == push(b"sw:k")
        for c in (d, t, w):
            c.sock.close()
    finally:
        p.stop()


def test_null_invalidation_on_flush_and_on_a_lost_backend(conns, cluster):
    t = conns()
    t.call("CLIENT", "TRACKING", "on")
    t.call("GET", "f:1")
    # A node flushed directly: Redis sends every tracking client the null invalidation.
    for n in cluster:
        n.client().flushall()
    assert next_push(t) == push(None)
    drain_null_invalidations(t)
    # The proxy's backend connections killed: what they tracked is lost.
    assert t.call("GET", "f:1").kind == "_"
    node = owner(cluster, "f:1")
    node.client().execute_command("CLIENT", "KILL", "TYPE", "normal")
    assert next_push(t) == push(None)
    drain_null_invalidations(t)
    # Works again on the new connection.
    assert t.call("GET", "f:1").kind == "_"
    node.client().set("f:1", "x")
    data = b""
    deadline = time.monotonic() + DELIVERY_BOUND
    while push(b"f:1") not in data:
        assert time.monotonic() < deadline, data
        data += t.pending(0.05)


def test_resp2_tracking_gets_nothing_as_on_a_node(conns):
    t, w = conns(2), conns()
    assert t.call("CLIENT", "TRACKING", "on").raw == b"+OK\r\n"
    t.call("GET", "r2:k")
    w.call("SET", "r2:k", "1")
    assert t.pending(QUIET) == b""
    assert t.call("GET", "r2:k").raw == b"$1\r\n1\r\n"


def test_redis_py_client_side_cache(proxy, cluster):
    from redis.cache import CacheConfig
    cached = redis.Redis(port=proxy.port, protocol=3, cache_config=CacheConfig())
    other = redis.Redis(port=proxy.port)
    try:
        other.set("py:key", "v1")
        assert cached.get("py:key") == b"v1"
        assert cached.get_cache().size == 1
        node = owner(cluster, "py:key")
        calls = lambda: node.client().info("commandstats").get("cmdstat_get", {}).get("calls", 0)
        before = calls()
        for _ in range(5):
            assert cached.get("py:key") == b"v1"  # from redis-py's own cache
        assert calls() == before
        other.set("py:key", "v2")
        wait_for(lambda: cached.get("py:key") == b"v2", DELIVERY_BOUND, "invalidation")
        node.client().set("py:key", "v3")
        wait_for(lambda: cached.get("py:key") == b"v3", DELIVERY_BOUND, "direct write seen")
    finally:
        cached.close()
        other.close()
