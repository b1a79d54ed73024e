"""Differential scenarios for the set group (cmd/set.rs), merged into diff_scenarios.SCENARIOS.

Darner runs with 2 threads here: keys "a" and "c" live on one shard, "b" on the other, so the
multi-key commands over a/b/c cross shards; "{t}x" keys share one shard.

Where the Debian reference (redis 7.0) differs from Redis 7.2 (7.2 added the listpack
encoding for small sets of strings), the step is an X() golden reply.
"""

from differential import S, T, X

SCENARIOS = {}
CLEANUP = {}

WRONG = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
INTSET = b"$6\r\nintset\r\n"
LISTPACK = b"$8\r\nlistpack\r\n"
HASHTABLE = b"$9\r\nhashtable\r\n"
BIN = b"\x00\r\n\xff bin"


def enc(key, want):
    """OBJECT ENCODING as Redis 7.2 reports it (7.0 has no listpack sets)."""
    if want == LISTPACK:
        return X(LISTPACK, "OBJECT", "ENCODING", key)
    return ("OBJECT", "ENCODING", key)


SCENARIOS["set_basics"] = [
    ("SADD", "s", "1", "2", "3", "2"), ("SCARD", "s"), ("SMEMBERS", "s"),
    ("SISMEMBER", "s", "2"), ("SISMEMBER", "s", "02"), ("SISMEMBER", "s", "x"),
    ("SISMEMBER", "nokey", "x"), ("SMISMEMBER", "s", "1", "x", "3"), ("SMISMEMBER", "nokey", "a", "b"),
    ("SADD", "s", "1"), ("SREM", "s", "1", "1", "9"), ("SCARD", "s"), ("SREM", "nokey", "a"),
    ("SREM", "s", "2", "3", "4"), ("EXISTS", "s"), ("SCARD", "s"), ("SMEMBERS", "s"),
    ("SADD", "t", "hello", "", BIN), S("SMEMBERS", "t"), ("SISMEMBER", "t", ""),
    ("SISMEMBER", "t", BIN), ("SREM", "t", BIN), S("SMEMBERS", "t"),
    ("SADD", "n", "-0", "0", "01", "1", "-1", " 1", "9223372036854775808", "-9223372036854775808"),
    ("SCARD", "n"), S("SMEMBERS", "n"), ("SISMEMBER", "n", "1"), ("SISMEMBER", "n", "-0"),
    # arity
    ("SADD", "s"), ("SADD",), ("SREM", "s"), ("SCARD",), ("SCARD", "a", "b"), ("SISMEMBER", "s"),
    ("SMISMEMBER", "s"), ("SMEMBERS",), ("SMOVE", "a", "b"), ("SINTER",), ("SINTERSTORE", "d"),
    ("SUNION",), ("SDIFF",), ("SUNIONSTORE", "d"), ("SDIFFSTORE", "d"), ("SPOP",),
    ("SRANDMEMBER",), ("SSCAN", "s"), ("SINTERCARD", "1"),
    ("TYPE", "t"),
]

SCENARIOS["set_wrongtype"] = [
    ("SET", "str", "v"), ("SADD", "s", "1"), ("SADD", "{t}s", "a"), ("SET", "{t}str", "v"),
    ("SADD", "str", "a"), ("SREM", "str", "a"), ("SCARD", "str"), ("SISMEMBER", "str", "a"),
    ("SMISMEMBER", "str", "a"), ("SMEMBERS", "str"), ("SRANDMEMBER", "str"),
    ("SRANDMEMBER", "str", "2"), ("SPOP", "str"), ("SPOP", "str", "2"), ("SSCAN", "str", "0"),
    ("SINTER", "s", "str"), ("SINTER", "nokey", "str"), ("SUNION", "str", "s"),
    ("SDIFF", "s", "str"), ("SDIFF", "nokey", "str"), ("SINTERCARD", "2", "s", "str"),
    ("SINTERSTORE", "d", "s", "str"), ("SUNIONSTORE", "d", "str"), ("SDIFFSTORE", "d", "s", "str"),
    ("EXISTS", "d"),
    ("SINTER", "{t}s", "{t}str"), ("SUNIONSTORE", "{t}d", "{t}s", "{t}str"),
    # The *STORE destination may hold any type: it is overwritten.
    ("SUNIONSTORE", "str", "s"), ("TYPE", "str"), ("SMEMBERS", "str"),
    ("SUNIONSTORE", "{t}str", "{t}s"), ("TYPE", "{t}str"),
    ("SET", "str", "v"), ("SINTERSTORE", "str", "s", "nokey"), ("EXISTS", "str"),
    # SMOVE: a missing source answers 0 before any type check; then both types are checked.
    ("SET", "str", "v"), ("SMOVE", "nokey", "str", "x"), ("SMOVE", "str", "s", "1"),
    ("SMOVE", "s", "str", "1"), ("SMOVE", "s", "str", "nomember"), ("SMEMBERS", "s"),
    ("SET", "{t}str", "v"), ("SMOVE", "{t}s", "{t}str", "a"), ("SMOVE", "{t}str", "{t}s", "a"),
]

