"""RDB snapshots (issue 14): SAVE, loading `dir/dbfilename` at start-up, SHUTDOWN SAVE /
NOSAVE, LASTSAVE, DEBUG RELOAD, INFO persistence and the snapshot directives.

- What Darner saves comes back after kill -9 and a restart in the same dir (DEBUG DIGEST
  equal), every type included, big values written element by element included.
- What Darner writes loads into Debian's redis-server 7.0, and what redis-server 7.0 writes
  with SAVE loads into Darner (DEBUG DIGEST equal between the two).
- A file made of the fixtures' DUMP payloads (shared/fixtures/rdb/*.dump.json, every server
  version, 7.4.1's field TTLs too) loads and reads as the manifest says.
- A corrupt file stops start-up with exit code 1 and a log naming the file and the offset.
"""
from __future__ import annotations

import base64
import os
import random
import shutil
import signal
import struct
import subprocess
import tempfile
import time

import pytest

import harness
from resp_reader import ConnectionClosed, RawConn
from test_dump_restore import canonical_sha, load as load_fixture, make_values, SERVERS

pytestmark = pytest.mark.darner_only


def crc64(data: bytes) -> int:
    """CRC-64/Jones as Redis computes it (reflected, polynomial 0xad93d23594c935a9)."""
    table = crc64.table
    if table is None:
        poly = 0x95AC9329AC4BC9B5  # the reflected polynomial
        table = []
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ poly if c & 1 else c >> 1
            table.append(c)
        crc64.table = table
    crc = 0
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


crc64.table = None


def start_darner(d: str, *args, threads: int = 2, wait_ready: bool = True) -> harness.Server:
    return harness.start_darner(["--dir", d, "--dbfilename", "dump.rdb"] + list(args),
                                threads=threads, wait_ready=wait_ready)


def start_redis(d: str) -> harness.Server:
    return harness.Server(harness.redis_server_bin(), ["--dir", d, "--dbfilename", "dump.rdb"],
                          is_redis=True, name="redis-ref").start()


def digest(c: RawConn) -> bytes:
    return c.call("DEBUG", "DIGEST").py()


def kill9(srv: harness.Server):
    srv.proc.send_signal(signal.SIGKILL)
    srv.proc.wait(10)


def write_dataset(c: RawConn, rnd: random.Random, ttls: bool):
    """Every type, small and big (past the snapshot's element-by-element threshold), several
    databases, key TTLs; with `ttls`, also hash field TTLs and set member TTLs."""
    make_values(c, rnd)
    cmds = [
        # Scores whose shortest text is also their %.17g text: Redis 7.0's DEBUG DIGEST
        # formats scores with %.17g, 7.2's (and Darner's) with the shortest form.
        ("DEL", "z:big"),
        ("ZADD", "z:big") + tuple(x for i in range(300) for x in (str(i / 8), "m%d" % i)),
        ("HSET", "h:huge") + tuple(x for i in range(5000) for x in ("f%d" % i, "v%d" % i)),
        ("SADD", "set:huge") + tuple("m%d" % i for i in range(3000)),
        ("SADD", "set:hugeint") + tuple(str(i * 7) for i in range(3000)),
        ("ZADD", "z:huge") + tuple(x for i in range(3000) for x in (str(i * 1.5), "m%d" % i)),
        ("RPUSH", "l:huge") + tuple("e%d" % i for i in range(20000)),
        ("PFADD", "hll", "a", "b", "c"),
        ("SET", "ttl:far", "x", "PXAT", "4102444800000"),
        ("HSET", "h:ttl", "a", "1"), ("PEXPIREAT", "h:ttl", "4102444800123"),
        ("SELECT", "3"), ("SET", "db3:k", "v"), ("RPUSH", "db3:l", "x", "y"),
        ("SELECT", "15"), ("ZADD", "db15:z", "1", "a"),
        ("SELECT", "0"),
        ("FUNCTION", "LOAD", "#!lua name=lib1\nredis.register_function('f1', "
                             "function(keys, args) return 1 end)"),
    ]
    if ttls:
        cmds += [
            ("HSET", "hf:small", "a", "1", "b", "2", "c", "3"),
            ("HPEXPIREAT", "hf:small", "4102444800000", "FIELDS", "2", "a", "b"),
            ("HSET", "hf:big") + tuple(x for i in range(3000) for x in ("f%d" % i, "v")),
            ("HPEXPIREAT", "hf:big", "4102444801000", "FIELDS", "3", "f1", "f2", "f2999"),
            ("SADDEX", "sx:small", "100000", "m1", "m2"), ("SADD", "sx:small", "m3"),
            ("SADDEX", "sx:big", "100000") + tuple("m%d" % i for i in range(2000)),
        ]
    for cmd in cmds:
        r = c.call(*cmd)
        assert not r.raw.startswith(b"-"), (cmd, r)


