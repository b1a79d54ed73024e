"""What Darner writes to its append-only file for commands whose effect depends on when, where
or by what chance they ran (propagate.rs, `ShardCtx::propagate`): each must be written as the
commands that redo its effect exactly when the file is replayed with the clock stopped, as
Redis 7.2 writes them. Real servers, real files: the incr file named by the manifest is read
back with a small RESP reader. Where Redis 7.0 (Debian's redis-server) writes the same, the
test compares with what it wrote for the same commands (timestamps aside, which are checked
against the clock instead); where 7.0 and 7.2 differ, Darner follows 7.2 (said at each test).
"""

import os
import shutil
import tempfile
import threading
import time

import pytest
import redis

import harness

AOF_ARGS = ["--appendonly", "yes", "--appendfsync", "always"]


# ---- reading the AOF -------------------------------------------------------------------------

def parse_resp_commands(data: bytes):
    """The commands (lists of bytes) of a RESP AOF, `#TS:` annotations skipped."""
    cmds, i = [], 0
    while i < len(data):
        if data[i:i + 1] == b"#":
            i = data.index(b"\r\n", i) + 2
            continue
        assert data[i:i + 1] == b"*", data[i:i + 40]
        end = data.index(b"\r\n", i)
        n = int(data[i + 1:end])
        i = end + 2
        argv = []
        for _ in range(n):
            assert data[i:i + 1] == b"$"
            end = data.index(b"\r\n", i)
            ln = int(data[i + 1:end])
            i = end + 2
            argv.append(data[i:i + ln])
            i += ln + 2
        cmds.append(argv)
    return cmds


def incr_commands(workdir, dirname="appendonlydir", until=None):
    """The commands of the incr files the manifest lists, in order, SELECTs left out; read
    again (up to 10 s) until `until(commands)` holds, if given."""
    deadline = time.time() + 10
    while True:
        cmds = read_incr(workdir, dirname)
        if until is None or until(cmds) or time.time() > deadline:
            return cmds
        time.sleep(0.05)


def read_incr(workdir, dirname):
    d = os.path.join(workdir, dirname)
    manifest = [f for f in os.listdir(d) if f.endswith(".manifest")][0]
    out = []
    for line in open(os.path.join(d, manifest), "rb").read().splitlines():
        words = line.split()
        fields = dict(zip(words[0::2], words[1::2]))
        if fields.get(b"type") == b"i":
            name = fields[b"file"].strip(b'"').decode()
            out += parse_resp_commands(open(os.path.join(d, name), "rb").read())
    return [c for c in out if c[0].upper() != b"SELECT"]


def norm(cmds, since=None):
    """Commands as lists of str, the name upper-cased, unix-ms times (13 digits) as <ts>;
    only those after the last `since` marker command."""
    if since is not None:
        idx = max(i for i, c in enumerate(cmds) if c == since)
        cmds = cmds[idx + 1:]
    out = []
    for c in cmds:
        words = [c[0].decode().upper()]
        for a in c[1:]:
            s = a.decode(errors="replace")
            if s.isdigit() and len(s) == 13:
                s = "<ts>"
            elif "-" in s and s.split("-")[0].isdigit() and len(s.split("-")[0]) == 13:
                s = "<id>"
            words.append(s)
        out.append(words)
    return out


MARK = [b"SET", b"mark", b"1"]


def mark(c):
    c.execute_command("SET", "mark", "1")


def start_redis_aof():
    binary = harness.redis_server_bin()
    if not binary:
        pytest.skip("redis-server not installed")
    srv = harness.Server(binary, ["--save", ""] + AOF_ARGS, is_redis=False, name="redis-aof")
    return srv.start()


def both(darner_factory, script):
    """Runs `script(client)` on a Darner and on a Redis 7.0 with the AOF on; returns what each
    wrote after the mark (normalised)."""
    d = darner_factory(*AOF_ARGS)
    ref = start_redis_aof()
    try:
        for srv in (d, ref):
            c = srv.client()
            mark(c)
            script(c)
        return (norm(incr_commands(d.workdir), MARK), norm(incr_commands(ref.workdir), MARK),
                d)
    finally:
        ref.stop()


def restart(darner_factory, old):
    """Stops `old` and starts a Darner on a copy of its AOF directory."""
    old.stop(cleanup=False)
    new = darner_factory(*AOF_ARGS, "--dir", old.workdir)
    return new


# ---- differential: the same commands, the same file ------------------------------------------

def test_ttl_commands_written_absolute_as_redis(darner_factory):
    def script(c):
        now = int(time.time())
        c.execute_command("SET", "a", "v", "EX", "100")
        c.execute_command("SET", "b", "v", "PX", "100000", "NX", "GET")
        c.execute_command("SET", "b", "w", "EX", "100", "NX")  # not set: nothing written
        c.execute_command("SET", "c", "v", "PXAT", str((now + 100) * 1000), "XX")  # not set
        c.execute_command("SET", "c", "v", "EXAT", str(now + 100))
        c.execute_command("SET", "d", "v", "KEEPTTL")
        c.execute_command("SETEX", "e", "100", "v")
        c.execute_command("PSETEX", "f", "100000", "v")
        c.execute_command("EXPIRE", "d", "100")
        c.execute_command("EXPIRE", "d", "200", "NX")  # refused: nothing written
        c.execute_command("EXPIRE", "d", "200", "XX")
        c.execute_command("PEXPIRE", "e", "100000", "GT")
        c.execute_command("EXPIREAT", "f", str(now + 100))
        c.execute_command("EXPIRE", "missing", "100")  # nothing
        c.execute_command("EXPIRE", "a", "-1")  # deleted: DEL
        c.execute_command("PERSIST", "b")
        c.execute_command("PERSIST", "b")  # no TTL left: nothing
        c.execute_command("SET", "g", "v")
        c.execute_command("GETEX", "g", "EX", "100")
        c.execute_command("GETEX", "g")  # a read: nothing
        c.execute_command("GETEX", "g", "PERSIST")
        c.execute_command("GETEX", "g", "PXAT", "1")  # in the past: DEL
        c.execute_command("GETSET", "h", "1")
        c.execute_command("GETDEL", "h")
        c.execute_command("GETDEL", "h")  # nothing
        c.execute_command("INCRBYFLOAT", "i", "1.5")
        c.execute_command("HINCRBYFLOAT", "j", "f", "2.5")

    mine, theirs, d = both(darner_factory, script)
    assert mine == theirs
    assert ["SET", "A", "v", "PXAT", "<ts>"] != mine[0]  # sanity: names kept as sent
    # The times are the absolute ones the commands meant.
    raw = incr_commands(d.workdir)
    now_ms = time.time() * 1000
    for c in raw:
        if c[0].upper() in (b"SET", b"PEXPIREAT") and len(c) >= 3:
            for a in c[2:]:
                if a.isdigit() and len(a) == 13:
                    assert abs(int(a) - now_ms) < 300_000


