"""Client tracking with MSET, MGET, DEL, UNLINK, EXISTS and TOUCH over keys of several shards,
which Darner runs without a task for tracking clients too (worker/direct.rs): the reads are
recorded on each shard while its share holds the keys, and the writes name the client as the
writer of their invalidations. The same multi-connection scenarios run against a 4-thread
darner and redis-server, every byte each connection receives compared (tests/transcript.py):
default mode, EXISTS/TOUCH, the client's own writes (their invalidations after the reply),
NOLOOP, OPTIN/OPTOUT with CLIENT CACHING, REDIRECT to a RESP2 subscriber and to a RESP3
client, BCAST. Then a race: a caching client's cross-shard MGETs against concurrent writers
must never leave a stale value in its cache.

Connections: r3 and o3 (RESP3 tracking clients), sub (RESP2, subscribed to
__redis__:invalidate), t (RESP2 tracking client), w (a writer).
"""

from __future__ import annotations

import random
import socket
import threading
import time

import pytest
import redis

from keyslot import shard
from resp_reader import RawConn
from transcript import AFTER_REPLY, KEYS, SORTED, assert_same, invalidated

THREADS = 4
NAMES = ("r3", "o3", "sub", "t", "w")
# One key per shard of the 4-thread server (checked by `test_keys_span_every_shard`).
A, B, C, D = "a", "b", "c", "d"
ALL = (A, B, C, D)


def mset(*keys, v="1"):
    out = ["MSET"]
    for k in keys:
        out += [k, v]
    return tuple(out)


