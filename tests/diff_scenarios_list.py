"""Differential scenarios of the list group (see diff_scenarios.py for the step syntax).

OBJECT ENCODING of a list is checked with golden replies (X): Debian's 7.0 reference always
answers "quicklist", Redis 7.2 answers "listpack" for a list that fits one node and converts
back when it shrinks below half the limit.
"""

import keyslot
from differential import S, X

I64_MAX = "9223372036854775807"
I64_MIN = "-9223372036854775808"
BIN = b"\x00\r\n\x80\xff\r\n$3\r\n*1\r\n"

LP = b"$8\r\nlistpack\r\n"
QL = b"$9\r\nquicklist\r\n"


def _shard(key: str) -> int:
    # darner's test server runs 2 shards: slot (CRC16 % 16384) modulo 2.
    return keyslot.shard(key)


def _pair_on_two_shards():
    a = "lsrc"
    for i in range(100):
        b = "ldst%d" % i
        if _shard(b) != _shard(a):
            return a, b
    raise AssertionError("no pair")


SRC, DST = _pair_on_two_shards()
SAME = "ldst_same"
for _i in range(100):
    if _shard("lsame%d" % _i) == _shard(SRC):
        SAME = "lsame%d" % _i
        break

SCENARIOS = {}
CLEANUP = {}

SCENARIOS["list_push_pop"] = [
    ("LPUSH", "l", "a"), ("LPUSH", "l", "b", "c"), ("RPUSH", "l", "d", "e"), ("LRANGE", "l", "0", "-1"),
    ("LLEN", "l"), ("LLEN", "nokey"), ("LPUSHX", "nokey", "a"), ("RPUSHX", "nokey", "a", "b"),
    ("EXISTS", "nokey"), ("LPUSHX", "l", "x", "y"), ("RPUSHX", "l", "z"), ("LRANGE", "l", "0", "-1"),
    ("LPOP", "l"), ("RPOP", "l"), ("LPOP", "l", "2"), ("RPOP", "l", "2"), ("LRANGE", "l", "0", "-1"),
    ("LPOP", "l", "0"), ("RPOP", "l", "0"), ("LPOP", "l", "-1"), ("LPOP", "l", "abc"),
    ("LPOP", "l", "1", "2"), ("RPOP", "l", "1", "2"), ("LPOP", "l", "100"), ("EXISTS", "l"),
    ("LPOP", "l"), ("RPOP", "l"), ("LPOP", "l", "0"), ("RPOP", "l", "3"), ("LPOP", "l", "-1"),
    ("RPUSH", "l", "1", "2", "3"), ("RPOP", "l", I64_MAX), ("EXISTS", "l"),
    ("RPUSH", "l", "only"), ("RPOP", "l"), ("EXISTS", "l"),
    ("RPUSH", "b", BIN, "", BIN), ("LRANGE", "b", "0", "-1"), ("LPOP", "b"), ("RPOP", "b", "5"),
    ("LPUSH",), ("LPUSH", "l"), ("RPUSH", "l"), ("LPUSHX", "l"), ("LPOP",), ("LLEN", "a", "b"),
    ("SET", "s", "v"), ("LPUSH", "s", "a"), ("RPUSH", "s", "a"), ("LPUSHX", "s", "a"),
    ("RPUSHX", "s", "a"), ("LPOP", "s"), ("RPOP", "s", "2"), ("LPOP", "s", "0"), ("LLEN", "s"),
    ("LPOP", "s", "-1"), ("GET", "s"),
    ("RPUSH", "n", "1", "-1", "128", "-4097", "65536", I64_MAX, I64_MIN, "01", "-0", "1.5", " 1"),
    ("LRANGE", "n", "0", "-1"), ("TYPE", "n"),
]

