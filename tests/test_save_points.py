"""Save points (`save <seconds> <changes> ...`) and what hangs on them, as in Redis 7.2:

- the directive's formats in the config file, on the command line and in CONFIG SET / GET
  (compared with Debian's redis-server), and its refusals;
- the cron's BGSAVE when a save point is met, and its retry delay after a failed one;
- BGSAVE inside MULTI/EXEC, scheduled for the cron;
- the save at SIGTERM and at SHUTDOWN when save points are set (none without);
- FLUSHALL: saves the empty dataset with save points, and stops a BGSAVE in progress;
- MISCONF after a failed BGSAVE (compared byte for byte with redis-server), until a save
  succeeds.

Every server runs in a temporary directory of its own; a save is made to fail by making
`dump.rdb` a directory (the rename fails, also for root).
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import time

import pytest

import harness
from resp_reader import RawConn

pytestmark = pytest.mark.darner_only


def info_fields(c: RawConn) -> dict:
    text = c.call("INFO", "persistence").py().decode()
    return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)


def wait_until(what, cond, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def wait_bgsave_done(c: RawConn, timeout=30.0) -> dict:
    return wait_until("the background save to end",
                      lambda: (lambda f: f if f["rdb_bgsave_in_progress"] == "0" else None)(
                          info_fields(c)), timeout)


def start_darner(args=(), **kw) -> harness.Server:
    return harness.start_darner(list(args), **kw)


def start_redis(args=(), **kw) -> harness.Server:
    return harness.Server(harness.redis_server_bin(), list(args), is_redis=True,
                          name="redis-ref", **kw).start()


def digest(c: RawConn) -> bytes:
    return c.call("DEBUG", "DIGEST").py()


def write_some(c: RawConn):
    for cmd in [("SET", "s", "v"), ("RPUSH", "l", "a", "b"), ("HSET", "h", "f", "v"),
                ("SADD", "set", "m"), ("ZADD", "z", "1", "m"), ("SET", "t", "x", "EX", "1000"),
                ("SELECT", "3"), ("SET", "db3", "three"), ("SELECT", "0")]:
        assert not c.call(*cmd).is_error, cmd


# ---- the directive ----

CONFIG_SET_VALUES = ["3600 1 300 100", "", "1 2 3 0", "10 x", "10 1 5", "0 1", "1 -1", "+1 2",
                     "1  2", "5 ", " 5 1", "5 4294967297", "100 0", "-5 1", "abc", "7 7"]


def test_default_save_points_and_config_set_get_formats_as_redis():
    srv = start_darner(save_off=False)
    ref = start_redis(save_off=False)
    try:
        with srv.raw() as dc, ref.raw() as rc:
            got = dc.call("CONFIG", "GET", "save").raw
            assert got == rc.call("CONFIG", "GET", "save").raw
            assert got == b"*2\r\n$4\r\nsave\r\n$23\r\n3600 1 300 100 60 10000\r\n"
            for v in CONFIG_SET_VALUES:
                got, want = dc.call("CONFIG", "SET", "save", v).raw, rc.call("CONFIG", "SET", "save", v).raw
                assert got == want, v
                assert dc.call("CONFIG", "GET", "save").raw == rc.call("CONFIG", "GET", "save").raw, v
            assert dc.call("CONFIG", "SET", "save", "10 x").raw == (
                b"-ERR CONFIG SET failed (possibly related to argument 'save') - "
                b"Invalid save parameters\r\n")
            dc.call("CONFIG", "SET", "save", "")
            rc.call("CONFIG", "SET", "save", "")
    finally:
        srv.stop()
        ref.stop()


@pytest.mark.parametrize("lines,args,want", [
    ("save 100 1\nsave 200 2\n", ["--save", "300", "3"], "100 1 200 2 300 3"),
    ("save \"\"\nsave 50 5\n", [], "50 5"),
    ("save 50 5\nsave \"\"\n", [], ""),
    ("save \"10 1 20 2\"\n", [], "10 1 20 2"),
    ("hz 10\n", ["--save", "7", "1", "8", "2"], "7 1 8 2"),
    ("save 9 9\n", ["--save", ""], ""),
])
def test_save_lines_add_up_in_the_file_and_on_the_command_line_as_redis(lines, args, want):
    d = tempfile.mkdtemp(prefix="darner-savecfg-")
    conf = os.path.join(d, "s.conf")
    with open(conf, "w") as f:
        f.write(lines)
    servers = []
    try:
        for start in (start_darner, start_redis):
            srv = start(args, config_file=conf, save_off=False)
            servers.append(srv)
            with srv.raw() as c:
                assert c.call("CONFIG", "GET", "save").py() == [b"save", want.encode()], srv
                c.call("CONFIG", "SET", "save", "")
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("bad", [["10", "x"], ["0", "1"], ["5", "-1"], ["5"], ["1", "2", "3"]])
def test_bad_save_points_stop_start_up_as_redis(bad):
    for binary in (harness.darner_bin(), harness.redis_server_bin()):
        rc, out = harness.run_to_exit(binary, ["--port", str(harness.free_port()), "--save"] + bad)
        assert rc not in (None, 0), (binary, out)
        assert "Invalid save parameters" in out, (binary, out)
        assert "FATAL CONFIG FILE ERROR" in out, (binary, out)


# ---- the cron ----

def test_a_save_point_met_starts_a_bgsave_whose_file_loads_in_redis():
    srv = start_darner(["--save", "1", "1"])
    try:
        with srv.raw() as c:
            start = c.call("LASTSAVE").py()
            assert info_fields(c)["rdb_saves"] == "0"
            write_some(c)
            want = digest(c)
            wait_until("a save", lambda: c.call("LASTSAVE").py() > start)
            f = wait_bgsave_done(c)
            assert f["rdb_last_bgsave_status"] == "ok"
            assert f["rdb_saves"] == "1"
            assert f["rdb_changes_since_last_save"] == "0"
            assert int(f["rdb_last_save_time"]) == c.call("LASTSAVE").py()
            assert int(f["rdb_last_bgsave_time_sec"]) >= 0
        log = open(srv.log_path).read()
        assert "1 changes in 1 seconds. Saving..." in log
        assert "Background saving terminated with success" in log
        ref = start_redis(["--dir", srv.workdir, "--dbfilename", "dump.rdb"])
        try:
            with ref.raw() as r:
                assert digest(r) == want
        finally:
            ref.stop()
    finally:
        srv.stop()


def test_no_save_point_met_no_bgsave():
    # 1 change is not 2: the cron saves nothing (a second change then starts it).
    srv = start_darner(["--save", "1", "2"])
    try:
        with srv.raw() as c:
            start = c.call("LASTSAVE").py()
            c.call("SET", "a", "1")
            # Three seconds of cron ticks with the save point unmet: still no save.
            wait_until("two seconds", lambda: int(time.time()) > start + 2)
            f = info_fields(c)
            assert (f["rdb_saves"], f["rdb_changes_since_last_save"]) == ("0", "1")
            c.call("SET", "b", "1")
            wait_until("a save", lambda: c.call("LASTSAVE").py() > start)
        assert "2 changes in 1 seconds. Saving..." in open(srv.log_path).read()
    finally:
        srv.stop()


def log_times(path: str, text: str):
    """The times (s, from the log's hh:mm:ss.mmm) of the lines holding `text`."""
    out = []
    for line in open(path):
        if text in line:
            m = re.search(r"(\d\d):(\d\d):(\d\d\.\d\d\d)", line)
            out.append(int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3)))
    return out