def state(c: RawConn) -> dict:
    """What a restart must keep, besides the digest: TTLs, field and member TTLs, functions."""
    out = {"digest": digest(c), "functions": c.call("FUNCTION", "LIST", "WITHCODE").py()}
    for db in ("0", "3", "15"):
        c.call("SELECT", db)
        out["dbsize" + db] = c.call("DBSIZE").py()
    c.call("SELECT", "0")
    out["pexpiretime"] = [c.call("PEXPIRETIME", k).py() for k in ("ttl:far", "h:ttl", "s:ttl")]
    if c.call("EXISTS", "hf:small").py():
        out["field"] = [c.call("HPEXPIRETIME", "hf:small", "FIELDS", "3", "a", "b", "c").py(),
                        c.call("HPEXPIRETIME", "hf:big", "FIELDS", "2", "f2999", "f5").py(),
                        c.call("FIELDTTL", "sx:small", "m1").py() > 0,
                        c.call("FIELDTTL", "sx:small", "m3").py(),
                        c.call("FIELDTTL", "sx:big", "m1999").py() > 0]
    return out


@pytest.mark.parametrize("threads", [1, 3])
def test_save_kill9_restart_gives_the_same_dataset(threads):
    d = tempfile.mkdtemp(prefix="darner-persist-")
    try:
        srv = start_darner(d, threads=threads)
        with srv.raw() as c:
            write_dataset(c, random.Random(7), ttls=True)
            before = state(c)
            assert c.call("SAVE").raw == b"+OK\r\n"
        kill9(srv)
        assert os.path.exists(os.path.join(d, "dump.rdb"))
        # A different thread count: keys go to other shards on load.
        srv = start_darner(d, threads=threads + 1)
        with srv.raw() as c:
            assert state(c) == before
        srv.stop(cleanup=False)
        assert "Done loading RDB, keys loaded: " in open(srv.log_path).read()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_keys_expired_before_load_are_dropped():
    d = tempfile.mkdtemp(prefix="darner-persist-")
    try:
        srv = start_darner(d)
        with srv.raw() as c:
            assert c.call("DEBUG", "SET-ACTIVE-EXPIRE", "0").raw == b"+OK\r\n"
            for i in range(5):
                c.call("SET", "gone:%d" % i, "v", "PX", "30")
            c.call("SET", "kept", "v")
            c.call("SET", "kept:ttl", "v", "PX", "600000")
            time.sleep(0.1)
            assert c.call("SAVE").raw == b"+OK\r\n"
        kill9(srv)
        srv = start_darner(d)
        with srv.raw() as c:
            assert c.call("DBSIZE").py() == 2
            info = c.call("INFO", "persistence").py().decode()
            assert "rdb_last_load_keys_loaded:2\r\n" in info
            assert "rdb_last_load_keys_expired:5\r\n" in info
        srv.stop(cleanup=False)
        assert "Done loading RDB, keys loaded: 2, keys expired: 5." in open(srv.log_path).read()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_darner_file_loads_into_redis_7_0_with_the_same_digest():
    d = tempfile.mkdtemp(prefix="darner-persist-")
    try:
        srv = start_darner(d, threads=3)
        with srv.raw() as c:
            write_dataset(c, random.Random(11), ttls=False)
            want = digest(c)
            assert c.call("SAVE").raw == b"+OK\r\n"
        srv.stop(cleanup=False)
        with open(os.path.join(d, "dump.rdb"), "rb") as f:
            assert f.read(9) == b"REDIS0010"
        ref = start_redis(d)
        try:
            with ref.raw() as c:
                assert digest(c) == want
                assert c.call("FCALL", "f1", "0").py() == 1
        finally:
            ref.stop(cleanup=False)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_save_steps_every_shard_at_once_and_keeps_big_records_whole():
    """SAVE asks every shard for its steps at once and interleaves their bytes in the file;
    a big value's record spans several steps (each about 1 MiB), so it must stay whole:
    values of several MiB on every shard, and the file loads into Redis 7.0 and back into
    darner with the same digest."""
    d = tempfile.mkdtemp(prefix="darner-persist-")
    try:
        srv = start_darner(d, threads=3)
        with srv.raw() as c:
            for i in range(6):
                for part in range(4):
                    c.call("HSET", "bh:%d" % i, *(x for j in range(part * 25000, (part + 1) * 25000)
                                                  for x in ("field:%07d" % j, "value:%07d" % j)))
                c.call("RPUSH", "bl:%d" % i, *("element:%07d" % j for j in range(60000)))
            c.call("DEBUG", "POPULATE", "20000")
            want = digest(c)
            assert c.call("SAVE").raw == b"+OK\r\n"
        srv.stop(cleanup=False)
        ref = start_redis(d)
        try:
            with ref.raw() as c:
                assert digest(c) == want
        finally:
            ref.stop(cleanup=False)
        srv = start_darner(d, threads=2)
        try:
            with srv.raw() as c:
                assert digest(c) == want
        finally:
            srv.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_redis_7_0_file_loads_into_darner_with_the_same_digest():
    d = tempfile.mkdtemp(prefix="darner-persist-")
    try:
        ref = start_redis(d)
        try:
            with ref.raw() as c:
                write_dataset(c, random.Random(13), ttls=False)
                want = digest(c)
                assert c.call("SAVE").raw == b"+OK\r\n"
        finally:
            ref.stop(cleanup=False)
        srv = start_darner(d)
        with srv.raw() as c:
            assert digest(c) == want
            assert c.call("FCALL", "f1", "0").py() == 1
        srv.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def rdb_from_dumps(dumps: dict) -> bytes:
    """An RDB file holding every key of a fixture's DUMP payloads: header, SELECTDB, then per
    key its expiry, type byte, name and the payload's object; EOF and the CRC-64."""
    def length(n: int) -> bytes:
        if n < 64:
            return bytes([n])
        if n < 16384:
            return bytes([0x40 | (n >> 8), n & 0xFF])
        return b"\x80" + struct.pack(">I", n)

    version = max(k["rdb_version"] for keys in dumps["dbs"].values() for k in keys)
    out = bytearray(b"REDIS%04d" % version)
    for db, keys in dumps["dbs"].items():
        out += b"\xfe" + length(int(db))
        for k in keys:
            payload = bytes.fromhex(k["dump"])
            if k["pexpiretime"] != -1:
                out += b"\xfc" + struct.pack("<Q", k["pexpiretime"])
            key = base64.b64decode(k["key"])
            out += payload[:1] + length(len(key)) + key + payload[1:-10]
    out += b"\xff"
    out += struct.pack("<Q", crc64(bytes(out)))
    return bytes(out)