SCENARIOS["list_ranges_and_indexes"] = [
    ("RPUSH", "l", "a", "b", "c", "d", "e", "f"),
    ("LRANGE", "l", "0", "0"), ("LRANGE", "l", "-1", "-1"), ("LRANGE", "l", "-100", "100"),
    ("LRANGE", "l", "2", "1"), ("LRANGE", "l", "6", "10"), ("LRANGE", "l", "-3", "-2"),
    ("LRANGE", "l", I64_MIN, I64_MAX), ("LRANGE", "l", "0", I64_MIN), ("LRANGE", "l", "x", "1"),
    ("LRANGE", "l", "0", "1.0"), ("LRANGE", "nokey", "0", "-1"), ("LRANGE", "nokey", "x", "1"),
    ("LINDEX", "l", "0"), ("LINDEX", "l", "-1"), ("LINDEX", "l", "5"), ("LINDEX", "l", "6"),
    ("LINDEX", "l", "-6"), ("LINDEX", "l", "-7"), ("LINDEX", "l", I64_MIN), ("LINDEX", "l", "x"),
    ("LINDEX", "nokey", "x"), ("LINDEX", "nokey", "0"),
    ("LSET", "l", "0", "A"), ("LSET", "l", "-1", "F"), ("LSET", "l", "6", "x"), ("LSET", "l", "-7", "x"),
    ("LSET", "l", "x", "y"), ("LSET", "nokey", "0", "x"), ("LSET", "nokey", "x", "x"),
    ("LRANGE", "l", "0", "-1"),
    ("SET", "s", "v"), ("LRANGE", "s", "0", "-1"), ("LRANGE", "s", "x", "1"), ("LINDEX", "s", "0"),
    ("LINDEX", "s", "x"), ("LSET", "s", "0", "x"), ("LSET", "s", "x", "x"),
    ("LTRIM", "l", "1", "-2"), ("LRANGE", "l", "0", "-1"), ("LTRIM", "l", "0", "100"),
    ("LTRIM", "l", "-100", "1"), ("LRANGE", "l", "0", "-1"), ("LTRIM", "l", "x", "1"),
    ("LTRIM", "nokey", "0", "1"), ("LTRIM", "nokey", "x", "1"), ("LTRIM", "s", "0", "1"),
    ("LTRIM", "l", "5", "1"), ("EXISTS", "l"),
    ("RPUSH", "l", "a", "b"), ("LTRIM", "l", "-1", "-2"), ("EXISTS", "l"),
    ("RPUSH", "l", "a", "b"), ("LTRIM", "l", I64_MIN, I64_MAX), ("LRANGE", "l", "0", "-1"),
]

SCENARIOS["list_insert_rem"] = [
    ("RPUSH", "l", "a", "b", "a", "c", "a"),
    ("LINSERT", "l", "BEFORE", "a", "x"), ("LINSERT", "l", "after", "a", "y"),
    ("LINSERT", "l", "AFTER", "c", "z"), ("LINSERT", "l", "before", "nope", "z"),
    ("LINSERT", "l", "middle", "a", "z"), ("LINSERT", "nokey", "before", "a", "z"),
    ("LINSERT", "nokey", "middle", "a", "z"), ("LRANGE", "l", "0", "-1"),
    ("LREM", "l", "1", "a"), ("LRANGE", "l", "0", "-1"), ("LREM", "l", "-1", "a"),
    ("LRANGE", "l", "0", "-1"), ("LREM", "l", "0", "nope"), ("LREM", "l", "0", "a"),
    ("LRANGE", "l", "0", "-1"), ("LREM", "l", "x", "a"), ("LREM", "nokey", "0", "a"),
    ("LREM", "nokey", "x", "a"), ("LREM", "l", I64_MIN, "b"), ("LREM", "l", I64_MAX, "x"),
    ("LRANGE", "l", "0", "-1"), ("LREM", "l", "0", "y"), ("LREM", "l", "0", "c"),
    ("LREM", "l", "0", "z"), ("EXISTS", "l"),
    ("SET", "s", "v"), ("LINSERT", "s", "before", "a", "b"), ("LINSERT", "s", "middle", "a", "b"),
    ("LREM", "s", "0", "a"), ("LREM", "s", "x", "a"),
    ("RPUSH", "b", BIN, "1", BIN), ("LINSERT", "b", "AFTER", BIN, BIN), ("LREM", "b", "-2", BIN),
    ("LRANGE", "b", "0", "-1"),
]

