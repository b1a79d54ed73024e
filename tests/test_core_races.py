"""Ordering and race regressions found by outside test suites (issue 11, items 1-5).

Each test repeats its scenario over fresh connections: with `--threads 2` a connection lands
on either thread (SO_REUSEPORT) and a key on either shard, so the cross-thread cases are all
visited. Waits are bounded by deadlines, never fixed sleeps.
"""

from __future__ import annotations

import time

import pytest

import keyslot

TRIES = 30


def _push_keys(reply):
    """The keys of an `invalidate` push (None for a null invalidation)."""
    assert reply.kind == ">", reply
    v = reply.py()
    assert v[0] == b"invalidate", reply
    return v[1]


def _invalidated(conn, timeout=2.0):
    """Every key of the invalidation pushes that arrive within `timeout` (the first one
    waited for, the rest: whatever is already there shortly after)."""
    keys = list(_push_keys(conn.read_reply(timeout)) or [])
    rest = conn.pending(0.05)
    if rest:
        conn.reader.feed(rest)
        while True:
            r = conn.reader.get()
            if r is None:
                break
            keys += _push_keys(r) or []
    return keys


def test_bcast_covers_a_write_sent_right_after_ok(darner, raw):
    """Issue 11.1: every write that starts after CLIENT TRACKING's +OK is broadcast."""
    for i in range(TRIES):
        x, y = raw(), raw()
        x.call("HELLO", "3")
        ok = x.call("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "user:", "PREFIX", "sess:")
        assert ok.py() == b"OK"
        assert y.call("SET", f"user:{i}", "a").py() == b"OK"
        assert _invalidated(x) == [f"user:{i}".encode()], i
        x.close()
        y.close()


def test_a_second_tracking_on_adds_a_prefix_for_the_next_write(darner, raw):
    for i in range(TRIES):
        x, y = raw(), raw()
        x.call("HELLO", "3")
        assert x.call("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a:").py() == b"OK"
        assert x.call("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "b:").py() == b"OK"
        assert y.call("SET", f"b:{i}", "v").py() == b"OK"
        assert _invalidated(x) == [f"b:{i}".encode()], i
        x.close()
        y.close()


@pytest.mark.parametrize("mode", [(), ("OPTIN",), ("OPTOUT",), ("REDIRECT",)])
def test_default_modes_cover_a_write_right_after_the_read(darner, raw, mode):
    for i in range(TRIES):
        x, y = raw(), raw()
        x.call("HELLO", "3")
        target = x
        args = list(mode)
        if mode == ("REDIRECT",):
            target = raw()
            target.call("HELLO", "3")
            args = ["REDIRECT", target.call("CLIENT", "ID").py()]
        assert x.call("CLIENT", "TRACKING", "on", *args).py() == b"OK"
        if mode == ("OPTIN",):
            assert x.call("CLIENT", "CACHING", "yes").py() == b"OK"
        key = f"k:{i}:{'-'.join(map(str, mode))}"
        x.call("GET", key)
        assert y.call("SET", key, "v").py() == b"OK"
        assert _invalidated(target) == [key.encode()], i
        for c in {id(x): x, id(y): y, id(target): target}.values():
            c.close()


def test_bcast_client_gets_no_per_key_push_for_keys_read_before(darner, raw):
    """Issue 11.2: keys read in default mode, then OFF and ON BCAST: a later write sends only
    the broadcast message, not the old per-key invalidation as well."""
    x, y = raw(), raw()
    x.call("HELLO", "3")
    x.call("CLIENT", "TRACKING", "on")
    keys = [f"old:{i}".encode() for i in range(20)]
    for k in keys:
        x.call("GET", k)
    x.call("CLIENT", "TRACKING", "off")
    x.call("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "old:")
    for k in keys:
        y.call("SET", k, "v")
    got = []
    deadline = time.monotonic() + 5
    while sorted(got) != sorted(keys) and time.monotonic() < deadline:
        got += _invalidated(x)
    assert sorted(got) == sorted(keys)
    assert x.pending(0.3) == b""


def test_bcast_sends_a_transactions_keys_of_one_prefix_in_one_message(darner, raw):
    """Issue 11.2: what one MULTI/EXEC changes under one prefix (keys of one slot, so one
    shard) leaves in one message per prefix, as in Redis."""
    for i in range(TRIES):
        x, y = raw(), raw()
        x.call("HELLO", "3")
        x.call("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a:", "PREFIX", "b:")
        y.call("MULTI")
        for k in ("a:1{t}", "a:2{t}", "b:1{t}", "b:2{t}"):
            y.call("INCR", k)
        assert len(y.call("EXEC").py()) == 4
        first = sorted(_push_keys(x.read_reply(2)))
        second = sorted(_push_keys(x.read_reply(2)))
        assert sorted([first, second]) == [[b"a:1{t}", b"a:2{t}"], [b"b:1{t}", b"b:2{t}"]], i
        assert x.pending(0.05) == b""
        x.close()
        y.close()


def test_bcast_noloop_is_told_of_a_key_its_own_read_found_expired(darner, raw):
    """Issue 11.2: an expiry has no writer, so NOLOOP does not hide it (Redis sends one)."""
    x, y = raw(), raw()
    x.call("HELLO", "3")
    x.call("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    try:
        x.call("CLIENT", "TRACKING", "on", "BCAST", "NOLOOP", "PREFIX", "exp:")
        for i in range(10):
            k = f"exp:{i}"
            y.call("SET", k, "v", "PX", "1")
            assert _invalidated(x) == [k.encode()]
            time.sleep(0.005)
            assert x.call("GET", k).py() is None
            assert _invalidated(x) == [k.encode()], i
    finally:
        x.call("DEBUG", "SET-ACTIVE-EXPIRE", "1")


def test_tracking_table_max_keys_is_a_limit_for_the_whole_server(darner, raw):
    """Issue 11.2: with tracking-table-max-keys 1 one key stays tracked (not one per shard)."""
    x = raw()
    x.call("HELLO", "3")
    x.call("CLIENT", "TRACKING", "on")
    # Keys on both shards (the session server has two threads): enough names to be sure.
    keys = [f"m:{i}" for i in range(8)]
    for k in keys:
        x.call("GET", k)
    try:
        x.call("CONFIG", "SET", "tracking-table-max-keys", "1")
        got = []
        deadline = time.monotonic() + 5
        while len(got) < len(keys) - 1 and time.monotonic() < deadline:
            got += _invalidated(x, timeout=deadline - time.monotonic())
        assert len(got) == len(keys) - 1
        assert x.pending(0.5) == b""
        info = x.call("INFO", "stats").py().decode()
        assert "tracking_total_keys:1\r\n" in info
    finally:
        x.call("CONFIG", "SET", "tracking-table-max-keys", "1000000")


# ---- issue 11.4: transactions and expiry ----

@pytest.fixture
def no_active_expire(darner, raw):
    c = raw()
    c.call("FLUSHALL")
    c.call("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    try:
        yield c
    finally:
        c.call("DEBUG", "SET-ACTIVE-EXPIRE", "1")


def _expired_in_place(c, *keys):
    for k in keys:
        assert c.call("SET", k, "v", "PX", "1").py() == b"OK"
    time.sleep(0.01)


def _exec(c, *commands):
    assert c.call("MULTI").py() == b"OK"
    for cmd in commands:
        assert c.call(*cmd).py() == b"QUEUED"
    return c.call("EXEC").py()


@pytest.mark.parametrize("between", [None, "EXISTS", "FLUSHDB", "GET"])
def test_watch_of_a_key_already_expired_does_not_fail_exec(no_active_expire, between):
    c = no_active_expire
    for i in range(10):
        key = f"w:{i}"
        _expired_in_place(c, key)
        assert c.call("WATCH", key).py() == b"OK"
        if between == "FLUSHDB":
            c.call("FLUSHDB")
        elif between:
            c.call(between, key)
        assert _exec(c, ("SET", f"other:{i}", "x")) == [b"OK"], (between, i)


def test_watch_of_a_live_key_that_expires_before_exec_fails_it(no_active_expire):
    c = no_active_expire
    c.call("SET", "live", "v", "PX", "50")
    assert c.call("WATCH", "live").py() == b"OK"
    time.sleep(0.1)
    assert _exec(c, ("SET", "other", "x")) is None


def test_watch_of_an_expired_key_set_again_fails_exec(no_active_expire, raw):
    c = no_active_expire
    _expired_in_place(c, "again")
    assert c.call("WATCH", "again").py() == b"OK"
    assert raw().call("SET", "again", "new").py() == b"OK"
    assert _exec(c, ("GET", "again")) is None


def test_the_clock_stands_still_inside_exec(darner, raw):
    c = raw()
    for i in range(3):
        key = f"frozen:{i}"
        got = _exec(c, ("SET", key, "v", "PX", "1"), ("DEBUG", "SLEEP", "0.05"), ("GET", key))
        assert got == [b"OK", b"OK", b"v"]
        assert c.call("GET", key).py() is None


def _scan_all(c, *options):
    cursor, seen = b"0", []
    while True:
        cursor, batch = c.call("SCAN", cursor, "COUNT", 1000, *options).py()
        seen += batch
        if cursor == b"0":
            return seen


@pytest.mark.parametrize("options", [(), ("TYPE", "string"), ("MATCH", "e:*")])
def test_scan_deletes_the_expired_keys_it_visits(no_active_expire, options):
    c = no_active_expire
    _expired_in_place(c, *[f"e:{i}" for i in range(20)])
    c.call("SET", "kept", "1")
    assert c.call("DBSIZE").py() == 21
    seen = _scan_all(c, *options)
    assert all(not k.startswith(b"e:") for k in seen)
    assert c.call("DBSIZE").py() == 1


def test_scan_leaves_expired_keys_its_pattern_does_not_match(no_active_expire):
    c = no_active_expire
    _expired_in_place(c, *[f"x:{i}" for i in range(10)])
    _scan_all(c, "MATCH", "nomatch*")
    assert c.call("DBSIZE").py() == 10


# ---- issue 11.3: Pub/Sub replies ----

def _reply_off_transcript(server, proto):
    x, y = server.raw(), server.raw()
    try:
        x.call("HELLO", proto)
        out = []
        for mode in ("OFF", "SKIP"):
            x.send("CLIENT", "REPLY", mode)
            x.send("SUBSCRIBE", "c1", "c2")
            x.send("PSUBSCRIBE", "p*")
            x.send("SSUBSCRIBE", "s1")
            out.append(x.pending(0.3))
            y.call("PUBLISH", "c1", "m")
            out.append(x.pending(0.3))
            x.send("UNSUBSCRIBE", "c1", "c2")
            x.send("PUNSUBSCRIBE")
            x.send("SUNSUBSCRIBE", "s1")
            x.send("UNSUBSCRIBE")  # with nothing subscribed
            out.append(x.pending(0.3))
            x.send("CLIENT", "REPLY", "ON")
            out.append(x.pending(0.3))
        return out
    finally:
        x.close()
        y.close()


@pytest.mark.parametrize("proto", ["2", "3"])
def test_subscribe_confirmations_are_sent_under_client_reply_off_and_skip(darner, redis_ref, proto):
    got = _reply_off_transcript(darner, proto)
    assert got == _reply_off_transcript(redis_ref, proto)
    assert got[0].count(b"subscribe") == 4


def _push(*items):
    return b">%d\r\n" % len(items) + b"".join(b"$%d\r\n%s\r\n" % (len(i), i) for i in items)


@pytest.mark.darner_only
def test_a_message_to_the_publisher_follows_publish_reply(darner, raw):
    """Redis 7.2: the push of a message a RESP3 client publishes to itself comes after
    PUBLISH's reply, and after EXEC's whole reply inside MULTI (7.0 put it before)."""
    x = raw()
    x.call("HELLO", "3")
    x.call("SUBSCRIBE", "self")
    x.send("PUBLISH", "self", "hello")
    assert x.read_raw(len(b":1\r\n") + len(_push(b"message", b"self", b"hello"))) == (
        b":1\r\n" + _push(b"message", b"self", b"hello"))
    x.send("MULTI")
    x.send("PUBLISH", "self", "a")
    x.send("PUBLISH", "self", "b")
    x.send("EXEC")
    want = (b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n:1\r\n:1\r\n"
            + _push(b"message", b"self", b"a") + _push(b"message", b"self", b"b"))
    assert x.read_raw(len(want)) == want
    assert x.pending(0.1) == b""


# ---- issue 11.5: a write's reply leaves after what it woke ----

def _pair_on_two_shards(prefix):
    """A source and a destination key in different shards of a 2-thread server."""
    src = f"{prefix}:src"
    for i in range(100):
        dst = f"{prefix}:dst{i}"
        if keyslot.shard(src) != keyslot.shard(dst):
            return src, dst
    raise AssertionError("no pair")


@pytest.mark.parametrize("command", ["BLMOVE", "BRPOPLPUSH"])
def test_a_served_move_across_shards_is_done_before_the_writers_reply(darner, raw, command):
    """A WATCH on the destination taken after the push's reply must not see the move land
    later (Redis: the blocked client is served before the writer's reply is sent)."""
    src, dst = _pair_on_two_shards(command.lower())
    blocked, writer = raw(), raw()
    failures = 0
    for i in range(60):
        writer.call("DEL", src, dst)
        if command == "BLMOVE":
            blocked.send("BLMOVE", src, dst, "LEFT", "RIGHT", "0")
        else:
            blocked.send("BRPOPLPUSH", src, dst, "0")
        # Wait until the client is blocked (INFO blocked_clients), then push.
        deadline = time.monotonic() + 5
        while b"blocked_clients:1\r\n" not in writer.call("INFO", "clients").py():
            assert time.monotonic() < deadline
            time.sleep(0.001)
        assert writer.call("LPUSH", src, f"v{i}").py() == 1
        writer.call("WATCH", dst)
        assert writer.call("LRANGE", dst, "0", "-1").py() == [f"v{i}".encode()], i
        writer.call("MULTI")
        writer.call("LLEN", dst)
        if writer.call("EXEC").py() is None:
            failures += 1
        assert blocked.read_reply(5).py() == f"v{i}".encode()
    assert failures == 0


@pytest.mark.parametrize("how", ["EXEC", "RPOPLPUSH"])
def test_clients_a_transaction_woke_are_served_before_its_reply(darner, raw, how):
    """Inside MULTI/EXEC (and a multi-key command holding its shards) the blocked clients the
    writes woke are served before the reply, also a BLMOVE into another shard: the commands
    pipelined right behind it see the moves done."""
    src, dst = _pair_on_two_shards("tx" + how)
    feed = next(f"feed{i}" for i in range(100) if keyslot.shard(f"feed{i}") != keyslot.shard(src))
    blocked, popper, writer = raw(), raw(), raw()
    for i in range(40):
        writer.call("DEL", src, dst, "plain")
        blocked.send("BLMOVE", src, dst, "LEFT", "RIGHT", "0")
        popper.send("BLPOP", "plain", "0")
        deadline = time.monotonic() + 5
        while b"blocked_clients:2\r\n" not in writer.call("INFO", "clients").py():
            assert time.monotonic() < deadline
            time.sleep(0.001)
        if how == "EXEC":
            writer.send_many([("MULTI",), ("LPUSH", src, f"v{i}"), ("LPUSH", "plain", "p"),
                              ("EXEC",), ("LRANGE", dst, "0", "-1"), ("LLEN", "plain")])
            replies = [r.py() for r in writer.read_replies(6)]
            assert replies[3] == [1, 1]
        else:
            # RPOPLPUSH between two shards holds both, like a transaction.
            writer.call("RPUSH", feed, f"v{i}")
            writer.send_many([("RPOPLPUSH", feed, src), ("LRANGE", dst, "0", "-1")])
            replies = [r.py() for r in writer.read_replies(2)]
            writer.call("LPUSH", "plain", "p")
            replies += [writer.call("LLEN", "plain").py()]
        assert replies[-2:] == [[f"v{i}".encode()], 0], (i, replies)
        assert blocked.read_reply(5).py() == f"v{i}".encode()
        assert popper.read_reply(5).py() == [b"plain", b"p"]
