"""Differential scenarios of hash field expiry (Redis 7.4: HEXPIRE, HPEXPIRE, HEXPIREAT,
HPEXPIREAT, HTTL, HPTTL, HEXPIRETIME, HPEXPIRETIME, HPERSIST; see diff_scenarios.py for the
step syntax).

Debian's redis-server is 7.0, which has none of these commands, so every step that involves
one, or that reads a hash after one changed it, is a golden X() step whose expected bytes
follow Redis 7.4's documented behaviour. Times are far in the future (4102444800 =
2100-01-01T00:00:00Z) or already past, so no reply depends on the clock. Replies are chosen
to read the same in RESP2 and RESP3 (integers, arrays of integers or bulk strings).
"""

from differential import X

NOTE = "Redis 7.4 field expiry; Debian's 7.0 reference has no HEXPIRE"
FAR = "4102444800"
FAR_MS = "4102444800000"


def G(expect, *args):
    return X(expect, *args, note=NOTE)


def ints(*vals):
    return b"*%d\r\n" % len(vals) + b"".join(b":%d\r\n" % v for v in vals)


def err(text):
    return b"-" + text.encode() + b"\r\n"


WRONGTYPE = err("WRONGTYPE Operation against a key holding the wrong kind of value")
NUMFIELDS_SET = err("ERR Parameter `numFields` should be greater than 0")
NUMFIELDS_GET = err("ERR Number of fields must be a positive integer")
MISMATCH = err("ERR The `numfields` parameter must match the number of arguments")
NO_FIELDS = err("ERR Mandatory argument FIELDS is missing or not at the right position")

SCENARIOS = {}
CLEANUP = {}

SCENARIOS["hash_ttl_set_and_read"] = [
    ("HSET", "h", "a", "1", "b", "2", "c", "3"),
    ("OBJECT", "ENCODING", "h"),
    G(ints(1, -2), "HEXPIREAT", "h", FAR, "FIELDS", "2", "a", "zz"),
    G(b"$10\r\nlistpackex\r\n", "OBJECT", "ENCODING", "h"),
    G(ints(4102444800, -1, -2), "HEXPIRETIME", "h", "FIELDS", "3", "a", "b", "zz"),
    G(ints(4102444800000), "HPEXPIRETIME", "h", "FIELDS", "1", "a"),
    G(ints(-1, -2), "HTTL", "h", "FIELDS", "2", "b", "zz"),
    G(ints(-1, -2), "HPTTL", "h", "FIELDS", "2", "b", "zz"),
    G(ints(1), "HPEXPIREAT", "h", "4102444800123", "FIELDS", "1", "b"),
    G(ints(4102444801), "HEXPIRETIME", "h", "FIELDS", "1", "b"),  # rounded up
    G(ints(-2, -2), "HEXPIRE", "nokey", "100", "FIELDS", "2", "a", "b"),
    G(ints(-2), "HTTL", "nokey", "FIELDS", "1", "a"),
    G(ints(-2), "HPERSIST", "nokey", "FIELDS", "1", "a"),
    G(ints(1, -1, -2), "HPERSIST", "h", "FIELDS", "3", "a", "c", "zz"),
    G(ints(-1), "HEXPIRETIME", "h", "FIELDS", "1", "a"),
    G(b"$10\r\nlistpackex\r\n", "OBJECT", "ENCODING", "h"),
    G(b":3\r\n", "HLEN", "h"),
]

SCENARIOS["hash_ttl_conditions"] = [
    ("HSET", "h", "a", "1", "b", "2"),
    G(ints(1), "HEXPIREAT", "h", FAR, "NX", "FIELDS", "1", "a"),
    G(ints(0, 1), "HEXPIREAT", "h", "4102444900", "NX", "FIELDS", "2", "a", "b"),
    G(ints(1), "HPERSIST", "h", "FIELDS", "1", "b"),
    G(ints(1, 0), "HEXPIREAT", "h", "4102444850", "XX", "FIELDS", "2", "a", "b"),
    # GT: no TTL counts as infinite, so it never holds; LT always does.
    G(ints(1, 0), "HEXPIREAT", "h", "4102444860", "gt", "FIELDS", "2", "a", "b"),
    G(ints(0, 0), "HEXPIREAT", "h", "4102444860", "GT", "FIELDS", "2", "a", "b"),
    G(ints(1, 1), "HEXPIREAT", "h", "4102444855", "lt", "FIELDS", "2", "a", "b"),
    G(ints(0, 0), "HEXPIREAT", "h", "4102444855", "LT", "FIELDS", "2", "a", "b"),
    G(ints(4102444855, 4102444855), "HEXPIRETIME", "h", "FIELDS", "2", "a", "b"),
    # A condition that fails never deletes, even with a past time.
    G(ints(0), "HEXPIREAT", "h", "1", "NX", "FIELDS", "1", "a"),
    G(b":2\r\n", "HLEN", "h"),
]

