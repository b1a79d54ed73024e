"""Behavioural tests through redis-py (RESP2 and RESP3 clients)."""

from __future__ import annotations

import os
import re
import threading
import time

import pytest
import redis

from resp_reader import RawConn


def wait_until(pred, timeout=2.0, interval=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    return pred()


# ---------------------------------------------------------------------------
# strings & keys
# ---------------------------------------------------------------------------

def test_strings_basic(r):
    assert r.set("k", "v") is True
    assert r.get("k") == b"v"
    assert r.set("k", "w", nx=True) is None
    assert r.set("k", "w", xx=True) is True
    assert r.set("k", "x", get=True) == b"w"
    assert r.getset("k", "y") == b"x"
    assert r.append("k", "zz") == 3
    assert r.strlen("k") == 3
    assert r.getrange("k", 1, -1) == b"zz"
    assert r.setrange("k", 5, "!") == 6
    assert r.get("k") == b"yzz\x00\x00!"
    assert r.incr("n") == 1
    assert r.incrby("n", 41) == 42
    assert r.decrby("n", 2) == 40
    assert r.incrbyfloat("n", 0.5) == 40.5
    assert r.mset({"a": "1", "b": "2"}) is True
    assert r.mget("a", "b", "nokey") == [b"1", b"2", None]
    assert r.msetnx({"a": "9", "c": "3"}) is False
    assert r.get("c") is None
    assert r.getdel("a") == b"1"
    assert r.exists("a", "b") == 1
    assert r.setnx("b", "x") is False
    assert r.getex("b", ex=100) == b"2"
    assert 99 <= r.ttl("b") <= 100
    assert r.lcs("k", "n") == b""
    with pytest.raises(redis.ResponseError, match="not an integer or out of range"):
        r.incr("k")
    with pytest.raises(redis.ResponseError, match="^wrong number of arguments for 'get' command$"):
        r.execute_command("GET")


def test_bit_commands(r):
    assert r.setbit("bits", 7, 1) == 0
    assert r.setbit("bits", 7, 1) == 1
    assert r.getbit("bits", 7) == 1
    assert r.get("bits") == b"\x01"
    assert r.bitcount("bits") == 1
    r.set("s", "foobar")
    assert r.bitcount("s") == 26
    assert r.bitcount("s", 1, 1) == 6
    assert r.bitpos("s", 1) == 1
    assert r.bitop("NOT", "dest", "s") == 6
    assert r.get("dest") == bytes(255 - c for c in b"foobar")
    assert r.bitfield("bf").set("i8", 0, 100).incrby("i8", 0, 100).get("u8", 0).execute() == [0, -56, 200]


def test_keys_commands(r):
    r.mset({"user:1": "a", "user:2": "b", "item:1": "c"})
    assert sorted(r.keys("user:*")) == [b"user:1", b"user:2"]
    assert r.type("user:1") == b"string"
    assert r.type("nokey") == b"none"
    assert r.rename("user:1", "user:9") is True
    assert r.renamenx("user:2", "user:9") is False
    assert r.copy("item:1", "item:2") is True
    assert r.get("item:2") == b"c"
    assert r.delete("item:1", "item:2", "nokey") == 2
    assert r.unlink("user:9") == 1
    assert r.dbsize() == 1
    assert r.randomkey() == b"user:2"
    assert r.touch("user:2", "nokey") == 1
    assert r.object("encoding", "user:2") == b"embstr"
    r.set("int", 12345)
    assert r.object("encoding", "int") == b"int"
    r.set("raw", "x" * 100)
    assert r.object("encoding", "raw") == b"raw"


def test_keys_spread_over_shards_all_visible(r):
    """Keys land on different shards; DBSIZE/KEYS/EXISTS/DEL must see all of them."""
    names = ["key:%d" % i for i in range(2000)]
    p = r.pipeline(transaction=False)
    for n in names:
        p.set(n, n)
    p.execute()
    assert r.dbsize() == 2000
    assert len(r.keys("*")) == 2000
    assert r.exists(*names) == 2000
    assert r.mget(names) == [n.encode() for n in names]
    assert r.delete(*names[:1000]) == 1000
    assert r.dbsize() == 1000
    assert set(r.keys("key:*")) == {n.encode() for n in names[1000:]}


# ---------------------------------------------------------------------------
# expiry
# ---------------------------------------------------------------------------

def test_expire_px_passive(r):
    r.set("k", "v", px=100)
    assert 0 < r.pttl("k") <= 100
    time.sleep(0.2)
    assert r.get("k") is None
    assert r.exists("k") == 0
    assert r.ttl("k") == -2


def test_expire_options_and_ttl(r):
    r.set("k", "v")
    assert r.ttl("k") == -1
    assert r.expire("k", 100) is True
    assert r.expire("k", 50, gt=True) is False
    assert r.expire("k", 50, lt=True) is True
    assert 49 <= r.ttl("k") <= 50
    assert r.persist("k") is True
    assert r.ttl("k") == -1
    ts = int(time.time()) + 1000
    assert r.expireat("k", ts) is True
    assert r.expiretime("k") == ts
    assert r.pexpiretime("k") == ts * 1000


def test_active_expiry_without_access(r):
    """Keys with a 50ms TTL must be reclaimed by the active expiry cycle
    (DBSIZE drops) without anyone touching them."""
    p = r.pipeline(transaction=False)
    for i in range(200):
        p.set("vol:%d" % i, "x", px=50)
    for i in range(10):
        p.set("keep:%d" % i, "x")
    p.execute()
    t0 = time.monotonic()
    assert wait_until(lambda: r.dbsize() == 10, timeout=1.5, interval=0.05), \
        "DBSIZE still %d %.1fs after 200 keys expired (active expiry not working?)" % (r.dbsize(), time.monotonic() - t0)


def test_expired_keys_invisible_everywhere(r):
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    try:
        r.set("gone", "v", px=30)
        r.set("stay", "v")
        time.sleep(0.1)
        assert r.keys("*") == [b"stay"]
        assert r.exists("gone", "stay") == 1
        assert r.mget("gone", "stay") == [None, b"v"]
        keys = set()
        cur = 0
        while True:
            cur, batch = r.scan(cur, count=100)
            keys.update(batch)
            if cur == 0:
                break
        assert b"gone" not in keys
        assert r.randomkey() == b"stay"
    finally:
        r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")


# ---------------------------------------------------------------------------
# SCAN
# ---------------------------------------------------------------------------

def _full_scan(r, **kw):
    seen = []
    cur = 0
    calls = 0
    while True:
        cur, batch = r.scan(cur, **kw)
        calls += 1
        seen.extend(batch)
        if cur == 0:
            return seen, calls
        assert calls < 100000


def test_scan_full_iteration_10000(r):
    names = {("s:%d" % i).encode() for i in range(10000)}
    p = r.pipeline(transaction=False)
    for n in names:
        p.set(n, "1")
    p.execute()
    seen, calls = _full_scan(r, count=100)
    missing = names - set(seen)
    assert not missing, "%d keys never returned by SCAN, e.g. %r" % (len(missing), sorted(missing)[:5])
    assert set(seen) == names
    assert calls >= 10, "COUNT 100 over 10,000 keys finished in %d calls" % calls
    seen_m, _ = _full_scan(r, match="s:99*", count=100)
    assert set(seen_m) == {n for n in names if n.startswith(b"s:99")}


def test_scan_guarantee_under_concurrent_writes(r):
    """Keys present for the whole iteration must be returned even while other
    keys are being added and deleted between SCAN calls."""
    stable = {("stable:%d" % i).encode() for i in range(3000)}
    p = r.pipeline(transaction=False)
    for n in stable:
        p.set(n, "1")
    p.execute()
    seen = set()
    cur = 0
    i = 0
    while True:
        cur, batch = r.scan(cur, count=50)
        seen.update(batch)
        p = r.pipeline(transaction=False)
        for j in range(30):  # churn: grow the keyspace (forces rehashing in redis)
            p.set("churn:%d" % (i * 30 + j), "x")
        if i > 3:
            p.delete(*["churn:%d" % ((i - 3) * 30 + j) for j in range(30)])
        p.execute()
        i += 1
        if cur == 0:
            break
    missing = stable - seen
    assert not missing, "%d stable keys missed by SCAN during writes" % len(missing)


# ---------------------------------------------------------------------------
# transactions
# ---------------------------------------------------------------------------

def test_multi_exec_pipeline(r):
    p = r.pipeline(transaction=True)
    p.set("a", 1).incr("a").get("a").mget("a", "b").delete("a")
    assert p.execute() == [True, 2, b"2", [b"2", None], 1]


def test_multi_exec_with_runtime_error(r):
    r.set("s", "text")
    p = r.pipeline(transaction=True)
    p.set("a", 1).incr("s").incr("a")
    res = p.execute(raise_on_error=False)
    assert res[0] is True and res[2] == 2
    assert isinstance(res[1], redis.ResponseError)


def test_multi_exec_queue_error_aborts(r):
    p = r.pipeline(transaction=True)
    p.set("a", 1)
    p.execute_command("SET", "only-one-arg")
    with pytest.raises(redis.ResponseError) as ei:
        p.execute()
    assert "EXECABORT" in str(ei.value) or "wrong number of arguments" in str(ei.value)
    assert r.get("a") is None


def test_watch_conflict(darner, r):
    other = darner.client()
    r.set("acct", 10)
    with r.pipeline() as p:
        p.watch("acct")
        bal = int(p.get("acct"))
        other.set("acct", 999)  # concurrent modification from another client
        p.multi()
        p.set("acct", bal - 1)
        with pytest.raises(redis.WatchError):
            p.execute()
    assert r.get("acct") == b"999"
    other.close()


def test_watch_multiple_keys_other_shard_conflict(darner, r):
    other = darner.client()
    keys = ["w:%d" % i for i in range(16)]  # certainly spans shards
    r.mset({k: 0 for k in keys})
    for victim in (keys[0], keys[7], keys[15]):
        with r.pipeline() as p:
            p.watch(*keys)
            other.incr(victim)
            p.multi()
            p.set("result", victim)
            with pytest.raises(redis.WatchError):
                p.execute()
    assert r.get("result") is None
    other.close()


def test_watch_no_conflict_commits(r):
    r.set("acct", 10)
    with r.pipeline() as p:
        p.watch("acct")
        bal = int(p.get("acct"))
        p.multi()
        p.set("acct", bal - 1)
        assert p.execute() == [True]
    assert r.get("acct") == b"9"


def test_watch_then_key_expires_exec_fails(r):
    r.set("w", "v", px=100)
    with r.pipeline() as p:
        p.watch("w")
        time.sleep(0.25)
        p.multi()
        p.set("x", "1")
        with pytest.raises(redis.WatchError):
            p.execute()
    assert r.get("x") is None


def test_watch_missing_key_then_created_by_other(darner, r):
    other = darner.client()
    with r.pipeline() as p:
        p.watch("fresh")
        other.set("fresh", "1")
        p.multi()
        p.set("x", "1")
        with pytest.raises(redis.WatchError):
            p.execute()
    other.close()


# ---------------------------------------------------------------------------
# databases
# ---------------------------------------------------------------------------

def test_select_and_move(darner, r):
    db1 = darner.client(db=1)
    r.set("k", "db0")
    assert r.move("k", 1) is True
    assert r.get("k") is None
    assert db1.get("k") == b"db0"
    r.set("k", "again")
    assert r.move("k", 1) is False  # exists in target
    assert r.get("k") == b"again"
    assert db1.copy("k", "k2", destination_db=0) is True
    assert r.get("k2") == b"db0"
    db1.close()


def test_16_databases(darner, r):
    clients = [darner.client(db=i) for i in range(16)]
    try:
        for i, c in enumerate(clients):
            c.set("dbkey", "value-%d" % i)
            c.set("only-%d" % i, "x")
        for i, c in enumerate(clients):
            assert c.get("dbkey") == ("value-%d" % i).encode()
            assert c.dbsize() == 2
            assert c.exists("only-%d" % ((i + 1) % 16)) == 0
        clients[5].flushdb()
        assert clients[5].dbsize() == 0
        assert clients[6].dbsize() == 2
        with pytest.raises(redis.ResponseError, match="DB index is out of range"):
            r.execute_command("SELECT", 16)
        info = r.info("keyspace")
        assert info["db0"]["keys"] == 2 and "db5" not in info and info["db15"]["keys"] == 2
    finally:
        for c in clients:
            c.close()


# ---------------------------------------------------------------------------
# binary safety & big values
# ---------------------------------------------------------------------------

def test_binary_safe_values(r):
    allbytes = bytes(range(256))
    r.set(allbytes, allbytes * 4)
    assert r.get(allbytes) == allbytes * 4
    assert r.strlen(allbytes) == 1024
    assert r.keys(b"\x00*") == [allbytes]
    r.set(b"", b"")
    assert r.get(b"") == b""
    r.set(b"k\r\n", b"\r\n$5\r\n")
    assert r.get(b"k\r\n") == b"\r\n$5\r\n"


def test_large_value_10mb_roundtrip(r):
    big = os.urandom(10 * 1024 * 1024)
    assert r.set("big", big) is True
    assert r.strlen("big") == len(big)
    assert r.get("big") == big
    assert r.getrange("big", -5, -1) == big[-5:]
    assert r.append("big", b"tail") == len(big) + 4
    assert r.get("big")[-8:] == big[-4:] + b"tail"
    assert r.delete("big") == 1


def test_pipeline_non_transactional_1000(r):
    p = r.pipeline(transaction=False)
    for i in range(1000):
        p.set("p%d" % i, i)
        p.incr("p%d" % i)
    res = p.execute()
    assert res == [x for i in range(1000) for x in (True, i + 1)]
    assert r.mget(["p%d" % i for i in range(1000)]) == [str(i + 1).encode() for i in range(1000)]


# ---------------------------------------------------------------------------
# RESP3 client
# ---------------------------------------------------------------------------

def test_resp3_client_basics(r3):
    assert r3.set("k", "v") is True
    assert r3.get("k") == b"v"
    assert r3.get("nokey") is None
    assert r3.mget("k", "nokey") == [b"v", None]
    cfg = r3.config_get("databases")
    assert cfg == {b"databases": b"16"} or cfg == {"databases": "16"}
    assert r3.incrbyfloat("f", "1.5") == 1.5
    p = r3.pipeline(transaction=True)
    p.set("a", 1).incr("a")
    assert p.execute() == [True, 2]


@pytest.mark.darner_only
def test_hello_reports_redis_7_4(darner):
    with darner.raw() as c:
        rep = c.call("HELLO", "3")
        assert rep.kind == "%", rep
        m = {k.value: v for k, v in rep.value}
        assert m[b"server"].value == b"redis"
        assert m[b"version"].value == b"7.4.0"
        assert m[b"proto"].raw == b":3\r\n"
        assert m[b"id"].kind == ":"
        assert m[b"mode"].value == b"standalone"
        assert m[b"role"].value == b"master"
        assert m[b"modules"].kind == "*" and m[b"modules"].value == []
        assert list(m) == [b"server", b"version", b"proto", b"id", b"mode", b"role", b"modules"]


@pytest.mark.darner_only
def test_info_server_versions(darner, r):
    info = r.info("server")
    assert str(info["redis_version"]) == "7.4.0"
    assert "darner_version" in info
    with darner.raw() as c:
        rep = c.call("INFO", "server")
    assert rep.kind == "$", rep
    text = rep.value.decode()
    assert text.startswith("# Server\r\n"), text[:200]
    assert "\r\nredis_version:7.4.0\r\n" in text
    assert "\r\ndarner_version:" in text


def test_info_sections(darner, r):
    r.set("a", 1)
    r.set("b", 1, ex=100)
    info = r.info()
    for field in ("redis_version", "connected_clients", "used_memory", "total_commands_processed", "uptime_in_seconds", "tcp_port"):
        assert field in info, field
    assert info["db0"]["keys"] == 2 and info["db0"]["expires"] == 1
    assert r.info("clients")["connected_clients"] >= 1
    with darner.raw() as c:
        rep = c.call("INFO", "keyspace")
    assert rep.kind == "$", rep
    text = rep.value.decode()
    assert text.startswith("# Keyspace\r\n"), text
    assert re.search(r"^db0:keys=2,expires=1,avg_ttl=\d+", text, re.M), text


# ---------------------------------------------------------------------------
# connection / server administration
# ---------------------------------------------------------------------------

def test_client_list_setname_kill(darner, r):
    victim = darner.client()
    victim.client_setname("victim")
    vid = victim.client_id()
    lst = r.client_list()
    entry = [c for c in lst if c.get("name") == "victim"]
    assert entry and int(entry[0]["id"]) == vid
    assert entry[0]["addr"].startswith("127.0.0.1:")
    info = victim.client_info()
    assert int(info["id"]) == vid and info["name"] == "victim"
    assert r.client_kill_filter(_id=vid) == 1
    assert wait_until(lambda: all(c.get("name") != "victim" for c in r.client_list()), timeout=2)
    victim.close()


def test_client_kill_closes_raw_connection(darner, r):
    with darner.raw() as victim:
        vid = victim.call("CLIENT", "ID").value
        assert r.execute_command("CLIENT", "KILL", "ID", vid) == 1
        victim.wait_closed(3)


def test_client_pause_write_delays_writes_not_reads(darner, r):
    other = darner.client()
    r.set("k", "v")
    assert r.client_pause(400, all=False) is True
    t0 = time.monotonic()
    assert other.get("k") == b"v"
    t_read = time.monotonic() - t0
    other.set("k", "w")
    t_write = time.monotonic() - t0
    assert t_read < 0.2, "read was delayed %.2fs by CLIENT PAUSE WRITE" % t_read
    assert t_write >= 0.25, "write was not paused (%.2fs)" % t_write
    assert r.get("k") == b"w"
    other.close()


def test_client_unpause_releases_writers(darner, r):
    other = darner.client()
    r.client_pause(5000, all=True)
    done = []
    t = threading.Thread(target=lambda: done.append(other.set("k", "1")))
    t.start()
    time.sleep(0.2)
    assert not done
    r.client_unpause()
    t.join(3)
    assert done == [True]
    other.close()


def test_monitor_streams_commands(darner, r):
    with darner.raw() as mon, darner.raw() as c:
        assert mon.call("MONITOR").raw == b"+OK\r\n"
        c.call("set", "mkey", "m val")
        c.call("GET", "mkey")
        lines = [mon.read_reply(timeout=3) for _ in range(2)]
        pat = re.compile(rb'^\+\d{10}\.\d{6} \[0 127\.0\.0\.1:\d+\] "set" "mkey" "m val"\r\n$')
        assert pat.match(lines[0].raw), lines[0]
        assert re.match(rb'^\+\d+\.\d{6} \[0 127\.0\.0\.1:\d+\] "GET" "mkey"\r\n$', lines[1].raw), lines[1]


def test_slowlog_records_commands(r):
    r.config_set("slowlog-log-slower-than", 0)
    try:
        r.slowlog_reset()
        r.set("slow", "v")
        entries = r.slowlog_get(10)
        cmds = [e["command"] for e in entries]
        assert b"SET slow v" in cmds, cmds
        assert r.slowlog_len() >= 1
        e = [e for e in entries if e["command"] == b"SET slow v"][0]
        assert e["duration"] >= 0 and abs(e["start_time"] - time.time()) < 5
        r.config_set("slowlog-max-len", 2)
        for i in range(5):
            r.set("s%d" % i, i)
        assert r.slowlog_len() <= 2
    finally:
        r.config_set("slowlog-log-slower-than", 10000)
        r.config_set("slowlog-max-len", 128)
        r.slowlog_reset()


def test_config_set_get(r):
    old = r.config_get("hz")["hz"]
    try:
        assert r.config_set("hz", 50) is True
        assert r.config_get("hz") == {"hz": "50"}
        with pytest.raises(redis.ResponseError):
            r.config_set("hz", "notanumber")
        with pytest.raises(redis.ResponseError):
            r.config_set("no-such-directive", "1")
        assert r.config_get("hz") == {"hz": "50"}
    finally:
        r.config_set("hz", old)
    assert r.config_resetstat() is True


def test_debug_sleep_blocks(r):
    t0 = time.monotonic()
    assert r.execute_command("DEBUG", "SLEEP", "0.2") in (b"OK", "OK", True)
    assert time.monotonic() - t0 >= 0.19


def test_time_command(r):
    secs, usecs = r.time()
    assert abs(secs + usecs / 1e6 - time.time()) < 2
    assert 0 <= usecs < 1000000


def test_flushall_async(r):
    r.mset({"k%d" % i: i for i in range(500)})
    assert r.flushall(asynchronous=True) is True
    assert r.dbsize() == 0


def test_quit_closes_connection(darner):
    with darner.raw() as c:
        assert c.call("QUIT").raw == b"+OK\r\n"
        assert c.wait_closed(3) == b""


def test_shutdown_stops_server(darner_factory):
    srv = darner_factory(threads=1)
    with srv.raw() as c:
        c.send("SHUTDOWN", "NOSAVE")
        got = c.wait_closed(5)
        assert got == b"", "SHUTDOWN replied %r" % got
    rc = srv.wait_exit(5)
    assert rc == 0, "server exit code after SHUTDOWN: %r\n%s" % (rc, srv.log_tail())


def test_active_expiry_in_other_databases(darner, r):
    c3 = darner.client(db=3)
    try:
        p = c3.pipeline(transaction=False)
        for i in range(100):
            p.set("vol:%d" % i, "x", px=50)
        p.set("keep", "1")
        p.execute()
        assert wait_until(lambda: c3.dbsize() == 1, timeout=1.5, interval=0.05), \
            "db3 DBSIZE still %d: volatile keys in db 3 not actively expired" % c3.dbsize()
    finally:
        c3.close()


@pytest.fixture(params=["darner", "redis_ref"])
def target(request):
    return request.getfixturevalue(request.param)


def test_client_kill_filters(target):
    """New-style CLIENT KILL filters return a count; old-style addr form +OK.
    Runs against the reference too, to keep the expectations honest."""
    with target.raw() as killer, target.raw() as v1, target.raw() as v2, target.raw() as v3:
        assert v1.call("CLIENT", "SETNAME", "v1").raw == b"+OK\r\n"
        info = {}
        for name, c in (("v1", v1), ("v2", v2), ("v3", v3)):
            line = c.call("CLIENT", "INFO").value.decode()
            info[name] = dict(kv.split("=", 1) for kv in line.strip().split(" "))
        assert killer.call("CLIENT", "KILL", "ADDR", info["v1"]["addr"]).raw == b":1\r\n"
        v1.wait_closed(3)
        assert killer.call("CLIENT", "KILL", info["v2"]["addr"]).raw == b"+OK\r\n"
        v2.wait_closed(3)
        assert killer.call("CLIENT", "KILL", info["v2"]["addr"]).raw == b"-ERR No such client\r\n"
        my_id = killer.call("CLIENT", "ID").value
        assert killer.call("CLIENT", "KILL", "ID", my_id, "SKIPME", "yes").raw == b":0\r\n"
        assert killer.call("CLIENT", "KILL", "ID", info["v3"]["id"], "SKIPME", "no").raw == b":1\r\n"
        v3.wait_closed(3)
        assert killer.call("PING").raw == b"+PONG\r\n"
        assert killer.call("CLIENT", "KILL", "ID", my_id, "SKIPME", "no").raw == b":1\r\n"
        killer.wait_closed(3)


def test_client_info_fields(target):
    with target.raw() as c:
        c.call("CLIENT", "SETNAME", "inspect")
        c.call("SELECT", "2")
        line = c.call("CLIENT", "INFO").value.decode()
        assert line.endswith("\n")
        f = dict(kv.split("=", 1) for kv in line.strip().split(" "))
        for key in ("id", "addr", "laddr", "fd", "name", "age", "idle", "flags", "db", "sub", "psub",
                    "multi", "qbuf", "obl", "oll", "omem", "events", "cmd", "user", "resp"):
            assert key in f, (key, line)
        assert f["name"] == "inspect" and f["db"] == "2" and f["user"] == "default" and f["resp"] == "2"
        assert f["cmd"] == "client|info" and f["flags"] == "N" and f["multi"] == "-1"
        c.call("MULTI")
        c.call("PING")
        assert c.call("EXEC").kind == "*"


def test_sigterm_clean_exit(darner_factory):
    import signal
    srv = darner_factory(threads=2)
    with srv.raw() as c:
        c.call("SET", "k", "v")
    srv.proc.send_signal(signal.SIGTERM)
    rc = srv.wait_exit(5)
    assert rc == 0, "exit code after SIGTERM: %r\n%s" % (rc, srv.log_tail())
