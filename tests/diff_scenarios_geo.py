"""Differential scenarios for the geo commands (merged into diff_scenarios.SCENARIOS).

Distances, coordinates and search results are compared byte for byte: they depend on the
geohash encoding, the neighbouring boxes a search scans and the Haversine formula being
Redis's own.
"""

from differential import S

SCENARIOS = {}

SICILY = [
    ("GEOADD", "Sicily", "13.361389", "38.115556", "Palermo", "15.087269", "37.502669", "Catania"),
    ("GEOADD", "Sicily", "12.758489", "38.788135", "edge1", "17.241510", "38.788135", "edge2"),
    ("GEOADD", "Sicily", "14.015482", "37.490936", "Agrigento?", "13.583333", "37.316667", "Agr"),
]


def _grid(key, n, lon0, lat0, d):
    out = []
    args = []
    for i in range(n):
        for j in range(n):
            args += ["%.6f" % (lon0 + i * d), "%.6f" % (lat0 + j * d), "p%d_%d" % (i, j)]
    out.append(("GEOADD", key, *args))
    return out


SCENARIOS["geo_add_pos_hash_dist"] = SICILY + [
    ("GEOPOS", "Sicily", "Palermo", "Catania", "nope"), ("GEOPOS", "Sicily"),
    ("GEOPOS", "missing", "a", "b"), ("GEOPOS", "missing"),
    ("GEOHASH", "Sicily", "Palermo", "Catania", "edge1", "nope"), ("GEOHASH", "missing", "x"),
    ("GEOHASH", "Sicily"),
    ("GEODIST", "Sicily", "Palermo", "Catania"), ("GEODIST", "Sicily", "Palermo", "Catania", "km"),
    ("GEODIST", "Sicily", "Palermo", "Catania", "MI"), ("GEODIST", "Sicily", "Palermo", "Catania", "ft"),
    ("GEODIST", "Sicily", "Palermo", "Catania", "m"), ("GEODIST", "Sicily", "Palermo", "Palermo"),
    ("GEODIST", "Sicily", "Palermo", "nope"), ("GEODIST", "missing", "a", "b"),
    ("GEODIST", "Sicily", "Palermo", "Catania", "yards"), ("GEODIST", "missing", "a", "b", "yards"),
    ("GEODIST", "Sicily", "Palermo", "Catania", "km", "extra"),
    ("ZRANGE", "Sicily", "0", "-1", "WITHSCORES"), ("TYPE", "Sicily"), ("OBJECT", "ENCODING", "Sicily"),
    ("ZSCORE", "Sicily", "Palermo"),
    # Limits, updates, options.
    ("GEOADD", "g", "180", "85.05112878", "ne", "-180", "-85.05112878", "sw", "0", "0", "zero"),
    ("GEOPOS", "g", "ne", "sw", "zero"), ("GEOHASH", "g", "ne", "sw", "zero"),
    ("ZRANGE", "g", "0", "-1", "WITHSCORES"), ("GEODIST", "g", "ne", "sw"),
    ("GEOADD", "g", "180.0000001", "0", "x"), ("GEOADD", "g", "0", "85.06", "x"),
    ("GEOADD", "g", "-181", "-86", "x"), ("GEOADD", "g", "1e300", "0", "x"),
    ("GEOADD", "g", "inf", "0", "x"), ("GEOADD", "g", "abc", "0", "x"), ("GEOADD", "g", "0", "nan", "x"),
    ("GEOADD", "g", "1", "2", "ok", "200", "0", "bad"), ("GEOPOS", "g", "ok"),
    ("GEOADD", "g", "1", "2"), ("GEOADD", "g", "1", "2", "m", "3"), ("GEOADD", "g", "nx", "xx", "1", "2", "m"),
    ("GEOADD", "g", "ch", "nx", "xx"), ("GEOADD", "g", "ch", "ch", "nx"), ("GEOADD", "g", "gt", "1", "2"),
    ("GEOADD", "g", "nx", "1", "1", "zero", "2", "2", "new"), ("GEOPOS", "g", "zero", "new"),
    ("GEOADD", "g", "xx", "1", "1", "zero", "3", "3", "new2"), ("GEOPOS", "g", "zero", "new2"),
    ("GEOADD", "g", "xx", "ch", "5", "5", "zero", "1", "1", "new"),
    ("GEOADD", "g", "CH", "5", "5", "zero", "6", "6", "nn"), ("GEOADD", "g", "5", "5", "zero"),
    ("GEOADD", "xxkey", "XX", "1", "1", "a"), ("EXISTS", "xxkey"),
    ("GEOADD", "g", "-0", "-0", "negzero"), ("GEOPOS", "g", "negzero"),
    ("GEOADD", "g", "0.0000001", "-0.0000001", "tiny"), ("GEOPOS", "g", "tiny"), ("GEOHASH", "g", "tiny"),
    ("GEODIST", "g", "zero", "tiny"), ("GEODIST", "g", "ne", "zero", "km"),
    # Scores written by ZADD.
    ("ZADD", "z", "0", "a", "-1", "neg", "4503599627370496", "big", "1e30", "huge", "7", "seven"),
    ("GEOPOS", "z", "a", "seven", "big"), ("GEOHASH", "z", "a", "seven", "big"),
    ("GEODIST", "z", "a", "seven"),
]