SCENARIOS["hash_ttl_past_times_delete"] = [
    ("HSET", "h", "a", "1", "b", "2", "c", "3"),
    G(ints(2, -2), "HEXPIREAT", "h", "1", "FIELDS", "2", "a", "a"),
    G(ints(2), "HPEXPIRE", "h", "0", "FIELDS", "1", "b"),
    G(b"*1\r\n$1\r\nc\r\n", "HKEYS", "h"),
    G(b":0\r\n", "HEXISTS", "h", "a"),
    G(ints(2), "HEXPIRE", "h", "0", "FIELDS", "1", "c"),
    G(b":0\r\n", "EXISTS", "h"),
    G(b":0\r\n", "HLEN", "h"),
]

SCENARIOS["hash_ttl_writes"] = [
    ("HSET", "h", "a", "1", "b", "2", "c", "3"),
    G(ints(1, 1, 1), "HEXPIREAT", "h", FAR, "FIELDS", "3", "a", "b", "c"),
    # HSET and HMSET clear a TTL; HSETNX on an existing field changes nothing;
    # HINCRBY and HINCRBYFLOAT keep it (Redis 7.4's HASH_SET_KEEP_TTL).
    G(b":0\r\n", "HSET", "h", "a", "10"),
    G(b":0\r\n", "HSETNX", "h", "b", "x"),
    G(b":12\r\n", "HINCRBY", "h", "c", "9"),
    G(ints(-1, 4102444800, 4102444800), "HEXPIRETIME", "h", "FIELDS", "3", "a", "b", "c"),
    G(b"$4\r\n12.5\r\n", "HINCRBYFLOAT", "h", "c", "0.5"),
    G(ints(4102444800), "HEXPIRETIME", "h", "FIELDS", "1", "c"),
    G(b"+OK\r\n", "HMSET", "h", "c", "x"),
    G(ints(-1), "HEXPIRETIME", "h", "FIELDS", "1", "c"),
    G(b":1\r\n", "HDEL", "h", "b"),
    G(ints(-2), "HEXPIRETIME", "h", "FIELDS", "1", "b"),
]

SCENARIOS["hash_ttl_encodings"] = [
    ("CONFIG", "SET", "hash-max-listpack-entries", "2"),
    ("HSET", "p", "x", "1"),
    # The family switches a listpack to listpackex even when no field matches.
    G(ints(-2), "HEXPIRE", "p", "100", "FIELDS", "1", "nope"),
    G(b"$10\r\nlistpackex\r\n", "OBJECT", "ENCODING", "p"),
    G(ints(1), "HEXPIREAT", "p", FAR, "FIELDS", "1", "x"),
    G(b":2\r\n", "HSET", "p", "y", "2", "z", "3"),
    G(b"$9\r\nhashtable\r\n", "OBJECT", "ENCODING", "p"),
    G(ints(4102444800, -1), "HEXPIRETIME", "p", "FIELDS", "2", "x", "y"),
    G(ints(2), "HEXPIREAT", "p", "1", "FIELDS", "1", "y"),
    G(b":2\r\n", "HLEN", "p"),
    G(b"$9\r\nhashtable\r\n", "OBJECT", "ENCODING", "p"),
    ("CONFIG", "SET", "hash-max-listpack-entries", "128"),
]
CLEANUP["hash_ttl_encodings"] = [("CONFIG", "SET", "hash-max-listpack-entries", "128")]

