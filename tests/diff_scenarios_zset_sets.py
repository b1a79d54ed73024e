"""Differential scenarios: plain sets as inputs of the multi-key sorted set commands (ZUNION,
ZINTER, ZDIFF, their STORE forms, ZINTERCARD). Every member of a set counts with score 1, then
weighted (see diff_scenarios.py for the step syntax).

Darner runs with 2 threads in the suite. Each fixed scenario runs twice: once with every key
on one shard (one hashtag), once with neighbouring keys on different shards (two hashtags whose
slots differ in parity; checked below with the CRC16 of Redis Cluster).
"""

import random

import keyslot

SCENARIOS = {}
CLEANUP = {}

_RESTORE_LIMITS = [
    ("CONFIG", "SET", "zset-max-listpack-entries", "128"),
    ("CONFIG", "SET", "zset-max-listpack-value", "64"),
]


def _shard(tag: str, shards: int = 2) -> int:
    return keyslot.shard(tag, shards)


assert _shard("a") != _shard("b"), "the two hashtags must land on different shards"


def _namer(split: bool):
    """Key names: all under {a}, or alternating {a}/{b} (in order of first use) when split."""
    seen = {}

    def k(name):
        if name not in seen:
            tag = "b" if split and len(seen) % 2 else "a"
            seen[name] = "{%s}%s" % (tag, name)
        return seen[name]

    return k


def _intsets(k):
    si, z, si2, d = k("si"), k("z"), k("si2"), k("d")
    return [
        ("SADD", si, "1", "2", "3", "-5", "100", "9223372036854775807", "-9223372036854775808"),
        ("ZADD", z, "10", "1", "20", "2", "30", "07", "40", "x", "0.5", "100", "-1", "-5", "7", "+3"),
        ("SADD", si2, "2", "3", "4", "100"),
        ("ZUNION", "2", si, z), ("ZUNION", "2", si, z, "WITHSCORES"),
        ("ZUNION", "2", z, si, "WEIGHTS", "2", "3", "WITHSCORES"),
        ("ZUNION", "2", si, z, "AGGREGATE", "MIN", "WITHSCORES"),
        ("ZUNION", "2", si, z, "AGGREGATE", "MAX", "WITHSCORES"),
        ("ZUNION", "2", si, z, "WEIGHTS", "-2", "0.5", "AGGREGATE", "MAX", "WITHSCORES"),
        ("ZUNION", "2", si, si2, "WITHSCORES"), ("ZUNION", "1", si, "WITHSCORES"),
        ("ZUNION", "2", si, k("nosuch"), "WEIGHTS", "5", "5", "WITHSCORES"),
        ("ZINTER", "2", si, z), ("ZINTER", "2", si, z, "WITHSCORES"),
        ("ZINTER", "2", z, si, "WEIGHTS", "0.25", "4", "WITHSCORES"),
        ("ZINTER", "2", si, z, "AGGREGATE", "MIN", "WITHSCORES"),
        ("ZINTER", "3", si, z, si2, "WEIGHTS", "1", "2", "3", "AGGREGATE", "MAX", "WITHSCORES"),
        ("ZINTER", "2", si, si2, "WITHSCORES"), ("ZINTER", "1", si, "WITHSCORES"),
        ("ZINTER", "2", si, k("nosuch")), ("ZINTER", "2", si, si, "WEIGHTS", "2", "3", "WITHSCORES"),
        ("ZUNION", "2", si, si, "WEIGHTS", "inf", "-inf", "WITHSCORES"),
        ("ZINTER", "2", si, si, "WEIGHTS", "inf", "-inf", "WITHSCORES"),
        ("ZINTER", "2", si, si, "WEIGHTS", "0", "0", "WITHSCORES"),
        ("ZUNION", "2", si, z, "WEIGHTS", "-0", "1", "AGGREGATE", "MIN", "WITHSCORES"),
        ("ZDIFF", "2", si, z), ("ZDIFF", "2", si, z, "WITHSCORES"), ("ZDIFF", "2", z, si, "WITHSCORES"),
        ("ZDIFF", "3", si, si2, z, "WITHSCORES"), ("ZDIFF", "2", si, si), ("ZDIFF", "1", si, "WITHSCORES"),
        ("ZDIFF", "2", k("nosuch"), si), ("ZDIFF", "2", si, k("nosuch"), "WITHSCORES"),
        ("ZINTERCARD", "2", si, z), ("ZINTERCARD", "2", si, z, "LIMIT", "1"),
        ("ZINTERCARD", "2", si, z, "LIMIT", "0"), ("ZINTERCARD", "2", si, z, "LIMIT", "100"),
        ("ZINTERCARD", "3", si, si2, z), ("ZINTERCARD", "1", si), ("ZINTERCARD", "1", si, "LIMIT", "3"),
        ("ZINTERCARD", "2", si, si, "LIMIT", "2"), ("ZINTERCARD", "2", si, k("nosuch")),
        ("ZUNIONSTORE", d, "2", si, z), ("OBJECT", "ENCODING", d), ("ZRANGE", d, "0", "-1", "WITHSCORES"),
        ("ZUNIONSTORE", d, "2", si, z, "WEIGHTS", "1", "-1", "AGGREGATE", "MIN"),
        ("ZRANGE", d, "0", "-1", "WITHSCORES"),
        ("ZINTERSTORE", d, "2", si, z), ("OBJECT", "ENCODING", d), ("ZRANGE", d, "0", "-1", "WITHSCORES"),
        ("ZDIFFSTORE", d, "2", si, z), ("OBJECT", "ENCODING", d), ("ZRANGE", d, "0", "-1", "WITHSCORES"),
        ("ZDIFFSTORE", d, "2", si, si), ("EXISTS", d),
        ("ZUNIONSTORE", d, "1", si), ("TYPE", d), ("ZCARD", d), ("ZSCORE", d, "100"), ("ZRANK", d, "3"),
        ("ZINTERSTORE", d, "2", si, k("nosuch")), ("EXISTS", d),
        # The destination may be one of the input sets: it becomes a sorted set.
        ("ZINTERSTORE", si2, "2", si2, z, "WEIGHTS", "3", "1"), ("TYPE", si2),
        ("ZRANGE", si2, "0", "-1", "WITHSCORES"), ("SMEMBERS", si2),
        ("SCARD", si), ("TYPE", si),
    ]