def test_a_failed_cron_bgsave_is_retried_five_seconds_later():
    srv = start_darner(["--save", "1", "1"])
    try:
        os.mkdir(os.path.join(srv.workdir, "dump.rdb"))  # the rename fails
        with srv.raw() as c:
            c.call("SET", "a", "1")
            wait_until("two failed saves",
                       lambda: len(log_times(srv.log_path, "Background saving error")) >= 2, 20)
            tries = log_times(srv.log_path, "1 changes in 1 seconds. Saving...")
            assert len(tries) >= 2
            # Redis's CONFIG_BGSAVE_RETRY_DELAY: more than 5 s (unix seconds) after the try.
            assert tries[1] - tries[0] >= 5.0, tries
            assert info_fields(c)["rdb_last_bgsave_status"] == "err"
            # The directory gone, the next try succeeds.
            os.rmdir(os.path.join(srv.workdir, "dump.rdb"))
            f = wait_until("a successful save", lambda: (lambda f: f if f["rdb_last_bgsave_status"] == "ok"
                                                        else None)(info_fields(c)), 20)
            assert f["rdb_changes_since_last_save"] == "0"
        assert os.path.isfile(os.path.join(srv.workdir, "dump.rdb"))
    finally:
        srv.stop()


def test_bgsave_inside_exec_is_scheduled_and_started_by_the_cron_as_redis():
    srv = start_darner(["--save", ""])
    ref = start_redis()
    try:
        for s in (srv, ref):
            with s.raw() as c:
                start = c.call("LASTSAVE").py()
                c.call("SET", "k", "v")
                assert info_fields(c)["rdb_saves"] == "0"
                got = [c.call("MULTI").raw, c.call("BGSAVE").raw, c.call("EXEC").raw]
                assert got == [b"+OK\r\n", b"+QUEUED\r\n", b"*1\r\n+Background saving scheduled\r\n"], s
                # (LASTSAVE may not move: the save can come within the start's second.)
                f = wait_until("the scheduled save", lambda: (lambda f: f if f["rdb_saves"] == "1"
                               and f["rdb_bgsave_in_progress"] == "0" else None)(info_fields(c)))
                assert f["rdb_last_bgsave_status"] == "ok"
                assert int(f["rdb_last_save_time"]) >= start
                # SCHEDULE with nothing in the way starts at once.
                assert c.call("BGSAVE", "SCHEDULE").raw == b"+Background saving started\r\n"
                wait_bgsave_done(c)
                assert c.call("BGSAVE", "LATER").raw == b"-ERR syntax error\r\n"
            assert os.path.isfile(os.path.join(s.workdir, "dump.rdb"))
    finally:
        srv.stop()
        ref.stop()


