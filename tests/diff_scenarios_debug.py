"""Differential scenarios for DEBUG's test-suite subcommands (DIGEST, DIGEST-VALUE, PROTOCOL,
ERROR, LISTPACK, REPLYBUFFER, ...) and PFDEBUG / PFSELFTEST (merged into diff_scenarios.SCENARIOS).

DEBUG DIGEST is Redis's SHA-1 signature of the whole dataset: the scenarios build the same data
of every type and encoding, with and without TTLs, in several databases, on both servers and
compare the 40 hex digits. Scores are ones Redis 7.0 (the reference, "%.17g") and 7.2
(fpconv_dtoa, what darner follows) write alike.
"""

from differential import T, X

LP_OK = b"+Listpack structure printed on stdout\r\n"
NOTE_LP = "redis 7.2 encodes small lists and sets as listpacks; Debian's 7.0 does not"

SCENARIOS = {}
CLEANUP = {}


def _dataset():
    big = ["m%d" % i for i in range(200)]
    return [
        # strings: int, embstr, raw, binary, empty
        ("SET", "int", "12345"), ("SET", "neg", "-7"), ("SET", "emb", "hello"),
        ("SET", "raw", "x" * 100), ("SET", "bin", b"\x00\r\n\xff"), ("SET", "empty", ""),
        ("APPEND", "appended", "abc"), ("APPEND", "appended", "def"),
        # lists: listpack and quicklist
        ("RPUSH", "l", "a", "b", "1", "-2", "c"), ("LPUSH", "l", "head"),
        ("RPUSH", "lbig", *big), ("RPUSH", "lbig", "y" * 100),
        # sets: intset, listpack, hashtable
        ("SADD", "si", "3", "1", "2", "-5"), ("SADD", "sl", "a", "b", "10"),
        ("SADD", "sh", *big), ("SADD", "shi", *[str(i) for i in range(600)]),
        # sorted sets: listpack and skiplist
        ("ZADD", "zl", "1", "a", "2.5", "b", "-3", "c", "0", "d", "1e20", "e", "inf", "f",
         "-inf", "g", "0.5", "12"),
        ("ZADD", "zs", *[x for i in range(200) for x in (str(i * 0.25), "z%d" % i)]),
        ("ZADD", "zs", "-0", "negzero"),
        # hashes: listpack and hashtable
        ("HSET", "hl", "f1", "v1", "f2", "2", "3", "v3"),
        ("HSET", "hh", *[x for i in range(200) for x in ("f%d" % i, "v%d" % i)]),
        ("HSET", "hhv", "f", "y" * 100),
        # TTLs
        ("SET", "sttl", "v", "EX", "10000"), ("RPUSH", "lttl", "a"), ("EXPIRE", "lttl", "10000"),
        ("HSET", "httl", "f", "v"), ("PEXPIRE", "httl", "9999999"),
        # other databases
        ("SELECT", "1"), ("SET", "int", "12345"), ("ZADD", "z", "1", "a"),
        ("SELECT", "5"), ("SADD", "s", "x", "y"), ("SET", "k", "v", "EX", "1000"),
        ("SELECT", "0"),
    ]


_KEYS = ["int", "neg", "emb", "raw", "bin", "empty", "appended", "l", "lbig", "si", "sl", "sh",
         "shi", "zl", "zs", "hl", "hh", "hhv", "sttl", "lttl", "httl"]

SCENARIOS["debug_digest"] = (
    [("DEBUG", "DIGEST"), ("DEBUG", "DIGEST-VALUE", "nokey"), ("DEBUG", "DIGEST-VALUE")]
    + _dataset()
    + [("DEBUG", "DIGEST"), ("DEBUG", "DIGEST-VALUE", *_KEYS, "missing")]
    + [("DEBUG", "DIGEST-VALUE", k) for k in _KEYS]
    + [
        # Order matters in a list, not in a set or hash; a TTL counts, its value does not.
        ("LPUSH", "l", "new"), ("DEBUG", "DIGEST"), ("LPOP", "l"), ("DEBUG", "DIGEST"),
        ("SREM", "sh", "m5"), ("SADD", "sh", "m5"), ("DEBUG", "DIGEST"),
        ("EXPIRE", "emb", "5000"), ("DEBUG", "DIGEST-VALUE", "emb"), ("DEBUG", "DIGEST"),
        ("EXPIRE", "emb", "6000"), ("DEBUG", "DIGEST-VALUE", "emb"), ("PERSIST", "emb"),
        ("DEBUG", "DIGEST"),
        # The same data in another database gives another digest.
        ("MOVE", "hl", "3"), ("DEBUG", "DIGEST"), ("DEBUG", "DIGEST-VALUE", "hl"),
        ("SELECT", "3"), ("DEBUG", "DIGEST-VALUE", "hl"), ("SELECT", "0"),
        ("FLUSHDB",), ("DEBUG", "DIGEST"), ("FLUSHALL",), ("DEBUG", "DIGEST"),
        ("DEBUG", "DIGEST", "extra"), ("debug", "digest"),
    ]
)

SCENARIOS["debug_protocol_error"] = [
    ("DEBUG", "PROTOCOL", t) for t in
    ["string", "integer", "double", "bignum", "null", "array", "set", "map", "attrib", "push",
     "verbatim", "true", "false", "STRING", "nope"]
] + [
    ("DEBUG", "PROTOCOL"), ("DEBUG", "PROTOCOL", "string", "x"),
    ("DEBUG", "ERROR", "MYERR something failed"), ("DEBUG", "ERROR", "line\r\nbreak"),
    ("DEBUG", "ERROR", ""), ("DEBUG", "ERROR", "-dash"), ("DEBUG", "ERROR"),
    ("DEBUG", "LOG", "hello from the differential tests"),
]