SCENARIOS["set_encodings"] = [
    ("SADD", "i", "1", "2", "3"), enc("i", INTSET),
    ("SADD", "i", "x"), enc("i", LISTPACK), S("SMEMBERS", "i"),
    ("SADD", "w", "-99999"), ("SADD", "w", "y" * 64), enc("w", LISTPACK),
    ("SADD", "w", "z" * 65), enc("w", HASHTABLE),
    ("SADD", "l", "a"), enc("l", LISTPACK),
    ("SADD", "l", *["m%d" % i for i in range(127)]), ("SCARD", "l"), enc("l", LISTPACK),
    ("SADD", "l", "m0"), enc("l", LISTPACK), ("SADD", "l", "m127"), enc("l", HASHTABLE),
    ("SREM", "l", *["m%d" % i for i in range(128)]), ("SCARD", "l"), enc("l", HASHTABLE),
    ("SADD", "big", *["s%d" % i for i in range(129)]), enc("big", HASHTABLE),
    ("SADD", "ints", *[str(i) for i in range(512)]), enc("ints", INTSET), ("SCARD", "ints"),
    ("SADD", "ints", "512"), enc("ints", HASHTABLE),
    ("SADD", "i513", *[str(i) for i in range(513)]), enc("i513", HASHTABLE),
    ("SADD", "i128", *[str(i) for i in range(128)]), ("SADD", "i128", "str"), enc("i128", HASHTABLE),
    ("SADD", "i127", *[str(i) for i in range(127)]), ("SADD", "i127", "str"), enc("i127", LISTPACK),
    ("SADD", "long", "x" * 65), enc("long", HASHTABLE),
    ("SADD", "lead", "01"), enc("lead", LISTPACK),
    ("SADD", "neg0", "-0"), enc("neg0", LISTPACK),
    ("SADD", "maxint", "9223372036854775807"), enc("maxint", INTSET),
    ("SADD", "over", "9223372036854775808"), enc("over", LISTPACK),
    # An existing listpack given more than 128 arguments converts at once (7.2).
    ("SADD", "hint", "a"), ("SADD", "hint", *(["a"] * 129)), ("SCARD", "hint"), enc("hint", HASHTABLE),
    ("SADD", "ihint", "1"), ("SADD", "ihint", *(["1"] * 300)), enc("ihint", INTSET),
    ("SADD", "ihint", *(["1"] * 513)),
    X(HASHTABLE, "OBJECT", "ENCODING", "ihint", note="7.2 converts on the argument count"),
    ("SADD", "i513b", *(["1"] * 513)),
    X(HASHTABLE, "OBJECT", "ENCODING", "i513b", note="7.2 sizes a new set by its argument count"),
    # Intersections keep the smallest set's kind; unions and diffs start from an intset.
    ("SADD", "{e}i1", "1", "2", "3"), ("SADD", "{e}i2", "2", "3", "4"), ("SADD", "{e}s1", "2", "3", "x"),
    ("SINTERSTORE", "{e}d", "{e}i1", "{e}i2"), enc("{e}d", INTSET), ("SMEMBERS", "{e}d"),
    ("SINTERSTORE", "{e}d", "{e}s1", "{e}i1"), ("SMEMBERS", "{e}d"),
    ("SUNIONSTORE", "{e}d", "{e}i1", "{e}i2"), enc("{e}d", INTSET), ("SMEMBERS", "{e}d"),
    ("SUNIONSTORE", "{e}d", "{e}i1", "{e}s1"), enc("{e}d", LISTPACK),
    ("SDIFFSTORE", "{e}d", "{e}s1", "{e}i1"), enc("{e}d", LISTPACK), ("SMEMBERS", "{e}d"),
    ("SDIFFSTORE", "{e}d", "{e}s1", "{e}i2"), ("SMEMBERS", "{e}d"),
    # Integer members found in hashtables: the result becomes an intset when it fits one, also
    # after more than 128 of them outgrew the listpack it started as (7.2's t_set.c calls
    # maybeConvertToIntset on any all-integer result; 7.0 answers intset too).
    ("SADD", "{e}h1", *[str(i) for i in range(200)], "a"), ("SADD", "{e}h2", *[str(i) for i in range(0, 400, 2)], "a"),
    ("SINTERSTORE", "{e}d", "{e}h1", "{e}h2"), enc("{e}d", LISTPACK), ("SCARD", "{e}d"),
    ("SADD", "{e}h4", *[str(i) for i in range(300)]),
    ("SINTERSTORE", "{e}d", "{e}h1", "{e}h4"), ("SCARD", "{e}d"),
    enc("{e}d", INTSET),
    ("SADD", "{e}h3", *[str(i) for i in range(0, 400, 20)], "b"),
    ("SINTERSTORE", "{e}d", "{e}h1", "{e}h3"), enc("{e}d", INTSET), ("SMEMBERS", "{e}d"),
    ("SINTERSTORE", "{e}d", "{e}h1", "{e}h2", "{e}h3"), enc("{e}d", INTSET),
    # SMOVE creates its destination from the moved member.
    ("SMOVE", "{e}s1", "{e}new", "2"), enc("{e}new", INTSET),
    ("SMOVE", "{e}s1", "{e}new2", "x"), enc("{e}new2", LISTPACK),
]

