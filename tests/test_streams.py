"""Streams over real connections: XREAD BLOCK (and XREADGROUP BLOCK) woken by XADD on the
key's shard, with keys on both shards of the 2-thread session server, RESP2 and RESP3.

Waits are bounded by deadlines (INFO's blocked_clients), never fixed sleeps."""

from __future__ import annotations

import re
import time

import pytest

import keyslot


def _pair_on_two_shards(prefix):
    a = next(f"{prefix}:a{i}" for i in range(100) if keyslot.shard(f"{prefix}:a{i}") == 0)
    b = next(f"{prefix}:b{i}" for i in range(100) if keyslot.shard(f"{prefix}:b{i}") == 1)
    return a, b


def _wait_blocked(conn, n):
    deadline = time.monotonic() + 5
    while f"blocked_clients:{n}\r\n".encode() not in conn.call("INFO", "clients").py():
        assert time.monotonic() < deadline, "clients never blocked"
        time.sleep(0.001)


def test_xread_block_is_woken_by_xadd_on_either_shard(raw):
    """A reader blocked on keys of both shards gets the entry of whichever key is written,
    and only entries after the `$` it blocked with."""
    a, b = _pair_on_two_shards("xrb")
    reader, writer = raw(), raw()
    for i, target in enumerate([a, b, a, b]):
        writer.call("DEL", a, b)
        writer.call("XADD", a, "1-1", "old", "x")
        reader.send("XREAD", "BLOCK", "0", "STREAMS", a, b, "$", "$")
        _wait_blocked(writer, 1)
        assert writer.call("XADD", target, f"{5 + i}-0", "f", str(i)).py() == f"{5 + i}-0".encode()
        got = reader.read_reply(5).py()
        assert got == [[target.encode(), [[f"{5 + i}-0".encode(), [b"f", str(i).encode()]]]]], got
    assert b"blocked_clients:0\r\n" in writer.call("INFO", "clients").py()


def test_xread_block_waiters_past_different_ids_are_all_served(raw):
    """Readers blocked past different ids: one waiting for a later id does not hold up the
    others (XADD serves every reader it can, in blocking order)."""
    a, _ = _pair_on_two_shards("xrw")
    early, late, writer = raw(), raw(), raw()
    writer.call("DEL", a)
    writer.call("XADD", a, "1-0", "f", "v")
    late.send("XREAD", "BLOCK", "0", "STREAMS", a, "10-0")
    _wait_blocked(writer, 1)
    early.send("XREAD", "BLOCK", "0", "STREAMS", a, "$")
    _wait_blocked(writer, 2)
    writer.call("XADD", a, "5-0", "f", "five")
    assert early.read_reply(5).py() == [[a.encode(), [[b"5-0", [b"f", b"five"]]]]]
    _wait_blocked(writer, 1)
    writer.call("XADD", a, "11-0", "f", "eleven")
    assert late.read_reply(5).py() == [[a.encode(), [[b"11-0", [b"f", b"eleven"]]]]]


def test_xread_block_times_out_with_a_null_array(raw):
    a, b = _pair_on_two_shards("xrt")
    c = raw()
    c.call("DEL", a, b)
    start = time.monotonic()
    assert c.call("XREAD", "BLOCK", "50", "STREAMS", a, b, "$", "$").raw == b"*-1\r\n"
    assert time.monotonic() - start >= 0.05
    c.call("HELLO", "3")
    assert c.call("XREAD", "BLOCK", "50", "STREAMS", a, "0").raw == b"_\r\n"


def test_xread_block_resp3_reply_is_a_map(raw):
    a, _ = _pair_on_two_shards("xr3")
    reader, writer = raw(), raw()
    reader.call("HELLO", "3")
    writer.call("DEL", a)
    reader.send("XREAD", "COUNT", "1", "BLOCK", "0", "STREAMS", a, "$")
    _wait_blocked(writer, 1)
    writer.call("XADD", a, "7-0", "f", "v")
    reply = reader.read_reply(5)
    assert reply.raw.startswith(b"%1\r\n"), reply.raw
    assert reply.py() == {a.encode(): [[b"7-0", [b"f", b"v"]]]}


def test_xread_block_ignores_writes_that_add_nothing_new(raw):
    """XDEL, XTRIM and XSETID signal the key but bring no entry past the id: the reader stays
    blocked until an XADD does."""
    a, _ = _pair_on_two_shards("xrn")
    reader, writer = raw(), raw()
    writer.call("DEL", a)
    writer.call("XADD", a, "1-0", "f", "v")
    reader.send("XREAD", "BLOCK", "0", "STREAMS", a, "$")
    _wait_blocked(writer, 1)
    writer.call("XDEL", a, "1-0")
    writer.call("XSETID", a, "3-0")
    assert b"blocked_clients:1\r\n" in writer.call("INFO", "clients").py()
    writer.call("XADD", a, "4-0", "f", "w")
    assert reader.read_reply(5).py() == [[a.encode(), [[b"4-0", [b"f", b"w"]]]]]


def test_xreadgroup_block_is_woken_by_xadd_on_either_shard(raw):
    """A consumer blocked with `>` on keys of both shards gets the new entry of whichever key
    is written; it is then pending for that consumer."""
    a, b = _pair_on_two_shards("xgb")
    reader, writer = raw(), raw()
    for i, target in enumerate([b, a]):
        writer.call("DEL", a, b)
        for k in (a, b):
            assert writer.call("XGROUP", "CREATE", k, "g", "$", "MKSTREAM").raw == b"+OK\r\n"
        reader.send("XREADGROUP", "GROUP", "g", "alice", "BLOCK", "0", "STREAMS", a, b, ">", ">")
        _wait_blocked(writer, 1)
        writer.call("XADD", target, f"{i + 1}-0", "f", "v")
        got = reader.read_reply(5).py()
        assert got == [[target.encode(), [[f"{i + 1}-0".encode(), [b"f", b"v"]]]]], got
        summary = writer.call("XPENDING", target, "g").py()
        assert summary[0] == 1 and summary[3] == [[b"alice", b"1"]], summary


