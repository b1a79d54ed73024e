"""Command streams for tests/test_differential.py.

SCENARIOS maps a scenario name to a list of steps (see differential.py for the
step syntax: plain tuples are compared byte for byte; T() = type only,
S() = order-insensitive, A(tol, ...) = integer tolerance, X(expected, ...) =
golden reply where Debian's redis 7.0 differs from Redis 7.2, N() = no reply,
Sleep(s)).  Each scenario runs on fresh connections after FLUSHALL on both
servers, once in RESP2 and once in RESP3 (HELLO 3).

CLEANUP maps a scenario name to commands sent (to both servers, on a new
connection) after the scenario, pass or fail, to restore global state.

To add coverage: append steps to a scenario or add a new key.
"""

import time

from differential import A, Cmd, N, S, Sleep, T, X

I64_MAX = "9223372036854775807"
I64_MIN = "-9223372036854775808"
BIN_KEY = b"k\x00\r\n\xff\xfe bin"
BIN_VAL = b"\x00\r\n\x80\xff\r\n$3\r\n*1\r\n"


def _now():
    return int(time.time())


def _now_ms():
    return int(time.time() * 1000)


SCENARIOS = {}
CLEANUP = {}

# ---------------------------------------------------------------------------
# connection
# ---------------------------------------------------------------------------
SCENARIOS["connection_basics"] = [
    ("PING",), ("PING", "hello"), ("PING", ""), ("PING", "a", "b"),
    ("ping",), ("PiNg", BIN_VAL),
    ("ECHO", "hi"), ("ECHO", ""), ("ECHO", BIN_VAL), ("ECHO",), ("ECHO", "a", "b"),
    ("SELECT", "1"), ("SET", "dbkey", "one"), ("SELECT", "15"), ("GET", "dbkey"),
    ("SELECT", "1"), ("GET", "dbkey"),
    ("SELECT", "16"), ("SELECT", "-1"), ("SELECT", "abc"), ("SELECT", "1.5"), ("SELECT",),
    ("SELECT", "0"), ("GET", "dbkey"), ("SELECT", "00"), ("SELECT", " 1"),
    ("AUTH", "pw"), ("AUTH", "default", "anything"), ("AUTH", "a", "b", "c"), ("AUTH",),
    ("HELLO", "4"), ("HELLO", "0"), ("HELLO", "abc"), ("HELLO", "1"),
    ("HELLO", "3", "FOO"), ("HELLO", "2", "SETNAME"), ("HELLO", "2", "AUTH", "default"),
    T("HELLO"), T("HELLO", "2", "SETNAME", "hname"), ("CLIENT", "GETNAME"),
    T("HELLO", "2", "AUTH", "default", "pw"),
    ("HELLO", "2", "SETNAME", "bad name"),
]

SCENARIOS["client_commands"] = [
    ("CLIENT", "GETNAME"), ("CLIENT", "SETNAME", "myname"), ("CLIENT", "GETNAME"),
    ("CLIENT", "SETNAME", "bad name"), ("CLIENT", "SETNAME", "bad\nname"),
    ("CLIENT", "SETNAME", b"bad\xffname"), ("CLIENT", "GETNAME"),
    ("CLIENT", "SETNAME", ""), ("CLIENT", "GETNAME"),
    ("CLIENT", "SETNAME"), ("CLIENT", "SETNAME", "a", "b"), ("CLIENT", "GETNAME", "x"),
    T("CLIENT", "ID"), ("CLIENT", "ID", "x"),
    T("CLIENT", "INFO"), T("CLIENT", "LIST"), T("CLIENT", "LIST", "TYPE", "normal"),
    ("CLIENT", "LIST", "TYPE", "foo"), ("CLIENT", "LIST", "ID", "abc"),
    ("CLIENT", "LIST", "ID", "999999999"), ("CLIENT", "LIST", "FOO"),
    ("CLIENT", "KILL", "ID", "999999999"), ("CLIENT", "KILL", "1.2.3.4:5"),
    ("CLIENT", "KILL", "ID", "abc"), ("CLIENT", "KILL", "ADDR", "1.2.3.4:5"),
    ("CLIENT", "KILL", "FOO", "bar"), ("CLIENT", "KILL", "ID", "999999999", "SKIPME", "maybe"),
    ("CLIENT", "KILL", "USER", "nosuchuser"),
    ("CLIENT", "NO-EVICT", "on"), ("CLIENT", "NO-EVICT", "off"), ("CLIENT", "NO-EVICT", "maybe"),
    ("CLIENT", "NO-EVICT"),
    ("CLIENT", "FOO"), ("CLIENT",), T("CLIENT", "HELP"),
    ("CLIENT", "PAUSE", "abc"), ("CLIENT", "PAUSE", "-1"), ("CLIENT", "PAUSE", "10", "FOO"),
    ("CLIENT", "PAUSE", "10", "WRITE"), ("CLIENT", "UNPAUSE"), ("CLIENT", "PAUSE", "5"),
    ("CLIENT", "UNPAUSE"), ("CLIENT", "UNPAUSE", "x"), ("PING",),
    # Redis 7.2 additions (Debian's 7.0 reference does not know them):
    X(b"+OK\r\n", "CLIENT", "NO-TOUCH", "on"), X(b"+OK\r\n", "CLIENT", "NO-TOUCH", "off"),
    X(b"-ERR syntax error\r\n", "CLIENT", "NO-TOUCH", "maybe"),
    X(b"+OK\r\n", "CLIENT", "SETINFO", "lib-name", "mylib"),
    X(b"+OK\r\n", "CLIENT", "SETINFO", "lib-ver", "1.2.3"),
    X(b"-ERR Unrecognized option 'foo'\r\n", "CLIENT", "SETINFO", "foo", "bar"),
    X(b"-ERR lib-name cannot contain spaces, newlines or special characters.\r\n",
      "CLIENT", "SETINFO", "lib-name", "a b"),
    X(b"-ERR wrong number of arguments for 'client|setinfo' command\r\n", "CLIENT", "SETINFO", "lib-name"),
]
CLEANUP["client_commands"] = [("CLIENT", "UNPAUSE")]

SCENARIOS["client_reply"] = [
    ("SET", "a", "1"), ("CLIENT", "REPLY", "ON"),
    N("CLIENT", "REPLY", "OFF"), N("SET", "a", "2"), N("GET", "a"), N("INCR", "a"),
    N("NOSUCHCOMMAND"),
    ("CLIENT", "REPLY", "ON"), ("GET", "a"),
    N("CLIENT", "REPLY", "SKIP"), N("SET", "a", "4"), ("GET", "a"),
    N("CLIENT", "REPLY", "SKIP"), N("NOSUCHCOMMAND", "x"), ("PING",),
    ("CLIENT", "REPLY", "FOO"), ("CLIENT", "REPLY"),
]

SCENARIOS["reset_quit"] = [
    ("SELECT", "3"), ("CLIENT", "SETNAME", "before-reset"), ("MULTI",), ("SET", "x", "1"),
    ("RESET",), ("CLIENT", "GETNAME"), ("GET", "x"), ("SET", "in-db0", "1"),
    ("SELECT", "3"), ("EXISTS", "in-db0"), ("SELECT", "0"), ("EXISTS", "in-db0"),
    ("EXEC",), ("RESET", "x"), ("PING",), ("QUIT",),
]

# ---------------------------------------------------------------------------
# strings
# ---------------------------------------------------------------------------


def _set_abs_times():
    fut = _now() + 1000
    fut_ms = _now_ms() + 1000000
    return [
        ("SET", "k", "v", "EXAT", fut), A(2, "TTL", "k"), ("EXPIRETIME", "k"),
        ("SET", "k", "v", "PXAT", fut_ms), A(2000, "PTTL", "k"), ("PEXPIRETIME", "k"),
        ("SET", "k", "v", "EXAT", _now() - 10), ("EXISTS", "k"),
        ("SET", "k", "v", "PXAT", 1), ("EXISTS", "k"),
        ("GETEX", "g", "EXAT", fut), ("SET", "g", "gv"), ("GETEX", "g", "EXAT", fut), ("EXPIRETIME", "g"),
        ("GETEX", "g", "PXAT", fut_ms), ("PEXPIRETIME", "g"), ("GETEX", "g", "EXAT", "0"),
    ]