@pytest.mark.parametrize("server", SERVERS)
def test_file_built_from_fixture_payloads_loads_as_the_manifest_says(server):
    dumps = load_fixture(server + ".dump.json")
    manifest = load_fixture(server + ".manifest.json")
    d = tempfile.mkdtemp(prefix="darner-persist-")
    try:
        with open(os.path.join(d, "dump.rdb"), "wb") as f:
            f.write(rdb_from_dumps(dumps))
        srv = start_darner(d)
        with srv.raw() as c:
            for db, entries in manifest["dbs"].items():
                c.call("SELECT", db)
                assert c.call("DBSIZE").py() == len(entries), (server, db)
                for e in entries:
                    key = base64.b64decode(e["key"])
                    assert c.call("TYPE", key).py() == e["type"].encode(), key
                    assert canonical_sha(c, key, e["type"]) == e["sha256"], (server, key)
                    assert c.call("PEXPIRETIME", key).py() == e["pexpiretime"], key
                    for field, at in e.get("field_expires", []):
                        got = c.call("HPEXPIRETIME", key, "FIELDS", "1", base64.b64decode(field))
                        assert got.py() == [at], (key, field)
        srv.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def saved_file(d: str, *args) -> bytes:
    """The file Darner saves in `d` (emptied first) for `write_dataset`."""
    for name in os.listdir(d):
        os.remove(os.path.join(d, name))
    srv = start_darner(d, *args)
    with srv.raw() as c:
        write_dataset(c, random.Random(3), ttls=False)
        assert c.call("SAVE").raw == b"+OK\r\n"
    srv.stop(cleanup=False)
    with open(os.path.join(d, "dump.rdb"), "rb") as f:
        return f.read()