SCENARIOS["list_lpos"] = [
    ("RPUSH", "l", "a", "b", "c", "1", "2", "3", "c", "c"),
    ("LPOS", "l", "c"), ("LPOS", "l", "c", "RANK", "2"), ("LPOS", "l", "c", "RANK", "-1"),
    ("LPOS", "l", "c", "RANK", "-3"), ("LPOS", "l", "c", "RANK", "4"), ("LPOS", "l", "c", "COUNT", "0"),
    ("LPOS", "l", "c", "COUNT", "2"), ("LPOS", "l", "c", "COUNT", "0", "RANK", "-1"),
    ("LPOS", "l", "c", "COUNT", "0", "RANK", "2"), ("LPOS", "l", "c", "MAXLEN", "3"),
    ("LPOS", "l", "c", "MAXLEN", "3", "COUNT", "0"), ("LPOS", "l", "c", "MAXLEN", "7", "COUNT", "0"),
    ("LPOS", "l", "c", "RANK", "-1", "MAXLEN", "1"), ("LPOS", "l", "c", "RANK", "-1", "MAXLEN", "2", "COUNT", "0"),
    ("LPOS", "l", "x"), ("LPOS", "l", "x", "COUNT", "5"), ("LPOS", "nokey", "a"),
    ("LPOS", "nokey", "a", "COUNT", "1"), ("LPOS", "nokey", "a", "RANK", "0"),
    ("LPOS", "l", "c", "RANK", "0"), ("LPOS", "l", "c", "RANK", "x"), ("LPOS", "l", "c", "COUNT", "-1"),
    ("LPOS", "l", "c", "COUNT", "x"), ("LPOS", "l", "c", "MAXLEN", "-1"), ("LPOS", "l", "c", "MAXLEN", "x"),
    ("LPOS", "l", "c", "RANK"), ("LPOS", "l", "c", "FOO", "1"), ("LPOS", "l", "c", "COUNT"),
    ("LPOS", "l", "1", "RANK", I64_MAX), ("LPOS", "l", "1", "RANK", "-" + I64_MAX),
    ("LPOS", "l", "1", "rank", "1", "count", "1", "maxlen", "0", "RANK", "1"),
    X(b"-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n",
      "LPOS", "l", "c", "RANK", I64_MIN),
    ("SET", "s", "v"), ("LPOS", "s", "a"), ("LPOS", "s", "a", "RANK", "0"),
]

SCENARIOS["list_lmove"] = [
    ("RPUSH", SRC, "a", "b", "c"),
    ("LMOVE", SRC, DST, "LEFT", "RIGHT"), ("LMOVE", SRC, DST, "right", "left"),
    ("LRANGE", SRC, "0", "-1"), ("LRANGE", DST, "0", "-1"),
    ("LMOVE", SRC, SAME, "LEFT", "LEFT"), ("EXISTS", SRC), ("LRANGE", SAME, "0", "-1"),
    ("LMOVE", SRC, DST, "LEFT", "LEFT"), ("LMOVE", SRC, DST, "UP", "LEFT"),
    ("LMOVE", SRC, DST, "LEFT", "DOWN"),
    ("RPOPLPUSH", DST, DST), ("LRANGE", DST, "0", "-1"), ("LMOVE", DST, DST, "LEFT", "RIGHT"),
    ("LRANGE", DST, "0", "-1"), ("LMOVE", DST, DST, "LEFT", "LEFT"), ("LRANGE", DST, "0", "-1"),
    ("RPOPLPUSH", DST, SRC), ("RPOPLPUSH", DST, SRC), ("EXISTS", DST), ("LRANGE", SRC, "0", "-1"),
    ("RPOPLPUSH", "nokey", SRC), ("RPOPLPUSH", "nokey", "nokey2"),
    ("SET", "str", "v"), ("SET", "str" + SRC, "v"),
    # A missing or empty source answers nil before the destination's type is looked at.
    ("LMOVE", "nokey", "str", "LEFT", "LEFT"), ("RPOPLPUSH", "nokey", "str"),
    ("LMOVE", SRC, "str", "LEFT", "LEFT"), ("RPOPLPUSH", SRC, "str"), ("LRANGE", SRC, "0", "-1"),
    ("LMOVE", "str", SRC, "LEFT", "LEFT"), ("RPOPLPUSH", "str", SRC), ("GET", "str"),
    ("RPUSH", "one", "x"), ("RPOPLPUSH", "one", "one"), ("LRANGE", "one", "0", "-1"),
    ("LMOVE", "one", "one", "RIGHT", "LEFT"), ("LRANGE", "one", "0", "-1"),
    ("RPUSH", SAME, BIN), ("LMOVE", SAME, DST, "RIGHT", "RIGHT"), ("LRANGE", DST, "0", "-1"),
    ("LMOVE", SRC, DST), ("RPOPLPUSH", SRC),
]

