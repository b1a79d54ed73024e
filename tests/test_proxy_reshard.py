"""darner-proxy while a real 3-primary Redis Cluster moves slots under running clients.

Slots move by hand, as `redis-cli --cluster reshard` does it (SETSLOT IMPORTING / MIGRATING,
MIGRATE of the keys in small batches with pauses, SETSLOT NODE), so that clients hit the
in-between states: keys already moved (-ASK), multi-key requests whose keys are split
(-TRYAGAIN) and finally the old owner's -MOVED; and by `redis-cli --cluster reshard` itself.
The proxy's topology refresh interval is long, so that it learns of the moves from the MOVED
replies, not from a periodic refresh.
"""

from __future__ import annotations

import subprocess
import threading
import time

import redis

from keyslot import key_slot
from test_proxy import ProxyServer, cluster, wait_for  # noqa: F401 (the fixture)


class SlowRefreshProxy(ProxyServer):
    """A proxy that refreshes its topology only when told to by a MOVED (or every 10 min)."""

    def build_cmdline(self, port):
        cmd = super().build_cmdline(port)
        cmd[cmd.index("--cluster-refresh-interval") + 1] = "600000"
        return cmd


def node_id(node):
    return node.client().execute_command("CLUSTER", "MYID").decode()


def slot_owner(cluster, slot):
    for start, end, primary, *_ in cluster[0].client().execute_command("CLUSTER", "SLOTS"):
        if start <= slot <= end:
            return next(n for n in cluster if n.port == primary[1])
    raise AssertionError("slot %d not served" % slot)


def tags_of(cluster, src, n):
    """`n` hash tags whose slots `src` owns (distinct slots)."""
    tags, slots, i = [], set(), 0
    while len(tags) < n:
        t = "t%d" % i
        s = key_slot("{%s}" % t)
        if s not in slots and slot_owner(cluster, s) is src:
            tags.append(t)
            slots.add(s)
        i += 1
    return tags


def start_move(slot, src, dst):
    src_id, dst_id = node_id(src), node_id(dst)
    dst.client().execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
    src.client().execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)


def end_move(cluster, slot, src, dst):
    # The importing node first, as redis-cli does: the old owner then answers MOVED.
    dst_id = node_id(dst)
    for n in [dst, src] + [n for n in cluster if n not in (src, dst)]:
        n.client().execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)


def move_slot(cluster, slot, src, dst, batch=2, pause=0.03):
    """Moves `slot` from `src` to `dst` with its keys, `batch` keys per MIGRATE."""
    s = src.client()
    start_move(slot, src, dst)
    while True:
        keys = s.execute_command("CLUSTER", "GETKEYSINSLOT", slot, batch)
        if not keys:
            break
        s.execute_command("MIGRATE", "127.0.0.1", dst.port, "", 0, 5000, "KEYS", *keys)
        time.sleep(pause)
    end_move(cluster, slot, src, dst)


def counts(r):
    info = r.info("proxy")
    return {k: info["proxy_" + k] for k in ("redirects_moved", "redirects_ask",
                                            "tryagain_retries", "topology_refreshes")}


def test_each_migration_state_is_followed_and_counted(cluster):  # noqa: F811
    """Step by step: a moved key (ASK), a multi-key request over keys split between the two
    nodes (TRYAGAIN until the last key moves), the old owner after the move (MOVED)."""
    src, dst = cluster[0], cluster[1]
    tag = tags_of(cluster, src, 1)[0]
    slot = key_slot("{%s}" % tag)
    a, b = "{%s}:a" % tag, "{%s}:b" % tag
    p = SlowRefreshProxy(["127.0.0.1:%d" % cluster[2].port])
    p.start()
    try:
        r = p.client()
        r.mset({a: "1", b: "2"})
        c0 = counts(r)
        start_move(slot, src, dst)
        src.client().execute_command("MIGRATE", "127.0.0.1", dst.port, "", 0, 5000, "KEYS", a)
        assert r.get(a) == b"1" and r.get(b) == b"2"
        c1 = counts(r)
        assert c1["redirects_ask"] == c0["redirects_ask"] + 1, (c0, c1)
        # The keys are split: the MGET waits (TRYAGAIN) until b has moved too.
        got = []
        t = threading.Thread(target=lambda: got.append(p.client().mget([a, b])))
        t.start()
        time.sleep(0.2)
        assert got == [], "answered while the keys were split"
        src.client().execute_command("MIGRATE", "127.0.0.1", dst.port, "", 0, 5000, "KEYS", b)
        t.join(5)
        assert got == [[b"1", b"2"]]
        c2 = counts(r)
        assert c2["tryagain_retries"] > c1["tryagain_retries"], (c1, c2)
        assert c2["redirects_ask"] > c1["redirects_ask"], (c1, c2)
        end_move(cluster, slot, src, dst)
        assert r.incr(a) == 2
        c3 = counts(r)
        assert c3["redirects_moved"] == c2["redirects_moved"] + 1, (c2, c3)
        assert c3["topology_refreshes"] > c2["topology_refreshes"], (c2, c3)
        # The refreshed map sends the next request straight to the new owner.
        wait_for(lambda: r.get(b) == b"2" and counts(r)["redirects_moved"] == c3["redirects_moved"])
        assert r.get(a) == b"2"
        assert counts(r)["redirects_moved"] == c3["redirects_moved"]
        r.close()
    finally:
        p.stop()
        move_slot(cluster, slot, dst, src, batch=100, pause=0)


