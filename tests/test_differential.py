"""Differential tests: identical command streams to darner and to a reference
redis-server, replies compared byte for byte (see differential.py for the
comparison modes and diff_scenarios.py for the streams)."""

from __future__ import annotations

import itertools
import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diff_scenarios import CLEANUP, SCENARIOS
from differential import (Cmd, compare, fmt_args, fmt_reply, pipeline_replies, run_raw_stream,
                          run_scenario)
from harness import darner_is_redis
from resp_reader import ConnectionClosed, RawConn, encode_command


def _report(name, proto, mismatches):
    lines = ["%d mismatch(es) in scenario %r (RESP%d):" % (len(mismatches), name, proto)]
    lines += [str(m) for m in mismatches]
    return "\n".join(lines)


@pytest.mark.parametrize("proto", [2, 3], ids=["resp2", "resp3"])
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario(name, proto, darner, redis_ref):
    mismatches = run_scenario(darner.port, redis_ref.port, SCENARIOS[name], proto=proto,
                              cleanup=CLEANUP.get(name, ()), golden=not darner_is_redis())
    if mismatches:
        pytest.fail(_report(name, proto, mismatches), pytrace=False)


# ---------------------------------------------------------------------------
# raw byte streams: inline commands, odd framing, fragmentation
# ---------------------------------------------------------------------------

def _mb(*cmds):
    return b"".join(encode_command(c) for c in cmds)


RAW_STREAMS = {
    "inline_ping": b"PING\r\n",
    "inline_set_quoted": b'set a "b c"\r\nget a\r\nstrlen a\r\n',
    "inline_spaces_single_quotes": b"  ECHO   'x y'  \r\n",
    "inline_escapes": b'set k "\\x41\\n\\t\\r\\\\\\"q\\"\\x00\\xff"\r\nget k\r\nstrlen k\r\n',
    "inline_single_quote_escape": b"echo 'it\\'s'\r\n",
    "inline_lf_only": b"PING\nECHO lf\n",
    "inline_empty_lines": b"\r\n\r\n\n  \r\nPING\r\n",
    "inline_multi_args": b"mset a 1 b 2\r\nmget a b c\r\nincr a\r\n",
    "inline_errors": b"get\r\nnosuch a b\r\nincr\r\nset a\r\n",
    "inline_empty_quoted_arg": b'ECHO ""\r\nSET "" ""\r\nGET ""\r\n',
    "inline_case": b"pInG\r\nEcHo x\r\n",
    "inline_tabs": b"ECHO\tx\r\n",
    "mixed_inline_and_multibulk": b"PING\r\n" + _mb(["ECHO", "hi"]) + b"PING\r\n" + _mb(["SET", "x", "1"]) + b"get x\r\n",
    "empty_multibulk": b"*0\r\n*-1\r\n" + _mb(["PING"]) + b"*0\r\n",
    "empty_command_name": b"*1\r\n$0\r\n\r\n",
    "multibulk_big_arg": _mb(["SET", "big", b"x" * 100000], ["STRLEN", "big"], ["GETRANGE", "big", "99990", "-1"]),
    "multibulk_zero_len_args": _mb(["SET", "", ""], ["GET", ""], ["ECHO", ""]),
    "pipelined_errors_and_success": _mb(["SET", "a"], ["SET", "a", "1"], ["INCR", "a"], ["FOO"], ["GET", "a"]),
    "multi_in_raw": _mb(["MULTI"], ["SET", "a", "1"], ["INCR", "a"]) + b"exec\r\n",
    "crlf_in_bulk": _mb(["SET", "a\r\nb", "c\r\n\r\nd"], ["GET", "a\r\nb"], ["KEYS", "a*"]),
}


@pytest.mark.parametrize("chunk", [None, 1, 7], ids=["one_write", "bytewise", "chunk7"])
@pytest.mark.parametrize("name", list(RAW_STREAMS))
def test_raw_stream(name, chunk, darner, redis_ref):
    data = RAW_STREAMS[name]
    if chunk == 1 and len(data) > 5000:
        chunk = 997
    results = {}
    for who, srv in (("darner", darner), ("redis", redis_ref)):
        with srv.raw() as c:
            assert c.call("FLUSHALL").raw == b"+OK\r\n"
        try:
            results[who] = run_raw_stream(srv.port, data, chunk=chunk)
        except Exception as e:  # noqa
            if who == "redis":
                raise
            results[who] = "<%s: %s>" % (type(e).__name__, e)
    if results["darner"] != results["redis"]:
        pytest.fail("raw stream %r (chunk=%s) sent %r\n darner: %r\n redis : %r"
                    % (name, chunk, data[:200], results["darner"], results["redis"]), pytrace=False)


