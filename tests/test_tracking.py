"""Client-side caching (CLIENT TRACKING) against darner and redis-server: the same
multi-connection scenarios, every byte each connection receives compared (tests/transcript.py),
and redis-py's client-side cache on darner.

Connections: r3 (RESP3, the tracking client in most scenarios), sub (RESP2, a redirect
target subscribed to __redis__:invalidate), t (RESP2 tracking client), w (a writer).
Steps whose invalidations come from keys on different shards compare as multisets (SORTED):
each shard sends its own, so their order across shards differs from Redis's.
"""

from __future__ import annotations

import time

import pytest
import redis

from transcript import SORTED, assert_same

NAMES = ("r3", "sub", "t", "w")

SCENARIOS = {
    "default_mode": [
        ("r3", ("CLIENT", "TRACKING", "on")), ("r3", ("GET", "a")),
        ("w", ("INCR", "a")),                      # another client's write: one push
        ("w", ("INCR", "a")),                      # the key is forgotten: no second push
        ("r3", ("GET", "a")), ("r3", ("GET", "b")),
        ("r3", ("SET", "a", "1")),                 # own write: push after the reply
        ("r3", ("GET", "a")), ("w", ("DEL", "a", "b"), SORTED),
        ("r3", ("MGET", "x", "y")), ("w", ("MSET", "x", "1", "y", "2"), SORTED),
        ("r3", ("HGET", "h", "f")), ("w", ("HSET", "h", "f", "v")),
        ("r3", ("LRANGE", "l", "0", "-1")), ("w", ("RPUSH", "l", "1")),
        ("r3", ("GET", "e")), ("w", ("SET", "e", "1", "PX", "1")),
        ("r3", ("GET", "n")), ("w", ("SET", "n", "1")), ("r3", ("GET", "n")),
        ("r3", ("FLUSHDB",)),                      # null invalidation after the reply
        ("w", ("SET", "n", "2")),                  # nothing: the flush forgot every key
        ("r3", ("CLIENT", "TRACKINGINFO")), ("r3", ("CLIENT", "GETREDIR")),
        ("r3", ("CLIENT", "TRACKING", "off")), ("r3", ("CLIENT", "TRACKINGINFO")),
    ],
    "in_multi": [
        ("r3", ("CLIENT", "TRACKING", "on")),
        ("r3", ("MULTI",)), ("r3", ("GET", "k1")), ("r3", ("PTTL", "k2")), ("r3", ("EXEC",)),
        ("w", ("SET", "k1", "v")), ("w", ("SET", "k2", "v")),
        ("r3", ("MULTI",)), ("r3", ("GET", "k1")), ("r3", ("SET", "k1", "own")), ("r3", ("EXEC",)),
        ("w", ("SET", "k1", "again")),
    ],
    "noloop": [
        ("r3", ("CLIENT", "TRACKING", "on", "NOLOOP")), ("r3", ("GET", "a")),
        ("r3", ("SET", "a", "1")), ("w", ("SET", "a", "2")),
        ("r3", ("GET", "b")), ("w", ("SET", "b", "1")),
        ("r3", ("CLIENT", "TRACKINGINFO")),
    ],
    "optin": [
        ("r3", ("CLIENT", "TRACKING", "on", "OPTIN")), ("r3", ("GET", "o1")),
        ("r3", ("CLIENT", "CACHING", "yes")), ("r3", ("CLIENT", "TRACKINGINFO")),
        ("r3", ("GET", "o2")), ("r3", ("GET", "o3")),
        ("w", ("SET", "o1", "1")), ("w", ("SET", "o2", "1")), ("w", ("SET", "o3", "1")),
        # The flag covers a whole transaction (rueidis: CACHING YES, MULTI, PTTL, GET, EXEC).
        ("r3", ("CLIENT", "CACHING", "yes")), ("r3", ("MULTI",)), ("r3", ("PTTL", "m1")),
        ("r3", ("GET", "m1")), ("r3", ("EXEC",)), ("r3", ("GET", "m2")),
        ("w", ("SET", "m1", "1")), ("w", ("SET", "m2", "1")),
        ("r3", ("CLIENT", "CACHING", "no")), ("r3", ("CLIENT", "CACHING", "maybe")),
    ],
    "optout": [
        ("r3", ("CLIENT", "TRACKING", "on", "OPTOUT")), ("r3", ("CLIENT", "CACHING", "no")),
        ("r3", ("GET", "n1")), ("r3", ("GET", "n2")),
        ("w", ("SET", "n1", "1")), ("w", ("SET", "n2", "1")),
        ("r3", ("CLIENT", "CACHING", "yes")), ("r3", ("CLIENT", "TRACKINGINFO")),
    ],
    "bcast": [
        ("r3", ("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "user:", "PREFIX", "sess:")),
        ("w", ("SET", "user:1", "a")), ("w", ("SET", "sess:9", "c")), ("w", ("SET", "other", "d")),
        ("r3", ("SET", "user:3", "x")),
        ("r3", ("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "user:1")),
        ("r3", ("CLIENT", "TRACKING", "on", "BCAST", "NOLOOP")),
        ("r3", ("SET", "user:4", "x")), ("w", ("SET", "user:5", "x")),
        ("r3", ("CLIENT", "TRACKINGINFO")), ("r3", ("CLIENT", "TRACKING", "off")),
        ("w", ("SET", "user:6", "x")),
    ],
    "redirect_resp2": [
        ("sub", ("SUBSCRIBE", "__redis__:invalidate")),
        ("t", ("CLIENT", "TRACKING", "on", "REDIRECT", "$ID:sub")), ("t", ("GET", "k1")),
        ("t", ("CLIENT", "GETREDIR")), ("t", ("CLIENT", "LIST", "ID", "$ID:t")),
        ("w", ("SET", "k1", "v")), ("t", ("GET", "k1")), ("t", ("FLUSHALL",)),
        ("t", ("CLIENT", "TRACKING", "off")),
        ("t", ("CLIENT", "TRACKING", "on")),       # RESP2 without redirect: nothing is sent
        ("t", ("GET", "q")), ("w", ("SET", "q", "1")),
        ("r3", ("CLIENT", "TRACKING", "on", "REDIRECT", "$ID:sub")), ("r3", ("GET", "z")),
        ("w", ("SET", "z", "1")),
    ],
    "redirect_flush_null": [
        # A flush's null invalidation is written in the tracking client's protocol, whatever
        # the redirect target's (Redis's trackingInvalidateKeysOnFlush).
        ("sub", ("SUBSCRIBE", "__redis__:invalidate")),
        ("r3", ("CLIENT", "TRACKING", "on", "REDIRECT", "$ID:sub")), ("r3", ("GET", "k1")),
        ("w", ("FLUSHALL",)),                      # sub's message ends in RESP3's null
        ("r3", ("CLIENT", "TRACKING", "off")),
        ("t", ("CLIENT", "TRACKING", "on", "REDIRECT", "$ID:r3")), ("t", ("GET", "k2")),
        ("w", ("FLUSHALL",)),                      # r3's push ends in RESP2's null
    ],
    "errors": [
        ("t", ("CLIENT", "TRACKING", "on", "PREFIX", "x")),
        ("t", ("CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT")),
        ("t", ("CLIENT", "TRACKING", "on", "BCAST", "OPTIN")),
        ("t", ("CLIENT", "TRACKING", "on", "REDIRECT", "99999")),
        ("t", ("CLIENT", "TRACKING", "on", "REDIRECT", "abc")),
        ("t", ("CLIENT", "TRACKING", "on", "REDIRECT", "$ID:sub", "REDIRECT", "$ID:w")),
        ("t", ("CLIENT", "TRACKING", "on", "FOO")), ("t", ("CLIENT", "TRACKING", "maybe")),
        ("t", ("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "ab", "PREFIX", "abc")),
        ("t", ("CLIENT", "TRACKING")), ("t", ("CLIENT", "CACHING", "yes")),
        ("t", ("CLIENT", "GETREDIR")), ("t", ("CLIENT", "TRACKINGINFO")),
        ("t", ("CLIENT", "TRACKING", "on", "OPTIN")),
        ("t", ("CLIENT", "TRACKING", "on", "OPTOUT")),
        ("t", ("CLIENT", "TRACKING", "on", "BCAST")),
        ("t", ("CLIENT", "CACHING", "no")),
        ("t", ("CLIENT", "TRACKING", "off")),
        ("t", ("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a")),
        ("t", ("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "ab")),
        ("t", ("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "b", "NOLOOP")),
        ("t", ("CLIENT", "TRACKINGINFO")), ("t", ("CLIENT", "INFO")),
        ("t", ("RESET",)), ("t", ("CLIENT", "TRACKINGINFO")),
    ],
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_tracking_transcript_matches_redis(name, darner, redis_ref):
    for port in (darner.port, redis_ref.port):
        redis.Redis(port=port).flushall()
    assert_same(darner.port, redis_ref.port, SCENARIOS[name], NAMES)


def test_broken_redirect(darner, redis_ref):
    """The redirect target disconnects: the tracking client is told, and flagged R."""
    from resp_reader import RawConn
    for port in (darner.port, redis_ref.port):
        target = RawConn(port=port)
        tid = target.call("CLIENT", "ID").py()
        c = RawConn(port=port)
        assert not c.call("HELLO", "3").is_error
        assert c.call("CLIENT", "TRACKING", "on", "REDIRECT", str(tid)).raw == b"+OK\r\n"
        c.call("GET", "br")
        target.close()
        time.sleep(0.1)
        redis.Redis(port=port).set("br", "1")
        pushed = c.pending(0.3)
        assert pushed == b">2\r\n$21\r\ntracking-redir-broken\r\n:%d\r\n" % tid, pushed
        info = c.call("CLIENT", "TRACKINGINFO").py()
        assert b"broken_redirect" in info[b"flags"] if isinstance(info, dict) else True
        line = c.call("CLIENT", "INFO").py()
        assert b"flags=tR" in line and b"redir=%d" % tid in line, line
        c.close()


def test_redis_py_client_side_cache(darner):
    """redis-py's own cache (RESP3): a second GET comes from the cache; a write by another
    client invalidates it, and the next GET returns the new value."""
    from redis.cache import CacheConfig
    cached = redis.Redis(port=darner.port, protocol=3, cache_config=CacheConfig())
    other = redis.Redis(port=darner.port)
    try:
        other.set("cached:key", "v1")
        assert cached.get("cached:key") == b"v1"
        cache = cached.get_cache()
        assert cache.size == 1
        assert cached.get("cached:key") == b"v1"      # from the cache
        info = other.execute_command("INFO", "stats")
        hits_before = info["keyspace_hits"]
        assert cached.get("cached:key") == b"v1"
        assert other.execute_command("INFO", "stats")["keyspace_hits"] == hits_before
        other.set("cached:key", "v2")
        deadline = time.monotonic() + 2
        while cached.get("cached:key") != b"v2":
            assert time.monotonic() < deadline, "invalidation never arrived"
            time.sleep(0.01)
    finally:
        cached.close()
        other.close()
