"""Differential scenarios of set member TTLs (Dragonfly's SADDEX, FIELDTTL, FIELDEXPIRE; see
diff_scenarios.py for the step syntax).

No Redis version has these commands, so every step that involves one, or that reads a set or
hash after one changed it, is a golden X() step whose expected bytes follow Dragonfly's
documented behaviour (its command reference and command table: replies, error texts, TTL
bounds). Plain steps only set up state that Redis 7.0 builds the same way. Replies are chosen
to read the same in RESP2 and RESP3 (integers, arrays of integers, bulk strings, errors).
"""

from differential import Sleep, X

NOTE = "Dragonfly member TTL command; no Redis has it"


def G(expect, *args):
    return X(expect, *args, note=NOTE)


def ints(*vals):
    return b"*%d\r\n" % len(vals) + b"".join(b":%d\r\n" % v for v in vals)


def i(v):
    return b":%d\r\n" % v


def bulk(s):
    return b"$%d\r\n%s\r\n" % (len(s), s.encode())


def err(text):
    return b"-" + text.encode() + b"\r\n"


WRONGTYPE = err("WRONGTYPE Operation against a key holding the wrong kind of value")
NOT_INT = err("ERR value is not an integer or out of range")


def arity(name):
    return err("ERR wrong number of arguments for '%s' command" % name)


SCENARIOS = {}
CLEANUP = {}

SCENARIOS["set_ttl_saddex"] = [
    G(i(3), "SADDEX", "s", "100", "a", "b", "c"),
    G(i(1), "SADDEX", "s", "100", "a", "d"),
    G(i(1), "SADDEX", "s", "KEEPTTL", "200", "a", "e"),
    G(i(0), "SADDEX", "s", "keepttl", "200", "e"),
    G(i(5), "SCARD", "s"),
    G(bulk("hashtable"), "OBJECT", "ENCODING", "s"),
    G(i(100), "FIELDTTL", "s", "a"),
    G(i(200), "FIELDTTL", "s", "e"),
    G(i(0), "SADDEX", "s", "7", "a"),
    G(i(7), "FIELDTTL", "s", "a"),
    G(i(0), "SADDEX", "s", "KEEPTTL", "9", "a"),
    G(i(7), "FIELDTTL", "s", "a"),
    # SADD keeps a member's TTL; a member it adds has none.
    G(i(1), "SADD", "s", "a", "x"),
    G(i(7), "FIELDTTL", "s", "a"),
    G(i(-1), "FIELDTTL", "s", "x"),
    G(ints(1, 1, 0), "SMISMEMBER", "s", "a", "x", "zz"),
    # The TTL is 1 .. 2^28-1 seconds, parsed before the key is looked at.
    G(NOT_INT, "SADDEX", "s", "0", "a"),
    G(NOT_INT, "SADDEX", "s", "-1", "a"),
    G(NOT_INT, "SADDEX", "s", "268435456", "a"),
    G(i(1), "SADDEX", "s", "268435455", "far"),
    G(i(268435455), "FIELDTTL", "s", "far"),
    G(NOT_INT, "SADDEX", "s", "1.5", "a"),
    G(NOT_INT, "SADDEX", "s", "KEEPTTL", "a", "b"),
    G(arity("saddex"), "SADDEX", "s", "KEEPTTL", "10"),
    G(arity("saddex"), "SADDEX", "s", "10"),
    ("SET", "str", "v"),
    G(WRONGTYPE, "SADDEX", "str", "10", "a"),
    G(NOT_INT, "SADDEX", "str", "0", "a"),
    ("GET", "str"),
    # An intset turns into a hashtable with its first member TTL, and stays one.
    ("SADD", "ints", "1", "2", "3"),
    ("OBJECT", "ENCODING", "ints"),
    G(i(1), "SADDEX", "ints", "10", "4"),
    G(bulk("hashtable"), "OBJECT", "ENCODING", "ints"),
    G(i(1), "SREM", "ints", "4"),
    G(bulk("hashtable"), "OBJECT", "ENCODING", "ints"),
    G(i(3), "SCARD", "ints"),
    # A new key.
    G(i(1), "SADDEX", "fresh", "KEEPTTL", "30", "m", "m"),
    G(i(30), "FIELDTTL", "fresh", "m"),
    G(i(-1), "TTL", "fresh"),
]

