"""A script past busy-reply-threshold, as Redis 7.2 handles one: the thread that runs it keeps
serving its other connections (-BUSY for most commands; SCRIPT KILL, FUNCTION KILL, FUNCTION
STATS and SHUTDOWN NOSAVE work), with one thread or several. Each scenario runs against Darner
and against a redis-server started with the same threshold, and the replies are compared.

A script that loops without calling a command never suspends on its own; before Darner served
the script's own thread, every connection of that thread went unanswered (with --threads 1,
all of them), so these tests time out there.
"""

import signal
import time

import pytest

import harness
from resp_reader import ConnectionClosed

THRESHOLD_MS = 100
LOOP = "while true do end"
WRITE_LOOP = "redis.call('SET', KEYS[1], 'v') while true do end"
LIBRARY = "#!lua name=busylib\nredis.register_function('spin', function() while true do end end)"


@pytest.fixture
def reference():
    """A redis-server with the same busy-reply-threshold, stopped at the end of the test."""
    try:
        srv = harness.start_reference(["--busy-reply-threshold", str(THRESHOLD_MS)])
    except harness.HarnessError as e:
        pytest.fail(str(e), pytrace=False)
    try:
        yield srv
    finally:
        srv.stop()


def _darner(darner_factory, threads, threshold=THRESHOLD_MS):
    return darner_factory("--busy-reply-threshold", threshold, threads=threads)


def _send(srv, *cmd):
    """A new connection that sent `cmd` (its reply is read later)."""
    c = srv.raw(timeout=30)
    c.send(*cmd)
    return c


def _wait_busy(c, deadline):
    """Polls with GET until the script is busy: returns the -BUSY reply."""
    while True:
        r = c.call("GET", "probe", timeout=10)
        if r.is_error:
            return r.raw
        assert time.monotonic() < deadline, "the script never became busy"
        time.sleep(0.01)


def _busy_eval(srv):
    """A looping EVAL: what another connection gets meanwhile, and how SCRIPT KILL ends it."""
    looping = _send(srv, "EVAL", LOOP, "0")
    other = srv.raw(timeout=10)
    seen = [_wait_busy(other, time.monotonic() + 20)]
    for cmd in [
        ("PING",),
        # The script's engine is in use: these must not reach it.
        ("SCRIPT", "LOAD", "return 1"),
        ("EVAL", "return 1", "0"),
        ("FCALL", "nosuchfunction", "0"),
        ("FUNCTION", "STATS"),
        ("FUNCTION", "KILL"),
        ("SHUTDOWN",),
        ("SCRIPT", "KILL"),
    ]:
        seen.append(other.call(*cmd).raw)
    seen.append(looping.read_reply(timeout=20).raw)
    seen.append(other.call("PING").raw)
    seen.append(looping.call("EVAL", "return 'served'", "0").raw)
    seen.append(other.call("SCRIPT", "KILL").raw)
    return seen


def _busy_function(srv):
    """A looping FCALL: FUNCTION STATS names it, SCRIPT KILL is refused, FUNCTION KILL ends it."""
    admin = srv.raw(timeout=10)
    assert admin.call("FUNCTION", "LOAD", "REPLACE", LIBRARY).raw == b"$7\r\nbusylib\r\n"
    looping = _send(srv, "FCALL", "spin", "0")
    other = srv.raw(timeout=10)
    seen = [_wait_busy(other, time.monotonic() + 20)]
    stats = other.call("FUNCTION", "STATS").py()
    running = dict(zip(stats[1][::2], stats[1][1::2]))
    # How long it has run: at least the threshold, the rest is timing.
    assert running.pop(b"duration_ms") >= THRESHOLD_MS
    seen.append((stats[0], running, stats[2:]))
    for cmd in [("SCRIPT", "KILL"), ("SHUTDOWN",), ("FUNCTION", "KILL")]:
        seen.append(other.call(*cmd).raw)
    seen.append(looping.read_reply(timeout=20).raw)
    seen.append(other.call("FUNCTION", "STATS").raw)
    seen.append(other.call("FUNCTION", "KILL").raw)
    return seen


def _busy_writer_shut_down(srv):
    """A looping script that wrote: it cannot be killed; SHUTDOWN NOSAVE stops the server."""
    looping = _send(srv, "EVAL", WRITE_LOOP, "1", "k")
    other = srv.raw(timeout=10)
    seen = [_wait_busy(other, time.monotonic() + 20)]
    for cmd in [("SCRIPT", "KILL"), ("FUNCTION", "KILL"), ("SHUTDOWN",), ("SHUTDOWN", "SAVE")]:
        seen.append(other.call(*cmd).raw)
    other.send("SHUTDOWN", "NOSAVE")
    seen.append(other.wait_closed(timeout=10))
    seen.append(looping.wait_closed(timeout=10))
    seen.append(srv.wait_exit(timeout=10))
    return seen