SCENARIOS["list_lmpop"] = [
    ("RPUSH", SRC, "a", "b", "c", "d"), ("RPUSH", DST, "1", "2"),
    ("LMPOP", "2", "nokey", SRC, "LEFT"), ("LMPOP", "2", "nokey", SRC, "RIGHT", "COUNT", "2"),
    ("LMPOP", "3", "nokey", DST, SRC, "left", "count", "10"), ("EXISTS", DST),
    ("LMPOP", "2", SRC, DST, "RIGHT", "COUNT", "100"), ("LMPOP", "2", SRC, DST, "RIGHT"),
    ("LMPOP", "1", "nokey", "LEFT", "COUNT", "1"),
    ("SET", "str", "v"), ("RPUSH", SRC, "x"),
    ("LMPOP", "2", "str", SRC, "LEFT"), ("LMPOP", "2", "nokey", "str", "LEFT"),
    ("LMPOP", "2", SRC, "str", "LEFT"), ("EXISTS", SRC),
    ("LMPOP", "0", SRC, "LEFT"), ("LMPOP", "-1", SRC, "LEFT"), ("LMPOP", "x", SRC, "LEFT"),
    ("LMPOP", "2", SRC, "LEFT"), ("LMPOP", I64_MAX, SRC, "LEFT"), ("LMPOP", "1", SRC, "MIDDLE"),
    ("LMPOP", "1", SRC, "LEFT", "COUNT", "0"), ("LMPOP", "1", SRC, "LEFT", "COUNT", "-1"),
    ("LMPOP", "1", SRC, "LEFT", "COUNT", "x"), ("LMPOP", "1", SRC, "LEFT", "COUNT"),
    ("LMPOP", "1", SRC, "LEFT", "COUNT", "1", "COUNT", "1"), ("LMPOP", "1", SRC, "LEFT", "FOO"),
    ("LMPOP", "1", SRC), ("LMPOP", "1"),
    ("RPUSH", SRC, "1", "2", "3"), ("LMPOP", "1", SRC, "RIGHT", "COUNT", I64_MAX), ("EXISTS", SRC),
]


def _enc(key, expect):
    return X(expect, "OBJECT", "ENCODING", key)


def _encoding_thresholds():
    steps = []
    # Default -2 (8 KiB per node): 7 header bytes + the raw lengths decide the growth.
    steps += [("RPUSH", "big", "x" * 8170), _enc("big", LP), ("RPUSH", "big", "y"), _enc("big", LP),
              ("RPUSH", "big", "zzzzz"), _enc("big", LP), ("RPUSH", "big", "w"), _enc("big", QL),
              ("LLEN", "big"), ("RPOP", "big"), _enc("big", QL), ("LPOP", "big"), _enc("big", LP),
              ("LRANGE", "big", "0", "-1")]
    # A list built element by element: 8 KiB of 10-byte elements, then shrinking by half.
    steps.append(("DEL", "l"))
    for i in range(0, 800, 100):
        steps.append(("RPUSH", "l") + tuple("e%08d" % j for j in range(i, i + 100)))
    # 743 elements fill the first node (8180 bytes), 57 the second.
    steps += [_enc("l", QL), ("LLEN", "l"), ("LTRIM", "l", "0", "399"), _enc("l", QL),
              ("LPOP", "l", "20"), _enc("l", QL), ("RPOP", "l", "30"), _enc("l", LP),
              ("RPUSH", "l") + tuple("f%08d" % j for j in range(500)), _enc("l", QL),
              ("LREM", "l", "0", "f00000007"), _enc("l", QL), ("LTRIM", "l", "0", "100"), _enc("l", LP),
              ("LRANGE", "l", "0", "3"), ("LINDEX", "l", "-1")]
    # Small lists are listpacks; LINSERT / LSET convert before looking for the pivot / index.
    steps += [("RPUSH", "s", "a", "b"), _enc("s", LP), ("LINSERT", "s", "BEFORE", "nope", "v" * 9000),
              _enc("s", QL), ("LRANGE", "s", "0", "-1"),
              ("RPUSH", "t", "a"), ("LSET", "t", "5", "v" * 9000), _enc("t", QL),
              ("LSET", "t", "0", "w" * 9000), _enc("t", QL), ("LSET", "t", "0", "x"), _enc("t", LP),
              ("LRANGE", "t", "0", "-1")]
    return steps


