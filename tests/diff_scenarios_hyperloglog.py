"""Differential scenarios for the HyperLogLog commands (merged into diff_scenarios.SCENARIOS).

A HyperLogLog is a string in Redis's byte format: the scenarios GET the raw bytes after every
kind of update, so the sparse encoding, its promotion to dense and the cached cardinality must
be byte-identical to Redis's, not just the estimates.
"""

SCENARIOS = {}


def _adds(key, n, prefix="e"):
    # One PFADD per element: each sparse update (split, merge, promotion) is checked by the GETs.
    return [("PFADD", key, "%s%d" % (prefix, i)) for i in range(n)]


SCENARIOS["hll_sparse_dense_bytes"] = (
    [("PFADD", "h"), ("GET", "h"), ("PFCOUNT", "h"), ("PFADD", "h"), ("TYPE", "h"),
     ("OBJECT", "ENCODING", "h")]
    + _adds("h", 40) + [("GET", "h"), ("PFCOUNT", "h"), ("GET", "h")]
    + [("PFADD", "h", *["m%d" % i for i in range(400)]), ("GET", "h"), ("PFCOUNT", "h")]
    + [("PFADD", "h", *["n%d" % i for i in range(3000)]), ("STRLEN", "h"), ("GET", "h"),
       ("PFCOUNT", "h"), ("GET", "h"), ("PFADD", "h", "n1"), ("PFADD", "h", "brand-new")]
)

SCENARIOS["hll_count_merge_multi"] = (
    _adds("a{t}", 30) + _adds("b", 30, "f") + [
        ("PFADD", "c", *["g%d" % i for i in range(5000)]),
        ("PFCOUNT", "a{t}", "b"), ("PFCOUNT", "a{t}", "b", "c", "missing"),
        ("PFCOUNT", "missing"), ("PFCOUNT", "missing", "other"),
        ("PFMERGE", "dest", "a{t}", "b"), ("GET", "dest"), ("PFCOUNT", "dest"),
        ("PFMERGE", "dest2", "c", "a{t}"), ("GET", "dest2"), ("STRLEN", "dest2"),
        ("PFMERGE", "dest", "dest"), ("GET", "dest"),
        ("PFMERGE", "empty"), ("GET", "empty"), ("PFCOUNT", "empty"),
        ("PFMERGE", "a{t}", "c"), ("GET", "a{t}"), ("PFCOUNT", "a{t}"),
    ]
)

SCENARIOS["hll_errors"] = [
    ("SET", "s", "not an hll"), ("PFADD", "s", "x"), ("PFCOUNT", "s"), ("PFCOUNT", "s", "t"),
    ("PFMERGE", "s", "t"), ("PFMERGE", "t", "s"), ("EXISTS", "t"),
    ("SET", "i", "12345"), ("PFADD", "i", "x"),
    ("LPUSH", "l", "x"), ("PFADD", "l", "x"), ("PFCOUNT", "l"), ("PFCOUNT", "l", "s"),
    ("PFMERGE", "l", "x"), ("PFMERGE", "x", "l"),
    ("PFADD",), ("PFCOUNT",), ("PFMERGE",),
    # A sparse value whose opcodes do not cover the registers, with a stale cache.
    ("SET", "bad", b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x40\x01"),
    ("PFCOUNT", "bad"), ("PFCOUNT", "bad", "x"), ("PFMERGE", "x", "bad"), ("EXISTS", "x"),
    ("PFADD", "bad", "a"),
    # A dense header with the wrong length.
    ("SET", "short", b"HYLL\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80"), ("PFCOUNT", "short"),
    # An unknown encoding byte.
    ("SET", "enc", b"HYLL\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xff"),
    ("PFADD", "enc", "a"),
    # A valid HyperLogLog written with SET works, and its stale cache is refreshed.
    ("SET", "copied", b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xff"),
    ("PFCOUNT", "copied"), ("GET", "copied"), ("PFADD", "copied", "z"), ("GET", "copied"),
]

SCENARIOS["hll_binary_elements"] = [
    ("PFADD", "b", b"", b"\x00", b"\r\n", b"\xff\xfe", b"a" * 1000), ("GET", "b"),
    ("PFCOUNT", "b"), ("PFADD", "b", b""), ("GET", "b"),
]