TX_ERRORS = ("moved to another node during the transaction", "is being migrated",
             "EXECABORT")


def test_slots_move_under_running_clients(cluster):  # noqa: F811
    src, dst = cluster[0], cluster[1]
    tags = tags_of(cluster, src, 3)
    p = SlowRefreshProxy(["127.0.0.1:%d" % cluster[2].port])
    p.start()
    try:
        r0 = p.client()
        r0.flushall()
        # Keys already in the slots before they move (so that batches of them migrate).
        for t in tags:
            r0.mset({"{%s}:pad%d" % (t, i): "x" for i in range(12)})
        stop = threading.Event()
        errors, incrs, tx_ok, tx_failed = [], {}, [0], [0]
        lock = threading.Lock()

        def worker(w):
            c = p.client()
            acked = {}
            seq = 0
            try:
                while not stop.is_set():
                    seq += 1
                    for t in tags:
                        ctr = "{%s}:ctr" % t
                        c.incr(ctr)
                        acked[ctr] = acked.get(ctr, 0) + 1
                        own = "{%s}:w%d" % (t, w)
                        c.set(own, seq)
                        got = c.get(own)
                        if got != str(seq).encode():
                            errors.append("GET %s: %r, wrote %d" % (own, got, seq))
                        # One slot: the keys may be split between the nodes (TRYAGAIN).
                        trio = ["{%s}:m%d:%d" % (t, w, i) for i in range(3)]
                        c.mset({k: seq for k in trio})
                        vals = c.mget(trio)
                        if vals != [str(seq).encode()] * 3:
                            errors.append("MGET %s: %r, wrote %d" % (trio, vals, seq))
                    # Across the moving slots.
                    across = ["{%s}:x%d" % (t, w) for t in tags]
                    c.mset({k: seq for k in across})
                    vals = c.mget(across)
                    if vals != [str(seq).encode()] * len(across):
                        errors.append("MGET %s: %r, wrote %d" % (across, vals, seq))
                    pipe = c.pipeline(transaction=True)
                    pipe.incr("{%s}:tx" % tags[seq % len(tags)])
                    try:
                        pipe.execute()
                        with lock:
                            tx_ok[0] += 1
                            incrs.setdefault("tx:" + tags[seq % len(tags)], 0)
                            incrs["tx:" + tags[seq % len(tags)]] += 1
                    except redis.ResponseError as e:
                        if not any(s in str(e) for s in TX_ERRORS):
                            errors.append("transaction: %s" % e)
                        with lock:
                            tx_failed[0] += 1
            except redis.RedisError as e:
                errors.append("worker %d: %r" % (w, e))
            with lock:
                for k, v in acked.items():
                    incrs[k] = incrs.get(k, 0) + v
            c.close()

        threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
        for th in threads:
            th.start()
        try:
            time.sleep(0.3)
            for t in tags:
                move_slot(cluster, key_slot("{%s}" % t), src, dst)
            time.sleep(0.3)
        finally:
            stop.set()
            for th in threads:
                th.join(timeout=30)
        assert not errors, errors[:5]
        for t in tags:
            slot = key_slot("{%s}" % t)
            assert slot_owner(cluster, slot) is dst
            d = dst.client()
            assert d.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) > 0
            assert src.client().execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0
            # No INCR lost or applied twice: the counter is the acknowledged count.
            assert int(d.get("{%s}:ctr" % t)) == incrs["{%s}:ctr" % t]
            assert int(d.get("{%s}:tx" % t) or 0) == incrs.get("tx:" + t, 0)
        assert tx_ok[0] > 0
        info = r0.info("proxy")
        assert info["proxy_redirects_ask"] > 0, info
        assert info["proxy_redirects_moved"] > 0, info
        assert info["proxy_topology_refreshes"] >= 2, info
        r0.close()
    finally:
        p.stop()
        # Back where they were, for whatever runs next on this cluster.
        for t in tags:
            move_slot(cluster, key_slot("{%s}" % t), dst, src, batch=100, pause=0)