# ---- shutdown ----

def test_sigterm_with_save_points_saves_and_a_restart_has_the_data():
    d = tempfile.mkdtemp(prefix="darner-sigterm-")
    try:
        srv = start_darner(["--dir", d, "--save", "3600", "1"])
        with srv.raw() as c:
            write_some(c)
            want = digest(c)
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.wait_exit(20) == 0
        log = open(srv.log_path).read()
        assert "Received SIGTERM scheduling shutdown..." in log
        assert "Saving the final RDB snapshot before exiting." in log
        assert "DB saved on disk" in log
        assert sorted(os.listdir(d)) == ["dump.rdb"]
        srv.stop()
        srv = start_darner(["--dir", d])
        with srv.raw() as c:
            assert digest(c) == want
        srv.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "SHUTDOWN"])
def test_without_save_points_shutdown_writes_nothing(how):
    d = tempfile.mkdtemp(prefix="darner-nosave-")
    try:
        srv = start_darner(["--dir", d, "--save", ""])
        with srv.raw() as c:
            write_some(c)
            if how == "SHUTDOWN":
                c.send_many([("SHUTDOWN",)])
        if how != "SHUTDOWN":
            srv.proc.send_signal(getattr(signal, how))
        assert srv.wait_exit(20) == 0
        assert os.listdir(d) == []
        srv.stop()
        srv = start_darner(["--dir", d])
        with srv.raw() as c:
            assert c.call("DBSIZE").py() == 0
        srv.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_shutdown_without_save_or_nosave_saves_when_save_points_are_set():
    d = tempfile.mkdtemp(prefix="darner-shutdown-")
    try:
        srv = start_darner(["--dir", d, "--save", "3600", "1"])
        with srv.raw() as c:
            write_some(c)
            want = digest(c)
            c.send_many([("SHUTDOWN",)])
        assert srv.wait_exit(20) == 0
        srv.stop()
        srv = start_darner(["--dir", d, "--save", "3600", "1"])
        with srv.raw() as c:
            assert digest(c) == want
            c.call("SET", "more", "x")
            c.send_many([("SHUTDOWN", "NOSAVE")])  # NOSAVE: the file stays as it was
        assert srv.wait_exit(20) == 0
        srv.stop()
        srv = start_darner(["--dir", d])
        with srv.raw() as c:
            assert digest(c) == want
        srv.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def fill(c: RawConn, n: int):
    cmds = [("SET", "k:%d" % i, "v" * 20) for i in range(n)]
    c.send_many(cmds)
    for r in c.read_replies(len(cmds), timeout=60):
        assert not r.is_error


