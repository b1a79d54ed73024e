"""Differential scenarios of the hash group (see diff_scenarios.py for the step syntax)."""

from differential import S, X

BIN_F = b"f\x00\r\n\xff bin"
BIN_V = b"\x00\r\n\x80\xff\r\n$3\r\n*1\r\n"
I64_MAX = "9223372036854775807"
I64_MIN = "-9223372036854775808"
LONG = "x" * 65

SCENARIOS = {}
CLEANUP = {}

SCENARIOS["hash_basics"] = [
    ("HSET", "h", "a", "1"), ("HSET", "h", "b", "2", "c", "3"), ("HSET", "h", "a", "10", "d", "4"),
    ("HSET", "h", "a"), ("HSET", "h", "a", "1", "b"), ("HMSET", "h", "a"), ("HMSET", "h", "a", "1", "b"),
    ("HGET", "h", "a"), ("HGET", "h", "zz"), ("HGET", "nokey", "a"),
    ("HMGET", "h", "a", "zz", "b"), ("HMGET", "nokey", "a", "b"),
    ("HLEN", "h"), ("HLEN", "nokey"),
    ("HSTRLEN", "h", "a"), ("HSTRLEN", "h", "zz"), ("HSTRLEN", "nokey", "a"),
    ("HEXISTS", "h", "a"), ("HEXISTS", "h", "zz"), ("HEXISTS", "nokey", "a"),
    ("HKEYS", "h"), ("HVALS", "h"), ("HGETALL", "h"),
    ("HKEYS", "nokey"), ("HVALS", "nokey"), ("HGETALL", "nokey"),
    ("HMSET", "h", "e", "5", "f", "6"), ("HGETALL", "h"),
    ("HSETNX", "h", "a", "x"), ("HSETNX", "h", "new", "y"), ("HSETNX", "h2", "f", "v"),
    ("HGET", "h", "new"), ("HGET", "h2", "f"),
    ("HDEL", "h", "a", "zz", "b", "a"), ("HDEL", "nokey", "a"), ("HGETALL", "h"),
    ("HDEL", "h2", "f"), ("EXISTS", "h2"),
    ("HDEL", "h", "c", "d", "e", "f", "new", "extra"), ("EXISTS", "h"), ("TYPE", "h"),
    ("HSET", "h", "a", "1"), ("HSET", "h", "a", "22"), ("HGETALL", "h"),
    ("HSET", "h", "", ""), ("HGET", "h", ""), ("HSTRLEN", "h", ""),
    ("HSET", "h", BIN_F, BIN_V), ("HGET", "h", BIN_F), ("HGETALL", "h"),
    ("HSTRLEN", "h", BIN_F),
    ("HGET",), ("HGET", "h"), ("HLEN",), ("HDEL", "h"), ("HKEYS", "h", "x"),
    ("HSETNX", "h", "a"), ("HEXISTS", "h"), ("HMGET", "h"),
]

SCENARIOS["hash_wrongtype"] = [
    ("SET", "s", "v"),
    ("HSET", "s", "a", "1"), ("HMSET", "s", "a", "1"), ("HSETNX", "s", "a", "1"),
    ("HGET", "s", "a"), ("HMGET", "s", "a"), ("HDEL", "s", "a"), ("HLEN", "s"),
    ("HSTRLEN", "s", "a"), ("HEXISTS", "s", "a"), ("HKEYS", "s"), ("HVALS", "s"),
    ("HGETALL", "s"), ("HINCRBY", "s", "a", "1"), ("HINCRBYFLOAT", "s", "a", "1"),
    ("HRANDFIELD", "s"), ("HRANDFIELD", "s", "2"), ("HSCAN", "s", "0"),
    ("HINCRBY", "s", "a", "x"), ("HINCRBYFLOAT", "s", "a", "x"), ("HSCAN", "s", "x"),
    ("HSET", "h", "a", "1"), ("GET", "h"), ("APPEND", "h", "x"), ("TYPE", "h"),
]

