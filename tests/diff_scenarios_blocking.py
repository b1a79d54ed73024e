"""Differential scenarios for the blocking commands' non-waiting paths: a key that can serve
at once, errors, short timeouts, and MULTI (where they never block). Waking by another
client's push is covered by crates/server/tests/e2e/blocking.rs."""

SCENARIOS = {}

SCENARIOS["blocking_list_immediate"] = [
    ("RPUSH", "l1", "a", "b", "c"), ("BLPOP", "missing", "l1", "0"), ("BRPOP", "missing", "l1", "0"),
    ("BLPOP", "l1", "0.01"), ("BLPOP", "l1", "0.01"), ("EXISTS", "l1"),
    ("RPUSH", "l2{t}", "x"), ("BLMOVE", "l2{t}", "d{t}", "LEFT", "RIGHT", "0"), ("LRANGE", "d{t}", "0", "-1"),
    ("RPUSH", "l3", "y", "z"), ("BRPOPLPUSH", "l3", "d2", "0"), ("LRANGE", "d2", "0", "-1"),
    ("BLMOVE", "l3", "l3", "LEFT", "RIGHT", "0"), ("LRANGE", "l3", "0", "-1"),
    ("RPUSH", "m1", "1", "2", "3"), ("BLMPOP", "0", "2", "m0", "m1", "LEFT", "COUNT", "2"),
    ("BLMPOP", "0", "1", "m1", "RIGHT", "COUNT", "5"), ("BLMPOP", "0.01", "1", "m1", "LEFT"),
    ("BLPOP", "none1", "none2", "0.01"), ("BRPOPLPUSH", "none", "d3", "0.01"),
    ("BLMOVE", "none", "d3", "RIGHT", "LEFT", "0.01"), ("EXISTS", "d3"),
]

SCENARIOS["blocking_list_errors"] = [
    ("SET", "s", "v"), ("RPUSH", "l", "a", "b", "c"),
    ("BLPOP", "s", "l", "0"), ("BLPOP", "missing", "s", "0"), ("BLPOP", "l", "s", "0"),
    ("BLPOP", "l", "-1"), ("BLPOP", "l", "abc"), ("BLPOP", "l", "nan"), ("BLPOP", "l", ""),
    ("BLPOP", "l"), ("BLPOP",), ("BRPOP", "l", "-0.5"),
    ("BLMOVE", "l", "s", "LEFT", "RIGHT", "0"), ("LRANGE", "l", "0", "-1"),
    ("BLMOVE", "s", "l", "LEFT", "RIGHT", "0"), ("BLMOVE", "l", "d", "UP", "RIGHT", "0"),
    ("BLMOVE", "l", "d", "LEFT", "RIGHT", "x"), ("BRPOPLPUSH", "l", "s", "0"), ("BRPOPLPUSH", "s", "d", "0"),
    ("BLMPOP", "0", "0", "l", "LEFT"), ("BLMPOP", "0", "1", "l"), ("BLMPOP", "0", "2", "l", "LEFT"),
    ("BLMPOP", "0", "1", "l", "MIDDLE"), ("BLMPOP", "0", "1", "l", "LEFT", "COUNT", "0"),
    ("BLMPOP", "0", "1", "l", "LEFT", "COUNT", "1", "COUNT", "1"), ("BLMPOP", "-1", "1", "l", "LEFT"),
    ("BLMPOP", "0", "1", "s", "LEFT"),
]

SCENARIOS["blocking_list_in_multi"] = [
    ("MULTI",), ("BLPOP", "empty", "0"), ("BRPOP", "empty", "e2", "0"),
    ("BLMOVE", "empty", "d", "LEFT", "LEFT", "0"), ("BRPOPLPUSH", "empty", "d", "0"),
    ("BLMPOP", "0", "1", "empty", "LEFT"), ("RPUSH", "full", "v"), ("BLPOP", "full", "0"),
    ("EXEC",),
]

SCENARIOS["blocking_zset_immediate_and_errors"] = [
    ("ZADD", "z1", "1", "a", "2", "b", "3.5", "c"), ("BZPOPMIN", "nokey", "z1", "0"),
    ("BZPOPMAX", "nokey", "z1", "0"), ("BZMPOP", "0", "2", "no", "z1", "MIN", "COUNT", "5"),
    ("EXISTS", "z1"), ("BZPOPMIN", "z1", "0.01"), ("BZMPOP", "0.01", "1", "z1", "MAX"),
    ("SET", "s", "v"), ("BZPOPMIN", "s", "0"), ("BZPOPMIN", "nokey", "s", "0"), ("BZMPOP", "0", "1", "s", "MIN"),
    ("BZPOPMIN", "z", "-1"), ("BZPOPMIN", "z", "x"), ("BZMPOP", "0", "0", "z", "MIN"),
    ("BZMPOP", "0", "1", "z", "MID"), ("BZMPOP", "0", "1", "z", "MIN", "COUNT", "0"),
    ("BZMPOP", "0", "2", "z", "MIN"), ("BZPOPMIN",), ("BZMPOP", "0"),
    ("MULTI",), ("BZPOPMIN", "empty", "0"), ("BZMPOP", "0", "1", "empty", "MAX"), ("EXEC",),
]