def test_xreadgroup_block_one_entry_serves_one_consumer(raw):
    """Two consumers of one group blocked on a key: an XADD of one entry goes to the first
    that blocked; the second stays blocked until the next entry."""
    a, _ = _pair_on_two_shards("xg1")
    first, second, writer = raw(), raw(), raw()
    writer.call("DEL", a)
    writer.call("XGROUP", "CREATE", a, "g", "$", "MKSTREAM")
    first.send("XREADGROUP", "GROUP", "g", "c1", "BLOCK", "0", "STREAMS", a, ">")
    _wait_blocked(writer, 1)
    second.send("XREADGROUP", "GROUP", "g", "c2", "BLOCK", "0", "STREAMS", a, ">")
    _wait_blocked(writer, 2)
    writer.call("XADD", a, "1-0", "f", "one")
    assert first.read_reply(5).py() == [[a.encode(), [[b"1-0", [b"f", b"one"]]]]]
    _wait_blocked(writer, 1)
    writer.call("XADD", a, "2-0", "f", "two")
    assert second.read_reply(5).py() == [[a.encode(), [[b"2-0", [b"f", b"two"]]]]]


def test_xreadgroup_block_times_out_and_history_never_blocks(raw):
    a, _ = _pair_on_two_shards("xgt")
    c = raw()
    c.call("DEL", a)
    c.call("XGROUP", "CREATE", a, "g", "$", "MKSTREAM")
    assert c.call("XREADGROUP", "GROUP", "g", "c", "BLOCK", "30", "STREAMS", a, ">").raw == b"*-1\r\n"
    # An explicit id reads the consumer's history at once, even empty.
    got = c.call("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", a, "0").py()
    assert got == [[a.encode(), []]]


def test_memory_usage_of_a_stream_grows_with_its_entries(r):
    """MEMORY USAGE counts a stream's nodes (and its groups), a few tens of bytes per small
    entry; the lazy free path drops a big stream whole."""
    r.xadd("mu", {"f": "v"}, id="1-0")
    small = r.memory_usage("mu")
    for i in range(2, 10_002):
        r.xadd("mu", {"a": str(i), "b": "x" * 10}, id=f"{i}-0")
    big = r.memory_usage("mu")
    assert 10_000 * 10 < big - small < 10_000 * 60, (small, big)
    r.xgroup_create("mu", "g", id="0")
    r.xreadgroup("g", "c", {"mu": ">"}, count=5000)
    assert r.memory_usage("mu") > big + 5000 * 16
    assert r.delete("mu") == 1
    assert r.exists("mu") == 0


# ---- big XRANGE replies are streamed (crates/server/src/stream.rs) -------------------------

BIG_XRANGE = 200_000
# The byte-for-byte comparisons with redis-server need many reply steps (2048 entries each)
# and many stream nodes, not a reply bigger than the sockets' buffers: 30,000 entries give
# fifteen steps at a seventh of the time of 200,000 (the tests of other clients being served
# meanwhile keep BIG_XRANGE, which outgrows the loopback buffers).
BIG_SAME = 30_000


def _load_big_stream(conn, key, n=BIG_XRANGE):
    """The same `n` entries on any server: explicit ids (ms 1000 + i // 3, seq i % 3), a few
    field layouts (the node's master fields, others, integers and strings, an empty value),
    some entries deleted."""
    conn.call("DEL", key)
    batch = []
    for i in range(n):
        ms, seq = 1000 + i // 3, i % 3
        if i % 50 == 7:
            fields = ["other", f"x{i}", "n", str(-i), "e", ""]
        else:
            fields = ["name", f"user:{i}", "score", str(i * 7), "ok", "1" if i % 2 else "0"]
        batch.append(("XADD", key, f"{ms}-{seq}", *fields))
        if len(batch) == 2000:
            conn.send_many(batch)
            conn.read_replies(len(batch), timeout=30)
            batch = []
    dels = [f"{1000 + i // 3}-{i % 3}" for i in range(5, n, 997)]
    assert conn.call("XDEL", key, *dels).py() == len(dels)


_BIG_DUMP = {}


def _big_stream(conn, key):
    """The BIG_XRANGE-entry stream of `_load_big_stream` on a darner server, restored from a
    DUMP of the first one built (building it costs seconds of Python per key). For the tests
    that need a big reply, not a reply compared with redis-server's."""
    if "payload" in _BIG_DUMP:
        assert conn.call("RESTORE", key, "0", _BIG_DUMP["payload"], "REPLACE").py() == b"OK"
        return
    _load_big_stream(conn, key)
    _BIG_DUMP["payload"] = conn.call("DUMP", key).py()


def _raw_reply(conn, *cmd):
    """The exact bytes of one reply (a PING behind it marks its end; no value says PONG)."""
    conn.send_many([cmd, ("PING",)])
    got = bytearray(conn.reader.buf)
    conn.reader.buf = b""
    deadline = time.monotonic() + 60
    while not got.endswith(b"+PONG\r\n"):
        got += conn._recv_some(deadline)
    return bytes(got[: -len(b"+PONG\r\n")])


def test_a_big_xrange_is_byte_identical_to_redis(raw, redis_ref):
    """XRANGE / XREVRANGE / XREAD of 30,000 entries (streamed in steps by darner) answer the
    same bytes as redis-server for the same content: whole range, exclusive bounds, a COUNT
    that cuts inside a node, RESP2 and RESP3, on both shards."""
    ref = raw(redis_ref, timeout=60)
    _load_big_stream(ref, "bigx", BIG_SAME)
    for key in _pair_on_two_shards("bigx"):
        d = raw(timeout=60)
        _load_big_stream(d, key, BIG_SAME)
        ref.call("RENAME", "bigx", key)
        for proto in ("2", "3"):
            d.call("HELLO", proto)
            ref.call("HELLO", proto)
            for cmd in [
                ("XRANGE", key, "-", "+"),
                ("XREVRANGE", key, "+", "-"),
                ("XRANGE", key, "(1500-1", "+", "COUNT", "25001"),
                ("XREVRANGE", key, "(9000", "2000-2", "COUNT", "15000"),
                ("XREAD", "STREAMS", key, "1500-1"),
                ("XREAD", "COUNT", "25001", "STREAMS", key, "0"),
            ]:
                want = _raw_reply(ref, *cmd)
                got = _raw_reply(d, *cmd)
                assert len(got) == len(want) and got == want, (cmd, proto, len(got), len(want))
        ref.call("RENAME", key, "bigx")
        d.call("DEL", key)


