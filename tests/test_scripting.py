"""Lua scripts against the real server: atomicity across shards, SCRIPT KILL from another
thread, the script cache seen from every thread, and scripts inside MULTI (the replies
themselves are compared with redis-server in diff_scenarios_scripting.py)."""

import hashlib
import socket
import threading
import time

import pytest
import redis

TRANSFER = """
local from = tonumber(redis.call('GET', KEYS[1]))
local amount = tonumber(ARGV[1])
if from < amount then return 0 end
redis.call('DECRBY', KEYS[1], amount)
redis.call('INCRBY', KEYS[2], amount)
return 1
"""

# Reads every account in one script: the sum must never show a transfer half done.
TOTAL = """
local sum = 0
for i, k in ipairs(KEYS) do sum = sum + tonumber(redis.call('GET', k)) end
return sum
"""


def _moves_keep_the_total(srv, prefix, move):
    """Four clients call `move(client, i, accounts)` over and over for 3 s on 12 accounts of
    100 spread over the shards while two readers sum them (one in a script, one by MGET):
    no reader may see a total other than 1200, nor may the end."""
    c = srv.client()
    accounts = ["%s%d" % (prefix, i) for i in range(12)]
    for a in accounts:
        c.set(a, 100)
    expected = 100 * len(accounts)
    stop = time.monotonic() + 3
    errors = []

    def mover(seed):
        cc = srv.client()
        i = seed
        while time.monotonic() < stop and not errors:
            move(cc, i, accounts)
            i += 4

    def reader(by_script):
        cc = srv.client()
        while time.monotonic() < stop and not errors:
            if by_script:
                total = cc.eval(TOTAL, len(accounts), *accounts)
            else:
                total = sum(int(v) for v in cc.mget(accounts))
            if total != expected:
                errors.append(total)

    threads = [threading.Thread(target=mover, args=(s,)) for s in range(4)]
    threads += [threading.Thread(target=reader, args=(b,)) for b in (True, False)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, "a reader saw a total of %r, not %d" % (errors[:3], expected)
    assert sum(int(v) for v in c.mget(accounts)) == expected


def test_scripts_moving_values_across_shards_never_show_half_a_move(darner_factory):
    def move(cc, i, accounts):
        src, dst = accounts[i % len(accounts)], accounts[(i * 7 + 3) % len(accounts)]
        if src != dst:
            cc.eval(TRANSFER, 2, src, dst, 1 + i % 5)

    _moves_keep_the_total(darner_factory(threads=4), "acct:", move)


def test_a_script_cached_on_one_thread_runs_from_every_connection(darner_factory):
    srv = darner_factory(threads=2)
    body = "return 'from cache ' .. ARGV[1]"
    sha = srv.client().script_load(body)
    assert sha == hashlib.sha1(body.encode()).hexdigest()
    # Connections land on both threads: each finds the script.
    for i in range(8):
        c = srv.client()
        assert c.evalsha(sha, 0, str(i)) == ("from cache %d" % i).encode()
        assert c.script_exists(sha, "0" * 40) == [True, False]
    srv.client().script_flush()
    for _ in range(4):
        with pytest.raises(redis.exceptions.NoScriptError):
            srv.client().evalsha(sha, 0, "x")


def test_eval_inside_multi_runs_with_the_transaction(darner_factory):
    srv = darner_factory(threads=2)
    c = srv.client()
    p = c.pipeline(transaction=True)
    p.set("a", 1)
    p.eval("return redis.call('INCRBY', KEYS[1], 10) + redis.call('INCR', KEYS[2])", 2, "a", "b")
    p.mget("a", "b")
    assert p.execute() == [True, 12, [b"11", b"1"]]


def _on_another_thread(srv, deadline):
    """A connection served by a thread other than the stuck one: it answers PING (a
    connection on the thread that runs the looping script gets no answer until it ends)."""
    while time.monotonic() < deadline:
        c = srv.client(socket_timeout=1)
        try:
            c.ping()
            return c
        except redis.exceptions.ResponseError:
            return c  # BUSY: served, by a thread that is not running the script
        except redis.exceptions.TimeoutError:
            pass
    raise AssertionError("no connection on another thread")


def _run_in_background(client, script):
    """EVALs `script` on a thread of its own; the error it ends with lands in outcome."""
    outcome = {}

    def run():
        try:
            client.eval(script, 0)
        except redis.exceptions.ResponseError as e:
            outcome["error"] = str(e)

    t = threading.Thread(target=run)
    t.start()
    return t, outcome


def test_script_kill_stops_a_looping_script_that_has_not_written(darner_factory):
    srv = darner_factory(threads=2)
    looping = srv.client(socket_timeout=30)
    t, outcome = _run_in_background(looping, "local i = 0 while true do i = i + 1 end")
    deadline = time.monotonic() + 20
    killer = _on_another_thread(srv, deadline)
    # The script may not have started yet: NOTBUSY until it runs.
    while time.monotonic() < deadline:
        try:
            assert killer.script_kill()
            break
        except redis.exceptions.ResponseError as e:
            assert "NOTBUSY" in str(e)
            time.sleep(0.01)
    t.join(20)
    assert not t.is_alive()
    assert "Script killed by user with SCRIPT KILL" in outcome["error"]
    # The keyspace is free again.
    assert killer.set("after", "kill")
    assert looping.get("after") == b"kill"
    with pytest.raises(redis.exceptions.ResponseError, match="NOTBUSY"):
        killer.script_kill()


def test_reads_inside_scripts_are_tracked_and_writes_inside_them_invalidate(darner_factory):
    from resp_reader import RawConn

    srv = darner_factory(threads=2)
    a = RawConn("127.0.0.1", srv.port)
    a.call("HELLO", "3")
    assert a.call("CLIENT", "TRACKING", "on").raw == b"+OK\r\n"
    keys = ["t1", "t2", "t3", "t4"]  # both shards
    for k in keys:
        a.call("EVAL", "return redis.call('GET', KEYS[1])", "1", k)
    a.call("EVAL", "return redis.call('GET', 'undeclared')", "0")
    # Another client's script writes them all.
    srv.client().eval("for i, k in ipairs(KEYS) do redis.call('SET', k, 'v') end",
                      5, *keys, "undeclared")
    invalidated = set()
    a.sock.settimeout(10)
    while len(invalidated) < 5:
        r = a.read_reply()
        assert r.raw.startswith(b">2\r\n$10\r\ninvalidate\r\n"), r.raw
        for k in keys + ["undeclared"]:
            if r.raw.endswith(b"$%d\r\n%s\r\n" % (len(k), k.encode())):
                invalidated.add(k)
    assert invalidated == set(keys + ["undeclared"])


LIB = """#!lua name=counters
local function bump(keys, args)
  return redis.call('INCRBY', keys[1], args[1])
end
local function peek(keys, args)
  return redis.call('GET', keys[1])
end
redis.register_function('bump', bump)
redis.register_function{function_name='peek', callback=peek, flags={'no-writes'},
                        description='reads a counter'}
"""


def test_functions_loaded_on_one_thread_are_called_from_every_connection(darner_factory):
    srv = darner_factory(threads=2)
    c = srv.client()
    assert c.function_load(LIB) == b"counters"
    for i in range(8):  # both threads
        cc = srv.client()
        assert cc.fcall("bump", 1, "ctr", 1) == i + 1
        assert cc.fcall_ro("peek", 1, "ctr") == str(i + 1).encode()
    libs = c.function_list(withcode=True)
    assert len(libs) == 1
    lib = {k.decode() if isinstance(k, bytes) else k: v for k, v in zip(libs[0][::2], libs[0][1::2])}
    assert lib["library_name"] == b"counters" and lib["library_code"] == LIB.encode()
    names = sorted(f[1] for f in lib["functions"])
    assert names == [b"bump", b"peek"]
    payload = c.function_dump()
    assert c.function_delete("counters")
    for _ in range(4):
        with pytest.raises(redis.exceptions.ResponseError, match="Function not found"):
            srv.client().fcall("bump", 1, "ctr", 1)
    assert c.function_restore(payload)
    for _ in range(4):
        assert srv.client().fcall_ro("peek", 1, "ctr") == b"8"
    assert c.function_flush()
    with pytest.raises(redis.exceptions.ResponseError, match="Function not found"):
        srv.client().fcall("peek", 1, "ctr")


def test_a_function_dump_made_by_redis_restores_here(darner_factory, redis_ref):
    ref = redis_ref.client()
    ref.function_flush()
    ref.function_load(LIB)
    payload = ref.function_dump()
    ref.function_flush()
    srv = darner_factory(threads=2)
    c = srv.client()
    assert c.function_restore(payload)
    assert c.fcall("bump", 1, "n", 41) == 41
    # And ours restores into Redis.
    assert ref.function_restore(c.function_dump())
    assert ref.fcall("bump", 1, "n", 1) == 1
    ref.function_flush()


def test_other_clients_get_busy_past_the_threshold_until_script_kill(darner_factory):
    srv = darner_factory(threads=2)
    admin = srv.client()
    # lua-time-limit is busy-reply-threshold's old name.
    assert admin.config_set("lua-time-limit", 100)
    assert admin.config_get("busy-reply-threshold") == {"busy-reply-threshold": "100"}
    admin.set("k", "v")
    looping = srv.client(socket_timeout=30)
    t, outcome = _run_in_background(looping, "while true do end")
    deadline = time.monotonic() + 20
    other = _on_another_thread(srv, deadline)
    busy = None
    while time.monotonic() < deadline and busy is None:
        try:
            other.get("k")
        except redis.exceptions.ResponseError as e:
            busy = str(e)
        time.sleep(0.02)
    assert busy == "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.", busy
    assert other.script_kill()
    t.join(20)
    assert "Script killed by user with SCRIPT KILL" in outcome["error"]
    assert other.get("k") == b"v"


def _key_on(shard_no, shards, prefix):
    from keyslot import shard

    return next("%s%d" % (prefix, i) for i in range(1000) if shard("%s%d" % (prefix, i), shards) == shard_no)


# Spins for the given milliseconds (TIME is not a key command: the script keeps holding only
# its declared key), then writes it.
SPIN = """
local t0 = redis.call('TIME')
local function us(t) return tonumber(t[1]) * 1000000 + tonumber(t[2]) end
while us(redis.call('TIME')) - us(t0) < tonumber(ARGV[1]) * 1000 do end
redis.call('SET', KEYS[1], 'spun')
return 1
"""


def test_a_script_holds_only_its_declared_keys_so_other_shards_keep_serving(darner_factory):
    srv = darner_factory(threads=2)
    admin = srv.client()
    assert admin.config_set("busy-reply-threshold", 60000)
    declared = _key_on(0, 2, "spin")
    # Keys it did not declare, one on each shard (the script's own thread spins: the other
    # thread's shard is the one that can answer).
    keys = [_key_on(0, 2, "other"), _key_on(1, 2, "other")]
    for k in keys + [declared]:
        admin.set(k, "before")
    spinner = srv.client(socket_timeout=60)
    done = {}

    def spin():
        # 15 s: finding two connections on the free thread takes up to 5 s and the probes up
        # to 2 s; on a loaded machine (the whole suite) 8 s once left a probe answered just
        # after the script's end.
        done["reply"] = spinner.eval(SPIN, 1, declared, 15000)
        done["at"] = time.monotonic()

    t = threading.Thread(target=spin)
    t.start()
    # Wait until the script runs: a PING then goes unanswered on the spinning thread. Before
    # that, a connection there answers PING and would be taken for one on the free thread
    # below (in a full CI run both probes once landed on the spinning thread that way, and
    # neither was answered before the script's end).
    # Raw sockets: redis-py retries a timed-out command on a new connection.
    deadline = time.monotonic() + 10
    spinning = False
    while not spinning and time.monotonic() < deadline:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=2) as s:
            s.settimeout(0.3)
            s.sendall(b"PING\r\n")
            try:
                s.recv(64)
            except socket.timeout:
                spinning = True
    assert spinning, "the script never held its thread"
    # A connection on the thread that does not spin, reading the key of that thread's shard,
    # is answered while the script still runs (a script that reserved every shard held them
    # all until its end).
    # Two connections on the thread that does not spin (they answer PING).
    free = []
    deadline = time.monotonic() + 5
    while len(free) < 2 and time.monotonic() < deadline:
        c = srv.client(socket_timeout=0.3)
        try:
            c.ping()
            # Served: from now on it may wait longer (a loaded machine).
            for conn in c.connection_pool._available_connections:
                conn.socket_timeout = 2
                conn._sock.settimeout(2)
            free.append(c)
        except redis.exceptions.TimeoutError:
            pass  # on the spinning thread
    assert len(free) == 2, "no connection on the thread that does not spin"
    # One of the two keys lives on that thread's shard: its GET is answered while the script
    # still runs (the other's waits for the spinning thread).
    answers = []

    def probe(c, k):
        try:
            if c.get(k) == b"before":
                answers.append((k, time.monotonic()))
        except redis.exceptions.TimeoutError:
            pass

    probes = [threading.Thread(target=probe, args=(c, k)) for c, k in zip(free, keys)]
    for p in probes:
        p.start()
    for p in probes:
        p.join()
    served = min(answers, key=lambda a: a[1]) if answers else None
    t.join(60)
    assert done["reply"] == 1
    assert served is not None, "no other client was served while the script ran"
    assert served[1] < done["at"]
    assert admin.get(declared) == b"spun"