SCENARIOS["hash_incr"] = [
    ("HINCRBY", "h", "n", "5"), ("HINCRBY", "h", "n", "-7"), ("HGET", "h", "n"),
    ("HINCRBY", "h", "n", "x"), ("HINCRBY", "h", "n", "1.5"), ("HINCRBY", "h", "n", ""),
    ("HINCRBY", "nokey", "n", "x"), ("EXISTS", "nokey"),
    ("HSET", "h", "s", "abc", "sp", " 1", "z", "01", "big", I64_MAX, "small", I64_MIN),
    ("HINCRBY", "h", "s", "1"), ("HINCRBY", "h", "sp", "1"), ("HINCRBY", "h", "z", "1"),
    ("HINCRBY", "h", "big", "1"), ("HINCRBY", "h", "big", "0"), ("HINCRBY", "h", "small", "-1"),
    ("HINCRBY", "h", "small", I64_MAX), ("HINCRBY", "h", "n", I64_MIN),
    ("HINCRBY", "h", "n", "99999999999999999999"),
    ("HINCRBYFLOAT", "h", "f", "10.5"), ("HINCRBYFLOAT", "h", "f", "0.1"), ("HGET", "h", "f"),
    ("HINCRBYFLOAT", "h", "f", "-5.0e3"), ("HINCRBYFLOAT", "h", "n", "1"),
    ("HINCRBYFLOAT", "h", "f", "abc"), ("HINCRBYFLOAT", "h", "f", ""),
    ("HINCRBYFLOAT", "h", "s", "1"), ("HINCRBYFLOAT", "h", "sp", "1"),
    ("HINCRBYFLOAT", "h", "z", "1"),
    ("HINCRBYFLOAT", "h", "f", "inf"), ("HINCRBYFLOAT", "h", "f", "-inf"),
    ("HINCRBYFLOAT", "h", "f", "nan"), ("HINCRBYFLOAT", "h", "f", "1e5000"),
    ("HSET", "h", "huge", "1e4932"), ("HINCRBYFLOAT", "h", "huge", "1e4932"),
    ("HINCRBYFLOAT", "h", "g", "3.0"), ("HINCRBYFLOAT", "h", "g", "1e20"),
    ("HINCRBYFLOAT", "h", "g", "-1e20"), ("HINCRBYFLOAT", "h", "e", "1.23e-5"),
    ("HINCRBYFLOAT", "h", "i", "5"), ("HINCRBY", "h", "i", "1"),
    ("HINCRBYFLOAT", "nokey2", "f", "nan"), ("EXISTS", "nokey2"),
    ("HGETALL", "h"), ("OBJECT", "ENCODING", "h"),
    ("HINCRBY", "h", "n"), ("HINCRBYFLOAT", "h", "n"),
]

SCENARIOS["hash_encoding"] = [
    # Debian's 7.0 build defaults to 512 entries; Redis 7.2 (and darner) to 128.
    ("CONFIG", "SET", "hash-max-listpack-entries", "128"),
    ("CONFIG", "SET", "hash-max-listpack-value", "64"),
    ("HSET", "h", "a", "1"), ("OBJECT", "ENCODING", "h"),
    ("HSET", "h", "b", "x" * 64), ("OBJECT", "ENCODING", "h"),
    ("HSET", "h", "c", LONG), ("OBJECT", "ENCODING", "h"), ("HDEL", "h", "c"),
    ("OBJECT", "ENCODING", "h"),
    ("HSET", "h2", LONG, "1"), ("OBJECT", "ENCODING", "h2"),
    ("HSETNX", "h3", "f", LONG), ("OBJECT", "ENCODING", "h3"),
    ("HINCRBYFLOAT", "h4", "f", "0.1"), ("OBJECT", "ENCODING", "h4"),
    ("HSET", "h5", "a", "1", "b", LONG, "c", "3"), ("OBJECT", "ENCODING", "h5"), ("HLEN", "h5"),
] + [("HSET", "big", "f%d" % i, str(i)) for i in range(128)] + [
    ("OBJECT", "ENCODING", "big"), ("HGETALL", "big"),
    ("HSET", "big", "f128", "x"), ("OBJECT", "ENCODING", "big"), ("HLEN", "big"),
    S("HGETALL", "big"), S("HKEYS", "big"), S("HVALS", "big"),
    ("HGET", "big", "f77"), ("HSTRLEN", "big", "f100"), ("HEXISTS", "big", "f128"),
    ("HMGET", "big", "f0", "f128", "nope"), ("HINCRBY", "big", "f5", "10"),
    ("HDEL", "big", "f0", "f1", "nope"), ("HLEN", "big"), ("OBJECT", "ENCODING", "big"),
    ("CONFIG", "SET", "hash-max-listpack-entries", "2"),
    ("HSET", "small", "a", "1", "b", "2"), ("OBJECT", "ENCODING", "small"),
    ("HSET", "small", "c", "3"), ("OBJECT", "ENCODING", "small"),
    ("CONFIG", "SET", "hash-max-listpack-value", "3"),
    ("HSET", "small2", "abc", "abc"), ("OBJECT", "ENCODING", "small2"),
    ("HSET", "small3", "abcd", "1"), ("OBJECT", "ENCODING", "small3"),
    ("CONFIG", "SET", "hash-max-listpack-entries", "0"),
    ("HSET", "zero", "a", "1"), ("OBJECT", "ENCODING", "zero"),
]
CLEANUP["hash_randfield"] = [("CONFIG", "SET", "hash-max-listpack-entries", "128")]
CLEANUP["hash_encoding"] = [
    ("CONFIG", "SET", "hash-max-listpack-entries", "128"),
    ("CONFIG", "SET", "hash-max-listpack-value", "64"),
]