def test_a_looping_script_on_a_single_thread_gets_others_busy_and_script_kill(
        darner_factory, reference):
    srv = _darner(darner_factory, threads=1)
    assert _busy_eval(srv) == _busy_eval(reference)


def test_a_looping_function_on_a_single_thread_shows_in_stats_and_dies_by_function_kill(
        darner_factory, reference):
    srv = _darner(darner_factory, threads=1)
    assert _busy_function(srv) == _busy_function(reference)


def test_a_script_that_wrote_is_unkillable_and_shutdown_nosave_stops_the_server(
        darner_factory, reference):
    srv = _darner(darner_factory, threads=1)
    got = _busy_writer_shut_down(srv)
    assert got == _busy_writer_shut_down(reference)
    assert got[-1] == 0


def _split_by_thread(srv, deadline):
    """With the script running but not yet busy (a high threshold): connections of its thread
    (their PING unanswered, the thread is in the script) and of the other thread (answered).
    A connection of the other thread answering late would only be counted with the first."""
    stuck, free = [], []
    while not (stuck and free):
        assert time.monotonic() < deadline and len(stuck) + len(free) < 200, \
            "no connection found on both threads"
        c = srv.raw(timeout=10)
        c.send("PING")
        if c.pending(0.3) == b"+PONG\r\n":
            # Answered before the script started, possibly by its thread: counted only once
            # a connection has been found stuck.
            if stuck:
                free.append(c)
        else:
            stuck.append(c)
    return stuck, free


def _make_busy(srv, stuck, free):
    """Lowers the threshold under the running script: its own thread starts serving."""
    assert free[0].call("CONFIG", "SET", "busy-reply-threshold", str(THRESHOLD_MS)).raw == b"+OK\r\n"
    busy = b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
    # The PINGs the script's thread had not answered are answered now: -BUSY, or PONG for one
    # it ran in the turn that started the script (the reply waited in its output since).
    for c in stuck:
        assert c.read_reply(timeout=20).raw in (busy, b"+PONG\r\n")
    for c in stuck + free:
        assert c.call("PING").raw == busy


def test_a_looping_script_serves_the_connections_of_its_own_thread_and_the_other(darner_factory):
    srv = _darner(darner_factory, threads=2, threshold=60000)
    looping = _send(srv, "EVAL", LOOP, "0")
    stuck, free = _split_by_thread(srv, time.monotonic() + 20)
    _make_busy(srv, stuck, free)
    # Killed from the script's own thread.
    assert stuck[0].call("SCRIPT", "KILL").raw == b"+OK\r\n"
    reply = looping.read_reply(timeout=20).raw
    assert reply.startswith(b"-ERR Script killed by user with SCRIPT KILL... script: "), reply
    for c in stuck + free + [looping]:
        assert c.call("PING").raw == b"+PONG\r\n"


@pytest.mark.parametrize("from_its_thread", [True, False])
def test_shutdown_nosave_under_a_busy_script_from_either_thread(darner_factory, from_its_thread):
    srv = _darner(darner_factory, threads=2, threshold=60000)
    looping = _send(srv, "EVAL", WRITE_LOOP, "1", "k")
    stuck, free = _split_by_thread(srv, time.monotonic() + 20)
    _make_busy(srv, stuck, free)
    killer = stuck[0] if from_its_thread else free[0]
    assert killer.call("SCRIPT", "KILL").raw.startswith(b"-UNKILLABLE ")
    killer.send("SHUTDOWN", "NOSAVE")
    for c in stuck + free + [looping]:
        try:
            c.wait_closed(timeout=10)
        except ConnectionClosed:
            pass
    assert srv.wait_exit(timeout=10) == 0


@pytest.mark.darner_only
def test_sigterm_under_a_busy_script_stops_the_server(darner_factory):
    # Redis defers a SIGTERM until the script ends; Darner stops as for SHUTDOWN NOSAVE
    # (docs/compatibility.md).
    srv = _darner(darner_factory, threads=1)
    looping = _send(srv, "EVAL", WRITE_LOOP, "1", "k")
    _wait_busy(srv.raw(timeout=10), time.monotonic() + 20)
    srv.proc.send_signal(signal.SIGTERM)
    assert looping.wait_closed(timeout=10) == b""
    assert srv.wait_exit(timeout=10) == 0