SCENARIOS = {
    "mget_then_writes": [
        ("r3", ("CLIENT", "TRACKING", "on")), ("r3", ("MGET",) + ALL),
        ("w", ("SET", A, "1")),                    # one push, for a only
        ("w", ("SET", A, "2")),                    # forgotten: none
        ("w", mset(B, C, D), SORTED),              # one push per key
        ("w", mset(B, C, D, v="2")),               # none
        ("r3", ("MGET",) + ALL), ("w", ("DEL",) + ALL, SORTED),
        ("r3", ("MGET", A, B, A, C)), ("w", ("UNLINK", A, B, C, D), SORTED),
        ("r3", ("MGET",) + ALL), ("o3", ("MGET",) + ALL),  # o3 does not track: nothing
        ("w", mset(*ALL), SORTED),
    ],
    "exists_touch": [
        ("r3", ("CLIENT", "TRACKING", "on")), ("r3", ("EXISTS",) + ALL),
        ("w", mset(*ALL), SORTED), ("r3", ("TOUCH",) + ALL),
        ("w", ("DEL", A, B, C, D), SORTED), ("r3", ("EXISTS", A, B)), ("r3", ("TOUCH", C, D)),
        ("w", mset(*ALL, v="x"), SORTED),
    ],
    "own_writes": [
        ("r3", ("CLIENT", "TRACKING", "on")), ("o3", ("CLIENT", "TRACKING", "on")),
        ("r3", ("MGET",) + ALL), ("o3", ("MGET", A, B)),
        ("r3", mset(*ALL), AFTER_REPLY),           # r3: +OK, then its own pushes; o3: a, b
        ("r3", ("MGET",) + ALL), ("r3", ("DEL",) + ALL, AFTER_REPLY),
        ("r3", ("MGET", A, B, C)), ("r3", ("UNLINK", A, B, C, D), AFTER_REPLY),  # missing
        ("r3", ("MGET", A, B)), ("w", mset(A, B), SORTED),
        ("r3", ("EXISTS",) + ALL), ("r3", ("MSET", A, "1", B, "2", C, "3", D, "4"), AFTER_REPLY),
    ],
    "noloop": [
        ("r3", ("CLIENT", "TRACKING", "on", "NOLOOP")), ("o3", ("CLIENT", "TRACKING", "on")),
        ("r3", ("MGET",) + ALL), ("o3", ("MGET",) + ALL),
        ("r3", mset(*ALL), SORTED),                # r3: only +OK; o3: four pushes
        ("r3", ("MGET",) + ALL), ("o3", ("MGET", A, B)),
        ("r3", ("DEL",) + ALL, SORTED),            # o3: a, b
        ("w", mset(*ALL), SORTED),                 # nothing: both forgot them
        ("r3", ("EXISTS",) + ALL), ("w", ("DEL", A, C), SORTED),  # r3 told of another's write
        ("r3", ("CLIENT", "TRACKINGINFO")),
    ],
    "optin": [
        ("r3", ("CLIENT", "TRACKING", "on", "OPTIN")), ("r3", ("MGET",) + ALL),
        ("w", mset(*ALL), SORTED),                 # not recorded: nothing
        ("r3", ("CLIENT", "CACHING", "yes")), ("r3", ("MGET",) + ALL),
        ("w", mset(*ALL, v="2"), SORTED),          # recorded: four pushes
        ("r3", ("CLIENT", "CACHING", "yes")), ("r3", ("EXISTS", A, B)),
        ("r3", ("TOUCH", C, D)),                   # the flag went with EXISTS
        ("w", ("DEL",) + ALL, SORTED),             # a, b
        ("r3", ("CLIENT", "CACHING", "yes")), ("r3", ("MULTI",)), ("r3", ("MGET", A, B)),
        ("r3", ("MGET", C, D)), ("r3", ("EXEC",)), ("w", mset(*ALL), SORTED),
    ],
    "optout": [
        ("r3", ("CLIENT", "TRACKING", "on", "OPTOUT")), ("r3", ("CLIENT", "CACHING", "no")),
        ("r3", ("MGET",) + ALL), ("r3", ("MGET", C, D)),
        ("w", mset(*ALL), SORTED),                 # c, d
        ("r3", ("CLIENT", "CACHING", "no")), ("r3", ("EXISTS",) + ALL),
        ("w", ("DEL",) + ALL, SORTED),             # nothing
    ],
    "redirect_resp2": [
        ("sub", ("SUBSCRIBE", "__redis__:invalidate")),
        ("t", ("CLIENT", "TRACKING", "on", "REDIRECT", "$ID:sub")), ("t", ("MGET",) + ALL),
        ("w", mset(*ALL), SORTED),                 # sub: one message per key
        ("t", ("MGET", A, B)), ("t", ("MSET", A, "2", B, "2"), SORTED),  # its own, to sub
        ("t", ("EXISTS", C, D)), ("w", ("DEL", C, D), SORTED),
        ("t", ("CLIENT", "TRACKING", "on", "REDIRECT", "$ID:sub", "NOLOOP")),
        ("t", ("MGET",) + ALL), ("t", ("DEL",) + ALL, SORTED),  # NOLOOP: nothing
        ("t", ("MGET",) + ALL), ("w", ("DEL", A, B), SORTED),
    ],
    "redirect_resp3": [
        ("r3", ("CLIENT", "TRACKING", "on", "REDIRECT", "$ID:o3")), ("r3", ("MGET",) + ALL),
        ("w", mset(*ALL), SORTED),                 # o3 gets the pushes
        ("r3", ("TOUCH",) + ALL), ("r3", ("UNLINK", A, B, C), SORTED),
        ("t", ("CLIENT", "TRACKING", "on", "REDIRECT", "$ID:o3")), ("t", ("MGET",) + ALL),
        ("w", mset(C, D, v="z"), SORTED),
    ],
    "bcast": [
        ("r3", ("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "user:", "PREFIX", "sess:")),
        ("w", ("MSET", "user:a", "1", "user:b", "1", "sess:c", "1", "x", "1"), KEYS),
        ("r3", ("MSET", "user:c", "1", "user:d", "2", "sess:a", "3"), KEYS),  # its own
        ("r3", ("MGET", "user:a", "user:b", "sess:c")),  # BCAST records nothing
        ("w", ("DEL", "user:a", "user:b", "sess:c", "nokey"), KEYS),
        ("r3", ("CLIENT", "TRACKING", "on", "BCAST", "NOLOOP")),
        ("r3", ("MSET", "user:a", "2", "user:b", "3", "sess:c", "4"), KEYS),  # nothing
        ("w", ("MSET", "user:a", "5", "sess:d", "6", "other", "7"), KEYS),
        ("r3", ("DEL", "user:a", "user:b", "user:c"), KEYS),                  # nothing
        ("o3", ("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "sess:")),
        ("r3", ("UNLINK", "sess:a", "sess:b", "sess:c", "sess:d"), KEYS),     # o3 only
    ],
}


@pytest.mark.darner_only
def test_keys_span_every_shard():
    assert sorted(shard(k, THREADS) for k in ALL) == list(range(THREADS))
    for prefix in ("user:", "sess:"):
        assert len({shard(prefix + k, THREADS) for k in ALL}) == THREADS


@pytest.fixture
def darner4(darner_factory):
    return darner_factory(threads=THREADS)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_multishard_tracking_transcript_matches_redis(name, darner4, redis_ref):
    for port in (darner4.port, redis_ref.port):
        redis.Redis(port=port).flushall()
    assert_same(darner4.port, redis_ref.port, SCENARIOS[name], NAMES)


class CachingClient:
    """A RESP3 tracking connection that caches what its MGETs return and drops what its
    invalidations name, processing the stream in order (as a client-side cache does)."""

    def __init__(self, port: int):
        self.conn = RawConn(port=port, timeout=10)
        assert not self.conn.call("HELLO", "3").is_error
        assert self.conn.call("CLIENT", "TRACKING", "on").raw == b"+OK\r\n"
        self.cache: dict[bytes, bytes | None] = {}

    def _frame(self, timeout: float):
        """The next frame received (a reply or a push), None after `timeout` of silence."""
        try:
            return self.conn.read_reply(timeout=timeout)
        except socket.timeout:
            return None

    def _apply(self, reply) -> bool:
        """Applies an invalidation; False for a reply."""
        if reply.kind != ">":
            return False
        keys = invalidated(reply.raw)
        assert keys is not None, reply
        for k in keys:
            self.cache.pop(k, None)
        return True

    def mget(self, keys):
        self.conn.send("MGET", *keys)
        while True:
            reply = self._frame(10)
            assert reply is not None, "MGET never answered"
            if not self._apply(reply):
                break
        values = reply.py()
        assert len(values) == len(keys), reply
        for k, v in zip(keys, values):
            self.cache[k.encode()] = v

    def drain(self, quiet: float = 0.3):
        while (reply := self._frame(quiet)) is not None:
            assert self._apply(reply), reply


@pytest.mark.darner_only
def test_cross_shard_mget_cache_is_never_stale(darner4):
    """Writers change keys of every shard while caching clients read them with cross-shard
    MGETs: once all is quiet, every value still cached equals the server's. A write that
    came between a shard's read and the record of that read would leave a stale one."""
    keys = [f"race:{i}" for i in range(16)]
    assert len({shard(k, THREADS) for k in keys}) == THREADS
    stop = threading.Event()
    errors = []

    def writer(seed: int):
        rng = random.Random(seed)
        c = redis.Redis(port=darner4.port)
        try:
            n = 0
            while not stop.is_set():
                n += 1
                picked = rng.sample(keys, rng.randint(1, 5))
                op = rng.random()
                if op < 0.6:
                    c.mset({k: f"{seed}-{n}" for k in picked})
                elif op < 0.8:
                    c.delete(*picked)
                else:
                    c.set(picked[0], f"{seed}-{n}")
        except Exception as e:  # reported by the test
            errors.append(e)
        finally:
            c.close()

    clients = [CachingClient(darner4.port) for _ in range(3)]
    threads = [threading.Thread(target=writer, args=(s,)) for s in range(2)]
    for t in threads:
        t.start()
    try:
        rng = random.Random(7)
        deadline = time.monotonic() + 2.0
        rounds = 0
        while time.monotonic() < deadline:
            for cl in clients:
                cl.mget(rng.sample(keys, rng.randint(4, 12)))
            rounds += 1
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors
    assert rounds >= 20, rounds
    plain = redis.Redis(port=darner4.port)
    truth = dict(zip([k.encode() for k in keys], plain.mget(keys)))
    for cl in clients:
        cl.drain()
        stale = {k: (v, truth[k]) for k, v in cl.cache.items() if v != truth[k]}
        assert not stale, stale
        cl.conn.close()
