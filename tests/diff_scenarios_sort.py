"""Differential scenarios for SORT / SORT_RO (cmd/sort.rs), merged into diff_scenarios.SCENARIOS.

Darner runs with 2 threads here: the weight and GET keys (w_*, h_*, o_*) spread over both
shards, so the BY / GET lookups cross shards. Sets have no order of their own: replies that
list a set in its native order are S() (order-insensitive).

Redis 7.2 stores SORT ... STORE results as listpack lists when small (7.0: quicklist): X().
"""

from differential import S, X

SCENARIOS = {}
CLEANUP = {}

LISTPACK = b"$8\r\nlistpack\r\n"
I64_MAX = "9223372036854775807"
I64_MIN = "-9223372036854775808"

SCENARIOS["sort_numeric"] = [
    ("RPUSH", "l", "3", "1", "2", "10", "-5", "1.5", "0", "-0", "1e2", "+7"),
    ("SORT", "l"), ("SORT", "l", "DESC"), ("SORT", "l", "ASC"), ("sort", "l", "desc", "asc"),
    ("SORT", "l", "ALPHA"), ("SORT", "l", "ALPHA", "DESC"),
    ("SORT", "l", "LIMIT", "1", "2"), ("SORT", "l", "LIMIT", "-1", "2"),
    ("SORT", "l", "LIMIT", "0", "-1"), ("SORT", "l", "LIMIT", "2", "0"),
    ("SORT", "l", "LIMIT", "10", "5"), ("SORT", "l", "LIMIT", "9", "5"),
    ("SORT", "l", "LIMIT", "0", I64_MAX), ("SORT", "l", "LIMIT", I64_MIN, "3"),
    ("SORT", "l", "LIMIT", I64_MAX, I64_MAX), ("SORT", "l", "LIMIT", "3", I64_MIN),
    ("SORT", "l", "LIMIT", "2", "3", "DESC"), ("SORT", "l", "LIMIT", "1", "1", "LIMIT", "4", "2"),
    ("SORT", "l", "LIMIT", "x", "1"), ("SORT", "l", "LIMIT", "1", "1.5"),
    ("SORT", "l", "LIMIT", "1"), ("SORT", "l", "LIMIT"), ("SORT", "l", "FOO"),
    ("SORT", "l", "STORE"), ("SORT", "l", "BY"), ("SORT", "l", "GET"),
    ("SORT", "missing"), ("SORT", "missing", "LIMIT", "0", "1"), ("SORT", "missing", "DESC"),
    ("SET", "str", "1"), ("SORT", "str"), ("SORT", "str", "FOO"), ("SORT", "str", "LIMIT", "a", "b"),
    ("HSET", "hh", "a", "1"), ("SORT", "hh"),
    ("SORT_RO", "l"), ("SORT_RO", "l", "DESC", "LIMIT", "0", "3"),
    ("SORT_RO", "l", "STORE", "dst"), ("SORT_RO", "str"), ("SORT",), ("SORT_RO",),
    ("RPUSH", "bad", "1", "x", "2"), ("SORT", "bad"), ("SORT", "bad", "ALPHA"),
    ("SORT", "bad", "BY", "nosort"), ("SORT", "bad", "LIMIT", "0", "1"),
    ("SORT", "bad", "STORE", "dst"), ("EXISTS", "dst"),
]

SCENARIOS["sort_scores"] = [
    ("RPUSH", "a", " 1", "2", "", "inf", "-inf", "-INFINITY", "0x10", "1e-5", "-3.5e1"),
    ("SORT", "a"), ("SORT", "a", "DESC"),
    ("RPUSH", "b", "1 "), ("SORT", "b"),
    ("RPUSH", "c", "nan"), ("SORT", "c"),
    # Redis leaves errno as strtod set it: ERANGE sticks until something clears errno
    # (string2d, used by INCRBYFLOAT, does), so each ERANGE case is followed by one.
    ("RPUSH", "d", "1e400"), ("SORT", "d"), ("INCRBYFLOAT", "fx", "1"),
    ("RPUSH", "e", "1e-400"), ("SORT", "e"), ("INCRBYFLOAT", "fx", "1"),
    ("RPUSH", "f", "1e-310"), ("SORT", "f"), ("INCRBYFLOAT", "fx", "1"),
    ("RPUSH", "f2", "4.9e-324"), ("SORT", "f2"), ("INCRBYFLOAT", "fx", "1"),
    ("RPUSH", "f3", "2.2250738585072014e-308", "0x1p-1074"), ("SORT", "f3"),
    ("INCRBYFLOAT", "fx", "1"),
    ("RPUSH", "g", " "), ("SORT", "g"),
    ("RPUSH", "h", "-"), ("SORT", "h"),
    ("RPUSH", "i", b"5\x00x", "4"), ("SORT", "i"),
    ("RPUSH", "j", "0x", "1"), ("SORT", "j"),
    ("RPUSH", "k", "\t\n7", "3"), ("SORT", "k"),
    # equal scores: ties broken by the elements' bytes
    ("RPUSH", "t", "1.0", "1", "01", "1e0", "0.5", "b"), ("SORT", "t", "LIMIT", "0", "5"),
    ("LPOP", "t", "0"), ("RPOP", "t"), ("SORT", "t"), ("SORT", "t", "DESC"),
]