def _strings(k):
    sl, si, z, d = k("sl"), k("si"), k("z"), k("d")
    return [
        ("SADD", sl, "a", "b", "c", "", "d\x00x", "1.5", "10", "zz"),
        ("SADD", si, "10", "20", "30"),
        ("ZADD", z, "2", "a", "3", "c", "-1", "", "4", "1.5", "5", "q", "6", "10"),
        ("ZUNION", "2", sl, z, "WITHSCORES"), ("ZUNION", "3", sl, si, z, "WITHSCORES"),
        ("ZUNION", "3", z, sl, si, "WEIGHTS", "1", "2", "3", "WITHSCORES"),
        ("ZUNION", "3", sl, si, z, "WEIGHTS", "2", "0.5", "-1", "AGGREGATE", "MIN", "WITHSCORES"),
        ("ZUNION", "2", sl, z, "AGGREGATE", "MAX", "WITHSCORES"),
        ("ZINTER", "2", sl, z, "WITHSCORES"), ("ZINTER", "2", sl, si, "WITHSCORES"),
        ("ZINTER", "3", sl, si, z, "WITHSCORES"),
        ("ZINTER", "2", z, sl, "WEIGHTS", "10", "100", "AGGREGATE", "MIN", "WITHSCORES"),
        ("ZDIFF", "2", sl, z, "WITHSCORES"), ("ZDIFF", "3", sl, si, z, "WITHSCORES"),
        ("ZDIFF", "2", z, sl, "WITHSCORES"), ("ZDIFF", "2", sl, si),
        ("ZINTERCARD", "2", sl, z), ("ZINTERCARD", "2", sl, z, "LIMIT", "2"), ("ZINTERCARD", "2", sl, si),
        ("ZINTERCARD", "3", sl, si, z),
        ("ZUNIONSTORE", d, "3", sl, si, z), ("OBJECT", "ENCODING", d), ("ZRANGE", d, "0", "-1", "WITHSCORES"),
        ("ZINTERSTORE", d, "2", sl, z, "AGGREGATE", "MAX"), ("OBJECT", "ENCODING", d),
        ("ZRANGE", d, "0", "-1", "WITHSCORES"),
        ("ZDIFFSTORE", d, "2", sl, z), ("OBJECT", "ENCODING", d), ("ZRANGE", d, "0", "-1", "WITHSCORES"),
        ("ZRANGEBYLEX", d, "-", "+"),
        # An intset that took a string (7.2: listpack; 7.0: hashtable): same members either way.
        ("SADD", si, "x"), ("ZINTER", "2", si, sl, "WITHSCORES"), ("ZUNION", "2", si, sl, "WITHSCORES"),
        ("SREM", sl, "a", "b", "c", "", "d\x00x", "1.5", "10", "zz"), ("EXISTS", sl),
        ("ZUNION", "2", sl, z, "WITHSCORES"),
    ]