@pytest.mark.parametrize("read", ["xrange", "xread"])
def test_other_clients_are_served_while_a_big_xrange_streams(raw, read):
    """While a 200,000-entry XRANGE (or XREAD of one key) streams to a client that has read
    only its first byte, other clients' commands on other keys of the same shard are
    answered; a write to the streamed key waits for the reply to end and is not in it (the
    reply is the stream as it was when the command ran, as Redis would give it)."""
    for key in _pair_on_two_shards("bigs"):
        c = raw(timeout=60)
        _big_stream(c, key)
        c.call("SET", key + ":other", "v")
        cmd = ("XRANGE", key, "-", "+") if read == "xrange" else ("XREAD", "STREAMS", key, "0")
        want = _raw_reply(c, *cmd)
        reader, other, writer = raw(timeout=60), raw(), raw()
        reader.send(*cmd)
        first = reader.read_raw(1)
        writer.send("XADD", key, "999999-0", "late", "1")
        # Served while the reply is produced in steps (the reader reads nothing meanwhile).
        for _ in range(20):
            assert other.call("GET", key + ":other").py() == b"v"
            assert other.call("PING").py() == b"PONG"
        # The write to the streamed key waits behind the stream: nothing yet.
        assert writer.pending(0.2) == b""
        rest = bytearray(reader.reader.buf)
        reader.reader.buf = b""
        deadline = time.monotonic() + 60
        while len(rest) < len(want) - 1:
            rest += reader._recv_some(deadline)
        assert first + bytes(rest) == want
        assert writer.read_reply(10).py() == b"999999-0"
        assert c.call("XLEN", key).py() == BIG_XRANGE - len(range(5, BIG_XRANGE, 997)) + 1
        c.call("DEL", key, key + ":other")


# ---- what a blocked XREAD / XREADGROUP gets when its key changes under it -----------------

def _version(conn):
    for line in conn.call("INFO", "server").py().decode().splitlines():
        if line.startswith("redis_version:"):
            return tuple(int(x) for x in line.split(":", 1)[1].split(".")[:2])
    return (0, 0)


def _blocked_then(server_conn, key, block, change, db="0"):
    """On one server: a client (in database `db`) blocks with `block` (a command naming
    `key`), then another runs each command of `change`; returns the blocked client's reply
    (raw bytes) and the replies of `change`."""
    reader, writer = server_conn(), server_conn()
    writer.call("SELECT", db)
    writer.call("DEL", key)
    writer.call("XADD", key, "666-0", "f", "v")
    writer.call("XGROUP", "CREATE", key, "g", "$")
    assert reader.call("SELECT", db).py() == b"OK"
    reader.send(*block)
    _wait_blocked(writer, 1)
    done = [writer.call(*c).raw for c in change]
    got = reader.read_reply(10).raw
    _wait_blocked(writer, 0)
    writer.call("SELECT", db)
    writer.call("DEL", key)
    return got, done


def _nogroup(key):
    return f"-NOGROUP No such key '{key}' or consumer group 'g' in XREADGROUP with GROUP option\r\n".encode()


UNBLOCKED_70 = b"-UNBLOCKED the stream key no longer exists\r\n"
NOGROUP_70 = b"-NOGROUP the consumer group this client was blocked on no longer exists\r\n"
WRONGTYPE = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"


def _group_cases(key):
    """(name, commands after the client blocked, Redis 7.2's reply, Redis 7.0's reply)."""
    return [
        ("del", [("DEL", key)], _nogroup(key), UNBLOCKED_70),
        ("set", [("SET", key, "x")], WRONGTYPE, UNBLOCKED_70),
        ("multi del sadd", [("MULTI",), ("DEL", key), ("SADD", key, "m"), ("EXEC",)],
         WRONGTYPE, UNBLOCKED_70),
        ("multi del xadd", [("MULTI",), ("DEL", key), ("XADD", key, "1-0", "f", "v"), ("EXEC",)],
         _nogroup(key), NOGROUP_70),
        ("flushall", [("FLUSHALL",)], _nogroup(key), UNBLOCKED_70),
        ("flushdb", [("FLUSHDB",)], _nogroup(key), UNBLOCKED_70),
        ("xgroup destroy", [("XGROUP", "DESTROY", key, "g")], _nogroup(key), NOGROUP_70),
    ]


@pytest.mark.parametrize("shard", [0, 1])
def test_blocked_xreadgroup_is_told_when_its_key_or_group_goes_as_redis_7_2(raw, redis_ref, shard):
    """A client blocked in XREADGROUP ... `>` whose key is deleted (DEL, FLUSHALL, FLUSHDB,
    replaced by a stream without the group), changes type (SET, MULTI DEL + SADD) or loses
    its group (XGROUP DESTROY) gets what Redis 7.2 answers when it runs the command again:
    NOGROUP or WRONGTYPE. Compared with redis-server: byte for byte where it is 7.2; the
    Debian 7.0 reference answers its own texts (checked as such, so a newer one is compared)."""
    key = _pair_on_two_shards("xgone")[shard]
    ref_is_72 = _version(raw(redis_ref)) >= (7, 2)
    block = ("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", key, ">")
    for name, change, want72, want70 in _group_cases(key):
        got, done = _blocked_then(raw, key, block, change)
        ref_got, ref_done = _blocked_then(lambda: raw(redis_ref), key, block, change)
        assert done == ref_done, name
        assert got == want72, (name, got)
        assert ref_got == (want72 if ref_is_72 else want70), (name, ref_got)


@pytest.mark.parametrize("shard", [0, 1])
def test_blocked_xreadgroup_across_swapdb_as_redis_7_2(raw, redis_ref, shard):
    """SWAPDB that takes a blocked XREADGROUP's stream away (nothing, or a list, in its
    place) ends the wait with NOGROUP or WRONGTYPE (Redis 7.2)."""
    key = _pair_on_two_shards("xswap")[shard]
    ref_is_72 = _version(raw(redis_ref)) >= (7, 2)
    block = ("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", key, ">")
    for other, want72 in [(None, _nogroup(key)), (("LPUSH", key, "e"), WRONGTYPE)]:
        for conn in (raw, lambda: raw(redis_ref)):
            c = conn()
            c.call("SELECT", "4")
            c.call("DEL", key)
            if other:
                c.call(*other)
        got, _ = _blocked_then(raw, key, block, [("SWAPDB", "4", "9")], db="9")
        ref_got, _ = _blocked_then(lambda: raw(redis_ref), key, block, [("SWAPDB", "4", "9")], db="9")
        assert got == want72, got
        if ref_is_72:
            assert ref_got == want72
        for conn in (raw, lambda: raw(redis_ref)):
            c = conn()
            c.call("SELECT", "4")
            c.call("DEL", key)