SCENARIOS["set_ttl_fieldttl_fieldexpire"] = [
    ("SADD", "s", "a", "b"),
    G(i(-1), "FIELDTTL", "s", "a"),
    G(i(-3), "FIELDTTL", "s", "zz"),
    G(i(-2), "FIELDTTL", "nokey", "a"),
    ("SET", "str", "v"),
    G(WRONGTYPE, "FIELDTTL", "str", "a"),
    ("RPUSH", "l", "a"),
    G(WRONGTYPE, "FIELDTTL", "l", "a"),
    G(arity("fieldttl"), "FIELDTTL", "s"),
    G(arity("fieldttl"), "FIELDTTL", "s", "a", "b"),
    G(ints(1, -2), "FIELDEXPIRE", "s", "30", "a", "zz"),
    G(i(30), "FIELDTTL", "s", "a"),
    G(i(-1), "FIELDTTL", "s", "b"),
    G(bulk("hashtable"), "OBJECT", "ENCODING", "s"),
    G(ints(1, 1), "FIELDEXPIRE", "s", "5", "a", "b"),
    G(i(5), "FIELDTTL", "s", "b"),
    # A missing key or another type: -2 for every field (no error, as Dragonfly).
    G(ints(-2, -2), "FIELDEXPIRE", "nokey", "5", "a", "b"),
    G(ints(-2), "FIELDEXPIRE", "str", "5", "a"),
    ("EXISTS", "nokey"),
    # The TTL is 1 .. 2^26 seconds.
    G(NOT_INT, "FIELDEXPIRE", "s", "0", "a"),
    G(NOT_INT, "FIELDEXPIRE", "s", "-5", "a"),
    G(NOT_INT, "FIELDEXPIRE", "s", "x", "a"),
    G(NOT_INT, "FIELDEXPIRE", "s", "67108865", "a"),
    G(ints(1), "FIELDEXPIRE", "s", "67108864", "a"),
    G(arity("fieldexpire"), "FIELDEXPIRE", "s", "5"),
    # Hash fields: the same TTLs as the HEXPIRE family.
    ("HSET", "h", "f1", "v1", "f2", "v2"),
    G(i(-1), "FIELDTTL", "h", "f1"),
    G(i(-3), "FIELDTTL", "h", "nope"),
    G(ints(1, -2), "FIELDEXPIRE", "h", "50", "f1", "nope"),
    G(i(50), "FIELDTTL", "h", "f1"),
    G(ints(50, -1), "HTTL", "h", "FIELDS", "2", "f1", "f2"),
    G(bulk("listpackex"), "OBJECT", "ENCODING", "h"),
    G(ints(1), "HEXPIRE", "h", "70", "FIELDS", "1", "f2"),
    G(i(70), "FIELDTTL", "h", "f2"),
    G(ints(1), "HPERSIST", "h", "FIELDS", "1", "f1"),
    G(i(-1), "FIELDTTL", "h", "f1"),
]

SCENARIOS["set_ttl_copies_and_results"] = [
    ("SADD", "{k}s", "1", "2"),
    G(i(1), "SADDEX", "{k}s", "100", "3"),
    # COPY moves the value whole, TTLs included; results built from members have none.
    G(i(1), "COPY", "{k}s", "{k}c"),
    G(i(100), "FIELDTTL", "{k}c", "3"),
    G(i(3), "SUNIONSTORE", "{k}u", "{k}s"),
    G(i(-1), "FIELDTTL", "{k}u", "3"),
    G(bulk("intset"), "OBJECT", "ENCODING", "{k}u"),
    G(i(3), "SINTERSTORE", "{k}i", "{k}s", "{k}c"),
    G(i(-1), "FIELDTTL", "{k}i", "3"),
    G(i(1), "SMOVE", "{k}s", "{k}m", "3"),
    G(i(-1), "FIELDTTL", "{k}m", "3"),
    G(i(-3), "FIELDTTL", "{k}s", "3"),
]

# Lazy expiry alone (the active cycle off): one wait past a one-second TTL, then every read
# sees only the permanent members, and a set whose members all expired is a missing key.
SCENARIOS["set_ttl_lazy_expiry"] = [
    ("DEBUG", "SET-ACTIVE-EXPIRE", "0"),
    ("SADD", "{t}m", "1", "keep"),
    G(i(2), "SADDEX", "{t}m", "1", "2", "gone"),
    G(i(2), "SADDEX", "{t}all", "1", "a", "b"),
    ("SADD", "{t}o", "gone", "other"),
    G(i(4), "SCARD", "{t}m"),
    Sleep(1.2),
    G(i(2), "SCARD", "{t}m"),
    G(ints(1, 0, 0, 1), "SMISMEMBER", "{t}m", "1", "2", "gone", "keep"),
    G(i(0), "SISMEMBER", "{t}m", "gone"),
    G(i(0), "SINTERCARD", "2", "{t}m", "{t}o"),
    G(i(2), "SUNIONSTORE", "{t}u", "{t}m"),
    G(i(2), "SCARD", "{t}u"),
    G(i(0), "SMOVE", "{t}m", "{t}o", "gone"),
    G(i(-3), "FIELDTTL", "{t}m", "gone"),
    G(i(0), "EXISTS", "{t}all"),
    G(b"+none\r\n", "TYPE", "{t}all"),
    G(i(0), "SCARD", "{t}all"),
    G(i(-2), "FIELDTTL", "{t}all", "a"),
    G(i(1), "SADDEX", "{t}all", "10", "a"),
    G(i(1), "SCARD", "{t}all"),
]
CLEANUP["set_ttl_lazy_expiry"] = [("DEBUG", "SET-ACTIVE-EXPIRE", "1")]