SCENARIOS["list_encodings_default"] = _encoding_thresholds()

SCENARIOS["list_encodings_by_count"] = [
    ("CONFIG", "SET", "list-max-listpack-size", "4"),
    ("RPUSH", "l", "1", "2", "3", "4"), _enc("l", LP), ("RPUSH", "l", "5"), _enc("l", QL),
    ("RPOP", "l"), _enc("l", QL), ("RPOP", "l"), _enc("l", QL), ("RPOP", "l"), _enc("l", LP),
    ("LRANGE", "l", "0", "-1"), ("LPUSH", "l", "a", "b", "c"), _enc("l", QL),
    ("LINSERT", "l", "AFTER", "b", "x"), ("LINSERT", "l", "BEFORE", "1", "y"),
    ("LRANGE", "l", "0", "-1"), ("LREM", "l", "0", "x"), ("LREM", "l", "0", "y"),
    ("LRANGE", "l", "0", "-1"), ("LPOP", "l", "3"), _enc("l", LP),
    ("CONFIG", "SET", "list-max-listpack-size", "0"), ("DEL", "l"),
    ("RPUSH", "l", "a"), _enc("l", LP), ("RPUSH", "m", "a", "b"), _enc("m", QL),
    ("RPOP", "m"), _enc("m", QL), ("RPUSH", "l", "b"), _enc("l", QL),
    ("CONFIG", "SET", "list-max-listpack-size", "-1"), ("DEL", "l"),
    ("RPUSH", "l", "a" * 4080), _enc("l", LP), ("RPUSH", "l", ""), _enc("l", LP),
    ("RPUSH", "l", "b"), _enc("l", LP), ("RPUSH", "l", "c"), _enc("l", QL),
    ("CONFIG", "SET", "list-max-listpack-size", "-5"), ("DEL", "l"),
    ("RPUSH", "l", "a" * 65000), _enc("l", LP), ("RPUSH", "l", "a" * 600), _enc("l", QL),
    ("CONFIG", "SET", "list-max-listpack-size", "-100"), ("DEL", "l"),
    ("RPUSH", "l", "a" * 65000), _enc("l", LP), ("RPUSH", "l", "a" * 600), _enc("l", QL),
]
CLEANUP["list_encodings_by_count"] = [("CONFIG", "SET", "list-max-listpack-size", "-2")]


def _long_list():
    steps = [("RPUSH", "l") + tuple(str(i) for i in range(1000)),
             ("LPUSH", "l") + tuple("h%d" % i for i in range(1000))]
    for i in [0, 1, 999, 1000, 1001, 1500, 1999, -1, -2, -1000, -1001, -2000, -2001]:
        steps.append(("LINDEX", "l", str(i)))
    steps += [("LRANGE", "l", "995", "1005"), ("LRANGE", "l", "-5", "-1"), ("LRANGE", "l", "1990", "3000"),
              ("LSET", "l", "1000", "mid"), ("LINSERT", "l", "BEFORE", "mid", "pre"),
              ("LINSERT", "l", "AFTER", "mid", "post"), ("LRANGE", "l", "998", "1004"),
              ("LPOS", "l", "500"), ("LPOS", "l", "h500"), ("LPOS", "l", "mid", "RANK", "-1"),
              ("LREM", "l", "0", "mid"), ("LLEN", "l"), ("LTRIM", "l", "100", "-100"), ("LLEN", "l"),
              ("LINDEX", "l", "0"), ("LINDEX", "l", "-1"), ("LPOP", "l", "700"), ("RPOP", "l", "700"),
              ("LRANGE", "l", "0", "-1")]
    return steps


