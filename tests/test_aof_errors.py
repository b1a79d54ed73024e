"""A failing write to the append-only file (issue 14), as Redis 7.2's flushAppendOnlyFile and
writeCommandsDeniedByDiskError handle it.

The incr file is made unwritable at run time, without privileges: the server starts with
SIGXFSZ ignored (an ignored disposition survives exec), and the test lowers the server's
RLIMIT_FSIZE with prlimit(2) to the incr file's size. A write past it then fails with EFBIG
("File too large"), or is short when the limit lies inside the write (Redis cuts a short write
back and reports ENOSPC, "No space left on device"). Raising the limit makes writing possible
again. A 1 MB value (compressible, so the RDB base stays small) makes the incr file larger than
any other file the server writes meanwhile (its log, a rewrite's base, the manifest).

- `everysec` (and `no`): writes and PING are refused with `MISCONF Errors writing to the AOF
  file: <strerror>`, reads work, INFO says aof_last_write_status:err; once the limit is raised
  the data kept in memory is written, writes are accepted again, and a restart finds every
  acknowledged write (the short write was cut back: the file loads).
- `always`: the process exits, and the write it could not log is never acknowledged.
- BGREWRITEAOF and CONFIG SET appendonly no / yes while the old incr file still fails.
- Differential: the same commands in the error state answer byte for byte as redis-server 7.0.
"""
from __future__ import annotations

import os
import resource
import shutil
import signal
import tempfile
import time

import pytest

import harness
import test_aof
from test_aof import tmpdir_  # noqa: F401  (the fixture: a temp dir per test)
from resp_reader import ConnectionClosed, RawConn

pytestmark = pytest.mark.darner_only

INCR_FILE = "appendonly.aof.1.incr.aof"
BIG = b"x" * (1 << 20)

EFBIG_TEXT = b"MISCONF Errors writing to the AOF file: File too large"
ENOSPC_TEXT = b"MISCONF Errors writing to the AOF file: No space left on device"
KINDS = ["darner", "redis"]


def _ignore_sigxfsz():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


class Servers(test_aof.Servers):
    """test_aof's servers, started with SIGXFSZ ignored (the tests lower RLIMIT_FSIZE)."""

    def start(self, kind: str, d: str, *args) -> harness.Server:
        args = ["--dir", d, "--appendonly", "yes", "--auto-aof-rewrite-percentage", "0"] + [
            str(a) for a in args]
        if kind == "darner":
            srv = harness.Server(harness.darner_bin(), ["--threads", "2"] + args,
                                 name="darner", preexec_fn=_ignore_sigxfsz)
        else:
            binary = harness.redis_server_bin()
            if not binary:
                pytest.skip("redis-server not installed")
            srv = harness.Server(binary, args + ["--save", ""], name="redis-ref",
                                 preexec_fn=_ignore_sigxfsz)
        self.all.append(srv)
        return srv.start()


@pytest.fixture
def servers():
    s = Servers()
    try:
        yield s
    finally:
        s.stop_all()


def incr_path(d: str) -> str:
    return os.path.join(d, "appendonlydir", INCR_FILE)


def cap(srv: harness.Server, limit):
    """The server's file size limit (soft; the hard one stays)."""
    _, hard = resource.prlimit(srv.proc.pid, resource.RLIMIT_FSIZE)
    resource.prlimit(srv.proc.pid, resource.RLIMIT_FSIZE, (limit, hard))


def uncap(srv: harness.Server):
    cap(srv, resource.RLIM_INFINITY)


def log_of(srv: harness.Server) -> str:
    with open(srv.log_path, errors="replace") as f:
        return f.read()


def info_field(c: RawConn, name: str) -> str:
    text = c.call("INFO", "persistence").py().decode()
    for line in text.split("\r\n"):
        if line.startswith(name + ":"):
            return line.split(":", 1)[1]
    raise AssertionError("no %s in INFO: %s" % (name, text))