def test_a_script_reaching_undeclared_keys_after_writing_is_undone_and_rerun_once(darner_factory):
    srv = darner_factory(threads=2)
    c = srv.client()
    declared = _key_on(0, 2, "decl")
    undeclared = _key_on(1, 2, "undecl")
    script = """
    redis.call('INCR', KEYS[1])
    redis.call('RPUSH', KEYS[1] .. ':log', ARGV[2])
    redis.call('INCR', ARGV[1])
    return {redis.call('GET', KEYS[1]), redis.call('GET', ARGV[1])}
    """
    # Its first run holds the declared key only, writes it, then reaches the undeclared one:
    # the writes are put back and the script runs again over every shard, once.
    assert c.eval(script, 1, declared, undeclared, "first") == [b"1", b"1"]
    assert c.lrange(declared + ":log", 0, -1) == [b"first"]
    # Known now to reach beyond its keys: it reserves every shard from the start.
    assert c.eval(script, 1, declared, undeclared, "second") == [b"2", b"2"]
    assert c.lrange(declared + ":log", 0, -1) == [b"first", b"second"]


def test_a_script_writing_a_big_value_runs_over_every_shard_and_writes_it_once(darner_factory):
    srv = darner_factory(threads=2)
    c = srv.client()
    big = _key_on(0, 2, "big")
    c.rpush(big, *[b"x" * 100 for _ in range(5000)])  # too big to copy for an undo
    script = "redis.call('LPUSH', KEYS[1], 'head'); return redis.call('LLEN', KEYS[1])"
    assert c.eval(script, 1, big) == 5001
    assert c.lrange(big, 0, 0) == [b"head"]
    # A watched key is not written before the script holds everything: the EXEC of the
    # client that watched it fails once, as it would have in Redis.
    w = srv.client()
    small = _key_on(1, 2, "watched")
    w.set(small, 1)
    p = w.pipeline(transaction=True)
    p.watch(small)
    assert c.eval("return redis.call('INCR', KEYS[1])", 1, small) == 2
    p.multi()
    p.get(small)
    with pytest.raises(redis.exceptions.WatchError):
        p.execute()