def test_blocking_commands_served_at_once_written_as_the_pop(darner_factory):
    def script(c):
        c.execute_command("RPUSH", "l", "a", "b", "c", "d", "e", "f", "g")
        c.execute_command("BLPOP", "l", "0")
        c.execute_command("BRPOP", "l", "0")
        c.execute_command("BLMOVE", "l", "l2", "LEFT", "RIGHT", "0")
        c.execute_command("BRPOPLPUSH", "l", "l2", "0")
        c.execute_command("BLPOP", "nolist", "0.01")  # timed out: nothing
        c.execute_command("ZADD", "z", "1", "a", "2", "b", "3", "c")
        c.execute_command("BZPOPMIN", "z", "0")
        c.execute_command("BZPOPMAX", "z", "0")
        c.execute_command("SPOP", "noset")  # nothing
        c.execute_command("SADD", "s", "only")
        c.execute_command("SPOP", "s")  # the one member: SREM

    mine, theirs, _ = both(darner_factory, script)
    assert mine == theirs
    assert ["LMOVE", "l", "l2", "LEFT", "RIGHT"] in mine


def test_blmpop_and_bzmpop_written_as_pops_with_the_count_popped(darner_factory):
    def script(c):
        c.execute_command("RPUSH", "l", "a", "b", "c")
        c.execute_command("BLMPOP", "0", "1", "l", "LEFT", "COUNT", "2")
        c.execute_command("ZADD", "z", "1", "a", "2", "b", "3", "c")
        c.execute_command("BZMPOP", "0", "1", "z", "MIN", "COUNT", "5")

    mine, theirs, _ = both(darner_factory, script)
    assert mine == theirs
    assert mine[-1] == ["ZPOPMIN", "z", "3"]


def test_xadd_generated_id_and_approximate_trim_written_exact(darner_factory):
    def script(c):
        c.execute_command("CONFIG", "SET", "stream-node-max-entries", "4")
        for i in range(20):
            c.execute_command("XADD", "s", "*", "f", str(i))
        c.execute_command("XADD", "s", "MAXLEN", "~", "5", "*", "f", "x")
        c.execute_command("XTRIM", "s", "MAXLEN", "~", "2")  # trims nothing: nothing
        c.execute_command("XADD", "s2", "5-*", "a", "b")
        c.execute_command("XADD", "s2", "7-1", "a", "b")  # explicit: as sent
        c.execute_command("XTRIM", "s2", "MAXLEN", "1")

    mine, theirs, d = both(darner_factory, script)
    # Redis 7.0 also writes the LIMIT it was given next to `=`, which only a replaying
    # Redis accepts; Darner leaves it out (no LIMIT was given here).
    assert mine == theirs
    c = d.client()
    ids = [e[0] for e in c.execute_command("XRANGE", "s", "-", "+")]
    raw = incr_commands(d.workdir)
    written = {a for c in raw if c[0].upper() == b"XADD" and c[1] == b"s" for a in c[2:]}
    assert all(i in written for i in ids)
    trim = [c for c in raw if c[0].upper() == b"XADD" and b"MAXLEN" in c][0]
    assert trim[3:5] == [b"=", str(len(ids)).encode()]


# ---- Darner's own (Redis 7.2) forms ----------------------------------------------------------

def test_spop_with_count_written_as_srem_of_the_members_popped(darner_factory):
    # Redis 7.2 batches the members in SREMs (7.0 wrote one SREM each).
    d = darner_factory(*AOF_ARGS)
    c = d.client()
    c.sadd("s", *[str(i) for i in range(50)])
    popped = c.execute_command("SPOP", "s", "30")
    c.sadd("t", "a", "b")
    c.execute_command("SPOP", "t", "5")  # the whole set: DEL
    cmds = incr_commands(d.workdir)
    srem = [x for x in cmds if x[0] == b"SREM"]
    assert len(srem) == 1 and srem[0][1] == b"s"
    assert sorted(srem[0][2:]) == sorted(popped)
    assert cmds[-1] == [b"DEL", b"t"]
    left = c.smembers("s")
    new = restart(darner_factory, d)
    assert new.client().smembers("s") == left
    assert new.client().exists("t") == 0


def test_xreadgroup_written_as_xclaims_and_setid(darner_factory):
    d = darner_factory(*AOF_ARGS)
    c = d.client()
    for i in (1, 2, 3):
        c.execute_command("XADD", "t", "%d-1" % i, "a", str(i))
    c.execute_command("XGROUP", "CREATE", "t", "g", "0")
    mark(c)
    c.execute_command("XREADGROUP", "GROUP", "g", "c1", "COUNT", "2", "STREAMS", "t", ">")
    c.execute_command("XREADGROUP", "GROUP", "g", "c2", "NOACK", "STREAMS", "t", ">")
    c.execute_command("XREADGROUP", "GROUP", "g", "c3", "STREAMS", "t", ">")
    c.execute_command("XCLAIM", "t", "g", "c4", "0", "1-1")
    cmds = norm(incr_commands(d.workdir), MARK)
    xclaim = ["XCLAIM", "t", "g", "c1", "0", "1-1", "TIME", "<ts>", "RETRYCOUNT", "1",
              "FORCE", "JUSTID", "LASTID", "1-1"]
    assert cmds[0] == xclaim
    assert cmds[1][5] == "2-1" and cmds[1][13] == "2-1"
    # Redis 7.2 also writes the group's id and entries read after the XCLAIMs.
    assert cmds[2] == ["XGROUP", "SETID", "t", "g", "2-1", "ENTRIESREAD", "2"]
    assert cmds[3] == ["XGROUP", "CREATECONSUMER", "t", "g", "c2"]
    assert cmds[4] == ["XGROUP", "SETID", "t", "g", "3-1", "ENTRIESREAD", "3"]
    assert cmds[5] == ["XGROUP", "CREATECONSUMER", "t", "g", "c3"]
    assert cmds[6][:6] == ["XCLAIM", "t", "g", "c4", "0", "1-1"]
    assert cmds[6][9] == "2"
    assert len(cmds) == 7
    def pending(cl):
        # Idle times move on; owners and delivery counts replay exactly.
        return [(p["message_id"], p["consumer"], p["times_delivered"])
                for p in cl.xpending_range("t", "g", "-", "+", 10)]

    before = (pending(c), c.xinfo_groups("t"))
    new = restart(darner_factory, d).client()
    assert pending(new) == before[0]
    assert new.xinfo_groups("t") == before[1]
    names = {x["name"] for x in new.xinfo_consumers("t", "g")}
    assert names == {"c1", "c2", "c3", "c4"} or names == {b"c1", b"c2", b"c3", b"c4"}