@pytest.mark.parametrize("shard", [0, 1])
def test_blocked_xread_waits_on_when_its_key_goes_or_changes_type_as_redis(raw, redis_ref, shard):
    """A blocked XREAD is not woken by DEL, SET, FLUSHALL or FLUSHDB of its key: it waits on,
    and the next entry added to a new stream at the name serves it. Same replies as
    redis-server (Redis 7.0 and 7.2 agree)."""
    key = _pair_on_two_shards("xrgone")[shard]
    block = ("XREAD", "BLOCK", "0", "STREAMS", key, "$")
    cases = [
        [("DEL", key)],
        [("SET", key, "x"), ("DEL", key)],
        [("FLUSHALL",)],
        [("FLUSHDB",)],
        [("XGROUP", "DESTROY", key, "g")],
    ]
    for change in cases:
        steps = change + [("XADD", key, "667-0", "f", "new")]
        got, done = _blocked_then(raw, key, block, steps)
        ref_got, ref_done = _blocked_then(lambda: raw(redis_ref), key, block, steps)
        assert (got, done) == (ref_got, ref_done), change
        assert b"667-0" in got and b"new" in got, (change, got)


def test_xread_and_xreadgroup_without_block_on_one_shard_skip_the_transaction(raw):
    """XREAD and XREADGROUP without BLOCK whose keys are on one shard run like GET (their
    single-shard form), not as transactions: while a big XRANGE streams on that shard (its
    reader reads nothing), they are answered at once on another key, where a transaction
    would wait for the shard's streams to end. With BLOCK they stay transactions and wait."""
    for key in _pair_on_two_shards("bigr"):
        side = next(f"{key}:side{i}" for i in range(100)
                    if keyslot.shard(f"{key}:side{i}") == keyslot.shard(key))
        c = raw(timeout=60)
        _big_stream(c, key)
        c.call("DEL", side)
        c.call("XGROUP", "CREATE", side, "g", "0", "MKSTREAM")
        c.call("XADD", side, "1-0", "f", "v")
        reader, other = raw(timeout=60), raw()
        reader.send_many([("XRANGE", key, "-", "+"), ("PING",)])
        reader.read_raw(1)
        assert other.call("XREAD", "COUNT", "5", "STREAMS", side, "0").py() == \
            [[side.encode(), [[b"1-0", [b"f", b"v"]]]]]
        assert other.call("XREADGROUP", "GROUP", "g", "c", "STREAMS", side, ">").py() == \
            [[side.encode(), [[b"1-0", [b"f", b"v"]]]]]
        assert other.call("XREADGROUP", "GROUP", "g", "c", "STREAMS", side, "0").py() == \
            [[side.encode(), [[b"1-0", [b"f", b"v"]]]]]
        assert other.call("XREADGROUP", "GROUP", "g", "c", "STREAMS", side, ">").raw == b"*-1\r\n"
        # They were answered while the stream still ran: a write of its key still waits.
        writer = raw()
        writer.send("XADD", key, "999999-0", "late", "1")
        assert writer.pending(0.2) == b""
        # A blocking form is a transaction: it waits for the stream, then answers.
        other.send("XREAD", "BLOCK", "1", "STREAMS", side, "0")
        assert other.pending(0.2) == b""
        tail, deadline = bytes(reader.reader.buf), time.monotonic() + 60
        while not tail.endswith(b"+PONG\r\n"):
            tail = (tail + reader._recv_some(deadline))[-16:]
        assert other.read_reply(30).py() == [[side.encode(), [[b"1-0", [b"f", b"v"]]]]]
        assert writer.read_reply(30).py() == b"999999-0"
        c.call("DEL", key, side)


# ---- big XREADGROUP, multi-key XREAD and XINFO STREAM FULL replies are streamed too ---------

def _mask_times(reply):
    """A reply with its millisecond timestamps (XINFO's seen-time, active-time and delivery
    times: the servers' clocks) replaced by T; every other integer is far smaller."""
    return re.sub(rb":1\d{12}\r\n", b":T\r\n", reply)


def _as_redis_70(reply):
    """An XINFO STREAM FULL reply as Redis 7.0 (the reference binary here) would shape it:
    consumers without 7.2's active-time; radix-tree-nodes masked (Darner's is an estimate,
    docs/compatibility.md)."""
    reply = re.sub(rb"\$11\r\nactive-time\r\n:(-?\d+|T)\r\n", b"", reply)
    reply = reply.replace(b"*10\r\n$4\r\nname\r\n", b"*8\r\n$4\r\nname\r\n")
    reply = reply.replace(b"%5\r\n$4\r\nname\r\n", b"%4\r\n$4\r\nname\r\n")
    return re.sub(rb"radix-tree-nodes\r\n:\d+\r\n", b"radix-tree-nodes\r\n:N\r\n", reply)


def _same_as_redis(ref, d, cmd):
    """`cmd`'s reply on darner (`d`) and redis-server (`ref`): the same bytes, delivery and seen
    times masked. XINFO STREAM FULL (7.2's shape here, 7.0's there) is compared in 7.0's shape,
    and byte for byte with the reply darner builds at once (inside MULTI/EXEC)."""
    want = _mask_times(_raw_reply(ref, *cmd))
    got = _raw_reply(d, *cmd)
    if cmd[:2] == ("XINFO", "STREAM") and len(cmd) > 3:
        d.send("MULTI")
        d.send(*cmd)
        at_once = _raw_reply(d, "EXEC")
        assert at_once == b"+OK\r\n+QUEUED\r\n*1\r\n" + got, cmd
        want, got = _as_redis_70(want), _as_redis_70(got)
    got = _mask_times(got)
    assert len(got) == len(want) and got == want, (cmd, len(got), len(want))