def _big(k):
    bi, bs, bv, z, d = k("bi"), k("bs"), k("bv"), k("z"), k("d")
    b128, b129, v64, v65 = k("b128"), k("b129"), k("v64"), k("v65")
    ints = [str(i) for i in range(0, 1200, 2)]  # 600 integers: above set-max-intset-entries
    strs = ["m%d" % i for i in range(200)] + ["10", "12", "13"]  # above set-max-listpack-entries
    return [
        ("SADD", bi) + tuple(ints), ("SADD", bs) + tuple(strs),
        ("SADD", bv, "short", "v" * 70, "20"),  # a member above set-max-listpack-value
        ("SADD", b128) + tuple("e%03d" % i for i in range(128)),
        ("SADD", b129) + tuple("e%03d" % i for i in range(129)),
        ("SADD", v64, "w" * 64, "1"), ("SADD", v65, "w" * 65, "1"),
        ("ZADD", z, "5", "10", "6", "13", "7", "m5", "8", "short", "9", "1000"),
        ("SCARD", bi), ("SCARD", bs), ("SCARD", bv),
        ("ZUNIONSTORE", d, "1", bi), ("OBJECT", "ENCODING", d), ("ZCARD", d),
        ("ZRANGE", d, "0", "9", "WITHSCORES"), ("ZRANGE", d, "-3", "-1", "WITHSCORES"), ("ZSCORE", d, "1198"),
        ("ZUNIONSTORE", d, "2", bi, bs), ("OBJECT", "ENCODING", d), ("ZCARD", d), ("ZRANK", d, "m0"),
        ("ZINTER", "2", bi, bs, "WITHSCORES"), ("ZINTER", "3", bi, bs, z, "WITHSCORES"),
        ("ZINTER", "2", bs, z, "WEIGHTS", "3", "2", "AGGREGATE", "SUM", "WITHSCORES"),
        ("ZINTERSTORE", d, "2", bi, bs), ("OBJECT", "ENCODING", d), ("ZRANGE", d, "0", "-1", "WITHSCORES"),
        ("ZINTERCARD", "2", bi, bi), ("ZINTERCARD", "2", bi, bi, "LIMIT", "50"),
        ("ZINTERCARD", "2", bi, bs), ("ZINTERCARD", "2", bs, bs, "LIMIT", "1000"),
        ("ZDIFF", "2", bs, bi), ("ZDIFFSTORE", d, "3", bs, bi, z), ("OBJECT", "ENCODING", d), ("ZCARD", d),
        ("ZRANGE", d, "0", "4", "WITHSCORES"),
        ("ZDIFFSTORE", d, "2", bi, bs), ("ZCARD", d), ("ZRANGE", d, "0", "2"),
        ("ZUNION", "2", bv, z, "WITHSCORES"), ("ZUNIONSTORE", d, "1", bv), ("OBJECT", "ENCODING", d),
        ("ZINTERSTORE", d, "2", bv, z), ("OBJECT", "ENCODING", d), ("ZRANGE", d, "0", "-1", "WITHSCORES"),
        # The result's encoding follows zset-max-listpack-entries/value, whatever the input.
        ("ZUNIONSTORE", d, "1", b128), ("OBJECT", "ENCODING", d),
        ("ZUNIONSTORE", d, "1", b129), ("OBJECT", "ENCODING", d),
        ("ZDIFFSTORE", d, "2", b129, b128), ("OBJECT", "ENCODING", d), ("ZRANGE", d, "0", "-1"),
        ("ZUNIONSTORE", d, "1", v64), ("OBJECT", "ENCODING", d),
        ("ZUNIONSTORE", d, "1", v65), ("OBJECT", "ENCODING", d),
        ("ZINTERSTORE", d, "2", v65, bi), ("OBJECT", "ENCODING", d), ("ZRANGE", d, "0", "-1"),
        ("CONFIG", "SET", "zset-max-listpack-entries", "2"), ("CONFIG", "SET", "zset-max-listpack-value", "3"),
        ("ZUNIONSTORE", d, "1", v64), ("OBJECT", "ENCODING", d),
        ("ZINTERSTORE", d, "2", bi, bs), ("OBJECT", "ENCODING", d),
        ("ZDIFFSTORE", d, "2", bv, bs), ("OBJECT", "ENCODING", d), ("ZRANGE", d, "0", "-1"),
        ("ZDIFFSTORE", d, "3", bv, bs, k("short")), ("OBJECT", "ENCODING", d),
        ("ZINTERSTORE", d, "2", bs, z), ("OBJECT", "ENCODING", d), ("ZRANGE", d, "0", "-1", "WITHSCORES"),
    ] + _RESTORE_LIMITS