def test_hash_field_ttls_written_as_hpexpireat(darner_factory):
    d = darner_factory(*AOF_ARGS)
    c = d.client()
    c.hset("h", mapping={"a": "1", "b": "2", "c": "3"})
    mark(c)
    c.execute_command("HEXPIRE", "h", "100", "FIELDS", "2", "a", "nofield")
    c.execute_command("HPEXPIRE", "h", "100000", "NX", "FIELDS", "2", "a", "b")
    c.execute_command("HEXPIRE", "h", "0", "FIELDS", "1", "c")  # past: removed
    c.execute_command("HPERSIST", "h", "FIELDS", "1", "nofield")  # nothing
    c.execute_command("HGETEX", "h", "EX", "50", "FIELDS", "1", "a")
    c.execute_command("HGETEX", "h", "PERSIST", "FIELDS", "1", "a")
    c.execute_command("HSETEX", "h2", "PX", "100000", "FIELDS", "1", "x", "1")
    cmds = norm(incr_commands(d.workdir), MARK)
    assert cmds == [
        ["HPEXPIREAT", "h", "<ts>", "FIELDS", "1", "a"],
        ["HPEXPIREAT", "h", "<ts>", "NX", "FIELDS", "1", "b"],
        ["HDEL", "h", "c"],
        ["HPEXPIREAT", "h", "<ts>", "FIELDS", "1", "a"],
        ["HPERSIST", "h", "FIELDS", "1", "a"],
        ["HSETEX", "h2", "PXAT", "<ts>", "FIELDS", "1", "x", "1"],
    ]
    ttl_b = c.execute_command("HPEXPIRETIME", "h", "FIELDS", "1", "b")
    new = restart(darner_factory, d).client()
    assert new.execute_command("HPEXPIRETIME", "h", "FIELDS", "1", "b") == ttl_b
    assert new.execute_command("HTTL", "h", "FIELDS", "1", "a") == [-1]
    assert 90 <= new.execute_command("HTTL", "h2", "FIELDS", "1", "x")[0] <= 100


def test_set_member_ttls_written_with_saddex_pxat(darner_factory):
    d = darner_factory(*AOF_ARGS)
    c = d.client()
    mark(c)
    c.execute_command("SADDEX", "s", "100", "a", "b")
    c.execute_command("FIELDEXPIRE", "s", "200", "a", "nomember")
    cmds = norm(incr_commands(d.workdir), MARK)
    assert cmds == [["SADDEX", "s", "PXAT", "<ts>", "a", "b"],
                    ["SADDEX", "s", "PXAT", "<ts>", "a"]]
    new = restart(darner_factory, d).client()
    assert new.smembers("s") == {b"a", b"b"}
    assert 190 <= new.execute_command("FIELDTTL", "s", "a") <= 200
    assert 90 <= new.execute_command("FIELDTTL", "s", "b") <= 100


# ---- restarts: the replay gives back what there was ------------------------------------------

def test_key_with_relative_ttl_changed_later_is_gone_after_restart_past_its_ttl(darner_factory):
    d = darner_factory(*AOF_ARGS)
    c = d.client()
    c.execute_command("SET", "k", "v", "PX", "300")
    c.execute_command("APPEND", "k", "x")
    deadline = time.time() + 10
    while c.exists("k") and time.time() < deadline:
        time.sleep(0.05)
    assert not c.exists("k")
    new = restart(darner_factory, d).client()
    assert new.get("k") is None


def test_expire_survives_a_restart(darner_factory):
    d = darner_factory(*AOF_ARGS)
    c = d.client()
    c.set("k", "v")
    c.execute_command("EXPIRE", "k", "100")
    new = restart(darner_factory, d).client()
    assert new.get("k") == b"v"
    assert 95 <= new.ttl("k") <= 100


def test_blocked_blmove_served_by_a_later_lpush_replays(darner_factory):
    d = darner_factory(*AOF_ARGS)
    c = d.client()
    blocked = d.client()
    got = []
    t = threading.Thread(target=lambda: got.append(
        blocked.execute_command("BLMOVE", "src", "dst", "LEFT", "RIGHT", "0")))
    t.start()
    deadline = time.time() + 10
    while c.info("clients")["blocked_clients"] < 1 and time.time() < deadline:
        time.sleep(0.02)
    c.execute_command("LPUSH", "src", "a", "b")
    t.join(10)
    assert got == [b"b"]
    cmds = norm(incr_commands(d.workdir))
    assert ["BLMOVE"] not in [x[:1] for x in cmds]
    i = cmds.index(["LPUSH", "src", "a", "b"])
    assert cmds[i + 1:] in ([["LMOVE", "src", "dst", "LEFT", "RIGHT"]],
                            [["LPOP", "src"], ["RPUSH", "dst", "b"]])
    new = restart(darner_factory, d).client()
    assert new.lrange("src", 0, -1) == [b"a"]
    assert new.lrange("dst", 0, -1) == [b"b"]


def test_xadd_ids_and_spop_survive_a_restart(darner_factory):
    d = darner_factory(*AOF_ARGS)
    c = d.client()
    ids = [c.execute_command("XADD", "s", "*", "f", str(i)) for i in range(5)]
    c.sadd("set", *[str(i) for i in range(20)])
    c.execute_command("SPOP", "set")
    c.execute_command("SPOP", "set", "7")
    members = c.smembers("set")
    new = restart(darner_factory, d).client()
    assert [e[0] for e in new.execute_command("XRANGE", "s", "-", "+")] == ids
    assert new.smembers("set") == members