def _same_shard_pair(tag):
    """Two keys of one shard (a hashtag), for a multi-key read on one shard."""
    return f"{{{tag}}}a", f"{{{tag}}}b"


def _group_steps(key, g):
    """XREADGROUP reads of a 30,000-entry stream (each more than a streamed reply's 2048
    entries) and what they leave behind, for group `g`: `>` with a COUNT that cuts inside a
    node, entries deleted after delivery, the consumer's history (deleted ones as nulls), `>`
    without COUNT and NOACK for another consumer, then XPENDING and XINFO (times masked)."""
    dels = [f"{1000 + i // 3}-{i % 3}" for i in range(40, 30000, 101)]
    return [
        ("XGROUP", "CREATE", key, g, "0"),
        ("XREADGROUP", "GROUP", g, "c1", "COUNT", "25001", "STREAMS", key, ">"),
        ("XDEL", key, *dels),
        ("XREADGROUP", "GROUP", g, "c1", "STREAMS", key, "0"),
        ("XREADGROUP", "GROUP", g, "c1", "COUNT", "5000", "STREAMS", key, "1500-1"),
        ("XREADGROUP", "GROUP", g, "c2", "NOACK", "STREAMS", key, ">"),
        ("XREADGROUP", "GROUP", g, "c2", "STREAMS", key, ">"),
        ("XPENDING", key, g),
        ("XPENDING", key, g, "-", "+", "3", "c2"),
        ("XINFO", "GROUPS", key),
        ("XINFO", "STREAM", key, "FULL", "COUNT", "0"),
        ("XINFO", "STREAM", key, "FULL", "COUNT", "3000"),
        ("XINFO", "STREAM", key, "FULL"),
        ("XGROUP", "DESTROY", key, g),
    ]


def test_a_big_xreadgroup_and_its_effects_are_byte_identical_to_redis(raw, redis_ref):
    """XREADGROUP of more than 2048 entries (streamed in steps by darner, writing the group's
    PEL and last delivered id as it goes) answers the same bytes as redis-server, `>` (with and
    without COUNT, NOACK) and history reads (deleted entries as nulls), RESP2 and RESP3, on
    both shards; and leaves the same state: XPENDING, XINFO GROUPS and XINFO STREAM FULL (big,
    streamed too; delivery times masked) agree."""
    ref = raw(redis_ref, timeout=60)
    _load_big_stream(ref, "bigg", BIG_SAME)
    for key in _pair_on_two_shards("bigg"):
        d = raw(timeout=60)
        _load_big_stream(d, key, BIG_SAME)
        ref.call("COPY", "bigg", key)
        for proto in ("2", "3"):
            d.call("HELLO", proto)
            ref.call("HELLO", proto)
            for cmd in _group_steps(key, "g" + proto):
                _same_as_redis(ref, d, cmd)
            ref.call("DEL", key)
            ref.call("COPY", "bigg", key)
            _load_big_stream(d, key, BIG_SAME)
        ref.call("DEL", key)
        d.call("DEL", key)


def test_a_big_xread_of_several_keys_is_byte_identical_to_redis(raw, redis_ref):
    """XREAD of several keys of one shard answering more than 2048 entries (streamed in steps
    by darner, key after key) answers the same bytes as redis-server: all keys, a COUNT, keys
    with nothing to answer (missing, `$`, past the end) between them, RESP2 and RESP3, on
    both shards."""
    ref = raw(redis_ref, timeout=60)
    _load_big_stream(ref, "bigm", BIG_SAME)
    for tag in ("t1", "t3"):
        a, b = _same_shard_pair(tag)
        missing = f"{{{tag}}}none"
        assert keyslot.shard(a) == keyslot.shard(b) == keyslot.shard(missing)
        d = raw(timeout=60)
        _load_big_stream(d, a, BIG_SAME)
        d.call("COPY", a, b)
        d.call("XTRIM", b, "MAXLEN", "3000")
        ref.call("COPY", "bigm", a)
        ref.call("COPY", "bigm", b)
        ref.call("XTRIM", b, "MAXLEN", "3000")
        for proto in ("2", "3"):
            d.call("HELLO", proto)
            ref.call("HELLO", proto)
            for cmd in [
                ("XREAD", "STREAMS", a, b, "0", "0"),
                ("XREAD", "COUNT", "2500", "STREAMS", a, missing, b, "1500-1", "0", "0"),
                ("XREAD", "STREAMS", b, missing, a, "0", "0", "9000-1"),
                ("XREAD", "STREAMS", a, b, "$", "0"),
                ("XREAD", "STREAMS", b, a, "9000", "1-0"),
                ("XREAD", "COUNT", "100", "STREAMS", a, b, "0", "0"),
            ]:
                want = _raw_reply(ref, *cmd)
                got = _raw_reply(d, *cmd)
                assert len(got) == len(want) and got == want, (cmd, proto, len(got), len(want))
        ref.call("DEL", a, b)
        d.call("DEL", a, b)


def test_a_big_xinfo_stream_full_is_byte_identical_to_redis(raw, redis_ref):
    """XINFO STREAM FULL with COUNT 0 or a big COUNT (streamed in steps by darner: its entries,
    each group's PEL, each consumer's PEL) answers the same bytes as redis-server, without
    groups and with groups whose PELs are big (delivery times masked), RESP2 and RESP3."""
    ref = raw(redis_ref, timeout=60)
    _load_big_stream(ref, "bigi", BIG_SAME)
    for key in _pair_on_two_shards("bigi"):
        d = raw(timeout=60)
        _load_big_stream(d, key, BIG_SAME)
        ref.call("COPY", "bigi", key)
        setup = [
            ("XGROUP", "CREATE", key, "ga", "0"),
            ("XGROUP", "CREATE", key, "gb", "1500"),
            ("XGROUP", "CREATE", key, "empty", "$"),
            ("XREADGROUP", "GROUP", "ga", "x", "COUNT", "4000", "STREAMS", key, ">"),
            ("XREADGROUP", "GROUP", "ga", "y", "COUNT", "3000", "STREAMS", key, ">"),
            ("XREADGROUP", "GROUP", "gb", "x", "COUNT", "10", "STREAMS", key, ">"),
            ("XGROUP", "CREATECONSUMER", key, "gb", "idle"),
        ]
        for proto in ("2", "3"):
            d.call("HELLO", proto)
            ref.call("HELLO", proto)
            for cmd in [
                ("XINFO", "STREAM", key, "FULL", "COUNT", "0"),
                ("XINFO", "STREAM", key, "FULL", "COUNT", "20000"),
                *(setup if proto == "2" else []),
                ("XINFO", "STREAM", key, "FULL", "COUNT", "0"),
                ("XINFO", "STREAM", key, "FULL", "COUNT", "3500"),
                ("XINFO", "STREAM", key, "FULL", "COUNT", "-1"),
            ]:
                _same_as_redis(ref, d, cmd)
        ref.call("DEL", key)
        d.call("DEL", key)


