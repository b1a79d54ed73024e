"""Cross-shard atomicity under concurrency (darner started with --threads 4).

Writers and readers run in threads for a bounded time; invariants are checked
by readers with single multi-key commands (or MULTI/EXEC).  Threads are always
stopped and joined."""

from __future__ import annotations

import random
import sys
import threading
import time
import traceback

import pytest
import redis

DURATION = 2.0  # seconds of concurrent load per test


@pytest.fixture
def srv4(darner_factory):
    return darner_factory(threads=4)


class Load:
    """Runs worker functions in threads until stopped; collects violations/errors."""

    def __init__(self, srv=None):
        self.srv = srv
        self.stop = threading.Event()
        self.threads = []
        self.errors = []
        self.violations = []
        self.counts = {}
        self.lock = threading.Lock()

    def spawn(self, name, fn):
        def run():
            n = 0
            try:
                while not self.stop.is_set():
                    fn()
                    n += 1
            except Exception as e:  # noqa
                with self.lock:
                    self.errors.append("%s: %s: %s" % (name, type(e).__name__, e))
                self.stop.set()
            finally:
                with self.lock:
                    self.counts[name] = self.counts.get(name, 0) + n

        t = threading.Thread(target=run, name=name, daemon=True)
        self.threads.append(t)
        t.start()

    def violation(self, msg):
        with self.lock:
            if len(self.violations) < 20:
                self.violations.append(msg)
        self.stop.set()

    def run_for(self, seconds):
        try:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline and not self.stop.is_set():
                time.sleep(0.05)
        finally:
            self.stop.set()
            for t in self.threads:
                t.join(10)
        alive = [t for t in self.threads if t.is_alive()]
        assert not alive, "threads did not stop (server hung?): %s\n%s" % (
            [t.name for t in alive], self.diagnosis(alive))
        assert not self.errors, "worker errors:\n" + "\n".join(self.errors[:10])
        assert not self.violations, "atomicity violations:\n" + "\n".join(self.violations)


    def diagnosis(self, alive):
        """What a hang looked like: where each stuck thread waits, the workers' errors, and
        whether the server still answers (a fresh connection's PING and CLIENT LIST), with the
        tail of its log."""
        out = []
        frames = sys._current_frames()
        for t in alive:
            stack = "".join(traceback.format_stack(frames.get(t.ident))) if t.ident in frames else "?"
            out.append("--- %s waits in:\n%s" % (t.name, stack[-1500:]))
        out.append("--- errors: %s" % self.errors[:10])
        if self.srv is not None:
            out.append("--- server process alive: %s" % self.srv.alive())
            try:
                with self.srv.raw(timeout=3) as c:
                    out.append("--- PING: %r" % c.call("PING").raw)
                    out.append("--- CLIENT LIST:\n%s" % c.call("CLIENT", "LIST").raw.decode("utf-8", "replace"))
                    out.append("--- INFO:\n%s" % c.call("INFO", "clients").raw.decode("utf-8", "replace"))
                    # Does work on keys still run (a stuck scheduler would hang these)?
                    for cmd in (("MGET", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8"),
                                ("MGET",) + tuple("fw:%d" % i for i in range(0, 500, 25)),
                                ("SET", "k1", "v"), ("SET", "fw:0", "v"), ("DBSIZE",),
                                ("FLUSHALL",), ("CLIENT", "LIST")):
                        out.append("--- %s: %r" % (cmd[0], c.call(*cmd).raw[:1500]))
            except Exception as e:  # noqa: the diagnosis must not hide the failure
                out.append("--- a fresh connection failed: %s: %s" % (type(e).__name__, e))
            out.append("--- server log tail:\n%s" % self.srv.log_tail(3000))
        return "\n".join(out)


def _client(srv):
    return redis.Redis(host="127.0.0.1", port=srv.port, socket_timeout=10, decode_responses=False)


def test_transfers_preserve_total(srv4):
    n_accounts, initial = 40, 1000
    accounts = ["acct:%d" % i for i in range(n_accounts)]
    setup = _client(srv4)
    setup.mset({a: initial for a in accounts})
    total = n_accounts * initial
    load = Load(srv4)
    clients = []

    def transfer_worker(seed):
        c = _client(srv4)
        clients.append(c)
        rnd = random.Random(seed)

        def step():
            a, b = rnd.sample(accounts, 2)
            amt = rnd.randint(1, 50)
            p = c.pipeline(transaction=True)
            p.decrby(a, amt).incrby(b, amt)
            res = p.execute()
            assert len(res) == 2
        return step

    def mget_reader():
        c = _client(srv4)
        clients.append(c)

        def step():
            vals = c.mget(accounts)
            s = sum(int(v) for v in vals)
            if s != total:
                load.violation("MGET saw total %d != %d" % (s, total))
        return step

    def multi_reader():
        c = _client(srv4)
        clients.append(c)

        def step():
            p = c.pipeline(transaction=True)
            for a in accounts:
                p.get(a)
            s = sum(int(v) for v in p.execute())
            if s != total:
                load.violation("MULTI/GET saw total %d != %d" % (s, total))
        return step

    try:
        for i in range(4):
            load.spawn("transfer%d" % i, transfer_worker(i))
        load.spawn("mget0", mget_reader())
        load.spawn("mget1", mget_reader())
        load.spawn("multi0", multi_reader())
        load.run_for(DURATION)
        assert sum(int(v) for v in setup.mget(accounts)) == total
        assert sum(load.counts.get("transfer%d" % i, 0) for i in range(4)) > 50, load.counts
        assert load.counts.get("mget0", 0) > 10, load.counts
    finally:
        for c in clients + [setup]:
            c.close()


def test_mset_pairs_seen_atomically(srv4):
    n_pairs = 16
    pairs = [("left:%d" % i, "right:%d" % i) for i in range(n_pairs)]
    allkeys = [k for p in pairs for k in p]
    setup = _client(srv4)
    setup.mset({k: 0 for k in allkeys})
    load = Load(srv4)
    clients = []

    def writer(seed):
        c = _client(srv4)
        clients.append(c)
        rnd = random.Random(seed)
        gen = [seed * 10 ** 9]

        def step():
            gen[0] += 1
            l, r = rnd.choice(pairs)
            c.mset({l: gen[0], r: gen[0]})
            # and a whole-set generation write across all shards
            if gen[0] % 10 == 0:
                c.mset({k: gen[0] for k in allkeys})
        return step

    def reader():
        c = _client(srv4)
        clients.append(c)

        def step():
            vals = c.mget(allkeys)
            for i in range(n_pairs):
                if vals[2 * i] != vals[2 * i + 1]:
                    load.violation("pair %s: %r != %r" % (pairs[i], vals[2 * i], vals[2 * i + 1]))
                    return
        return step

    try:
        for i in range(3):
            load.spawn("mset%d" % i, writer(i + 1))
        for i in range(2):
            load.spawn("mget%d" % i, reader())
        load.run_for(DURATION)
    finally:
        for c in clients + [setup]:
            c.close()


def test_rename_ping_pong_exactly_one_exists(srv4):
    names = [("ping:%d" % i, "pong:%d" % i) for i in range(6)]
    setup = _client(srv4)
    for a, _ in names:
        setup.set(a, "token")
    load = Load(srv4)
    clients = []

    def renamer(a, b):
        c = _client(srv4)
        clients.append(c)

        def step():
            # exactly one of a/b exists at any time; move it to the other name
            try:
                c.rename(a, b)
            except redis.ResponseError as e:
                if "no such key" not in str(e):
                    raise
                c.rename(b, a)
        return step

    def reader():
        c = _client(srv4)
        clients.append(c)

        def step():
            for a, b in names:
                n = c.exists(a, b)
                if n != 1:
                    load.violation("EXISTS %s %s returned %d" % (a, b, n))
                    return
        return step

    try:
        for a, b in names:
            load.spawn("rename-%s" % a, renamer(a, b))
        load.spawn("exists0", reader())
        load.spawn("exists1", reader())
        load.run_for(DURATION)
        for a, b in names:
            assert setup.exists(a, b) == 1
            assert setup.mget(a, b).count(b"token") == 1
        assert sum(v for k, v in load.counts.items() if k.startswith("rename")) > 100, load.counts
    finally:
        for c in clients + [setup]:
            c.close()


def test_concurrent_incr_no_lost_updates(srv4):
    per_thread, n_threads = 400, 8
    clients = [_client(srv4) for _ in range(n_threads)]
    errors = []

    def work(c):
        try:
            p = c.pipeline(transaction=False)
            for i in range(per_thread):
                p.incr("counter")
                p.incrby("counter:%d" % (i % 10), 2)
            p.execute()
        except Exception as e:  # noqa
            errors.append(e)

    threads = [threading.Thread(target=work, args=(c,), daemon=True) for c in clients]
    try:
        for t in threads:
            t.start()
    finally:
        for t in threads:
            t.join(30)
    try:
        assert not errors, errors
        assert not any(t.is_alive() for t in threads)
        c = clients[0]
        assert int(c.get("counter")) == per_thread * n_threads
        assert sum(int(v) for v in c.mget(["counter:%d" % i for i in range(10)])) == 2 * per_thread * n_threads
    finally:
        for c in clients:
            c.close()


def test_msetnx_overlapping_sets_single_winner(srv4):
    """Concurrent MSETNX on overlapping key sets: at most one per round wins,
    and a winner's keys are all written while a loser's are not at all."""
    a, b = _client(srv4), _client(srv4)
    rounds = 150
    barrier = threading.Barrier(2, timeout=10)
    results = {"a": [], "b": []}
    errors = []

    def run(c, name, keys):
        try:
            for rnd in range(rounds):
                barrier.wait()
                results[name].append(c.msetnx({"r%d:%s" % (rnd, k): name for k in keys}))
        except Exception as e:  # noqa
            errors.append(e)
            barrier.abort()

    ta = threading.Thread(target=run, args=(a, "a", ["x", "y", "shared"]), daemon=True)
    tb = threading.Thread(target=run, args=(b, "b", ["shared", "z", "w"]), daemon=True)
    try:
        ta.start()
        tb.start()
    finally:
        ta.join(60)
        tb.join(60)
    try:
        assert not errors, errors
        for rnd in range(rounds):
            wa, wb = results["a"][rnd], results["b"][rnd]
            assert not (wa and wb), "round %d: both MSETNX succeeded" % rnd
            vals = a.mget(["r%d:%s" % (rnd, k) for k in ("x", "y", "shared", "z", "w")])
            if wa:
                assert vals == [b"a", b"a", b"a", None, None], (rnd, vals)
            elif wb:
                assert vals == [None, None, b"b", b"b", b"b"], (rnd, vals)
            else:
                raise AssertionError("round %d: neither MSETNX succeeded: %r" % (rnd, vals))
    finally:
        a.close()
        b.close()


def test_multi_exec_isolated_from_concurrent_writers(srv4):
    """A MULTI block reading two keys written together by MSET never sees a mix."""
    setup = _client(srv4)
    setup.mset({"iso:a": 0, "iso:b": 0, "iso:c": 0})
    load = Load(srv4)
    clients = []

    def writer():
        c = _client(srv4)
        clients.append(c)
        n = [0]

        def step():
            n[0] += 1
            c.mset({"iso:a": n[0], "iso:b": n[0], "iso:c": n[0]})
        return step

    def tx_reader():
        c = _client(srv4)
        clients.append(c)

        def step():
            p = c.pipeline(transaction=True)
            p.get("iso:a").get("iso:b").get("iso:c")
            r = p.execute()
            if len(set(r)) != 1:
                load.violation("MULTI saw %r" % r)
        return step

    try:
        load.spawn("writer", writer())
        load.spawn("writer2", writer())
        load.spawn("tx0", tx_reader())
        load.spawn("tx1", tx_reader())
        load.run_for(1.5)
    finally:
        for c in clients + [setup]:
            c.close()


def test_move_between_dbs_exactly_one_copy(srv4):
    """MOVE ping-pong between db0 and db1; a MULTI reading both dbs must see
    the key in exactly one of them."""
    setup = _client(srv4)
    for i in range(4):
        setup.set("mv:%d" % i, "token")
    load = Load(srv4)
    clients = []

    def mover(i):
        c = _client(srv4)
        clients.append(c)
        c1 = redis.Redis(host="127.0.0.1", port=srv4.port, db=1, socket_timeout=10)
        clients.append(c1)
        key = "mv:%d" % i

        def step():
            if not c.move(key, 1):
                if not c1.move(key, 0):
                    load.violation("%s in neither db (both MOVEs returned 0)" % key)
        return step

    def reader():
        c = _client(srv4)
        clients.append(c)
        conn = c.connection_pool.get_connection("MULTI")

        def step():
            cmds = [("MULTI",)]
            for i in range(4):
                cmds += [("SELECT", "0"), ("EXISTS", "mv:%d" % i), ("SELECT", "1"), ("EXISTS", "mv:%d" % i)]
            cmds += [("SELECT", "0"), ("EXEC",)]
            conn.send_packed_command(conn.pack_commands(cmds))
            replies = [conn.read_response() for _ in cmds]
            res = replies[-1]
            for i in range(4):
                base = 4 * i
                n = res[base + 1] + res[base + 3]
                if n != 1:
                    load.violation("mv:%d present in %d dbs (MULTI saw %r)" % (i, n, res))
                    return
        return step

    try:
        for i in range(4):
            load.spawn("mover%d" % i, mover(i))
        load.spawn("reader0", reader())
        load.spawn("reader1", reader())
        load.run_for(DURATION)
    finally:
        for c in clients + [setup]:
            c.close()


def test_concurrent_pipelines_keep_reply_order(srv4):
    """Several connections each pipeline thousands of commands on keys spread
    over all shards; every connection must get its replies in order."""
    from resp_reader import RawConn

    errors = []

    def work(tid):
        try:
            rnd = random.Random(tid)
            keys = ["ord:%d:%d" % (tid, i) for i in range(64)]
            model = {}
            cmds, expected = [], []
            for i in range(5000):
                k = rnd.choice(keys)
                op = rnd.randrange(4)
                if op == 0:
                    v = "v%d" % i
                    cmds.append(["SET", k, v])
                    expected.append(b"+OK\r\n")
                    model[k] = v.encode()
                elif op == 1:
                    cmds.append(["GET", k])
                    v = model.get(k)
                    expected.append(b"$-1\r\n" if v is None else b"$%d\r\n%s\r\n" % (len(v), v))
                elif op == 2:
                    k2 = rnd.choice(keys)
                    cmds.append(["MGET", k, k2])
                    parts = [b"*2\r\n"]
                    for kk in (k, k2):
                        v = model.get(kk)
                        parts.append(b"$-1\r\n" if v is None else b"$%d\r\n%s\r\n" % (len(v), v))
                    expected.append(b"".join(parts))
                else:
                    cmds.append(["ECHO", "e%d" % i])
                    expected.append(b"$%d\r\ne%d\r\n" % (len(str(i)) + 1, i))
            with RawConn("127.0.0.1", srv4.port, timeout=30) as c:
                c.send_many(cmds)
                got = c.read_replies(len(cmds), timeout=30)
            for i, (g, e) in enumerate(zip(got, expected)):
                if g.raw != e:
                    errors.append("conn %d reply #%d to %r: got %r expected %r" % (tid, i, cmds[i], g.raw, e))
                    return
        except Exception as e:  # noqa
            errors.append("conn %d: %s: %s" % (tid, type(e).__name__, e))

    threads = [threading.Thread(target=work, args=(t,), daemon=True) for t in range(6)]
    try:
        for t in threads:
            t.start()
    finally:
        for t in threads:
            t.join(60)
    assert not any(t.is_alive() for t in threads), "pipelines did not complete"
    assert not errors, "\n".join(errors)


def test_flushall_during_writes_server_survives(srv4):
    load = Load(srv4)
    clients = []

    def writer(seed):
        c = _client(srv4)
        clients.append(c)
        rnd = random.Random(seed)

        def step():
            p = c.pipeline(transaction=rnd.random() < 0.5)
            for i in range(20):
                p.set("fw:%d" % rnd.randrange(500), i, px=rnd.choice([None, 50, 5000]))
            p.mget(["fw:%d" % i for i in range(0, 500, 25)])
            p.execute()
        return step

    def flusher():
        c = _client(srv4)
        clients.append(c)

        def step():
            c.flushall(asynchronous=random.random() < 0.5)
            time.sleep(0.05)
        return step

    try:
        for i in range(3):
            load.spawn("writer%d" % i, writer(i))
        load.spawn("flusher", flusher())
        load.run_for(1.5)
        c = _client(srv4)
        clients.append(c)
        c.flushall()
        assert c.dbsize() == 0
        assert c.keys("*") == []
    finally:
        for c in clients:
            c.close()


def test_no_reply_is_owed_when_load_stops(srv4):
    """Regression (a CI run, then 1 run in ~30 of this file here): a pipeline of single-key
    writes deferred behind a multi-shard MGET's intents waited for ever once the load stopped.
    The MGET's last part ran on another thread between the shard finding the keys held and
    asking to be told of the release; the shard released the finished transaction but did not
    look at its deferred work again, and with nothing held, no later turn did either, until
    another message came. Many short bursts of load each end with every reply sent (checked
    with CLIENT LIST's oll: replies owed)."""
    keys = ["nr:%d" % i for i in range(64)]
    for burst in range(8):
        load = Load(srv4)
        clients = []

        def writer(seed):
            c = _client(srv4)
            clients.append(c)
            rnd = random.Random(seed * 1000 + burst)

            def step():
                p = c.pipeline(transaction=False)
                for i in range(16):
                    p.set(rnd.choice(keys), i)
                p.mget(rnd.sample(keys, 12))
                p.execute()
            return step

        def flusher():
            c = _client(srv4)
            clients.append(c)
            return lambda: (c.flushall(), time.sleep(0.02))

        try:
            for i in range(3):
                load.spawn("writer%d" % i, writer(i))
            load.spawn("flusher", flusher())
            load.run_for(0.25)
            probe = _client(srv4)
            clients.append(probe)
            owed = [line for line in probe.execute_command("CLIENT", "LIST").decode().splitlines()
                    if " oll=0 " not in line]
            assert not owed, "burst %d: replies still owed:\n%s" % (burst, "\n".join(owed))
        finally:
            for c in clients:
                c.close()