SCENARIOS["set_options"] = [
    ("SET", "k", "v"), ("GET", "k"), ("SET", "k", "v2", "NX"), ("GET", "k"),
    ("SET", "k", "v3", "XX"), ("GET", "k"), ("SET", "nk", "v", "XX"), ("GET", "nk"),
    ("SET", "nk", "v", "NX"), ("GET", "nk"),
    ("SET", "k", "v4", "GET"), ("SET", "new", "v", "GET"), ("GET", "new"),
    ("SET", "k", "v5", "NX", "GET"), ("SET", "k2", "v", "NX", "GET"), ("SET", "k", "v6", "XX", "GET"),
    ("SET", "k3", "v", "XX", "GET"), ("EXISTS", "k3"),
    ("SET", "k", "v", "EX", "100"), A(1, "TTL", "k"), ("SET", "k", "v", "PX", "100000"), A(1000, "PTTL", "k"),
    ("SET", "k", "v", "KEEPTTL"), A(1, "TTL", "k"), ("SET", "k", "v"), ("TTL", "k"),
    ("SET", "k", "v", "EX", "100", "GET"), ("SET", "k", "v", "GET", "EX", "100"), A(1, "TTL", "k"),
    ("SET", "k", "v", "EX", "10", "PX", "100"), ("SET", "k", "v", "NX", "XX"), ("SET", "k", "v", "XX", "NX"),
    ("SET", "k", "v", "EX", "0"), ("SET", "k", "v", "EX", "-1"), ("SET", "k", "v", "PX", "0"),
    ("SET", "k", "v", "EX", "abc"), ("SET", "k", "v", "EX", "1.5"), ("SET", "k", "v", "EX", ""),
    ("SET", "k", "v", "EX", I64_MAX), ("SET", "k", "v", "PX", I64_MAX), ("SET", "k", "v", "EXAT", I64_MAX),
    ("SET", "k", "v", "EX", "9223372036854775"), ("SET", "k", "v", "EX", "9223372036854776"),
    ("SET", "k", "v", "EXAT", "0"), ("SET", "k", "v", "PXAT", "0"), ("SET", "k", "v", "PXAT", "-5"),
    ("SET", "k", "v", "KEEPTTL", "EX", "10"), ("SET", "k", "v", "EX", "10", "KEEPTTL"),
    ("SET", "k", "v", "PX", "10", "EXAT", "10"), ("SET", "k", "v", "EX", "10", "EX", "10"),
    ("SET", "k", "v", "NX", "NX"), ("SET", "k", "v", "XX", "XX"), ("SET", "k", "v", "GET", "GET"),
    ("SET", "k", "v", "KEEPTTL", "KEEPTTL"),
    ("SET", "k", "v", "EX"), ("SET", "k", "v", "FOO"), ("SET", "k", "v", "PERSIST"),
    ("SET", "k"), ("SET",), ("SET", "k", "v", "ex", "100"), ("SET", "k", "v", "Nx"),
    ("SET", "k", "v", "px", "99999", "xx", "get"), A(1000, "PTTL", "k"),
    ("SET", "", ""), ("GET", ""), ("STRLEN", ""), ("EXISTS", ""),
    ("SET", BIN_KEY, BIN_VAL), ("GET", BIN_KEY), ("STRLEN", BIN_KEY), ("SET", "e", ""), ("GET", "e"),
    _set_abs_times,
]

SCENARIOS["setnx_setex_getset_getdel_getex"] = [
    ("SETNX", "a", "1"), ("SETNX", "a", "2"), ("GET", "a"), ("SETNX", "a"),
    ("SETEX", "b", "100", "v"), A(1, "TTL", "b"), ("SETEX", "b", "0", "v"), ("SETEX", "b", "-10", "v"),
    ("SETEX", "b", "abc", "v"), ("SETEX", "b", I64_MAX, "v"), ("SETEX", "b", "10"),
    ("PSETEX", "c", "100000", "v"), A(1000, "PTTL", "c"), ("PSETEX", "c", "0", "v"), ("PSETEX", "c", "-5", "v"),
    ("PSETEX", "c", I64_MAX, "v"), ("GET", "c"),
    ("GETSET", "a", "new"), ("GETSET", "nokey", "v"), ("GET", "nokey"), ("GETSET", "a"),
    ("SETEX", "ttlkey", "100", "v"), ("GETSET", "ttlkey", "w"), ("TTL", "ttlkey"),
    ("GETDEL", "a"), ("GETDEL", "a"), ("EXISTS", "a"), ("GETDEL",), ("GETDEL", "a", "b"),
    ("SET", "g", "gv"), ("GETEX", "g"), ("TTL", "g"), ("GETEX", "g", "EX", "100"), A(1, "TTL", "g"),
    ("GETEX", "g", "PX", "50000"), A(1000, "PTTL", "g"), ("GETEX", "g", "PERSIST"), ("TTL", "g"),
    ("GETEX", "g", "EX", "0"), ("GETEX", "g", "EX", "-1"), ("GETEX", "g", "EX", "abc"),
    ("GETEX", "g", "EX", I64_MAX), ("GETEX", "g", "PX", I64_MAX),
    ("GETEX", "g", "EX", "10", "PX", "100"), ("GETEX", "g", "PX", "100", "PERSIST"),
    ("GETEX", "g", "PERSIST", "EX", "10"), ("GETEX", "g", "KEEPTTL"), ("GETEX", "g", "FOO"),
    ("GETEX", "g", "EX"), ("GETEX", "g", "persist"), ("GETEX", "g", "ex", "100"), A(1, "TTL", "g"),
    ("GETEX", "nokey2", "EX", "10"), ("EXISTS", "nokey2"), ("GETEX", "nokey2", "FOO"), ("GETEX",),
    ("TTL", "g"), ("GETEX", "g", "PERSIST", "PERSIST"),
]

SCENARIOS["mget_mset_msetnx"] = [
    ("MSET", "a", "1", "b", "2", "c", "3"), ("MGET", "a", "b", "c", "nokey", "a"),
    ("MSET", "a"), ("MSET", "a", "1", "b"), ("MSET",), ("MGET",),
    ("MSET", "a", "x", "a", "y"), ("GET", "a"),
    ("MSETNX", "a", "1", "z", "2"), ("EXISTS", "z"), ("MSETNX", "y", "1", "z", "2"), ("MGET", "y", "z"),
    ("MSETNX", "q", "1", "q", "2"), ("GET", "q"), ("MSETNX", "a"), ("MSETNX", "a", "1", "b"),
    ("MSET", BIN_KEY, BIN_VAL, "", "empty"), ("MGET", BIN_KEY, "", "nokey"),
    ("SETEX", "t", "100", "v"), ("MSET", "t", "v2"), ("TTL", "t"),
]

SCENARIOS["append_strlen_ranges"] = [
    ("APPEND", "s", "Hello"), ("APPEND", "s", " World"), ("GET", "s"), ("STRLEN", "s"), ("STRLEN", "nokey"),
    ("APPEND", "s", ""), ("APPEND", "e", ""), ("EXISTS", "e"), ("GET", "e"), ("APPEND", "s"), ("STRLEN",),
    ("GETRANGE", "s", "0", "-1"), ("GETRANGE", "s", "0", "3"), ("GETRANGE", "s", "-3", "-1"),
    ("GETRANGE", "s", "5", "2"), ("GETRANGE", "s", "0", "100"), ("GETRANGE", "s", "-100", "-50"),
    ("GETRANGE", "s", "-100", "100"), ("GETRANGE", "s", "-1", "-5"), ("GETRANGE", "s", "11", "20"),
    ("GETRANGE", "s", "10", "10"), ("GETRANGE", "s", "-1", "-1"), ("GETRANGE", "s", "0", "0"),
    ("GETRANGE", "s", "3", "-3"), ("GETRANGE", "s", I64_MIN, I64_MAX), ("GETRANGE", "s", "0", I64_MAX),
    ("GETRANGE", "s", "0"), ("GETRANGE", "s", "a", "b"), ("GETRANGE", "s", "0", "1.5"),
    ("GETRANGE", "s", "0", "9223372036854775808"),
    ("GETRANGE", "nokey", "0", "10"), ("GETRANGE", "nokey", "0", "-1"),
    ("SUBSTR", "s", "0", "4"), ("SUBSTR", "s", "-5", "-1"), ("SUBSTR", "s", "0"),
    ("SETRANGE", "s", "6", "Redis"), ("GET", "s"), ("SETRANGE", "s", "20", "X"), ("GET", "s"),
    ("STRLEN", "s"), ("SETRANGE", "nk", "5", "x"), ("GET", "nk"), ("SETRANGE", "s", "-1", "x"),
    ("SETRANGE", "s", "536870912", "x"), ("SETRANGE", "s", "536870911", "xy"),
    ("SETRANGE", "s", "536870912", ""), ("SETRANGE", "s", "0", ""), ("SETRANGE", "nk2", "0", ""),
    ("EXISTS", "nk2"), ("SETRANGE", "nk2", "100", ""), ("EXISTS", "nk2"),
    ("SETRANGE", "s", "abc", "x"), ("SETRANGE", "s", "0"), ("SETRANGE", "s", "0", BIN_VAL), ("GET", "s"),
    ("SET", "i", "12345"), ("SETRANGE", "i", "1", "9"), ("GET", "i"), ("APPEND", "i", "6"), ("GET", "i"),
    ("GETRANGE", "i", "1", "2"), ("STRLEN", "i"), ("SET", "neg", "-123"), ("STRLEN", "neg"),
    ("GETRANGE", "neg", "0", "1"),
]

SCENARIOS["incr_decr"] = [
    ("INCR", "n"), ("INCR", "n"), ("DECR", "n"), ("INCRBY", "n", "10"), ("DECRBY", "n", "3"),
    ("INCRBY", "n", "-100"), ("DECRBY", "n", "-100"), ("GET", "n"),
    ("INCRBY", "n", "abc"), ("INCRBY", "n", "1.5"), ("INCRBY", "n", ""), ("INCRBY", "n"), ("INCR",),
    ("INCRBY", "n", "9223372036854775808"), ("DECRBY", "n", "-9223372036854775809"),
    ("SET", "s", "hello"), ("INCR", "s"), ("DECR", "s"), ("INCRBY", "s", "1"),
    ("SET", "m", I64_MAX), ("INCR", "m"), ("INCRBY", "m", "1"), ("DECR", "m"), ("GET", "m"),
    ("SET", "m", I64_MIN), ("DECR", "m"), ("DECRBY", "m", "1"), ("INCRBY", "m", "-1"), ("INCR", "m"),
    ("SET", "z", "0"), ("DECRBY", "z", I64_MIN), ("INCRBY", "z", I64_MIN), ("GET", "z"),
    ("SET", "sp", " 1"), ("INCR", "sp"), ("SET", "sp", "1 "), ("INCR", "sp"), ("SET", "sp", "01"), ("INCR", "sp"),
    ("SET", "sp", "+1"), ("INCR", "sp"), ("SET", "sp", "1.0"), ("INCR", "sp"), ("SET", "sp", ""), ("INCR", "sp"),
    ("SET", "sp", "-0"), ("INCR", "sp"), ("SET", "sp", "0x10"), ("INCR", "sp"), ("SET", "sp", "1e3"), ("INCR", "sp"),
    ("SET", "sp", "9223372036854775808"), ("INCR", "sp"), ("SET", "sp", "-5"), ("INCR", "sp"), ("GET", "sp"),
    ("SET", "sp", "1\x00"), ("INCR", "sp"),
    ("INCRBY", "new", "0"), ("DECRBY", "new2", "5"), ("MGET", "new", "new2"),
    ("SETEX", "ttl", "100", "5"), ("INCR", "ttl"), A(1, "TTL", "ttl"),
    ("INCR", "n", "extra"), ("DECR", "n", "x"), ("DECRBY", "n"),
]