def test_scripts_with_undeclared_keys_never_show_half_a_move(darner_factory):
    """Movers whose destination is undeclared (each body new, so each first run is undone and
    rerun)."""

    def move(cc, i, accounts):
        src, dst = accounts[i % len(accounts)], accounts[(i * 5 + 1) % len(accounts)]
        body = """
        local n = tonumber(ARGV[2])
        redis.call('DECRBY', KEYS[1], n)
        redis.call('INCRBY', ARGV[1], n)
        return %d""" % (i % 50)
        if src != dst:
            cc.eval(body, 1, src, dst, 1 + i % 3)

    _moves_keep_the_total(darner_factory(threads=4), "uacct:", move)


OOM_CASES = [
    # No flags: runs; a command that may grow memory fails until the script has written.
    ("return redis.call('GET', 'x')",),
    ("return redis.call('SET', 'x', 1)",),
    ("local ok = redis.pcall('SET', 'x', 1); return ok['err']",),
    ("redis.call('DEL', 'nokey'); return redis.call('SET', 'x', 1)",),
    # Flags without allow-oom or no-writes: refused before it runs.
    ("#!lua\nreturn redis.call('GET', 'x')",),
    # no-writes: runs.
    ("#!lua flags=no-writes\nreturn redis.call('GET', 'x')",),
    # allow-oom: runs and writes.
    ("#!lua flags=allow-oom\nreturn redis.call('SET', 'y', 2)",),
]