def _errors(k):
    si, sl, z, d = k("si"), k("sl"), k("z"), k("d")
    st, li, h = k("str"), k("list"), k("hash")
    return [
        ("SADD", si, "1", "2"), ("SADD", sl, "a", "b"), ("ZADD", z, "1", "a"),
        ("SET", st, "v"), ("RPUSH", li, "a"), ("HSET", h, "a", "1"),
        ("ZUNION", "2", si, st), ("ZUNION", "2", st, si), ("ZINTER", "2", li, si), ("ZINTER", "3", sl, z, h),
        ("ZDIFF", "2", si, h), ("ZDIFF", "2", st, si), ("ZINTERCARD", "2", si, st),
        ("ZINTERCARD", "2", sl, li, "LIMIT", "1"), ("ZUNIONSTORE", d, "2", si, li), ("EXISTS", d),
        ("ZINTERSTORE", d, "2", h, sl), ("ZDIFFSTORE", d, "2", sl, st),
        # The type check comes before the options are parsed.
        ("ZUNION", "2", si, st, "FOO"), ("ZINTER", "2", si, li, "WEIGHTS", "x", "y"),
        ("ZINTERCARD", "2", sl, h, "LIMIT", "-1"),
        # Options are still checked with set inputs.
        ("ZUNION", "2", si, sl, "FOO"), ("ZUNION", "2", si, sl, "WEIGHTS", "1"),
        ("ZUNION", "2", si, sl, "WEIGHTS", "1", "nan"), ("ZINTER", "2", si, sl, "AGGREGATE", "AVG"),
        ("ZDIFF", "2", si, sl, "WEIGHTS", "1", "1"), ("ZDIFF", "2", si, sl, "AGGREGATE", "MIN"),
        ("ZINTERCARD", "2", si, sl, "LIMIT", "-1"), ("ZINTERCARD", "2", si, sl, "WITHSCORES"),
        ("ZUNIONSTORE", d, "2", si, sl, "WITHSCORES"), ("ZUNION", "3", si, sl),
        ("ZUNION", "0", si), ("ZINTERCARD", "0", si),
        # The other sorted set commands still refuse a set.
        ("ZRANGESTORE", d, si, "0", "-1"), ("ZMPOP", "1", si, "MIN"), ("ZCARD", si), ("ZRANGE", sl, "0", "-1"),
        ("ZSCORE", si, "1"), ("ZADD", si, "1", "x"),
        # A set destination is replaced, or deleted when the result is empty.
        ("SADD", d, "q"), ("ZUNIONSTORE", d, "1", si), ("TYPE", d), ("ZRANGE", d, "0", "-1", "WITHSCORES"),
        ("SADD", k("d2"), "q"), ("ZINTERSTORE", k("d2"), "2", si, sl), ("EXISTS", k("d2")),
        ("SADD", k("d3"), "q"), ("ZDIFFSTORE", k("d3"), "2", si, si), ("EXISTS", k("d3")),
        ("ZUNIONSTORE", si, "2", si, sl, "WEIGHTS", "2", "3"), ("TYPE", si), ("ZRANGE", si, "0", "-1", "WITHSCORES"),
        ("ZUNIONSTORE", st, "1", sl), ("TYPE", st),
    ]