SCENARIOS["sort_alpha"] = [
    ("RPUSH", "l", "b", "a", "B", "A", "10", "9", "", "ab", "a b", b"\xff", b"\x80x", "aa"),
    ("SORT", "l", "ALPHA"), ("SORT", "l", "ALPHA", "DESC"), ("SORT", "l", "alpha", "limit", "2", "3"),
    ("SORT", "l"), ("SORT", "l", "ALPHA", "STORE", "d"), ("LRANGE", "d", "0", "-1"),
    ("SADD", "s", "x", "y", "z", "1", "2"), ("SORT", "s", "ALPHA"), ("SORT", "s", "ALPHA", "DESC"),
    ("SORT", "s"),
    ("SADD", "n", "3", "1", "2", "-7", "100"), ("SORT", "n"), ("SORT", "n", "DESC"),
    ("SORT", "n", "ALPHA"),
    ("ZADD", "z", "1", "c", "2", "b", "3", "a"), ("SORT", "z", "ALPHA"),
    ("SORT", "z", "ALPHA", "DESC", "LIMIT", "1", "5"), ("SORT", "z"),
]

SCENARIOS["sort_nosort"] = [
    ("RPUSH", "l", "c", "a", "b", "z", "y"),
    ("SORT", "l", "BY", "nosort"), ("SORT", "l", "BY", "nosort", "DESC"),
    ("SORT", "l", "BY", "nosort", "LIMIT", "1", "2"),
    ("SORT", "l", "BY", "nosort", "LIMIT", "1", "2", "DESC"),
    ("SORT", "l", "BY", "nosort", "LIMIT", "3", "100", "DESC"),
    ("SORT", "l", "BY", "nosort", "LIMIT", "-5", "2", "DESC"),
    ("SORT", "l", "BY", "nosort", "LIMIT", "7", "2"),
    ("SORT", "l", "BY", "nosort", "LIMIT", "0", "0"),
    ("SORT", "l", "BY", "constant"), ("SORT", "l", "BY", "w_->f"),
    ("SORT", "l", "BY", "nosort", "ALPHA"), ("SORT", "l", "BY", "w_*", "BY", "nosort"),
    ("SORT", "l", "BY", "nosort", "BY", "w_*"),
    ("SORT", "l", "BY", "nosort", "STORE", "d"), ("LRANGE", "d", "0", "-1"),
    ("ZADD", "z", "5", "e", "1", "a", "3", "c", "2", "b", "4", "d"),
    ("SORT", "z", "BY", "nosort"), ("SORT", "z", "BY", "nosort", "DESC"),
    ("SORT", "z", "BY", "nosort", "LIMIT", "1", "3"),
    ("SORT", "z", "BY", "nosort", "LIMIT", "1", "3", "DESC"),
    ("SORT", "z", "BY", "nosort", "LIMIT", "0", "1", "DESC"),
    ("SORT", "z", "BY", "nosort", "LIMIT", "4", "10", "DESC"),
    ("SORT", "z", "BY", "nosort", "LIMIT", "5", "10"),
    ("SORT", "z", "BY", "nosort", "LIMIT", "-1", "-1", "DESC"),
    ("SORT", "z", "BY", "nosort", "STORE", "d2"), ("LRANGE", "d2", "0", "-1"),
    ("SADD", "s", "b", "c", "a", "10", "2"),
    S("SORT", "s", "BY", "nosort"), S("SORT", "s", "BY", "nosort", "DESC"),
    ("SORT", "s", "BY", "nosort", "STORE", "d3"), ("LRANGE", "d3", "0", "-1"),
    ("SORT", "s", "BY", "nosort", "DESC", "STORE", "d3"), ("LRANGE", "d3", "0", "-1"),
    ("SORT", "s", "BY", "nosort", "LIMIT", "1", "2", "STORE", "d3"), ("LRANGE", "d3", "0", "-1"),
    ("SORT", "s", "BY", "nosort", "STORE", "d3", "GET", "#", "GET", "o_*"),
    ("LRANGE", "d3", "0", "-1"),
]