SCENARIOS["hash_ttl_errors"] = [
    ("HSET", "h", "a", "1"),
    ("SET", "s", "x"),
    G(WRONGTYPE, "HEXPIRE", "s", "abc", "FIELDS", "1", "a"),
    G(WRONGTYPE, "HTTL", "s", "FIELDS", "0", "a"),
    G(WRONGTYPE, "HPERSIST", "s", "FIELDS", "1", "a"),
    G(err("ERR value is not an integer or out of range"), "HEXPIRE", "h", "abc", "FIELDS", "1", "a"),
    G(err("ERR invalid expire time, must be >= 0"), "HPEXPIRE", "h", "-1", "FIELDS", "1", "a"),
    G(err("ERR invalid expire time in 'hexpire' command"), "HEXPIRE", "h", "70368744178", "FIELDS", "1", "a"),
    G(err("ERR invalid expire time in 'hexpireat' command"), "HEXPIREAT", "h", "70368744178", "FIELDS", "1", "a"),
    G(err("ERR invalid expire time in 'hpexpireat' command"), "HPEXPIREAT", "h", "70368744177664", "FIELDS", "1", "a"),
    G(NUMFIELDS_SET, "HEXPIRE", "h", "10", "FIELDS", "0", "a"),
    G(NUMFIELDS_SET, "HEXPIRE", "h", "10", "FIELDS", "x", "a"),
    G(MISMATCH, "HEXPIRE", "h", "10", "FIELDS", "2", "a"),
    G(MISMATCH, "HEXPIRE", "h", "10", "FIELDS", "1", "a", "b"),
    G(NO_FIELDS, "HEXPIRE", "h", "10", "XX", "FIELD", "1", "a"),
    G(NO_FIELDS, "HEXPIRE", "h", "10", "NX", "XX", "FIELDS", "1", "a"),
    G(err("ERR wrong number of arguments for 'hexpire' command"), "HEXPIRE", "h", "10", "FIELDS"),
    G(NUMFIELDS_GET, "HTTL", "h", "FIELDS", "0", "a"),
    G(NUMFIELDS_GET, "HPEXPIRETIME", "h", "FIELDS", "-1", "a"),
    G(NUMFIELDS_GET, "HPERSIST", "h", "FIELDS", "abc", "a"),
    G(MISMATCH, "HPTTL", "h", "FIELDS", "2", "a"),
    G(NO_FIELDS, "HEXPIRETIME", "h", "FIELD", "1", "a"),
    G(err("ERR wrong number of arguments for 'httl' command"), "HTTL", "h", "FIELDS", "1"),
    # Nothing above changed the hash.
    G(ints(-1), "HTTL", "h", "FIELDS", "1", "a"),
]


# Redis 8.0's HGETDEL, HGETEX and HSETEX, and Dragonfly's HSETEX form. Neither Debian's 7.0
# nor 7.2 has them: every step that uses one is a golden X() step whose bytes follow Redis
# 8.0's t_hash.c (replies, error texts and the order in which errors are found) or
# Dragonfly's documented HSETEX.
NOTE8 = "Redis 8.0 command; Debian's 7.0 reference lacks it"
NOTE_DF = "Dragonfly's HSETEX form; no Redis has it"


def G8(expect, *args):
    return X(expect, *args, note=NOTE8)


def GDF(expect, *args):
    return X(expect, *args, note=NOTE_DF)


def bulks(*vals):
    """An array of bulk strings and nulls, as RESP2 and RESP3 write it."""
    out = {2: b"*%d\r\n" % len(vals), 3: b"*%d\r\n" % len(vals)}
    for v in vals:
        for proto, null in ((2, b"$-1\r\n"), (3, b"_\r\n")):
            out[proto] += null if v is None else b"$%d\r\n%s\r\n" % (len(v), v.encode())
    return out


NO_FIELDS8 = NO_FIELDS
SETEX_ARITY = err("ERR wrong number of arguments for 'hsetex' command")
ONE_TTL = err("ERR Only one of EX, PX, EXAT, PXAT or KEEPTTL arguments can be specified")
ONE_COND = err("ERR Only one of FXX or FNX arguments can be specified")

SCENARIOS["hash_ttl_hgetdel"] = [
    ("HSET", "h", "a", "1", "b", "2", "c", "3"),
    G8(bulks("1", None, None, "2"), "HGETDEL", "h", "FIELDS", "4", "a", "zz", "a", "b"),
    G(b"*1\r\n$1\r\nc\r\n", "HKEYS", "h"),
    G8(bulks("3"), "HGETDEL", "h", "fields", "1", "c"),
    G(b":0\r\n", "EXISTS", "h"),
    G8(bulks(None, None), "HGETDEL", "nokey", "FIELDS", "2", "a", "b"),
    ("SET", "s", "x"),
    G8(WRONGTYPE, "HGETDEL", "s", "FIELDS", "0", "a"),
    G(b":1\r\n", "HSET", "h", "a", "1"),
    G8(NO_FIELDS8, "HGETDEL", "h", "FIELD", "1", "a"),
    G8(NUMFIELDS_GET, "HGETDEL", "h", "FIELDS", "0", "a"),
    G8(NUMFIELDS_GET, "HGETDEL", "h", "FIELDS", "x", "a"),
    G8(MISMATCH, "HGETDEL", "h", "FIELDS", "2", "a"),
    G8(err("ERR wrong number of arguments for 'hgetdel' command"), "HGETDEL", "h", "FIELDS", "1"),
    ("HGET", "h", "a"),
]