def _ordering(k):
    # Sums are not associative: Redis adds the inputs from the smallest to the largest (inputs
    # of equal size in argument order).
    a, b, c, z = k("a"), k("b"), k("c"), k("z")
    return [
        ("SADD", a, "x", "y"), ("SADD", b, "x", "y"), ("SADD", c, "x"), ("ZADD", z, "1", "x", "2", "y", "3", "w"),
        ("ZUNION", "3", a, b, c, "WEIGHTS", "1e16", "1", "1", "WITHSCORES"),
        ("ZUNION", "3", a, b, c, "WEIGHTS", "1", "1", "1e16", "WITHSCORES"),
        ("ZUNION", "3", a, b, c, "WEIGHTS", "1", "1e16", "1", "WITHSCORES"),
        ("ZINTER", "3", a, b, c, "WEIGHTS", "1e16", "1", "1", "WITHSCORES"),
        ("ZINTER", "3", c, a, b, "WEIGHTS", "1", "1e16", "1", "WITHSCORES"),
        ("ZUNION", "2", z, a, "WEIGHTS", "1", "1e16", "WITHSCORES"),
        ("ZINTER", "4", z, a, b, c, "WEIGHTS", "1", "1e16", "1", "1", "WITHSCORES"),
        ("ZINTERSTORE", k("d"), "4", z, a, b, c, "WEIGHTS", "1", "1e16", "1", "1"),
        ("ZRANGE", k("d"), "0", "-1", "WITHSCORES"),
    ]


for _name, _fn, _restore in [("intsets", _intsets, False), ("strings", _strings, False),
                             ("big", _big, True), ("errors", _errors, False),
                             ("sum_order", _ordering, False)]:
    for _split in (False, True):
        _key = "zset_sets_%s_%s" % (_name, "split" if _split else "one_shard")
        SCENARIOS[_key] = _fn(_namer(_split))
        if _restore:
            CLEANUP[_key] = _RESTORE_LIMITS


def _random_ops(seed, entries):
    """Random sets (integers, strings, mixed; small and big) and sorted sets, combined by every
    command with random weights and aggregates. Plain key names: they spread over both shards."""
    rnd = random.Random(seed)
    keys = ["k%d" % i for i in range(8)]
    pool_ints = [str(i) for i in range(-20, 40)]
    pool_strs = ["a", "b", "c", "", "ab", "z" * 10, "1.0", "07", "-0"]
    weights = ["1", "2", "0", "-1", "0.5", "-0.25", "3", "1e3", "inf", "-inf"]
    steps = [("CONFIG", "SET", "zset-max-listpack-entries", str(entries))]
    for k in keys:
        kind = rnd.randrange(5)
        if kind == 0:
            steps.append(("SADD", k) + tuple(rnd.sample(pool_ints, rnd.randrange(1, 30))))
        elif kind == 1:
            steps.append(("SADD", k) + tuple(rnd.sample(pool_ints + pool_strs, rnd.randrange(1, 20))))
        elif kind == 2:
            n = rnd.choice([130, 300, 600])
            steps.append(("SADD", k) + tuple(str(rnd.randrange(-50, 700)) for _ in range(n)))
        elif kind == 3:
            steps.append(("SADD", k) + tuple("s%d" % rnd.randrange(400) for _ in range(200)))
        else:
            args = ["ZADD", k]
            for m in rnd.sample(pool_ints + pool_strs, rnd.randrange(1, 25)):
                args += [rnd.choice(["1", "2", "-3", "0.5", "10", "inf"]), m]
            steps.append(tuple(args))
    for _ in range(120):
        n = rnd.randrange(1, 4)
        srcs = [rnd.choice(keys + ["missing"]) for _ in range(n)]
        cmd = rnd.choice(["ZUNION", "ZINTER", "ZDIFF", "ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE",
                          "ZINTERCARD"])
        store = cmd.endswith("STORE")
        dst = rnd.choice(["dst"] + keys[:2]) if store else None
        args = [cmd] + ([dst] if store else []) + [str(n)] + srcs
        if cmd in ("ZUNION", "ZINTER", "ZUNIONSTORE", "ZINTERSTORE"):
            if rnd.random() < 0.6:
                args += ["WEIGHTS"] + [rnd.choice(weights) for _ in range(n)]
            if rnd.random() < 0.5:
                args += ["AGGREGATE", rnd.choice(["SUM", "MIN", "MAX"])]
        if cmd == "ZINTERCARD" and rnd.random() < 0.6:
            args += ["LIMIT", str(rnd.randrange(0, 20))]
        if not store and cmd != "ZINTERCARD" and rnd.random() < 0.8:
            args.append("WITHSCORES")
        steps.append(tuple(args))
        if store:
            steps += [("TYPE", dst), ("OBJECT", "ENCODING", dst), ("ZRANGE", dst, "0", "-1", "WITHSCORES")]
    return steps + _RESTORE_LIMITS


for _seed, _entries in [(1, 128), (2, 4), (3, 300)]:
    SCENARIOS["zset_sets_random_%d" % _seed] = [lambda s=_seed, e=_entries: _random_ops(s, e)]
    CLEANUP["zset_sets_random_%d" % _seed] = _RESTORE_LIMITS