def _tag_on(shard):
    return next(t for t in (f"q{i}" for i in range(100)) if keyslot.shard(f"{{{t}}}a") == shard)


def _big_read_case(c, case, a, b):
    """Sets up `case` on the 200,000-entry stream `a` (and `b`, a copy trimmed to 3000
    entries); returns the command and the exact reply it must give (RESP2)."""
    whole = _raw_reply(c, "XRANGE", a, "-", "+")
    as_read = b"*1\r\n*2\r\n$%d\r\n%s\r\n" % (len(a), a.encode()) + whole
    if case == "xread_keys":
        c.call("COPY", a, b)
        c.call("XTRIM", b, "MAXLEN", "3000")
        cmd = ("XREAD", "STREAMS", a, b, "0", "0")
        return cmd, _raw_reply(c, *cmd)
    c.call("XGROUP", "CREATE", a, "g", "0")
    if case == "xreadgroup":
        return ("XREADGROUP", "GROUP", "g", "c", "STREAMS", a, ">"), as_read
    assert _raw_reply(c, "XREADGROUP", "GROUP", "g", "c", "STREAMS", a, ">") == as_read
    if case == "xreadgroup_history":
        return ("XREADGROUP", "GROUP", "g", "c", "STREAMS", a, "0"), as_read
    cmd = ("XINFO", "STREAM", a, "FULL", "COUNT", "0")
    return cmd, _raw_reply(c, *cmd)


@pytest.mark.parametrize("case", ["xreadgroup", "xreadgroup_history", "xread_keys", "xinfo_full"])
def test_other_clients_are_served_while_a_big_group_read_or_info_streams(raw, case):
    """While a big XREADGROUP (`>`, or the consumer's history of 200,000 entries), XREAD of two
    keys or XINFO STREAM FULL COUNT 0 streams to a client that has read only its first byte,
    other clients' commands on another key of the same shard are answered; a write to a key
    it reads waits for the reply to end and is not in it. XREADGROUP's effect is whole when it
    ends: every entry pending once more, the late entry still new to the group."""
    for shard in (0, 1):
        tag = _tag_on(shard)
        a, b, other = f"{{{tag}}}a", f"{{{tag}}}b", f"{{{tag}}}other"
        c = raw(timeout=60)
        _big_stream(c, a)
        c.call("SET", other, "v")
        cmd, want = _big_read_case(c, case, a, b)
        n = c.call("XLEN", a).py()
        reader, writer = raw(timeout=60), raw()
        reader.send(*cmd)
        first = reader.read_raw(1)
        written = b if case == "xread_keys" else a
        writer.send("XADD", written, "999999-0", "late", "1")
        # Served while the reply is produced in steps (the reader reads nothing meanwhile).
        for _ in range(20):
            assert c.call("GET", other).py() == b"v"
            assert c.call("PING").py() == b"PONG"
        # The write to the streamed key waits behind the stream: nothing yet.
        assert writer.pending(0.2) == b""
        rest = bytearray(reader.reader.buf)
        reader.reader.buf = b""
        deadline = time.monotonic() + 60
        while len(rest) < len(want) - 1:
            rest += reader._recv_some(deadline)
        assert first + bytes(rest) == want
        assert writer.read_reply(10).py() == b"999999-0"
        if case.startswith("xreadgroup"):
            summary = c.call("XPENDING", a, "g").py()
            assert summary[0] == n and summary[3] == [[b"c", str(n).encode()]]
            times = 2 if case == "xreadgroup_history" else 1
            assert c.call("XPENDING", a, "g", "-", "+", "1").py()[0][3] == times
            assert c.call("XREADGROUP", "GROUP", "g", "c", "STREAMS", a, ">").py() == \
                [[a.encode(), [[b"999999-0", [b"late", b"1"]]]]]
        c.call("DEL", a, b, other)


def test_a_big_xreadgroup_whose_client_goes_away_still_delivers_every_entry(raw):
    """A client that sends a big XREADGROUP `>` and closes after the first byte of its reply:
    the command's effect is whole all the same (as Redis's, which runs at once), every entry
    pending for the consumer and the group's last delivered id the stream's last, though its
    reply was streamed and is no longer sent."""
    for shard in (0, 1):
        a = f"{{{_tag_on(shard)}}}a"
        c = raw(timeout=60)
        _big_stream(c, a)
        c.call("XGROUP", "CREATE", a, "g", "0")
        n = c.call("XLEN", a).py()
        last = c.call("XREVRANGE", a, "+", "-", "COUNT", "1").py()[0][0]
        reader = raw(timeout=60)
        reader.send("XREADGROUP", "GROUP", "g", "gone", "STREAMS", a, ">")
        reader.read_raw(1)
        reader.close()
        # The group is read to its end before anything else touches the key.
        assert c.call("XPENDING", a, "g").py() == [n, b"1000-0", last, [[b"gone", str(n).encode()]]]
        groups = c.call("XINFO", "GROUPS", a).py()
        # last-delivered-id, entries-read (every entry ever added), lag.
        assert (groups[0][7], groups[0][9], groups[0][11]) == (last, BIG_XRANGE, 0)
        c.call("DEL", a)


# ---- big XREAD / XREADGROUP over keys of both shards stream too (a transaction's parts) -----

def _pairs_across_shards(tag0, tag1):
    """Keys of both shards in an order that goes back and forth: a and c on shard 0, b on
    shard 1 (and a missing key of shard 1)."""
    t0, t1 = _tag_on(0), _tag_on(1)
    a, c = f"{{{t0}}}{tag0}a", f"{{{t0}}}{tag0}c"
    b, missing = f"{{{t1}}}{tag1}b", f"{{{t1}}}{tag1}none"
    assert keyslot.shard(a) == keyslot.shard(c) == 0
    assert keyslot.shard(b) == keyslot.shard(missing) == 1
    return a, b, c, missing