SCENARIOS["list_long"] = _long_list()


def _random_ops(seed, n):
    """A seeded random sequence over a few keys (some on each shard), with small nodes so that
    darner's node splits and merges are exercised; every reply is compared with the reference."""
    import random
    rnd = random.Random(seed)
    keys = ["ra", "rb", "rc", "rd"]
    vals = ["a", "b", "c", "1", "22", "-3", "", "x" * 70, BIN]

    def k():
        return rnd.choice(keys)

    def v():
        return rnd.choice(vals)

    def i():
        return str(rnd.randint(-12, 12))

    steps = [("CONFIG", "SET", "list-max-listpack-size", str(rnd.choice([1, 2, 3, 5, -1])))]
    for _ in range(n):
        op = rnd.randrange(16)
        if op < 4:
            steps.append((rnd.choice(["LPUSH", "RPUSH", "LPUSHX", "RPUSHX"]), k()) +
                         tuple(v() for _ in range(rnd.randint(1, 6))))
        elif op == 4:
            steps.append((rnd.choice(["LPOP", "RPOP"]), k()) + ((str(rnd.randint(0, 4)),) if rnd.random() < .5 else ()))
        elif op == 5:
            steps.append(("LINSERT", k(), rnd.choice(["BEFORE", "AFTER"]), v(), v()))
        elif op == 6:
            steps.append(("LSET", k(), i(), v()))
        elif op == 7:
            steps.append(("LREM", k(), str(rnd.randint(-3, 3)), v()))
        elif op == 8:
            steps.append(("LTRIM", k(), i(), i()))
        elif op == 9:
            steps.append(("LMOVE", k(), k(), rnd.choice(["LEFT", "RIGHT"]), rnd.choice(["LEFT", "RIGHT"])))
        elif op == 10:
            steps.append(("LMPOP", "2", k(), k(), rnd.choice(["LEFT", "RIGHT"]), "COUNT", str(rnd.randint(1, 4))))
        elif op == 11:
            steps.append(("LPOS", k(), v(), "RANK", rnd.choice(["1", "-1", "2", "-2"]), "COUNT", str(rnd.randint(0, 3))))
        elif op == 12:
            steps.append(("LINDEX", k(), i()))
        else:
            steps.append(("LRANGE", k(), i(), i()))
        if rnd.random() < 0.1:
            steps.append(("LRANGE", k(), "0", "-1"))
    steps += [("LRANGE", kk, "0", "-1") for kk in keys]
    return steps


for _seed in range(8):
    SCENARIOS["list_random_ops_%d" % _seed] = _random_ops(_seed, 600)
    CLEANUP["list_random_ops_%d" % _seed] = [("CONFIG", "SET", "list-max-listpack-size", "-2")]

SCENARIOS["list_with_generic_commands"] = [
    ("RPUSH", "l", "a", "b", "c"), ("TYPE", "l"), ("COPY", "l", "l2"), ("LRANGE", "l2", "0", "-1"),
    ("LPUSH", "l2", "z"), ("LRANGE", "l", "0", "-1"), ("RENAME", "l", "l3"), ("LLEN", "l"),
    ("EXPIRE", "l3", "100"), ("LPUSH", "l3", "x"), ("RPOP", "l3"), ("TTL", "l3"),
    ("LMOVE", "l3", "l4", "LEFT", "LEFT"), ("TTL", "l4"), ("TTL", "l3"),
    ("PEXPIRE", "l3", "1"), ("DEBUG", "SLEEP", "0.01"), ("LLEN", "l3"), ("LPUSHX", "l3", "a"),
    ("EXISTS", "l3"), ("DEL", "l2"), ("EXISTS", "l2"), ("DBSIZE",),
    S("KEYS", "*"), ("GET", "l4"), ("INCR", "l4"), ("SET", "l4", "v"), ("LLEN", "l4"),
]
