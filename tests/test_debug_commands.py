"""DEBUG/LOLWUT/MODULE/MEMORY behaviour that a byte-for-byte scenario cannot check: random
drawings compared by shape, settings that need their own server, figures that move."""

import re

import pytest

from harness import darner_is_redis
from resp_reader import RawConn


def _lolwut(port, *args):
    c = RawConn("127.0.0.1", port)
    try:
        r = c.call("LOLWUT", *args)
    finally:
        c.close()
    return r.raw


def _shape(raw):
    # $<len>\r\n<text>\r\n: the text's lines, each as its length in characters; the last
    # line (the version) without its version number.
    text = raw.split(b"\r\n", 1)[1][:-2].decode()
    lines = text.split("\n")
    assert lines[-1] == ""
    art, caption = lines[:-2], lines[-2]
    return [len(l) for l in art], caption.rsplit(" ", 1)[0]


@pytest.mark.parametrize("args", [(), ("40",), ("1", "1", "1"), ("3", "2", "7"), ("100", "20", "5")])
def test_lolwut_version5_has_redis_shape(darner, redis_ref, args):
    d = _lolwut(darner.port, "VERSION", "5", *args)
    f = _lolwut(redis_ref.port, "VERSION", "5", *args)
    assert _shape(d) == _shape(f)
    assert d.rstrip().endswith(b"Redis ver. 7.4.0") or darner_is_redis()


# Redis 6's four grays: each pixel is a space between its escape and a reset.
_GRAYS = {b"0;30;40m", b"0;90;100m", b"0;37;47m", b"0;97;107m"}
_CELL = re.compile(rb"\x1b\[([0-9;]+m) \x1b\[0m")


def _skyline(raw):
    # The art's lines as their lists of colour escapes (each line nothing but cells), and the
    # two caption lines, the version number cut off the last.
    text = raw.split(b"\r\n", 1)[1][:-2]
    lines = text.split(b"\n")
    assert lines[-1] == b""
    art, captions = lines[:-3], lines[-3:-1]
    cells = []
    for line in art:
        assert _CELL.sub(b"", line) == b"", line
        cells.append(_CELL.findall(line))
    return cells, [captions[0], captions[1].rsplit(b" ", 1)[0]]


@pytest.mark.parametrize("args", [(), ("40",), ("1", "1"), ("0", "-3"), ("7", "3", "9", "x"),
                                  ("1001", "2"), ("3", "1001"), ("120", "45")])
def test_lolwut_version6_has_redis_shape(darner, redis_ref, args):
    raw = _lolwut(darner.port, "VERSION", "6", *args)
    d_cells, d_captions = _skyline(raw)
    f_cells, f_captions = _skyline(_lolwut(redis_ref.port, "VERSION", "6", *args))
    assert [len(l) for l in d_cells] == [len(l) for l in f_cells]
    assert d_captions == f_captions
    # Every building is lower than the canvas: the top row is all sky (white) in both.
    assert d_cells[0] == f_cells[0]
    assert set(c for l in d_cells for c in l) <= _GRAYS
    assert raw.rstrip().endswith(b"Redis ver. 7.4.0") or darner_is_redis()


@pytest.mark.parametrize("args", [("x",), ("5", "y"), ("1.5",), ("5", "99999999999999999999")])
def test_lolwut_version6_bad_arguments_answer_redis_errors(darner, redis_ref, args):
    d = _lolwut(darner.port, "VERSION", "6", *args)
    assert d == _lolwut(redis_ref.port, "VERSION", "6", *args)
    assert d.startswith(b"-ERR ")


def test_lolwut_version_line(darner):
    raw = _lolwut(darner.port)
    if not darner_is_redis():
        assert raw == b"$17\r\nRedis ver. 7.4.0\n\r\n"


def test_module_load_refused_with_loading_error_when_enabled(darner_factory):
    srv = darner_factory("--enable-module-command", "yes")
    c = srv.raw()
    assert c.call("MODULE", "LOAD", "/nonexistent/mod.so").raw == \
        b"-ERR Error loading the extension. Please check the server logs.\r\n"
    assert c.call("MODULE", "LOADEX", "/nonexistent/mod.so", "CONFIG", "a").raw == \
        b"-ERR Error loading the extension. Please check the server logs.\r\n"
    assert c.call("MODULE", "UNLOAD", "m").raw == \
        b"-ERR Error unloading module: no such module with that name\r\n"
    assert c.call("MODULE", "LIST").raw == b"*0\r\n"
    assert c.call("CONFIG", "GET", "enable-module-command").raw == \
        b"*2\r\n$21\r\nenable-module-command\r\n$3\r\nyes\r\n"


def test_memory_usage_grows_with_the_value(r):
    r.set("small", "x")
    r.set("big", "x" * 10000)
    r.rpush("list", *["e%d" % i for i in range(5000)])
    small, big, lst = (r.memory_usage(k) for k in ("small", "big", "list"))
    assert 0 < small < 100
    assert 10000 < big < 11000
    assert lst > 5000 * 5
    assert r.memory_usage("missing") is None


def test_memory_stats_counts_keys_per_db(r):
    if darner_is_redis():
        pytest.skip("darner's own figures")
    r.set("a", "1")
    r.set("b", "2")
    r.execute_command("SELECT", "3")
    r.set("c", "3")
    r.execute_command("SELECT", "0")
    stats = r.execute_command("MEMORY", "STATS")
    if not isinstance(stats, dict):
        stats = dict(zip(stats[::2], stats[1::2]))
    m = {(k.decode() if isinstance(k, bytes) else k): v for k, v in stats.items()}
    assert m["keys.count"] == 3
    assert "db.0" in m and "db.3" in m and "db.1" not in m
    assert m["total.allocated"] > 0 and m["peak.allocated"] >= m["total.allocated"]
