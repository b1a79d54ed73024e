"""A replica under a write load of every kind holds exactly its primary's dataset (issue 15's
first test), for Darner -> Darner, Redis 7.0 -> Darner and Darner -> Redis 7.0.

Eight clients write for a bounded time, at once: every type (strings, counters, lists,
hashes, sets, sorted sets, streams, HyperLogLogs, bitmaps), keys with short TTLs that expire
on the primary meanwhile (its DELs travel in the stream), MSET and MULTI/EXEC over keys of
both shards, big values (a 1 MB string, a 20,000-field hash, a 50,000-element list), in
several databases, and a FLUSHALL in the middle. The replica is attached before the load, so
its full sync overlaps the writes. Then the primary's expiry is stopped (DEBUG
SET-ACTIVE-EXPIRE 0: no more DELs in flight), and once the replica's offset reaches the
primary's, DEBUG DIGEST must be equal (on a mismatch, the keys that differ are named).
"""

from __future__ import annotations

import random
import threading
import time

import pytest
import redis

import harness
from test_replica import digest, info, wait_for

pytestmark = pytest.mark.darner_only

LOAD_SECONDS = 3.0


def writer(server, seed, stop, errors):
    rnd = random.Random(seed)
    try:
        c = server.client()
        d2 = server.client(db=2)
        n = 0
        while not stop.is_set():
            n += 1
            k = "k%d" % rnd.randrange(300)
            op = rnd.randrange(14)
            if op == 0:
                c.set(k, rnd.randbytes(rnd.randrange(1, 300)))
            elif op == 1:
                c.incrby("ctr%d" % rnd.randrange(20), rnd.randrange(-5, 10))
            elif op == 2:
                c.rpush("list%d" % rnd.randrange(20), *[rnd.randrange(1000) for _ in range(3)])
                c.ltrim("list%d" % rnd.randrange(20), 0, 50)
            elif op == 3:
                c.hset("hash%d" % rnd.randrange(20), "f%d" % rnd.randrange(50), rnd.random())
            elif op == 4:
                c.sadd("set%d" % rnd.randrange(20), rnd.randrange(100))
                c.srem("set%d" % rnd.randrange(20), rnd.randrange(100))
            elif op == 5:
                c.zadd("zset%d" % rnd.randrange(20), {"m%d" % rnd.randrange(50): rnd.randrange(-100, 100)})
                c.zincrby("zset%d" % rnd.randrange(20), 1.5, "m%d" % rnd.randrange(50))
            elif op == 6:
                c.xadd("stream%d" % rnd.randrange(5), {"f": rnd.randrange(100)}, maxlen=40)
            elif op == 7:
                c.pfadd("hll%d" % rnd.randrange(5), *["e%d" % rnd.randrange(10000) for _ in range(5)])
                c.setbit("bits%d" % rnd.randrange(5), rnd.randrange(5000), rnd.randrange(2))
            elif op == 8:
                # Short TTLs: the primary expires these during the load.
                c.set("ttl%d" % rnd.randrange(200), "v", px=rnd.randrange(5, 400))
                c.pexpire("hash%d" % rnd.randrange(20), rnd.randrange(50, 2000))
            elif op == 9:
                c.mset({"m%d" % rnd.randrange(100): i for i in range(rnd.randrange(2, 12))})
            elif op == 10:
                with c.pipeline(transaction=True) as t:
                    a, b = "tx%d" % rnd.randrange(50), "tx%d" % rnd.randrange(50)
                    t.incr(a)
                    t.rpush("txl%d" % rnd.randrange(10), a)
                    t.set(b, n)
                    t.hincrby("txh", a, 1)
                    t.execute()
            elif op == 11:
                d2.set(k, n)
                d2.lpush("l2", n)
                d2.ltrim("l2", 0, 30)
            elif op == 12:
                c.delete(k, "k%d" % rnd.randrange(300))
                c.unlink("set%d" % rnd.randrange(20))
            else:
                c.copy(k, "copy%d" % rnd.randrange(20), replace=True)
                try:
                    c.rename("copy%d" % rnd.randrange(20), "renamed%d" % rnd.randrange(5))
                except redis.ResponseError as e:
                    assert "no such key" in str(e), e
    except Exception as e:  # noqa: BLE001 - reported by the test
        errors.append(repr(e))