# ---------------------------------------------------------------------------
# 10,000 commands in one write
# ---------------------------------------------------------------------------

def _pipeline_commands(n=10000, seed=1234):
    rnd = random.Random(seed)
    keys = ["pk%d" % i for i in range(40)] + ["", "bin\x00\r\n"]
    cmds = []
    for i in range(n):
        k = rnd.choice(keys)
        op = rnd.randrange(22)
        if op == 0:
            cmds.append(["SET", k, "v%d" % rnd.randrange(1000)])
        elif op == 1:
            cmds.append(["GET", k])
        elif op == 2:
            cmds.append(["INCR", k])
        elif op == 3:
            cmds.append(["INCRBY", k, str(rnd.randrange(-1000, 1000))])
        elif op == 4:
            cmds.append(["APPEND", k, rnd.choice(["x", "12", "", "\x00"])])
        elif op == 5:
            cmds.append(["DEL", k, rnd.choice(keys)])
        elif op == 6:
            cmds.append(["MGET"] + rnd.sample(keys, 3))
        elif op == 7:
            cmds.append(["EXISTS", k, rnd.choice(keys)])
        elif op == 8:
            cmds.append(["STRLEN", k])
        elif op == 9:
            cmds.append(["SETRANGE", k, str(rnd.randrange(20)), "ab"])
        elif op == 10:
            cmds.append(["GETRANGE", k, str(rnd.randrange(-10, 10)), str(rnd.randrange(-10, 10))])
        elif op == 11:
            cmds.append(["SET", k, str(rnd.randrange(-100, 100))])
        elif op == 12:
            cmds.append(["SETBIT", k, str(rnd.randrange(64)), str(rnd.randrange(2))])
        elif op == 13:
            cmds.append(["BITCOUNT", k])
        elif op == 14:
            cmds.append(["NOSUCHCOMMAND", k])
        elif op == 15:
            cmds.append(["SET", k])  # arity error
        elif op == 16:
            cmds.append(["MSET", k, "m", rnd.choice(keys), "n"])
        elif op == 17:
            cmds.append(["GETSET", k, "gs"])
        elif op == 18:
            cmds.append(["TYPE", k])
        elif op == 19:
            cmds.append(["DECRBY", k, "7"])
        elif op == 20:
            cmds.append(["RENAME", k, rnd.choice(keys)])
        else:
            cmds.append(["PING"])
    cmds.append(["DBSIZE"])
    return cmds


def test_pipeline_10000_commands_one_write(darner, redis_ref):
    cmds = _pipeline_commands()
    out = {}
    for who, srv in (("darner", darner), ("redis", redis_ref)):
        with srv.raw() as c:
            assert c.call("FLUSHALL").raw == b"+OK\r\n"
        out[who] = pipeline_replies(srv.port, cmds)
    diffs = []
    for i, (d, f) in enumerate(zip(out["darner"], out["redis"])):
        if d.raw != f.raw:
            diffs.append("  #%d %s\n      darner: %s\n      redis : %s" % (i, fmt_args(cmds[i]), fmt_reply(d), fmt_reply(f)))
    if diffs:
        pytest.fail("%d of %d pipelined replies differ (first 20):\n%s" % (len(diffs), len(cmds), "\n".join(diffs[:20])),
                    pytrace=False)


# ---------------------------------------------------------------------------
# SCAN: full iterations must yield the same key sets as the reference
# ---------------------------------------------------------------------------

def _scan_all(port, *opts, db=0):
    seen = set()
    with RawConn("127.0.0.1", port) as c:
        c.call("SELECT", db)
        cursor = b"0"
        for _ in range(100000):
            rep = c.call("SCAN", cursor, *opts)
            assert rep.kind == "*" and len(rep.value) == 2, rep
            cursor = rep.value[0].value
            for k in rep.value[1].value:
                seen.add(k.value)
            if cursor == b"0":
                return seen
    raise AssertionError("SCAN did not terminate")


@pytest.mark.parametrize("opts", [(), ("COUNT", "1"), ("COUNT", "7"), ("MATCH", "user:*"), ("MATCH", "*[0-4]", "COUNT", "3"),
                                  ("TYPE", "string"), ("TYPE", "hash"), ("MATCH", "nomatch*", "COUNT", "1000")],
                         ids=lambda o: "-".join(o) or "plain")