def _load_across(conn, a, b, c, src=None):
    """a: the 30,000-entry stream, b: a copy trimmed to 3000 entries, c: one of 100."""
    if src is None:
        _load_big_stream(conn, a, BIG_SAME)
    else:
        conn.call("COPY", src, a)
    conn.call("COPY", a, b)
    conn.call("XTRIM", b, "MAXLEN", "3000")
    conn.call("COPY", a, c)
    conn.call("XTRIM", c, "MAXLEN", "100")


def test_a_big_xread_over_both_shards_is_byte_identical_to_redis(raw, redis_ref):
    """XREAD of keys on both shards answering more than 2048 entries (each shard's big part
    streamed in steps there, key after key in argument order) answers the same bytes as
    redis-server: big and small keys on both shards, keys with nothing to answer between
    them, a COUNT, `$`, RESP2 and RESP3."""
    ref = raw(redis_ref, timeout=60)
    a, b, c, missing = _pairs_across_shards("xm", "xm")
    _load_big_stream(ref, "bigms", BIG_SAME)
    _load_across(ref, a, b, c, src="bigms")
    d = raw(timeout=60)
    _load_across(d, a, b, c)
    for proto in ("2", "3"):
        d.call("HELLO", proto)
        ref.call("HELLO", proto)
        for cmd in [
            ("XREAD", "STREAMS", a, b, "0", "0"),
            ("XREAD", "STREAMS", b, a, c, "0", "0", "0"),
            ("XREAD", "STREAMS", c, missing, a, b, "0", "0", "1500-1", "0"),
            ("XREAD", "COUNT", "2500", "STREAMS", a, missing, b, c, "1500-1", "0", "0", "0"),
            ("XREAD", "COUNT", "1500", "STREAMS", b, c, a, "0", "0", "0"),
            ("XREAD", "STREAMS", a, b, c, "$", "0", "9000"),
            ("XREAD", "STREAMS", b, a, "9000", "1-0"),
            ("XREAD", "STREAMS", a, b, a, "0", "0", "9000-2"),
            ("XREAD", "COUNT", "100", "STREAMS", a, b, "0", "0"),
        ]:
            want = _raw_reply(ref, *cmd)
            got = _raw_reply(d, *cmd)
            assert len(got) == len(want) and got == want, (cmd, proto, len(got), len(want))
    ref.call("DEL", a, b, c, "bigms")
    d.call("DEL", a, b, c)


def test_a_big_xreadgroup_over_both_shards_and_its_effects_are_byte_identical_to_redis(
    raw, redis_ref
):
    """XREADGROUP of keys on both shards answering more than 2048 entries (each big key's part
    streamed in steps on its shard, writing the PEL and last delivered id as it goes) answers
    the same bytes as redis-server: `>` with and without COUNT, NOACK, history reads (deleted
    entries as nulls), RESP2 and RESP3; and leaves the same state: XPENDING, XINFO GROUPS and
    XINFO STREAM FULL of each key (delivery times masked) agree."""
    ref = raw(redis_ref, timeout=60)
    a, b, c, _ = _pairs_across_shards("gm", "gm")
    _load_big_stream(ref, "bigmg", BIG_SAME)
    d = raw(timeout=60)
    _load_big_stream(d, "bigmg", BIG_SAME)
    for proto in ("2", "3"):
        for conn in (d, ref):
            conn.call("HELLO", proto)
            _load_across(conn, a, b, c, src="bigmg")
        dels = [f"{1000 + i // 3}-{i % 3}" for i in range(40, 30000, 101)]
        g = "g" + proto
        # (Every `>` read of a consumer new to a key finds entries there: Redis 7.0, the
        # reference here, does not create the consumer otherwise, 7.2 and darner do.)
        steps = [
            *[("XGROUP", "CREATE", k, g, "0") for k in (a, b, c)],
            ("XREADGROUP", "GROUP", g, "c1", "COUNT", "25001", "STREAMS", c, a, b, ">", ">", ">"),
            ("XDEL", a, *dels),
            ("XREADGROUP", "GROUP", g, "c1", "STREAMS", b, a, c, "0", "0", "0"),
            ("XREADGROUP", "GROUP", g, "c1", "COUNT", "5000", "STREAMS", a, b, "1500-1", "0"),
            ("XADD", b, "999990-0", "f", "v"),
            ("XREADGROUP", "GROUP", g, "c2", "NOACK", "STREAMS", b, a, ">", ">"),
            ("XADD", a, "999991-0", "f", "v"),
            ("XADD", b, "999991-0", "f", "v"),
            ("XREADGROUP", "GROUP", g, "c2", "STREAMS", a, b, ">", ">"),
            ("XREADGROUP", "GROUP", g, "c3", "STREAMS", a, b, c, "0", "0", "0"),
        ]
        for k in (a, b, c):
            steps += [
                ("XPENDING", k, g),
                ("XINFO", "GROUPS", k),
                ("XINFO", "STREAM", k, "FULL", "COUNT", "0"),
            ]
        for cmd in steps:
            _same_as_redis(ref, d, cmd)
        for k in (a, b, c):
            # Each pending entry's id, consumer and delivery count (its idle time is the
            # servers' clocks).
            pel = [
                [[e[0], e[1], e[3]] for e in conn.call("XPENDING", k, g, "-", "+", "40000").py()]
                for conn in (d, ref)
            ]
            assert pel[0] == pel[1], k
        for conn in (d, ref):
            conn.call("DEL", a, b, c)
    ref.call("DEL", "bigmg")
    d.call("DEL", "bigmg")