def poll(what, cond, timeout=15.0):
    deadline = time.time() + timeout
    while True:
        v = what()
        if cond(v):
            return v
        if time.time() > deadline:
            raise AssertionError("still %r after %.0f s" % (v, timeout))
        time.sleep(0.05)


def resp(*args) -> bytes:
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def written_up_to(d: str, *last_cmd) -> int:
    """Waits until the incr file ends with `last_cmd` (Darner writes it from another thread);
    returns the file's size."""
    tail = resp(*last_cmd)

    def ends():
        with open(incr_path(d), "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - len(tail)))
            return f.read() == tail, size

    return poll(ends, lambda v: v[0])[1]


def fill(c: RawConn, d: str) -> int:
    """Writes the big value and a marker; returns the incr file's size once they are in (one
    after the other: Darner orders the writes of two shards in the file as it likes)."""
    assert c.call("SET", "big", BIG).py() == b"OK"
    written_up_to(d, "SET", "big", BIG)
    assert c.call("SET", "k0", "v0").py() == b"OK"
    return written_up_to(d, "SET", "k0", "v0")


def until_refused(c: RawConn, acked: list, prefix="k"):
    """SETs new keys until one is refused (a write acknowledged before the AOF thread met the
    error is kept in `acked`); returns the refusal."""
    def attempt():
        key = "%s%d" % (prefix, len(acked) + 1)
        r = c.call("SET", key, "v")
        if not r.is_error:
            acked.append(key)
        return r

    return poll(attempt, lambda r: r.is_error)


def until_accepted(c: RawConn, key: str):
    return poll(lambda: c.call("SET", key, "v"), lambda r: not r.is_error)


# --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_failed_aof_write_refuses_writes_until_a_write_goes_through(servers, tmpdir_, kind):
    srv = servers.start(kind, tmpdir_, "--appendfsync", "everysec")
    with srv.raw() as c:
        size = fill(c, tmpdir_)
        cap(srv, size)
        acked = []
        refusal = until_refused(c, acked)
        assert refusal.raw == b"-" + EFBIG_TEXT + b"\r\n"
        # Still refused, and so is PING; reads work.
        assert c.call("SET", "other", "1").raw == refusal.raw
        assert c.call("PING").raw == refusal.raw
        assert c.call("GET", "k0").py() == b"v0"
        assert c.call("STRLEN", "big").py() == len(BIG)
        assert c.call("GET", "other").is_null
        assert info_field(c, "aof_last_write_status") == "err"
        # The first refused write is not in memory; the acknowledged ones are, and wait in
        # the AOF buffer (Redis's aof_buf).
        assert int(info_field(c, "aof_buffer_length")) > 0
        assert os.path.getsize(incr_path(tmpdir_)) == size
        assert "Error writing to the AOF file: File too large" in log_of(srv)

        uncap(srv)
        until_accepted(c, "after")
        assert info_field(c, "aof_last_write_status") == "ok"
        assert info_field(c, "aof_buffer_length") == "0"
        assert c.call("PING").py() == b"PONG"
        assert "AOF write error looks solved, Redis can write again." in log_of(srv)
        written_up_to(tmpdir_, "SET", "after", "v")
    srv.stop()

    # Nothing acknowledged was lost: what waited in memory reached the file.
    again = servers.start(kind, tmpdir_)
    with again.raw() as c:
        for key in acked + ["k0", "after"]:
            assert c.call("EXISTS", key).py() == 1, key
        assert c.call("EXISTS", "other").py() == 0


@pytest.mark.parametrize("kind", KINDS)
def test_short_aof_write_is_cut_back_and_reported_as_enospc(servers, tmpdir_, kind):
    srv = servers.start(kind, tmpdir_, "--appendfsync", "no")
    with srv.raw() as c:
        size = fill(c, tmpdir_)
        # The limit lies inside the next command: 10 bytes of it are written, then cut off.
        cap(srv, size + 10)
        acked = []
        refusal = until_refused(c, acked)
        assert refusal.raw == b"-" + ENOSPC_TEXT + b"\r\n"
        assert os.path.getsize(incr_path(tmpdir_)) == size
        assert info_field(c, "aof_last_write_status") == "err"
        assert "Short write while writing to the AOF file: (nwritten=10, expected=" in log_of(srv)

        uncap(srv)
        until_accepted(c, "after")
        assert info_field(c, "aof_last_write_status") == "ok"
        written_up_to(tmpdir_, "SET", "after", "v")
    srv.stop()

    # The file loads (no torn command) and holds every acknowledged write.
    again = servers.start(kind, tmpdir_)
    with again.raw() as c:
        for key in acked + ["k0", "after"]:
            assert c.call("EXISTS", key).py() == 1, key
        assert c.call("STRLEN", "big").py() == len(BIG)


@pytest.mark.parametrize("kind", KINDS)
def test_failed_aof_write_under_always_exits_without_acknowledging(servers, tmpdir_, kind):
    srv = servers.start(kind, tmpdir_, "--appendfsync", "always")
    with srv.raw() as c:
        size = fill(c, tmpdir_)
        cap(srv, size)
        with pytest.raises(ConnectionClosed):
            c.call("INCR", "lost")
    assert srv.wait_exit(15) == 1, srv.log_tail()
    assert ("Can't recover from AOF write error when the AOF fsync policy is 'always'. "
            "Exiting...") in log_of(srv)

    again = servers.start(kind, tmpdir_)
    with again.raw() as c:
        assert c.call("GET", "k0").py() == b"v0"
        assert c.call("EXISTS", "lost").py() == 0


@pytest.mark.parametrize("kind", KINDS)
def test_config_set_appendonly_no_then_yes_clears_the_aof_write_error(servers, tmpdir_, kind):
    srv = servers.start(kind, tmpdir_, "--appendfsync", "everysec")
    with srv.raw() as c:
        size = fill(c, tmpdir_)
        cap(srv, size)
        until_refused(c, [])
        # The AOF off: its error no longer refuses writes, though INFO still shows it.
        assert c.call("CONFIG", "SET", "appendonly", "no").py() == b"OK"
        until_accepted(c, "while-off")
        assert info_field(c, "aof_last_write_status") == "err"
        # On again (a new incr file, written from the start): the error is forgotten.
        assert c.call("CONFIG", "SET", "appendonly", "yes").py() == b"OK"
        poll(lambda: info_field(c, "aof_last_write_status"), lambda s: s == "ok")
        poll(lambda: info_field(c, "aof_rewrite_in_progress"), lambda s: s == "0")
        assert c.call("SET", "after", "v").py() == b"OK"
        assert "AOF reopen, just ignore the last error." in log_of(srv)


def test_bgrewriteaof_moves_unwritten_aof_data_to_the_new_incr_file(servers, tmpdir_):
    """BGREWRITEAOF opens a new incr file; what the old one did not take is written there and
    writes are accepted again. That rewrite's base (the cut's snapshot) already holds that
    data, so Darner does not install it (Redis does, and a restart applies the data twice);
    the next rewrite succeeds."""
    srv = servers.start("darner", tmpdir_, "--appendfsync", "everysec")
    with srv.raw() as c:
        size = fill(c, tmpdir_)
        assert c.call("INCR", "n").py() == 1
        written_up_to(tmpdir_, "INCR", "n")
        cap(srv, size + len(resp("INCR", "n")))
        incrs = 1
        while True:
            r = c.call("INCR", "n")
            if r.is_error:
                assert r.raw == b"-" + EFBIG_TEXT + b"\r\n"
                break
            incrs += 1
            assert incrs < 1000
        assert incrs >= 2  # one acknowledged INCR waits in memory
        assert c.call("BGREWRITEAOF").py().startswith(b"Background append only file rewriting")
        poll(lambda: info_field(c, "aof_rewrite_in_progress"), lambda s: s == "0")
        assert info_field(c, "aof_last_write_status") == "ok"
        assert info_field(c, "aof_last_bgrewrite_status") == "err"
        assert c.call("INCR", "n").py() == incrs + 1
        incrs += 1
        # The old incr file is no longer written to: a rewrite now succeeds.
        assert c.call("BGREWRITEAOF").py().startswith(b"Background append only file rewriting")
        poll(lambda: info_field(c, "aof_rewrite_in_progress"), lambda s: s == "0")
        assert info_field(c, "aof_last_bgrewrite_status") == "ok"
        assert c.call("INCR", "n").py() == incrs + 1
        incrs += 1
    srv.stop()
    again = servers.start("darner", tmpdir_)
    with again.raw() as c:
        assert c.call("GET", "n").py() == str(incrs).encode()


def test_bgrewriteaof_after_failed_write_keeps_counts_after_a_crash(servers, tmpdir_):
    """As above, but the server is killed right after the failed rewrite: the manifest lists the
    old incr files and the new one, which starts with what the old one did not take."""
    srv = servers.start("darner", tmpdir_, "--appendfsync", "always")
    with srv.raw() as c:
        assert c.call("SELECT", "3").py() == b"OK"
        assert c.call("SET", "big", BIG).py() == b"OK"
        assert c.call("INCR", "n").py() == 1
        assert c.call("CONFIG", "SET", "appendfsync", "everysec").py() == b"OK"
        size = written_up_to(tmpdir_, "INCR", "n")
        cap(srv, size)
        incrs = 1
        while not c.call("INCR", "n").is_error:
            incrs += 1
            assert incrs < 1000
        assert c.call("BGREWRITEAOF").py().startswith(b"Background append only file rewriting")
        poll(lambda: info_field(c, "aof_rewrite_in_progress"), lambda s: s == "0")
        assert info_field(c, "aof_last_write_status") == "ok"
        # `always` again: the INCR's reply comes once it is fsynced.
        assert c.call("CONFIG", "SET", "appendfsync", "always").py() == b"OK"
        assert c.call("INCR", "n").py() == incrs + 1
    srv.proc.send_signal(signal.SIGKILL)
    srv.proc.wait(10)
    again = servers.start("darner", tmpdir_)
    with again.raw() as c:
        assert c.call("SELECT", "3").py() == b"OK"
        assert c.call("GET", "n").py() == str(incrs + 1).encode()
        assert c.call("STRLEN", "big").py() == len(BIG)


ERROR_STATE_COMMANDS = [
    ("SET", "a", "1"),
    ("GET", "k0"),
    ("PING",),
    ("ECHO", "hi"),
    ("DEL", "k0"),
    ("EVAL", "return redis.call('get', 'k0')", "0"),
    ("EVAL", "return redis.call('set', 'a', '1')", "0"),
    ("EVAL", "#!lua flags=no-writes\nreturn redis.call('get', 'k0')", "0"),
    ("EVAL", "#!lua\nreturn redis.call('set', 'a', '1')", "0"),
    ("MULTI",), ("GET", "k0"), ("EXEC",),
    ("MULTI",), ("INCR", "a"), ("EXEC",),
    ("EXISTS", "a"),
]


def test_commands_in_the_aof_error_state_answer_as_redis(servers):
    """The same commands after the same failed write, byte for byte."""
    replies = {}
    for kind in KINDS:
        d = tempfile.mkdtemp(prefix="darner-aof-err-")
        try:
            srv = servers.start(kind, d, "--appendfsync", "everysec")
            with srv.raw() as c:
                cap(srv, fill(c, d))
                until_refused(c, [])
                replies[kind] = [c.call(*cmd).raw for cmd in ERROR_STATE_COMMANDS]
            srv.stop()
        finally:
            shutil.rmtree(d, ignore_errors=True)
    for cmd, mine, ref in zip(ERROR_STATE_COMMANDS, replies["darner"], replies["redis"]):
        assert mine == ref, (cmd, mine, ref)