_multi = [
    ("SADD", "a", "1", "2", "3", "4", "x", "y"), ("SADD", "b", "3", "4", "5", "x", "z"),
    ("SADD", "c", "4", "x", "9"), ("SADD", "d", "10", "11"),
]
for keys in (("a", "b", "c"), ("{t}a", "{t}b", "{t}c")):
    a, b, c = keys
    d = "d" if a == "a" else "{t}d"
    if a != "a":
        _multi += [("SADD", a, "1", "2", "3", "4", "x", "y"), ("SADD", b, "3", "4", "5", "x", "z"),
                   ("SADD", c, "4", "x", "9"), ("SADD", d, "10", "11")]
    _multi += [
        S("SINTER", a, b), S("SINTER", a, b, c), S("SINTER", a), S("SINTER", a, "nokey"),
        ("SINTER", "nokey", a), S("SINTER", a, a), S("SUNION", a, b, c), S("SUNION", "nokey", c),
        ("SUNION", "nokey"), S("SDIFF", a, b), S("SDIFF", a, b, c), ("SDIFF", a, a),
        ("SDIFF", "nokey", a), S("SDIFF", a, "nokey"), S("SDIFF", b, "nokey", c),
        ("SINTERCARD", "2", a, b), ("SINTERCARD", "3", a, b, c), ("SINTERCARD", "2", a, b, "LIMIT", "1"),
        ("SINTERCARD", "2", a, b, "LIMIT", "0"), ("SINTERCARD", "2", a, b, "limit", "100"),
        ("SINTERCARD", "2", a, "nokey"), ("SINTERCARD", "1", a),
        ("SINTERSTORE", d, a, b), S("SMEMBERS", d), ("SINTERSTORE", d, a, "nokey"), ("EXISTS", d),
        ("SUNIONSTORE", d, a, b, c), S("SMEMBERS", d), ("SCARD", d),
        ("SDIFFSTORE", d, a, b, c), S("SMEMBERS", d), ("SDIFFSTORE", d, a, a), ("EXISTS", d),
        ("SUNIONSTORE", a, a, c), S("SMEMBERS", a), ("SINTERSTORE", b, b, c), S("SMEMBERS", b),
        ("SMOVE", a, c, "1"), ("SMOVE", a, c, "1"), ("SMOVE", a, c, "x"), ("SMOVE", a, a, "2"),
        ("SMOVE", a, a, "nomember"), S("SMEMBERS", a), S("SMEMBERS", c),
        ("SMOVE", b, "nokey2", "4"), ("SMOVE", b, "nokey2", "x"), ("EXISTS", b), S("SMEMBERS", "nokey2"),
        ("DEL", "nokey2"),
    ]
_multi += [
    ("SINTERCARD", "0", "a"), ("SINTERCARD", "-1", "a"), ("SINTERCARD", "x", "a"),
    ("SINTERCARD", "3", "a", "b"), ("SINTERCARD", "2", "a", "b", "LIMIT"),
    ("SINTERCARD", "2", "a", "b", "LIMIT", "-1"), ("SINTERCARD", "2", "a", "b", "LIMIT", "x"),
    ("SINTERCARD", "2", "a", "b", "FOO", "1"), ("SINTERCARD", "1", "a", "b"),
]
SCENARIOS["set_multikey"] = _multi