def test_darner_aof_loads_in_redis_with_the_same_data(darner_factory):
    d = darner_factory(*AOF_ARGS)
    c = d.client()
    c.execute_command("SET", "a", "1", "EX", "100")
    c.execute_command("SETEX", "b", "200", "x")
    c.execute_command("SET", "p", "v")
    c.execute_command("PEXPIRE", "p", "300000")
    c.execute_command("INCRBYFLOAT", "f", "0.1")
    c.execute_command("INCRBYFLOAT", "f", "0.2")
    c.execute_command("HINCRBYFLOAT", "h", "x", "1.1")
    c.sadd("s", *[str(i) for i in range(30)])
    c.execute_command("SPOP", "s", "10")
    c.execute_command("SPOP", "s")
    c.execute_command("RPUSH", "l", "1", "2", "3")
    c.execute_command("BLMOVE", "l", "l2", "LEFT", "LEFT", "0")
    c.execute_command("ZADD", "z", "1", "a", "2", "b")
    c.execute_command("BZPOPMIN", "z", "0")
    for i in range(3):
        c.execute_command("XADD", "st", "*", "f", str(i))
    c.execute_command("XGROUP", "CREATE", "st", "g", "0")
    c.execute_command("XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "st", ">")
    keys = sorted(c.keys("*"))
    want = {k: (c.dump(k), c.pttl(k)) for k in keys}
    pending = c.execute_command("XPENDING", "st", "g")
    d.stop(cleanup=False)
    copy = tempfile.mkdtemp(prefix="redis-aof-load-")
    try:
        shutil.copytree(os.path.join(d.workdir, "appendonlydir"),
                        os.path.join(copy, "appendonlydir"))
        binary = harness.redis_server_bin()
        if not binary:
            pytest.skip("redis-server not installed")
        ref = harness.Server(binary, ["--save", "", "--appendonly", "yes", "--dir", copy],
                             is_redis=False, name="redis-load").start()
        try:
            r = ref.client()
            assert sorted(r.keys("*")) == keys
            for k in keys:
                t = r.type(k)
                if t == b"string":
                    assert r.get(k) == c_value(want[k][0], r, k)
                pt, wpt = r.pttl(k), want[k][1]
                assert (pt < 0) == (wpt < 0)
                if wpt > 0:
                    assert abs(pt - wpt) < 2000
            assert r.get("f") == b"0.3"
            assert r.hget("h", "x") == b"1.1"
            assert r.lrange("l2", 0, -1) == [b"1"]
            assert r.zrange("z", 0, -1) == [b"b"]
            assert r.scard("s") == 19
            assert r.execute_command("XPENDING", "st", "g") == pending
        finally:
            ref.stop()
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def c_value(dump, r, key):
    """A string's value from its DUMP payload, via a RESTORE on the reference."""
    r.execute_command("RESTORE", "__tmp__", "0", dump)
    try:
        return r.get("__tmp__")
    finally:
        r.delete("__tmp__")


def test_keys_that_expire_are_written_as_del_before_what_follows(darner_factory):
    # Regression: expiries were not written. A key that expired and was then written again
    # replayed (with nothing expiring during the load) onto the old value: SET k v PX, then
    # APPEND k x after the TTL came back as "vx" with the old TTL, i.e. gone, not "x".
    d = darner_factory(*AOF_ARGS)
    c = d.client()
    c.execute_command("SET", "k", "v", "PX", "150")
    c.execute_command("HSET", "h", "f", "1")
    c.execute_command("PEXPIRE", "h", "150")
    c.execute_command("SET", "gone", "1", "PX", "150")
    time.sleep(0.4)
    assert c.execute_command("APPEND", "k", "x") == 1
    assert c.execute_command("HINCRBY", "h", "g", "5") == 5
    written = [[a.upper() if i == 0 else a for i, a in enumerate(cmd)]
               for cmd in incr_commands(d.workdir)]
    assert written.index([b"DEL", b"k"]) < written.index([b"APPEND", b"k", b"x"])
    assert written.index([b"DEL", b"h"]) < written.index([b"HINCRBY", b"h", b"g", b"5"])
    assert [b"DEL", b"gone"] in written
    new = restart(darner_factory, d).client()
    assert new.get("k") == b"x" and new.ttl("k") == -1
    assert new.hgetall("h") == {b"g": b"5"} and new.ttl("h") == -1
    assert new.exists("gone") == 0


def test_big_xreadgroup_streamed_in_steps_is_written(darner_factory):
    # Regression: an XREADGROUP big enough to be answered in steps (stream.rs) wrote nothing,
    # so its deliveries (the PEL, the group's last id, the consumer) were lost on restart.
    d = darner_factory(*AOF_ARGS)
    c = d.client()
    pipe = c.pipeline(transaction=False)
    for i in range(6000):
        pipe.execute_command("XADD", "s", "%d-1" % (i + 1), "f", "v")
    pipe.execute()
    c.execute_command("XGROUP", "CREATE", "s", "g", "0")
    got = c.execute_command("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">")
    assert len(got[0][1]) == 6000
    before = c.execute_command("XPENDING", "s", "g")
    groups = c.execute_command("XINFO", "GROUPS", "s")
    written = incr_commands(d.workdir)
    assert sum(1 for cmd in written if cmd[0].upper() == b"XCLAIM") == 6000
    new = restart(darner_factory, d).client()
    assert new.execute_command("XPENDING", "s", "g") == before
    assert new.execute_command("XINFO", "GROUPS", "s") == groups


# ---- hash fields and set members their TTL removes -------------------------------------------

def upper_names(cmds):
    return [[a.upper() if i == 0 else a for i, a in enumerate(cmd)] for cmd in cmds]


def wait_past(ms):
    """Sleeps until the wall clock (the server's) is past unix ms `ms`, polling."""
    deadline = time.time() + 10
    while time.time() * 1000 <= ms + 5:
        assert time.time() < deadline
        time.sleep(0.01)


def test_hash_fields_their_ttl_removes_are_written_as_hdel_before_what_follows(darner_factory):
    # Regression: a field removed lazily by its TTL was not written, so the replay (nothing
    # expires during a load) changed the old value: HSET f 5, HPEXPIRE f, HINCRBY f 1 after
    # the TTL replayed as 6 instead of 1. Redis 7.4 writes `HDEL key field` for each
    # (t_hash.c, propagateHashFieldDeletion), and nothing else for a hash its last HDEL
    # empties.
    d = darner_factory(*AOF_ARGS)
    c = d.client()
    # Lazy expiry only: the active cycle must not get there first.
    c.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    c.execute_command("HSET", "h", "f", "5", "other", "x")
    c.execute_command("HSET", "one", "f", "5")
    c.execute_command("HSET", "ft", "f", "5", "other", "x")
    keys = ("h", "one", "ft")
    for k in keys:
        c.execute_command("HPEXPIRE", k, "100", "FIELDS", "1", "f")
    wait_past(max(c.execute_command("HPEXPIRETIME", k, "FIELDS", "1", "f")[0] for k in keys))
    # Dragonfly's FIELDTTL removes the field it finds due too (cmd/field_ttl.rs).
    assert c.execute_command("FIELDTTL", "ft", "f") == -3
    live = [c.execute_command("HINCRBY", k, "f", "1") for k in keys]
    assert live == [1, 1, 1]
    written = upper_names(incr_commands(
        d.workdir, until=lambda cs: [b"HINCRBY", b"ft", b"f", b"1"] in upper_names(cs)))
    for k in (b"h", b"one", b"ft"):
        assert written.index([b"HDEL", k, b"f"]) < written.index([b"HINCRBY", k, b"f", b"1"])
    # The emptied hash goes with its HDEL, as in Redis: no DEL of it.
    assert not [cmd for cmd in written if cmd[0] == b"DEL"]
    before = {k: c.hgetall(k) for k in keys}
    new = restart(darner_factory, d).client()
    assert {k: new.hgetall(k) for k in keys} == before
    assert new.execute_command("HTTL", "h", "FIELDS", "1", "f") == [-1]


def test_hash_fields_the_active_cycle_removes_are_written_as_hdel(darner_factory):
    d = darner_factory(*AOF_ARGS)
    c = d.client()
    c.execute_command("HSET", "h", "f", "5", "g", "1")
    c.execute_command("HPEXPIRE", "h", "100", "FIELDS", "1", "f")
    # A big hash all of whose fields are due goes whole (the cycle frees it in steps): DEL.
    c.execute_command("HSET", "big", *[x for i in range(300) for x in ("f%d" % i, "v")])
    c.execute_command("HPEXPIRE", "big", "100", "FIELDS", "300",
                      *["f%d" % i for i in range(300)])
    written = upper_names(incr_commands(
        d.workdir, until=lambda cs: {(b"HDEL", b"h", b"f"), (b"DEL", b"big")}
        <= {tuple(x) for x in upper_names(cs)}))
    assert [b"HDEL", b"h", b"f"] in written and [b"DEL", b"big"] in written
    # Nothing read the field: the cycle removed it, so HINCRBY starts from nothing.
    assert c.execute_command("HINCRBY", "h", "f", "1") == 1
    live = (c.hlen("h"), c.hgetall("h"), c.exists("big"))
    new = restart(darner_factory, d).client()
    assert live == (2, {b"f": b"1", b"g": b"1"}, 0)
    assert (new.hlen("h"), new.hgetall("h"), new.exists("big")) == live


def test_set_members_their_ttl_removes_are_written_as_srem_before_what_follows(darner_factory):
    # Regression: a member removed by its TTL was not written; SADD of it again replayed
    # onto the old member, which kept its TTL (SADD leaves a member's TTL alone) and was gone
    # after the restart.
    d = darner_factory(*AOF_ARGS)
    c = d.client()
    c.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    at = int(time.time() * 1000) + 100
    c.execute_command("SADD", "s", "keep")
    c.execute_command("SADDEX", "s", "PXAT", str(at), "m", "n")
    c.execute_command("SADDEX", "only", "PXAT", str(at), "m")
    c.execute_command("SADDEX", "moved", "PXAT", str(at), "m")
    c.execute_command("SADD", "moved", "keep")
    wait_past(at)
    assert c.execute_command("SADD", "s", "m") == 1
    assert c.execute_command("SADD", "only", "m") == 1
    assert c.execute_command("SMOVE", "moved", "dst", "m") == 0
    written = upper_names(incr_commands(
        d.workdir, until=lambda cs: [b"SADD", b"only", b"m"] in upper_names(cs)))
    assert written.index([b"SREM", b"s", b"m"]) < written.index([b"SADD", b"s", b"m"])
    assert [b"SREM", b"s", b"n"] in written
    # The SMOVE found nothing to move (whether it is written or not, the SREM comes first).
    srem = written.index([b"SREM", b"moved", b"m"])
    assert all(i > srem for i, cmd in enumerate(written) if cmd[0] == b"SMOVE")
    # A set all of whose members were due goes as an expired key: DEL.
    assert written.index([b"DEL", b"only"]) < written.index([b"SADD", b"only", b"m"])
    live = {k: c.smembers(k) for k in ("s", "only", "moved", "dst")}
    assert live == {"s": {b"keep", b"m"}, "only": {b"m"}, "moved": {b"keep"}, "dst": set()}
    new = restart(darner_factory, d).client()
    assert {k: new.smembers(k) for k in live} == live
    assert new.execute_command("FIELDTTL", "s", "m") == -1


def test_set_members_the_active_cycle_removes_are_written_as_srem(darner_factory):
    d = darner_factory(*AOF_ARGS)
    c = d.client()
    c.execute_command("SADD", "s", "keep")
    c.execute_command("SADDEX", "s", "PXAT", str(int(time.time() * 1000) + 100), "m")
    written = upper_names(incr_commands(
        d.workdir, until=lambda cs: [b"SREM", b"s", b"m"] in upper_names(cs)))
    assert [b"SREM", b"s", b"m"] in written
    assert c.execute_command("SADD", "s", "m") == 1
    new = restart(darner_factory, d).client()
    assert new.smembers("s") == {b"keep", b"m"}
    assert new.execute_command("FIELDTTL", "s", "m") == -1


# ---- writes that change nothing ----------------------------------------------------------------

NO_CHANGE_SETUP = [
    ["SADD", "s", "a"], ["RPUSH", "l", "a", "b"], ["HSET", "h", "f", "v"],
    ["ZADD", "z", "1", "a"], ["SET", "str", "v"],
]
# Each changes nothing here: Redis leaves `server.dirty` as it was, so it neither writes them
# to its AOF nor counts them in rdb_changes_since_last_save. Several keys per command land on
# different shards of a 4-thread Darner (the multi-shard paths: direct and task).
NO_CHANGE = [
    ["SADD", "s", "a"], ["SREM", "s", "zz"], ["SREM", "nokey", "a"], ["HDEL", "h", "zz"],
    ["ZREM", "z", "zz"], ["LREM", "l", "0", "zz"], ["LTRIM", "l", "0", "-1"],
    ["EXPIRE", "nokey", "10"], ["PERSIST", "str"], ["DEL", "nokey"],
    ["DEL", "nokey1", "nokey2", "nokey3", "nokey4"], ["UNLINK", "nokey", "nokey2", "nokey5"],
    ["SMOVE", "s", "s2", "zz"], ["HSETNX", "h", "f", "v"], ["SETNX", "str", "v"],
    ["ZADD", "z", "NX", "1", "a"], ["GETDEL", "nokey"], ["ZREMRANGEBYSCORE", "z", "5", "6"],
    ["LPOP", "nokey"], ["RENAME", "str", "str"], ["COPY", "nokey", "x"],
    ["SINTERSTORE", "dst", "nokey1", "nokey2"], ["SPOP", "nokey"],
    ["MSET", "k1", "v", "k2", "v", "k3", "v"], ["DEL", "k1", "nokey", "nokey2"],
]


def test_writes_that_change_nothing_are_neither_written_nor_counted_as_redis(darner_factory):
    d = darner_factory(*AOF_ARGS, "--threads", "4")
    ref = start_redis_aof()
    try:
        written, changes = [], []
        for srv in (d, ref):
            c = srv.client()
            for cmd in NO_CHANGE_SETUP:
                c.execute_command(*cmd)
            mark(c)
            before = c.info("persistence")["rdb_changes_since_last_save"]
            for cmd in NO_CHANGE:
                try:
                    c.execute_command(*cmd)
                except redis.ResponseError:
                    pass
            changes.append(c.info("persistence")["rdb_changes_since_last_save"] - before)
            c.execute_command("SET", "end", "1")
            written.append(norm(incr_commands(
                srv.workdir, until=lambda cs: cs and cs[-1] == [b"SET", b"end", b"1"]), MARK))
    finally:
        ref.stop()
    assert written[0] == written[1]
    # Only the MSET and the DEL that found k1 are changes (three keys set, one deleted).
    assert [["MSET", "k1", "v", "k2", "v", "k3", "v"], ["DEL", "k1", "nokey", "nokey2"]] == \
        written[1][:-1]
    # Redis counts per key changed (MSET of three: 3); Darner one per call that changed
    # something (docs/compatibility.md).
    assert changes[0] == 2 and changes[1] == 4, changes


# Writes that may change nothing, of every type: each case is (setup, commands, no-op?). `{p}`
# is the case's own key prefix. A no-op case changes nothing in Redis (`server.dirty` does not
# move: nothing in its AOF, rdb_changes_since_last_save as it was); the others (an empty *STORE
# result deletes an existing destination, APPEND of nothing, ...) are changes, written as Redis
# writes them. Several keys of one command land on different shards of a 4-thread Darner.
SWEEP = [
    # strings
    ([["SET", "{p}k", "v"]], [["SET", "{p}k", "w", "NX"]], True),
    ([], [["SET", "{p}k", "w", "XX"]], True),
    ([["SET", "{p}a", "v"]], [["MSETNX", "{p}a", "x", "{p}b", "y"]], True),
    ([["SET", "{p}k", "v"]], [["GETEX", "{p}k", "PERSIST"]], True),
    ([], [["GETEX", "{p}k", "EX", "100"]], True),
    ([["SET", "{p}k", "v"]], [["SETRANGE", "{p}k", "0", ""]], True),
    ([["SET", "{p}k", "v"]], [["APPEND", "{p}k", ""]], False),
    ([["SET", "{p}k", "1"]], [["INCRBY", "{p}k", "0"]], False),
    ([["SETBIT", "{p}k", "3", "1"]], [["SETBIT", "{p}k", "3", "1"]], True),
    ([], [["BITOP", "OR", "{p}d", "{p}a", "{p}b"]], False),
    ([["SET", "{p}d", "v"]], [["BITOP", "OR", "{p}d", "{p}a", "{p}b"]], False),
    ([["SET", "{p}k", "v"]], [["BITFIELD", "{p}k", "GET", "u8", "0"]], True),
    # lists
    ([["RPUSH", "{p}l", "a", "b"]], [["LINSERT", "{p}l", "BEFORE", "zz", "x"]], True),
    ([], [["LINSERT", "{p}l", "BEFORE", "a", "x"]], True),
    ([["RPUSH", "{p}l", "a"]], [["LSET", "{p}l", "5", "x"]], True),
    ([], [["LPUSHX", "{p}l", "a"], ["RPUSHX", "{p}l", "a"]], True),
    ([], [["LMOVE", "{p}s", "{p}d", "LEFT", "RIGHT"]], True),
    ([], [["RPOPLPUSH", "{p}s", "{p}d"]], True),
    ([], [["BLMOVE", "{p}s", "{p}d", "LEFT", "RIGHT", "0.01"]], True),
    ([], [["LMPOP", "2", "{p}a", "{p}b", "LEFT"]], True),
    ([["RPUSH", "{p}l", "a"]], [["LPOP", "{p}l", "0"]], True),
    ([["RPUSH", "{p}l", "a", "b"]], [["LTRIM", "{p}l", "0", "-1"]], True),
    ([["RPUSH", "{p}l", "a"]], [["LSET", "{p}l", "0", "a"]], False),
    # hashes
    ([["HSET", "{p}h", "f", "v"]], [["HSETNX", "{p}h", "f", "w"]], True),
    ([["HSET", "{p}h", "f", "v"]], [["HDEL", "{p}h", "zz", "yy"]], True),
    ([["HSET", "{p}h", "f", "v"]], [["HSET", "{p}h", "f", "v"]], False),
    ([["HSET", "{p}h", "f", "1"]], [["HINCRBY", "{p}h", "f", "0"]], False),
    # sets
    ([["SADD", "{p}s", "a"]], [["SADD", "{p}s", "a"]], True),
    ([["SADD", "{p}s", "a"]], [["SPOP", "{p}s", "0"]], True),
    ([], [["SPOP", "{p}s", "3"]], True),
    ([["SADD", "{p}s", "a"]], [["SMOVE", "{p}s", "{p}d", "zz"]], True),
    ([["SADD", "{p}a", "x"]], [["SDIFFSTORE", "{p}d", "{p}b", "{p}a"]], True),
    ([], [["SUNIONSTORE", "{p}d", "{p}a", "{p}b"]], True),
    ([["SADD", "{p}a", "x"], ["SADD", "{p}b", "y"]],
     [["SINTERSTORE", "{p}d", "{p}a", "{p}b"]], True),
    ([["SADD", "{p}a", "x"], ["SADD", "{p}b", "y"], ["SET", "{p}d", "v"]],
     [["SINTERSTORE", "{p}d", "{p}a", "{p}b"]], False),
    ([["SET", "{p}d", "v"]], [["SUNIONSTORE", "{p}d", "{p}a", "{p}b"]], False),
    # sorted sets
    ([], [["ZADD", "{p}z", "XX", "1", "a"]], True),
    ([["ZADD", "{p}z", "5", "a"]], [["ZADD", "{p}z", "GT", "1", "a"]], True),
    ([["ZADD", "{p}z", "5", "a"]], [["ZADD", "{p}z", "LT", "9", "a"]], True),
    ([["ZADD", "{p}z", "5", "a"]], [["ZADD", "{p}z", "5", "a"]], True),
    ([["ZADD", "{p}z", "5", "a"]], [["ZADD", "{p}z", "NX", "9", "a"]], True),
    ([["ZADD", "{p}z", "5", "a"]], [["ZINCRBY", "{p}z", "0", "a"]], True),
    ([["ZADD", "{p}z", "5", "a"]], [["ZADD", "{p}z", "INCR", "0", "a"]], True),
    ([["ZADD", "{p}z", "5", "a"]], [["ZREMRANGEBYRANK", "{p}z", "3", "5"]], True),
    ([["ZADD", "{p}z", "0", "a"]], [["ZREMRANGEBYLEX", "{p}z", "[x", "[y"]], True),
    ([["ZADD", "{p}z", "5", "a"]], [["ZPOPMIN", "{p}z", "0"]], True),
    ([], [["ZPOPMAX", "{p}z"]], True),
    ([], [["ZMPOP", "2", "{p}a", "{p}b", "MIN"]], True),
    ([], [["BZPOPMIN", "{p}z", "0.01"]], True),
    ([], [["ZRANGESTORE", "{p}d", "{p}z", "0", "-1"]], True),
    ([], [["ZUNIONSTORE", "{p}d", "2", "{p}a", "{p}b"]], True),
    ([["ZADD", "{p}a", "1", "x"]], [["ZINTERSTORE", "{p}d", "2", "{p}a", "{p}b"]], True),
    ([], [["ZDIFFSTORE", "{p}d", "2", "{p}a", "{p}b"]], True),
    ([["SET", "{p}d", "v"]], [["ZUNIONSTORE", "{p}d", "2", "{p}a", "{p}b"]], False),
    ([["SET", "{p}d", "v"]], [["ZRANGESTORE", "{p}d", "{p}z", "0", "-1"]], False),
    # geo
    ([["GEOADD", "{p}g", "13.361389", "38.115556", "a"]],
     [["GEOADD", "{p}g", "NX", "13.361389", "38.115556", "a"]], True),
    ([], [["GEOADD", "{p}g", "XX", "13.361389", "38.115556", "a"]], True),
    ([["GEOADD", "{p}g", "13.361389", "38.115556", "a"]],
     [["GEOADD", "{p}g", "13.361389", "38.115556", "a"]], True),
    ([], [["GEOSEARCHSTORE", "{p}d", "{p}g", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "km"]],
     True),
    ([["GEOADD", "{p}g", "13.361389", "38.115556", "a"], ["SET", "{p}d", "v"]],
     [["GEOSEARCHSTORE", "{p}d", "{p}g", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "km"]],
     False),
    # HyperLogLog
    ([["PFADD", "{p}h", "a"]], [["PFADD", "{p}h", "a"]], True),
    ([["PFADD", "{p}h", "a"]], [["PFADD", "{p}h"]], True),
    ([["PFADD", "{p}h", "a"], ["PFCOUNT", "{p}h"]], [["PFCOUNT", "{p}h"]], True),
    ([], [["PFADD", "{p}h"]], False),
    # streams
    ([], [["XADD", "{p}x", "NOMKSTREAM", "*", "f", "v"]], True),
    ([["XADD", "{p}x", "1-1", "f", "v"]], [["XTRIM", "{p}x", "MAXLEN", "10"]], True),
    ([["XADD", "{p}x", "1-1", "f", "v"]], [["XDEL", "{p}x", "9-9"]], True),
    ([["XADD", "{p}x", "1-1", "f", "v"], ["XGROUP", "CREATE", "{p}x", "g", "$"]],
     [["XACK", "{p}x", "g", "1-1"]], True),
    ([["XADD", "{p}x", "1-1", "f", "v"], ["XGROUP", "CREATE", "{p}x", "g", "$"],
      ["XGROUP", "CREATECONSUMER", "{p}x", "g", "c"]],
     [["XGROUP", "CREATECONSUMER", "{p}x", "g", "c"]], True),
    ([["XADD", "{p}x", "1-1", "f", "v"], ["XGROUP", "CREATE", "{p}x", "g", "$"]],
     [["XGROUP", "DELCONSUMER", "{p}x", "g", "nobody"]], True),
    ([["XADD", "{p}x", "1-1", "f", "v"]], [["XGROUP", "DESTROY", "{p}x", "nogroup"]], True),
    ([["XADD", "{p}x", "1-1", "f", "v"], ["XGROUP", "CREATE", "{p}x", "g", "$"],
      ["XGROUP", "CREATECONSUMER", "{p}x", "g", "c"]],
     [["XREADGROUP", "GROUP", "g", "c", "STREAMS", "{p}x", ">"]], True),
    ([["XADD", "{p}x", "1-1", "f", "v"], ["XGROUP", "CREATE", "{p}x", "g", "$"],
      ["XGROUP", "CREATECONSUMER", "{p}x", "g", "c"]],
     [["XREADGROUP", "GROUP", "g", "c", "STREAMS", "{p}x", "0"]], False),
    ([["XADD", "{p}x", "1-1", "f", "v"], ["XGROUP", "CREATE", "{p}x", "g", "$"],
      ["XGROUP", "CREATECONSUMER", "{p}x", "g", "c"]],
     [["XREADGROUP", "GROUP", "g", "c", "BLOCK", "10", "STREAMS", "{p}x", ">"]], True),
    # Not here: XREADGROUP `>` of a new consumer with nothing new. Redis 7.0 does not create
    # the consumer then; 7.2 does (counted, not written); Darner creates it as 7.2 and writes
    # XGROUP CREATECONSUMER (docs/compatibility.md).
    ([["XADD", "{p}x", "1-1", "f", "v"], ["XGROUP", "CREATE", "{p}x", "g", "0"],
      ["XREADGROUP", "GROUP", "g", "c", "STREAMS", "{p}x", ">"]],
     [["XREADGROUP", "GROUP", "g", "c", "STREAMS", "{p}x", "0"]], False),
    ([["XADD", "{p}x", "1-1", "f", "v"], ["XGROUP", "CREATE", "{p}x", "g", "0"],
      ["XREADGROUP", "GROUP", "g", "c", "STREAMS", "{p}x", ">"]],
     [["XREADGROUP", "GROUP", "g", "c", "STREAMS", "{p}x", ">"]], True),
    ([["XADD", "{p}x", "1-1", "f", "v"], ["XGROUP", "CREATE", "{p}x", "g", "0"],
      ["XREADGROUP", "GROUP", "g", "c", "STREAMS", "{p}x", ">"]],
     [["XACK", "{p}x", "g", "1-1", "2-2"], ["XACK", "{p}x", "g", "1-1"]], False),
    ([["XADD", "{p}x", "1-1", "f", "v"], ["XADD", "{p}y", "1-1", "f", "v"],
      ["XGROUP", "CREATE", "{p}x", "g", "$"], ["XGROUP", "CREATE", "{p}y", "g", "$"],
      ["XGROUP", "CREATECONSUMER", "{p}x", "g", "c"],
      ["XGROUP", "CREATECONSUMER", "{p}y", "g", "c"]],
     [["XREADGROUP", "GROUP", "g", "c", "STREAMS", "{p}x", "{p}y", ">", ">"]], True),
    ([["XADD", "{p}x", "1-1", "f", "v"], ["XGROUP", "CREATE", "{p}x", "g", "0"],
      ["XREADGROUP", "GROUP", "g", "c", "STREAMS", "{p}x", ">"]],
     [["XCLAIM", "{p}x", "g", "c", "3600000", "1-1"],
      ["XAUTOCLAIM", "{p}x", "g", "c", "3600000", "0"]], True),
    ([["XADD", "{p}x", "1-1", "f", "v"], ["XGROUP", "CREATE", "{p}x", "g", "$"],
      ["XGROUP", "CREATECONSUMER", "{p}x", "g", "c"]],
     [["XCLAIM", "{p}x", "g", "c", "0", "1-1"]], True),
    ([["XADD", "{p}x", "1-1", "f", "v"], ["XGROUP", "CREATE", "{p}x", "g", "$"],
      ["XGROUP", "CREATECONSUMER", "{p}x", "g", "c"]],
     [["XAUTOCLAIM", "{p}x", "g", "c", "0", "0"]], True),
    ([["XADD", "{p}x", "1-1", "f", "v"]], [["XSETID", "{p}x", "1-1"]], False),
    # generic
    ([["SET", "{p}k", "v", "EX", "100"]], [["EXPIRE", "{p}k", "200", "NX"]], True),
    ([["SET", "{p}k", "v"]], [["EXPIRE", "{p}k", "200", "XX"]], True),
    ([["SET", "{p}k", "v"]], [["EXPIRE", "{p}k", "200", "GT"]], True),
    ([["SET", "{p}k", "v", "EX", "100"]], [["EXPIRE", "{p}k", "200", "LT"]], True),
    ([["SET", "{p}k", "v"]], [["PERSIST", "{p}k"]], True),
    ([["SET", "{p}a", "v"], ["SET", "{p}b", "w"]], [["RENAMENX", "{p}a", "{p}b"]], True),
    ([], [["MOVE", "{p}k", "1"]], True),
    ([["SET", "{p}a", "v"], ["SET", "{p}b", "w"]], [["COPY", "{p}a", "{p}b"]], True),
    ([], [["SORT", "{p}l", "STORE", "{p}d"]], True),
    ([["SET", "{p}d", "v"]], [["SORT", "{p}l", "STORE", "{p}d"]], False),
    ([], [["DEL", "{p}a", "{p}b", "{p}c", "{p}d"]], True),
    ([["SET", "{p}k", "v"]], [["PEXPIREAT", "{p}nokey", "1"], ["GETEX", "{p}nokey", "PERSIST"]],
     True),
    ([["SET", "{p}k", "v"]], [["PEXPIREAT", "{p}k", "1"]], False),
    # more of each type
    ([["SADD", "{p}s", "a"]], [["SMOVE", "{p}s", "{p}s", "a"]], True),
    ([["RPUSH", "{p}l", "a"]], [["LMOVE", "{p}l", "{p}l", "LEFT", "LEFT"]], False),
    ([["RPUSH", "{p}l", "a"]], [["RPOP", "{p}l", "0"], ["LREM", "{p}l", "0", "zz"]], True),
    ([["RPUSH", "{p}l", "a"]], [["LPUSHX", "{p}l", "b"]], False),
    ([["SET", "{p}k", "abc"]], [["SETRANGE", "{p}k", "0", "a"]], False),
    ([["HSET", "{p}h", "f", "1"]], [["HINCRBYFLOAT", "{p}h", "f", "0"]], False),
    ([["ZADD", "{p}z", "5", "a"]], [["ZADD", "{p}z", "GT", "CH", "5", "a"]], True),
    ([["ZADD", "{p}z", "5", "a"], ["SET", "{p}d", "v"]],
     [["ZRANGESTORE", "{p}d", "{p}z", "5", "9"]], False),
    ([["ZADD", "{p}z", "5", "a"]], [["ZREMRANGEBYSCORE", "{p}z", "6", "+inf"]], True),
    ([["XADD", "{p}x", "5-1", "f", "v"]], [["XTRIM", "{p}x", "MINID", "1"]], True),
    ([["XADD", "{p}x", "1-1", "f", "v"], ["XGROUP", "CREATE", "{p}x", "g", "$"]],
     [["XGROUP", "SETID", "{p}x", "g", "$"]], False),
    ([["XADD", "{p}x", "1-1", "f", "v"]], [["XSETID", "{p}x", "1-1", "ENTRIESADDED", "1"]],
     False),
    ([["XADD", "{p}x", "1-1", "f", "v"], ["XGROUP", "CREATE", "{p}x", "g", "$"]],
     [["XGROUP", "CREATE", "{p}x", "g", "$", "MKSTREAM"]], True),
    ([], [["PFMERGE", "{p}d", "{p}a"]], False),
    ([["SETBIT", "{p}k", "1", "1"]], [["BITFIELD", "{p}k", "SET", "u1", "1", "1"]], True),
    # transactions and scripts
    ([], [["MULTI"], ["DEL", "{p}a", "{p}b", "{p}c", "{p}d"], ["SADD", "{p}s", "x"],
          ["SREM", "{p}s", "y"], ["EXEC"]], False),
    ([["SADD", "{p}s", "x"]], [["MULTI"], ["DEL", "{p}a", "{p}b", "{p}c", "{p}d"],
                               ["SREM", "{p}s", "y"], ["EXEC"]], True),
    ([["SADD", "{p}s", "x"]], [["MULTI"], ["DEL", "{p}a", "{p}b", "{p}c", "{p}d"],
                               ["SREM", "{p}s", "x"], ["SREM", "{p}s", "y"], ["EXEC"]], False),
    ([["SADD", "{p}s", "x"]], [["MULTI"], ["SADD", "{p}s", "y"],
                               ["DEL", "{p}a", "{p}b", "{p}c", "{p}d"], ["EXEC"]], False),
    ([["SADD", "{p}s", "x"]], [["MULTI"], ["SADD", "{p}s", "y"], ["SADD", "{p}s", "z"],
                               ["DEL", "{p}a", "{p}b", "{p}c", "{p}d"], ["EXEC"]], False),
    ([], [["EVAL", "redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])", "4",
           "{p}a", "{p}b", "{p}c", "{p}d"]], True),
    ([["SADD", "{p}s", "x"]],
     [["EVAL", "redis.call('SADD', KEYS[5], 'x') redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], "
       "KEYS[4])", "5", "{p}a", "{p}b", "{p}c", "{p}d", "{p}s"]], True),
    ([["SADD", "{p}s", "x"]],
     [["EVAL", "redis.call('SADD', KEYS[5], 'y') redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], "
       "KEYS[4])", "5", "{p}a", "{p}b", "{p}c", "{p}d", "{p}s"]], False),
]


def test_no_op_sweep_written_and_counted_as_redis(darner_factory):
    d = darner_factory(*AOF_ARGS, "--threads", "4")
    ref = start_redis_aof()
    try:
        deltas, files = [], []
        for srv in (d, ref):
            c = srv.client()
            mine = []
            for i, (setup, cmds, _) in enumerate(SWEEP):
                p = f"c{i}:"
                for cmd in setup:
                    c.execute_command(*[a.replace("{p}", p) for a in cmd])
                c.execute_command("SET", "mk", str(i))
                before = c.info("persistence")["rdb_changes_since_last_save"]
                for cmd in cmds:
                    try:
                        c.execute_command(*[a.replace("{p}", p) for a in cmd])
                    except redis.ResponseError:
                        pass
                mine.append(c.info("persistence")["rdb_changes_since_last_save"] - before)
                c.execute_command("SET", "mk2", str(i))
            deltas.append(mine)
            last = [b"SET", b"mk2", str(len(SWEEP) - 1).encode()]
            files.append(incr_commands(srv.workdir, until=lambda cs: cs and cs[-1] == last))
    finally:
        ref.stop()

    def segment(cmds, i):
        start = cmds.index([b"SET", b"mk", str(i).encode()])
        end = cmds.index([b"SET", b"mk2", str(i).encode()], start)
        return norm(cmds[start + 1:end])

    diffs = []
    for i, (_, cmds, noop) in enumerate(SWEEP):
        mine, theirs = segment(files[0], i), segment(files[1], i)
        # Darner counts a call, Redis each element it changed: compare the counter only where
        # nothing changed (where something did, both moved).
        counted = (deltas[0][i], deltas[1][i]) if noop else (deltas[0][i] > 0, deltas[1][i] > 0)
        if mine != theirs or counted[0] != counted[1] or (noop and (theirs or counted[1])):
            diffs.append((cmds, mine, theirs, counted))
    assert not diffs, "\n".join(map(repr, diffs))