SCENARIOS["hash_ttl_hgetex"] = [
    ("HSET", "h", "a", "1", "b", "2", "c", "3"),
    G8(bulks("1", None), "HGETEX", "h", "FIELDS", "2", "a", "zz"),
    ("OBJECT", "ENCODING", "h"),
    # Any option turns a listpack into listpackex.
    G8(bulks(None), "HGETEX", "h", "PERSIST", "FIELDS", "1", "zz"),
    G(b"$10\r\nlistpackex\r\n", "OBJECT", "ENCODING", "h"),
    G8(bulks("1", None, "2"), "HGETEX", "h", "EXAT", FAR, "FIELDS", "3", "a", "zz", "b"),
    G(ints(4102444800, 4102444800, -1), "HEXPIRETIME", "h", "FIELDS", "3", "a", "b", "c"),
    G8(bulks("3"), "HGETEX", "h", "PXAT", "4102444800123", "FIELDS", "1", "c"),
    G(ints(4102444800123), "HPEXPIRETIME", "h", "FIELDS", "1", "c"),
    G8(bulks("1"), "HGETEX", "h", "PERSIST", "FIELDS", "1", "a"),
    G(ints(-1), "HTTL", "h", "FIELDS", "1", "a"),
    # EX 0 and past times return the value and delete the field, then the key.
    G8(bulks("1", None), "HGETEX", "h", "EX", "0", "FIELDS", "2", "a", "a"),
    G8(bulks("2"), "HGETEX", "h", "EXAT", "1", "FIELDS", "1", "b"),
    G(b"*1\r\n$1\r\nc\r\n", "HKEYS", "h"),
    G8(bulks("3"), "HGETEX", "h", "PX", "0", "FIELDS", "1", "c"),
    G(b":0\r\n", "EXISTS", "h"),
    G8(bulks(None), "HGETEX", "nokey", "EX", "10", "FIELDS", "1", "a"),
]

SCENARIOS["hash_ttl_hgetex_errors"] = [
    ("HSET", "h", "a", "1"),
    ("SET", "s", "x"),
    G8(WRONGTYPE, "HGETEX", "s", "EX", "abc", "FIELD", "0"),
    G8(err("ERR value is not an integer or out of range"), "HGETEX", "h", "EX", "abc", "FIELDS", "1", "a"),
    G8(err("ERR invalid expire time, must be >= 0"), "HGETEX", "h", "PX", "-1", "FIELDS", "1", "a"),
    G8(err("ERR invalid expire time in 'hgetex' command"), "HGETEX", "h", "EX", "70368744178", "FIELDS", "1", "a"),
    # Redis 8.0 takes one option, right after the key.
    G8(NO_FIELDS8, "HGETEX", "h", "EX", "10", "PERSIST", "FIELDS", "1", "a"),
    G8(NO_FIELDS8, "HGETEX", "h", "KEEPTTL", "FIELDS", "1", "a"),
    G8(NUMFIELDS_GET, "HGETEX", "h", "FIELDS", "0", "a"),
    G8(MISMATCH, "HGETEX", "h", "FIELDS", "2", "a"),
    G8(MISMATCH, "HGETEX", "h", "PERSIST", "FIELDS", "1"),
    G8(err("ERR wrong number of arguments for 'hgetex' command"), "HGETEX", "h", "FIELDS", "1"),
    ("OBJECT", "ENCODING", "h"),
]