SCENARIOS["set_pop_random"] = [
    ("SPOP", "nokey"), ("SPOP", "nokey", "3"), ("SPOP", "nokey", "0"), ("SPOP", "nokey", "-1"),
    ("SPOP", "nokey", "x"), ("SRANDMEMBER", "nokey"), ("SRANDMEMBER", "nokey", "3"),
    ("SRANDMEMBER", "nokey", "-3"), ("SRANDMEMBER", "nokey", "0"), ("SRANDMEMBER", "nokey", "x"),
    ("SADD", "one", "m"), ("SRANDMEMBER", "one"), ("SRANDMEMBER", "one", "5"),
    ("SRANDMEMBER", "one", "-4"), ("SRANDMEMBER", "one", "1"), ("SRANDMEMBER", "one", "-1"),
    ("SRANDMEMBER", "one", "0"), ("SRANDMEMBER", "one", "1", "2"),
    ("SRANDMEMBER", "one", "-9223372036854775808"), ("SRANDMEMBER", "one", "9223372036854775808"),
    ("SPOP", "one", "0"), ("SPOP", "one", "-1"), ("SPOP", "one", "x"), ("SPOP", "one", "1", "2"),
    ("SPOP", "one"), ("EXISTS", "one"),
    ("SADD", "s", "1", "2", "3"), ("SRANDMEMBER", "s", "3"), ("SRANDMEMBER", "s", "10"),
    ("SPOP", "s", "3"), ("EXISTS", "s"),
    ("SADD", "s", "a", "b", "c"), S("SPOP", "s", "10"), ("EXISTS", "s"),
    ("SADD", "s", "a", "b", "c"), T("SPOP", "s", "2"), ("SCARD", "s"), T("SRANDMEMBER", "s", "-5"),
    T("SRANDMEMBER", "s", "2"), T("SPOP", "s"), ("EXISTS", "s"),
    ("SADD", "h", *["h%d" % i for i in range(300)]), T("SPOP", "h", "10"), ("SCARD", "h"),
    T("SRANDMEMBER", "h", "100"), T("SRANDMEMBER", "h", "-500"), ("SCARD", "h"),
    T("SPOP", "h", "280"), ("SCARD", "h"),
    # 7.2 rebuilds a mostly-popped hashtable from its remainder, as a listpack.
    X(LISTPACK, "OBJECT", "ENCODING", "h"),
    ("SADD", "is", *[str(i) for i in range(100)]), T("SPOP", "is", "95"), ("SCARD", "is"),
    ("OBJECT", "ENCODING", "is"),
]

SCENARIOS["set_scan"] = [
    ("SSCAN", "nokey", "0"), ("SSCAN", "nokey", "x"), ("SADD", "i", "1", "2", "30"),
    ("SSCAN", "i", "0"), ("SSCAN", "i", "0", "MATCH", "3*"), ("SSCAN", "i", "0", "COUNT", "1"),
    ("SSCAN", "i", "0", "COUNT", "0"), ("SSCAN", "i", "0", "COUNT", "x"), ("SSCAN", "i", "abc"),
    ("SSCAN", "i", "0", "MATCH"), ("SSCAN", "i", "0", "FOO", "bar"), ("SSCAN", "i", "0", "TYPE", "set"),
    ("SSCAN", "i", "-1"), ("SSCAN", "i", "18446744073709551616"),
    ("SADD", "l", "", "ab", "ac", "b"),
    # A listpack answers in insertion order (7.0 has a hashtable here).
    X(b"*2\r\n$1\r\n0\r\n*4\r\n$0\r\n\r\n$2\r\nab\r\n$2\r\nac\r\n$1\r\nb\r\n", "SSCAN", "l", "0"),
    X(b"*2\r\n$1\r\n0\r\n*2\r\n$2\r\nab\r\n$2\r\nac\r\n", "SSCAN", "l", "0", "MATCH", "a*"),
    X(b"*2\r\n$1\r\n0\r\n*4\r\n$0\r\n\r\n$2\r\nab\r\n$2\r\nac\r\n$1\r\nb\r\n", "SSCAN", "l", "0", "MATCH", "*"), X(b"*2\r\n$1\r\n0\r\n*2\r\n$2\r\nab\r\n$2\r\nac\r\n", "SSCAN", "l", "0", "MATCH", "a?", "COUNT", "100"),
]