def _across_case(c, case, a, b, side):
    """Sets up `case` on the 200,000-entry stream `a` (shard 0) and `b` (shard 1, a copy
    trimmed to 3000 entries); returns the command (reading b, then a) and the exact reply it
    must give (RESP2): the two keys read one at a time, each alone on its shard."""
    c.call("COPY", a, b)
    c.call("XTRIM", b, "MAXLEN", "3000")
    if case == "xread":
        cmd = ("XREAD", "STREAMS", b, a, "0", "0")
        part = lambda k: _raw_reply(c, "XREAD", "STREAMS", k, "0")[len(b"*1\r\n"):]  # noqa: E731
        return cmd, b"*2\r\n" + part(b) + part(a)
    for k in (a, b):
        c.call("XGROUP", "CREATE", k, "g", "0")
    # The same groups on copies (other keys of the same shards) give the reply to expect.
    ca, cb = side(0, "copy"), side(1, "copy")
    c.call("COPY", a, ca)
    c.call("COPY", b, cb)
    if case == "xreadgroup_history":
        _raw_reply(c, "XREADGROUP", "GROUP", "g", "c", "STREAMS", b, a, ">", ">")
        _raw_reply(c, "XREADGROUP", "GROUP", "g", "c", "STREAMS", cb, ca, ">", ">")
        cmd = ("XREADGROUP", "GROUP", "g", "c", "STREAMS", b, a, "0", "0")
    else:
        cmd = ("XREADGROUP", "GROUP", "g", "c", "STREAMS", b, a, ">", ">")

    def part(k, name):
        r = _raw_reply(c, *cmd[:5], k, cmd[-1])[len(b"*1\r\n"):]
        head = b"*2\r\n$%d\r\n%s\r\n" % (len(k), k.encode())
        assert r.startswith(head)
        return b"*2\r\n$%d\r\n%s\r\n" % (len(name), name.encode()) + r[len(head):]

    want = b"*2\r\n" + part(cb, b) + part(ca, a)
    c.call("DEL", ca, cb)
    return cmd, want


@pytest.mark.parametrize("case", ["xread", "xreadgroup", "xreadgroup_history"])
def test_other_clients_are_served_while_a_big_read_over_both_shards_streams(raw, case):
    """While a big XREAD or XREADGROUP (`>`, or the consumer's history) of a key of each shard
    streams to a client that has read only its first byte, other clients' commands on other
    keys of both shards are answered, also while writes to both keys it reads wait for it
    (they wait aside, not in front of the shards' other work); the reply is the two keys'
    parts in argument order, the bytes Redis sends, without the writes. XREADGROUP's effect
    is whole when it ends: every entry of both keys pending (once more for a history
    read)."""
    t0, t1 = _tag_on(0), _tag_on(1)

    def side(shard, name):
        return f"{{{(t0, t1)[shard]}}}{name}"

    a, b = side(0, "a"), side(1, "b")
    c = raw(timeout=60)
    _big_stream(c, a)
    for shard in (0, 1):
        c.call("SET", side(shard, "other"), "v")
    cmd, want = _across_case(c, case, a, b, side)
    lens = [c.call("XLEN", k).py() for k in (a, b)]
    reader, writers = raw(timeout=60), [raw(), raw()]
    reader.send(*cmd)
    first = reader.read_raw(1)
    for w, k in zip(writers, (a, b)):
        w.send("XADD", k, "999999-0", "late", "1")
    # Served while the reply is produced in steps (the reader reads nothing meanwhile).
    for _ in range(20):
        for shard in (0, 1):
            assert c.call("GET", side(shard, "other")).py() == b"v"
        assert c.call("PING").py() == b"PONG"
    # The writes wait behind the read: nothing yet.
    for w in writers:
        assert w.pending(0.1) == b""
    rest = bytearray(reader.reader.buf)
    reader.reader.buf = b""
    deadline = time.monotonic() + 60
    while len(rest) < len(want) - 1:
        rest += reader._recv_some(deadline)
    assert first + bytes(rest) == want
    for w in writers:
        assert w.read_reply(10).py() == b"999999-0"
    if case.startswith("xreadgroup"):
        times = 2 if case == "xreadgroup_history" else 1
        for k, n in zip((a, b), lens):
            summary = c.call("XPENDING", k, "g").py()
            assert summary[0] == n and summary[3] == [[b"c", str(n).encode()]]
            assert c.call("XPENDING", k, "g", "-", "+", "1").py()[0][3] == times
    c.call("DEL", a, b, side(0, "other"), side(1, "other"))


@pytest.mark.parametrize("cmd_name", ["xread", "xreadgroup"])
@pytest.mark.parametrize("written", [0, 1])
def test_a_write_during_a_big_read_over_both_shards_lands_after_it(raw, cmd_name, written):
    """A write to one of the keys of a big XREAD / XREADGROUP over both shards, issued while
    the reply streams (its first byte read): it waits, is not in the reply (which is each key
    as it was when the command ran, the first part still streaming or the second not yet
    begun), and lands after it; a new entry of XREADGROUP's keys is still new to the group."""
    t0, t1 = _tag_on(0), _tag_on(1)
    a, b = f"{{{t0}}}wa", f"{{{t1}}}wb"
    c = raw(timeout=60)
    _big_stream(c, a)
    c.call("COPY", a, b)
    if cmd_name == "xread":
        cmd = ("XREAD", "STREAMS", a, b, "0", "0")
    else:
        for k in (a, b):
            c.call("XGROUP", "CREATE", k, "g", "0")
        cmd = ("XREADGROUP", "GROUP", "g", "c", "STREAMS", a, b, ">", ">")
    part = _raw_reply(c, "XRANGE", a, "-", "+")
    head = lambda k: b"*2\r\n$%d\r\n%s\r\n" % (len(k), k.encode())  # noqa: E731
    want = b"*2\r\n" + head(a) + part + head(b) + part
    key = (a, b)[written]
    reader, writer = raw(timeout=60), raw()
    reader.send(*cmd)
    first = reader.read_raw(1)
    writer.send("XADD", key, "999999-0", "late", "1")
    # The write waits behind the read: nothing yet.
    assert writer.pending(0.2) == b""
    rest = bytearray(reader.reader.buf)
    reader.reader.buf = b""
    deadline = time.monotonic() + 60
    while len(rest) < len(want) - 1:
        rest += reader._recv_some(deadline)
    assert first + bytes(rest) == want
    assert writer.read_reply(10).py() == b"999999-0"
    assert c.call("XRANGE", key, "999999", "+").py() == [[b"999999-0", [b"late", b"1"]]]
    if cmd_name == "xreadgroup":
        assert c.call("XREADGROUP", "GROUP", "g", "c", "STREAMS", key, ">").py() == \
            [[key.encode(), [[b"999999-0", [b"late", b"1"]]]]]
    c.call("DEL", a, b)