SCENARIOS["hash_ttl_hsetex"] = [
    G8(b":1\r\n", "HSETEX", "h", "FIELDS", "2", "a", "1", "b", "2"),
    G(b"$8\r\nlistpack\r\n", "OBJECT", "ENCODING", "h"),
    G8(b":0\r\n", "HSETEX", "h", "FNX", "FIELDS", "2", "c", "3", "a", "9"),
    G8(b":0\r\n", "HSETEX", "h", "FXX", "FIELDS", "2", "a", "9", "c", "3"),
    G8(b":0\r\n", "HSETEX", "nokey", "FXX", "FIELDS", "1", "a", "1"),
    ("EXISTS", "nokey"),
    G8(b":1\r\n", "HSETEX", "h", "FXX", "EXAT", FAR, "FIELDS", "2", "a", "10", "b", "20"),
    G(b"$10\r\nlistpackex\r\n", "OBJECT", "ENCODING", "h"),
    G(bulks("10", "20"), "HMGET", "h", "a", "b"),
    # KEEPTTL keeps a TTL, no option drops it.
    G8(b":1\r\n", "HSETEX", "h", "KEEPTTL", "FNX", "FIELDS", "1", "c", "3"),
    G8(b":1\r\n", "HSETEX", "h", "KEEPTTL", "FIELDS", "2", "a", "11", "c", "33"),
    G8(b":1\r\n", "HSETEX", "h", "FIELDS", "1", "b", "22"),
    G(ints(4102444800, -1, -1), "HEXPIRETIME", "h", "FIELDS", "3", "a", "b", "c"),
    # Past times set and delete at once; the key goes with its last field.
    G8(b":1\r\n", "HSETEX", "h", "PX", "0", "FIELDS", "2", "a", "1", "new", "1"),
    G(b"*2\r\n$1\r\nb\r\n$1\r\nc\r\n", "HKEYS", "h"),
    G8(b":1\r\n", "HSETEX", "h", "EXAT", "1", "FIELDS", "2", "b", "1", "c", "1"),
    G(b":0\r\n", "EXISTS", "h"),
]

SCENARIOS["hash_ttl_hsetex_errors"] = [
    ("HSET", "h", "a", "1"),
    ("SET", "s", "x"),
    # Parse errors come before the type check.
    G8(err("ERR invalid number of fields"), "HSETEX", "s", "FIELDS", "0", "a", "1"),
    G8(WRONGTYPE, "HSETEX", "s", "FIELDS", "1", "a", "1"),
    G8(err("ERR invalid number of fields"), "HSETEX", "h", "FIELDS", "x", "a", "1"),
    G8(SETEX_ARITY, "HSETEX", "h", "FIELDS", "2", "a", "1"),
    G8(SETEX_ARITY, "HSETEX", "h", "EX", "10", "FIELDS", "1", "a"),
    G8(ONE_COND, "HSETEX", "h", "FNX", "FXX", "FIELDS", "1", "a", "1"),
    G8(ONE_TTL, "HSETEX", "h", "EX", "10", "KEEPTTL", "FIELDS", "1", "a", "1"),
    G8(err("ERR value is not an integer or out of range"), "HSETEX", "h", "EX", "abc", "FIELDS", "1", "a", "1"),
    G8(err("ERR invalid expire time, must be >= 0"), "HSETEX", "h", "EX", "-1", "FIELDS", "1", "a", "1"),
    G8(err("ERR invalid expire time in 'hsetex' command"), "HSETEX", "h", "EXAT", "70368744178", "FIELDS", "1", "a", "1"),
    G8(err("ERR unknown argument: GT"), "HSETEX", "h", "EX", "10", "GT", "FIELDS", "1", "a", "1"),
    G8(err("ERR unknown argument: NX"), "HSETEX", "h", "FNX", "NX", "FIELDS", "1", "a", "1"),
    ("HGET", "h", "a"),
]

SCENARIOS["hash_ttl_hsetex_dragonfly"] = [
    ("HSET", "h", "a", "1"),
    # Dragonfly's form: a TTL in seconds, then pairs; the reply counts new fields.
    GDF(b":1\r\n", "HSETEX", "h", "1000", "a", "2", "b", "3"),
    G(b"$10\r\nlistpackex\r\n", "OBJECT", "ENCODING", "h"),
    G(ints(1000, 1000), "HTTL", "h", "FIELDS", "2", "a", "b"),
    # NX keeps existing fields; KEEPTTL keeps an existing field's TTL (or its absence).
    GDF(b":1\r\n", "HSETEX", "h", "NX", "500", "a", "9", "c", "4"),
    G(bulks("2", "4"), "HMGET", "h", "a", "c"),
    ("HSET", "h", "d", "5"),
    GDF(b":1\r\n", "HSETEX", "h", "KEEPTTL", "100", "a", "7", "d", "6", "e", "8"),
    G(ints(1000, -1, 100), "HTTL", "h", "FIELDS", "3", "a", "d", "e"),
    GDF(err("ERR value is not an integer or out of range"), "HSETEX", "h", "0", "g", "1"),
    GDF(err("ERR value is not an integer or out of range"), "HSETEX", "h", "67108865", "g", "1"),
    GDF(SETEX_ARITY, "HSETEX", "h", "NX", "NX", "10", "g", "1"),
    GDF(SETEX_ARITY, "HSETEX", "h", "10", "g", "1", "x"),
    ("SET", "s", "x"),
    GDF(WRONGTYPE, "HSETEX", "s", "10", "g", "1"),
]
