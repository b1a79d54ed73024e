"""Wire-protocol tests over raw sockets: inline commands, protocol errors,
limits (proto-max-bulk-len, client-query-buffer-limit, maxclients, timeout),
AUTH, startup refusal and config files.

Tests taking a `target` run against darner AND the reference redis-server,
so the expected bytes written here are checked against real Redis on every
run."""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest

import harness
from differential import T, X
from resp_reader import ConnectionClosed, RawConn, encode_command


@pytest.fixture(params=["darner", "redis_ref"])
def target(request):
    return request.getfixturevalue(request.param)


def transcript_until_close(srv, data: bytes, timeout=5.0) -> bytes:
    """Send data, return every byte received until the server closes."""
    with srv.raw(timeout=timeout) as c:
        try:
            c.send_raw(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        return c.wait_closed(timeout)


def assert_server_alive(srv):
    with srv.raw(timeout=5) as c:
        assert c.call("PING").raw == b"+PONG\r\n"


# ---------------------------------------------------------------------------
# inline protocol
# ---------------------------------------------------------------------------

def test_inline_ping(target):
    with target.raw() as c:
        assert c.call_raw(b"PING\r\n").raw == b"+PONG\r\n"
        assert c.call_raw(b"ping\n").raw == b"+PONG\r\n"


def test_inline_quoted_args(target):
    with target.raw() as c:
        c.call("DEL", "a")
        assert c.call_raw(b'set a "b c"\r\n').raw == b"+OK\r\n"
        assert c.call("GET", "a").raw == b"$3\r\nb c\r\n"
        assert c.call_raw(b"set a 'x \"y\" z'\r\n").raw == b"+OK\r\n"
        assert c.call("GET", "a").raw == b'$7\r\nx "y" z\r\n'
        assert c.call_raw(b'set a "\\x00\\xff\\r\\n"\r\n').raw == b"+OK\r\n"
        assert c.call("GET", "a").raw == b"$4\r\n\x00\xff\r\n\r\n"
        assert c.call_raw(b"echo   many    spaces  \r\n").raw == b"-ERR wrong number of arguments for 'echo' command\r\n"
        assert c.call_raw(b"echo 'many    spaces'\r\n").raw == b"$14\r\nmany    spaces\r\n"


def test_dollar_at_top_level_is_inline(target):
    """A first byte other than '*' means inline: "$3" is a command name."""
    with target.raw() as c:
        rep = c.call_raw(b"$3\r\n")
        assert rep.raw == b"-ERR unknown command '$3', with args beginning with: \r\n"
        assert c.call("PING").raw == b"+PONG\r\n"


def test_pipelined_quit_stops_processing(target):
    with target.raw() as c:
        c.send_raw(b"PING\r\nQUIT\r\nPING\r\n")
        got = c.wait_closed(3)
        assert got == b"+PONG\r\n+OK\r\n"


def test_empty_multibulk_ignored(target):
    with target.raw() as c:
        assert c.call_raw(b"*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n").raw == b"+PONG\r\n"


def test_bulk_crlf_not_validated_like_redis(target):
    """Redis skips the two bytes after a bulk payload without checking them."""
    with target.raw() as c:
        c.send_raw(b"*1\r\n$4\r\nPINGxx*1\r\n$4\r\nPING\r\n")
        assert [r.raw for r in c.read_replies(2)] == [b"+PONG\r\n", b"+PONG\r\n"]


# ---------------------------------------------------------------------------
# protocol errors: exact text, then the connection is closed
# ---------------------------------------------------------------------------

PROTOCOL_ERRORS = {
    "invalid_bulk_length": (b"*1\r\n$abc\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
    "negative_bulk_length": (b"*1\r\n$-1\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
    "bulk_over_512mb": (b"*1\r\n$536870913\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
    "invalid_multibulk_length": (b"*abc\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
    "multibulk_length_over_int_max": (b"*2147483648\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
    "expected_dollar": (b"*1\r\nfoo\r\n", b"-ERR Protocol error: expected '$', got 'f'\r\n"),
    "expected_dollar_colon": (b"*2\r\n$3\r\nGET\r\n:1\r\n", b"-ERR Protocol error: expected '$', got ':'\r\n"),
    "unbalanced_quotes": (b'set a "b\r\n', b"-ERR Protocol error: unbalanced quotes in request\r\n"),
    "unbalanced_single_quotes": (b"set a 'b\r\n", b"-ERR Protocol error: unbalanced quotes in request\r\n"),
    "closing_quote_not_followed_by_space": (b'set a "b"c\r\n', b"-ERR Protocol error: unbalanced quotes in request\r\n"),
    "too_big_inline": (b"x" * (70 * 1024), b"-ERR Protocol error: too big inline request\r\n"),
    "too_big_mbulk_count": (b"*" + b"1" * (70 * 1024), b"-ERR Protocol error: too big mbulk count string\r\n"),
    "too_big_bulk_count": (b"*1\r\n$" + b"1" * (70 * 1024), b"-ERR Protocol error: too big bulk count string\r\n"),
    "valid_then_error": (b"*1\r\n$4\r\nPING\r\n*1\r\n$x\r\n", b"+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"),
}


@pytest.mark.parametrize("case", list(PROTOCOL_ERRORS))
def test_protocol_error_closes_connection(case, target):
    data, expected = PROTOCOL_ERRORS[case]
    got = transcript_until_close(target, data)
    assert got == expected
    assert_server_alive(target)


def test_protocol_error_other_connections_unaffected(darner):
    with darner.raw() as good:
        assert good.call("SET", "survivor", "1").raw == b"+OK\r\n"
        assert transcript_until_close(darner, b"*1\r\n$abc\r\n") == b"-ERR Protocol error: invalid bulk length\r\n"
        assert good.call("GET", "survivor").raw == b"$1\r\n1\r\n"


def test_proto_max_bulk_len(darner_factory):
    srv = darner_factory("--proto-max-bulk-len", "1mb")
    got = transcript_until_close(srv, b"*2\r\n$4\r\nECHO\r\n$2000000\r\n")
    assert got == b"-ERR Protocol error: invalid bulk length\r\n"
    with srv.raw() as c:  # at the limit is fine
        v = b"y" * (1024 * 1024)
        assert c.call("SET", "k", v).raw == b"+OK\r\n"
        assert c.call("STRLEN", "k").raw == b":1048576\r\n"
        assert c.call("APPEND", "k", "z").raw == b"-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n"
        assert c.call("SETRANGE", "k", "1048576", "z").raw == \
            b"-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n"
    assert_server_alive(srv)


def test_client_query_buffer_limit(darner_factory):
    srv = darner_factory("--client-query-buffer-limit", "1mb")
    with srv.raw(timeout=10) as c:
        c.send_raw(b"*2\r\n$4\r\nECHO\r\n$3000000\r\n")
        sent = 0
        chunk = b"x" * 65536
        try:
            while sent < 2 * 1024 * 1024:
                c.send_raw(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        got = c.wait_closed(5)
        assert b"+" not in got[:1] and b"$3000000" not in got, got[:100]
    assert_server_alive(srv)
    with srv.raw() as c:  # normal big requests below the limit still work
        assert c.call("ECHO", b"z" * 500000).value == b"z" * 500000


def _qbuf(admin, client_id):
    line = admin.call("CLIENT", "LIST", "ID", str(client_id)).value
    if isinstance(line, bytes):
        line = line.decode()
    fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
    return int(fields["qbuf"])


def test_query_buffer_limit_crossed_by_the_last_read(darner_factory):
    """The read that takes the query buffer past client-query-buffer-limit closes the
    connection even when the client sends nothing after it (edge-triggered readiness gives
    no later turn to notice it)."""
    limit = 1024 * 1024
    srv = darner_factory("--client-query-buffer-limit", "1mb")
    head = b"*2\r\n$4\r\nECHO\r\n$3000000\r\n"
    with srv.raw(timeout=10) as c, srv.raw() as admin:
        cid = c.call("CLIENT", "ID").value
        first = limit - 1000
        c.send_raw(head + b"x" * (first - len(head)))
        # Wait until the server has read all of it (still under the limit)...
        deadline = time.monotonic() + 10
        while _qbuf(admin, cid) < first - len(head):
            assert time.monotonic() < deadline, "the server did not read the request"
            time.sleep(0.01)
        # ... then cross the limit with one small write, the last one.
        c.send_raw(b"x" * 2000)
        got = c.wait_closed(5)
        assert got == b"", got[:100]
    assert_server_alive(srv)


def test_unauthenticated_limits(darner_factory):
    """Unauthenticated clients may not send big multibulk/bulk headers (Redis 7)."""
    srv = darner_factory("--requirepass", "secret")
    got = transcript_until_close(srv, b"*20\r\n")
    assert got == b"-ERR Protocol error: unauthenticated multibulk length\r\n"
    got = transcript_until_close(srv, b"*2\r\n$4\r\nAUTH\r\n$20000\r\n")
    assert got == b"-ERR Protocol error: unauthenticated bulk length\r\n"


# ---------------------------------------------------------------------------
# maxclients, timeout, AUTH
# ---------------------------------------------------------------------------

def _connect_ok(srv, attempts=30):
    for _ in range(attempts):
        c = srv.raw(timeout=5)
        try:
            r = c.call("PING")
        except ConnectionClosed:
            r = None
        if r is not None and r.raw == b"+PONG\r\n":
            return c
        c.close()
        time.sleep(0.1)  # a previous connection may not be released yet
    raise AssertionError("could not get a working connection")


def test_maxclients(darner_factory):
    srv = darner_factory("--maxclients", "2")
    c1 = _connect_ok(srv)
    c2 = _connect_ok(srv)
    try:
        with srv.raw() as c3:
            got = c3.wait_closed(5)
            assert got == b"-ERR max number of clients reached\r\n"
        assert c1.call("PING").raw == b"+PONG\r\n"
        c1.close()
        c4 = _connect_ok(srv)  # a slot was freed
        c4.close()
    finally:
        c1.close()
        c2.close()


def test_idle_timeout_closes_client(darner_factory):
    srv = darner_factory("--timeout", "1")
    with srv.raw() as c:
        assert c.call("PING").raw == b"+PONG\r\n"
        t0 = time.monotonic()
        c.wait_closed(6)
        assert time.monotonic() - t0 >= 0.9


def test_requirepass(darner_factory):
    srv = darner_factory("--requirepass", "secret")
    with srv.raw() as c:
        assert c.call("GET", "a").raw == b"-NOAUTH Authentication required.\r\n"
        assert c.call("PING").raw == b"-NOAUTH Authentication required.\r\n"
        assert c.call("AUTH", "wrong").raw == b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
        assert c.call("AUTH", "default", "wrong").raw == \
            b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
        assert c.call("AUTH", "nosuchuser", "secret").raw == \
            b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
        assert c.call("SET", "a", "1").raw == b"-NOAUTH Authentication required.\r\n"
        assert c.call("AUTH", "secret").raw == b"+OK\r\n"
        assert c.call("SET", "a", "1").raw == b"+OK\r\n"
        assert c.call("GET", "a").raw == b"$1\r\n1\r\n"
    with srv.raw() as c:
        assert c.call("HELLO", "3").raw.startswith(b"-NOAUTH HELLO must be called with the client already authenticated")
        rep = c.call("HELLO", "3", "AUTH", "default", "secret")
        assert rep.kind == "%"
        assert c.call("GET", "a").raw == b"$1\r\n1\r\n"
        assert c.call("RESET").raw == b"+RESET\r\n"
        assert c.call("GET", "a").raw == b"-NOAUTH Authentication required.\r\n"
    with srv.raw() as c:
        assert c.call("AUTH", "default", "secret").raw == b"+OK\r\n"
        assert c.call("QUIT").raw == b"+OK\r\n"


def test_requirepass_matches_reference(darner_factory):
    """Whole unauthenticated/authenticated stream compared with a redis-server
    started with the same requirepass."""
    srv = darner_factory("--requirepass", "secret")
    ref = harness.start_reference(["--requirepass", "secret"])
    # redis 7.2 (redis#11809) added "<proto>" to this message; Debian's 7.0 lacks it
    hello_noauth = ("HELLO", "3") if darner_factory.is_redis else X(
        b"-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH "
        b"<user> <pass> option can be used to authenticate the client and select the RESP protocol version at the "
        b"same time\r\n", "HELLO", "3")
    try:
        steps = [("GET", "a"), ("NOSUCH", "x"), ("GET",), ("ECHO", "x"),
                 ("AUTH", "wrong"), ("AUTH",), ("AUTH", "a", "b", "c"), hello_noauth, ("HELLO", "3", "AUTH", "default", "x"),
                 ("CLIENT", "SETNAME", "x"), ("MULTI",), ("AUTH", "secret"), ("SET", "a", "1"), ("GET", "a"),
                 ("AUTH", "wrong"), ("GET", "a"), ("AUTH", "default", "secret"), ("MULTI",), ("AUTH", "secret"),
                 ("EXEC",), T("HELLO", "3", "AUTH", "default", "secret"), ("GET", "a")]
        mm = run_scenario_noflush(srv, ref, steps)
        assert not mm, "\n".join(str(m) for m in mm)
    finally:
        ref.stop()


def run_scenario_noflush(srv, ref, steps):
    from differential import Cmd, compare, fmt_args, fmt_reply, Mismatch
    out = []
    with srv.raw() as d, ref.raw() as f:
        for i, s in enumerate(steps):
            s = s if isinstance(s, Cmd) else Cmd(s)
            d.send(*s.args)
            f.send(*s.args)
            fr = f.read_reply()
            try:
                dr = d.read_reply()
            except Exception as e:  # noqa
                out.append(Mismatch(i, fmt_args(s.args), fmt_reply(e), fmt_reply(fr), "no reply"))
                break
            why = compare(s, dr, fr, 2)
            if why:
                out.append(Mismatch(i, fmt_args(s.args), fmt_reply(dr), fmt_reply(fr), why))
    return out


# ---------------------------------------------------------------------------
# output buffering, many connections, abrupt disconnects
# ---------------------------------------------------------------------------

def test_slow_reader_gets_everything(darner):
    with darner.raw(timeout=30) as c:
        c.call("SET", "big", b"v" * 100000)
        n = 200
        c.send_many([["GET", "big"]] * n)
        time.sleep(0.5)  # let the server hit a full socket buffer
        reps = c.read_replies(n, timeout=30)
        assert all(r.value == b"v" * 100000 for r in reps)


def test_many_concurrent_connections(darner):
    conns = []
    try:
        for i in range(200):
            conns.append(darner.raw(timeout=10))
        for i, c in enumerate(conns):
            c.send("ECHO", "conn-%d" % i)
        for i, c in enumerate(conns):
            assert c.read_reply().value == b"conn-%d" % i
    finally:
        for c in conns:
            c.close()


def test_abrupt_disconnects_mid_command(darner):
    for i in range(50):
        s = socket.create_connection(("127.0.0.1", darner.port))
        s.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100\r\nabc")
        if i % 2:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST
        s.close()
    with darner.raw() as c:
        assert c.call("PING").raw == b"+PONG\r\n"


def test_large_argument_in_small_chunks(darner):
    payload = os.urandom(3 * 1024 * 1024)
    data = encode_command(["SET", "chunked", payload])
    with darner.raw(timeout=30) as c:
        for i in range(0, len(data), 8191):
            c.send_raw(data[i:i + 8191])
        assert c.read_reply().raw == b"+OK\r\n"
        assert c.call("GET", "chunked").value == payload


# ---------------------------------------------------------------------------
# startup: refusal of unknown / unsupported directives, config files
# ---------------------------------------------------------------------------

def _refusal(darner_factory, *args):
    port = harness.free_port()
    rc, out = darner_factory.run_to_exit(["--port", port, "--bind", "127.0.0.1"] + list(args), timeout=10)
    return rc, out


@pytest.mark.parametrize("args,word", [
    (["--nosuchdirective", "1"], "nosuchdirective"),
    (["--port", "notaport"], "port"),
    (["--databases", "abc"], "databases"),
])
def test_startup_refuses_bad_config(darner_factory, args, word):
    rc, out = _refusal(darner_factory, *args)
    assert rc is not None, "server did not exit (still running after 10s) for %s; output:\n%s" % (args, out)
    assert rc != 0, "exit code 0 for %s" % args
    assert word in out.lower(), "refusal message does not name %r:\n%s" % (word, out)


@pytest.mark.darner_only
@pytest.mark.parametrize("args,word", [
    (["--cluster-enabled", "yes"], "cluster-enabled"),
    (["--save", "900"], "invalid save parameters"),
    (["--save", "0", "1"], "invalid save parameters"),
    (["--maxmemory", "1x"], "maxmemory"),
    (["--threads", "0"], "threads"),
    (["--threads", "abc"], "threads"),
])
def test_startup_refuses_unsupported_features(darner_factory, args, word):
    rc, out = _refusal(darner_factory, *args)
    assert rc is not None, "server did not exit (still running after 10s) for %s; output:\n%s" % (args, out)
    assert rc != 0
    assert word in out.lower(), "refusal message does not name %r:\n%s" % (word, out)


def _write_conf(tmp_path, text):
    p = tmp_path / "darner.conf"
    p.write_text(text)
    return str(p)


def test_config_file_loading(darner_factory, tmp_path):
    port = harness.free_port()
    conf = _write_conf(tmp_path, "# a comment\n\nport %d\nbind 127.0.0.1\ndatabases 4\n"
                       "requirepass \"pa ss\"\nslowlog-max-len 7\n" % port)
    srv = darner_factory.server(threads=1, config_file=conf, port=port, add_port=False, auth="pa ss")
    srv.start()
    assert srv.port == port
    with srv.raw() as c:
        assert c.call("AUTH", "pa ss").raw == b"+OK\r\n"
        assert c.call("SELECT", "3").raw == b"+OK\r\n"
        assert c.call("SELECT", "4").raw == b"-ERR DB index is out of range\r\n"
        assert c.call("CONFIG", "GET", "slowlog-max-len").py() == [b"slowlog-max-len", b"7"]
        assert c.call("CONFIG", "GET", "port").py() == [b"port", str(port).encode()]


def test_command_line_overrides_config_file(darner_factory, tmp_path):
    file_port = harness.free_port()
    cli_port = harness.free_port()
    conf = _write_conf(tmp_path, "port %d\nbind 127.0.0.1\nhz 15\ndatabases 8\n" % file_port)
    srv = darner_factory.server("--port", cli_port, "--databases", "2", threads=1, config_file=conf,
                                port=cli_port, add_port=False)
    srv.start()
    with srv.raw() as c:
        assert c.call("CONFIG", "GET", "port").py() == [b"port", str(cli_port).encode()]
        assert c.call("CONFIG", "GET", "hz").py() == [b"hz", b"15"]
        assert c.call("SELECT", "2").raw == b"-ERR DB index is out of range\r\n"
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", file_port), timeout=1).close()


def test_config_file_with_unknown_directive_refused(darner_factory, tmp_path):
    conf = _write_conf(tmp_path, "port %d\nbind 127.0.0.1\nfrobnicate yes\n" % harness.free_port())
    rc, out = darner_factory.run_to_exit([conf], timeout=10)
    assert rc not in (None, 0), "rc=%r output:\n%s" % (rc, out)
    assert "frobnicate" in out.lower(), out


def test_missing_config_file_refused(darner_factory, tmp_path):
    rc, out = darner_factory.run_to_exit([str(tmp_path / "nope.conf"), "--port", harness.free_port()], timeout=10)
    assert rc not in (None, 0), "rc=%r output:\n%s" % (rc, out)


@pytest.mark.parametrize("threads", [1, 4])
def test_thread_counts_serve_correctly(darner_factory, threads):
    srv = darner_factory(threads=threads)
    with srv.raw() as c:
        c.send_many([["SET", "k%d" % i, i] for i in range(1000)])
        assert all(r.raw == b"+OK\r\n" for r in c.read_replies(1000))
        assert c.call("DBSIZE").raw == b":1000\r\n"
        rep = c.call("MGET", *["k%d" % i for i in range(1000)])
        assert [x.value for x in rep.value] == [str(i).encode() for i in range(1000)]
        assert c.call("KEYS", "*").value is not None and len(c.call("KEYS", "*").value) == 1000


def test_config_rewrite_updates_file(darner_factory, tmp_path):
    port = harness.free_port()
    conf = _write_conf(tmp_path, "# keep this comment\nport %d\nbind 127.0.0.1\nhz 15\n" % port)
    srv = darner_factory.server(threads=1, config_file=conf, port=port, add_port=False)
    srv.start()
    with srv.raw() as c:
        assert c.call("CONFIG", "SET", "hz", "33").raw == b"+OK\r\n"
        assert c.call("CONFIG", "SET", "slowlog-max-len", "99").raw == b"+OK\r\n"
        assert c.call("CONFIG", "REWRITE").raw == b"+OK\r\n"
    text = open(conf).read()
    import re
    assert re.search(r"^hz 33$", text, re.M), text
    assert re.search(r"^slowlog-max-len 99$", text, re.M), text
    assert re.search(r"^port %d$" % port, text, re.M), text
    assert "# keep this comment" in text
    assert not re.search(r"^hz 15$", text, re.M), text


def test_config_rewrite_of_a_promoted_replica_drops_its_replicaof_line(darner_factory, tmp_path):
    # What Sentinel does to a replica it repointed (REPLICAOF; CONFIG REWRITE) and then
    # promoted (REPLICAOF NO ONE; CONFIG REWRITE): the file must start a primary again. The
    # primary named is a port nobody listens on (a dead primary, as in a failover).
    port, dead = harness.free_port(), harness.free_port()
    conf = _write_conf(tmp_path, "port %d\nbind 127.0.0.1\nreplicaof 127.0.0.1 %d\n"
                       % (port, dead))
    srv = darner_factory.server(threads=1, config_file=conf, port=port, add_port=False)
    srv.start()
    with srv.raw() as c:
        assert c.call("ROLE").value[0].value == b"slave"
        assert c.call("REPLICAOF", "NO", "ONE").raw == b"+OK\r\n"
        assert c.call("CONFIG", "REWRITE").raw == b"+OK\r\n"
    text = open(conf).read()
    assert "replicaof" not in text, text
    srv.stop(cleanup=False)
    srv.start()
    with srv.raw() as c:
        assert c.call("ROLE").value[0].value == b"master"


def test_logfile_and_loglevel(darner_factory, tmp_path):
    logfile = tmp_path / "server.log"
    srv = darner_factory("--logfile", str(logfile), "--loglevel", "verbose", threads=1)
    with srv.raw() as c:
        assert c.call("CONFIG", "GET", "loglevel").py() == [b"loglevel", b"verbose"]
        assert c.call("CONFIG", "GET", "logfile").py() == [b"logfile", str(logfile).encode()]
    assert logfile.exists() and logfile.stat().st_size > 0


def test_disconnect_with_pending_multishard_replies(darner):
    with darner.raw() as c:
        assert c.call("FLUSHALL").raw == b"+OK\r\n"
        c.send_many([["SET", "pend:%d" % i, "x" * 100] for i in range(3000)])
        c.read_replies(3000)
    keys = ["pend:%d" % i for i in range(3000)]
    for i in range(30):
        s = socket.create_connection(("127.0.0.1", darner.port))
        s.sendall(encode_command(["MGET"] + keys) * 5 + encode_command(["KEYS", "*"]))
        if i % 3 == 0:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()
    with darner.raw() as c:
        assert c.call("PING").raw == b"+PONG\r\n"
        assert c.call("DBSIZE").raw == b":3000\r\n"