SCENARIOS["hash_randfield"] = [
    ("CONFIG", "SET", "hash-max-listpack-entries", "128"),
    ("HRANDFIELD", "nokey"), ("HRANDFIELD", "nokey", "5"), ("HRANDFIELD", "nokey", "-5"),
    ("HRANDFIELD", "nokey", "5", "WITHVALUES"), ("HRANDFIELD", "nokey", "0"),
    ("HSET", "one", "f", "v"),
    ("HRANDFIELD", "one"), ("HRANDFIELD", "one", "0"), ("HRANDFIELD", "one", "0", "WITHVALUES"),
    ("HRANDFIELD", "one", "1"), ("HRANDFIELD", "one", "1", "WITHVALUES"),
    ("HRANDFIELD", "one", "5"), ("HRANDFIELD", "one", "5", "withvalues"),
    ("HRANDFIELD", "one", "-3"), ("HRANDFIELD", "one", "-3", "WITHVALUES"),
    ("HRANDFIELD", "one", "-1", "WITHVALUES"),
    ("HSET", "h", "a", "1", "b", "2", "c", "3"),
    ("HRANDFIELD", "h", "3"), ("HRANDFIELD", "h", "10", "WITHVALUES"), ("HRANDFIELD", "h", "0"),
    ("HRANDFIELD", "h", "x"), ("HRANDFIELD", "h", "1.5"), ("HRANDFIELD", "h", "1", "WITHVALUE"),
    ("HRANDFIELD", "h", "1", "WITHVALUES", "x"), ("HRANDFIELD", "nokey", "x"),
    ("HRANDFIELD", "nokey", "1", "bad"),
    ("HRANDFIELD", "h", I64_MIN), ("HRANDFIELD", "h", I64_MAX, "WITHVALUES"),
    ("HRANDFIELD", "h", "-" + I64_MAX, "WITHVALUES"),
    ("HRANDFIELD", "h", "-4611686018427387904", "WITHVALUES"),
    ("HRANDFIELD", "h", "4611686018427387904", "WITHVALUES"),
    ("HRANDFIELD", "h", "4611686018427387903", "WITHVALUES"),
] + [("HSET", "big", "f%d" % i, str(i)) for i in range(200)] + [
    S("HRANDFIELD", "big", "200"), S("HRANDFIELD", "big", "1000", "WITHVALUES"),
    ("HRANDFIELD", "big", "0", "WITHVALUES"),
]

SCENARIOS["hash_scan"] = [
    ("HSCAN", "nokey", "0"), ("HSCAN", "nokey", "0", "COUNT", "x"), ("HSCAN", "nokey", "x"),
    ("HSET", "h", "a1", "1", "b2", "2", "a3", "3", BIN_F, BIN_V),
    ("HSCAN", "h", "0"), ("HSCAN", "h", "0", "COUNT", "1"), ("HSCAN", "h", "0", "MATCH", "a*"),
    ("HSCAN", "h", "0", "match", "*"), ("HSCAN", "h", "0", "MATCH", "b?", "COUNT", "100"),
    ("HSCAN", "h", "123"), ("HSCAN", "h", "-1"), ("HSCAN", "h", ""),
    ("HSCAN", "h", "x"), ("HSCAN", "h", "1.5"), ("HSCAN", "h", "18446744073709551616"),
    ("HSCAN", "h", "0", "COUNT", "0"), ("HSCAN", "h", "0", "COUNT", "-1"),
    ("HSCAN", "h", "0", "COUNT", "x"), ("HSCAN", "h", "0", "COUNT"), ("HSCAN", "h", "0", "MATCH"),
    ("HSCAN", "h", "0", "FOO", "bar"),
    X(b"*2\r\n$1\r\n0\r\n*3\r\n$2\r\na1\r\n$2\r\nb2\r\n$2\r\na3\r\n",
      "HSCAN", "h", "0", "MATCH", "[ab]*", "NOVALUES"),
    X(b"*2\r\n$1\r\n0\r\n*0\r\n", "HSCAN", "nokey", "0", "NOVALUES"),
    ("HSCAN",), ("HSCAN", "h"),
]