SCENARIOS["geo_wrong_type_and_arity"] = [
    ("SET", "s", "x"), ("LPUSH", "l", "a"),
    ("GEOADD", "s", "1", "2", "m"), ("GEOADD", "s", "1", "200", "m"), ("GEOADD", "s", "nx", "xx", "1", "2", "m"),
    ("GEOPOS", "s", "m"), ("GEOHASH", "l", "m"), ("GEODIST", "s", "a", "b"), ("GEODIST", "s", "a", "b", "bad"),
    ("GEOSEARCH", "s", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "km"),
    ("GEOSEARCH", "s", "FROMLONLAT", "0", "0"), ("GEOSEARCH", "s", "bogus"),
    ("GEORADIUS", "s", "0", "0", "1", "km"), ("GEORADIUS", "s", "x", "0", "1", "km"),
    ("GEORADIUSBYMEMBER", "s", "m", "1", "km"), ("GEORADIUS_RO", "l", "0", "0", "1", "km"),
    ("GEORADIUSBYMEMBER_RO", "l", "m", "1", "km"),
    ("GEOSEARCHSTORE", "d", "s", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "km"),
    ("GEOADD", "g", "1", "1", "m"),
    ("GEOSEARCHSTORE", "s", "g", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km"), ("TYPE", "s"),
    ("GEORADIUS", "g", "1", "1", "1", "km", "STORE", "l"), ("TYPE", "l"),
    ("GEOADD", "g"), ("GEOADD", "g", "1"), ("GEODIST", "g", "m"), ("GEOPOS",), ("GEOHASH",),
    ("GEORADIUS", "g", "0", "0", "1"), ("GEORADIUSBYMEMBER", "g", "m", "1"), ("GEOSEARCH", "g"),
    ("GEOSEARCHSTORE", "d", "g"), ("GEORADIUS_RO", "g", "0", "0", "1"),
]

SCENARIOS["geo_search_basic"] = SICILY + [
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "ASC"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "DESC"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "WITHDIST", "WITHCOORD",
     "WITHHASH"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "400", "400", "km", "ASC", "WITHCOORD",
     "WITHDIST"),
    ("GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "BYBOX", "200", "200", "km", "ASC", "WITHDIST"),
    ("GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "BYRADIUS", "100", "mi", "DESC", "WITHDIST"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "COUNT", "2", "WITHDIST"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "COUNT", "2", "DESC"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "COUNT", "1", "ANY"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "COUNT", "2", "ANY", "ASC"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "COUNT", "100"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "m"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "0", "m"),
    ("GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "BYRADIUS", "0", "m", "WITHDIST"),
    ("GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "BYBOX", "0", "0", "m", "WITHDIST"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "20000", "km", "WITHDIST", "ASC"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "-165", "-37", "BYRADIUS", "20000", "km", "WITHDIST", "ASC"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "40000", "40000", "km", "WITHDIST", "ASC"),
    ("GEOSEARCH", "Sicily", "fromlonlat", "15", "37", "byradius", "200", "KM", "withdist", "asc", "count",
     "3"),
    ("GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "FROMMEMBER", "Catania", "BYRADIUS", "100", "km"),
    ("GEORADIUS", "Sicily", "15", "37", "200", "km", "WITHDIST", "WITHCOORD", "ASC"),
    ("GEORADIUS", "Sicily", "15", "37", "200", "km", "WITHHASH", "COUNT", "1"),
    ("GEORADIUS_RO", "Sicily", "15", "37", "200", "km", "DESC"),
    ("GEORADIUSBYMEMBER", "Sicily", "Palermo", "200", "km", "WITHDIST", "ASC"),
    ("GEORADIUSBYMEMBER_RO", "Sicily", "Catania", "100", "km", "WITHCOORD", "ASC"),
    ("GEORADIUSBYMEMBER", "Sicily", "nope", "200", "km"),
    ("GEORADIUSBYMEMBER_RO", "Sicily", "nope", "200", "km"),
    ("GEOSEARCH", "Sicily", "FROMMEMBER", "nope", "BYRADIUS", "200", "km"),
    # Missing keys.
    ("GEOSEARCH", "nokey", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km"),
    ("GEOSEARCH", "nokey", "FROMMEMBER", "x", "BYRADIUS", "200", "km"),
    ("GEOSEARCH", "nokey", "FROMMEMBER", "x", "BYRADIUS", "-1", "km"),
    ("GEOSEARCH", "nokey", "FROMMEMBER", "x"),
    ("GEORADIUS", "nokey", "15", "37", "200", "km"), ("GEORADIUSBYMEMBER", "nokey", "x", "200", "km"),
    ("GEORADIUSBYMEMBER", "nokey", "x", "abc", "parsecs"), ("GEORADIUSBYMEMBER_RO", "nokey", "x", "1", "km"),
    ("GEORADIUS", "nokey", "15", "37", "200", "parsecs"),
]

SCENARIOS["geo_search_errors"] = SICILY + [
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37"),
    ("GEOSEARCH", "Sicily", "BYRADIUS", "1", "km"),
    ("geosearch", "Sicily", "BYRADIUS", "1", "km"),
    ("GeoSearch", "Sicily", "FROMLONLAT", "15", "37"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "FROMMEMBER", "Palermo", "BYRADIUS", "1", "km"),
    ("GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km", "BYBOX", "1", "1", "km"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "1", "1", "km", "BYRADIUS", "1", "km"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km", "ANY"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km", "COUNT", "0"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km", "COUNT", "-3"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km", "COUNT", "x"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km", "COUNT"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km", "COUNT", "99999999999999999999"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km", "COUNT", "9223372036854775807"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km", "STORE", "x"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km", "STOREDIST"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "parsecs"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "-1", "km"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "abc", "km"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "1", "1"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "x", "1", "km"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "1", "x", "km"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "-1", "1", "km"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "1", "-1", "km"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "1", "1", "yd"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "200", "37", "BYRADIUS", "1", "km"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "x", "37", "BYRADIUS", "1", "km"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15"),
    ("GEOSEARCH", "Sicily", "FROMMEMBER"),
    ("GEOSEARCH", "Sicily", "FROMMEMBER", "nope", "BYRADIUS", "x", "km"),
    ("GEOSEARCH", "Sicily", "BYRADIUS", "x", "km", "FROMMEMBER", "nope"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km", "WITHDIST", "bogus"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km", "COUNT", "0", "bogus"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km", "bogus", "COUNT", "0"),
    ("GEOSEARCHSTORE", "d", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "WITHDIST"),
    ("GEOSEARCHSTORE", "d", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "WITHHASH"),
    ("GEOSEARCHSTORE", "d", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "WITHCOORD"),
    ("GEOSEARCHSTORE", "d", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "STORE", "x"),
    ("GEOSEARCHSTORE", "d", "Sicily", "FROMLONLAT", "15", "37"),
    ("GEOSEARCHSTORE", "d", "Sicily", "BYRADIUS", "1", "km"),
    ("GEOSEARCHSTORE", "d", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km", "ANY"),
    ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "d", "WITHDIST"),
    ("GEORADIUS", "Sicily", "15", "37", "200", "km", "WITHCOORD", "STOREDIST", "d"),
    ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE"),
    ("GEORADIUS", "Sicily", "15", "37", "200", "km", "FROMLONLAT", "1", "1"),
    ("GEORADIUS", "Sicily", "15", "37", "200", "km", "BYRADIUS", "1", "km"),
    ("GEORADIUS", "Sicily", "15", "37", "-200", "km"), ("GEORADIUS", "Sicily", "15", "37", "x", "km"),
    ("GEORADIUS", "Sicily", "15", "37", "200", "au"), ("GEORADIUS", "Sicily", "195", "37", "200", "km"),
    ("GEORADIUS", "Sicily", "15", "37", "200", "km", "ANY"),
    ("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "0"),
    ("GEORADIUS_RO", "Sicily", "15", "37", "200", "km", "STORE", "d"),
    ("GEORADIUS_RO", "Sicily", "15", "37", "200", "km", "STOREDIST", "d"),
    ("GEORADIUSBYMEMBER_RO", "Sicily", "Palermo", "200", "km", "STORE", "d"),
    ("GEORADIUSBYMEMBER", "Sicily", "Palermo", "200", "km", "STORE", "d", "WITHHASH"),
    ("GEORADIUSBYMEMBER", "Sicily", "Palermo", "-1", "km"),
    ("GEORADIUSBYMEMBER", "Sicily", "Palermo", "1", "lightyears"),
    ("EXISTS", "d"),
]

SCENARIOS["geo_store"] = SICILY + [
    ("GEOSEARCHSTORE", "d{a}", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km"),
    ("ZRANGE", "d{a}", "0", "-1", "WITHSCORES"), ("OBJECT", "ENCODING", "d{a}"),
    ("GEOSEARCHSTORE", "d{b}", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "STOREDIST"),
    # (7.0 prints scores with %.17g, 7.2 shortest: compare the stored distances by range.)
    ("ZRANGE", "d{b}", "0", "-1"), ("ZCOUNT", "d{b}", "56.44125787015", "56.44125787016"),
    ("ZCOUNT", "d{b}", "(190.4424298477578", "190.4424298477579"),
    ("GEOSEARCHSTORE", "d{c}", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "400", "400", "km", "STOREDIST",
     "COUNT", "2", "DESC"),
    ("ZRANGE", "d{c}", "0", "-1"), ("ZCOUNT", "d{c}", "279.74045213563", "279.74045213564"),
    ("GEOSEARCHSTORE", "d{c}", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "m"), ("EXISTS", "d{c}"),
    ("SET", "d{d}", "str"), ("EXPIRE", "d{d}", "100"),
    ("GEOSEARCHSTORE", "d{d}", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "COUNT", "1"),
    ("TYPE", "d{d}"), ("TTL", "d{d}"), ("ZRANGE", "d{d}", "0", "-1", "WITHSCORES"),
    ("GEOSEARCHSTORE", "d{d}", "nokey", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km"), ("EXISTS", "d{d}"),
    ("GEOSEARCHSTORE", "Sicily2", "Sicily", "FROMMEMBER", "Palermo", "BYRADIUS", "500", "km"),
    ("GEOSEARCHSTORE", "Sicily2", "Sicily2", "FROMMEMBER", "Palermo", "BYRADIUS", "100", "km"),
    ("ZRANGE", "Sicily2", "0", "-1", "WITHSCORES"),
    ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "r1"), ("ZRANGE", "r1", "0", "-1", "WITHSCORES"),
    ("GEORADIUS", "Sicily", "15", "37", "200", "mi", "STOREDIST", "r2", "ASC", "COUNT", "3"),
    ("ZRANGE", "r2", "0", "-1"), ("ZCOUNT", "r2", "81.0415990823238", "81.0415990823239"),
    ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "r3", "STOREDIST", "r4"),
    ("EXISTS", "r3", "r4"), ("ZRANGE", "r4", "0", "-1"),
    ("GEORADIUSBYMEMBER", "Sicily", "Palermo", "100", "km", "STORE", "r5"), ("ZRANGE", "r5", "0", "-1"),
    ("GEORADIUSBYMEMBER", "Sicily", "Palermo", "1", "m", "STORE", "r5"), ("EXISTS", "r5"),
    ("GEORADIUSBYMEMBER", "nokey", "Palermo", "1", "m", "STORE", "r1"), ("EXISTS", "r1"),
    ("GEORADIUS", "nokey", "1", "1", "1", "m", "STOREDIST", "r2"), ("EXISTS", "r2"),
    ("GEORADIUSBYMEMBER", "nokey", "x", "y", "z", "STORE", "r4"), ("EXISTS", "r4"),
    ("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "1", "ANY", "STORE", "r6"),
    ("ZCARD", "r6"),
]

SCENARIOS["geo_grid_search"] = (
    _grid("grid", 12, 10.0, 45.0, 0.05) + _grid("big", 40, -1.0, -1.0, 0.05) + [
        ("OBJECT", "ENCODING", "grid"), ("OBJECT", "ENCODING", "big"),
        ("GEOSEARCH", "grid", "FROMLONLAT", "10.27", "45.27", "BYRADIUS", "12", "km", "ASC", "WITHDIST"),
        ("GEOSEARCH", "grid", "FROMLONLAT", "10.27", "45.27", "BYBOX", "20", "10", "km", "ASC", "WITHDIST"),
        ("GEOSEARCH", "grid", "FROMLONLAT", "10.27", "45.27", "BYBOX", "20", "10", "km", "DESC", "WITHCOORD"),
        ("GEOSEARCH", "grid", "FROMMEMBER", "p0_0", "BYRADIUS", "15", "km", "ASC", "WITHDIST", "WITHHASH"),
        ("GEOSEARCH", "grid", "FROMLONLAT", "10.3", "45.3", "BYRADIUS", "5", "km", "COUNT", "3", "ANY"),
        ("GEORADIUS", "grid", "10.3", "45.3", "7.5", "km"),
        ("GEORADIUS", "grid", "10.3", "45.3", "7.5", "km", "COUNT", "4", "WITHDIST"),
        ("GEORADIUS", "grid", "10.3", "45.3", "7.5", "km", "COUNT", "4", "DESC", "WITHDIST"),
        ("GEOSEARCH", "big", "FROMLONLAT", "0", "0", "BYRADIUS", "30", "km", "ASC", "WITHDIST"),
        ("GEOSEARCH", "big", "FROMLONLAT", "0.012", "-0.013", "BYBOX", "50", "30", "km", "ASC", "WITHDIST"),
        ("GEOSEARCH", "big", "FROMLONLAT", "0.5", "0.5", "BYRADIUS", "100", "km", "COUNT", "7", "WITHDIST"),
        ("GEOSEARCH", "big", "FROMLONLAT", "0.5", "0.5", "BYRADIUS", "100", "km", "COUNT", "5", "ANY"),
        ("GEOSEARCH", "big", "FROMLONLAT", "0.5", "0.5", "BYRADIUS", "3000", "km", "COUNT", "5", "ANY"),
        ("GEOSEARCH", "big", "FROMLONLAT", "0.5", "0.5", "BYRADIUS", "3000", "mi", "COUNT", "5"),
        ("GEOSEARCH", "big", "FROMLONLAT", "179", "0", "BYRADIUS", "5000", "km", "COUNT", "3", "WITHDIST"),
        ("GEOSEARCH", "big", "FROMMEMBER", "p3_7", "BYBOX", "30000", "30000", "ft", "ASC", "WITHDIST"),
        ("GEOSEARCH", "big", "FROMMEMBER", "p39_39", "BYRADIUS", "10", "mi", "WITHDIST", "DESC"),
        ("GEOSEARCHSTORE", "bigd", "big", "FROMLONLAT", "0", "0", "BYRADIUS", "20", "km", "STOREDIST"),
        ("ZRANGE", "bigd", "0", "-1"), ("ZCARD", "bigd"), ("ZCOUNT", "bigd", "5.56121025404", "5.56121025405"),
        ("GEODIST", "big", "p0_0", "p39_39", "km"), ("GEODIST", "big", "p0_0", "p0_1"),
        ("GEOHASH", "big", "p0_0", "p39_39", "p20_20"),
        ("GEOPOS", "big", "p0_0", "p39_39", "p20_20"),
    ]
)

SCENARIOS["geo_poles_and_antimeridian"] = [
    ("GEOADD", "w", "179.99", "0", "e1", "-179.99", "0", "w1", "179.5", "1", "e2", "-179.5", "-1", "w2"),
    ("GEOADD", "w", "0", "85", "n1", "90", "84.9", "n2", "-90", "84.5", "n3", "180", "85", "n4"),
    ("GEOADD", "w", "0", "-85", "s1", "45", "-84.9", "s2", "10", "-70", "s3"),
    ("GEOSEARCH", "w", "FROMLONLAT", "180", "0", "BYRADIUS", "100", "km", "ASC", "WITHDIST"),
    ("GEOSEARCH", "w", "FROMLONLAT", "-180", "0", "BYRADIUS", "100", "km", "ASC", "WITHDIST"),
    ("GEOSEARCH", "w", "FROMLONLAT", "179.9", "0.1", "BYBOX", "200", "300", "km", "ASC", "WITHDIST"),
    ("GEOSEARCH", "w", "FROMLONLAT", "0", "85", "BYRADIUS", "2000", "km", "ASC", "WITHDIST"),
    ("GEOSEARCH", "w", "FROMLONLAT", "0", "-85", "BYRADIUS", "2000", "km", "ASC", "WITHDIST"),
    ("GEOSEARCH", "w", "FROMLONLAT", "0", "-80", "BYBOX", "3000", "3000", "km", "ASC", "WITHDIST"),
    ("GEOSEARCH", "w", "FROMLONLAT", "0", "80", "BYBOX", "3000", "3000", "km", "ASC", "WITHDIST"),
    ("GEOSEARCH", "w", "FROMMEMBER", "n1", "BYRADIUS", "500", "km", "ASC", "WITHCOORD"),
    ("GEOSEARCH", "w", "FROMLONLAT", "0", "0", "BYRADIUS", "25000", "km", "ASC", "WITHDIST"),
    ("GEOPOS", "w", "e1", "w1", "n1", "n4", "s1"), ("GEOHASH", "w", "e1", "w1", "n1", "n4", "s1"),
    ("GEODIST", "w", "e1", "w1"), ("GEODIST", "w", "n1", "n2", "mi"),
    ("GEORADIUS", "w", "180", "85.05112878", "1000", "km", "WITHDIST", "ASC"),
    ("GEORADIUS", "w", "-180", "-85.05112878", "1000", "km", "WITHDIST", "ASC"),
]

SCENARIOS["geo_duplicates_unordered"] = [
    ("GEOADD", "d", "1", "1", "a", "1", "1", "b", "1", "1", "c", "2", "2", "d"),
    S("GEOSEARCH", "d", "FROMLONLAT", "1", "1", "BYRADIUS", "500", "km"),
    ("GEOSEARCH", "d", "FROMLONLAT", "1", "1", "BYRADIUS", "500", "km", "ASC", "WITHDIST"),
    ("GEOSEARCH", "d", "FROMLONLAT", "1", "1", "BYRADIUS", "500", "km", "DESC", "WITHDIST"),
]


def _random_searches(seed, n_points, n_searches, lon0, lat0, spread):
    # Seeded: the same stream every run. Unsorted searches check the box scan order too.
    import random

    rnd = random.Random(seed)
    steps = []
    args = []
    for i in range(n_points):
        lon = max(-180.0, min(180.0, lon0 + rnd.uniform(-spread, spread)))
        lat = max(-85.0, min(85.0, lat0 + rnd.uniform(-spread, spread)))
        args += ["%.6f" % lon, "%.6f" % lat, "m%d" % i]
    steps.append(("GEOADD", "rnd", *args))
    units = ["m", "km", "mi", "ft"]
    per_unit = {"m": 1.0, "km": 1000.0, "mi": 1609.34, "ft": 0.3048}
    for _ in range(n_searches):
        lon = lon0 + rnd.uniform(-spread, spread)
        lat = max(-85.0, min(85.0, lat0 + rnd.uniform(-spread, spread)))
        u = rnd.choice(units)
        size = rnd.choice([1e3, 2e4, 1e5, 5e5, 2e6]) * rnd.uniform(0.2, 1.0) / per_unit[u]
        src = ["FROMLONLAT", "%.5f" % lon, "%.5f" % lat]
        if rnd.random() < 0.3:
            src = ["FROMMEMBER", "m%d" % rnd.randrange(n_points)]
        if rnd.random() < 0.5:
            by = ["BYRADIUS", "%.3f" % size, u]
        else:
            by = ["BYBOX", "%.3f" % size, "%.3f" % (size * rnd.uniform(0.3, 2.0)), u]
        opts = ["WITHDIST", "WITHCOORD", "WITHHASH"]
        r = rnd.random()
        if r < 0.3:
            opts += ["ASC"]
        elif r < 0.5:
            opts += ["DESC", "COUNT", str(rnd.randrange(1, 30))]
        elif r < 0.6:
            opts += ["COUNT", str(rnd.randrange(1, 30)), "ANY"]
        steps.append(("GEOSEARCH", "rnd", *src, *by, *opts))
    return steps


SCENARIOS["geo_random_paris"] = _random_searches(7, 400, 60, 2.35, 48.85, 3.0)
SCENARIOS["geo_random_world"] = _random_searches(11, 300, 40, 0.0, 0.0, 180.0)
SCENARIOS["geo_random_north"] = _random_searches(13, 200, 30, -150.0, 75.0, 12.0)

SCENARIOS["geo_extreme_arguments"] = SICILY + [
    ("GEOADD", "Sicily", "1", "1", "dup", "2", "2", "dup"), ("GEOPOS", "Sicily", "dup"),
    ("GEOADD", "Sicily", "-0", "0", "z0"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "inf", "km", "ASC", "WITHDIST"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1e308", "m", "ASC"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "inf", "inf", "km", "ASC"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "1e308", "10", "km", "ASC"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "-0", "km"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "nan", "km"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "0x10", "km"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "180", "85.05112878", "BYRADIUS", "10000", "km", "ASC", "WITHDIST"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "-180", "-85.05112878", "BYRADIUS", "20000", "km", "ASC"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "180", "85.05112879", "BYRADIUS", "1", "km"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "-180.0000001", "0", "BYRADIUS", "1", "km"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "1e400", "0", "BYRADIUS", "1", "km"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "-inf", "inf", "BYRADIUS", "1", "km"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", " 15", "37", "BYRADIUS", "1", "km"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "COUNT", "2", "COUNT", "1"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "ASC", "DESC", "any",
     "count", "5"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "WITHDIST", "WITHDIST"),
    ("GEOSEARCHSTORE", "d", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "STOREDIST",
     "STOREDIST"), ("ZRANGE", "d", "0", "-1"),
    ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "a", "STORE", "b"), ("EXISTS", "a", "b"),
    ("MULTI",), ("GEOSEARCHSTORE", "m", "Sicily", "FROMMEMBER", "Catania", "BYRADIUS", "100", "km"),
    ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "m2"), ("GEODIST", "m", "Catania", "Agr"),
    ("EXEC",),
]


def _ties():
    # Equal distances: the order of the first COUNT results is the partial quicksort's.
    steps = []
    args = []
    for i in range(60):
        k = i % 4
        args += ["%.6f" % (1 + k * 0.01), "1.000000", "t%02d" % i]
    steps.append(("GEOADD", "ties", *args))
    for count in ["1", "3", "6", "7", "8", "13", "41", "59"]:
        for order in ["ASC", "DESC"]:
            steps.append(("GEOSEARCH", "ties", "FROMLONLAT", "1", "1", "BYRADIUS", "500", "km", order,
                          "COUNT", count, "WITHDIST"))
    steps.append(("GEORADIUS", "ties", "1.015", "1", "500", "km", "COUNT", "20"))
    steps.append(("GEORADIUS", "ties", "1.015", "1", "500", "km", "COUNT", "45", "DESC"))
    return steps


SCENARIOS["geo_equal_distances_count"] = _ties()