SCENARIOS["incrbyfloat"] = [
    ("INCRBYFLOAT", "f", "1.5"), ("INCRBYFLOAT", "f", "1e3"), ("INCRBYFLOAT", "f", "-0.5"), ("GET", "f"),
    ("INCRBYFLOAT", "f", "abc"), ("INCRBYFLOAT", "f", "inf"), ("INCRBYFLOAT", "f", "-inf"),
    ("INCRBYFLOAT", "f", "nan"), ("INCRBYFLOAT", "f", ""), ("INCRBYFLOAT", "f", " 1"),
    ("INCRBYFLOAT", "f", "1 "), ("INCRBYFLOAT", "f", "1e400"), ("INCRBYFLOAT", "f", "-1e400"),
    ("SET", "x", "10.50"), ("INCRBYFLOAT", "x", "0.1"), ("INCRBYFLOAT", "x", "-5.0e3"), ("GET", "x"),
    ("SET", "y", "0"), ("INCRBYFLOAT", "y", "0.1"), ("INCRBYFLOAT", "y", "0.1"), ("INCRBYFLOAT", "y", "0.1"),
    ("SET", "z", "3.0e3"), ("INCRBYFLOAT", "z", "200"), ("INCRBYFLOAT", "z", "1.23456789012345678"),
    ("SET", "w", "5"), ("INCRBYFLOAT", "w", "0"), ("GET", "w"), ("INCRBYFLOAT", "w", "-5"), ("GET", "w"),
    ("INCRBYFLOAT", "w", "0x10"), ("INCRBYFLOAT", "w", "1e-5"), ("INCRBYFLOAT", "w", "123456789012345678901234567890"),
    ("INCRBYFLOAT", "w", ".5"), ("INCRBYFLOAT", "w", "5."), ("INCRBYFLOAT", "w", "+3"),
    ("SET", "s", "hello"), ("INCRBYFLOAT", "s", "1"), ("SET", "s", "1.5 "), ("INCRBYFLOAT", "s", "1"),
    ("SET", "big", "1e308"), ("INCRBYFLOAT", "big", "1e308"), ("GET", "big"),
    ("INCRBYFLOAT", "f"), ("INCRBYFLOAT",), ("SETEX", "t", "100", "1.5"), ("INCRBYFLOAT", "t", "1"), A(1, "TTL", "t"),
    ("INCRBYFLOAT", "neg0", "-0"), ("GET", "neg0"), ("INCRBYFLOAT", "ten", "10"), ("OBJECT", "ENCODING", "ten"),
]

SCENARIOS["object_encoding"] = [
    ("SET", "a", "123"), ("OBJECT", "ENCODING", "a"), ("SET", "a", "-1"), ("OBJECT", "ENCODING", "a"),
    ("SET", "a", I64_MAX), ("OBJECT", "ENCODING", "a"), ("SET", "a", I64_MIN), ("OBJECT", "ENCODING", "a"),
    ("SET", "a", "9223372036854775808"), ("OBJECT", "ENCODING", "a"),
    ("SET", "a", "0123"), ("OBJECT", "ENCODING", "a"), ("SET", "a", "+1"), ("OBJECT", "ENCODING", "a"),
    ("SET", "a", "1.5"), ("OBJECT", "ENCODING", "a"), ("SET", "a", ""), ("OBJECT", "ENCODING", "a"),
    ("SET", "a", "x" * 44), ("OBJECT", "ENCODING", "a"), ("SET", "a", "x" * 45), ("OBJECT", "ENCODING", "a"),
    ("SET", "a", "x" * 1000), ("OBJECT", "ENCODING", "a"),
    ("SET", "a", "1"), ("APPEND", "a", "2"), ("OBJECT", "ENCODING", "a"), ("GET", "a"),
    ("SET", "a", "abc"), ("APPEND", "a", "d"), ("OBJECT", "ENCODING", "a"),
    ("SET", "a", "5"), ("INCR", "a"), ("OBJECT", "ENCODING", "a"),
    ("SET", "a", "abc"), ("SETRANGE", "a", "0", "x"), ("OBJECT", "ENCODING", "a"),
    ("SET", "a", "12"), ("SETRANGE", "a", "0", "3"), ("OBJECT", "ENCODING", "a"),
    ("SET", "a", "x"), ("SETBIT", "a", "0", "1"), ("OBJECT", "ENCODING", "a"),
    ("INCRBYFLOAT", "f", "1.5"), ("OBJECT", "ENCODING", "f"), ("SET", "b", "10000"), ("OBJECT", "ENCODING", "b"),
    ("OBJECT", "ENCODING", "nokey"), ("OBJECT", "ENCODING"), ("OBJECT", "ENCODING", "a", "b"),
    ("OBJECT", "REFCOUNT", "nokey"), ("OBJECT", "REFCOUNT", "b"), ("SET", "big", "x" * 100), ("OBJECT", "REFCOUNT", "big"),
    T("OBJECT", "FREQ", "big"), T("OBJECT", "FREQ", "nokey"), T("OBJECT", "IDLETIME", "big"),
    ("OBJECT", "IDLETIME", "nokey"), ("OBJECT", "FOO", "big"), ("OBJECT",), T("OBJECT", "HELP"),
    ("SET", "mod", "100"), ("INCRBY", "mod", "1"), ("OBJECT", "ENCODING", "mod"),
    ("SET", "m2", "100"), ("APPEND", "m2", ""), ("OBJECT", "ENCODING", "m2"),
]

SCENARIOS["setbit_getbit"] = [
    ("SETBIT", "b", "7", "1"), ("GETBIT", "b", "7"), ("GET", "b"), ("SETBIT", "b", "7", "0"), ("GET", "b"),
    ("SETBIT", "b", "100", "1"), ("STRLEN", "b"), ("GET", "b"), ("GETBIT", "b", "100"), ("GETBIT", "b", "99"),
    ("GETBIT", "b", "99999999"), ("GETBIT", "nokey", "0"), ("GETBIT", "b", "-1"), ("GETBIT", "b", "4294967296"),
    ("GETBIT", "b", "abc"), ("SETBIT", "b", "-1", "1"), ("SETBIT", "b", "4294967296", "1"),
    ("SETBIT", "b", "0", "2"), ("SETBIT", "b", "0", "-1"), ("SETBIT", "b", "0", "abc"), ("SETBIT", "b", "abc", "1"),
    ("SETBIT", "b", "0"), ("GETBIT", "b"), ("SETBIT", "b", "1.5", "1"),
    ("SET", "i", "1"), ("SETBIT", "i", "6", "1"), ("GET", "i"), ("GETBIT", "i", "2"),
    ("SETBIT", "c", "0", "1"), ("SETBIT", "c", "0", "1"), ("GETBIT", "c", "0"),
    ("SETBIT", "e", "15", "0"), ("GET", "e"), ("STRLEN", "e"),
]


def _bitcount_missing_key():
    # Redis < 8.0 looks the key up before validating the range arguments, so
    # a missing key answers 0 / -1 even for bad arguments (redis#11734 and
    # redis#12394 changed this only in 8.0).  Same in 7.0 and 7.2.
    return [
        ("BITCOUNT", "nokey", "0"), ("BITCOUNT", "nokey", "0", "1", "FOO"), ("BITCOUNT", "nokey", "a", "b"),
        ("BITPOS", "nokey", "1", "0", "1", "FOO"), ("BITPOS", "nokey", "1", "a"), ("BITPOS", "nokey", "2"),
    ]


SCENARIOS["bitcount_bitpos"] = [
    ("SET", "s", "foobar"), ("BITCOUNT", "s"), ("BITCOUNT", "s", "0", "0"), ("BITCOUNT", "s", "1", "1"),
    ("BITCOUNT", "s", "1", "-1"), ("BITCOUNT", "s", "-2", "-1"), ("BITCOUNT", "s", "5", "30", "BIT"),
    ("BITCOUNT", "s", "0", "-1", "BIT"), ("BITCOUNT", "s", "0", "-1", "bit"), ("BITCOUNT", "s", "0", "-1", "BYTE"),
    ("BITCOUNT", "s", "-5", "-1", "BIT"), ("BITCOUNT", "s", "3", "1"), ("BITCOUNT", "s", "100", "200"),
    ("BITCOUNT", "s", "-100", "-50"), ("BITCOUNT", "s", I64_MIN, I64_MAX), ("BITCOUNT", "s", "0", I64_MAX, "BIT"),
    ("BITCOUNT", "s", "0"), ("BITCOUNT", "s", "0", "1", "FOO"), ("BITCOUNT", "s", "a", "b"),
    ("BITCOUNT", "s", "0", "1", "BIT", "x"), ("BITCOUNT",), ("BITCOUNT", "nokey"), ("BITCOUNT", "nokey", "0", "-1"),
    ("BITCOUNT", "nokey", "0", "-1", "BIT"),
    ("SET", "p", b"\xff\xf0\x00"), ("BITPOS", "p", "0"), ("BITPOS", "p", "1"), ("BITPOS", "p", "0", "2", "-1"),
    ("BITPOS", "p", "1", "2"), ("BITPOS", "p", "1", "2", "-1"), ("BITPOS", "p", "0", "0", "-1", "BIT"),
    ("BITPOS", "p", "1", "7", "15", "BIT"), ("BITPOS", "p", "0", "7", "15", "BIT"), ("BITPOS", "p", "0", "1", "1"),
    ("BITPOS", "p", "1", "-1"), ("BITPOS", "p", "0", "-1"), ("BITPOS", "p", "1", "-2", "-1", "BYTE"),
    ("BITPOS", "p", "0", "100"), ("BITPOS", "p", "1", "3", "1"), ("BITPOS", "p", "0", "-100", "100", "bit"),
    ("BITPOS", "p", "2"), ("BITPOS", "p", "-1"), ("BITPOS", "p", "a"), ("BITPOS", "p", "0", "0", "1", "FOO"),
    ("BITPOS", "p", "0", "a"), ("BITPOS", "p", "0", "0", "a"), ("BITPOS", "p"), ("BITPOS", "p", "0", "0", "1", "BIT", "x"),
    ("BITPOS", "nokey", "0"), ("BITPOS", "nokey", "1"), ("BITPOS", "nokey", "1", "0", "-1", "BIT"),
    ("SET", "z", b"\x00\x00"), ("BITPOS", "z", "1"), ("BITPOS", "z", "0"),
    ("SET", "ff", b"\xff\xff"), ("BITPOS", "ff", "0"), ("BITPOS", "ff", "0", "0", "-1"), ("BITPOS", "ff", "0", "0"),
    ("BITPOS", "ff", "0", "0", "-1", "BIT"), ("BITPOS", "ff", "0", "1"),
    ("SET", "e", ""), ("BITPOS", "e", "0"), ("BITPOS", "e", "1"), ("BITCOUNT", "e"), ("BITPOS", "e", "0", "0", "-1"),
    ("SET", "n", "12"), ("BITCOUNT", "n"), ("BITPOS", "n", "1"),
    _bitcount_missing_key,
]