def redis_cli_reshard(src, dst, slots):
    """`redis-cli --cluster reshard` itself: moves `src`'s `slots` lowest slots to `dst`,
    their keys 5 per MIGRATE."""
    out = subprocess.run(["redis-cli", "--cluster", "reshard", "127.0.0.1:%d" % src.port,
                          "--cluster-from", node_id(src), "--cluster-to", node_id(dst),
                          "--cluster-slots", str(slots), "--cluster-yes",
                          "--cluster-pipeline", "5"],
                         capture_output=True, timeout=120)
    assert out.returncode == 0, (out.stdout[-3000:], out.stderr[-3000:])


def slots_of(cluster, node):
    """The slots `node` owns, from one CLUSTER SLOTS."""
    return [s for start, end, primary, *_ in cluster[0].client().execute_command("CLUSTER", "SLOTS")
            if primary[1] == node.port for s in range(start, end + 1)]


def test_redis_cli_reshard_under_running_clients(cluster):  # noqa: F811
    """The tool operators use: `redis-cli --cluster reshard` moves 40 slots away and back
    while clients run INCRs, read-your-writes and cross-slot MGET/MSET through the proxy."""
    src, dst = cluster[0], cluster[1]
    moving = 40
    first = sorted(slots_of(cluster, src))[:moving]
    # Keys in the slots that move (redis-cli takes a source's lowest slots first).
    keys, i = [], 0
    while len(keys) < 24:
        k = "rs:%d" % i
        if key_slot(k) in first[: moving // 2]:
            keys.append(k)
        i += 1
    p = SlowRefreshProxy(["127.0.0.1:%d" % cluster[2].port])
    p.start()
    try:
        r0 = p.client()
        r0.flushall()
        # Enough keys in the moving slots that their MIGRATEs take a while (a key's hash tag
        # puts its pads in its slot).
        for k in keys:
            r0.mset({"{%s}:pad%d" % (k, j): "x" for j in range(50)})
        stop = threading.Event()
        errors, incrs = [], {}
        lock = threading.Lock()

        def worker(w):
            c = p.client()
            acked = {}
            seq = 0
            try:
                while not stop.is_set():
                    seq += 1
                    k = keys[seq % len(keys)]
                    c.incr(k)
                    acked[k] = acked.get(k, 0) + 1
                    own = "{%s}:w%d" % (k, w)
                    c.set(own, seq)
                    if c.get(own) != str(seq).encode():
                        errors.append("GET %s after SET %d" % (own, seq))
                    group = ["{%s}:m%d" % (keys[(seq + j) % len(keys)], w) for j in range(4)]
                    c.mset({g: seq for g in group})
                    if c.mget(group) != [str(seq).encode()] * 4:
                        errors.append("MGET %s after MSET %d" % (group, seq))
            except redis.RedisError as e:
                errors.append("worker %d: %r" % (w, e))
            with lock:
                for k2, v in acked.items():
                    incrs[k2] = incrs.get(k2, 0) + v
            c.close()

        threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
        for th in threads:
            th.start()
        try:
            time.sleep(0.3)
            redis_cli_reshard(src, dst, moving)
            assert all(slot_owner(cluster, s) is dst for s in first)
            time.sleep(0.3)
            redis_cli_reshard(dst, src, moving)
            assert all(slot_owner(cluster, s) is src for s in first)
            time.sleep(0.3)
        finally:
            stop.set()
            for th in threads:
                th.join(timeout=30)
        assert not errors, errors[:5]
        assert sum(incrs.values()) > 0
        for k, n in incrs.items():
            assert int(r0.get(k)) == n, k
        info = r0.info("proxy")
        assert info["proxy_redirects_moved"] > 0, info
        print("redis-cli reshard through the proxy:", {k: info["proxy_" + k] for k in (
            "redirects_moved", "redirects_ask", "tryagain_retries")}, "INCRs", sum(incrs.values()))
        r0.close()
    finally:
        p.stop()