def test_scan_full_iteration_matches_reference(opts, darner, redis_ref):
    keys = ["user:%d" % i for i in range(300)] + ["other%d" % i for i in range(50)] + [b"bin\x00%d" % i for i in range(5)]
    sets = {}
    for who, srv in (("darner", darner), ("redis", redis_ref)):
        with srv.raw() as c:
            c.call("FLUSHALL")
            c.send_many([["SET", k, "1"] for k in keys])
            c.read_replies(len(keys))
        sets[who] = _scan_all(srv.port, *opts)
    assert sets["darner"] == sets["redis"], (
        "SCAN %s: darner-only=%r redis-only=%r" % (opts, sorted(sets["darner"] - sets["redis"])[:10],
                                                  sorted(sets["redis"] - sets["darner"])[:10]))


# ---------------------------------------------------------------------------
# property-based differential fuzzing (hypothesis)
# ---------------------------------------------------------------------------

def _both(darner, ref, cmds, proto=2):
    out = []
    for srv in (darner, ref):
        with RawConn("127.0.0.1", srv.port) as c:
            c.call("HELLO", str(proto))
            c.call("FLUSHALL")
            c.send_many(cmds)
            out.append(c.read_replies(len(cmds)))
    return out


def _assert_same(cmds, d, f):
    for i, (a, b) in enumerate(zip(d, f)):
        step = cmds[i]
        mode = Cmd(step)
        if step[0] in ("TTL", "PTTL"):
            mode = Cmd(step, "approx", tol=1000 if step[0] == "PTTL" else 1)
        why = compare(mode, a, b, 2)
        assert why is None, "step %d %s\n darner: %s\n redis : %s\nwhole stream:\n%s" % (
            i, fmt_args(step), fmt_reply(a), fmt_reply(b), "\n".join(fmt_args(c) for c in cmds))