SCENARIOS["bitop"] = [
    ("SET", "a", "foobar"), ("SET", "b", "abcdef"), ("SET", "c", "xy"),
    ("BITOP", "AND", "d", "a", "b"), ("GET", "d"), ("BITOP", "OR", "d", "a", "b"), ("GET", "d"),
    ("BITOP", "XOR", "d", "a", "b"), ("GET", "d"), ("BITOP", "NOT", "d", "a"), ("GET", "d"),
    ("BITOP", "and", "d", "a", "c"), ("GET", "d"), ("BITOP", "or", "d", "c", "a"), ("GET", "d"),
    ("BITOP", "xor", "d", "a", "c", "b"), ("GET", "d"), ("BITOP", "NOT", "d", "a", "b"), ("BITOP", "NOT", "d"),
    ("BITOP", "FOO", "d", "a"), ("BITOP", "DIFF", "d", "a", "b"), ("BITOP", "AND", "d"), ("BITOP", "AND"),
    ("BITOP", "AND", "d", "m1", "m2"), ("EXISTS", "d"), ("BITOP", "OR", "d", "a", "missing"), ("GET", "d"),
    ("BITOP", "AND", "d", "a", "missing"), ("GET", "d"), ("BITOP", "NOT", "d", "missing"), ("EXISTS", "d"),
    ("SET", "e", ""), ("BITOP", "NOT", "d", "e"), ("EXISTS", "d"), ("SET", "i", "7"), ("BITOP", "NOT", "d", "i"),
    ("GET", "d"), ("BITOP", "AND", "a", "a", "b"), ("GET", "a"),
    ("SETEX", "t", "100", "x"), ("BITOP", "OR", "t", "b"), ("TTL", "t"),
]

SCENARIOS["bitfield"] = [
    ("BITFIELD", "bf", "SET", "i8", "0", "100"), ("BITFIELD", "bf", "GET", "i8", "0"),
    ("BITFIELD", "bf", "INCRBY", "i8", "0", "100"), ("BITFIELD", "bf", "OVERFLOW", "SAT", "INCRBY", "i8", "0", "-100"),
    ("BITFIELD", "bf", "OVERFLOW", "SAT", "INCRBY", "i8", "0", "-200"),
    ("BITFIELD", "bf", "OVERFLOW", "FAIL", "INCRBY", "i8", "0", "-200"), ("BITFIELD", "bf", "GET", "i8", "0"),
    ("BITFIELD", "bf", "OVERFLOW", "WRAP", "INCRBY", "u8", "8", "300"), ("BITFIELD", "bf", "GET", "u8", "8"),
    ("BITFIELD", "bf", "OVERFLOW", "SAT", "INCRBY", "u8", "8", "300"), ("BITFIELD", "bf", "OVERFLOW", "SAT", "INCRBY", "u8", "8", "-300"),
    ("BITFIELD", "bf", "OVERFLOW", "FAIL", "SET", "u8", "8", "256"), ("BITFIELD", "bf", "OVERFLOW", "FAIL", "SET", "i8", "8", "-129"),
    ("BITFIELD", "bf", "OVERFLOW", "SAT", "SET", "i8", "8", "1000"), ("BITFIELD", "bf", "GET", "i8", "8"),
    ("BITFIELD", "bf", "SET", "u8", "0", "256"), ("BITFIELD", "bf", "GET", "u8", "0"),
    ("BITFIELD", "bf", "GET", "u64", "0"), ("BITFIELD", "bf", "GET", "i64", "0"), ("BITFIELD", "bf", "GET", "u63", "0"),
    ("BITFIELD", "bf", "GET", "i65", "0"), ("BITFIELD", "bf", "GET", "x8", "0"), ("BITFIELD", "bf", "GET", "i0", "0"),
    ("BITFIELD", "bf", "GET", "u0", "0"), ("BITFIELD", "bf", "GET", "I8", "0"), ("BITFIELD", "bf", "GET", "i", "0"),
    ("BITFIELD", "bf", "GET", "i8", "#1"), ("BITFIELD", "bf", "SET", "i8", "#2", "5"), ("BITFIELD", "bf", "GET", "u8", "16"),
    ("BITFIELD", "bf", "GET", "i8", "-1"), ("BITFIELD", "bf", "GET", "i8", "#-1"), ("BITFIELD", "bf", "GET", "i8", "abc"),
    ("BITFIELD", "bf", "GET", "i8", "4294967296"), ("BITFIELD", "bf", "GET", "i8", "4294967288"),
    ("BITFIELD", "bf", "OVERFLOW", "BAD", "GET", "i8", "0"), ("BITFIELD", "bf", "OVERFLOW"), ("BITFIELD", "bf"),
    ("BITFIELD", "bf", "GET", "i8"), ("BITFIELD", "bf", "SET", "i8", "0"), ("BITFIELD", "bf", "SET", "i8", "0", "abc"),
    ("BITFIELD", "bf", "INCRBY", "i8", "0", "1.5"), ("BITFIELD", "bf", "FOO", "i8", "0"),
    ("BITFIELD", "bf", "GET", "i8", "0", "SET", "i8", "0", "1", "INCRBY", "i8", "0", "1", "GET", "u4", "4"),
    ("BITFIELD", "bf", "INCRBY", "u2", "100", "1", "OVERFLOW", "SAT", "SET", "i4", "0", "-8", "INCRBY", "i4", "0", "-1"),
    ("BITFIELD", "bf", "SET", "i64", "0", I64_MIN), ("BITFIELD", "bf", "INCRBY", "i64", "0", "-1"),
    ("BITFIELD", "bf", "OVERFLOW", "SAT", "INCRBY", "i64", "0", "-1"), ("BITFIELD", "bf", "SET", "u63", "0", I64_MAX),
    ("BITFIELD", "bf", "OVERFLOW", "SAT", "INCRBY", "u63", "0", "1"), ("BITFIELD", "bf", "GET", "u63", "0"),
    ("BITFIELD", "bf", "OVERFLOW", "fail", "incrby", "u1", "0", "1"), ("BITFIELD", "bf", "overflow", "sat", "get", "i3", "1"),
    ("GET", "bf"), ("STRLEN", "bf"),
    ("BITFIELD_RO", "bf", "GET", "i8", "0"), ("BITFIELD_RO", "bf", "GET", "i8", "0", "GET", "u4", "4"),
    ("BITFIELD_RO", "bf", "SET", "i8", "0", "1"), ("BITFIELD_RO", "bf", "INCRBY", "i8", "0", "1"),
    ("BITFIELD_RO", "bf"), ("BITFIELD_RO", "bf", "OVERFLOW", "SAT", "GET", "i8", "0"), ("BITFIELD_RO",),
    ("BITFIELD", "nokey", "GET", "u8", "0"), ("EXISTS", "nokey"), ("BITFIELD_RO", "nokey", "GET", "i8", "100"),
    ("BITFIELD", "nk2", "SET", "u8", "16", "255"), ("GET", "nk2"),
    ("BITFIELD", "nk3", "OVERFLOW", "FAIL", "SET", "u8", "0", "256"), ("EXISTS", "nk3"),
    ("SET", "num", "5"), ("BITFIELD", "num", "GET", "u8", "0"), ("BITFIELD", "num", "INCRBY", "u8", "0", "1"), ("GET", "num"),
]