def big_values(server, stop, errors):
    """Big values, rewritten while the sync and the stream run; a FLUSHALL in the middle."""
    try:
        c = server.client()
        flushed = False
        started = time.monotonic()
        while not stop.is_set():
            c.set("bigstr", random.randbytes(1 << 20))
            with c.pipeline(transaction=False) as pl:
                for i in range(0, 20000, 1000):
                    pl.hset("bighash", mapping={"f%d" % j: j for j in range(i, i + 1000)})
                for i in range(0, 50000, 5000):
                    pl.rpush("biglist", *range(i, i + 5000))
                pl.ltrim("biglist", 0, 60000)
                pl.execute()
            if not flushed and time.monotonic() - started > LOAD_SECONDS / 2:
                c.flushall()
                flushed = True
            time.sleep(0.05)
    except Exception as e:  # noqa: BLE001
        errors.append(repr(e))


def load_and_compare(primary, replica):
    p = primary.client()
    r = replica.client()
    stop = threading.Event()
    errors: list = []
    threads = [threading.Thread(target=writer, args=(primary, s, stop, errors)) for s in range(7)]
    threads.append(threading.Thread(target=big_values, args=(primary, stop, errors)))
    for t in threads:
        t.start()
    try:
        time.sleep(LOAD_SECONDS)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors, errors[:3]
    p.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    want = info(p)["master_repl_offset"]
    wait_for(
        lambda: info(r).get("master_link_status") == "up"
        and info(r).get("slave_repl_offset") == info(p)["master_repl_offset"] >= want,
        timeout=60,
        what="the replica's offset to reach the primary's",
    )
    assert p.dbsize() > 100, "the load wrote little"
    if digest(r) != digest(p):
        diff = []
        for db in range(16):
            pc, rc = primary.client(db=db), replica.client(db=db)
            keys = set(pc.keys("*")) | set(rc.keys("*"))
            for k in sorted(keys):
                a = pc.execute_command("DEBUG", "DIGEST-VALUE", k)
                b = rc.execute_command("DEBUG", "DIGEST-VALUE", k)
                ta = pc.execute_command("PEXPIRETIME", k)
                tb = rc.execute_command("PEXPIRETIME", k)
                if a != b or ta != tb:
                    detail = None
                    if pc.type(k) == rc.type(k) == b"hash":
                        ha, hb = pc.hgetall(k), rc.hgetall(k)
                        detail = {f: (ha.get(f), hb.get(f)) for f in set(ha) | set(hb)
                                  if ha.get(f) != hb.get(f)}
                    diff.append((db, k, pc.type(k), rc.type(k), a == b, ta, tb, detail))
        raise AssertionError("datasets differ: %r" % diff[:20])


def test_darner_to_darner_under_load(darner_factory):
    primary = darner_factory()
    replica = darner_factory("--replicaof", "127.0.0.1", primary.port)
    load_and_compare(primary, replica)


def test_redis_to_darner_under_load(darner_factory):
    primary = harness.start_reference(["--repl-diskless-sync-delay", "0"])
    try:
        replica = darner_factory("--replicaof", "127.0.0.1", primary.port)
        load_and_compare(primary, replica)
    finally:
        primary.stop()


def test_darner_to_redis_under_load(darner_factory):
    primary = darner_factory()
    replica = harness.start_reference(["--replicaof", "127.0.0.1", str(primary.port)])
    try:
        load_and_compare(primary, replica)
    finally:
        replica.stop()