# CI runs a fixed, derandomized set; bug hunting: DARNER_FUZZ_EXAMPLES=2000 (random each run)
_FUZZ_N = int(os.environ.get("DARNER_FUZZ_EXAMPLES", "0") or 0)
FUZZ_SETTINGS = settings(max_examples=_FUZZ_N or 60, deadline=None, derandomize=not _FUZZ_N,
                         suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

small_bytes = st.binary(max_size=40)
keys_st = st.sampled_from([b"a", b"b", b"c", b"", b"\x00k\r\n", b"\xff"])
ints_st = st.one_of(st.integers(min_value=-2 ** 63, max_value=2 ** 63 - 1).map(lambda i: str(i).encode()),
                    st.sampled_from([b"0", b"-1", b"9223372036854775807", b"-9223372036854775808",
                                     b"9223372036854775808", b"1.5", b"abc", b"", b" 1", b"01"]))
offsets_st = st.one_of(st.integers(-30, 30).map(lambda i: str(i).encode()), st.sampled_from([b"abc", b"4294967296"]))


@given(key=st.binary(max_size=300), value=st.binary(max_size=3000))
@FUZZ_SETTINGS
def test_fuzz_binary_roundtrip(darner, redis_ref, key, value):
    cmds = [["SET", key, value], ["GET", key], ["STRLEN", key], ["EXISTS", key], ["APPEND", key, value],
            ["GETRANGE", key, "1", "-2"], ["MGET", key, key + b"x"], ["TYPE", key], ["KEYS", "*"],
            ["OBJECT", "ENCODING", key], ["GETDEL", key], ["EXISTS", key]]
    d, f = _both(darner, redis_ref, cmds)
    _assert_same(cmds, d, f)


command_st = st.one_of(
    st.tuples(st.just(b"SET"), keys_st, st.one_of(small_bytes, ints_st)),
    st.tuples(st.just(b"GET"), keys_st),
    st.tuples(st.sampled_from([b"INCR", b"DECR", b"STRLEN", b"DEL", b"EXISTS", b"TYPE", b"GETDEL", b"PERSIST", b"TTL"]), keys_st),
    st.tuples(st.sampled_from([b"INCRBY", b"DECRBY"]), keys_st, ints_st),
    st.tuples(st.just(b"INCRBYFLOAT"), keys_st, st.sampled_from([b"1.5", b"-0.25", b"1e3", b"abc", b"10", b"-7"])),
    st.tuples(st.just(b"APPEND"), keys_st, small_bytes),
    st.tuples(st.just(b"SETRANGE"), keys_st, offsets_st, small_bytes),
    st.tuples(st.just(b"GETRANGE"), keys_st, offsets_st, offsets_st),
    st.tuples(st.just(b"SETBIT"), keys_st, offsets_st, st.sampled_from([b"0", b"1", b"2"])),
    st.tuples(st.just(b"GETBIT"), keys_st, offsets_st),
    st.tuples(st.just(b"BITCOUNT"), keys_st, offsets_st, offsets_st, st.sampled_from([b"BIT", b"BYTE"])),
    st.tuples(st.just(b"BITPOS"), keys_st, st.sampled_from([b"0", b"1"]), offsets_st, offsets_st,
              st.sampled_from([b"BIT", b"BYTE"])),
    st.tuples(st.just(b"BITFIELD"), keys_st, st.sampled_from([b"WRAP", b"SAT", b"FAIL"]),
              st.sampled_from([b"i8", b"u8", b"i5", b"u3", b"i64", b"u63"]), st.integers(0, 40).map(lambda i: str(i).encode()),
              ints_st),
    st.tuples(st.sampled_from([b"RENAME", b"RENAMENX", b"COPY", b"LCS"]), keys_st, keys_st),
    st.tuples(st.just(b"MSET"), keys_st, small_bytes, keys_st, small_bytes),
    st.tuples(st.just(b"MSETNX"), keys_st, small_bytes, keys_st, small_bytes),
    st.tuples(st.just(b"MGET"), keys_st, keys_st, keys_st),
    st.tuples(st.just(b"SET"), keys_st, small_bytes, st.sampled_from([b"NX", b"XX", b"GET", b"KEEPTTL"])),
    st.tuples(st.just(b"EXPIRE"), keys_st, st.sampled_from([b"100", b"200", b"-1", b"0"]),
              st.sampled_from([b"NX", b"XX", b"GT", b"LT"])),
    st.tuples(st.just(b"BITOP"), st.sampled_from([b"AND", b"OR", b"XOR"]), keys_st, keys_st, keys_st),
)


def _normalize(cmd):
    cmd = list(cmd)
    if cmd[0] == b"BITFIELD":
        _, k, ow, typ, off, val = cmd
        return [b"BITFIELD", k, b"OVERFLOW", ow, b"INCRBY", typ, off, val, b"GET", typ, off]
    return cmd


@given(st.lists(command_st, min_size=1, max_size=40))
@FUZZ_SETTINGS
def test_fuzz_string_command_sequences(darner, redis_ref, seq):
    cmds = [_normalize(c) for c in seq] + [["MGET", b"a", b"b", b"c", b"", b"\x00k\r\n", b"\xff"], ["DBSIZE"]]
    d, f = _both(darner, redis_ref, cmds)
    _assert_same(cmds, d, f)


@given(st.lists(command_st, min_size=1, max_size=25))
@FUZZ_SETTINGS
def test_fuzz_string_command_sequences_resp3(darner, redis_ref, seq):
    cmds = [_normalize(c) for c in seq] + [["MGET", b"a", b"b", b"c"], ["DBSIZE"]]
    d, f = _both(darner, redis_ref, cmds, proto=3)
    _assert_same(cmds, d, f)


@given(st.lists(command_st, min_size=1, max_size=15))
@FUZZ_SETTINGS
def test_fuzz_transactions(darner, redis_ref, seq):
    """The same random commands inside MULTI/EXEC must give the same EXEC reply."""
    cmds = [["MULTI"]] + [_normalize(c) for c in seq] + [["EXEC"], ["MGET", b"a", b"b", b"c"]]
    d, f = _both(darner, redis_ref, cmds)
    _assert_same(cmds, d, f)


# The same random commands inside a Lua script (each through redis.pcall, its reply shown as a
# string), with 0 to 3 of the keys declared: a script that reaches an undeclared key after it
# wrote is undone and rerun in darner (cmd/scripting.rs), which must leave no trace: the
# script's replies and the keys' final state equal redis-server's.
SHOW_ALL = """
local function show(v)
  if type(v) == 'table' then
    if v.err then return 'E:' .. v.err end
    if v.ok then return 'S:' .. v.ok end
    local p = {}
    for i = 1, #v do p[#p + 1] = show(v[i]) end
    return '[' .. table.concat(p, ',') .. ']'
  end
  if v == false then return 'nil' end
  return type(v) .. ':' .. tostring(v)
end
local out = {}
local at = 1
for _, n in ipairs(cjson.decode(ARGV[1])) do
  local args = {}
  for i = 1, n do args[i] = ARGV[at + i] end
  at = at + n
  out[#out + 1] = show(redis.pcall(unpack(args)))
end
return out
"""


_script_serial = itertools.count()


@given(st.lists(command_st, min_size=1, max_size=12), st.integers(0, 3))
@FUZZ_SETTINGS
def test_fuzz_scripts_over_declared_and_undeclared_keys(darner, redis_ref, seq, ndeclared):
    import json
    calls = [_normalize(c) for c in seq]
    argv = [json.dumps([len(c) for c in calls]).encode()]
    for c in calls:
        argv.extend(c)
    keys = [b"a", b"b", b"c"][:ndeclared]
    # A new body each time: a script seen reaching beyond its keys reserves every shard from
    # then on, and this one must start with only its declared keys.
    body = SHOW_ALL + "-- %d\n" % next(_script_serial)
    cmds = [["EVAL", body, str(len(keys)).encode()] + keys + argv,
            ["MGET", b"a", b"b", b"c", b"", b"\x00k\r\n", b"\xff"], ["DBSIZE"],
            ["TTL", b"a"], ["TTL", b"b"], ["TTL", b"c"]]
    d, f = _both(darner, redis_ref, cmds)
    _assert_same(cmds, d, f)


# ---------------------------------------------------------------------------
# fuzzing classic bug areas: glob matching, LCS, inline argument splitting
# ---------------------------------------------------------------------------

GLOB_KEYS = [b"", b"a", b"b", b"ab", b"ba", b"aab", b"abb", b"a*b", b"a?b", b"a[b", b"a]b", b"a\\b", b"a-b",
             b"^", b"-", b"]", b"[", b"\\", b"*", b"?", b"abc", b"xyz", b"a\x00b", b"A", b"B", b"aXb"]


@given(pattern=st.text(alphabet="ab*?[]^-\\!xA", max_size=10).map(lambda s: s.encode()))
@FUZZ_SETTINGS
def test_fuzz_keys_glob_patterns(darner, redis_ref, pattern):
    cmds = [["MSET"] + [x for k in GLOB_KEYS for x in (k, b"1")], ["KEYS", pattern]]
    d, f = _both(darner, redis_ref, cmds)
    dk = sorted(x.value for x in d[1].value) if d[1].kind == "*" else d[1].raw
    fk = sorted(x.value for x in f[1].value)
    assert dk == fk, "KEYS %r\n darner: %r\n redis : %r" % (pattern, dk, fk)


lcs_str = st.text(alphabet="ACGT", max_size=60).map(lambda s: s.encode())


@given(a=lcs_str, b=lcs_str, minlen=st.integers(0, 4))
@FUZZ_SETTINGS
def test_fuzz_lcs(darner, redis_ref, a, b, minlen):
    cmds = [["MSET", "a", a, "b", b], ["LCS", "a", "b"], ["LCS", "a", "b", "LEN"],
            ["LCS", "a", "b", "IDX", "MINMATCHLEN", str(minlen), "WITHMATCHLEN"], ["LCS", "a", "b", "IDX"]]
    d, f = _both(darner, redis_ref, cmds)
    _assert_same(cmds, d, f)


def _inline_transcript(port, line):
    """Send one inline line then a sentinel; return (replies before the
    sentinel, closed_by_server)."""
    with RawConn("127.0.0.1", port, timeout=10) as c:
        c.send_raw(line + b"\r\n" + encode_command(["ECHO", "inline-sentinel"]))
        out = []
        while True:
            try:
                r = c.read_reply()
            except ConnectionClosed:
                return out, True
            if r.kind == "$" and r.value == b"inline-sentinel":
                return out, False
            out.append(r.raw)


@given(tail=st.text(alphabet=" \t'\"\\xn41ab", max_size=16).map(lambda s: s.encode()),
       cmd=st.sampled_from([b"ECHO ", b"SET k ", b"PING ", b"ECHO", b""]))
@FUZZ_SETTINGS
def test_fuzz_inline_argument_splitting(darner, redis_ref, cmd, tail):
    line = cmd + tail
    got_d = _inline_transcript(darner.port, line)
    got_f = _inline_transcript(redis_ref.port, line)
    assert got_d == got_f, "inline %r\n darner: %r\n redis : %r" % (line, got_d, got_f)
