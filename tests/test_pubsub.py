"""Pub/Sub against darner and redis-server: the same multi-connection scenarios, every byte
each connection receives compared; and redis-py's PubSub API on darner.

The transcripts are taken and compared by tests/transcript.py.
"""

from __future__ import annotations

import time

import pytest

from transcript import SORTED, assert_same

CONNS = ("a", "b", "c")

SCENARIO_RESP2 = [
    ("a", ("UNSUBSCRIBE",)), ("a", ("PUNSUBSCRIBE",)), ("a", ("SUNSUBSCRIBE",)),
    ("a", ("SUBSCRIBE", "c1", "c2", "c1")),
    ("a", ("GET", "x")), ("a", ("PING",)), ("a", ("PING", "hi")),
    ("a", ("PUBSUB", "NUMSUB", "c1", "zz")), ("a", ("SSUBSCRIBE", "s1")),
    ("b", ("PUBLISH", "c1", "m1")), ("b", ("PUBLISH", "nobody", "m")),
    ("b", ("PUBSUB", "NUMSUB", "c1", "c2", "zz")), ("b", ("PUBSUB", "NUMPAT")),
    ("b", ("PUBSUB", "SHARDCHANNELS")), ("b", ("PUBSUB", "SHARDCHANNELS", "s*")),
    ("b", ("PUBSUB", "SHARDNUMSUB", "s1", "s2")), ("b", ("PUBSUB", "CHANNELS", "c1")),
    ("b", ("PUBSUB", "CHANNELS", "zz*")), ("b", ("PUBSUB", "SHARDNUMSUB")),
    ("a", ("PSUBSCRIBE", "c*", "x?")), ("a", ("SPUBLISH", "s1", "hey")),
    ("b", ("PUBLISH", "c1", "m2")), ("b", ("SPUBLISH", "s1", "sm")),
    ("b", ("PUBLISH", "xy", "pat")), ("b", ("PUBLISH", "xyz", "none")),
    ("c", ("PSUBSCRIBE", "*")), ("b", ("PUBLISH", "c2", "two")),
    ("b", ("PUBSUB", "NUMPAT")),
    ("a", ("UNSUBSCRIBE", "c2")), ("a", ("PUNSUBSCRIBE", "x?", "nope")),
    ("a", ("SUNSUBSCRIBE",)), ("a", ("CLIENT", "LIST")),
    ("b", ("PUBLISH", "c2", "after")),
    ("a", ("PUNSUBSCRIBE",)), ("a", ("UNSUBSCRIBE",)), ("a", ("GET", "x")), ("a", ("PING",)),
    ("c", ("QUIT",)),
    ("b", ("PUBLISH", "c2", "gone")),
    ("b", ("SUBSCRIBE",)), ("b", ("PUBSUB",)), ("b", ("PUBSUB", "FOO")),
    ("b", ("PUBSUB", "NUMPAT", "x")), ("b", ("PUBSUB", "CHANNELS", "a", "b")),
    ("b", ("PUBLISH", "c1")), ("b", ("SPUBLISH", "c1")),
    ("b", ("MULTI",)), ("b", ("SUBSCRIBE", "q")), ("b", ("EXEC",)), ("b", ("PING",)),
    ("a", ("PUBLISH", "q", "to-b")),
    ("b", ("RESET",)), ("a", ("PUBSUB", "NUMSUB", "q")),
]

SCENARIO_RESP3 = [
    ("a", ("SUBSCRIBE", "c1", "c2")), ("a", ("GET", "x")), ("a", ("PING",)),
    # A message to the publisher itself: Redis 7.2 sends it after PUBLISH's reply, 7.0 (the
    # reference here) before; the order is checked in test_core_races.py.
    ("a", ("PUBSUB", "NUMSUB", "c1")), ("a", ("PUBLISH", "c1", "self"), SORTED),
    ("a", ("PSUBSCRIBE", "c*")), ("a", ("PUBLISH", "c1", "both"), SORTED),
    ("b", ("PUBLISH", "c2", "from-b")),
    ("a", ("MULTI",)), ("a", ("SUBSCRIBE", "q")), ("a", ("SET", "k", "v")), ("a", ("EXEC",)),
    ("b", ("PUBLISH", "q", "in-q")),
    ("a", ("SSUBSCRIBE", "s")), ("b", ("SPUBLISH", "s", "shard")),
    ("a", ("UNSUBSCRIBE", "c1", "q")), ("a", ("PUNSUBSCRIBE",)), ("a", ("SUNSUBSCRIBE", "s")),
    ("b", ("PUBLISH", "c2", "still")),
    ("a", ("UNSUBSCRIBE",)), ("a", ("UNSUBSCRIBE",)), ("b", ("PUBLISH", "c2", "nobody")),
]


@pytest.mark.parametrize("proto,steps", [(2, SCENARIO_RESP2), (3, SCENARIO_RESP3)], ids=["resp2", "resp3"])
def test_pubsub_transcript_matches_redis(proto, steps, darner, redis_ref):
    assert_same(darner.port, redis_ref.port, steps, CONNS, proto)


def test_redis_py_pubsub(darner):
    for proto in (2, 3):
        r = darner.client(protocol=proto)
        p = r.pubsub()
        p.subscribe("news")
        p.psubscribe("user:*")
        # Confirmations first.
        kinds = [p.get_message(timeout=2)["type"] for _ in range(2)]
        assert kinds == ["subscribe", "psubscribe"]
        assert r.publish("news", "hello") == 1
        assert r.publish("user:7", "hi") == 1
        m1 = p.get_message(timeout=2)
        m2 = p.get_message(timeout=2)
        assert (m1["type"], m1["channel"], m1["data"]) == ("message", b"news", b"hello")
        assert (m2["type"], m2["pattern"], m2["channel"], m2["data"]) == \
            ("pmessage", b"user:*", b"user:7", b"hi")
        assert r.pubsub_numsub("news") == [(b"news", 1)]
        assert r.pubsub_numpat() == 1
        assert set(r.pubsub_channels()) == {b"news"}
        p.unsubscribe()
        p.punsubscribe()
        p.get_message(timeout=2)
        p.get_message(timeout=2)
        assert r.publish("news", "x") == 0
        p.close()
        r.close()


def test_redis_py_threaded_listener_across_threads(darner):
    """A subscriber thread and 4 publishers (connections on both server threads)."""
    r = darner.client()
    p = r.pubsub()
    got = []
    p.subscribe(**{"jobs": lambda m: got.append(m["data"])})
    t = p.run_in_thread(sleep_time=0.01)
    try:
        pubs = [darner.client() for _ in range(4)]
        deadline = time.monotonic() + 2
        while r.pubsub_numsub("jobs") != [(b"jobs", 1)] and time.monotonic() < deadline:
            time.sleep(0.01)
        for i, c in enumerate(pubs):
            for j in range(50):
                assert c.publish("jobs", "%d-%d" % (i, j)) == 1
        deadline = time.monotonic() + 5
        while len(got) < 200 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(got) == 200
        for i in range(4):
            mine = [g for g in got if g.startswith(b"%d-" % i)]
            assert mine == [b"%d-%d" % (i, j) for j in range(50)]
    finally:
        t.stop()
        t.join(2)
        p.close()