SCENARIOS["debug_misc_subcommands"] = [
    ("RPUSH", "l", "a", "1"), ("HSET", "h", "f", "v"), ("ZADD", "z", "1.5", "m"),
    ("SADD", "s", "a"), ("SADD", "i", "1"), ("SET", "str", "v"),
    ("RPUSH", "big", *["e%d" % i for i in range(200)]),
    X(LP_OK, "DEBUG", "LISTPACK", "l", note=NOTE_LP), ("DEBUG", "LISTPACK", "h"),
    ("DEBUG", "LISTPACK", "z"), X(LP_OK, "DEBUG", "LISTPACK", "s", note=NOTE_LP),
    ("DEBUG", "LISTPACK", "i"), ("DEBUG", "LISTPACK", "str"),
    X(LP_OK, "DEBUG", "LISTPACK", "big", note=NOTE_LP), ("DEBUG", "LISTPACK", "nokey"), ("DEBUG", "LISTPACK"),
    ("DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "never"),
    ("DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "reset"),
    ("DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "100"),
    ("DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "abc"),
    ("DEBUG", "REPLYBUFFER", "RESIZING", "0"), ("DEBUG", "REPLYBUFFER", "resizing", "1"),
    ("DEBUG", "REPLYBUFFER", "FOO", "1"), ("DEBUG", "REPLYBUFFER", "RESIZING"),
    ("DEBUG", "CHANGE-REPL-ID"), ("DEBUG", "CHANGE-REPL-ID", "x"),
    ("DEBUG", "STRINGMATCH-TEST"), ("DEBUG", "STRINGMATCH-LEN"), ("DEBUG", "NOSUCH"),
    T("DEBUG", "HELP"),
]
CLEANUP["debug_misc_subcommands"] = [("DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "reset"),
                                     ("DEBUG", "REPLYBUFFER", "RESIZING", "1")]

SCENARIOS["pfdebug_pfselftest"] = [
    ("PFDEBUG", "ENCODING", "nokey"), ("PFDEBUG", "FOO", "nokey"),
    ("SET", "s", "not an hll"), ("PFDEBUG", "ENCODING", "s"), ("LPUSH", "l", "x"),
    ("PFDEBUG", "ENCODING", "l"),
    ("PFADD", "h", "a", "b", "c"), ("PFDEBUG", "ENCODING", "h"), ("PFDEBUG", "DECODE", "h"),
    ("PFDEBUG", "foo", "h"), ("PFDEBUG", "ENCODING"), ("PFDEBUG", "ENCODING", "h", "x"),
    ("PFADD", "h2", *["e%d" % i for i in range(100)]), ("PFDEBUG", "DECODE", "h2"),
    # GETREG turns a sparse value dense, as TODENSE does (1 when it converted, then 0).
    ("PFDEBUG", "GETREG", "h"), ("PFDEBUG", "ENCODING", "h"), ("GET", "h"),
    ("PFDEBUG", "DECODE", "h"), ("PFDEBUG", "TODENSE", "h"),
    ("PFDEBUG", "TODENSE", "h2"), ("PFDEBUG", "TODENSE", "h2"), ("GET", "h2"),
    ("PFCOUNT", "h2"), ("PFDEBUG", "getreg", "h2"),
    # A sparse value whose opcodes do not cover the registers.
    ("SET", "bad", b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x40\x01"),
    ("PFDEBUG", "DECODE", "bad"), ("PFDEBUG", "GETREG", "bad"), ("PFDEBUG", "TODENSE", "bad"),
    ("PFSELFTEST",), ("PFSELFTEST", "x"),
]

# MODULE: the reference refuses LOAD/LOADEX/UNLOAD (enable-module-command is off), as darner.
SCENARIOS["module_commands"] = [
    ("MODULE", "LIST"), T("MODULE", "HELP"), ("MODULE", "LOAD", "/nonexistent/mod.so"),
    ("MODULE", "LOADEX", "/nonexistent/mod.so", "CONFIG", "a", "b"),
    ("MODULE", "UNLOAD", "mod"), ("MODULE", "FOO"), ("MODULE",), ("MODULE", "LIST", "x"),
    ("MODULE", "LOAD"), ("MODULE", "UNLOAD"),
]

SCENARIOS["memory_commands"] = [
    ("SET", "k", "v"), ("RPUSH", "l", "a", "b"),
    T("MEMORY", "USAGE", "k"), T("MEMORY", "USAGE", "l", "SAMPLES", "0"),
    T("MEMORY", "USAGE", "l", "samples", "5"), ("MEMORY", "USAGE", "nokey"),
    ("MEMORY", "USAGE", "k", "SAMPLES", "-1"), ("MEMORY", "USAGE", "k", "SAMPLES", "x"),
    ("MEMORY", "USAGE", "k", "SAMPLES"), ("MEMORY", "USAGE", "k", "FOO"),
    ("MEMORY", "USAGE", "nokey", "SAMPLES", "x"), ("MEMORY", "USAGE"),
    T("MEMORY", "STATS"), T("MEMORY", "DOCTOR"), T("MEMORY", "MALLOC-STATS"),
    ("MEMORY", "PURGE"), T("MEMORY", "HELP"), ("MEMORY", "FOO"), ("MEMORY", "STATS", "x"),
]

SCENARIOS["lolwut_errors"] = [
    ("LOLWUT", "VERSION", "x"), ("LOLWUT", "VERSION", "5", "x"),
    ("LOLWUT", "VERSION", "5", "10", "1.5"), T("LOLWUT"), T("LOLWUT", "VERSION"),
    T("LOLWUT", "VERSION", "5", "1", "1", "1"),
]