SCENARIOS["sort_by_get"] = [
    ("RPUSH", "l", "1", "2", "3", "4", "5", "6"),
    ("MSET", "w_1", "50", "w_2", "-1", "w_3", "7.5", "w_4", "7.5", "w_6", "1e3"),
    ("MSET", "o_1", "one", "o_2", "two", "o_3", "three", "o_5", "five"),
    ("HSET", "h_1", "f", "z", "g", "100"), ("HSET", "h_2", "f", "a", "g", "3"),
    ("HSET", "h_3", "f", "m"), ("HSET", "h_4", "g", "-2"), ("SADD", "w_5x", "1"),
    ("SORT", "l", "BY", "w_*"), ("SORT", "l", "BY", "w_*", "DESC"),
    ("SORT", "l", "BY", "w_*", "LIMIT", "1", "3"), ("SORT", "l", "BY", "w_*", "LIMIT", "1", "3", "DESC"),
    ("SORT", "l", "BY", "h_*->g"), ("SORT", "l", "BY", "h_*->f", "ALPHA"),
    ("SORT", "l", "BY", "h_*->f", "ALPHA", "DESC"), ("SORT", "l", "BY", "h_*->f"),
    ("SORT", "l", "BY", "o_*", "ALPHA"), ("SORT", "l", "BY", "o_*", "ALPHA", "DESC"),
    ("SORT", "l", "BY", "o_*"), ("SORT", "l", "BY", "w_*x"), ("SORT", "l", "BY", "w_*x", "ALPHA"),
    ("SORT", "l", "BY", "nokey_*"), ("SORT", "l", "BY", "nokey_*", "DESC"),
    ("SORT", "l", "BY", "nokey_*", "ALPHA"), ("SORT", "l", "BY", "nokey_*", "ALPHA", "DESC"),
    ("SORT", "l", "GET", "#"), ("SORT", "l", "GET", "o_*"), ("SORT", "l", "GET", "o_*", "GET", "#"),
    ("SORT", "l", "GET", "h_*->f", "GET", "h_*->g", "GET", "w_*", "DESC"),
    ("SORT", "l", "GET", "const"), ("SORT", "l", "GET", "h_*->"), ("SORT", "l", "GET", "h_*->nof"),
    ("SORT", "l", "GET", "h_*"), ("SORT", "l", "GET", "w_*", "LIMIT", "2", "2"),
    ("SORT", "l", "BY", "w_*", "GET", "o_*", "GET", "#", "LIMIT", "0", "4"),
    ("SORT", "l", "BY", "nosort", "GET", "o_*", "DESC"),
    ("SORT", "l", "GET", "#", "LIMIT", "0", "0"), ("SORT", "l", "GET", "#", "GET", "#"),
    ("SORT", "l", "GET", "*"), ("SORT", "l", "GET", "o_**"),
    ("SET", "x_2_y", "two"), ("SORT", "l", "GET", "x_*_y"), ("SORT", "l", "BY", "##", "GET", "##"),
    ("SORT", "l", "BY", "w_*", "STORE", "d"), ("LRANGE", "d", "0", "-1"),
    ("SORT", "l", "BY", "w_*", "GET", "o_*", "GET", "#", "STORE", "d"), ("LRANGE", "d", "0", "-1"),
    ("SORT_RO", "l", "BY", "w_*", "GET", "o_*"),
    ("SET", "w_3", "abc"), ("SORT", "l", "BY", "w_*"), ("SORT", "l", "BY", "w_*", "ALPHA"),
    ("SORT", "l", "BY", "w_*", "LIMIT", "0", "1"),
    ("SADD", "s", "1", "2", "3"), ("SORT", "s", "BY", "o_*", "ALPHA", "GET", "o_*"),
    ("ZADD", "z", "3", "1", "2", "2", "1", "3"), ("SORT", "z", "BY", "w_*", "GET", "#", "GET", "o_*"),
]