def test_sigterm_during_a_bgsave_stops_it_removes_its_temp_file_and_saves():
    d = tempfile.mkdtemp(prefix="darner-sigterm-bg-")
    try:
        srv = start_darner(["--dir", d, "--save", "3600", "1"], threads=1)
        with srv.raw() as c:
            fill(c, 200_000)
            want = digest(c)
            # The signal arrives while the save writes (one pipeline read: the BGSAVE's cut
            # is made, then the test sends the signal as soon as the reply is in).
            assert c.call("BGSAVE").raw == b"+Background saving started\r\n"
            srv.proc.send_signal(signal.SIGTERM)
        assert srv.wait_exit(30) == 0
        assert sorted(os.listdir(d)) == ["dump.rdb"]  # no temp-bg-<pid>.rdb left
        log = open(srv.log_path).read()
        assert "Saving the final RDB snapshot before exiting." in log
        srv.stop()
        srv = start_darner(["--dir", d])
        with srv.raw() as c:
            assert digest(c) == want
        srv.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---- FLUSHALL ----

def test_flushall_with_save_points_saves_the_empty_dataset():
    d = tempfile.mkdtemp(prefix="darner-flushall-")
    try:
        srv = start_darner(["--dir", d, "--save", "3600", "1"])
        with srv.raw() as c:
            write_some(c)
            assert c.call("SAVE").raw == b"+OK\r\n"
            c.call("SET", "more", "x")
            before = info_fields(c)
            assert before["rdb_changes_since_last_save"] == "1"
            assert c.call("FLUSHALL").raw == b"+OK\r\n"
            f = info_fields(c)
            # Redis 7.2: rdbSave sets server.dirty to 0 after the flush counted its keys.
            assert f["rdb_changes_since_last_save"] == "0"
            assert f["rdb_saves"] == before["rdb_saves"]  # FLUSHALL's save is not counted
        srv.proc.send_signal(signal.SIGKILL)
        srv.wait_exit(10)
        srv.stop()
        srv = start_darner(["--dir", d])
        with srv.raw() as c:
            assert c.call("DBSIZE").py() == 0
            assert c.call("INFO", "keyspace").py().strip().endswith(b"# Keyspace")
        srv.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_flushall_changes_since_last_save_as_redis_with_save_points():
    srv = start_darner(["--save", "3600", "1"])
    ref = start_redis(["--save", "3600", "1"])
    try:
        for s in (srv, ref):
            with s.raw() as c:
                c.call("SET", "a", "1")
                c.call("SET", "b", "1")
                assert c.call("FLUSHALL").raw == b"+OK\r\n"
                assert info_fields(c)["rdb_changes_since_last_save"] == "0", s
                c.call("SET", "c", "1")
                assert info_fields(c)["rdb_changes_since_last_save"] == "1", s
                c.call("CONFIG", "SET", "save", "")
    finally:
        srv.stop()
        ref.stop()


def test_flushall_stops_a_bgsave_in_progress():
    srv = start_darner(["--save", ""], threads=1)
    try:
        with srv.raw() as c:
            fill(c, 200_000)
            c.send_many([("BGSAVE",), ("FLUSHALL",)])
            got = [r.raw for r in c.read_replies(2, timeout=60)]
            assert got == [b"+Background saving started\r\n", b"+OK\r\n"]
            f = wait_bgsave_done(c)
            assert f["rdb_last_bgsave_status"] == "ok"  # stopped is not failed (Redis's SIGUSR1)
            assert c.call("SET", "after", "1").raw == b"+OK\r\n"
        # Neither the file nor its temporary one.
        assert not [n for n in os.listdir(srv.workdir) if n.endswith(".rdb")]
        assert "Background saving terminated with success" not in open(srv.log_path).read()
    finally:
        srv.stop()


# ---- MISCONF ----