def _outcome(client, body):
    try:
        return ("ok", client.eval(body, 0))
    except redis.exceptions.ResponseError as e:
        return ("err", str(e))


def test_scripts_over_maxmemory_follow_redis_oom_rules(darner_factory, redis_ref):
    srv = darner_factory(threads=2)
    servers = [srv.client(), redis_ref.client()]
    for c in servers:
        c.flushall()
        c.set("x", "v")
    try:
        for c in servers:
            c.config_set("maxmemory-policy", "noeviction")
            c.config_set("maxmemory", 1)
        for (body,) in OOM_CASES:
            ours, theirs = (_outcome(c, body) for c in servers)
            assert ours == theirs, body
    finally:
        for c in servers:
            c.config_set("maxmemory", 0)
    # Functions: the same rules by their flags.
    lib = """#!lua name=oomlib
redis.register_function('plain', function(keys, args) return redis.call('SET', 'z', 1) end)
redis.register_function{function_name='ro', callback=function(keys, args) return redis.call('GET', 'x') end, flags={'no-writes'}}
redis.register_function{function_name='oomok', callback=function(keys, args) return redis.call('SET', 'z', 3) end, flags={'allow-oom'}}
"""
    for c in servers:
        c.function_load(lib, replace=True)
    try:
        for c in servers:
            c.config_set("maxmemory", 1)
        for name in ("plain", "ro", "oomok"):
            got = []
            for c in servers:
                try:
                    got.append(("ok", c.fcall(name, 0)))
                except redis.exceptions.ResponseError as e:
                    got.append(("err", str(e)))
            assert got[0] == got[1], name
    finally:
        for c in servers:
            c.config_set("maxmemory", 0)
            c.function_delete("oomlib")