SCENARIOS["sort_store"] = [
    ("RPUSH", "l", "3", "1", "2"),
    ("SET", "d", "old", "EX", "100"), ("SORT", "l", "STORE", "d"), ("TTL", "d"),
    ("TYPE", "d"), ("LRANGE", "d", "0", "-1"), X(LISTPACK, "OBJECT", "ENCODING", "d"),
    ("SORT", "l", "STORE", "d", "LIMIT", "0", "0"), ("EXISTS", "d"),
    ("SORT", "l", "STORE", "d", "LIMIT", "5", "1"), ("EXISTS", "d"),
    ("SORT", "missing", "STORE", "d"), ("EXISTS", "d"),
    ("SORT", "l", "STORE", "d", "STORE", "e"), ("EXISTS", "d"), ("LRANGE", "e", "0", "-1"),
    ("SORT", "l", "DESC", "STORE", "l"), ("LRANGE", "l", "0", "-1"),
    ("SORT", "l", "STORE", "{l}x", "GET", "nokey_*", "GET", "#"), ("LRANGE", "{l}x", "0", "-1"),
    ("SORT", "l", "STORE", "missing"), ("LRANGE", "missing", "0", "-1"),
    ("CONFIG", "SET", "list-max-listpack-size", "4"),
    ("RPUSH", "big", "1", "2", "3", "4", "5"), ("SORT", "big", "STORE", "bd"),
    ("OBJECT", "ENCODING", "bd"),
    ("SORT", "big", "STORE", "bd", "LIMIT", "0", "4"), X(LISTPACK, "OBJECT", "ENCODING", "bd"),
    ("CONFIG", "SET", "list-max-listpack-size", "-2"),
]
CLEANUP["sort_store"] = [("CONFIG", "SET", "list-max-listpack-size", "-2")]

SCENARIOS["sort_zset_encoding"] = [
    ("ZADD", "z", "1", "a", "2", "b"), ("OBJECT", "ENCODING", "z"),
    ("SORT", "z", "ALPHA"), ("OBJECT", "ENCODING", "z"), ("ZRANGE", "z", "0", "-1", "WITHSCORES"),
    ("ZADD", "z2", "1", "a"), ("SORT_RO", "z2", "BY", "nosort"), ("OBJECT", "ENCODING", "z2"),
    ("ZADD", "z2", "2", "b"), ("ZRANGE", "z2", "0", "-1"),
]

SCENARIOS["sort_multi"] = [
    ("RPUSH", "l", "2", "1"), ("SET", "w_1", "9"), ("SET", "w_2", "1"),
    ("MULTI",), ("SORT", "l", "BY", "w_*", "GET", "w_*"), ("SORT", "l", "STORE", "d"),
    ("LRANGE", "d", "0", "-1"), ("SORT_RO", "l", "STORE", "x"), ("EXEC",),
]

SCENARIOS["sort_odd_arguments"] = [
    ("RPUSH", "l", "2", "1"), ("SET", "w_1", "5"), ("SET", "w_2", "3"),
    ("SORT", "l", b"desc\x00x"), ("SORT", "l", b"BY\x00", "w_*"), ("SORT", "l", "By", "W_*"),
    ("SORT", "l", "BY", b"w_\x00*"), ("SORT", "l", "GET", b"#\x00x"), ("SORT", "l", "GET", "#x"),
    ("HSET", "h->_1x", "f->g", "A"), ("HSET", "h->_2x", "f->g", "B"),
    ("SORT", "l", "GET", "h->_*x->f->g"), ("SORT", "l", "BY", "h->_*x->f->g", "ALPHA", "DESC"),
    ("SORT", "l", "LIMIT", "0", "1", "LIMIT", "1", "1"), ("SORT", "l", "LIMIT", "01", "1"),
    ("SORT", "l", "LIMIT", " 1", "1"), ("SORT", "l", "STORE", "d", "STORE"),
    ("SORT", "l", "ASC", "DESC", "ALPHA", "ALPHA"),
]

SCENARIOS["sort_getkeys"] = [
    ("COMMAND", "GETKEYS", "SORT", "k"), ("COMMAND", "GETKEYS", "SORT", "k", "STORE", "d"),
    ("COMMAND", "GETKEYS", "SORT_RO", "k", "BY", "x"),
    ("COMMAND", "GETKEYSANDFLAGS", "SORT", "k", "STORE", "d"),
    ("COMMAND", "GETKEYS", "SORT", "k", "LIMIT", "0", "1", "STORE", "a", "GET", "x", "STORE", "b"),
    ("COMMAND", "GETKEYS", "SORT", "k", "STORE"), ("COMMAND", "GETKEYS", "SORT", "k", "GET", "store", "STORE", "z"),
]