MISCONF = (b"-MISCONF Redis is configured to save RDB snapshots, but it's currently unable to "
           b"persist to disk. Commands that may modify the data set are disabled, because this "
           b"instance is configured to report errors during writes if RDB snapshotting fails "
           b"(stop-writes-on-bgsave-error option). Please check the Redis logs for details about "
           b"the RDB error.\r\n")

MISCONF_STEPS = [
    ("SET", "a", "2"), ("PING",), ("ECHO", "x"), ("GET", "a"), ("INCR", "n"), ("DEL", "a"),
    ("PUBLISH", "c", "m"), ("EXISTS", "a"),
    ("MULTI",), ("SET", "b", "1"), ("GET", "a"), ("EXEC",),
    ("MULTI",), ("GET", "a"), ("EXEC",),
    ("EVAL", "return redis.pcall('set', 'x', 1)['err']", "0"),
    ("EVAL", "return redis.call('get', 'a')", "0"),
    ("EVAL", "#!lua\nreturn 1", "0"),
    ("EVAL", "#!lua flags=no-writes\nreturn redis.call('get', 'a')", "0"),
    ("FLUSHALL",),
    ("CONFIG", "SET", "stop-writes-on-bgsave-error", "no"), ("SET", "a", "3"), ("PING",),
    ("CONFIG", "SET", "stop-writes-on-bgsave-error", "yes"), ("SET", "a", "4"),
    ("CONFIG", "SET", "save", ""), ("SET", "a", "5"), ("PING",),
    ("CONFIG", "SET", "save", "3600 1"), ("SET", "a", "6"), ("GET", "a"),
]


def test_misconf_after_a_failed_bgsave_as_redis_until_a_save_succeeds():
    srv = start_darner(["--save", "3600", "1"])
    ref = start_redis(["--save", "3600", "1"])
    try:
        replies = []
        for s in (srv, ref):
            with s.raw() as c:
                assert c.call("SET", "a", "1").raw == b"+OK\r\n"
                blocker = os.path.join(s.workdir, "dump.rdb")
                os.mkdir(blocker)  # the BGSAVE's rename fails
                assert c.call("BGSAVE").raw == b"+Background saving started\r\n"
                assert wait_bgsave_done(c)["rdb_last_bgsave_status"] == "err", s
                got = [c.call(*cmd).raw for cmd in MISCONF_STEPS]
                replies.append(got)
                assert c.call("SET", "a", "7").raw == MISCONF
                assert c.call("GET", "a").raw == b"$1\r\n5\r\n"  # reads still work
                # A successful save clears it.
                os.rmdir(blocker)
                assert c.call("BGSAVE").raw == b"+Background saving started\r\n"
                assert wait_bgsave_done(c)["rdb_last_bgsave_status"] == "ok"
                assert c.call("SET", "a", "8").raw == b"+OK\r\n"
                assert c.call("PING").raw == b"+PONG\r\n"
                c.call("CONFIG", "SET", "save", "")
        dg, rg = replies
        assert dg == rg, [(cmd, d, r) for cmd, d, r in zip(MISCONF_STEPS, dg, rg) if d != r]
        assert dg[0] == MISCONF and dg[1] == MISCONF
        assert dg[2] == b"$1\r\nx\r\n"
    finally:
        srv.stop()
        ref.stop()


def test_misconf_is_cleared_by_a_successful_save_command():
    srv = start_darner(["--save", "3600", "1"])
    try:
        with srv.raw() as c:
            blocker = os.path.join(srv.workdir, "dump.rdb")
            os.mkdir(blocker)
            c.call("BGSAVE")
            assert wait_bgsave_done(c)["rdb_last_bgsave_status"] == "err"
            assert c.call("SET", "a", "1").raw == MISCONF
            assert c.call("SAVE").raw == b"-ERR\r\n"  # SAVE fails too, status stays err
            assert c.call("SET", "a", "1").raw == MISCONF
            os.rmdir(blocker)
            assert c.call("SAVE").raw == b"+OK\r\n"
            assert info_fields(c)["rdb_last_bgsave_status"] == "ok"
            assert c.call("SET", "a", "1").raw == b"+OK\r\n"
    finally:
        srv.stop()