SCENARIOS["lcs"] = [
    ("MSET", "k1", "ohmytext", "k2", "mynewtext"), ("LCS", "k1", "k2"), ("LCS", "k1", "k2", "LEN"),
    ("LCS", "k1", "k2", "IDX"), ("LCS", "k1", "k2", "IDX", "MINMATCHLEN", "4"), ("LCS", "k1", "k2", "IDX", "WITHMATCHLEN"),
    ("LCS", "k1", "k2", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"), ("LCS", "k1", "k2", "WITHMATCHLEN", "IDX"),
    ("LCS", "k1", "k2", "MINMATCHLEN", "2", "IDX"), ("LCS", "k1", "k2", "LEN", "IDX"), ("LCS", "k1", "k2", "IDX", "LEN"),
    ("LCS", "k1", "k2", "LEN", "MINMATCHLEN", "2"), ("LCS", "k1", "k2", "LEN", "WITHMATCHLEN"),
    ("LCS", "k1", "k2", "MINMATCHLEN", "3"), ("LCS", "k1", "k2", "MINMATCHLEN", "abc"), ("LCS", "k1", "k2", "MINMATCHLEN"),
    ("LCS", "k1", "k2", "IDX", "MINMATCHLEN", "-1"), ("LCS", "k1", "k2", "IDX", "MINMATCHLEN", "100"),
    ("LCS", "k1", "k2", "FOO"), ("LCS", "k1", "k2", "idx", "withmatchlen"), ("LCS", "k1"), ("LCS",),
    ("LCS", "k1", "missing"), ("LCS", "missing", "missing2"), ("LCS", "missing", "k1", "LEN"),
    ("LCS", "missing", "k1", "IDX"), ("LCS", "k1", "k1"), ("LCS", "k1", "k1", "IDX", "WITHMATCHLEN"),
    ("MSET", "a", "GTAGGACA", "b", "AGCTAGGA"), ("LCS", "a", "b"), ("LCS", "a", "b", "IDX", "WITHMATCHLEN"),
    ("MSET", "x", "", "y", "abc"), ("LCS", "x", "y"), ("LCS", "x", "y", "LEN"), ("LCS", "x", "y", "IDX"),
    ("MSET", "n1", "12345", "n2", "2345"), ("LCS", "n1", "n2", "IDX"),
    ("MSET", "bin1", b"\x00\xff\r\n\x01", "bin2", b"\xff\r\x00\n"), ("LCS", "bin1", "bin2"), ("LCS", "bin1", "bin2", "IDX"),
]

SCENARIOS["binary_safety"] = [
    ("SET", BIN_KEY, BIN_VAL), ("GET", BIN_KEY), ("EXISTS", BIN_KEY), ("TYPE", BIN_KEY), ("STRLEN", BIN_KEY),
    ("APPEND", BIN_KEY, b"\x00"), ("GETRANGE", BIN_KEY, "0", "3"), S("KEYS", "*"), S("KEYS", b"k\x00*"),
    ("SET", b"\xff\xfe\xfd", b"\xc3\x28"), ("GET", b"\xff\xfe\xfd"), ("RENAME", b"\xff\xfe\xfd", b"\r\n"),
    ("GET", b"\r\n"), ("SET", b"*1\r\n$4\r\nPING\r\n", b"+OK\r\n"), ("GET", b"*1\r\n$4\r\nPING\r\n"),
    ("SET", "", "empty-key"), ("GET", ""), ("DEL", ""), ("GET", ""), ("SET", "k", ""), ("GET", "k"), ("STRLEN", "k"),
    ("MSET", b"\x00", b"\x00", b"\x00\x00", b""), ("MGET", b"\x00", b"\x00\x00", b"\x00\x00\x00"),
    ("SET", "utf8-\u00e9\u4e2d", "\U0001F600"), ("GET", "utf8-\u00e9\u4e2d"), ("STRLEN", "utf8-\u00e9\u4e2d"),
    ("ECHO", b"\x00\x01\x02\xff"), ("DBSIZE",),
]

SCENARIOS["unknown_and_arity"] = [
    ("FOO",), ("FOO", "a", "b"), ("foo", "x" * 200), ("FOO", "a" * 100, "b" * 100), ("FOO", "a\r\nb"),
    ("FOO", b"\xff\x00"), ("", ), ("", "a"), (" ",), ("GETT", "a"), ("SET-", "a", "b"), ("CLIENTS", "LIST"),
    ("CONFIG", "FOO"), ("COMMAND", "FOO"), ("OBJECT", "FOO", "k"), ("DEBUG", "NOSUCHSUB"), ("SLOWLOG", "FOO"),
    ("GET",), ("GET", "a", "b"), ("DEL",), ("EXISTS",), ("UNLINK",), ("TYPE",), ("TYPE", "a", "b"),
    ("STRLEN", "a", "b"), ("TTL",), ("PTTL", "a", "b"), ("EXPIRE", "a"), ("PEXPIRE",), ("PERSIST",), ("RENAME", "a"),
    ("RENAMENX", "a"), ("COPY", "a"), ("MOVE", "a"), ("KEYS",), ("KEYS", "a", "b"), ("SCAN",), ("RANDOMKEY", "x"),
    ("DBSIZE", "x"), ("FLUSHDB", "a", "b"), ("FLUSHALL", "a", "b"), ("TIME", "x"), ("MULTI", "x"), ("EXEC", "x"),
    ("DISCARD", "x"), ("WATCH",), ("UNWATCH", "x"), ("TOUCH",), ("EXPIRETIME",), ("PEXPIRETIME", "a", "b"),
    ("EXPIREAT", "a"), ("PEXPIREAT", "a"), ("SETNX", "a"), ("SETEX", "a"), ("PSETEX", "a", "1"), ("GETSET",),
    ("SUBSTR", "a"), ("LCS",), ("BITOP",), ("SELECT", "1", "2"),
    ("CONFIG",), ("CONFIG", "GET"), ("CONFIG", "SET", "hz"), ("CONFIG", "RESETSTAT", "x"), ("CLIENT", "ID", "x"),
    ("CLIENT", "KILL"), ("CLIENT", "PAUSE"), ("CLIENT", "REPLY"), ("OBJECT", "ENCODING"), ("DEBUG",),
    T("COMMAND", "INFO"), ("COMMAND", "COUNT", "x"), ("COMMAND", "GETKEYS"), ("SLOWLOG",), ("SLOWLOG", "LEN", "x"),
    ("INFO", "a", "b", "c"), ("ECHO",), ("HELLO", "3", "AUTH"), ("PING",),
]

# ---------------------------------------------------------------------------
# keys
# ---------------------------------------------------------------------------
SCENARIOS["keys_del_exists_type"] = [
    ("MSET", "a", "1", "b", "2", "c", "3"), ("EXISTS", "a"), ("EXISTS", "a", "a", "b", "nokey"),
    ("DEL", "a", "b", "nokey", "a"), ("EXISTS", "a", "b", "c"), ("UNLINK", "c", "c"), ("DBSIZE",),
    ("SET", "t", "v"), ("TYPE", "t"), ("TYPE", "nokey"), ("TOUCH", "t", "nokey", "t"), ("DEL", "nokey"),
    ("MSET", "x1", "1", "x2", "2", "x3", "3", "x4", "4", "x5", "5"), ("DEL", "x1", "x2", "x3", "x4", "x5", "x6"),
    ("DBSIZE",), ("RANDOMKEY",), ("DEL", "t"), ("RANDOMKEY",), ("DBSIZE",), ("SET", "only", "1"), ("RANDOMKEY",),
]

SCENARIOS["rename_copy_move"] = [
    ("SET", "a", "va"), ("RENAME", "a", "b"), ("GET", "b"), ("EXISTS", "a"), ("RENAME", "missing", "x"),
    ("RENAME", "b", "b"), ("GET", "b"), ("RENAME", "missing", "missing"),
    ("SET", "c", "vc"), ("RENAMENX", "b", "c"), ("RENAMENX", "b", "d"), ("MGET", "b", "c", "d"),
    ("RENAMENX", "d", "d"), ("RENAMENX", "missing", "z"),
    ("SET", "t", "v", "EX", "100"), ("RENAME", "t", "t2"), A(1, "TTL", "t2"), ("SET", "plain", "p"),
    ("RENAME", "t2", "plain"), A(1, "TTL", "plain"), ("SET", "t3", "v", "EX", "100"), ("SET", "nottl", "x"),
    ("RENAME", "nottl", "t3"), ("TTL", "t3"),
    ("COPY", "c", "c2"), ("GET", "c2"), ("COPY", "c", "c2"), ("SET", "c", "new"), ("COPY", "c", "c2", "REPLACE"),
    ("GET", "c2"), ("COPY", "c", "c"), ("COPY", "c", "c", "REPLACE"), ("COPY", "missing", "m2"),
    ("COPY", "c", "c3", "DB", "1"), ("COPY", "c", "c3", "DB", "1"), ("COPY", "c", "c3", "DB", "1", "REPLACE"),
    ("COPY", "c", "c", "DB", "1"), ("COPY", "c", "c", "DB", "0"), ("COPY", "c", "x", "DB", "16"), ("COPY", "c", "x", "DB", "-1"),
    ("COPY", "c", "x", "DB", "abc"), ("COPY", "c", "x", "DB"), ("COPY", "c", "x", "FOO"), ("COPY", "c", "x", "REPLACE", "REPLACE"),
    ("SET", "ct", "v", "EX", "100"), ("COPY", "ct", "ct2"), A(1, "TTL", "ct2"),
    ("SELECT", "1"), ("GET", "c3"), ("GET", "c"), ("SELECT", "0"),
    ("SET", "m", "vm"), ("MOVE", "m", "1"), ("EXISTS", "m"), ("SET", "m", "again"), ("MOVE", "m", "1"), ("GET", "m"),
    ("MOVE", "m", "0"), ("MOVE", "m", "16"), ("MOVE", "m", "-1"), ("MOVE", "m", "abc"), ("MOVE", "missing", "1"),
    ("SET", "mt", "v", "EX", "100"), ("MOVE", "mt", "2"), ("SELECT", "2"), A(1, "TTL", "mt"), ("GET", "mt"),
    ("MOVE", "mt", "0"), ("SELECT", "0"), ("GET", "mt"),
    ("SELECT", "1"), ("MGET", "m", "c3"), ("DBSIZE",), ("SELECT", "0"), ("DBSIZE",),
    ("RENAME", "a"), ("RENAME", "a", "b", "c"), ("COPY", "a"), ("MOVE", "a", "1", "2"),
    ("SET", BIN_KEY, "v"), ("RENAME", BIN_KEY, b"\x00"), ("COPY", b"\x00", b"\x01"), ("MGET", b"\x00", b"\x01"),
]

SCENARIOS["keys_patterns"] = [
    ("MSET", "hello", "1", "hallo", "1", "hxllo", "1", "hllo", "1", "heeeello", "1", "h[e]llo", "1",
     "a*b", "1", "a?b", "1", "a\\b", "1", "axb", "1", "H", "1", "a-z", "1", "-", "1", "^", "1", "]", "1",
     "foo:1", "1", "foo:2", "1", "foo:10", "1", "bar", "1", "", "empty-name"),
    S("KEYS", "*"), S("KEYS", "h?llo"), S("KEYS", "h*llo"), S("KEYS", "h[ae]llo"), S("KEYS", "h[^e]llo"),
    S("KEYS", "h[a-b]llo"), S("KEYS", "h[e-a]llo"), S("KEYS", "h[!e]llo"), S("KEYS", "a\\*b"), S("KEYS", "a\\?b"),
    S("KEYS", "a*b"), S("KEYS", "a?b"), S("KEYS", "a\\\\b"), S("KEYS", "*\\\\*"), S("KEYS", "["), S("KEYS", "[a"),
    S("KEYS", "\\"), S("KEYS", "h[\\]]llo"), S("KEYS", "[]]"), S("KEYS", "[\\]]"), S("KEYS", "*o"), S("KEYS", "h*"),
    S("KEYS", "?"), S("KEYS", "??"), S("KEYS", "*[*]*"), S("KEYS", ""), S("KEYS", "nomatch*"), S("KEYS", "foo:?"),
    S("KEYS", "foo:*"), S("KEYS", "foo:[0-9]"), S("KEYS", "foo:[0-9]*"), S("KEYS", "[-]"), S("KEYS", "[a-]*"),
    S("KEYS", "[^]"), S("KEYS", "[^^]"), S("KEYS", "**"), S("KEYS", "*h*l*l*o*"), S("KEYS", "h[a-e-x]llo"),
    S("KEYS", "[A-Z]"), S("KEYS", "[a-z]"), S("KEYS", "HELLO"), S("KEYS", "h\\ello"), S("KEYS", "hello\\"),
    S("KEYS", "*[a"), S("KEYS", "h[ae"), S("KEYS", "a[\\*]b"), S("KEYS", "a[*?]b"),
    ("SELECT", "5"), S("KEYS", "*"), ("SET", "db5key", "1"), S("KEYS", "*"), ("SELECT", "0"), S("KEYS", "db5*"),
]

SCENARIOS["select_dbs"] = [
    ("SET", "x", "db0"), ("SELECT", "1"), ("EXISTS", "x"), ("SET", "x", "db1"), ("SELECT", "15"), ("SET", "x", "db15"),
    ("DBSIZE",), ("SELECT", "0"), ("GET", "x"), ("SELECT", "1"), ("GET", "x"), ("SELECT", "15"), ("GET", "x"),
    ("FLUSHDB",), ("GET", "x"), ("SELECT", "1"), ("GET", "x"), ("FLUSHALL",), ("GET", "x"), ("SELECT", "0"), ("GET", "x"),
    ("SELECT", "3"), ("MSET", "a", "1", "b", "2"), ("SELECT", "4"), ("MGET", "a", "b"), ("SELECT", "3"),
    ("RENAME", "a", "c"), ("COPY", "c", "d", "DB", "4"), ("SELECT", "4"), ("MGET", "a", "b", "c", "d"), ("DBSIZE",),
]

SCENARIOS["expire_family"] = [
    ("SET", "a", "v"), ("TTL", "a"), ("PTTL", "a"), ("TTL", "nokey"), ("PTTL", "nokey"),
    ("EXPIRETIME", "a"), ("PEXPIRETIME", "a"), ("EXPIRETIME", "nokey"), ("PEXPIRETIME", "nokey"),
    ("EXPIRE", "a", "100"), A(1, "TTL", "a"), A(1000, "PTTL", "a"), T("EXPIRETIME", "a"),
    ("EXPIRE", "a", "100", "NX"), ("EXPIRE", "a", "50", "XX"), A(1, "TTL", "a"),
    ("EXPIRE", "a", "200", "GT"), A(1, "TTL", "a"), ("EXPIRE", "a", "100", "GT"), ("EXPIRE", "a", "50", "LT"),
    A(1, "TTL", "a"), ("EXPIRE", "a", "300", "LT"), ("EXPIRE", "a", "45", "gt"), ("EXPIRE", "a", "10", "lt"),
    ("EXPIRE", "a", "10", "NX", "XX"), ("EXPIRE", "a", "10", "GT", "LT"), ("EXPIRE", "a", "10", "NX", "GT"),
    ("EXPIRE", "a", "10", "NX", "LT"), ("EXPIRE", "a", "20", "XX", "GT"), ("EXPIRE", "a", "15", "XX", "LT"),
    ("EXPIRE", "a", "17", "XX", "XX"), ("EXPIRE", "a", "17", "NX", "NX"), ("EXPIRE", "a", "30", "GT", "GT"),
    A(1, "TTL", "a"),
    ("EXPIRE", "a", "10", "FOO"), ("EXPIRE", "a", "10", "NX", "FOO"), ("EXPIRE", "a", "abc", "NX"),
    ("PERSIST", "a"), ("PERSIST", "a"), ("TTL", "a"), ("PERSIST", "nokey"),
    ("EXPIRE", "a", "100", "GT"), ("TTL", "a"), ("EXPIRE", "a", "100", "XX"), ("TTL", "a"),
    ("EXPIRE", "a", "100", "LT"), A(1, "TTL", "a"), ("PERSIST", "a"), ("EXPIRE", "a", "100", "NX"), A(1, "TTL", "a"),
    ("EXPIRE", "nokey", "10"), ("EXPIRE", "nokey", "10", "NX"), ("PEXPIRE", "nokey", "10"),
    ("EXPIRE", "a", "abc"), ("EXPIRE", "a", "1.5"), ("EXPIRE", "a", ""), ("EXPIRE", "a", I64_MAX),
    ("EXPIRE", "a", "9223372036854775"), ("EXPIRE", "a", I64_MIN), ("PEXPIRE", "a", I64_MAX), ("PEXPIRE", "a", I64_MIN),
    ("EXPIREAT", "a", I64_MAX), ("PEXPIREAT", "a", I64_MAX), ("EXPIREAT", "a", I64_MIN),
    ("EXPIRE", "a", "9223372036854775808"),
    ("PEXPIRE", "a", "100000"), A(1000, "PTTL", "a"), A(1, "TTL", "a"), ("PEXPIRE", "a", "100000", "NX"),
    ("PEXPIRE", "a", "200000", "GT"), A(1000, "PTTL", "a"), ("PEXPIRE", "a", "1", "XX", "LT"),
    ("PEXPIRE", "a", "1", "XX", "LT", "NX"),
    ("SET", "b", "v"), ("EXPIRE", "b", "-1"), ("EXISTS", "b"), ("SET", "b", "v"), ("EXPIRE", "b", "0"), ("EXISTS", "b"),
    ("SET", "b", "v"), ("PEXPIRE", "b", "-100"), ("EXISTS", "b"), ("SET", "b", "v"), ("EXPIREAT", "b", "1"), ("EXISTS", "b"),
    ("SET", "b", "v"), ("PEXPIREAT", "b", "1"), ("EXISTS", "b"), ("SET", "b", "v"), ("EXPIRE", "b", "-1", "XX"),
    ("EXISTS", "b"), ("SET", "b", "v"), ("EXPIRE", "b", "-1", "NX"), ("EXISTS", "b"), ("SET", "b", "v", "EX", "100"),
    ("EXPIRE", "b", "-1", "GT"), ("EXISTS", "b"), ("EXPIRE", "b", "-1", "LT"), ("EXISTS", "b"),
    lambda: [("SET", "c", "v"), ("EXPIREAT", "c", _now() + 500), ("EXPIRETIME", "c"), A(2, "TTL", "c"),
             ("PEXPIREAT", "c", _now_ms() + 500000), A(2000, "PEXPIRETIME", "c"),
             ("PEXPIREAT", "c", 1900000000123), ("PEXPIRETIME", "c"), ("EXPIRETIME", "c"),
             ("EXPIREAT", "c", 1900000000, "GT"), ("EXPIREAT", "c", 1900000001, "GT"), ("EXPIRETIME", "c"),
             ("EXPIREAT", "c", 1800000000, "LT"), ("EXPIRETIME", "c"), ("PEXPIRETIME", "c"),
             ("EXPIREAT", "c", 1700000000), ("EXISTS", "c")],
    ("SET", "d", "v", "EX", "100"), ("SET", "d", "v2"), ("TTL", "d"), ("SET", "d", "v", "EX", "100"),
    ("APPEND", "d", "x"), A(1, "TTL", "d"), ("INCRBY", "num", "1"), ("EXPIRE", "num", "100"), ("INCR", "num"),
    A(1, "TTL", "num"), ("DEL", "num"), ("TTL", "num"),
    ("SETEX", "e", "100", "v"), ("GETEX", "e", "PERSIST"), ("TTL", "e"),
    ("EXPIRE", "e", "100", "NX", "GT"),
]

SCENARIOS["expiry_timing"] = [
    ("SET", "a", "v", "PX", "100"), ("SET", "b", "v", "PX", "5000"), ("PSETEX", "c", "100", "v"),
    ("SET", "keep", "v"), Sleep(0.25), ("GET", "a"), ("EXISTS", "a", "b", "c", "keep"), ("TTL", "a"),
    ("PTTL", "c"), ("TYPE", "a"), S("KEYS", "*"), ("SET", "d", "v", "PX", "100"), Sleep(0.25), ("APPEND", "d", "x"),
    ("GET", "d"), ("TTL", "d"), ("SET", "e", "1", "PX", "100"), Sleep(0.25), ("INCR", "e"), ("TTL", "e"),
    ("SET", "f", "v", "PX", "100"), Sleep(0.25), ("SETNX", "f", "new"), ("GET", "f"),
    ("SET", "g", "v", "PX", "100"), Sleep(0.25), ("RENAME", "g", "h"), ("SET", "i", "v", "PX", "100"), Sleep(0.25),
    ("SET", "i", "w", "XX"), ("MOVE", "i", "1"), ("COPY", "i", "j"), ("DBSIZE",),
]

SCENARIOS["debug_active_expire"] = [
    ("DEBUG", "SET-ACTIVE-EXPIRE", "0"), ("SET", "a", "v", "PX", "50"), ("SET", "b", "v", "PX", "50"),
    ("SET", "c", "v"), Sleep(0.3), ("DBSIZE",), ("EXISTS", "a"), ("DBSIZE",), T("SCAN", "0", "COUNT", "1000"),
    ("DEBUG", "SET-ACTIVE-EXPIRE", "1"), ("DEBUG", "SLEEP", "0"), ("DEBUG", "SLEEP", "0.01"),
    T("DEBUG", "OBJECT", "c"), ("DEBUG", "OBJECT", "nokey"), ("DEBUG", "SET-ACTIVE-EXPIRE"),
]
CLEANUP["debug_active_expire"] = [("DEBUG", "SET-ACTIVE-EXPIRE", "1")]

SCENARIOS["scan_basics"] = [
    ("MSET", "k1", "1", "k2", "2", "k3", "3", "other", "4"),
    T("SCAN", "0"), T("SCAN", "0", "COUNT", "1000"), T("SCAN", "0", "MATCH", "k*", "COUNT", "1000"),
    T("SCAN", "0", "TYPE", "string"), T("SCAN", "0", "TYPE", "list"), T("SCAN", "0", "match", "*", "count", "5", "type", "string"),
    ("SCAN", "abc"), T("SCAN", "-1"), ("SCAN", "1.5"), ("SCAN", "0", "COUNT", "0"), ("SCAN", "0", "COUNT", "-1"),
    ("SCAN", "0", "COUNT", "abc"), ("SCAN", "0", "FOO"), ("SCAN", "0", "MATCH"), ("SCAN", "0", "COUNT"),
    ("SCAN", "0", "TYPE"), ("SCAN", "18446744073709551616"),
    ("FLUSHDB",), ("SCAN", "0"), ("SCAN", "0", "MATCH", "*", "COUNT", "10"),
]

# ---------------------------------------------------------------------------
# transactions
# ---------------------------------------------------------------------------
SCENARIOS["multi_exec"] = [
    ("MULTI",), ("SET", "a", "1"), ("INCR", "a"), ("GET", "a"), ("EXEC",),
    ("MULTI",), ("EXEC",),
    ("MULTI",), ("SET", "a"), ("INCR", "a"), ("EXEC",), ("GET", "a"),
    ("MULTI",), ("NOSUCHCMD", "x"), ("SET", "a", "5"), ("EXEC",), ("GET", "a"),
    ("MULTI",), ("SET", "s", "str"), ("INCR", "s"), ("SET", "b", "2"), ("EXEC",), ("MGET", "s", "b"),
    ("MULTI",), ("MULTI",), ("SET", "c", "3"), ("EXEC",), ("GET", "c"),
    ("MULTI",), ("WATCH", "a"), ("SET", "c", "4"), ("EXEC",), ("GET", "c"),
    ("EXEC",), ("DISCARD",), ("MULTI",), ("SET", "d", "1"), ("DISCARD",), ("GET", "d"), ("EXEC",),
    ("MULTI",), ("SELECT", "1"), ("SET", "in1", "x"), ("SELECT", "0"), ("EXEC",), ("EXISTS", "in1"),
    ("SELECT", "1"), ("GET", "in1"), ("SELECT", "0"),
    ("MULTI",), ("PING",), ("ECHO", "e"), ("DBSIZE",), ("EXEC",),
    ("MULTI",), ("SET", "x", "1", "EX", "0"), ("SET", "y", "1"), ("EXEC",), ("EXISTS", "y"),
    ("MULTI",), ("GET",), ("EXEC",), ("MULTI",), ("EXEC", "x"), ("DISCARD",),
    ("MULTI",), ("MSET", "m1", "1", "m2", "2"), ("RENAME", "m1", "m3"), ("COPY", "m2", "m4"), ("DEL", "m2"),
    ("EXEC",), ("MGET", "m1", "m2", "m3", "m4"),
    ("MULTI",), ("SET", "q", "1"), ("DISCARD",), ("EXISTS", "q"),
]

SCENARIOS["watch"] = [
    ("SET", "a", "1"), ("WATCH", "a"), ("SET", "a", "2"), ("MULTI",), ("GET", "a"), ("EXEC",),
    ("WATCH", "a"), ("MULTI",), ("GET", "a"), ("EXEC",),
    ("WATCH", "a"), ("UNWATCH",), ("SET", "a", "3"), ("MULTI",), ("GET", "a"), ("EXEC",),
    ("WATCH", "a", "b", "nokey"), ("SET", "nokey", "1"), ("MULTI",), ("PING",), ("EXEC",),
    ("WATCH", "a"), ("MULTI",), ("WATCH", "b"), ("EXEC",),
    ("WATCH", "a"), ("GET", "a"), ("MULTI",), ("INCR", "a"), ("EXEC",),
    ("WATCH", "a"), ("DEL", "a"), ("MULTI",), ("PING",), ("EXEC",),
    ("WATCH", "gone"), ("MULTI",), ("PING",), ("EXEC",),
    ("SET", "e", "v", "EX", "100"), ("WATCH", "e"), ("EXPIRE", "e", "200"), ("MULTI",), ("PING",), ("EXEC",),
    ("WATCH", "e"), ("PERSIST", "e"), ("MULTI",), ("PING",), ("EXEC",),
    ("WATCH", "e"), ("MULTI",), ("DISCARD",), ("SET", "e", "x"), ("MULTI",), ("PING",), ("EXEC",),
    ("SELECT", "1"), ("SET", "a", "db1"), ("SELECT", "0"), ("WATCH", "a"), ("SELECT", "1"), ("SET", "a", "db1b"),
    ("SELECT", "0"), ("MULTI",), ("PING",), ("EXEC",),
    ("WATCH", "f"), ("FLUSHDB",), ("MULTI",), ("PING",), ("EXEC",),
    ("SET", "f", "1"), ("WATCH", "f"), ("FLUSHALL",), ("MULTI",), ("PING",), ("EXEC",),
    ("SET", "g", "1"), ("WATCH", "g"), ("RENAME", "g", "h"), ("MULTI",), ("PING",), ("EXEC",),
    ("WATCH", "h"), ("MULTI",), ("NOSUCH",), ("EXEC",), ("SET", "h", "2"), ("MULTI",), ("PING",), ("EXEC",),
]

# ---------------------------------------------------------------------------
# server
# ---------------------------------------------------------------------------
SCENARIOS["server_commands"] = [
    ("DBSIZE",), ("MSET", "a", "1", "b", "2"), ("DBSIZE",), ("FLUSHDB",), ("DBSIZE",), ("MSET", "a", "1", "b", "2"),
    ("FLUSHDB", "ASYNC"), ("DBSIZE",), ("SET", "a", "1"), ("FLUSHDB", "SYNC"), ("DBSIZE",), ("FLUSHDB", "FOO"),
    ("FLUSHDB", "async"), ("FLUSHALL", "FOO"), ("SET", "a", "1"), ("FLUSHALL", "ASYNC"), ("DBSIZE",),
    ("FLUSHALL", "SYNC"), ("FLUSHALL", "sync"), T("TIME"), T("INFO"), T("INFO", "server"), T("INFO", "keyspace"),
    T("INFO", "clients"), T("INFO", "stats"), T("INFO", "nosuchsection"), T("INFO", "all"), T("INFO", "everything"),
    T("INFO", "server", "clients"),
    ("CONFIG", "GET", "databases"), ("CONFIG", "GET", "hz"), ("CONFIG", "GET", "timeout"),
    ("CONFIG", "GET", "slowlog-max-len"), ("CONFIG", "GET", "tcp-keepalive"), ("CONFIG", "GET", "proto-max-bulk-len"),
    ("CONFIG", "GET", "client-query-buffer-limit"), ("CONFIG", "GET", "slowlog-log-slower-than"),
    ("CONFIG", "GET", "requirepass"), ("CONFIG", "GET", "protected-mode"), T("CONFIG", "GET", "maxclients"),
    ("CONFIG", "GET", "nosuchparam"), ("CONFIG", "GET", "nosuch*"), S("CONFIG", "GET", "slowlog*"),
    S("CONFIG", "GET", "hz", "databases"), S("CONFIG", "GET", "HZ"), S("CONFIG", "GET", "hz", "hz"),
    ("CONFIG", "SET", "hz", "20"), ("CONFIG", "GET", "hz"), ("CONFIG", "SET", "hz", "abc"),
    ("CONFIG", "SET", "hz", "10"), ("CONFIG", "SET", "nosuchparam", "1"), ("CONFIG", "SET", "hz"),
    ("CONFIG", "SET", "slowlog-max-len", "64", "hz", "11"), S("CONFIG", "GET", "slowlog-max-len", "hz"),
    ("CONFIG", "SET", "slowlog-max-len", "128", "hz", "10"), ("CONFIG", "SET", "hz", "12", "hz", "13"),
    ("CONFIG", "SET", "timeout", "-1"), ("CONFIG", "SET", "databases", "32"),
    ("CONFIG", "RESETSTAT"), ("CONFIG", "REWRITE"), ("CONFIG", "FOO"), T("CONFIG", "HELP"),
    ("SLOWLOG", "RESET"), T("SLOWLOG", "LEN"), T("SLOWLOG", "GET"), T("SLOWLOG", "GET", "5"), T("SLOWLOG", "GET", "-1"),
    ("SLOWLOG", "GET", "abc"), ("SLOWLOG", "GET", "-2"), ("SLOWLOG", "FOO"), T("SLOWLOG", "HELP"),
    ("DEBUG", "SLEEP", "0"), T("DEBUG", "OBJECT", "nokey"), ("SET", "o", "v"), T("DEBUG", "OBJECT", "o"),
]
CLEANUP["server_commands"] = [("CONFIG", "SET", "hz", "10"), ("CONFIG", "SET", "slowlog-max-len", "128")]

SCENARIOS["command_introspection"] = [
    T("COMMAND", "COUNT"), ("COMMAND", "INFO", "get"), ("COMMAND", "INFO", "GET"), ("COMMAND", "INFO", "nosuch"),
    ("COMMAND", "INFO", "get", "nosuch"), T("COMMAND", "INFO", "set", "mget", "incr"), T("COMMAND", "INFO"),
    ("COMMAND", "GETKEYS", "set", "a", "b"), ("COMMAND", "GETKEYS", "mset", "a", "1", "b", "2"),
    ("COMMAND", "GETKEYS", "mget", "a", "b", "c"), 
    # Redis 7.2 gave GETKEYS arity -3 (redis#11201); Debian's 7.0 still says -4.
    X(b"-ERR Invalid number of arguments specified for command\r\n", "COMMAND", "GETKEYS", "get"),
    ("COMMAND", "GETKEYS", "nosuch", "a"),
    X(b"-ERR The command has no key arguments\r\n", "COMMAND", "GETKEYS", "ping"), ("COMMAND", "GETKEYS", "rename", "a", "b"), ("COMMAND", "GETKEYS", "lcs", "a", "b"),
    ("COMMAND", "GETKEYS", "bitop", "and", "d", "a", "b"), ("COMMAND", "GETKEYS", "copy", "a", "b", "DB", "1"),
    ("COMMAND", "GETKEYSANDFLAGS", "set", "a", "b"), ("COMMAND", "GETKEYSANDFLAGS", "get", "a"),
    ("COMMAND", "GETKEYSANDFLAGS", "del", "a", "b"), ("COMMAND", "GETKEYSANDFLAGS", "rename", "a", "b"),
    T("COMMAND", "DOCS", "get"), ("COMMAND", "DOCS", "nosuch"), T("COMMAND", "LIST"),
    ("COMMAND", "LIST", "FILTERBY", "PATTERN", "xyz*"), ("COMMAND", "LIST", "FILTERBY", "FOO", "x"),
    T("COMMAND"), ("COMMAND", "FOO"), T("COMMAND", "HELP"),
]


def scenario_names():
    return list(SCENARIOS)


# ---------------------------------------------------------------------------
# generated sweeps (option combinations, index ranges, numeric formatting)
# ---------------------------------------------------------------------------

def _set_option_combos():
    import itertools
    fut = _now() + 1000
    fut_ms = _now_ms() + 1000000
    opts = [("NX",), ("XX",), ("GET",), ("KEEPTTL",), ("EX", "100"), ("PX", "100000"),
            ("EXAT", str(fut)), ("PXAT", str(fut_ms))]
    steps = []
    for n in range(0, 4):
        for combo in itertools.permutations(opts, n) if n <= 2 else itertools.combinations(opts, n):
            flat = [x for o in combo for x in o]
            for state in ("missing", "plain", "ttl"):
                steps.append(("DEL", "k"))
                if state == "plain":
                    steps.append(("SET", "k", "old"))
                elif state == "ttl":
                    steps.append(("SET", "k", "old", "EX", "500"))
                steps.append(("SET", "k", "new") + tuple(flat))
                steps.append(("GET", "k"))
                steps.append(A(2000, "PTTL", "k"))
    return steps


def _getex_option_combos():
    import itertools
    opts = [("EX", "100"), ("PX", "100000"), ("EXAT", str(_now() + 1000)), ("PXAT", str(_now_ms() + 1000000)),
            ("PERSIST",)]
    steps = []
    for n in range(0, 3):
        for combo in itertools.permutations(opts, n):
            flat = [x for o in combo for x in o]
            for state in ("missing", "plain", "ttl"):
                steps.append(("DEL", "k"))
                if state == "plain":
                    steps.append(("SET", "k", "v"))
                elif state == "ttl":
                    steps.append(("SET", "k", "v", "EX", "500"))
                steps.append(("GETEX", "k") + tuple(flat))
                steps.append(A(2000, "PTTL", "k"))
    return steps


def _expire_option_combos():
    import itertools
    flags = ["NX", "XX", "GT", "LT"]
    steps = []
    for n in range(0, 3):
        for combo in itertools.permutations(flags, n):
            for state in ("missing", "plain", "ttl"):
                for secs in ("50", "400", "1000", "-1"):  # never equal to the 500s state TTL (GT/LT race)
                    steps.append(("DEL", "k"))
                    if state == "plain":
                        steps.append(("SET", "k", "v"))
                    elif state == "ttl":
                        steps.append(("SET", "k", "v", "EX", "500"))
                    steps.append(("EXPIRE", "k", secs) + tuple(combo))
                    steps.append(A(1, "TTL", "k"))
    return steps


SCENARIOS["gen_set_option_combinations"] = [_set_option_combos]
SCENARIOS["gen_getex_option_combinations"] = [_getex_option_combos]
SCENARIOS["gen_expire_option_combinations"] = [_expire_option_combos]


def _range_sweeps():
    idx = [str(i) for i in range(-9, 10)]
    steps = [("SET", "s", "foobar"), ("SET", "p", b"\x00\xff\xf0\x0f\x80\x01"), ("SET", "e", "")]
    for key in ("s", "e", "nokey"):
        for a in idx:
            for b in idx:
                steps.append(("GETRANGE", key, a, b))
    for key in ("s", "p", "e"):
        for a in idx:
            for b in idx:
                steps.append(("BITCOUNT", key, a, b))
                steps.append(("BITPOS", key, "1", a, b))
                steps.append(("BITPOS", key, "0", a, b))
        for a in [str(i) for i in range(-50, 50, 7)]:
            for b in [str(i) for i in range(-50, 50, 9)]:
                steps.append(("BITCOUNT", key, a, b, "BIT"))
                steps.append(("BITPOS", key, "1", a, b, "BIT"))
                steps.append(("BITPOS", key, "0", a, b, "BIT"))
        for a in idx:
            steps.append(("BITPOS", key, "0", a))
            steps.append(("BITPOS", key, "1", a))
    for off in ("0", "1", "5", "6", "7", "100"):
        steps += [("SET", "r", "hello"), ("SETRANGE", "r", off, "XY"), ("GET", "r"),
                  ("SETRANGE", "r", off, ""), ("STRLEN", "r")]
    return steps


SCENARIOS["gen_range_index_sweeps"] = [_range_sweeps]


def _bitfield_sweep():
    steps = []
    types = ["i1", "i2", "i7", "i8", "i13", "i32", "i63", "i64", "u1", "u2", "u7", "u8", "u13", "u32", "u62", "u63"]
    incs = ["1", "-1", "100", "-100", "1000000", "-1000000", I64_MAX, I64_MIN, "0"]
    for ow in ("WRAP", "SAT", "FAIL"):
        for t in types:
            steps.append(("DEL", "bf"))
            steps.append(("BITFIELD", "bf", "SET", t, "3", "5"))
            for inc in incs:
                steps.append(("BITFIELD", "bf", "OVERFLOW", ow, "INCRBY", t, "3", inc, "GET", t, "3"))
            steps.append(("BITFIELD", "bf", "OVERFLOW", ow, "SET", t, "#1", I64_MAX, "SET", t, "#1", I64_MIN))
            steps.append(("GET", "bf"))
    return steps


SCENARIOS["gen_bitfield_overflow_sweep"] = [_bitfield_sweep]


def _float_sweep():
    pairs = [("0.1", "0.2"), ("1", "1e17"), ("1", "1e-17"), ("123456789.123456789", "0"), ("3.0", "0"),
             ("-0.0", "0"), ("1", "1e20"), ("1", "1e21"), ("0", "5e-324"), ("0", "1.7976931348623157e308"),
             ("1.1", "2.2"), ("10", "-10"), ("1e10", "0.00001"), ("0", "-1.5"), ("0", "3.14159265358979323846"),
             ("9007199254740993", "0"), ("0", "0.3333333333333333"), ("100", "0.000000001"), ("0", "1e-5"),
             ("0", "123e-2"), ("0", "  2"), ("0", "2.")]
    steps = []
    for base, inc in pairs:
        steps += [("SET", "f", base), ("INCRBYFLOAT", "f", inc), ("GET", "f"), ("OBJECT", "ENCODING", "f")]
    return steps


SCENARIOS["gen_incrbyfloat_formatting"] = [_float_sweep]


# ---------------------------------------------------------------------------
# Scenarios of other command groups live in diff_scenarios_<group>.py files, each with its own
# SCENARIOS (and optionally CLEANUP) dict; they are merged here.
# ---------------------------------------------------------------------------
def _load_group_files():
    import glob
    import importlib
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    for path in sorted(glob.glob(os.path.join(here, "diff_scenarios_*.py"))):
        mod = importlib.import_module(os.path.basename(path)[:-3])
        for name in mod.SCENARIOS:
            assert name not in SCENARIOS, "scenario %r defined twice" % name
        SCENARIOS.update(mod.SCENARIOS)
        CLEANUP.update(getattr(mod, "CLEANUP", {}))


_load_group_files()