def refused(d: str):
    """Starts Darner on `d` expecting it to refuse: (exit code, log)."""
    log = os.path.join(d, "refused.log")
    rc, out = harness.run_to_exit(harness.darner_bin(), [
        "--port", str(harness.free_port()), "--bind", "127.0.0.1", "--dir", d,
        "--logfile", log], timeout=20)
    with open(log) as f:
        return rc, f.read() + out


def test_corrupt_or_truncated_file_stops_startup_naming_file_and_offset():
    d = tempfile.mkdtemp(prefix="darner-persist-")
    try:
        data = saved_file(d)
        path = os.path.join(d, "dump.rdb")
        # A flipped byte in the middle, a cut file.
        for bad in (data[:len(data) // 2] + bytes([data[len(data) // 2] ^ 0x5A])
                    + data[len(data) // 2 + 1:],
                    data[:len(data) * 2 // 3]):
            with open(path, "wb") as f:
                f.write(bad)
            rc, log = refused(d)
            assert rc == 1, log
            assert "dump.rdb" in log and "offset" in log, log
            assert "Ready to accept connections" not in log
        # The same file with a zero checksum (rdbchecksum no) loads.
        with open(path, "wb") as f:
            f.write(data[:-8] + b"\0" * 8)
        srv = start_darner(d)
        with srv.raw() as c:
            assert c.call("EXISTS", "h:huge").py() == 1
        srv.stop(cleanup=False)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def rdb_len(n: int) -> bytes:
    """An RDB length field (6, 14 or 32 bits)."""
    if n < 64:
        return bytes([n])
    if n < 16384:
        return bytes([0x40 | (n >> 8), n & 0xFF])
    return b"\x80" + struct.pack(">I", n)


def rdb_file(keys: bytes) -> bytes:
    """A version 11 file of database 0 holding `keys` (type byte, key, value), with its
    checksum."""
    body = b"REDIS0011" + b"\xfe\x00" + keys + b"\xff"
    return body + struct.pack("<Q", crc64(body))


def big_hash_file(fields: list) -> bytes:
    """A file with a string `s` and the hash `h` of `fields` (field -> "v" + field) in the
    plain hash encoding (type 4), which the loader reads in batches of elements."""
    s = b"\x00" + rdb_len(1) + b"s" + rdb_len(1) + b"v"
    h = b"\x04" + rdb_len(1) + b"h" + rdb_len(len(fields)) + b"".join(
        rdb_len(len(f)) + f + rdb_len(len(f) + 1) + b"v" + f for f in fields)
    return rdb_file(s + h)


def test_big_hash_loads_as_hset_builds_it_and_a_duplicate_field_stops_startup():
    # Past the decoder's batch size (1024 elements): the hash comes in several batches, and
    # is built at once (not field by field) from them.
    fields = [b"f%d" % i for i in range(5000)]
    d = tempfile.mkdtemp(prefix="darner-persist-")
    try:
        ref = start_darner(d)
        with ref.raw() as c:
            c.call("SET", "s", "v")
            for i in range(0, len(fields), 500):
                c.call("HSET", "h", *[x for f in fields[i:i + 500] for x in (f, b"v" + f)])
            want = digest(c)
        ref.stop(cleanup=False)
        path = os.path.join(d, "dump.rdb")
        with open(path, "wb") as f:
            f.write(big_hash_file(fields))
        srv = start_darner(d)
        with srv.raw() as c:
            assert c.call("HLEN", "h").py() == 5000
            assert c.call("HGET", "h", "f4999").py() == b"vf4999"
            assert c.call("OBJECT", "ENCODING", "h").py() == b"hashtable"
            assert digest(c) == want
            c.call("HSET", "h", "new", "1")
            assert c.call("HDEL", "h", "f0").py() == 1
            assert c.call("HLEN", "h").py() == 5000
        srv.stop(cleanup=False)
        # The last field repeats the first: the load stops, naming the file and the key.
        with open(path, "wb") as f:
            f.write(big_hash_file(fields[:-1] + [b"f0"]))
        rc, log = refused(d)
        assert rc == 1, log
        assert "dump.rdb" in log and "duplicate hash field" in log and "'h'" in log, log
        assert "Ready to accept connections" not in log
    finally:
        shutil.rmtree(d, ignore_errors=True)


def corrupt_big_hash_file(fields: list, at: int) -> bytes:
    """`big_hash_file` with the field at index `at` replaced by an invalid string encoding
    (0xC5): the decoder fails there, after the hash's first batches went to its shard."""
    s = b"\x00" + rdb_len(1) + b"s" + rdb_len(1) + b"v"
    body = b"".join(rdb_len(len(f)) + f + rdb_len(len(f) + 1) + b"v" + f for f in fields[:at])
    h = b"\x04" + rdb_len(1) + b"h" + rdb_len(len(fields)) + body + b"\xc5" + b"x" * 64
    return rdb_file(s + h)


def test_file_corrupt_inside_a_big_hash_stops_the_load_and_leaves_no_half_key():
    # The hash streams to its shard batch by batch (1024 fields each); the error comes
    # after three batches were built: start-up stops naming the file and the offset, and
    # DEBUG RELOAD answers the error with no key `h` in the keyspace.
    fields = [b"f%d" % i for i in range(5000)]
    d = tempfile.mkdtemp(prefix="darner-persist-")
    try:
        path = os.path.join(d, "dump.rdb")
        with open(path, "wb") as f:
            f.write(corrupt_big_hash_file(fields, 3500))
        rc, log = refused(d)
        assert rc == 1, log
        assert "dump.rdb" in log and "offset" in log, log
        assert "Ready to accept connections" not in log
        os.remove(path)
        srv = start_darner(d)
        with srv.raw() as c:
            c.call("SET", "before", "1")
            with open(path, "wb") as f:
                f.write(corrupt_big_hash_file(fields, 3500))
            r = c.call("DEBUG", "RELOAD", "NOSAVE")
            assert r.raw.startswith(b"-ERR Error trying to load the RDB dump"), r.raw
            assert c.call("EXISTS", "h").py() == 0
            assert c.call("HLEN", "h").py() == 0
            # The whole file loads afterwards, the hash whole.
            with open(path, "wb") as f:
                f.write(big_hash_file(fields))
            assert c.call("DEBUG", "RELOAD", "NOSAVE").raw == b"+OK\r\n"
            assert c.call("HLEN", "h").py() == 5000
        srv.stop(cleanup=False)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def vm_rss_kb(pid: int) -> int:
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_a_huge_resizedb_hint_does_not_size_the_keyspace_by_it():
    # RESIZEDB claims 2^60 keys: the keyspace is sized by what the file can hold (a few
    # bytes a key), so the server starts small and loads its keys.
    string = lambda k, v: b"\x00" + rdb_len(len(k)) + k + rdb_len(len(v)) + v  # noqa: E731
    hint = b"\xfb" + b"\x81" + struct.pack(">Q", 1 << 60) + rdb_len(0)
    keys = b"".join(string(b"k%d" % i, b"v") for i in range(3000))
    d = tempfile.mkdtemp(prefix="darner-persist-")
    try:
        with open(os.path.join(d, "dump.rdb"), "wb") as f:
            f.write(rdb_file(hint + keys))
        srv = start_darner(d)
        with srv.raw() as c:
            assert c.call("DBSIZE").py() == 3000
            assert c.call("GET", "k2999").py() == b"v"
            assert vm_rss_kb(srv.proc.pid) < 200 * 1024
        srv.stop(cleanup=False)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_a_key_twice_in_the_file_stops_startup_naming_it():
    d = tempfile.mkdtemp(prefix="darner-persist-")
    try:
        string = lambda k, v: b"\x00" + rdb_len(len(k)) + k + rdb_len(len(v)) + v  # noqa: E731
        keys = [b"k%d" % i for i in range(2000)]
        with open(os.path.join(d, "dump.rdb"), "wb") as f:
            f.write(rdb_file(b"".join(string(k, b"v") for k in keys) + string(b"k1234", b"w")))
        rc, log = refused(d)
        assert rc == 1, log
        assert "dump.rdb" in log and "RDB has duplicated key 'k1234' in DB 0" in log, log
        assert "Ready to accept connections" not in log
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_rdbchecksum_no_writes_a_zero_checksum_that_loads():
    d = tempfile.mkdtemp(prefix="darner-persist-")
    try:
        data = saved_file(d, "--rdbchecksum", "no")
        assert data[-8:] == b"\0" * 8
        srv = start_darner(d)
        with srv.raw() as c:
            assert c.call("LLEN", "l:huge").py() == 20000
        srv.stop(cleanup=False)
        data = saved_file(d)
        assert struct.unpack("<Q", data[-8:])[0] == crc64(data[:-8])
    finally:
        shutil.rmtree(d, ignore_errors=True)


def shutdown(c: RawConn, *args):
    """SHUTDOWN that succeeds: no reply, the connection closes."""
    with pytest.raises(ConnectionClosed):
        c.call("SHUTDOWN", *args)


def test_shutdown_save_saves_and_nosave_does_not():
    d = tempfile.mkdtemp(prefix="darner-persist-")
    try:
        path = os.path.join(d, "dump.rdb")
        srv = start_darner(d)
        with srv.raw() as c:
            c.call("SET", "k", "1")
            shutdown(c, "NOSAVE")
        assert srv.wait_exit() == 0
        assert not os.path.exists(path)
        srv = start_darner(d)
        with srv.raw() as c:
            c.call("SET", "k", "2")
            shutdown(c, "SAVE")
        assert srv.wait_exit() == 0
        assert os.path.exists(path)
        srv = start_darner(d)
        with srv.raw() as c:
            assert c.call("GET", "k").py() == b"2"
            c.call("SET", "k", "3")
            # Plain SHUTDOWN saves only with save points, which are never set here.
            shutdown(c)
        assert srv.wait_exit() == 0
        srv = start_darner(d)
        with srv.raw() as c:
            assert c.call("GET", "k").py() == b"2"
        srv.stop(cleanup=False)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_shutdown_save_refuses_to_exit_when_the_save_fails():
    d = tempfile.mkdtemp(prefix="darner-persist-")
    try:
        srv = start_darner(d)
        with srv.raw() as c:
            c.call("SET", "k", "1")
            # A directory where the file should go: the rename fails.
            os.mkdir(os.path.join(d, "dump.rdb"))
            r = c.call("SHUTDOWN", "SAVE")
            assert r.raw == b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n"
            assert c.call("SAVE").raw == b"-ERR\r\n"
            assert c.call("GET", "k").py() == b"1"
        assert srv.alive()
        srv.stop(cleanup=False)
        log = open(srv.log_path).read()
        assert "Error trying to save the DB, can't exit." in log
    finally:
        shutil.rmtree(d, ignore_errors=True)


def info_fields(c: RawConn) -> dict:
    text = c.call("INFO", "persistence").py().decode()
    return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)


def test_lastsave_and_info_persistence_follow_save(darner_factory):
    d = tempfile.mkdtemp(prefix="darner-persist-")
    try:
        srv = start_darner(d)
        with srv.raw() as c:
            start = c.call("LASTSAVE").py()
            f = info_fields(c)
            assert f["rdb_saves"] == "0" and f["rdb_last_save_time"] == str(start)
            assert f["loading"] == "0" and f["rdb_bgsave_in_progress"] == "0"
            for i in range(7):
                c.call("SET", "k%d" % i, "v")
            c.call("CONFIG", "RESETSTAT")  # does not reset the change counter (as Redis)
            assert info_fields(c)["rdb_changes_since_last_save"] == "7"
            time.sleep(1.1)
            assert c.call("SAVE").raw == b"+OK\r\n"
            f = info_fields(c)
            assert f["rdb_saves"] == "1"  # SAVE counts, as in Redis (not SHUTDOWN's, FLUSHALL's)
            assert f["rdb_changes_since_last_save"] == "0"
            assert f["rdb_last_bgsave_status"] == "ok"
            assert int(f["rdb_last_save_time"]) > start
            assert c.call("LASTSAVE").py() == int(f["rdb_last_save_time"])
            c.call("SET", "k", "v")
            assert info_fields(c)["rdb_changes_since_last_save"] == "1"
        srv.stop(cleanup=False)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_debug_reload_keeps_the_dataset_and_its_options():
    d = tempfile.mkdtemp(prefix="darner-persist-")
    try:
        srv = start_darner(d)
        with srv.raw() as c:
            write_dataset(c, random.Random(5), ttls=True)
            before = state(c)
            assert c.call("DEBUG", "RELOAD").raw == b"+OK\r\n"
            assert state(c) == before
            # NOSAVE loads the file as it is: a key written since is gone.
            c.call("SET", "after", "1")
            assert c.call("DEBUG", "RELOAD", "NOSAVE").raw == b"+OK\r\n"
            assert c.call("EXISTS", "after").py() == 0
            # NOFLUSH keeps what is in memory; a key of the file already there is an error
            # unless MERGE.
            c.call("SET", "after", "1")
            assert c.call("DEBUG", "RELOAD", "NOSAVE", "NOFLUSH", "MERGE").raw == b"+OK\r\n"
            assert c.call("EXISTS", "after").py() == 1
            assert c.call("DEBUG", "RELOAD", "NOSAVE", "NOFLUSH").raw.startswith(
                b"-ERR Error trying to load the RDB dump")
            assert c.call("DEBUG", "RELOAD", "BOGUS").raw == \
                b"-ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.\r\n"
        srv.stop(cleanup=False)
    finally:
        shutil.rmtree(d, ignore_errors=True)


DIRECTIVES = [
    ("dbfilename", ["other.rdb"]),
    ("rdbcompression", ["no", "yes", "maybe"]),
    ("rdbchecksum", ["no", "yes", "1"]),
    ("stop-writes-on-bgsave-error", ["no", "yes", "x"]),
    ("rdb-del-sync-files", ["yes", "no", "2"]),
    ("sanitize-dump-payload", ["yes", "clients", "no", "sometimes"]),
]


def test_snapshot_directives_config_get_and_set_as_redis(darner_factory, redis_ref):
    srv = darner_factory()
    with srv.raw() as dc, redis_ref.raw() as rc:
        for name, values in DIRECTIVES:
            assert dc.call("CONFIG", "GET", name).raw == rc.call("CONFIG", "GET", name).raw, name
            for v in values:
                if name == "dbfilename":
                    continue  # protected in Redis (enable-protected-configs), settable here
                got, want = dc.call("CONFIG", "SET", name, v), rc.call("CONFIG", "SET", name, v)
                assert got.raw == want.raw, (name, v)
                assert dc.call("CONFIG", "GET", name).raw == rc.call("CONFIG", "GET", name).raw
        assert dc.call("CONFIG", "SET", "dbfilename", "a/b.rdb").raw == (
            b"-ERR CONFIG SET failed (possibly related to argument 'dbfilename') - "
            b"dbfilename can't be a path, just a filename\r\n")
        assert dc.call("CONFIG", "SET", "dbfilename", "x.rdb").raw == b"+OK\r\n"
        assert dc.call("CONFIG", "GET", "dbfilename").py() == [b"dbfilename", b"x.rdb"]


def test_dbfilename_names_the_file_saved_and_loaded():
    d = tempfile.mkdtemp(prefix="darner-persist-")
    try:
        srv = harness.start_darner(["--dir", d, "--dbfilename", "mine.rdb"])
        with srv.raw() as c:
            c.call("SET", "k", "v")
            assert c.call("SAVE").raw == b"+OK\r\n"
        kill9(srv)
        assert os.listdir(d) == ["mine.rdb"]
        srv = harness.start_darner(["--dir", d, "--dbfilename", "mine.rdb"])
        with srv.raw() as c:
            assert c.call("GET", "k").py() == b"v"
        srv.stop(cleanup=False)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_clients_get_loading_while_the_file_loads():
    d = tempfile.mkdtemp(prefix="darner-persist-")
    try:
        ref = start_redis(d)
        try:
            # POPULATE and SAVE of 2M keys take seconds, more on a loaded machine.
            with ref.raw(timeout=120) as c:
                # About 3 s of loading for Darner on a small machine.
                assert c.call("DEBUG", "POPULATE", "2000000", "key", "100").raw == b"+OK\r\n"
                assert c.call("SAVE").raw == b"+OK\r\n"
        finally:
            ref.stop(cleanup=False)
        srv = start_darner(d, wait_ready=False)
        deadline = time.monotonic() + 60
        replies = []
        loading_infos = 0
        while time.monotonic() < deadline:
            try:
                with srv.raw(timeout=5) as c:
                    while time.monotonic() < deadline:
                        r = c.call("SET", "probe", "1").raw
                        replies.append(r)
                        if not r.startswith(b"-LOADING"):
                            break
                        info = c.call("INFO", "persistence").py().decode().split("\r\n")
                        # The load may end between the SET and the INFO.
                        if "loading:0" not in info:
                            assert "loading:1" in info, info
                            assert any(x.startswith("loading_total_bytes:") for x in info)
                            loading_infos += 1
                        time.sleep(0.05)
                break
            except (OSError, ConnectionClosed):
                time.sleep(0.02)
        assert replies[0] == b"-LOADING Redis is loading the dataset in memory\r\n", replies[:3]
        assert replies[-1] == b"+OK\r\n"
        assert loading_infos > 0, "INFO never showed the load in progress"
        with srv.raw() as c:
            assert c.call("DBSIZE").py() == 2000001
            assert "loading:0\r\n" in c.call("INFO", "persistence").py().decode()
        srv.stop(cleanup=False)
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("threads", [1, 2])
def test_bgsave_kill9_restart_gives_the_dataset_at_the_cut(threads):
    """BGSAVE (bgsave.rs) of every type, field and member TTLs included, while a second
    connection changes everything right after the cut: the restart has the cut's state."""
    d = tempfile.mkdtemp(prefix="darner-persist-")
    try:
        srv = start_darner(d, threads=threads)
        with srv.raw() as c, srv.raw() as w:
            write_dataset(c, random.Random(11), ttls=True)
            before = state(c)
            assert c.call("BGSAVE").raw == b"+Background saving started\r\n"
            # Every database flushed (FLUSHDB: FLUSHALL would stop the save, as in Redis).
            flush = [cmd for i in range(16) for cmd in (("SELECT", str(i)), ("FLUSHDB",))]
            w.send_many(flush + [("SELECT", "0"), ("SET", "after", "cut")])
            w.read_replies(len(flush) + 2)
            deadline = time.monotonic() + 60
            while b"rdb_bgsave_in_progress:0" not in c.call("INFO", "persistence").py():
                assert time.monotonic() < deadline, "BGSAVE did not finish"
                time.sleep(0.05)
            assert info_fields(c)["rdb_last_bgsave_status"] == "ok"
        kill9(srv)
        srv = start_darner(d, threads=threads + 1)
        with srv.raw() as c:
            assert state(c) == before
        srv.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)
